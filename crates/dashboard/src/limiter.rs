//! What an unauthenticated client can make the server do at the login and sign-up forms:
//!
//! - password hashing (argon2, 19 MiB and ~50 ms of CPU each) runs at most
//!   `hash_concurrency` at a time in the whole process, with a short bounded line behind it;
//!   past that the form answers 429 with `Retry-After`, so a burst costs a fixed amount of
//!   memory instead of 19 MiB per request;
//! - each client address (an IPv6 client by its /64) has a token bucket for login attempts and
//!   one for sign-ups, whatever the email; past the login bucket an attempt waits for its turn
//!   (up to `LOGIN_WAIT`) instead of being refused, so guesses from one address stay at the
//!   bucket's rate while the right password, even from an address a guesser shares (a proxy,
//!   a NAT), still logs in;
//! - failed logins for one email are slowed down, never refused: after `FREE_FAILURES` failures
//!   within `WINDOW`, each further failed attempt is answered after a growing delay, while the
//!   right password always logs in at once (a stranger cannot lock an owner out).
//!
//! Kept in memory, per process, and bounded: idle buckets and old failures are dropped.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use tokio::sync::Semaphore;

/// Failed logins for one email that cost nothing extra.
pub const FREE_FAILURES: usize = 5;
/// How long a failed login counts.
pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// The longest delay added to a failed login.
pub const MAX_DELAY: Duration = Duration::from_secs(16);
/// Beyond this many emails with failures, expired ones are dropped; beyond twice as many, the
/// oldest are (memory stays bounded under a flood of made-up emails).
const MAX_EMAILS: usize = 10_000;
/// How long a request may wait in line for a hashing slot before it is answered 429.
const HASH_WAIT: Duration = Duration::from_secs(2);
/// How long a login past its address's bucket waits for a turn before it is answered 429:
/// one turn comes every `60 / logins_per_minute` s (3 s by default), so a lone user always gets
/// one; only many waiting at once from one address can run out of time.
pub const LOGIN_WAIT: Duration = Duration::from_secs(30);

/// The settings behind [`AuthLimits`].
#[derive(Clone, Debug)]
pub struct AuthLimitConfig {
    /// argon2 runs at once in this process.
    pub hash_concurrency: usize,
    /// Login attempts per client address per minute (also the burst).
    pub logins_per_minute: u32,
    /// Sign-ups per client address per hour (also the burst).
    pub signups_per_hour: u32,
    /// Proxies whose `X-Forwarded-For` is believed.
    pub trusted_proxies: domain::endpoint_url::AllowList,
}

impl Default for AuthLimitConfig {
    fn default() -> Self {
        AuthLimitConfig {
            hash_concurrency: 2,
            logins_per_minute: 20,
            signups_per_hour: 10,
            trusted_proxies: Default::default(),
        }
    }
}

type Keyed = RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock>;
type ByAddress = RateLimiter<String, DefaultKeyedStateStore<String>, DefaultClock>;

/// Sign-up emails one address may receive per hour, whoever asks: without it, anyone could
/// make hookd mail a stranger without end (each client address may only sign up
/// `signups_per_hour` times, but there are many client addresses).
pub const MAILS_PER_ADDRESS_PER_HOUR: u32 = 3;

/// Process-wide limits of the login and sign-up forms (one per server, shared by its workers).
pub struct AuthLimits {
    config: AuthLimitConfig,
    hashing: Semaphore,
    /// argon2's working memory, one buffer per slot, reused.
    memory: std::sync::Arc<crate::password::MemoryPool>,
    /// Places in line for `hashing` (the requests running count too).
    line: Semaphore,
    logins: Keyed,
    signups: Keyed,
    mails: ByAddress,
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

/// Refused: try again after this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy(pub Duration);

impl Busy {
    /// Whole seconds for `Retry-After`, at least 1.
    pub fn retry_after_secs(self) -> u64 {
        self.0.as_secs_f64().ceil().max(1.0) as u64
    }
}

fn per(n: u32, period: Duration) -> Quota {
    let n = NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN);
    Quota::with_period(period / n.get())
        .unwrap_or_else(|| Quota::per_second(n))
        .allow_burst(n)
}

impl AuthLimits {
    pub fn new(config: AuthLimitConfig) -> Self {
        let slots = config.hash_concurrency.max(1);
        AuthLimits {
            hashing: Semaphore::new(slots),
            memory: std::sync::Arc::new(crate::password::MemoryPool::new(slots)),
            line: Semaphore::new(slots * 8),
            logins: RateLimiter::keyed(per(config.logins_per_minute, Duration::from_secs(60))),
            signups: RateLimiter::keyed(per(config.signups_per_hour, Duration::from_secs(3600))),
            mails: RateLimiter::keyed(per(MAILS_PER_ADDRESS_PER_HOUR, Duration::from_secs(3600))),
            failures: Mutex::new(HashMap::new()),
            config,
        }
    }

