use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use domain::Timestamp;
use domain::breaker::{BreakerConfig, BreakerState};
use domain::egress::Egress;
use domain::endpoint_url::AllowList;
use domain::ids::{DeliveryId, EndpointId, MessageId, TenantId};
use domain::operational::{AttemptEvent, AttemptKind, LastAttempt, OperationalEvent};
use domain::signing::SignatureHeaders;
use store::entities::delivery;
use store::{AttemptResult, DispatchEndpoint, Next, Store};
use tokio::sync::{Mutex, Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::flow::{BreakerChange, Flow, Gate, Then};
use crate::metrics::Metrics;
use crate::send::{self, Prepared};

/// The dispatcher as the store's [`store::Taker`]: a new delivery is taken at creation only
/// while more than `keep_free` of the in-flight permits are free (the rest is left for claims
/// of retries and backlogs), and each holds one permit until its result is recorded.
#[derive(Debug)]
struct PermitTaker {
    permits: Arc<Semaphore>,
    keep_free: usize,
    leased: Leased,
    tx: mpsc::UnboundedSender<store::HandedOff>,
}

impl store::Taker for PermitTaker {
    fn reserve(&self, endpoint: EndpointId) -> Option<store::Slot> {
        if self.permits.available_permits() <= self.keep_free || !self.leased.holds(endpoint) {
            return None;
        }
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(store::Slot::new(permit))
    }

    fn take(&self, handed: store::HandedOff) -> bool {
        self.tx.send(handed).is_ok()
    }

    fn is_open(&self) -> bool {
        !self.tx.is_closed()
    }
}

/// The endpoints this process holds the lease of, and until when (see the store's
/// `endpoint_leases`): on PostgreSQL only the holder sends to an endpoint, so its flow control
/// (in [`Flow`]) holds for every process. A new delivery is handed over at creation only for
/// an endpoint held for at least another `margin` (the next renewal comes well before that);
/// otherwise it waits in the table for a claim, which takes or renews the lease. With one
/// process (SQLite) every endpoint counts as held.
#[derive(Clone, Debug)]
struct Leased {
    exclusive: bool,
    margin: Duration,
    until: Arc<std::sync::Mutex<HashMap<EndpointId, Timestamp>>>,
}

impl Leased {
    fn new(exclusive: bool, lease: Duration) -> Self {
        Leased {
            exclusive,
            margin: lease / 2,
            until: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<EndpointId, Timestamp>> {
        self.until.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn holds(&self, endpoint: EndpointId) -> bool {
        !self.exclusive
            || self
                .lock()
                .get(&endpoint)
                .is_some_and(|until| *until > Timestamp::now().plus(self.margin))
    }

    /// A claim took these endpoints until `until`. Returns those this process did not hold
    /// until now: another process may have sent to them meanwhile.
    fn held(
        &self,
        endpoints: impl IntoIterator<Item = EndpointId>,
        until: Timestamp,
    ) -> Vec<EndpointId> {
        if !self.exclusive {
            return Vec::new();
        }
        let now = Timestamp::now();
        let mut all = self.lock();
        let mut taken = Vec::new();
        for ep in endpoints {
            if all.insert(ep, until).is_none_or(|before| before <= now) {
                taken.push(ep);
            }
        }
        taken
    }

    /// A renewal of `asked` kept only `kept`: the others went to another process. Leases
    /// that ran out are forgotten.
    fn renewed(&self, asked: &[EndpointId], kept: &[EndpointId], until: Timestamp) {
        if !self.exclusive {
            return;
        }
        let kept: HashSet<EndpointId> = kept.iter().copied().collect();
        let now = Timestamp::now();
        let mut all = self.lock();
        for ep in asked {
            if kept.contains(ep) {
                all.insert(*ep, until);
            } else {
                all.remove(ep);
            }
        }
        all.retain(|_, t| *t > now);
    }

    fn clear(&self) {
        self.lock().clear();
    }
}

/// Deliveries created this recently are claimed first (see `Store::claim_due`).
const FRESH_WINDOW: Duration = Duration::from_secs(2);
/// Most saturated endpoints a claim of new work skips (see `store::Fresh`).
const MAX_SKIPPED: usize = 64;

#[derive(Clone, Debug)]
pub struct DispatcherConfig {
    /// This process's id: the lease owner of what it claims.
    pub node_id: String,
    /// Most deliveries claimed per query.
    pub batch_size: u64,
    /// Most HTTP requests in flight from this process.
    pub max_in_flight: usize,
    /// How often to look for due work when nothing wakes us (other processes' ingests, retries
    /// coming due).
    pub poll_interval: Duration,
    /// How long a claim is held without renewal; a dead process's work returns after this.
    pub lease: Duration,
    /// Networks deliveries may reach despite the SSRF guard.
    pub allow_networks: AllowList,
    /// Refuse to send to `http://` endpoints (an attempt error instead).
    pub https_only: bool,
    /// The signature header names of endpoints that do not choose their own.
    pub signature_headers: SignatureHeaders,
    /// How failures are classified for endpoints that do not choose a `statusPreset`.
    pub status_preset: domain::classify::StatusPreset,
    /// Send every request through this proxy (`http://`, `https://` or `socks5://`); `None`
    /// connects directly. The environment's `HTTP_PROXY` and friends are never used.
    pub proxy: Option<String>,
    /// When an endpoint's circuit breaker opens, and for how long.
    pub breaker: BreakerConfig,
    /// Where hookd is reached, for links in emails (an endpoint disabled on a 410).
    pub public_url: String,
}

impl DispatcherConfig {
    pub fn new(node_id: String, allow_networks: AllowList) -> Self {
        DispatcherConfig {
            node_id,
            batch_size: 256,
            max_in_flight: 1024,
            poll_interval: Duration::from_millis(200),
            lease: Duration::from_secs(30),
            allow_networks,
            https_only: false,
            signature_headers: SignatureHeaders::default(),
            status_preset: Default::default(),
            proxy: None,
            breaker: BreakerConfig::default(),
            public_url: "http://127.0.0.1:8080".to_owned(),
        }
    }
}

pub struct Dispatcher {
    store: Store,
    cfg: DispatcherConfig,
    wake: Arc<Notify>,
    clients: Arc<crate::http::Clients>,
    flow: Arc<Flow<Job>>,
    metrics: Arc<Metrics>,
    leased: Leased,
    prepared: PreparedCache,
}

const RESULT_BATCH: usize = 512;

/// Claimed work's endpoints as prepared for sending, kept from batch to batch while the
/// store's copy of the endpoint (see `store::dispatch`), its tenant's preset and its egress
/// stay the same: fanned out, most deliveries of a batch have an endpoint of their own, and
/// preparing one (its URL parsed twice, its secrets decoded, its status overrides read) cost
/// 3.8 µs of a delivery's 160 at 1,000 endpoints (session 45). Bounded: past
/// [`PreparedCache::MOST`] it keeps only what is still in use.
#[derive(Default)]
struct PreparedCache(std::sync::Mutex<HashMap<EndpointId, Arc<Prepared>>>);

impl PreparedCache {
    const MOST: usize = 4096;

    fn get(
        &self,
        ep: Arc<DispatchEndpoint>,
        cfg: &DispatcherConfig,
        preset: Option<domain::classify::StatusPreset>,
        egress: Arc<Egress>,
    ) -> Arc<Prepared> {
        let id = ep.endpoint.id;
        let lock = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = lock().get(&id)
            && Arc::ptr_eq(&p.ep, &ep)
            && p.tenant_preset == preset
            && *p.egress == *egress
        {
            return p.clone();
        }
        let p = Arc::new(Prepared::new(ep, cfg, preset, egress));
        let mut kept = lock();
        if !kept.contains_key(&id) && kept.len() >= Self::MOST {
            // In use: the store still holds its copy of the endpoint, or a job holds it.
            kept.retain(|_, p| Arc::strong_count(&p.ep) > 1 || Arc::strong_count(p) > 1);
            if kept.len() >= Self::MOST {
                // Every one kept is in use: this one is prepared for its batch only.
                return p;
            }
        }
        kept.insert(id, p.clone());
        p
    }
}

/// The claims this process holds and is working on: the only leases it renews. A claim
/// dropped from here by an error expires and returns to pending for anyone to take.
#[derive(Clone, Default)]
struct Held(Arc<std::sync::Mutex<HashMap<DeliveryId, EndpointId>>>);

impl Held {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DeliveryId, EndpointId>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn add<'a>(&self, deliveries: impl IntoIterator<Item = &'a delivery::Model>) {
        self.lock()
            .extend(deliveries.into_iter().map(|d| (d.id, d.endpoint_id)));
    }
    fn drop_ids<'a>(&self, ids: impl IntoIterator<Item = &'a DeliveryId>) {
        let mut held = self.lock();
        for id in ids {
            held.remove(id);
        }
    }
    fn snapshot(&self) -> Vec<DeliveryId> {
        self.lock().keys().copied().collect()
    }
    /// The endpoints of the claims held: their endpoint leases are renewed with them.
    fn endpoints(&self) -> Vec<EndpointId> {
        let set: HashSet<EndpointId> = self.lock().values().copied().collect();
        set.into_iter().collect()
    }
}

impl Dispatcher {
    pub fn new(store: Store, cfg: DispatcherConfig, wake: Arc<Notify>) -> reqwest::Result<Self> {
        let clients = Arc::new(crate::http::Clients::new(
            Egress::new(cfg.allow_networks.clone(), Vec::new()),
            cfg.proxy.clone(),
            cfg.max_in_flight,
        )?);
        // One endpoint's line may hold at most half the process's in-flight permits.
        let flow = Arc::new(Flow::new(cfg.breaker, cfg.max_in_flight / 2));
        let leased = Leased::new(store.backend() == store::Backend::Postgres, cfg.lease);
        Ok(Dispatcher {
            leased,
            store,
            cfg,
            wake,
            clients,
            flow,
            metrics: Arc::new(Metrics::default()),
            prepared: PreparedCache::default(),
        })
    }

    /// Counts attempts into `metrics` (shared with whoever serves `/metrics`).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Runs until `stop` turns true: stops claiming, lets in-flight attempts finish and be
    /// recorded, and gives back any claim it had not started.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let (tx, rx) = mpsc::channel::<Done>(RESULT_BATCH * 4);
        let held = Held::default();
        let writer = tokio::spawn(write_results(
            self.store.clone(),
            self.cfg.node_id.clone(),
            self.cfg.public_url.clone(),
            rx,
            self.wake.clone(),
            held.clone(),
        ));
        let in_flight = Arc::new(Semaphore::new(self.cfg.max_in_flight));
        let slots = Arc::new(Slots {
            store: self.store.clone(),
            owner: self.cfg.node_id.clone(),
            http: send::Senders {
                clients: self.clients.clone(),
                tokens: crate::auth::Tokens::new(self.cfg.https_only, Some(self.store.clone())),
                mtls: crate::http::MtlsClients::new(self.cfg.proxy.clone(), self.cfg.max_in_flight),
                brokers: crate::broker::Brokers::default(),
            },
            flow: self.flow.clone(),
            metrics: self.metrics.clone(),
            tx,
            held: held.clone(),
            stopping: AtomicBool::new(false),
            unstarted: Mutex::new(Vec::new()),
        });
        // The renewer outlives the claim loop: it stops only once in-flight work is recorded.
        let (stop_renewing, renewer_stop) = watch::channel(false);
        let renewer = tokio::spawn(renew_leases(
            self.store.clone(),
            self.cfg.clone(),
            held.clone(),
            self.leased.clone(),
            renewer_stop,
        ));
        let watcher = tokio::spawn(watch_endpoints(
            self.store.clone(),
            self.flow.clone(),
            stop_renewing.subscribe(),
        ));
        let mut tasks = JoinSet::new();
        let mut last_reap = Instant::now() - Duration::from_secs(60);
        let this = Arc::new(self);
        let taker = this.take_handoffs(&in_flight, &held, &slots);
        let this = &*this;

        while !*stop.borrow() {
            while tasks.try_join_next().is_some() {}
            if last_reap.elapsed() > this.cfg.lease / 3 {
                last_reap = Instant::now();
                this.reap().await;
            }
            let room = in_flight
                .available_permits()
                .min(this.cfg.batch_size as usize);
            if room == 0 {
                // Full: wait until a result is recorded and frees its permit.
                tokio::select! {
                    p = in_flight.acquire() => drop(p),
                    _ = stop.changed() => {}
                }
                continue;
            }
            let Some((claimed, took_endpoints)) = this.claim(room).await else {
                sleep_or_stop(&mut stop, this.cfg.poll_interval).await;
                continue;
            };
            // On PostgreSQL a claim takes only so many endpoints new to this process (see
            // `endpoint_leases`) and may stop short of its room with more due: one that took
            // new endpoints looks again at once (one that only found a saturated endpoint's
            // work waits, or it would spin on that backlog).
            let full = claimed.len() == room || took_endpoints;
            this.start_claimed(claimed, &in_flight, &held, &slots, &mut tasks)
                .await;
            if !full {
                tokio::select! {
                    _ = this.wake.notified() => {}
                    _ = tokio::time::sleep(this.cfg.poll_interval) => {}
                    _ = stop.changed() => {}
                }
            }
        }
        this.store.set_handoff(None);
        slots.stopping.store(true, Ordering::SeqCst);
        while tasks.join_next().await.is_some() {}
        // Whatever was handed over by then is started or, being late, set aside as unstarted.
        let _ = taker.await;
        this.release_unstarted(&slots).await;
        drop(slots);
        let _ = writer.await;
        let _ = stop_renewing.send(true);
        let _ = renewer.await;
        let _ = watcher.await;
        // Every claim is recorded or given back: its endpoints are free for the others now
        // rather than when their leases run out.
        this.leased.clear();
        if let Err(e) = this
            .store
            .system()
            .release_endpoint_leases(&this.cfg.node_id)
            .await
        {
            tracing::warn!(error = %e, "could not release endpoint leases; they will expire");
        }
    }

    /// Registers this dispatcher as the store's taker of new deliveries (see [`PermitTaker`])
    /// and starts the task that starts them, so they never wait for a claim round. The task
    /// ends once the store drops its sender (`set_handoff(None)` at shutdown).
    fn take_handoffs(
        self: &Arc<Self>,
        in_flight: &Arc<Semaphore>,
        held: &Held,
        slots: &Arc<Slots>,
    ) -> tokio::task::JoinHandle<()> {
        let (handoff_tx, mut handoff_rx) = mpsc::unbounded_channel();
        self.store.set_handoff(Some(store::Handoff {
            owner: self.cfg.node_id.clone(),
            lease: self.cfg.lease,
            taker: Arc::new(PermitTaker {
                permits: in_flight.clone(),
                keep_free: self.cfg.max_in_flight / 8,
                leased: self.leased.clone(),
                tx: handoff_tx,
            }),
        }));
        let (this, held, slots) = (self.clone(), held.clone(), slots.clone());
        tokio::spawn(async move {
            let mut tasks = JoinSet::new();
            let mut handed = Vec::new();
            while handoff_rx.recv_many(&mut handed, RESULT_BATCH).await > 0 {
                while tasks.try_join_next().is_some() {}
                this.take_handed(std::mem::take(&mut handed), &held, &slots, &mut tasks)
                    .await;
            }
            while tasks.join_next().await.is_some() {}
        })
    }

    /// Returns expired leases (a crashed process's claims) to pending.
    async fn reap(&self) {
        match self
            .store
            .system()
            .reap_expired_leases(Timestamp::now())
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "returned expired leases to pending"),
            Err(e) => self.store.warn_unless_fault(&e, "lease reaper"),
        }
    }

    /// Claims up to `room` due deliveries: half the room for what just became due, the rest
    /// oldest first, fair to new messages without starving a backlog; and whether it took
    /// endpoints new to this process. `None` when a claim failed (what the first query claimed
    /// is given back).
    async fn claim(&self, room: usize) -> Option<(Vec<delivery::Model>, bool)> {
        // A claim is a write: while the database cannot take writes it would only fail, and
        // claims whose results cannot be written would be sent again. The store's probe says
        // when writes succeed again.
        if !self.store.storage().is_writable() {
            return None;
        }
        let now = Timestamp::now();
        let lease_until = now.plus(self.cfg.lease);
        let since = Timestamp::from_millis(now.as_millis() - FRESH_WINDOW.as_millis() as i64);
        let skip = self.flow.saturated(MAX_SKIPPED);
        let owner = &self.cfg.node_id;
        let system = self.store.system();
        let fresh = system
            .claim_due(
                owner,
                now,
                lease_until,
                room.div_ceil(2) as u64,
                Some(store::Fresh { since, skip: &skip }),
            )
            .await;
        let result = match fresh {
            Ok(mut fresh) => {
                let rest = (room - fresh.len()) as u64;
                match system.claim_due(owner, now, lease_until, rest, None).await {
                    Ok(old) => {
                        fresh.extend(old);
                        Ok(fresh)
                    }
                    Err(e) => Err((e, fresh)),
                }
            }
            Err(e) => Err((e, Vec::new())),
        };
        match result {
            Ok(claimed) => {
                // The claim took (or renewed) the lease of every endpoint it returned. One
                // taken anew may have had its breaker opened or closed by its last holder:
                // its flow state here is dropped and starts again from what is stored.
                let taken = self
                    .leased
                    .held(claimed.iter().map(|d| d.endpoint_id), lease_until);
                let took = !taken.is_empty();
                for ep in taken {
                    self.flow.forget_idle(ep);
                }
                Some((claimed, took))
            }
            Err((e, partial)) => {
                // A storage fault is logged once, by the store, when its state changes.
                self.store.warn_unless_fault(&e, "claim failed; retrying");
                let ids: Vec<DeliveryId> = partial.into_iter().map(|d| d.id).collect();
                let _ = system.release_claims(owner, &ids).await;
                None
            }
        }
    }

    /// Holds `claimed` and starts it; gives the claims back if its messages and endpoints
    /// cannot be read.
    async fn start_claimed(
        &self,
        claimed: Vec<delivery::Model>,
        in_flight: &Arc<Semaphore>,
        held: &Held,
        slots: &Arc<Slots>,
        tasks: &mut JoinSet<()>,
    ) {
        if claimed.is_empty() {
            return;
        }
        let ids: Vec<DeliveryId> = claimed.iter().map(|d| d.id).collect();
        held.add(&claimed);
        if let Err(e) = self.start(claimed, in_flight, slots, tasks).await {
            tracing::warn!(error = %e, "loading claimed work failed; giving the claims back");
            self.give_back(held, &ids).await;
        }
    }

    /// Forgets claims this process will not start and hands them back to pending at once
    /// (should that fail, their leases expire and the reaper does it).
    async fn give_back(&self, held: &Held, ids: &[DeliveryId]) {
        held.drop_ids(ids);
        if let Err(e) = self
            .store
            .system()
            .release_claims(&self.cfg.node_id, ids)
            .await
        {
            tracing::warn!(error = %e, "could not release claims; their leases will expire");
        }
    }

    /// At shutdown: gives back the claims that were never started (late hand-offs, deliveries
    /// still waiting in an endpoint's line).
    async fn release_unstarted(&self, slots: &Slots) {
        let mut leftover = std::mem::take(&mut *slots.unstarted.lock().await);
        leftover.extend(self.flow.drain_all().into_iter().map(|j| j.d.id));
        match self
            .store
            .system()
            .release_claims(&self.cfg.node_id, &leftover)
            .await
        {
            Ok(n) if n > 0 => tracing::info!(count = n, "released unstarted claims"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not release claims; their leases will expire")
            }
        }
    }

    /// Starts deliveries the message writer claimed for this process at their creation.
    async fn take_handed(
        &self,
        handed: Vec<store::HandedOff>,
        held: &Held,
        slots: &Arc<Slots>,
        tasks: &mut JoinSet<()>,
    ) {
        held.add(handed.iter().map(|h| &h.delivery));
        let ids: Vec<DeliveryId> = handed.iter().map(|h| h.delivery.id).collect();
        let mut items = Vec::with_capacity(handed.len());
        let mut stray = Vec::new();
        for h in handed {
            // Our own taker's slots are in-flight permits; nothing else registers as taker.
            match h.slot.into_inner::<OwnedSemaphorePermit>() {
                Some(permit) => items.push((h.delivery, h.message, h.endpoint, permit)),
                None => stray.push(h.delivery.id),
            }
        }
        if !stray.is_empty() {
            tracing::error!(
                count = stray.len(),
                "handed over without a permit; released"
            );
            self.give_back(held, &stray).await;
        }
        if let Err(e) = self.admit(items, slots, tasks).await {
            tracing::warn!(error = %e, "loading new work failed; giving the claims back");
            self.give_back(held, &ids).await;
        }
    }

    async fn start(
        &self,
        claimed: Vec<delivery::Model>,
        in_flight: &Arc<Semaphore>,
        slots: &Arc<Slots>,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), store::StoreError> {
        let wanted: Vec<(EndpointId, MessageId)> =
            claimed.iter().map(|d| (d.endpoint_id, d.msg_id)).collect();
        // Fan-out deliveries of one message share it.
        let messages: HashMap<MessageId, Arc<store::entities::message::Model>> = self
            .store
            .system()
            .messages_by_ids(&wanted)
            .await?
            .into_iter()
            .map(|(id, m)| (id, Arc::new(m)))
            .collect();
        let mut items = Vec::with_capacity(claimed.len());
        let mut gone = Vec::new();
        for d in claimed {
            let Some(msg) = messages.get(&d.msg_id).cloned() else {
                // The message was deleted after the claim: nothing to send.
                gone.push(d.id);
                continue;
            };
            let Ok(permit) = in_flight.clone().acquire_owned().await else {
                gone.push(d.id);
                continue;
            };
            items.push((d, msg, None, permit));
        }
        if !gone.is_empty() {
            slots.unstarted.lock().await.extend(gone);
        }
        self.admit(items, slots, tasks).await
    }

    /// Reads the endpoints of claimed deliveries and lets each through its endpoint's flow
    /// (breaker, throttle, concurrency cap): sent now, queued in memory or deferred.
    async fn admit(
        &self,
        items: Vec<Admitted>,
        slots: &Arc<Slots>,
        tasks: &mut JoinSet<()>,
    ) -> Result<(), store::StoreError> {
        // Claimed work reads its endpoints here, from the store's copies at most a second old
        // (two queries for those not copied), so a rotated secret or a new URL applies to the
        // next batch in this process and within a second in others; a disable or delete stops
        // every request at once through the gate. A delivery handed over at creation comes
        // with its endpoint as its message's
        // transaction read it, and is sent with exactly that (one batch here may hold several
        // such snapshots of one endpoint, before and after a rotation).
        let cfg = &self.cfg;
        // The tenants' failure presets, from copies at most a second old (one query when stale).
        let presets = self
            .store
            .system()
            .tenant_presets(
                items
                    .iter()
                    .map(|(d, ..)| d.tenant_id)
                    .collect::<HashSet<_>>(),
            )
            .await?;
        let preset_of =
            |ep: &DispatchEndpoint| presets.get(&ep.endpoint.tenant_id).copied().flatten();
        // Where each tenant's endpoints may go, from copies of its grants at most a second old.
        let egress: HashMap<TenantId, Arc<Egress>> = self
            .store
            .system()
            .egress_grants_of(items.iter().map(|(d, ..)| d.tenant_id))
            .await?
            .into_iter()
            .map(|(t, grants)| {
                let e = Egress::new(cfg.allow_networks.clone(), grants.to_vec());
                (t, Arc::new(e))
            })
            .collect();
        let egress_of = |ep: &DispatchEndpoint| {
            egress
                .get(&ep.endpoint.tenant_id)
                .cloned()
                .unwrap_or_else(|| Arc::new(Egress::new(cfg.allow_networks.clone(), Vec::new())))
        };
        let mut endpoints: HashMap<EndpointId, Arc<Prepared>> = HashMap::new();
        // Keyed by the snapshot's address: one per ingest batch, alive while `items` is.
        let mut snapshots: HashMap<usize, Arc<Prepared>> = HashMap::new();
        let mut missing = HashSet::new();
        for (d, _, ep, _) in &items {
            match ep {
                Some(ep) => {
                    snapshots
                        .entry(Arc::as_ptr(ep) as usize)
                        .or_insert_with(|| {
                            Arc::new(Prepared::new(ep.clone(), cfg, preset_of(ep), egress_of(ep)))
                        });
                }
                None => {
                    missing.insert(d.endpoint_id);
                }
            }
        }
        if !missing.is_empty() {
            let ids: Vec<EndpointId> = missing.into_iter().collect();
            let read = self
                .store
                .system()
                .dispatch_endpoints(&ids, Timestamp::now())
                .await?;
            endpoints.extend(read.into_iter().map(|(id, ep)| {
                let (preset, egress) = (preset_of(&ep), egress_of(&ep));
                (id, self.prepared.get(ep, cfg, preset, egress))
            }));
        }
        let now = Timestamp::now();
        let mut deferrals = Vec::new();
        let mut changes = Vec::new();
        let mut gone = Vec::new();
        let mut paused = Vec::new();
        let mut send_now = Vec::new();
        for (d, msg, snapshot, permit) in items {
            let ep = match &snapshot {
                Some(s) => snapshots.get(&(Arc::as_ptr(s) as usize)).cloned(),
                None => endpoints.get(&d.endpoint_id).cloned(),
            };
            let Some(ep) = ep else {
                // The endpoint was deleted after the claim: nothing to send.
                gone.push(d.id);
                continue;
            };
            if ep.ep.endpoint.disabled {
                // Claimed work of a disabled endpoint waits, paused, for its enable.
                paused.push(d.id);
                continue;
            }
            let job = Job { d, msg, ep, permit };
            let ep = job.ep.clone();
            let (gate, change) = self.flow.admit(&ep.ep.endpoint, now, job);
            changes.extend(change);
            match gate {
                Gate::Send(job) => send_now.push(job),
                Gate::Wait => {}
                Gate::Defer(job, until) => deferrals.push((job.d.id, until)),
            }
        }
        if !gone.is_empty() {
            slots.unstarted.lock().await.extend(gone);
        }
        if !paused.is_empty() {
            if let Err(e) = self
                .store
                .system()
                .pause_claims(&self.cfg.node_id, &paused)
                .await
            {
                tracing::warn!(error = %e, "could not pause claims of a disabled endpoint; their leases will expire");
            }
            slots.held.drop_ids(&paused);
        }
        slots.defer(deferrals).await;
        // Before any attempt starts: a quick probe's result must not be overwritten by the
        // half-open state that let it through.
        for change in changes {
            persist_breaker(&self.store, change).await;
        }
        for job in send_now {
            let slots = slots.clone();
            tasks.spawn(async move { slots.run(job).await });
        }
        Ok(())
    }
}

