//! A message's outcome at an endpoint: its delivery while one is kept, else its success.
//!
//! A delivery that succeeds is not kept (m0034, decisions 104): the same transaction that
//! writes its success attempt deletes it, since the attempt says the same. So a pair
//! (message, endpoint) stands as
//! - its delivery row, while there is one (pending, sending, paused, failed, skipped, or a
//!   succeeded row from before m0034 that had no success attempt to stand for it);
//! - else succeeded, when a success attempt of the pair exists;
//! - else nothing was ever sent there (or it was removed with its attempts).
//!
//! A resend of a message that succeeded creates a new delivery row, which then stands for the
//! pair until it too succeeds. Every reader of outcomes goes through this module: the probes
//! (message listings, replay's "never delivered") and the rows (a message's destinations, a
//! message log's statuses, an endpoint's message list).

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use domain::classify::Verdict;
use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::{AttemptId, DeliveryId, EndpointId, MessageId, TenantId};
use sea_orm::sea_query::{
    Alias, Expr, IntoColumnRef, Query, SelectStatement, SimpleExpr, UnionType,
};
use sea_orm::{
    ColumnTrait, ConnectionTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait, Select,
};

use crate::Result;
use crate::entities::Owned;
use crate::entities::{attempt, delivery};

/// The deliveries as readers see them (m0040, decisions 114): on PostgreSQL with those only
/// journaled, in `sending`. Named `deliveries` in the statement, so that columns qualified by
/// the entity read the view.
fn from_seen(q: &mut SelectStatement) -> &mut SelectStatement {
    q.from_clear()
        .from_as(Alias::new("deliveries_seen"), delivery::Entity)
}

/// `select` reading the deliveries as readers see them (see [`from_seen`]).
pub(crate) fn seen(mut select: Select<delivery::Entity>) -> Select<delivery::Entity> {
    from_seen(QueryTrait::query(&mut select));
    select
}

/// `SELECT 1 FROM deliveries WHERE msg_id = <msg> [AND endpoint_id = <endpoint>]`: one probe
/// of `uq_deliveries_msg_endpoint`.
fn kept_delivery(msg: SimpleExpr, endpoint: Option<SimpleExpr>) -> SelectStatement {
    let mut q = Query::select()
        .expr(Expr::val(1))
        .from(delivery::Entity)
        .and_where(Expr::col((delivery::Entity, delivery::Column::MsgId)).eq(msg))
        .to_owned();
    if let Some(ep) = endpoint {
        q.and_where(Expr::col((delivery::Entity, delivery::Column::EndpointId)).eq(ep));
    }
    from_seen(&mut q);
    q
}

/// `SELECT 1 FROM attempts s WHERE s.msg_id = <msg> [AND s.endpoint_id = <endpoint>] AND
/// s.classification = 'success'` (a probe of `idx_attempts_msg`); with `unless_kept`, only
/// where no kept delivery of the same pair stands instead (a probe of
/// `uq_deliveries_msg_endpoint` per success).
pub(crate) fn success(
    msg: SimpleExpr,
    endpoint: Option<SimpleExpr>,
    unless_kept: bool,
) -> SelectStatement {
    let s = Alias::new("s");
    let mut q = Query::select()
        .expr(Expr::val(1))
        .from_as(attempt::Entity, s.clone())
        .and_where(Expr::col((s.clone(), attempt::Column::MsgId)).eq(msg))
        .and_where(
            Expr::col((s.clone(), attempt::Column::Classification)).eq(Expr::val(Verdict::Success)),
        )
        .to_owned();
    if let Some(ep) = endpoint {
        q.and_where(Expr::col((s.clone(), attempt::Column::EndpointId)).eq(ep));
    }
    if unless_kept {
        let kept = kept_delivery(
            Expr::col((s.clone(), attempt::Column::MsgId)).into(),
            Some(Expr::col((s, attempt::Column::EndpointId)).into()),
        );
        q.and_where(Expr::exists(kept).not());
    }
    q
}

