use std::time::Duration;

use sea_orm::EntityTrait;

use crate::helpers::*;

async fn health(base: &str) -> (u16, serde_json::Value) {
    let resp = reqwest::get(format!("{base}/api/v1/health"))
        .await
        .expect("GET health");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("health answers JSON"))
}

#[tokio::test]
async fn serve_in_an_empty_directory_creates_the_database_and_answers_health() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(hookd(dir.path()));
    assert!(
        dir.path().join("data/hookd.db").is_file(),
        "data/hookd.db created"
    );

    let (status, body) = health(&server.base).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["database"], "ok");

    let resp = reqwest::get(format!("{}/api/v1/no-such-route", server.base))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "not_found");

    server.signal("TERM");
    assert_eq!(
        server.wait_exit(Duration::from_secs(10)),
        Some(0),
        "clean exit on SIGTERM"
    );
}

#[tokio::test]
async fn sigint_stops_accepting_work_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(hookd(dir.path()));
    let base = server.base.clone();
    assert_eq!(health(&base).await.0, 200);
    server.signal("INT");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(
        reqwest::get(format!("{base}/api/v1/health")).await.is_err(),
        "no longer listening"
    );
}

#[tokio::test]
async fn a_restart_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    create_tenant(dir.path());
    for _ in 0..2 {
        let server = Server::start(hookd(dir.path()));
        assert_eq!(health(&server.base).await.0, 200);
        server.signal("TERM");
        assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
    }
    let url = format!("sqlite://{}/data/hookd.db", dir.path().display());
    let store = store::Store::connect(&url, &Default::default())
        .await
        .unwrap();
    let tenants = store::entities::tenant::Entity::find()
        .all(store.connection())
        .await
        .unwrap();
    assert_eq!(
        tenants.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["Acme"]
    );
}

#[tokio::test]
async fn serve_runs_on_postgres_too() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED serve_runs_on_postgres_too: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    let db = store::testing::TestDb::postgres(&admin).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hookd(dir.path());
    cmd.env("HOOKD_DATABASE_URL", &db.url);
    let server = Server::start(cmd);
    let (status, body) = health(&server.base).await;
    assert_eq!((status, body["database"].as_str()), (200, Some("ok")));
    assert!(
        !dir.path().join("data").exists(),
        "no SQLite file when running on PostgreSQL"
    );
    server.signal("TERM");
    assert_eq!(server.wait_exit(Duration::from_secs(10)), Some(0));
}

/// A server logging JSON whose tenant has an application, an endpoint and a message, with a
/// delivery row hand-edited (a dead letter whose message id cannot be read) so that every
/// request that reads it fails.
struct Broken {
    server: Server,
    tenant: String,
    key: String,
    app: String,
    ep: String,
    db: store::Store,
}

async fn broken_server(dir: &std::path::Path) -> Broken {
    let (tenant, key) = create_tenant(dir);
    let mut cmd = hookd(dir);
    cmd.env("HOOKD_LOG_FORMAT", "json")
        .env("HOOKD_ROLES", "api")
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8");
    let server = Server::start(cmd);
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value| {
        let req = http
            .post(format!("{}/api/v1{path}", server.base))
            .bearer_auth(&key)
            .json(&body);
        async move {
            let res = req.send().await.unwrap();
            assert!(res.status().is_success(), "{path}: {}", res.status());
            res.json::<serde_json::Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let app = post("/app".into(), serde_json::json!({"name": "a"})).await;
    let url = serde_json::json!({"url": "http://127.0.0.1:9/hook"});
    let ep = post(format!("/app/{app}/endpoint"), url).await;
    let body = serde_json::json!({"eventType": "x", "payload": {}});
    post(format!("/app/{app}/msg"), body).await;
    let db = store::Store::connect(
        &format!("sqlite://{}/data/hookd.db", dir.display()),
        &Default::default(),
    )
    .await
    .unwrap();
    use sea_orm::ConnectionTrait;
    db.connection()
        .execute_unprepared("UPDATE deliveries SET msg_id = 'msg_not-an-id', state = 'failed'")
        .await
        .unwrap();
    Broken {
        server,
        tenant,
        key,
        app,
        ep,
        db,
    }
}

/// The first line of the server's log containing `needle`, as JSON.
fn log_line(server: &Server, needle: &str) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = server
            ._log
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("a log line with {needle:?}"));
        if line.contains(needle) {
            return serde_json::from_str(&line).unwrap();
        }
    }
}

/// An operator reading the log of a request that failed sees whose request it was: every line
/// logged while serving it carries the tenant, application and endpoint of its span.
#[tokio::test]
async fn a_failed_requests_log_line_names_its_tenant_application_and_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let b = broken_server(dir.path()).await;
    let res = reqwest::Client::new()
        .get(format!(
            // The failed ones: read from the broken deliveries themselves.
            "{}/api/v1/app/{}/endpoint/{}/msg?status=2",
            b.server.base, b.app, b.ep
        ))
        .bearer_auth(&b.key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500);
    let record = log_line(&b.server, "store error");
    let span = &record["span"];
    assert_eq!(span["name"], "request", "{record}");
    assert_eq!(span["tenant"], b.tenant.as_str(), "{record}");
    assert_eq!(span["app"], b.app.as_str(), "{record}");
    assert_eq!(span["endpoint"], b.ep.as_str(), "{record}");
    assert!(
        record.to_string().contains("msg_not-an-id"),
        "the error names the bad value: {record}"
    );
    b.server.signal("TERM");
    assert_eq!(b.server.wait_exit(Duration::from_secs(10)), Some(0));
}

/// The same for the dashboard: a page that fails logs the tenant of the session, and the
/// application and endpoint it was showing.
#[tokio::test]
async fn a_failed_dashboard_pages_log_line_names_its_tenant_application_and_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let b = broken_server(dir.path()).await;
    let tenant: domain::ids::TenantId = b.tenant.parse().unwrap();
    let user =
        b.db.create_user(tenant, "ops@acme.test", "not-a-hash", "admin")
            .await
            .unwrap();
    let expires = domain::Timestamp::now().plus(Duration::from_secs(3600));
    let (_, token) =
        b.db.create_session(tenant, user.id, "csrf", expires)
            .await
            .unwrap();
    let path = format!("/app/{}/endpoint/{}/dead", b.app, b.ep);
    let res = reqwest::Client::new()
        .get(format!("{}{path}", b.server.base))
        .header("cookie", format!("hookd_session={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500, "{}", res.text().await.unwrap());
    let record = log_line(&b.server, "dashboard request failed");
    let span = &record["span"];
    assert_eq!(span["name"], "request", "{record}");
    assert_eq!(span["path"], path.as_str(), "{record}");
    assert_eq!(span["tenant"], b.tenant.as_str(), "{record}");
    assert_eq!(span["app"], b.app.as_str(), "{record}");
    assert_eq!(span["endpoint"], b.ep.as_str(), "{record}");
    b.server.signal("TERM");
    assert_eq!(b.server.wait_exit(Duration::from_secs(10)), Some(0));
}