/// A claimed delivery to let through its endpoint's flow: its message, its endpoint if already
/// read, and its in-flight permit.
type Admitted = (
    delivery::Model,
    Arc<store::entities::message::Model>,
    Option<Arc<DispatchEndpoint>>,
    tokio::sync::OwnedSemaphorePermit,
);

/// A claimed delivery with what it needs to be sent, holding its in-flight permit.
struct Job {
    d: delivery::Model,
    msg: Arc<store::entities::message::Model>,
    ep: Arc<Prepared>,
    permit: tokio::sync::OwnedSemaphorePermit,
}

/// What a sending task shares with the claim loop.
struct Slots {
    store: Store,
    owner: String,
    /// The HTTP clients and the OAuth tokens of the endpoints this process sends to.
    http: send::Senders,
    flow: Arc<Flow<Job>>,
    metrics: Arc<Metrics>,
    tx: mpsc::Sender<Done>,
    held: Held,
    stopping: AtomicBool,
    /// Claims never started (shutdown, or their message or endpoint deleted): given back.
    unstarted: Mutex<Vec<DeliveryId>>,
}

impl Slots {
    /// Sends `job`, then, while deliveries of the same endpoint wait for a slot, the next of
    /// them in the freed slot: a saturated endpoint's line moves without a database round trip.
    async fn run(&self, mut job: Job) {
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                let ids = self.let_go(&job);
                self.unstarted.lock().await.extend(ids);
                return;
            }
            // The one check right before a request (see `store::gate`): the endpoint was
            // disabled or deleted after this delivery was claimed. Its transaction paused or
            // removed the delivery and revoked the lease, so the claim is simply let go, with
            // whatever waits behind it.
            if self.store.system().endpoint_stopped(job.d.endpoint_id) {
                let ids = self.let_go(&job);
                tracing::debug!(endpoint_id = %job.d.endpoint_id, count = ids.len(), "endpoint stopped; claims let go");
                self.held.drop_ids(&ids);
                return;
            }
            let span = attempt_span(&job.d, &job.msg);
            let result = send::attempt(&self.http, &job.ep, &job.msg, &job.d)
                .instrument(span.clone())
                .await;
            let success = result.attempt.classification == domain::classify::Verdict::Success;
            let took = Duration::from_millis(result.attempt.duration_ms.max(0) as u64);
            record_metrics(&self.metrics, &result, &job.msg, took);
            record_outcome(span, &result);
            log_attempt(&result);
            let (change, then) =
                self.flow
                    .finished(job.d.endpoint_id, success, took, Timestamp::now());
            if let Some(change) = change {
                Box::pin(persist_breaker(&self.store, change)).await;
            }
            let operational = operational_kind(&result).map(|kind| MessageEvent {
                kind,
                event_id: job.msg.event_id.clone(),
                source: source_of(&job.msg),
            });
            // The permit travels with the result: a claim counts as in flight until its
            // result is committed, which bounds what a crash can leave to be re-sent.
            let _ = self
                .tx
                .send(Done {
                    result,
                    operational,
                    permit: job.permit,
                })
                .await;
            match then {
                Then::Idle => return,
                Then::Send(next) => job = next,
                Then::Defer(list) => {
                    Box::pin(self.defer(list.into_iter().map(|(j, at)| (j.d.id, at)).collect()))
                        .await;
                    return;
                }
            }
        }
    }

    /// Releases `job`'s slot unstarted, with whatever waits behind it; returns their ids.
    fn let_go(&self, job: &Job) -> Vec<DeliveryId> {
        let mut ids = vec![job.d.id];
        ids.extend(
            self.flow
                .abandoned(job.d.endpoint_id)
                .into_iter()
                .map(|j| j.d.id),
        );
        ids
    }

    /// Puts claims back until their times; either way this process is done with them.
    async fn defer(&self, deferrals: Vec<(DeliveryId, Timestamp)>) {
        if deferrals.is_empty() {
            return;
        }
        if let Err(e) = self
            .store
            .system()
            .defer_claims(&self.owner, &deferrals)
            .await
        {
            tracing::warn!(error = %e, "could not defer claims; their leases will expire");
        }
        self.held.drop_ids(deferrals.iter().map(|(id, _)| id));
    }
}

