//! Attempt results on PostgreSQL: one statement per batch.

use std::collections::HashSet;
use std::time::Duration;

use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::DeliveryId;
use sea_orm::Value;

use crate::entities::attempt;
use crate::pg::{ColumnArray, column_names, columns_of, unnest};
use crate::results::{AttemptResult, Next, Tallies, finish_of};
use crate::stats::{STAT_COLUMNS, stat_columns, stat_conflict, stat_row};
use crate::{Result, Store};

impl Store {
    /// [`Store::record_results_in`] on PostgreSQL: the attempts, the endpoints' health and the
    /// statistics are CTEs of the statement that finishes the deliveries, so the batch is one
    /// statement. Every row goes as one binary array per column (see [`ColumnArray`]), so its
    /// text is the same for every batch and PostgreSQL plans it once per connection (see
    /// `pg::query_with_arrays_by_key`). Returns the ids of the deliveries written.
    pub(crate) async fn record_results_at_once(
        &self,
        owner: &str,
        results: &[AttemptResult],
        now: i64,
        tallies: &Tallies,
    ) -> Result<HashSet<DeliveryId>> {
        // Journaled deliveries (see `journal`): those that failed are written out first and
        // then finished as any other; those that succeeded leave their attempt alone.
        let (succeeded, other): (Vec<&AttemptResult>, Vec<&AttemptResult>) =
            results.iter().partition(|r| r.next == Next::Succeeded);
        self.write_out_handed(owner, other.iter().map(|r| r.delivery.id), Duration::ZERO)
            .await?;
        let journaled = self.journal.take(
            owner,
            succeeded.iter().map(|r| r.delivery.id),
            Duration::ZERO,
        );
        // Their rows are not there to look up: only their attempts and journals are written.
        let done = journaled.ids();
        let unjournaled: Vec<&AttemptResult> = results
            .iter()
            .filter(|r| !done.contains(&r.delivery.id))
            .collect();
        let mut arrays = tallied(tallies);
        arrays.extend(columns_of::<attempt::Entity>(
            results.iter().map(|r| &r.attempt),
        ));
        arrays.extend(finished(&unjournaled));
        arrays.push(journaled.emptied_array());
        let rows = match crate::pg::query_with_arrays_by_key(
            &self.db,
            finish_sql(),
            vec![owner.into(), now.into()],
            arrays,
        )
        .await
        {
            Ok(rows) => rows,
            Err(e) => {
                self.journal.put_back(journaled);
                return Err(e.into());
            }
        };
        // A journaled success is written with its attempt. Should another process have reaped
        // its journal (this one stalled past its lease), it is sent again, as a delivery whose
        // lease ran out: at least once either way.
        let mut written = done;
        for row in rows {
            written.insert(row.try_get::<DeliveryId>("", "id")?);
        }
        Ok(written)
    }
}

/// The endpoints' health (ids and times of [`Tallies::succeeded`], then of
/// [`Tallies::failed`]) and the statistics' rows (one array per column of `stat_columns`), as
/// [`finish_sql`] reads them.
fn tallied(t: &Tallies) -> Vec<ColumnArray> {
    let mut out = Vec::with_capacity(4 + STAT_COLUMNS);
    for rows in [&t.succeeded, &t.failed] {
        out.push(
            ColumnArray::Uuid(Vec::with_capacity(rows.len())).filled(rows.iter().map(|r| r.0)),
        );
        out.push(
            ColumnArray::BigInt(Vec::with_capacity(rows.len())).filled(rows.iter().map(|r| r.1)),
        );
    }
    let rows: Vec<Vec<Value>> = t.stats.iter().map(|(k, c)| stat_row(k, c)).collect();
    for column in 0..STAT_COLUMNS {
        // The three ids, then numbers (see `stat_row`).
        let empty = if column < 3 {
            ColumnArray::Uuid(Vec::with_capacity(rows.len()))
        } else {
            ColumnArray::BigInt(Vec::with_capacity(rows.len()))
        };
        out.push(empty.filled(rows.iter().map(|r| r[column].clone())));
    }
    out
}

