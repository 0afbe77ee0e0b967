//! Per-endpoint circuit breaker: stop hammering an endpoint that is failing, probe it now and
//! then, resume when it answers.
//!
//! Pure data plus transitions, so the store can persist it on the endpoint row and every
//! dispatcher node sees the same state. Failure counting uses a fixed (tumbling) window: two
//! counters and a start time persist easily, where a sliding window would need a log.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// When to trip and how long to stay open; operator settings, shared by all endpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BreakerConfig {
    /// Trip after this many failures in a row, whatever the window says (catches a dead
    /// endpoint quickly even at low traffic).
    pub consecutive_failures: u32,
    /// Trip when failures / attempts in the window reach this (0 < ratio ≤ 1)…
    pub failure_ratio: f64,
    pub window: Duration,
    /// …once the window holds at least this many attempts, so two unlucky requests do not trip.
    pub min_requests: u32,
    /// How long an open breaker defers deliveries before letting one probe through. Also the
    /// lease of a probe: if its result never arrives (worker died), another probe is allowed.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            consecutive_failures: 5,
            failure_ratio: 0.5,
            window: Duration::from_secs(60),
            min_requests: 10,
            open_for: Duration::from_secs(30),
        }
    }
}

/// Why a breaker configuration was refused; names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BreakerConfigError {
    #[error("breaker consecutive_failures must be at least 1")]
    ConsecutiveFailures,
    #[error("breaker failure_ratio must be greater than 0 and at most 1")]
    FailureRatio,
    #[error("breaker window must be greater than zero")]
    Window,
    #[error("breaker min_requests must be at least 1")]
    MinRequests,
    #[error("breaker open_for must be greater than zero")]
    OpenFor,
}

impl BreakerConfig {
    /// Checked at start-up, so a bad setting fails loudly instead of never (or always) tripping.
    pub fn validate(&self) -> Result<(), BreakerConfigError> {
        if self.consecutive_failures == 0 {
            return Err(BreakerConfigError::ConsecutiveFailures);
        }
        if !(self.failure_ratio > 0.0 && self.failure_ratio <= 1.0) {
            return Err(BreakerConfigError::FailureRatio);
        }
        if self.window.is_zero() {
            return Err(BreakerConfigError::Window);
        }
        if self.min_requests == 0 {
            return Err(BreakerConfigError::MinRequests);
        }
        if self.open_for.as_millis() == 0 {
            return Err(BreakerConfigError::OpenFor);
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum BreakerState {
    #[default]
    Closed,
    Open {
        until: Timestamp,
    },
    HalfOpen,
}

impl BreakerState {
    /// The stored/displayed name (`closed`, `open`, `half_open`).
    pub const fn as_str(self) -> &'static str {
        self.phase().as_str()
    }

    /// The state without its data: what the `breaker_state` column holds.
    pub const fn phase(self) -> BreakerPhase {
        match self {
            BreakerState::Closed => BreakerPhase::Closed,
            BreakerState::Open { .. } => BreakerPhase::Open,
            BreakerState::HalfOpen => BreakerPhase::HalfOpen,
        }
    }
}

/// A breaker's state without its data, as stored (the reopening time is a column apart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
pub enum BreakerPhase {
    #[default]
    Closed,
    Open,
    HalfOpen,
}

crate::delivery::text_enum!(BreakerPhase { Closed => "closed", Open => "open", HalfOpen => "half_open" });

/// How soon a delivery held back by a half-open breaker's probe is looked at again.
pub const PROBE_RECHECK: Duration = Duration::from_secs(1);

/// Whether a delivery may go out now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    Allow,
    /// Allowed as the single trial request of a half-open breaker; its result decides.
    Probe,
    /// Not now: reschedule for `until`. A deferral is not an attempt.
    Defer {
        until: Timestamp,
    },
}

/// One endpoint's breaker: its state and the counters of the current window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Breaker {
    pub state: BreakerState,
    pub window_start: Timestamp,
    pub successes: u32,
    pub failures: u32,
    pub consecutive_failures: u32,
    /// When the half-open probe went out; `None` when no probe is in flight.
    pub probe_started_at: Option<Timestamp>,
}