/// The span an attempt runs in, naming whose delivery it is: traced (OpenTelemetry, in the
/// trace of the request that created the message) and, at debug, on every line the HTTP client
/// logs. Otherwise it is disabled: one check, no formatting and no allocation, and
/// `log_attempt` names the same ids.
fn attempt_span(d: &delivery::Model, msg: &store::entities::message::Model) -> tracing::Span {
    let span = tracing::debug_span!(
        parent: None,
        "delivery",
        tenant = %d.tenant_id,
        app = %msg.app_id,
        endpoint = %d.endpoint_id,
        msg = %d.msg_id,
        delivery = %d.id,
        attempt = d.attempt_count + 1,
        attempt_id = tracing::field::Empty,
        status = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    store::trace::join(&span, msg.trace_parent.as_deref());
    span
}

/// Ends the attempt's span with what the attempt came to.
fn record_outcome(span: tracing::Span, r: &AttemptResult) {
    if !span.is_disabled() {
        span.record("attempt_id", tracing::field::display(&r.attempt.id));
        span.record("status", r.attempt.status_code);
        span.record("outcome", outcome(&r.next));
    }
}

/// What became of a delivery after an attempt, in the log line and on the attempt's span.
fn outcome(next: &Next) -> &'static str {
    match next {
        Next::Succeeded => "delivered",
        Next::Retry { .. } => "will retry",
        Next::Failed => "dead",
    }
}

