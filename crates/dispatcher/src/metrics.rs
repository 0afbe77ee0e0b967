//! Delivery metrics in memory, written out in the Prometheus text format (0.0.4) by hand.
//!
//! Counters and fixed-bucket histograms are plain atomics: recording is a few relaxed adds, no
//! lock and no allocation. Label sets are bounded (outcome × status class); no message or
//! endpoint ids ever become labels. A `tenant` label is added only when the operator asks for
//! it (`metrics_tenant_label`), one series set per tenant that has had an attempt.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

    /// Writes the samples (not the header) with `labels` before `le`.
    fn write(&self, out: &mut String, name: &str, labels: &[(&str, &str)]) {
        let mut cumulative = 0u64;
        for (i, bucket) in self.buckets.iter().enumerate() {
            cumulative += bucket.load(Ordering::Relaxed);
            let le = match self.bounds.get(i) {
                Some(b) => b.to_string(),
                None => "+Inf".to_owned(),
            };
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            write_sample(out, &format!("{name}_bucket"), &with_le, cumulative);
        }
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        write_sample(out, &format!("{name}_sum"), labels, sum);
        write_sample(out, &format!("{name}_count"), labels, cumulative);
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

    /// Appends this process's counters and histograms in the Prometheus text format.
    pub fn write(&self, out: &mut String) {
        let sets = self.sets.each();
        let tenant_label = |t: &Option<TenantId>| -> Vec<(&'static str, String)> {
            t.iter().map(|t| ("tenant", t.to_string())).collect()
        };
        let name = "hookd_attempts_total";
        write_header(
            out,
            name,
            "counter",
            "Delivery attempts by outcome and HTTP status class.",
        );
        for (tenant, set) in &sets {
            let base = tenant_label(tenant);
            for (o, outcome) in OUTCOMES.iter().enumerate() {
                for (c, class) in CLASSES.iter().enumerate() {
                    let mut labels: Vec<(&str, &str)> =
                        base.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    labels.extend([("outcome", *outcome), ("class", *class)]);
                    let n = set.attempts[o][c].load(Ordering::Relaxed);
                    write_sample(out, name, &labels, n);
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
            write_header(out, name, "histogram", help);
            for (tenant, set) in &sets {
                let base = tenant_label(tenant);
                let labels: Vec<(&str, &str)> =
                    base.iter().map(|(k, v)| (*k, v.as_str())).collect();
                of(set).write(out, name, &labels);
            }
        }
    }
}

/// Writes the `# HELP` and `# TYPE` lines of a metric.
pub fn write_header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes one sample line: `name{label="value",…} value`. Label values are escaped.
pub fn write_sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    value: impl std::fmt::Display,
) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            for ch in v.chars() {
                match ch {
                    '\\' => out.push_str("\\\\"),
                    '"' => out.push_str("\\\""),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_inf_equals_count() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(Duration::from_millis(50));
        h.observe(Duration::from_millis(100));
        h.observe(Duration::from_millis(500));
        h.observe(Duration::from_secs(5));
        let mut out = String::new();
        h.write(&mut out, "x_seconds", &[]);
        assert!(out.contains("x_seconds_bucket{le=\"0.1\"} 2\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"1\"} 3\n"), "{out}");
        assert!(out.contains("x_seconds_bucket{le=\"+Inf\"} 4\n"), "{out}");
        assert!(out.contains("x_seconds_count 4\n"), "{out}");
        assert!(out.contains("x_seconds_sum 5.65\n"), "{out}");
        assert_eq!(h.count(), 4);
    }

    #[test]
    fn attempts_are_labelled_by_outcome_and_class() {
        let m = Metrics::new(false);
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
        let mut out = String::new();
        m.write(&mut out);
        assert!(out.contains("hookd_attempts_total{outcome=\"success\",class=\"2xx\"} 1\n"));
        assert!(out.contains("hookd_attempts_total{outcome=\"failed\",class=\"none\"} 1\n"));
        assert!(out.contains("hookd_attempts_total{outcome=\"retry\",class=\"5xx\"} 1\n"));
        assert!(out.contains("hookd_attempt_duration_seconds_count 3\n"));
        assert_eq!(m.attempts_with_outcome("success"), 1);
        assert!(!out.contains("tenant="), "{out}");
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            value.parse::<f64>().unwrap();
        }
    }

    #[test]
    fn with_tenant_label_every_series_names_its_tenant() {
        let m = Metrics::new(true);
        let (t_a, t_b) = (TenantId::new(), TenantId::new());
        m.attempt(t_b, &Next::Succeeded, Some(200), Duration::from_millis(3));
        m.attempt(t_a, &Next::Failed, Some(410), Duration::from_millis(30));
        m.attempt(t_b, &Next::Succeeded, Some(200), Duration::from_millis(3));
        m.delivered(t_b, Duration::from_millis(7));
        let mut out = String::new();
        m.write(&mut out);
        let b =
            format!(r#"hookd_attempts_total{{tenant="{t_b}",outcome="success",class="2xx"}} 2"#);
        let a = format!(r#"hookd_attempts_total{{tenant="{t_a}",outcome="failed",class="4xx"}} 1"#);
        assert!(out.contains(&b), "{out}");
        assert!(out.contains(&a), "{out}");
        assert!(out.contains(&format!(
            "hookd_time_to_deliver_seconds_bucket{{tenant=\"{t_b}\",le=\"0.01\"}} 1\n"
        )));
        assert!(out.contains(&format!(
            "hookd_time_to_deliver_seconds_count{{tenant=\"{t_a}\"}} 0\n"
        )));
        // Each metric's header appears once, however many tenants.
        assert_eq!(out.matches("# TYPE hookd_attempts_total").count(), 1);
        assert_eq!(m.attempts_with_outcome("success"), 2);
        assert_eq!(m.delivered_count(), 1);
        for line in out.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.contains("tenant=\""), "{line}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        write_sample(&mut out, "m", &[("a", "x\"y\\z\n")], 1);
        assert_eq!(out, "m{a=\"x\\\"y\\\\z\\n\"} 1\n");
    }
}