    /// Runs `work` (a password hash or verify, given the working memory) when a hashing slot
    /// is free, on the blocking pool; `Busy` when the line is full or the wait too long.
    pub async fn hash<T: Send + 'static>(
        &self,
        work: impl FnOnce(&crate::password::MemoryPool) -> T + Send + 'static,
    ) -> Result<Option<T>, Busy> {
        let Ok(_place) = self.line.try_acquire() else {
            return Err(Busy(Duration::from_secs(1)));
        };
        let permit = match tokio::time::timeout(HASH_WAIT, self.hashing.acquire()).await {
            Ok(Ok(p)) => p,
            _ => return Err(Busy(Duration::from_secs(1))),
        };
        let memory = self.memory.clone();
        let out = actix_web::web::block(move || work(&memory)).await.ok();
        drop(permit);
        Ok(out)
    }

    /// Takes a login attempt from the client's bucket, waiting for the next one when it is
    /// empty: every password check counts (the right one too, or a guesser would learn from a
    /// refusal which guess was right), but a check is delayed, not refused, so a client that
    /// shares the address with a guesser still logs in. `Busy` only after [`LOGIN_WAIT`].
    pub async fn login_turn(&self, client: IpAddr) -> Result<(), Busy> {
        let deadline = tokio::time::Instant::now() + LOGIN_WAIT;
        loop {
            match take(&self.logins, client) {
                Ok(()) => return Ok(()),
                Err(Busy(wait)) if tokio::time::Instant::now() + wait <= deadline => {
                    tokio::time::sleep(wait).await;
                }
                Err(busy) => return Err(busy),
            }
        }
    }

    /// Takes a sign-up from the client's bucket.
    pub fn signup_attempt(&self, client: IpAddr) -> Result<(), Busy> {
        take(&self.signups, client)
    }

    /// Whether one more sign-up email may go to `email` now.
    pub fn mail_to(&self, email: &str) -> bool {
        if self.mails.len() > 100_000 {
            self.mails.retain_recent();
        }
        self.mails.check_key(&email.to_owned()).is_ok()
    }

    /// Records a failed login for `email`; returns how long to hold the answer back.
    pub fn failed_login(&self, email: &str, now: Instant) -> Duration {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_EMAILS && !map.contains_key(email) {
            map.retain(|_, times| times.iter().any(|t| now.duration_since(*t) < WINDOW));
            if map.len() >= 2 * MAX_EMAILS {
                map.clear();
            }
        }
        let times = map.entry(email.to_owned()).or_default();
        times.retain(|t| now.duration_since(*t) < WINDOW);
        // At most enough to reach the longest delay: the list stays short.
        if times.len() < FREE_FAILURES + 8 {
            times.push(now);
        }
        delay_after(times.len())
    }

    /// A successful login forgets the email's failures.
    pub fn logged_in(&self, email: &str) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(email);
    }

    /// The client's address: the socket's peer, or when that peer is a trusted proxy, the
    /// nearest address in `X-Forwarded-For` that is not one (anything further left could have
    /// been written by the client itself).
    pub fn client_ip(&self, req: &actix_web::HttpRequest) -> IpAddr {
        let peer = req
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::from([0, 0, 0, 0]));
        client_ip(peer, forwarded_for(req), &self.config.trusted_proxies)
    }

    /// Whether the request came straight from a trusted proxy, whose `X-Forwarded-*` headers
    /// are then believed.
    pub fn from_trusted_proxy(&self, req: &actix_web::HttpRequest) -> bool {
        req.peer_addr()
            .is_some_and(|a| self.config.trusted_proxies.contains(a.ip()))
    }

    /// Drops idle buckets (called now and then).
    pub fn shrink(&self) {
        self.logins.retain_recent();
        self.signups.retain_recent();
        self.mails.retain_recent();
        self.logins.shrink_to_fit();
        self.signups.shrink_to_fit();
        self.mails.shrink_to_fit();
    }
}

fn take(limiter: &Keyed, client: IpAddr) -> Result<(), Busy> {
    if limiter.len() > 100_000 {
        limiter.retain_recent();
    }
    limiter
        .check_key(&bucket_of(client))
        .map_err(|not_until| Busy(not_until.wait_time_from(DefaultClock::default().now())))
}

/// An IPv6 client is counted by its /64: one host usually holds the whole prefix.
fn bucket_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The delay for a failed login that is the `n`th within the window: none for the first
/// `FREE_FAILURES`, then 1 s, 2 s, 4 s … up to `MAX_DELAY`.
pub fn delay_after(n: usize) -> Duration {
    if n <= FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (n - FREE_FAILURES - 1).min(10) as u32;
    Duration::from_secs(1u64 << doublings).min(MAX_DELAY)
}

fn forwarded_for(req: &actix_web::HttpRequest) -> Vec<IpAddr> {
    req.headers()
        .get_all("x-forwarded-for")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map_while(|s| s.trim().parse::<IpAddr>().ok())
        .collect()
}

