//! Group commit of new messages: one writer takes every message waiting to be created and
//! writes them in one transaction (a few statements however many), then answers each request.
//! On SQLite, where writes take turns, this turns per-request transactions into per-batch
//! ones; on PostgreSQL it saves a commit (a WAL flush) per message.

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use domain::delivery::AttemptTrigger;
use domain::ids::{MessageId, TenantId};
use sea_orm::sea_query::{OnConflict, Query};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use tokio::sync::{mpsc, oneshot};

use crate::entities::{application, delivery, endpoint, message};
use crate::resources::check_owner;
use crate::traffic::{endpoint_accepts, new_delivery, next_sequence};
use crate::{CreatedMessage, NewMessage, Result, Store, StoreError, to_json};

/// A dispatcher in this process that takes new deliveries straight from the message writer:
/// they are written already claimed by `owner` (state `sending`, leased for `lease`), in the
/// message's own transaction, and sent to `tx` once committed. That saves the claim round trip
/// (a write) per message. Only while more than `keep_free` of the dispatcher's `permits` are
/// free (the rest is left for claims of retries and backlogs), and never for deliveries with
/// an ordering key (those wait for their turn in the queue). A handed-off delivery that is
/// never started (the dispatcher went away) keeps its lease until it expires and is then
/// reaped back to pending, as after a crash.
#[derive(Clone, Debug)]
pub struct Handoff {
    pub owner: String,
    pub lease: std::time::Duration,
    pub permits: std::sync::Arc<tokio::sync::Semaphore>,
    pub keep_free: usize,
    pub tx: mpsc::UnboundedSender<HandedOff>,
}

/// A delivery claimed at creation, with its message and a permit of the dispatcher's.
#[derive(Debug)]
pub struct HandedOff {
    pub delivery: delivery::Model,
    pub message: std::sync::Arc<message::Model>,
    pub permit: tokio::sync::OwnedSemaphorePermit,
}

impl Store {
    /// Registers (or with `None` removes) this process's dispatcher as the taker of new
    /// deliveries; see [`Handoff`].
    pub fn set_handoff(&self, handoff: Option<Handoff>) {
        *self.handoff.write().unwrap_or_else(|e| e.into_inner()) = handoff;
    }

    fn current_handoff(&self) -> Option<Handoff> {
        self.handoff
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|h| !h.tx.is_closed())
            .cloned()
    }
}

/// When a message's deliveries give up, per endpoint (its retry policy's TTL).
pub type GiveUpAt = fn(&endpoint::Model, Timestamp) -> Timestamp;

/// Most messages written in one transaction.
const MAX_BATCH: usize = 512;
/// Rows per multi-row INSERT, under both databases' limits on bound parameters.
const ROWS_PER_INSERT: usize = 500;

pub(crate) struct IngestJob {
    tenant: TenantId,
    app: application::Model,
    new: NewMessage,
    give_up_at: GiveUpAt,
    reply: oneshot::Sender<Result<CreatedMessage>>,
}

/// Starts the writer for `store` (which must not hold the sender itself, or the writer would
/// never see the channel close). Returns where to send jobs.
pub(crate) fn spawn_writer(store: Store) -> mpsc::Sender<IngestJob> {
    let (tx, mut rx) = mpsc::channel::<IngestJob>(MAX_BATCH * 4);
    tokio::spawn(async move {
        let mut jobs = Vec::with_capacity(MAX_BATCH);
        while rx.recv_many(&mut jobs, MAX_BATCH).await > 0 {
            let turn = store.write_turn().await;
            // Whatever arrived while waiting for the turn joins this batch.
            while jobs.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            store.write_batch(turn, std::mem::take(&mut jobs)).await;
        }
    });
    tx
}

impl Store {
    /// Writes a message and one pending delivery per matching, enabled endpoint of `app`, in
    /// one transaction (shared with whatever other messages are being created at the same
    /// moment). `give_up_at(endpoint, now)` applies each endpoint's retry TTL. A repeated
    /// `event_id` in the same application is `Conflict { field: "eventId" }`. Returns once
    /// the message is committed.
    pub async fn create_message(
        &self,
        tenant: TenantId,
        app: &application::Model,
        new: NewMessage,
        give_up_at: GiveUpAt,
    ) -> Result<CreatedMessage> {
        check_owner(tenant, &app.tenant_id, "application")?;
        let (reply, answer) = oneshot::channel();
        let job = IngestJob {
            tenant,
            app: app.clone(),
            new,
            give_up_at,
            reply,
        };
        let job = match &self.ingest {
            Some(tx) => match tx.send(job).await {
                Ok(()) => match answer.await {
                    Ok(result) => return result,
                    // The writer went away (its runtime shut down) without answering: the
                    // batch may or may not be committed, so this one cannot be retried.
                    Err(_) => return Err(StoreError::Corrupt("the message writer stopped".into())),
                },
                Err(mpsc::error::SendError(job)) => job,
            },
            None => job,
        };
        // No writer (or it is gone): write this one alone.
        let IngestJob {
            tenant,
            app,
            new,
            give_up_at,
            ..
        } = job;
        self.create_messages(None, &[(tenant, app, new, give_up_at)])
            .await?
            .pop()
            .expect("one result per message")
    }

