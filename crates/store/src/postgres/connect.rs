//! Opening a PostgreSQL pool.

use std::str::FromStr;

use sea_orm::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sea_orm::{DatabaseConnection, SqlxPostgresConnector};

use crate::connect::{ConnectOptions, STATEMENT_CACHE, cannot_connect, invalid_url};
use crate::error::StoreError;

/// The pool on `url`; sessions opened before a storage fault are retired (see `health`).
pub(crate) async fn open(
    url: &str,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<DatabaseConnection, StoreError> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| invalid_url(url, e))?
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
        .map_err(|e| cannot_connect(url, e))?;
    Ok(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
}
