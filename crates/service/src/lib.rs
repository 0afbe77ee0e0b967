//! hookd's operations, independent of how they are asked for: the input rules of everything a
//! tenant creates, and the sequences with side effects (ingest: rate limit → create → wake the
//! dispatcher; resend, recover, replay, skip; creating and changing endpoints). The REST API
//! and the dashboard both call these, so a rule lives here once; neither depends on the other.
//!
//! Errors name fields and resources, not HTTP statuses ([`ServiceError`]).

pub mod endpoints;
mod error;
pub mod event_types;
pub mod inbound;
pub mod ingest;
pub mod limits;
pub mod messages;
pub mod operational;
pub mod refusals;
pub mod rules;
pub mod ssrf;
pub mod trace;

use std::sync::Arc;

use domain::endpoint_url::AllowList;

pub use error::{FieldError, Result, ServiceError};

/// Operator settings the operations enforce, and this process's shared state for them.
#[derive(Clone, Debug)]
pub struct Config {
    /// Largest message payload accepted (bytes).
    pub max_payload_bytes: usize,
    /// How far ahead a message's `deliverAt` may be.
    pub max_deliver_ahead: std::time::Duration,
    /// Networks endpoint URLs may resolve into despite the SSRF guard.
    pub allow_networks: AllowList,
    /// Refuse `http://` endpoint URLs.
    pub https_only: bool,
    /// How failures are classified where neither the endpoint nor its tenant chose (shown to
    /// tenants choosing their default).
    pub status_preset: domain::classify::StatusPreset,
    /// Every endpoint's circuit breaker (pages describe an open one with it).
    pub breaker: domain::breaker::BreakerConfig,
    /// The operator's retention (before tenants and applications choose) and the longest
    /// they may choose.
    pub retention: domain::retention::Retention,
    pub max_retention: std::time::Duration,
    /// Woken after anything makes deliveries due (a message, a resend), so a dispatcher in
    /// this process starts at once instead of at its next poll.
    pub new_work: Arc<tokio::sync::Notify>,
    /// Per-tenant ingest token buckets.
    pub ingest_limits: Arc<limits::IngestLimits>,
    /// What this process counted of inbound traffic (`/metrics`, each source's counts).
    pub inbound_counts: Arc<inbound::Counts>,
    /// Most events one source holds ahead of gaps (`inbound_max_held`).
    pub max_held_per_source: u64,
    /// How long a source knows a request by the digest of its signed bytes, where the
    /// signature covers neither a timestamp nor the id (`inbound_replay_window`).
    pub inbound_replay_window: std::time::Duration,
    /// How long an endpoint may fail before hookd disables it (`endpoint_disable_after`; the
    /// dashboard's time left for endpoints at risk).
    pub disable_after: std::time::Duration,
    /// How long an endpoint fails before its tenant is warned (`endpoint_warn_after`).
    pub warn_after: std::time::Duration,
}
