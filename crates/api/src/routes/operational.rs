//! Svix's operational-webhook endpoints (`/api/v1/operational-webhook/endpoint`): where a
//! tenant hears about its own endpoints and messages (`endpoint.disabled`,
//! `message.attempt.exhausted`, …). Thin over `service::operational`; the secret and header
//! operations are those of any endpoint.

use std::collections::BTreeMap;

use actix_web::{HttpResponse, web};
use domain::ids::EndpointId;
use serde::{Deserialize, Serialize};
use service::{endpoints as eps, operational as ops, rules};
use store::entities::endpoint;
use store::{NewEndpoint, Store, StoreError};
use utoipa::ToSchema;

use crate::dto::{
    EndpointHeadersIn, EndpointHeadersOut, EndpointSecretOut, EndpointSecretRotateIn, ListQuery,
    ListResponse, time,
};
use crate::extract::{JsonBody, Tenant};
use crate::routes::endpoints::{grace_period, headers_of, save_headers};
use crate::{ApiConfig, ApiError};

/// An operational-webhook endpoint to create or replace (Svix's `OperationalWebhookEndpointIn`;
/// SDK 1.x names the filter `filterTypes` and may send `rateLimit`, 2.x `eventTypes` and
/// `throttleRate`: both are accepted).
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationalEndpointIn {
    #[schema(min_length = 1, max_length = 2048)]
    pub url: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Most events per second sent to it.
    #[schema(minimum = 1, maximum = 65535)]
    pub throttle_rate: Option<u32>,
    /// The same as `throttleRate` (Svix's older name).
    #[schema(minimum = 1, maximum = 65535)]
    pub rate_limit: Option<u32>,
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub uid: Option<String>,
    pub disabled: Option<bool>,
    /// Only these operational event types are sent; absent or null means all.
    pub event_types: Option<Vec<String>>,
    /// The same as `eventTypes` (Svix's older name).
    pub filter_types: Option<Vec<String>>,
    /// A signing secret to use (`whsec_` + base64); generated when absent.
    pub secret: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    /// Custom headers sent with every request.
    pub headers: Option<BTreeMap<String, String>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperationalEndpointOut {
    pub id: String,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub throttle_rate: Option<u32>,
    /// The same as `throttleRate`, for Svix's older SDKs.
    pub rate_limit: Option<u32>,
    pub disabled: bool,
    /// hookd: why it is disabled, when it is.
    pub disabled_reason: Option<String>,
    pub event_types: Option<Vec<String>>,
    /// The same as `eventTypes`, for Svix's older SDKs.
    pub filter_types: Option<Vec<String>>,
    pub metadata: BTreeMap<String, String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

fn out(m: endpoint::Model) -> Result<OperationalEndpointOut, ApiError> {
    let types = m.filter_types()?;
    let rate = m.throttle_rate.map(|r| r as u32);
    Ok(OperationalEndpointOut {
        metadata: m.metadata()?,
        event_types: types.clone(),
        filter_types: types,
        throttle_rate: rate,
        rate_limit: rate,
        id: m.id.to_string(),
        uid: m.uid,
        url: m.url,
        description: m.description,
        disabled: m.disabled,
        disabled_reason: m.disabled_reason,
        created_at: time(m.created_at),
        updated_at: time(m.updated_at),
    })
}

/// The endpoint `body` describes, or every rule it breaks. What it cannot set (channels,
/// retry policy, …) stays as in `keep` (the endpoint replaced), else hookd's defaults.
fn from_in(
    body: OperationalEndpointIn,
    keep: Option<NewEndpoint>,
) -> Result<NewEndpoint, ApiError> {
    let keep = keep.unwrap_or_default();
    Ok(eps::checked(NewEndpoint {
        url: body.url,
        uid: body.uid,
        description: body.description.unwrap_or_default(),
        filter_types: body
            .event_types
            .or(body.filter_types)
            .filter(|t| !t.is_empty()),
        headers: match body.headers {
            Some(h) => h,
            None => keep.headers.clone(),
        },
        metadata: body.metadata.unwrap_or_default(),
        disabled: body.disabled.unwrap_or(false),
        throttle_rate: rules::throttle_rate(body.throttle_rate.or(body.rate_limit))?,
        ..keep
    })?)
}

#[utoipa::path(get, path = "/api/v1/operational-webhook/endpoint", tag = "Webhook Endpoint",
    params(ListQuery),
    responses((status = 200, body = ListResponse<OperationalEndpointOut>)),
    security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = ops::list(&store, t, &q.params()?).await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, out)?))
}

