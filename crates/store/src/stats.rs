//! Gauges for `/metrics`, read at scrape time: one statement of index-backed counts.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, TenantId};
use sea_orm::{ConnectionTrait, Statement, Value};

use crate::{Result, Store};

/// The queue and endpoint state across every tenant, as of one read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueGauges {
    /// Deliveries waiting for an attempt (due or not).
    pub pending: u64,
    /// Deliveries claimed by a dispatcher, their attempt in flight (on PostgreSQL with those
    /// handed off at ingest and still only journaled).
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
    /// The database's size on disk (SQLite: the file's pages, free ones included).
    pub database_bytes: u64,
    /// SQLite: bytes in free pages, reused by new rows before the file grows (PostgreSQL: 0).
    pub database_free_bytes: u64,
    /// Inbound events held ahead of a gap in their key's sequence, and how long the oldest
    /// has waited (zero when none is).
    pub inbound_held: u64,
    pub oldest_held_age: Duration,
}

/// Upper bounds (ms) of the attempt-latency buckets; the last bucket holds everything above.
/// Matches the migration's `lat_0` … `lat_11` columns.
pub const LATENCY_BOUNDS_MS: [i64; 11] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];
const BUCKETS: usize = LATENCY_BOUNDS_MS.len() + 1;
const MINUTE_MS: i64 = 60_000;

/// Attempts of one endpoint in one minute, as written with each batch of results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatCounts {
    /// Attempts that delivered.
    pub succeeded: i64,
    /// Failed attempts that will be retried.
    pub retried: i64,
    /// Failed attempts that ended their delivery as a dead letter.
    pub dead: i64,
    pub duration_ms_sum: i64,
    /// Attempts per latency bucket (see [`LATENCY_BOUNDS_MS`]).
    pub latency: [i64; BUCKETS],
}

impl StatCounts {
    pub fn attempts(&self) -> i64 {
        self.succeeded + self.retried + self.dead
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &StatCounts) {
        self.succeeded += other.succeeded;
        self.retried += other.retried;
        self.dead += other.dead;
        self.duration_ms_sum += other.duration_ms_sum;
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            *a += b;
        }
    }

    /// The latency below which `q` (0–1) of the attempts finished, as the upper bound of the
    /// bucket it falls in; `None` without attempts or when it falls in the open last bucket.
    pub fn latency_quantile_ms(&self, q: f64) -> Option<i64> {
        let total: i64 = self.latency.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as i64).max(1);
        let mut seen = 0;
        for (i, n) in self.latency.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return LATENCY_BOUNDS_MS.get(i).copied();
            }
        }
        None
    }

    /// Counts one attempt.
    pub fn count(&mut self, outcome: Outcome, duration_ms: i64) {
        match outcome {
            Outcome::Succeeded => self.succeeded += 1,
            Outcome::Retried => self.retried += 1,
            Outcome::Dead => self.dead += 1,
        }
        self.duration_ms_sum += duration_ms.max(0);
        let bucket = LATENCY_BOUNDS_MS
            .iter()
            .position(|b| duration_ms <= *b)
            .unwrap_or(BUCKETS - 1);
        self.latency[bucket] += 1;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Retried,
    Dead,
}

/// One bucket of a series: its start and what happened in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatPoint {
    pub start: Timestamp,
    pub counts: StatCounts,
}

/// (tenant, application, endpoint, minute): what one row of `attempt_stats` counts.
pub(crate) type StatKey = (TenantId, ApplicationId, EndpointId, i64);

/// Upserts adding per-minute counts, 40 keys per statement, in key order, for tests to write
/// rows on either database (the result writers write them with each batch of results).
#[cfg(test)]
pub(crate) fn stats_upserts(
    sql: &crate::dialect::Dialect,
    counts: &std::collections::BTreeMap<StatKey, StatCounts>,
) -> Vec<Statement> {
    let entries: Vec<_> = counts.iter().collect();
    entries
        .chunks(40)
        .map(|chunk| {
            let mut values: Vec<Value> = Vec::with_capacity(chunk.len() * STAT_COLUMNS);
            let mut rows = Vec::with_capacity(chunk.len());
            for (key, c) in chunk {
                rows.push(format!("({})", sql.params(values.len() + 1, STAT_COLUMNS)));
                values.extend(stat_row(key, c));
            }
            sql.statement(stat_upsert_sql(&rows.join(", ")), values)
        })
        .collect()
}

