//! Attempt results on PostgreSQL: one statement per batch.

use std::collections::HashSet;

use domain::delivery::AttemptTrigger;
use domain::ids::DeliveryId;
use sea_orm::{ConnectionTrait, Statement};

use crate::entities::attempt;
use crate::results::{AttemptResult, finish_of};
use crate::{Result, Store};

impl Store {
    /// [`Store::record_results_in`] on PostgreSQL: the attempts, the
    /// endpoints' health and the statistics (`rest`) are CTEs of the statement that finishes the
    /// deliveries, so the batch is one round trip. Returns the ids of the deliveries written.
    pub(crate) async fn record_results_at_once(
        &self,
        owner: &str,
        results: &[AttemptResult],
        now: i64,
        rest: Vec<Statement>,
    ) -> Result<HashSet<DeliveryId>> {
        let attempts = Statement::from_sql_and_values(
            sea_orm::DbBackend::Postgres,
            "INSERT INTO attempts SELECT r.* \
             FROM json_populate_recordset(NULL::attempts, CAST($1 AS json)) r",
            [crate::pg::rows_param::<attempt::Entity>(
                results.iter().map(|r| &r.attempt),
            )],
        );
        let mut parts = vec![attempts];
        parts.extend(rest);
        let statement = crate::pg::with_ctes(parts, finish_deliveries_pg(owner, results, now));
        let mut written = HashSet::with_capacity(results.len());
        for row in self.db.query_all(statement).await? {
            written.insert(row.try_get::<DeliveryId>("", "id")?);
        }
        Ok(written)
    }
}

/// The deliveries' new states, written only while `owner` still holds each lease, returning
/// the ids written; the rows are one JSON parameter, so that the text is the same for every
/// batch (prepared once per connection). The rows are found by
/// primary key through `id = ANY(array)`, whose row count the planner knows; joined with the
/// JSON rows alone (estimated at 100) it chose a scan of the whole table, and through the state
/// (tested as `IS TRUE` so that no state index applies) it would read every `sending` entry of
/// that index, dead versions included.
fn finish_deliveries_pg(owner: &str, results: &[AttemptResult], now: i64) -> Statement {
    let rows: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            let (state, next_at) = finish_of(r);
            let a = &r.attempt;
            serde_json::json!({
                "id": crate::pg::uuid_text(r.delivery.id),
                "state": state.as_str(),
                "attempt_count": a.attempt_number,
                "next_attempt_at": next_at,
                "last_status": a.status_code,
                "last_error": a.error_kind,
                "last_attempt_at": a.started_at,
            })
        })
        .collect();
    let sql = format!(
        "UPDATE deliveries SET state = v.state, attempt_count = v.attempt_count, \
           next_attempt_at = v.next_attempt_at, next_trigger = '{scheduled}', \
           lease_owner = NULL, lease_expires_at = NULL, last_status = v.last_status, \
           last_error = v.last_error, last_attempt_at = v.last_attempt_at, updated_at = $2 \
         FROM json_to_recordset(CAST($3 AS json)) AS v(id uuid, state varchar, \
           attempt_count integer, next_attempt_at bigint, last_status integer, \
           last_error varchar, last_attempt_at bigint) \
         WHERE deliveries.id = ANY(CAST($4 AS uuid[])) AND deliveries.id = v.id \
           AND deliveries.lease_owner = $1 AND (deliveries.state = 'sending') IS TRUE \
         RETURNING deliveries.id",
        scheduled = AttemptTrigger::Scheduled.as_str(),
    );
    Statement::from_sql_and_values(
        sea_orm::DbBackend::Postgres,
        sql,
        [
            owner.into(),
            now.into(),
            serde_json::Value::Array(rows).to_string().into(),
            crate::pg::text_array(results.iter().map(|r| crate::pg::uuid_text(r.delivery.id)))
                .into(),
        ],
    )
}