/// One line per attempt with every id a reader needs to find it (never the payload, headers or
/// secrets): debug when delivered, info when it failed, then with its cause as the attempt's
/// page shows it.
fn log_attempt(r: &AttemptResult) {
    let a = &r.attempt;
    macro_rules! line {
        ($level:ident, $cause:expr) => {
            tracing::$level!(
                tenant_id = %a.tenant_id,
                app_id = %r.app_id,
                endpoint_id = %a.endpoint_id,
                msg_id = %a.msg_id,
                delivery_id = %r.delivery.id,
                attempt = a.attempt_number,
                status = a.status_code,
                error = a.error_kind.map(|k| k.as_str()),
                cause = $cause,
                duration_ms = a.duration_ms,
                outcome = outcome(&r.next),
                "delivery attempt"
            )
        };
    }
    match r.next {
        Next::Succeeded => line!(debug, None::<&str>),
        Next::Retry { .. } | Next::Failed => {
            let cause =
                domain::attempt::failure_cause(&a.url, a.error_kind, a.error_detail.as_deref());
            line!(info, cause.as_deref())
        }
    }
}

/// Counts a finished attempt; a delivery's first success also records its time to deliver.
fn record_metrics(
    metrics: &Metrics,
    result: &AttemptResult,
    msg: &store::entities::message::Model,
    took: Duration,
) {
    let status = result
        .attempt
        .status_code
        .and_then(|s| u16::try_from(s).ok());
    metrics.attempt(msg.tenant_id, &result.next, status, took);
    if matches!(result.next, Next::Succeeded) && is_first_success(&result.delivery) {
        let since = Timestamp::now().since(Timestamp::from_millis(msg.created_at));
        metrics.delivered(msg.tenant_id, since);
    }
}

