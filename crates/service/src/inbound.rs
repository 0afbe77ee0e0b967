//! Receiving webhooks (issue 21): a request to a source is verified on its raw bytes first
//! (nothing is stored for a bad one), then stored as a message of the source's application
//! with the event's natural id as its `eventId`: the insert-first dedup hookd's messages
//! already have (a second copy of one event conflicts and is acknowledged without effect).
//! The application's endpoints then get it through the delivery engine: retries, backoff,
//! dead letters, replay. Events with an ordering key and sequence become messages in sequence
//! per key: one ahead of a gap is held until the gap fills or the source's hold time passes
//! (decision 59).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, MessageId, SourceId, TenantId};
use domain::inbound::{
    GenericHmac, MAX_TOLERANCE_SECS, MIN_SECRET_BYTES, Ordering, Scheme, verify,
};
use store::entities::application;
use store::{Claim, NewMessage, Offer, Source, SourceSettings, Store, StoreError, Tally};

use domain::inbound_refusal::Reason;

pub use crate::refusals::Arrival;
use crate::refusals::Recording;
use crate::{Config, Result, ServiceError, messages, rules};

/// What a verified request became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Stored; forwarded to the application's endpoints from now on.
    Stored(MessageId),
    /// Stored, ahead of a gap in its key's sequence: forwarded when the gap fills or its hold
    /// time passes.
    Held,
    /// Its event id (or its key's sequence, held) was seen before: nothing more was done.
    Duplicate,
    /// A vendor's handshake (Zoom's URL validation), answered with this and not stored.
    Challenge(serde_json::Value),
}

/// Why a request to a source was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// No such source (or its application is gone).
    #[error("no such source")]
    NotFound,
    /// The signature does not verify: counted, never processed.
    #[error("{0}")]
    Unverified(domain::inbound::Refused),
    /// Verified, but not something that can be stored: answered 400 with `code` and the
    /// problem, nothing stored.
    #[error("{detail}")]
    Invalid { code: &'static str, detail: String },
    /// Verified, ahead of a gap in its key's sequence, and its source already holds this many:
    /// not taken (the sender retries; the gap may have filled by then).
    #[error(
        "this source holds {0} events waiting for gaps in their keys' sequences, as many as it may; send this one again later"
    )]
    Full(u64),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { .. } => Refusal::NotFound,
            e => Refusal::Service(e.into()),
        }
    }
}

/// How long one process holds a key while it forwards the key's held events; one that dies
/// holding it delays that key this long.
const KEY_LEASE: Duration = Duration::from_secs(30);
/// Keys the periodic pass ([`forward_held`]) reads per round, and the time it may take (it
/// runs every second): a key whose events must still wait costs it one read.
const KEYS_PER_PASS: u64 = 1000;
const PASS_TIME: Duration = Duration::from_millis(800);

/// What this process counted of inbound traffic: ordered events forwarded behind their key's
/// place (`late`) and sequences given up on after their gap's hold time (`skipped`), for
/// `/metrics`; and each source's duplicates and bad signatures since they were last written to
/// the source ([`write_counts`]: a flood of bad requests costs memory per source, not a write
/// per request).
#[derive(Debug, Default)]
pub struct Counts {
    forwarded: AtomicU64,
    late: AtomicU64,
    skipped: AtomicU64,
    sources: Mutex<HashMap<SourceId, Tally>>,
    /// What the sources hold ahead of gaps, as far as this process knows (see [`Held`]).
    held: Mutex<Held>,
    /// Refused requests waiting to be written for the Requests view (see `refusals`).
    recording: Mutex<Recording>,
}

/// Events held per source: as last counted in the database (every second), plus those this
/// process held since. A source may hold one more while their sum is below
/// `max_held_per_source`, so each receiving process adds at most that many between counts:
/// the held table stays within `max_held_per_source` × processes per source, whatever the rate.
#[derive(Debug, Default)]
struct Held {
    counted: HashMap<SourceId, u64>,
    added: HashMap<SourceId, u64>,
}