impl Breaker {
    /// A closed breaker whose first window starts at `now`.
    pub fn new(now: Timestamp) -> Self {
        Breaker {
            state: BreakerState::Closed,
            window_start: now,
            successes: 0,
            failures: 0,
            consecutive_failures: 0,
            probe_started_at: None,
        }
    }

    /// The breaker as another process left it: the state stored on the endpoint. An open one
    /// stays open until its stored time; a half-open one sends its probe at once (its earlier
    /// probe's answer went to a process that no longer holds the endpoint).
    pub fn resumed(phase: BreakerPhase, until: Option<Timestamp>, now: Timestamp) -> Self {
        let mut b = Breaker::new(now);
        b.state = match (phase, until) {
            (BreakerPhase::Open, Some(until)) => BreakerState::Open { until },
            (BreakerPhase::Open, None) | (BreakerPhase::HalfOpen, _) => {
                BreakerState::Open { until: now }
            }
            (BreakerPhase::Closed, _) => BreakerState::Closed,
        };
        b
    }

    /// Asks to send one delivery. Moves open → half-open once `open_for` has passed.
    pub fn allow(&mut self, config: &BreakerConfig, now: Timestamp) -> Admission {
        match self.state {
            BreakerState::Closed => {
                self.roll_window(config, now);
                Admission::Allow
            }
            BreakerState::Open { until } if now < until => Admission::Defer { until },
            BreakerState::Open { .. } => {
                self.state = BreakerState::HalfOpen;
                self.start_probe(now)
            }
            BreakerState::HalfOpen => match self.probe_started_at {
                // Look again soon: a probe usually answers in milliseconds, and deferring the
                // backlog for the probe's whole lease would hold a recovered endpoint idle.
                Some(started) if now < started.plus(config.open_for) => Admission::Defer {
                    until: started.plus(config.open_for).min(now.plus(PROBE_RECHECK)),
                },
                // No probe out, or its lease ran out (its worker died): send another.
                _ => self.start_probe(now),
            },
        }
    }

    /// A delivery reached the endpoint and got a 2xx. A probe's success closes the breaker.
    pub fn on_success(&mut self, config: &BreakerConfig, now: Timestamp) {
        match self.state {
            BreakerState::Closed => {
                self.roll_window(config, now);
                self.successes = self.successes.saturating_add(1);
                self.consecutive_failures = 0;
            }
            BreakerState::HalfOpen => self.reset(BreakerState::Closed, now),
            // A late result of a request admitted before the breaker opened: the probe decides.
            BreakerState::Open { .. } => {}
        }
    }

    /// A delivery failed in a way that counts against the endpoint (a retryable outcome).
    pub fn on_failure(&mut self, config: &BreakerConfig, now: Timestamp) {
        match self.state {
            BreakerState::Closed => {
                self.roll_window(config, now);
                self.failures = self.failures.saturating_add(1);
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                if self.should_trip(config) {
                    self.trip(config, now);
                }
            }
            BreakerState::HalfOpen => self.trip(config, now),
            BreakerState::Open { .. } => {}
        }
    }

    fn should_trip(&self, config: &BreakerConfig) -> bool {
        if self.consecutive_failures >= config.consecutive_failures {
            return true;
        }
        let total = u64::from(self.successes) + u64::from(self.failures);
        total >= u64::from(config.min_requests)
            && self.failures as f64 >= config.failure_ratio * total as f64
    }

    fn trip(&mut self, config: &BreakerConfig, now: Timestamp) {
        self.reset(
            BreakerState::Open {
                until: now.plus(config.open_for),
            },
            now,
        );
    }

    fn start_probe(&mut self, now: Timestamp) -> Admission {
        self.probe_started_at = Some(now);
        Admission::Probe
    }

