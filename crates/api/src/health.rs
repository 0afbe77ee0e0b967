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
    /// Whether the database takes writes: `ok`, or why not: `full`, `read_only`,
    /// `unavailable` (judged from the writes this process tried, and a test write every
    /// second while they fail).
    pub storage: String,
    /// While `storage` is not `ok`: the cause in plain words.
    #[serde(rename = "storageCause", skip_serializing_if = "Option::is_none")]
    pub storage_cause: Option<String>,
    /// While `storage` is not `ok`: since when (RFC 3339).
    #[serde(rename = "storageSince", skip_serializing_if = "Option::is_none")]
    pub storage_since: Option<String>,
    pub version: String,
}

impl HealthOut {
    fn of(store: &Store) -> HealthOut {
        let state = store.storage().state();
        let (cause, since) = match &state {
            store::StorageState::Writable => (None, None),
            store::StorageState::Degraded(d) => (
                Some(d.plain.clone()),
                Some(domain::time::rfc3339::format(d.since)),
            ),
        };
        HealthOut {
            status: "ok".into(),
            database: "ok".into(),
            storage: state.name().into(),
            storage_cause: cause,
            storage_since: since,
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// Liveness and database reachability: 200 when the database answers (also while it cannot
/// take writes: `storage` says so; see `/health/ready`), 503 when it does not answer.
#[utoipa::path(get, path = "/api/v1/health", tag = "Health",
    responses((status = 200, body = HealthOut), (status = 503, body = crate::error::HttpErrorOut)))]
pub(crate) async fn health(store: web::Data<Store>) -> Result<HttpResponse, ApiError> {
    match store.ping().await {
        Ok(()) => Ok(HttpResponse::Ok().json(HealthOut::of(&store))),
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

/// Readiness: 200 with the same body as `/health` while the database answers and takes
/// writes; 503 with `Retry-After` and the storage code (`storage_full`, `storage_read_only`,
/// `storage_unavailable`) while it cannot, so a load balancer sends traffic elsewhere.
#[utoipa::path(get, path = "/api/v1/health/ready", tag = "Health",
    responses((status = 200, body = HealthOut), (status = 503, body = crate::error::HttpErrorOut)))]
pub(crate) async fn ready(store: web::Data<Store>) -> Result<HttpResponse, ApiError> {
    let resp = health(store.clone()).await?;
    match store.storage().state() {
        store::StorageState::Writable => Ok(resp),
        store::StorageState::Degraded(d) => {
            // Already noted: no FaultSeen, so the state's `since` and cause stay as they are.
            Err(ApiError {
                fault: None,
                ..ApiError::storage(d.fault, String::new())
            })
        }
    }
}

/// `HEAD /api/v1/health/ready`.
#[utoipa::path(head, path = "/api/v1/health/ready", tag = "Health",
    responses((status = 200), (status = 503)))]
pub(crate) async fn ready_head(store: web::Data<Store>) -> Result<HttpResponse, ApiError> {
    ready(store).await
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
