//! Gauges for `/metrics`, read at scrape time: one statement of index-backed counts.

use std::time::Duration;

use domain::Timestamp;
use sea_orm::{ConnectionTrait, Statement};

use crate::{Result, Store};

/// The queue and endpoint state across every tenant, as of one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueGauges {
    /// Deliveries waiting for an attempt (due or not).
    pub pending: u64,
    /// Deliveries claimed by a dispatcher, their attempt in flight.
    pub sending: u64,
    /// Dead letters: deliveries that failed for good.
    pub dead_letters: u64,
    /// How long the longest-waiting due delivery has been due; zero when none is.
    pub oldest_due_age: Duration,
    /// Endpoints whose circuit breaker is open.
    pub open_breakers: u64,
    pub disabled_endpoints: u64,
    /// Emails not yet sent.
    pub email_outbox_pending: u64,
}

impl Store {
    /// Reads [`QueueGauges`] in one statement; every count is served by an index on `state`
    /// except the two over endpoints, which are small.
    pub async fn queue_gauges(&self, now: Timestamp) -> Result<QueueGauges> {
        let now_ms = now.as_millis();
        let sql = format!(
            "SELECT \
               (SELECT COUNT(*) FROM deliveries WHERE state = 'pending') AS pending, \
               (SELECT COUNT(*) FROM deliveries WHERE state = 'sending') AS sending, \
               (SELECT COUNT(*) FROM deliveries WHERE state = 'failed') AS dead, \
               (SELECT MIN(next_attempt_at) FROM deliveries \
                  WHERE state = 'pending' AND next_attempt_at <= {now_ms}) AS oldest_due, \
               (SELECT COUNT(*) FROM endpoints WHERE breaker_state = 'open') AS open_breakers, \
               (SELECT COUNT(*) FROM endpoints WHERE disabled) AS disabled, \
               (SELECT COUNT(*) FROM email_outbox WHERE state = 'pending') AS outbox"
        );
        let backend = self.db.get_database_backend();
        let Some(row) = self
            .db
            .query_one(Statement::from_string(backend, sql))
            .await?
        else {
            return Ok(QueueGauges::default());
        };
        let count = |col: &str| -> Result<u64> {
            Ok(u64::try_from(row.try_get::<i64>("", col)?).unwrap_or(0))
        };
        let oldest_due = row.try_get::<Option<i64>>("", "oldest_due")?;
        Ok(QueueGauges {
            pending: count("pending")?,
            sending: count("sending")?,
            dead_letters: count("dead")?,
            oldest_due_age: oldest_due
                .map(|at| now.since(Timestamp::from_millis(at)))
                .unwrap_or_default(),
            open_breakers: count("open_breakers")?,
            disabled_endpoints: count("disabled")?,
            email_outbox_pending: count("outbox")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDb;

    #[tokio::test]
    async fn an_empty_database_reads_all_zero() {
        for db in TestDb::all().await {
            let g = db.store.queue_gauges(Timestamp::now()).await.unwrap();
            assert_eq!(g, QueueGauges::default(), "{}", db.backend_name);
        }
    }
}
