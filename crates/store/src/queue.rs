//! The delivery queue: claiming due work with a lease, returning abandoned claims, and writing
//! a batch of attempt results in one transaction.

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use domain::classify::Classification;
use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::{AttemptId, DeliveryId, EndpointId, MessageId, OperationalEventId};
use sea_orm::sea_query::{Expr, SimpleExpr, Value};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, FromQueryResult, QueryFilter, QueryTrait, Set,
    Statement,
};

use crate::entities::Owned;
use crate::entities::{attempt, delivery, endpoint, endpoint_secret, message, operational_event};
use crate::{Backend, Result, Store};

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
    pub attempt: attempt::Model,
    pub next: Next,
    /// Set on a 410: the endpoint is disabled with this reason.
    pub disable_endpoint: Option<String>,
}

/// The earliest due time of pending work (through `idx_deliveries_due`).
pub(crate) const NEXT_DUE_SQL: &str =
    "SELECT MIN(next_attempt_at) AS at FROM deliveries WHERE state = 'pending'";

/// What a claim of new work takes: deliveries created since `since`, oldest first, except
/// those of the endpoints in `skip` (those whose line in this process is full: their new work
/// would only be deferred, and taking it first would keep other endpoints' new messages
/// waiting behind it; the claim of due work still takes it, oldest due first).
#[derive(Clone, Copy, Debug)]
pub struct Fresh<'a> {
    pub since: Timestamp,
    pub skip: &'a [EndpointId],
}

/// The claim with its values bound, as [`crate::System::claim_due`] runs it.
pub(crate) fn claim_statement(
    backend: sea_orm::DbBackend,
    owner: &str,
    now: Timestamp,
    lease_until: Timestamp,
    limit: u64,
    fresh: Option<Fresh<'_>>,
) -> Statement {
    let mut values: Vec<Value> = vec![
        owner.into(),
        lease_until.as_millis().into(),
        now.as_millis().into(),
        now.as_millis().into(),
        (limit as i64).into(),
    ];
    if let Some(f) = fresh {
        values.push(f.since.as_millis().into());
        values.extend(f.skip.iter().map(|e| Value::from(*e)));
    }
    let store_backend = match backend {
        sea_orm::DbBackend::Postgres => Backend::Postgres,
        _ => Backend::Sqlite,
    };
    Statement::from_sql_and_values(
        backend,
        claim_sql(store_backend, fresh.map(|f| f.skip.len())),
        values,
    )
}

