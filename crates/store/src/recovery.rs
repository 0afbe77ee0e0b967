//! Manual delivery work: resend one message, recover failed deliveries, replay missing ones,
//! and the per-endpoint views (stats, deliveries with their messages, attempt filters).

use std::collections::HashMap;
use std::time::Duration;

use domain::Timestamp;
use domain::classify::Verdict;
use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::{ApplicationId, DeliveryId, EndpointId, JobId, MessageId, TenantId};
use domain::jobs::JobState;
use sea_orm::sea_query::{Alias, Expr, Query, SelectStatement};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Select,
};

use crate::entities::Owned;
use crate::entities::{attempt, delivery, endpoint, job, message};
use crate::error::check_owner;
use crate::gate::enabled_endpoint_in;
use crate::traffic::new_delivery;
use crate::{ListParams, Page, Result, Store, StoreError, from_json, page::fetch_page};

/// Delivery counts of one endpoint by state (Svix's `EndpointStats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    pub success: i64,
    pub pending: i64,
    pub sending: i64,
    pub fail: i64,
    pub canceled: i64,
}

/// Filters for attempt listings; all optional.
#[derive(Clone, Debug, Default)]
pub struct AttemptFilter {
    /// `Some(true)`: successful attempts only; `Some(false)`: failed ones only.
    pub success: Option<bool>,
    /// 0 = attempts without an HTTP status (network errors); 100, 200 … 500 = that class.
    pub status_code_class: Option<u16>,
    pub before: Option<Timestamp>,
    pub after: Option<Timestamp>,
    /// Attempts to this endpoint only.
    pub endpoint: Option<EndpointId>,
    /// Attempts of the messages this filter matches only (event type, channel, tag).
    pub messages: crate::MessageFilter,
}

impl AttemptFilter {
    /// The filter on attempts of application `app`'s messages.
    pub(crate) fn apply(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        mut select: Select<attempt::Entity>,
    ) -> Select<attempt::Entity> {
        use attempt::Column as C;
        select = select.filter(self.messages.on_rows(tenant, app, C::MsgId));
        match self.success {
            Some(true) => select = select.filter(C::Classification.eq(Verdict::Success)),
            Some(false) => select = select.filter(C::Classification.ne(Verdict::Success)),
            None => {}
        }
        match self.status_code_class {
            Some(0) => select = select.filter(C::StatusCode.is_null()),
            Some(class) => {
                let lo = i32::from(class);
                select = select.filter(C::StatusCode.between(lo, lo + 99));
            }
            None => {}
        }
        if let Some(before) = self.before {
            select = select.filter(C::StartedAt.lt(before.as_millis()));
        }
        if let Some(after) = self.after {
            select = select.filter(C::StartedAt.gt(after.as_millis()));
        }
        if let Some(ep) = self.endpoint {
            select = select.filter(C::EndpointId.eq(ep));
        }
        select
    }
}

/// How a bulk recover or replay runs: the job whose progress each batch records and whose
/// cancel each batch obeys (none: a run nobody watches), and how many rows a batch takes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Batches {
    pub job: Option<JobId>,
    /// None: the operation's own size (1,000 for recover, 500 for replay).
    pub size: Option<u64>,
}

impl Batches {
    pub fn of_job(job: JobId) -> Batches {
        Batches {
            job: Some(job),
            size: None,
        }
    }

    /// Whether the next batch may run: false once the job left `running` (the tenant canceled
    /// it). Read in the batch's own transaction, so a cancel takes effect at the next batch.
    async fn may_continue(&self, txn: &impl ConnectionTrait) -> Result<bool> {
        let Some(id) = self.job else { return Ok(true) };
        let state: Option<JobState> = job::Entity::find_by_id(id)
            .select_only()
            .column(job::Column::State)
            .into_tuple()
            .one(txn)
            .await?;
        Ok(state == Some(JobState::Running))
    }

    /// Records how many rows the job has touched so far, in the batch's transaction, so the
    /// figure never counts work that did not commit.
    async fn record(&self, txn: &impl ConnectionTrait, done: u64) -> Result<()> {
        if let Some(id) = self.job {
            job::Entity::update_many()
                .col_expr(job::Column::Progress, Expr::value(done as i64))
                .col_expr(
                    job::Column::UpdatedAt,
                    Expr::value(Timestamp::now().as_millis()),
                )
                .filter(job::Column::Id.eq(id))
                .exec(txn)
                .await?;
        }
        Ok(())
    }
}

