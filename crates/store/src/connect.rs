//! Opening the database: SQLite tuned for a single busy writer, or a PostgreSQL pool.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sea_orm::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sea_orm::{DatabaseConnection, SqlxPostgresConnector, SqlxSqliteConnector};

use crate::error::{StoreError, redact_url};

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn of_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::InvalidUrl {
                url: redact_url(url),
                reason: "expected sqlite://PATH or postgres://USER@HOST/DB".into(),
            })
        }
    }
}

/// Prepared statements kept per connection. The hot path's statements are multi-row and sized
/// by their batch, so most texts are seen once; sqlx's default of 100 per connection kept up to
/// 1,600 large prepared statements alive and grew RSS by ~100 MB over a long drain.
const STATEMENT_CACHE: usize = 24;

/// How long a SQLite connection waits for another process's write lock.
pub(crate) const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings of every SQLite connection: the sea-orm pool's and the hot path's (`lite`), so the
/// two never disagree on durability.
pub(crate) const SQLITE_PRAGMAS: &[(&str, &str)] = &[
    // NORMAL sync in WAL mode loses nothing on a process crash (SIGKILL), only possibly the
    // last commits on power loss.
    ("synchronous", "NORMAL"),
    ("foreign_keys", "ON"),
    // Commits never checkpoint the WAL themselves (a 1,000-page checkpoint inside a commit
    // stalled every writer queued behind it): `checkpoint` does it beside them (decisions 24).
    ("wal_autocheckpoint", "0"),
    // Statement journals in memory, not a file created and deleted per statement.
    ("temp_store", "MEMORY"),
    // After a burst the WAL is truncated back to this size at the next checkpoint rather
    // than kept at its largest (issue 34: it stayed at 29 MiB on a 64 MiB volume).
    ("journal_size_limit", "67108864"),
];

#[derive(Clone, Debug)]
pub struct ConnectOptions {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// The keys that seal secrets at rest; `None`: the key file beside a SQLite database
    /// (made when missing), or a key of this process only on PostgreSQL (see `sealed`).
    pub keys: Option<domain::seal::Keyring>,
    /// SQLite: new messages are refused while the database's file system has less free space
    /// than this (bytes; 0: never), so deliveries keep the rest (issue 34).
    pub min_free: u64,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            keys: None,
            min_free: 0,
        }
    }
}

pub(crate) async fn connect(
    url: &str,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<(DatabaseConnection, Backend, Option<std::path::PathBuf>), StoreError> {
    let backend = Backend::of_url(url)?;
    let connect_err = |e: sea_orm::sqlx::Error| StoreError::Connect {
        url: redact_url(url),
        detail: e.to_string(),
    };
    let invalid = |e: sea_orm::sqlx::Error| StoreError::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    };
    let mut sqlite_file = None;
    let db = match backend {
        Backend::Sqlite => {
            let mut options = SqliteConnectOptions::from_str(url)
                .map_err(invalid)?
                .create_if_missing(true)
                // WAL lets readers run beside the writer.
                .journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(SQLITE_BUSY_TIMEOUT)
                .statement_cache_capacity(STATEMENT_CACHE);
            for (name, value) in SQLITE_PRAGMAS {
                options = options.pragma(*name, *value);
            }
            ensure_parent_dir(options.get_filename())?;
            create_private(options.get_filename())?;
            sqlite_file = Some(options.get_filename().to_path_buf());
            let pool = SqlitePoolOptions::new()
                // The same commit hook as the writer thread's connection (see `health`).
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        conn.lock_handle()
                            .await?
                            .set_commit_hook(|| !crate::health::refuse_commit());
                        Ok(())
                    })
                })
                .max_connections(opts.max_connections)
                .acquire_timeout(opts.acquire_timeout)
                .connect_with(options)
                .await
                .map_err(connect_err)?;
            SqlxSqliteConnector::from_sqlx_sqlite_pool(pool)
        }
        Backend::Postgres => {
            let options = PgConnectOptions::from_str(url)
                .map_err(invalid)?
                .statement_cache_capacity(STATEMENT_CACHE);
            let health = health.clone();
            let pool = PgPoolOptions::new()
                // A session opened before the last storage fault may be the read-only one, or
                // one to a server that shut down or failed over: it is closed, not reused
                // (see `health`), so a lifted read-only setting or a new primary takes effect
                // within a probe interval instead of the connection lifetime.
                .before_acquire(move |_conn, meta| {
                    let stale = health.is_stale(meta.age);
                    Box::pin(async move { Ok(!stale) })
                })
                .max_connections(opts.max_connections)
                .acquire_timeout(opts.acquire_timeout)
                .connect_with(options)
                .await
                .map_err(connect_err)?;
            SqlxPostgresConnector::from_sqlx_postgres_pool(pool)
        }
    };
    Ok((db, backend, sqlite_file))
}

/// A new database file is made readable by its owner only (SQLite would make it 0644 less
/// the umask): it holds password hashes, message payloads and sealed secrets. SQLite gives
/// the write-ahead log and shared-memory files the database file's mode, so they follow.
fn create_private(file: &Path) -> Result<(), StoreError> {
    if file.as_os_str() == ":memory:" || file.as_os_str().is_empty() {
        return Ok(());
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    match opts.open(file) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::DataDir {
            path: file.display().to_string(),
            source,
        }),
    }
}

/// `sqlite://data/hookd.db` in an empty directory must just work: make `data/`.
fn ensure_parent_dir(file: &Path) -> Result<(), StoreError> {
    let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if file.as_os_str() == ":memory:" || dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
        path: dir.display().to_string(),
        source,
    })
}
