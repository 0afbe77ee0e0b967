//! `hookd bench`: starts a receiver (the sink) and hookd in-process on a fresh database,
//! submits messages over the Svix API at a concurrency (closed loop) or a fixed rate (open
//! loop), keeps an exact ledger of what the receiver acknowledged, and reports throughput,
//! latencies, resources and the raw loopback rate of the sink alone.
//!
//! Everything runs in one process, so peak RSS and CPU seconds include the load generator
//! and the sink as well as hookd.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use domain::signing::SigningSecret;
use serde::Serialize;
use serde_json::json;

use crate::cli::BoxError;
use crate::config::{Overrides, Settings};
use crate::sink::{Behaviour, Sink, SinkConfig};
use crate::startup::{Application, open_store};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// None: a fresh SQLite file in a temporary directory.
    pub database_url: Option<String>,
    pub messages: u64,
    pub endpoints: u32,
    pub payload_bytes: usize,
    /// Requests in flight at once (closed loop); ignored when `rate` is set.
    pub concurrency: usize,
    /// Messages per second, open loop.
    pub rate: Option<f64>,
    /// Share of deliveries the sink fails with a 500.
    pub fail_rate: f64,
    /// How long to wait for the last acknowledgements after the last message was accepted.
    pub drain_timeout: Duration,
    /// How long the sink-alone loopback flood runs (zero: skipped).
    pub loopback: Duration,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            database_url: None,
            messages: 20_000,
            endpoints: 1,
            payload_bytes: 100,
            concurrency: 32,
            rate: None,
            fail_rate: 0.0,
            drain_timeout: Duration::from_secs(120),
            loopback: Duration::from_secs(3),
        }
    }
}

/// p50/p95/p99 and max, in milliseconds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Percentiles {
    fn of(mut v: Vec<Duration>) -> Percentiles {
        if v.is_empty() {
            return Percentiles::default();
        }
        v.sort_unstable();
        let at = |q: f64| {
            let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
            v[i].as_secs_f64() * 1000.0
        };
        Percentiles {
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            max_ms: at(1.0),
        }
    }
}

/// Every message id the API accepted, accounted for at the receiver (per endpoint).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Ledger {
    /// Messages the API accepted (201).
    pub accepted: u64,
    /// Ingest requests answered otherwise (or not at all), by status ("error" = transport).
    pub rejected: BTreeMap<String, u64>,
    /// Deliveries expected: accepted × endpoints.
    pub expected: u64,
    /// Expected (endpoint, message) pairs the sink acknowledged.
    pub delivered: u64,
    /// 2xx acknowledgements beyond the first of a pair.
    pub duplicates: u64,
    /// Expected pairs never acknowledged within the drain timeout.
    pub missing: u64,
    /// Acknowledged pairs the bench did not send (should be 0).
    pub unexpected: u64,
    pub bad_signatures: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchReport {
    pub database: String,
    pub messages: u64,
    pub endpoints: u32,
    pub payload_bytes: usize,
    /// "closed loop, concurrency C" or "open loop, R msg/s".
    pub mode: String,
    pub fail_rate: f64,
    pub ledger: Ledger,
    /// Accepted messages per second, first send to last answer.
    pub ingest_per_sec: f64,
    /// Ingest request latency; in open loop measured from each request's scheduled time.
    pub ingest_latency: Percentiles,
    /// Deliveries per second, first send to last acknowledgement.
    pub deliveries_per_sec: f64,
    /// Request sent (message creation can be no earlier) → first 2xx at the sink.
    pub time_to_deliver: Percentiles,
    /// First send to last acknowledgement.
    pub wall_secs: f64,
    /// The whole process (hookd, sink and load generator): VmHWM.
    pub peak_rss_mb: f64,
    /// The whole process, user + system, from start of load to end of drain.
    pub cpu_secs: f64,
    /// Signed POSTs per second to the sink alone, closed loop at the same concurrency.
    pub loopback_per_sec: f64,
    /// deliveries_per_sec / loopback_per_sec.
    pub ratio_to_loopback: f64,
}

struct Sent {
    id: Option<String>,
    status: String,
    started: Instant,
    answered: Instant,
    latency: Duration,
}