/// A count that stops at a cap, so a preview over a big table answers quickly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capped {
    pub n: u64,
    /// The count stopped at its cap: there may be more than `n`.
    pub more: bool,
}

/// Where bulk previews stop counting: 100,000 rows take well under a second to count on
/// either database, and a bigger number changes nobody's decision.
pub const PREVIEW_CAP: u64 = 100_000;

/// `SELECT COUNT(*)` over at most `cap + 1` rows of `rows`.
pub(crate) async fn capped_count(
    db: &impl ConnectionTrait,
    mut rows: SelectStatement,
    cap: u64,
) -> Result<Capped> {
    rows.limit(cap + 1);
    let count = Query::select()
        .expr(Expr::cust("COUNT(*)"))
        .from_subquery(rows, Alias::new("capped"))
        .to_owned();
    let row = db
        .query_one(db.get_database_backend().build(&count))
        .await?
        .ok_or_else(|| StoreError::Corrupt("COUNT(*) returned no row".into()))?;
    let n = row.try_get_by_index::<i64>(0)?.max(0) as u64;
    Ok(Capped {
        n: n.min(cap),
        more: n > cap,
    })
}

/// The failed deliveries of an endpoint whose message was created in `[since, until)` and
/// still has its content: what a recover re-arms.
pub(crate) fn recoverable(
    tenant: TenantId,
    endpoint_id: EndpointId,
    since: Timestamp,
    until: Option<Timestamp>,
) -> Select<delivery::Entity> {
    let select = delivery::Entity::find_in(tenant)
        .select_only()
        .column(delivery::Column::Id)
        .filter(delivery::Column::EndpointId.eq(endpoint_id))
        .filter(delivery::Column::State.eq(DeliveryState::Failed.as_str()))
        .filter(delivery::Column::CreatedAt.gte(since.as_millis()))
        // An expunged message has nothing left to send: one primary-key probe per
        // failed delivery looked at.
        .filter(
            Expr::exists(
                Query::select()
                    .expr(Expr::val(1))
                    .from(message::Entity)
                    .and_where(
                        Expr::col((message::Entity, message::Column::Id))
                            .equals((delivery::Entity, delivery::Column::MsgId)),
                    )
                    .and_where(crate::traffic::of_endpoint_app(
                        (message::Entity, message::Column::AppId),
                        endpoint_id,
                    ))
                    .and_where(crate::columns::expunged_payload())
                    .to_owned(),
            )
            .not(),
        );
    match until {
        Some(until) => select.filter(delivery::Column::CreatedAt.lt(until.as_millis())),
        None => select,
    }
}

/// The application's messages with ids in `[start, end)` past `after` that were never
/// delivered to `ep`, with their content: what a replay looks at (the endpoint's filters are
/// applied to each in Rust, see [`crate::traffic::endpoint_accepts`]).
pub(crate) fn never_delivered(
    tenant: TenantId,
    ep: &endpoint::Model,
    start: MessageId,
    after: Option<MessageId>,
    end: Option<MessageId>,
) -> Select<message::Entity> {
    // NOT EXISTS: one probe of the (msg_id, endpoint_id) unique index and one of the
    // attempts' message index per message, where NOT IN read every delivery the endpoint ever
    // had for each batch.
    let delivered =
        crate::outcomes::has_outcome((message::Entity, message::Column::Id), Some(ep.id), None);
    let select = message::Entity::find_in(tenant)
        .filter(message::Column::AppId.eq(ep.app_id))
        .filter(match after {
            None => message::Column::Id.gte(start),
            Some(last) => message::Column::Id.gt(last),
        })
        .filter(delivered.not())
        .order_by_asc(message::Column::Id);
    match end {
        Some(end) => select.filter(message::Column::Id.lt(end)),
        None => select,
    }
}

/// Whether a replay sends `msg`'s event to `ep`: its content is still there and the
/// endpoint's event-type and channel filters take it.
fn replay_takes(ep: &endpoint::Model, event_type: &str, channels: Option<&str>) -> Result<bool> {
    let channels: Vec<String> = channels
        .map(|t| from_json("messages.channels", t))
        .transpose()?
        .unwrap_or_default();
    crate::traffic::endpoint_accepts(ep, event_type, &channels)
}

