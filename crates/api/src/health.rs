use actix_web::http::StatusCode;
use actix_web::{HttpResponse, web};
use serde::Serialize;
use store::Store;

use crate::ApiError;

#[derive(Serialize, utoipa::ToSchema)]
pub struct HealthOut {
    /// `ok`.
    pub status: String,
    /// `ok` when the database answered.
    pub database: String,
    pub version: String,
}

/// Liveness and database reachability: 200 when the database answers, 503 when it does not.
#[utoipa::path(get, path = "/api/v1/health", tag = "Health",
    responses((status = 200, body = HealthOut), (status = 503, body = crate::error::HttpErrorOut)))]
pub(crate) async fn health(store: web::Data<Store>) -> Result<HttpResponse, ApiError> {
    match store.ping().await {
        Ok(()) => Ok(HttpResponse::Ok().json(HealthOut {
            status: "ok".into(),
            database: "ok".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        })),
        Err(e) => {
            tracing::warn!(error = %e, "health check: database unreachable");
            Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                "the database did not answer",
            ))
        }
    }
}

/// Load balancers configured for Svix probe with HEAD: the same check, headers only.
#[utoipa::path(head, path = "/api/v1/health", tag = "Health",
    responses((status = 200), (status = 503)))]
pub(crate) async fn health_head(store: web::Data<Store>) -> Result<HttpResponse, ApiError> {
    health(store).await
}

/// Liveness only (Svix's `/health/ping`): 204 while the process serves requests, without
/// touching the database.
#[utoipa::path(get, path = "/api/v1/health/ping", tag = "Health", responses((status = 204)))]
pub(crate) async fn ping() -> HttpResponse {
    HttpResponse::NoContent().finish()
}

/// `HEAD /api/v1/health/ping`.
#[utoipa::path(head, path = "/api/v1/health/ping", tag = "Health", responses((status = 204)))]
pub(crate) async fn ping_head() -> HttpResponse {
    ping().await
}