impl Counts {
    /// Inbound events handed to their application's endpoints (stored as messages).
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Relaxed)
    }

    pub fn each(&self) -> [(&'static str, u64); 2] {
        [
            ("late", self.late.load(Relaxed)),
            ("skipped", self.skipped.load(Relaxed)),
        ]
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `source` may hold one more, below `max`.
    fn may_hold(&self, source: SourceId, max: u64) -> bool {
        let held = self.held();
        let n = |m: &HashMap<SourceId, u64>| m.get(&source).copied().unwrap_or(0);
        n(&held.counted) + n(&held.added) < max
    }

    fn held_one(&self, source: SourceId) {
        *self.held().added.entry(source).or_default() += 1;
    }

    /// Records a refused request for its source's Requests view, within the bounds of
    /// `refusals`; past them it is only counted.
    fn refused(
        &self,
        source: &Source,
        reason: Reason,
        detail: &str,
        size: u64,
        arrival: &Arrival<'_>,
    ) {
        let kept = self
            .recording
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keep(source, reason, detail, size, arrival);
        if !kept {
            self.tally(source.row.id, |t| t.unrecorded += 1);
        }
    }

    fn tally(&self, source: SourceId, f: impl FnOnce(&mut Tally)) {
        let mut sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        f(sources.entry(source).or_default());
    }
}

/// Adds what this process counted per source to the sources, and writes the refused
/// requests it recorded (every second, and at shutdown).
pub async fn write_counts(store: &Store, cfg: &Config) -> Result<()> {
    let recorded = cfg
        .inbound_counts
        .recording
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Err(e) = store
        .system()
        .record_refusals(&recorded, store::REFUSALS_KEPT)
        .await
    {
        // Not kept for another try: the next second brings its own (they are samples).
        store.warn_unless_fault(&e, "recording refused inbound requests");
        for r in &recorded {
            cfg.inbound_counts.tally(r.source_id, |t| t.unrecorded += 1);
        }
    }
    let taken: Vec<(SourceId, Tally)> = {
        let mut sources = cfg
            .inbound_counts
            .sources
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        sources.drain().collect()
    };
    if let Err(e) = store.system().add_source_tallies(&taken).await {
        // Kept for the next try.
        for (id, t) in taken {
            cfg.inbound_counts.tally(id, |mine| {
                mine.duplicates += t.duplicates;
                mine.refused += t.refused;
                mine.last_refused_at = mine.last_refused_at.max(t.last_refused_at);
                mine.unrecorded += t.unrecorded;
            });
        }
        return Err(e.into());
    }
    Ok(())
}

/// Counts what each source holds (see `Held`); no query while nothing is held as far as this
/// process knows (another process counts what it holds itself).
pub async fn count_held(store: &Store, cfg: &Config) -> Result<()> {
    let before = {
        let held = cfg.inbound_counts.held();
        if held.counted.is_empty() && held.added.is_empty() {
            return Ok(());
        }
        held.added.clone()
    };
    let counted = store.held_by_source().await?;
    let mut held = cfg.inbound_counts.held();
    held.counted = counted.into_iter().collect();
    // What was held while counting may not be in the count: kept until the next one.
    for (source, n) in before {
        if let Some(added) = held.added.get_mut(&source) {
            *added = added.saturating_sub(n);
        }
    }
    held.added.retain(|_, n| *n > 0);
    Ok(())
}

/// Verifies and stores a request to source `id`. A refusal is recorded for the source's
/// Requests view (within the bounds of `refusals`).
pub async fn receive(
    store: &Store,
    cfg: &Config,
    id: &str,
    arrival: &Arrival<'_>,
    body: &[u8],
) -> std::result::Result<Received, Refusal> {
    let source = store.system().source(id).await?;
    // A wrong or missing URL token is a URL that does not exist: answered as an unknown
    // source, and not recorded (anyone who knows the id could otherwise fill its Requests).
    if !domain::inbound::url_token_matches(source.url_token.as_deref(), arrival.token) {
        return Err(Refusal::NotFound);
    }
    let answer = verify_and_take(store, cfg, &source, arrival, body).await;
    if let Err(refusal) = &answer
        && let Some(reason) = refusal.reason()
    {
        cfg.inbound_counts.refused(
            &source,
            reason,
            &refusal.to_string(),
            body.len() as u64,
            arrival,
        );
    }
    answer
}

/// A vendor's subscription handshake on source `id`'s URL (Meta's `GET ?hub.mode=subscribe&
/// hub.verify_token=…&hub.challenge=…`): the challenge to echo, or none when the source takes
/// no handshake or the token is not its own.
pub async fn handshake(
    store: &Store,
    id: &str,
    token: Option<&str>,
    query: &[(String, String)],
) -> std::result::Result<Option<String>, Refusal> {
    let source = store.system().source(id).await?;
    if !domain::inbound::url_token_matches(source.url_token.as_deref(), token) {
        return Err(Refusal::NotFound);
    }
    Ok(domain::inbound::meta_handshake(&source.settings.scheme, query).map(str::to_owned))
}

/// Records a request to source `id` whose body was not read (too large, or broken off): the
/// handler answers it. An unknown source records nothing.
pub async fn refused_unread(
    store: &Store,
    cfg: &Config,
    id: &str,
    arrival: &Arrival<'_>,
    reason: Reason,
    detail: &str,
) {
    if let Ok(source) = store.system().source(id).await
        && domain::inbound::url_token_matches(source.url_token.as_deref(), arrival.token)
    {
        let size = (arrival.header)("content-length")
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        cfg.inbound_counts
            .refused(&source, reason, detail, size, arrival);
    }
}

impl Refusal {
    /// How the Requests view names it; none for what is not the request's fault (an unknown
    /// source, a failure of the server).
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Refusal::Unverified(why) => Some(Reason::of(why)),
            Refusal::Invalid { code, .. } if *code == "invalid_sequence" => {
                Some(Reason::BadSequence)
            }
            Refusal::Invalid { .. } => Some(Reason::NotJson),
            Refusal::Full(_) => Some(Reason::TooManyHeld),
            Refusal::Service(ServiceError::RateLimited { .. }) => Some(Reason::RateLimited),
            Refusal::Service(ServiceError::PayloadTooLarge { .. }) => Some(Reason::TooLarge),
            Refusal::Service(ServiceError::Invalid(_)) => Some(Reason::Unacceptable),
            Refusal::NotFound | Refusal::Service(_) => None,
        }
    }
}