/// Runs one bench scenario.
pub async fn run(opts: &BenchOptions) -> Result<BenchReport, BoxError> {
    if opts.messages == 0 || opts.endpoints == 0 || opts.concurrency == 0 {
        return Err("--messages, --endpoints and --concurrency must be at least 1".into());
    }
    if !(0.0..1.0).contains(&opts.fail_rate) {
        return Err("--fail-rate must be from 0 to below 1".into());
    }
    if let Some(r) = opts.rate
        && !(r > 0.0 && r.is_finite())
    {
        return Err("--rate must be a positive number".into());
    }
    let secret = SigningSecret::parse(SECRET)?;
    let sink = Sink::start(SinkConfig {
        bind: "127.0.0.1:0".parse()?,
        secrets: vec![secret.clone()],
        behaviour: Behaviour {
            fail_rate: opts.fail_rate,
            fail_status: 500,
            ..Behaviour::default()
        },
        report: None,
        record: false,
    })?;
    sink.state.track_ack_times();

    let temp_dir = std::env::temp_dir().join(format!(
        "hookd-bench-{}-{}",
        std::process::id(),
        domain::Timestamp::now().as_millis()
    ));
    let database_url = match &opts.database_url {
        Some(u) => u.clone(),
        None => format!("sqlite://{}/hookd.db", temp_dir.display()),
    };
    let result = run_against(opts, &sink, &database_url).await;
    sink.stop().await;
    if opts.database_url.is_none() {
        let _ = std::fs::remove_dir_all(&temp_dir);
    }
    result
}

