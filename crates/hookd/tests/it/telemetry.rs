//! OpenTelemetry as an operator sees it: `hookd serve` with `otlp_endpoint` pointed at a real
//! OTLP/HTTP receiver on loopback (the protobuf requests decoded with the exporter's own
//! types), and the log line of a failed delivery.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use reqwest::Method;
use serde_json::{Value, json};
use store::testing::TestDb;

use crate::delivery::eventually;
use crate::helpers::Server;

/// In the payload only: must never reach a span, an attribute or an exported log record.
const MARKER: &str = "payload-marker-7f3a9c";

/// What the loopback receiver got: OTLP requests (raw and decoded) and webhook deliveries.
#[derive(Default)]
struct Seen {
    raw: Vec<Vec<u8>>,
    spans: Vec<Span>,
    log_bodies: Vec<String>,
    /// Per delivery path, the `traceparent` header of each request (None: not sent).
    deliveries: HashMap<String, Vec<Option<String>>>,
}

type Shared = Arc<Mutex<Seen>>;

async fn traces(seen: web::Data<Shared>, body: web::Bytes) -> HttpResponse {
    let req = ExportTraceServiceRequest::decode(body.as_ref()).expect("OTLP trace protobuf");
    let mut s = seen.lock().unwrap();
    s.raw.push(body.to_vec());
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            s.spans.extend(ss.spans);
        }
    }
    HttpResponse::Ok().finish()
}

async fn logs(seen: web::Data<Shared>, body: web::Bytes) -> HttpResponse {
    let req = ExportLogsServiceRequest::decode(body.as_ref()).expect("OTLP logs protobuf");
    let mut s = seen.lock().unwrap();
    s.raw.push(body.to_vec());
    for rl in req.resource_logs {
        let service = rl
            .resource
            .as_ref()
            .and_then(|r| text_of(&r.attributes, "service.name"));
        assert_eq!(service.as_deref(), Some("hookd"));
        for sl in rl.scope_logs {
            for r in sl.log_records {
                if let Some(any_value::Value::StringValue(b)) = r.body.and_then(|b| b.value) {
                    s.log_bodies.push(b);
                }
            }
        }
    }
    HttpResponse::Ok().finish()
}

async fn hook(seen: web::Data<Shared>, req: HttpRequest) -> HttpResponse {
    let tp = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut s = seen.lock().unwrap();
    s.deliveries
        .entry(req.path().to_owned())
        .or_default()
        .push(tp);
    HttpResponse::Ok().finish()
}

/// One loopback server for both: the collector (`/v1/…`) and the webhook receiver (the rest).
async fn receiver() -> (String, Shared, actix_web::dev::ServerHandle) {
    let seen: Shared = Arc::default();
    let data = web::Data::new(seen.clone());
    let (base, handle) = crate::helpers::loopback_server(move |cfg| {
        cfg.app_data(data.clone())
            .app_data(web::PayloadConfig::new(16 << 20))
            .route("/v1/traces", web::post().to(traces))
            .route("/v1/logs", web::post().to(logs))
            .default_service(web::post().to(hook));
    });
    (base, seen, handle)
}

