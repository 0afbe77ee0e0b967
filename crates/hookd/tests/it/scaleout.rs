//! Scale-out on PostgreSQL (issue 18): an API process and three dispatcher processes keep every
//! per-endpoint promise for the deployment — the concurrency cap, the throttle rate and the
//! circuit breaker — also when one of them is killed. Real processes, a real receiver.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bench::sink::{Behaviour, Sink};
use domain::Timestamp;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait, QueryFilter, Statement};
use serde_json::{Value, json};
use store::entities::delivery;
use store::testing::TestDb;

use crate::crash::{Proc, create_app, free_port, start_child_roles, wait_healthy};
use crate::delivery::{SECRET, arrival_times, eventually, most_in_one_second, sink};
use testkit::new_tenant;

/// The delivery lease of every process here: a dead dispatcher's work moves on after it.
const LEASE: Duration = Duration::from_secs(2);

struct Cluster {
    db: TestDb,
    /// The dispatchers, by the host name each reports in its heartbeat.
    dispatchers: Vec<(String, Proc)>,
    _api: Proc,
    base: String,
    key: String,
    app: String,
    client: reqwest::Client,
}

/// A PostgreSQL database with one API process and `n` dispatcher processes on it; `None`
/// (said loudly) without PostgreSQL.
async fn cluster(test: &str, n: usize, env: &[(&str, &str)]) -> Option<Cluster> {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED {test}: HOOKD_TEST_POSTGRES_URL is not set");
        return None;
    };
    let db = TestDb::postgres(&admin).await;
    let (_, key) = new_tenant(&db.store, test).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let mut api = start_child_roles(&db.url, "api");
    api.env("HOOKD_BIND", format!("127.0.0.1:{port}"));
    let api = Proc(api.spawn().expect("start the api process"));
    wait_healthy(&client, &base).await;
    let dispatchers = (0..n)
        .map(|i| {
            let host = format!("dispatcher-{i}");
            let mut cmd = start_child_roles(&db.url, "dispatcher");
            cmd.env("HOSTNAME", &host)
                .env("HOOKD_DELIVERY_LEASE", "2s")
                .env("HOOKD_DELIVERY_MAX_IN_FLIGHT", "64");
            for (k, v) in env {
                cmd.env(k, v);
            }
            (host, Proc(cmd.spawn().expect("start a dispatcher")))
        })
        .collect();
    let app = create_app(&client, &base, &key, test).await;
    Some(Cluster {
        db,
        dispatchers,
        _api: api,
        base,
        app,
        key,
        client,
    })
}

impl Cluster {
    /// An endpoint at `sink` with `extra` fields (its limits), retried quickly.
    async fn endpoint(&self, sink: &Sink, extra: Value) {
        let mut body = json!({"url": sink.url("/hook"), "secret": SECRET,
            "retryPolicy": {"delays": ["100ms"], "maxAttempts": 50}});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = self
            .client
            .post(format!("{}/api/v1/app/{}/endpoint", self.base, self.app))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    }

    /// Submits `n` messages, eight at a time.
    async fn send(&self, n: usize) {
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (client, next) = (self.client.clone(), next.clone());
            let url = format!("{}/api/v1/app/{}/msg", self.base, self.app);
            let key = self.key.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= n {
                        return;
                    }
                    let r = client
                        .post(&url)
                        .bearer_auth(&key)
                        .json(&json!({"eventType": "scale.test", "payload": {"i": i}}))
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), 202);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }

    /// The host name of the dispatcher holding the endpoint's lease, if one does.
    async fn holder(&self) -> Option<String> {
        let row = self
            .db
            .store
            .connection()
            .query_one(Statement::from_string(
                sea_orm::DbBackend::Postgres,
                "SELECT h.hostname FROM endpoint_leases l \
                 JOIN node_heartbeats h ON h.node_id = l.owner",
            ))
            .await
            .unwrap()?;
        row.try_get::<String>("", "hostname").ok()
    }
}

#[tokio::test]
async fn three_dispatchers_never_exceed_an_endpoints_max_concurrency() {
    let Some(c) = cluster("scaleout_cap", 3, &[]).await else {
        return;
    };
    let s = sink(Behaviour {
        latency_ms: 50,
        ..Default::default()
    });
    c.endpoint(&s, json!({"maxConcurrency": 5})).await;
    c.send(3000).await;
    eventually(Duration::from_secs(150), "3,000 delivered", || async {
        s.state.report().unique == 3000
    })
    .await;
    let report = s.state.report();
    assert!(
        report.max_concurrent <= 5,
        "{} requests open at once at maxConcurrency 5 with 3 dispatchers",
        report.max_concurrent
    );
    assert_eq!(report.max_concurrent, 5, "the cap is used, not undershot");
    assert_eq!(report.duplicates, 0);
    s.stop().await;
}