async fn run_against(
    opts: &BenchOptions,
    sink: &Sink,
    database_url: &str,
) -> Result<BenchReport, BoxError> {
    let env: BTreeMap<String, String> = [
        ("HOOKD_DATABASE_URL", database_url),
        ("HOOKD_BIND", "127.0.0.1:0"),
        ("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8"),
        ("HOOKD_TENANT_INGEST_RATE", "10000000"),
        ("HOOKD_TENANT_INGEST_BURST", "10000000"),
        ("HOOKD_LOG_LEVEL", "warn"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let settings = Settings::load_from(None, &env, &Overrides::default())?;
    let app = Application::build(&settings).await?;
    let port = app.port().ok_or("hookd started without its API")?;
    let stop = app.stop_handle();
    let app_task = tokio::spawn(app.run_until_stopped());
    let base = format!("http://127.0.0.1:{port}/api/v1");

    let store = open_store(&settings).await?;
    let tenant = store
        .create_tenant(store::NewTenant {
            name: "bench".into(),
            notification_email: "bench@example.com".into(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await?;
    let tenant_id = domain::ids::TenantId::parse(&tenant.id)?;
    let (_, key) = store.create_api_key(tenant_id, "bench").await?;
    store.close().await?;

    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency.max(64))
        .build()?;
    let app_id = create(
        &client,
        &key,
        &format!("{base}/app"),
        json!({"name": "bench"}),
    )
    .await?;
    let mut paths = Vec::new();
    for i in 0..opts.endpoints {
        let path = format!("/hook/{i}");
        let mut body = json!({"url": sink.url(&path), "secret": SECRET});
        if opts.fail_rate > 0.0 {
            // Quick retries so the drain does not wait minutes on the default schedule.
            let delays: Vec<&str> = std::iter::once("100ms")
                .chain(std::iter::repeat_n("500ms", 19))
                .collect();
            body["retryPolicy"] = json!({ "delays": delays });
        }
        create(
            &client,
            &key,
            &format!("{base}/app/{app_id}/endpoint"),
            body,
        )
        .await?;
        paths.push(path);
    }

    let pad = opts.payload_bytes.saturating_sub(r#"{"data":""}"#.len());
    let body = serde_json::to_vec(&json!({
        "eventType": "bench.event",
        "payload": {"data": "x".repeat(pad)},
    }))?;
    let body = Arc::new(body);
    let url = Arc::new(format!("{base}/app/{app_id}/msg"));
    let key = Arc::new(key);

    let cpu_before = cpu_secs();
    let load_start = Instant::now();
    let sent = match opts.rate {
        None => closed_loop(opts, &client, &url, &key, &body).await,
        Some(rate) => open_loop(opts, rate, &client, &url, &key, &body).await,
    };

    // Ledger and drain.
    let mut ledger = Ledger::default();
    let mut started_of: HashMap<String, Instant> = HashMap::new();
    let mut latencies = Vec::with_capacity(sent.len());
    let mut last_answer = load_start;
    for s in &sent {
        last_answer = last_answer.max(s.answered);
        match &s.id {
            Some(id) => {
                ledger.accepted += 1;
                latencies.push(s.latency);
                started_of.insert(id.clone(), s.started);
            }
            None => *ledger.rejected.entry(s.status.clone()).or_default() += 1,
        }
    }
    ledger.expected = ledger.accepted * u64::from(opts.endpoints);
    let deadline = Instant::now() + opts.drain_timeout;
    while (sink.state.ack_count() as u64) < ledger.expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cpu = cpu_secs() - cpu_before;
    stop.stop();
    let _ = app_task.await;

    let acks = sink.state.ack_times();
    let mut ttd = Vec::with_capacity(acks.len());
    let mut last_ack = load_start;
    for ((path, id), (at, n)) in &acks {
        match started_of.get(id) {
            Some(started) if paths.contains(path) => {
                ledger.delivered += 1;
                ledger.duplicates += u64::from(n - 1);
                ttd.push(at.saturating_duration_since(*started));
                last_ack = last_ack.max(*at);
            }
            _ => ledger.unexpected += 1,
        }
    }
    ledger.missing = ledger.expected - ledger.delivered.min(ledger.expected);
    ledger.bad_signatures = sink.state.report().bad_signatures;

    let ingest_secs = last_answer.duration_since(load_start).as_secs_f64();
    let wall = last_ack.duration_since(load_start).as_secs_f64();
    let deliveries_per_sec = if wall > 0.0 {
        ledger.delivered as f64 / wall
    } else {
        0.0
    };
    let loopback_per_sec = if opts.loopback.is_zero() {
        0.0
    } else {
        loopback(opts, sink, &client).await
    };
    Ok(BenchReport {
        database: store::redact_url(database_url),
        messages: opts.messages,
        endpoints: opts.endpoints,
        payload_bytes: opts.payload_bytes,
        mode: match opts.rate {
            None => format!("closed loop, concurrency {}", opts.concurrency),
            Some(r) => format!("open loop, {r} msg/s"),
        },
        fail_rate: opts.fail_rate,
        ingest_per_sec: if ingest_secs > 0.0 {
            ledger.accepted as f64 / ingest_secs
        } else {
            0.0
        },
        ledger,
        ingest_latency: Percentiles::of(latencies),
        deliveries_per_sec,
        time_to_deliver: Percentiles::of(ttd),
        wall_secs: wall,
        peak_rss_mb: peak_rss_mb(),
        cpu_secs: cpu,
        loopback_per_sec,
        ratio_to_loopback: if loopback_per_sec > 0.0 {
            deliveries_per_sec / loopback_per_sec
        } else {
            0.0
        },
    })
}

async fn create(
    client: &reqwest::Client,
    key: &str,
    url: &str,
    body: serde_json::Value,
) -> Result<String, BoxError> {
    let resp = client.post(url).bearer_auth(key).json(&body).send().await?;
    let status = resp.status();
    let text = resp.text().await?;
    if status.as_u16() != 201 {
        return Err(format!("POST {url}: {status}: {text}").into());
    }
    let v: serde_json::Value = serde_json::from_str(&text)?;
    v["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("POST {url}: no id in {text}").into())
}

async fn send_one(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    body: &[u8],
    latency_from: Instant,
) -> Sent {
    let started = Instant::now();
    let resp = client
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await;
    let (id, status) = match resp {
        Ok(r) => {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            let id = (status == 201)
                .then(|| {
                    serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| v["id"].as_str().map(str::to_owned))
                })
                .flatten();
            (id, status.to_string())
        }
        Err(_) => (None, "error".to_owned()),
    };
    let answered = Instant::now();
    Sent {
        id,
        status,
        started,
        answered,
        latency: answered.duration_since(latency_from),
    }
}

async fn closed_loop(
    opts: &BenchOptions,
    client: &reqwest::Client,
    url: &Arc<String>,
    key: &Arc<String>,
    body: &Arc<Vec<u8>>,
) -> Vec<Sent> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..opts.concurrency {
        let (client, url, key, body, next) = (
            client.clone(),
            url.clone(),
            key.clone(),
            body.clone(),
            next.clone(),
        );
        let n = opts.messages;
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < n {
                out.push(send_one(&client, &url, &key, &body, Instant::now()).await);
            }
            out
        }));
    }
    let mut sent = Vec::with_capacity(opts.messages as usize);
    for t in tasks {
        if let Ok(v) = t.await {
            sent.extend(v);
        }
    }
    sent
}

async fn open_loop(
    opts: &BenchOptions,
    rate: f64,
    client: &reqwest::Client,
    url: &Arc<String>,
    key: &Arc<String>,
    body: &Arc<Vec<u8>>,
) -> Vec<Sent> {
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(opts.messages as usize);
    for i in 0..opts.messages {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at).await;
        let (client, url, key, body) = (client.clone(), url.clone(), key.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            send_one(&client, &url, &key, &body, at.into_std()).await
        }));
    }
    let mut sent = Vec::with_capacity(tasks.len());
    for t in tasks {
        if let Ok(s) = t.await {
            sent.push(s);
        }
    }
    sent
}

