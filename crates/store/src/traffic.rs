//! Messages, their fan-out into deliveries, and the attempts made to deliver them.

use domain::Timestamp;
use domain::delivery::{AttemptTrigger, DeliveryState, ErrorKind};
use domain::ids::{ApplicationId, AttemptId, DeliveryId, EndpointId, MessageId, TenantId};
use domain::routing::endpoint_matches;
use sea_orm::sea_query::{Expr, OnConflict, Query};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DatabaseTransaction, EntityTrait,
    QueryFilter, QuerySelect, QueryTrait, Select, Set,
};

use crate::entities::Owned;
use crate::entities::{attempt, delivery, endpoint, message, ordering_sequence};
use crate::error::check_owner;
use crate::page::{fetch_page, page_query};
use crate::{ListParams, Page, Result, Store, StoreError};

#[derive(Clone, Debug, Default)]
pub struct NewMessage {
    pub event_type: String,
    pub event_id: Option<String>,
    /// The payload bytes exactly as received; stored and sent verbatim.
    pub payload: Vec<u8>,
    pub channels: Vec<String>,
    pub tags: Vec<String>,
    pub ordering_key: Option<String>,
    /// Deliver to this endpoint only (if enabled), whatever its filters: an example or test
    /// message. None: every enabled endpoint whose filters accept the message.
    pub to_endpoint: Option<EndpointId>,
    /// Scheduled delivery: the deliveries become due then (and their retry budget starts
    /// then). None, or a time already past: due now.
    pub deliver_at: Option<Timestamp>,
    /// The W3C `traceparent` its deliveries' spans join. None: the store takes the current
    /// span's, while tracing is on (see `trace`).
    pub trace_parent: Option<String>,
}

#[derive(Clone, Debug)]
pub struct CreatedMessage {
    pub message: message::Model,
    pub deliveries: Vec<delivery::Model>,
}

/// One finished HTTP try, as the dispatcher reports it.
#[derive(Clone, Debug)]
pub struct NewAttempt {
    pub attempt_number: i32,
    pub trigger: AttemptTrigger,
    pub url: String,
    pub started_at: Timestamp,
    pub duration_ms: i32,
    pub status_code: Option<u16>,
    pub response_excerpt: Option<String>,
    pub error_kind: Option<ErrorKind>,
    pub error_detail: Option<String>,
    pub classification: domain::classify::Verdict,
    pub retry_after_ms: Option<i64>,
}

/// Filters for listing messages; all optional.
#[derive(Clone, Debug, Default)]
pub struct MessageFilter {
    pub event_types: Vec<String>,
    pub channel: Option<String>,
    pub tag: Option<String>,
    pub before: Option<Timestamp>,
    pub after: Option<Timestamp>,
    /// Only messages with at least one delivery in this state (dashboard filter).
    pub delivery_state: Option<DeliveryState>,
    /// Only the message with this id or this `eventId` (dashboard search).
    pub id_or_event_id: Option<String>,
    /// Only messages with a delivery to this endpoint (an endpoint's message log); with
    /// `delivery_state`, that delivery is the one in the state.
    pub endpoint: Option<EndpointId>,
}

impl MessageFilter {
    /// The conditions on the message row itself: event type, channel, tag, id or eventId.
    fn on_message(&self) -> Condition {
        let (indexed, labels) = (self.indexed(), self.labels());
        match (indexed.is_empty(), labels.is_empty()) {
            (_, true) => indexed,
            (true, false) => labels,
            (false, false) => indexed.add(labels),
        }
    }

    /// What an index of messages reads: id or eventId.
    fn indexed(&self) -> Condition {
        let mut cond = Condition::all();
        if let Some(needle) = &self.id_or_event_id {
            let mut any = Condition::any().add(message::Column::EventId.eq(needle.as_str()));
            if let Ok(id) = MessageId::parse(needle) {
                any = any.add(message::Column::Id.eq(id));
            }
            cond = cond.add(any);
        }
        cond
    }

