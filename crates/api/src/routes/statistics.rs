//! Svix's statistics operations: each starts a background task (202) whose `data`, once
//! finished, holds the figures (`GET /api/v1/background-task/{id}`).

use actix_web::{HttpResponse, web};
use domain::jobs::{AppStatsParams, JobKind};
use serde::{Deserialize, Serialize};
use service::rules;
use store::Store;
use utoipa::ToSchema;

use crate::ApiError;
use crate::dto::time;
use crate::extract::{JsonBody, Tenant};

/// Most applications one request may name.
const MAX_APP_IDS: usize = 1000;

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppUsageStatsIn {
    #[schema(format = DateTime)]
    pub since: String,
    #[schema(format = DateTime)]
    pub until: String,
    /// Ids or uids of the applications to count (default: every one).
    pub app_ids: Option<Vec<String>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppUsageStatsOut {
    pub id: String,
    /// `running` until the figures are ready.
    pub status: String,
    /// `application.stats`.
    pub task: String,
    /// Ids or uids of the request that name no application; the others are counted.
    pub unresolved_app_ids: Vec<String>,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AggregateEventTypesOut {
    pub id: String,
    pub status: String,
    /// `event-type.aggregate`.
    pub task: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// Counts each application's message destinations (a message × an endpoint it went to)
/// created from `since` up to `until`.
#[utoipa::path(post, path = "/api/v1/stats/usage/app", tag = "Statistics", request_body = AppUsageStatsIn,
    responses((status = 202, body = AppUsageStatsOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn app_usage(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<AppUsageStatsIn>,
) -> Result<HttpResponse, ApiError> {
    let since = rules::timestamp("since", &body.since)?;
    let until = rules::timestamp("until", &body.until)?;
    if until <= since {
        return Err(ApiError::field("until", "until must be after since"));
    }
    if body
        .app_ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_APP_IDS)
    {
        return Err(ApiError::field(
            "appIds",
            format!("at most {MAX_APP_IDS} applications"),
        ));
    }
    let (apps, unresolved) = store
        .resolve_applications(t, body.app_ids.as_deref())
        .await?;
    if body.app_ids.is_some() && apps.is_empty() {
        return Err(ApiError::field(
            "appIds",
            "none of the given ids or uids names an application",
        ));
    }
    let params = AppStatsParams {
        since: since.as_millis(),
        until: until.as_millis(),
        app_ids: body
            .app_ids
            .is_some()
            .then(|| apps.iter().map(|a| a.id.to_string()).collect()),
    };
    let job = store
        .create_job(t, JobKind::ApplicationStats, &serde_json::json!(params))
        .await?;
    Ok(HttpResponse::Accepted().json(AppUsageStatsOut {
        id: job.id.to_string(),
        status: job.state.to_string(),
        task: job.kind.to_string(),
        unresolved_app_ids: unresolved,
        updated_at: time(job.updated_at),
    }))
}

/// Lists, for each application, the event types its endpoints subscribe to by name and
/// whether one of them takes every event type.
#[utoipa::path(put, path = "/api/v1/stats/usage/event-types", tag = "Statistics",
    responses((status = 202, body = AggregateEventTypesOut)),
    security(("bearer" = [])))]
pub async fn event_types(
    store: web::Data<Store>,
    Tenant(t): Tenant,
) -> Result<HttpResponse, ApiError> {
    let job = store
        .create_job(t, JobKind::EventTypeAggregate, &serde_json::json!({}))
        .await?;
    Ok(HttpResponse::Accepted().json(AggregateEventTypesOut {
        id: job.id.to_string(),
        status: job.state.to_string(),
        task: job.kind.to_string(),
        updated_at: time(job.updated_at),
    }))
}
