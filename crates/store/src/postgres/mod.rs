//! hookd on PostgreSQL: its statements (see [`Dialect`]), the group-committing message
//! writer, the one-statement result write, and the helpers they share (batches as binary arrays).

pub(crate) mod connect;
pub(crate) mod fault;
pub(crate) mod ingest;
pub(crate) mod journal;
pub(crate) mod pg;
pub(crate) mod results;

use domain::ids::{ApplicationId, MessageId};
use sea_orm::sea_query::{Expr, SimpleExpr};

use crate::dialect::{Dialect, EndpointLeases, ORDERED, claim_window, delivery_columns};

pub(crate) static DIALECT: Dialect = Dialect {
    db: sea_orm::DbBackend::Postgres,
    param: |n| format!("${n}"),
    claim,
    // Skips rows a result write holds right now: they are being finished, and waiting on
    // them in arbitrary order deadlocks against that write.
    renew_leases: "UPDATE deliveries SET lease_expires_at = $1 WHERE id IN ( \
                     SELECT id FROM deliveries WHERE lease_owner = $2 AND state = 'sending' \
                     AND id IN ({ids}) FOR UPDATE SKIP LOCKED)",
    // Rows another transaction holds are skipped: that transaction is claiming, deferring or
    // finishing them. Waiting instead deadlocked against deferring claims, because an UPDATE
    // locks a row that changed under it before it rechecks its WHERE, and so holds rows it
    // then does not move.
    defer_backlog: "UPDATE deliveries SET next_attempt_at = $1 WHERE id IN ( \
                      SELECT id FROM deliveries \
                      WHERE endpoint_id = $2 AND state = 'pending' AND next_attempt_at < $1 \
                      FOR UPDATE SKIP LOCKED)",
    open_of_endpoint: "SELECT id FROM deliveries WHERE state = 'pending' AND endpoint_id = $1 \
                       UNION ALL SELECT id FROM deliveries WHERE state = 'sending' AND endpoint_id = $2",
    prune_attempt_stats: "DELETE FROM attempt_stats WHERE minute < $1",
    database_size: "SELECT pg_database_size(current_database()) AS total, 0::BIGINT AS free",
    probe: &[
        "CREATE TEMP TABLE hookd_storage_probe (b bytea) ON COMMIT DROP",
        "INSERT INTO hookd_storage_probe SELECT decode(repeat('00', 4096), 'hex')",
    ],
    begin_write: None,
    explain: ("EXPLAIN ", "QUERY PLAN"),
    lock_endpoint_row: true,
    endpoint_leases: Some(EndpointLeases {
        renew: "UPDATE endpoint_leases SET expires_at = $1 \
                WHERE owner = $2 AND endpoint_id IN ({ids}) RETURNING endpoint_id",
        release: "DELETE FROM endpoint_leases WHERE owner = $1",
        forget_expired: "DELETE FROM endpoint_leases WHERE expires_at < $1",
    }),
    give_back_wal: None,
    may_need_vacuum: true,
    id_literal: |u| format!("'{u}'"),
    message_keys,
    database_fault: fault::database_fault,
};

