//! Per-endpoint flow control inside one dispatcher: circuit breaker, throttle rate and
//! concurrency cap. A claimed delivery over the cap waits in memory for a slot of its
//! endpoint (a short line, about a second of the endpoint's measured pace); what cannot go
//! soon is deferred (put back with a later `next_attempt_at`). A deferral is never an attempt.

use std::collections::{HashMap, VecDeque};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use domain::Timestamp;
use domain::breaker::{Admission, Breaker, BreakerConfig, BreakerState};
use domain::ids::EndpointId;
use governor::clock::{Clock, DefaultClock};
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use store::entities::endpoint;

const DEFAULT_MAX_CONCURRENCY: usize = domain::delivery::DEFAULT_MAX_CONCURRENCY as usize;
/// The shortest deferral, so a saturated endpoint's backlog does not spin through the claim.
const MIN_DEFER: Duration = Duration::from_millis(100);
/// A delivery waits in memory for a slot only if, at the endpoint's pace, its turn comes
/// within about this long; the rest are deferred in the database.
const MAX_WAIT: Duration = Duration::from_secs(1);
/// How far ahead the overflow of a saturated endpoint is spread one behind another at its pace
/// (see [`EndpointFlow::spread`]); beyond it the rest come due at random within its second half,
/// so an endpoint that speeds up is not held to a pace measured while it was slow.
const MAX_SPREAD: Duration = Duration::from_secs(30);

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

struct EndpointFlow<T> {
    breaker: Breaker,
    in_flight: usize,
    /// The cap last read from the endpoint.
    cap: usize,
    /// `(rate, limiter)`: rebuilt when the endpoint's throttle rate changes.
    limiter: Option<(u32, Limiter)>,
    /// Moving average of attempt duration: the endpoint's pace.
    avg_ms: f64,
    /// Admitted deliveries waiting for a slot, first come first served.
    waiting: VecDeque<T>,
    /// When a delivery was last admitted or finished, for evicting idle entries.
    last_used: Timestamp,
    /// When the last delivery deferred for saturation comes due: the next goes behind it.
    spread_until: Timestamp,
}

impl<T> EndpointFlow<T> {
    /// How many may wait: about `MAX_WAIT` of the endpoint's throughput, at least one turn of
    /// the cap, at most `max_waiting`.
    fn wait_room(&self, max_waiting: usize) -> usize {
        let per_turn = MAX_WAIT.as_millis() as f64 / self.avg_ms.max(0.1);
        ((self.cap as f64 * per_turn) as usize)
            .max(self.cap)
            .min(max_waiting)
    }

    /// Whether one more delivery would find no place in the line and be deferred.
    fn line_full(&self, max_waiting: usize) -> bool {
        self.waiting.len() >= self.wait_room(max_waiting)
    }

    /// When a delivery that finds the line full is put back for: behind the line and behind
    /// the overflow deferred before it, by any claim, one slot's share of the endpoint's pace
    /// apart. A backlog thus comes due at about the pace the endpoint takes it, rather than a
    /// claim's worth at once with every claim (each of which would take it again ahead of
    /// other endpoints' new messages, and defer it again).
    fn spread(&mut self, now: Timestamp) -> Timestamp {
        let line = Duration::from_millis(
            (self.waiting.len().div_ceil(self.cap) as f64 * self.avg_ms) as u64,
        );
        let step = Duration::from_millis((self.avg_ms / self.cap as f64).ceil() as u64);
        let behind = now.plus(line).max(self.spread_until).plus(step);
        let horizon = now.plus(MAX_SPREAD);
        if behind <= horizon {
            self.spread_until = behind.max(now.plus(MIN_DEFER));
            return self.spread_until;
        }
        self.spread_until = horizon;
        let half = MAX_SPREAD.as_millis() as u64 / 2;
        now.plus(Duration::from_millis(half + rand::random_range(0..=half)))
    }

    /// The throttle's verdict for one more request now.
    fn throttled(&self, clock: &DefaultClock, now: Timestamp) -> Option<Timestamp> {
        let (_, limiter) = self.limiter.as_ref()?;
        limiter.check().err().map(|not_until| {
            let wait = not_until.wait_time_from(clock.now());
            now.plus(wait.max(Duration::from_millis(1)))
        })
    }

    fn drain(&mut self, until: Timestamp) -> Vec<(T, Timestamp)> {
        self.waiting.drain(..).map(|j| (j, until)).collect()
    }
}

