//! Opening a PostgreSQL pool.

use std::str::FromStr;

use sea_orm::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sea_orm::{DatabaseConnection, SqlxPostgresConnector};

use crate::connect::{ConnectOptions, STATEMENT_CACHE, cannot_connect, invalid_url};
use crate::error::StoreError;

/// How long a pooled session may sit idle before it is pinged on its way out of the pool.
const PING_AFTER_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// The pool on `url`; sessions opened before a storage fault are retired (see `health`).
pub(crate) async fn open(
    url: &str,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<DatabaseConnection, StoreError> {
    let (pool, options) = pool_of(url, opts.max_connections, opts, health)?;
    let pool = pool
        .connect_with(options)
        .await
        .map_err(|e| cannot_connect(url, e))?;
    Ok(SqlxPostgresConnector::from_sqlx_postgres_pool(pool))
}

/// A pool of at most `sessions` on `url`, like [`open`]'s, that opens none until it is used:
/// each session belongs to the runtime of the task that opened it, which is the one woken when
/// its answer arrives. The message writer's own (see `ingest::spawn_writer`), made inside its
/// runtime. `url` was opened once already by [`open`].
pub(crate) fn open_lazy(
    url: &str,
    sessions: u32,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<DatabaseConnection, StoreError> {
    let (pool, options) = pool_of(url, sessions, opts, health)?;
    Ok(SqlxPostgresConnector::from_sqlx_postgres_pool(
        pool.connect_lazy_with(options),
    ))
}

/// The pool's rules and the sessions' settings, shared by [`open`] and [`open_lazy`].
fn pool_of(
    url: &str,
    sessions: u32,
    opts: &ConnectOptions,
    health: &crate::StorageHealth,
) -> Result<(PgPoolOptions, PgConnectOptions), StoreError> {
    let options = PgConnectOptions::from_str(url)
        .map_err(|e| invalid_url(url, e))?
        .statement_cache_capacity(STATEMENT_CACHE)
        // No JIT compilation (decisions 115): hookd's statements are short, and a reader of
        // `deliveries_seen` estimated at millions (a `handoffs` table full of dead rows, with
        // autovacuum off) was compiled for 320 ms to run for 20.
        .options([("jit", "off")]);
    let health = health.clone();
    let pool = PgPoolOptions::new()
        // A session opened before the last storage fault may be the read-only one, or
        // one to a server that shut down or failed over: it is closed, not reused
        // (see `health`), so a lifted read-only setting or a new primary takes effect
        // within a probe interval instead of the connection lifetime.
        //
        // sqlx would also ping every connection before handing it out: one more round trip
        // per statement, 9 % of the api process's CPU (`perf`, `scripts/pg-cost`). Only a
        // connection that sat idle long enough for a server, proxy or firewall to have
        // dropped it is asked; one that fails is closed and another taken. A connection in
        // steady use that dies fails its statement, which notes the fault and retires every
        // older session (see `health`), as a statement in flight always could.
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let stale = health.is_stale(meta.age);
            Box::pin(async move {
                if stale {
                    return Ok(false);
                }
                if meta.idle_for >= PING_AFTER_IDLE {
                    sea_orm::sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .max_connections(sessions)
        .acquire_timeout(opts.acquire_timeout);
    Ok((pool, options))
}

#[cfg(test)]
mod tests {
    use sea_orm::ConnectionTrait;

    use crate::testing::TestDb;

    /// Every pooled session runs without JIT compilation (decisions 115).
    #[tokio::test]
    async fn sessions_run_without_jit() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            let row = db
                .store
                .connection()
                .query_one(sea_orm::Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    "SELECT current_setting('jit') AS jit",
                ))
                .await
                .unwrap()
                .unwrap();
            assert_eq!(row.try_get::<String>("", "jit").unwrap(), "off");
        }
    }

    /// Sessions the server dropped while they sat idle in the pool (a restart, an idle
    /// timeout of a proxy) are found out by the ping on their way out and replaced: the next
    /// statements succeed, none fails for having drawn a dead session.
    #[tokio::test]
    async fn sessions_dropped_while_idle_are_replaced_not_handed_out() {
        for db in TestDb::all().await {
            if db.backend_name != "postgres" {
                continue;
            }
            // Both of the pool's sessions open and back in the pool.
            let (a, b) = tokio::join!(db.store.ping(), db.store.ping());
            a.unwrap();
            b.unwrap();
            // Another session on the same database ends the pool's.
            let other = sea_orm::Database::connect(db.url.as_str()).await.unwrap();
            let dropped = other
                .query_all(sea_orm::Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                ))
                .await
                .unwrap();
            assert!(!dropped.is_empty(), "no session of the test database found");
            tokio::time::sleep(super::PING_AFTER_IDLE + std::time::Duration::from_millis(200))
                .await;
            for _ in 0..4 {
                db.store
                    .ping()
                    .await
                    .expect("a statement after the sessions were dropped");
            }
            other.close().await.ok();
        }
    }
}
