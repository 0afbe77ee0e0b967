//! Operational webhooks end to end: a tenant's operational endpoint (a real receiver over
//! loopback that verifies each signature) gets Svix's events about the tenant's endpoints,
//! attempts and background tasks, exactly when they happen, and none about itself.

use std::time::Duration;

use bench::sink::{Behaviour, Sink};
use reqwest::Method;
use serde_json::{Value, json};
use testkit::TestApp;

use crate::delivery::{SECRET, apps_with, endpoint_at, endpoint_with_url, eventually, send, sink};

/// Every role, quick polls, and no breaker in the way of retries.
async fn apps() -> Vec<TestApp> {
    apps_with(&[("HOOKD_BREAKER_FAILURES", "1000")]).await
}

/// An operational endpoint of the app's tenant at `url`, signed with [`SECRET`].
pub(crate) async fn operational_endpoint(app: &TestApp, url: &str, extra: Value) -> String {
    let mut body = json!({"url": url, "secret": SECRET});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let e = app
        .ok(
            Method::POST,
            "/operational-webhook/endpoint",
            Some(body),
            201,
        )
        .await;
    e["id"].as_str().unwrap().to_owned()
}

/// The operational events `sink` accepted at `path` (signature verified: the sink answers 401
/// to a bad one), in arrival order, once each.
pub(crate) fn events(sink: &Sink, path: &str) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    sink.state
        .received()
        .into_iter()
        .filter(|r| r.path == path && r.status == 200 && seen.insert(r.msg_id.clone()))
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

pub(crate) fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == t).collect()
}

async fn wait_for(sink: &Sink, path: &str, t: &str, n: usize) {
    eventually(Duration::from_secs(20), t, || async {
        of_type(&events(sink, path), t).len() >= n
    })
    .await;
}

#[tokio::test]
async fn endpoint_changes_and_finished_tasks_arrive_signed_in_svix_shape() {
    for app in apps().await {
        let ops = sink(Behaviour::default());
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let (a, e) = endpoint_with_url(&app, &ops.url("/hook"), json!({"uid": "ep-uid"})).await;
        wait_for(&ops, "/ops", "endpoint.created", 1).await;
        let created = of_type(&events(&ops, "/ops"), "endpoint.created")[0].clone();
        assert_eq!(
            created["data"],
            json!({"appId": a, "appUid": null, "endpointId": e, "endpointUid": "ep-uid"}),
        );
        let signed = ops.state.received();
        let first = signed.iter().find(|r| r.path == "/ops").unwrap();
        assert!(first.headers.contains_key("webhook-signature"));
        assert!(first.headers.contains_key("svix-signature"));
        assert!(first.msg_id.starts_with("msg_"));

        let ep = format!("/app/{a}/endpoint/{e}");
        app.ok(Method::PATCH, &ep, Some(json!({"disabled": true})), 200)
            .await;
        wait_for(&ops, "/ops", "endpoint.disabled", 1).await;
        let disabled = of_type(&events(&ops, "/ops"), "endpoint.disabled")[0].clone();
        assert_eq!(disabled["data"]["trigger"], "manual");
        assert_eq!(disabled["data"]["endpointId"], e.as_str());
        assert_eq!(disabled["data"]["reason"], "disabled by the tenant");
        assert_eq!(
            disabled["data"]["failSince"],
            Value::Null,
            "it never failed"
        );
        app.ok(Method::PATCH, &ep, Some(json!({"disabled": false})), 200)
            .await;
        wait_for(&ops, "/ops", "endpoint.enabled", 1).await;
        wait_for(&ops, "/ops", "endpoint.updated", 2).await;

        let task = app
            .ok(
                Method::POST,
                &format!("{ep}/recover"),
                Some(json!({"since": "2020-01-01T00:00:00Z"})),
                202,
            )
            .await;
        wait_for(&ops, "/ops", "background_task.finished", 1).await;
        let finished = of_type(&events(&ops, "/ops"), "background_task.finished")[0].clone();
        assert_eq!(finished["data"]["taskId"], task["id"]);
        assert_eq!(finished["data"]["task"], "endpoint.recover");
        assert_eq!(finished["data"]["status"], "finished");
        assert_eq!(finished["data"]["data"]["messages_sent"], 0);
        assert_eq!(finished["data"]["data"]["endp_id"], e.as_str());

        app.ok(Method::DELETE, &ep, None, 204).await;
        wait_for(&ops, "/ops", "endpoint.deleted", 1).await;

        // Exactly these, once each: no event for the operational endpoint's own creation.
        let kinds: Vec<String> = events(&ops, "/ops")
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect();
        let count = |t: &str| kinds.iter().filter(|k| *k == t).count();
        assert_eq!(count("endpoint.created"), 1, "{kinds:?}");
        assert_eq!(count("endpoint.updated"), 2, "{kinds:?}");
        assert_eq!(count("endpoint.disabled"), 1, "{kinds:?}");
        assert_eq!(count("endpoint.enabled"), 1, "{kinds:?}");
        assert_eq!(count("endpoint.deleted"), 1, "{kinds:?}");
        assert_eq!(count("background_task.finished"), 1, "{kinds:?}");

        // The hidden application holding it is none of the tenant's applications.
        let listed = app.get("/app").await.body;
        assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    }
}

