//! Attempt results: the attempts, the deliveries' next state, the endpoints' health and the
//! statistics, written in one go per batch by the database's writer (see `Writer`).

use std::collections::HashMap;

use domain::Timestamp;
use domain::classify::Verdict;
use domain::delivery::DeliveryState;
use domain::ids::{ApplicationId, AttemptId, DeliveryId, EndpointId};

use crate::Result;
use crate::disable::{disable_and_notify, disabled_event};
use crate::entities::{attempt, delivery};

/// What became of a claimed delivery after one attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    Succeeded,
    /// Try again at this time.
    Retry {
        at: Timestamp,
    },
    /// Dead letter: retries exhausted or a permanent answer.
    Failed,
}

/// One finished attempt, to be written with [`Store::record_results`].
#[derive(Clone, Debug)]
pub struct AttemptResult {
    pub delivery: delivery::Model,
    /// The delivery's application (its endpoint's, and its message's).
    pub app_id: ApplicationId,
    pub attempt: attempt::Model,
    pub next: Next,
    /// Set on a 410: the endpoint is disabled with this reason.
    pub disable_endpoint: Option<String>,
}

/// A delivery's state and next attempt time after its attempt.
pub(crate) fn finish_of(r: &AttemptResult) -> (DeliveryState, i64) {
    match &r.next {
        Next::Succeeded => (DeliveryState::Succeeded, r.delivery.next_attempt_at),
        Next::Retry { at } => (DeliveryState::Pending, at.as_millis()),
        Next::Failed => (DeliveryState::Failed, r.delivery.next_attempt_at),
    }
}

/// What a batch of results changes besides its attempts and deliveries: the endpoints' health
/// and the per-minute counts. Each database writes it with the rest of the batch.
pub(crate) struct Tallies {
    /// Endpoints with a success in the batch, at their latest one, in id order: their failure
    /// streak ends.
    pub succeeded: Vec<(EndpointId, i64)>,
    /// Endpoints with failures only, at their earliest one, in id order: a streak starts where
    /// none runs.
    pub failed: Vec<(EndpointId, i64)>,
    /// The charts' per-minute counts.
    pub stats: std::collections::BTreeMap<crate::stats::StatKey, crate::stats::StatCounts>,
}

impl Tallies {
    /// Endpoint health after a batch: any success clears the failure streak; otherwise the
    /// earliest failure starts one (if none is running). In the endpoints' order, so that two
    /// writers that share endpoints (a lease passing on while its old holder reports late)
    /// lock their rows in the same order.
    fn of(results: &[AttemptResult]) -> Self {
        let mut health: HashMap<EndpointId, (Option<i64>, Option<i64>)> = HashMap::new();
        for r in results {
            let entry = health.entry(r.delivery.endpoint_id).or_default();
            let at = r.attempt.started_at;
            if r.attempt.classification == Verdict::Success {
                entry.0 = Some(entry.0.map_or(at, |p: i64| p.max(at)));
            } else {
                entry.1 = Some(entry.1.map_or(at, |p: i64| p.min(at)));
            }
        }
        let mut succeeded = Vec::new();
        let mut failed = Vec::new();
        for (endpoint_id, (last_success, first_failure)) in health {
            match (last_success, first_failure) {
                (Some(ok), _) => succeeded.push((endpoint_id, ok)),
                (None, Some(fail)) => failed.push((endpoint_id, fail)),
                (None, None) => {}
            }
        }
        succeeded.sort_unstable();
        failed.sort_unstable();
        Tallies {
            succeeded,
            failed,
            stats: stats_of(results),
        }
    }

    /// The health updates' `SET` and extra condition for [`Tallies::succeeded`] and
    /// [`Tallies::failed`], over `endpoints` where `at` is the expression of the result's time
    /// (a joined row's column, or a parameter). A success ends the streak; a failure starts one
    /// only where none runs. A success on a healthy endpoint whose last one is recorded within
    /// `SUCCESS_RECORDED_WITHIN_MS` writes nothing: the row is read, not rewritten.
    pub(crate) fn health_rules(at: &str) -> [(String, String); 2] {
        [
            (
                format!("last_success_at = {at}, failing_since = NULL"),
                format!(
                    " AND (endpoints.failing_since IS NOT NULL \
                     OR endpoints.last_success_at IS NULL \
                     OR endpoints.last_success_at < {at} - {SUCCESS_RECORDED_WITHIN_MS})"
                ),
            ),
            (
                format!("failing_since = {at}"),
                // Tested `IS TRUE`, so that no index of failing endpoints applies: through
                // one PostgreSQL read every healthy endpoint to find the batch's.
                " AND (endpoints.failing_since IS NULL) IS TRUE".to_owned(),
            ),
        ]
    }
}

/// How stale a healthy endpoint's `last_success_at` may be, in milliseconds. Fanned out, each
/// result batch holds a success for hundreds of endpoints, and rewriting every one's row (URL,
/// headers, filters: the widest row hookd updates) cost each delivery a row write that one
/// endpoint shares across its whole batch. Within a second, the time a person reads and the
/// auto-disable rule (days) are unchanged; a success that ends a failure streak is always written.
const SUCCESS_RECORDED_WITHIN_MS: i64 = 1_000;