/// Whether the message in column `msg` has an outcome at `endpoint` (at any endpoint when
/// None) — in `state` when given: the condition of a message listing's state and endpoint
/// filters, of an endpoint's message list, and (negated, without a state) of replay's
/// "never delivered".
pub(crate) fn has_outcome(
    msg: impl IntoColumnRef,
    endpoint: Option<EndpointId>,
    state: Option<DeliveryState>,
) -> SimpleExpr {
    let msg: SimpleExpr = Expr::col(msg.into_column_ref()).into();
    let ep = || endpoint.map(|e| SimpleExpr::from(Expr::val(e)));
    let kept = |state: Option<DeliveryState>| {
        let mut q = kept_delivery(msg.clone(), ep());
        if let Some(state) = state {
            q.and_where(Expr::col((delivery::Entity, delivery::Column::State)).eq(state.as_str()));
        }
        Expr::exists(q)
    };
    match state {
        None => kept(None).or(Expr::exists(success(msg.clone(), ep(), false))),
        Some(DeliveryState::Succeeded) => {
            kept(Some(DeliveryState::Succeeded)).or(Expr::exists(success(msg.clone(), ep(), true)))
        }
        Some(state) => kept(Some(state)),
    }
}

/// The endpoints in column `endpoint` a message was (or is to be) delivered to: those of its
/// kept deliveries and those of its success attempts.
pub(crate) fn destinations(endpoint: impl IntoColumnRef, msg: MessageId) -> SimpleExpr {
    let ep = endpoint.into_column_ref();
    let mut kept = Query::select()
        .column(delivery::Column::EndpointId)
        .from(delivery::Entity)
        .and_where(delivery::Column::MsgId.eq(msg))
        .to_owned();
    from_seen(&mut kept);
    let succeeded = Query::select()
        .column(attempt::Column::EndpointId)
        .from(attempt::Entity)
        .and_where(attempt::Column::MsgId.eq(msg))
        .and_where(attempt::Column::Classification.eq(Verdict::Success))
        .to_owned();
    Expr::col(ep.clone())
        .in_subquery(kept)
        .or(Expr::col(ep).in_subquery(succeeded))
}

/// The columns of a success attempt that a delivery standing for it shows.
type Success = (AttemptId, MessageId, EndpointId, i32, Option<i32>, i64);

/// The outcomes of `msgs` at `endpoints` (at every endpoint when empty), at most `limit` kept
/// deliveries and `limit` successes read: the kept deliveries, and for each pair without one
/// a delivery row standing for its latest success (see [`standing`]). Unordered.
pub(crate) async fn of_messages(
    db: &impl ConnectionTrait,
    tenant: TenantId,
    msgs: &[MessageId],
    endpoints: &[EndpointId],
    limit: Option<u64>,
) -> Result<Vec<delivery::Model>> {
    if msgs.is_empty() {
        return Ok(Vec::new());
    }
    let mut kept = seen(delivery::Entity::find_in(tenant))
        .filter(delivery::Column::MsgId.is_in(msgs.iter().copied()))
        .order_by_desc(delivery::Column::MsgId)
        .order_by_asc(delivery::Column::EndpointId);
    let mut succeeded = attempt::Entity::find_in(tenant)
        .select_only()
        .columns([
            attempt::Column::Id,
            attempt::Column::MsgId,
            attempt::Column::EndpointId,
            attempt::Column::AttemptNumber,
            attempt::Column::StatusCode,
            attempt::Column::StartedAt,
        ])
        .filter(attempt::Column::MsgId.is_in(msgs.iter().copied()))
        .filter(attempt::Column::Classification.eq(Verdict::Success))
        .order_by_desc(attempt::Column::MsgId)
        .order_by_asc(attempt::Column::EndpointId);
    if !endpoints.is_empty() {
        kept = kept.filter(delivery::Column::EndpointId.is_in(endpoints.iter().copied()));
        succeeded = succeeded.filter(attempt::Column::EndpointId.is_in(endpoints.iter().copied()));
    }
    if let Some(limit) = limit {
        kept = kept.limit(limit);
        succeeded = succeeded.limit(limit);
    }
    let mut out = kept.all(db).await?;
    let successes: Vec<Success> = succeeded.into_tuple().all(db).await?;
    let taken: HashSet<(MessageId, EndpointId)> =
        out.iter().map(|d| (d.msg_id, d.endpoint_id)).collect();
    let mut latest: HashMap<(MessageId, EndpointId), Success> = HashMap::new();
    for s in successes {
        let pair = (s.1, s.2);
        if taken.contains(&pair) {
            continue;
        }
        match latest.get(&pair) {
            Some(seen) if seen.0 >= s.0 => {}
            _ => {
                latest.insert(pair, s);
            }
        }
    }
    out.extend(latest.into_values().map(|s| standing(tenant, s)));
    Ok(out)
}

