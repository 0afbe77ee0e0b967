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
    /// The driver's text of the last failure, for operators (logs, health); not for clients.
    pub cause: String,
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

/// Left in a response's extensions by an error page or API error that came from a storage
/// fault, so the server's middleware can [`Store::note_fault`] it (the error mappings have no
/// store at hand).
#[derive(Clone, Debug)]
pub struct FaultSeen {
    pub fault: StorageFault,
    /// The driver's text, for the log; never shown to clients.
    pub cause: String,
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
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            degraded: Mutex::new(None),
            writable: AtomicBool::new(true),
            probing: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }
}

impl StorageHealth {
    pub fn is_writable(&self) -> bool {
        self.0.writable.load(Ordering::Acquire)
    }

    pub fn state(&self) -> StorageState {
        match &*self.lock() {
            None => StorageState::Writable,
            Some(d) => StorageState::Degraded(d.clone()),
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
        self.note_fault(fault, e.to_string());
        Some(fault)
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
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
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
                match store.probe_write().await {
                    Ok(()) => {
                        store.health.recovered();
                        break;
                    }
                    Err(e) => match e.storage_fault() {
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

    /// One tiny write in a transaction that is rolled back: it fails while the database
    /// cannot take writes.
    pub async fn probe_write(&self) -> Result<()> {
        use sea_orm::ConnectionTrait;
        let txn = self.write_txn().await?;
        match self.backend {
            crate::Backend::Postgres => {
                txn.execute_unprepared(
                    "CREATE TEMP TABLE hookd_storage_probe (b bytea) ON COMMIT DROP",
                )
                .await?;
                txn.execute_unprepared(
                    "INSERT INTO hookd_storage_probe SELECT decode(repeat('00', 4096), 'hex')",
                )
                .await?;
            }
            crate::Backend::Sqlite => {
                // The write transaction already holds SQLite's write lock (its first statement
                // is a write; see `write_txn_in`), which a read-only file refuses.
                txn.execute_unprepared(
                    "CREATE TABLE IF NOT EXISTS temp.hookd_storage_probe (b BLOB)",
                )
                .await?;
                txn.execute_unprepared(
                    "INSERT INTO temp.hookd_storage_probe VALUES (zeroblob(4096))",
                )
                .await?;
            }
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

#[cfg(test)]
mod wal {
    use sea_orm::{ConnectionTrait, Statement};

    /// The WAL is capped so a burst's growth is given back at the next checkpoint.
    #[tokio::test]
    async fn sqlite_connections_cap_the_wal() {
        let db = crate::testing::TestDb::sqlite().await;
        let row = db
            .store
            .connection()
            .query_one(Statement::from_string(
                sea_orm::DatabaseBackend::Sqlite,
                "PRAGMA journal_size_limit",
            ))
            .await
            .unwrap()
            .unwrap();
        let limit: i64 = row.try_get_by_index(0).unwrap();
        assert_eq!(limit, 64 * 1024 * 1024);
    }
}