/// The batch's per-minute counts for the charts' rollup.
fn stats_of(
    results: &[AttemptResult],
) -> std::collections::BTreeMap<crate::stats::StatKey, crate::stats::StatCounts> {
    let mut stats: std::collections::BTreeMap<_, crate::stats::StatCounts> = Default::default();
    for r in results {
        let a = &r.attempt;
        let outcome = match r.next {
            Next::Succeeded => crate::stats::Outcome::Succeeded,
            Next::Retry { .. } => crate::stats::Outcome::Retried,
            Next::Failed => crate::stats::Outcome::Dead,
        };
        stats
            .entry((
                a.tenant_id,
                r.app_id,
                a.endpoint_id,
                crate::stats::minute_of(a.started_at),
            ))
            .or_default()
            .count(outcome, i64::from(a.duration_ms));
    }
    stats
}

/// `text` with every NUL shown as U+FFFD. A receiver's answer may hold NUL bytes, which
/// PostgreSQL text cannot store: written as is, the whole batch of results would fail and its
/// deliveries be sent again.
fn without_nul(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text
    }
}

/// A new attempt row for a claimed delivery.
#[allow(clippy::too_many_arguments)]
pub fn attempt_row(
    d: &delivery::Model,
    url: &str,
    started_at: Timestamp,
    duration_ms: i32,
    status: Option<u16>,
    response_excerpt: Option<String>,
    error_kind: Option<domain::delivery::ErrorKind>,
    error_detail: Option<String>,
    classification: domain::classify::Verdict,
    retry_after_ms: Option<i64>,
) -> attempt::Model {
    attempt::Model {
        id: AttemptId::new(),
        tenant_id: d.tenant_id,
        endpoint_id: d.endpoint_id,
        msg_id: d.msg_id,
        attempt_number: d.attempt_count + 1,
        trigger: d.next_trigger,
        url: url.to_owned(),
        started_at: started_at.as_millis(),
        duration_ms,
        status_code: status.map(i32::from),
        response_excerpt: response_excerpt.map(without_nul),
        error_kind,
        error_detail: error_detail.map(without_nul),
        classification,
        retry_after_ms,
        request_headers: None,
        response_headers: None,
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Writes a batch of attempt results in one transaction: the attempts, each delivery's new
    /// state (only while the writer still holds its lease), endpoint health, and 410 disables.
    /// Returns the ids of deliveries whose lease had been lost (their state was left alone).
    pub async fn record_results(
        &self,
        owner: &str,
        results: &[AttemptResult],
        public_url: &str,
    ) -> Result<Vec<DeliveryId>> {
        let turn = self.write_turn().await;
        self.record_results_in(turn, owner, results, public_url)
            .await
    }

    /// [`Store::record_results`] in a write turn already taken (the turn only batches the
    /// caller's results; each database's writer takes its own).
    ///
    /// One write path per database: on SQLite the writer thread's transaction, on PostgreSQL
    /// one statement. Endpoints that answered 410 stop at once in this process; their disable
    /// (pausing their deliveries, the event, the email) follows in a transaction of its own
    /// once the results are written. Should that fail, it is logged and the results stand: the
    /// endpoint's next 410 disables it.
    pub async fn record_results_in(
        &self,
        turn: crate::WriteTurn,
        owner: &str,
        results: &[AttemptResult],
        public_url: &str,
    ) -> Result<Vec<DeliveryId>> {
        drop(turn);
        if results.is_empty() {
            return Ok(Vec::new());
        }
        self.health.may_write()?;
        let now = Timestamp::now().as_millis();
        let tallies = Tallies::of(results);
        let mut gone: HashMap<EndpointId, &str> = HashMap::new();
        for r in results {
            if let Some(reason) = &r.disable_endpoint {
                gone.entry(r.delivery.endpoint_id).or_insert(reason);
            }
        }
        let ids: Vec<EndpointId> = gone.keys().copied().collect();
        let write = async { self.write_results(owner, results, now, tallies).await };
        let written = self.stopping(&ids, write).await?;
        if !gone.is_empty() {
            let disable = async {
                let txn = self.write_txn().await?;
                let mut disabled = Vec::new();
                for (id, reason) in &gone {
                    disabled.extend(disable_and_notify(&txn, *id, reason, public_url, now).await?);
                }
                txn.commit().await?;
                Ok(disabled)
            };
            let disabled = self.stopping(&ids, disable).await;
            self.endpoints_changed();
            match disabled {
                Ok(disabled) => {
                    for ep in &disabled {
                        disabled_event(self, ep).await;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, endpoints = ?ids, "could not disable endpoints that answered 410; their next 410 tries again")
                }
            }
        }
        Ok(results
            .iter()
            .filter(|r| !written.contains(&r.delivery.id))
            .map(|r| r.delivery.id)
            .collect())
    }
}
