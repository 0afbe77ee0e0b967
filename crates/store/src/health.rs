//! Whether the database can take writes right now, shared by every clone of a [`Store`].
//!
//! A write that fails with a storage fault (see [`StoreError::storage_fault`]) marks the
//! store degraded; a probe then tries one tiny write every second, rolled back, and marks it
//! writable again when that succeeds. One WARN line when the state turns degraded, one INFO
//! when it recovers; the refused requests themselves are not logged one by one.
//!
//! On PostgreSQL a fault also moves the pool's *epoch*: connections opened before it are not
//! handed out again (see `connect`), so a session that was read-only (or belongs to a server
//! that shut down or failed over) leaves the pool at once rather than at its lifetime's end.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::StorageFault;
use crate::{Result, Store, StoreError};

/// How often the probe tries a write while degraded.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The shortest time between two moves of the epoch on faults (100 ms).
const EPOCH_STEP_NANOS: u64 = 100_000_000;

/// The storage state: writable, or degraded since a fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageState {
    Writable,
    Degraded(Degraded),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Degraded {
    pub fault: StorageFault,
    /// The driver's text of the last failure, for operators (logs); not for clients.
    pub cause: String,
    /// The cause in plain words, for clients and health answers ("the disk is full", or
    /// what a refusal by the store's own state said).
    pub plain: String,
    pub since: domain::Timestamp,
}

impl StorageState {
    /// `ok`, or the fault's state name (`full`, `read_only`, `unavailable`).
    pub fn name(&self) -> &'static str {
        match self {
            StorageState::Writable => "ok",
            StorageState::Degraded(d) => d.fault.state(),
        }
    }
}

/// Why writes stop when [`VIEW_LOST`] is raised, until the store has noted the database's
/// own words for it (see [`StorageHealth::view_lost`]).
const VIEW_LOST_CAUSE: &str = "the database's files were changed under hookd by another \
     program; hookd stopped writing and must be restarted";

/// Bytes in MiB with one decimal, for people.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Left in a response's extensions by an error page or API error that came from a storage
/// fault, so the server's middleware can [`Store::note_fault`] it (the error mappings have no
/// store at hand).
#[derive(Clone, Debug)]
pub struct FaultSeen {
    pub fault: StorageFault,
    /// The driver's text, for the log; never shown to clients.
    pub cause: String,
}

/// Set (from a signal handler: an atomic store and nothing else) when this process's view of
/// the database's files can no longer be trusted: a file the database maps was truncated
/// under it and the page it touched replaced by a private one instead of killing the process
/// with SIGBUS (see hookd's `signals`; on SQLite, its WAL index). The store stops writing
/// until restarted, and its implementation notes why ([`StorageHealth::view_lost`]).
pub static VIEW_LOST: AtomicBool = AtomicBool::new(false);

/// The least free space a SQLite store waits for before taking writes again after the disk
/// filled up, when no floor is set.
const MIN_ROOM: u64 = 1024 * 1024;

/// Free space on a SQLite database's file system, below the floor: new messages are refused.
#[derive(Clone, Debug, PartialEq, Eq)]
struct LowSpace {
    free: u64,
    since: domain::Timestamp,
}

/// Seconds a client is asked to wait (`Retry-After`) when a storage fault refuses a request.
pub const FAULT_RETRY_AFTER_SECS: u64 = 5;

