//! A disabled endpoint gets nothing, from the moment the disable commits: no pending retry,
//! no ordered successor, no manual action; its deliveries wait, paused, without counting
//! attempts, and flow again on enable. The same holds for an endpoint whose application is
//! deleted mid-flight.

use std::time::Duration;

use bench::sink::{Behaviour, Sink};
use domain::Timestamp;
use reqwest::Method;
use serde_json::{Value, json};

use crate::delivery::{apps, endpoint_at, eventually, sink};
use testkit::TestApp;

/// Requests the sink received after `t`.
fn arrived_after(s: &Sink, t: Timestamp) -> usize {
    s.state.received().iter().filter(|r| r.at > t).count()
}

async fn send_keyed(app: &TestApp, a: &str, key: Option<&str>) -> String {
    let mut body = json!({"eventType": "test.event", "payload": {"n": 1}});
    if let Some(key) = key {
        body["orderingKey"] = json!(key);
    }
    let m = app
        .ok(Method::POST, &format!("/app/{a}/msg"), Some(body), 202)
        .await;
    m["id"].as_str().unwrap().to_owned()
}

async fn endpoint_deliveries(app: &TestApp, a: &str, e: &str) -> Vec<Value> {
    app.get(&format!("/app/{a}/endpoint/{e}/msg?limit=250"))
        .await
        .body["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Every manual action on a disabled endpoint answers 409 `endpoint_disabled`.
async fn manual_actions_refused(app: &TestApp, a: &str, e: &str, msg: &str) {
    let since = json!({"since": "2020-01-01T00:00:00Z"});
    for (path, body) in [
        (format!("/app/{a}/msg/{msg}/endpoint/{e}/resend"), json!({})),
        (format!("/app/{a}/endpoint/{e}/recover"), since.clone()),
        (format!("/app/{a}/endpoint/{e}/replay-missing"), since),
        (
            format!("/app/{a}/endpoint/{e}/replay-from-message"),
            json!({"msgId": msg}),
        ),
    ] {
        let r = app.post(&path, body).await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (409, Some("endpoint_disabled")),
            "{path} on {}: {}",
            app.backend,
            r.body
        );
        assert!(
            r.body["detail"].as_str().unwrap_or("").contains("disabled"),
            "{}",
            r.body
        );
    }
}

/// How long a disabled endpoint's receiver is watched while everything that could reach it
/// is tried (the 60 s).
const WATCH: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_disabled_endpoint_gets_nothing_and_its_deliveries_wait_for_the_enable() {
    // Both backends at once: the watch is a minute long.
    let mut runs = tokio::task::JoinSet::new();
    for app in apps().await {
        runs.spawn(disabled_endpoint_gets_nothing(app));
    }
    while let Some(r) = runs.join_next().await {
        r.unwrap();
    }
}

async fn disabled_endpoint_gets_nothing(app: TestApp) {
    {
        // Fails everything, so retries keep coming every 200 ms until the disable.
        let s = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &s,
            json!({"retryPolicy": {"delays": ["200ms"], "maxAttempts": 100}}),
        )
        .await;
        let plain = send_keyed(&app, &a, None).await;
        let first = send_keyed(&app, &a, Some("k")).await;
        let second = send_keyed(&app, &a, Some("k")).await;
        eventually(Duration::from_secs(10), "retries under way", || async {
            s.state.received().len() >= 4
        })
        .await;

        app.ok(
            Method::PATCH,
            &format!("/app/{a}/endpoint/{e}"),
            Some(json!({"disabled": true})),
            200,
        )
        .await;
        let disabled_at = Timestamp::now();
        let counts: Vec<(String, i64)> = endpoint_deliveries(&app, &a, &e)
            .await
            .iter()
            .map(|d| {
                (
                    d["id"].as_str().unwrap().to_owned(),
                    d["attemptCount"].as_i64().unwrap(),
                )
            })
            .collect();
        // Retries would come every 200 ms; resend, recover and replay are tried every 5 s.
        let watch_until = tokio::time::Instant::now() + WATCH;
        while tokio::time::Instant::now() < watch_until {
            manual_actions_refused(&app, &a, &e, &plain).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        assert_eq!(
            arrived_after(&s, disabled_at),
            0,
            "requests reached a disabled endpoint on {}",
            app.backend
        );
        // Paused deliveries list as pending (Svix's status 1) and counted no attempt.
        for d in endpoint_deliveries(&app, &a, &e).await {
            assert_eq!(d["status"], 1, "{d}");
            let id = d["id"].as_str().unwrap();
            let before = counts.iter().find(|(i, _)| i == id).map(|(_, n)| *n);
            assert_eq!(Some(d["attemptCount"].as_i64().unwrap()), before, "{d}");
        }

        // Enabled again, with a receiver that now answers 2xx: everything flows, in order.
        s.state.set_behaviour(Behaviour::default());
        app.ok(
            Method::PATCH,
            &format!("/app/{a}/endpoint/{e}"),
            Some(json!({"disabled": false})),
            200,
        )
        .await;
        eventually(
            Duration::from_secs(10),
            "all delivered after enable",
            || async {
                let ok = s.state.acked_ids();
                [&plain, &first, &second].iter().all(|m| ok.contains(*m))
            },
        )
        .await;
        let succeeded: Vec<String> = s
            .state
            .received()
            .into_iter()
            .filter(|r| r.status == 200 && r.ordering_key.is_some())
            .map(|r| r.msg_id)
            .collect();
        assert_eq!(
            succeeded,
            vec![first.clone(), second.clone()],
            "{}",
            app.backend
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn an_endpoint_created_disabled_gets_no_replay() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, e) = endpoint_at(&app, &s, json!({"disabled": true})).await;
        let msg = send_keyed(&app, &a, None).await;
        manual_actions_refused(&app, &a, &e, &msg).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(s.state.received().len(), 0, "{}", app.backend);
        s.stop().await;
    }
}

#[tokio::test]
async fn deleting_the_application_mid_flight_stops_its_deliveries() {
    for app in apps().await {
        // Slow and one at a time: most of the messages wait in the dispatcher's memory for the
        // endpoint's slot when the application is deleted.
        let s = sink(Behaviour {
            latency_ms: 200,
            ..Default::default()
        });
        let (a, _) = endpoint_at(&app, &s, json!({"maxConcurrency": 1})).await;
        for _ in 0..20 {
            send_keyed(&app, &a, None).await;
        }
        eventually(Duration::from_secs(10), "first arrivals", || async {
            !s.state.received().is_empty()
        })
        .await;
        app.ok(Method::DELETE, &format!("/app/{a}"), None, 204)
            .await;
        let deleted_at = Timestamp::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            arrived_after(&s, deleted_at),
            0,
            "requests reached a deleted application's endpoint on {}",
            app.backend
        );
        assert!(s.state.received().len() < 20, "{}", app.backend);
        s.stop().await;
    }
}
