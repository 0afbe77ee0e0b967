//! Opening a SQLite database: tuned for a single busy writer.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sea_orm::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sea_orm::{DatabaseConnection, SqlxSqliteConnector};

use crate::connect::{ConnectOptions, STATEMENT_CACHE, cannot_connect, invalid_url};
use crate::error::StoreError;

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

/// The pool on `url`, and the database file's path.
pub(crate) async fn open(
    url: &str,
    opts: &ConnectOptions,
) -> Result<(DatabaseConnection, PathBuf), StoreError> {
    let mut options = SqliteConnectOptions::from_str(url)
        .map_err(|e| invalid_url(url, e))?
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
    let file = options.get_filename().to_path_buf();
    let pool = SqlitePoolOptions::new()
        // A connection to a file does not drop while idle: sqlx's ping before each
        // statement would only be one more hop to the connection's thread.
        .test_before_acquire(false)
        // The same commit hook as the writer thread's connection (see `health`).
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.lock_handle()
                    .await?
                    .set_commit_hook(|| !crate::checkpoint::refuse_commit());
                Ok(())
            })
        })
        .max_connections(opts.max_connections)
        .acquire_timeout(opts.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(|e| cannot_connect(url, e))?;
    Ok((SqlxSqliteConnector::from_sqlx_sqlite_pool(pool), file))
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

#[cfg(test)]
mod tests {
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
