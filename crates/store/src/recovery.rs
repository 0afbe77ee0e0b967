//! Manual delivery work: resend one message, recover failed deliveries, replay missing ones,
//! and the per-endpoint views (stats, deliveries with their messages, attempt filters).

use std::collections::HashMap;
use std::time::Duration;

use domain::Timestamp;
use domain::delivery::{AttemptTrigger, DeliveryState};
use domain::ids::{EndpointId, MessageId, TenantId};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};

use crate::entities::Owned;
use crate::entities::{attempt, delivery, endpoint, message};
use crate::gate::enabled_endpoint_in;
use crate::resources::check_owner;
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
}

impl AttemptFilter {
    pub(crate) fn apply(&self, mut select: Select<attempt::Entity>) -> Select<attempt::Entity> {
        use attempt::Column as C;
        match self.success {
            Some(true) => select = select.filter(C::Classification.eq("success")),
            Some(false) => select = select.filter(C::Classification.ne("success")),
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
    pub async fn endpoint_stats(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
    ) -> Result<DeliveryStats> {
        let rows: Vec<(String, i64)> = delivery::Entity::find_in(tenant)
            .select_only()
            .column(delivery::Column::State)
            .column_as(delivery::Column::Id.count(), "n")
            .filter(delivery::Column::EndpointId.eq(endpoint_id))
            .group_by(delivery::Column::State)
            .into_tuple()
            .all(&self.db)
            .await?;
        let mut stats = DeliveryStats::default();
        for (state, n) in rows {
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
        let ep = &enabled_endpoint_in(&*txn, self.backend, tenant, ep.id).await?;
        let existing = delivery::Entity::find()
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
        let row = delivery::Entity::find_by_id(id)
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
        crate::retention::empty_contents(&*txn, &[msg.id]).await?;
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
            .filter(attempt::Column::Id.eq(a.id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Re-arms every failed delivery of an endpoint whose message was created in
    /// `[since, until)`; returns how many. Works in batches of 1,000, each its own
    /// transaction, so a recover over years of dead letters never holds the writer long.
    /// Refused while the endpoint is disabled (checked in every batch).
    pub async fn recover_failed(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        since: Timestamp,
        until: Option<Timestamp>,
        ttl: Duration,
    ) -> Result<u64> {
        const BATCH: u64 = 1000;
        let mut total = 0;
        loop {
            let now = Timestamp::now();
            let txn = self.write_txn().await?;
            enabled_endpoint_in(&*txn, self.backend, tenant, endpoint_id).await?;
            let mut ids = delivery::Entity::find_in(tenant)
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
                            .and_where(crate::columns::expunged_payload())
                            .to_owned(),
                    )
                    .not(),
                );
            if let Some(until) = until {
                ids = ids.filter(delivery::Column::CreatedAt.lt(until.as_millis()));
            }
            let ids: Vec<String> = ids
                .order_by_asc(delivery::Column::Id)
                .limit(BATCH)
                .into_tuple()
                .all(&*txn)
                .await?;
            let n = if ids.is_empty() {
                0
            } else {
                rearm(delivery::Entity::update_many(), now, ttl)
                    .filter(delivery::Column::Id.is_in(ids.iter().map(String::as_str)))
                    .filter(delivery::Column::State.eq(DeliveryState::Failed.as_str()))
                    .exec(&*txn)
                    .await?
                    .rows_affected
            };
            txn.commit().await?;
            total += n;
            if (ids.len() as u64) < BATCH {
                return Ok(total);
            }
            tokio::task::yield_now().await;
        }
    }

    /// Creates deliveries to `ep` for the application's messages in `[since, until)` that match
    /// the endpoint's filters and never had one (e.g. sent while it was disabled or before it
    /// existed). Works in batches; returns how many were created. Refused while the endpoint
    /// is disabled, checked again in every batch's transaction.
    pub async fn replay_missing(
        &self,
        tenant: TenantId,
        ep: &endpoint::Model,
        since: Timestamp,
        until: Option<Timestamp>,
        ttl: Duration,
    ) -> Result<u64> {
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        let start = MessageId::lower_bound(since);
        let mut after: Option<MessageId> = None;
        let end = until.map(MessageId::lower_bound);
        let mut created = 0u64;
        loop {
            // NOT EXISTS, one probe of the (msg_id, endpoint_id) unique index per message,
            // where NOT IN read every delivery the endpoint ever had for each batch.
            let delivered = Query::select()
                .expr(Expr::val(1))
                .from(delivery::Entity)
                .and_where(
                    Expr::col((delivery::Entity, delivery::Column::MsgId))
                        .equals((message::Entity, message::Column::Id)),
                )
                .and_where(Expr::col((delivery::Entity, delivery::Column::EndpointId)).eq(ep.id))
                .to_owned();
            let mut select = message::Entity::find_in(tenant)
                .filter(message::Column::AppId.eq(ep.app_id))
                .filter(match after {
                    None => message::Column::Id.gte(start),
                    Some(last) => message::Column::Id.gt(last),
                })
                .filter(Expr::exists(delivered).not())
                .order_by_asc(message::Column::Id)
                .limit(500);
            if let Some(end) = end {
                select = select.filter(message::Column::Id.lt(end));
            }
            let batch = select.all(&self.db).await?;
            let Some(last) = batch.last() else { break };
            after = Some(last.id);
            let now = Timestamp::now();
            let txn = self.write_txn().await?;
            let ep = &enabled_endpoint_in(&*txn, self.backend, tenant, ep.id).await?;
            let mut rows = Vec::new();
            for msg in batch.iter().filter(|m| !m.is_expunged()) {
                let channels: Vec<String> = msg
                    .channels
                    .as_deref()
                    .map(|t| from_json("messages.channels", t))
                    .transpose()?
                    .unwrap_or_default();
                if !crate::traffic::endpoint_accepts(ep, &msg.event_type, &channels)? {
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
            txn.commit().await?;
        }
        Ok(created)
    }

    /// An endpoint's deliveries, newest first, each with its message: two queries a page.
    pub async fn list_endpoint_deliveries(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        state: Option<DeliveryState>,
        params: &ListParams,
    ) -> Result<Page<(delivery::Model, message::Model)>> {
        let mut page = fetch_page(
            &self.db,
            endpoint_deliveries(tenant, endpoint_id, state),
            delivery::Column::Id,
            |d| d.id.to_string(),
            params,
        )
        .await?;
        let ids: Vec<MessageId> = page.data.iter().map(|d| d.msg_id).collect();
        let mut messages: HashMap<MessageId, message::Model> = message::Entity::find_in(tenant)
            .filter(message::Column::Id.is_in(ids))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| (m.id, m))
            .collect();
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
        attempt::Entity::find_in(tenant)
            .filter(attempt::Column::MsgId.eq(msg_id))
            .filter(attempt::Column::Id.eq(attempt_id))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("attempt"))
    }

    /// How many deliveries a tenant has, in any state.
    pub async fn count_deliveries(&self, tenant: TenantId) -> Result<u64> {
        use sea_orm::PaginatorTrait;
        Ok(delivery::Entity::find_in(tenant).count(&self.db).await?)
    }
}

/// An endpoint's deliveries, in one state or all (through `idx_deliveries_endpoint`).
pub(crate) fn endpoint_deliveries(
    tenant: TenantId,
    endpoint_id: EndpointId,
    state: Option<DeliveryState>,
) -> sea_orm::Select<delivery::Entity> {
    let select =
        delivery::Entity::find_in(tenant).filter(delivery::Column::EndpointId.eq(endpoint_id));
    match state {
        Some(state) => select.filter(delivery::Column::State.eq(state.as_str())),
        None => select,
    }
}