/// `n` numbered parameters from `first` on, comma-separated (`?3, ?4` or `$3, $4`).
fn placeholders(backend: Backend, first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| match backend {
            Backend::Sqlite => format!("?{i}"),
            Backend::Postgres => format!("${i}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How long an expired endpoint lease row is kept before the reaper removes it.
const ENDPOINT_LEASE_KEPT: std::time::Duration = std::time::Duration::from_secs(600);

/// `fresh`: a claim of new work skipping this many endpoints (see [`Fresh`]).
fn claim_sql(backend: Backend, fresh: Option<usize>) -> String {
    // Numbered parameters on both backends, so the values bind by number, not text order.
    let p = |n: usize| match backend {
        Backend::Sqlite => format!("?{n}"),
        Backend::Postgres => format!("${n}"),
    };
    // Fresh: due deliveries created in the last few seconds (new messages), oldest of them
    // first, so that new messages never wait behind another tenant's or endpoint's backlog,
    // however often that backlog is deferred and comes due again. Otherwise oldest due first.
    let (window, order) = match fresh {
        Some(0) => (format!(" AND d.created_at >= {}", p(6)), "d.created_at"),
        Some(skip) => (
            format!(
                " AND d.created_at >= {} AND d.endpoint_id NOT IN ({})",
                p(6),
                placeholders(backend, 7, skip)
            ),
            "d.created_at",
        ),
        None => (String::new(), "d.next_attempt_at"),
    };
    let new_endpoints = format!(
        "GREATEST(1, {} / {})",
        p(5),
        domain::delivery::DEFAULT_MAX_CONCURRENCY
    );
    let ordered = "(d.seq IS NULL OR NOT EXISTS ( \
               SELECT 1 FROM deliveries p \
               WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key \
                 AND p.seq < d.seq AND p.state IN ('pending', 'sending', 'failed', 'paused')))";
    match backend {
        Backend::Sqlite => format!(
            "UPDATE deliveries SET state = 'sending', lease_owner = ?1, lease_expires_at = ?2, updated_at = ?3 \
             WHERE id IN ( \
               SELECT d.id FROM deliveries d \
               WHERE d.state = 'pending' AND d.next_attempt_at <= ?4{window} AND {ordered} \
               ORDER BY {order} LIMIT ?5) \
             RETURNING *"
        ),
        // Several dispatcher processes: each endpoint is sent to by one of them at a time (see
        // `endpoint_leases`), so its cap, throttle and breaker, kept in that process, hold for
        // the deployment. Candidates skip endpoints another process holds; the endpoints of
        // the rest are taken or renewed (in id order, so two claims never wait on each other
        // crosswise), and only deliveries of endpoints this claim then holds are claimed. A
        // lease of ours with at least half its time left is not written again (the renewer
        // extends it while we have its work). A claim takes new endpoints in proportion to its
        // room, one per default cap's worth and at least one (`new_endpoints`), oldest work
        // first: a process with little room leaves the endpoints it could not serve at their
        // caps to the others, which spreads endpoints over processes by their spare capacity.
        // Two processes racing for a free endpoint meet on its lease row: the later one sees
        // the winner's row and takes nothing of it.
        Backend::Postgres => format!(
            "WITH cand AS ( \
               SELECT d.id, d.endpoint_id, {order} AS o FROM deliveries d \
               WHERE d.state = 'pending' AND d.next_attempt_at <= $4{window} AND {ordered} \
                 AND NOT EXISTS (SELECT 1 FROM endpoint_leases l WHERE l.endpoint_id = d.endpoint_id \
                   AND l.owner <> $1 AND l.expires_at > $3) \
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
             RETURNING *"
        ),
    }
}

/// An endpoint with its signing secrets and custom headers opened, as the dispatcher needs it.
#[derive(Clone, Debug)]
pub struct DispatchEndpoint {
    pub endpoint: endpoint::Model,
    /// Current first, then any previous secret still in its grace period.
    pub secrets: Vec<String>,
    /// Its custom headers.
    pub headers: std::collections::BTreeMap<String, String>,
    /// How it authenticates beyond its signature.
    pub auth: Option<domain::endpoint_auth::EndpointAuth>,
    /// Its client certificate and receiver CA, for mutual TLS.
    pub mtls: Option<domain::endpoint_auth::Mtls>,
    /// Why its secrets or headers cannot be read (a key that is not configured, a value
    /// altered, unreadable JSON): nothing is sent to it without them; each attempt fails with
    /// this reason.
    pub unreadable: Option<String>,
}

impl DispatchEndpoint {
    /// `endpoint` with its opened `secrets` (or why they cannot be opened), its headers
    /// opened with `keys`.
    pub fn new(
        endpoint: endpoint::Model,
        secrets: Result<Vec<String>>,
        keys: &domain::seal::Keyring,
    ) -> DispatchEndpoint {
        let opened = secrets.and_then(|s| {
            let stored = endpoint.stored_headers()?;
            let headers = crate::sealed::open_headers(keys, &endpoint.id, stored)?;
            use crate::sealed::SealedJson;
            let auth = SealedJson::Auth.open(keys, &endpoint)?;
            Ok((s, headers, auth, SealedJson::Mtls.open(keys, &endpoint)?))
        });
        let (secrets, headers, auth, mtls, unreadable) = match opened {
            Ok((s, h, a, m)) => (s, h, a, m, None),
            Err(err) => (
                Vec::new(),
                Default::default(),
                None,
                None,
                Some(err.to_string()),
            ),
        };
        DispatchEndpoint {
            endpoint,
            secrets,
            headers,
            auth,
            mtls,
            unreadable,
        }
    }
}

/// Pairs endpoints with their signing secrets (opened with `keys`): current first, then any
/// previous one still in its grace period at `now`. An endpoint always has a live secret, so
/// one found without any was deleted between the two reads (its secrets go with it): it is
/// left out, as if not found, rather than sent unsigned.
pub(crate) fn with_secrets(
    endpoints: Vec<endpoint::Model>,
    mut secrets: Vec<endpoint_secret::Model>,
    now: Timestamp,
    keys: &domain::seal::Keyring,
) -> HashMap<EndpointId, DispatchEndpoint> {
    secrets.sort_by_key(|s| std::cmp::Reverse(s.id));
    let mut by_endpoint: HashMap<EndpointId, Vec<Result<String>>> = HashMap::new();
    for s in secrets {
        if s.expires_at.is_none_or(|e| e > now.as_millis()) {
            let opened = crate::sealed::open_secret(keys, &s);
            by_endpoint.entry(s.endpoint_id).or_default().push(opened);
        }
    }
    endpoints
        .into_iter()
        .filter_map(|e| {
            let secrets = by_endpoint.remove(&e.id)?.into_iter().collect();
            Some((e.id, DispatchEndpoint::new(e, secrets, keys)))
        })
        .collect()
}

impl Store {
    /// [`Store::record_results_in`] on PostgreSQL: the attempts, the
    /// endpoints' health and the statistics (`rest`) are CTEs of the statement that finishes the
    /// deliveries, so the batch is one round trip. Returns the ids of the deliveries written.
    async fn record_results_at_once(
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

    /// Skips a dead (failed) delivery so that its ordering key flows again.
    pub async fn skip_delivery(
        &self,
        tenant: domain::ids::TenantId,
        msg_id: MessageId,
        endpoint_id: EndpointId,
    ) -> Result<bool> {
        let res = delivery::Entity::update_in(tenant)
            .col_expr(
                delivery::Column::State,
                Expr::value(DeliveryState::Skipped.as_str()),
            )
            .col_expr(
                delivery::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(delivery::Column::MsgId.eq(msg_id))
            .filter(delivery::Column::EndpointId.eq(endpoint_id))
            .filter(delivery::Column::State.is_in([
                DeliveryState::Failed.as_str(),
                DeliveryState::Pending.as_str(),
            ]))
            .exec(&self.db)
            .await?;
        Ok(res.rows_affected == 1)
    }
}

/// [`Store::record_results_in`] on SQLite: one transaction on the writer thread, which takes
/// the write turn itself. Returns the ids of the deliveries written (those whose lease the
/// owner still held).
async fn write_results_lite(
    lite: &crate::lite::Lite,
    owner: &str,
    results: &[AttemptResult],
    now: i64,
    rest: Vec<Statement>,
) -> Result<HashSet<DeliveryId>> {
    let attempts: Vec<attempt::Model> = results.iter().map(|r| r.attempt.clone()).collect();
    let finishes: Vec<_> = results
        .iter()
        .map(|r| {
            let (state, next_at) = finish_of(r);
            let a = &r.attempt;
            let row = (state.as_str(), a.attempt_number, next_at, a.status_code);
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
            let params =
                rusqlite::params![owner, now, state, count, next_at, status, error, at, id];
            // Written only while this owner still holds the lease.
            if lite::execute_params(&txn, finish_sql, params)? == 1 {
                written.insert(id);
            }
        }
        for stmt in &rest {
            lite::execute(&txn, stmt)?;
        }
        txn.commit()?;
        Ok(written)
    })
    .await
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

/// A delivery's state and next attempt time after its attempt.
fn finish_of(r: &AttemptResult) -> (DeliveryState, i64) {
    match &r.next {
        Next::Succeeded => (DeliveryState::Succeeded, r.delivery.next_attempt_at),
        Next::Retry { at } => (DeliveryState::Pending, at.as_millis()),
        Next::Failed => (DeliveryState::Failed, r.delivery.next_attempt_at),
    }
}

/// Endpoint health after a batch: any success clears the failure streak; otherwise the
/// earliest failure starts one (if none is running).
fn health_updates(results: &[AttemptResult], backend: sea_orm::DbBackend) -> Vec<Statement> {
    let mut health: HashMap<EndpointId, (Option<i64>, Option<i64>)> = HashMap::new();
    for r in results {
        let d = &r.delivery;
        let entry = health.entry(d.endpoint_id).or_default();
        let at = r.attempt.started_at;
        if Classification::is_success(&r.attempt.classification) {
            entry.0 = Some(entry.0.map_or(at, |p: i64| p.max(at)));
        } else {
            entry.1 = Some(entry.1.map_or(at, |p: i64| p.min(at)));
        }
    }
    let mut out = Vec::new();
    for (endpoint_id, (last_success, first_failure)) in health {
        let update = match (last_success, first_failure) {
            (Some(ok), _) => endpoint::Entity::update_many()
                .col_expr(endpoint::Column::LastSuccessAt, Expr::value(ok))
                .col_expr(
                    endpoint::Column::FailingSince,
                    Expr::value(Option::<i64>::None),
                )
                .filter(endpoint::Column::Id.eq(endpoint_id)),
            (None, Some(fail)) => endpoint::Entity::update_many()
                .col_expr(endpoint::Column::FailingSince, Expr::value(fail))
                .filter(endpoint::Column::Id.eq(endpoint_id))
                .filter(endpoint::Column::FailingSince.is_null()),
            (None, None) => continue,
        };
        out.push(update.build(backend));
    }
    out
}

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
                a.app_id,
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
    classification: &str,
    retry_after_ms: Option<i64>,
) -> attempt::Model {
    attempt::Model {
        id: AttemptId::new(),
        tenant_id: d.tenant_id,
        app_id: d.app_id,
        endpoint_id: d.endpoint_id,
        msg_id: d.msg_id,
        delivery_id: d.id,
        attempt_number: d.attempt_count + 1,
        trigger: d.next_trigger,
        url: url.to_owned(),
        started_at: started_at.as_millis(),
        duration_ms,
        status_code: status.map(i32::from),
        response_excerpt: response_excerpt.map(without_nul),
        error_kind,
        error_detail: error_detail.map(without_nul),
        classification: classification.to_owned(),
        retry_after_ms,
        request_headers: None,
        response_headers: None,
    }
}

/// Disables an enabled endpoint with `reason`, records an `endpoint.disabled` operational event
/// and queues the email to the tenant's notification address, all in the caller's transaction.
/// Returns the endpoint disabled, or None when it was already disabled (nothing is sent twice);
/// the caller sends the operational webhook once the transaction commits ([`disabled_event`]).
async fn disable_and_notify(
    txn: &sea_orm::DatabaseTransaction,
    endpoint_id: EndpointId,
    reason: &str,
    public_url: &str,
    now: i64,
) -> Result<Option<endpoint::Model>> {
    use crate::entities::{email, tenant};
    let res = endpoint::Entity::update_many()
        .col_expr(endpoint::Column::Disabled, Expr::value(true))
        .col_expr(endpoint::Column::DisabledReason, Expr::value(reason))
        .col_expr(endpoint::Column::DisabledAt, Expr::value(now))
        .col_expr(endpoint::Column::UpdatedAt, Expr::value(now))
        .filter(endpoint::Column::Id.eq(endpoint_id))
        .filter(endpoint::Column::Disabled.eq(false))
        .exec(txn)
        .await?;
    if res.rows_affected == 0 {
        return Ok(None);
    }
    crate::gate::pause_or_resume(txn, endpoint_id, true, now).await?;
    let Some(ep) = endpoint::Entity::find_by_id(endpoint_id).one(txn).await? else {
        return Ok(None);
    };
    operational_event::Entity::insert(operational_event::ActiveModel {
        id: Set(OperationalEventId::new()),
        tenant_id: Set(ep.tenant_id),
        kind: Set(domain::operational::ENDPOINT_DISABLED.to_owned()),
        app_id: Set(Some(ep.app_id)),
        endpoint_id: Set(Some(ep.id)),
        detail: Set(serde_json::json!({ "reason": reason, "url": ep.url }).to_string()),
        created_at: Set(now),
    })
    .exec(txn)
    .await?;
    if let Some(t) = tenant::Entity::find_by_id(ep.tenant_id).one(txn).await? {
        let (subject, body) = domain::notify::render_endpoint_disabled(
            &ep.url,
            &ep.id.to_string(),
            &ep.app_id.to_string(),
            reason,
            public_url,
        );
        email::Entity::insert(crate::ops::email_row(
            Some(t.id),
            &t.notification_email,
            &subject,
            &body,
            now,
        ))
        .exec(txn)
        .await?;
    }
    Ok(Some(ep))
}

/// The `endpoint.disabled` operational webhook of an endpoint hookd disabled.
async fn disabled_event(store: &Store, ep: &endpoint::Model) {
    let fail_since = ep.failing_since.map(Timestamp::from_millis);
    let reason = ep.disabled_reason.clone().unwrap_or_default();
    store
        .emit_for_endpoint(ep, |endpoint| {
            domain::operational::OperationalEvent::EndpointDisabled {
                endpoint,
                fail_since,
                trigger: domain::operational::Trigger::Automatic,
                reason,
            }
        })
        .await
}

/// Enabled endpoints (of every tenant) failing since before `cutoff`: the auto-disable and
/// early-warning sweeps' candidates.
pub(crate) fn failing_before(cutoff: Timestamp) -> sea_orm::Select<endpoint::Entity> {
    endpoint::Entity::find()
        .filter(endpoint::Column::FailingSince.lte(cutoff.as_millis()))
        .filter(endpoint::Column::Disabled.eq(false))
}

/// The columns that hand a claimed delivery back to the queue, without counting an attempt.
fn back_to_pending(
    update: sea_orm::UpdateMany<delivery::Entity>,
) -> sea_orm::UpdateMany<delivery::Entity> {
    hand_back(update, DeliveryState::Pending)
}

/// Deliveries in `state`, written as a literal so that the partial index over that state
/// (`idx_deliveries_due`, `_leased`, `_failed`) applies: a bound parameter would not match
/// the index's WHERE in a prepared plan (m0007).
pub(crate) fn in_state(state: DeliveryState) -> SimpleExpr {
    Expr::cust(format!("state = '{}'", state.as_str()))
}

/// Sending deliveries whose lease ran out, back to pending (through `idx_deliveries_leased`).
pub(crate) fn expired_leases(now: Timestamp) -> sea_orm::UpdateMany<delivery::Entity> {
    back_to_pending(delivery::Entity::update_many())
        .filter(in_state(DeliveryState::Sending))
        .filter(delivery::Column::LeaseExpiresAt.lt(now.as_millis()))
}

/// The columns that end a claim (or any lease) and leave the delivery in `state`.
pub(crate) fn hand_back(
    update: sea_orm::UpdateMany<delivery::Entity>,
    state: DeliveryState,
) -> sea_orm::UpdateMany<delivery::Entity> {
    update
        .col_expr(delivery::Column::State, Expr::value(state.as_str()))
        .col_expr(
            delivery::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            delivery::Column::LeaseExpiresAt,
            Expr::value(Option::<i64>::None),
        )
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Claims up to `limit` due deliveries for `owner` until `lease_until`, oldest due first,
    /// or, with `fresh_since`, only those created since then. An ordered delivery
    /// is due only when no earlier sequence number of its (endpoint, key) is still pending,
    /// being sent or dead: that keeps per-key order and makes a dead head block its key.
    pub async fn claim_due(
        &self,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u64,
        fresh: Option<Fresh<'_>>,
    ) -> Result<Vec<delivery::Model>> {
        let stmt = claim_statement(
            self.db.get_database_backend(),
            owner,
            now,
            lease_until,
            limit,
            fresh,
        );
        let _turn = self.write_turn().await;
        let rows = delivery::Model::find_by_statement(stmt)
            .all(&self.db)
            .await?;
        Ok(rows)
    }

    /// Returns deliveries whose lease ran out (their worker died) to pending, without counting
    /// an attempt. Returns how many.
    pub async fn reap_expired_leases(&self, now: Timestamp) -> Result<u64> {
        let _turn = self.write_turn().await;
        let res = expired_leases(now).exec(&self.db).await?;
        if self.backend == Backend::Postgres {
            // Endpoint leases expire by their time alone; rows long expired (a deleted
            // endpoint's, an idle one's) are removed so the table stays as small as the set of
            // endpoints recently sent to.
            let stale = now.as_millis() - ENDPOINT_LEASE_KEPT.as_millis() as i64;
            self.db
                .execute(Statement::from_sql_and_values(
                    self.db.get_database_backend(),
                    "DELETE FROM endpoint_leases WHERE expires_at < $1",
                    [stale.into()],
                ))
                .await?;
        }
        Ok(res.rows_affected)
    }

    /// Gives back claims `owner` will not start (shutdown), without counting an attempt.
    pub async fn release_claims(&self, owner: &str, ids: &[DeliveryId]) -> Result<u64> {
        self.hand_back_claims(owner, ids, DeliveryState::Pending)
            .await
    }

    /// Ends `owner`'s claims on `ids` that it still holds, leaving them in `state`.
    pub(crate) async fn hand_back_claims(
        &self,
        owner: &str,
        ids: &[DeliveryId],
        state: DeliveryState,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let _turn = self.write_turn().await;
        let res = hand_back(delivery::Entity::update_many(), state)
            .filter(delivery::Column::Id.is_in(ids.iter().copied()))
            .filter(delivery::Column::LeaseOwner.eq(owner))
            .filter(delivery::Column::State.eq(DeliveryState::Sending.as_str()))
            .exec(&self.db)
            .await?;
        Ok(res.rows_affected)
    }

    /// The messages of a claimed batch, in one query.
    pub async fn messages_by_ids(
        &self,
        ids: &[MessageId],
    ) -> Result<HashMap<MessageId, message::Model>> {
        let rows = message::Entity::find()
            .filter(message::Column::Id.is_in(ids.iter().copied()))
            .all(&self.db)
            .await?;
        Ok(rows.into_iter().map(|m| (m.id, m)).collect())
    }

    /// Endpoints with their active secrets opened, from copies at most a second old (decisions
    /// 95); the rest in two queries. A change made through this process (an edit, a rotated
    /// secret, a disable) empties the copies at once; another process's within a second. A
    /// disable or delete needs no copy to be fresh: the gate stops every request to it (see
    /// `gate`).
    pub async fn dispatch_endpoints(
        &self,
        ids: &[EndpointId],
        now: Timestamp,
    ) -> Result<HashMap<EndpointId, std::sync::Arc<DispatchEndpoint>>> {
        let generation = self.dispatch.generation();
        let mut found = HashMap::with_capacity(ids.len());
        let mut missing = Vec::new();
        for id in ids {
            match self.dispatch.get(id) {
                Ok(ep) => {
                    found.insert(*id, ep);
                }
                Err(_) => missing.push(*id),
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let endpoints = endpoint::Entity::find()
            .filter(endpoint::Column::Id.is_in(missing.iter().copied()))
            .all(&self.db)
            .await?;
        let secrets = endpoint_secret::Entity::find()
            .filter(endpoint_secret::Column::EndpointId.is_in(missing.iter().copied()))
            .all(&self.db)
            .await?;
        for (id, ep) in with_secrets(endpoints, secrets, now, &self.seal) {
            let ep = std::sync::Arc::new(ep);
            self.dispatch.put(id, ep.clone(), generation);
            found.insert(id, ep);
        }
        Ok(found)
    }

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
        let backend = self.db.get_database_backend();
        let mut rest = health_updates(results, backend);
        rest.extend(crate::stats::stats_upserts(
            self.backend,
            &stats_of(results),
        ));
        let mut gone: HashMap<EndpointId, &str> = HashMap::new();
        for r in results {
            if let Some(reason) = &r.disable_endpoint {
                gone.entry(r.delivery.endpoint_id).or_insert(reason);
            }
        }
        let ids: Vec<EndpointId> = gone.keys().copied().collect();
        let write = async {
            match (&self.lite, self.backend) {
                (Some(lite), _) => write_results_lite(lite, owner, results, now, rest).await,
                (None, Backend::Postgres) => {
                    self.record_results_at_once(owner, results, now, rest).await
                }
                (None, Backend::Sqlite) => Err(crate::lite::stopped()),
            }
        };
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

    /// The earliest time a pending delivery becomes due, to know how long to sleep.
    pub async fn next_due_at(&self) -> Result<Option<Timestamp>> {
        let backend = self.db.get_database_backend();
        let sql = NEXT_DUE_SQL;
        let row = self
            .db
            .query_one(Statement::from_string(backend, sql))
            .await?;
        Ok(row
            .and_then(|r| r.try_get::<Option<i64>>("", "at").ok().flatten())
            .map(Timestamp::from_millis))
    }

    /// Extends to `until` `owner`'s leases on `endpoints` (PostgreSQL; see `endpoint_leases`)
    /// and answers which it still holds: one taken over by another process after it expired
    /// is not renewed, and its deliveries must no longer be handed to this one.
    pub async fn renew_endpoint_leases(
        &self,
        owner: &str,
        endpoints: &[EndpointId],
        until: Timestamp,
    ) -> Result<Vec<EndpointId>> {
        if self.backend != Backend::Postgres || endpoints.is_empty() {
            return Ok(endpoints.to_vec());
        }
        let backend = self.db.get_database_backend();
        let mut kept = Vec::with_capacity(endpoints.len());
        let mut sorted = endpoints.to_vec();
        sorted.sort();
        for chunk in sorted.chunks(500) {
            let list = placeholders(Backend::Postgres, 3, chunk.len());
            let sql = format!(
                "UPDATE endpoint_leases SET expires_at = $1 \
                 WHERE owner = $2 AND endpoint_id IN ({list}) RETURNING endpoint_id"
            );
            let mut values: Vec<Value> = vec![until.as_millis().into(), owner.into()];
            values.extend(chunk.iter().map(Value::from));
            let rows = self
                .db
                .query_all(Statement::from_sql_and_values(backend, sql, values))
                .await?;
            for r in rows {
                kept.push(r.try_get("", "endpoint_id")?);
            }
        }
        Ok(kept)
    }

    /// Gives up every endpoint lease `owner` holds (a dispatcher stopping, after its claims
    /// are recorded or given back), so other processes take its endpoints at once.
    pub async fn release_endpoint_leases(&self, owner: &str) -> Result<u64> {
        if self.backend != Backend::Postgres {
            return Ok(0);
        }
        let res = self
            .db
            .execute(Statement::from_sql_and_values(
                self.db.get_database_backend(),
                "DELETE FROM endpoint_leases WHERE owner = $1",
                [owner.into()],
            ))
            .await?;
        Ok(res.rows_affected())
    }

    /// Extends to `until` the leases `owner` holds on `ids`.
    pub async fn renew_leases(
        &self,
        owner: &str,
        ids: &[DeliveryId],
        until: Timestamp,
    ) -> Result<u64> {
        let _turn = self.write_turn().await;
        let backend = self.db.get_database_backend();
        let mut renewed = 0;
        for chunk in ids.chunks(500) {
            // Only the claims this process still holds in memory: a claim it lost track of
            // (an error between claim and send) expires and returns to pending by itself.
            let list = placeholders(self.backend, 3, chunk.len());
            // On PostgreSQL, skip rows a result write holds right now: they are being
            // finished, and waiting on them in arbitrary order deadlocks against that write.
            let sql = match self.backend {
                Backend::Sqlite => format!(
                    "UPDATE deliveries SET lease_expires_at = ?1 \
                     WHERE lease_owner = ?2 AND state = 'sending' AND id IN ({list})"
                ),
                Backend::Postgres => format!(
                    "UPDATE deliveries SET lease_expires_at = $1 WHERE id IN ( \
                       SELECT id FROM deliveries WHERE lease_owner = $2 AND state = 'sending' \
                       AND id IN ({list}) FOR UPDATE SKIP LOCKED)"
                ),
            };
            let mut values: Vec<Value> = vec![until.as_millis().into(), owner.into()];
            values.extend(chunk.iter().map(Value::from));
            let res = self
                .db
                .execute(Statement::from_sql_and_values(backend, sql, values))
                .await?;
            renewed += res.rows_affected();
        }
        Ok(renewed)
    }

    /// Puts claimed deliveries back, each until its time, without counting an attempt (flow
    /// control: breaker open, endpoint saturated, throttled).
    pub async fn defer_claims(
        &self,
        owner: &str,
        deferrals: &[(DeliveryId, Timestamp)],
    ) -> Result<()> {
        let _turn = self.write_turn().await;
        use sea_orm::sea_query::{CaseStatement, SimpleExpr};
        // One statement per chunk however many deliveries: the claim loop waits on this.
        for chunk in deferrals.chunks(200) {
            let mut case = CaseStatement::new();
            for (id, until) in chunk {
                case = case.case(delivery::Column::Id.eq(id), Expr::value(until.as_millis()));
            }
            let next_at: SimpleExpr = case
                .finally(Expr::col(delivery::Column::NextAttemptAt))
                .into();
            back_to_pending(delivery::Entity::update_many())
                .col_expr(delivery::Column::NextAttemptAt, next_at)
                .filter(delivery::Column::Id.is_in(chunk.iter().map(|(id, _)| *id)))
                .filter(delivery::Column::LeaseOwner.eq(owner))
                .filter(delivery::Column::State.eq(DeliveryState::Sending.as_str()))
                .exec(&self.db)
                .await?;
        }
        Ok(())
    }

    /// Records an endpoint's circuit-breaker state for the API and dashboard.
    pub async fn set_breaker_state(
        &self,
        endpoint_id: EndpointId,
        state: domain::breaker::BreakerPhase,
        until: Option<Timestamp>,
    ) -> Result<()> {
        endpoint::Entity::update_many()
            .col_expr(endpoint::Column::BreakerState, Expr::value(state))
            .col_expr(
                endpoint::Column::BreakerUntil,
                Expr::value(until.map(|u| u.as_millis())),
            )
            .filter(endpoint::Column::Id.eq(endpoint_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Moves an endpoint's due backlog to `until` (its breaker opened), so it is not claimed
    /// and deferred one by one. Returns how many moved.
    pub async fn defer_endpoint_backlog(
        &self,
        endpoint_id: EndpointId,
        until: Timestamp,
    ) -> Result<u64> {
        // On PostgreSQL, rows another transaction holds are skipped: that transaction is
        // claiming, deferring or finishing them. Waiting instead deadlocked against deferring
        // claims, because an UPDATE locks a row that changed under it before it rechecks its
        // WHERE, and so holds rows it then does not move.
        let sql = match self.backend {
            Backend::Sqlite => {
                "UPDATE deliveries SET next_attempt_at = ?1 \
                 WHERE endpoint_id = ?2 AND state = 'pending' AND next_attempt_at < ?1"
            }
            Backend::Postgres => {
                "UPDATE deliveries SET next_attempt_at = $1 WHERE id IN ( \
                   SELECT id FROM deliveries \
                   WHERE endpoint_id = $2 AND state = 'pending' AND next_attempt_at < $1 \
                   FOR UPDATE SKIP LOCKED)"
            }
        };
        let values: Vec<Value> = vec![until.as_millis().into(), endpoint_id.into()];
        let res = self
            .db
            .execute(Statement::from_sql_and_values(
                self.db.get_database_backend(),
                sql,
                values,
            ))
            .await?;
        Ok(res.rows_affected())
    }

    /// Scheduler sweep (all tenants): enabled endpoints failing since before `cutoff`.
    pub async fn failing_endpoints(
        &self,
        cutoff: Timestamp,
        limit: u64,
    ) -> Result<Vec<endpoint::Model>> {
        use sea_orm::QuerySelect;
        Ok(failing_before(cutoff).limit(limit).all(&self.db).await?)
    }

    /// Disables an endpoint for `reason`, records the operational event and queues the email to
    /// its tenant, in one transaction. False when it was already disabled.
    pub async fn disable_endpoint_and_notify(
        &self,
        endpoint_id: EndpointId,
        reason: &str,
        public_url: &str,
    ) -> Result<bool> {
        let txn = self.write_txn().await?;
        let done = self
            .stopping(&[endpoint_id], async {
                let done = disable_and_notify(
                    &txn,
                    endpoint_id,
                    reason,
                    public_url,
                    Timestamp::now().as_millis(),
                )
                .await?;
                txn.commit().await?;
                Ok(done)
            })
            .await?;
        self.endpoints_changed();
        if let Some(ep) = &done {
            disabled_event(self.0, ep).await;
        }
        Ok(done.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(id: &str, endpoint_id: &str, expires_at: Option<i64>) -> endpoint_secret::Model {
        endpoint_secret::Model {
            id: crate::testing::named(&format!("whsk_{id}")),
            tenant_id: crate::testing::named("tnt_t"),
            endpoint_id: crate::testing::named(endpoint_id),
            secret: format!("whsec_{id}"),
            created_at: 0,
            expires_at,
        }
    }

    #[test]
    fn secrets_come_newest_first_without_expired_ones_and_an_endpoint_without_any_is_left_out() {
        let now = Timestamp::from_millis(1_000);
        let found = with_secrets(
            vec![
                crate::testing::endpoint_model("ep_a", "https://example.com/"),
                crate::testing::endpoint_model("ep_gone", "https://example.com/"),
            ],
            vec![
                secret("s1", "ep_a", Some(500)),
                secret("s2", "ep_a", Some(2_000)),
                secret("s3", "ep_a", None),
            ],
            now,
            &crate::testing::keys(),
        );
        assert_eq!(
            found[&crate::testing::named::<EndpointId>("ep_a")].secrets,
            vec!["whsec_s3", "whsec_s2"]
        );
        assert!(
            !found.contains_key(&crate::testing::named::<EndpointId>("ep_gone")),
            "deleted between the two reads: not sent unsigned"
        );
    }

    #[test]
    fn secrets_and_headers_are_opened_and_a_key_not_configured_is_named_not_sent_without() {
        let keys = crate::testing::keys();
        let other =
            domain::seal::Keyring::parse("gone:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=")
                .unwrap();
        let now = Timestamp::from_millis(1_000);
        let mut a = crate::testing::endpoint_model("ep_a", "https://example.com/");
        let headers = [("X-Token".to_owned(), "t0ken".to_owned())].into();
        a.headers = crate::sealed::seal_headers(&keys, &a.id, &headers);
        assert!(!a.headers.contains("t0ken"), "{}", a.headers);
        let b = crate::testing::endpoint_model("ep_b", "https://example.com/");
        let mut sa = secret("s1", "ep_a", None);
        sa.secret = crate::sealed::seal_secret(&keys, &sa.id, "whsec_sealed");
        let mut sb = secret("s2", "ep_b", None);
        sb.secret = crate::sealed::seal_secret(&other, &sb.id, "whsec_other");
        let found = with_secrets(vec![a, b], vec![sa, sb], now, &keys);
        let a = &found[&crate::testing::named::<EndpointId>("ep_a")];
        assert_eq!(a.secrets, vec!["whsec_sealed"]);
        assert_eq!(a.headers, headers);
        assert_eq!(a.unreadable, None);
        let b = &found[&crate::testing::named::<EndpointId>("ep_b")];
        assert!(b.secrets.is_empty());
        let why = b.unreadable.clone().unwrap();
        assert!(why.contains("\"gone\""), "{why}");
    }
}
