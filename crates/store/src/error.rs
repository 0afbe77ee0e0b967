use sea_orm::{DbErr, RuntimeErr};

/// Everything the store can report. Callers map these to API errors; none carries SQL text
/// meant for end users.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{entity} not found")]
    NotFound { entity: &'static str },
    /// A unique key was violated; `field` names it in the API's terms (e.g. `eventId`).
    #[error("{field} already exists")]
    Conflict { field: &'static str },
    /// A manual action (resend, recover, replay) on a disabled endpoint.
    #[error("endpoint {endpoint_id} is disabled; enable it before sending it anything")]
    EndpointDisabled { endpoint_id: String },
    #[error("invalid database URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot create the data directory or database file {path}: {source}")]
    DataDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to the database at {url}: {detail}")]
    Connect { url: String, detail: String },
    /// A sealed secret that does not open: the key that sealed it is not configured (the
    /// message names it), or the value was altered.
    #[error("{0}")]
    Sealed(domain::seal::OpenError),
    /// The keys for sealed secrets cannot be had (the message says why).
    #[error("{0}")]
    Keys(String),
    #[error("stored data is not valid: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Db(#[from] DbErr),
    /// From a database driver the store uses beside sea-orm (SQLite's hot path, decisions
    /// 25), judged by its implementation when it was raised (see `sqlite`).
    #[error("database error: {source}")]
    Driver {
        fault: Option<StorageFault>,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Refused without trying, because the store already knows the write cannot or must not
    /// happen now (below the free-space floor, the WAL index lost, a batch that already failed
    /// with a fault). The store's health has noted the state; callers only answer 503.
    #[error("{why}")]
    Refused { fault: StorageFault, why: String },
}

impl StoreError {
    pub fn not_found(entity: &'static str) -> Self {
        StoreError::NotFound { entity }
    }

    /// A writer's thread or runtime (`what`) could not be started: the system refused a
    /// thread or its resources. Both databases' writers say it the same way.
    pub(crate) fn not_started(what: &str, e: std::io::Error) -> Self {
        StoreError::Corrupt(format!("cannot start {what}: {e}"))
    }

    /// Whether this error means the database cannot take writes right now (full, read-only,
    /// unreachable) rather than that this request was wrong. Judged by the database's own
    /// error codes, each by its implementation (`Dialect::database_fault`), never by message
    /// text.
    pub fn storage_fault(&self) -> Option<StorageFault> {
        match self {
            StoreError::Db(e) => db_fault(e),
            StoreError::Driver { fault, .. } => *fault,
            StoreError::Refused { fault, .. } => Some(*fault),
            _ => None,
        }
    }

    /// A storage fault the store has already noted (see [`StoreError::Refused`]): answered
    /// with 503 like the others, but not noted again.
    pub fn is_refusal(&self) -> bool {
        matches!(self, StoreError::Refused { .. })
    }
}

/// Why the database cannot take writes (see [`StoreError::storage_fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageFault {
    /// No space left for the database.
    Full,
    /// The database, its file or the session is read-only.
    ReadOnly,
    /// The database cannot be reached, opened or read right now (I/O errors, lost or
    /// refused connections, an exhausted or closed pool).
    Unavailable,
}

impl StorageFault {
    /// The API's error code for a refusal caused by this fault.
    pub fn code(self) -> &'static str {
        match self {
            StorageFault::Full => "storage_full",
            StorageFault::ReadOnly => "storage_read_only",
            StorageFault::Unavailable => "storage_unavailable",
        }
    }

    /// The state's name in health answers: `full`, `read_only`, `unavailable`.
    pub fn state(self) -> &'static str {
        match self {
            StorageFault::Full => "full",
            StorageFault::ReadOnly => "read_only",
            StorageFault::Unavailable => "unavailable",
        }
    }

    /// The cause in plain words, for people ("the disk is full").
    pub fn plain(self) -> &'static str {
        match self {
            StorageFault::Full => "the disk is full",
            StorageFault::ReadOnly => "the database is read-only",
            StorageFault::Unavailable => "the database cannot be reached",
        }
    }
}

fn sqlx_fault(e: &sea_orm::sqlx::Error) -> Option<StorageFault> {
    use sea_orm::sqlx::Error as X;
    match e {
        // Only the error's type says which database raised it.
        X::Database(db) => crate::database_fault(db.as_ref()),
        X::PoolTimedOut | X::PoolClosed | X::Io(_) | X::WorkerCrashed => {
            Some(StorageFault::Unavailable)
        }
        _ => None,
    }
}

fn db_fault(e: &DbErr) -> Option<StorageFault> {
    match e {
        DbErr::ConnectionAcquire(_) => Some(StorageFault::Unavailable),
        DbErr::Exec(r) | DbErr::Query(r) | DbErr::Conn(r) => match r {
            RuntimeErr::SqlxError(x) => sqlx_fault(x),
            RuntimeErr::Internal(_) => None,
        },
        _ => None,
    }
}

/// Whether a database error is a unique-key violation, judged by the driver's error kind,
/// never by message text.
pub(crate) fn is_unique_violation(err: &DbErr) -> bool {
    let runtime = match err {
        DbErr::Exec(e) | DbErr::Query(e) | DbErr::Conn(e) => e,
        _ => return false,
    };
    match runtime {
        RuntimeErr::SqlxError(sea_orm::sqlx::Error::Database(db)) => {
            matches!(db.kind(), sea_orm::sqlx::error::ErrorKind::UniqueViolation)
        }
        _ => false,
    }
}

/// Maps a unique violation to `Conflict { field }`, passing other errors through.
pub(crate) fn conflict_as(field: &'static str) -> impl FnOnce(DbErr) -> StoreError {
    move |e| {
        if is_unique_violation(&e) {
            StoreError::Conflict { field }
        } else {
            StoreError::Db(e)
        }
    }
}

/// A database URL with any password replaced, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}{tail}")
            } else {
                format!("{scheme}://{user}@{host}{tail}")
            }
        }
        None => url.to_owned(),
    }
}

/// Guards methods that take a loaded row: it must belong to the calling tenant.
pub(crate) fn check_owner(
    tenant: domain::ids::TenantId,
    owner: &domain::ids::TenantId,
    entity: &'static str,
) -> Result<(), StoreError> {
    if *owner == tenant {
        Ok(())
    } else {
        Err(StoreError::not_found(entity))
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact_url("postgres://hookd:s3cret@db:5432/hookd"),
            "postgres://hookd:***@db:5432/hookd"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
        assert_eq!(
            redact_url("sqlite://data/hookd.db"),
            "sqlite://data/hookd.db"
        );
    }
}
