//! Svix's Ingest API on hookd's inbound sources (decision 89). A source made through it owns
//! an application of its own, made with it and deleted with it: the source forwards what it
//! verifies to that application, whose endpoints are the source's endpoints
//! (`/ingest/api/v1/source/{id}/endpoint…`). Svix's source types map onto hookd's schemes here,
//! in one table; a type with no published HMAC scheme is refused naming it.

use std::collections::BTreeMap;

use domain::Timestamp;
use domain::ids::{SourceId, TenantId};
use domain::inbound::{Ordering, Scheme};
use serde::{Deserialize, Serialize};
use store::entities::application;
use store::{NewApplication, Source, SourceSettings, Store, StoreError};

use crate::{FieldError, Result, ServiceError, rules};

/// Svix's source types whose senders sign as Svix does (Standard Webhooks, `SvixConfig`).
const STANDARD_WEBHOOKS_TYPES: &[&str] = &[
    "svix",
    "beehiiv",
    "brex",
    "clerk",
    "guesty",
    "incident-io",
    "lithic",
    "nash",
    "open-ai",
    "pleo",
    "psi-fi",
    "render",
    "replicate",
    "resend",
    "safebase",
    "sardine",
    "stych",
];

/// What the Ingest API says of a source it made, kept with the source as JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngestInfo {
    /// Svix's source type (`shopify`, `svix`, `generic-webhook`, …).
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub uid: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub updated_at: i64,
}

/// A source as the Ingest API's body gives it, before it is checked.
pub struct IngestFields {
    pub name: String,
    pub uid: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub kind: String,
    pub config: Option<serde_json::Value>,
}

/// Svix's configurations of the types hookd verifies: `SvixConfig`, `StripeConfig`,
/// `MetaConfig` (with `verifyToken`), `TailscaleConfig` (with `timestampGraceSeconds`), … —
/// each a `secret` and what a type adds.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct VendorConfig {
    secret: Option<String>,
    verify_token: Option<String>,
    timestamp_grace_seconds: Option<u64>,
}

/// The settings hookd verifies a Svix source type's requests with: its scheme, and the
/// tolerance where the type's config sets one (Tailscale's `timestampGraceSeconds`).
pub fn scheme_of(kind: &str, config: Option<serde_json::Value>) -> Result<(Scheme, Option<u64>)> {
    let vendor = || -> Result<VendorConfig> {
        let config = config.clone().ok_or_else(|| {
            FieldError::new("config", format!("the {kind} source type needs a config"))
        })?;
        let c: VendorConfig = serde_json::from_value(config)
            .map_err(|e| FieldError::new("config", domain::inbound::scheme_error(&e)))?;
        for (given, field, owner) in [
            (c.verify_token.is_some(), "config.verifyToken", "meta"),
            (
                c.timestamp_grace_seconds.is_some(),
                "config.timestampGraceSeconds",
                "tailscale",
            ),
        ] {
            if given && kind != owner {
                return Err(FieldError::new(
                    field,
                    format!("the {kind} source type takes no {}", &field[7..]),
                )
                .into());
            }
        }
        Ok(c)
    };
    let secret = |c: &VendorConfig| -> Result<String> {
        c.secret.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
            ServiceError::from(FieldError::new(
                "config.secret",
                format!(
                    "the {kind} source type needs its signing secret: hookd verifies every request"
                ),
            ))
        })
    };
    Ok(match kind {
        "generic-webhook" => {
            if config.as_ref().is_some_and(|c| c != &serde_json::json!({})) {
                return Err(FieldError::new("config", "generic-webhook takes no config").into());
            }
            (Scheme::None, None)
        }
        "meta" => {
            let c = vendor()?;
            let token = c.verify_token.clone().filter(|t| !t.is_empty()).ok_or_else(|| {
                FieldError::new(
                    "config.verifyToken",
                    "the meta source type needs the verify token Meta's subscription handshake sends",
                )
            })?;
            (
                Scheme::Meta {
                    secret: secret(&c)?,
                    verify_token: Some(token),
                },
                None,
            )
        }
        "tailscale" => {
            let c = vendor()?;
            (
                Scheme::Tailscale {
                    secret: secret(&c)?,
                },
                c.timestamp_grace_seconds,
            )
        }
        k if STANDARD_WEBHOOKS_TYPES.contains(&k) => (
            Scheme::StandardWebhooks {
                secrets: vec![secret(&vendor()?)?],
            },
            None,
        ),
        k if Scheme::ONE_SECRET.contains(&k) => {
            let scheme = Scheme::with_secret(k, secret(&vendor()?)?)
                .expect("every ONE_SECRET name is a one-secret scheme");
            (scheme, None)
        }
        other => {
            return Err(FieldError::new(
                "type",
                format!("hookd has no verification scheme for the source type {other:?}"),
            )
            .into());
        }
    })
}