/// The columns that re-arm a delivery for a manual attempt with a fresh retry budget.
fn rearm(
    update: sea_orm::UpdateMany<delivery::Entity>,
    now: Timestamp,
    ttl: Duration,
) -> sea_orm::UpdateMany<delivery::Entity> {
    use delivery::Column as C;
    update
        .col_expr(C::State, Expr::value(DeliveryState::Pending.as_str()))
        .col_expr(C::NextAttemptAt, Expr::value(now.as_millis()))
        .col_expr(C::NextTrigger, Expr::value(AttemptTrigger::Manual.as_str()))
        .col_expr(C::AttemptsAtArm, Expr::col(C::AttemptCount).into())
        .col_expr(C::GiveUpAt, Expr::value(now.plus(ttl).as_millis()))
        .col_expr(C::LeaseOwner, Expr::value(Option::<String>::None))
        .col_expr(C::LeaseExpiresAt, Expr::value(Option::<i64>::None))
        .col_expr(C::UpdatedAt, Expr::value(now.as_millis()))
}

impl Store {
    /// How an endpoint's deliveries stand, by state: all of them, or those created at or
    /// after `since` and before `until` (a success no longer kept as a delivery counts by its
    /// message's time, see `outcomes`).
    pub async fn endpoint_stats(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        since: Option<Timestamp>,
        until: Option<Timestamp>,
    ) -> Result<DeliveryStats> {
        let mut select = crate::outcomes::seen(delivery::Entity::find_in(tenant))
            .select_only()
            .column(delivery::Column::State)
            .column_as(delivery::Column::Id.count(), "n")
            .filter(delivery::Column::EndpointId.eq(endpoint_id));
        if let Some(since) = since {
            select = select.filter(delivery::Column::CreatedAt.gte(since.as_millis()));
        }
        if let Some(until) = until {
            select = select.filter(delivery::Column::CreatedAt.lt(until.as_millis()));
        }
        let kept = select.group_by(delivery::Column::State).into_query();
        let statement =
            crate::outcomes::with_successes_by_state(kept, tenant, endpoint_id, since, until);
        let rows = self
            .db
            .query_all(self.db.get_database_backend().build(&statement))
            .await?;
        let mut stats = DeliveryStats::default();
        for row in &rows {
            let (state, n) = (
                row.try_get_by_index::<String>(0)?,
                row.try_get_by_index::<i64>(1)?,
            );
            match state.parse::<DeliveryState>() {
                Ok(DeliveryState::Succeeded) => stats.success += n,
                // Paused deliveries wait to be sent, as pending ones do (Svix has no such state).
                Ok(DeliveryState::Pending | DeliveryState::Paused) => stats.pending += n,
                Ok(DeliveryState::Sending) => stats.sending += n,
                Ok(DeliveryState::Failed) => stats.fail += n,
                Ok(DeliveryState::Skipped) => stats.canceled += n,
                Err(e) => return Err(StoreError::Corrupt(e.to_string())),
            }
        }
        Ok(stats)
    }

