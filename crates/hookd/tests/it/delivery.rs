//! Deliveries end to end: the real app (every role) sends to a real receiver (`hookd sink`)
//! over loopback, on every backend.

use std::time::{Duration, Instant};

use bench::sink::{Behaviour, Received, Sink, SinkConfig};
use domain::Timestamp;
use reqwest::Method;
use serde_json::{Value, json};

use testkit::TestApp;

pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

pub fn sink(behaviour: Behaviour) -> Sink {
    Sink::start(SinkConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        secrets: vec![domain::signing::SigningSecret::parse(SECRET).unwrap()],
        behaviour,
        report: None,
        record: true,
    })
    .expect("start sink")
}

/// Request arrival times at `sink`, in milliseconds, sorted (the sink must record).
pub fn arrival_times(sink: &Sink) -> Vec<i64> {
    let mut at: Vec<i64> = sink
        .state
        .received()
        .iter()
        .map(|r| r.at.as_millis())
        .collect();
    at.sort();
    at
}

/// The most of the sorted times `at` within any one second.
pub fn most_in_one_second(at: &[i64]) -> usize {
    (0..at.len())
        .map(|i| at[i..].iter().take_while(|t| **t < at[i] + 1000).count())
        .max()
        .unwrap_or(0)
}

pub async fn apps() -> Vec<TestApp> {
    apps_with(&[]).await
}

/// Every role, a quick poll, and `extra` settings.
pub async fn apps_with(extra: &[(&str, &str)]) -> Vec<TestApp> {
    let mut env = vec![
        ("HOOKD_ROLES", "all"),
        ("HOOKD_DELIVERY_POLL_INTERVAL", "50ms"),
    ];
    env.extend_from_slice(extra);
    TestApp::all(&env).await
}

/// An application with one endpoint at the sink; `extra` adds endpoint fields.
pub async fn endpoint_at(app: &TestApp, sink: &Sink, extra: Value) -> (String, String) {
    endpoint_with_url(app, &sink.url("/hook"), extra).await
}

/// An application with one endpoint at `url` (signed with [`SECRET`]); `extra` adds endpoint
/// fields.
pub async fn endpoint_with_url(app: &TestApp, url: &str, extra: Value) -> (String, String) {
    let a = app
        .ok(Method::POST, "/app", Some(json!({"name": "receiver"})), 201)
        .await;
    let a = a["id"].as_str().unwrap().to_owned();
    let mut body = json!({"url": url, "secret": SECRET});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let e = app
        .ok(Method::POST, &format!("/app/{a}/endpoint"), Some(body), 201)
        .await;
    (a, e["id"].as_str().unwrap().to_owned())
}

pub async fn send(app: &TestApp, a: &str, payload: Value) -> String {
    let m = app
        .ok(
            Method::POST,
            &format!("/app/{a}/msg"),
            Some(json!({"eventType": "test.event", "payload": payload})),
            202,
        )
        .await;
    m["id"].as_str().unwrap().to_owned()
}

/// Polls `check` until it holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out after {within:?} waiting for: {what}");
}

#[tokio::test]
async fn an_attempt_longer_than_the_lease_is_renewed_and_sent_once() {
    // A 1 s lease renewed every third of it, against a receiver taking 2.5 s: without
    // renewal the reaper would hand the delivery out again mid-attempt and it would arrive twice.
    for app in apps_with(&[("HOOKD_DELIVERY_LEASE", "1s")]).await {
        let sink = sink(Behaviour {
            latency_ms: 2500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(&app, &sink, json!({"timeout": "10s"})).await;
        let id = send(&app, &a, json!({"slow": true})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("success"), Some(1)),
            "{}",
            app.backend
        );
        // Give a wrongly re-armed copy time to arrive.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(arrivals(&sink, &id).len(), 1, "{}", app.backend);
        sink.stop().await;
    }
}

fn arrivals(sink: &Sink, msg: &str) -> Vec<Received> {
    sink.state
        .received()
        .into_iter()
        .filter(|r| r.msg_id == msg)
        .collect()
}

async fn delivery_state(app: &TestApp, a: &str, e: &str, msg: &str) -> Value {
    let page = app
        .get(&format!("/app/{a}/endpoint/{e}/msg?limit=250"))
        .await
        .body;
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == msg)
        .cloned()
        .unwrap_or(Value::Null)
}

