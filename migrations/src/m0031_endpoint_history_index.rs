//! An endpoint's deliveries indexed without their state (issue 37 item 4, decisions 98).
//!
//! `idx_deliveries_endpoint` held (endpoint, state, id): every change of a delivery's state
//! moved its entry, so a delivery fanned out to many endpoints rewrote a page of that index at
//! a scattered place three times (created pending, claimed, finished), each one a 4 KiB page
//! written to SQLite's write-ahead log and copied back at the checkpoint. Measured at 1,000
//! endpoints × 100 messages: 30.7 KB written per delivery with it, 11.0 KB without.
//!
//! Now: every delivery of an endpoint, newest first, by `(endpoint_id, id)`, which no state
//! change touches; and the states a person looks for by endpoint and that the hot path never
//! passes through (dead, paused, canceled) in a partial index of their own. An endpoint's
//! pending and in-flight deliveries (breaker deferral, pause) are found through the claim's and
//! the lease's partial indexes, which hold only the queue.
//!
//! The partial index's WHERE is written as ORs, not `IN`: SQLite uses a partial index only when
//! a term of the query implies its WHERE, and it can prove `state = 'failed'` implies an OR of
//! which it is one side, not an `IN` list. New names, as m0007 explains.

use sea_orm_migration::prelude::*;

statements_migration!("m0031_endpoint_history_index");

const UP: &[&str] = &[
    "DROP INDEX idx_deliveries_endpoint",
    "CREATE INDEX idx_deliveries_of_endpoint ON deliveries (endpoint_id, id)",
    "DROP INDEX idx_deliveries_failed",
    "CREATE INDEX idx_deliveries_held ON deliveries (endpoint_id, state, id) \
       WHERE state = 'failed' OR state = 'paused' OR state = 'skipped'",
];

const DOWN: &[&str] = &[
    "DROP INDEX idx_deliveries_held",
    "CREATE INDEX idx_deliveries_failed ON deliveries (id) WHERE state = 'failed'",
    "DROP INDEX idx_deliveries_of_endpoint",
    "CREATE INDEX idx_deliveries_endpoint ON deliveries (endpoint_id, state, id)",
];
