//! Per-endpoint flow control inside one dispatcher: circuit breaker, throttle rate and
//! concurrency cap. A delivery that may not go now is deferred (put back with a later
//! `next_attempt_at`); a deferral is never an attempt.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use domain::Timestamp;
use domain::breaker::{Admission, Breaker, BreakerConfig, BreakerState};
use governor::clock::{Clock, DefaultClock};
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use store::entities::endpoint;

pub const DEFAULT_MAX_CONCURRENCY: usize = 10;
/// The shortest deferral, so a saturated endpoint's backlog does not spin through the claim.
const MIN_DEFER: Duration = Duration::from_millis(100);

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

struct EndpointFlow {
    breaker: Breaker,
    in_flight: usize,
    /// `(rate, limiter)`: rebuilt when the endpoint's throttle rate changes.
    limiter: Option<(u32, Limiter)>,
    /// Moving average of attempt duration, to pace deferrals of a saturated endpoint.
    avg_ms: f64,
}

/// What to do with one claimed delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Send,
    /// Put it back until then.
    Defer(Timestamp),
}

/// A breaker that changed state, to persist and act on.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerChange {
    pub endpoint_id: String,
    pub state: BreakerState,
}

pub struct Flow {
    config: BreakerConfig,
    clock: DefaultClock,
    endpoints: Mutex<HashMap<String, EndpointFlow>>,
}

fn cap_of(ep: &endpoint::Model) -> usize {
    ep.max_concurrency
        .and_then(|c| usize::try_from(c).ok())
        .filter(|c| *c > 0)
        .unwrap_or(DEFAULT_MAX_CONCURRENCY)
}