    fn reset(&mut self, state: BreakerState, now: Timestamp) {
        *self = Breaker {
            state,
            ..Breaker::new(now)
        };
    }

    fn roll_window(&mut self, config: &BreakerConfig, now: Timestamp) {
        if now.since(self.window_start) >= config.window {
            self.window_start = now;
            self.successes = 0;
            self.failures = 0;
            // Consecutive failures span windows: a streak is a streak however slow.
        }
    }
}

/// An open breaker in words, for a page: why the endpoint is paused and when it is tried
/// next (`next_at`: that time as the page shows it).
pub fn paused_words(
    config: &BreakerConfig,
    until: Timestamp,
    now: Timestamp,
    next_at: &str,
) -> String {
    let words = crate::attempt::duration_words;
    let streak = match config.consecutive_failures {
        1 => "a failure".to_owned(),
        n => format!("{n} failures in a row"),
    };
    let wait = if until > now {
        format!("in {}", words(until.since(now)))
    } else {
        "now".to_owned()
    };
    format!(
        "Paused for {} after {streak} (or {} % of at least {} attempts within {} failing); next \
         try at {next_at}, {wait}. Nothing is lost: deliveries wait, and no attempt is counted.",
        words(config.open_for),
        (config.failure_ratio * 100.0).round(),
        config.min_requests,
        words(config.window),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_breaker_says_how_long_why_and_when_next() {
        let words = paused_words(&config(), t(12), T0, "12:00:12 UTC");
        assert_eq!(
            words,
            "Paused for 30 s after 5 failures in a row (or 50 % of at least 10 attempts within \
             1 min failing); next try at 12:00:12 UTC, in 12 s. Nothing is lost: deliveries wait, \
             and no attempt is counted."
        );
    }

    const T0: Timestamp = Timestamp::from_secs(1_700_000_000);

    fn t(secs: u64) -> Timestamp {
        T0.plus(Duration::from_secs(secs))
    }

    fn config() -> BreakerConfig {
        BreakerConfig::default()
    }

    fn open_breaker() -> Breaker {
        let c = config();
        let mut b = Breaker::new(T0);
        for _ in 0..5 {
            assert_eq!(b.allow(&c, T0), Admission::Allow);
            b.on_failure(&c, T0);
        }
        assert_eq!(b.state, BreakerState::Open { until: t(30) });
        b
    }

    #[test]
    fn closed_allows_and_counts() {
        let c = config();
        let mut b = Breaker::new(T0);
        assert_eq!(b.allow(&c, T0), Admission::Allow);
        b.on_success(&c, t(1));
        b.on_failure(&c, t(2));
        assert_eq!(b.state, BreakerState::Closed);
        assert_eq!((b.successes, b.failures, b.consecutive_failures), (1, 1, 1));
    }

    #[test]
    fn consecutive_failures_trip() {
        let c = config();
        let mut b = Breaker::new(T0);
        for i in 0..4 {
            b.on_failure(&c, t(i));
        }
        assert_eq!(b.state, BreakerState::Closed);
        b.on_failure(&c, t(4));
        assert_eq!(b.state, BreakerState::Open { until: t(34) });
        assert_eq!((b.successes, b.failures, b.consecutive_failures), (0, 0, 0));
    }

    #[test]
    fn a_success_breaks_the_streak() {
        let c = config();
        let mut b = Breaker::new(T0);
        for i in 0..4 {
            b.on_failure(&c, t(i));
        }
        b.on_success(&c, t(4));
        for i in 5..9 {
            b.on_failure(&c, t(i));
        }
        assert_eq!(b.state, BreakerState::Closed);
        assert_eq!(b.consecutive_failures, 4);
    }

    #[test]
    fn streak_survives_a_window_roll() {
        let c = config();
        let mut b = Breaker::new(T0);
        for i in 0..4 {
            b.on_failure(&c, t(i * 50));
        }
        b.on_failure(&c, t(200));
        assert!(matches!(b.state, BreakerState::Open { .. }));
    }

    #[test]
    fn failure_ratio_trips_once_enough_requests() {
        let c = config();
        let mut b = Breaker::new(T0);
        // Alternate: 50 % failures but never 5 in a row.
        for i in 0..9 {
            if i % 2 == 0 {
                b.on_failure(&c, t(i));
            } else {
                b.on_success(&c, t(i));
            }
        }
        // 9 requests, 5 failures: ratio reached but below min_requests.
        assert_eq!(b.state, BreakerState::Closed);
        b.on_success(&c, t(9));
        // 10 requests, 5 failures = 0.5: trips only on a failure, so one more.
        assert_eq!(b.state, BreakerState::Closed);
        b.on_failure(&c, t(10));
        assert_eq!(b.state, BreakerState::Open { until: t(40) });
    }

    #[test]
    fn ratio_below_threshold_stays_closed() {
        let c = config();
        let mut b = Breaker::new(T0);
        for i in 0..30 {
            if i % 3 == 0 {
                b.on_failure(&c, t(i));
            } else {
                b.on_success(&c, t(i));
            }
        }
        assert_eq!(b.state, BreakerState::Closed);
    }

    #[test]
    fn the_window_rolls_over() {
        let c = config();
        let mut b = Breaker::new(T0);
        for i in 0..4 {
            b.on_failure(&c, t(i));
            b.on_success(&c, t(i));
        }
        assert_eq!((b.successes, b.failures), (4, 4));
        // 60 s later a new window starts: old counts are dropped.
        assert_eq!(b.allow(&c, t(60)), Admission::Allow);
        assert_eq!((b.successes, b.failures, b.window_start), (0, 0, t(60)));
        // Just before the boundary nothing is dropped.
        b.on_failure(&c, t(119));
        assert_eq!((b.failures, b.window_start), (1, t(60)));
    }

    #[test]
    fn open_defers_until_open_for_has_passed() {
        let c = config();
        let mut b = open_breaker();
        assert_eq!(b.allow(&c, t(10)), Admission::Defer { until: t(30) });
        let just_before = Timestamp::from_millis(t(30).as_millis() - 1);
        assert_eq!(b.allow(&c, just_before), Admission::Defer { until: t(30) });
        assert!(matches!(b.state, BreakerState::Open { .. }));
    }

    #[test]
    fn results_while_open_are_ignored() {
        let c = config();
        let mut b = open_breaker();
        let before = b;
        b.on_success(&c, t(5));
        b.on_failure(&c, t(6));
        assert_eq!(b, before);
    }

    #[test]
    fn after_open_for_one_probe_goes_out() {
        let c = config();
        let mut b = open_breaker();
        assert_eq!(b.allow(&c, t(30)), Admission::Probe);
        assert_eq!(b.state, BreakerState::HalfOpen);
        assert_eq!(b.probe_started_at, Some(t(30)));
        // While the probe is in flight everything else waits, looked at again every second
        // (the probe usually answers long before its lease ends).
        assert_eq!(b.allow(&c, t(31)), Admission::Defer { until: t(32) });
        assert_eq!(b.allow(&c, t(59)), Admission::Defer { until: t(60) });
    }

    #[test]
    fn a_lost_probe_is_replaced_after_its_lease() {
        let c = config();
        let mut b = open_breaker();
        assert_eq!(b.allow(&c, t(30)), Admission::Probe);
        assert_eq!(b.allow(&c, t(60)), Admission::Probe);
        assert_eq!(b.probe_started_at, Some(t(60)));
        // Half-open without a recorded probe (e.g. restored from an older row) probes at once.
        b.probe_started_at = None;
        assert_eq!(b.allow(&c, t(61)), Admission::Probe);
    }

    #[test]
    fn probe_success_closes_and_resets() {
        let c = config();
        let mut b = open_breaker();
        assert_eq!(b.allow(&c, t(30)), Admission::Probe);
        b.on_success(&c, t(31));
        assert_eq!(
            b,
            Breaker {
                state: BreakerState::Closed,
                ..Breaker::new(t(31))
            }
        );
        assert_eq!(b.allow(&c, t(32)), Admission::Allow);
        assert_eq!(b.allow(&c, t(32)), Admission::Allow);
    }

    #[test]
    fn probe_failure_reopens() {
        let c = config();
        let mut b = open_breaker();
        assert_eq!(b.allow(&c, t(30)), Admission::Probe);
        b.on_failure(&c, t(35));
        assert_eq!(b.state, BreakerState::Open { until: t(65) });
        assert_eq!(b.probe_started_at, None);
        assert_eq!(b.allow(&c, t(40)), Admission::Defer { until: t(65) });
        assert_eq!(b.allow(&c, t(65)), Admission::Probe);
    }

    #[test]
    fn persists_as_json() {
        let c = config();
        let mut b = open_breaker();
        b.allow(&c, t(30));
        let json = serde_json::to_value(b).unwrap();
        assert_eq!(json["state"], serde_json::json!({"state": "half_open"}));
        assert_eq!(json["probeStartedAt"], serde_json::json!(t(30).as_millis()));
        let back: Breaker = serde_json::from_value(json).unwrap();
        assert_eq!(back, b);
        let open = serde_json::to_value(BreakerState::Open { until: t(1) }).unwrap();
        assert_eq!(
            open,
            serde_json::json!({"state": "open", "until": t(1).as_millis()})
        );
        assert_eq!(BreakerState::HalfOpen.as_str(), "half_open");
    }

    #[test]
    fn config_validation_names_the_setting() {
        assert_eq!(config().validate(), Ok(()));
        let bad = [
            (
                BreakerConfig {
                    consecutive_failures: 0,
                    ..config()
                },
                BreakerConfigError::ConsecutiveFailures,
            ),
            (
                BreakerConfig {
                    failure_ratio: 0.0,
                    ..config()
                },
                BreakerConfigError::FailureRatio,
            ),
            (
                BreakerConfig {
                    failure_ratio: 1.5,
                    ..config()
                },
                BreakerConfigError::FailureRatio,
            ),
            (
                BreakerConfig {
                    failure_ratio: f64::NAN,
                    ..config()
                },
                BreakerConfigError::FailureRatio,
            ),
            (
                BreakerConfig {
                    window: Duration::ZERO,
                    ..config()
                },
                BreakerConfigError::Window,
            ),
            (
                BreakerConfig {
                    min_requests: 0,
                    ..config()
                },
                BreakerConfigError::MinRequests,
            ),
            (
                BreakerConfig {
                    open_for: Duration::from_micros(10),
                    ..config()
                },
                BreakerConfigError::OpenFor,
            ),
        ];
        for (c, err) in bad {
            assert_eq!(c.validate(), Err(err.clone()));
            assert!(err.to_string().starts_with("breaker "));
        }
    }

    #[test]
    fn a_stored_open_breaker_resumes_open_until_its_time_and_a_half_open_one_probes() {
        let cfg = BreakerConfig::default();
        let now = Timestamp::from_millis(1_000_000);
        let until = now.plus(Duration::from_secs(30));
        let mut open = Breaker::resumed(BreakerPhase::Open, Some(until), now);
        assert_eq!(open.allow(&cfg, now), Admission::Defer { until });
        let mut half = Breaker::resumed(BreakerPhase::HalfOpen, None, now);
        assert_eq!(half.allow(&cfg, now), Admission::Probe);
        assert_eq!(
            half.allow(&cfg, now),
            Admission::Defer {
                until: now.plus(PROBE_RECHECK)
            }
        );
        let mut closed = Breaker::resumed(BreakerPhase::Closed, Some(until), now);
        assert_eq!(closed.allow(&cfg, now), Admission::Allow);
    }
}