    /// Sends `msg` to `ep` again as a manual attempt: re-arms its delivery, or creates one if
    /// the message never went to that endpoint. A delivery already pending is brought forward;
    /// one being sent right now is left alone (an attempt is in flight).
    pub async fn resend(
        &self,
        tenant: TenantId,
        msg: &message::Model,
        ep: &endpoint::Model,
        ttl: Duration,
    ) -> Result<delivery::Model> {
        check_owner(tenant, &msg.tenant_id, "message")?;
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        if msg.app_id != ep.app_id {
            return Err(StoreError::not_found("endpoint"));
        }
        let now = Timestamp::now();
        let txn = self.write_txn().await?;
        let ep = &enabled_endpoint_in(&*txn, self.sql, tenant, ep.id).await?;
        // Read as seen: a delivery still only journaled is in flight, as a `sending` row is.
        let existing = crate::outcomes::seen(delivery::Entity::find())
            .filter(delivery::Column::MsgId.eq(msg.id))
            .filter(delivery::Column::EndpointId.eq(ep.id))
            .one(&*txn)
            .await?;
        let id = match existing {
            Some(d) if d.state == DeliveryState::Sending => d.id,
            Some(d) => {
                rearm(delivery::Entity::update_many(), now, ttl)
                    .filter(delivery::Column::Id.eq(d.id))
                    .exec(&*txn)
                    .await?;
                d.id
            }
            None => {
                let seq = match &msg.ordering_key {
                    Some(key) => {
                        Some(crate::traffic::next_sequence(&txn, tenant, ep.id, key).await?)
                    }
                    None => None,
                };
                let row = new_delivery(
                    tenant,
                    msg,
                    ep,
                    seq,
                    now,
                    now.plus(ttl),
                    AttemptTrigger::Manual,
                );
                let id = row.id;
                delivery::Entity::insert(delivery::ActiveModel::from(row))
                    .exec(&*txn)
                    .await?;
                id
            }
        };
        let row = crate::outcomes::seen(delivery::Entity::find_by_id(id))
            .one(&*txn)
            .await?
            .ok_or(StoreError::not_found("delivery"))?;
        txn.commit().await?;
        Ok(row)
    }

    /// Deletes a message's content for privacy: its payload and every attempt's response
    /// body; the metadata stays. Deliveries still waiting are skipped (there is nothing left
    /// to send), which also frees an ordering key they held. Returns the message as it is now.
    pub async fn expunge_message_content(
        &self,
        tenant: TenantId,
        msg: &message::Model,
    ) -> Result<message::Model> {
        check_owner(tenant, &msg.tenant_id, "message")?;
        let now = Timestamp::now().as_millis();
        let txn = self.write_txn().await?;
        crate::retention::empty_contents(&*txn, self.sql, msg.app_id, &[msg.id]).await?;
        delivery::Entity::update_many()
            .col_expr(
                delivery::Column::State,
                Expr::value(DeliveryState::Skipped.as_str()),
            )
            .col_expr(delivery::Column::LastError, Expr::value(crate::EXPUNGED))
            .col_expr(delivery::Column::UpdatedAt, Expr::value(now))
            .filter(delivery::Column::MsgId.eq(msg.id))
            .filter(delivery::Column::State.is_in([
                DeliveryState::Pending.as_str(),
                DeliveryState::Paused.as_str(),
            ]))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(message::Model {
            payload: Vec::new(),
            ..msg.clone()
        })
    }

