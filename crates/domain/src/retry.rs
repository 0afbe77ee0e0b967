//! Retry policy: how long to wait before the next attempt, and when to give up.
//!
//! One copy of the schedule for the whole platform (Hook0 keeps two hand-synced ones). Everything
//! is computed in whole milliseconds, the unit `Timestamp` and storage use, with integer
//! arithmetic so the bounds hold exactly.

use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::duration::{format_duration, parse_duration};
use crate::time::Timestamp;

const SECOND: u64 = 1;
const MINUTE: u64 = 60 * SECOND;
const HOUR: u64 = 60 * MINUTE;

/// Delays before attempts 1..=8 of the default schedule (Svix's). Attempt 1 is immediate.
pub const DEFAULT_SCHEDULE: [Duration; 8] = [
    Duration::ZERO,
    Duration::from_secs(5 * SECOND),
    Duration::from_secs(5 * MINUTE),
    Duration::from_secs(30 * MINUTE),
    Duration::from_secs(2 * HOUR),
    Duration::from_secs(5 * HOUR),
    Duration::from_secs(10 * HOUR),
    Duration::from_secs(10 * HOUR),
];

/// One attempt per entry of [`DEFAULT_SCHEDULE`]; also the default for exponential schedules.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// Three days, as Stripe: the default schedule spans ~27.6 h (~33 h at +20 % jitter), so the TTL
/// never cuts it short, and a receiver that is down over a weekend still gets its events. It
/// stays below the 5-day auto-disable window, so a dead endpoint's queue drains to the dead
/// letter state before the endpoint is switched off.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3 * 24 * HOUR);

/// Upper bound on `maxAttempts`: beyond this a policy is a hot loop, not a retry schedule.
pub const MAX_ATTEMPTS_LIMIT: u32 = 100;

/// A receiver's `Retry-After` is honoured up to this; longer hints are treated as this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * HOUR);

/// Listed delays (default schedule and `Delays`) vary by this fraction either side: ±20 %.
const LIST_JITTER_DIVISOR: u64 = 5;

/// How randomness is spread over an exponential delay (AWS Architecture Blog formulas).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Jitter {
    /// `rand(0, min(cap, base·2ⁿ))`: the most spread, lowest mean.
    #[default]
    Full,
    /// `d/2 + rand(0, d/2)` with `d = min(cap, base·2ⁿ)`: keeps at least half the backoff.
    Equal,
    /// `min(cap, rand(base, prev·3))`: grows from the previous delay rather than the count.
    Decorrelated,
}

/// The shape of the waits between attempts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// [`DEFAULT_SCHEDULE`] with ±20 % jitter.
    #[default]
    Default,
    /// Waits before attempts 2, 3, …, each with ±20 % jitter; the last repeats if
    /// `max_attempts` asks for more attempts than listed.
    Delays(Vec<Duration>),
    /// The n-th retry waits about `min(cap, base·2ⁿ⁻¹)`, spread by `jitter`.
    Exponential {
        base: Duration,
        cap: Duration,
        jitter: Jitter,
    },
}

impl Schedule {
    /// Max attempts when the policy does not say: one per listed delay, plus the first attempt.
    fn default_max_attempts(&self) -> u32 {
        match self {
            Schedule::Default | Schedule::Exponential { .. } => DEFAULT_MAX_ATTEMPTS,
            Schedule::Delays(d) => u32::try_from(d.len()).unwrap_or(u32::MAX).saturating_add(1),
        }
    }

    /// The waits before attempts 2, 3, … of a listed schedule.
    fn listed(&self) -> Option<&[Duration]> {
        match self {
            Schedule::Default => Some(&DEFAULT_SCHEDULE[1..]),
            Schedule::Delays(d) => Some(d),
            Schedule::Exponential { .. } => None,
        }
    }

