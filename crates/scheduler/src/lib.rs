//! Time-driven work that no request waits for: durable bulk jobs (recover, replay), the
//! auto-disable sweep, the email outbox, and returning abandoned delivery leases. With
//! PostgreSQL one process at a time does the sweeps and the outbox (an advisory lock); jobs
//! are claimed under leases by every scheduler process.

pub mod email;
pub mod health;
pub mod jobs;
pub mod leader;

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Timestamp;
use domain::retention::Retention;
use store::Store;
use tokio::sync::{Notify, watch};

pub struct SchedulerConfig {
    pub node_id: String,
    /// The database URL, to hold the leadership lock on its own connection.
    pub database_url: String,
    pub disable_after: Duration,
    /// An endpoint failing this long gets its early warning (less than `disable_after`).
    pub warn_after: Duration,
    pub sweep_every: Duration,
    pub public_url: String,
    pub mailer: Option<email::Mailer>,
    /// The operator's retention defaults (tenants and applications may choose their own).
    pub retention: Retention,
    /// How often expired rows are removed.
    pub prune_every: Duration,
}

/// How long per-minute attempt statistics are kept.
pub const STATS_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// How long sent or failed emails and finished background jobs are kept (operational events:
/// the operator's `metadata_retention`).
pub const HISTORY_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// What one prune removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PruneReport {
    /// Payloads expired and messages removed by retention.
    pub retention: store::Pruned,
    /// Idempotency records, sessions, sign-ups, operational events, emails and jobs past
    /// their time (not counted when dry).
    pub swept: store::Swept,
    /// Per-minute statistics rows (not counted when dry).
    pub stats: u64,
    /// Refused inbound requests past `store::REFUSAL_RETENTION` (not counted when dry).
    pub refusals: u64,
}

/// The prune job, for the scheduler and `hookd prune`: one retention pass (bounded; see
/// `Pruned::more`), then, unless `dry_run`, expired statistics, idempotency records, sessions
/// and sign-ups (each in bounded batches).
pub async fn prune(
    store: &Store,
    retention: Retention,
    dry_run: bool,
) -> Result<PruneReport, store::StoreError> {
    let now = Timestamp::now();
    let ago = |d: Duration| Timestamp::from_millis(now.as_millis() - d.as_millis() as i64);
    let mut report = PruneReport {
        retention: store
            .system()
            .prune_retention(retention, now, dry_run)
            .await?,
        ..PruneReport::default()
    };
    if !dry_run {
        report.stats = store
            .system()
            .prune_attempt_stats(ago(STATS_RETENTION))
            .await?;
        let horizons = store::Horizons {
            idempotency: ago(store::IDEMPOTENCY_TTL),
            events: ago(retention.metadata),
            done: ago(HISTORY_RETENTION),
        };
        report.swept = store.system().sweep_expired(horizons, now).await?;
        report.refusals = store
            .system()
            .prune_refusals(ago(store::REFUSAL_RETENTION))
            .await?;
    }
    Ok(report)
}

/// Rows this process's prunes removed, by kind, since it started (for `/metrics`).
static PRUNED: [std::sync::atomic::AtomicU64; 13] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 13];
const PRUNED_KINDS: [&str; 13] = [
    "messages",
    "deliveries",
    "attempts",
    "payloads",
    "idempotency_keys",
    "sessions",
    "events",
    "emails",
    "jobs",
    "inbound_keys",
    "inbound_signed",
    "portal_tokens",
    "inbound_refusals",
];

impl PruneReport {
    fn by_kind(&self) -> [u64; 13] {
        let (p, s) = (self.retention, self.swept);
        [
            p.messages,
            p.deliveries,
            p.attempts,
            p.payloads,
            s.idempotency_keys,
            s.sessions,
            s.events,
            s.emails,
            s.jobs,
            s.inbound_keys,
            s.inbound_signed,
            s.portal_tokens,
            self.refusals,
        ]
    }
}

/// What this process's prunes removed so far, by kind (`payloads`: payloads emptied).
pub fn pruned_totals() -> impl Iterator<Item = (&'static str, u64)> {
    PRUNED_KINDS
        .iter()
        .zip(&PRUNED)
        .map(|(k, n)| (*k, n.load(std::sync::atomic::Ordering::Relaxed)))
}

