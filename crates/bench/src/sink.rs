//! `hookd sink`: a webhook receiver for tests, demos and checking a setup. It verifies
//! Standard Webhooks signatures (401 on a bad one), dedups by `webhook-id`, checks per-key
//! sequence order, injects the failures asked for, and reports what it saw as JSON.
//!
//! Control routes (for scripts and tests): `GET /_sink/report`, `POST /_sink/behaviour`
//! with any of `{"failRate", "failStatus", "latencyMs", "timeoutRate", "retryAfter"}`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::Timestamp;
use domain::signing::{SigningSecret, verify};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// What the sink does with each request; changeable while it runs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Behaviour {
    /// Share of requests answered with `fail_status` (0.0–1.0).
    pub fail_rate: f64,
    pub fail_status: u16,
    /// Delay before answering.
    pub latency_ms: u64,
    /// Share of requests never answered (the sender's timeout fires).
    pub timeout_rate: f64,
    /// Sent as `Retry-After` with injected failures.
    pub retry_after: Option<String>,
    /// Fail the first N requests of every message id (deterministic retries), then succeed.
    pub fail_first: u32,
    /// Injected failures also answer `webhook-delivery: abort-message` (stop retrying).
    pub abort_message: bool,
    /// Every signed request is answered with `webhook-delivery: disable` (disable the
    /// endpoint), whatever its status.
    pub disable_endpoint: bool,
}

impl Behaviour {
    /// The status of an injected failure (500 when none is set).
    fn failure_status(&self) -> u16 {
        if self.fail_status == 0 {
            500
        } else {
            self.fail_status
        }
    }
}

#[derive(Clone, Debug)]
pub struct SinkConfig {
    pub bind: SocketAddr,
    /// Secrets that may sign; empty means signatures are not checked.
    pub secrets: Vec<SigningSecret>,
    pub behaviour: Behaviour,
    pub report: Option<PathBuf>,
    /// Keep every request (for tests); off for long runs.
    pub record: bool,
}

/// One request as the sink saw it.
#[derive(Clone, Debug, Serialize)]
pub struct Received {
    pub msg_id: String,
    pub path: String,
    pub attempt: Option<u32>,
    pub ordering_key: Option<String>,
    pub sequence: Option<i64>,
    pub at: Timestamp,
    /// The status the sink answered (0 = never answered).
    pub status: u16,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Report {
    /// Requests received, including failures and duplicates.
    pub received: u64,
    /// Distinct message ids acknowledged with a 2xx.
    pub unique: u64,
    /// 2xx acknowledgements of an id already acknowledged.
    pub duplicates: u64,
    pub bad_signatures: u64,
    /// Requests whose sequence number came before the previous one of its key was acknowledged.
    pub order_violations: u64,
    /// Answers by status code ("0" = never answered).
    pub statuses: BTreeMap<String, u64>,
    /// The most requests the sink held open at one time.
    pub max_concurrent: u64,
}

#[derive(Default)]
struct Inner {
    report: Report,
    acked: HashSet<String>,
    /// Highest acknowledged sequence per (path, ordering key).
    acked_seq: HashMap<(String, String), i64>,
    /// Requests seen per message id, for `fail_first`.
    seen: HashMap<String, u32>,
    log: Vec<Received>,
    /// First 2xx time and 2xx count per (path, message id), when tracking (for `hookd bench`).
    ack_times: HashMap<(String, String), (std::time::Instant, u32)>,
}

pub struct SinkState {
    in_flight: std::sync::atomic::AtomicU64,
    secrets: Vec<SigningSecret>,
    record: bool,
    track_acks: std::sync::atomic::AtomicBool,
    behaviour: Mutex<Behaviour>,
    inner: Mutex<Inner>,
}

impl SinkState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn report(&self) -> Report {
        self.lock().report.clone()
    }

    /// Every request so far (only when recording).
    pub fn received(&self) -> Vec<Received> {
        self.lock().log.clone()
    }

    /// The distinct message ids acknowledged so far.
    pub fn acked_ids(&self) -> HashSet<String> {
        self.lock().acked.clone()
    }

