//! The hot tables keep only the indexes a query of hookd's uses, and the indexes that serve one
//! delivery state cover only the rows in it (issue 17, decisions 50).
//!
//! Before: 14 indexes on messages, deliveries and attempts took about two thirds of the
//! 1,881 bytes a delivered message cost on SQLite. Dropped, because no query reads them:
//! `idx_deliveries_dead`, `idx_deliveries_tenant_state`, `idx_attempts_delivery`,
//! `idx_attempts_tenant_time`. Narrowed: the claim indexes (`idx_deliveries_new`, `_due`) hold pending rows
//! only (a delivered message leaves nothing in them), the lease index sending rows only, the
//! dead-letter count failed rows only; the eventId and ordering unique indexes skip rows
//! without one (now `uq_messages_app_event`, `uq_deliveries_key_seq`); the message listing drops its tenant prefix (an application belongs to one
//! tenant). The store's `plans` test shows each query's plan on both databases.
//!
//! A replaced index takes a new name: on SQLite the migration's statements may run on
//! different pooled connections, and one whose schema was read before a DROP refused to
//! CREATE the same name again ("already exists").
//!
//! The same SQL runs on SQLite and PostgreSQL. A query that must use a partial index states
//! the delivery state as a literal (`state = 'pending'`), never a bound parameter: neither
//! database can prove a parameter matches an index's WHERE in a prepared, generic plan.

use sea_orm_migration::prelude::*;

statements_migration!("m0007_lean_indexes");

const UP: &[&str] = &[
    "DROP INDEX uq_messages_event_id",
    "CREATE UNIQUE INDEX uq_messages_app_event ON messages (app_id, event_id) \
       WHERE event_id IS NOT NULL",
    "DROP INDEX idx_messages_list",
    "CREATE INDEX idx_messages_app ON messages (app_id, id)",
    "DROP INDEX idx_deliveries_claim",
    "DROP INDEX idx_deliveries_fresh",
    "DROP INDEX idx_deliveries_dead",
    "DROP INDEX idx_deliveries_tenant_state",
    "CREATE INDEX idx_deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending'",
    "CREATE INDEX idx_deliveries_new ON deliveries (created_at) WHERE state = 'pending'",
    "CREATE INDEX idx_deliveries_leased ON deliveries (lease_expires_at) WHERE state = 'sending'",
    "CREATE INDEX idx_deliveries_failed ON deliveries (id) WHERE state = 'failed'",
    "DROP INDEX uq_deliveries_ordering",
    "CREATE UNIQUE INDEX uq_deliveries_key_seq ON deliveries (endpoint_id, ordering_key, seq) \
       WHERE ordering_key IS NOT NULL",
    "DROP INDEX idx_attempts_delivery",
    "DROP INDEX idx_attempts_tenant_time",
];

const DOWN: &[&str] = &[
    "CREATE INDEX idx_attempts_tenant_time ON attempts (tenant_id, started_at)",
    "CREATE INDEX idx_attempts_delivery ON attempts (delivery_id, id)",
    "DROP INDEX uq_deliveries_key_seq",
    "CREATE UNIQUE INDEX uq_deliveries_ordering ON deliveries (endpoint_id, ordering_key, seq)",
    "DROP INDEX idx_deliveries_failed",
    "DROP INDEX idx_deliveries_leased",
    "DROP INDEX idx_deliveries_new",
    "DROP INDEX idx_deliveries_due",
    "CREATE INDEX idx_deliveries_tenant_state ON deliveries (tenant_id, state, id)",
    "CREATE INDEX idx_deliveries_dead ON deliveries (tenant_id, state, updated_at)",
    "CREATE INDEX idx_deliveries_fresh ON deliveries (state, created_at)",
    "CREATE INDEX idx_deliveries_claim ON deliveries (state, next_attempt_at)",
    "DROP INDEX idx_messages_app",
    "CREATE INDEX idx_messages_list ON messages (tenant_id, app_id, id)",
    "DROP INDEX uq_messages_app_event",
    "CREATE UNIQUE INDEX uq_messages_event_id ON messages (app_id, event_id)",
];