    /// What is checked in each message row: event type, channel and tag (no index of event
    /// types since m0038, decisions 109). Channel and tag are validated to [A-Za-z0-9._:-], so
    /// the quoted JSON element is an exact match within the stored array.
    fn labels(&self) -> Condition {
        let mut cond = Condition::all();
        if !self.event_types.is_empty() {
            cond = cond.add(message::Column::EventType.is_in(self.event_types.clone()));
        }
        if let Some(channel) = &self.channel {
            cond = cond.add(message::Column::Channels.contains(format!("\"{channel}\"")));
        }
        if let Some(tag) = &self.tag {
            cond = cond.add(message::Column::Tags.contains(format!("\"{tag}\"")));
        }
        cond
    }

    /// `before` and `after` as bounds on a message-id column (ids sort by creation time).
    fn time_bounds(&self, msg_id: impl ColumnTrait) -> Condition {
        let mut cond = Condition::all();
        if let Some(before) = self.before {
            cond = cond.add(msg_id.lt(MessageId::lower_bound(before)));
        }
        if let Some(after) = self.after {
            let bound = after.plus(std::time::Duration::from_millis(1));
            cond = cond.add(msg_id.gte(MessageId::lower_bound(bound)));
        }
        cond
    }

    /// The filter applied to rows that name a message of application `app` in `msg_id`
    /// (deliveries, attempts): the time bounds on the id itself, the rest through the tenant's
    /// matching messages of that application (each probed by its key, `(app_id, id)`).
    /// `delivery_state` and `endpoint` are the caller's to apply.
    pub(crate) fn on_rows(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        msg_id: impl ColumnTrait,
    ) -> Condition {
        let mut cond = self.time_bounds(msg_id);
        let labels = self.on_message();
        if !labels.is_empty() {
            let matching = message::Entity::find_in(tenant)
                .select_only()
                .column(message::Column::Id)
                .filter(message::Column::AppId.eq(app))
                .filter(labels)
                .into_query();
            cond = cond.add(msg_id.in_subquery(matching));
        }
        cond
    }
}

