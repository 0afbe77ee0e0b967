//! The auto-disable sweep: an endpoint that keeps failing with no success for
//! `disable_after` (default 5 days) is disabled, and its tenant is told; and the early
//! warning before it, once per failure streak, after `warn_after` (default 24 hours).

use std::time::Duration;

use domain::Timestamp;
use domain::duration::format_duration;
use domain::health::{EndpointHealth, should_disable, should_warn};
use domain::time::rfc3339;
use store::{Store, StoreError};

/// Disables every endpoint that has been failing too long. Returns how many.
pub async fn sweep(
    store: &Store,
    now: Timestamp,
    disable_after: Duration,
    public_url: &str,
) -> Result<usize, StoreError> {
    let cutoff = Timestamp::from_millis(now.as_millis() - disable_after.as_millis() as i64);
    let mut disabled = 0;
    for ep in store.system().failing_endpoints(cutoff, 500).await? {
        let health = EndpointHealth {
            failing_since: ep.failing_since.map(Timestamp::from_millis),
            last_success_at: ep.last_success_at.map(Timestamp::from_millis),
        };
        if !should_disable(&health, now, disable_after) {
            continue;
        }
        let since = health
            .failing_since
            .map(rfc3339::format)
            .unwrap_or_default();
        let reason = format!(
            "no successful delivery for {} while attempts kept failing (failing since {since})",
            format_duration(disable_after)
        );
        if store
            .system()
            .disable_endpoint_and_notify(ep.id, &reason, public_url)
            .await?
        {
            tracing::info!(endpoint_id = %ep.id, tenant_id = %ep.tenant_id, "endpoint disabled: {reason}");
            disabled += 1;
        }
    }
    Ok(disabled)
}

/// Warns about every enabled endpoint failing for `warn_after` whose streak has had no
/// warning yet (run after [`sweep`], so an endpoint past both is disabled, not warned).
/// Returns how many.
pub async fn warn(
    store: &Store,
    now: Timestamp,
    warn_after: Duration,
    disable_after: Duration,
    public_url: &str,
) -> Result<usize, StoreError> {
    let cutoff = Timestamp::from_millis(now.as_millis() - warn_after.as_millis() as i64);
    let mut warned = 0;
    for ep in store
        .system()
        .unwarned_failing_endpoints(cutoff, 500)
        .await?
    {
        let warned_for = ep.warned_failing_since.map(Timestamp::from_millis);
        if !should_warn(&store::health_of(&ep), warned_for, now, warn_after) {
            continue;
        }
        if store
            .system()
            .warn_failing_endpoint(&ep, disable_after, public_url)
            .await?
        {
            tracing::info!(endpoint_id = %ep.id, tenant_id = %ep.tenant_id, "endpoint failing: its tenant is warned");
            warned += 1;
        }
    }
    Ok(warned)
}
