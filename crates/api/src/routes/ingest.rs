//! Svix's Ingest API (`/ingest/api/v1/source…`) on hookd's inbound sources: the source
//! operations here; its endpoints are its application's (`extract::App` reads `{source_id}`),
//! served by the endpoint handlers (decision 89).

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use service::ingest::{IngestFields, IngestInfo};
use store::{Source, Store};
use utoipa::ToSchema;

use crate::dto::{ListQuery, ListResponse, Patch, time};
use crate::extract::{JsonBody, Tenant};
use crate::{ApiConfig, ApiError};

#[derive(Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestSourceIn {
    /// 2 to 256 characters.
    pub name: String,
    /// Unique among the tenant's sources; the source's name in hookd (its events' tag).
    pub uid: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    /// Svix's source type: `generic-webhook` (no verification), `stripe`, `github`, `shopify`,
    /// `slack`, `meta`, `zoom`, `tailscale`, `segment`, `docusign`, `airwallex`, `hubspot`, hookd's
    /// `twilio`, or `svix` and the types that sign as Svix does (`clerk`, `resend`, …); any
    /// other answers 422 naming it.
    #[serde(rename = "type")]
    pub kind: String,
    /// `{"secret": "…"}`: the sender's signing secret (none for `generic-webhook`); `meta`
    /// adds `verifyToken`, `tailscale` may add `timestampGraceSeconds`.
    #[schema(value_type = Option<Object>)]
    pub config: Option<serde_json::Value>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IngestSourceOut {
    pub id: String,
    pub uid: Option<String>,
    pub name: String,
    /// Where the sender posts: `{public_url}/in/{id}/{token}`.
    pub ingest_url: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// The configuration, without its secret (`{}`); absent for `generic-webhook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub config: Option<serde_json::Value>,
    pub metadata: BTreeMap<String, String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

fn out(cfg: &ApiConfig, (s, info): (Source, IngestInfo)) -> IngestSourceOut {
    IngestSourceOut {
        ingest_url: ingest_url(cfg, &s),
        id: s.row.id.to_string(),
        uid: info.uid,
        name: info.name,
        config: (info.kind != "generic-webhook").then(|| serde_json::json!({})),
        kind: info.kind,
        metadata: info.metadata,
        created_at: time(s.row.created_at),
        updated_at: time(info.updated_at),
    }
}

fn ingest_url(cfg: &ApiConfig, s: &Source) -> String {
    domain::inbound::source_url_with(&cfg.public_url, &s.row.id, s.url_token.as_deref())
}

/// Svix's `IngestSourcePatch`; `config` as at create, for the source's type, replaces its
/// verification (the secret is kept when it is left out).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestSourcePatchIn {
    #[schema(min_length = 2, max_length = 256)]
    pub name: Option<String>,
    /// Given, it must be the source's own (a uid is the source's name in hookd).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub uid: Patch<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    #[schema(value_type = Option<Object>)]
    pub config: Option<serde_json::Value>,
}

fn fields(body: IngestSourceIn) -> IngestFields {
    IngestFields {
        name: body.name,
        uid: body.uid,
        metadata: body.metadata,
        kind: body.kind,
        config: body.config,
    }
}

#[utoipa::path(get, path = "/ingest/api/v1/source", tag = "Ingest", params(ListQuery),
    responses((status = 200, body = ListResponse<IngestSourceOut>), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let params = q.params()?;
    let mut all = service::ingest::list(&store, t).await?;
    if !params.ascending {
        all.reverse();
    }
    let limit = match params.limit {
        0 => 50,
        n => n as usize,
    };
    // A tenant has few sources: paged in memory, by id.
    let start = match &params.iterator {
        Some(it) => all
            .iter()
            .position(|(s, _)| {
                let id = s.row.id.to_string();
                if params.ascending { id > *it } else { id < *it }
            })
            .unwrap_or(all.len()),
        None => 0,
    };
    let rest: Vec<_> = all.into_iter().skip(start).collect();
    let done = rest.len() <= limit;
    let page: Vec<IngestSourceOut> = rest.into_iter().take(limit).map(|s| out(&cfg, s)).collect();
    let iterator = page.last().map(|s| s.id.clone());
    Ok(HttpResponse::Ok().json(ListResponse {
        data: page,
        iterator,
        prev_iterator: None,
        done,
    }))
}

#[utoipa::path(post, path = "/ingest/api/v1/source", tag = "Ingest", request_body = IngestSourceIn,
    responses((status = 201, body = IngestSourceOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<IngestSourceIn>,
) -> Result<HttpResponse, ApiError> {
    let made = service::ingest::create(&store, t, fields(body)).await?;
    Ok(HttpResponse::Created().json(out(&cfg, made)))
}

#[utoipa::path(get, path = "/ingest/api/v1/source/{source_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = IngestSourceOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let found = service::ingest::find(&store, t, &path).await?;
    Ok(HttpResponse::Ok().json(out(&cfg, found)))
}

