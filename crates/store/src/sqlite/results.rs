//! Attempt results on SQLite: one transaction on the writer thread.

use std::collections::HashSet;

use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::DeliveryId;

use crate::Result;
use crate::entities::attempt;
use crate::results::{AttemptResult, Tallies, finish_of};

/// The endpoints' health (successes, failures) and the statistics, each one prepared single-row
/// statement run for every row of [`Tallies`]: SQLite runs a prepared statement again without
/// parsing it, where a `VALUES` list as long as the batch's endpoints was a new text to parse
/// for most batches of a fan-out (its length varies with theirs). The health updates find
/// their row by its key alone: joined to a one-row `VALUES`, each run built a temporary table
/// for it (2.5 µs of a fanned-out delivery's 160, session 45).
fn tally_sql() -> &'static [String; 3] {
    static SQL: std::sync::OnceLock<[String; 3]> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let [(success_set, success_only), (failure_set, failure_only)] =
            Tallies::health_rules("?2");
        let health =
            |set: &str, only: &str| format!("UPDATE endpoints SET {set} WHERE id = ?1{only}");
        let row = format!("({})", super::DIALECT.params(1, crate::stats::STAT_COLUMNS));
        [
            health(&success_set, &success_only),
            health(&failure_set, &failure_only),
            crate::stats::stat_upsert_sql(&row),
        ]
    })
}

/// [`Store::record_results_in`] on SQLite: one transaction on the writer thread, which takes
/// the write turn itself. Returns the ids of the deliveries written (those whose lease the
/// owner still held).
pub(crate) async fn write_results_lite(
    lite: &crate::lite::Lite,
    owner: &str,
    results: &[AttemptResult],
    now: i64,
    tallies: Tallies,
) -> Result<HashSet<DeliveryId>> {
    let attempts: Vec<attempt::Model> = results.iter().map(|r| r.attempt.clone()).collect();
    let finishes: Vec<_> = results
        .iter()
        .map(|r| {
            let (state, next_at) = finish_of(r);
            let a = &r.attempt;
            let row = (state, a.attempt_number, next_at, a.status_code);
            (
                r.delivery.id,
                row,
                a.error_kind.map(|k| k.as_str()),
                a.started_at,
            )
        })
        .collect();
    let owner = owner.to_owned();
    lite.run(move |conn| {
        use crate::lite;
        static ATTEMPT_SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        static FINISH_SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        // A delivery that succeeded is not kept: its attempt says the same (see `outcomes`).
        const SUCCEEDED_SQL: &str = "DELETE FROM deliveries \
             WHERE id = ?2 AND lease_owner = ?1 AND state = 'sending'";
        let attempt_sql = ATTEMPT_SQL.get_or_init(|| lite::insert_sql::<attempt::Entity>(""));
        let finish_sql = FINISH_SQL.get_or_init(|| {
            format!(
                "UPDATE deliveries SET state = ?3, attempt_count = ?4, \
                 next_attempt_at = ?5, next_trigger = '{}', lease_owner = NULL, \
                 lease_expires_at = NULL, last_status = ?6, last_error = ?7, \
                 last_attempt_at = ?8, updated_at = ?2 \
                 WHERE id = ?9 AND lease_owner = ?1 AND state = 'sending'",
                AttemptTrigger::Scheduled.as_str()
            )
        });
        let txn = lite::begin(conn)?;
        for a in &attempts {
            lite::insert_row::<attempt::Entity>(&txn, attempt_sql, a)?;
        }
        let mut written = HashSet::new();
        for (id, (state, count, next_at, status), error, at) in finishes {
            // Written only while this owner still holds the lease.
            let n = if state == DeliveryState::Succeeded {
                lite::execute_params(&txn, SUCCEEDED_SQL, rusqlite::params![owner, id])?
            } else {
                let params = rusqlite::params![
                    owner,
                    now,
                    state.as_str(),
                    count,
                    next_at,
                    status,
                    error,
                    at,
                    id
                ];
                lite::execute_params(&txn, finish_sql, params)?
            };
            if n == 1 {
                written.insert(id);
            }
        }
        let [success_sql, failure_sql, stats_sql] = tally_sql();
        for (sql, rows) in [
            (success_sql, &tallies.succeeded),
            (failure_sql, &tallies.failed),
        ] {
            for (id, at) in rows {
                lite::execute_params(&txn, sql, rusqlite::params![id, at])?;
            }
        }
        for (key, counts) in &tallies.stats {
            lite::execute_values(&txn, stats_sql, &crate::stats::stat_row(key, counts))?;
        }
        txn.commit()?;
        Ok(written)
    })
    .await
}