/// Success is terminal, so a delivery armed by the schedule has never succeeded. A manual
/// re-arm (resend, recover, replay) may follow an earlier success: its last status says so.
fn is_first_success(d: &delivery::Model) -> bool {
    d.next_trigger != domain::delivery::AttemptTrigger::Manual
        || !d.last_status.is_some_and(|s| (200..300).contains(&s))
}

/// Shows a breaker's new state in the endpoint, and when it opens moves the endpoint's due
/// backlog past the open period in one statement.
async fn persist_breaker(store: &Store, change: BreakerChange) {
    let until = match change.state {
        BreakerState::Open { until } => Some(until),
        _ => None,
    };
    if let Err(e) = store
        .system()
        .set_breaker_state(change.endpoint_id, change.state.phase(), until)
        .await
    {
        tracing::warn!(error = %e, endpoint_id = %change.endpoint_id, "could not record breaker state");
    }
    if let Some(until) = until {
        tracing::info!(endpoint_id = %change.endpoint_id, "circuit breaker opened");
        if let Err(e) = store
            .system()
            .defer_endpoint_backlog(change.endpoint_id, until)
            .await
        {
            tracing::warn!(error = %e, "could not defer an open endpoint's backlog");
        }
    }
}

async fn sleep_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.changed() => {}
    }
}