/// What to do with one claimed delivery.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate<T> {
    /// Send it now: a slot is taken for it.
    Send(T),
    /// It waits in the endpoint's line; a finishing attempt hands it on (see [`Flow::finished`]).
    Wait,
    /// Put it back until then.
    Defer(T, Timestamp),
}

/// What a finished attempt's slot does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Then<T> {
    /// Nothing waits.
    Idle,
    /// Send the next waiting delivery in the freed slot.
    Send(T),
    /// The breaker opened or the throttle says not yet: put every waiting one back.
    Defer(Vec<(T, Timestamp)>),
}

/// A breaker that changed state, to persist and act on.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerChange {
    pub endpoint_id: EndpointId,
    pub state: BreakerState,
}

pub struct Flow<T> {
    config: BreakerConfig,
    clock: DefaultClock,
    /// Most deliveries of one endpoint waiting in memory, so that one endpoint cannot hold
    /// every in-flight permit of the process.
    max_waiting: usize,
    endpoints: Mutex<HashMap<EndpointId, EndpointFlow<T>>>,
}

fn cap_of(ep: &endpoint::Model) -> usize {
    ep.max_concurrency
        .and_then(|c| usize::try_from(c).ok())
        .filter(|c| *c > 0)
        .unwrap_or(DEFAULT_MAX_CONCURRENCY)
}

