//! Crash safety and scale-out, with real processes and real kills.

use std::collections::HashSet;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bench::sink::Behaviour;
use domain::Timestamp;
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use serde_json::json;
use store::entities::{delivery, message, node_heartbeat};
use store::testing::TestDb;

use crate::delivery::{SECRET, eventually, sink};
use testkit::new_tenant;

/// A child process that is killed when dropped, so a failing test never leaves one running.
pub(crate) struct Proc(pub(crate) Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub(crate) fn start_child(db_url: &str, port: u16) -> Proc {
    let mut cmd = crate::helpers::hookd_bin();
    cmd.arg("serve")
        .env("HOOKD_DATABASE_URL", db_url)
        .env("HOOKD_BIND", format!("127.0.0.1:{port}"))
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8")
        .env("HOOKD_DELIVERY_LEASE", "2s")
        .env("HOOKD_DELIVERY_MAX_IN_FLIGHT", "64")
        .env("HOOKD_DELIVERY_POLL_INTERVAL", "50ms")
        .env("HOOKD_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(Proc)
        .expect("start hookd serve")
}

/// Creates an application through the API at `base`; returns its id.
pub(crate) async fn create_app(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    name: &str,
) -> String {
    let app: serde_json::Value = client
        .post(format!("{base}/api/v1/app"))
        .bearer_auth(key)
        .json(&json!({ "name": name }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    app["id"].as_str().expect("an application id").to_owned()
}

pub(crate) async fn wait_healthy(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{base}/api/v1/health")).send().await
            && r.status() == StatusCode::OK
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("hookd did not come up at {base}");
}

/// SIGKILLs the server four times, 700 ms apart, starting it again each time on the same
/// database and port. Returns the last one and how many deliveries the killed ones held
/// (claimed, not recorded): the most they can have sent twice.
pub(crate) async fn kill_four_times(
    mut child: Proc,
    db: &TestDb,
    client: &reqwest::Client,
    port: u16,
) -> (Proc, u64) {
    let mut in_flight_at_kills = 0u64;
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        child.0.kill().expect("SIGKILL");
        child.0.wait().unwrap();
        // What the in-flight gauge counts: on PostgreSQL also the deliveries handed off at
        // ingest that are still only journaled.
        in_flight_at_kills += db
            .store
            .system()
            .queue_gauges(Timestamp::now())
            .await
            .unwrap()
            .sending;
        child = start_child(&db.url, port);
        wait_healthy(client, &format!("http://127.0.0.1:{port}")).await;
    }
    (child, in_flight_at_kills)
}

#[tokio::test]
async fn sigkill_during_a_flow_of_5000_messages_loses_nothing() {
    for db in TestDb::all().await {
        let store = db.store.clone();
        let (_, key) = new_tenant(&store, "crash").await;
        let sink = sink(Behaviour {
            latency_ms: 2,
            ..Default::default()
        });
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let child = start_child(&db.url, port);
        wait_healthy(&client, &base).await;

        let a = create_app(&client, &base, &key, "crash").await;
        let r = client
            .post(format!("{base}/api/v1/app/{a}/endpoint"))
            .bearer_auth(&key)
            .json(&json!({"url": sink.url("/crash"), "secret": SECRET, "retryPolicy": {"delays": ["100ms"], "maxAttempts": 50}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);

        // Eight senders, each retrying a message until hookd acknowledges it (201, or 409 when
        // an earlier try was stored but its answer was lost in a kill).
        const TOTAL: usize = 5000;
        let next = Arc::new(AtomicUsize::new(0));
        let mut senders = Vec::new();
        for _ in 0..8 {
            let (client, base, key, a, next) = (
                client.clone(),
                base.clone(),
                key.clone(),
                a.clone(),
                next.clone(),
            );
            senders.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= TOTAL {
                        return;
                    }
                    let body = json!({"eventType": "crash.test", "eventId": format!("m-{i}"), "payload": {"i": i}});
                    loop {
                        let sent = client.post(format!("{base}/api/v1/app/{a}/msg")).bearer_auth(&key).json(&body).send().await;
                        match sent.map(|r| r.status()) {
                            Ok(StatusCode::ACCEPTED | StatusCode::CONFLICT) => break,
                            _ => tokio::time::sleep(Duration::from_millis(50)).await,
                        }
                    }
                }
            }));
        }

        let (child, in_flight_at_kills) = kill_four_times(child, &db, &client, port).await;
        for s in senders {
            s.await.unwrap();
        }
        let stored: HashSet<String> = message::Entity::find()
            .all(store.connection())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        assert_eq!(
            stored.len(),
            TOTAL,
            "every acknowledged message is stored exactly once"
        );
        eventually(
            Duration::from_secs(90),
            "every stored message delivered",
            || async { sink.state.report().unique as usize == TOTAL },
        )
        .await;
        let report = sink.state.report();
        assert_eq!(
            sink.state.acked_ids(),
            stored,
            "none lost on {}",
            db.backend_name
        );
        assert!(
            report.duplicates <= in_flight_at_kills,
            "{} duplicates but only {in_flight_at_kills} deliveries were in flight at the kills",
            report.duplicates
        );
        assert_eq!(report.bad_signatures, 0);
        eprintln!(
            "{}: {TOTAL} delivered through 4 kills; {} duplicates (bound {in_flight_at_kills})",
            db.backend_name, report.duplicates
        );
        drop(child);
        sink.stop().await;
    }
}

#[tokio::test]
async fn several_dispatchers_on_one_postgres_share_work_without_double_sends() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!(
            "SKIPPED several_dispatchers_on_one_postgres: HOOKD_TEST_POSTGRES_URL is not set"
        );
        return;
    };
    let db = TestDb::postgres(&admin).await;
    let store = db.store.clone();
    let (_, key) = new_tenant(&store, "scale").await;
    // Slow enough that one dispatcher alone would need seconds for the backlog below.
    let sink = sink(Behaviour {
        latency_ms: 100,
        fail_rate: 0.2,
        fail_status: 503,
        ..Default::default()
    });
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    // One process with only the API, then (once the backlog is written) three with only the
    // dispatcher, each allowed 32 requests in flight so that no single one can take all the
    // work. Starting them after the backlog exists keeps the test about sharing it: started
    // first, on a loaded machine one could be ready seconds before the others.
    let mut api_only = start_child_roles(&db.url, "api");
    api_only.env("HOOKD_BIND", format!("127.0.0.1:{port}"));
    let mut children = vec![Proc(api_only.spawn().expect("start api"))];
    wait_healthy(&client, &base).await;
    // Eight applications with an endpoint each: each endpoint is sent to by one dispatcher at
    // a time (its limits hold for the deployment), so the processes share the work by
    // endpoint; at their caps (10) eight need more than one process's 32 requests in flight.
    let mut apps = Vec::new();
    for i in 0..8 {
        let a = create_app(&client, &base, &key, &format!("scale-{i}")).await;
        client
            .post(format!("{base}/api/v1/app/{a}/endpoint"))
            .bearer_auth(&key)
            .json(&json!({"url": sink.url(&format!("/scale-{i}")), "secret": SECRET, "retryPolicy": {"delays": ["30ms"], "maxAttempts": 50}}))
            .send()
            .await
            .unwrap();
        apps.push(a);
    }
    for _ in 0..3 {
        let mut cmd = start_child_roles(&db.url, "dispatcher");
        cmd.env("HOOKD_DELIVERY_MAX_IN_FLIGHT", "32");
        // One failure in five makes five in a row likely somewhere in 1,250 attempts, and an
        // open breaker holds the endpoint for 30 s: this test is about sharing work, not that.
        cmd.env("HOOKD_BREAKER_FAILURES", "1000");
        cmd.env("HOOKD_BREAKER_FAILURE_RATIO", "1");
        children.push(Proc(cmd.spawn().expect("start dispatcher")));
    }
    // All three up (each has reported a heartbeat) before the first message: an endpoint
    // belongs to the dispatcher that claims it first and stays with it while it has work, so
    // one started seconds before the others would take every endpoint.
    eventually(Duration::from_secs(60), "three dispatchers up", || async {
        node_heartbeat::Entity::find()
            .filter(node_heartbeat::Column::Roles.eq("dispatcher"))
            .count(store.connection())
            .await
            .unwrap()
            == 3
    })
    .await;
    const TOTAL: u64 = 1000;
    for i in 0..TOTAL {
        let a = &apps[i as usize % apps.len()];
        let r = client
            .post(format!("{base}/api/v1/app/{a}/msg"))
            .bearer_auth(&key)
            .json(&json!({"eventType": "scale.test", "payload": {"i": i}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    // Watch which processes hold claims while the work drains.
    let mut owners = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while sink.state.report().unique < TOTAL && Instant::now() < deadline {
        for d in delivery::Entity::find()
            .filter(delivery::Column::State.eq("sending"))
            .all(store.connection())
            .await
            .unwrap()
        {
            owners.extend(d.lease_owner);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let report = sink.state.report();
    let mut states: std::collections::BTreeMap<String, usize> = Default::default();
    for d in delivery::Entity::find()
        .all(store.connection())
        .await
        .unwrap()
    {
        *states.entry(d.state.to_string()).or_default() += 1;
    }
    assert_eq!(report.unique, TOTAL, "deliveries by state: {states:?}");
    assert_eq!(
        report.duplicates, 0,
        "no message acknowledged twice: {report:?}"
    );
    assert!(
        owners.len() >= 2,
        "work was shared: claims seen from {} process(es)",
        owners.len()
    );
    // No two attempts of one message overlapped: each retry came after the previous answer.
    let mut by_msg: std::collections::HashMap<String, Vec<i64>> = Default::default();
    for r in sink.state.received() {
        by_msg.entry(r.msg_id).or_default().push(r.at.as_millis());
    }
    for (msg, mut ats) in by_msg {
        ats.sort();
        for w in ats.windows(2) {
            assert!(
                w[1] - w[0] >= 20,
                "{msg}: attempts {} ms apart while the first was in flight",
                w[1] - w[0]
            );
        }
    }
    eprintln!(
        "4 processes, {TOTAL} messages: claims from {} dispatchers, 0 duplicates",
        owners.len()
    );
    drop(children);
    sink.stop().await;
}

pub(crate) fn start_child_roles(db_url: &str, roles: &str) -> Command {
    let mut cmd = crate::helpers::hookd_bin();
    cmd.arg("serve")
        .env("HOOKD_DATABASE_URL", db_url)
        .env("HOOKD_ROLES", roles)
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8")
        .env("HOOKD_DELIVERY_POLL_INTERVAL", "20ms")
        .env("HOOKD_LOG_LEVEL", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

#[tokio::test]
async fn json_logs_name_every_id_of_each_attempt_and_never_the_payload() {
    let db = TestDb::sqlite().await;
    let (tenant, key) = new_tenant(&db.store, "logs").await;
    let port = free_port();
    let mut cmd = start_child_roles(&db.url, "all");
    let mut child = cmd
        .env("HOOKD_BIND", format!("127.0.0.1:{port}"))
        .env("HOOKD_LOG_FORMAT", "json")
        .env("HOOKD_LOG_LEVEL", "warn,dispatcher=debug")
        .stderr(Stdio::piped())
        .spawn()
        .map(Proc)
        .expect("start hookd serve");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    wait_healthy(&client, &base).await;
    let s = sink(Behaviour {
        fail_rate: 1.0,
        fail_status: 503,
        ..Default::default()
    });
    let post = |path: String, body: serde_json::Value| {
        let client = client.clone();
        let key = key.clone();
        async move {
            let r = client
                .post(&path)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{path}: {}", r.status());
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    let app = post(format!("{base}/api/v1/app"), json!({"name": "logs"})).await;
    let a = app["id"].as_str().unwrap();
    let ep = post(
        format!("{base}/api/v1/app/{a}/endpoint"),
        json!({"url": s.url("/hook"), "secret": SECRET, "retryPolicy": {"delays": ["50ms"], "maxAttempts": 2}}),
    )
    .await;
    let secret_payload = "do-not-log-this-payload";
    let msg = post(
        format!("{base}/api/v1/app/{a}/msg"),
        json!({"eventType": "x.y", "payload": {"secret": secret_payload}}),
    )
    .await;
    eventually(Duration::from_secs(10), "two failed attempts", || async {
        s.state.report().received >= 2
    })
    .await;
    s.state.set_behaviour(Behaviour::default());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = child.0.kill();
    let out = child.0.wait_with_output_stderr();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let attempts: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| l["message"] == "delivery attempt")
        .collect();
    assert!(attempts.len() >= 2, "{out}");
    for (i, l) in attempts.iter().take(2).enumerate() {
        let f = *l;
        assert_eq!(f["tenant_id"], tenant.to_string(), "{l}");
        assert_eq!(f["app_id"], a, "{l}");
        assert_eq!(f["endpoint_id"], ep["id"], "{l}");
        assert_eq!(f["msg_id"], msg["id"], "{l}");
        assert_eq!(f["attempt"], i as i64 + 1, "{l}");
        assert_eq!(f["status"], 503, "{l}");
    }
    assert!(
        !out.contains(secret_payload),
        "the payload reached the logs"
    );
    assert!(
        !out.contains(SECRET.trim_start_matches("whsec_")),
        "a secret reached the logs"
    );
}

trait StderrOutput {
    fn wait_with_output_stderr(&mut self) -> String;
}

impl StderrOutput for Child {
    fn wait_with_output_stderr(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut text);
        }
        let _ = self.wait();
        text
    }
}
