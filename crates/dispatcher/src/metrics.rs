//! Delivery metrics in memory, exposed through `prometheus-client`'s [`Collector`].
//!
//! Counters and fixed-bucket histograms are plain atomics: recording is a few relaxed adds, no
//! lock and no allocation (the library's own `Histogram` takes a lock per observation, hence
//! these). Label sets are bounded (outcome × status class); no message or endpoint ids ever
//! become labels. A `tenant` label is added only when the operator asks for it
//! (`metrics_tenant_label`), one series set per tenant that has had an attempt.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use domain::ids::TenantId;
use domain::per_tenant::PerTenant;
use store::Next;

/// The outcome label of an attempt.
const OUTCOMES: [&str; 3] = ["success", "retry", "failed"];
/// The status-class label of an attempt: `none` when no HTTP status arrived.
const CLASSES: [&str; 5] = ["2xx", "3xx", "4xx", "5xx", "none"];

/// Upper bounds (seconds) of the attempt-duration buckets.
pub const ATTEMPT_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Upper bounds (seconds) of the time-to-deliver buckets: milliseconds on a healthy path up
/// to a day of retries.
pub const DELIVER_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0,
    3600.0, 21600.0, 86400.0,
];

/// A histogram with fixed bucket bounds. Each bucket counts only its own observations (the
/// last one those over every bound); the cumulative `le` series are summed when written, so
/// `+Inf` always equals `_count` even while observations land during a scrape.
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    buckets: Box<[AtomicU64]>,
    sum_micros: AtomicU64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micros: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = self.bounds.partition_point(|&b| b < secs);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// Encodes the histogram's samples; `+Inf` is the library's `f64::MAX` bound.
    pub fn encode(&self, encoder: &mut MetricEncoder) -> Result<(), std::fmt::Error> {
        let buckets: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let bound = self.bounds.get(i).copied().unwrap_or(f64::MAX);
                (bound, b.load(Ordering::Relaxed))
            })
            .collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }
}

/// One tenant's (or the whole process's) counters.
#[derive(Debug)]
struct Set {
    attempts: [[AtomicU64; CLASSES.len()]; OUTCOMES.len()],
    attempt_duration: Histogram,
    time_to_deliver: Histogram,
}

impl Default for Set {
    fn default() -> Self {
        Set {
            attempts: Default::default(),
            attempt_duration: Histogram::new(ATTEMPT_BUCKETS),
            time_to_deliver: Histogram::new(DELIVER_BUCKETS),
        }
    }
}

/// What the dispatchers of this process have done since it started.
#[derive(Debug)]
pub struct Metrics {
    sets: PerTenant<Set>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(false)
    }
}

impl Metrics {
    /// `by_tenant` adds a `tenant` label to every series.
    pub fn new(by_tenant: bool) -> Self {
        Metrics {
            sets: PerTenant::new(by_tenant),
        }
    }

    /// Counts one finished attempt of `tenant`: its outcome, the class of its status and how
    /// long it took.
    pub fn attempt(&self, tenant: TenantId, next: &Next, status: Option<u16>, took: Duration) {
        let outcome = match next {
            Next::Succeeded => 0,
            Next::Retry { .. } => 1,
            Next::Failed => 2,
        };
        let class = match status {
            Some(200..=299) => 0,
            Some(300..=399) => 1,
            Some(400..=499) => 2,
            Some(500..=599) => 3,
            _ => 4,
        };
        self.sets.with(tenant, |s| {
            s.attempts[outcome][class].fetch_add(1, Ordering::Relaxed);
            s.attempt_duration.observe(took);
        });
    }

    /// Records a delivery's first success, `since_created` after its message was accepted.
    pub fn delivered(&self, tenant: TenantId, since_created: Duration) {
        self.sets
            .with(tenant, |s| s.time_to_deliver.observe(since_created));
    }

    /// Attempts counted with this outcome (`success`, `retry`, `failed`), any status class
    /// and tenant.
    pub fn attempts_with_outcome(&self, outcome: &str) -> u64 {
        let Some(i) = OUTCOMES.iter().position(|o| *o == outcome) else {
            return 0;
        };
        self.sets
            .each()
            .iter()
            .flat_map(|(_, s)| s.attempts[i].iter().map(|a| a.load(Ordering::Relaxed)))
            .sum()
    }

    /// First successes recorded in the time-to-deliver histogram, every tenant's.
    pub fn delivered_count(&self) -> u64 {
        self.sets
            .each()
            .iter()
            .map(|(_, s)| s.time_to_deliver.count())
            .sum()
    }
}