/// The delivery row a success attempt stands for once its delivery is no longer kept: in
/// state succeeded, its attempts counted by the attempt's number, its last answer the
/// attempt's, created when its message was. It is never written; its id is the attempt's
/// (so that it is stable from page to page), and what only a live delivery has (lease,
/// ordering sequence, retry budget) is empty.
fn standing(tenant: TenantId, s: Success) -> delivery::Model {
    let (attempt_id, msg_id, endpoint_id, number, status, started_at) = s;
    let created_at = msg_id.created_at().as_millis();
    delivery::Model {
        id: DeliveryId::from_bytes(attempt_id.to_bytes()),
        tenant_id: tenant,
        endpoint_id,
        msg_id,
        state: DeliveryState::Succeeded,
        attempt_count: number,
        attempts_at_arm: 0,
        next_trigger: AttemptTrigger::Scheduled,
        next_attempt_at: started_at,
        lease_owner: None,
        lease_expires_at: None,
        give_up_at: started_at,
        ordering_key: None,
        seq: None,
        last_status: status,
        last_error: None,
        last_attempt_at: Some(started_at),
        created_at,
        updated_at: started_at,
    }
}

/// `kept`, a count of kept deliveries per endpoint (`endpoint_id, n`), with the messages that
/// succeeded at each of `endpoints` added as rows of their own (see [`successes_query`]): one
/// statement, so one snapshot — counted in two reads, a delivery that succeeded in between
/// would count twice (its kept row, then its success).
pub(crate) fn with_successes_per_endpoint(
    kept: SelectStatement,
    tenant: TenantId,
    endpoints: &[EndpointId],
    since: Option<Timestamp>,
    until: Option<Timestamp>,
) -> SelectStatement {
    let mut q = kept;
    q.union(
        UnionType::All,
        successes_query(tenant, endpoints, since, until),
    );
    q
}

/// `kept`, a count of one endpoint's kept deliveries per state (`state, n`), with the messages
/// that succeeded there added as a row in state succeeded: one statement, as
/// [`with_successes_per_endpoint`].
pub(crate) fn with_successes_by_state(
    kept: SelectStatement,
    tenant: TenantId,
    endpoint: EndpointId,
    since: Option<Timestamp>,
    until: Option<Timestamp>,
) -> SelectStatement {
    let x = Alias::new("x");
    let succeeded = Query::select()
        .expr(Expr::val(DeliveryState::Succeeded.as_str()))
        .column((x.clone(), Alias::new("n")))
        .from_subquery(successes_query(tenant, &[endpoint], since, until), x)
        .to_owned();
    let mut q = kept;
    q.union(UnionType::All, succeeded);
    q
}

/// How many messages succeeded at each of `endpoints` without a kept delivery standing for
/// them (see the module), of those created in `[since, until)` when given: the distinct
/// messages of the endpoints' success attempts, read through `idx_attempts_endpoint` (an
/// attempt is never older than its message, so `since` also bounds the attempts' ids).
/// `endpoint_id, n` for each endpoint with any.
pub(crate) fn successes_query(
    tenant: TenantId,
    endpoints: &[EndpointId],
    since: Option<Timestamp>,
    until: Option<Timestamp>,
) -> SelectStatement {
    let s = Alias::new("s");
    let mut q = Query::select()
        .column((s.clone(), attempt::Column::EndpointId))
        .expr_as(Expr::cust("COUNT(DISTINCT s.msg_id)"), Alias::new("n"))
        .from_as(attempt::Entity, s.clone())
        .and_where(Expr::col((s.clone(), attempt::Column::TenantId)).eq(tenant))
        .and_where(
            Expr::col((s.clone(), attempt::Column::EndpointId)).is_in(endpoints.iter().copied()),
        )
        .and_where(
            Expr::col((s.clone(), attempt::Column::Classification)).eq(Expr::val(Verdict::Success)),
        )
        .group_by_col((s.clone(), attempt::Column::EndpointId))
        .to_owned();
    if let Some(since) = since {
        q.and_where(Expr::col((s.clone(), attempt::Column::Id)).gte(AttemptId::lower_bound(since)));
        q.and_where(
            Expr::col((s.clone(), attempt::Column::MsgId)).gte(MessageId::lower_bound(since)),
        );
    }
    if let Some(until) = until {
        q.and_where(
            Expr::col((s.clone(), attempt::Column::MsgId)).lt(MessageId::lower_bound(until)),
        );
    }
    let kept = kept_delivery(
        Expr::col((s.clone(), attempt::Column::MsgId)).into(),
        Some(Expr::col((s, attempt::Column::EndpointId)).into()),
    );
    q.and_where(Expr::exists(kept).not());
    q
}