/// The scheduler's reclaim, every `prune_every` like the prune (measured in a 500 msg/s soak
/// pruning every 5 s: a VACUUM every 5 s held the database at 83 MB with ingest p99 8.4 ms,
/// one a minute at 139 MB with 9.3 ms); says once when hookd has to do it.
async fn reclaim_and_log(store: &Store) {
    match store.system().reclaim_space().await {
        Ok(store::Reclaim::Vacuumed) => {
            if !WARNED_AUTOVACUUM.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(
                    "PostgreSQL's autovacuum is off: hookd vacuums its busy tables every prune_interval \
                     so that the space of deleted and updated rows is reused; turn autovacuum \
                     on (the PostgreSQL default) to let the server pace this itself"
                );
            }
        }
        Ok(store::Reclaim::Automatic) => {}
        Err(e) => store.warn_unless_fault(&e, "reclaiming space"),
    }
}

/// Whether this process has said that PostgreSQL's autovacuum is off.
static WARNED_AUTOVACUUM: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The scheduler's prune: logs what went; `true` when more is due at once.
async fn prune_and_log(store: &Store, retention: Retention) -> bool {
    match prune(store, retention, false).await {
        Ok(r) => {
            for (total, n) in PRUNED.iter().zip(r.by_kind()) {
                total.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
            let p = r.retention;
            if p.messages + p.payloads > 0 || r.swept != store::Swept::default() {
                tracing::info!(
                    messages = p.messages,
                    deliveries = p.deliveries,
                    attempts = p.attempts,
                    payloads = p.payloads,
                    kept_live = p.kept_live,
                    idempotency_keys = r.swept.idempotency_keys,
                    sessions = r.swept.sessions,
                    pending_signups = r.swept.pending_signups,
                    events = r.swept.events,
                    emails = r.swept.emails,
                    jobs = r.swept.jobs,
                    inbound_keys = r.swept.inbound_keys,
                    inbound_signed = r.swept.inbound_signed,
                    portal_tokens = r.swept.portal_tokens,
                    "pruned expired rows"
                );
            }
            p.more
        }
        Err(e) => {
            store.warn_unless_fault(&e, "pruning expired rows");
            false
        }
    }
}

pub async fn run(
    cfg: SchedulerConfig,
    store: Store,
    new_work: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    // Bulk jobs run beside the rest, in every scheduler process: each is claimed under a
    // lease, so no leadership is needed, and none of them can hold up the sweeps or email.
    let job_runner = tokio::spawn(jobs::run(
        store.clone(),
        cfg.node_id.clone(),
        Duration::from_millis(500),
        new_work.clone(),
        stop.clone(),
    ));
    let mut leadership = leader::Leadership::for_url(&cfg.database_url);
    let mut last_prune: Option<Instant> = None;
    let mut last_sweep: Option<Instant> = None;
    let mut last_reclaim: Option<Instant> = None;
    while !*stop.borrow() {
        if leadership.ensure().await {
            if last_sweep.is_none_or(|t| t.elapsed() >= cfg.sweep_every) {
                last_sweep = Some(Instant::now());
                match health::sweep(&store, Timestamp::now(), cfg.disable_after, &cfg.public_url)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(count = n, "auto-disabled failing endpoints"),
                    Err(e) => store.warn_unless_fault(&e, "auto-disable sweep failed"),
                }
                match health::warn(
                    &store,
                    Timestamp::now(),
                    cfg.warn_after,
                    cfg.disable_after,
                    &cfg.public_url,
                )
                .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(count = n, "warned about failing endpoints"),
                    Err(e) => tracing::warn!(error = %e, "early-warning sweep failed"),
                }
                if let Err(e) = store.system().reap_expired_leases(Timestamp::now()).await {
                    store.warn_unless_fault(&e, "lease reaper");
                }
            }
            // Messages for their retention, chart statistics for STATS_RETENTION (the charts
            // show 24 hours), idempotency records for their 24 h, sessions until they expire:
            // a prune every `prune_every` keeps each table near its retention size. A pass that
            // stopped at its batch limit goes on at the next round.
            if last_prune.is_none_or(|t| t.elapsed() >= cfg.prune_every) {
                let more = prune_and_log(&store, cfg.retention).await;
                last_prune = (!more).then(Instant::now).or(last_prune);
            }
            if last_reclaim.is_none_or(|t| t.elapsed() >= cfg.prune_every) {
                last_reclaim = Some(Instant::now());
                reclaim_and_log(&store).await;
            }
            if let Err(e) = email::send_due(&store, cfg.mailer.as_ref(), Timestamp::now()).await {
                store.warn_unless_fault(&e, "email outbox");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = stop.changed() => {}
        }
    }
    leadership.release().await;
    let _ = job_runner.await;
}
