//! Group commit of new messages: one writer takes every message waiting to be created and
//! writes them in one transaction (a few statements however many), then answers each request.
//! On SQLite, where writes take turns, this turns per-request transactions into per-batch
//! ones; on PostgreSQL it saves a commit (a WAL flush) per message.

use std::collections::{HashMap, HashSet};

use domain::Timestamp;
use domain::delivery::AttemptTrigger;
use domain::ids::{ApplicationId, DeliveryId, EndpointId, MessageId, TenantId};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tokio::sync::oneshot;

use crate::entities::{application, delivery, endpoint, endpoint_secret, message};
use crate::error::check_owner;
use crate::traffic::{endpoint_accepts, new_delivery};
use crate::{CreatedMessage, NewMessage, Result, Store, StoreError, to_json};

/// A dispatcher in this process that takes new deliveries straight from the message writer:
/// they are written already claimed by `owner` (state `sending`, leased for `lease`), in the
/// message's own transaction, and given to `taker` once committed. That saves the claim round
/// trip (a write) per message. Only while the taker has room (see [`Taker::reserve`]), and
/// never for deliveries with an ordering key (those wait for their turn in the queue). A
/// handed-off delivery that is never started (the dispatcher went away) keeps its lease until
/// it expires and is then reaped back to pending, as after a crash.
#[derive(Clone, Debug)]
pub struct Handoff {
    pub owner: String,
    pub lease: std::time::Duration,
    pub taker: std::sync::Arc<dyn Taker>,
}

/// What takes new deliveries at creation: the dispatcher decides how much room it has (its
/// permits and how many it keeps free for retries); the store only asks and hands over.
pub trait Taker: Send + Sync + std::fmt::Debug {
    /// Room for one more delivery to `endpoint`, if the taker has it now. The slot is held
    /// until the delivery is done; dropped unused (its message was refused, or the commit
    /// failed), it gives the room back. A taker sharing the database with other dispatchers
    /// takes only deliveries of endpoints it holds the lease of (see `endpoint_leases`).
    fn reserve(&self, endpoint: EndpointId) -> Option<Slot>;
    /// Takes committed deliveries. Returns false once the taker is gone.
    fn take(&self, handed: HandedOff) -> bool;
    /// False once the taker is gone: nothing more is claimed for it.
    fn is_open(&self) -> bool;
}

/// The taker's room for one delivery, opaque to the store (the dispatcher's in-flight permit).
#[derive(Debug)]
pub struct Slot(Box<dyn std::any::Any + Send + Sync>);

impl Slot {
    pub fn new<T: std::any::Any + Send + Sync>(room: T) -> Self {
        Slot(Box::new(room))
    }

    /// What the taker put in, if it is a `T`.
    pub fn into_inner<T: std::any::Any>(self) -> Option<T> {
        self.0.downcast().ok().map(|b| *b)
    }
}

/// A delivery claimed at creation, with its message and the taker's slot for it.
#[derive(Debug)]
pub struct HandedOff {
    pub delivery: delivery::Model,
    pub message: std::sync::Arc<message::Model>,
    /// Its endpoint and signing secrets as read in the message's own transaction, so the
    /// dispatcher need not read them again.
    pub endpoint: Option<std::sync::Arc<crate::DispatchEndpoint>>,
    pub slot: Slot,
}

impl Store {
    /// Registers (or with `None` removes) this process's dispatcher as the taker of new
    /// deliveries; see [`Handoff`].
    pub fn set_handoff(&self, handoff: Option<Handoff>) {
        *self.handoff.write().unwrap_or_else(|e| e.into_inner()) = handoff;
    }

    pub(crate) fn current_handoff(&self) -> Option<Handoff> {
        self.handoff
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|h| h.taker.is_open())
            .cloned()
    }
}

/// When a message's deliveries give up, per endpoint (its retry policy's TTL).
pub type GiveUpAt = fn(&endpoint::Model, Timestamp) -> Timestamp;

/// Most messages written in one transaction.
pub(crate) const MAX_BATCH: usize = 512;

pub(crate) struct IngestJob {
    tenant: TenantId,
    app: application::Model,
    new: NewMessage,
    give_up_at: GiveUpAt,
    reply: oneshot::Sender<Result<CreatedMessage>>,
}