    /// The longest wait [`backoff`] can return.
    pub fn cap(&self) -> Duration {
        match self {
            Schedule::Exponential { cap, .. } => Duration::from_millis(ms(*cap)),
            listed => {
                let longest = listed
                    .listed()
                    .and_then(|d| d.iter().copied().map(ms).max())
                    .unwrap_or(0);
                Duration::from_millis(jitter_bounds(longest).1)
            }
        }
    }
}

/// When to retry a delivery and when to stop. Always bounded twice: by attempts and by time.
///
/// Built only through [`RetryPolicy::new`] (or deserialization, which calls it), so every value
/// is valid. Serializes to the endpoint's `retryPolicy` JSON:
/// `{"delays": ["100ms", "1s"], "maxAttempts": 3, "ttl": "1d"}` or
/// `{"exponential": {"base": "1s", "cap": "1h", "jitter": "full"}, …}`; `{}` is the default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RetryPolicySpec", into = "RetryPolicySpec")]
pub struct RetryPolicy {
    schedule: Schedule,
    max_attempts: u32,
    ttl: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            schedule: Schedule::Default,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            ttl: DEFAULT_TTL,
        }
    }
}

/// Why a retry policy was refused; [`RetryPolicyError::field`] names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryPolicyError {
    #[error("maxAttempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {0}")]
    MaxAttempts(u32),
    #[error("delays must list at least one delay")]
    EmptyDelays,
    #[error("delays may list at most {max} delays, got {0}", max = MAX_ATTEMPTS_LIMIT - 1)]
    TooManyDelays(usize),
    #[error("exponential.base must be greater than zero")]
    ZeroBase,
    #[error("exponential.cap must be greater than zero")]
    ZeroCap,
    #[error(
        "exponential.base ({}) must not exceed exponential.cap ({})",
        format_duration(*.base),
        format_duration(*.cap)
    )]
    BaseAboveCap { base: Duration, cap: Duration },
    #[error("ttl must be greater than zero")]
    ZeroTtl,
    #[error("retryPolicy takes either delays or exponential, not both")]
    TwoSchedules,
    #[error("{field}: invalid duration {input:?} (expected e.g. 500ms, 5s, 2h, 5d)")]
    InvalidDuration { field: String, input: String },
}

impl RetryPolicyError {
    /// The JSON field at fault, for API error details.
    pub fn field(&self) -> &str {
        match self {
            RetryPolicyError::MaxAttempts(_) => "maxAttempts",
            RetryPolicyError::EmptyDelays | RetryPolicyError::TooManyDelays(_) => "delays",
            RetryPolicyError::ZeroBase | RetryPolicyError::BaseAboveCap { .. } => {
                "exponential.base"
            }
            RetryPolicyError::ZeroCap => "exponential.cap",
            RetryPolicyError::ZeroTtl => "ttl",
            RetryPolicyError::TwoSchedules => "retryPolicy",
            RetryPolicyError::InvalidDuration { field, .. } => field,
        }
    }
}

impl RetryPolicy {
    /// A checked policy. `None` takes the default: max attempts = one per scheduled delay plus
    /// the first attempt (8 for the default and exponential schedules), TTL = [`DEFAULT_TTL`].
    pub fn new(
        schedule: Schedule,
        max_attempts: Option<u32>,
        ttl: Option<Duration>,
    ) -> Result<Self, RetryPolicyError> {
        match &schedule {
            Schedule::Default => {}
            Schedule::Delays(d) if d.is_empty() => return Err(RetryPolicyError::EmptyDelays),
            Schedule::Delays(d) if d.len() >= MAX_ATTEMPTS_LIMIT as usize => {
                return Err(RetryPolicyError::TooManyDelays(d.len()));
            }
            Schedule::Delays(_) => {}
            Schedule::Exponential { base, cap, .. } => {
                if ms(*base) == 0 {
                    return Err(RetryPolicyError::ZeroBase);
                }
                if ms(*cap) == 0 {
                    return Err(RetryPolicyError::ZeroCap);
                }
                if base > cap {
                    return Err(RetryPolicyError::BaseAboveCap {
                        base: *base,
                        cap: *cap,
                    });
                }
            }
        }
        let max_attempts = max_attempts.unwrap_or_else(|| schedule.default_max_attempts());
        if max_attempts == 0 || max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(RetryPolicyError::MaxAttempts(max_attempts));
        }
        let ttl = ttl.unwrap_or(DEFAULT_TTL);
        if ms(ttl) == 0 {
            return Err(RetryPolicyError::ZeroTtl);
        }
        Ok(RetryPolicy {
            schedule,
            max_attempts,
            ttl,
        })
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The longest wait [`backoff`] can return.
    pub fn cap(&self) -> Duration {
        self.schedule.cap()
    }

