//! Flow control against real receivers: ingest limits, throttles, concurrency caps, circuit
//! breakers, and isolation between endpoints and tenants.

use std::time::Duration;

use bench::sink::Behaviour;
use domain::Timestamp;
use reqwest::Method;
use serde_json::json;

use crate::delivery::{
    apps_with, arrival_times, endpoint_at, eventually, most_in_one_second, send, sink, wait_final,
};
use testkit::new_tenant;

#[tokio::test]
async fn over_its_ingest_limit_a_tenant_gets_429_and_nothing_is_written() {
    for app in apps_with(&[
        ("HOOKD_TENANT_INGEST_RATE", "1"),
        ("HOOKD_TENANT_INGEST_BURST", "3"),
    ])
    .await
    {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        for _ in 0..3 {
            send(&app, &a, json!({})).await;
        }
        let r = app
            .post(
                &format!("/app/{a}/msg"),
                json!({"eventType": "x", "payload": {}}),
            )
            .await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (429, Some("rate_limited")),
            "{}",
            app.backend
        );
        let retry_after: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=2).contains(&retry_after), "Retry-After {retry_after}");
        let listed = app.get(&format!("/app/{a}/msg?limit=250")).await.body;
        assert_eq!(
            listed["data"].as_array().unwrap().len(),
            3,
            "the refused message was not stored"
        );
        // Another tenant has its own bucket.
        let (_, other) = new_tenant(&app.store, "other").await;
        let r = app
            .call_as(
                &other,
                Method::POST,
                "/app",
                Some(json!({"name": "o"})),
                &[],
            )
            .await;
        let oa = r.body["id"].as_str().unwrap().to_owned();
        let r = app
            .call_as(
                &other,
                Method::POST,
                &format!("/app/{oa}/msg"),
                Some(json!({"eventType": "x", "payload": {}})),
                &[],
            )
            .await;
        assert_eq!(r.status, 202);
        // After the wait, the first tenant may send again.
        tokio::time::sleep(Duration::from_secs(retry_after)).await;
        assert_eq!(
            app.post(
                &format!("/app/{a}/msg"),
                json!({"eventType": "x", "payload": {}})
            )
            .await
            .status,
            202
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn the_throttle_rate_and_concurrency_cap_are_never_exceeded_at_the_receiver() {
    for app in apps_with(&[]).await {
        // Throttle: 5 per second.
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({"throttleRate": 5})).await;
        for i in 0..15 {
            send(&app, &a, json!({"i": i})).await;
        }
        eventually(Duration::from_secs(15), "15 delivered", || async {
            s.state.report().unique == 15
        })
        .await;
        let at = arrival_times(&s);
        let most = most_in_one_second(&at);
        assert!(
            most <= 6,
            "{most} requests within one second at throttleRate 5 on {}",
            app.backend
        );
        assert!(
            at[14] - at[0] >= 2000,
            "15 requests at 5/s take at least 2 s, took {} ms",
            at[14] - at[0]
        );
        s.stop().await;

        // Concurrency: at most 3 open requests, with a slow receiver.
        let s = sink(Behaviour {
            latency_ms: 200,
            ..Default::default()
        });
        let (a, _) = endpoint_at(&app, &s, json!({"maxConcurrency": 3})).await;
        for i in 0..30 {
            send(&app, &a, json!({"i": i})).await;
        }
        eventually(Duration::from_secs(20), "30 delivered", || async {
            s.state.report().unique == 30
        })
        .await;
        let report = s.state.report();
        assert!(
            report.max_concurrent <= 3,
            "{} requests open at once with maxConcurrency 3",
            report.max_concurrent
        );
        assert_eq!(report.max_concurrent, 3, "the cap is used, not undershot");
        s.stop().await;
    }
}