fn client_ip(
    peer: IpAddr,
    forwarded: Vec<IpAddr>,
    trusted: &domain::endpoint_url::AllowList,
) -> IpAddr {
    if !trusted.contains(peer) {
        return peer;
    }
    // From the right: each hop appended the address it received from.
    let mut client = peer;
    for hop in forwarded.into_iter().rev() {
        client = hop;
        if !trusted.contains(hop) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::endpoint_url::AllowList;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn failed_logins_are_slowed_down_never_refused() {
        let l = AuthLimits::new(AuthLimitConfig::default());
        let t0 = Instant::now();
        let delays: Vec<u64> = (0..10)
            .map(|_| l.failed_login("a@x.com", t0).as_secs())
            .collect();
        assert_eq!(delays, [0, 0, 0, 0, 0, 1, 2, 4, 8, 16]);
        assert_eq!(l.failed_login("a@x.com", t0).as_secs(), 16, "capped");
        // Another email is not affected; a success forgets the failures.
        assert_eq!(l.failed_login("b@x.com", t0), Duration::ZERO);
        l.logged_in("a@x.com");
        assert_eq!(l.failed_login("a@x.com", t0), Duration::ZERO);
        // Failures leave the window.
        for _ in 0..10 {
            l.failed_login("c@x.com", t0);
        }
        assert_eq!(l.failed_login("c@x.com", t0 + WINDOW), Duration::ZERO);
    }

    #[test]
    fn a_flood_of_made_up_emails_stays_bounded() {
        let l = AuthLimits::new(AuthLimitConfig::default());
        let t0 = Instant::now();
        for i in 0..(3 * MAX_EMAILS) {
            l.failed_login(&format!("{i}@x.com"), t0);
        }
        assert!(l.failures.lock().unwrap().len() <= 2 * MAX_EMAILS);
    }

    #[test]
    fn per_client_buckets_ignore_the_email_and_count_an_ipv6_prefix_once() {
        let l = AuthLimits::new(AuthLimitConfig {
            logins_per_minute: 3,
            ..Default::default()
        });
        for _ in 0..3 {
            assert!(take(&l.logins, ip("10.0.0.1")).is_ok());
        }
        let busy = take(&l.logins, ip("10.0.0.1")).unwrap_err();
        assert!(busy.retry_after_secs() >= 1 && busy.0 <= Duration::from_secs(20));
        assert!(take(&l.logins, ip("10.0.0.2")).is_ok(), "another client");
        for i in 0..3 {
            assert!(take(&l.logins, ip(&format!("2001:db8::{i}"))).is_ok());
        }
        assert!(
            take(&l.logins, ip("2001:db8::ffff")).is_err(),
            "the same /64"
        );
    }

    #[actix_web::test]
    async fn past_the_bucket_a_login_waits_for_its_turn() {
        let l = AuthLimits::new(AuthLimitConfig {
            logins_per_minute: 120,
            ..Default::default()
        });
        let started = std::time::Instant::now();
        for _ in 0..122 {
            assert!(l.login_turn(ip("10.0.0.1")).await.is_ok());
        }
        // The burst of 120 at once, then one turn every 0.5 s.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(900), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
    }

    #[test]
    fn forwarded_for_is_believed_only_from_trusted_proxies() {
        let trusted = AllowList::parse("10.0.0.0/8").unwrap();
        let xff = vec![ip("6.6.6.6"), ip("203.0.113.7"), ip("10.0.0.9")];
        // Straight from the internet: the header is the client's own writing.
        assert_eq!(
            client_ip(ip("198.51.100.1"), xff.clone(), &trusted),
            ip("198.51.100.1")
        );
        // Through our proxies: the nearest untrusted hop, not the spoofable leftmost one.
        assert_eq!(client_ip(ip("10.0.0.1"), xff, &trusted), ip("203.0.113.7"));
        assert_eq!(client_ip(ip("10.0.0.1"), vec![], &trusted), ip("10.0.0.1"));
        assert_eq!(
            client_ip(ip("127.0.0.1"), vec![ip("1.2.3.4")], &AllowList::default()),
            ip("127.0.0.1")
        );
    }

    #[actix_web::test]
    async fn hashing_beyond_the_line_is_refused_not_queued_without_bound() {
        let l = std::sync::Arc::new(AuthLimits::new(AuthLimitConfig {
            hash_concurrency: 1,
            ..Default::default()
        }));
        // One running and seven waiting fill the line of 8; the ninth is refused at once.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let mut running = Vec::new();
        for _ in 0..8 {
            let (l, rx) = (l.clone(), rx.clone());
            running.push(tokio::spawn(async move {
                l.hash(move |_| {
                    let _ = rx.lock().unwrap().recv_timeout(Duration::from_secs(5));
                })
                .await
            }));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(l.hash(|_| ()).await, Err(Busy(Duration::from_secs(1))));
        for _ in 0..8 {
            let _ = tx.send(());
        }
        for r in running {
            let _ = r.await;
        }
        assert_eq!(l.hash(|_| 7).await, Ok(Some(7)));
    }
}