/// Signed POSTs straight to the sink, closed loop at the bench's concurrency.
async fn loopback(opts: &BenchOptions, sink: &Sink, client: &reqwest::Client) -> f64 {
    let Ok(secret) = SigningSecret::parse(SECRET) else {
        return 0.0;
    };
    let url = Arc::new(sink.url("/loopback"));
    let pad = opts.payload_bytes.saturating_sub(r#"{"data":""}"#.len());
    let body = Arc::new(serde_json::to_vec(&json!({"data": "x".repeat(pad)})).unwrap_or_default());
    let secret = Arc::new(secret);
    let until = Instant::now() + opts.loopback;
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..opts.concurrency {
        let (client, url, body, secret, next, ok) = (
            client.clone(),
            url.clone(),
            body.clone(),
            secret.clone(),
            next.clone(),
            ok.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let id = format!("msg_loopback{}", next.fetch_add(1, Ordering::Relaxed));
                let ts = domain::Timestamp::now().as_secs();
                let sig = domain::signing::sign(&secret, &id, ts, &body);
                let resp = client
                    .post(url.as_str())
                    .header("webhook-id", &id)
                    .header("webhook-timestamp", ts.to_string())
                    .header("webhook-signature", sig)
                    .header("content-type", "application/json")
                    .body(body.to_vec())
                    .send()
                    .await;
                if let Ok(r) = resp {
                    let good = r.status().is_success();
                    let _ = r.bytes().await;
                    if good {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = start.elapsed().as_secs_f64();
    ok.load(Ordering::Relaxed) as f64 / secs
}

/// Peak resident set of this process (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// User + system CPU seconds of this process so far (clock ticks assumed 100/s, as on Linux).
fn cpu_secs() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at field 3.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 overall: 11 and 12 after the name.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

impl BenchReport {
    /// The report as a text table.
    pub fn table(&self) -> String {
        let l = &self.ledger;
        let p = |x: &Percentiles| {
            format!(
                "p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  max {:.2} ms",
                x.p50_ms, x.p95_ms, x.p99_ms, x.max_ms
            )
        };
        let rejected = if l.rejected.is_empty() {
            "none".to_owned()
        } else {
            l.rejected
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rows = [
            ("database", self.database.clone()),
            (
                "scenario",
                format!(
                    "{} messages × {} endpoint(s), {} B payload, {}, fail rate {}",
                    self.messages, self.endpoints, self.payload_bytes, self.mode, self.fail_rate
                ),
            ),
            (
                "ledger",
                format!(
                    "accepted {}, expected {}, delivered {}, duplicates {}, missing {}, unexpected {}, bad signatures {}",
                    l.accepted,
                    l.expected,
                    l.delivered,
                    l.duplicates,
                    l.missing,
                    l.unexpected,
                    l.bad_signatures
                ),
            ),
            ("ingest rejected", rejected),
            ("ingest", format!("{:.0} msg/s", self.ingest_per_sec)),
            ("ingest latency", p(&self.ingest_latency)),
            (
                "deliveries",
                format!(
                    "{:.0} /s over {:.2} s",
                    self.deliveries_per_sec, self.wall_secs
                ),
            ),
            ("time to deliver", p(&self.time_to_deliver)),
            (
                "loopback (sink alone)",
                format!(
                    "{:.0} req/s; deliveries/loopback = {:.3}",
                    self.loopback_per_sec, self.ratio_to_loopback
                ),
            ),
            (
                "process (hookd+sink+client)",
                format!(
                    "peak RSS {:.1} MB, CPU {:.2} s",
                    self.peak_rss_mb, self.cpu_secs
                ),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        rows.iter()
            .map(|(k, v)| format!("{k:<width$}  {v}\n"))
            .collect()
    }
}