#[utoipa::path(post, path = "/api/v1/operational-webhook/endpoint", tag = "Webhook Endpoint",
    request_body = OperationalEndpointIn,
    responses((status = 201, body = OperationalEndpointOut), (status = 409, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<OperationalEndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let secret = eps::secret_or_new(body.secret.as_deref(), None, "secret")?;
    let new = from_in(body, None)?;
    let ep = ops::create(&store, &cfg.service, t, new, secret).await?;
    Ok(HttpResponse::Created().json(out(ep)?))
}

#[utoipa::path(get, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = OperationalEndpointOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    Ok(HttpResponse::Ok().json(out(ep)?))
}

/// Replaces the endpoint; creates it (with `endpoint_id` as its uid) when none matches.
#[utoipa::path(put, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path, description = "id or uid")), request_body = OperationalEndpointIn,
    responses((status = 200, body = OperationalEndpointOut), (status = 201, body = OperationalEndpointOut),
        (status = 404, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<OperationalEndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let id = path.into_inner();
    match ops::get(&store, t, &id).await {
        Ok(current) => {
            if body.secret.is_some() {
                return Err(ApiError::field(
                    "secret",
                    "use POST …/secret/rotate to change the secret",
                ));
            }
            let new = from_in(body, Some(eps::as_new(&store, &current)?))?;
            let ep = eps::update(&store, &cfg.service, t, eps::Actor::Tenant, current, new).await?;
            Ok(HttpResponse::Ok().json(out(ep)?))
        }
        Err(service::ServiceError::Store(StoreError::NotFound { .. }))
            if !id.starts_with(EndpointId::PREFIX) =>
        {
            rules::uid("uid", &id, EndpointId::PREFIX)
                .map_err(|_| ApiError::not_found("endpoint"))?;
            let secret = eps::secret_or_new(body.secret.as_deref(), None, "secret")?;
            let mut new = from_in(body, None)?;
            new.uid = Some(id);
            let ep = ops::create(&store, &cfg.service, t, new, secret).await?;
            Ok(HttpResponse::Created().json(out(ep)?))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(delete, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    store.delete_endpoint(t, &ep).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}/secret", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointSecretOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_secret(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    crate::routes::endpoints::secret_of(&store, t, &ep).await
}

/// Makes a new secret current; the previous one keeps signing for the grace period (24 h).
/// Answers 204, as Svix's operational-webhook API does.
#[utoipa::path(post, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}/secret/rotate", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path)), request_body = EndpointSecretRotateIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn rotate_secret(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<EndpointSecretRotateIn>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    let grace = grace_period(body.grace_period_seconds)?;
    eps::rotate_key(&store, t, &ep, body.key.as_deref(), None, grace).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}/headers", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointHeadersOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_headers(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    Ok(HttpResponse::Ok().json(EndpointHeadersOut {
        headers: headers_of(&store, &ep)?,
        sensitive: vec![],
    }))
}

#[utoipa::path(put, path = "/api/v1/operational-webhook/endpoint/{endpoint_id}/headers", tag = "Webhook Endpoint",
    params(("endpoint_id" = String, Path)), request_body = EndpointHeadersIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_headers(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<EndpointHeadersIn>,
) -> Result<HttpResponse, ApiError> {
    let ep = ops::get(&store, t, &path).await?;
    save_headers(&store, &cfg, t, eps::Actor::Tenant, ep, body.headers).await
}
