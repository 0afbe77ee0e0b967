//! hookd extension: the tenant's retention (how long payloads and message metadata are kept),
//! which its applications may override (`payloadRetentionDays`, `metadataRetentionDays`).

use actix_web::{HttpResponse, web};
use domain::duration::format_duration;
use domain::retention::{RetentionDays, max_days};
use serde::{Deserialize, Serialize};
use store::Store;
use utoipa::ToSchema;

use crate::extract::{JsonBody, Tenant};
use crate::{ApiConfig, ApiError};
use service::rules;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionIn {
    /// Days payloads and attempt response bodies are kept; null: the server's default.
    #[schema(minimum = 1)]
    #[serde(default)]
    pub payload_retention_days: Option<u32>,
    /// Days messages, their deliveries and attempts are kept; null: the server's default.
    #[schema(minimum = 1)]
    #[serde(default)]
    pub metadata_retention_days: Option<u32>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionOut {
    /// The tenant's choices (null: the server's default).
    pub payload_retention_days: Option<u32>,
    pub metadata_retention_days: Option<u32>,
    /// What applies to applications that choose nothing themselves (e.g. `30d`).
    pub payload_retention: String,
    pub metadata_retention: String,
    /// The longest a tenant or application may choose.
    pub max_retention_days: u32,
}

fn out(days: RetentionDays, cfg: &ApiConfig) -> RetentionOut {
    let r = cfg.service.retention.choose(&[days]);
    RetentionOut {
        payload_retention_days: days.payload,
        metadata_retention_days: days.metadata,
        payload_retention: format_duration(r.payload),
        metadata_retention: format_duration(r.metadata),
        max_retention_days: max_days(cfg.service.max_retention),
    }
}

#[utoipa::path(get, path = "/api/v1/retention", tag = "Retention",
    responses((status = 200, body = RetentionOut)), security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
) -> Result<HttpResponse, ApiError> {
    let tenant = store.get_tenant(t).await?;
    Ok(HttpResponse::Ok().json(out(tenant.retention(), &cfg)))
}

/// Sets the tenant's retention; the next prune (within `prune_interval`) applies it to
/// messages already stored too.
#[utoipa::path(put, path = "/api/v1/retention", tag = "Retention", request_body = RetentionIn,
    responses((status = 200, body = RetentionOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn put(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<RetentionIn>,
) -> Result<HttpResponse, ApiError> {
    let days = rules::retention(
        RetentionDays {
            payload: body.payload_retention_days,
            metadata: body.metadata_retention_days,
        },
        cfg.service.max_retention,
    )?;
    store.set_retention(t, days).await?;
    Ok(HttpResponse::Ok().json(out(days, &cfg)))
}
