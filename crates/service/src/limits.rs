//! Per-tenant ingest rate limits: a token bucket per tenant (its own rate and burst, or the
//! operator's defaults), split evenly across the live API processes so that the whole cluster
//! admits about the configured rate.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use domain::ids::TenantId;
use governor::clock::{Clock, DefaultClock};
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use store::Store;

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

/// How long a tenant's own rate and burst are trusted before being read again.
const QUOTA_TTL: Duration = Duration::from_secs(30);
/// Buckets are looked over for idle ones at most this often, once there are more than
/// `EVICT_ABOVE` of them.
const EVICT_EVERY: Duration = Duration::from_secs(60);
const EVICT_ABOVE: usize = 256;

struct Bucket {
    limiter: Limiter,
    /// (rate, burst, nodes) the limiter was built for.
    built_for: (u32, u32, u32),
    read_at: Instant,
}

pub struct IngestLimits {
    default_rate: u32,
    default_burst: u32,
    live_nodes: AtomicU32,
    clock: DefaultClock,
    buckets: Mutex<HashMap<TenantId, Bucket>>,
    last_eviction: Mutex<Instant>,
}

impl Bucket {
    /// Whether forgetting the bucket changes nothing: its tenant has been idle long enough
    /// for it to have refilled, so a new (full) one is the same. `read_at` is refreshed every
    /// `QUOTA_TTL` while the tenant sends, so the tenant has been idle at least
    /// `elapsed - QUOTA_TTL`.
    fn is_idle_and_full(&self, now: Instant) -> bool {
        let (rate, burst, nodes) = self.built_for;
        let refill = Duration::from_secs_f64(
            f64::from(per_node(burst, nodes)) / f64::from(per_node(rate, nodes)),
        );
        now.saturating_duration_since(self.read_at) > QUOTA_TTL + refill.max(QUOTA_TTL)
    }
}

/// Drops buckets that a new one would equal, so memory follows active tenants, not every
/// tenant ever seen.
fn evict_idle(buckets: &mut HashMap<TenantId, Bucket>, now: Instant) -> usize {
    let before = buckets.len();
    buckets.retain(|_, b| !b.is_idle_and_full(now));
    before - buckets.len()
}

impl std::fmt::Debug for IngestLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngestLimits")
            .field("default_rate", &self.default_rate)
            .field("default_burst", &self.default_burst)
            .field("live_nodes", &self.live_nodes.load(Ordering::Relaxed))
            .finish()
    }
}

/// This node's share of a cluster-wide limit: never below one.
pub fn per_node(total: u32, nodes: u32) -> u32 {
    total.div_ceil(nodes.max(1)).max(1)
}

impl IngestLimits {
    pub fn new(default_rate: u32, default_burst: u32) -> Self {
        IngestLimits {
            default_rate,
            default_burst,
            live_nodes: AtomicU32::new(1),
            clock: DefaultClock::default(),
            buckets: Mutex::new(HashMap::new()),
            last_eviction: Mutex::new(Instant::now()),
        }
    }

    /// How many API processes share the limits (from heartbeats).
    pub fn set_live_nodes(&self, n: u32) {
        self.live_nodes.store(n.max(1), Ordering::Relaxed);
    }

    /// Takes one token for `tenant`, or says how long until one is free.
    pub async fn check(&self, store: &Store, tenant: TenantId) -> Result<(), Duration> {
        let stale = {
            let buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
            buckets
                .get(&tenant)
                .is_none_or(|b| b.read_at.elapsed() > QUOTA_TTL)
        };
        let quota = if stale {
            // The tenant's own limits; the defaults when unset or unreadable.
            let t = store.get_tenant(tenant).await.ok();
            let rate = t
                .as_ref()
                .and_then(|t| t.ingest_rate)
                .and_then(|r| u32::try_from(r).ok());
            let burst = t
                .as_ref()
                .and_then(|t| t.ingest_burst)
                .and_then(|b| u32::try_from(b).ok());
            Some((
                rate.unwrap_or(self.default_rate),
                burst.unwrap_or(self.default_burst),
            ))
        } else {
            None
        };
        let nodes = self.live_nodes.load(Ordering::Relaxed).max(1);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let (rate, burst) = match (quota, buckets.get(&tenant)) {
            (Some(q), _) => q,
            (None, Some(b)) => (b.built_for.0, b.built_for.1),
            (None, None) => (self.default_rate, self.default_burst),
        };
        let wanted = (rate, burst, nodes);
        let rebuild = buckets.get(&tenant).is_none_or(|b| b.built_for != wanted);
        if rebuild {
            if buckets.len() > EVICT_ABOVE {
                let mut last = self.last_eviction.lock().unwrap_or_else(|p| p.into_inner());
                if last.elapsed() > EVICT_EVERY {
                    *last = Instant::now();
                    evict_idle(&mut buckets, Instant::now());
                }
            }
            let r = NonZeroU32::new(per_node(rate, nodes)).unwrap_or(NonZeroU32::MIN);
            let b = NonZeroU32::new(per_node(burst, nodes)).unwrap_or(NonZeroU32::MIN);
            buckets.insert(
                tenant,
                Bucket {
                    limiter: RateLimiter::direct(Quota::per_second(r).allow_burst(b)),
                    built_for: wanted,
                    read_at: Instant::now(),
                },
            );
        } else if let (Some(_), Some(b)) = (quota, buckets.get_mut(&tenant)) {
            b.read_at = Instant::now();
        }
        let bucket = buckets.get(&tenant).ok_or(Duration::from_secs(1))?;
        bucket
            .limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_buckets_idle_long_enough_to_have_refilled_are_evicted() {
        let now = Instant::now();
        let bucket = |rate, burst, idle_secs| Bucket {
            limiter: RateLimiter::direct(Quota::per_second(NonZeroU32::MIN)),
            built_for: (rate, burst, 1),
            read_at: now
                .checked_sub(Duration::from_secs(idle_secs))
                .unwrap_or(now),
        };
        let mut map = HashMap::new();
        let (busy, idle, slow) = (TenantId::new(), TenantId::new(), TenantId::new());
        map.insert(busy, bucket(5000, 10_000, 10));
        map.insert(idle, bucket(5000, 10_000, 120));
        // 1 message/s with a burst of 600 takes 10 minutes to refill.
        map.insert(slow, bucket(1, 600, 120));
        if now.checked_sub(Duration::from_secs(120)).is_none() {
            return; // the machine has been up less than two minutes
        }
        assert_eq!(evict_idle(&mut map, now), 1);
        assert!(map.contains_key(&busy) && map.contains_key(&slow) && !map.contains_key(&idle));
    }

    #[test]
    fn limits_split_across_nodes_without_reaching_zero() {
        assert_eq!(per_node(1000, 1), 1000);
        assert_eq!(per_node(1000, 3), 334);
        assert_eq!(per_node(2, 5), 1);
        assert_eq!(per_node(10, 0), 10);
    }
}