pub async fn wait_final(app: &TestApp, a: &str, e: &str, msg: &str) -> Value {
    let mut last = Value::Null;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        last = delivery_state(app, a, e, msg).await;
        if matches!(last["statusText"].as_str(), Some("success" | "fail")) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("delivery of {msg} never finished: {last}");
}

#[tokio::test]
async fn a_2xx_on_the_first_try_delivers_the_exact_bytes_signed() {
    for app in apps().await {
        let sink = sink(Behaviour::default());
        let (a, e) = endpoint_at(&app, &sink, json!({"headers": {"X-Team": "billing"}})).await;
        let raw = r#"{"eventType":"test.event","payload":{"z" : 1,  "a":[true]}}"#;
        let resp = app
            .client
            .post(format!("{}/api/v1/app/{a}/msg", app.base))
            .bearer_auth(&app.key)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        let msg: Value = resp.json().await.unwrap();
        let id = msg["id"].as_str().unwrap().to_owned();
        eventually(Duration::from_secs(10), "delivered", || async {
            sink.state.report().unique == 1
        })
        .await;
        let got = arrivals(&sink, &id);
        assert_eq!(got.len(), 1, "exactly one request on {}", app.backend);
        let r = &got[0];
        assert_eq!(
            r.body, br#"{"z" : 1,  "a":[true]}"#,
            "the payload bytes, verbatim"
        );
        assert_eq!(r.headers["webhook-id"], id);
        assert_eq!(r.headers["webhook-attempt"], "1");
        assert_eq!(r.headers["content-type"], "application/json");
        assert_eq!(r.headers["x-team"], "billing");
        assert!(r.headers["webhook-signature"].starts_with("v1,"));
        assert_eq!(
            sink.state.report().bad_signatures,
            0,
            "the sink verified the signature"
        );

        let final_state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(final_state["statusText"], "success");
        let attempts = app.get(&format!("/app/{a}/attempt/msg/{id}")).await.body;
        assert_eq!(attempts["data"][0]["responseStatusCode"], 200);
        assert_eq!(attempts["data"][0]["response"], "ok");
        assert_eq!(attempts["data"][0]["triggerType"], 0);
        // Decisions 97: the attempt keeps what cannot be worked out again (the signature and
        // the names it went under), not the whole list, and still shows what the receiver got.
        let stored = app
            .store
            .list_attempts_by_message(
                app.tenant,
                a.parse().unwrap(),
                id.parse().unwrap(),
                &store::AttemptFilter::default(),
                &store::ListParams::default(),
            )
            .await
            .unwrap()
            .data;
        let kept = stored[0].request_headers.as_deref().expect("headers kept");
        assert!(
            kept.len() < 100,
            "{}: {} bytes: {kept}",
            app.backend,
            kept.len()
        );
        let shown = domain::attempt::SentHeaders::shown(
            kept,
            stored[0].attempt_number,
            &id,
            Timestamp::from_millis(stored[0].started_at),
        )
        .unwrap();
        for name in [
            "webhook-attempt",
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
        ] {
            let value = shown.headers.iter().find(|(k, _)| k == name);
            assert_eq!(
                value.map(|(_, v)| v.as_str()),
                Some(r.headers[name].as_str()),
                "{}: {name}",
                app.backend
            );
        }
        sink.stop().await;
    }
}