    /// The deadline of a delivery created at `created`: no attempt is scheduled after it.
    pub fn give_up_at(&self, created: Timestamp) -> Timestamp {
        created.plus(self.ttl)
    }
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    RetryAt { at: Timestamp, delay: Duration },
    GiveUp(GiveUpReason),
}

/// Why a delivery went to the dead-letter state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GiveUpReason {
    MaxAttempts,
    Ttl,
}

/// The jittered wait before the next attempt after `failed_attempts` failures (0 = before the
/// first attempt, which is immediate). `prev_delay` feeds decorrelated jitter; other schedules
/// ignore it. Never above [`RetryPolicy::cap`].
pub fn backoff(
    policy: &RetryPolicy,
    failed_attempts: u32,
    prev_delay: Option<Duration>,
    rng: &mut (impl Rng + ?Sized),
) -> Duration {
    if failed_attempts == 0 {
        return Duration::ZERO;
    }
    let millis = match &policy.schedule {
        Schedule::Exponential { base, cap, jitter } => {
            let (base, cap) = (ms(*base), ms(*cap));
            let nominal = 1u64
                .checked_shl(failed_attempts - 1)
                .map_or(u64::MAX, |factor| base.saturating_mul(factor))
                .min(cap);
            match jitter {
                Jitter::Full => rng.random_range(0..=nominal),
                Jitter::Equal => {
                    let half = nominal / 2;
                    half + rng.random_range(0..=nominal - half)
                }
                Jitter::Decorrelated => {
                    let prev = prev_delay.map_or(base, ms);
                    let high = prev.saturating_mul(3).max(base);
                    rng.random_range(base..=high)
                }
            }
            .min(cap)
        }
        listed => {
            let delays = listed.listed().unwrap_or_default();
            let index = usize::try_from(failed_attempts - 1)
                .unwrap_or(usize::MAX)
                .min(delays.len().saturating_sub(1));
            let nominal = delays.get(index).copied().map_or(0, ms);
            let (low, high) = jitter_bounds(nominal);
            rng.random_range(low..=high)
        }
    };
    Duration::from_millis(millis.min(ms(policy.cap())))
}

/// Decides the next attempt after `failed_attempts` attempts (≥ 1) have failed.
///
/// The wait is the longer of the backoff and the receiver's `Retry-After`. The hint is capped at
/// [`MAX_RETRY_AFTER`] and at the time left before `give_up_at`: a receiver asking for a pause
/// postpones the last try to the deadline rather than costing the message it. A backoff that
/// lands past `give_up_at` gives up instead, because the schedule has nothing left to offer.
pub fn next_attempt(
    policy: &RetryPolicy,
    failed_attempts: u32,
    now: Timestamp,
    give_up_at: Timestamp,
    retry_after: Option<Duration>,
    prev_delay: Option<Duration>,
    rng: &mut (impl Rng + ?Sized),
) -> Decision {
    if failed_attempts >= policy.max_attempts {
        return Decision::GiveUp(GiveUpReason::MaxAttempts);
    }
    let computed = backoff(policy, failed_attempts, prev_delay, rng);
    let hint = retry_after
        .unwrap_or_default()
        .min(MAX_RETRY_AFTER)
        .min(give_up_at.since(now));
    let delay = Duration::from_millis(ms(computed.max(hint)));
    let at = now.plus(delay);
    if at > give_up_at {
        return Decision::GiveUp(GiveUpReason::Ttl);
    }
    Decision::RetryAt { at, delay }
}