async fn verify_and_take(
    store: &Store,
    cfg: &Config,
    source: &Source,
    arrival: &Arrival<'_>,
    body: &[u8],
) -> std::result::Result<Received, Refusal> {
    let header = arrival.header;
    let now = Timestamp::now();
    let verified = verify(
        &source.settings.scheme,
        Some(&arrival.url),
        header,
        body,
        now,
        source.settings.tolerance(),
    )
    .map_err(|why| {
        cfg.inbound_counts.tally(source.row.id, |t| {
            t.refused += 1;
            t.last_refused_at = Some(now.as_millis());
        });
        Refusal::Unverified(why)
    })?;
    if let Some(answer) = domain::inbound::challenge(&source.settings.scheme, body) {
        return Ok(Received::Challenge(answer));
    }
    // Every reader of a message (the API, the pages, the receivers) expects JSON: a form body
    // becomes an object of its parameters, and a body that is neither is refused here rather
    // than stored.
    let invalid = |detail| Refusal::Invalid {
        code: "invalid_payload",
        detail,
    };
    let form;
    let body = if is_form(header) {
        form = domain::payload::form_as_json(body).map_err(invalid)?;
        &form[..]
    } else {
        domain::payload::json_body(body).map_err(invalid)?
    };
    let wrapped = domain::inbound::as_object(&source.settings.scheme, body);
    let body = wrapped.as_deref().unwrap_or(body);
    let answer = take(store, cfg, source, verified, header, body).await;
    match answer {
        Ok(Received::Duplicate) => cfg
            .inbound_counts
            .tally(source.row.id, |t| t.duplicates += 1),
        Ok(Received::Stored(_)) => {
            cfg.inbound_counts.forwarded.fetch_add(1, Relaxed);
        }
        _ => {}
    }
    answer
}