/// The process's view of its database's writability. Cheap to clone and to read.
#[derive(Clone, Debug, Default)]
pub struct StorageHealth(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    degraded: Mutex<Option<Degraded>>,
    writable: AtomicBool,
    probing: AtomicBool,
    /// Nanoseconds after `origin` of the last fault that should retire older connections.
    epoch: AtomicU64,
    origin: Instant,
    /// SQLite: the free space (bytes) below which new messages are refused (0: none), and
    /// the directory whose file system holds the database.
    floor: AtomicU64,
    dir: Mutex<Option<PathBuf>>,
    low: Mutex<Option<LowSpace>>,
    is_low: AtomicBool,
    /// Why this store's view of its database was lost (see [`VIEW_LOST`]), once noted.
    lost: std::sync::OnceLock<&'static str>,
    /// The runtime the store was opened on, for the probe of a fault noted on a thread of
    /// no runtime (SQLite's writer thread).
    runtime: Mutex<Option<tokio::runtime::Handle>>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            degraded: Mutex::new(None),
            writable: AtomicBool::new(true),
            probing: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            origin: Instant::now(),
            floor: AtomicU64::new(0),
            dir: Mutex::new(None),
            low: Mutex::new(None),
            is_low: AtomicBool::new(false),
            lost: std::sync::OnceLock::new(),
            runtime: Mutex::new(tokio::runtime::Handle::try_current().ok()),
        }
    }
}

impl StorageHealth {
    /// Whether writes are expected to succeed (claims, results, the API's other writes).
    /// Below the free-space floor they still are: only new messages are refused there.
    pub fn is_writable(&self) -> bool {
        self.0.writable.load(Ordering::Acquire) && self.0.lost.get().is_none()
    }

    /// The state for health answers: a lost view of the database first (only a restart ends
    /// it), then a write fault, then free space below the floor.
    pub fn state(&self) -> StorageState {
        if let Some(cause) = self.0.lost.get() {
            return StorageState::Degraded(Degraded {
                fault: StorageFault::Unavailable,
                cause: (*cause).to_owned(),
                plain: (*cause).to_owned(),
                since: self
                    .lock()
                    .as_ref()
                    .map_or_else(domain::Timestamp::now, |d| d.since),
            });
        }
        if let Some(d) = &*self.lock() {
            return StorageState::Degraded(d.clone());
        }
        match &*self.low() {
            Some(low) => StorageState::Degraded(Degraded {
                fault: StorageFault::Full,
                cause: self.low_cause(low.free),
                plain: self.low_cause(low.free),
                since: low.since,
            }),
            None => StorageState::Writable,
        }
    }

    /// Whether a new message may be written now; the refusal says why. Checked before
    /// trying, so a message refused while degraded is never half written, and a disk below
    /// its floor keeps its last space for deliveries already accepted.
    pub fn take_messages(&self) -> Result<()> {
        self.may_write()?;
        // The hot path: two atomic loads, no lock.
        if self.0.writable.load(Ordering::Acquire) && !self.0.is_low.load(Ordering::Acquire) {
            return Ok(());
        }
        // A full or read-only database refuses every write until the probe says otherwise;
        // an unreachable one is left to the write itself, which succeeds as soon as the
        // server is back (a connection error reported late, after the probe's success, would
        // otherwise refuse every message for another probe interval).
        if let Some(d) = &*self.lock()
            && d.fault != StorageFault::Unavailable
        {
            return Err(StoreError::Refused {
                fault: d.fault,
                why: d.fault.plain().to_owned(),
            });
        }
        if let Some(low) = &*self.low() {
            return Err(StoreError::Refused {
                fault: StorageFault::Full,
                why: self.low_cause(low.free),
            });
        }
        Ok(())
    }

    /// [`StorageHealth::take_messages`] for a batch about to be written, with the free space
    /// read afresh (when a floor is set): the checkpointer reads it only every 25–250 ms, and
    /// a burst of messages can fill the room between the floor and a full disk in less (an
    /// 8 MiB margin took ~0.3 s at 24,000 messages/s). One `statvfs` per group commit.
    pub(crate) fn take_message_batch(&self) -> Result<()> {
        if self.floor() > 0
            && let Some(free) = self.free_space()
        {
            self.saw_free(free);
        }
        self.take_messages()
    }

    /// Whether reads can be trusted: not once this process's view of the database is lost
    /// (see [`VIEW_LOST`]), when it may miss the newest pages (a just-created application read
    /// as missing). Requests other than health are then refused with this.
    pub fn may_read(&self) -> Result<()> {
        self.may_write()
    }

