//! Wall-clock time as milliseconds since the Unix epoch, and the `Clock` port.
//!
//! Storage keeps times as integer milliseconds (see docs/decisions.md), so the domain uses the
//! same representation: cheap to compare, identical on SQLite and PostgreSQL.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// A point in time, in whole milliseconds since 1970-01-01T00:00:00Z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const EPOCH: Timestamp = Timestamp(0);

    pub const fn from_millis(ms: i64) -> Self {
        Timestamp(ms)
    }

    pub const fn from_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds, rounded down (the unit of `webhook-timestamp`).
    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    /// The current system time.
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    pub fn from_system_time(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Timestamp(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(e) => Timestamp(-i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX)),
        }
    }

    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_millis(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_millis(self.0.unsigned_abs())
        }
    }

    /// `self + d`, saturating at the end of representable time.
    pub fn plus(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// How long after `earlier` this is; zero if it is not after it.
    pub fn since(self, earlier: Timestamp) -> Duration {
        let diff = self.0.saturating_sub(earlier.0);
        Duration::from_millis(u64::try_from(diff).unwrap_or(0))
    }
}

/// The source of "now". Production uses [`SystemClock`]; tests use [`ManualClock`].
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that only moves when told to, for exact tests of time-driven rules.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(start: Timestamp) -> Self {
        ManualClock(AtomicI64::new(start.as_millis()))
    }

    pub fn set(&self, t: Timestamp) {
        self.0.store(t.as_millis(), Ordering::SeqCst);
    }

    pub fn advance(&self, d: Duration) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_time_round_trips() {
        let t = Timestamp::from_millis(1_614_265_330_123);
        assert_eq!(Timestamp::from_system_time(t.to_system_time()), t);
        assert_eq!(t.as_secs(), 1_614_265_330);
    }

    #[test]
    fn since_is_never_negative() {
        let a = Timestamp::from_secs(10);
        let b = Timestamp::from_secs(20);
        assert_eq!(b.since(a), Duration::from_secs(10));
        assert_eq!(a.since(b), Duration::ZERO);
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::from_secs(100));
        assert_eq!(c.now(), Timestamp::from_secs(100));
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.now(), Timestamp::from_millis(101_500));
    }
}

/// RFC 3339 text in UTC with millisecond precision, the form the API speaks.
pub mod rfc3339 {
    use super::Timestamp;
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("invalid date-time {0:?}: expected RFC 3339, e.g. 2024-05-01T12:00:00Z")]
    pub struct ParseError(pub String);

    /// `2024-05-01T12:00:00.123Z`.
    pub fn format(t: Timestamp) -> String {
        let nanos = i128::from(t.as_millis()) * 1_000_000;
        match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
            Ok(dt) => format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                dt.year(),
                u8::from(dt.month()),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.millisecond()
            ),
            // Outside years -9999..=9999; never produced by hookd's own clocks.
            Err(_) => "1970-01-01T00:00:00.000Z".to_owned(),
        }
    }

    /// Accepts any RFC 3339 date-time with an offset; sub-millisecond digits are dropped.
    pub fn parse(s: &str) -> Result<Timestamp, ParseError> {
        let dt = OffsetDateTime::parse(s.trim(), &Rfc3339).map_err(|_| ParseError(s.to_owned()))?;
        let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
        i64::try_from(ms)
            .map(Timestamp::from_millis)
            .map_err(|_| ParseError(s.to_owned()))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn formats_utc_with_milliseconds() {
            assert_eq!(
                format(Timestamp::from_millis(0)),
                "1970-01-01T00:00:00.000Z"
            );
            assert_eq!(
                format(Timestamp::from_millis(1_614_265_330_123)),
                "2021-02-25T15:02:10.123Z"
            );
        }

        #[test]
        fn parses_offsets_and_fractions() {
            let t = Timestamp::from_millis(1_614_265_330_123);
            assert_eq!(parse("2021-02-25T15:02:10.123Z"), Ok(t));
            assert_eq!(parse("2021-02-25T16:02:10.123456+01:00"), Ok(t));
            assert_eq!(parse(&format(t)), Ok(t));
            for bad in [
                "",
                "yesterday",
                "2021-02-25",
                "2021-02-25T15:02:10",
                "2021-13-01T00:00:00Z",
            ] {
                assert!(parse(bad).is_err(), "{bad:?}");
            }
        }
    }
}
