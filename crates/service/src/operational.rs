//! Operational-webhook endpoints (Svix's `operational-webhook/endpoint`): endpoints of the
//! tenant's hidden operational application (see `store::operational`), held to the same rules
//! as any endpoint (URL, SSRF guard, uid, headers, metadata, throttle), except that their
//! event-type filter names operational event types.

use domain::ids::TenantId;
use domain::operational::EVENT_TYPES;
use domain::signing::EndpointKey;
use store::entities::endpoint;
use store::{ListParams, NewEndpoint, Page, Store, StoreError};

use crate::endpoints::{self, Actor};
use crate::{Config, FieldError, Result, ServiceError};

/// Whether `ep` is one of its tenant's operational endpoints.
pub async fn is_operational(store: &Store, ep: &endpoint::Model) -> Result<bool> {
    Ok(store
        .operational_app(ep.tenant_id)
        .await?
        .is_some_and(|app| app.id == ep.app_id))
}

/// An operational endpoint's filter may only name operational event types.
pub fn event_types(types: &[String]) -> Result<()> {
    let unknown: Vec<&str> = types
        .iter()
        .map(String::as_str)
        .filter(|t| !EVENT_TYPES.contains(t))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ServiceError::Invalid(vec![FieldError::new(
        "eventTypes",
        format!(
            "these are not operational event types: {}; they are {}",
            unknown.join(", "),
            EVENT_TYPES.join(", ")
        ),
    )]))
}

pub async fn list(
    store: &Store,
    tenant: TenantId,
    params: &ListParams,
) -> Result<Page<endpoint::Model>> {
    match store.operational_app(tenant).await? {
        Some(app) => Ok(store.list_endpoints(tenant, app.id, params).await?),
        None => Ok(Page::empty()),
    }
}

/// One of the tenant's operational endpoints, by id or uid.
pub async fn get(store: &Store, tenant: TenantId, id_or_uid: &str) -> Result<endpoint::Model> {
    let not_found = || ServiceError::from(StoreError::not_found("endpoint"));
    let app = store.operational_app(tenant).await?.ok_or_else(not_found)?;
    Ok(store.get_endpoint(tenant, app.id, id_or_uid).await?)
}

pub async fn create(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    new: NewEndpoint,
    secret: EndpointKey,
) -> Result<endpoint::Model> {
    // The rules first, so that a refused endpoint does not make the application.
    let new = endpoints::checked(new)?;
    event_types(new.filter_types.as_deref().unwrap_or_default())?;
    let app = store.operational_app_or_create(tenant).await?;
    endpoints::create(store, cfg, tenant, Actor::Tenant, &app, new, secret).await
}
