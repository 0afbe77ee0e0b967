//! The load generator behind `hookd bench`, and the receiver (the [`sink`]) behind it and
//! `hookd sink`, kept out of the production crates. `hookd bench` starts a receiver (the sink) and hookd on a fresh database (as a child
//! process, or in this process for tests) or points at a running Svix-compatible server,
//! submits messages over the Svix API at a concurrency (closed loop) or a fixed rate (open
//! loop), or preloads a backlog and lets it drain, keeps an exact ledger of what the receiver
//! acknowledged, and reports throughput, latencies, resources and the raw loopback rate of the
//! sink alone.
//!
//! With a child process, peak RSS and CPU seconds are the server's own; in-process they
//! include the load generator and the sink.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use domain::signing::SigningSecret;
use serde::Serialize;
use serde_json::json;

use crate::sink::{Behaviour, Sink, SinkConfig};

pub mod sink;

/// Any error, sent across threads; the bench only reports them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// A hookd started inside the bench's process, as the binary's wiring starts it: this crate
/// knows nothing of that wiring (the binary depends on this crate, not the other way round).
#[async_trait::async_trait]
pub trait Host: Send + Sync {
    /// Starts hookd with these settings (as `HOOKD_*` variables) and answers once it listens.
    async fn start(&self, env: &BTreeMap<String, String>) -> Result<Started, BoxError>;
}

/// A hookd a [`Host`] started: its API port, how to stop it, and its task.
pub struct Started {
    pub port: u16,
    pub stop: Box<dyn FnOnce() + Send>,
    pub task: tokio::task::JoinHandle<Result<(), BoxError>>,
}

/// Which server takes the load.
#[derive(Clone)]
pub enum Server {
    /// hookd inside this process (tests): resources include the sink and the load generator.
    InProcess(Arc<dyn Host>),
    /// `BIN serve` as a child process: its own peak RSS and CPU are measured.
    Child(std::path::PathBuf),
    /// A running server speaking the Svix API: the bench creates an application and endpoints
    /// with `api_key` and needs the server to reach the sink on 127.0.0.1.
    Remote { url: String, api_key: String },
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub server: Server,
    /// None: a fresh SQLite file in a temporary directory (ignored with a remote server).
    pub database_url: Option<String>,
    /// Instead of submitting over the API, write the messages straight to the database before
    /// the server starts, then measure how fast it drains that backlog.
    pub backlog: bool,
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
    /// A soak: sample the database size and cut latencies into windows as the run goes.
    pub soak: Option<Soak>,
    /// With a child server: 0 runs one `hookd serve` with every role; N > 0 runs one process
    /// with the API and scheduler roles and N more with only the dispatcher role (scale-out
    /// on PostgreSQL).
    pub dispatchers: u32,
    /// Submit through an inbound source (`POST /in/{source}`, each request signed per
    /// Standard Webhooks with its own event id) instead of the API: the receiving side's ack
    /// latency and events/s, forwarded to the sink by the source's application.
    pub inbound: bool,
    /// With `inbound`: events carry hookd's ordering headers, spread over this many keys
    /// (event n: key n mod N, sequence n div N + 1), so the source forwards them in sequence
    /// per key, holding any that arrive ahead of a gap.
    pub inbound_keys: Option<u64>,
}

/// What a soak run samples, and the retention it runs the server with.
#[derive(Clone, Debug)]
pub struct Soak {
    /// Each window's length: the database size is read at its end, latencies are its own.
    pub window: Duration,
    /// The server's metadata retention for the run (payloads: half of it), pruned every 5 s;
    /// `None`: the server's defaults, so nothing expires during the run (the baseline).
    pub retention: Option<Duration>,
}

/// One window of a soak.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SoakWindow {
    /// Seconds from the start of the load to the window's start.
    pub from_secs: u64,
    /// Messages accepted that were sent in this window.
    pub accepted: u64,
    pub ingest_p99_ms: f64,
    /// Of the messages sent in this window.
    pub ttd_p99_ms: f64,
    /// `hookd_database_bytes` read at the window's end.
    pub database_bytes: u64,
    /// `hookd_pruned_rows_total{kind="messages"}` at the window's end.
    pub pruned_messages: u64,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Server::InProcess(_) => f.write_str("InProcess"),
            Server::Child(bin) => f.debug_tuple("Child").field(bin).finish(),
            Server::Remote { url, .. } => f.debug_struct("Remote").field("url", url).finish(),
        }
    }
}