#[tokio::test]
async fn an_open_breaker_defers_without_counting_attempts_and_a_probe_closes_it() {
    for app in apps_with(&[
        ("HOOKD_BREAKER_FAILURES", "3"),
        ("HOOKD_BREAKER_OPEN_FOR", "2s"),
    ])
    .await
    {
        let s = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &s,
            json!({"retryPolicy": {"delays": ["50ms"], "maxAttempts": 100}}),
        )
        .await;
        let ids: Vec<String> = {
            let mut v = Vec::new();
            for i in 0..4 {
                v.push(send(&app, &a, json!({"i": i})).await);
            }
            v
        };
        eventually(Duration::from_secs(10), "breaker open", || async {
            app.get(&format!("/app/{a}/endpoint/{e}")).await.body["breakerState"] == "open"
        })
        .await;
        let seen_at_open = s.state.report().received;
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(
            s.state.report().received,
            seen_at_open,
            "no request while the breaker is open"
        );
        let stats = app.get(&format!("/app/{a}/endpoint/{e}/stats")).await.body;
        assert_eq!(
            stats["fail"], 0,
            "deferred deliveries are not dead: {stats}"
        );
        s.state.set_behaviour(Behaviour::default());
        eventually(
            Duration::from_secs(10),
            "all delivered after the probe",
            || async { s.state.report().unique == 4 },
        )
        .await;
        eventually(Duration::from_secs(5), "breaker closed", || async {
            app.get(&format!("/app/{a}/endpoint/{e}")).await.body["breakerState"] == "closed"
        })
        .await;
        // The deferral counted no attempts: each message's attempts are what reached the sink.
        // The sink counts a request before the dispatcher records its result, so each
        // delivery's result is awaited first.
        for id in &ids {
            assert_eq!(wait_final(&app, &a, &e, id).await["statusText"], "success");
            let attempts = app.get(&format!("/app/{a}/attempt/msg/{id}")).await.body;
            let recorded = attempts["data"].as_array().unwrap().len();
            let received = s
                .state
                .received()
                .iter()
                .filter(|r| &r.msg_id == id)
                .count();
            assert_eq!(
                recorded, received,
                "attempts recorded = requests the receiver saw"
            );
        }
        s.stop().await;
    }
}

