//! hookd's storage: sea-orm entities and tenant-scoped repositories over SQLite or PostgreSQL.
//!
//! Every repository method takes the tenant first and filters by it, so one tenant can never
//! read or change another's rows. The few lookups that must work before a tenant is known
//! (API-key and session authentication, login by email) and the cross-tenant sweeps of the
//! scheduler are named for what they are.

mod cache;
mod columns;
mod connect;
mod dialect;
use postgres::pg;
use sqlite::{checkpoint, lite};
mod claims;
mod disable;
mod dispatch;
mod egress;
pub mod entities;
mod error;
mod gate;
mod health;
mod inbound;
mod ingest;
mod integrations;
mod operational;
mod ops;
mod outcomes;
mod page;
mod plans;
mod portal;
mod postgres;
mod recovery;
mod refusals;
mod resources;
mod results;
mod retention;
mod sealed;
mod sqlite;
mod stats;
mod sweep;
mod tenants;
pub mod trace;
mod traffic;
mod usage;
mod warnings;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection};

pub use claims::Fresh;
pub use columns::EXPUNGED;
pub use connect::{Backend, ConnectOptions};
pub use dispatch::DispatchEndpoint;
pub use egress::{GrantOrigin, Grants};
pub use error::{StorageFault, StoreError, redact_url};
pub use health::{
    Degraded, FAULT_RETRY_AFTER_SECS, FaultSeen, PROBE_INTERVAL, StorageHealth, StorageState,
    VIEW_LOST,
};
pub use inbound::{Claim, HeldEvent, Offer, Source, SourceSettings, Tally, Turn};
pub use ingest::{GiveUpAt, HandedOff, Handoff, Slot, Taker};
pub use integrations::{
    INTEGRATION_KEY_PREFIX, IntegrationChanges, IntegrationGrant,
    feature_flags as integration_feature_flags,
};
pub use ops::{IDEMPOTENCY_TTL, IdempotencyStart, SENT_SIGNUP_BODY};
pub use page::{ListParams, MAX_LIMIT, Page, WALK_WINDOW};
pub use portal::{
    NewPortalToken, PORTAL_MAX_EXPIRY, PORTAL_MIN_EXPIRY, PORTAL_TOKEN_PREFIX, PortalGrant,
    portal_url,
};
pub use recovery::{AttemptFilter, Batches, Capped, DeliveryStats, PREVIEW_CAP};
pub use refusals::{NewRefusal, REFUSAL_RETENTION, REFUSALS_KEPT, REFUSALS_PAGE, Refusal};
pub use resources::{
    AppFilter, EndpointChanges, NewApplication, NewEndpoint, NewEventType, retry_policy_of,
};
pub use results::{AttemptResult, Next, attempt_row};
pub use retention::{Pruned, Reclaim};
pub use sealed::{KEY_FILE, KeySource, Reseal, Resealed};
pub use stats::{LATENCY_BOUNDS_MS, Outcome, QueueGauges, StatCounts, StatPoint};
pub use sweep::{Horizons, Swept};
pub use tenants::{NewTenant, hash_token};
pub use traffic::{CreatedMessage, MessageFilter, NewAttempt, NewMessage};
pub use usage::{AppEventTypes, AppUsage};
pub use warnings::{WARNING_ERRORS, health_of};

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Opens `url`'s database: the one place that looks at which it is (see `dialect`).
async fn open_database(
    url: &str,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<(DatabaseConnection, Backend, Option<std::path::PathBuf>)> {
    let backend = Backend::of_url(url)?;
    let (db, file) = match backend {
        Backend::Sqlite => {
            let (db, file) = crate::sqlite::connect::open(url, opts).await?;
            (db, Some(file))
        }
        Backend::Postgres => (
            crate::postgres::connect::open(url, opts, health).await?,
            None,
        ),
    };
    Ok((db, backend, file))
}

/// The dialect of `backend`: the one choice of the store's statements, made when it
/// connects (see `dialect`).
pub(crate) fn dialect_of(backend: Backend) -> &'static dialect::Dialect {
    match backend {
        Backend::Sqlite => &sqlite::DIALECT,
        Backend::Postgres => &postgres::DIALECT,
    }
}

