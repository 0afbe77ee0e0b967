//! Endpoint health: the rule that disables an endpoint nobody has been receiving on.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// The two timestamps the auto-disable rule needs, stored on the endpoint row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointHealth {
    /// Start of the current failure streak; `None` while the endpoint is healthy.
    pub failing_since: Option<Timestamp>,
    pub last_success_at: Option<Timestamp>,
}

impl EndpointHealth {
    /// A delivered attempt ends the streak. A success older than the streak's start (a slow
    /// worker reporting late) only moves `last_success_at`: the later failures still stand.
    pub fn record_success(&mut self, now: Timestamp) {
        self.last_success_at = Some(self.last_success_at.map_or(now, |t| t.max(now)));
        if self.failing_since.is_some_and(|since| since <= now) {
            self.failing_since = None;
        }
    }

    /// A failed attempt starts a streak, or continues the one under way.
    pub fn record_failure(&mut self, now: Timestamp) {
        if self.failing_since.is_none() {
            self.failing_since = Some(now);
        }
    }
}

/// True when the endpoint has been failing, with no success at all, for `disable_after`.
/// Measured from the later of the streak's start and the last success, so a success inside
/// the window restarts it even if a stale failure report left the streak open.
pub fn should_disable(health: &EndpointHealth, now: Timestamp, disable_after: Duration) -> bool {
    failing_for(health, now).is_some_and(|d| d >= disable_after)
}

/// How long the endpoint has been failing with no success, by the rule of [`should_disable`].
fn failing_for(health: &EndpointHealth, now: Timestamp) -> Option<Duration> {
    let since = health.failing_since?;
    let start = health.last_success_at.map_or(since, |s| s.max(since));
    Some(now.since(start))
}

/// When the auto-disable will disable a failing endpoint that goes on failing (None while it
/// is healthy).
pub fn disable_at(health: &EndpointHealth, disable_after: Duration) -> Option<Timestamp> {
    let since = health.failing_since?;
    let start = health.last_success_at.map_or(since, |s| s.max(since));
    Some(start.plus(disable_after))
}

/// True when a failing endpoint should get its early warning: failing for `warn_after` (by the
/// rule of [`should_disable`]) in a streak not warned about yet. `warned_for` is the
/// `failing_since` of the streak last warned about: each streak warns once, a new one again.
pub fn should_warn(
    health: &EndpointHealth,
    warned_for: Option<Timestamp>,
    now: Timestamp,
    warn_after: Duration,
) -> bool {
    health.failing_since != warned_for && failing_for(health, now).is_some_and(|d| d >= warn_after)
}

/// A failed attempt as warnings list it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecentError {
    pub at: Timestamp,
    /// The receiver's answer, if one came.
    pub status_code: Option<i32>,
    /// What went wrong without an answer (`timeout`, `connect`, …), as attempts name it.
    pub error_kind: Option<String>,
}

impl RecentError {
    /// `HTTP 500`, `connect`, or `failed` when neither is known.
    pub fn describe(&self) -> String {
        match (self.status_code, &self.error_kind) {
            (Some(code), _) => format!("HTTP {code}"),
            (None, Some(kind)) => kind.clone(),
            (None, None) => "failed".to_owned(),
        }
    }
}