#[tokio::test]
async fn three_dispatchers_never_exceed_an_endpoints_throttle_rate() {
    let Some(c) = cluster("scaleout_throttle", 3, &[]).await else {
        return;
    };
    let s = sink(Behaviour::default());
    c.endpoint(&s, json!({"throttleRate": 20})).await;
    c.send(200).await;
    eventually(Duration::from_secs(60), "200 delivered", || async {
        s.state.report().unique == 200
    })
    .await;
    let at = arrival_times(&s);
    let most = most_in_one_second(&at);
    // The documented burst is one request: at most rate + 1 in any one second.
    assert!(
        most <= 21,
        "{most} requests within one second at throttleRate 20 with 3 dispatchers"
    );
    let span = at[at.len() - 1] - at[0];
    assert!(
        span >= 9_000,
        "200 requests at 20/s take at least 9.95 s, took {span} ms"
    );
    s.stop().await;
}

#[tokio::test]
async fn an_endpoints_breaker_opens_once_for_every_dispatcher() {
    let Some(c) = cluster(
        "scaleout_breaker",
        3,
        &[
            ("HOOKD_BREAKER_FAILURES", "3"),
            ("HOOKD_BREAKER_OPEN_FOR", "3s"),
        ],
    )
    .await
    else {
        return;
    };
    let s = sink(Behaviour {
        fail_rate: 1.0,
        fail_status: 503,
        ..Default::default()
    });
    // One request at a time, so the failures that open the breaker can be counted exactly.
    c.endpoint(&s, json!({"maxConcurrency": 1})).await;
    c.send(20).await;
    eventually(Duration::from_secs(30), "the first request", || async {
        s.state.report().received > 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    let at = arrival_times(&s);
    let first = at[0];
    let opening: Vec<i64> = at
        .iter()
        .map(|t| t - first)
        .filter(|t| *t < 2_500)
        .collect();
    assert_eq!(
        opening.len(),
        3,
        "3 failures open the breaker for the deployment, then nothing until it half-opens: \
         requests at {opening:?} ms"
    );
    let probes: Vec<i64> = at
        .iter()
        .map(|t| t - first)
        .filter(|t| (2_500..5_500).contains(t))
        .collect();
    assert_eq!(
        probes.len(),
        1,
        "one probe when the breaker half-opens, from one dispatcher: requests at {probes:?} ms"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_dispatcher_killed_mid_drain_loses_nothing_and_its_endpoint_moves_on_within_the_lease() {
    let Some(mut c) = cluster("scaleout_kill", 3, &[]).await else {
        return;
    };
    let s = sink(Behaviour {
        latency_ms: 50,
        ..Default::default()
    });
    c.endpoint(&s, json!({"maxConcurrency": 5})).await;
    c.send(1000).await;
    eventually(Duration::from_secs(60), "200 delivered", || async {
        s.state.report().unique >= 200
    })
    .await;
    let holder = c.holder().await.expect("a dispatcher holds the endpoint");
    let i = c
        .dispatchers
        .iter()
        .position(|(h, _)| *h == holder)
        .expect("the holder is one of ours");
    let (_, mut killed) = c.dispatchers.remove(i);
    killed.0.kill().expect("SIGKILL");
    killed.0.wait().unwrap();
    let killed_at = Timestamp::now().as_millis();
    // What the dead process had claimed and not recorded (sent, waiting, or answered with the
    // result not yet written): the most that can arrive twice.
    let unrecorded = delivery::Entity::find()
        .filter(delivery::Column::State.eq("sending"))
        .count(c.db.store.connection())
        .await
        .unwrap();
    eventually(Duration::from_secs(120), "all 1,000 delivered", || async {
        s.state.report().unique == 1000
    })
    .await;
    let report = s.state.report();
    assert!(
        report.max_concurrent <= 5,
        "{} requests open at once at maxConcurrency 5 across the kill",
        report.max_concurrent
    );
    assert!(
        report.duplicates <= unrecorded,
        "{} duplicates but the dead process held only {unrecorded} unrecorded claims: {report:?}",
        report.duplicates
    );
    let resumed = arrival_times(&s)
        .into_iter()
        .find(|t| *t > killed_at)
        .expect("requests after the kill");
    assert!(
        resumed - killed_at <= LEASE.as_millis() as i64 + 2_000,
        "the endpoint moved on {} ms after its holder died (lease {LEASE:?})",
        resumed - killed_at
    );
    let now_held_by = c.holder().await;
    assert!(
        now_held_by.as_ref().is_some_and(|h| *h != holder),
        "another dispatcher holds the endpoint: {now_held_by:?}"
    );
    s.stop().await;
}