impl Store {
    /// A message by its id or its eventId.
    pub async fn get_message(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        id_or_event_id: &str,
    ) -> Result<message::Model> {
        message_lookup(tenant, app_id, id_or_event_id)
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("message"))
    }

    /// Newest first. Time bounds become id bounds, since ids sort by creation time.
    pub async fn list_messages(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        filter: &MessageFilter,
        params: &ListParams,
    ) -> Result<Page<message::Model>> {
        fetch_message_page(&self.db, tenant, app_id, filter, params).await
    }

    /// The database's plan for one page of [`Store::list_messages`], for operators and for the
    /// test that proves paging is an index range scan, not a full scan.
    pub async fn explain_message_listing(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        filter: &MessageFilter,
        params: &ListParams,
    ) -> Result<String> {
        let select = page_query(
            message_listing(tenant, app_id, filter),
            message::Column::Id,
            params,
        );
        let stmt = select.build(self.db.get_database_backend());
        explain(&self.db, stmt).await
    }

    /// The tenant's messages of application `app` with these ids, by id (a page's messages,
    /// in one query).
    pub async fn messages_by_id(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        ids: &[MessageId],
    ) -> Result<std::collections::HashMap<MessageId, message::Model>> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        Ok(message::Entity::find_in(tenant)
            .filter(self.sql.messages_of(app, ids))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| (m.id, m))
            .collect())
    }

    /// The outcomes of a message at each endpoint it went (or goes) to, by endpoint (see
    /// `outcomes`: a delivery that succeeded is not kept, and a row stands for it).
    pub async fn deliveries_of_message(
        &self,
        tenant: TenantId,
        msg_id: MessageId,
    ) -> Result<Vec<delivery::Model>> {
        let mut rows = crate::outcomes::of_messages(&self.db, tenant, &[msg_id], &[], None).await?;
        rows.sort_unstable_by_key(|d| d.endpoint_id);
        Ok(rows)
    }

    /// The outcomes of a page of messages (a message log's statuses), at most `limit`; only
    /// those at `endpoint` when given. Ordered by message, newest first, then endpoint.
    pub async fn deliveries_of_messages(
        &self,
        tenant: TenantId,
        msg_ids: &[MessageId],
        endpoint: Option<EndpointId>,
        limit: u64,
    ) -> Result<Vec<delivery::Model>> {
        let mut rows = crate::outcomes::of_messages(
            &self.db,
            tenant,
            msg_ids,
            endpoint.as_slice(),
            Some(limit),
        )
        .await?;
        rows.sort_unstable_by(|a, b| {
            b.msg_id
                .cmp(&a.msg_id)
                .then(a.endpoint_id.cmp(&b.endpoint_id))
        });
        rows.truncate(limit as usize);
        Ok(rows)
    }

    /// The endpoints a message was (or is to be) delivered to, each with its outcome there,
    /// paged by endpoint id (Svix's attempted destinations).
    pub async fn message_destinations(
        &self,
        tenant: TenantId,
        msg_id: MessageId,
        params: &ListParams,
    ) -> Result<Page<(endpoint::Model, delivery::Model)>> {
        let select = endpoint::Entity::find_in(tenant)
            .filter(crate::outcomes::destinations(endpoint::Column::Id, msg_id));
        let mut page = fetch_page(
            &self.db,
            select,
            endpoint::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await?;
        let ids: Vec<EndpointId> = page.data.iter().map(|e| e.id).collect();
        if ids.is_empty() {
            return Ok(page.with_data(Vec::new()));
        }
        let mut outcomes: std::collections::HashMap<EndpointId, delivery::Model> =
            crate::outcomes::of_messages(&self.db, tenant, &[msg_id], &ids, None)
                .await?
                .into_iter()
                .map(|d| (d.endpoint_id, d))
                .collect();
        // A delivery removed between the two reads (its application deleted) drops out.
        let data = std::mem::take(&mut page.data)
            .into_iter()
            .filter_map(|ep| outcomes.remove(&ep.id).map(|d| (ep, d)))
            .collect();
        Ok(page.with_data(data))
    }

    /// Stores one attempt and updates its delivery's counters in the same transaction.
    pub async fn record_attempt(
        &self,
        tenant: TenantId,
        dlv: &delivery::Model,
        new: NewAttempt,
    ) -> Result<attempt::Model> {
        check_owner(tenant, &dlv.tenant_id, "delivery")?;
        let txn = self.write_txn().await?;
        let model = attempt::ActiveModel {
            id: Set(AttemptId::new()),
            tenant_id: Set(tenant),
            endpoint_id: Set(dlv.endpoint_id),
            msg_id: Set(dlv.msg_id),
            attempt_number: Set(new.attempt_number),
            trigger: Set(new.trigger),
            url: Set(new.url),
            started_at: Set(new.started_at.as_millis()),
            duration_ms: Set(new.duration_ms),
            status_code: Set(new.status_code.map(i32::from)),
            response_excerpt: Set(new.response_excerpt),
            error_kind: Set(new.error_kind),
            error_detail: Set(new.error_detail.clone()),
            classification: Set(new.classification),
            retry_after_ms: Set(new.retry_after_ms),
            request_headers: Set(None),
            response_headers: Set(None),
        }
        .insert(&*txn)
        .await?;
        delivery::Entity::update_many()
            .col_expr(
                delivery::Column::AttemptCount,
                Expr::value(new.attempt_number),
            )
            .col_expr(delivery::Column::LastStatus, Expr::value(model.status_code))
            .col_expr(delivery::Column::LastError, Expr::value(model.error_kind))
            .col_expr(
                delivery::Column::LastAttemptAt,
                Expr::value(model.started_at),
            )
            .col_expr(
                delivery::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(delivery::Column::Id.eq(dlv.id))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(model)
    }

    /// Attempts of a message of application `app`.
    pub async fn list_attempts_by_message(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        msg_id: MessageId,
        filter: &crate::AttemptFilter,
        params: &ListParams,
    ) -> Result<Page<attempt::Model>> {
        let select = filter.apply(tenant, app, attempts_of_message(tenant, msg_id));
        fetch_page(
            &self.db,
            select,
            attempt::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    /// Attempts of an endpoint of application `app`.
    pub async fn list_attempts_by_endpoint(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        endpoint_id: EndpointId,
        filter: &crate::AttemptFilter,
        params: &ListParams,
    ) -> Result<Page<attempt::Model>> {
        let select = filter.apply(tenant, app, attempts_of_endpoint(tenant, endpoint_id));
        fetch_page(
            &self.db,
            select,
            attempt::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }
}

/// Whether `ep` takes a message of `event_type` on `channels` (its event-type filter and
/// channels, see [`endpoint_matches`]).
pub(crate) fn endpoint_accepts(
    ep: &endpoint::Model,
    event_type: &str,
    channels: &[String],
) -> Result<bool> {
    let filter_types = ep.filter_types()?;
    let ep_channels = ep.channels()?;
    Ok(endpoint_matches(
        filter_types.as_deref(),
        ep_channels.as_deref(),
        event_type,
        channels,
    ))
}

/// A new pending delivery of `msg` to `ep`, due `now`. Its `created_at` is never before its
/// message's: a message id minted a millisecond after `now` carries that later time, and
/// recovery and replay-from-message select deliveries by `created_at >=` a message's.
pub(crate) fn new_delivery(
    tenant: TenantId,
    msg: &message::Model,
    ep: &endpoint::Model,
    seq: Option<i64>,
    now: Timestamp,
    give_up_at: Timestamp,
    trigger: AttemptTrigger,
) -> delivery::Model {
    delivery::Model {
        id: DeliveryId::new(),
        tenant_id: tenant,
        endpoint_id: ep.id,
        msg_id: msg.id,
        state: DeliveryState::Pending,
        attempt_count: 0,
        attempts_at_arm: 0,
        next_trigger: trigger,
        next_attempt_at: now.as_millis(),
        lease_owner: None,
        lease_expires_at: None,
        give_up_at: give_up_at.as_millis(),
        ordering_key: msg.ordering_key.clone(),
        seq,
        last_status: None,
        last_error: None,
        last_attempt_at: None,
        created_at: now.as_millis().max(msg.created_at),
        updated_at: now.as_millis(),
    }
}

/// The database's plan for `stmt`, one line per step.
pub(crate) async fn explain(db: &impl ConnectionTrait, stmt: sea_orm::Statement) -> Result<String> {
    let (prefix, column) = crate::dialect_of_connection(db).explain;
    let explain = sea_orm::Statement {
        sql: format!("{prefix}{}", stmt.sql),
        ..stmt
    };
    let rows = db.query_all(explain).await?;
    let lines: Vec<String> = rows
        .iter()
        .map(|r| r.try_get::<String>("", column))
        .collect::<std::result::Result<_, _>>()?;
    Ok(lines.join("\n"))
}

/// A message by its id or its eventId (`uq_messages_app_event` skips messages without one).
pub(crate) fn message_lookup(
    tenant: TenantId,
    app_id: ApplicationId,
    id_or_event_id: &str,
) -> sea_orm::Select<message::Entity> {
    let by = if id_or_event_id.starts_with(MessageId::PREFIX) {
        // An id that does not parse names no message.
        match MessageId::parse(id_or_event_id) {
            Ok(id) => message::Column::Id.eq(id),
            Err(_) => sea_orm::sea_query::Expr::cust("1 = 0"),
        }
    } else {
        message::Column::EventId.eq(id_or_event_id)
    };
    message::Entity::find_in(tenant)
        .filter(message::Column::AppId.eq(app_id))
        .filter(by)
}

pub(crate) fn attempts_of_message(
    tenant: TenantId,
    msg_id: MessageId,
) -> sea_orm::Select<attempt::Entity> {
    attempt::Entity::find_in(tenant).filter(attempt::Column::MsgId.eq(msg_id))
}

pub(crate) fn attempts_of_endpoint(
    tenant: TenantId,
    endpoint_id: EndpointId,
) -> sea_orm::Select<attempt::Entity> {
    attempt::Entity::find_in(tenant).filter(attempt::Column::EndpointId.eq(endpoint_id))
}

/// `app_id` is endpoint `endpoint`'s application, a subquery PostgreSQL and SQLite evaluate
/// once: how a read that starts from an endpoint's deliveries (which name an endpoint, not an
/// application) names their messages, keyed by `(app_id, id)` on PostgreSQL (m0037).
pub(crate) fn of_endpoint_app(
    app_id: impl sea_orm::sea_query::IntoColumnRef,
    endpoint: EndpointId,
) -> sea_orm::sea_query::SimpleExpr {
    let app = Query::select()
        .column(endpoint::Column::AppId)
        .from(endpoint::Entity)
        .and_where(endpoint::Column::Id.eq(endpoint))
        .to_owned();
    Expr::col(app_id).eq(sea_orm::sea_query::SimpleExpr::SubQuery(
        None,
        Box::new(app.into_sub_query_statement()),
    ))
}

/// The filtered, unpaged query behind [`Store::list_messages`].
pub(crate) fn message_listing(
    tenant: TenantId,
    app_id: ApplicationId,
    filter: &MessageFilter,
) -> Select<message::Entity> {
    let (range, check) = message_walk(tenant, app_id, filter);
    match check {
        Some(check) => range.filter(check),
        None => range,
    }
}

/// [`message_listing`] in its two parts: the messages its indexes read in order (the
/// application's, in the time bounds, the one id or eventId), and what is checked in each of
/// them, if anything (an event type, a channel, a tag; an outcome at the endpoint or in the
/// state, probed per message through the (msg_id, endpoint_id) index and the attempts'
/// message index). A page of a checked listing reads at most a walk window of the range
/// ([`crate::page::fetch_walked_page`]).
pub(crate) fn message_walk(
    tenant: TenantId,
    app_id: ApplicationId,
    filter: &MessageFilter,
) -> (Select<message::Entity>, Option<Condition>) {
    let range = message::Entity::find_in(tenant)
        .filter(message::Column::AppId.eq(app_id))
        .filter(filter.indexed())
        .filter(filter.time_bounds(message::Column::Id));
    let mut check = filter.labels();
    if filter.delivery_state.is_some() || filter.endpoint.is_some() {
        check = check.add(crate::outcomes::has_outcome(
            (message::Entity, message::Column::Id),
            filter.endpoint,
            filter.delivery_state,
        ));
    }
    (range, (!check.is_empty()).then_some(check))
}

/// One page of [`message_listing`]: a checked one through a walk window.
pub(crate) async fn fetch_message_page(
    db: &impl ConnectionTrait,
    tenant: TenantId,
    app_id: ApplicationId,
    filter: &MessageFilter,
    params: &ListParams,
) -> Result<Page<message::Model>> {
    let key = |m: &message::Model| m.id.to_string();
    match message_walk(tenant, app_id, filter) {
        (range, None) => fetch_page(db, range, message::Column::Id, key, params).await,
        (range, Some(check)) => {
            crate::page::fetch_walked_page::<_, _, MessageId>(
                db,
                range,
                check,
                message::Column::Id,
                key,
                params,
            )
            .await
        }
    }
}

/// The next sequence number of (endpoint, key), starting at 1, race-free on both databases:
/// one upsert that increments and returns the counter inside the caller's transaction.
pub(crate) async fn next_sequence(
    txn: &DatabaseTransaction,
    tenant: TenantId,
    endpoint_id: EndpointId,
    key: &str,
) -> Result<i64> {
    let stmt = txn
        .get_database_backend()
        .build(&next_sequence_upsert(tenant, endpoint_id, key));
    let row = txn
        .query_one(stmt)
        .await?
        .ok_or_else(|| StoreError::Corrupt("ordering sequence upsert returned no row".into()))?;
    Ok(row.try_get::<i64>("", "last_seq")?)
}

/// The upsert behind [`next_sequence`], returning `last_seq`.
pub(crate) fn next_sequence_upsert(
    tenant: TenantId,
    endpoint_id: EndpointId,
    key: &str,
) -> sea_orm::sea_query::InsertStatement {
    use ordering_sequence::Column as C;
    Query::insert()
        .into_table(ordering_sequence::Entity)
        .columns([C::EndpointId, C::OrderingKey, C::TenantId, C::LastSeq])
        .values_panic([endpoint_id.into(), key.into(), tenant.into(), 1i64.into()])
        .on_conflict(
            OnConflict::columns([C::EndpointId, C::OrderingKey])
                .value(
                    C::LastSeq,
                    Expr::col((ordering_sequence::Entity, C::LastSeq)).add(1),
                )
                .to_owned(),
        )
        .returning_col(C::LastSeq)
        .to_owned()
}

#[cfg(test)]
mod delivery_time_tests {
    use super::*;

    #[test]
    fn a_delivery_is_never_created_before_its_message() {
        let mut msg = crate::testing::message_model();
        let now = Timestamp::from_millis(1_000);
        msg.created_at = 1_001;
        let ep = crate::testing::endpoint_model("ep_1", "https://example.com/");
        let d = new_delivery(
            msg.tenant_id,
            &msg,
            &ep,
            None,
            now,
            now,
            AttemptTrigger::Scheduled,
        );
        assert_eq!(d.created_at, 1_001);
        assert_eq!(d.next_attempt_at, 1_000, "still due at once");
    }
}