impl Flow {
    pub fn new(config: BreakerConfig) -> Self {
        Flow {
            config,
            clock: DefaultClock::default(),
            endpoints: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, EndpointFlow>> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides for one delivery of `ep`. `queued` counts the deliveries of this endpoint already
    /// deferred for saturation in this batch: each waits its turn behind them.
    pub fn admit(
        &self,
        ep: &endpoint::Model,
        now: Timestamp,
        queued: &mut usize,
    ) -> (Gate, Option<BreakerChange>) {
        let mut all = self.lock();
        let f = all.entry(ep.id.clone()).or_insert_with(|| EndpointFlow {
            breaker: Breaker::new(now),
            in_flight: 0,
            limiter: None,
            avg_ms: 100.0,
        });
        let before = f.breaker.state;
        let admission = f.breaker.allow(&self.config, now);
        let change = (f.breaker.state != before).then(|| BreakerChange {
            endpoint_id: ep.id.clone(),
            state: f.breaker.state,
        });
        if let Admission::Defer { until } = admission {
            return (Gate::Defer(until), change);
        }
        let cap = cap_of(ep);
        if f.in_flight >= cap {
            *queued += 1;
            // Spread the backlog at the pace the endpoint absorbs it: cap requests per
            // average attempt duration.
            let turns = (*queued).div_ceil(cap) as f64;
            let wait = Duration::from_millis((turns * f.avg_ms) as u64).max(MIN_DEFER);
            return (Gate::Defer(now.plus(wait)), change);
        }
        if let Some(rate) = ep
            .throttle_rate
            .and_then(|r| u32::try_from(r).ok())
            .and_then(NonZeroU32::new)
        {
            let limiter = match &f.limiter {
                Some((r, l)) if *r == rate.get() => l,
                _ => {
                    // A burst of one: never more than `rate` requests in any one second.
                    let quota = Quota::per_second(rate).allow_burst(NonZeroU32::MIN);
                    f.limiter = Some((rate.get(), RateLimiter::direct(quota)));
                    &f.limiter.as_ref().expect("just set").1
                }
            };
            if let Err(not_until) = limiter.check() {
                let wait = not_until.wait_time_from(self.clock.now());
                return (
                    Gate::Defer(now.plus(wait.max(Duration::from_millis(1)))),
                    change,
                );
            }
        }
        f.in_flight += 1;
        (Gate::Send, change)
    }

    /// Records the end of an attempt that `admit` let through.
    pub fn finished(
        &self,
        endpoint_id: &str,
        success: bool,
        duration: Duration,
        now: Timestamp,
    ) -> Option<BreakerChange> {
        let mut all = self.lock();
        let f = all.get_mut(endpoint_id)?;
        f.in_flight = f.in_flight.saturating_sub(1);
        f.avg_ms = 0.8 * f.avg_ms + 0.2 * duration.as_millis() as f64;
        let before = f.breaker.state;
        if success {
            f.breaker.on_success(&self.config, now);
        } else {
            f.breaker.on_failure(&self.config, now);
        }
        (f.breaker.state != before).then(|| BreakerChange {
            endpoint_id: endpoint_id.to_owned(),
            state: f.breaker.state,
        })
    }

    /// Releases an admitted slot whose attempt never started (shutdown).
    pub fn abandoned(&self, endpoint_id: &str) {
        if let Some(f) = self.lock().get_mut(endpoint_id) {
            f.in_flight = f.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(id: &str, cap: Option<i32>, rate: Option<i32>) -> endpoint::Model {
        endpoint::Model {
            id: id.into(),
            tenant_id: "t".into(),
            app_id: "a".into(),
            uid: None,
            url: "http://x".into(),
            description: String::new(),
            version: 1,
            filter_types: None,
            channels: None,
            headers: "{}".into(),
            metadata: "{}".into(),
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: rate,
            max_concurrency: cap,
            timeout_ms: None,
            retry_policy: None,
            status_overrides: None,
            failing_since: None,
            last_success_at: None,
            breaker_state: "closed".into(),
            breaker_until: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_concurrency_cap_defers_the_rest_at_the_endpoints_pace() {
        let flow = Flow::new(BreakerConfig::default());
        let e = ep("ep_a", Some(2), None);
        let now = Timestamp::from_secs(1000);
        let mut queued = 0;
        assert_eq!(flow.admit(&e, now, &mut queued).0, Gate::Send);
        assert_eq!(flow.admit(&e, now, &mut queued).0, Gate::Send);
        let (third, _) = flow.admit(&e, now, &mut queued);
        let (fifth, _) = {
            flow.admit(&e, now, &mut queued);
            flow.admit(&e, now, &mut queued)
        };
        match (third, fifth) {
            (Gate::Defer(a), Gate::Defer(b)) => {
                assert!(a >= now.plus(MIN_DEFER) && b > a, "{a:?} {b:?}")
            }
            other => panic!("{other:?}"),
        }
        // Another endpoint is not affected.
        assert_eq!(
            flow.admit(&ep("ep_b", Some(2), None), now, &mut 0).0,
            Gate::Send
        );
        flow.finished("ep_a", true, Duration::from_millis(50), now);
        assert_eq!(
            flow.admit(&e, now, &mut 0).0,
            Gate::Send,
            "a slot came free"
        );
    }

    #[test]
    fn consecutive_failures_open_the_breaker_and_defer() {
        let cfg = BreakerConfig {
            consecutive_failures: 3,
            ..BreakerConfig::default()
        };
        let flow = Flow::new(cfg);
        let e = ep("ep_a", Some(100), None);
        let now = Timestamp::from_secs(1000);
        let mut change = None;
        for _ in 0..3 {
            assert_eq!(flow.admit(&e, now, &mut 0).0, Gate::Send);
            change = flow
                .finished("ep_a", false, Duration::from_millis(5), now)
                .or(change);
        }
        assert!(matches!(
            change.map(|c| c.state),
            Some(BreakerState::Open { .. })
        ));
        match flow.admit(&e, now, &mut 0).0 {
            Gate::Defer(until) => assert_eq!(until, now.plus(cfg.open_for)),
            Gate::Send => panic!("open breaker let a delivery through"),
        }
        // After open_for, one probe; its success closes the breaker.
        let later = now.plus(cfg.open_for);
        let (gate, change) = flow.admit(&e, later, &mut 0);
        assert_eq!(gate, Gate::Send);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::HalfOpen));
        assert!(
            matches!(flow.admit(&e, later, &mut 0).0, Gate::Defer(_)),
            "one probe at a time"
        );
        let closed = flow.finished("ep_a", true, Duration::from_millis(5), later);
        assert_eq!(closed.map(|c| c.state), Some(BreakerState::Closed));
    }

    #[test]
    fn the_throttle_spaces_requests() {
        let flow = Flow::new(BreakerConfig::default());
        let e = ep("ep_a", Some(100), Some(5));
        let now = Timestamp::now();
        assert_eq!(flow.admit(&e, now, &mut 0).0, Gate::Send);
        match flow.admit(&e, now, &mut 0).0 {
            Gate::Defer(until) => {
                let wait = until.since(now);
                assert!(
                    wait <= Duration::from_millis(200) && wait > Duration::from_millis(100),
                    "{wait:?}"
                );
            }
            Gate::Send => panic!("a second request within 200 ms at 5/s"),
        }
    }
}