pub(crate) type Input = (TenantId, application::Model, NewMessage, GiveUpAt);

type Reply = oneshot::Sender<Result<CreatedMessage>>;

pub(crate) fn split(jobs: Vec<IngestJob>) -> (Vec<Input>, Vec<Reply>) {
    jobs.into_iter()
        .map(|j| ((j.tenant, j.app, j.new, j.give_up_at), j.reply))
        .unzip()
}

fn answer(replies: Vec<Reply>, created: Created) {
    for (reply, result) in replies.into_iter().zip(created.finish()) {
        let _ = reply.send(result);
    }
}

fn answer_err(replies: Vec<Reply>, e: StoreError) {
    if let Some(reply) = replies.into_iter().next() {
        let _ = reply.send(Err(e));
    }
}

pub(crate) fn answer_one(reply: Reply, created: Result<Created>) {
    let result = created.and_then(|c| c.finish().pop().expect("one result per message"));
    let _ = reply.send(result);
}

/// Answers every job of a batch from its write. If the batch failed as a whole and held
/// several messages, gives the jobs back instead, to be written one by one (then answered with
/// [`answer_one`]), so one bad message cannot fail the others.
///
/// A storage fault is not the messages' doing: writing them one by one would only fail again,
/// once per message. The store notes it once and every job is refused with it.
pub(crate) fn answer_or_split(
    store: &Store,
    inputs: Vec<Input>,
    replies: Vec<Reply>,
    written: Result<Created>,
) -> Vec<(Input, Reply)> {
    match written {
        Ok(created) => answer(replies, created),
        Err(e) if inputs.len() == 1 => answer_err(replies, e),
        Err(e) if let Some(fault) = store.note(&e) => {
            for reply in replies {
                let _ = reply.send(Err(StoreError::Refused {
                    fault,
                    why: fault.plain().to_owned(),
                }));
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, count = inputs.len(), "a message batch failed; writing its messages one by one");
            return inputs.into_iter().zip(replies).collect();
        }
    }
    Vec::new()
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
        mut new: NewMessage,
        give_up_at: GiveUpAt,
    ) -> Result<CreatedMessage> {
        check_owner(tenant, &app.tenant_id, "application")?;
        self.health.take_messages()?;
        if new.trace_parent.is_none() {
            new.trace_parent = crate::trace::current();
        }
        let (reply, answer) = oneshot::channel();
        let job = IngestJob {
            tenant,
            app: app.clone(),
            new,
            give_up_at,
            reply,
        };
        let sent = self.send_to_writer(job).await;
        let job = match sent {
            Ok(()) => match answer.await {
                Ok(result) => return result,
                // The writer went away (its runtime shut down) without answering: the
                // batch may or may not be committed, so this one cannot be retried.
                Err(_) => return Err(StoreError::Corrupt("the message writer stopped".into())),
            },
            Err(job) => job,
        };
        // No writer (or it is gone): write this one alone.
        let IngestJob {
            tenant,
            app,
            new,
            give_up_at,
            ..
        } = job;
        self.create_batch(vec![(tenant, app, new, give_up_at)])
            .await?
            .pop()
            .expect("one result per message")
    }
}

/// The enabled endpoints of the batch's applications: what a new message can go to.
pub(crate) fn enabled_endpoints(inputs: &[Input]) -> sea_orm::Select<endpoint::Entity> {
    endpoint::Entity::find()
        .filter(endpoint::Column::AppId.is_in(app_ids(inputs)))
        .filter(endpoint::Column::Disabled.eq(false))
}

fn app_ids(inputs: &[Input]) -> HashSet<ApplicationId> {
    inputs.iter().map(|(_, a, _, _)| a.id).collect()
}

pub(crate) fn by_app(
    endpoints: Vec<endpoint::Model>,
) -> HashMap<ApplicationId, Vec<endpoint::Model>> {
    let mut of: HashMap<ApplicationId, Vec<endpoint::Model>> = HashMap::new();
    for ep in endpoints {
        of.entry(ep.app_id).or_default().push(ep);
    }
    of
}

/// Per message: its row and the endpoints it goes to, or why it cannot be created.
pub(crate) type Planned<'e> = Result<(message::Model, Vec<&'e endpoint::Model>)>;

