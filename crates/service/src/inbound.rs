//! Receiving webhooks (issue 21): a request to a source is verified on its raw bytes first
//! (nothing is stored for a bad one), then stored as a message of the source's application
//! with the event's natural id as its `eventId`: the insert-first dedup hookd's messages
//! already have (a second copy of one event conflicts and is acknowledged without effect).
//! The application's endpoints then get it through the delivery engine: retries, backoff,
//! dead letters, replay.

use domain::Timestamp;
use domain::ids::MessageId;
use domain::inbound::{DEFAULT_TOLERANCE, Scheme, verify};
use store::{NewMessage, Store, StoreError};

use crate::{Config, Result, ServiceError, messages, rules};

/// What a verified request became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Stored; forwarded to the application's endpoints from now on.
    Stored(MessageId),
    /// Its event id was seen before: nothing more was done.
    Duplicate,
}

/// Why a request to a source was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// No such source (or its application is gone).
    #[error("no such source")]
    NotFound,
    /// The signature does not verify: counted, never processed.
    #[error("{0}")]
    Unverified(domain::inbound::Refused),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } => Refusal::NotFound,
            e => Refusal::Service(e.into()),
        }
    }
}

/// Verifies and stores a request to source `id`; `header` looks a request header up.
pub async fn receive(
    store: &Store,
    cfg: &Config,
    id: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> std::result::Result<Received, Refusal> {
    let source = store.system().source(id).await?;
    let verified = verify(
        &source.scheme,
        header,
        body,
        Timestamp::now(),
        DEFAULT_TOLERANCE,
    )
    .map_err(Refusal::Unverified)?;
    let tenant = source.row.tenant_id;
    let app = store
        .get_application(tenant, &source.row.app_id.to_string())
        .await?;
    // The sender's own event type where its scheme names one.
    let event_type = verified
        .event_type
        .filter(|t| rules::ident("eventType", t).is_ok())
        .unwrap_or_else(|| source.row.event_type.clone());
    messages::admit(store, cfg, tenant).await?;
    let new = NewMessage {
        event_type,
        event_id: verified
            .event_id
            .filter(|e| rules::ident("eventId", e).is_ok()),
        payload: body.to_vec(),
        channels: Vec::new(),
        tags: Some(domain::inbound::source_tag(&source.row.name))
            .filter(|t| rules::labels("tags", std::slice::from_ref(t), 1).is_ok())
            .into_iter()
            .collect(),
        ordering_key: None,
        to_endpoint: None,
        deliver_at: None,
    };
    match messages::create(store, cfg, tenant, &app, new).await {
        Ok(created) => Ok(Received::Stored(created.message.id)),
        Err(ServiceError::Store(StoreError::Conflict { .. })) => Ok(Received::Duplicate),
        Err(e) => Err(e.into()),
    }
}

/// The most secrets a Standard Webhooks source tries on each request (a sender rotating has
/// two): every unauthenticated request costs one HMAC per secret.
pub const MAX_SOURCE_SECRETS: usize = 10;

/// Checks a source's settings before it is stored: its name and event type, and that a
/// verifying scheme has a secret.
pub fn check_source(name: &str, event_type: &str, scheme: &Scheme) -> Result<()> {
    rules::ident("name", name)?;
    rules::ident("eventType", event_type)?;
    if let Scheme::StandardWebhooks { secrets } = scheme
        && secrets.len() > MAX_SOURCE_SECRETS
    {
        return Err(ServiceError::field(
            "verification",
            format!("at most {MAX_SOURCE_SECRETS} secrets"),
        ));
    }
    let empty = match scheme {
        Scheme::StandardWebhooks { secrets } => {
            secrets.is_empty()
                || secrets
                    .iter()
                    .any(|s| domain::signing::SigningSecret::parse(s).is_err())
        }
        Scheme::Stripe { secret } | Scheme::Github { secret } => secret.is_empty(),
        Scheme::Hmac(h) => h.secret.is_empty() || h.header.is_empty(),
        Scheme::None => false,
    };
    if empty {
        return Err(ServiceError::field(
            "verification",
            "a verifying scheme needs its secret (Standard Webhooks: whsec_… secrets)",
        ));
    }
    Ok(())
}
