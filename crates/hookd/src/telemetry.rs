//! Logs and traces: text or JSON lines on stderr, and with `otlp_endpoint` OpenTelemetry over
//! OTLP/HTTP (protobuf) with the standard crates: the same log records to `…/v1/logs`
//! (`opentelemetry-appender-tracing`), and hookd's spans (each request, each delivery attempt)
//! as traces to `…/v1/traces` (`tracing-opentelemetry`).

use std::io::IsTerminal;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{LogExporter, Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::logs::{BatchLogProcessor, SdkLoggerProvider};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use tracing::Metadata;
use tracing_subscriber::filter::{LevelFilter, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, Settings};

/// Installs the global subscriber: text or JSON lines on stderr, filtered by `log_level`, and
/// the OTLP exporters when `otlp_endpoint` is set. Keep the returned guard for the life of the
/// command: dropping it sends what is still buffered.
pub fn init(settings: &Settings) -> Option<OtlpGuard> {
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let stderr: Box<dyn Layer<_> + Send + Sync> = match settings.log_format {
        LogFormat::Text => Box::new(stderr),
        LogFormat::Json => Box::new(stderr.json().flatten_event(true)),
    };
    let stderr = stderr.with_filter(log_filter(&settings.log_level));
    let otlp = settings
        .otlp_endpoint
        .as_deref()
        .and_then(|url| match OtlpGuard::start(url) {
            Ok(guard) => Some(guard),
            Err(e) => {
                // Said once; the stderr log goes on either way.
                eprintln!("hookd: OpenTelemetry export to {url} is off: {e}");
                None
            }
        });
    let (logs, traces) = match &otlp {
        Some(g) => (
            Some(
                opentelemetry_appender_tracing::layer::OpenTelemetryTracingBridge::new(&g.logs)
                    .with_filter(exported_logs_filter(&settings.log_level)),
            ),
            Some(
                tracing_opentelemetry::layer()
                    .with_tracer(g.traces.tracer("hookd"))
                    .with_threads(false)
                    .with_filter(
                        // Spans up to debug only: trace-level callsites stay off for good.
                        filter_fn(is_traced_span).with_max_level_hint(LevelFilter::DEBUG),
                    ),
            ),
        ),
        None => (None, None),
    };
    // A second init (tests running several commands in one process) is harmless.
    let installed = tracing_subscriber::registry()
        .with(stderr)
        .with(logs)
        .with(traces)
        .try_init()
        .is_ok();
    otlp.filter(|_| installed)
}

fn log_filter(log_level: &str) -> EnvFilter {
    EnvFilter::try_new(log_level).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// `log_level` for the exported records, less the exporter's own HTTP client and the SDK:
/// their lines, exported, would make more export (a loop), and say nothing about hookd.
fn exported_logs_filter(log_level: &str) -> EnvFilter {
    [
        "hyper=off",
        "hyper_util=off",
        "reqwest=off",
        "opentelemetry=off",
        "opentelemetry_sdk=off",
        "opentelemetry-otlp=off",
        "opentelemetry-http=off",
    ]
    .iter()
    .filter_map(|d| d.parse().ok())
    .fold(log_filter(log_level), EnvFilter::add_directive)
}

/// The crates whose spans are traces: the request span (`service::trace`) and the delivery
/// attempt's (`dispatcher`), whatever `log_level` says; no library's spans, and no events (they
/// are exported as logs). A span of these at debug is disabled unless traces are exported, so
/// the attempt's span costs nothing without a collector.
const TRACED_CRATES: &[&str] = &[
    "service",
    "dispatcher",
    "store",
    "api",
    "hookd",
    "scheduler",
];

fn is_traced_span(meta: &Metadata<'_>) -> bool {
    let krate = meta.target().split("::").next().unwrap_or_default();
    meta.is_span() && *meta.level() <= tracing::Level::DEBUG && TRACED_CRATES.contains(&krate)
}

/// How long a record or span may wait for its batch (the SDK's default is 5 s).
const LINGER: Duration = Duration::from_secs(1);
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// Records (and spans) waiting for the exporter; beyond this, new ones are dropped, so a
/// missing collector never grows the process or slows a delivery.
const QUEUE: usize = 8192;

/// The two exporters, each on a thread of its own. Dropping it flushes both (within
/// [`EXPORT_TIMEOUT`]), so the last records of a stopping process still reach the collector.
pub struct OtlpGuard {
    logs: SdkLoggerProvider,
    traces: SdkTracerProvider,
}

impl OtlpGuard {
    /// Starts the exporters posting to `{base}/v1/logs` and `{base}/v1/traces`.
    fn start(base: &str) -> Result<OtlpGuard, opentelemetry_otlp::ExporterBuildError> {
        let base = base.trim_end_matches('/');
        let logs = LogExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/logs"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let spans = SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{base}/v1/traces"))
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let logs = SdkLoggerProvider::builder()
            .with_resource(resource())
            .with_log_processor(EventTime)
            .with_log_processor(
                BatchLogProcessor::builder(logs)
                    .with_batch_config(
                        opentelemetry_sdk::logs::BatchConfigBuilder::default()
                            .with_scheduled_delay(LINGER)
                            .with_max_queue_size(QUEUE)
                            .build(),
                    )
                    .build(),
            )
            .build();
        let traces = SdkTracerProvider::builder()
            .with_resource(resource())
            .with_span_processor(
                BatchSpanProcessor::builder(spans)
                    .with_batch_config(
                        opentelemetry_sdk::trace::BatchConfigBuilder::default()
                            .with_scheduled_delay(LINGER)
                            .with_max_queue_size(QUEUE)
                            .build(),
                    )
                    .build(),
            )
            .build();
        Ok(OtlpGuard { logs, traces })
    }
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        let _ = self.traces.shutdown_with_timeout(EXPORT_TIMEOUT);
        let _ = self.logs.shutdown_with_timeout(EXPORT_TIMEOUT);
    }
}