/// A source's name, uid and metadata checked.
fn check_info(
    name: &str,
    uid: Option<&str>,
    metadata: &BTreeMap<String, String>,
) -> Result<String> {
    let name = rules::name("name", name)?;
    if name.chars().count() < 2 {
        return Err(FieldError::new("name", "name must be 2 to 256 characters").into());
    }
    if let Some(uid) = uid {
        rules::source_uid("uid", uid, SourceId::PREFIX)?;
    }
    rules::metadata(metadata)?;
    Ok(name)
}

/// The settings of the hookd source for a Svix type and config, checked by hookd's rules for
/// every source (what they name `verification` is the config's secret here).
fn settings_of(
    kind: &str,
    config: Option<serde_json::Value>,
    uid: Option<&str>,
) -> Result<SourceSettings> {
    let (scheme, tolerance_secs) = scheme_of(kind, config)?;
    let settings = SourceSettings {
        // The type names what arrives, unless the scheme does (Stripe, GitHub, Shopify, Slack).
        event_type: kind.to_owned(),
        scheme,
        ordering: Ordering::default(),
        tolerance_secs,
    };
    // The hookd name is the uid, or `ingest-{app id}` made at create (valid by construction).
    let hookd_name = uid.unwrap_or("ingest");
    crate::inbound::check_source(hookd_name, &settings).map_err(|e| match e {
        ServiceError::Invalid(errs) => ServiceError::Invalid(
            errs.into_iter()
                .map(|f| match f.field.as_str() {
                    "verification" | "verification.secret" => {
                        FieldError::new("config.secret", f.msg)
                    }
                    "toleranceSecs" => FieldError::new("config.timestampGraceSeconds", f.msg),
                    _ => f,
                })
                .collect(),
        ),
        other => other,
    })?;
    Ok(settings)
}

/// `fields` checked: the Ingest information and the settings of the hookd source.
fn checked(fields: IngestFields) -> Result<(IngestInfo, SourceSettings)> {
    let metadata = fields.metadata.unwrap_or_default();
    let name = check_info(&fields.name, fields.uid.as_deref(), &metadata)?;
    let settings = settings_of(&fields.kind, fields.config, fields.uid.as_deref())?;
    let info = IngestInfo {
        kind: fields.kind,
        name,
        uid: fields.uid,
        metadata,
        updated_at: Timestamp::now().as_millis(),
    };
    Ok((info, settings))
}

fn info_of(source: &Source) -> Result<Option<IngestInfo>> {
    source
        .row
        .ingest
        .as_deref()
        .map(|text| store::from_json(&format!("inbound source {}: ingest", source.row.id), text))
        .transpose()
        .map_err(ServiceError::from)
}

/// Creates a source and the application it forwards to.
pub async fn create(
    store: &Store,
    tenant: TenantId,
    fields: IngestFields,
) -> Result<(Source, IngestInfo)> {
    let (info, settings) = checked(fields)?;
    let app = store
        .create_application(
            tenant,
            NewApplication {
                name: info.name.clone(),
                ..Default::default()
            },
        )
        .await?;
    // hookd's name of the source (its events' tag): the uid, else one of its own.
    let name = info
        .uid
        .clone()
        .unwrap_or_else(|| format!("ingest-{}", app.id));
    // Its URL carries a token, as Svix's ingest URLs do (rotated by `rotate_token`).
    let token = domain::inbound::new_url_token(&mut rand::rng());
    let made = store
        .create_source_with(
            tenant,
            &app,
            &name,
            &settings,
            Some(store_json(&info)),
            Some(&token),
        )
        .await;
    match made {
        Ok(source) => Ok((source, info)),
        Err(e) => {
            // The application was made for this source only.
            if let Err(cleanup) = store.delete_application(tenant, &app.id.to_string()).await {
                tracing::warn!(error = %cleanup, "could not delete an ingest source's application");
            }
            Err(match e {
                StoreError::Conflict { .. } => {
                    FieldError::new("uid", "a source with this uid exists").into()
                }
                e => e.into(),
            })
        }
    }
}

fn store_json(info: &IngestInfo) -> String {
    serde_json::to_string(info).expect("plain data serialises")
}