/// A finished attempt and the in-flight permit it holds until recorded.
struct Done {
    result: AttemptResult,
    /// The operational webhook it makes once recorded.
    operational: Option<MessageEvent>,
    permit: tokio::sync::OwnedSemaphorePermit,
}

/// What an attempt's operational webhook says besides the attempt: its kind, its message's
/// `eventId`, and the source the message came through, if any.
#[derive(Clone)]
struct MessageEvent {
    kind: AttemptKind,
    event_id: Option<String>,
    source: Option<String>,
}

/// The name of the source `msg` came through (`/in/{source}`), from its tags.
fn source_of(msg: &store::entities::message::Model) -> Option<String> {
    let tags: Vec<String> = store::from_json("tags", msg.tags.as_deref()?).ok()?;
    domain::inbound::tagged_source(&tags).map(str::to_owned)
}

/// Which `message.attempt.*` operational webhook an attempt makes (see
/// `domain::operational::attempt_kind`): every attempt since the delivery was last armed
/// failed (success ends a delivery), and a manual re-arm after a failed attempt follows a
/// failing or exhausted one.
fn operational_kind(r: &AttemptResult) -> Option<AttemptKind> {
    let d = &r.delivery;
    let failed_before = d.attempt_count - d.attempts_at_arm;
    let last_failed =
        d.attempt_count > 0 && !d.last_status.is_some_and(|s| (200..300).contains(&s));
    domain::operational::attempt_kind(
        matches!(r.next, Next::Succeeded),
        matches!(r.next, Next::Failed),
        failed_before,
        d.next_trigger == domain::delivery::AttemptTrigger::Manual && last_failed,
    )
}

/// Sends the operational webhooks of recorded attempts (never those of a result whose lease
/// was lost: its new owner's attempt decides).
async fn send_operational(store: Store, events: Vec<(AttemptResult, MessageEvent)>) {
    for (r, event) in events {
        let a = &r.attempt;
        let last_attempt = LastAttempt {
            id: a.id,
            response_status_code: a.status_code.unwrap_or(0),
            timestamp: Timestamp::from_millis(a.started_at),
        };
        let MessageEvent {
            kind,
            event_id,
            source,
        } = event;
        store
            .emit_for_message(
                a.tenant_id,
                r.app_id,
                source.as_deref(),
                |app_uid, source_id| {
                    OperationalEvent::Attempt(
                        kind,
                        AttemptEvent {
                            app_id: r.app_id,
                            app_uid,
                            msg_id: a.msg_id,
                            msg_event_id: event_id,
                            endpoint_id: a.endpoint_id,
                            last_attempt,
                            source_id,
                        },
                    )
                },
            )
            .await;
    }
}