#[tokio::test]
async fn server_errors_are_retried_on_the_endpoint_schedule_then_succeed() {
    for app in apps().await {
        let sink = sink(Behaviour {
            fail_first: 2,
            fail_status: 503,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &sink,
            json!({"retryPolicy": {"delays": ["300ms", "600ms"]}}),
        )
        .await;
        let id = send(&app, &a, json!({"n": 1})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(state["statusText"], "success");
        assert_eq!(state["attemptCount"], 3);
        let got = arrivals(&sink, &id);
        assert_eq!(
            got.iter().map(|r| r.status).collect::<Vec<_>>(),
            [503, 503, 200]
        );
        assert_eq!(
            got.iter().map(|r| r.attempt).collect::<Vec<_>>(),
            [Some(1), Some(2), Some(3)]
        );
        for (i, nominal) in [(1, 300i64), (2, 600)] {
            let gap = got[i].at.as_millis() - got[i - 1].at.as_millis();
            // ±20 % jitter, plus time for the attempt and the poll that picks it up.
            assert!(
                gap >= nominal * 8 / 10,
                "gap {gap} ms before attempt {} (nominal {nominal})",
                i + 1
            );
            assert!(
                gap <= nominal * 12 / 10 + 400,
                "gap {gap} ms before attempt {} (nominal {nominal})",
                i + 1
            );
        }
        // Same id and bytes every time; signatures fresh.
        assert!(
            got.iter()
                .all(|r| r.body == got[0].body && r.headers["webhook-id"] == id)
        );
        sink.stop().await;
    }
}

#[tokio::test]
async fn a_permanent_status_is_dead_after_one_attempt_and_410_disables_the_endpoint() {
    for app in apps().await {
        for (status, disables) in [(400u16, false), (410, true)] {
            let sink = sink(Behaviour {
                fail_rate: 1.0,
                fail_status: status,
                ..Default::default()
            });
            let (a, e) =
                endpoint_at(&app, &sink, json!({"retryPolicy": {"delays": ["100ms"]}})).await;
            let id = send(&app, &a, json!({})).await;
            let state = wait_final(&app, &a, &e, &id).await;
            assert_eq!(
                (state["statusText"].as_str(), state["attemptCount"].as_i64()),
                (Some("fail"), Some(1)),
                "{status}"
            );
            assert_eq!(state["lastStatusCode"], status);
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(arrivals(&sink, &id).len(), 1, "{status}: no retry");
            let dead = app
                .get(&format!("/app/{a}/endpoint/{e}/msg?status=2"))
                .await
                .body;
            assert_eq!(dead["data"][0]["id"], id, "listed as a dead letter");
            let ep = app.get(&format!("/app/{a}/endpoint/{e}")).await.body;
            assert_eq!(ep["disabled"], disables, "{status}");
            if disables {
                assert!(ep["disabledReason"].as_str().unwrap().contains("410"));
                let events = app
                    .store
                    .list_operational_events(app.tenant, &Default::default())
                    .await
                    .unwrap();
                assert!(events.data.iter().any(|ev| ev.kind == "endpoint.disabled"
                    && ev.endpoint_id.map(|id| id.to_string()).as_deref() == Some(e.as_str())));
                // A disabled endpoint gets no new deliveries.
                let later = send(&app, &a, json!({})).await;
                assert_eq!(delivery_state(&app, &a, &e, &later).await, Value::Null);
            }
            sink.stop().await;
        }
    }
}

/// With the server's `status_preset` set to Svix's rule, an endpoint that did not choose
/// retries a 401 (a receiver mid-deploy) that hookd's own table would end; an endpoint that
/// chose `default` still ends it; and a receiver answering `webhook-delivery: abort-message`
/// ends a message's retries whatever its status, recorded on the attempt.
#[tokio::test]
async fn the_server_preset_applies_to_endpoints_that_did_not_choose_and_abort_message_ends_retries()
{
    for app in apps_with(&[("HOOKD_STATUS_PRESET", "retry-all-but-410")]).await {
        let flaky = sink(Behaviour {
            fail_first: 1,
            fail_status: 401,
            ..Default::default()
        });
        let quick = json!({"retryPolicy": {"delays": ["100ms"], "maxAttempts": 5}});
        let (a, e) = endpoint_at(&app, &flaky, quick.clone()).await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("success"), Some(2)),
            "the 401 was retried under the server's preset"
        );
        let mut own = quick.clone();
        own["statusPreset"] = json!("default");
        let (a, e) = endpoint_at(&app, &flaky, own).await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("fail"), Some(1)),
            "the endpoint's own preset wins"
        );
        flaky.stop().await;

        let aborting = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 503,
            abort_message: true,
            ..Default::default()
        });
        let (a, e) = endpoint_at(&app, &aborting, quick).await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("fail"), Some(1)),
            "a 503 with abort-message is not retried"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(arrivals(&aborting, &id).len(), 1);
        let attempts = app.get(&format!("/app/{a}/attempt/msg/{id}")).await.body;
        let detail = attempts["data"][0]["errorDetail"]
            .as_str()
            .unwrap_or_default();
        assert!(detail.contains("abort-message"), "{attempts}");
        aborting.stop().await;
    }
}