/// The columns of [`finished`], in its order.
const FINISHED: [&str; 7] = [
    "id",
    "state",
    "attempt_count",
    "next_attempt_at",
    "last_status",
    "last_error",
    "last_attempt_at",
];

/// The deliveries' new states after their attempts, as the arrays `v` of
/// [`finish_statement`] reads, one per column of [`FINISHED`].
fn finished(results: &[&AttemptResult]) -> Vec<ColumnArray> {
    let n = results.len();
    let finish: Vec<_> = results.iter().map(|r| finish_of(r)).collect();
    vec![
        ColumnArray::Uuid(Vec::with_capacity(n)).filled(results.iter().map(|r| r.delivery.id)),
        ColumnArray::Text(Vec::with_capacity(n)).filled(finish.iter().map(|(state, _)| *state)),
        ColumnArray::Int(Vec::with_capacity(n))
            .filled(results.iter().map(|r| r.attempt.attempt_number)),
        ColumnArray::BigInt(Vec::with_capacity(n)).filled(finish.iter().map(|(_, at)| *at)),
        ColumnArray::Int(Vec::with_capacity(n))
            .filled(results.iter().map(|r| r.attempt.status_code)),
        ColumnArray::Text(Vec::with_capacity(n))
            .filled(results.iter().map(|r| r.attempt.error_kind)),
        ColumnArray::BigInt(Vec::with_capacity(n))
            .filled(results.iter().map(|r| r.attempt.started_at)),
    ]
}