impl<T> Flow<T> {
    pub fn new(config: BreakerConfig, max_waiting: usize) -> Self {
        Flow {
            config,
            clock: DefaultClock::default(),
            max_waiting: max_waiting.max(1),
            endpoints: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<EndpointId, EndpointFlow<T>>> {
        self.endpoints.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides for one delivery of `ep`.
    pub fn admit(
        &self,
        ep: &endpoint::Model,
        now: Timestamp,
        job: T,
    ) -> (Gate<T>, Option<BreakerChange>) {
        let mut all = self.lock();
        let f = all.entry(ep.id).or_insert_with(|| EndpointFlow {
            // As stored: another process may have opened it before this one took the endpoint.
            breaker: Breaker::resumed(
                ep.breaker_state,
                ep.breaker_until.map(Timestamp::from_millis),
                now,
            ),
            in_flight: 0,
            cap: DEFAULT_MAX_CONCURRENCY,
            limiter: None,
            avg_ms: 100.0,
            waiting: VecDeque::new(),
            last_used: now,
            spread_until: now,
        });
        f.last_used = now;
        f.cap = cap_of(ep);
        let rate = ep
            .throttle_rate
            .and_then(|r| u32::try_from(r).ok())
            .and_then(NonZeroU32::new);
        match (rate, &f.limiter) {
            (None, _) => f.limiter = None,
            (Some(r), Some((old, _))) if *old == r.get() => {}
            (Some(r), _) => {
                // A burst of one: never more than `rate` requests in any one second.
                let quota = Quota::per_second(r).allow_burst(NonZeroU32::MIN);
                f.limiter = Some((r.get(), RateLimiter::direct(quota)));
            }
        }
        let before = f.breaker.state;
        let admission = f.breaker.allow(&self.config, now);
        let change = (f.breaker.state != before).then_some(BreakerChange {
            endpoint_id: ep.id,
            state: f.breaker.state,
        });
        match admission {
            Admission::Defer { until } => return (Gate::Defer(job, until), change),
            // The half-open trial goes whatever the line: its answer decides for all of them.
            Admission::Probe => {
                f.in_flight += 1;
                return (Gate::Send(job), change);
            }
            Admission::Allow => {}
        }
        if f.in_flight >= f.cap || !f.waiting.is_empty() {
            if !f.line_full(self.max_waiting) {
                f.waiting.push_back(job);
                return (Gate::Wait, change);
            }
            let until = f.spread(now);
            return (Gate::Defer(job, until), change);
        }
        if let Some(until) = f.throttled(&self.clock, now) {
            return (Gate::Defer(job, until), change);
        }
        f.in_flight += 1;
        (Gate::Send(job), change)
    }

    /// Records the end of an attempt that `admit` let through, and hands its slot to the next
    /// waiting delivery when the breaker and throttle allow.
    pub fn finished(
        &self,
        endpoint_id: EndpointId,
        success: bool,
        duration: Duration,
        now: Timestamp,
    ) -> (Option<BreakerChange>, Then<T>) {
        let mut all = self.lock();
        let Some(f) = all.get_mut(&endpoint_id) else {
            return (None, Then::Idle);
        };
        f.in_flight = f.in_flight.saturating_sub(1);
        f.last_used = now;
        f.avg_ms = 0.8 * f.avg_ms + 0.2 * duration.as_millis() as f64;
        let before = f.breaker.state;
        if success {
            f.breaker.on_success(&self.config, now);
        } else {
            f.breaker.on_failure(&self.config, now);
        }
        let then = if f.waiting.is_empty() || f.in_flight >= f.cap {
            Then::Idle
        } else {
            match f.breaker.allow(&self.config, now) {
                Admission::Defer { until } => Then::Defer(f.drain(until)),
                Admission::Allow | Admission::Probe => match f.throttled(&self.clock, now) {
                    Some(until) => Then::Defer(f.drain(until)),
                    None => match f.waiting.pop_front() {
                        Some(job) => {
                            f.in_flight += 1;
                            Then::Send(job)
                        }
                        None => Then::Idle,
                    },
                },
            }
        };
        let change = (f.breaker.state != before).then_some(BreakerChange {
            endpoint_id,
            state: f.breaker.state,
        });
        (change, then)
    }

    /// Releases an admitted slot whose attempt never started (shutdown), with whatever waits
    /// behind it: the caller gives them back.
    pub fn abandoned(&self, endpoint_id: EndpointId) -> Vec<T> {
        match self.lock().get_mut(&endpoint_id) {
            Some(f) => {
                f.in_flight = f.in_flight.saturating_sub(1);
                f.waiting.drain(..).collect()
            }
            None => Vec::new(),
        }
    }

    /// Up to `most` endpoints whose slots and line are full, those with the longest line
    /// first: new work of theirs would only be deferred, so a claim of new work skips them
    /// (see `store::Fresh`).
    pub fn saturated(&self, most: usize) -> Vec<EndpointId> {
        let all = self.lock();
        let mut full: Vec<(usize, EndpointId)> = all
            .iter()
            .filter(|(_, f)| f.in_flight >= f.cap && f.line_full(self.max_waiting))
            .map(|(id, f)| (f.waiting.len(), *id))
            .collect();
        full.sort_unstable_by(|a, b| b.cmp(a));
        full.into_iter().take(most).map(|(_, id)| id).collect()
    }

    /// Endpoints with a request in flight or a delivery waiting: those whose disable this
    /// process must learn of (see `Store::refresh_stopped`).
    pub fn busy_endpoints(&self) -> Vec<EndpointId> {
        self.lock()
            .iter()
            .filter(|(_, f)| f.in_flight > 0 || !f.waiting.is_empty())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Forgets endpoints idle since before `cutoff` with a closed breaker, so memory does not
    /// grow with every endpoint ever sent to. A forgotten endpoint starts afresh (closed
    /// breaker, default pace) when it is next admitted. Returns how many were forgotten.
    pub fn evict_idle(&self, cutoff: Timestamp) -> usize {
        let mut all = self.lock();
        let before = all.len();
        all.retain(|_, f| {
            f.in_flight > 0
                || !f.waiting.is_empty()
                || f.last_used >= cutoff
                || f.breaker.state != BreakerState::Closed
        });
        before - all.len()
    }

    /// Forgets one endpoint's state unless it has work here (in flight or waiting): it is
    /// read again, breaker included, from the endpoint as stored when next admitted.
    pub fn forget_idle(&self, endpoint_id: EndpointId) {
        let mut all = self.lock();
        if all
            .get(&endpoint_id)
            .is_some_and(|f| f.in_flight == 0 && f.waiting.is_empty())
        {
            all.remove(&endpoint_id);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Everything still waiting, of every endpoint (shutdown).
    pub fn drain_all(&self) -> Vec<T> {
        self.lock()
            .values_mut()
            .flat_map(|f| f.waiting.drain(..).collect::<Vec<_>>())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use store::testing::named;

    fn ep(id: &str, cap: Option<i32>, rate: Option<i32>) -> endpoint::Model {
        let mut ep = store::testing::endpoint_model(id, "http://x");
        ep.max_concurrency = cap;
        ep.throttle_rate = rate;
        ep
    }

    #[test]
    fn over_the_cap_deliveries_wait_in_line_and_the_overflow_is_deferred() {
        let flow = Flow::new(BreakerConfig::default(), 3);
        let e = ep("ep_a", Some(2), None);
        let now = Timestamp::from_secs(1000);
        assert_eq!(flow.admit(&e, now, 1).0, Gate::Send(1));
        assert_eq!(flow.admit(&e, now, 2).0, Gate::Send(2));
        for job in 3..=5 {
            assert_eq!(flow.admit(&e, now, job).0, Gate::Wait);
        }
        let (sixth, _) = flow.admit(&e, now, 6);
        let (seventh, _) = flow.admit(&e, now, 7);
        match (sixth, seventh) {
            (Gate::Defer(6, a), Gate::Defer(7, b)) => {
                assert!(a >= now.plus(MIN_DEFER) && b >= a, "{a:?} {b:?}")
            }
            other => panic!("{other:?}"),
        }
        // Another endpoint is not affected.
        assert_eq!(
            flow.admit(&ep("ep_b", Some(2), None), now, 8).0,
            Gate::Send(8)
        );
        // A finished attempt hands its slot to the first in line, in order.
        let d = Duration::from_millis(5);
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Send(3));
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Send(4));
        // A newcomer queues behind those still waiting even though nothing is in flight
        // beyond the cap.
        assert_eq!(flow.admit(&e, now, 9).0, Gate::Wait);
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Send(5));
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Send(9));
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Idle);
        assert_eq!(flow.finished(named("ep_a"), true, d, now).1, Then::Idle);
        assert_eq!(flow.admit(&e, now, 10).0, Gate::Send(10));
    }

    #[test]
    fn a_backlog_deferred_by_several_claims_comes_due_at_the_endpoints_pace() {
        let flow = Flow::new(BreakerConfig::default(), 10);
        // Cap 2 at the default pace (100 ms an attempt): one every 50 ms.
        let e = ep("ep_a", Some(2), None);
        let now = Timestamp::from_secs(1000);
        let mut dues = Vec::new();
        // Eight claims of 100 each, a millisecond apart: the first fills the slots and the line.
        for claim in 0..8u32 {
            let at = now.plus(Duration::from_millis(claim.into()));
            for job in 0..100 {
                if let Gate::Defer(_, until) = flow.admit(&e, at, claim * 100 + job).0 {
                    dues.push(until);
                }
            }
        }
        assert_eq!(dues.len(), 800 - 2 - 10);
        // Behind the line (10 waiting: 5 turns of 100 ms), then each 50 ms behind the one
        // before, whichever claim deferred it: no two claims' overflow comes due together.
        assert_eq!(dues[0], now.plus(Duration::from_millis(550)));
        let spread = 1 + dues
            .windows(2)
            .take_while(|p| p[1].since(p[0]) == Duration::from_millis(50))
            .count();
        assert!(
            dues[spread - 1] > now.plus(MAX_SPREAD - Duration::from_millis(50)),
            "spread to the horizon, {spread} of them"
        );
        // The rest come due at random within the horizon's second half.
        let rest = &dues[spread..];
        assert!(!rest.is_empty());
        let latest = now.plus(Duration::from_millis(7) + MAX_SPREAD);
        assert!(
            rest.iter()
                .all(|d| *d >= now.plus(MAX_SPREAD / 2) && *d <= latest)
        );
        let distinct: HashSet<_> = rest.iter().collect();
        assert!(
            distinct.len() > rest.len() / 2,
            "{} distinct of {}",
            distinct.len(),
            rest.len()
        );
    }

    #[test]
    fn an_endpoint_is_saturated_once_its_slots_and_line_are_full() {
        let flow = Flow::new(BreakerConfig::default(), 3);
        let (a, b) = (ep("ep_a", Some(1), None), ep("ep_b", Some(1), None));
        let now = Timestamp::from_secs(1000);
        for job in 0..4 {
            flow.admit(&a, now, job);
        }
        for job in 0..3 {
            flow.admit(&b, now, job);
        }
        // a: one in flight, three waiting (the most); b: a place left in its line.
        assert_eq!(flow.saturated(10), vec![named::<EndpointId>("ep_a")]);
        assert!(flow.saturated(0).is_empty());
        flow.finished(named("ep_a"), true, Duration::from_millis(5), now);
        assert!(flow.saturated(10).is_empty(), "a place in a's line again");
    }

    #[test]
    fn the_line_is_about_a_second_of_the_endpoints_pace() {
        let flow = Flow::new(BreakerConfig::default(), 10_000);
        let e = ep("ep_slow", Some(1), None);
        let now = Timestamp::from_secs(1000);
        assert_eq!(flow.admit(&e, now, 0).0, Gate::Send(0));
        // Attempts take 500 ms: about two fit in a second.
        for _ in 0..30 {
            flow.finished(named("ep_slow"), true, Duration::from_millis(500), now);
            flow.admit(&e, now, 0);
        }
        let mut waiting = 0;
        for job in 1..=10 {
            match flow.admit(&e, now, job).0 {
                Gate::Wait => waiting += 1,
                Gate::Defer(..) => {}
                Gate::Send(_) => panic!("over the cap"),
            }
        }
        assert!((1..=3).contains(&waiting), "{waiting} waiting");
    }

    #[test]
    fn consecutive_failures_open_the_breaker_and_put_the_line_back() {
        let cfg = BreakerConfig {
            consecutive_failures: 3,
            ..BreakerConfig::default()
        };
        let flow = Flow::new(cfg, 100);
        let e = ep("ep_a", Some(3), None);
        let now = Timestamp::from_secs(1000);
        for job in 0..3 {
            assert_eq!(flow.admit(&e, now, job).0, Gate::Send(job));
        }
        assert_eq!(flow.admit(&e, now, 3).0, Gate::Wait);
        assert_eq!(flow.admit(&e, now, 4).0, Gate::Wait);
        let d = Duration::from_millis(5);
        assert_eq!(
            flow.finished(named("ep_a"), false, d, now),
            (None, Then::Send(3))
        );
        assert_eq!(
            flow.finished(named("ep_a"), false, d, now),
            (None, Then::Send(4))
        );
        assert_eq!(flow.admit(&e, now, 5).0, Gate::Wait);
        let (change, then) = flow.finished(named("ep_a"), false, d, now);
        let until = now.plus(cfg.open_for);
        assert_eq!(change.map(|c| c.state), Some(BreakerState::Open { until }));
        assert_eq!(then, Then::Defer(vec![(5, until)]));
        assert_eq!(flow.admit(&e, now, 6).0, Gate::Defer(6, until));
        // After open_for, one probe whatever is in flight; its success closes the breaker.
        let later = until;
        let (gate, change) = flow.admit(&e, later, 7);
        assert_eq!(gate, Gate::Send(7));
        assert_eq!(change.map(|c| c.state), Some(BreakerState::HalfOpen));
        assert!(
            matches!(flow.admit(&e, later, 8).0, Gate::Defer(8, _)),
            "one probe at a time"
        );
        let (closed, _) = flow.finished(named("ep_a"), true, d, later);
        assert_eq!(closed.map(|c| c.state), Some(BreakerState::Closed));
    }

    #[test]
    fn the_throttle_spaces_requests() {
        let flow = Flow::new(BreakerConfig::default(), 100);
        let e = ep("ep_a", Some(100), Some(5));
        let now = Timestamp::now();
        assert_eq!(flow.admit(&e, now, 1).0, Gate::Send(1));
        match flow.admit(&e, now, 2).0 {
            Gate::Defer(2, until) => {
                let wait = until.since(now);
                assert!(
                    wait <= Duration::from_millis(200) && wait > Duration::from_millis(100),
                    "{wait:?}"
                );
            }
            other => panic!("a second request within 200 ms at 5/s: {other:?}"),
        }
    }

    #[test]
    fn shutdown_hands_back_what_waits() {
        let flow = Flow::new(BreakerConfig::default(), 100);
        let e = ep("ep_a", Some(1), None);
        let now = Timestamp::from_secs(1000);
        assert_eq!(flow.admit(&e, now, 1).0, Gate::Send(1));
        assert_eq!(flow.admit(&e, now, 2).0, Gate::Wait);
        assert_eq!(flow.admit(&e, now, 3).0, Gate::Wait);
        assert_eq!(flow.abandoned(named("ep_a")), vec![2, 3]);
        assert!(flow.drain_all().is_empty());
        assert_eq!(flow.admit(&e, now, 4).0, Gate::Send(4));
    }

    #[test]
    fn idle_endpoints_with_a_closed_breaker_are_forgotten_and_busy_ones_kept() {
        let flow: Flow<u32> = Flow::new(BreakerConfig::default(), 10);
        let t0 = Timestamp::from_millis(1_000_000);
        let (gate, _) = flow.admit(&ep("ep_idle", None, None), t0, 1);
        assert_eq!(gate, Gate::Send(1));
        flow.finished(named("ep_idle"), true, Duration::from_millis(5), t0);
        let (gate, _) = flow.admit(&ep("ep_busy", None, None), t0, 2);
        assert_eq!(gate, Gate::Send(2));
        assert_eq!(flow.busy_endpoints(), vec![named::<EndpointId>("ep_busy")]);
        // Nothing is older than the cutoff yet.
        assert_eq!(flow.evict_idle(t0), 0);
        let later = t0.plus(Duration::from_secs(600));
        assert_eq!(flow.evict_idle(later), 1, "the idle one goes");
        assert_eq!(flow.len(), 1, "the one with a request in flight stays");
    }
}