    /// Writes a batch and answers every job. If the batch transaction fails as a whole, each
    /// message is tried alone, so one bad message cannot fail the others.
    async fn write_batch(&self, turn: crate::WriteTurn, jobs: Vec<IngestJob>) {
        let (inputs, replies): (Vec<_>, Vec<_>) = jobs
            .into_iter()
            .map(|j| ((j.tenant, j.app, j.new, j.give_up_at), j.reply))
            .unzip();
        let single = inputs.len() == 1;
        match self.create_messages(Some(turn), &inputs).await {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) if single => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(e));
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, count = inputs.len(), "a message batch failed; writing its messages one by one");
                for (input, reply) in inputs.into_iter().zip(replies) {
                    let result = match self
                        .create_messages(None, std::slice::from_ref(&input))
                        .await
                    {
                        Ok(mut r) => r.pop().expect("one result per message"),
                        Err(e) => Err(e),
                    };
                    let _ = reply.send(result);
                }
            }
        }
    }

    /// The batch write: one transaction, one result per input in order. An `Err` of the
    /// whole means nothing was written.
    async fn create_messages(
        &self,
        turn: Option<crate::WriteTurn>,
        inputs: &[(TenantId, application::Model, NewMessage, GiveUpAt)],
    ) -> Result<Vec<Result<CreatedMessage>>> {
        // Bulk loads (no turn) queue everything; requests may hand work straight over.
        let handoff = turn.as_ref().and_then(|_| self.current_handoff());
        let txn = match turn {
            Some(turn) => self.write_txn_in(turn).await?,
            None => self.write_txn().await?,
        };
        // Taken once the write turn is ours, so a message's id, its time and its commit order
        // agree; every id is stamped with the same `now` as the row.
        let now = Timestamp::now();
        let app_ids: HashSet<&str> = inputs.iter().map(|(_, a, _, _)| a.id.as_str()).collect();
        let mut endpoints_of: HashMap<String, Vec<endpoint::Model>> = HashMap::new();
        for ep in endpoint::Entity::find()
            .filter(endpoint::Column::AppId.is_in(app_ids))
            .filter(endpoint::Column::Disabled.eq(false))
            .all(&*txn)
            .await?
        {
            endpoints_of.entry(ep.app_id.clone()).or_default().push(ep);
        }
        // Per message: its row and the endpoints it goes to, or why it cannot be created.
        let mut results: Vec<Result<(message::Model, Vec<&endpoint::Model>)>> = Vec::new();
        for (tenant, app, new, _) in inputs {
            let targets: Result<Vec<&endpoint::Model>> = endpoints_of
                .get(&app.id)
                .map(|eps| eps.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|ep| ep.tenant_id == tenant.to_string())
                .filter_map(
                    |ep| match endpoint_accepts(ep, &new.event_type, &new.channels) {
                        Ok(true) => Some(Ok(ep)),
                        Ok(false) => None,
                        Err(e) => Some(Err(e)),
                    },
                )
                .collect();
            results.push(targets.map(|t| {
                let m = message::Model {
                    id: MessageId::new_at(now, &mut rand::rng()).to_string(),
                    tenant_id: tenant.to_string(),
                    app_id: app.id.clone(),
                    event_type: new.event_type.clone(),
                    event_id: new.event_id.clone(),
                    payload: new.payload.clone(),
                    channels: (!new.channels.is_empty()).then(|| to_json(&new.channels)),
                    tags: (!new.tags.is_empty()).then(|| to_json(&new.tags)),
                    ordering_key: new.ordering_key.clone(),
                    created_at: now.as_millis(),
                };
                (m, t)
            }));
        }
        let rows: Vec<&message::Model> = results
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|(m, _)| m))
            .collect();
        let mut inserted = HashSet::new();
        for chunk in rows.chunks(ROWS_PER_INSERT) {
            inserted.extend(insert_messages(&txn, chunk).await?);
        }
        let mut deliveries = Vec::new();
        // (index in `deliveries`, index in `out`, permit) of those claimed for the local
        // dispatcher.
        let mut handed = Vec::new();
        let mut out = Vec::with_capacity(inputs.len());
        for (result, (tenant, _, _, give_up_at)) in results.into_iter().zip(inputs) {
            let (message, targets) = match result {
                Ok(r) => r,
                Err(e) => {
                    out.push(Err(e));
                    continue;
                }
            };
            if !inserted.contains(&message.id) {
                // Its eventId is taken in this application (or earlier in this batch).
                out.push(Err(StoreError::Conflict { field: "eventId" }));
                continue;
            }
            let mut mine = Vec::with_capacity(targets.len());
            for ep in targets {
                let seq = match &message.ordering_key {
                    Some(key) => Some(next_sequence(&txn, *tenant, &ep.id, key).await?),
                    None => None,
                };
                let mut d = new_delivery(
                    *tenant,
                    &message,
                    ep,
                    seq,
                    now,
                    give_up_at(ep, now),
                    AttemptTrigger::Scheduled,
                );
                if let Some(h) = handoff.as_ref().filter(|_| seq.is_none())
                    && h.permits.available_permits() > h.keep_free
                    && let Ok(permit) = h.permits.clone().try_acquire_owned()
                {
                    d.state = domain::delivery::DeliveryState::Sending.as_str().to_owned();
                    d.lease_owner = Some(h.owner.clone());
                    d.lease_expires_at = Some(now.plus(h.lease).as_millis());
                    // `out.len()`: where this message's result is about to go.
                    handed.push((deliveries.len() + mine.len(), out.len(), permit));
                }
                mine.push(d);
            }
            deliveries.extend(mine.iter().cloned());
            out.push(Ok(CreatedMessage {
                message,
                deliveries: mine,
            }));
        }
        for chunk in deliveries.chunks(ROWS_PER_INSERT / 2) {
            let rows = chunk.iter().cloned().map(delivery::ActiveModel::from);
            delivery::Entity::insert_many(rows).exec(&*txn).await?;
        }
        txn.commit().await?;
        if let Some(h) = handoff {
            // Fan-out deliveries of one message share one copy of it.
            let mut shared: HashMap<usize, std::sync::Arc<message::Model>> = HashMap::new();
            for (i, at, permit) in handed {
                let Some(Ok(created)) = out.get(at) else {
                    continue;
                };
                let message = shared
                    .entry(at)
                    .or_insert_with(|| std::sync::Arc::new(created.message.clone()))
                    .clone();
                // A closed channel leaves the delivery leased until its lease runs out.
                let _ = h.tx.send(HandedOff {
                    delivery: deliveries[i].clone(),
                    message,
                    permit,
                });
            }
        }
        Ok(out)
    }
}