/// Commits results in batches: whatever has arrived, up to `RESULT_BATCH`, per transaction.
async fn write_results(
    store: Store,
    owner: String,
    public_url: String,
    mut rx: mpsc::Receiver<Done>,
    wake: Arc<Notify>,
    held: Held,
) {
    let mut done = Vec::with_capacity(RESULT_BATCH);
    while rx.recv_many(&mut done, RESULT_BATCH).await > 0 {
        let mut turn = Some(store.write_turn().await);
        // Whatever finished while waiting for the turn joins this batch.
        while done.len() < RESULT_BATCH {
            match rx.try_recv() {
                Ok(d) => done.push(d),
                Err(_) => break,
            }
        }
        let mut operational = Vec::new();
        let mut permits = Vec::with_capacity(done.len());
        let batch: Vec<AttemptResult> = done
            .drain(..)
            .map(|d| {
                permits.push(d.permit);
                if let Some(event) = d.operational {
                    operational.push((d.result.clone(), event));
                }
                d.result
            })
            .collect();
        let mut delay = Duration::from_millis(50);
        let first_try = std::time::Instant::now();
        for attempt in 1.. {
            let turn = match turn.take() {
                Some(t) => t,
                None => store.write_turn().await,
            };
            let r = store
                .system()
                .record_results_in(turn, &owner, &batch, &public_url)
                .await;
            match r {
                Ok(lost) => {
                    if !lost.is_empty() {
                        tracing::warn!(
                            count = lost.len(),
                            "results arrived after the lease was lost; state left to the new owner"
                        );
                    }
                    operational.retain(|(r, _)| !lost.contains(&r.delivery.id));
                    if !operational.is_empty() {
                        // Beside the writer, which goes on with the next batch.
                        tokio::spawn(send_operational(
                            store.clone(),
                            std::mem::take(&mut operational),
                        ));
                    }
                    break;
                }
                // While the database cannot write, the results wait for it (the probe says
                // when it can): the requests were sent, and a result written late beats the
                // same request sent again. Bounded, so a store closing for good lets go.
                Err(e)
                    if attempt < 10
                        || (first_try.elapsed() < RESULTS_PATIENCE
                            && e.storage_fault().is_some()) =>
                {
                    store.warn_unless_fault(&e, "writing results failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
                Err(e) => {
                    // The leases will expire and the deliveries be sent again: at least once.
                    tracing::error!(error = %e, count = batch.len(), "giving up writing results");
                    break;
                }
            }
        }
        // Written, lost to a new owner or given up on: either way no longer ours to renew.
        held.drop_ids(batch.iter().map(|r| &r.delivery.id));
        // A success may have made the next message of an ordered key due; a quick retry may be due.
        if batch
            .iter()
            .any(|r| r.delivery.seq.is_some() || matches!(r.next, Next::Retry { .. }))
        {
            wake.notify_one();
        }
        // Dropping the permits frees room for new claims.
        drop(permits);
    }
}

/// How long finished attempts' results wait for a database that cannot write before they are
/// given up (their leases then expire and the deliveries are sent again: at least once).
const RESULTS_PATIENCE: Duration = Duration::from_secs(120);

/// How often a dispatcher re-reads whether the endpoints it holds work for are still enabled
/// (a disable committed by another process reaches its in-memory work within this), and
/// forgets idle endpoints.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// An endpoint with nothing in flight for this long is forgotten (see `Flow::evict_idle`).
const FORGET_IDLE: Duration = Duration::from_secs(600);

/// Marks endpoints disabled or deleted by other processes (see `store::gate`) and evicts idle
/// per-endpoint state.
async fn watch_endpoints(store: Store, flow: Arc<Flow<Job>>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(WATCH_EVERY) => {}
            _ = stop.changed() => return,
        }
        if let Err(e) = store.system().refresh_stopped(&flow.busy_endpoints()).await {
            tracing::warn!(error = %e, "could not re-read the endpoints in use");
        }
        let cutoff =
            Timestamp::from_millis(Timestamp::now().as_millis() - FORGET_IDLE.as_millis() as i64);
        let forgotten = flow.evict_idle(cutoff);
        if forgotten > 0 {
            tracing::debug!(count = forgotten, "forgot idle endpoints");
        }
    }
}