/// Replaces the source's type, configuration, name and metadata; a uid that names no source
/// creates one with it (201).
#[utoipa::path(put, path = "/ingest/api/v1/source/{source_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")), request_body = IngestSourceIn,
    responses((status = 200, body = IngestSourceOut), (status = 201, body = IngestSourceOut),
        (status = 404, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<IngestSourceIn>,
) -> Result<HttpResponse, ApiError> {
    match service::ingest::update(&store, t, &path, fields(body.clone())).await {
        Ok(changed) => Ok(HttpResponse::Ok().json(out(&cfg, changed))),
        Err(service::ServiceError::Store(store::StoreError::NotFound { .. }))
            if !path.starts_with(domain::ids::SourceId::PREFIX) =>
        {
            let mut new = fields(body);
            new.uid = Some(path.into_inner());
            let made = service::ingest::create(&store, t, new).await?;
            Ok(HttpResponse::Created().json(out(&cfg, made)))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(delete, path = "/ingest/api/v1/source/{source_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    service::ingest::delete(&store, t, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(patch, path = "/ingest/api/v1/source/{source_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")), request_body = IngestSourcePatchIn,
    responses((status = 200, body = IngestSourceOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn patch(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<IngestSourcePatchIn>,
) -> Result<HttpResponse, ApiError> {
    let patch = service::ingest::IngestPatch {
        name: body.name,
        uid: match body.uid {
            Patch::Absent => None,
            Patch::Null => Some(None),
            Patch::Value(uid) => Some(Some(uid)),
        },
        metadata: body.metadata,
        config: body.config,
    };
    let changed = service::ingest::patch(&store, t, &path, patch).await?;
    Ok(HttpResponse::Ok().json(out(&cfg, changed)))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RotateTokenOut {
    pub ingest_url: String,
}

/// Gives the source's URL a new token; the old URL answers 404 from now on (decision 92: Svix
/// keeps the old one for 48 hours, hookd does not, so a leaked URL is closed at once).
#[utoipa::path(post, path = "/ingest/api/v1/source/{source_id}/token/rotate", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = RotateTokenOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn rotate_token(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let (source, _) = service::ingest::rotate_token(&store, t, &path).await?;
    Ok(HttpResponse::Ok().json(RotateTokenOut {
        ingest_url: ingest_url(&cfg, &source),
    }))
}

// --- a source's endpoints: its application's, through the endpoint handlers -----------------

use crate::dto::{EndpointHeadersIn, EndpointIn, EndpointSecretRotateIn};
use crate::extract::{App, AppEndpoint, Caller};
use crate::routes::endpoints as eps;

#[utoipa::path(get, path = "/ingest/api/v1/source/{source_id}/endpoint", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ListQuery),
    responses((status = 200, body = ListResponse<crate::dto::EndpointOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list_endpoints(
    store: web::Data<Store>,
    app: App,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    eps::list(store, app, q).await
}

#[utoipa::path(post, path = "/ingest/api/v1/source/{source_id}/endpoint", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid")), request_body = EndpointIn,
    responses((status = 201, body = crate::dto::EndpointOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create_endpoint(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    app: App,
    caller: Caller,
    body: JsonBody<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    eps::create(store, cfg, app, caller, body).await
}

#[utoipa::path(get, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    responses((status = 200, body = crate::dto::EndpointOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_endpoint(ep: AppEndpoint) -> Result<HttpResponse, ApiError> {
    eps::get(ep).await
}

#[utoipa::path(put, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    request_body = EndpointIn,
    responses((status = 200, body = crate::dto::EndpointOut), (status = 201, body = crate::dto::EndpointOut),
        (status = 404, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert_endpoint(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    app: App,
    caller: Caller,
    path: web::Path<(String, String)>,
    body: JsonBody<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    eps::upsert(store, cfg, app, caller, path, body).await
}

#[utoipa::path(delete, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete_endpoint(
    store: web::Data<Store>,
    ep: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    eps::delete(store, ep).await
}

#[utoipa::path(get, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    responses((status = 200, body = crate::dto::EndpointSecretOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_endpoint_secret(
    store: web::Data<Store>,
    ep: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    eps::get_secret(store, ep).await
}

#[utoipa::path(post, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/secret/rotate", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    request_body = EndpointSecretRotateIn,
    responses((status = 200, body = crate::dto::EndpointSecretOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn rotate_endpoint_secret(
    store: web::Data<Store>,
    ep: AppEndpoint,
    body: JsonBody<EndpointSecretRotateIn>,
) -> Result<HttpResponse, ApiError> {
    eps::rotate_secret(store, ep, body).await
}

#[utoipa::path(get, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    responses((status = 200, body = crate::dto::EndpointHeadersOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_endpoint_headers(
    store: web::Data<Store>,
    ep: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    eps::get_headers(store, ep).await
}

#[utoipa::path(put, path = "/ingest/api/v1/source/{source_id}/endpoint/{endpoint_id}/headers", tag = "Ingest",
    params(("source_id" = String, Path, description = "id or uid"), ("endpoint_id" = String, Path)),
    request_body = EndpointHeadersIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_endpoint_headers(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    ep: AppEndpoint,
    caller: Caller,
    body: JsonBody<EndpointHeadersIn>,
) -> Result<HttpResponse, ApiError> {
    eps::set_headers(store, cfg, ep, caller, body).await
}