    /// From now on, remember when each (path, message id) was first acknowledged.
    pub fn track_ack_times(&self) {
        self.track_acks
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// First acknowledgement time and number of 2xx answers per (path, message id), since
    /// [`SinkState::track_ack_times`].
    pub fn ack_times(&self) -> HashMap<(String, String), (std::time::Instant, u32)> {
        self.lock().ack_times.clone()
    }

    /// How many (path, message id) pairs have been acknowledged since tracking began.
    pub fn ack_count(&self) -> usize {
        self.lock().ack_times.len()
    }

    pub fn set_behaviour(&self, b: Behaviour) {
        *self.behaviour.lock().unwrap_or_else(|p| p.into_inner()) = b;
    }

    fn behaviour(&self) -> Behaviour {
        self.behaviour
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

pub struct Sink {
    pub port: u16,
    pub state: Arc<SinkState>,
    handle: ServerHandle,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Sink {
    /// Binds and starts serving in the background.
    pub fn start(cfg: SinkConfig) -> std::io::Result<Sink> {
        let listener = TcpListener::bind(cfg.bind)?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(SinkState {
            in_flight: Default::default(),
            secrets: cfg.secrets,
            record: cfg.record,
            track_acks: Default::default(),
            behaviour: Mutex::new(cfg.behaviour),
            inner: Mutex::new(Inner::default()),
        });
        let data = web::Data::from(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .app_data(web::PayloadConfig::new(64 * 1024 * 1024))
                .route("/_sink/report", web::get().to(report))
                .route("/_sink/behaviour", web::post().to(set_behaviour))
                .default_service(web::to(receive))
        })
        .disable_signals()
        .shutdown_timeout(1)
        .listen(listener)?
        .run();
        let handle = server.handle();
        let task = tokio::spawn(server);
        Ok(Sink {
            port,
            state,
            handle,
            task,
        })
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub async fn stop(self) {
        self.handle.stop(false).await;
        let _ = self.task.await;
    }
}

async fn report(state: web::Data<SinkState>) -> HttpResponse {
    HttpResponse::Ok().json(state.report())
}

async fn set_behaviour(state: web::Data<SinkState>, body: web::Json<Behaviour>) -> HttpResponse {
    state.set_behaviour(body.into_inner());
    HttpResponse::Ok().json(state.behaviour())
}

fn header(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Counts a request as open until dropped (also when the sender gives up mid-request).
struct Open<'a>(&'a SinkState);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn receive(req: HttpRequest, body: web::Bytes, state: web::Data<SinkState>) -> HttpResponse {
    let now = Timestamp::now();
    let open_now = state
        .in_flight
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        + 1;
    let _open = Open(&state);
    let msg_id = header(&req, "webhook-id").unwrap_or_default();
    let key = header(&req, "webhook-ordering-key");
    let seq = header(&req, "webhook-sequence").and_then(|s| s.parse::<i64>().ok());
    let behaviour = state.behaviour();
    let signed_ok = state.secrets.is_empty()
        || verify(
            &state.secrets,
            &msg_id,
            &header(&req, "webhook-timestamp").unwrap_or_default(),
            &header(&req, "webhook-signature").unwrap_or_default(),
            &body,
            now,
        )
        .is_ok();
    let nth = {
        let mut inner = state.lock();
        let n = inner.seen.entry(msg_id.clone()).or_default();
        *n += 1;
        *n
    };
    let (status, never_answer) = if !signed_ok {
        (401, false)
    } else if nth <= behaviour.fail_first {
        (behaviour.failure_status(), false)
    } else {
        let mut rng = rand::rng();
        if behaviour.timeout_rate > 0.0 && rng.random::<f64>() < behaviour.timeout_rate {
            (0, true)
        } else if behaviour.fail_rate > 0.0 && rng.random::<f64>() < behaviour.fail_rate {
            (behaviour.failure_status(), false)
        } else {
            (200, false)
        }
    };
    {
        let mut inner = state.lock();
        let r = &mut inner.report;
        r.max_concurrent = r.max_concurrent.max(open_now);
        r.received += 1;
        *r.statuses.entry(status.to_string()).or_default() += 1;
        if !signed_ok {
            r.bad_signatures += 1;
        }
        if let (Some(k), Some(s)) = (&key, seq) {
            let slot = (req.path().to_owned(), k.clone());
            let acked = inner.acked_seq.get(&slot).copied().unwrap_or(0);
            if signed_ok && s > acked + 1 {
                inner.report.order_violations += 1;
            }
            if status == 200 && s > acked {
                inner.acked_seq.insert(slot, s);
            }
        }
        if status == 200 && state.track_acks.load(std::sync::atomic::Ordering::Relaxed) {
            inner
                .ack_times
                .entry((req.path().to_owned(), msg_id.clone()))
                .and_modify(|(_, n)| *n += 1)
                .or_insert((std::time::Instant::now(), 1));
        }
        if status == 200 {
            if inner.acked.insert(msg_id.clone()) {
                inner.report.unique += 1;
            } else {
                inner.report.duplicates += 1;
            }
        }
        if state.record {
            let headers = req
                .headers()
                .iter()
                .filter_map(|(k, v)| {
                    v.to_str()
                        .ok()
                        .map(|v| (k.as_str().to_owned(), v.to_owned()))
                })
                .collect();
            inner.log.push(Received {
                msg_id,
                path: req.path().to_owned(),
                attempt: header(&req, domain::attempt::ATTEMPT_HEADER).and_then(|a| a.parse().ok()),
                ordering_key: key,
                sequence: seq,
                at: now,
                status,
                headers,
                body: body.to_vec(),
            });
        }
    }
    if never_answer {
        // Hold the request open far past any sender's timeout.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if behaviour.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(behaviour.latency_ms)).await;
    }
    let mut resp = HttpResponse::build(
        actix_web::http::StatusCode::from_u16(status).unwrap_or(actix_web::http::StatusCode::OK),
    );
    if status != 200
        && status != 401
        && let Some(ra) = &behaviour.retry_after
    {
        resp.insert_header(("retry-after", ra.as_str()));
    }
    if status != 200 && signed_ok && behaviour.abort_message {
        resp.insert_header(("webhook-delivery", "abort-message"));
    }
    if signed_ok && behaviour.disable_endpoint {
        resp.insert_header(("webhook-delivery", "disable"));
    }
    if !signed_ok {
        return resp.body("bad signature");
    }
    resp.body(if status == 200 {
        "ok"
    } else {
        "injected failure"
    })
}

/// Writes the report as JSON to `path`.
pub fn write_report(path: &std::path::Path, report: &Report) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    std::fs::write(path, text)
}