/// Keeps this node's claims alive while their attempts run.
async fn renew_leases(
    store: Store,
    cfg: DispatcherConfig,
    held: Held,
    leased: Leased,
    mut stop: watch::Receiver<bool>,
) {
    let every = cfg.lease / 3;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        let until = Timestamp::now().plus(cfg.lease);
        if let Err(e) = store
            .system()
            .renew_leases(&cfg.node_id, &held.snapshot(), until)
            .await
        {
            store.warn_unless_fault(&e, "lease renewal failed");
        }
        // The endpoints of those claims stay this process's while it works on them.
        let endpoints = held.endpoints();
        match store
            .system()
            .renew_endpoint_leases(&cfg.node_id, &endpoints, until)
            .await
        {
            Ok(kept) => leased.renewed(&endpoints, &kept, until),
            Err(e) => store.warn_unless_fault(&e, "endpoint lease renewal failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::Taker;

    #[test]
    fn a_prepared_endpoint_is_reused_only_while_built_from_the_same_copy_preset_and_egress() {
        let cfg = DispatcherConfig::new("n".into(), AllowList::default());
        let copy = |url: &str| {
            Arc::new(DispatchEndpoint::new(
                store::testing::endpoint_model("ep_1", url),
                Ok(vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()]),
                &store::testing::keys(),
            ))
        };
        let egress = |grants: Vec<domain::egress::Grant>| {
            Arc::new(Egress::new(cfg.allow_networks.clone(), grants))
        };
        let cache = PreparedCache::default();
        let url = |p: &Prepared| p.ep.endpoint.url.clone();
        let first = copy("https://a.example/hook");
        let a = cache.get(first.clone(), &cfg, None, egress(Vec::new()));
        // The same copy, an equal egress: the same preparation.
        let again = cache.get(first.clone(), &cfg, None, egress(Vec::new()));
        assert!(Arc::ptr_eq(&a, &again));
        // The store read the endpoint again (its URL changed): prepared anew.
        let moved = cache.get(
            copy("https://b.example/hook"),
            &cfg,
            None,
            egress(Vec::new()),
        );
        assert_eq!(url(&moved), "https://b.example/hook");
        // So is a change of the tenant's preset, or of its grants.
        let strict = Some(domain::classify::StatusPreset::RetryAllBut410);
        let preset = cache.get(first.clone(), &cfg, strict, egress(Vec::new()));
        assert!(!Arc::ptr_eq(&a, &preset));
        assert_eq!(preset.tenant_preset, strict);
        let grant = domain::egress::Grant::parse("10.0.0.0/8", None, None, None).unwrap();
        let granted = cache.get(first, &cfg, strict, egress(vec![grant]));
        assert!(!Arc::ptr_eq(&preset, &granted));
    }

    #[test]
    fn prepared_endpoints_kept_stay_at_most_the_bound_and_those_in_use_are_not_dropped() {
        let cfg = DispatcherConfig::new("n".into(), AllowList::default());
        let egress = Arc::new(Egress::new(cfg.allow_networks.clone(), Vec::new()));
        let copy = || {
            let mut model = store::testing::endpoint_model("ep_1", "https://a.example/hook");
            model.id = EndpointId::new();
            Arc::new(DispatchEndpoint::new(
                model,
                Ok(vec!["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into()]),
                &store::testing::keys(),
            ))
        };
        let cache = PreparedCache::default();
        let kept = |cache: &PreparedCache| cache.0.lock().unwrap().len();
        // One endpoint still in use (its copy held, as the store holds it for a second), then
        // as many no longer in use as fill the cache.
        let in_use = copy();
        let held = cache.get(in_use.clone(), &cfg, None, egress.clone());
        for _ in 1..PreparedCache::MOST {
            cache.get(copy(), &cfg, None, egress.clone());
        }
        assert_eq!(kept(&cache), PreparedCache::MOST);
        // One more: those no longer in use make room, the one in use stays prepared.
        let newer = copy();
        let newer_prepared = cache.get(newer.clone(), &cfg, None, egress.clone());
        assert_eq!(kept(&cache), 2);
        let again = cache.get(in_use.clone(), &cfg, None, egress.clone());
        assert!(
            Arc::ptr_eq(&held, &again),
            "the endpoint in use was dropped"
        );
        assert!(Arc::ptr_eq(
            &newer_prepared,
            &cache.get(newer, &cfg, None, egress.clone())
        ));
        // With every kept one in use, a new endpoint is prepared but not kept.
        let copies: Vec<_> = (2..PreparedCache::MOST).map(|_| copy()).collect();
        for c in &copies {
            cache.get(c.clone(), &cfg, None, egress.clone());
        }
        assert_eq!(kept(&cache), PreparedCache::MOST);
        let extra = cache.get(copy(), &cfg, None, egress.clone());
        assert_eq!(extra.ep.endpoint.url, "https://a.example/hook");
        assert_eq!(kept(&cache), PreparedCache::MOST);
    }

    #[test]
    fn new_deliveries_are_taken_only_while_more_than_the_kept_free_permits_are_free() {
        let permits = Arc::new(Semaphore::new(4));
        let (tx, rx) = mpsc::unbounded_channel();
        let taker = PermitTaker {
            permits: permits.clone(),
            keep_free: 1,
            leased: Leased::new(false, Duration::from_secs(30)),
            tx,
        };
        let ep = EndpointId::new();
        let slots: Vec<_> = std::iter::from_fn(|| taker.reserve(ep)).take(10).collect();
        assert_eq!(slots.len(), 3, "one permit stays free for retries");
        assert_eq!(permits.available_permits(), 1);
        // A slot is the permit itself: unused, it gives the room back.
        let mut slots = slots.into_iter();
        let permit = slots
            .next()
            .and_then(|s| s.into_inner::<OwnedSemaphorePermit>())
            .expect("our slots hold permits");
        drop(permit);
        assert_eq!(permits.available_permits(), 2);
        assert!(taker.reserve(ep).is_some());
        assert!(taker.is_open());
        drop(rx);
        assert!(!taker.is_open(), "a stopped dispatcher takes nothing more");
    }

    #[test]
    fn on_postgres_new_deliveries_are_handed_over_only_for_endpoints_held_well_beyond_now() {
        let leased = Leased::new(true, Duration::from_secs(30));
        let (one, two) = (EndpointId::new(), EndpointId::new());
        assert!(!leased.holds(one), "never claimed: left to the claim");
        let now = Timestamp::now();
        assert_eq!(
            leased.held([one, two], now.plus(Duration::from_secs(30))),
            vec![one, two]
        );
        assert!(leased.holds(one));
        assert!(
            leased
                .held([one], now.plus(Duration::from_secs(30)))
                .is_empty(),
            "held already"
        );
        // A renewal that kept only `one`: `two` went to another process.
        leased.renewed(&[one, two], &[one], now.plus(Duration::from_secs(30)));
        assert!(leased.holds(one) && !leased.holds(two));
        // Held for less than the margin (half the lease): no more hand-overs.
        leased.held([one], now.plus(Duration::from_secs(10)));
        assert!(!leased.holds(one));
        // One process (SQLite): every endpoint is its own.
        assert!(Leased::new(false, Duration::from_secs(30)).holds(two));
    }
}

/// Without an OTLP collector, tracing costs an attempt no allocation (the hot path's rule).
#[cfg(test)]
mod untraced {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    /// The system allocator, counting this thread's allocations. Test-only: the one way to
    /// see an allocation is to be the allocator.
    struct Counting;

    #[allow(unsafe_code)]
    // SAFETY: forwards every call unchanged to `System`, which upholds the contract.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            // SAFETY: the caller's layout, passed on as received.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }

    #[test]
    fn an_attempts_span_allocates_nothing_while_traces_are_not_exported() {
        // What `hookd serve` installs without `otlp_endpoint`: the log at info, nothing else.
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::sink)
                .with_filter(tracing_subscriber::EnvFilter::new("info")),
        );
        let d = store::testing::delivery_model();
        let msg = store::entities::message::Model {
            trace_parent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into()),
            ..store::testing::message_model()
        };
        let result = AttemptResult {
            delivery: d.clone(),
            app_id: msg.app_id,
            attempt: store::attempt_row(
                &d,
                "http://127.0.0.1:9/h",
                Timestamp::now(),
                1,
                Some(200),
                None,
                None,
                None,
                domain::classify::Verdict::Success,
                None,
            ),
            next: Next::Succeeded,
            disable_endpoint: None,
        };
        tracing::subscriber::with_default(subscriber, || {
            // Inside a request's span (enabled: it is logged), as a handed-off attempt is.
            let request = tracing::info_span!("request");
            let _in = request.enter();
            let once = || {
                let span = attempt_span(&d, &msg);
                let entered = span.clone();
                let _a = entered.enter();
                assert_eq!(store::trace::current(), None);
                record_outcome(span, &result);
            };
            // The first run registers the callsites (once per process).
            once();
            let before = allocations();
            once();
            assert_eq!(allocations() - before, 0);
        });
    }
}
