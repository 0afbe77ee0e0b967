//! Sending a message: the rules of its fields and payload, the tenant's ingest limit, storing
//! it with its deliveries, and waking this process's dispatcher.

use domain::Timestamp;
use domain::delivery::DeliveryState;
use domain::ids::TenantId;
use domain::payload;
use store::entities::application;
use store::{CreatedMessage, NewMessage, Store, retry_policy_of};

use crate::{Config, FieldError, Result, ServiceError, rules};

/// Every rule a message's fields break, first one first (empty when they are valid). The
/// payload is checked after its size, by [`create`].
pub fn problems(new: &NewMessage) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut check = |r: std::result::Result<(), FieldError>| errors.extend(r.err());
    check(rules::ident("eventType", &new.event_type));
    if let Some(id) = &new.event_id {
        check(rules::ident("eventId", id));
    }
    check(rules::labels(
        "channels",
        &new.channels,
        rules::MAX_CHANNELS,
    ));
    check(rules::labels("tags", &new.tags, rules::MAX_TAGS));
    if let Some(key) = &new.ordering_key {
        check(rules::ordering_key(key));
    }
    errors
}

fn payload_rules(raw: &[u8]) -> std::result::Result<(), FieldError> {
    if !raw.starts_with(b"{") {
        return Err(FieldError::new("payload", "payload must be a JSON object"));
    }
    if !payload::depth_within(raw, payload::MAX_DEPTH) {
        let depth = payload::json_depth(raw);
        return Err(FieldError::new(
            "payload",
            format!(
                "payload nests {depth} levels deep; at most {} are accepted",
                payload::MAX_DEPTH
            ),
        ));
    }
    Ok(())
}

/// Takes one of the tenant's ingest tokens, or says how long until one is free.
pub async fn admit(store: &Store, cfg: &Config, tenant: TenantId) -> Result<()> {
    cfg.ingest_limits
        .check(store, tenant)
        .await
        .map_err(|retry_after| ServiceError::RateLimited { retry_after })
}

/// Stores a message with one delivery per matching enabled endpoint, in one transaction, and
/// wakes the dispatcher for them. The caller has taken an ingest token ([`admit`]).
pub async fn create(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    app: &application::Model,
    new: NewMessage,
) -> Result<CreatedMessage> {
    check(cfg, &new)?;
    let created = store
        .create_message(tenant, app, new, |ep, now| {
            retry_policy_of(ep).give_up_at(now)
        })
        .await?;
    wake_for(cfg, &created);
    Ok(created)
}

/// Stores messages of one application in the order given, in one transaction, and wakes this
/// process's dispatcher: a run of ordered inbound events whose turn came together. Each has
/// its own result (a repeated `eventId` is a conflict); the caller has taken ingest tokens.
pub async fn create_in_order(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    app: &application::Model,
    news: Vec<NewMessage>,
) -> Result<Vec<std::result::Result<CreatedMessage, store::StoreError>>> {
    for new in &news {
        check(cfg, new)?;
    }
    let created = store
        .create_messages_in_bulk(tenant, app, news, |ep, now| {
            retry_policy_of(ep).give_up_at(now)
        })
        .await?;
    if created.iter().any(|c| c.is_ok()) {
        cfg.new_work.notify_one();
    }
    Ok(created)
}

/// Every rule a message must meet before it is stored: its fields, its payload's size and
/// form, how far ahead it is scheduled.
pub fn check(cfg: &Config, new: &NewMessage) -> Result<()> {
    let errors = problems(new);
    if !errors.is_empty() {
        return Err(ServiceError::Invalid(errors));
    }
    if new.payload.len() > cfg.max_payload_bytes {
        return Err(ServiceError::PayloadTooLarge {
            limit: cfg.max_payload_bytes,
        });
    }
    payload_rules(&new.payload)?;
    if let Some(at) = new.deliver_at
        && at > Timestamp::now().plus(cfg.max_deliver_ahead)
    {
        return Err(FieldError::new(
            "deliverAt",
            format!(
                "deliverAt may be at most {} ahead",
                domain::duration::format_duration(cfg.max_deliver_ahead)
            ),
        )
        .into());
    }
    Ok(())
}

/// Wakes this process's dispatcher when a new message left deliveries in the table; those
/// handed straight to the dispatcher (state `sending`) need no wake-up.
fn wake_for(cfg: &Config, created: &CreatedMessage) {
    if created
        .deliveries
        .iter()
        .any(|d| d.state == DeliveryState::Pending)
    {
        cfg.new_work.notify_one();
    }
}