    /// Deletes one attempt's response body and headers (its status, timing and error stay).
    pub async fn expunge_attempt_content(
        &self,
        tenant: TenantId,
        msg_id: MessageId,
        attempt_id: &str,
    ) -> Result<()> {
        let a = self.get_attempt(tenant, msg_id, attempt_id).await?;
        attempt::Entity::update_many()
            .col_expr(
                attempt::Column::ResponseExcerpt,
                Expr::value(Option::<String>::None),
            )
            .col_expr(
                attempt::Column::ResponseHeaders,
                Expr::value(Option::<String>::None),
            )
            // By its message too: on PostgreSQL the key is (msg_id, id) (m0036).
            .filter(attempt::Column::MsgId.eq(a.msg_id))
            .filter(attempt::Column::Id.eq(a.id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Re-arms every failed delivery of an endpoint whose message was created in
    /// `[since, until)`; returns how many. Works in batches of 1,000, each its own
    /// transaction, so a recover over years of dead letters never holds the writer long.
    /// Refused while the endpoint is disabled (checked in every batch); stops before the
    /// next batch once `run`'s job is canceled.
    pub async fn recover_failed(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        ttl: Duration,
        run: Batches,
    ) -> Result<u64> {
        let batch = run.size.unwrap_or(1000);
        let mut total = 0;
        loop {
            let now = Timestamp::now();
            let txn = self.write_txn().await?;
            enabled_endpoint_in(&*txn, self.sql, tenant, endpoint_id).await?;
            if !run.may_continue(&*txn).await? {
                return Ok(total);
            }
            let ids: Vec<DeliveryId> = recoverable(tenant, endpoint_id, since, until)
                .order_by_asc(delivery::Column::Id)
                .limit(batch)
                .into_tuple()
                .all(&*txn)
                .await?;
            let n = if ids.is_empty() {
                0
            } else {
                rearm(delivery::Entity::update_many(), now, ttl)
                    .filter(delivery::Column::Id.is_in(ids.iter().copied()))
                    .filter(delivery::Column::State.eq(DeliveryState::Failed.as_str()))
                    .exec(&*txn)
                    .await?
                    .rows_affected
            };
            total += n;
            run.record(&*txn, total).await?;
            txn.commit().await?;
            if (ids.len() as u64) < batch {
                return Ok(total);
            }
            tokio::task::yield_now().await;
        }
    }

    /// How many deliveries [`Store::recover_failed`] would re-arm now, counting at most `cap`.
    pub async fn count_recoverable(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        cap: u64,
    ) -> Result<Capped> {
        let rows = recoverable(tenant, endpoint_id, since, until).into_query();
        capped_count(&self.db, rows, cap).await
    }

    /// Creates deliveries to `ep` for the application's messages in `[since, until)` that match
    /// the endpoint's filters and never had one (e.g. sent while it was disabled or before it
    /// existed). Works in batches; returns how many were created. Refused while the endpoint
    /// is disabled, checked again in every batch's transaction; stops before the next batch
    /// once `run`'s job is canceled.
    pub async fn replay_missing(
        &self,
        tenant: TenantId,
        ep: &endpoint::Model,
        since: Timestamp,
        until: Option<Timestamp>,
        ttl: Duration,
        run: Batches,
    ) -> Result<u64> {
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        let start = MessageId::lower_bound(since);
        let mut after: Option<MessageId> = None;
        let end = until.map(MessageId::lower_bound);
        let mut created = 0u64;
        loop {
            let batch = never_delivered(tenant, ep, start, after, end)
                .limit(run.size.unwrap_or(500))
                .all(&self.db)
                .await?;
            let Some(last) = batch.last() else { break };
            after = Some(last.id);
            let now = Timestamp::now();
            let txn = self.write_txn().await?;
            let ep = &enabled_endpoint_in(&*txn, self.sql, tenant, ep.id).await?;
            if !run.may_continue(&*txn).await? {
                break;
            }
            let mut rows = Vec::new();
            for msg in batch.iter().filter(|m| !m.is_expunged()) {
                if !replay_takes(ep, &msg.event_type, msg.channels.as_deref())? {
                    continue;
                }
                let seq = match &msg.ordering_key {
                    Some(key) => {
                        Some(crate::traffic::next_sequence(&txn, tenant, ep.id, key).await?)
                    }
                    None => None,
                };
                rows.push(new_delivery(
                    tenant,
                    msg,
                    ep,
                    seq,
                    now,
                    now.plus(ttl),
                    AttemptTrigger::Manual,
                ));
            }
            created += rows.len() as u64;
            if !rows.is_empty() {
                delivery::Entity::insert_many(rows.into_iter().map(delivery::ActiveModel::from))
                    .exec(&*txn)
                    .await?;
            }
            run.record(&*txn, created).await?;
            txn.commit().await?;
        }
        Ok(created)
    }

    /// How many deliveries [`Store::replay_missing`] would create now, counting at most `cap`.
    /// Reads ids, event types and channels only (never payloads), and looks at no more than
    /// `2 × cap` messages: past that, `more` is set.
    pub async fn count_missing(
        &self,
        tenant: TenantId,
        ep: &endpoint::Model,
        since: Timestamp,
        until: Option<Timestamp>,
        cap: u64,
    ) -> Result<Capped> {
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        const BATCH: u64 = 2_000;
        let start = MessageId::lower_bound(since);
        let end = until.map(MessageId::lower_bound);
        let (mut after, mut seen, mut n) = (None, 0u64, 0u64);
        loop {
            let rows: Vec<(MessageId, String, Option<String>)> =
                never_delivered(tenant, ep, start, after, end)
                    .select_only()
                    .column(message::Column::Id)
                    .column(message::Column::EventType)
                    .column(message::Column::Channels)
                    .filter(crate::columns::expunged_payload().not())
                    .limit(BATCH)
                    .into_tuple()
                    .all(&self.db)
                    .await?;
            let Some((last, _, _)) = rows.last() else {
                return Ok(Capped { n, more: false });
            };
            after = Some(*last);
            seen += rows.len() as u64;
            for (_, event_type, channels) in &rows {
                if replay_takes(ep, event_type, channels.as_deref())? {
                    n += 1;
                }
            }
            if n > cap {
                return Ok(Capped { n: cap, more: true });
            }
            if (rows.len() as u64) < BATCH {
                return Ok(Capped { n, more: false });
            }
            if seen >= 2 * cap {
                return Ok(Capped { n, more: true });
            }
        }
    }

    /// An endpoint's messages, each with its outcome there, newest first (two queries a
    /// page): only those in `state` when given, and of the messages `messages` matches.
    ///
    /// Without a state, or succeeded, the listing walks the application's messages newest
    /// first and keeps those with an outcome at the endpoint (a delivery that succeeded is
    /// not kept, see `outcomes`), paged by message id. Another state is only ever a kept
    /// delivery's: those are read through the endpoint's indexes, paged by delivery id (an
    /// endpoint's dead letters are found without walking its whole history).
    pub async fn list_endpoint_deliveries(
        &self,
        tenant: TenantId,
        ep: &endpoint::Model,
        state: Option<DeliveryState>,
        messages: &crate::MessageFilter,
        params: &ListParams,
    ) -> Result<Page<(delivery::Model, message::Model)>> {
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        let Some(state) = state.filter(|s| *s != DeliveryState::Succeeded) else {
            let filter = crate::MessageFilter {
                endpoint: Some(ep.id),
                delivery_state: state,
                ..messages.clone()
            };
            let mut page =
                crate::traffic::fetch_message_page(&self.db, tenant, ep.app_id, &filter, params)
                    .await?;
            let ids: Vec<MessageId> = page.data.iter().map(|m| m.id).collect();
            let mut outcomes: HashMap<MessageId, delivery::Model> =
                crate::outcomes::of_messages(&self.db, tenant, &ids, &[ep.id], None)
                    .await?
                    .into_iter()
                    .map(|d| (d.msg_id, d))
                    .collect();
            // An outcome removed between the two reads (its message pruned) drops out.
            let data = std::mem::take(&mut page.data)
                .into_iter()
                .filter_map(|m| outcomes.remove(&m.id).map(|d| (d, m)))
                .collect();
            return Ok(page.with_data(data));
        };
        let select = endpoint_deliveries(tenant, ep.id, state).filter(messages.on_rows(
            tenant,
            ep.app_id,
            delivery::Column::MsgId,
        ));
        let mut page = fetch_page(
            &self.db,
            select,
            delivery::Column::Id,
            |d| d.id.to_string(),
            params,
        )
        .await?;
        let ids: Vec<MessageId> = page.data.iter().map(|d| d.msg_id).collect();
        let mut messages = self.messages_by_id(tenant, ep.app_id, &ids).await?;
        let mut data = Vec::with_capacity(page.data.len());
        for d in std::mem::take(&mut page.data) {
            let m = messages
                .remove(&d.msg_id)
                .ok_or_else(|| StoreError::Corrupt(format!("delivery {} has no message", d.id)))?;
            data.push((d, m));
        }
        Ok(page.with_data(data))
    }

    pub async fn get_attempt(
        &self,
        tenant: TenantId,
        msg_id: MessageId,
        attempt_id: &str,
    ) -> Result<attempt::Model> {
        let Ok(attempt_id) = attempt_id.parse::<domain::ids::AttemptId>() else {
            return Err(StoreError::not_found("attempt"));
        };
        attempt::Entity::find_in(tenant)
            .filter(attempt::Column::MsgId.eq(msg_id))
            .filter(attempt::Column::Id.eq(attempt_id))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("attempt"))
    }
}

/// An endpoint's kept deliveries in one state: through `idx_deliveries_held` for a dead,
/// paused or canceled state (m0031), else `idx_deliveries_of_endpoint`.
pub(crate) fn endpoint_deliveries(
    tenant: TenantId,
    endpoint_id: EndpointId,
    state: DeliveryState,
) -> sea_orm::Select<delivery::Entity> {
    crate::outcomes::seen(delivery::Entity::find_in(tenant))
        .filter(delivery::Column::EndpointId.eq(endpoint_id))
        .filter(delivery::Column::State.eq(state.as_str()))
}