/// The resource every record and span is exported under.
fn resource() -> Resource {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    Resource::builder()
        .with_service_name("hookd")
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new(
                "service.instance.id",
                format!("{host}:{}", std::process::id()),
            ),
        ])
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hookd_spans_are_traced_never_events_or_library_spans() {
        use tracing::callsite::Identifier;
        struct Site;
        impl tracing::Callsite for Site {
            fn set_interest(&self, _: tracing::subscriber::Interest) {}
            fn metadata(&self) -> &Metadata<'_> {
                unreachable!()
            }
        }
        static SITE: Site = Site;
        let meta = |target: &'static str, level, kind| {
            Metadata::new(
                "m",
                target,
                level,
                None,
                None,
                None,
                tracing::field::FieldSet::new(&[], Identifier(&SITE)),
                kind,
            )
        };
        use tracing::Level;
        use tracing::metadata::Kind;
        assert!(is_traced_span(&meta(
            "dispatcher::worker",
            Level::DEBUG,
            Kind::SPAN
        )));
        assert!(is_traced_span(&meta(
            "service::trace",
            Level::INFO,
            Kind::SPAN
        )));
        assert!(!is_traced_span(&meta(
            "dispatcher::worker",
            Level::TRACE,
            Kind::SPAN
        )));
        assert!(!is_traced_span(&meta(
            "dispatcher::worker",
            Level::INFO,
            Kind::EVENT
        )));
        assert!(!is_traced_span(&meta(
            "hyper::client",
            Level::INFO,
            Kind::SPAN
        )));
        assert!(!is_traced_span(&meta("servicex", Level::INFO, Kind::SPAN)));
    }
}

/// Gives each log record its event time: the bridge sets only the time it was observed, and
/// backends that sort or show by event time would put hookd's lines at 1970. Runs before the
/// batch processor, which exports what it is handed.
#[derive(Debug)]
struct EventTime;

impl opentelemetry_sdk::logs::LogProcessor for EventTime {
    fn emit(
        &self,
        record: &mut opentelemetry_sdk::logs::SdkLogRecord,
        _: &opentelemetry::InstrumentationScope,
    ) {
        use opentelemetry::logs::LogRecord as _;
        if record.timestamp().is_none() {
            let at = record
                .observed_timestamp()
                .unwrap_or_else(std::time::SystemTime::now);
            record.set_timestamp(at);
        }
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        Ok(())
    }
}