pub(crate) fn plan<'e>(
    inputs: &[Input],
    endpoints_of: &'e HashMap<ApplicationId, Vec<endpoint::Model>>,
    now: Timestamp,
) -> Vec<Planned<'e>> {
    inputs
        .iter()
        .map(|(tenant, app, new, _)| {
            let targets: Result<Vec<&endpoint::Model>> = endpoints_of
                .get(&app.id)
                .map(|eps| eps.as_slice())
                .unwrap_or_default()
                .iter()
                .filter(|ep| ep.tenant_id == *tenant)
                .filter_map(|ep| match new.to_endpoint {
                    Some(only) => (ep.id == only).then_some(Ok(ep)),
                    None => match endpoint_accepts(ep, &new.event_type, &new.channels) {
                        Ok(true) => Some(Ok(ep)),
                        Ok(false) => None,
                        Err(e) => Some(Err(e)),
                    },
                })
                .collect();
            targets.map(|t| {
                // Ids increase strictly within the process: one minted just after another
                // thread's, a millisecond later, carries that later time. `createdAt` is the
                // id's own time, so listing by time (an id range) and by `createdAt` agree.
                let id = MessageId::new_at(now, &mut rand::rng());
                let m = message::Model {
                    id,
                    tenant_id: *tenant,
                    app_id: app.id,
                    event_type: new.event_type.clone(),
                    event_id: new.event_id.clone(),
                    payload: new.payload.clone(),
                    channels: (!new.channels.is_empty()).then(|| to_json(&new.channels)),
                    tags: (!new.tags.is_empty()).then(|| to_json(&new.tags)),
                    ordering_key: new.ordering_key.clone(),
                    created_at: id.created_at().as_millis(),
                    deliver_at: new.deliver_at.map(|at| at.as_millis()),
                    trace_parent: new.trace_parent.clone(),
                };
                (m, t)
            })
        })
        .collect()
}

pub(crate) fn to_insert<'p>(planned: &'p [Planned<'_>]) -> Vec<&'p message::Model> {
    planned
        .iter()
        .filter_map(|r| r.as_ref().ok().map(|(m, _)| m))
        .collect()
}

/// Where a delivery sits in a batch (message index, target index), and the (tenant, endpoint,
/// key) whose next sequence number it takes.
type OrderedTarget<'p> = ((usize, usize), (TenantId, EndpointId, &'p str));

/// Every delivery that needs a sequence number: those of written messages with an ordering key.
pub(crate) fn ordered_targets<'p>(
    planned: &'p [Planned<'_>],
    inputs: &[Input],
    inserted: &HashSet<MessageId>,
) -> Vec<OrderedTarget<'p>> {
    let mut out = Vec::new();
    for (i, (p, (tenant, ..))) in planned.iter().zip(inputs).enumerate() {
        let Ok((m, targets)) = p else { continue };
        let Some(key) = m.ordering_key.as_deref() else {
            continue;
        };
        if !inserted.contains(&m.id) {
            continue;
        }
        for (j, ep) in targets.iter().enumerate() {
            out.push(((i, j), (*tenant, ep.id, key)));
        }
    }
    // Counters are locked in one order by every batch, so batches written at once (several
    // API nodes on PostgreSQL) cannot deadlock; a stable sort keeps each key's messages in
    // batch order.
    out.sort_by(|a, b| (a.1.1, a.1.2).cmp(&(b.1.1, b.1.2)));
    out
}

/// A written batch: the rows to insert, the deliveries claimed for the local dispatcher, and
/// each message's result. [`Created::finish`] hands the claimed ones over once committed.
pub(crate) struct Created {
    pub(crate) deliveries: Vec<delivery::Model>,
    /// (index in `deliveries`, index in `out`, slot) of those claimed for the local
    /// dispatcher.
    pub(crate) handed: Vec<(usize, usize, Slot)>,
    pub(crate) handoff: Option<Handoff>,
    /// The handed-off deliveries' endpoints with their secrets, where the writer read them.
    endpoints: HashMap<EndpointId, std::sync::Arc<crate::DispatchEndpoint>>,
    out: Vec<Result<CreatedMessage>>,
}

