//! Opening the database: SQLite tuned for a single busy writer, or a PostgreSQL pool.

use std::time::Duration;

use crate::error::{StoreError, redact_url};

/// Which database a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The database sea-query's `backend` renders for.
    pub(crate) fn of_db(backend: sea_orm::DbBackend) -> Backend {
        match backend {
            sea_orm::DbBackend::Postgres => Backend::Postgres,
            _ => Backend::Sqlite,
        }
    }

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
pub(crate) const STATEMENT_CACHE: usize = 24;

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

/// `url` could not be reached (the driver's reason; the URL without its password).
pub(crate) fn cannot_connect(url: &str, e: sea_orm::sqlx::Error) -> StoreError {
    StoreError::Connect {
        url: redact_url(url),
        detail: e.to_string(),
    }
}

/// `url` is not one the driver can use (its reason; the URL without its password).
pub(crate) fn invalid_url(url: &str, e: sea_orm::sqlx::Error) -> StoreError {
    StoreError::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    }
}