/// The upsert that adds per-minute counts to `attempt_stats`, with `rows` its `VALUES` list
/// (each row in [`stat_columns`]' order).
pub(crate) fn stat_upsert_sql(rows: &str) -> String {
    format!(
        "INSERT INTO attempt_stats ({}) VALUES {rows} {}",
        stat_columns().join(", "),
        stat_conflict()
    )
}

/// Columns of an `attempt_stats` row as written (see [`stat_row`]).
pub(crate) const STAT_COLUMNS: usize = 8 + BUCKETS;

/// `attempt_stats`' columns in the order of [`stat_row`]'s values.
pub(crate) fn stat_columns() -> Vec<String> {
    let mut cols: Vec<String> = [
        "tenant_id",
        "app_id",
        "endpoint_id",
        "minute",
        "succeeded",
        "retried",
        "dead",
        "duration_ms_sum",
    ]
    .map(String::from)
    .into();
    cols.extend((0..BUCKETS).map(|i| format!("lat_{i}")));
    cols
}

/// How a written row adds to the one already there for its endpoint and minute (an upsert's
/// tail, the same on both databases): every column after the key's adds up.
pub(crate) fn stat_conflict() -> String {
    let updates: Vec<String> = stat_columns()
        .iter()
        .skip(STAT_KEY_COLUMNS)
        .map(|c| format!("{c} = attempt_stats.{c} + excluded.{c}"))
        .collect();
    format!(
        "ON CONFLICT (endpoint_id, minute) DO UPDATE SET {}",
        updates.join(", ")
    )
}

/// The leading columns of [`stat_columns`] that name the row (tenant, application, endpoint,
/// minute); the rest are counts.
const STAT_KEY_COLUMNS: usize = 4;

/// One row's values, in [`stat_columns`]' order: the three ids, then numbers.
pub(crate) fn stat_row(key: &StatKey, c: &StatCounts) -> Vec<Value> {
    let (tenant, app, endpoint, minute) = key;
    let mut row = Vec::with_capacity(STAT_COLUMNS);
    row.extend([
        Value::from(*tenant),
        Value::from(*app),
        Value::from(*endpoint),
        Value::from(*minute),
        Value::from(c.succeeded),
        Value::from(c.retried),
        Value::from(c.dead),
        Value::from(c.duration_ms_sum),
    ]);
    row.extend(c.latency.iter().map(|n| Value::from(*n)));
    row
}

/// The minute an attempt that started at `at` is counted in.
pub(crate) fn minute_of(at: i64) -> i64 {
    at.div_euclid(MINUTE_MS) * MINUTE_MS
}