/// Which storage fault a database's own error means. An error carries no dialect, only its
/// type says which database raised it, so each implementation is asked and judges only its
/// own (see `error::StoreError::storage_fault`).
pub(crate) fn database_fault(
    e: &(dyn sea_orm::sqlx::error::DatabaseError + 'static),
) -> Option<error::StorageFault> {
    [&sqlite::DIALECT, &postgres::DIALECT]
        .into_iter()
        .find_map(|d| (d.database_fault)(e))
}

/// The dialect a connection (or transaction) speaks, for code handed only that.
pub(crate) fn dialect_of_connection(db: &impl ConnectionTrait) -> &'static dialect::Dialect {
    dialect_of(Backend::of_db(db.get_database_backend()))
}

/// Where a database's hot writes (new messages, attempt results) go, chosen once when the
/// store connects (decisions 96). `None` inside, in the writer's own handle: a writer must
/// not hold itself, or it would never see its channel close.
#[derive(Clone, Debug)]
pub(crate) enum Writer {
    /// The thread that creates messages and writes attempt results without a thread hop per
    /// statement (decisions 25).
    Sqlite(Option<lite::Lite>),
    /// The group-commit writer of new messages on the pool (see `ingest`); results are one
    /// statement on the pool.
    Postgres(Option<tokio::sync::mpsc::Sender<ingest::IngestJob>>),
}

/// The hot writes, each to this database's implementation (see [`Writer`]).
impl Store {
    /// Queues a new message with the group-committing writer; gives it back where there is
    /// none (the writer's own handle, or a writer gone).
    pub(crate) async fn send_to_writer(
        &self,
        job: ingest::IngestJob,
    ) -> std::result::Result<(), ingest::IngestJob> {
        match &self.writer {
            Writer::Sqlite(Some(lite)) => lite.ingest(job).await,
            Writer::Postgres(Some(tx)) => tx.send(job).await.map_err(|e| e.0),
            Writer::Sqlite(None) | Writer::Postgres(None) => Err(job),
        }
    }

    /// One batch written by this database's one path, outside the group-committing writers:
    /// on SQLite the writer thread (which takes the write turn itself), on PostgreSQL a
    /// transaction on the pool. Nothing is handed to a dispatcher.
    pub(crate) async fn create_batch(
        &self,
        inputs: Vec<ingest::Input>,
    ) -> Result<Vec<Result<CreatedMessage>>> {
        match &self.writer {
            Writer::Sqlite(Some(lite)) => {
                let keys = self.seal.clone();
                Ok(lite
                    .run(move |conn| {
                        crate::sqlite::ingest::create_messages_lite(conn, &inputs, None, &keys)
                    })
                    .await?
                    .finish())
            }
            Writer::Postgres(_) => Ok(self.create_messages_at_once(&inputs, None).await?.finish()),
            Writer::Sqlite(None) => Err(crate::lite::stopped()),
        }
    }

    /// Writes a batch of attempt results (see `Store::record_results_in`); returns the ids
    /// of the deliveries written (those whose lease `owner` still held).
    pub(crate) async fn write_results(
        &self,
        owner: &str,
        results: &[results::AttemptResult],
        now: i64,
        tallies: results::Tallies,
    ) -> Result<std::collections::HashSet<domain::ids::DeliveryId>> {
        match &self.writer {
            Writer::Sqlite(Some(lite)) => {
                sqlite::results::write_results_lite(lite, owner, results, now, tallies).await
            }
            Writer::Postgres(_) => {
                self.record_results_at_once(owner, results, now, &tallies)
                    .await
            }
            Writer::Sqlite(None) => Err(lite::stopped()),
        }
    }