    /// Refuses every write once the view of the database is lost (see [`VIEW_LOST`]).
    pub(crate) fn may_write(&self) -> Result<()> {
        // The signal's flag too: the store notes it within a pass of its implementation's
        // watcher, and no write should slip in between.
        if let Some(cause) = self.0.lost.get() {
            return Err(StoreError::Refused {
                fault: StorageFault::Unavailable,
                why: (*cause).to_owned(),
            });
        }
        if VIEW_LOST.load(Ordering::Acquire) {
            return Err(StoreError::Refused {
                fault: StorageFault::Unavailable,
                why: VIEW_LOST_CAUSE.to_owned(),
            });
        }
        Ok(())
    }

    /// Notes, with the database's own words for it, that this process's view of the
    /// database is lost (see [`VIEW_LOST`]): writes stop for good. Whether this was the
    /// first time (the caller then says so loudly, once).
    pub(crate) fn view_lost(&self, cause: &'static str) -> bool {
        if self.0.lost.set(cause).is_err() {
            return false;
        }
        self.0.writable.store(false, Ordering::Release);
        let mut degraded = self.lock();
        if degraded.is_none() {
            *degraded = Some(Degraded {
                fault: StorageFault::Unavailable,
                cause: cause.to_owned(),
                plain: cause.to_owned(),
                since: domain::Timestamp::now(),
            });
        }
        true
    }

    fn low(&self) -> std::sync::MutexGuard<'_, Option<LowSpace>> {
        self.0.low.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn low_cause(&self, free: u64) -> String {
        format!(
            "the disk is almost full: {} free, below the floor of {} (storage_min_free); new \
             messages are refused, deliveries go on",
            mib(free),
            mib(self.floor())
        )
    }

    /// The free-space floor in bytes (0: none).
    pub fn floor(&self) -> u64 {
        self.0.floor.load(Ordering::Relaxed)
    }