fn text_of(attrs: &[KeyValue], key: &str) -> Option<String> {
    let v = attrs.iter().find(|a| a.key == key)?.value.clone()?.value?;
    Some(match v {
        any_value::Value::StringValue(s) => s,
        any_value::Value::IntValue(i) => i.to_string(),
        any_value::Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `hookd serve` (all roles) on `db`, exporting to `otlp` when given.
fn serve(db: &TestDb, dir: &std::path::Path, otlp: Option<&str>) -> Server {
    let mut cmd = crate::helpers::hookd(dir);
    cmd.env("HOOKD_DATABASE_URL", &db.url)
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8")
        .env("HOOKD_DELIVERY_POLL_INTERVAL", "50ms")
        .env("HOOKD_LOG_LEVEL", "info")
        .env("HOOKD_LOG_FORMAT", "json");
    if let Some(url) = otlp {
        cmd.env("HOOKD_OTLP_ENDPOINT", url);
    }
    Server::start(cmd)
}

struct Api {
    base: String,
    key: String,
    client: reqwest::Client,
}

impl Api {
    async fn ok(&self, method: Method, path: &str, body: Value, want: u16) -> Value {
        let r = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(status, want, "{path}: {body}");
        body
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_one_trace_from_its_request_through_each_attempt() {
    for db in TestDb::all().await {
        let (rx, seen, handle) = receiver().await;
        let (_, key) = testkit::new_tenant(&db.store, "acme").await;
        let dir = tempfile::tempdir().unwrap();
        let server = serve(&db, dir.path(), Some(&rx));
        let api = Api {
            base: server.base.clone(),
            key,
            client: reqwest::Client::new(),
        };
        let app = api
            .ok(
                Method::POST,
                "/app",
                json!({"name": "traced", "uid": "traced"}),
                201,
            )
            .await;
        let app_id = app["id"].as_str().unwrap().to_owned();
        let opted = api
            .ok(
                Method::POST,
                &format!("/app/{app_id}/endpoint"),
                json!({"url": format!("{rx}/opted"), "sendTraceparent": true}),
                201,
            )
            .await;
        assert_eq!(opted["sendTraceparent"], true, "{opted}");
        let plain = api
            .ok(
                Method::POST,
                &format!("/app/{app_id}/endpoint"),
                json!({"url": format!("{rx}/plain")}),
                201,
            )
            .await;
        assert_eq!(plain["sendTraceparent"], false, "{plain}");
        let msg = api
            .ok(
                Method::POST,
                &format!("/app/{app_id}/msg"),
                json!({"eventType": "order.paid", "payload": {"note": MARKER}}),
                202,
            )
            .await;
        let msg_id = msg["id"].as_str().unwrap().to_owned();

        let spans_of = |msg_id: String| {
            let seen = seen.clone();
            move || {
                let s = seen.lock().unwrap();
                let request = s
                    .spans
                    .iter()
                    .find(|sp| {
                        sp.name == "request"
                            && text_of(&sp.attributes, "msg").as_deref() == Some(msg_id.as_str())
                    })
                    .cloned();
                let deliveries: Vec<Span> = s
                    .spans
                    .iter()
                    .filter(|sp| {
                        sp.name == "delivery"
                            && text_of(&sp.attributes, "msg").as_deref() == Some(msg_id.as_str())
                    })
                    .cloned()
                    .collect();
                (request, deliveries)
            }
        };
        let found = spans_of(msg_id.clone());
        eventually(
            Duration::from_secs(20),
            "the request and two delivery spans",
            || {
                let (request, deliveries) = found();
                async move { request.is_some() && deliveries.len() == 2 }
            },
        )
        .await;
        let (request, deliveries) = found();
        let request = request.unwrap();
        assert_eq!(
            text_of(&request.attributes, "path").as_deref(),
            Some(format!("/api/v1/app/{app_id}/msg").as_str())
        );
        assert!(text_of(&request.attributes, "tenant").is_some_and(|t| t.starts_with("tnt_")));
        let opted_id = opted["id"].as_str().unwrap();
        let plain_id = plain["id"].as_str().unwrap();
        let mut endpoints = Vec::new();
        for d in &deliveries {
            // One trace: each attempt is the request's child, and linked to it.
            assert_eq!(
                hex(&d.trace_id),
                hex(&request.trace_id),
                "{}",
                db.backend_name
            );
            assert_eq!(hex(&d.parent_span_id), hex(&request.span_id));
            assert!(
                d.links
                    .iter()
                    .any(|l| hex(&l.trace_id) == hex(&request.trace_id)
                        && hex(&l.span_id) == hex(&request.span_id)),
                "{:?}",
                d.links
            );
            let attr = |k: &str| text_of(&d.attributes, k).unwrap_or_default();
            assert_eq!(attr("app"), app_id);
            assert!(attr("tenant").starts_with("tnt_"));
            assert!(
                attr("attempt_id").starts_with("atmpt_"),
                "{}",
                attr("attempt_id")
            );
            assert_eq!(attr("attempt"), "1");
            assert_eq!(attr("status"), "200");
            assert_eq!(attr("outcome"), "delivered");
            endpoints.push(attr("endpoint"));
        }
        endpoints.sort();
        let mut want = vec![opted_id.to_owned(), plain_id.to_owned()];
        want.sort();
        assert_eq!(endpoints, want);

        // The opted-in endpoint learns its attempt's span; the other gets no header.
        let (opted_tp, plain_tp) = {
            let s = seen.lock().unwrap();
            (
                s.deliveries["/opted"].clone(),
                s.deliveries["/plain"].clone(),
            )
        };
        assert_eq!(plain_tp, vec![None]);
        let tp = opted_tp[0]
            .clone()
            .expect("a traceparent for the opted-in endpoint");
        let opted_span = deliveries
            .iter()
            .find(|d| text_of(&d.attributes, "endpoint").as_deref() == Some(opted_id))
            .unwrap();
        assert_eq!(
            tp,
            format!(
                "00-{}-{}-01",
                hex(&opted_span.trace_id),
                hex(&opted_span.span_id)
            )
        );

        // An inbound request is traced the same way: its forwarding's attempts join its trace.
        let src = api
            .ok(
                Method::POST,
                "/inbound/source",
                json!({"name": "shop", "appId": app_id, "eventType": "inbound.event",
                       "verification": {"scheme": "none"}}),
                201,
            )
            .await;
        let src_id = src["id"].as_str().unwrap().to_owned();
        let posted = api
            .client
            .post(format!("{}/in/{src_id}", api.base))
            .header("content-type", "application/json")
            .body(json!({"note": MARKER}).to_string())
            .send()
            .await
            .unwrap();
        assert!(posted.status().is_success(), "{}", posted.status());
        let inbound = {
            let seen = seen.clone();
            let path = format!("/in/{src_id}");
            move || {
                let s = seen.lock().unwrap();
                let Some(request) = s.spans.iter().find(|sp| {
                    sp.name == "request"
                        && text_of(&sp.attributes, "path").as_deref() == Some(path.as_str())
                }) else {
                    return 0;
                };
                s.spans
                    .iter()
                    .filter(|sp| {
                        sp.name == "delivery"
                            && sp.trace_id == request.trace_id
                            && sp.parent_span_id == request.span_id
                            && sp.links.iter().any(|l| l.span_id == request.span_id)
                    })
                    .count()
            }
        };
        eventually(
            Duration::from_secs(20),
            "the inbound request's span and its two forwarded attempts",
            || {
                let n = inbound();
                async move { n == 2 }
            },
        )
        .await;

        let log = server.stop_and_log();
        handle.stop(true).await;
        let s = seen.lock().unwrap();
        // The log records went over OTLP too (flushed at stop).
        assert!(
            s.log_bodies.iter().any(|b| b.contains("listening on")),
            "{:?}\n{log}",
            s.log_bodies
        );
        // Never the payload, anywhere in what was exported.
        let marker = MARKER.as_bytes();
        for body in &s.raw {
            assert!(!body.windows(marker.len()).any(|w| w == marker));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_logs_its_cause_as_its_page_shows_it() {
    let db = TestDb::sqlite().await;
    let (_, key) = testkit::new_tenant(&db.store, "acme").await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&db, dir.path(), None);
    let api = Api {
        base: server.base.clone(),
        key,
        client: reqwest::Client::new(),
    };
    let app = api
        .ok(Method::POST, "/app", json!({"name": "a", "uid": "a"}), 201)
        .await;
    let app_id = app["id"].as_str().unwrap().to_owned();
    api.ok(
        Method::POST,
        &format!("/app/{app_id}/endpoint"),
        json!({"url": format!("http://127.0.0.1:{port}/hook?token=s3cret")}),
        201,
    )
    .await;
    api.ok(
        Method::POST,
        &format!("/app/{app_id}/msg"),
        json!({"eventType": "order.paid", "payload": {"n": 1}}),
        202,
    )
    .await;
    let want = format!("connect: Connection refused (127.0.0.1:{port})");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let line = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = server
            ._log
            .recv_timeout(left)
            .expect("a delivery attempt line within 20 s");
        if line.contains("delivery attempt") {
            break line;
        }
    };
    let v: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(v["cause"], want.as_str(), "{line}");
    assert_eq!(v["error"], "connect", "{line}");
    assert!(!line.contains("s3cret"), "{line}");
}
