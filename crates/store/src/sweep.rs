//! Deleting what has outlived its use, in bounded batches through indexes, yielding between
//! batches so nothing else waits long for the database: idempotency records past their 24 h
//! (each holds a full copy of a response, i.e. of a payload), expired dashboard sessions and
//! unconfirmed sign-ups, expired and revoked portal tokens, and, past their horizons, operational events, sent or failed emails
//! and finished background jobs (those three by id: ids start with their creation time).

use domain::Timestamp;
use domain::email::EmailState;
use domain::ids::{EmailId, JobId, OperationalEventId};
use domain::jobs::JobState;
use sea_orm::sea_query::Value;
use sea_orm::{ConnectionTrait, Statement};

use crate::{Result, Store};

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
    pub events: u64,
    pub emails: u64,
    pub jobs: u64,
    /// Inbound ordering keys idle past the metadata horizon, none of their events held.
    pub inbound_keys: u64,
    /// Digests of signed inbound requests whose replay window ended.
    pub inbound_signed: u64,
    /// Portal tokens past their expiry (a revoked token expires when revoked).
    pub portal_tokens: u64,
}

/// Creation times before which the history tables' rows go (see [`crate::System::sweep_expired`]).
#[derive(Clone, Copy, Debug)]
pub struct Horizons {
    /// Idempotency records created before this.
    pub idempotency: Timestamp,
    /// Operational events, and inbound ordering keys last used before this (a key's next
    /// sequence is kept as long as the events that set it).
    pub events: Timestamp,
    /// Emails sent or failed for good, and finished or failed background jobs.
    pub done: Timestamp,
}

impl Store {
    async fn delete_in_batches(&self, sql: &str, before: impl Into<Value>) -> Result<u64> {
        let before = before.into();
        let mut total = 0;
        for _ in 0..MAX_BATCHES {
            let n = {
                let _turn = self.write_turn().await;
                self.db
                    .execute(Statement::from_sql_and_values(
                        self.db.get_database_backend(),
                        sql,
                        [before.clone()],
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
    /// Deletes idempotency records, operational events, emails and jobs older than their
    /// horizons, and sessions, sign-ups and inbound digests that expired before `now`. Emails still to be sent
    /// and jobs still running stay whatever their age.
    pub async fn sweep_expired(&self, horizons: Horizons, now: Timestamp) -> Result<Swept> {
        let p = (self.sql.param)(1);
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
        let portal_tokens = format!(
            "DELETE FROM portal_tokens WHERE id IN ( \
               SELECT id FROM portal_tokens WHERE expires_at < {p} LIMIT {SWEEP_BATCH})"
        );
        let by_id = |table: &str, keep: Option<&str>| {
            let keep = keep
                .map(|k| format!(" AND state <> '{k}'"))
                .unwrap_or_default();
            format!(
                "DELETE FROM {table} WHERE id IN ( \
                   SELECT id FROM {table} WHERE id < {p}{keep} LIMIT {SWEEP_BATCH})"
            )
        };
        let events = by_id("operational_events", None);
        let keys = format!(
            "DELETE FROM inbound_keys WHERE (source_id, ordering_key) IN ( \
               SELECT k.source_id, k.ordering_key FROM inbound_keys k WHERE k.touched_at < {p} \
               AND NOT EXISTS (SELECT 1 FROM inbound_held h \
                 WHERE h.source_id = k.source_id AND h.ordering_key = k.ordering_key) \
               LIMIT {SWEEP_BATCH})"
        );
        let signed = format!(
            "DELETE FROM inbound_signed WHERE (source_id, digest) IN ( \
               SELECT source_id, digest FROM inbound_signed WHERE expires_at < {p} \
               LIMIT {SWEEP_BATCH})"
        );
        let emails = by_id("email_outbox", Some(EmailState::Pending.as_str()));
        let jobs = by_id("jobs", Some(JobState::Running.as_str()));
        Ok(Swept {
            idempotency_keys: self
                .delete_in_batches(&idempotency, horizons.idempotency.as_millis())
                .await?,
            sessions: self.delete_in_batches(&sessions, now.as_millis()).await?,
            pending_signups: self.delete_in_batches(&signups, now.as_millis()).await?,
            events: self
                .delete_in_batches(&events, OperationalEventId::lower_bound(horizons.events))
                .await?,
            emails: self
                .delete_in_batches(&emails, EmailId::lower_bound(horizons.done))
                .await?,
            jobs: self
                .delete_in_batches(&jobs, JobId::lower_bound(horizons.done))
                .await?,
            inbound_keys: self
                .delete_in_batches(&keys, horizons.events.as_millis())
                .await?,
            inbound_signed: self.delete_in_batches(&signed, now.as_millis()).await?,
            portal_tokens: self
                .delete_in_batches(&portal_tokens, now.as_millis())
                .await?,
        })
    }
}

impl crate::System<'_> {
    /// Deletes the refused inbound requests recorded before `before` (their ids start with
    /// that time), in bounded batches.
    pub async fn prune_refusals(&self, before: Timestamp) -> Result<u64> {
        let p = (self.sql.param)(1);
        let sql = format!(
            "DELETE FROM inbound_refusals WHERE id IN ( \
               SELECT id FROM inbound_refusals WHERE id < {p} LIMIT {SWEEP_BATCH})"
        );
        self.delete_in_batches(&sql, domain::ids::RefusalId::lower_bound(before))
            .await
    }
}