/// Whole milliseconds, saturating: the unit of every computation here.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The ±20 % range around a listed delay.
fn jitter_bounds(nominal: u64) -> (u64, u64) {
    let spread = nominal / LIST_JITTER_DIVISOR;
    (nominal - spread, nominal.saturating_add(spread))
}

/// The wire shape of [`RetryPolicy`] (DESIGN.md's `retryPolicy` extension field).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RetryPolicySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delays: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    exponential: Option<ExponentialSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_attempts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ttl: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExponentialSpec {
    base: String,
    cap: String,
    #[serde(default)]
    jitter: Jitter,
}

fn parse_field(field: impl Into<String>, input: &str) -> Result<Duration, RetryPolicyError> {
    parse_duration(input).map_err(|_| RetryPolicyError::InvalidDuration {
        field: field.into(),
        input: input.to_owned(),
    })
}

impl TryFrom<RetryPolicySpec> for RetryPolicy {
    type Error = RetryPolicyError;

    fn try_from(spec: RetryPolicySpec) -> Result<Self, Self::Error> {
        let schedule = match (spec.delays, spec.exponential) {
            (Some(_), Some(_)) => return Err(RetryPolicyError::TwoSchedules),
            (None, None) => Schedule::Default,
            (Some(delays), None) => Schedule::Delays(
                delays
                    .iter()
                    .enumerate()
                    .map(|(i, d)| parse_field(format!("delays[{i}]"), d))
                    .collect::<Result<_, _>>()?,
            ),
            (None, Some(e)) => Schedule::Exponential {
                base: parse_field("exponential.base", &e.base)?,
                cap: parse_field("exponential.cap", &e.cap)?,
                jitter: e.jitter,
            },
        };
        let ttl = spec.ttl.map(|t| parse_field("ttl", &t)).transpose()?;
        RetryPolicy::new(schedule, spec.max_attempts, ttl)
    }
}

