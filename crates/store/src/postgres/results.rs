//! Attempt results on PostgreSQL: one statement per batch.

use std::collections::HashSet;
use std::time::Duration;

use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::DeliveryId;
use sea_orm::Statement;

use crate::entities::attempt;
use crate::pg::{ColumnArray, column_names, columns_of, unnest};
use crate::results::{AttemptResult, Next, finish_of};
use crate::{Result, Store};

impl Store {
    /// [`Store::record_results_in`] on PostgreSQL: the attempts, the
    /// endpoints' health and the statistics (`rest`) are CTEs of the statement that finishes the
    /// deliveries, so the batch is one round trip. The attempts and the deliveries' new states
    /// go as one binary array per column (see [`ColumnArray`]). Returns the ids of the
    /// deliveries written.
    pub(crate) async fn record_results_at_once(
        &self,
        owner: &str,
        results: &[AttemptResult],
        now: i64,
        rest: Vec<Statement>,
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
        let mut arrays = columns_of::<attempt::Entity>(results.iter().map(|r| &r.attempt));
        arrays.extend(finished(&unjournaled));
        arrays.push(journaled.emptied_array());
        let statement = crate::pg::with_ctes(rest, finish_statement(owner, now));
        let values = statement.values.map(|v| v.0).unwrap_or_default();
        let rows = match crate::pg::query_with_arrays_planned_now(
            &self.db,
            &statement.sql,
            values,
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

/// Inserts the attempts and writes the deliveries' new states, only while `owner` still holds
/// each lease, returning the ids written: `$1` owner, `$2` now, then the attempts' arrays in
/// their entity's column order, those of [`finished`] (not the journaled deliveries that
/// succeeded: they have no row) and the journals they empty, deleted if still `owner`'s. A
/// delivery that succeeded is deleted
/// (its attempt says the same, see `outcomes`): one small WAL record where the update of its
/// row wrote a new version and three index entries. The text is the same for every batch
/// (prepared once per connection). The rows are found by primary key, one lookup per unnested
/// row: the planner takes `unnest` of parameters for 10 rows and so drives the join from
/// them. With `id = ANY(array)` beside it (what JSON rows, estimated at 100, needed) it
/// scanned that index and then the unnested rows again for each row found: 176,000 rows
/// compared for a batch of 420, twice the statement's time. Through the state (tested as
/// `IS TRUE` so that no state index applies) it would read every `sending` entry of that index,
/// dead versions included. The delete and the update each unnest the same parameters, so that
/// each keeps that plan (a CTE read twice would be materialized and joined as one).
fn finish_statement(owner: &str, now: i64) -> Statement {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        let names = column_names::<attempt::Entity>();
        // Only the types matter for the text: arrays of no rows.
        let attempts = columns_of::<attempt::Entity>(std::iter::empty());
        let finished = finished(&[]);
        let first = 3 + attempts.len();
        let emptied = first + finished.len();
        let held = "deliveries.id = v.id \
               AND deliveries.lease_owner = $1 AND (deliveries.state = 'sending') IS TRUE";
        let states = unnest(&finished, first, "v", &FINISHED);
        format!(
            "WITH a AS (INSERT INTO attempts ({cols}) SELECT * FROM {rows}), \
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
            cols = names.join(", "),
            rows = unnest(&attempts, 3, "r", &names),
            scheduled = AttemptTrigger::Scheduled.as_str(),
            succeeded = DeliveryState::Succeeded.as_str(),
        )
    });
    Statement::from_sql_and_values(
        sea_orm::DbBackend::Postgres,
        sql.as_str(),
        [owner.into(), now.into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDb;

    /// The plan PostgreSQL keeps for the result write once it has run five times (its generic
    /// plan, made without the arrays' lengths) finds each delivery by its primary key from
    /// the unnested rows. With `id = ANY(...)` beside the join it scanned that index and then
    /// the unnested rows again for every delivery found (a batch of n compared n² rows).
    #[tokio::test]
    async fn the_result_write_finds_each_delivery_by_its_key_from_the_batch() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            use sea_orm::{ConnectionTrait, TransactionTrait};
            let statement = finish_statement("owner", 0);
            let params = 2
                + columns_of::<attempt::Entity>(std::iter::empty()).len()
                + finished(&[]).len()
                + 1;
            let txn = db.store.connection().begin().await.unwrap();
            // As in `plans`: with sequential scans priced out, an empty table gets the plan a
            // large one would.
            for setup in [
                "SET LOCAL enable_seqscan = off".to_owned(),
                "SET LOCAL plan_cache_mode = force_generic_plan".to_owned(),
                format!("PREPARE finish AS {}", statement.sql),
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
            assert!(
                plan.matches("Index Scan using deliveries_pkey on deliveries")
                    .count()
                    == 2
                    && plan.matches("Index Cond: (id = v").count() == 2
                    && !plan.contains("ANY"),
                "the result write does not look each delivery up by its key:\n{plan}"
            );
        }
    }
}
