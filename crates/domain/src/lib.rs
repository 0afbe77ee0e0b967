//! hookd's pure rules: typed ids, time, retry policy, status classification, Retry-After,
//! Standard Webhooks signing, endpoint health, circuit breaker and ordering.
//!
//! Nothing here does I/O. Randomness and time are passed in so every rule is exactly testable.

pub mod attempt;
pub mod breaker;
pub mod broker;
pub mod classify;
pub mod delivery;
pub mod duration;
pub mod egress;
pub mod email;
pub mod endpoint_auth;
pub mod endpoint_url;
pub mod health;
pub mod ids;
pub mod inbound;
pub mod inbound_refusal;
pub mod jobs;
pub mod notify;
pub mod operational;
pub mod ordering;
pub mod payload;
pub mod per_tenant;
pub mod portal;
pub mod retention;
pub mod retry;
pub mod retry_after;
pub mod routing;
pub mod seal;
pub mod signing;
pub mod time;

pub use time::{Clock, ManualClock, SystemClock, Timestamp};