    /// Sets the floor and the directory whose file system is watched (SQLite only).
    pub(crate) fn watch_space(&self, dir: PathBuf, floor: u64) {
        self.0.floor.store(floor, Ordering::Relaxed);
        *self.0.dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir);
    }

    /// Free bytes on the watched file system, or `None` when not watched or unknown.
    pub(crate) fn free_space(&self) -> Option<u64> {
        let dir = self
            .0
            .dir
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        let st = rustix::fs::statvfs(&dir).ok()?;
        Some(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// The free space a store that ran out waits for before it writes again: half as much
    /// again as the floor, since the WAL may grow back by up to a quarter of what is free
    /// (see `checkpoint`) and the state should not swing at every message.
    pub(crate) fn room_needed(&self) -> u64 {
        let floor = self.floor();
        (floor + floor / 2).max(MIN_ROOM)
    }

    /// Compares `free` with the floor: turns low below it, back above [`room_needed`];
    /// one WARN and one INFO line.
    pub(crate) fn saw_free(&self, free: u64) {
        let floor = self.floor();
        if floor == 0 {
            return;
        }
        let was_low = self.0.is_low.load(Ordering::Acquire);
        if !was_low && free < floor {
            let mut low = self.low();
            if low.is_none() {
                tracing::warn!(
                    free = %mib(free),
                    floor = %mib(floor),
                    "the database's disk is almost full: new messages are refused with 503 until \
                     more space is free; deliveries go on"
                );
                *low = Some(LowSpace {
                    free,
                    since: domain::Timestamp::now(),
                });
            }
            self.0.is_low.store(true, Ordering::Release);
        } else if was_low && free >= self.room_needed() {
            if let Some(low) = self.low().take() {
                let secs = domain::Timestamp::now().since(low.since).as_secs();
                tracing::info!(free = %mib(free), after_secs = secs, "enough free space again: taking new messages");
            }
            self.0.is_low.store(false, Ordering::Release);
        } else if was_low && let Some(low) = self.low().as_mut() {
            low.free = free;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Degraded>> {
        self.0.degraded.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_nanos(&self) -> u64 {
        u64::try_from(self.0.origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records a fault; `true` when the state turned degraded with it.
    pub(crate) fn record(&self, fault: StorageFault, cause: String) -> bool {
        self.record_plain(fault, cause, fault.plain().to_owned())
    }

    /// [`StorageHealth::record`] with the cause in plain words given.
    fn record_plain(&self, fault: StorageFault, cause: String, plain: String) -> bool {
        // Every connection open now may be the one that failed (a read-only session, a
        // server gone): none is reused. At most every EPOCH_STEP, or every refused request
        // would make the pool open a new session; one that fails after a step is retired at
        // the next, or at recovery.
        let now = self.now_nanos();
        let last = self.0.epoch.load(Ordering::Acquire);
        if last == 0 || now.saturating_sub(last) >= EPOCH_STEP_NANOS {
            self.0.epoch.fetch_max(now, Ordering::AcqRel);
        }
        let mut degraded = self.lock();
        let turned = degraded.is_none();
        match &mut *degraded {
            Some(d) => {
                d.fault = fault;
                d.cause = cause;
                d.plain = plain;
            }
            None => {
                tracing::warn!(
                    state = fault.state(),
                    cause = %cause,
                    "storage degraded: writes are refused with 503 until a test write succeeds"
                );
                *degraded = Some(Degraded {
                    fault,
                    cause,
                    plain,
                    since: domain::Timestamp::now(),
                });
            }
        }
        self.0.writable.store(false, Ordering::Release);
        turned
    }

    /// Records that a write succeeded after a fault.
    fn recovered(&self) {
        // Sessions opened before the write that just succeeded may still carry the old state
        // (PostgreSQL applies `default_transaction_read_only` when a session starts): none is
        // reused.
        self.0.epoch.fetch_max(self.now_nanos(), Ordering::AcqRel);
        let mut degraded = self.lock();
        if let Some(d) = degraded.take() {
            let secs = domain::Timestamp::now().since(d.since).as_secs();
            tracing::info!(
                was = d.fault.state(),
                after_secs = secs,
                "storage writable again"
            );
        }
        self.0.writable.store(true, Ordering::Release);
    }

    /// Whether a connection of `age` was opened before the last fault (PostgreSQL's pool
    /// drops it instead of handing it out).
    pub(crate) fn is_stale(&self, age: Duration) -> bool {
        let epoch = self.0.epoch.load(Ordering::Acquire);
        if epoch == 0 {
            return false;
        }
        let opened = self.0.origin.elapsed().saturating_sub(age);
        u64::try_from(opened.as_nanos()).unwrap_or(u64::MAX) < epoch
    }
}

impl Store {
    /// Whether the database takes writes, and if not since when and why.
    pub fn storage(&self) -> &StorageHealth {
        &self.health
    }

    /// Notes an error that reached a caller (the API, the dispatcher's loops): a storage
    /// fault marks the store degraded and starts the probe. Returns the fault, so callers
    /// log it quietly (the state change is logged once here) and answer 503.
    pub fn note(&self, e: &StoreError) -> Option<StorageFault> {
        let fault = e.storage_fault()?;
        if !e.is_refusal() {
            self.note_fault(fault, e.to_string());
        }
        Some(fault)
    }

    /// Logs a failed background write (`what`: "heartbeat failed"): a storage fault quietly,
    /// since the store logs its change of state once; anything else as a WARN.
    pub fn warn_unless_fault(&self, e: &StoreError, what: &'static str) {
        if self.note(e).is_some() {
            tracing::debug!(error = %e, "{what}");
        } else {
            tracing::warn!(error = %e, "{what}");
        }
    }

    /// [`Store::note`] with the fault already judged (`cause`: the driver's text).
    pub fn note_fault(&self, fault: StorageFault, cause: String) {
        self.health.record(fault, cause);
        self.spawn_probe();
    }

    fn spawn_probe(&self) {
        if self.health.0.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current().ok().or_else(|| {
            self.health
                .0
                .runtime
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        });
        let Some(runtime) = runtime else {
            self.health.0.probing.store(false, Ordering::Release);
            return;
        };
        let store = self.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                if matches!(
                    store.checkpointer.try_lock().map(|closed| *closed),
                    Ok(true)
                ) {
                    break;
                }
                match store.probe().await {
                    Ok(()) => {
                        store.health.recovered();
                        break;
                    }
                    Err(e) => match e.storage_fault() {
                        // The probe's own judgement (not enough room yet) is said as is.
                        Some(fault) if e.is_refusal() => {
                            store.health.record_plain(fault, e.to_string(), e.to_string());
                        }
                        Some(fault) => {
                            store.health.record(fault, e.to_string());
                        }
                        // Not a storage fault (say the role may not make temporary tables):
                        // the database got as far as judging the statement, so writes are
                        // taken as possible again rather than refused (and the dispatcher
                        // stopped) for good; a write that still fails marks it again.
                        None => {
                            tracing::warn!(error = %e, "storage probe failed for another reason; taking writes as possible again");
                            store.health.recovered();
                            break;
                        }
                    },
                }
            }
            store.health.0.probing.store(false, Ordering::Release);
            // A fault recorded between the probe's success and here would have found the
            // probe still running: look again.
            if !store.health.is_writable() {
                store.spawn_probe();
            }
        });
    }

    /// The probe's test. A SQLite store that ran out of space first gives back what its WAL
    /// holds (a TRUNCATE checkpoint) and waits until the file system has
    /// [`StorageHealth::room_needed`] free: a rolled-back write needs no disk space, and
    /// writes taken again with only a few pages free would fill it at once.
    async fn probe(&self) -> Result<()> {
        use sea_orm::ConnectionTrait;
        let full = matches!(self.health.state(), StorageState::Degraded(d) if d.fault == StorageFault::Full);
        // Never with the view of the database lost: a TRUNCATE from this process's view of
        // SQLite's WAL could drop frames it never found (see `checkpoint::refuse_commit`).
        if let Some(give_back) = self.sql.give_back_wal
            && full
            && self.health.may_write().is_ok()
        {
            let turn = self.write_turn().await;
            if let Err(e) = self.db.execute_unprepared(give_back).await {
                tracing::debug!(error = %e, "TRUNCATE checkpoint while the disk is full");
            }
            drop(turn);
            if let Some(free) = self.health.free_space()
                && free < self.health.room_needed()
            {
                return Err(StoreError::Refused {
                    fault: StorageFault::Full,
                    why: format!(
                        "the disk is full: {} free, {} needed to take writes again",
                        mib(free),
                        mib(self.health.room_needed())
                    ),
                });
            }
        }
        self.probe_write().await
    }

    /// One tiny write in a transaction that is rolled back: it fails while the database
    /// cannot take writes.
    pub async fn probe_write(&self) -> Result<()> {
        use sea_orm::ConnectionTrait;
        let txn = self.write_txn().await?;
        for statement in self.sql.probe {
            txn.execute_unprepared(statement).await?;
        }
        txn.rollback().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_retires_connections_opened_before_it_and_recovery_too() {
        let h = StorageHealth::default();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!h.is_stale(Duration::from_millis(4)), "no fault yet");
        assert!(h.record(StorageFault::ReadOnly, "cannot execute INSERT".into()));
        assert!(!h.is_writable());
        assert_eq!(h.state().name(), "read_only");
        assert!(
            h.is_stale(Duration::from_millis(4)),
            "opened before the fault"
        );
        assert!(!h.is_stale(Duration::ZERO), "opened after it");
        assert!(
            !h.record(StorageFault::ReadOnly, "again".into()),
            "already degraded"
        );
        std::thread::sleep(Duration::from_millis(5));
        h.recovered();
        assert!(h.is_writable());
        assert_eq!(h.state(), StorageState::Writable);
        assert!(
            h.is_stale(Duration::from_millis(4)),
            "opened before recovery"
        );
    }
}
