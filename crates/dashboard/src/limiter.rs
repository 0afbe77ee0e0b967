//! Failed-login limiting: at most `MAX_FAILURES` failed logins per email and client address
//! within `WINDOW`; a success clears the count. Kept in memory, per process: it slows down
//! password guessing, it is not an account lock-out.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

pub const MAX_FAILURES: usize = 5;
pub const WINDOW: Duration = Duration::from_secs(5 * 60);
/// Beyond this many tracked keys, expired ones are dropped on the next failure.
const PRUNE_ABOVE: usize = 10_000;

/// Process-wide: `configure` runs once per HTTP worker, and the limit must hold across them.
pub static LOGIN_LIMITER: LazyLock<LoginLimiter> = LazyLock::new(LoginLimiter::default);

#[derive(Default)]
pub struct LoginLimiter {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

impl LoginLimiter {
    /// `Err(wait)` while the key has used up its failures; `wait` is until one expires.
    pub fn check(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let Some(times) = map.get(key) else {
            return Ok(());
        };
        let recent: Vec<&Instant> = times
            .iter()
            .filter(|t| now.duration_since(**t) < WINDOW)
            .collect();
        if recent.len() < MAX_FAILURES {
            return Ok(());
        }
        let oldest = recent.iter().min().map_or(now, |t| **t);
        Err(WINDOW.saturating_sub(now.duration_since(oldest)))
    }

    pub fn record_failure(&self, key: &str, now: Instant) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > PRUNE_ABOVE {
            map.retain(|_, times| times.iter().any(|t| now.duration_since(*t) < WINDOW));
        }
        let times = map.entry(key.to_owned()).or_default();
        times.retain(|t| now.duration_since(*t) < WINDOW);
        times.push(now);
    }

    pub fn clear(&self, key: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_failures_lock_the_key_for_the_rest_of_the_window() {
        let l = LoginLimiter::default();
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            assert_eq!(l.check("a|1.2.3.4", t0), Ok(()), "failure {i}");
            l.record_failure("a|1.2.3.4", t0 + Duration::from_secs(i as u64));
        }
        let wait = l.check("a|1.2.3.4", t0 + Duration::from_secs(60));
        assert_eq!(wait, Err(WINDOW - Duration::from_secs(60)));
        // Other keys are not affected.
        assert_eq!(l.check("a|5.6.7.8", t0), Ok(()));
        assert_eq!(l.check("b|1.2.3.4", t0), Ok(()));
        // The oldest failure leaves the window: one more try.
        assert_eq!(l.check("a|1.2.3.4", t0 + WINDOW), Ok(()));
    }

    #[test]
    fn success_clears_the_count() {
        let l = LoginLimiter::default();
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES {
            l.record_failure("k", t0);
        }
        assert!(l.check("k", t0).is_err());
        l.clear("k");
        assert_eq!(l.check("k", t0), Ok(()));
    }
}
