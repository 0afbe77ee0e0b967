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
    let Some(since) = health.failing_since else {
        return false;
    };
    let start = health.last_success_at.map_or(since, |s| s.max(since));
    now.since(start) >= disable_after
}

#[cfg(test)]
mod tests {
    use super::*;

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