#[tokio::test]
async fn an_endpoint_that_never_answers_does_not_delay_a_healthy_one() {
    for app in apps_with(&[]).await {
        let dead = sink(Behaviour {
            timeout_rate: 1.0,
            ..Default::default()
        });
        let healthy = sink(Behaviour::default());
        let (da, de) = endpoint_at(&app, &dead, json!({"timeout": "2s"})).await;
        let (ha, _) = endpoint_at(&app, &healthy, json!({})).await;
        // A backlog of 2,000 due deliveries for the dead endpoint.
        backlog(&app, &da, &de, 2000, Timestamp::now().as_millis()).await;
        // Now the healthy endpoint's messages, 20 a second.
        let mut sent = Vec::new();
        for i in 0..40 {
            let t0 = Timestamp::now();
            let id = send(&app, &ha, json!({"i": i})).await;
            sent.push((id, t0));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eventually(
            Duration::from_secs(10),
            "healthy endpoint served",
            || async { healthy.state.report().unique == 40 },
        )
        .await;
        let arrivals = healthy.state.received();
        let mut delays: Vec<i64> = sent
            .iter()
            .map(|(id, t0)| {
                let got = arrivals
                    .iter()
                    .find(|r| &r.msg_id == id)
                    .expect("delivered");
                got.at.as_millis() - t0.as_millis()
            })
            .collect();
        delays.sort();
        let worst = *delays.last().unwrap();
        let p50 = delays[delays.len() / 2];
        eprintln!(
            "{}: healthy time-to-deliver p50 {p50} ms, max {worst} ms beside 2,000 stuck deliveries",
            app.backend
        );
        // Without isolation the healthy messages would queue behind 2,000 deliveries that each
        // hold one of 10 slots for a 2 s timeout: about 400 s. The bound sits far below one such
        // timeout, with room for a loaded CI machine. On PostgreSQL the healthy endpoint's first
        // messages wait for a claim (it is not yet leased here): before claims of new work
        // skipped saturated endpoints, they waited for the whole dead backlog to be claimed and
        // deferred first (p50 147–1,248 ms, first message 1.1–1.3 s; now p50 5–8 ms).
        assert!(p50 <= 500, "healthy p50 {p50} ms beside a dead endpoint");
        assert!(
            worst <= 2000,
            "a healthy delivery took {worst} ms beside a dead endpoint"
        );
        dead.stop().await;
        healthy.stop().await;
    }
}

#[tokio::test]
async fn another_tenants_backlog_does_not_delay_new_messages() {
    for app in apps_with(&[]).await {
        let busy_sink = sink(Behaviour::default());
        let (busy_app, busy_ep) =
            endpoint_at(&app, &busy_sink, json!({"maxConcurrency": 100})).await;
        // 5,000 deliveries that became due a minute ago, written in bulk.
        let old = Timestamp::now().as_millis() - 60_000;
        backlog(&app, &busy_app, &busy_ep, 5000, old).await;
        let backlog_written = Timestamp::now();
        // A second tenant sends while that backlog drains.
        let (_, key) = new_tenant(&app.store, "quiet").await;
        let quiet_sink = sink(Behaviour::default());
        let r = app
            .call_as(&key, Method::POST, "/app", Some(json!({"name": "q"})), &[])
            .await;
        let qa = r.body["id"].as_str().unwrap().to_owned();
        app.call_as(
            &key,
            Method::POST,
            &format!("/app/{qa}/endpoint"),
            Some(json!({"url": quiet_sink.url("/q"), "secret": crate::delivery::SECRET})),
            &[],
        )
        .await;
        let mut sent = Vec::new();
        for i in 0..20 {
            let t0 = Timestamp::now();
            let r = app
                .call_as(
                    &key,
                    Method::POST,
                    &format!("/app/{qa}/msg"),
                    Some(json!({"eventType": "x", "payload": {"i": i}})),
                    &[],
                )
                .await;
            sent.push((r.body["id"].as_str().unwrap().to_owned(), t0));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eventually(Duration::from_secs(20), "quiet tenant served", || async {
            quiet_sink.state.report().unique == 20
        })
        .await;
        let backlog_left = 5000 - busy_sink.state.report().unique as i64;
        let arrivals = quiet_sink.state.received();
        let worst = sent
            .iter()
            .map(|(id, t0)| {
                arrivals
                    .iter()
                    .find(|r| &r.msg_id == id)
                    .unwrap()
                    .at
                    .as_millis()
                    - t0.as_millis()
            })
            .max()
            .unwrap();
        eventually(Duration::from_secs(60), "the backlog drained", || async {
            busy_sink.state.report().unique == 5000
        })
        .await;
        let drained = busy_sink
            .state
            .received()
            .iter()
            .map(|r| r.at.as_millis())
            .max()
            .unwrap()
            - backlog_written.as_millis();
        eprintln!(
            "{}: quiet tenant's worst time-to-deliver {worst} ms; {backlog_left} of the busy tenant's 5,000 still queued when it finished; the backlog took {drained} ms",
            app.backend
        );
        // Served first in first out, the quiet tenant's first message would wait about as long
        // as the whole backlog takes. Under 1 s it was not delayed; beyond, it must still have
        // waited less than half the drain (a machine slowed by other work slows both).
        assert!(
            worst <= 1000 || worst * 2 <= drained,
            "a quiet tenant's message waited {worst} ms behind another tenant's backlog, which took {drained} ms"
        );
        busy_sink.stop().await;
        quiet_sink.stop().await;
    }
}

/// `n` pending deliveries to `endpoint_id`, due at `due_ms`, written in bulk.
async fn backlog(app: &testkit::TestApp, app_id: &str, endpoint_id: &str, n: usize, due_ms: i64) {
    use sea_orm::EntityTrait;
    use store::entities::{delivery, message};
    for chunk in 0..n.div_ceil(500) {
        let mut msgs = Vec::new();
        let mut dels = Vec::new();
        for _ in 0..500.min(n - chunk * 500) {
            let id = domain::ids::MessageId::new();
            msgs.push(message::ActiveModel::from(message::Model {
                id,
                tenant_id: app.tenant,
                app_id: app_id.parse().unwrap(),
                event_type: "bulk".into(),
                event_id: None,
                payload: b"{}".to_vec(),
                channels: None,
                tags: None,
                ordering_key: None,
                created_at: due_ms,
                deliver_at: None,
                trace_parent: None,
            }));
            dels.push(delivery::ActiveModel::from(delivery::Model {
                id: domain::ids::DeliveryId::new(),
                tenant_id: app.tenant,
                endpoint_id: endpoint_id.parse().unwrap(),
                msg_id: id,
                state: domain::delivery::DeliveryState::Pending,
                attempt_count: 0,
                attempts_at_arm: 0,
                next_trigger: domain::delivery::AttemptTrigger::Scheduled,
                next_attempt_at: due_ms,
                lease_owner: None,
                lease_expires_at: None,
                give_up_at: due_ms + 86_400_000,
                ordering_key: None,
                seq: None,
                last_status: None,
                last_error: None,
                last_attempt_at: None,
                created_at: due_ms,
                updated_at: due_ms,
            }));
        }
        message::Entity::insert_many(msgs)
            .exec(app.store.connection())
            .await
            .unwrap();
        delivery::Entity::insert_many(dels)
            .exec(app.store.connection())
            .await
            .unwrap();
    }
}