pub(crate) fn assemble(
    planned: Vec<Planned<'_>>,
    inputs: &[Input],
    inserted: &HashSet<MessageId>,
    seqs: &HashMap<(usize, usize), i64>,
    handoff: Option<Handoff>,
    now: Timestamp,
) -> Created {
    let mut deliveries = Vec::new();
    let mut handed = Vec::new();
    let mut out = Vec::with_capacity(inputs.len());
    for (i, (result, (tenant, _, new, give_up_at))) in planned.into_iter().zip(inputs).enumerate() {
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
        // A scheduled message's deliveries wait in the table until due; never handed off.
        let due = new.deliver_at.filter(|at| *at > now);
        // A delivery starts when its message was made: the message's id may carry a
        // millisecond later than `now` (ids increase strictly), and the TTL counts from here.
        let made = now.max(Timestamp::from_millis(message.created_at));
        let mut mine = Vec::with_capacity(targets.len());
        for (j, ep) in targets.into_iter().enumerate() {
            let seq = seqs.get(&(i, j)).copied();
            let starts = due.unwrap_or(made);
            let mut d = new_delivery(
                *tenant,
                &message,
                ep,
                seq,
                made,
                give_up_at(ep, starts),
                AttemptTrigger::Scheduled,
            );
            d.next_attempt_at = starts.as_millis();
            if let Some(h) = handoff.as_ref().filter(|_| seq.is_none() && due.is_none())
                && let Some(slot) = h.taker.reserve(ep.id)
            {
                d.state = domain::delivery::DeliveryState::Sending;
                d.lease_owner = Some(h.owner.clone());
                d.lease_expires_at = Some(now.plus(h.lease).as_millis());
                // `out.len()`: where this message's result is about to go.
                handed.push((deliveries.len() + mine.len(), out.len(), slot));
            }
            mine.push(d);
        }
        deliveries.extend(mine.iter().cloned());
        out.push(Ok(CreatedMessage {
            message,
            deliveries: mine,
        }));
    }
    Created {
        deliveries,
        handed,
        handoff,
        endpoints: HashMap::new(),
        out,
    }
}

impl Created {
    /// The handed-off deliveries' endpoints, by id.
    pub(crate) fn handed_endpoints(&self) -> HashSet<EndpointId> {
        self.handed
            .iter()
            .map(|(i, ..)| self.deliveries[*i].endpoint_id)
            .collect()
    }

    /// The handed-off deliveries' ids.
    pub(crate) fn handed_ids(&self) -> Vec<DeliveryId> {
        self.handed
            .iter()
            .map(|(i, _, _)| self.deliveries[*i].id)
            .collect()
    }

    /// Reads the signing secrets of the handed-off deliveries' endpoints, if any were handed.
    /// The dispatcher then gets endpoints and secrets as this transaction saw them, as fresh
    /// as its own read would be, without two more queries per batch.
    pub(crate) fn secrets_query(&self) -> Option<sea_orm::Select<endpoint_secret::Entity>> {
        let ids = self.handed_endpoints();
        (!ids.is_empty()).then(|| {
            endpoint_secret::Entity::find().filter(endpoint_secret::Column::EndpointId.is_in(ids))
        })
    }

    /// Attaches the handed-off deliveries' endpoints, with `secrets` (those of
    /// [`Created::secrets_query`]), for the dispatcher. The secrets were read for the handed
    /// endpoints only, and `with_secrets` keeps just the endpoints that have some.
    pub(crate) fn attach_endpoints(
        &mut self,
        endpoints_of: HashMap<ApplicationId, Vec<endpoint::Model>>,
        secrets: Vec<endpoint_secret::Model>,
        now: Timestamp,
        keys: &domain::seal::Keyring,
    ) {
        let endpoints = endpoints_of.into_values().flatten().collect();
        self.endpoints = crate::dispatch::with_secrets(endpoints, secrets, now, keys)
            .into_iter()
            .map(|(id, ep)| (id, std::sync::Arc::new(ep)))
            .collect();
    }

    /// Takes back the messages not in `inserted` (their eventId was taken): each answers
    /// `Conflict`, and its deliveries (not inserted either) are not handed off; their slots
    /// go back at once.
    pub(crate) fn keep_only(&mut self, inserted: &HashSet<MessageId>) {
        let mut gone = HashSet::new();
        for (at, out) in self.out.iter_mut().enumerate() {
            if out
                .as_ref()
                .is_ok_and(|c| !inserted.contains(&c.message.id))
            {
                *out = Err(StoreError::Conflict { field: "eventId" });
                gone.insert(at);
            }
        }
        // `handed` points into `deliveries` by index, so `deliveries` is left as it is.
        self.handed.retain(|(_, at, _)| !gone.contains(at));
    }