/// A receiver answering `webhook-delivery: disable` (Svix's delivery control) disables its
/// endpoint, with the reason recorded; the message it answered 200 to is delivered, and the
/// next message is not sent to it.
#[tokio::test]
async fn a_receiver_answering_webhook_delivery_disable_disables_its_endpoint() {
    for app in apps().await {
        let closing = sink(Behaviour {
            disable_endpoint: true,
            ..Default::default()
        });
        let (a, e) = endpoint_at(&app, &closing, json!({})).await;
        let first = send(&app, &a, json!({"n": 1})).await;
        let state = wait_final(&app, &a, &e, &first).await;
        assert_eq!(state["statusText"], "success", "{}", app.backend);
        let path = format!("/app/{a}/endpoint/{e}");
        eventually(
            Duration::from_secs(10),
            "the endpoint is disabled",
            || async { app.get(&path).await.body["disabled"] == true },
        )
        .await;
        let ep = app.get(&path).await.body;
        let reason = ep["disabledReason"].as_str().unwrap_or_default();
        assert!(reason.contains("webhook-delivery: disable"), "{ep}");
        let second = send(&app, &a, json!({"n": 2})).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(arrivals(&closing, &second).is_empty(), "{}", app.backend);
        assert_eq!(arrivals(&closing, &first).len(), 1, "{}", app.backend);
        closing.stop().await;
    }
}

/// A tenant's own default (chosen in the dashboard's settings) sits between the endpoint's
/// and the server's: with the server on hookd's table, the tenant's endpoints that did not
/// choose retry a 401 under Svix's rule, while another tenant's still end at it.
#[tokio::test]
async fn the_tenants_preset_applies_to_its_endpoints_that_did_not_choose() {
    for mut app in apps().await {
        app.store
            .set_status_preset(
                app.tenant,
                Some(domain::classify::StatusPreset::RetryAllBut410),
            )
            .await
            .unwrap();
        let flaky = sink(Behaviour {
            fail_first: 1,
            fail_status: 401,
            ..Default::default()
        });
        let quick = json!({"retryPolicy": {"delays": ["100ms"], "maxAttempts": 5}});
        let (a, e) = endpoint_at(&app, &flaky, quick.clone()).await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("success"), Some(2)),
            "the 401 was retried under the tenant's preset"
        );

        // The same server, as another tenant.
        (app.tenant, app.key) = testkit::new_tenant(&app.store, "globex").await;
        let (a, e) = endpoint_at(&app, &flaky, quick).await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("fail"), Some(1)),
            "another tenant keeps the server's preset"
        );
        flaky.stop().await;
    }
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out_and_is_retried() {
    for app in apps().await {
        let sink = sink(Behaviour {
            timeout_rate: 1.0,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &sink,
            json!({"timeout": "300ms", "retryPolicy": {"delays": ["100ms"], "maxAttempts": 2}}),
        )
        .await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("fail"), Some(2))
        );
        assert_eq!(state["lastError"], "timeout");
        let attempts = app.get(&format!("/app/{a}/attempt/msg/{id}")).await.body;
        for at in attempts["data"].as_array().unwrap() {
            assert_eq!(
                (at["errorKind"].as_str(), at["responseStatusCode"].as_i64()),
                (Some("timeout"), Some(0))
            );
            let ms = at["responseDurationMs"].as_i64().unwrap();
            assert!(
                (250..2000).contains(&ms),
                "took {ms} ms against a 300 ms timeout"
            );
        }
        assert_eq!(arrivals(&sink, &id).len(), 2);
        sink.stop().await;
    }
}

