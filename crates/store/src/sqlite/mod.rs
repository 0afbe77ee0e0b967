//! hookd on SQLite: its statements (see [`Dialect`]), the writer thread that owns the hot
//! path's connection, its message and result writes, and the WAL checkpointer.

pub(crate) mod checkpoint;
pub(crate) mod connect;
pub(crate) mod fault;
pub(crate) mod ingest;
pub(crate) mod lite;
pub(crate) mod results;

use crate::dialect::{Dialect, ORDERED, claim_window, delivery_columns};

pub(crate) static DIALECT: Dialect = Dialect {
    db: sea_orm::DbBackend::Sqlite,
    param: |n| format!("?{n}"),
    claim,
    renew_leases: "UPDATE deliveries SET lease_expires_at = ?1 \
                   WHERE lease_owner = ?2 AND state = 'sending' AND id IN ({ids})",
    // Through the queue's index: the endpoint's own (m0031) would walk its whole history.
    defer_backlog: "UPDATE deliveries SET next_attempt_at = ?1 WHERE id IN ( \
                      SELECT id FROM deliveries INDEXED BY idx_deliveries_due \
                      WHERE state = 'pending' AND next_attempt_at < ?1 AND endpoint_id = ?2)",
    open_of_endpoint: "SELECT id FROM deliveries INDEXED BY idx_deliveries_due \
                         WHERE state = 'pending' AND endpoint_id = ? \
                       UNION ALL SELECT id FROM deliveries INDEXED BY idx_deliveries_leased \
                         WHERE state = 'sending' AND endpoint_id = ?",
    prune_attempt_stats: "DELETE FROM attempt_stats WHERE minute < ?1",
    database_size: "SELECT p.page_count * s.page_size AS total, f.freelist_count * s.page_size AS free \
                     FROM pragma_page_count() AS p, pragma_page_size() AS s, pragma_freelist_count() AS f",
    // The write transaction already holds SQLite's write lock (its first statement is a
    // write; see `begin_write`), which a read-only file refuses.
    probe: &[
        "CREATE TABLE IF NOT EXISTS temp.hookd_storage_probe (b BLOB)",
        "INSERT INTO temp.hookd_storage_probe VALUES (zeroblob(4096))",
    ],
    // sea-orm begins DEFERRED. A deferred transaction that reads and later writes fails at
    // once with SQLITE_BUSY_SNAPSHOT if any other writer committed in between, and the busy
    // timeout does not help. A write as the first statement takes the write lock up front
    // (waiting in the busy handler if needed), as BEGIN IMMEDIATE would.
    begin_write: Some("DELETE FROM node_heartbeats WHERE 0"),
    explain: ("EXPLAIN QUERY PLAN ", "detail"),
    lock_endpoint_row: false,
    endpoint_leases: None,
    give_back_wal: Some(checkpoint::TRUNCATE),
    may_need_vacuum: false,
    id_literal: |u| format!("x'{}'", u.simple()),
    // SQLite plans from the schema: each term probes `idx_messages_app` (and its messages
    // keep their id key too).
    message_keys: crate::dialect::message_keys_by_app,
    database_fault: fault::database_fault,
};

/// One dispatcher process per database: the claim takes the oldest due deliveries.
fn claim(fresh: Option<usize>) -> String {
    let (window, order) = claim_window(&DIALECT, fresh);
    format!(
        "UPDATE deliveries SET state = 'sending', lease_owner = ?1, lease_expires_at = ?2, updated_at = ?3 \
         WHERE id IN ( \
           SELECT d.id FROM deliveries d \
           WHERE d.state = 'pending' AND d.next_attempt_at <= ?4{window} AND {ORDERED} \
           ORDER BY {order} LIMIT ?5) \
         RETURNING {columns}",
        columns = delivery_columns(),
    )
}