/// The tenant's Ingest source `id_or_uid`; sources made otherwise are not found here.
pub async fn find(
    store: &Store,
    tenant: TenantId,
    id_or_uid: &str,
) -> Result<(Source, IngestInfo)> {
    let source = if id_or_uid.starts_with(SourceId::PREFIX) {
        Some(store.get_source(tenant, id_or_uid).await?)
    } else {
        store.source_named(tenant, id_or_uid).await?
    };
    let found = match source {
        Some(s) => info_of(&s)?.map(|info| (s, info)),
        None => None,
    };
    found
        .filter(|(_, info)| {
            id_or_uid.starts_with(SourceId::PREFIX) || info.uid.as_deref() == Some(id_or_uid)
        })
        .ok_or_else(|| StoreError::not_found("source").into())
}

/// The tenant's Ingest sources, oldest first.
pub async fn list(store: &Store, tenant: TenantId) -> Result<Vec<(Source, IngestInfo)>> {
    let mut out = Vec::new();
    for s in store.list_sources(tenant).await? {
        if let Some(info) = info_of(&s)? {
            out.push((s, info));
        }
    }
    Ok(out)
}

/// Replaces an Ingest source's type, configuration, name and metadata; its id, URL and uid
/// stay (a uid is the source's name in hookd, which tags its events).
pub async fn update(
    store: &Store,
    tenant: TenantId,
    id_or_uid: &str,
    fields: IngestFields,
) -> Result<(Source, IngestInfo)> {
    let (source, have) = find(store, tenant, id_or_uid).await?;
    if fields.uid.is_some() && fields.uid != have.uid {
        return Err(FieldError::new("uid", "a source keeps its uid").into());
    }
    let (mut info, settings) = checked(fields)?;
    info.uid = have.uid;
    let app = application_of_source(store, tenant, &source).await?;
    let changed = store
        .update_source_with(&source, &app, &settings, Some(store_json(&info)))
        .await?;
    Ok((changed, info))
}

/// What `PATCH …/source/{id}` changes: each member given replaces the source's; `config`
/// (the type's, as at create) replaces its verification, whose secret is otherwise kept.
#[derive(Default)]
pub struct IngestPatch {
    pub name: Option<String>,
    /// `Some(None)`: the uid given as null.
    pub uid: Option<Option<String>>,
    pub metadata: Option<BTreeMap<String, String>>,
    pub config: Option<serde_json::Value>,
}

/// Changes what `patch` names of an Ingest source; the rest stays.
pub async fn patch(
    store: &Store,
    tenant: TenantId,
    id_or_uid: &str,
    patch: IngestPatch,
) -> Result<(Source, IngestInfo)> {
    let (source, have) = find(store, tenant, id_or_uid).await?;
    if patch.uid.as_ref().is_some_and(|uid| *uid != have.uid) {
        return Err(FieldError::new(
            "uid",
            "a source keeps its uid: it is the source's name in hookd, which tags its events",
        )
        .into());
    }
    let metadata = patch.metadata.unwrap_or(have.metadata);
    let name = check_info(
        patch.name.as_deref().unwrap_or(&have.name),
        have.uid.as_deref(),
        &metadata,
    )?;
    let settings = match patch.config {
        Some(config) => settings_of(&have.kind, Some(config), have.uid.as_deref())?,
        None => source.settings.clone(),
    };
    let info = IngestInfo {
        name,
        metadata,
        updated_at: Timestamp::now().as_millis(),
        ..have
    };
    let app = application_of_source(store, tenant, &source).await?;
    let changed = store
        .update_source_with(&source, &app, &settings, Some(store_json(&info)))
        .await?;
    Ok((changed, info))
}

/// Gives an Ingest source's URL a new token: the old URL stops working at once (decision 92).
pub async fn rotate_token(
    store: &Store,
    tenant: TenantId,
    id_or_uid: &str,
) -> Result<(Source, IngestInfo)> {
    let (source, info) = find(store, tenant, id_or_uid).await?;
    let token = domain::inbound::new_url_token(&mut rand::rng());
    let changed = store.set_source_url_token(&source, &token).await?;
    Ok((changed, info))
}

/// Deletes an Ingest source with its application and that application's endpoints.
pub async fn delete(store: &Store, tenant: TenantId, id_or_uid: &str) -> Result<()> {
    let (source, _) = find(store, tenant, id_or_uid).await?;
    store
        .delete_application(tenant, &source.row.app_id.to_string())
        .await?;
    Ok(())
}

/// The application an Ingest source forwards to: where its endpoints are.
pub async fn application_of(
    store: &Store,
    tenant: TenantId,
    id_or_uid: &str,
) -> Result<application::Model> {
    let (source, _) = find(store, tenant, id_or_uid).await?;
    application_of_source(store, tenant, &source).await
}

async fn application_of_source(
    store: &Store,
    tenant: TenantId,
    source: &Source,
) -> Result<application::Model> {
    Ok(store
        .get_application(tenant, &source.row.app_id.to_string())
        .await?)
}
