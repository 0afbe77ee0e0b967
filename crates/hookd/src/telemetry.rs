//! Logs: text or JSON lines on stderr, and with `otlp_endpoint` the same records exported to
//! an OpenTelemetry collector over OTLP/HTTP in its JSON encoding.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{LogFormat, Settings};

/// Installs the global subscriber: text or JSON lines on stderr, filtered by `log_level`, and
/// the OTLP exporter when `otlp_endpoint` is set. Keep the returned guard for the life of the
/// command: dropping it sends what is still buffered.
pub fn init(settings: &Settings) -> Option<OtlpGuard> {
    let filter = EnvFilter::try_new(&settings.log_level).unwrap_or_else(|_| EnvFilter::new("info"));
    let stderr = tracing_subscriber::fmt::layer()
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let stderr: Box<dyn Layer<_> + Send + Sync> = match settings.log_format {
        LogFormat::Text => Box::new(stderr),
        LogFormat::Json => Box::new(stderr.json().flatten_event(true)),
    };
    let (otlp, guard) = match &settings.otlp_endpoint {
        Some(url) => {
            let (layer, guard) = OtlpLayer::start(format!("{url}/v1/logs"));
            (Some(layer), Some(guard))
        }
        None => (None, None),
    };
    // A second init (tests running several commands in one process) is harmless.
    let installed = tracing_subscriber::registry()
        .with(filter)
        .with(stderr)
        .with(otlp)
        .try_init()
        .is_ok();
    guard.filter(|_| installed)
}

/// Records waiting for the exporter; beyond this, new ones are dropped (and counted).
const QUEUE: usize = 8192;
/// Most records in one export request.
const BATCH: usize = 512;
/// How long a record may wait for its batch to fill.
const LINGER: Duration = Duration::from_secs(1);
/// How long one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

enum Item {
    Record(Value),
    /// Send what is buffered, then acknowledge.
    Flush(SyncSender<()>),
}

/// A [`Layer`] turning each event into an OTLP `LogRecord` for the exporter thread. It never
/// blocks the caller: when the queue is full, the record is dropped and counted.
pub struct OtlpLayer {
    tx: SyncSender<Item>,
    dropped: Arc<AtomicU64>,
}

/// Flushes the exporter when dropped (at most a few seconds), so the last records of a
/// stopping process still reach the collector.
pub struct OtlpGuard {
    tx: SyncSender<Item>,
    dropped: Arc<AtomicU64>,
}

impl Drop for OtlpGuard {
    fn drop(&mut self) {
        let (ack_tx, ack_rx) = std::sync::mpsc::sync_channel(1);
        if self.tx.send(Item::Flush(ack_tx)).is_ok() {
            let _ = ack_rx.recv_timeout(EXPORT_TIMEOUT);
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            eprintln!("hookd: {dropped} log records were not exported (OTLP queue full)");
        }
    }
}

thread_local! {
    /// Set on the exporter's own thread: its HTTP client's events are never exported (they
    /// would feed themselves).
    static EXPORTER_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl OtlpLayer {
    /// Starts the exporter thread posting to `url` (…/v1/logs).
    pub fn start(url: String) -> (OtlpLayer, OtlpGuard) {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let failed = dropped.clone();
        std::thread::Builder::new()
            .name("hookd-otlp".to_owned())
            .spawn(move || {
                EXPORTER_THREAD.with(|f| f.set(true));
                export_loop(&url, rx, &failed);
            })
            .expect("spawn the OTLP exporter thread");
        let guard = OtlpGuard {
            tx: tx.clone(),
            dropped: dropped.clone(),
        };
        (OtlpLayer { tx, dropped }, guard)
    }
}

impl<S: Subscriber> Layer<S> for OtlpLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        if EXPORTER_THREAD.with(|f| f.get()) {
            return;
        }
        let record = log_record(event, SystemTime::now());
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Item::Record(record)) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// OTLP's severity number for a tracing level (logs data model: TRACE 1, DEBUG 5, INFO 9, …).
fn severity(level: &Level) -> (u8, &'static str) {
    match *level {
        Level::TRACE => (1, "TRACE"),
        Level::DEBUG => (5, "DEBUG"),
        Level::INFO => (9, "INFO"),
        Level::WARN => (13, "WARN"),
        Level::ERROR => (17, "ERROR"),
    }
}

/// One event as an OTLP `LogRecord` in the protobuf JSON mapping: 64-bit integers as strings,
/// enums as numbers, the `message` field as the body and every other field as an attribute.
fn log_record(event: &Event<'_>, at: SystemTime) -> Value {
    let nanos = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        .to_string();
    let meta = event.metadata();
    let (number, text) = severity(meta.level());
    let mut fields = Fields::default();
    event.record(&mut fields);
    fields.attributes.push(attribute(
        "log.target",
        json!({ "stringValue": meta.target() }),
    ));
    json!({
        "timeUnixNano": nanos,
        "observedTimeUnixNano": nanos,
        "severityNumber": number,
        "severityText": text,
        "body": { "stringValue": fields.message.unwrap_or_default() },
        "attributes": fields.attributes,
    })
}

