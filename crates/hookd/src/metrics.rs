//! `GET /metrics`: this process's counters and the queue's gauges, written by
//! `prometheus-client` in the OpenMetrics text format. The README's Metrics table lists every
//! series, and a test holds the served names, types and labels to it.

use std::fmt;
use std::sync::Arc;

use dispatcher::Metrics;
use dispatcher::metrics::counter_name;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use store::QueueGauges;

/// The content type of the exposition (Prometheus asks for it first since 2.5).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// This process's counters, shared by the dispatcher, the API and `/metrics`.
#[derive(Clone, Debug)]
pub struct ProcessMetrics {
    pub delivery: Arc<Metrics>,
    pub ingest: Arc<api::IngestCounts>,
    pub inbound: Arc<api::InboundCounts>,
    pub receiving: Arc<service::inbound::Counts>,
}

/// What one scrape shows: the live counters, and what was read of the database for it.
#[derive(Debug)]
struct Scrape {
    process: ProcessMetrics,
    /// Operational webhooks written and dropped.
    operational: (u64, u64),
    writable: bool,
    /// `None` when the database could not be read.
    gauges: Option<QueueGauges>,
}

/// The exposition of one scrape.
pub fn render(
    process: &ProcessMetrics,
    operational: (u64, u64),
    writable: bool,
    gauges: Option<QueueGauges>,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(process.delivery.clone()));
    registry.register_collector(Box::new(Scrape {
        process: process.clone(),
        operational,
        writable,
        gauges,
    }));
    let mut out = String::with_capacity(8 * 1024);
    // Writing to a String cannot fail, and every collector here returns only the writer's
    // errors.
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .expect("encoding metrics into a String");
    out
}

/// Labels of one sample, `tenant` first when there is one.
type Labels = Vec<(&'static str, String)>;

fn counter(
    encoder: &mut DescriptorEncoder,
    series: &'static str,
    help: &str,
    samples: impl IntoIterator<Item = (Labels, u64)>,
) -> fmt::Result {
    let mut family =
        encoder.encode_descriptor(counter_name(series), help, None, MetricType::Counter)?;
    for (labels, n) in samples {
        if labels.is_empty() {
            family.encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        } else {
            family
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
    }
    Ok(())
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &'static str,
    help: &str,
    value: impl EncodeGaugeValue,
) -> fmt::Result {
    encoder
        .encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&value)
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let e = &mut encoder;
        let p = &self.process;
        counter(
            e,
            "hookd_ingest_requests_total",
            "Authenticated message-create requests by result (rate_limited: answered 429).",
            p.ingest.each().into_iter().map(|(tenant, r, n)| {
                let mut labels: Labels = tenant.map(|t| ("tenant", t)).into_iter().collect();
                labels.push(("result", r.as_str().to_owned()));
                (labels, n)
            }),
        )?;
        counter(
            e,
            "hookd_inbound_requests_total",
            "Requests to inbound sources (POST /in/{source}) by result: stored, duplicate, refused (bad signature), unknown_source, failed.",
            p.inbound
                .each()
                .into_iter()
                .map(|(r, n)| (vec![("result", r.as_str().to_owned())], n)),
        )?;
        counter(
            e,
            "hookd_inbound_forwarded_total",
            "Inbound events this process handed to their application's endpoints (stored as messages), at once or after being held.",
            [(Vec::new(), p.receiving.forwarded())],
        )?;
        counter(
            e,
            "hookd_inbound_ordering_total",
            "Ordered inbound events forwarded behind their key's place (late), and sequences given up on after their gap's hold time (skipped).",
            p.receiving
                .each()
                .map(|(kind, n)| (vec![("kind", kind.to_owned())], n)),
        )?;
        counter(
            e,
            "hookd_pruned_rows_total",
            "Rows this process's prunes removed, by kind (payloads: payloads emptied by retention).",
            scheduler::pruned_totals().map(|(kind, n)| (vec![("kind", kind.to_owned())], n)),
        )?;
        let (sent, dropped) = self.operational;
        counter(
            e,
            "hookd_operational_events_total",
            "Operational webhooks this process wrote as messages (sent), and dropped over a tenant's budget of 10 per second with bursts of 100 (dropped).",
            [
                (vec![("result", "sent".to_owned())], sent),
                (vec![("result", "dropped".to_owned())], dropped),
            ],
        )?;
        gauge(
            e,
            "hookd_storage_writable",
            "1 while the database takes this process's writes; 0 while it is full, read-only or unreachable (GET /api/v1/health says which).",
            u64::from(self.writable),
        )?;
        gauge(
            e,
            "hookd_database_up",
            "1 when the gauges below could be read from the database.",
            u64::from(self.gauges.is_some()),
        )?;
        let Some(g) = &self.gauges else {
            return Ok(());
        };
        let counts: [(&'static str, &str, u64); 9] = [
            (
                "hookd_deliveries_pending",
                "Deliveries waiting for an attempt.",
                g.pending,
            ),
            (
                "hookd_deliveries_in_flight",
                "Deliveries whose attempt is in flight.",
                g.sending,
            ),
            (
                "hookd_dead_letters",
                "Deliveries that failed for good.",
                g.dead_letters,
            ),
            (
                "hookd_open_breakers",
                "Endpoints whose circuit breaker is open.",
                g.open_breakers,
            ),
            (
                "hookd_disabled_endpoints",
                "Disabled endpoints.",
                g.disabled_endpoints,
            ),
            (
                "hookd_email_outbox_pending",
                "Emails waiting to be sent.",
                g.email_outbox_pending,
            ),
            (
                "hookd_inbound_held_events",
                "Inbound events held ahead of a gap in their ordering key's sequence.",
                g.inbound_held,
            ),
            (
                "hookd_database_bytes",
                "The database's size on disk (SQLite: free pages included).",
                g.database_bytes,
            ),
            (
                "hookd_database_free_bytes",
                "SQLite: bytes in free pages, reused before the file grows (PostgreSQL: 0).",
                g.database_free_bytes,
            ),
        ];
        for (name, help, value) in counts {
            gauge(e, name, help, value)?;
        }
        let ages: [(&'static str, &str, std::time::Duration); 2] = [
            (
                "hookd_oldest_due_delivery_age_seconds",
                "How long the longest-waiting due delivery has been due.",
                g.oldest_due_age,
            ),
            (
                "hookd_inbound_oldest_held_seconds",
                "How long the longest-held inbound event has waited for its turn (the receiving side's lag).",
                g.oldest_held_age,
            ),
        ];
        for (name, help, age) in ages {
            gauge(e, name, help, age.as_secs_f64())?;
        }
        Ok(())
    }
}