    /// Gives the ordered deliveries the numbers the database assigned them, by delivery id.
    pub(crate) fn number(&mut self, seqs: HashMap<DeliveryId, i64>) {
        let deliveries = self.deliveries.iter_mut().chain(
            self.out
                .iter_mut()
                .flatten()
                .flat_map(|c| c.deliveries.iter_mut()),
        );
        for d in deliveries {
            if d.seq.is_some() {
                d.seq = seqs.get(&d.id).copied();
            }
        }
    }

    /// After the commit: hands the claimed deliveries to the dispatcher and returns each
    /// message's result.
    pub(crate) fn finish(self) -> Vec<Result<CreatedMessage>> {
        let Created {
            deliveries,
            handed,
            handoff,
            endpoints,
            out,
        } = self;
        if let Some(h) = handoff {
            // Fan-out deliveries of one message share one copy of it.
            let mut shared: HashMap<usize, std::sync::Arc<message::Model>> = HashMap::new();
            for (i, at, slot) in handed {
                let Some(Ok(created)) = out.get(at) else {
                    continue;
                };
                let message = shared
                    .entry(at)
                    .or_insert_with(|| std::sync::Arc::new(created.message.clone()))
                    .clone();
                // A closed channel leaves the delivery leased until its lease runs out.
                let delivery = deliveries[i].clone();
                let endpoint = endpoints.get(&delivery.endpoint_id).cloned();
                if !h.taker.take(HandedOff {
                    delivery,
                    message,
                    endpoint,
                    slot,
                }) {
                    break;
                }
            }
        }
        out
    }
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
        self.health.take_messages()?;
        let mut out = Vec::with_capacity(news.len());
        let traced = crate::trace::current();
        let mut news = news
            .into_iter()
            .map(|mut n| {
                if n.trace_parent.is_none() {
                    n.trace_parent.clone_from(&traced);
                }
                n
            })
            .peekable();
        while news.peek().is_some() {
            let inputs: Vec<_> = news
                .by_ref()
                .take(MAX_BATCH)
                .map(|n| (tenant, app.clone(), n, give_up_at))
                .collect();
            out.extend(self.create_batch(inputs).await?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    use domain::Timestamp;

    use super::{Input, Planned, assemble};
    use crate::entities::{application, endpoint};
    use crate::testing::{endpoint_model, message_model, named};

    fn day(_: &endpoint::Model, from: Timestamp) -> Timestamp {
        from.plus(Duration::from_secs(86_400))
    }

    /// Ids increase strictly, so a message minted in a burst can carry a millisecond later
    /// than the batch's clock: its deliveries start then, and their TTL counts from there.
    #[test]
    fn a_deliverys_ttl_counts_from_its_creation_when_its_messages_id_ran_ahead() {
        let now = Timestamp::from_millis(1_800_000_000_000);
        let message = crate::entities::message::Model {
            created_at: now.as_millis() + 3,
            ..message_model()
        };
        let ep = endpoint_model("ep_1", "https://example.com/");
        let app = application::Model {
            id: named("app_1"),
            tenant_id: named("tnt_1"),
            uid: None,
            name: "a".into(),
            rate_limit: None,
            metadata: "{}".into(),
            created_at: 0,
            updated_at: 0,
            payload_retention_days: None,
            metadata_retention_days: None,
            payload_expunged_before: None,
            internal: false,
        };
        let inserted = HashSet::from([message.id]);
        let inputs: Vec<Input> = vec![(named("tnt_1"), app, Default::default(), day)];
        let planned: Vec<Planned<'_>> = vec![Ok((message, vec![&ep]))];
        let created = assemble(planned, &inputs, &inserted, &HashMap::new(), None, now);
        let d = &created.deliveries[0];
        assert_eq!(d.created_at, now.as_millis() + 3);
        assert_eq!(d.next_attempt_at, d.created_at);
        assert_eq!(d.give_up_at - d.created_at, 86_400_000);
    }
}