#[tokio::test]
async fn attempt_events_follow_the_fourth_failure_the_last_one_and_the_recovery() {
    for app in apps().await {
        let ops = sink(Behaviour::default());
        operational_endpoint(
            &app,
            &ops.url("/ops"),
            json!({"eventTypes": ["message.attempt.failing", "message.attempt.exhausted", "message.attempt.recovered"]}),
        )
        .await;
        // Fails five times, then takes it: failing after the 4th, recovered on the 6th.
        let flaky = sink(Behaviour {
            fail_first: 5,
            fail_status: 500,
            ..Default::default()
        });
        let quick = json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 10}});
        let (a, e) = endpoint_at(&app, &flaky, quick).await;
        let m = send(&app, &a, json!({"n": 1})).await;
        wait_for(&ops, "/ops", "message.attempt.recovered", 1).await;
        let got = events(&ops, "/ops");
        let failing = of_type(&got, "message.attempt.failing");
        assert_eq!(failing.len(), 1, "{got:?}");
        let d = &failing[0]["data"];
        assert_eq!(d["appId"], a.as_str());
        assert_eq!(d["endpointId"], e.as_str());
        assert_eq!(d["msgId"], m.as_str());
        assert_eq!(d["lastAttempt"]["responseStatusCode"], 500);
        assert!(
            d["lastAttempt"]["id"]
                .as_str()
                .unwrap()
                .starts_with("atmpt_")
        );
        let attempts = app
            .get(&format!("/app/{a}/attempt/msg/{m}?limit=50"))
            .await
            .body;
        let fourth = attempts["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["id"] == d["lastAttempt"]["id"])
            .expect("the attempt named");
        assert_eq!(fourth["attemptNumber"], 4, "{fourth}");
        let recovered = of_type(&got, "message.attempt.recovered")[0]["data"].clone();
        assert_eq!(recovered["lastAttempt"]["responseStatusCode"], 200);
        assert!(
            of_type(&got, "message.attempt.exhausted").is_empty(),
            "{got:?}"
        );

        // Two attempts and given up: exhausted only (never failing, never recovered).
        let dead = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 503,
            ..Default::default()
        });
        let (b, _) = endpoint_at(
            &app,
            &dead,
            json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 2}}),
        )
        .await;
        let m2 = app
            .ok(
                Method::POST,
                &format!("/app/{b}/msg"),
                Some(json!({"eventType": "test.event", "eventId": "order-7", "payload": {}})),
                202,
            )
            .await;
        wait_for(&ops, "/ops", "message.attempt.exhausted", 1).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let got = events(&ops, "/ops");
        let exhausted = of_type(&got, "message.attempt.exhausted");
        assert_eq!(exhausted.len(), 1, "{got:?}");
        assert_eq!(exhausted[0]["data"]["msgId"], m2["id"]);
        assert_eq!(exhausted[0]["data"]["msgEventId"], "order-7");
        assert_eq!(
            exhausted[0]["data"]["lastAttempt"]["responseStatusCode"],
            503
        );
        assert_eq!(of_type(&got, "message.attempt.failing").len(), 1, "{got:?}");
        assert_eq!(
            of_type(&got, "message.attempt.recovered").len(),
            1,
            "{got:?}"
        );
        assert!(
            of_type(&got, "endpoint.created").is_empty(),
            "filtered out by eventTypes: {got:?}"
        );
    }
}