/// A duration as people read a deadline: its two largest units (`3 days 4 hours`, `5 hours
/// 12 minutes`, `40 seconds`), rounded down; `less than a second` at zero.
pub fn time_left(d: Duration) -> String {
    let mut secs = d.as_secs();
    let mut parts = Vec::new();
    for (unit, size) in [
        ("day", 86_400),
        ("hour", 3_600),
        ("minute", 60),
        ("second", 1),
    ] {
        let n = secs / size;
        secs %= size;
        if n > 0 || !parts.is_empty() {
            if n > 0 {
                parts.push(format!("{n} {unit}{}", if n == 1 { "" } else { "s" }));
            }
            if parts.len() == 2 || (n == 0 && !parts.is_empty()) {
                break;
            }
        }
    }
    if parts.is_empty() {
        "less than a second".to_owned()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streak_warns_once_after_warn_after_and_a_new_streak_warns_again() {
        let day1 = Duration::from_secs(86_400);
        let mut h = EndpointHealth::default();
        h.record_failure(day(0));
        assert!(!should_warn(&h, None, day(0).plus(day1 / 2), day1));
        assert!(should_warn(&h, None, day(1), day1));
        assert!(
            !should_warn(&h, h.failing_since, day(2), day1),
            "warned for this streak"
        );
        assert_eq!(disable_at(&h, FIVE_DAYS), Some(day(5)));
        let warned = h.failing_since;
        h.record_success(day(3));
        h.record_failure(day(4));
        assert!(!should_warn(&h, warned, day(4), day1));
        assert!(should_warn(&h, warned, day(5), day1), "a new streak");
        assert_eq!(disable_at(&h, FIVE_DAYS), Some(day(9)));
    }

    #[test]
    fn time_left_reads_as_its_two_largest_units() {
        let t = |s| time_left(Duration::from_secs(s));
        assert_eq!(t(4 * 86_400 + 3 * 3_600 + 59), "4 days 3 hours");
        assert_eq!(t(86_400 + 60), "1 day");
        assert_eq!(t(3_600 + 120), "1 hour 2 minutes");
        assert_eq!(t(40), "40 seconds");
        assert_eq!(t(0), "less than a second");
    }

    const FIVE_DAYS: Duration = Duration::from_secs(5 * 86_400);

    fn day(d: i64) -> Timestamp {
        Timestamp::from_secs(1_700_000_000 + d * 86_400)
    }

    #[test]
    fn healthy_endpoint_is_never_disabled() {
        let mut h = EndpointHealth::default();
        assert!(!should_disable(&h, day(100), FIVE_DAYS));
        h.record_success(day(0));
        assert!(!should_disable(&h, day(100), FIVE_DAYS));
    }

    #[test]
    fn boundary_is_exactly_the_window() {
        let mut h = EndpointHealth::default();
        h.record_failure(day(0));
        let just_before = Timestamp::from_millis(day(5).as_millis() - 1);
        assert!(!should_disable(&h, just_before, FIVE_DAYS));
        assert!(should_disable(&h, day(5), FIVE_DAYS));
        assert!(should_disable(&h, day(6), FIVE_DAYS));
    }

    #[test]
    fn later_failures_do_not_move_the_streak_start() {
        let mut h = EndpointHealth::default();
        h.record_failure(day(0));
        h.record_failure(day(3));
        h.record_failure(day(4));
        assert_eq!(h.failing_since, Some(day(0)));
        assert!(should_disable(&h, day(5), FIVE_DAYS));
    }

    #[test]
    fn success_inside_the_window_resets_it() {
        let mut h = EndpointHealth::default();
        h.record_failure(day(0));
        h.record_success(day(3));
        assert_eq!(h.failing_since, None);
        assert!(!should_disable(&h, day(6), FIVE_DAYS));
        h.record_failure(day(4));
        assert!(!should_disable(&h, day(8), FIVE_DAYS));
        assert!(should_disable(&h, day(9), FIVE_DAYS));
    }

    #[test]
    fn late_reports_are_ordered_by_their_time() {
        // A success recorded out of order, after the failure that followed it.
        let mut h = EndpointHealth::default();
        h.record_failure(day(2));
        h.record_success(day(1));
        assert_eq!(h.failing_since, Some(day(2)));
        assert_eq!(h.last_success_at, Some(day(1)));
        assert!(should_disable(&h, day(7), FIVE_DAYS));

        // A stale failure recorded after a newer success: the window runs from the success.
        let h = EndpointHealth {
            failing_since: Some(day(0)),
            last_success_at: Some(day(3)),
        };
        assert!(!should_disable(&h, day(7), FIVE_DAYS));
        assert!(should_disable(&h, day(8), FIVE_DAYS));

        // last_success_at never moves backwards.
        let mut h = EndpointHealth::default();
        h.record_success(day(5));
        h.record_success(day(4));
        assert_eq!(h.last_success_at, Some(day(5)));
    }
}