impl From<RetryPolicy> for RetryPolicySpec {
    fn from(p: RetryPolicy) -> Self {
        let (delays, exponential) = match p.schedule {
            Schedule::Default => (None, None),
            Schedule::Delays(d) => (Some(d.into_iter().map(format_duration).collect()), None),
            Schedule::Exponential { base, cap, jitter } => (
                None,
                Some(ExponentialSpec {
                    base: format_duration(base),
                    cap: format_duration(cap),
                    jitter,
                }),
            ),
        };
        RetryPolicySpec {
            delays,
            exponential,
            max_attempts: Some(p.max_attempts),
            ttl: Some(format_duration(p.ttl)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{RngCore, SeedableRng};

    /// Always yields the same word: all zeros gives the bottom of every range, all ones the top.
    struct ConstRng(u64);

    impl RngCore for ConstRng {
        fn next_u32(&mut self) -> u32 {
            self.0 as u32
        }
        fn next_u64(&mut self) -> u64 {
            self.0
        }
        fn fill_bytes(&mut self, dst: &mut [u8]) {
            for (i, b) in dst.iter_mut().enumerate() {
                *b = self.0.to_le_bytes()[i % 8];
            }
        }
    }

    fn lowest() -> ConstRng {
        ConstRng(0)
    }
    fn highest() -> ConstRng {
        ConstRng(u64::MAX)
    }

    const T0: Timestamp = Timestamp::from_secs(1_700_000_000);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn exponential(base: u64, cap: u64, jitter: Jitter) -> RetryPolicy {
        RetryPolicy::new(
            Schedule::Exponential {
                base: secs(base),
                cap: secs(cap),
                jitter,
            },
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn default_policy() {
        let p = RetryPolicy::default();
        assert_eq!(p, RetryPolicy::new(Schedule::Default, None, None).unwrap());
        assert_eq!(p.max_attempts(), 8);
        assert_eq!(p.ttl(), secs(3 * 24 * 3600));
        assert_eq!(p.cap(), secs(12 * 3600));
        assert_eq!(p.give_up_at(T0), T0.plus(secs(3 * 24 * 3600)));
    }

    #[test]
    fn default_schedule_jitter_stays_within_20_percent() {
        let p = RetryPolicy::default();
        let nominal = [5, 300, 1800, 7200, 18_000, 36_000, 36_000];
        for (i, &n) in nominal.iter().enumerate() {
            let failed = i as u32 + 1;
            assert_eq!(
                backoff(&p, failed, None, &mut lowest()),
                Duration::from_millis(n * 800),
                "after {failed} failures, lowest"
            );
            assert_eq!(
                backoff(&p, failed, None, &mut highest()),
                Duration::from_millis(n * 1200),
                "after {failed} failures, highest"
            );
        }
        // Attempt 1 is immediate.
        assert_eq!(backoff(&p, 0, None, &mut highest()), Duration::ZERO);

        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..1000 {
            for (i, &n) in nominal.iter().enumerate() {
                let d = backoff(&p, i as u32 + 1, None, &mut rng).as_millis() as u64;
                assert!((n * 800..=n * 1200).contains(&d), "{d}ms for nominal {n}s");
            }
        }
    }

    #[test]
    fn default_run_has_eight_attempts_then_gives_up() {
        let p = RetryPolicy::default();
        let give_up_at = p.give_up_at(T0);
        let mut now = T0;
        let mut rng = highest();
        let mut waits = vec![];
        for failed in 1..8 {
            match next_attempt(&p, failed, now, give_up_at, None, None, &mut rng) {
                Decision::RetryAt { at, delay } => {
                    assert_eq!(at, now.plus(delay));
                    waits.push(delay.as_secs());
                    now = at;
                }
                other => panic!("after {failed} failures: {other:?}"),
            }
        }
        assert_eq!(waits, [6, 360, 2160, 8640, 21_600, 43_200, 43_200]);
        assert_eq!(
            next_attempt(&p, 8, now, give_up_at, None, None, &mut rng),
            Decision::GiveUp(GiveUpReason::MaxAttempts)
        );
    }

    #[test]
    fn retry_after_wins_when_longer() {
        let p = RetryPolicy::default();
        let gu = p.give_up_at(T0);
        assert_eq!(
            next_attempt(&p, 1, T0, gu, Some(secs(60)), None, &mut highest()),
            Decision::RetryAt {
                at: T0.plus(secs(60)),
                delay: secs(60)
            }
        );
        // Shorter than the backoff: the backoff stands (never retry sooner than scheduled).
        assert_eq!(
            next_attempt(&p, 1, T0, gu, Some(secs(1)), None, &mut highest()),
            Decision::RetryAt {
                at: T0.plus(secs(6)),
                delay: secs(6)
            }
        );
    }

    #[test]
    fn retry_after_is_capped() {
        let p = RetryPolicy::default();
        let gu = p.give_up_at(T0);
        assert_eq!(
            next_attempt(&p, 1, T0, gu, Some(secs(7 * 86_400)), None, &mut lowest()),
            Decision::RetryAt {
                at: T0.plus(MAX_RETRY_AFTER),
                delay: MAX_RETRY_AFTER
            }
        );
        // Near the deadline the hint is cut to the deadline: one last try, not a give-up.
        let now = Timestamp::from_millis(gu.as_millis() - 600_000);
        assert_eq!(
            next_attempt(&p, 1, now, gu, Some(secs(3600)), None, &mut lowest()),
            Decision::RetryAt {
                at: gu,
                delay: secs(600)
            }
        );
    }

    #[test]
    fn backoff_past_the_deadline_gives_up() {
        let p = RetryPolicy::new(Schedule::Default, None, Some(secs(3600))).unwrap();
        let gu = p.give_up_at(T0);
        // After 3 failures the next wait is ~30 min; with 20 min left that is past the TTL.
        let now = T0.plus(secs(40 * 60));
        assert_eq!(
            next_attempt(&p, 3, now, gu, None, None, &mut lowest()),
            Decision::GiveUp(GiveUpReason::Ttl)
        );
        // Max attempts is checked first.
        assert_eq!(
            next_attempt(&p, 8, now, gu, None, None, &mut lowest()),
            Decision::GiveUp(GiveUpReason::MaxAttempts)
        );
        // Already past the deadline: even an immediate retry is refused.
        let p0 = RetryPolicy::new(Schedule::Delays(vec![Duration::ZERO]), None, None).unwrap();
        assert_eq!(
            next_attempt(&p0, 1, gu.plus(secs(1)), gu, None, None, &mut lowest()),
            Decision::GiveUp(GiveUpReason::Ttl)
        );
    }

    #[test]
    fn explicit_delays() {
        let p = RetryPolicy::new(
            Schedule::Delays(vec![Duration::from_millis(100), secs(1), secs(10)]),
            None,
            None,
        )
        .unwrap();
        assert_eq!(p.max_attempts(), 4);
        assert_eq!(p.cap(), secs(12));
        let lows: Vec<_> = (1..=5)
            .map(|n| backoff(&p, n, None, &mut lowest()).as_millis())
            .collect();
        // The last delay repeats past the end of the list.
        assert_eq!(lows, [80, 800, 8000, 8000, 8000]);
        let highs: Vec<_> = (1..=3)
            .map(|n| backoff(&p, n, None, &mut highest()).as_millis())
            .collect();
        assert_eq!(highs, [120, 1200, 12_000]);

        let p = RetryPolicy::new(Schedule::Delays(vec![secs(60)]), Some(10), None).unwrap();
        assert_eq!(p.max_attempts(), 10);
        assert_eq!(backoff(&p, 9, None, &mut lowest()), secs(48));
    }

    #[test]
    fn exponential_full_jitter() {
        let p = exponential(1, 60, Jitter::Full);
        assert_eq!(p.cap(), secs(60));
        for n in 1..=10 {
            assert_eq!(backoff(&p, n, None, &mut lowest()), Duration::ZERO);
        }
        let highs: Vec<_> = (1..=8)
            .map(|n| backoff(&p, n, None, &mut highest()).as_secs())
            .collect();
        assert_eq!(highs, [1, 2, 4, 8, 16, 32, 60, 60]);
        // A huge attempt count saturates at the cap instead of overflowing.
        assert_eq!(backoff(&p, 99, None, &mut highest()), secs(60));
    }

    #[test]
    fn exponential_equal_jitter() {
        let p = exponential(1, 60, Jitter::Equal);
        let lows: Vec<_> = (1..=8)
            .map(|n| backoff(&p, n, None, &mut lowest()).as_millis())
            .collect();
        assert_eq!(lows, [500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
        let highs: Vec<_> = (1..=8)
            .map(|n| backoff(&p, n, None, &mut highest()).as_secs())
            .collect();
        assert_eq!(highs, [1, 2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn exponential_decorrelated_jitter() {
        let p = exponential(2, 60, Jitter::Decorrelated);
        // First retry: rand(base, base·3).
        assert_eq!(backoff(&p, 1, None, &mut lowest()), secs(2));
        assert_eq!(backoff(&p, 1, None, &mut highest()), secs(6));
        // Then it grows from the previous delay, not from the attempt count.
        assert_eq!(backoff(&p, 5, Some(secs(10)), &mut highest()), secs(30));
        assert_eq!(backoff(&p, 5, Some(secs(10)), &mut lowest()), secs(2));
        assert_eq!(backoff(&p, 2, Some(secs(50)), &mut highest()), secs(60));
        // A previous delay below base/3 still draws from [base, base].
        assert_eq!(
            backoff(&p, 2, Some(Duration::ZERO), &mut highest()),
            secs(2)
        );
    }

    #[test]
    fn invalid_policies_name_their_field() {
        let d = Duration::from_secs;
        let cases: Vec<(Result<RetryPolicy, RetryPolicyError>, &str)> = vec![
            (
                RetryPolicy::new(Schedule::Default, Some(0), None),
                "maxAttempts",
            ),
            (
                RetryPolicy::new(Schedule::Default, Some(101), None),
                "maxAttempts",
            ),
            (
                RetryPolicy::new(Schedule::Delays(vec![]), None, None),
                "delays",
            ),
            (
                RetryPolicy::new(Schedule::Delays(vec![d(1); 100]), None, None),
                "delays",
            ),
            (
                RetryPolicy::new(Schedule::Default, None, Some(Duration::ZERO)),
                "ttl",
            ),
            (
                RetryPolicy::new(
                    Schedule::Exponential {
                        base: d(10),
                        cap: d(5),
                        jitter: Jitter::Full,
                    },
                    None,
                    None,
                ),
                "exponential.base",
            ),
            (
                RetryPolicy::new(
                    Schedule::Exponential {
                        base: Duration::ZERO,
                        cap: d(5),
                        jitter: Jitter::Full,
                    },
                    None,
                    None,
                ),
                "exponential.base",
            ),
            (
                RetryPolicy::new(
                    Schedule::Exponential {
                        base: Duration::ZERO,
                        cap: Duration::ZERO,
                        jitter: Jitter::Equal,
                    },
                    None,
                    None,
                ),
                "exponential.base",
            ),
        ];
        for (result, field) in cases {
            let err = result.unwrap_err();
            assert_eq!(err.field(), field, "{err}");
            assert!(err.to_string().contains(field), "{err}");
        }
        assert_eq!(
            RetryPolicy::new(Schedule::Default, Some(0), None)
                .unwrap_err()
                .to_string(),
            "maxAttempts must be between 1 and 100, got 0"
        );
        // 99 delays + the first attempt = 100 attempts: the limit, allowed.
        let longest = RetryPolicy::new(Schedule::Delays(vec![d(1); 99]), None, None).unwrap();
        assert_eq!(longest.max_attempts(), 100);
        assert!(RetryPolicy::new(Schedule::Default, Some(100), None).is_ok());
        let zero_cap = RetryPolicyError::ZeroCap;
        assert_eq!(zero_cap.field(), "exponential.cap");
    }

    #[test]
    fn json_shape() {
        let p: RetryPolicy = serde_json::from_str("{}").unwrap();
        assert_eq!(p, RetryPolicy::default());

        let p: RetryPolicy =
            serde_json::from_str(r#"{"delays": ["100ms", "1s", "2h"], "ttl": "1d"}"#).unwrap();
        assert_eq!(
            p.schedule(),
            &Schedule::Delays(vec![Duration::from_millis(100), secs(1), secs(7200)])
        );
        assert_eq!(p.max_attempts(), 4);
        assert_eq!(p.ttl(), secs(86_400));
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"delays": ["100ms", "1s", "2h"], "maxAttempts": 4, "ttl": "1d"})
        );

        let p: RetryPolicy = serde_json::from_str(
            r#"{"exponential": {"base": "1s", "cap": "1h", "jitter": "decorrelated"},
                "maxAttempts": 12}"#,
        )
        .unwrap();
        assert_eq!(p, {
            let s = Schedule::Exponential {
                base: secs(1),
                cap: secs(3600),
                jitter: Jitter::Decorrelated,
            };
            RetryPolicy::new(s, Some(12), None).unwrap()
        });
        let back: RetryPolicy = serde_json::from_value(serde_json::to_value(&p).unwrap()).unwrap();
        assert_eq!(back, p);

        // Jitter defaults to full.
        let p: RetryPolicy =
            serde_json::from_str(r#"{"exponential": {"base": "1s", "cap": "1m"}}"#).unwrap();
        assert!(matches!(
            p.schedule(),
            Schedule::Exponential {
                jitter: Jitter::Full,
                ..
            }
        ));
    }

    #[test]
    fn json_errors_name_the_field() {
        for (json, needle) in [
            (r#"{"delays": ["1s", "soon"]}"#, "delays[1]"),
            (r#"{"delays": []}"#, "delays"),
            (r#"{"ttl": "3 days"}"#, "ttl"),
            (r#"{"maxAttempts": 0}"#, "maxAttempts"),
            (
                r#"{"exponential": {"base": "1h", "cap": "1s"}}"#,
                "exponential.base",
            ),
            (
                r#"{"delays": ["1s"], "exponential": {"base": "1s", "cap": "1h"}}"#,
                "either delays or exponential",
            ),
            (r#"{"maxAttempt": 3}"#, "maxAttempt"),
            (
                r#"{"exponential": {"base": "1s", "cap": "1h", "jitter": "half"}}"#,
                "half",
            ),
        ] {
            let err = serde_json::from_str::<RetryPolicy>(json).unwrap_err();
            assert!(err.to_string().contains(needle), "{json}: {err}");
        }
    }

    fn any_policy() -> impl Strategy<Value = RetryPolicy> {
        let schedule = prop_oneof![
            Just(Schedule::Default),
            proptest::collection::vec(0u64..=20 * 86_400_000, 1..12)
                .prop_map(|d| Schedule::Delays(d.into_iter().map(Duration::from_millis).collect())),
            (
                1u64..=3_600_000,
                1u64..=7 * 86_400_000,
                prop_oneof![
                    Just(Jitter::Full),
                    Just(Jitter::Equal),
                    Just(Jitter::Decorrelated)
                ]
            )
                .prop_map(|(base, cap, jitter)| Schedule::Exponential {
                    base: Duration::from_millis(base.min(cap)),
                    cap: Duration::from_millis(cap),
                    jitter,
                }),
        ];
        (
            schedule,
            proptest::option::of(1u32..=MAX_ATTEMPTS_LIMIT),
            1u64..=30 * 86_400_000,
        )
            .prop_map(|(s, max, ttl)| {
                RetryPolicy::new(s, max, Some(Duration::from_millis(ttl))).unwrap()
            })
    }

    proptest! {
        #[test]
        fn backoff_never_exceeds_the_cap(
            policy in any_policy(),
            failed in 0u32..=200,
            prev in proptest::option::of(any::<u64>()),
            seed in any::<u64>(),
        ) {
            let mut rng = StdRng::seed_from_u64(seed);
            let prev = prev.map(Duration::from_millis);
            let d = backoff(&policy, failed, prev, &mut rng);
            prop_assert!(d <= policy.cap(), "{d:?} > {:?}", policy.cap());
        }

        #[test]
        fn a_run_of_failures_respects_attempts_and_ttl(
            policy in any_policy(),
            hints in proptest::collection::vec(proptest::option::of(0u64..=2 * 86_400_000), 100),
            seed in any::<u64>(),
        ) {
            let mut rng = StdRng::seed_from_u64(seed);
            let give_up_at = policy.give_up_at(T0);
            let mut now = T0;
            let mut attempts = 1u32;
            let mut prev = None;
            let reason = loop {
                let hint = hints[attempts as usize % hints.len()].map(Duration::from_millis);
                match next_attempt(&policy, attempts, now, give_up_at, hint, prev, &mut rng) {
                    Decision::RetryAt { at, delay } => {
                        prop_assert!(at <= give_up_at, "{at:?} past {give_up_at:?}");
                        prop_assert_eq!(at, now.plus(delay));
                        prop_assert!(delay <= policy.cap().max(MAX_RETRY_AFTER));
                        now = at;
                        prev = Some(delay);
                        attempts += 1;
                        prop_assert!(attempts <= policy.max_attempts());
                    }
                    Decision::GiveUp(reason) => break reason,
                }
            };
            prop_assert!(attempts <= policy.max_attempts());
            if reason == GiveUpReason::MaxAttempts {
                prop_assert_eq!(attempts, policy.max_attempts());
            }
        }

        #[test]
        fn json_round_trips(policy in any_policy()) {
            let json = serde_json::to_string(&policy).unwrap();
            let back: RetryPolicy = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back, policy);
        }
    }
}