impl Store {
    /// Attempt counts of a tenant (or one of its endpoints) since `since`, summed into buckets
    /// of `bucket` (a whole number of minutes), oldest first; empty buckets are included.
    /// One query, served by the (tenant, minute) index.
    pub async fn attempt_series(
        &self,
        tenant: domain::ids::TenantId,
        endpoint_id: Option<EndpointId>,
        since: Timestamp,
        until: Timestamp,
        bucket: Duration,
    ) -> Result<Vec<StatPoint>> {
        let bucket_ms = (bucket.as_millis() as i64).max(MINUTE_MS) / MINUTE_MS * MINUTE_MS;
        let first = since.as_millis().div_euclid(bucket_ms) * bucket_ms;
        let lat_sums: Vec<String> = (0..BUCKETS)
            .map(|i| format!("CAST(SUM(lat_{i}) AS BIGINT) AS lat_{i}"))
            .collect();
        let p = self.sql.param;
        // A tenant's charts count its own applications' deliveries: the hidden application
        // of its operational webhooks is hookd's, not one it can open or act on.
        let endpoint_filter = if endpoint_id.is_some() {
            format!(" AND endpoint_id = {}", p(4))
        } else {
            format!(
                " AND app_id NOT IN (SELECT id FROM applications WHERE tenant_id = {} AND internal)",
                p(1)
            )
        };
        let sql = format!(
            "SELECT (minute - {first}) / {bucket_ms} AS b, \
               CAST(SUM(succeeded) AS BIGINT) AS succeeded, CAST(SUM(retried) AS BIGINT) AS retried, \
               CAST(SUM(dead) AS BIGINT) AS dead, CAST(SUM(duration_ms_sum) AS BIGINT) AS dsum, {} \
             FROM attempt_stats WHERE tenant_id = {} AND minute >= {} AND minute < {}{endpoint_filter} \
             GROUP BY (minute - {first}) / {bucket_ms}",
            lat_sums.join(", "),
            p(1),
            p(2),
            p(3),
        );
        let mut values: Vec<Value> = vec![tenant.into(), first.into(), until.as_millis().into()];
        if let Some(e) = endpoint_id {
            values.push(e.into());
        }
        let rows = self
            .db
            .query_all(Statement::from_sql_and_values(
                self.db.get_database_backend(),
                sql,
                values,
            ))
            .await?;
        let n = ((until.as_millis() - first) as f64 / bucket_ms as f64)
            .ceil()
            .max(0.0) as usize;
        let mut points: Vec<StatPoint> = (0..n)
            .map(|i| StatPoint {
                start: Timestamp::from_millis(first + i as i64 * bucket_ms),
                counts: StatCounts::default(),
            })
            .collect();
        // SUM over BIGINT is NUMERIC on PostgreSQL, hence the casts above.
        let get = |r: &sea_orm::QueryResult, col: &str| -> Result<i64> { Ok(r.try_get("", col)?) };
        for r in rows {
            let b = get(&r, "b")?;
            let Some(point) = usize::try_from(b).ok().and_then(|b| points.get_mut(b)) else {
                continue;
            };
            let mut c = StatCounts {
                succeeded: get(&r, "succeeded")?,
                retried: get(&r, "retried")?,
                dead: get(&r, "dead")?,
                duration_ms_sum: get(&r, "dsum")?,
                ..Default::default()
            };
            for i in 0..BUCKETS {
                c.latency[i] = get(&r, &format!("lat_{i}"))?;
            }
            point.counts.add(&c);
        }
        Ok(points)
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// The one statement behind [`crate::System::queue_gauges`].
pub(crate) fn gauges_sql(now_ms: i64) -> String {
    use domain::delivery::DeliveryState;
    use domain::email::EmailState;
    let (pending, sending, failed) = (
        DeliveryState::Pending.as_str(),
        DeliveryState::Sending.as_str(),
        DeliveryState::Failed.as_str(),
    );
    let outbox_pending = EmailState::Pending.as_str();
    let open = domain::breaker::BreakerPhase::Open.as_str();
    format!(
        "SELECT \
               (SELECT COUNT(*) FROM deliveries WHERE state = '{pending}') AS pending, \
               (SELECT COUNT(*) FROM deliveries_seen WHERE state = '{sending}') AS sending, \
               (SELECT COUNT(*) FROM deliveries WHERE state = '{failed}') AS dead, \
               (SELECT MIN(next_attempt_at) FROM deliveries \
                  WHERE state = '{pending}' AND next_attempt_at <= {now_ms}) AS oldest_due, \
               (SELECT COUNT(*) FROM endpoints WHERE breaker_state = '{open}') AS open_breakers, \
               (SELECT COUNT(*) FROM endpoints WHERE disabled) AS disabled, \
               (SELECT COUNT(*) FROM email_outbox WHERE state = '{outbox_pending}') AS outbox, \
               (SELECT COUNT(*) FROM inbound_held) AS held, \
               (SELECT MIN(held_at) FROM inbound_held) AS oldest_held"
    )
}

/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Reads [`QueueGauges`] in one statement; every count is served by an index on `state`
    /// except the two over endpoints, which are small.
    pub async fn queue_gauges(&self, now: Timestamp) -> Result<QueueGauges> {
        let sql = gauges_sql(now.as_millis());
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
        let oldest_held = row.try_get::<Option<i64>>("", "oldest_held")?;
        let size_sql = self.sql.database_size;
        let size = self
            .db
            .query_one(Statement::from_string(backend, size_sql))
            .await?;
        let bytes = |col: &str| -> Result<u64> {
            Ok(match &size {
                Some(r) => u64::try_from(r.try_get::<i64>("", col)?).unwrap_or(0),
                None => 0,
            })
        };
        Ok(QueueGauges {
            database_bytes: bytes("total")?,
            database_free_bytes: bytes("free")?,
            pending: count("pending")?,
            sending: count("sending")?,
            dead_letters: count("dead")?,
            oldest_due_age: oldest_due
                .map(|at| now.since(Timestamp::from_millis(at)))
                .unwrap_or_default(),
            open_breakers: count("open_breakers")?,
            disabled_endpoints: count("disabled")?,
            email_outbox_pending: count("outbox")?,
            inbound_held: count("held")?,
            oldest_held_age: oldest_held
                .map(|at| now.since(Timestamp::from_millis(at)))
                .unwrap_or_default(),
        })
    }

    /// Deletes per-minute statistics older than `before` (retention); returns how many rows.
    pub async fn prune_attempt_stats(&self, before: Timestamp) -> Result<u64> {
        let _turn = self.write_turn().await;
        let sql = self.sql.prune_attempt_stats;
        let res = self
            .db
            .execute(Statement::from_sql_and_values(
                self.db.get_database_backend(),
                sql,
                [Value::from(before.as_millis())],
            ))
            .await?;
        Ok(res.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestDb;
    use std::collections::BTreeMap;

    #[tokio::test]
    async fn attempt_counts_add_up_per_minute_and_sum_into_buckets() {
        let tenant = domain::ids::TenantId::new();
        let t = tenant;
        use crate::testing::named;
        let base = 1_700_000_400_000_i64; // a multiple of 10 minutes
        let mut one = BTreeMap::new();
        let mut c = StatCounts::default();
        c.count(Outcome::Succeeded, 3);
        c.count(Outcome::Succeeded, 40);
        c.count(Outcome::Retried, 20_000);
        one.insert((t, named("app_a"), named("ep_a"), base), c);
        let mut d = StatCounts::default();
        d.count(Outcome::Dead, 70);
        one.insert((t, named("app_a"), named("ep_b"), base + 11 * MINUTE_MS), d);
        for db in TestDb::all().await {
            let store = &db.store;
            // Written twice: the second batch adds to the same rows.
            for _ in 0..2 {
                for stmt in stats_upserts(store.sql, &one) {
                    store.connection().execute(stmt).await.unwrap();
                }
            }
            let series = store
                .attempt_series(
                    tenant,
                    None,
                    Timestamp::from_millis(base + 5 * MINUTE_MS),
                    Timestamp::from_millis(base + 30 * MINUTE_MS),
                    Duration::from_secs(600),
                )
                .await
                .unwrap();
            let starts: Vec<i64> = series.iter().map(|p| p.start.as_millis()).collect();
            assert_eq!(
                starts,
                vec![base, base + 10 * MINUTE_MS, base + 20 * MINUTE_MS],
                "{}",
                db.backend_name
            );
            let first = &series[0].counts;
            assert_eq!((first.succeeded, first.retried, first.dead), (4, 2, 0));
            assert_eq!(first.duration_ms_sum, 2 * (3 + 40 + 20_000));
            assert_eq!(first.latency_quantile_ms(0.5), Some(50));
            assert_eq!(
                first.latency_quantile_ms(0.95),
                None,
                "above the last bound"
            );
            assert_eq!((series[1].counts.dead, series[1].counts.attempts()), (2, 2));
            assert_eq!(series[2].counts, StatCounts::default());
            let only_b = store
                .attempt_series(
                    tenant,
                    Some(named("ep_b")),
                    Timestamp::from_millis(base),
                    Timestamp::from_millis(base + 20 * MINUTE_MS),
                    Duration::from_secs(600),
                )
                .await
                .unwrap();
            let total: i64 = only_b.iter().map(|p| p.counts.attempts()).sum();
            assert_eq!(total, 2, "{}", db.backend_name);
            let other = store
                .attempt_series(
                    domain::ids::TenantId::new(),
                    None,
                    Timestamp::from_millis(base),
                    Timestamp::from_millis(base + 20 * MINUTE_MS),
                    Duration::from_secs(600),
                )
                .await
                .unwrap();
            assert!(
                other.iter().all(|p| p.counts.attempts() == 0),
                "tenant isolation"
            );
            assert_eq!(
                store
                    .system()
                    .prune_attempt_stats(Timestamp::from_millis(base + MINUTE_MS))
                    .await
                    .unwrap(),
                1
            );
        }
    }

    #[tokio::test]
    async fn each_chart_bucket_size_counts_a_minute_at_its_edge_in_the_bucket_it_starts() {
        use crate::testing::named;
        // A multiple of an hour, so every bucket size below has an edge there.
        let base = 1_700_002_800_000_i64;
        assert_eq!(base % (60 * MINUTE_MS), 0);
        for db in TestDb::all().await {
            let store = &db.store;
            // The dashboard's chart ranges: an hour of minutes, a day of 10 minutes, a week
            // of hours.
            for (bucket_min, window_min, max_points) in [
                (1_i64, 60_i64, 61_usize),
                (10, 24 * 60, 145),
                (60, 7 * 24 * 60, 169),
            ] {
                let bucket = bucket_min * MINUTE_MS;
                let t = domain::ids::TenantId::new();
                // One attempt on the edge, one in the bucket's last minute, one on the next edge.
                let mut rows = BTreeMap::new();
                for (minute, outcome) in [
                    (base, Outcome::Succeeded),
                    (base + bucket - MINUTE_MS, Outcome::Retried),
                    (base + bucket, Outcome::Dead),
                ] {
                    // With one-minute buckets the last minute is the edge: both count there.
                    // An endpoint per bucket size: rows are keyed by endpoint and minute.
                    let ep = format!("ep_{bucket_min}");
                    rows.entry((t, named("app_a"), named(&ep), minute))
                        .or_insert_with(StatCounts::default)
                        .count(outcome, 5);
                }
                for stmt in stats_upserts(store.sql, &rows) {
                    store.connection().execute(stmt).await.unwrap();
                }
                // A window ending mid-bucket, as "now" does: never more than the bound.
                let until = base + bucket + 30_000;
                let since = until - window_min * MINUTE_MS;
                let series = store
                    .attempt_series(
                        t,
                        None,
                        Timestamp::from_millis(since),
                        Timestamp::from_millis(until),
                        Duration::from_millis(bucket as u64),
                    )
                    .await
                    .unwrap();
                let name = format!("{} bucket {bucket_min} min", db.backend_name);
                assert!(series.len() <= max_points, "{name}: {}", series.len());
                let at = |start: i64| {
                    series
                        .iter()
                        .find(|p| p.start.as_millis() == start)
                        .map(|p| (p.counts.succeeded, p.counts.retried, p.counts.dead))
                };
                assert_eq!(at(base), Some((1, 1, 0)), "{name}");
                assert_eq!(at(base + bucket), Some((0, 0, 1)), "{name}");
                let total: i64 = series.iter().map(|p| p.counts.attempts()).sum();
                assert_eq!(total, 3, "{name}");
            }
        }
    }

    #[tokio::test]
    async fn an_empty_database_reads_all_zero() {
        for db in TestDb::all().await {
            let g = db
                .store
                .system()
                .queue_gauges(Timestamp::now())
                .await
                .unwrap();
            // Everything counted is zero; the database itself still has a size.
            assert_eq!(
                g,
                QueueGauges {
                    database_bytes: g.database_bytes,
                    database_free_bytes: g.database_free_bytes,
                    ..QueueGauges::default()
                },
                "{}",
                db.backend_name
            );
            assert!(g.database_bytes > 0, "{}", db.backend_name);
        }
    }
}