/// The pairs joined as a set of rows, so that each is a probe of the key `(app_id, id)`, which the
/// planner knows matches one row, or the table is read once when it is small beside the
/// pairs. Written as `app_id = ? AND id IN (…)`, a table without statistics (autovacuum off,
/// hookd runs no ANALYZE) read the application's whole range for every batch: an id alone is
/// not known unique since m0037, and 120 ids were guessed to match 60 % of the table (a
/// claimed batch took 29 ms at 20,000 messages, 2 ms before m0037).
fn message_keys(keys: &[(ApplicationId, MessageId)]) -> SimpleExpr {
    let rows: Vec<String> = (0..keys.len())
        .map(|i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
        .collect();
    let values: Vec<sea_orm::Value> = keys
        .iter()
        .flat_map(|(app, id)| [(*app).into(), (*id).into()])
        .collect();
    Expr::cust_with_values(
        format!(
            "(\"messages\".\"app_id\", \"messages\".\"id\") IN (VALUES {})",
            rows.join(", ")
        ),
        values,
    )
}

/// Several dispatcher processes: each endpoint is sent to by one of them at a time (see
/// `endpoint_leases`), so its cap, throttle and breaker, kept in that process, hold for the
/// deployment. Candidates skip endpoints another process holds; the endpoints of the rest are
/// taken or renewed (in id order, so two claims never wait on each other crosswise), and only
/// deliveries of endpoints this claim then holds are claimed. A lease of ours with at least
/// half its time left is not written again (the renewer extends it while we have its work). A
/// claim takes new endpoints in proportion to its room, one per default cap's worth and at
/// least one (`new_endpoints`), oldest work first: a process with little room leaves the
/// endpoints it could not serve at their caps to the others, which spreads endpoints over
/// processes by their spare capacity. Two processes racing for a free endpoint meet on its
/// lease row: the later one sees the winner's row and takes nothing of it. Whether
/// another process holds a candidate's endpoint is a probe of that endpoint's lease row (the
/// table's key: at most one row) made for each candidate in turn, so that a walk of the
/// pending index in its order stops at the limit (see `query_planned_now`). Written as
/// `NOT EXISTS`, PostgreSQL made it an anti-join, which read every candidate and sorted them;
/// a list of the held endpoints checked with `<> ALL` kept the order but cost each candidate a
/// pass over the whole list.
fn claim(fresh: Option<usize>) -> String {
    let (window, order) = claim_window(&DIALECT, fresh);
    let new_endpoints = format!(
        "GREATEST(1, $5 / {})",
        domain::delivery::DEFAULT_MAX_CONCURRENCY
    );
    format!(
        "WITH cand AS ( \
           SELECT d.id, d.endpoint_id, {order} AS o FROM deliveries d \
           WHERE d.state = 'pending' AND d.next_attempt_at <= $4{window} AND {ORDERED} \
             AND (SELECT 1 FROM endpoint_leases l WHERE l.endpoint_id = d.endpoint_id \
               AND l.owner <> $1 AND l.expires_at > $3) IS NULL \
           ORDER BY {order} LIMIT $5 FOR UPDATE OF d SKIP LOCKED), \
         eps AS ( \
           SELECT c.endpoint_id, min(c.o) AS o, \
             bool_or(l.owner IS NOT DISTINCT FROM $1 AND l.expires_at > $3) AS mine, \
             bool_or(l.owner IS NOT DISTINCT FROM $1 AND l.expires_at >= ($2 + $3) / 2) AS fresh \
           FROM cand c LEFT JOIN endpoint_leases l ON l.endpoint_id = c.endpoint_id \
           GROUP BY c.endpoint_id), \
         pick AS ( \
           SELECT endpoint_id FROM eps WHERE mine AND NOT fresh \
           UNION ALL (SELECT endpoint_id FROM eps WHERE NOT mine ORDER BY o LIMIT {new_endpoints})), \
         held AS ( \
           INSERT INTO endpoint_leases (endpoint_id, owner, expires_at) \
           SELECT endpoint_id, $1, $2 FROM pick ORDER BY endpoint_id \
           ON CONFLICT (endpoint_id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at \
           WHERE endpoint_leases.owner = EXCLUDED.owner OR endpoint_leases.expires_at <= $3 \
           RETURNING endpoint_id) \
         UPDATE deliveries SET state = 'sending', lease_owner = $1, lease_expires_at = $2, updated_at = $3 \
         WHERE id IN (SELECT c.id FROM cand c WHERE c.endpoint_id IN ( \
           SELECT endpoint_id FROM eps WHERE fresh UNION ALL SELECT endpoint_id FROM held)) \
         RETURNING {columns}",
        columns = delivery_columns(),
    )
}

#[cfg(test)]
mod tests {
    use domain::Timestamp;
    use sea_orm::{ConnectionTrait, Statement};

    use crate::testing::{TestDb, with_keys};
    use crate::{ConnectOptions, Store};

    /// A store on one pooled connection: what a test runs next runs in the same session.
    async fn one_connection(url: &str) -> Store {
        Store::connect(
            url,
            &with_keys(ConnectOptions {
                max_connections: 1,
                ..ConnectOptions::default()
            }),
        )
        .await
        .unwrap()
    }

    /// A claim is planned at each run, never from a plan its connection kept: PostgreSQL makes
    /// a prepared statement's generic plan after five runs and keeps it, and the claim's, made
    /// while the queue was empty, read a later backlog of 100,000 whole (36 s per claim). On
    /// one connection, claims that ran far more than five times leave no prepared claim behind.
    #[tokio::test]
    async fn a_claim_is_planned_for_the_table_as_it_is_at_each_run() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            let one = one_connection(&db.url).await;
            for _ in 0..8 {
                let now = Timestamp::now();
                for fresh in [true, false] {
                    let skip = [];
                    let fresh = fresh.then_some(crate::Fresh {
                        since: now,
                        skip: &skip,
                    });
                    let claimed = one
                        .system()
                        .claim_due("owner", now, now, 10, fresh)
                        .await
                        .unwrap();
                    assert!(claimed.is_empty());
                }
            }
            let kept = one
                .connection()
                .query_one(Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    "SELECT COUNT(*) AS n FROM pg_prepared_statements \
                     WHERE statement LIKE '%WITH cand AS%' \
                     AND statement NOT LIKE '%pg_prepared_statements%'",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<i64>("", "n")
                .unwrap();
            assert_eq!(kept, 0, "the claim was kept prepared with its plan");
            one.close().await.ok();
        }
    }

    /// A claim reads a backlog's oldest few, not the backlog, on a table PostgreSQL has no
    /// statistics for (autovacuum off, or a backlog grown since the last ANALYZE). 20,000
    /// deliveries pending to 1,000 endpoints: each claim (of due work, and of new work) reads
    /// fewer than a thousand entries of its pending index. Planned as PostgreSQL chose without
    /// statistics (a bitmap of the whole index, then a sort), each read all 20,000.
    #[tokio::test]
    async fn a_claim_reads_the_oldest_of_a_backlog_before_any_statistics() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            let one = one_connection(&db.url).await;
            let conn = one.connection();
            for sql in [
                "ALTER TABLE deliveries SET (autovacuum_enabled = false)",
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, msg_id, state, attempt_count, \
                   attempts_at_arm, next_trigger, next_attempt_at, give_up_at, created_at, \
                   updated_at) \
                 SELECT gen_random_uuid(), gen_random_uuid(), e.id, m.id, 'pending', 0, 0, \
                   'scheduled', 1000 + m.n, 9000000000000, 1000 + m.n, 1000 + m.n \
                 FROM (SELECT n, gen_random_uuid() AS id FROM generate_series(1, 20) n) m \
                 CROSS JOIN (SELECT gen_random_uuid() AS id FROM generate_series(1, 1000)) e",
            ] {
                conn.execute_unprepared(sql).await.unwrap();
            }
            // What a pending index gave out so far, this connection's counts flushed first.
            let read = |index: &'static str| async move {
                conn.execute_unprepared("SELECT pg_stat_force_next_flush()")
                    .await
                    .unwrap();
                conn.query_one(Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    format!(
                        "SELECT idx_tup_read AS n FROM pg_stat_user_indexes \
                         WHERE indexrelname = '{index}'"
                    ),
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<i64>("", "n")
                .unwrap()
            };
            let now = Timestamp::now();
            let skip = [];
            for (index, fresh) in [
                ("idx_deliveries_due", None),
                (
                    "idx_deliveries_new",
                    Some(crate::Fresh {
                        since: Timestamp::from_millis(0),
                        skip: &skip,
                    }),
                ),
            ] {
                let before = read(index).await;
                let claimed = one
                    .system()
                    .claim_due(
                        "owner",
                        now,
                        now.plus(std::time::Duration::from_secs(60)),
                        200,
                        fresh,
                    )
                    .await
                    .unwrap();
                assert!(!claimed.is_empty(), "{index}: nothing claimed");
                let entries = read(index).await - before;
                assert!(
                    entries < 1_000,
                    "a claim of 200 read {entries} entries of {index}, of 20,000 pending"
                );
            }
            one.close().await.ok();
        }
    }
}
