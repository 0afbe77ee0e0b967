//! Deleting what has outlived its use, in bounded batches through indexes, yielding between
//! batches so nothing else waits long for the database: idempotency records past their 24 h
//! (each holds a full copy of a response, i.e. of a payload), expired dashboard sessions and
//! unconfirmed sign-ups.

use domain::Timestamp;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, Statement};

use crate::{Backend, Result, Store};

/// Rows deleted per statement.
pub const SWEEP_BATCH: u64 = 1000;
/// Most batches per table and call; what is left waits for the next call.
const MAX_BATCHES: u64 = 200;

/// What one sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub idempotency_keys: u64,
    pub sessions: u64,
    pub pending_signups: u64,
}

impl Store {
    async fn delete_in_batches(&self, sql: &str, before: Timestamp) -> Result<u64> {
        let mut total = 0;
        for _ in 0..MAX_BATCHES {
            let n = {
                let _turn = self.write_turn().await;
                self.db
                    .execute(Statement::from_sql_and_values(
                        self.db.get_database_backend(),
                        sql,
                        [Value::from(before.as_millis())],
                    ))
                    .await?
                    .rows_affected()
            };
            total += n;
            if n < SWEEP_BATCH {
                break;
            }
            // Let the hot path have the writer between batches.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Ok(total)
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Deletes idempotency records created before `idempotency_before` and sessions that
    /// expired before `now`.
    pub async fn sweep_expired(
        &self,
        idempotency_before: Timestamp,
        now: Timestamp,
    ) -> Result<Swept> {
        let p = match self.backend {
            Backend::Sqlite => "?1",
            Backend::Postgres => "$1",
        };
        let idempotency = format!(
            "DELETE FROM idempotency_keys WHERE (tenant_id, key) IN ( \
               SELECT tenant_id, key FROM idempotency_keys WHERE created_at < {p} LIMIT {SWEEP_BATCH})"
        );
        let sessions = format!(
            "DELETE FROM sessions WHERE id IN ( \
               SELECT id FROM sessions WHERE expires_at < {p} LIMIT {SWEEP_BATCH})"
        );
        let signups = format!(
            "DELETE FROM pending_signups WHERE token_hash IN ( \
               SELECT token_hash FROM pending_signups WHERE expires_at < {p} LIMIT {SWEEP_BATCH})"
        );
        Ok(Swept {
            idempotency_keys: self
                .delete_in_batches(&idempotency, idempotency_before)
                .await?,
            sessions: self.delete_in_batches(&sessions, now).await?,
            pending_signups: self.delete_in_batches(&signups, now).await?,
        })
    }
}