/// Writes a batch's results, returning the ids of the deliveries written: `$1` owner, `$2`
/// now, then the arrays of [`tallied`] (the endpoints' health, updated as `Tallies::health_rules`
/// says, and the statistics, added to their minute's row), the attempts' arrays in their
/// entity's column order, those of [`finished`] (not the journaled deliveries that succeeded:
/// they have no row) and the journals they empty, deleted if still `owner`'s. The deliveries
/// are written only while `owner` still holds each lease. A delivery that succeeded is deleted
/// (its attempt says the same, see `outcomes`): one small WAL record where the update of its
/// row wrote a new version and three index entries. The text is the same for every batch.
///
/// Every row it changes is found by its primary key, one lookup per unnested row (the plan
/// `pg::query_with_arrays_by_key` keeps, whatever the tables' sizes). With `id = ANY(array)`
/// beside the join it scanned that index and then the unnested rows again for each row
/// found: 176,000 rows compared for a batch of 420. Through the state (tested as `IS TRUE` so
/// that no state index applies) it would read every `sending` entry of that index, dead
/// versions included. The delete and the update each unnest the same parameters, so that each
/// keeps that plan (a CTE read twice would be materialized and joined as one).
fn finish_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let names = column_names::<attempt::Entity>();
        // Only the types matter for the text: arrays of no rows.
        let tallies = tallied(&Tallies {
            succeeded: Vec::new(),
            failed: Vec::new(),
            stats: Default::default(),
        });
        let attempts = columns_of::<attempt::Entity>(std::iter::empty());
        let finished = finished(&[]);
        // Parameters: $1 owner, $2 now, then every array in the order `record_results_at_once`
        // binds them.
        let health_first = 3;
        let stats_first = health_first + 4;
        let attempts_first = health_first + tallies.len();
        let first = attempts_first + attempts.len();
        let emptied = first + finished.len();
        let [(success_set, success_only), (failure_set, failure_only)] =
            Tallies::health_rules("v.at");
        let stat_names = stat_columns();
        let held = "deliveries.id = v.id \
               AND deliveries.lease_owner = $1 AND (deliveries.state = 'sending') IS TRUE";
        let states = unnest(&finished, first, "v", &FINISHED);
        format!(
            "WITH hs AS (UPDATE endpoints SET {success_set} FROM {success_rows} \
               WHERE endpoints.id = v.id{success_only}), \
             hf AS (UPDATE endpoints SET {failure_set} FROM {failure_rows} \
               WHERE endpoints.id = v.id{failure_only}), \
             st AS (INSERT INTO attempt_stats ({stat_cols}) SELECT * FROM {stat_rows} \
               {conflict}), \
             a AS (INSERT INTO attempts ({cols}) SELECT * FROM {rows}), \
             d AS (DELETE FROM deliveries USING {states} \
               WHERE v.state = '{succeeded}' AND {held} RETURNING deliveries.id), \
             u AS (UPDATE deliveries SET state = v.state, attempt_count = v.attempt_count, \
               next_attempt_at = v.next_attempt_at, next_trigger = '{scheduled}', \
               lease_owner = NULL, lease_expires_at = NULL, last_status = v.last_status, \
               last_error = v.last_error, last_attempt_at = v.last_attempt_at, updated_at = $2 \
             FROM {states} \
             WHERE v.state <> '{succeeded}' AND {held} \
             RETURNING deliveries.id), \
             e AS (DELETE FROM handoffs USING unnest(CAST(${emptied} AS uuid[])) AS g(id) \
               WHERE handoffs.id = g.id AND handoffs.owner = $1) \
             SELECT id FROM d UNION ALL SELECT id FROM u",
            success_rows = unnest(&tallies[0..2], health_first, "v", &["id", "at"]),
            failure_rows = unnest(&tallies[2..4], health_first + 2, "v", &["id", "at"]),
            stat_cols = stat_names.join(", "),
            stat_rows = unnest(&tallies[4..], stats_first, "t", &stat_names),
            conflict = stat_conflict(),
            cols = names.join(", "),
            rows = unnest(&attempts, attempts_first, "r", &names),
            scheduled = AttemptTrigger::Scheduled.as_str(),
            succeeded = DeliveryState::Succeeded.as_str(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDb;

    /// The plan PostgreSQL keeps for the result write (made once, under `pg::BY_KEY`'s
    /// settings, as `query_with_arrays_by_key` runs it) finds every delivery, endpoint and
    /// journal by its primary key from the batch, and scans no table: made on the empty tables
    /// of a new database, it is still right once they hold millions of rows. Without those
    /// settings the plan kept for empty tables scans `deliveries` and `endpoints` whole.
    #[tokio::test]
    async fn the_result_write_finds_each_row_by_its_key_from_the_batch() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
            let params = finish_sql()
                .match_indices('$')
                .filter_map(|(i, _)| {
                    let digits: String = finish_sql()[i + 1..]
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    digits.parse::<usize>().ok()
                })
                .max()
                .unwrap();
            let txn = db.store.connection().begin().await.unwrap();
            // The transaction is open: `BY_KEY`'s settings without its BEGIN.
            let settings = crate::pg::BY_KEY.strip_prefix("BEGIN;").unwrap();
            for setup in [
                settings.to_owned(),
                format!("PREPARE finish AS {}", finish_sql()),
            ] {
                txn.execute_unprepared(&setup).await.unwrap();
            }
            let nulls = vec!["NULL"; params].join(", ");
            let rows = txn
                .query_all(Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    format!("EXPLAIN EXECUTE finish({nulls})"),
                ))
                .await
                .unwrap();
            txn.rollback().await.unwrap();
            let plan: Vec<String> = rows
                .iter()
                .map(|r| r.try_get::<String>("", "QUERY PLAN").unwrap())
                .collect();
            let plan = plan.join("\n");
            // Every index read is a primary key's, each probed with a row's id.
            let mut indexes: Vec<&str> = plan
                .lines()
                .filter_map(|l| l.split("Index Scan using ").nth(1))
                .filter_map(|l| l.split(' ').next())
                .collect();
            indexes.sort_unstable();
            let probes = plan.matches("Index Cond: (id = ").count();
            assert!(
                indexes
                    == [
                        "deliveries_pkey",
                        "deliveries_pkey",
                        "endpoints_pkey",
                        "endpoints_pkey",
                        "handoffs_pkey"
                    ]
                    && probes == 5
                    && !plan.contains("Seq Scan")
                    && !plan.contains("ANY"),
                "the result write does not look each row up by its key:\n{plan}"
            );
        }
    }
}
