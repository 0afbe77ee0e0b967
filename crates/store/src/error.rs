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
    /// From the SQLite hot path, which runs on rusqlite rather than sqlx (decisions 25).
    #[error("database error: {0}")]
    Lite(#[from] rusqlite::Error),
}

impl StoreError {
    pub fn not_found(entity: &'static str) -> Self {
        StoreError::NotFound { entity }
    }
}

/// Whether a database error is a unique-key violation, judged by the driver's error kind
/// (SQLSTATE 23505 on PostgreSQL, SQLITE_CONSTRAINT_UNIQUE/PRIMARYKEY on SQLite), never by
/// message text.
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