#[tokio::test]
async fn retry_after_in_seconds_and_as_a_date_is_respected() {
    for app in apps().await {
        for form in ["seconds", "date"] {
            let retry_after = match form {
                "seconds" => "2".to_owned(),
                _ => httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3)),
            };
            let not_before = match form {
                "seconds" => None,
                _ => Some(httpdate::parse_http_date(&retry_after).unwrap()),
            };
            let sink = sink(Behaviour {
                fail_first: 1,
                fail_status: 429,
                retry_after: Some(retry_after),
                ..Default::default()
            });
            let (a, e) =
                endpoint_at(&app, &sink, json!({"retryPolicy": {"delays": ["100ms"]}})).await;
            let id = send(&app, &a, json!({})).await;
            let state = wait_final(&app, &a, &e, &id).await;
            assert_eq!(state["statusText"], "success", "{form}");
            let got = arrivals(&sink, &id);
            assert_eq!(got.len(), 2);
            let second = got[1].at.to_system_time();
            match not_before {
                None => {
                    let gap = got[1].at.as_millis() - got[0].at.as_millis();
                    assert!(gap >= 2000, "retried after {gap} ms despite Retry-After: 2");
                }
                Some(date) => assert!(second >= date, "retried before the Retry-After date"),
            }
            sink.stop().await;
        }
    }
}

#[tokio::test]
async fn max_attempts_and_ttl_each_end_the_retries() {
    for app in apps().await {
        let sink = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &sink,
            json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 3, "ttl": "1h"}}),
        )
        .await;
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(
            (state["statusText"].as_str(), state["attemptCount"].as_i64()),
            (Some("fail"), Some(3))
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(arrivals(&sink, &id).len(), 3, "max attempts");

        let (a, e) = endpoint_at(
            &app,
            &sink,
            json!({"retryPolicy": {"delays": ["400ms"], "maxAttempts": 50, "ttl": "1s"}}),
        )
        .await;
        let created = Timestamp::now();
        let id = send(&app, &a, json!({})).await;
        let state = wait_final(&app, &a, &e, &id).await;
        assert_eq!(state["statusText"], "fail");
        let got = arrivals(&sink, &id);
        assert!(
            (1..=4).contains(&got.len()),
            "TTL ended retries after {} attempts",
            got.len()
        );
        let last = got.last().unwrap().at.as_millis() - created.as_millis();
        assert!(
            last <= 1300,
            "an attempt {last} ms after creation, past the 1 s TTL"
        );
        sink.stop().await;
    }
}

#[tokio::test]
async fn twenty_keys_of_fifty_messages_arrive_in_order_despite_failures() {
    // 30 % random failures would trip the circuit breaker now and then (five in a row, or
    // half of the first ten); this test is about order, so the breaker stays out of it.
    for app in apps_with(&[
        ("HOOKD_BREAKER_FAILURES", "1000"),
        ("HOOKD_BREAKER_FAILURE_RATIO", "1"),
    ])
    .await
    {
        let sink = sink(Behaviour {
            fail_rate: 0.3,
            fail_status: 500,
            ..Default::default()
        });
        let (a, _) = endpoint_at(
            &app,
            &sink,
            json!({"retryPolicy": {"delays": ["20ms"], "maxAttempts": 100}, "maxConcurrency": 50}),
        )
        .await;
        let mut sent = std::collections::HashSet::new();
        for n in 0..50 {
            for k in 0..20 {
                let body = json!({"eventType": "test.event", "payload": {"n": n}, "orderingKey": format!("key-{k}")});
                let m = app
                    .ok(Method::POST, &format!("/app/{a}/msg"), Some(body), 202)
                    .await;
                sent.insert(m["id"].as_str().unwrap().to_owned());
            }
        }
        eventually(
            Duration::from_secs(90),
            "all 1000 ordered messages acknowledged",
            || async { sink.state.report().unique == 1000 },
        )
        .await;
        let report = sink.state.report();
        assert_eq!(
            sink.state.acked_ids(),
            sent,
            "every message delivered on {}",
            app.backend
        );
        assert_eq!(report.order_violations, 0, "{report:?}");
        assert!(
            report.statuses.get("500").copied().unwrap_or(0) > 100,
            "failures were injected: {report:?}"
        );
        // Each key's sequence numbers arrived as 1..=50 among the acknowledged requests.
        let mut per_key: std::collections::HashMap<String, Vec<i64>> = Default::default();
        for r in sink
            .state
            .received()
            .into_iter()
            .filter(|r| r.status == 200)
        {
            per_key
                .entry(r.ordering_key.unwrap())
                .or_default()
                .push(r.sequence.unwrap());
        }
        assert_eq!(per_key.len(), 20);
        for (key, seqs) in per_key {
            assert_eq!(seqs, (1..=50).collect::<Vec<_>>(), "{key}");
        }
        sink.stop().await;
    }
}

