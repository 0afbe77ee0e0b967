//! The delivery workers: claim due deliveries in batches under a lease, send them signed,
//! and write the results in batches. At least once, per-key order, crash safe.
//!
//! - Claim: one statement takes up to `batch_size` due deliveries (SKIP LOCKED on PostgreSQL;
//!   SQLite's single writer makes its UPDATE … RETURNING atomic). Ordered deliveries are due only
//!   at the head of their key.
//! - Send: a pooled HTTP client, redirects off, the endpoint's timeout, and a DNS resolver that
//!   refuses private destinations at connect time (no DNS-rebinding window); or, for a broker
//!   destination, a publish that counts once the broker confirms it.
//! - Record: results go to one writer that commits them in batches, fenced by lease owner, so a
//!   worker that lost its lease never overwrites someone else's state.
//! - Leases are renewed while work is in flight and given back on shutdown; a dead process's
//!   leases expire and the deliveries return to pending without counting an attempt.

mod auth;
mod broker;
mod flow;
mod http;
pub mod metrics;
mod send;
mod worker;

pub use http::build_client;
pub use metrics::Metrics;
pub use worker::{Dispatcher, DispatcherConfig};