/// A counter family's name as `prometheus-client` takes it: without the `_total` it appends.
pub fn counter_name(series: &'static str) -> &'static str {
    series.strip_suffix("_total").unwrap_or(series)
}

/// The `tenant` label of a per-tenant series set, when there is one.
fn tenant_label(tenant: &Option<TenantId>) -> Vec<(&'static str, String)> {
    tenant.iter().map(|t| ("tenant", t.to_string())).collect()
}

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sets = self.sets.each();
        let mut family = encoder.encode_descriptor(
            counter_name("hookd_attempts_total"),
            "Delivery attempts by outcome and HTTP status class.",
            None,
            MetricType::Counter,
        )?;
        for (tenant, set) in &sets {
            for (o, outcome) in OUTCOMES.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    let mut labels = tenant_label(tenant);
                    labels.extend([
                        ("outcome", (*outcome).to_owned()),
                        ("class", (*class).to_owned()),
                    ]);
                    let n = set.attempts[o][c].load(Ordering::Relaxed);
                    family
                        .encode_family(&labels)?
                        .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
                }
            }
        }
        type Pick = fn(&Set) -> &Histogram;
        let histograms: [(&str, &str, Pick); 2] = [
            (
                "hookd_attempt_duration_seconds",
                "How long delivery attempts took, request to response body.",
                |s| &s.attempt_duration,
            ),
            (
                "hookd_time_to_deliver_seconds",
                "From a message's acceptance to its delivery's first successful attempt.",
                |s| &s.time_to_deliver,
            ),
        ];
        for (name, help, of) in histograms {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for (tenant, set) in &sets {
                // Unsplit, the series carry no labels at all (not an empty `{}`).
                match tenant {
                    None => of(set).encode(&mut family)?,
                    Some(_) => of(set).encode(&mut family.encode_family(&tenant_label(tenant))?)?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::registry::Registry;
    use std::sync::Arc;

    /// The exposition of `collector` alone.
    fn text(collector: impl Collector) -> String {
        let mut r = Registry::default();
        r.register_collector(Box::new(collector));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).unwrap();
        out
    }

    #[derive(Debug)]
    struct One(Histogram);

    impl Collector for One {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let mut m = encoder.encode_descriptor("x_seconds", "x", None, MetricType::Histogram)?;
            self.0.encode(&mut m)
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_inf_equals_count() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(Duration::from_millis(50));
        h.observe(Duration::from_millis(100));
        h.observe(Duration::from_millis(500));
        h.observe(Duration::from_secs(5));
        assert_eq!(h.count(), 4);
        let out = text(One(h));
        assert!(out.contains("x_seconds_bucket{le=\"0.1\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"1.0\"} 3\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 4\n"), "{out}");
        assert!(out.contains("x_seconds_count 4\n"), "{out}");
        assert!(out.contains("x_seconds_sum 5.65\n"), "{out}");
    }

    #[test]
    fn attempts_are_labelled_by_outcome_and_class() {
        let m = Arc::new(Metrics::new(false));
        let (t1, t2) = (TenantId::new(), TenantId::new());
        m.attempt(t1, &Next::Succeeded, Some(204), Duration::from_millis(3));
        m.attempt(t2, &Next::Failed, None, Duration::from_millis(3));
        m.attempt(
            t1,
            &Next::Retry {
                at: domain::Timestamp::now(),
            },
            Some(503),
            Duration::from_millis(3),
        );
        let out = text(m.clone());
        assert!(out.contains("# TYPE hookd_attempts counter\n"), "{out}");
        assert!(out.contains("hookd_attempts_total{outcome=\"success\",class=\"2xx\"} 1\n"));
        assert!(out.contains("hookd_attempts_total{outcome=\"failed\",class=\"none\"} 1\n"));
        assert!(out.contains("hookd_attempts_total{outcome=\"retry\",class=\"5xx\"} 1\n"));
        assert!(
            out.contains("hookd_attempt_duration_seconds_count 3\n"),
            "{out}"
        );
        assert_eq!(m.attempts_with_outcome("success"), 1);
        assert!(!out.contains("tenant="), "{out}");
        assert!(!out.contains("_total_total"), "{out}");
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn with_tenant_label_every_series_names_its_tenant() {
        let m = Arc::new(Metrics::new(true));
        let (t_a, t_b) = (TenantId::new(), TenantId::new());
        m.attempt(t_b, &Next::Succeeded, Some(200), Duration::from_millis(3));
        m.attempt(t_a, &Next::Failed, Some(410), Duration::from_millis(30));
        m.attempt(t_b, &Next::Succeeded, Some(200), Duration::from_millis(3));
        m.delivered(t_b, Duration::from_millis(7));
        let out = text(m.clone());
        let b =
            format!(r#"hookd_attempts_total{{tenant="{t_b}",outcome="success",class="2xx"}} 2"#);
        let a = format!(r#"hookd_attempts_total{{tenant="{t_a}",outcome="failed",class="4xx"}} 1"#);
        assert!(out.contains(&b), "{out}");
        assert!(out.contains(&a), "{out}");
        assert!(
            out.contains(&format!(
                "hookd_time_to_deliver_seconds_bucket{{le=\"0.01\",tenant=\"{t_b}\"}} 1\n"
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "hookd_time_to_deliver_seconds_count{{tenant=\"{t_a}\"}} 0\n"
            )),
            "{out}"
        );
        // Each metric's header appears once, however many tenants.
        assert_eq!(out.matches("# TYPE hookd_attempts ").count(), 1);
        assert_eq!(m.attempts_with_outcome("success"), 2);
        assert_eq!(m.delivered_count(), 1);
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.contains("tenant=\""), "{line}");
        }
    }
}