#[tokio::test]
async fn a_dead_head_blocks_only_its_key_until_skipped_or_resent() {
    for app in apps().await {
        let sink = sink(Behaviour::default());
        let (a, e) = endpoint_at(
            &app,
            &sink,
            json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 2}}),
        )
        .await;
        // Make the head of key A die, by answering 400 to everything for a moment.
        sink.state.set_behaviour(Behaviour {
            fail_rate: 1.0,
            fail_status: 400,
            ..Default::default()
        });
        let ordered =
            |n: i32, key: &str| json!({"eventType": "t", "payload": {"n": n}, "orderingKey": key});
        let head = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(ordered(1, "A")),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        wait_final(&app, &a, &e, &head).await;
        sink.state.set_behaviour(Behaviour::default());
        let next = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(ordered(2, "A")),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let other_key = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(ordered(1, "B")),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let unordered = send(&app, &a, json!({"n": 3})).await;
        eventually(
            Duration::from_secs(10),
            "other key and unordered delivered",
            || async {
                let acked = sink.state.acked_ids();
                acked.contains(&other_key) && acked.contains(&unordered)
            },
        )
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !sink.state.acked_ids().contains(&next),
            "key A is blocked behind its dead head"
        );

        // Resending the head (now answered 200) unblocks the key, in order.
        let r = app
            .call(
                Method::POST,
                &format!("/app/{a}/msg/{head}/endpoint/{e}/resend"),
                None,
            )
            .await;
        assert_eq!(r.status, 202);
        eventually(
            Duration::from_secs(10),
            "key A flows after resend",
            || async { sink.state.acked_ids().contains(&next) },
        )
        .await;
        assert_eq!(sink.state.report().order_violations, 0);
        let attempts = app.get(&format!("/app/{a}/attempt/msg/{head}")).await.body;
        assert_eq!(
            attempts["data"][0]["triggerType"], 1,
            "the resend is a manual attempt"
        );

        // Skipping: kill the next head of key C, then skip it.
        sink.state.set_behaviour(Behaviour {
            fail_rate: 1.0,
            fail_status: 400,
            ..Default::default()
        });
        let c1 = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(ordered(1, "C")),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        wait_final(&app, &a, &e, &c1).await;
        sink.state.set_behaviour(Behaviour::default());
        let c2 = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(ordered(2, "C")),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!sink.state.acked_ids().contains(&c2));
        let r = app
            .call(
                Method::POST,
                &format!("/app/{a}/msg/{c1}/endpoint/{e}/skip"),
                None,
            )
            .await;
        assert_eq!(r.status, 202, "{}", r.body);
        eventually(
            Duration::from_secs(10),
            "key C flows after skip",
            || async { sink.state.acked_ids().contains(&c2) },
        )
        .await;
        assert_eq!(
            delivery_state(&app, &a, &e, &c1).await["statusText"],
            "canceled"
        );
        sink.stop().await;
    }
}