#[tokio::test]
async fn a_disabled_endpoint_is_reported_but_an_operational_endpoint_makes_no_events_about_itself()
{
    for app in apps().await {
        let ops = sink(Behaviour::default());
        // An operational endpoint that answers 410: disabled by hookd, with no event about it.
        let gone = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 410,
            ..Default::default()
        });
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let x = operational_endpoint(&app, &gone.url("/ops"), json!({})).await;
        // A customer endpoint that answers 410 too: its disable is reported.
        let (a, e) = endpoint_at(&app, &gone, json!({})).await;
        send(&app, &a, json!({})).await;
        wait_for(&ops, "/ops", "endpoint.disabled", 1).await;
        eventually(
            Duration::from_secs(20),
            "the 410 operational endpoint disabled",
            || async {
                app.get(&format!("/operational-webhook/endpoint/{x}"))
                    .await
                    .body["disabled"]
                    == true
            },
        )
        .await;
        wait_for(&ops, "/ops", "message.attempt.exhausted", 1).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let got = events(&ops, "/ops");
        let disabled = of_type(&got, "endpoint.disabled");
        assert_eq!(disabled.len(), 1, "none about {x}: {got:?}");
        let d = &disabled[0]["data"];
        assert_eq!(d["endpointId"], e.as_str());
        assert_eq!(d["trigger"], "automatic");
        assert!(d["failSince"].is_string(), "{d}");
        assert!(d["reason"].as_str().unwrap().contains("410"), "{d}");
        let exhausted = of_type(&got, "message.attempt.exhausted");
        assert_eq!(exhausted.len(), 1, "none about {x}'s own delivery: {got:?}");
        assert_eq!(exhausted[0]["data"]["endpointId"], e.as_str());
        for ev in &got {
            assert_ne!(ev["data"]["endpointId"], x.as_str(), "{ev}");
        }
    }
}

#[tokio::test]
async fn an_endpoint_failing_past_the_window_is_reported_disabled_with_its_streak_start() {
    for app in apps_with(&[
        ("HOOKD_ENDPOINT_DISABLE_AFTER", "2s"),
        ("HOOKD_HEALTH_SWEEP_INTERVAL", "200ms"),
        ("HOOKD_BREAKER_FAILURES", "1000"),
    ])
    .await
    {
        let ops = sink(Behaviour::default());
        operational_endpoint(
            &app,
            &ops.url("/ops"),
            json!({"eventTypes": ["endpoint.disabled"]}),
        )
        .await;
        let failing = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &failing,
            json!({"uid": "flaky", "retryPolicy": {"delays": ["200ms"], "maxAttempts": 100}}),
        )
        .await;
        send(&app, &a, json!({})).await;
        wait_for(&ops, "/ops", "endpoint.disabled", 1).await;
        let got = events(&ops, "/ops");
        assert_eq!(got.len(), 1, "{got:?}");
        let d = &got[0]["data"];
        assert_eq!(d["endpointId"], e.as_str());
        assert_eq!(d["endpointUid"], "flaky");
        assert_eq!(d["trigger"], "automatic");
        let ep = app.get(&format!("/app/{a}/endpoint/{e}")).await.body;
        assert_eq!(d["reason"], ep["disabledReason"]);
        let since = d["failSince"].as_str().unwrap();
        assert!(
            d["reason"].as_str().unwrap().contains(since),
            "failSince is the streak's start: {d}"
        );
    }
}

#[tokio::test]
async fn operational_events_take_none_of_the_tenants_ingest_budget() {
    for app in apps_with(&[
        ("HOOKD_TENANT_INGEST_RATE", "1"),
        ("HOOKD_TENANT_INGEST_BURST", "1"),
    ])
    .await
    {
        let ops = sink(Behaviour::default());
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let (a, _) = endpoint_at(&app, &ops, json!({})).await;
        endpoint_at(&app, &ops, json!({})).await;
        wait_for(&ops, "/ops", "endpoint.created", 2).await;
        // The tenant's one token is still there for its own message.
        app.ok(
            Method::POST,
            &format!("/app/{a}/msg"),
            Some(json!({"eventType": "test.event", "payload": {}})),
            202,
        )
        .await;
    }
}