impl BenchOptions {
    /// The defaults of `hookd bench`, against `server`.
    pub fn new(server: Server) -> Self {
        BenchOptions {
            server,
            database_url: None,
            backlog: false,
            messages: 20_000,
            endpoints: 1,
            payload_bytes: 100,
            concurrency: 32,
            rate: None,
            fail_rate: 0.0,
            drain_timeout: Duration::from_secs(120),
            loopback: Duration::from_secs(3),
            soak: None,
            dispatchers: 0,
            inbound: false,
            inbound_keys: None,
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
    /// Messages the API accepted (any 2xx: hookd and Svix answer 202).
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
    /// Inbound events answered `held` (ahead of a gap in their key's sequence): accepted, with
    /// no message id yet, so their deliveries are counted but not timed.
    pub held: u64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct BenchReport {
    /// "in-process", "child process", "N child processes (…)" or the remote URL.
    pub server: String,
    pub database: String,
    pub backlog: bool,
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
    /// VmHWM of the server process (in-process: the whole bench process); 0 for a remote server.
    pub peak_rss_mb: f64,
    /// User + system CPU of the same process, from start of load to end of drain.
    pub cpu_secs: f64,
    /// Signed POSTs per second to the sink alone, closed loop at the same concurrency.
    pub loopback_per_sec: f64,
    /// deliveries_per_sec / loopback_per_sec.
    pub ratio_to_loopback: f64,
    /// Growth of the database's used bytes (free pages excluded) from before the load to the
    /// end of the drain, per accepted message: what each message costs on disk, indexes
    /// included. 0 when the server's database is not visible (in-process or remote).
    pub stored_bytes_per_message: f64,
    /// A soak's windows, in order (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub soak: Vec<SoakWindow>,
}

struct Sent {
    id: Option<String>,
    /// An inbound event answered `held` (no message id yet).
    held: bool,
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
    if opts.backlog && matches!(opts.server, Server::Remote { .. }) {
        return Err("--backlog writes to hookd's database; it cannot be used with --url".into());
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

    // Runs in one process (tests) may start in the same millisecond: the counter keeps their
    // databases apart.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let temp_dir = std::env::temp_dir().join(format!(
        "hookd-bench-{}-{}-{}",
        std::process::id(),
        domain::Timestamp::now().as_millis(),
        RUNS.fetch_add(1, Ordering::Relaxed)
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

/// A server under load, and how to stop it and read its resources.
enum Running {
    InProcess(Started),
    /// The API process first, then any dispatcher-only processes.
    Child(Vec<std::process::Child>),
    Remote,
}

impl Running {
    /// (peak RSS MB, CPU seconds so far) of the server process.
    fn resources(&self) -> (f64, f64) {
        match self {
            Running::InProcess(_) => (peak_rss_mb("self"), cpu_secs("self")),
            // Several processes: their peaks and CPU added up.
            Running::Child(all) => all.iter().fold((0.0, 0.0), |(rss, cpu), c| {
                let pid = c.id().to_string();
                (rss + peak_rss_mb(&pid), cpu + cpu_secs(&pid))
            }),
            Running::Remote => (0.0, 0.0),
        }
    }

    async fn stop(self) {
        match self {
            Running::InProcess(Started { stop, task, .. }) => {
                stop();
                let _ = task.await;
            }
            Running::Child(all) => {
                for mut c in all {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
            Running::Remote => {}
        }
    }
}

/// The tenant, application and endpoints the load goes to.
struct Target {
    base: String,
    key: String,
    app_id: String,
    paths: Vec<String>,
    /// Backlog mode: the message ids written before the server started.
    preloaded: Vec<String>,
}

fn endpoint_body(opts: &BenchOptions, sink: &Sink, path: &str) -> serde_json::Value {
    let mut body = json!({"url": sink.url(path), "secret": SECRET});
    if opts.fail_rate > 0.0 {
        // Quick retries so the drain does not wait minutes on the default schedule.
        let delays: Vec<&str> = std::iter::once("100ms")
            .chain(std::iter::repeat_n("500ms", 19))
            .collect();
        body["retryPolicy"] = json!({ "delays": delays });
    }
    body
}

fn payload(opts: &BenchOptions) -> serde_json::Value {
    let pad = opts.payload_bytes.saturating_sub(r#"{"data":""}"#.len());
    json!({"data": "x".repeat(pad)})
}

/// Creates the tenant and key in the database, and with `--backlog` the application,
/// endpoints and messages too, before any server runs. The target's `base` is left empty:
/// the server's port is not known yet.
async fn prepare_database(
    opts: &BenchOptions,
    sink: &Sink,
    database_url: &str,
    keys: &str,
) -> Result<Target, BoxError> {
    let opts_db = store::ConnectOptions {
        keys: Some(domain::seal::Keyring::parse(keys)?),
        ..store::ConnectOptions::default()
    };
    let store = store::Store::connect(database_url, &opts_db).await?;
    store.migrate().await?;
    let tenant = store
        .create_tenant(store::NewTenant {
            name: "bench".into(),
            notification_email: "bench@example.com".into(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await?;
    let tenant_id = tenant.id;
    let (_, key) = store.create_api_key(tenant_id, "bench").await?;
    let mut target = Target {
        base: String::new(),
        key,
        app_id: String::new(),
        paths: Vec::new(),
        preloaded: Vec::new(),
    };
    if opts.backlog {
        let app = store
            .create_application(
                tenant_id,
                store::NewApplication {
                    name: "bench".into(),
                    ..Default::default()
                },
            )
            .await?;
        for i in 0..opts.endpoints {
            let path = format!("/hook/{i}");
            let new = store::NewEndpoint {
                url: sink.url(&path),
                version: 1,
                ..Default::default()
            };
            store.create_endpoint(tenant_id, &app, new, SECRET).await?;
            target.paths.push(path);
        }
        let payload = serde_json::to_vec(&payload(opts))?;
        target.preloaded.reserve(opts.messages as usize);
        let mut left = opts.messages;
        while left > 0 {
            let n = left.min(10_000);
            left -= n;
            let news = (0..n)
                .map(|_| store::NewMessage {
                    event_type: "bench.event".into(),
                    payload: payload.clone(),
                    ..Default::default()
                })
                .collect();
            for created in store
                .create_messages_in_bulk(tenant_id, &app, news, |ep, now| {
                    store::retry_policy_of(ep).give_up_at(now)
                })
                .await?
            {
                target.preloaded.push(created?.message.id.to_string());
            }
        }
        target.app_id = app.id.to_string();
    }
    store.close().await?;
    Ok(target)
}

/// Starts hookd (in this process or as a child) on `database_url`.
async fn start_server(
    opts: &BenchOptions,
    settings_env: BTreeMap<String, String>,
) -> Result<(Running, u16), BoxError> {
    match &opts.server {
        Server::InProcess(host) => {
            let started = host.start(&settings_env).await?;
            let port = started.port;
            Ok((Running::InProcess(started), port))
        }
        Server::Child(bin) => {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let spawn = |roles: Option<&str>| {
                let mut cmd = std::process::Command::new(bin);
                cmd.arg("serve")
                    .envs(&settings_env)
                    .env("HOOKD_BIND", format!("127.0.0.1:{port}"))
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null());
                if let Some(roles) = roles {
                    cmd.env("HOOKD_ROLES", roles);
                }
                cmd.spawn()
                    .map_err(|e| format!("could not start {} serve: {e}", bin.display()))
            };
            let mut all = Vec::new();
            if opts.dispatchers == 0 {
                all.push(spawn(None)?);
            } else {
                all.push(spawn(Some("api,scheduler"))?);
                for _ in 0..opts.dispatchers {
                    match spawn(Some("dispatcher")) {
                        Ok(c) => all.push(c),
                        Err(e) => {
                            Running::Child(all).stop().await;
                            return Err(e.into());
                        }
                    }
                }
            }
            let running = Running::Child(all);
            let health = format!("http://127.0.0.1:{port}/api/v1/health");
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                if reqwest::get(&health)
                    .await
                    .is_ok_and(|r| r.status().is_success())
                {
                    return Ok((running, port));
                }
                if Instant::now() > deadline {
                    running.stop().await;
                    return Err(format!(
                        "{} serve did not answer {health} within 60 s",
                        bin.display()
                    )
                    .into());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Server::Remote { .. } => Ok((Running::Remote, 0)),
    }
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
    let mut env = env;
    // A key of this run's own: the database is new, and the server must open what
    // `prepare_database` sealed.
    let (_, keys) = domain::seal::OperatorKey::generate("bench", &mut rand::rng())?;
    env.insert("HOOKD_SECRET_KEYS".into(), keys.clone());
    if let Some(kept) = opts.soak.as_ref().and_then(|s| s.retention) {
        let secs = kept.as_secs().max(2);
        env.insert("HOOKD_METADATA_RETENTION".into(), format!("{secs}s"));
        env.insert("HOOKD_PAYLOAD_RETENTION".into(), format!("{}s", secs / 2));
        env.insert("HOOKD_PRUNE_INTERVAL".into(), "5s".into());
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency.max(64))
        .build()?;
    let mut port = 0;
    let (running, mut target) = match &opts.server {
        Server::Remote { url, api_key } => (
            Running::Remote,
            Target {
                base: format!("{}/api/v1", url.trim_end_matches('/')),
                key: api_key.clone(),
                app_id: String::new(),
                paths: Vec::new(),
                preloaded: Vec::new(),
            },
        ),
        _ => {
            let mut target = prepare_database(opts, sink, database_url, &keys).await?;
            let (running, p) = start_server(opts, env).await?;
            port = p;
            target.base = format!("http://127.0.0.1:{port}/api/v1");
            (running, target)
        }
    };
    // The server starts draining a backlog the moment it runs: the clock starts here.
    let load_start = Instant::now();
    let cpu_before = running.resources().1;
    // A preloaded backlog was written before this point: its growth would not be the cost.
    let used_before = match port {
        0 => None,
        _ if opts.backlog => None,
        p => database_used_bytes(&client, p).await,
    };
    let sampler = opts
        .soak
        .as_ref()
        .filter(|_| port != 0)
        .map(|s| sample_database(client.clone(), port, s.window));
    let result = drive(opts, sink, &client, &mut target, load_start).await;
    let samples = match sampler {
        Some((stop, task)) => {
            let _ = stop.send(());
            task.await.unwrap_or_default()
        }
        None => Vec::new(),
    };
    let used_after = match used_before {
        None => None,
        Some(_) => database_used_bytes(&client, port).await,
    };
    let (rss, cpu_after) = running.resources();
    running.stop().await;
    let (ledger, ingest_latency, ttd, ingest_secs, wall, mut soak) = result?;
    for (w, (bytes, pruned)) in soak.iter_mut().zip(samples) {
        w.database_bytes = bytes;
        w.pruned_messages = pruned;
    }
    let cpu = cpu_after - cpu_before;

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
    let stored_bytes_per_message = match (used_before, used_after) {
        (Some(b), Some(a)) if ledger.accepted > 0 => {
            a.saturating_sub(b) as f64 / ledger.accepted as f64
        }
        _ => 0.0,
    };
    Ok(BenchReport {
        server: match &opts.server {
            Server::InProcess(_) => "in-process".to_owned(),
            Server::Child(_) if opts.dispatchers > 0 => format!(
                "{} child processes (1 api + scheduler, {} dispatcher)",
                opts.dispatchers + 1,
                opts.dispatchers
            ),
            Server::Child(_) => "child process".to_owned(),
            Server::Remote { url, .. } => url.clone(),
        },
        database: match &opts.server {
            Server::Remote { .. } => "(the remote server's)".to_owned(),
            _ => store::redact_url(database_url),
        },
        backlog: opts.backlog,
        messages: opts.messages,
        endpoints: opts.endpoints,
        payload_bytes: opts.payload_bytes,
        mode: match (opts.backlog, opts.rate) {
            (true, _) => "backlog written to the database, then drained".to_owned(),
            (false, None) => format!("closed loop, concurrency {}", opts.concurrency),
            (false, Some(r)) => format!("open loop, {r} msg/s"),
        } + &match (opts.inbound, opts.inbound_keys) {
            (true, Some(k)) if k > 0 => {
                format!(", through an inbound source (POST /in, signed), ordered over {k} key(s)")
            }
            (true, _) => ", through an inbound source (POST /in, signed)".to_owned(),
            (false, _) => String::new(),
        },
        fail_rate: opts.fail_rate,
        ingest_per_sec: if ingest_secs > 0.0 {
            ledger.accepted as f64 / ingest_secs
        } else {
            0.0
        },
        ledger,
        ingest_latency,
        deliveries_per_sec,
        time_to_deliver: ttd,
        wall_secs: wall,
        peak_rss_mb: rss,
        cpu_secs: cpu,
        loopback_per_sec,
        ratio_to_loopback: if loopback_per_sec > 0.0 {
            deliveries_per_sec / loopback_per_sec
        } else {
            0.0
        },
        stored_bytes_per_message,
        soak,
    })
}

/// The value of the metric line starting with `name` (name and labels, then a space).
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
}

/// The server's `hookd_database_bytes` less `hookd_database_free_bytes`, from its /metrics.
async fn database_used_bytes(client: &reqwest::Client, port: u16) -> Option<u64> {
    let url = format!("http://127.0.0.1:{port}/metrics");
    let text = client.get(&url).send().await.ok()?.text().await.ok()?;
    let total = metric(&text, "hookd_database_bytes ")?;
    let free = metric(&text, "hookd_database_free_bytes ").unwrap_or(0.0);
    Some((total - free).max(0.0) as u64)
}

/// Reads the server's `hookd_database_bytes` and pruned-message count at the end of every
/// `window`, and once more when told to stop (the window the load ended in).
fn sample_database(
    client: reqwest::Client,
    port: u16,
    window: Duration,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Vec<(u64, u64)>>,
) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let url = format!("http://127.0.0.1:{port}/metrics");
        let mut out = Vec::new();
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + window, window);
        loop {
            // Stopped: one last sample, for the window the load ended in.
            let last = tokio::select! {
                _ = tick.tick() => false,
                _ = &mut stopped => true,
            };
            let text = match client.get(&url).send().await {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            let value = |name: &str| metric(&text, name).unwrap_or(0.0) as u64;
            out.push((
                value("hookd_database_bytes "),
                value("hookd_pruned_rows_total{kind=\"messages\"} "),
            ));
            if last {
                return out;
            }
        }
    });
    (stop, task)
}

/// Cuts (offset from the load's start, value) pairs into windows of `window`: the p99 of each.
fn window_p99(points: &[(Duration, Duration)], window: Duration, n: usize) -> Vec<(u64, f64)> {
    let n = n.max(1);
    let mut by: Vec<Vec<Duration>> = vec![Vec::new(); n];
    for (at, v) in points {
        let i = (at.as_secs_f64() / window.as_secs_f64()) as usize;
        by[i.min(n - 1)].push(*v);
    }
    by.into_iter()
        .map(|v| (v.len() as u64, Percentiles::of(v).p99_ms))
        .collect()
}

type Driven = (Ledger, Percentiles, Percentiles, f64, f64, Vec<SoakWindow>);

/// Submits the load (or waits on the backlog), drains, and settles the ledger.
async fn drive(
    opts: &BenchOptions,
    sink: &Sink,
    client: &reqwest::Client,
    target: &mut Target,
    load_start: Instant,
) -> Result<Driven, BoxError> {
    let mut ledger = Ledger::default();
    let mut started_of: HashMap<String, Instant> = HashMap::new();
    let mut latencies = Vec::new();
    // (sent at, from the load's start; ingest latency), for a soak's windows.
    let mut ingest_points = Vec::new();
    let mut last_answer = load_start;
    if opts.backlog {
        ledger.accepted = target.preloaded.len() as u64;
        for id in target.preloaded.drain(..) {
            started_of.insert(id, load_start);
        }
    } else {
        let base = &target.base;
        target.app_id = create(
            client,
            &target.key,
            &format!("{base}/app"),
            json!({"name": "bench"}),
        )
        .await?;
        for i in 0..opts.endpoints {
            let path = format!("/hook/{i}");
            create(
                client,
                &target.key,
                &format!("{base}/app/{}/endpoint", target.app_id),
                endpoint_body(opts, sink, &path),
            )
            .await?;
            target.paths.push(path);
        }
        let (ingest, body) = if opts.inbound {
            let source = create(
                client,
                &target.key,
                &format!("{base}/inbound/source"),
                json!({"name": "bench", "appId": target.app_id, "eventType": "bench.event",
                       "verification": {"scheme": "standard-webhooks", "secrets": [SECRET]}}),
            )
            .await?;
            let server = base.trim_end_matches("/api/v1");
            (
                Ingest {
                    url: format!("{server}/in/{source}"),
                    auth: IngestAuth::Signed(SigningSecret::parse(SECRET)?),
                    keys: opts.inbound_keys.filter(|k| *k > 0),
                    sent: AtomicU64::new(0),
                },
                serde_json::to_vec(&payload(opts))?,
            )
        } else {
            (
                Ingest {
                    url: format!("{base}/app/{}/msg", target.app_id),
                    auth: IngestAuth::Key(target.key.clone()),
                    keys: None,
                    sent: AtomicU64::new(0),
                },
                serde_json::to_vec(&json!({
                    "eventType": "bench.event",
                    "payload": payload(opts),
                }))?,
            )
        };
        let (ingest, body) = (Arc::new(ingest), Arc::new(body));
        let sent = match opts.rate {
            None => closed_loop(opts, client, &ingest, &body).await,
            Some(rate) => open_loop(opts, rate, client, &ingest, &body).await,
        };
        latencies.reserve(sent.len());
        for s in sent {
            last_answer = last_answer.max(s.answered);
            if s.held {
                ledger.accepted += 1;
                ledger.held += 1;
                latencies.push(s.latency);
                if opts.soak.is_some() {
                    ingest_points.push((s.started.duration_since(load_start), s.latency));
                }
                continue;
            }
            match s.id {
                Some(id) => {
                    ledger.accepted += 1;
                    latencies.push(s.latency);
                    if opts.soak.is_some() {
                        ingest_points.push((s.started.duration_since(load_start), s.latency));
                    }
                    started_of.insert(id, s.started);
                }
                None => *ledger.rejected.entry(s.status).or_default() += 1,
            }
        }
    }
    ledger.expected = ledger.accepted * u64::from(opts.endpoints);
    let deadline = Instant::now() + opts.drain_timeout;
    while (sink.state.ack_count() as u64) < ledger.expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let acks = sink.state.ack_times();
    let mut ttd = Vec::with_capacity(acks.len());
    let mut ttd_points = Vec::new();
    let mut last_ack = load_start;
    for ((path, id), (at, n)) in &acks {
        match started_of.get(id) {
            Some(started) if target.paths.contains(path) => {
                ledger.delivered += 1;
                ledger.duplicates += u64::from(n - 1);
                let took = at.saturating_duration_since(*started);
                ttd.push(took);
                if opts.soak.is_some() {
                    ttd_points.push((started.duration_since(load_start), took));
                }
                last_ack = last_ack.max(*at);
            }
            _ => ledger.unexpected += 1,
        }
    }
    // Deliveries of held events carry message ids their answers did not name.
    let of_held = ledger
        .unexpected
        .min(ledger.held * u64::from(opts.endpoints));
    ledger.delivered += of_held;
    ledger.unexpected -= of_held;
    ledger.missing = ledger.expected - ledger.delivered.min(ledger.expected);
    ledger.bad_signatures = sink.state.report().bad_signatures;
    let ingest_secs = last_answer.duration_since(load_start).as_secs_f64();
    let wall = last_ack.duration_since(load_start).as_secs_f64();
    let soak = match &opts.soak {
        Some(s) => {
            // Windows cover the load as offered (messages / rate), so an 8 s load in 2 s windows
            // is 4 windows however late its last answer came; later points join the last one.
            let offered = match opts.rate {
                Some(rate) => opts.messages as f64 / rate,
                None => ingest_secs,
            };
            let n = (offered / s.window.as_secs_f64()).ceil().max(1.0) as usize;
            let ingest = window_p99(&ingest_points, s.window, n);
            let ttd = window_p99(&ttd_points, s.window, n);
            ingest
                .into_iter()
                .zip(ttd)
                .enumerate()
                .map(
                    |(i, ((accepted, ingest_p99_ms), (_, ttd_p99_ms)))| SoakWindow {
                        from_secs: i as u64 * s.window.as_secs(),
                        accepted,
                        ingest_p99_ms,
                        ttd_p99_ms,
                        ..SoakWindow::default()
                    },
                )
                .collect()
        }
        None => Vec::new(),
    };
    Ok((
        ledger,
        Percentiles::of(latencies),
        Percentiles::of(ttd),
        ingest_secs,
        wall,
        soak,
    ))
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
    if !status.is_success() {
        return Err(format!("POST {url}: {status}: {text}").into());
    }
    let v: serde_json::Value = serde_json::from_str(&text)?;
    v["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("POST {url}: no id in {text}").into())
}

/// Where the load goes, and how each request proves itself.
struct Ingest {
    url: String,
    auth: IngestAuth,
    /// Ordering keys the events are spread over (inbound only).
    keys: Option<u64>,
    /// Events sent so far in this run: each key's sequence starts at 1.
    sent: AtomicU64,
}

enum IngestAuth {
    /// The API, with the tenant's key.
    Key(String),
    /// An inbound source: each request a new event, signed per Standard Webhooks.
    Signed(SigningSecret),
}

async fn send_one(
    client: &reqwest::Client,
    ingest: &Ingest,
    body: &[u8],
    latency_from: Instant,
) -> Sent {
    static EVENTS: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    let req = client
        .post(&ingest.url)
        .header("content-type", "application/json");
    let req = match &ingest.auth {
        IngestAuth::Key(key) => req.bearer_auth(key),
        IngestAuth::Signed(secret) => {
            let n = EVENTS.fetch_add(1, Ordering::Relaxed);
            let id = format!("evt_{}_{n}", std::process::id());
            let ts = domain::Timestamp::now().as_secs();
            let req = match ingest.keys {
                Some(keys) => {
                    let n = ingest.sent.fetch_add(1, Ordering::Relaxed);
                    req.header("webhook-ordering-key", format!("k{}", n % keys))
                        .header("webhook-sequence", (n / keys + 1).to_string())
                }
                None => req,
            };
            req.header("webhook-id", &id)
                .header("webhook-timestamp", ts.to_string())
                .header(
                    "webhook-signature",
                    domain::signing::sign(secret, &id, ts, body),
                )
        }
    };
    let resp = req.body(body.to_vec()).send().await;
    let (id, held, status) = match resp {
        Ok(r) => {
            let status = r.status().as_u16();
            let text = r.text().await.unwrap_or_default();
            let answer = (200..300)
                .contains(&status)
                .then(|| serde_json::from_str::<serde_json::Value>(&text).ok())
                .flatten();
            let id = answer
                .as_ref()
                .and_then(|v| v["id"].as_str().map(str::to_owned));
            let held = answer.is_some_and(|v| v["held"] == true);
            (id, held, status.to_string())
        }
        Err(_) => (None, false, "error".to_owned()),
    };
    let answered = Instant::now();
    Sent {
        id,
        held,
        status,
        started,
        answered,
        latency: answered.duration_since(latency_from),
    }
}

async fn closed_loop(
    opts: &BenchOptions,
    client: &reqwest::Client,
    ingest: &Arc<Ingest>,
    body: &Arc<Vec<u8>>,
) -> Vec<Sent> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..opts.concurrency {
        let (client, ingest, body, next) =
            (client.clone(), ingest.clone(), body.clone(), next.clone());
        let n = opts.messages;
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < n {
                out.push(send_one(&client, &ingest, &body, Instant::now()).await);
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
    ingest: &Arc<Ingest>,
    body: &Arc<Vec<u8>>,
) -> Vec<Sent> {
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(opts.messages as usize);
    for i in 0..opts.messages {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at).await;
        let (client, ingest, body) = (client.clone(), ingest.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            send_one(&client, &ingest, &body, at.into_std()).await
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

/// Peak resident set (VmHWM) of a process (`self` or a pid), in MB.
fn peak_rss_mb(pid: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
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

/// User + system CPU seconds of a process (`self` or a pid) so far (clock ticks assumed
/// 100/s, as on Linux).
fn cpu_secs(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
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
            ("server", self.server.clone()),
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
                    "accepted {}, expected {}, delivered {}, duplicates {}, missing {}, unexpected {}, bad signatures {}{}",
                    l.accepted,
                    l.expected,
                    l.delivered,
                    l.duplicates,
                    l.missing,
                    l.unexpected,
                    l.bad_signatures,
                    if l.held > 0 {
                        format!(
                            " (held ahead of a gap: {}; their deliveries not timed)",
                            l.held
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            ("ingest rejected", rejected),
            (
                "ingest",
                if self.backlog {
                    "(preloaded in the database)".to_owned()
                } else {
                    format!("{:.0} msg/s", self.ingest_per_sec)
                },
            ),
            (
                "ingest latency",
                if self.backlog {
                    "–".to_owned()
                } else {
                    p(&self.ingest_latency)
                },
            ),
            (
                "deliveries",
                format!(
                    "{:.0} /s over {:.2} s",
                    self.deliveries_per_sec, self.wall_secs
                ),
            ),
            (
                if self.backlog {
                    "time to deliver (from start)"
                } else {
                    "time to deliver"
                },
                p(&self.time_to_deliver),
            ),
            (
                "loopback (sink alone)",
                format!(
                    "{:.0} req/s; deliveries/loopback = {:.3}",
                    self.loopback_per_sec, self.ratio_to_loopback
                ),
            ),
            (
                match self.server.as_str() {
                    "in-process" => "process (hookd+sink+client)",
                    _ => "server process",
                },
                format!(
                    "peak RSS {:.1} MB, CPU {:.2} s",
                    self.peak_rss_mb, self.cpu_secs
                ),
            ),
            (
                "stored per message",
                if self.stored_bytes_per_message > 0.0 {
                    format!(
                        "{:.0} B (database growth, indexes included)",
                        self.stored_bytes_per_message
                    )
                } else {
                    "– (not measured: in-process, remote or preloaded)".to_owned()
                },
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out: String = rows
            .iter()
            .map(|(k, v)| format!("{k:<width$}  {v}\n"))
            .collect();
        if !self.soak.is_empty() {
            out.push_str(
                "\nfrom (s)  accepted  ingest p99 (ms)  ttd p99 (ms)  database (MB)  pruned msgs\n",
            );
            for w in &self.soak {
                out.push_str(&format!(
                    "{:>8}  {:>8}  {:>15.2}  {:>12.2}  {:>13.1}  {:>11}\n",
                    w.from_secs,
                    w.accepted,
                    w.ingest_p99_ms,
                    w.ttd_p99_ms,
                    w.database_bytes as f64 / 1e6,
                    w.pruned_messages
                ));
            }
        }
        out
    }
}

/// One scenario of `hookd bench --suite`.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: &'static str,
    /// The `hookd bench` flags that run it alone.
    pub flags: String,
    pub opts: BenchOptions,
}

/// Every scenario of the issue's list, from `base` (its server, database, concurrency and
/// message count), with the largest backlog `big_backlog` deliveries.
pub fn scenarios(base: &BenchOptions, big_backlog: u64) -> Vec<Scenario> {
    let n = base.messages;
    let with = |name, flags: String, f: &dyn Fn(&mut BenchOptions)| {
        let mut opts = base.clone();
        f(&mut opts);
        Scenario { name, flags, opts }
    };
    vec![
        with("1 endpoint, 100 B", format!("--messages {n}"), &|_| {}),
        with(
            "fan-out to 4 endpoints",
            format!("--messages {} --endpoints 4", n / 4),
            &|o| {
                o.messages = n / 4;
                o.endpoints = 4;
            },
        ),
        with(
            "2 KB payload",
            format!("--messages {} --payload-bytes 2048", n / 2),
            &|o| {
                o.messages = n / 2;
                o.payload_bytes = 2048;
            },
        ),
        with(
            "64 KB payload",
            format!("--messages {} --payload-bytes 65536", n / 10),
            &|o| {
                o.messages = n / 10;
                o.payload_bytes = 65536;
            },
        ),
        with(
            "30 % receiver failures",
            format!("--messages {} --fail-rate 0.3 --drain-timeout 300", n / 10),
            &|o| {
                o.messages = n / 10;
                o.fail_rate = 0.3;
                o.drain_timeout = Duration::from_secs(300);
            },
        ),
        with(
            "steady 1,000 msg/s",
            format!("--messages {} --rate 1000", n / 2),
            &|o| {
                o.messages = n / 2;
                o.rate = Some(1000.0);
            },
        ),
        with(
            "backlog of 10,000 draining",
            "--backlog --messages 10000".to_owned(),
            &|o| {
                o.backlog = true;
                o.messages = 10_000;
            },
        ),
        with(
            "backlog draining (large)",
            format!("--backlog --messages {big_backlog} --drain-timeout 3600"),
            &|o| {
                o.backlog = true;
                o.messages = big_backlog;
                o.drain_timeout = Duration::from_secs(3600);
            },
        ),
    ]
}

/// Runs every scenario, each on a fresh database: a temporary SQLite file, or with a
/// PostgreSQL URL a new database on that server, dropped afterwards.
pub async fn run_suite(
    base: &BenchOptions,
    big_backlog: u64,
    mut progress: impl FnMut(&Scenario, &Result<BenchReport, String>),
) -> Vec<(Scenario, Result<BenchReport, String>)> {
    let mut out = Vec::new();
    for (i, mut sc) in scenarios(base, big_backlog).into_iter().enumerate() {
        let name = format!("hookd_bench_{}_{i}", std::process::id());
        let admin = match base.database_url.as_deref() {
            Some(url) if url.starts_with("postgres") => match fresh_postgres(url, &name).await {
                Ok((admin, db_url)) => {
                    sc.opts.database_url = Some(db_url);
                    Some(admin)
                }
                Err(e) => {
                    let r = Err(format!("could not create a database: {e}"));
                    progress(&sc, &r);
                    out.push((sc, r));
                    continue;
                }
            },
            _ => None,
        };
        let result = run(&sc.opts).await.map_err(|e| e.to_string());
        if let Some(admin) = admin {
            let _ = admin
                .execute_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
            let _ = admin.close().await;
        }
        progress(&sc, &result);
        out.push((sc, result));
    }
    out
}

/// Creates database `name` on the server of `url`; returns a connection to `url` (to drop it
/// later) and the new database's URL.
async fn fresh_postgres(url: &str, name: &str) -> Result<(store::Store, String), BoxError> {
    let admin = store::Store::connect(url, &store::ConnectOptions::default()).await?;
    admin
        .execute_sql(&format!("CREATE DATABASE {name}"))
        .await?;
    Ok((admin, with_database(url, name)))
}

/// `postgres://user@host:port[/db][?query]` naming database `name` instead.
fn with_database(url: &str, name: &str) -> String {
    let (head, query) = url.split_once('?').unwrap_or((url, ""));
    let authority = head.find("://").map_or(0, |i| i + 3);
    let server = match head[authority..].find('/') {
        Some(slash) => &head[..authority + slash],
        None => head,
    };
    if query.is_empty() {
        format!("{server}/{name}")
    } else {
        format!("{server}/{name}?{query}")
    }
}

/// The suite's results as a Markdown table (the form BENCHMARKS.md uses).
pub fn suite_table(rows: &[(Scenario, Result<BenchReport, String>)]) -> String {
    let mut t = String::from(
        "| scenario | `hookd bench` flags | delivered / expected (missing, dups) | ingest msg/s | ingest p50 / p99 ms | deliveries/s | ttd p50 / p95 / p99 ms | loopback req/s (ratio) | server peak RSS MB | server CPU s |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (sc, r) in rows {
        match r {
            Ok(r) => {
                let l = &r.ledger;
                let ingest = if r.backlog {
                    ("(preloaded)".to_owned(), "–".to_owned())
                } else {
                    (
                        format!("{:.0}", r.ingest_per_sec),
                        format!(
                            "{:.1} / {:.1}",
                            r.ingest_latency.p50_ms, r.ingest_latency.p99_ms
                        ),
                    )
                };
                t.push_str(&format!(
                    "| {} | `{}` | {} / {} ({}, {}) | {} | {} | {:.0} | {:.1} / {:.1} / {:.1} | {:.0} ({:.3}) | {:.1} | {:.1} |\n",
                    sc.name,
                    sc.flags,
                    l.delivered,
                    l.expected,
                    l.missing,
                    l.duplicates,
                    ingest.0,
                    ingest.1,
                    r.deliveries_per_sec,
                    r.time_to_deliver.p50_ms,
                    r.time_to_deliver.p95_ms,
                    r.time_to_deliver.p99_ms,
                    r.loopback_per_sec,
                    r.ratio_to_loopback,
                    r.peak_rss_mb,
                    r.cpu_secs,
                ));
            }
            Err(e) => t.push_str(&format!(
                "| {} | `{}` | **failed: {}** | | | | | | | |\n",
                sc.name,
                sc.flags,
                e.replace('|', "/")
            )),
        }
    }
    t
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_fresh_database_keeps_the_server_user_and_options() {
        for (url, want) in [
            (
                "postgres://pg@h:5432/postgres",
                "postgres://pg@h:5432/fresh",
            ),
            ("postgres://pg@h:5432", "postgres://pg@h:5432/fresh"),
            (
                "postgres://pg@h/db?sslmode=disable",
                "postgres://pg@h/fresh?sslmode=disable",
            ),
        ] {
            assert_eq!(super::with_database(url, "fresh"), want);
        }
    }
}
