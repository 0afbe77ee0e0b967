//! What an operator reads about deliveries: the log line of a failed delivery, from a
//! `hookd serve` child process.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use store::testing::TestDb;

use crate::helpers::Server;

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
