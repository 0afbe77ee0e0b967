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
use store::Store;
use tokio::sync::{Notify, watch};

pub struct SchedulerConfig {
    pub node_id: String,
    /// The database URL, to hold the leadership lock on its own connection.
    pub database_url: String,
    pub disable_after: Duration,
    pub sweep_every: Duration,
    pub public_url: String,
    pub mailer: Option<email::Mailer>,
}

/// Runs the scheduler until `stop`: when leading, a round every half second.
/// How long per-minute attempt statistics are kept.
pub const STATS_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// How often expired rows are deleted.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// Deletes expired statistics, idempotency records and sessions (in bounded batches).
pub async fn prune(store: &Store) {
    let now = Timestamp::now();
    let ago = |d: Duration| Timestamp::from_millis(now.as_millis() - d.as_millis() as i64);
    if let Err(e) = store
        .system()
        .prune_attempt_stats(ago(STATS_RETENTION))
        .await
    {
        tracing::warn!(error = %e, "pruning attempt statistics");
    }
    match store
        .system()
        .sweep_expired(ago(store::IDEMPOTENCY_TTL), now)
        .await
    {
        Ok(s) if s != store::Swept::default() => tracing::info!(
            idempotency_keys = s.idempotency_keys,
            sessions = s.sessions,
            pending_signups = s.pending_signups,
            "deleted expired rows"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "deleting expired idempotency records and sessions"),
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
    while !*stop.borrow() {
        if leadership.ensure().await {
            if last_sweep.is_none_or(|t| t.elapsed() >= cfg.sweep_every) {
                last_sweep = Some(Instant::now());
                match health::sweep(&store, Timestamp::now(), cfg.disable_after, &cfg.public_url)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => tracing::info!(count = n, "auto-disabled failing endpoints"),
                    Err(e) => tracing::warn!(error = %e, "auto-disable sweep failed"),
                }
                if let Err(e) = store.system().reap_expired_leases(Timestamp::now()).await {
                    tracing::warn!(error = %e, "lease reaper");
                }
            }
            // Chart statistics are kept for STATS_RETENTION (the charts show 24 hours),
            // idempotency records for their 24 h, sessions until they expire: a delete every
            // ten minutes keeps each table near its retention size.
            if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                last_prune = Some(Instant::now());
                prune(&store).await;
            }
            if let Err(e) = email::send_due(&store, cfg.mailer.as_ref(), Timestamp::now()).await {
                tracing::warn!(error = %e, "email outbox");
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