#[tokio::test]
async fn a_storm_of_events_is_cut_to_the_budget_and_the_rest_counted() {
    for app in apps().await {
        let ops = sink(Behaviour::default());
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "many"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        // endpoint.created events, 50 at a time, until some are over the budget (the first 100
        // pass at once, then 10 a second): however slow the machine, it is outrun.
        let started = std::time::Instant::now();
        let mut made = 0;
        let (mut sent, mut dropped) = (0.0, 0.0);
        while dropped == 0.0 && made < 2000 {
            let mut round = tokio::task::JoinSet::new();
            for i in made..made + 50 {
                let req = app
                    .client
                    .post(format!("{}/api/v1/app/{a}/endpoint", app.base))
                    .bearer_auth(&app.key)
                    .json(&json!({"url": ops.url(&format!("/hook/{i}"))}));
                round.spawn(async move { req.send().await.unwrap().status().as_u16() });
            }
            while let Some(status) = round.join_next().await {
                assert_eq!(status.unwrap(), 201);
            }
            made += 50;
            let m = crate::metrics::scrape(&app).await;
            sent = m.get(r#"hookd_operational_events_total{result="sent"}"#);
            dropped = m.get(r#"hookd_operational_events_total{result="dropped"}"#);
        }
        let took = started.elapsed().as_secs_f64();
        assert!(dropped > 0.0, "{made} events in {took:.1} s, none dropped");
        assert_eq!(sent + dropped, made as f64, "every event sent or counted");
        assert!(
            sent <= 100.0 + 10.0 * took.ceil() + 1.0,
            "{sent} sent in {took:.1} s"
        );
        wait_for(&ops, "/ops", "endpoint.created", sent as usize).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            of_type(&events(&ops, "/ops"), "endpoint.created").len(),
            sent as usize
        );
    }
}

#[tokio::test]
async fn a_message_from_a_source_makes_ingest_events_naming_the_source() {
    for app in apps().await {
        let ops = sink(Behaviour::default());
        operational_endpoint(
            &app,
            &ops.url("/ops"),
            json!({"filterTypes": ["message.attempt.exhausted", "ingest.message.attempt.exhausted"]}),
        )
        .await;
        let dead = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 503,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &dead,
            json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 2}}),
        )
        .await;
        let src = app
            .ok(
                Method::POST,
                "/inbound/source",
                Some(
                    json!({"name": "shop", "appId": a, "eventType": "inbound.event",
                            "verification": {"scheme": "none"}}),
                ),
                201,
            )
            .await;
        let resp = app
            .client
            .post(format!("{}/in/{}", app.base, src["id"].as_str().unwrap()))
            .header("content-type", "application/json")
            .body(r#"{"id":"evt_1","order":7}"#)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        wait_for(&ops, "/ops", "ingest.message.attempt.exhausted", 1).await;

        // A message sent through the API to the same endpoint stays a `message.attempt.*`.
        let m = send(&app, &a, json!({"n": 1})).await;
        wait_for(&ops, "/ops", "message.attempt.exhausted", 1).await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        let got = events(&ops, "/ops");
        let ingest = of_type(&got, "ingest.message.attempt.exhausted");
        assert_eq!(ingest.len(), 1, "{got:?}");
        let d = &ingest[0]["data"];
        assert_eq!(d["sourceId"], src["id"], "{d}");
        assert_eq!(d["endpointId"], e.as_str());
        assert_eq!(d["lastAttempt"]["responseStatusCode"], 503);
        assert!(d.get("appUid").is_none(), "{d}");
        let api = of_type(&got, "message.attempt.exhausted");
        assert_eq!(api.len(), 1, "{got:?}");
        assert_eq!(api[0]["data"]["msgId"], m.as_str());
        assert!(api[0]["data"].get("sourceId").is_none());
    }
}

#[tokio::test]
async fn disabling_an_ingest_sources_endpoint_is_svixs_ingest_endpoint_disabled() {
    for app in apps().await {
        let ops = sink(Behaviour::default());
        operational_endpoint(
            &app,
            &ops.url("/ops"),
            json!({"filterTypes": ["endpoint.disabled", "ingest.endpoint.disabled"]}),
        )
        .await;
        let (status, src) = crate::ingest::ingest(
            &app,
            &app.key,
            Method::POST,
            "/source",
            Some(json!({"name": "Orders in", "uid": "orders-in", "type": "generic-webhook"})),
        )
        .await;
        assert_eq!(status, 201, "{src}");
        let receiver = sink(Behaviour::default());
        let (status, ep) = crate::ingest::ingest(
            &app,
            &app.key,
            Method::POST,
            "/source/orders-in/endpoint",
            Some(json!({"url": receiver.url("/in"), "secret": SECRET})),
        )
        .await;
        assert_eq!(status, 201, "{ep}");
        let ep_id = ep["id"].as_str().unwrap();
        let (status, off) = crate::ingest::ingest(
            &app,
            &app.key,
            Method::PUT,
            &format!("/source/orders-in/endpoint/{ep_id}"),
            Some(json!({"url": receiver.url("/in"), "disabled": true})),
        )
        .await;
        assert_eq!(status, 200, "{off}");
        wait_for(&ops, "/ops", "ingest.endpoint.disabled", 1).await;

        // An application's own endpoint stays `endpoint.disabled`.
        let (a, e) = endpoint_at(&app, &receiver, json!({})).await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{e}"),
            Some(json!({"url": receiver.url("/app"), "disabled": true})),
            200,
        )
        .await;
        wait_for(&ops, "/ops", "endpoint.disabled", 1).await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        let got = events(&ops, "/ops");
        let ingest_off = of_type(&got, "ingest.endpoint.disabled");
        assert_eq!(ingest_off.len(), 1, "{got:?}");
        let d = &ingest_off[0]["data"];
        assert_eq!(d["sourceId"], src["id"], "{d}");
        assert_eq!(d["endpointId"], ep_id);
        assert_eq!(d["trigger"], "manual");
        let app_off = of_type(&got, "endpoint.disabled");
        assert_eq!(app_off.len(), 1, "{got:?}");
        assert_eq!(app_off[0]["data"]["endpointId"], e.as_str());
        assert!(app_off[0]["data"].get("sourceId").is_none());
    }
}