    /// Runs a claim (see `claims::claim_statement`) and returns the deliveries it took. On
    /// SQLite on the writer thread, whose connection writes everything else of the hot path:
    /// a claim committed from the pool's connection made the writer's connection drop its
    /// page cache at its next transaction (and the pool's, at each write of the writer), so
    /// at 1,000 endpoints, where most deliveries are claimed, each connection read again the
    /// pages it had just read. (PostgreSQL has no write turn to take: the gate is SQLite's.)
    /// SQLite plans a statement when it prepares it, from the schema and never from sizes it
    /// has not been told (hookd runs no ANALYZE), so a kept plan cannot go stale. On
    /// PostgreSQL on the pool, planned for the table as it is now (`pg::query_planned_now`).
    pub(crate) async fn claim(
        &self,
        stmt: sea_orm::Statement,
    ) -> Result<Vec<entities::delivery::Model>> {
        match &self.writer {
            Writer::Sqlite(Some(lite)) => {
                lite.run(move |conn| lite::query_deliveries(conn, &stmt))
                    .await
            }
            Writer::Postgres(_) => {
                use sea_orm::FromQueryResult;
                let rows = pg::query_planned_now(&self.db, stmt).await?;
                Ok(rows
                    .iter()
                    .map(|row| entities::delivery::Model::from_query_result(row, ""))
                    .collect::<std::result::Result<Vec<_>, _>>()?)
            }
            Writer::Sqlite(None) => Err(lite::stopped()),
        }
    }
}

/// A handle on the database. Cheap to clone: it wraps a connection pool.
#[derive(Clone, Debug)]
pub struct Store {
    db: DatabaseConnection,
    backend: Backend,
    /// The statements that differ between the databases, chosen once here (see `dialect`).
    sql: &'static dialect::Dialect,
    /// SQLite has one writer: this process's write transactions take turns here rather than
    /// in SQLite's busy handler (which sleeps). PostgreSQL needs no gate.
    write_gate: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// Where this database's hot writes go (see [`Writer`]).
    writer: Writer,
    /// Where the message writer hands new deliveries to this process's dispatcher, when one
    /// runs here (see [`Handoff`]). Shared by every clone.
    handoff: std::sync::Arc<std::sync::RwLock<Option<Handoff>>>,
    /// This process's handed-off deliveries that PostgreSQL holds only in a journal (see
    /// `postgres::journal`). Shared by every clone; empty on SQLite.
    journal: std::sync::Arc<postgres::journal::Journal>,
    /// Short-lived copies of API-key and application lookups (see `cache`).
    keys: std::sync::Arc<cache::ReadCache<String, domain::ids::TenantId>>,
    /// The same for portal tokens (see `portal`).
    portal: std::sync::Arc<cache::ReadCache<String, portal::PortalGrant>>,
    /// The same for integration keys (see `integrations`).
    integrations: std::sync::Arc<cache::ReadCache<String, integrations::IntegrationGrant>>,
    apps: std::sync::Arc<
        cache::ReadCache<(domain::ids::TenantId, String), entities::application::Model>,
    >,
    /// Short-lived copies of each tenant's operational application with whether any of its
    /// endpoints is enabled, or that it has none (see `operational`).
    ops_apps: std::sync::Arc<
        cache::ReadCache<domain::ids::TenantId, Option<(entities::application::Model, bool)>>,
    >,
    /// Each tenant's operational-event budget in this process, and the counts.
    operational: std::sync::Arc<operational::Operational>,
    /// Short-lived copies of each tenant's `status_preset`, read by the dispatcher per batch.
    presets: std::sync::Arc<
        cache::ReadCache<domain::ids::TenantId, Option<domain::classify::StatusPreset>>,
    >,
    /// The same for each tenant's egress grants (see `egress`).
    grants: std::sync::Arc<cache::ReadCache<domain::ids::TenantId, egress::Grants>>,
    /// The same for endpoints with their secrets opened, read by the dispatcher for every
    /// batch of claimed deliveries (see `Store::dispatch_endpoints`).
    dispatch: std::sync::Arc<
        cache::ReadCache<domain::ids::EndpointId, std::sync::Arc<dispatch::DispatchEndpoint>>,
    >,
    /// The same for inbound sources, read by every unauthenticated `POST /in/{source}`.
    sources: std::sync::Arc<cache::ReadCache<domain::ids::SourceId, inbound::Source>>,
    /// Endpoints this process must not send to right now (see `gate`). Shared by every clone.
    stopped: std::sync::Arc<gate::StoppedEndpoints>,
    /// Held by the WAL checkpointer while it checkpoints; `true` once `close` stopped it.
    checkpointer: std::sync::Arc<tokio::sync::Mutex<bool>>,
    /// The keys secrets are sealed under at rest (see `sealed`), and where they came from.
    seal: sealed::SharedKeys,
    key_source: std::sync::Arc<KeySource>,
    /// A key made at connect for a missing key file, not yet written (see `sealed`).
    unsaved_key: std::sync::Arc<Option<sealed::UnsavedKey>>,
    /// Whether writes succeed right now (see `health`). Shared by every clone.
    health: StorageHealth,
}

