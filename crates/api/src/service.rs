//! Operations shared by the REST API and the dashboard: the checks and side effects of
//! creating endpoints, sending messages and starting recoveries, independent of HTTP.

use std::collections::BTreeMap;

use domain::Timestamp;
use domain::endpoint_url::EndpointUrl;
use domain::ids::{EndpointId, TenantId};
use domain::signing::SigningSecret;
use serde_json::json;
use store::entities::{application, endpoint, job};
use store::{NewEndpoint, Store, retry_policy_of};

use crate::{ApiConfig, ApiError, ssrf, validate};

/// Checks an endpoint URL: syntax, scheme policy, and where it resolves (SSRF guard).
pub async fn check_url(cfg: &ApiConfig, raw: &str) -> Result<String, ApiError> {
    let url = EndpointUrl::parse(raw.trim(), cfg.https_only)
        .map_err(|e| ApiError::field("url", e.to_string()))?;
    ssrf::resolve_and_check(&url, &cfg.allow_networks)
        .await
        .map_err(|e| ApiError::field("url", e.to_string()))?;
    Ok(url.as_str().to_owned())
}

/// A secret given by the tenant, or a new one.
pub fn secret_or_new(given: Option<&str>, field: &str) -> Result<SigningSecret, ApiError> {
    match given {
        Some(s) => SigningSecret::parse(s).map_err(|e| ApiError::field(field, e.to_string())),
        None => Ok(SigningSecret::generate(&mut rand::rng())),
    }
}

pub async fn create_endpoint(
    store: &Store,
    cfg: &ApiConfig,
    tenant: TenantId,
    app: &application::Model,
    mut new: NewEndpoint,
    secret: SigningSecret,
) -> Result<endpoint::Model, ApiError> {
    new.url = check_url(cfg, &new.url).await?;
    if let Some(uid) = &new.uid {
        validate::uid("uid", uid, EndpointId::PREFIX)?;
    }
    Ok(store
        .create_endpoint(tenant, app, new, &secret.to_string())
        .await?)
}

pub async fn update_endpoint(
    store: &Store,
    cfg: &ApiConfig,
    tenant: TenantId,
    current: endpoint::Model,
    mut new: NewEndpoint,
) -> Result<endpoint::Model, ApiError> {
    if new.url != current.url {
        new.url = check_url(cfg, &new.url).await?;
    }
    if let Some(uid) = &new.uid {
        validate::uid("uid", uid, EndpointId::PREFIX)?;
    }
    Ok(store.update_endpoint(tenant, current, new).await?)
}

/// The endpoint as a `NewEndpoint`, for read-modify-write updates.
pub fn endpoint_as_new(ep: &endpoint::Model) -> Result<NewEndpoint, ApiError> {
    let list = |col: &str, t: &Option<String>| -> Result<Option<Vec<String>>, ApiError> {
        Ok(t.as_deref().map(|t| store::from_json(col, t)).transpose()?)
    };
    let map = |col: &str, t: &str| -> Result<BTreeMap<String, String>, ApiError> {
        Ok(store::from_json(col, t)?)
    };
    Ok(NewEndpoint {
        url: ep.url.clone(),
        uid: ep.uid.clone(),
        description: ep.description.clone(),
        version: ep.version,
        filter_types: list("filter_types", &ep.filter_types)?,
        channels: list("channels", &ep.channels)?,
        headers: map("headers", &ep.headers)?,
        metadata: map("metadata", &ep.metadata)?,
        disabled: ep.disabled,
        throttle_rate: ep.throttle_rate,
        max_concurrency: ep.max_concurrency,
        timeout_ms: ep.timeout_ms,
        retry_policy: ep.retry_policy.clone(),
        status_overrides: ep.status_overrides.clone(),
    })
}

/// Sends `msg` to `ep` again now, as a manual attempt.
pub async fn resend(
    store: &Store,
    tenant: TenantId,
    msg: &store::entities::message::Model,
    ep: &endpoint::Model,
) -> Result<(), ApiError> {
    store
        .resend(tenant, msg, ep, retry_policy_of(ep).ttl())
        .await?;
    Ok(())
}

/// Starts a durable background job over one endpoint: `endpoint.recover` (failed deliveries
/// since a date) or `endpoint.replay` (messages it never got).
pub async fn start_endpoint_job(
    store: &Store,
    tenant: TenantId,
    ep: &endpoint::Model,
    kind: &'static str,
    since: Timestamp,
    until: Option<Timestamp>,
) -> Result<job::Model, ApiError> {
    if let Some(until) = until
        && until <= since
    {
        return Err(ApiError::field("until", "until must be later than since"));
    }
    store.enabled_endpoint(tenant, &ep.id).await?;
    let params = json!({
        "endpointId": ep.id,
        "appId": ep.app_id,
        "since": since.as_millis(),
        "until": until.map(|u| u.as_millis()),
    });
    Ok(store.create_job(tenant, kind, &params).await?)
}