#[tokio::test]
async fn an_independent_verifier_accepts_every_signature_across_a_rotation() {
    for app in apps().await {
        let sink = sink(Behaviour::default());
        let (a, e) = endpoint_at(&app, &sink, json!({})).await;
        for i in 0..5 {
            send(&app, &a, json!({"before": i, "text": "héllo"})).await;
        }
        app.ok(
            Method::POST,
            &format!("/app/{a}/endpoint/{e}/secret/rotate"),
            Some(json!({})),
            200,
        )
        .await;
        let new_secret = app.get(&format!("/app/{a}/endpoint/{e}/secret")).await.body["key"]
            .as_str()
            .unwrap()
            .to_owned();
        for i in 0..5 {
            send(&app, &a, json!({"after": i})).await;
        }
        eventually(Duration::from_secs(10), "10 delivered", || async {
            sink.state.report().received >= 10
        })
        .await;
        let mut received = sink.state.received();
        received.sort_by_key(|r| r.msg_id.clone());
        for r in &received[5..] {
            let n = r.headers["webhook-signature"].split(' ').count();
            assert_eq!(
                n, 2,
                "a message sent after rotation is signed with the new and the old secret"
            );
        }
        let requests: Vec<Value> = received
            .iter()
            .map(|r| json!({"headers": r.headers, "body": String::from_utf8_lossy(&r.body)}))
            .collect();
        // After rotation every request carries two signatures; each secret alone must verify.
        let after: Vec<Value> = requests[5..].to_vec();
        for (secrets, reqs) in [
            (vec![SECRET.to_owned()], requests.clone()),
            (vec![new_secret.clone()], after),
        ] {
            let doc = json!({"secrets": secrets, "requests": reqs});
            let out = python_verify(&doc);
            assert!(
                out.status.success(),
                "standardwebhooks refused a request: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                text.contains(&format!("verified {}", reqs_len(&doc))),
                "{text}"
            );
        }
        // A tampered body must fail, or the verifier proves nothing.
        let mut tampered = requests[0].clone();
        tampered["body"] = json!("{\"before\": 999}");
        let out = python_verify(&json!({"secrets": [SECRET], "requests": [tampered]}));
        assert!(!out.status.success(), "a tampered body verified");
        sink.stop().await;
    }
}

fn reqs_len(doc: &Value) -> usize {
    doc["requests"].as_array().map_or(0, |r| r.len())
}

fn python_verify(doc: &Value) -> std::process::Output {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/verify/standardwebhooks_verify.py"
    );
    let out = crate::helpers::run_script(
        "python3",
        script,
        doc.to_string().as_bytes(),
        "pip install -r .ci/requirements.txt",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "the standardwebhooks package is missing: pip install -r .ci/requirements.txt\n{stderr}"
    );
    out
}

#[tokio::test]
async fn https_only_holds_at_send_time_for_endpoints_set_before_it() {
    for app in apps_with(&[("HOOKD_ENDPOINT_HTTPS_ONLY", "true")]).await {
        let s = sink(Behaviour::default());
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "old"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        // Set while http:// was allowed (written straight to the store, as it was then).
        let app_row = app.store.get_application(app.tenant, &a).await.unwrap();
        let ep = app
            .store
            .create_endpoint(
                app.tenant,
                &app_row,
                store::NewEndpoint {
                    url: s.url("/hook"),
                    ..Default::default()
                },
                SECRET,
            )
            .await
            .unwrap();
        let id = send(&app, &a, json!({"n": 1})).await;
        let path = format!("/app/{a}/attempt/endpoint/{}", ep.id);
        eventually(Duration::from_secs(10), "an attempt", || async {
            !app.get(&path).await.body["data"][0].is_null()
        })
        .await;
        let attempt = app.get(&path).await.body["data"][0].clone();
        assert_eq!(attempt["msgId"], id.as_str());
        // The reason is kept with the attempt (the dashboard shows it).
        let stored = app
            .store
            .list_attempts_by_message(
                app.tenant,
                a.parse().unwrap(),
                id.parse().unwrap(),
                &Default::default(),
                &store::ListParams::first(10),
            )
            .await
            .unwrap()
            .data;
        let detail = stored[0].error_detail.clone().unwrap_or_default();
        assert!(detail.contains("https"), "{detail}");
        assert!(s.state.received().is_empty(), "nothing sent in plain HTTP");
        s.stop().await;
    }
}