fn attribute(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

#[derive(Default)]
struct Fields {
    message: Option<String>,
    attributes: Vec<Value>,
}

impl Fields {
    fn add(&mut self, field: &Field, value: Value) {
        self.attributes.push(attribute(field.name(), value));
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = Some(value.to_owned());
        } else {
            self.add(field, json!({ "stringValue": value }));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.add(field, json!({ "intValue": value.to_string() }));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.record_i64(field, v),
            Err(_) => self.add(field, json!({ "stringValue": value.to_string() })),
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if value.is_finite() {
            self.add(field, json!({ "doubleValue": value }));
        } else {
            self.add(field, json!({ "stringValue": value.to_string() }));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.add(field, json!({ "boolValue": value }));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// The resource every record is exported under.
fn resource() -> Value {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    json!({
        "attributes": [
            attribute("service.name", json!({ "stringValue": "hookd" })),
            attribute("service.version", json!({ "stringValue": env!("CARGO_PKG_VERSION") })),
            attribute("service.instance.id", json!({ "stringValue": format!("{host}:{}", std::process::id()) })),
        ]
    })
}

/// Batches records (up to [`BATCH`], or what arrived within [`LINGER`]) and posts each batch
/// as one `ExportLogsServiceRequest`. A batch the collector refuses or cannot take is dropped
/// after one retry and counted, so a missing collector never grows the process.
fn export_loop(url: &str, rx: Receiver<Item>, failed: &AtomicU64) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .build()
        .unwrap_or_default();
    let resource = resource();
    let mut batch: Vec<Value> = Vec::with_capacity(BATCH);
    let mut deadline: Option<Instant> = None;
    let mut warned = false;
    loop {
        let wait = deadline.map_or(Duration::from_secs(3600), |d| {
            d.saturating_duration_since(Instant::now())
        });
        let mut flush_ack = None;
        let mut closed = false;
        match rx.recv_timeout(wait) {
            Ok(Item::Record(r)) => {
                batch.push(r);
                deadline.get_or_insert_with(|| Instant::now() + LINGER);
            }
            Ok(Item::Flush(ack)) => flush_ack = Some(ack),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closed = true,
        }
        let due = deadline.is_some_and(|d| Instant::now() >= d);
        if !batch.is_empty() && (batch.len() >= BATCH || due || flush_ack.is_some() || closed) {
            let n = batch.len() as u64;
            let body = json!({
                "resourceLogs": [{
                    "resource": resource,
                    "scopeLogs": [{
                        "scope": { "name": "hookd", "version": env!("CARGO_PKG_VERSION") },
                        "logRecords": std::mem::take(&mut batch),
                    }],
                }],
            });
            deadline = None;
            let sent = rt.block_on(async {
                for _ in 0..2 {
                    match client.post(url).json(&body).send().await {
                        Ok(r) if r.status().is_success() => return Ok(()),
                        Ok(r) => {
                            let status = r.status();
                            // 4xx other than 429 will not change on a retry.
                            if status.is_client_error() && status.as_u16() != 429 {
                                return Err(format!("answered {status}"));
                            }
                        }
                        Err(e) => {
                            if flush_ack.is_some() || closed {
                                return Err(e.to_string());
                            }
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err("failed twice".to_owned())
            });
            if let Err(e) = sent {
                failed.fetch_add(n, Ordering::Relaxed);
                if !warned {
                    // Said once: the stderr log goes on either way.
                    eprintln!("hookd: OTLP export to {url} failed ({e}); dropping those records");
                    warned = true;
                }
            }
        }
        if let Some(ack) = flush_ack {
            let _ = ack.send(());
        }
        if closed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captures the records the layer would queue, without a thread or a collector.
    #[derive(Clone, Default)]
    struct Capture(Arc<std::sync::Mutex<Vec<Value>>>);

    impl<S: Subscriber> Layer<S> for Capture {
        fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
            let r = log_record(event, UNIX_EPOCH + Duration::from_millis(1_700_000_000_123));
            self.0.lock().unwrap().push(r);
        }
    }

    #[test]
    fn an_event_becomes_a_log_record_in_otlp_json() {
        let cap = Capture::default();
        let subscriber = tracing_subscriber::registry().with(cap.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(
                msg_id = "msg_1",
                attempt = 3u32,
                status = -1i64,
                ok = false,
                took = 1.5f64,
                error = ?Some("timeout"),
                "delivery attempt"
            );
        });
        let records = cap.0.lock().unwrap();
        let r = &records[0];
        assert_eq!(r["timeUnixNano"], "1700000000123000000");
        assert_eq!(r["severityNumber"], 13);
        assert_eq!(r["severityText"], "WARN");
        assert_eq!(r["body"]["stringValue"], "delivery attempt");
        let attr = |k: &str| {
            r["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == k)
                .map(|a| a["value"].clone())
                .unwrap_or(Value::Null)
        };
        assert_eq!(attr("msg_id"), json!({"stringValue": "msg_1"}));
        assert_eq!(attr("attempt"), json!({"intValue": "3"}));
        assert_eq!(attr("status"), json!({"intValue": "-1"}));
        assert_eq!(attr("ok"), json!({"boolValue": false}));
        assert_eq!(attr("took"), json!({"doubleValue": 1.5}));
        assert_eq!(attr("error"), json!({"stringValue": "Some(\"timeout\")"}));
        assert_eq!(attr("log.target"), json!({"stringValue": module_path!()}));
    }
}