/// A turn at SQLite's single writer, from [`Store::write_turn`]; writes made in it do not wait
/// for this process's other writers. Empty on PostgreSQL.
#[must_use]
pub struct WriteTurn(#[allow(dead_code)] Option<tokio::sync::OwnedMutexGuard<()>>);

/// A write transaction; on SQLite it holds the write gate until commit or drop.
pub(crate) struct WriteTxn {
    txn: sea_orm::DatabaseTransaction,
    _turn: WriteTurn,
}

impl std::ops::Deref for WriteTxn {
    type Target = sea_orm::DatabaseTransaction;
    fn deref(&self) -> &Self::Target {
        &self.txn
    }
}

impl WriteTxn {
    pub(crate) async fn commit(self) -> Result<()> {
        self.txn.commit().await?;
        Ok(())
    }

    pub(crate) async fn rollback(self) -> Result<()> {
        self.txn.rollback().await?;
        Ok(())
    }
}

/// The store's cross-tenant side: claiming and finishing deliveries, sweeps, jobs, email,
/// authentication. Every [`Store`] method takes the tenant whose rows it touches; these do
/// not, so they sit behind [`Store::system`], whose name says so at every call site.
#[derive(Clone, Copy)]
pub struct System<'a>(&'a Store);

impl std::ops::Deref for System<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.0
    }
}