/// Inserts messages, skipping any whose eventId is taken. Returns the ids written.
async fn insert_messages(
    txn: &crate::WriteTxn,
    rows: &[&message::Model],
) -> Result<HashSet<String>> {
    use message::Column as C;
    let mut insert = Query::insert();
    insert.into_table(message::Entity).columns([
        C::Id,
        C::TenantId,
        C::AppId,
        C::EventType,
        C::EventId,
        C::Payload,
        C::Channels,
        C::Tags,
        C::OrderingKey,
        C::CreatedAt,
    ]);
    for m in rows {
        insert.values_panic([
            m.id.clone().into(),
            m.tenant_id.clone().into(),
            m.app_id.clone().into(),
            m.event_type.clone().into(),
            m.event_id.clone().into(),
            m.payload.clone().into(),
            m.channels.clone().into(),
            m.tags.clone().into(),
            m.ordering_key.clone().into(),
            m.created_at.into(),
        ]);
    }
    insert
        .on_conflict(OnConflict::new().do_nothing().to_owned())
        .returning_col(C::Id);
    let stmt = txn.get_database_backend().build(&insert);
    txn.query_all(stmt)
        .await?
        .iter()
        .map(|r| r.try_get::<String>("", "id").map_err(Into::into))
        .collect()
}

impl Store {
    /// Writes many messages of one application in transactions of up to 512 (bulk loads, such
    /// as `hookd bench --backlog`). One result per message, in order.
    pub async fn create_messages_in_bulk(
        &self,
        tenant: TenantId,
        app: &application::Model,
        news: Vec<NewMessage>,
        give_up_at: GiveUpAt,
    ) -> Result<Vec<Result<CreatedMessage>>> {
        check_owner(tenant, &app.tenant_id, "application")?;
        let mut out = Vec::with_capacity(news.len());
        let mut news = news.into_iter().peekable();
        while news.peek().is_some() {
            let inputs: Vec<_> = news
                .by_ref()
                .take(MAX_BATCH)
                .map(|n| (tenant, app.clone(), n, give_up_at))
                .collect();
            out.extend(self.create_messages(None, &inputs).await?);
        }
        Ok(out)
    }
}