/// Whether the request says its body is a form (`application/x-www-form-urlencoded`).
fn is_form(header: &dyn Fn(&str) -> Option<String>) -> bool {
    header("content-type").is_some_and(|t| {
        t.split(';').next().is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
    })
}

/// Stores (or holds) a verified event.
async fn take(
    store: &Store,
    cfg: &Config,
    source: &Source,
    verified: domain::inbound::Verified,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> std::result::Result<Received, Refusal> {
    let tenant = source.row.tenant_id;
    let app = store
        .get_application(tenant, &source.row.app_id.to_string())
        .await?;
    // The sender's own event type where its scheme names one.
    let event_type = verified
        .event_type
        .filter(|t| rules::ident("eventType", t).is_ok())
        .unwrap_or_else(|| source.settings.event_type.clone());
    messages::admit(store, cfg, tenant).await?;
    let place = source
        .settings
        .ordering
        .place(header, body)
        .map_err(|detail| Refusal::Invalid {
            code: "invalid_sequence",
            detail,
        })?;
    let key = place.key.filter(|k| rules::ordering_key(k).is_ok());
    let seq = place
        .seq
        .filter(|_| key.is_some() && source.settings.ordering.hold_gap_secs > 0);
    let event_id = verified
        .event_id
        .filter(|e| rules::ident("eventId", e).is_ok())
        // An ordered event without an id is known by its key and sequence: a repeat of it,
        // or its second forwarding after a crash, is then a duplicate like any other.
        .or_else(|| Some(domain::inbound::sequence_id(key.as_deref()?, seq?)));
    let claim = match &verified.signed_digest {
        Some(digest) => Some(
            store
                .claim_signed(
                    source,
                    digest,
                    event_id.as_deref(),
                    cfg.inbound_replay_window,
                )
                .await?,
        ),
        None => None,
    };
    let new = forwarded(source, event_type, event_id, body.to_vec(), key.clone());
    let answer = match claim {
        Some(Claim::Replay) => return Ok(Received::Duplicate),
        _ => store_or_hold(store, cfg, source, &app, new, key, seq).await,
    };
    if let (Err(_), Some(Claim::Fresh { expires_at }), Some(digest)) =
        (&answer, claim, &verified.signed_digest)
    {
        // Not taken: the sender's retry of it must not count as a replay. The answer stays
        // the first error; a digest left behind only makes that retry a duplicate.
        if let Err(e) = store
            .release_signed(source.row.id, digest, expires_at)
            .await
        {
            tracing::warn!(source = %source.row.id, error = %e, "releasing a signed digest");
        }
    }
    answer
}

/// Stores a verified event, or holds it for its turn in its key's sequence.
async fn store_or_hold(
    store: &Store,
    cfg: &Config,
    source: &Source,
    app: &application::Model,
    new: NewMessage,
    key: Option<String>,
    seq: Option<i64>,
) -> std::result::Result<Received, Refusal> {
    let tenant = source.row.tenant_id;
    let (Some(key), Some(seq)) = (key, seq) else {
        return stored(messages::create(store, cfg, tenant, app, new).await);
    };
    // Checked before it may be held: a held event must be one that can be created later.
    messages::check(cfg, &new)?;
    let hold_ahead = cfg
        .inbound_counts
        .may_hold(source.row.id, cfg.max_held_per_source);
    match store
        .offer_inbound(source, &key, seq, &new, KEY_LEASE, hold_ahead)
        .await?
    {
        Offer::Duplicate => Ok(Received::Duplicate),
        Offer::Full => Err(Refusal::Full(cfg.max_held_per_source)),
        Offer::Held => {
            cfg.inbound_counts.held_one(source.row.id);
            Ok(Received::Held)
        }
        Offer::Late => {
            let answer = stored(messages::create(store, cfg, tenant, app, new).await);
            if matches!(answer, Ok(Received::Stored(_))) {
                cfg.inbound_counts.late.fetch_add(1, Relaxed);
            }
            answer
        }
        Offer::Turn => {
            // The key is ours until advanced: forwarded now, in one write either side.
            let answer = stored(messages::create(store, cfg, tenant, app, new).await);
            if answer.is_err() {
                // Not taken: the sender was not answered 2xx and sends it again; the key is
                // let go for the events behind it.
                store.unlease_inbound_key(source.row.id, &key).await?;
                return answer;
            }
            if store.advance_inbound(source.row.id, &key, seq).await? {
                // Events held behind it meanwhile: forwarded now, in sequence.
                if let Err(e) = forward_turns(store, cfg, source, app, &key).await {
                    tracing::warn!(source = %source.row.id, error = %e, "forwarding held events");
                }
            }
            answer
        }
    }
}

fn stored(created: Result<store::CreatedMessage>) -> std::result::Result<Received, Refusal> {
    match created {
        Ok(created) => Ok(Received::Stored(created.message.id)),
        Err(ServiceError::Store(StoreError::Conflict { .. })) => Ok(Received::Duplicate),
        Err(e) => Err(e.into()),
    }
}

/// The message an inbound event is forwarded as.
fn forwarded(
    source: &Source,
    event_type: String,
    event_id: Option<String>,
    payload: Vec<u8>,
    ordering_key: Option<String>,
) -> NewMessage {
    NewMessage {
        event_type,
        event_id,
        payload,
        channels: Vec::new(),
        tags: Some(domain::inbound::source_tag(&source.row.name))
            .filter(|t| rules::labels("tags", std::slice::from_ref(t), 1).is_ok())
            .into_iter()
            .collect(),
        ordering_key,
        to_endpoint: None,
        deliver_at: None,
        trace_parent: None,
    }
}

/// Forwards the held events of `key` whose turn has come, under the key's lease (another
/// process holding it forwards them instead). Returns the sequences forwarded, with their
/// messages (a repeat forwarded before has none).
async fn forward_turns(
    store: &Store,
    cfg: &Config,
    source: &Source,
    app: &application::Model,
    key: &str,
) -> Result<Vec<(i64, MessageId)>> {
    let id = source.row.id;
    let hold = Duration::from_secs(source.settings.ordering.hold_gap_secs);
    let mut sent = Vec::new();
    loop {
        // Read first: a key whose held events must still wait costs no write.
        if store.inbound_turn(id, key, hold).await?.events.is_empty()
            || !store.lease_inbound_key(id, key, KEY_LEASE).await?
        {
            return Ok(sent);
        }
        let forwarding = async {
            loop {
                let turn = store.inbound_turn(id, key, hold).await?;
                if turn.events.is_empty() {
                    return Ok::<_, ServiceError>(());
                }
                if let Some((first, last)) = turn.gap {
                    cfg.inbound_counts
                        .skipped
                        .fetch_add((last - first + 1).unsigned_abs(), Relaxed);
                    tracing::warn!(source = %id, key, first, last, "gave up waiting for a gap in an ordering key's sequence");
                }
                // The run is created in one transaction, in order, and marked in one write.
                let seqs: Vec<i64> = turn.events.iter().map(|e| e.seq).collect();
                let news = turn
                    .events
                    .into_iter()
                    .map(|e| {
                        forwarded(
                            source,
                            e.event_type,
                            e.event_id,
                            e.payload,
                            Some(key.to_owned()),
                        )
                    })
                    .collect();
                let created =
                    messages::create_in_order(store, cfg, source.row.tenant_id, app, news).await?;
                for (seq, c) in seqs.iter().zip(created) {
                    match c {
                        Ok(c) => {
                            cfg.inbound_counts.forwarded.fetch_add(1, Relaxed);
                            sent.push((*seq, c.message.id));
                        }
                        // Forwarded before: a repeat, or a process that died before marking it.
                        Err(StoreError::Conflict { .. }) => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                store.forwarded_inbound(id, key, &seqs).await?;
            }
        };
        let done = forwarding.await;
        let again = store.unlease_inbound_key(id, key).await;
        done?;
        if !again? {
            return Ok(sent);
        }
    }
}

/// One round of the periodic forwarding pass: keys whose gap's hold time passed, and keys a
/// process left held events for (it died, or failed to forward). Returns the events forwarded.
pub async fn forward_held(store: &Store, cfg: &Config) -> Result<usize> {
    let mut n = 0;
    let started = std::time::Instant::now();
    for (source_id, key) in store.system().keys_with_held_inbound(KEYS_PER_PASS).await? {
        if started.elapsed() >= PASS_TIME {
            break;
        }
        let source = match store.system().source(&source_id.to_string()).await {
            Ok(s) => s,
            Err(StoreError::NotFound { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        // One key that cannot go (its database rows, its application) holds up no other.
        let forwarded = async {
            let app = store
                .get_application(source.row.tenant_id, &source.row.app_id.to_string())
                .await?;
            forward_turns(store, cfg, &source, &app, &key).await
        };
        match forwarded.await {
            Ok(sent) => n += sent.len(),
            Err(e) => {
                tracing::warn!(source = %source_id, key, error = %e, "forwarding held events")
            }
        }
    }
    Ok(n)
}

/// The most secrets a Standard Webhooks source tries on each request (a sender rotating has
/// two): every unauthenticated request costs one HMAC per secret.
pub const MAX_SOURCE_SECRETS: usize = 10;

/// A source's settings as the API's body or the configuration file give them, checked
/// ([`SourceSpec::new`]): the one way a source is made or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSpec {
    pub name: String,
    /// Its application's id or uid.
    pub app: String,
    pub settings: SourceSettings,
}

/// A source's members as the API's body has them (the configuration file's `[[sources]]`
/// too), before they are checked.
pub struct SourceFields {
    pub name: String,
    pub app: String,
    pub event_type: String,
    pub verification: serde_json::Value,
    pub ordering: Option<serde_json::Value>,
    pub tolerance_secs: Option<u64>,
}

impl SourceSpec {
    /// `verification` and `ordering` read as `Scheme` and `Ordering`, then [`check_source`].
    pub fn new(f: SourceFields) -> Result<SourceSpec> {
        let scheme: Scheme = serde_json::from_value(f.verification)
            .map_err(|e| ServiceError::field("verification", domain::inbound::scheme_error(&e)))?;
        let ordering: Ordering = match f.ordering {
            Some(o) => serde_json::from_value(o)
                .map_err(|e| ServiceError::field("ordering", e.to_string()))?,
            None => Ordering::default(),
        };
        let settings = SourceSettings {
            event_type: f.event_type,
            scheme,
            ordering,
            tolerance_secs: f.tolerance_secs,
        };
        check_source(&f.name, &settings)?;
        Ok(SourceSpec {
            name: f.name,
            app: f.app,
            settings,
        })
    }
}

/// Creates the tenant's source as `spec` says (a name taken answers a conflict).
pub async fn create_source(store: &Store, tenant: TenantId, spec: &SourceSpec) -> Result<Source> {
    let app = store.get_application(tenant, &spec.app).await?;
    Ok(store
        .create_source(tenant, &app, &spec.name, &spec.settings)
        .await?)
}

/// Changes the tenant's source `id` to what `spec` says (the dashboard's edit): its id, URL,
/// name and counts stay. A source a configuration file declares is changed in the file: the
/// next start would undo an edit made here.
pub async fn change_source(
    store: &Store,
    tenant: TenantId,
    id: &str,
    spec: &SourceSpec,
) -> Result<Source> {
    let have = store.get_source(tenant, id).await?;
    if have.row.declared {
        return Err(ServiceError::Conflict(format!(
            "the source {:?} is defined in the configuration file: change it there",
            have.row.name
        )));
    }
    if have.row.name != spec.name {
        return Err(ServiceError::field(
            "name",
            "a source keeps its name (its events are tagged with it)",
        ));
    }
    let app = store.get_application(tenant, &spec.app).await?;
    Ok(store.update_source(&have, &app, &spec.settings).await?)
}

/// What [`declare_source`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declared {
    Created,
    Updated,
    Unchanged,
}

/// Makes the tenant's source named `spec.name` be what `spec` says, as a configuration file
/// declares it at every start: created if there is none, changed where it differs (its id,
/// its URL and its counts stay), left alone if it is the same. Its application is found by
/// id or uid; a uid that names none creates that application, so a first start needs nothing
/// made beforehand but the tenant.
pub async fn declare_source(
    store: &Store,
    tenant: TenantId,
    spec: &SourceSpec,
) -> Result<(Source, Declared)> {
    store.get_tenant(tenant).await?;
    let app = match store.get_application(tenant, &spec.app).await {
        Ok(app) => app,
        Err(StoreError::NotFound { .. }) if !spec.app.starts_with(ApplicationId::PREFIX) => {
            rules::uid("appId", &spec.app, ApplicationId::PREFIX)?;
            let new = store::NewApplication {
                name: spec.app.clone(),
                uid: Some(spec.app.clone()),
                ..Default::default()
            };
            // Or the one another process starting with the same file made meanwhile.
            store.create_application_or_get(tenant, new).await?
        }
        Err(e) => return Err(e.into()),
    };
    // Twice at most: a process starting beside this one may create it between our look and
    // our insert; then it is there to compare with.
    for _ in 0..2 {
        if let Some(have) = store.source_named(tenant, &spec.name).await? {
            store.mark_source_declared(&have).await?;
            if have.row.app_id == app.id && have.settings == spec.settings {
                return Ok((have, Declared::Unchanged));
            }
            let changed = store.update_source(&have, &app, &spec.settings).await?;
            return Ok((changed, Declared::Updated));
        }
        match store
            .create_source(tenant, &app, &spec.name, &spec.settings)
            .await
        {
            Ok(created) => {
                store.mark_source_declared(&created).await?;
                return Ok((created, Declared::Created));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ServiceError::Conflict(format!(
        "source {:?} was created and removed while it was declared; start again",
        spec.name
    )))
}

/// Checks a source's settings before it is stored: its name and event type, that a
/// verifying scheme has a secret, its ordering, and its tolerance.
pub fn check_source(name: &str, settings: &SourceSettings) -> Result<()> {
    let SourceSettings {
        event_type,
        scheme,
        ordering,
        tolerance_secs,
    } = settings;
    rules::ident("name", name)?;
    rules::ident("eventType", event_type)?;
    if let Some(secs) = tolerance_secs {
        if !scheme.signs_timestamp() {
            return Err(ServiceError::field(
                "toleranceSecs",
                format!(
                    "the {} scheme signs no timestamp: leave toleranceSecs out",
                    scheme.name()
                ),
            ));
        }
        if !(1..=MAX_TOLERANCE_SECS).contains(secs) {
            return Err(ServiceError::field(
                "toleranceSecs",
                format!("toleranceSecs must be 1 to {MAX_TOLERANCE_SECS}"),
            ));
        }
    }
    if let Some(problem) = ordering.problem() {
        return Err(ServiceError::field("ordering", problem));
    }
    if let Scheme::StandardWebhooks { secrets } = scheme
        && secrets.len() > MAX_SOURCE_SECRETS
    {
        return Err(ServiceError::field(
            "verification",
            format!("at most {MAX_SOURCE_SECRETS} secrets"),
        ));
    }
    let empty = match scheme {
        Scheme::StandardWebhooks { secrets } => {
            secrets.is_empty()
                || secrets
                    .iter()
                    .any(|s| domain::signing::SigningSecret::parse(s).is_err())
        }
        Scheme::Hmac(h) => h.secret.is_empty() || h.header.is_empty(),
        Scheme::None => false,
        vendor => vendor.vendor_secret().is_some_and(str::is_empty),
    };
    if empty {
        return Err(ServiceError::field(
            "verification",
            "a verifying scheme needs its secret (Standard Webhooks: whsec_… secrets)",
        ));
    }
    let one_secret = match scheme {
        Scheme::Hmac(GenericHmac { secret, .. }) => Some(secret.as_str()),
        other => other.vendor_secret(),
    };
    if let Some(secret) = one_secret
        && secret.len() < MIN_SECRET_BYTES
    {
        return Err(ServiceError::field(
            "verification.secret",
            format!(
                "the {} secret is {} bytes long; at least {MIN_SECRET_BYTES} are needed (a short secret can be guessed)",
                scheme.name(),
                secret.len()
            ),
        ));
    }
    Ok(())
}