impl Store {
    /// The cross-tenant operations (see [`System`]).
    pub fn system(&self) -> System<'_> {
        System(self)
    }

    /// Opens `url` (`sqlite://path` or `postgres://…`). SQLite files and their directory are
    /// created when missing.
    pub async fn connect(url: &str, opts: &ConnectOptions) -> Result<Store> {
        let health = StorageHealth::default();
        let (db, backend, sqlite_file) = open_database(url, opts, &health).await?;
        let (keys, key_source, unsaved_key) = match (&opts.keys, &sqlite_file) {
            (Some(keys), _) => (keys.clone(), KeySource::Configured, None),
            (None, Some(file)) if file.as_os_str() != ":memory:" => sealed::key_file_keys(file)?,
            (None, _) => (sealed::process_keys(), KeySource::Process, None),
        };
        let mut store = Store {
            db,
            backend,
            sql: dialect_of(backend),
            // One writer: SQLite, a file (see `write_gate`).
            write_gate: sqlite_file.as_ref().map(|_| Default::default()),
            writer: match sqlite_file {
                Some(_) => Writer::Sqlite(None),
                None => Writer::Postgres(None),
            },
            handoff: Default::default(),
            journal: Default::default(),
            keys: Default::default(),
            portal: Default::default(),
            integrations: Default::default(),
            apps: Default::default(),
            ops_apps: Default::default(),
            operational: Default::default(),
            presets: Default::default(),
            grants: Default::default(),
            dispatch: Default::default(),
            sources: Default::default(),
            stopped: Default::default(),
            checkpointer: Default::default(),
            seal: std::sync::Arc::new(keys),
            key_source: std::sync::Arc::new(key_source),
            unsaved_key: std::sync::Arc::new(unsaved_key),
            health,
        };
        match sqlite_file {
            Some(file) => {
                if file.as_os_str() != ":memory:" {
                    let dir = match file.parent() {
                        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                        _ => std::path::PathBuf::from("."),
                    };
                    store.health.watch_space(dir, opts.min_free);
                }
                let lite = lite::Lite::start(store.clone(), &file)?;
                checkpoint::spawn(store.clone(), lite.downgrade(), file);
                store.writer = Writer::Sqlite(Some(lite));
            }
            None => {
                let writer = postgres::ingest::spawn_writer(store.clone(), url, opts)?;
                store.writer = Writer::Postgres(Some(writer));
            }
        }
        Ok(store)
    }

    /// Brings the schema up to date; a no-op when it already is.
    pub async fn migrate(&self) -> Result<()> {
        // No checkpoint of SQLite's WAL beside the migrations: below the disk's floor it is a
        // TRUNCATE, which holds the write lock, and a migration's write then failed with
        // "database is locked" (`hookd migrate` on an 8 MB file system, once in a CI run).
        let _no_checkpoint = self.checkpointer.lock().await;
        Migrator::up(&self.db, None).await?;
        Ok(())
    }

    /// Names of the migrations not yet applied.
    pub async fn pending_migrations(&self) -> Result<Vec<String>> {
        let pending = Migrator::get_pending_migrations(&self.db).await?;
        Ok(pending.iter().map(|m| m.name().to_owned()).collect())
    }

    /// Runs one SQL statement as is, for tooling (`hookd bench` creating and dropping its
    /// databases). Never with user input.
    pub async fn execute_sql(&self, sql: &str) -> Result<()> {
        self.db.execute_unprepared(sql).await?;
        Ok(())
    }

    /// An id as an SQL literal of its stored form on this database (decisions 94: a `uuid`
    /// on PostgreSQL, a 16-byte BLOB on SQLite), for SQL written by hand (tests, tooling).
    pub fn id_sql(&self, id: impl Into<sea_orm::Value>) -> String {
        match id.into() {
            sea_orm::Value::Uuid(Some(u)) => (self.sql.id_literal)(&u),
            other => unreachable!("ids are stored as uuid values, not {other:?}"),
        }
    }

    /// A round trip to the database, for health checks.
    pub async fn ping(&self) -> Result<()> {
        self.db.execute_unprepared("SELECT 1").await?;
        Ok(())
    }

    /// Takes a turn at writing (SQLite only; PostgreSQL needs no gate): a write that waits
    /// here instead of in SQLite's busy handler, which sleeps in growing steps, is not slowed
    /// by the others. Held for one statement or handed to a transaction.
    pub async fn write_turn(&self) -> WriteTurn {
        WriteTurn(match &self.write_gate {
            Some(gate) => Some(gate.clone().lock_owned().await),
            None => None,
        })
    }

    /// Begins a transaction that will write; see `write_gate`.
    pub(crate) async fn write_txn(&self) -> Result<WriteTxn> {
        let turn = self.write_turn().await;
        self.write_txn_in(turn).await
    }

    /// Begins a write transaction in a turn already taken.
    pub(crate) async fn write_txn_in(&self, turn: WriteTurn) -> Result<WriteTxn> {
        use sea_orm::TransactionTrait;
        self.health.may_write()?;
        let txn = self.db.begin().await?;
        if let Some(first) = self.sql.begin_write {
            txn.execute_unprepared(first).await?;
        }
        Ok(WriteTxn { txn, _turn: turn })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The raw connection, for tests and migrations tooling.
    pub fn connection(&self) -> &DatabaseConnection {
        &self.db
    }

    pub async fn close(self) -> Result<()> {
        // No checkpoint may run while the pool's connections close (SQLite then unmaps the
        // WAL index under it).
        *self.checkpointer.lock().await = true;
        self.db.close().await?;
        Ok(())
    }
}

/// Serialises a value stored in a JSON text column.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serialising plain data (strings, maps, lists) cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// Reads a JSON text column, reporting corruption instead of panicking.
pub fn from_json<T: serde::de::DeserializeOwned>(column: &str, text: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
}
