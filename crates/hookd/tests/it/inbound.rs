//! Receiving webhooks (issue 21): sources verify Stripe-, GitHub- and Standard-Webhooks-signed
//! requests on their raw bytes, deduplicate insert-first on the event's id, acknowledge, and
//! forward through the source's application to a real receiver.

use std::time::Duration;

use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::{Value, json};
use testkit::TestApp;

use crate::delivery::{SECRET, apps, endpoint_at, eventually, sink};

const STRIPE_SECRET: &str = "whsec_stripe_5c8d2e";
const GITHUB_SECRET: &str = "It's a Secret to Everybody";

fn hex_hmac(secret: &str, msg: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(msg);
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Stripe's documented header: `t=<unix seconds>,v1=<hex HMAC of "{t}.{body}">`.
fn stripe_signature(secret: &str, t: i64, body: &str) -> String {
    format!(
        "t={t},v1={}",
        hex_hmac(secret, format!("{t}.{body}").as_bytes())
    )
}

async fn source(app: &TestApp, name: &str, app_id: &str, verification: Value) -> (String, String) {
    source_with(
        app,
        json!({"name": name, "appId": app_id, "eventType": "inbound.event", "verification": verification}),
    )
    .await
}

async fn source_with(app: &TestApp, body: Value) -> (String, String) {
    let s = app
        .ok(Method::POST, "/inbound/source", Some(body), 201)
        .await;
    (
        s["id"].as_str().unwrap().to_owned(),
        s["url"].as_str().unwrap().to_owned(),
    )
}

async fn post(app: &TestApp, id: &str, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    post_bytes(app, id, headers, body.as_bytes()).await
}

async fn post_bytes(
    app: &TestApp,
    id: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> (u16, Value) {
    let mut req = app
        .client
        .post(format!("{}/in/{id}", app.base))
        .header("content-type", "application/json")
        .body(body.to_vec());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_default())
}

async fn messages(app: &TestApp, a: &str) -> Vec<Value> {
    app.get(&format!("/app/{a}/msg?limit=100")).await.body["data"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn stripe_and_github_requests_verify_bad_ones_get_401_and_leave_nothing() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (stripe, url) = source(
            &app,
            "stripe",
            &a,
            json!({"scheme": "stripe", "secret": STRIPE_SECRET}),
        )
        .await;
        assert!(url.ends_with(&format!("/in/{stripe}")), "{url}");
        let (github, _) = source(
            &app,
            "github",
            &a,
            json!({"scheme": "github", "secret": GITHUB_SECRET}),
        )
        .await;
        let now = domain::Timestamp::now().as_secs();
        let body = r#"{"id":"evt_1QxA","type":"charge.succeeded","data":{"amount":1200}}"#;

        // Refused, and nothing stored: tampered body, wrong secret, stale timestamp, none.
        let tampered = body.replace("1200", "9900");
        for (headers, body) in [
            (
                vec![(
                    "Stripe-Signature",
                    stripe_signature(STRIPE_SECRET, now, body),
                )],
                tampered.as_str(),
            ),
            (
                vec![(
                    "Stripe-Signature",
                    stripe_signature("whsec_wrong", now, body),
                )],
                body,
            ),
            (
                vec![(
                    "Stripe-Signature",
                    stripe_signature(STRIPE_SECRET, now - 600, body),
                )],
                body,
            ),
            (vec![], body),
        ] {
            let (status, answer) = post(&app, &stripe, &headers, body).await;
            assert_eq!(status, 401, "{answer}");
            assert_eq!(answer["code"], "invalid_signature");
        }
        assert!(
            messages(&app, &a).await.is_empty(),
            "nothing stored for a bad request"
        );

        let (status, answer) = post(
            &app,
            &stripe,
            &[(
                "Stripe-Signature",
                stripe_signature(STRIPE_SECRET, now, body),
            )],
            body,
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        let gh_body = r#"{"action":"opened","number":7}"#;
        let gh = [
            (
                "X-Hub-Signature-256",
                format!("sha256={}", hex_hmac(GITHUB_SECRET, gh_body.as_bytes())),
            ),
            (
                "X-GitHub-Delivery",
                "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
            ),
            ("X-GitHub-Event", "pull_request".to_owned()),
        ];
        let (status, answer) = post(&app, &github, &gh, gh_body).await;
        assert_eq!(status, 200, "{answer}");
        let (status, _) = post(&app, &github, &gh, r#"{"action":"closed","number":7}"#).await;
        assert_eq!(status, 401, "a GitHub body changed in transit");

        eventually(Duration::from_secs(10), "both forwarded", || async {
            s.state.report().unique >= 2
        })
        .await;
        let got = s.state.received();
        let bodies: Vec<String> = got
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        assert!(
            bodies.contains(&body.to_owned()) && bodies.contains(&gh_body.to_owned()),
            "forwarded byte for byte: {bodies:?}"
        );
        let stored = messages(&app, &a).await;
        let mut types: Vec<&str> = stored
            .iter()
            .map(|m| m["eventType"].as_str().unwrap())
            .collect();
        types.sort();
        assert_eq!(types, vec!["charge.succeeded", "pull_request"]);
        // Counted on /metrics: 4 Stripe and 1 GitHub refused, 2 stored.
        let metrics = metrics_text(&app).await;
        for line in [
            r#"hookd_inbound_requests_total{result="refused"} 5"#,
            r#"hookd_inbound_requests_total{result="stored"} 2"#,
        ] {
            assert!(metrics.contains(line), "{line} in:\n{metrics}");
        }
        let ids: Vec<&str> = stored
            .iter()
            .filter_map(|m| m["eventId"].as_str())
            .collect();
        assert!(
            ids.contains(&"evt_1QxA") && ids.contains(&"72d3162e-cc78-11e3-81ab-4c9367dc0958"),
            "{ids:?}"
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn one_event_sent_five_times_at_once_is_stored_and_forwarded_once() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (stripe, _) = source(
            &app,
            "stripe",
            &a,
            json!({"scheme": "stripe", "secret": STRIPE_SECRET}),
        )
        .await;
        let body = r#"{"id":"evt_dup_1","type":"invoice.paid"}"#;
        let sig = stripe_signature(STRIPE_SECRET, domain::Timestamp::now().as_secs(), body);
        let headers = [("Stripe-Signature", sig.clone())];
        let one = || post(&app, &stripe, &headers, body);
        let (a1, a2, a3, a4, a5) = tokio::join!(one(), one(), one(), one(), one());
        let answers = [a1, a2, a3, a4, a5];
        assert!(
            answers.iter().all(|(status, _)| *status == 200),
            "{answers:?}"
        );
        let duplicates = answers
            .iter()
            .filter(|(_, a)| a["duplicate"] == true)
            .count();
        assert_eq!(duplicates, 4, "{answers:?}");
        eventually(Duration::from_secs(10), "the forward", || async {
            s.state.report().unique >= 1
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(s.state.received().len(), 1, "forwarded once");
        assert_eq!(messages(&app, &a).await.len(), 1);
        s.stop().await;
    }
}

#[tokio::test]
async fn hookd_sends_to_its_own_inbound_url_and_each_event_arrives_once() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        // Receiving side: application "inner" forwards to the sink.
        let (inner, _) = endpoint_at(&app, &s, json!({})).await;
        let (src, _) = source(
            &app,
            "hookd",
            &inner,
            json!({"scheme": "standard-webhooks", "secrets": [SECRET]}),
        )
        .await;
        // The server listens on a port of its own choosing; its public URL names port 0.
        let url = format!("{}/in/{src}", app.base);
        // Sending side: application "outer" sends to the inbound URL, signed with SECRET.
        let outer = app
            .ok(Method::POST, "/app", Some(json!({"name": "outer"})), 201)
            .await;
        let outer = outer["id"].as_str().unwrap().to_owned();
        app.ok(
            Method::POST,
            &format!("/app/{outer}/endpoint"),
            Some(json!({"url": url, "secret": SECRET})),
            201,
        )
        .await;
        // Three ordering keys sent at once, each key's messages one after another.
        let sends = (0..3).map(|k| {
            let key = format!("order-{k}");
            let outer = outer.clone();
            let app = &app;
            async move {
                for n in 0..20 {
                    app.ok(
                        Method::POST,
                        &format!("/app/{outer}/msg"),
                        Some(json!({"eventType": "order.updated", "payload": {"n": n, "key": key}, "orderingKey": key})),
                        202,
                    )
                    .await;
                }
            }
        });
        futures_util::future::join_all(sends).await;
        eventually(
            Duration::from_secs(30),
            "60 events through the inbound URL",
            || async { s.state.report().unique >= 60 },
        )
        .await;
        let report = s.state.report();
        assert_eq!(report.bad_signatures, 0);
        assert_eq!(report.duplicates, 0);
        assert_eq!(report.order_violations, 0);
        // Each key's events reach the final receiver in the order they were sent.
        let mut last_per_key = std::collections::HashMap::new();
        for r in s.state.received() {
            let v: Value = serde_json::from_slice(&r.body).unwrap();
            let n = v["n"].as_i64().unwrap();
            let key = v["key"].as_str().unwrap().to_owned();
            assert_eq!(
                r.ordering_key.as_deref(),
                Some(key.as_str()),
                "the key goes on"
            );
            let before = last_per_key.insert(key.clone(), n);
            assert!(before.is_none_or(|b| b < n), "{key}: {n} after {before:?}");
        }
        // Each outer message id became the inner message's eventId: resent ones would be
        // acknowledged as duplicates.
        let stored = messages(&app, &inner).await;
        assert_eq!(stored.len(), 60);
        assert!(
            stored
                .iter()
                .all(|m| m["eventId"].as_str().is_some_and(|e| e.starts_with("msg_")))
        );
        s.stop().await;
    }
}

/// The `receive` role (issue 21): a process that serves only `POST /in/{source}` and health,
/// with the dispatcher forwarding what arrives; the tenant API and the dashboard are not there.
#[tokio::test]
async fn the_receive_role_takes_webhooks_in_and_serves_nothing_else() {
    for app in TestApp::all(&[
        ("HOOKD_ROLES", "receive,dispatcher"),
        ("HOOKD_DELIVERY_POLL_INTERVAL", "50ms"),
    ])
    .await
    {
        let s = sink(Behaviour::default());
        // Made through the store: this process has no API to make them with.
        let a = app
            .store
            .create_application(
                app.tenant,
                store::NewApplication {
                    name: "edge".into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        app.store
            .create_endpoint(
                app.tenant,
                &a,
                store::NewEndpoint {
                    url: s.url("/edge"),
                    version: 1,
                    ..Default::default()
                },
                SECRET,
            )
            .await
            .unwrap();
        let source = app
            .store
            .create_source(
                app.tenant,
                &a,
                "edge",
                &store::SourceSettings {
                    event_type: "edge.event".into(),
                    scheme: domain::inbound::Scheme::None,
                    ordering: Default::default(),
                    tolerance_secs: None,
                },
            )
            .await
            .unwrap();
        let (status, body) = post(
            &app,
            &source.row.id.to_string(),
            &[],
            r#"{"at":"the edge"}"#,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let id = body["id"].as_str().expect("stored").to_owned();
        eventually(Duration::from_secs(10), "forwarded", || async {
            s.state.acked_ids().contains(&id)
        })
        .await;
        let health = app
            .client
            .get(format!("{}/api/v1/health", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        for path in ["/api/v1/app", "/", "/settings", "/api/v1/inbound/source"] {
            let r = app
                .client
                .get(format!("{}{path}", app.base))
                .bearer_auth(&app.key)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 404, "{path} is not served by the receive role");
            let v: Value = r.json().await.unwrap_or_default();
            assert!(v["code"].is_string(), "{path}: a JSON error: {v}");
        }
    }
}

/// Posts event `seq` of `key` to an unsigned source, with hookd's ordering headers.
async fn post_seq(app: &TestApp, src: &str, key: &str, seq: i64) -> Value {
    let (status, answer) = post(
        app,
        src,
        &[
            ("webhook-ordering-key", key.to_owned()),
            ("webhook-sequence", seq.to_string()),
        ],
        &format!(r#"{{"key":"{key}","seq":{seq}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{key} {seq}: {answer}");
    answer
}

/// The sequences of `key` the sink received, in the order it received them.
fn arrived(s: &bench::sink::Sink, key: &str) -> Vec<i64> {
    s.state
        .received()
        .iter()
        .filter_map(|r| {
            let v: Value = serde_json::from_slice(&r.body).ok()?;
            (v["key"] == key).then(|| v["seq"].as_i64().unwrap())
        })
        .collect()
}

/// The server's `/metrics` page.
async fn metrics_text(app: &TestApp) -> String {
    reqwest::get(format!("{}/metrics", app.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn metric(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.trim().parse().ok())
}

#[tokio::test]
async fn events_arriving_out_of_sequence_are_forwarded_in_sequence_and_a_gap_is_held_then_given_up()
{
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (src, _) = source_with(
            &app,
            json!({"name": "ordered", "appId": a, "eventType": "inbound.event",
                   "verification": {"scheme": "none"}, "ordering": {"holdGapSecs": 2}}),
        )
        .await;
        // 3 and 2 wait for 1; 1 lets all three go, in sequence.
        assert_eq!(post_seq(&app, &src, "k", 3).await["held"], true);
        assert_eq!(post_seq(&app, &src, "k", 2).await["held"], true);
        assert_eq!(post_seq(&app, &src, "k", 2).await["duplicate"], true);
        assert!(post_seq(&app, &src, "k", 1).await["id"].is_string());
        eventually(Duration::from_secs(10), "1, 2, 3 forwarded", || async {
            arrived(&s, "k").len() >= 3
        })
        .await;
        assert_eq!(arrived(&s, "k"), vec![1, 2, 3]);
        // 5 waits for 4 for the hold time (2 s), then goes without it.
        let held_at = std::time::Instant::now();
        assert_eq!(post_seq(&app, &src, "k", 5).await["held"], true);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(
            arrived(&s, "k"),
            vec![1, 2, 3],
            "5 is held while 4 may come"
        );
        let text = metrics_text(&app).await;
        assert_eq!(
            metric(&text, "hookd_inbound_held_events "),
            Some(1.0),
            "{text}"
        );
        assert!(metric(&text, "hookd_inbound_oldest_held_seconds ").unwrap() >= 0.5);
        eventually(Duration::from_secs(10), "5 forwarded", || async {
            arrived(&s, "k").len() >= 4
        })
        .await;
        assert!(held_at.elapsed() >= Duration::from_secs(2));
        // 4 arrives late: forwarded at once, and counted; repeats of forwarded ones are not.
        assert!(post_seq(&app, &src, "k", 4).await["id"].is_string());
        assert_eq!(post_seq(&app, &src, "k", 5).await["duplicate"], true);
        assert_eq!(post_seq(&app, &src, "k", 1).await["duplicate"], true);
        // Another key has a sequence of its own.
        assert!(post_seq(&app, &src, "other", 1).await["id"].is_string());
        eventually(
            Duration::from_secs(10),
            "4 and other/1 forwarded",
            || async { s.state.report().unique >= 6 },
        )
        .await;
        assert_eq!(arrived(&s, "k"), vec![1, 2, 3, 5, 4]);
        assert_eq!(arrived(&s, "other"), vec![1]);
        assert_eq!(s.state.report().duplicates, 0);
        let text = metrics_text(&app).await;
        assert_eq!(
            metric(&text, r#"hookd_inbound_ordering_total{kind="skipped"}"#),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            metric(&text, r#"hookd_inbound_ordering_total{kind="late"}"#),
            Some(1.0)
        );
        assert_eq!(
            metric(&text, r#"hookd_inbound_requests_total{result="held"}"#),
            Some(3.0)
        );
        // 1, 2, 3, 5, 4 and other/1; repeats are not forwarded again.
        assert_eq!(metric(&text, "hookd_inbound_forwarded_total "), Some(6.0));
        assert_eq!(metric(&text, "hookd_inbound_held_events "), Some(0.0));
        // An event held when its application is deleted goes with it, source and all.
        assert_eq!(post_seq(&app, &src, "k", 9).await["held"], true);
        app.ok(Method::DELETE, &format!("/app/{a}"), None, 204)
            .await;
        let listed = app.get("/inbound/source").await.body;
        assert_eq!(listed, json!([]), "the source went with its application");
        let (status, _) = post(&app, &src, &[], "{}").await;
        assert_eq!(status, 404);
        s.stop().await;
    }
}

#[tokio::test]
async fn a_hundred_events_of_one_key_posted_at_once_in_any_order_arrive_in_sequence() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (src, _) = source_with(
            &app,
            json!({"name": "burst", "appId": a, "eventType": "inbound.event",
                   "verification": {"scheme": "none"}}),
        )
        .await;
        // Reversed, then posted all at once: most arrive ahead of a gap; whichever request
        // fills one forwards the run behind it, whoever holds the key.
        let posts = (1..=100)
            .rev()
            .map(|seq| post_seq(&app, &src, "burst", seq));
        futures_util::future::join_all(posts).await;
        eventually(Duration::from_secs(20), "100 forwarded", || async {
            arrived(&s, "burst").len() >= 100
        })
        .await;
        assert_eq!(arrived(&s, "burst"), (1..=100).collect::<Vec<_>>());
        assert_eq!(s.state.report().duplicates, 0);
        s.stop().await;
    }
}

/// The configuration file's `[[sources]]`, as an operator deploying with one would write it.
fn write_declared_source(dir: &std::path::Path, tenant: &str, secret: &str) {
    let file = format!(
        r#"
[[sources]]
tenant = "{tenant}"
name = "stripe"
appId = "stripe-in"
eventType = "stripe.event"
verification = {{ scheme = "stripe", secret = "{secret}" }}
"#
    );
    std::fs::write(dir.join("hookd.toml"), file).unwrap();
}

/// `hookd serve` with the file, logging JSON: the server and what it did with the source.
fn start_declared(dir: &std::path::Path) -> (crate::helpers::Server, Value) {
    let mut cmd = crate::helpers::hookd(dir);
    cmd.args(["--config", "hookd.toml"])
        .env("HOOKD_LOG_FORMAT", "json");
    let server = crate::helpers::Server::start(cmd);
    let line = server
        .started_log
        .iter()
        .find(|l| l.contains("source from the configuration file"))
        .expect("a log line for the declared source")
        .clone();
    (server, serde_json::from_str(&line).unwrap())
}

async fn post_stripe(base: &str, id: &str, secret: &str, event: &str) -> reqwest::StatusCode {
    let body = format!(r#"{{"id":"{event}","type":"invoice.paid"}}"#);
    let t = domain::Timestamp::now().as_millis() / 1000;
    reqwest::Client::new()
        .post(format!("{base}/in/{id}"))
        .header("content-type", "application/json")
        .header("stripe-signature", stripe_signature(secret, t, &body))
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

/// Sources declared in the configuration file: made at the first start (with the application
/// its uid names), kept with their id and URL at the next, changed in place when the file
/// changes; `hookd config` names them without their secret; one of an unknown tenant stops
/// the start with a message naming it.
#[tokio::test]
async fn sources_declared_in_the_configuration_file_are_made_then_kept_in_line_with_it() {
    use crate::helpers::{assert_clean_failure, create_tenant, hookd, run, stdout};
    let dir = tempfile::tempdir().unwrap();
    let (tenant, key) = create_tenant(dir.path());
    write_declared_source(dir.path(), &tenant, "whsec_first_1a2b");

    let out = run(hookd(dir.path()).args(["--config", "hookd.toml", "config"]));
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "# source: stripe (tenant {tenant}, application stripe-in, verification stripe)"
        )),
        "{text}"
    );
    assert!(!text.contains("whsec_first"), "the secret is never printed");

    let (server, made) = start_declared(dir.path());
    assert_eq!(
        made["message"],
        "created source from the configuration file"
    );
    let id = made["id"].as_str().unwrap().to_owned();
    assert!(
        made["url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/in/{id}"))
    );
    let first = post_stripe(&server.base, &id, "whsec_first_1a2b", "evt_1").await;
    assert_eq!(first, 200);
    // The application came with it, and the event is one of its messages.
    let msgs: Value = reqwest::Client::new()
        .get(format!("{}/api/v1/app/stripe-in/msg", server.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(msgs["data"][0]["eventId"], "evt_1", "{msgs}");
    drop(server.stop_and_log());

    // The same file again: nothing changes.
    let (server, kept) = start_declared(dir.path());
    assert_eq!(kept["message"], "kept source from the configuration file");
    assert_eq!(kept["id"], id.as_str());
    drop(server.stop_and_log());

    // The sender rotated its secret: the file says so, the source follows at the next start.
    write_declared_source(dir.path(), &tenant, "whsec_second_3c4d");
    let (server, changed) = start_declared(dir.path());
    assert_eq!(
        changed["message"],
        "updated source from the configuration file"
    );
    assert_eq!(changed["id"], id.as_str(), "same source, same URL");
    let old = post_stripe(&server.base, &id, "whsec_first_1a2b", "evt_2").await;
    assert_eq!(old, 401, "the old secret no longer verifies");
    let new = post_stripe(&server.base, &id, "whsec_second_3c4d", "evt_3").await;
    assert_eq!(new, 200);
    drop(server.stop_and_log());

    // A tenant that does not exist: the start stops, naming the source and why.
    let stranger = domain::ids::TenantId::new().to_string();
    write_declared_source(dir.path(), &stranger, "whsec_first_1a2b");
    let out = run(hookd(dir.path()).args(["--config", "hookd.toml", "serve"]));
    assert_clean_failure(&out, &["sources[0] (\"stripe\")", "no such tenant"]);
}

/// Two starts declaring the same source together (on either database), in whichever order
/// they reach the database: one makes the source and its application, the other finds them;
/// one source, one application.
#[tokio::test]
async fn two_starts_declaring_the_same_source_at_once_make_it_once() {
    for app in TestApp::all(&[]).await {
        let spec = service::inbound::SourceSpec::new(service::inbound::SourceFields {
            name: "github".into(),
            app: "github-in".into(),
            event_type: "github.event".into(),
            verification: json!({"scheme": "github", "secret": GITHUB_SECRET}),
            ordering: None,
            tolerance_secs: None,
        })
        .unwrap();
        let declare = || service::inbound::declare_source(&app.store, app.tenant, &spec);
        let (a, b) = tokio::join!(declare(), declare());
        let (a, b) = (a.unwrap(), b.unwrap());
        let mut done = [a.1, b.1];
        done.sort_by_key(|d| format!("{d:?}"));
        use service::inbound::Declared;
        assert_eq!(
            done,
            [Declared::Created, Declared::Unchanged],
            "{}",
            app.backend
        );
        assert_eq!(a.0.row.id, b.0.row.id);
        let sources = app.ok(Method::GET, "/inbound/source", None, 200).await;
        assert_eq!(sources.as_array().unwrap().len(), 1, "{sources}");
        let apps = app.get("/app").await.body;
        assert_eq!(apps["data"].as_array().unwrap().len(), 1, "{apps}");
        assert_eq!(apps["data"][0]["uid"], "github-in");
        // An application id that does not exist is not made up.
        let mut by_id = spec.clone();
        by_id.app = domain::ids::ApplicationId::new().to_string();
        let err = service::inbound::declare_source(&app.store, app.tenant, &by_id)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("application"), "{err}");
    }
}

/// A source's timestamp tolerance: a Stripe source given 600 s takes a request signed eight
/// minutes ago (the default 300 s would refuse it) and refuses one signed eleven minutes ago;
/// a scheme that signs no timestamp, or a tolerance out of bounds, is refused with the field.
#[tokio::test]
async fn a_sources_timestamp_tolerance_is_its_own() {
    for app in apps().await {
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "tol"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let made = app
            .ok(
                Method::POST,
                "/inbound/source",
                Some(json!({"name": "stripe-tol", "appId": a, "eventType": "e",
                    "verification": {"scheme": "stripe", "secret": STRIPE_SECRET},
                    "toleranceSecs": 600})),
                201,
            )
            .await;
        assert_eq!(made["toleranceSecs"], 600, "{made}");
        let id = made["id"].as_str().unwrap();
        let now = domain::Timestamp::now().as_millis() / 1000;
        let signed_ago = |secs: i64, event: &str| {
            let body = format!(r#"{{"id":"{event}","type":"invoice.paid"}}"#);
            let sig = stripe_signature(STRIPE_SECRET, now - secs, &body);
            (body, sig)
        };
        let (body, sig) = signed_ago(8 * 60, "evt_tol_1");
        let (status, answer) = post(&app, id, &[("stripe-signature", sig)], &body).await;
        assert_eq!(status, 200, "eight minutes is within 600 s: {answer}");
        let (body, sig) = signed_ago(11 * 60, "evt_tol_2");
        let (status, answer) = post(&app, id, &[("stripe-signature", sig)], &body).await;
        assert_eq!(status, 401, "eleven minutes is not: {answer}");

        let github = app
            .ok(
                Method::POST,
                "/inbound/source",
                Some(json!({"name": "gh-tol", "appId": a, "eventType": "e",
                    "verification": {"scheme": "github", "secret": GITHUB_SECRET}})),
                201,
            )
            .await;
        assert_eq!(
            github["toleranceSecs"],
            Value::Null,
            "GitHub signs no timestamp"
        );
        for (verification, secs) in [
            (json!({"scheme": "github", "secret": GITHUB_SECRET}), 60),
            (json!({"scheme": "stripe", "secret": STRIPE_SECRET}), 0),
            (json!({"scheme": "stripe", "secret": STRIPE_SECRET}), 7200),
        ] {
            let r = app
                .call(
                    Method::POST,
                    "/inbound/source",
                    Some(json!({"name": "bad-tol", "appId": a, "eventType": "e",
                        "verification": verification, "toleranceSecs": secs})),
                )
                .await;
            assert_eq!(r.status, 422, "{secs}: {}", r.body);
            assert!(r.body.to_string().contains("toleranceSecs"), "{}", r.body);
        }
    }
}

/// A source holds at most `inbound_max_held` events ahead of gaps: past it, an event that would
/// be held is refused with 429 and Retry-After (nothing stored), while a repeat of a held one
/// is still a duplicate and the event that fills the gap is still taken; once the held ones go,
/// the refused one is taken when sent again. Nothing is lost and the order holds.
#[tokio::test]
async fn a_source_holds_so_many_events_ahead_of_gaps_and_then_asks_the_sender_to_wait() {
    for app in crate::delivery::apps_with(&[("HOOKD_INBOUND_MAX_HELD", "3")]).await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (src, _) = source_with(
            &app,
            json!({"name": "capped", "appId": a, "eventType": "inbound.event",
                   "verification": {"scheme": "none"}, "ordering": {"holdGapSecs": 600}}),
        )
        .await;
        // Each process counts what the sources hold every second and adds what it held since;
        // an event held while that count runs may be in both until the next one, so the
        // process may refuse one too early for up to a second (never one too many). A sender
        // told 429 sends again later, as this one does.
        for seq in 2..=4 {
            let started = std::time::Instant::now();
            loop {
                let headers = [
                    ("webhook-ordering-key", "k".to_owned()),
                    ("webhook-sequence", seq.to_string()),
                ];
                let body = format!(r#"{{"key":"k","seq":{seq}}}"#);
                let (status, answer) = post(&app, &src, &headers, &body).await;
                if status == 429 && started.elapsed() < Duration::from_secs(3) {
                    assert_eq!(answer["code"], "too_many_held", "{answer}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
                assert_eq!(status, 200, "{seq}: {answer}");
                assert_eq!(answer["held"], true, "{seq}: {answer}");
                break;
            }
        }
        let refused = |seq: i64| {
            let app = &app;
            let src = src.clone();
            async move {
                let headers = [
                    ("webhook-ordering-key", "k".to_owned()),
                    ("webhook-sequence", seq.to_string()),
                ];
                let body = format!(r#"{{"key":"k","seq":{seq}}}"#);
                let resp = app
                    .client
                    .post(format!("{}/in/{src}", app.base))
                    .header("content-type", "application/json")
                    .header(headers[0].0, &headers[0].1)
                    .header(headers[1].0, &headers[1].1)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let retry = resp.headers().get("retry-after").cloned();
                (
                    resp.status().as_u16(),
                    retry,
                    resp.json::<Value>().await.unwrap(),
                )
            }
        };
        // The process counts what it holds as it holds it: a fourth ahead of the gap is refused.
        let r = 6;
        let (status, retry, body) = refused(r).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["code"], "too_many_held", "{body}");
        assert!(retry.is_some(), "Retry-After");
        assert_eq!(post_seq(&app, &src, "k", 3).await["duplicate"], true);
        // The event the gap waits for is taken: the held ones follow it, in sequence.
        assert!(post_seq(&app, &src, "k", 1).await["id"].is_string());
        eventually(Duration::from_secs(10), "1 to 4 forwarded", || async {
            arrived(&s, "k").len() >= 4
        })
        .await;
        // 5 fills the next gap; then the refused one, sent again, is in turn.
        assert!(post_seq(&app, &src, "k", 5).await["id"].is_string());
        eventually(Duration::from_secs(10), "all held forwarded", || async {
            arrived(&s, "k").len() as i64 >= r - 1
        })
        .await;
        assert!(post_seq(&app, &src, "k", r).await["id"].is_string());
        // Nothing is held now: once counted again, one ahead of a gap is held again.
        eventually(Duration::from_secs(10), "held again", || async {
            refused(r + 2).await.2["held"] == true
        })
        .await;
        let text = metrics_text(&app).await;
        assert!(
            metric(&text, r#"hookd_inbound_requests_total{result="full"}"#) >= Some(1.0),
            "{text}"
        );
        assert!(post_seq(&app, &src, "k", r + 1).await["id"].is_string());
        eventually(Duration::from_secs(10), "every one forwarded", || async {
            arrived(&s, "k").len() as i64 >= r + 2
        })
        .await;
        assert_eq!(arrived(&s, "k"), (1..=r + 2).collect::<Vec<_>>());
    }
}

/// Bodies that are not JSON (bad UTF-8, a raw NUL in a string, trailing text) are refused with
/// 400 `invalid_payload` naming the problem, and nothing is stored; JSON with whitespace around
/// it is taken. A payload stored before that check (written here through the store) reads as an
/// error value on its own message while the lists holding it keep answering 200.
#[tokio::test]
async fn inbound_stores_only_json_and_a_stored_payload_that_is_not_still_reads() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, ep) = endpoint_at(&app, &s, json!({})).await;
        let (src, _) = source(&app, "open", &a, json!({"scheme": "none"})).await;
        for (body, says) in [
            (&b"{\"a\":\"\xff\xfe\"}"[..], "not UTF-8"),
            (b"{\"a\":\"\x00\"}", "control character"),
            (b"{\"a\":1} x", "trailing characters at line 1 column 9"),
        ] {
            let (status, answer) = post_bytes(&app, &src, &[], body).await;
            assert_eq!(status, 400, "{answer}");
            assert_eq!(answer["code"], "invalid_payload", "{answer}");
            let detail = answer["detail"].as_str().unwrap();
            assert!(detail.contains(says), "{detail}");
        }
        assert!(messages(&app, &a).await.is_empty(), "nothing stored");
        let (status, answer) = post(&app, &src, &[], " \r\n\t{\"a\": 1}\n ").await;
        assert_eq!(status, 200, "whitespace around JSON: {answer}");

        let model = app.store.get_application(app.tenant, &a).await.unwrap();
        let bad = app
            .store
            .create_message(
                app.tenant,
                &model,
                store::NewMessage {
                    event_type: "inbound.event".into(),
                    event_id: None,
                    payload: b"{\"a\":\"\xff\xfe\"}".to_vec(),
                    channels: Vec::new(),
                    tags: Vec::new(),
                    ordering_key: None,
                    to_endpoint: None,
                    deliver_at: None,
                    trace_parent: None,
                },
                |_, now| now.plus(Duration::from_secs(3600)),
            )
            .await
            .unwrap()
            .message
            .id
            .to_string();
        let list = app.get(&format!("/app/{a}/msg?limit=100")).await;
        assert_eq!(list.status, 200, "{}", list.body);
        let data = list.body["data"].as_array().unwrap();
        assert_eq!(data.len(), 2, "{}", list.body);
        let shown = |m: &Value| m["payload"].clone();
        let bad_one = data.iter().find(|m| m["id"] == bad.as_str()).unwrap();
        assert_eq!(shown(bad_one)["unreadable"], true, "{bad_one}");
        assert!(
            shown(bad_one)["error"]
                .as_str()
                .unwrap()
                .contains("cannot be shown: it is not UTF-8"),
            "{bad_one}"
        );
        let good = data.iter().find(|m| m["id"] != bad.as_str()).unwrap();
        assert_eq!(shown(good), json!({"a": 1}), "the good one as it was");
        let one = app.get(&format!("/app/{a}/msg/{bad}")).await;
        assert_eq!(one.status, 200, "{}", one.body);
        assert_eq!(one.body["payload"]["unreadable"], true);
        let by_endpoint = app.get(&format!("/app/{a}/endpoint/{ep}/msg")).await;
        assert_eq!(by_endpoint.status, 200, "{}", by_endpoint.body);
        assert_eq!(by_endpoint.body["data"].as_array().unwrap().len(), 2);
        s.stop().await;
    }
}

/// GitHub's signature covers the body only: the same signed body sent again with another
/// `X-GitHub-Delivery` (and another `X-GitHub-Event`) is a duplicate and makes no message, as
/// a repeated delivery id is; so is an `hmac` body without a signed timestamp or id sent again.
/// A different body is a new event; one not taken (refused by a message rule) may be sent again.
#[tokio::test]
async fn a_captured_github_or_hmac_request_replayed_with_a_new_id_is_a_duplicate() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (github, _) = source(
            &app,
            "github",
            &a,
            json!({"scheme": "github", "secret": GITHUB_SECRET}),
        )
        .await;
        let body = r#"{"action":"opened","number":7}"#;
        let sig = format!("sha256={}", hex_hmac(GITHUB_SECRET, body.as_bytes()));
        let gh = |delivery: &str, event: &str| {
            vec![
                ("X-Hub-Signature-256", sig.clone()),
                ("X-GitHub-Delivery", delivery.to_owned()),
                ("X-GitHub-Event", event.to_owned()),
            ]
        };
        let (status, answer) = post(&app, &github, &gh("d-1", "pull_request"), body).await;
        assert_eq!((status, answer["id"].is_string()), (200, true), "{answer}");
        for (delivery, event) in [
            ("d-2", "pull_request"),
            ("d-3", "push"),
            ("d-1", "pull_request"),
        ] {
            let (status, answer) = post(&app, &github, &gh(delivery, event), body).await;
            assert_eq!(status, 200, "{answer}");
            assert_eq!(answer, json!({"duplicate": true}), "{delivery} {event}");
        }
        let (status, answer) =
            post(&app, &github, &[("X-Hub-Signature-256", sig.clone())], body).await;
        assert_eq!(answer, json!({"duplicate": true}), "{status}: no id at all");
        let stored = messages(&app, &a).await;
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(stored[0]["eventType"], "pull_request");
        // Five copies at once, each under its own delivery id: one event.
        let body = r#"{"action":"closed","number":7}"#;
        let sig = format!("sha256={}", hex_hmac(GITHUB_SECRET, body.as_bytes()));
        let copy = |n: u32| {
            let headers = vec![
                ("X-Hub-Signature-256", sig.clone()),
                ("X-GitHub-Delivery", format!("c-{n}")),
            ];
            let app = &app;
            let github = github.clone();
            async move { post(app, &github, &headers, body).await }
        };
        let (c1, c2, c3, c4, c5) = tokio::join!(copy(1), copy(2), copy(3), copy(4), copy(5));
        let copies = [c1, c2, c3, c4, c5];
        let taken = copies.iter().filter(|(_, a)| a["id"].is_string()).count();
        let dups = copies
            .iter()
            .filter(|(_, a)| a["duplicate"] == true)
            .count();
        assert_eq!((taken, dups), (1, 4), "{copies:?}");
        assert_eq!(messages(&app, &a).await.len(), 2);

        let (hmac, _) = source(
            &app,
            "hmac",
            &a,
            json!({"scheme": "hmac", "secret": "0123456789abcdef", "header": "X-Sig"}),
        )
        .await;
        let signed = |body: &str| vec![("X-Sig", hex_hmac("0123456789abcdef", body.as_bytes()))];
        let first = r#"{"n":1}"#;
        let (status, answer) = post(&app, &hmac, &signed(first), first).await;
        assert_eq!((status, answer["id"].is_string()), (200, true), "{answer}");
        let (_, answer) = post(&app, &hmac, &signed(first), first).await;
        assert_eq!(answer, json!({"duplicate": true}));
        let second = r#"{"n":2}"#;
        let (_, answer) = post(&app, &hmac, &signed(second), second).await;
        assert!(answer["id"].is_string(), "another body: {answer}");
        // Not taken (a payload must be an object): the same request again is refused the
        // same way, not acknowledged as a duplicate of something never stored.
        for _ in 0..2 {
            let (status, answer) = post(&app, &hmac, &signed("[1]"), "[1]").await;
            assert_eq!(status, 422, "{answer}");
        }
        assert_eq!(messages(&app, &a).await.len(), 4);
        s.stop().await;
    }
}

/// The digests are kept for the window only: once it ends the sweep deletes them, and the
/// same signed bytes are taken as new.
#[tokio::test]
async fn signed_digests_are_swept_when_their_window_ends() {
    for app in apps().await {
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "win"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let (id, _) = source(
            &app,
            "gh",
            &a,
            json!({"scheme": "github", "secret": GITHUB_SECRET}),
        )
        .await;
        let src = app.store.system().source(&id).await.unwrap();
        let short = Duration::from_millis(50);
        let claim = |d: &'static str| app.store.claim_signed(&src, d, Some("x"), short);
        assert!(matches!(
            claim("d1").await.unwrap(),
            store::Claim::Fresh { .. }
        ));
        assert!(matches!(
            claim("d2").await.unwrap(),
            store::Claim::Fresh { .. }
        ));
        assert_eq!(claim("d1").await.unwrap(), store::Claim::Same);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = domain::Timestamp::now();
        let keep = store::Horizons {
            idempotency: domain::Timestamp::from_millis(0),
            events: domain::Timestamp::from_millis(0),
            done: domain::Timestamp::from_millis(0),
        };
        let swept = app.store.system().sweep_expired(keep, now).await.unwrap();
        assert_eq!(swept.inbound_signed, 2);
        assert!(matches!(
            claim("d1").await.unwrap(),
            store::Claim::Fresh { .. }
        ));
    }
}

/// A source's secret is at least 16 bytes (422 naming `verification.secret`); a sequence
/// whose successor would overflow is refused with 400 naming the header, and the key's later
/// events go on as before.
#[tokio::test]
async fn short_source_secrets_and_overflowing_sequences_are_refused() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        for verification in [
            json!({"scheme": "github", "secret": "x"}),
            json!({"scheme": "stripe", "secret": "whsec_short"}),
            json!({"scheme": "hmac", "secret": "123456789012345", "header": "X-Sig"}),
        ] {
            let r = app
                .call(
                    Method::POST,
                    "/inbound/source",
                    Some(json!({"name": "weak", "appId": a, "eventType": "e",
                        "verification": verification})),
                )
                .await;
            assert_eq!(r.status, 422, "{}", r.body);
            assert_eq!(
                r.body["detail"][0]["loc"],
                json!(["body", "verification", "secret"]),
                "{}",
                r.body
            );
            assert!(r.body.to_string().contains("at least 16"), "{}", r.body);
        }

        let (src, _) = source_with(
            &app,
            json!({"name": "ordered", "appId": a, "eventType": "inbound.event",
                   "verification": {"scheme": "none"}, "ordering": {"holdGapSecs": 600}}),
        )
        .await;
        let (status, answer) = post(
            &app,
            &src,
            &[
                ("webhook-ordering-key", "k".to_owned()),
                ("webhook-sequence", i64::MAX.to_string()),
            ],
            r#"{"key":"k","seq":0}"#,
        )
        .await;
        assert_eq!(status, 400, "{answer}");
        assert_eq!(answer["code"], "invalid_sequence");
        assert!(
            answer["detail"]
                .as_str()
                .unwrap()
                .starts_with("webhook-sequence is 9223372036854775807"),
            "{answer}"
        );
        for seq in 1..=3 {
            assert!(
                post_seq(&app, &src, "k", seq).await["id"].is_string(),
                "{seq} in turn"
            );
        }
        eventually(Duration::from_secs(10), "1 to 3 forwarded", || async {
            arrived(&s, "k").len() >= 3
        })
        .await;
        assert_eq!(arrived(&s, "k"), vec![1, 2, 3]);
        s.stop().await;
    }
}

/// Polls a source's Requests view (as the store lists it) until it holds `n` rows.
async fn refusals_of(app: &TestApp, id: &str, n: usize) -> Vec<store::Refusal> {
    let source: domain::ids::SourceId = id.parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let rows = app
            .store
            .list_refusals(app.tenant, source, None, 100)
            .await
            .unwrap();
        if rows.len() >= n || std::time::Instant::now() > deadline {
            return rows;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each way a source refuses a request is recorded for its Requests view with its reason and
/// the status the sender was answered, with the request's size, address and headers, never
/// a credential or a signature value; accepted requests are not; another tenant lists none.
#[tokio::test]
async fn refused_requests_are_recorded_with_their_reason_and_no_secret() {
    use domain::inbound_refusal::Reason;
    for app in crate::delivery::apps_with(&[("HOOKD_MAX_PAYLOAD_BYTES", "2048")]).await {
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "in"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let (id, _) = source(
            &app,
            "stripe",
            &a,
            json!({"scheme": "stripe", "secret": STRIPE_SECRET}),
        )
        .await;
        let now = domain::Timestamp::now().as_secs();
        let body = r#"{"id":"evt_1","type":"charge.succeeded"}"#;
        let forged = stripe_signature("whsec_not_the_secret", now, body);
        let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(80_000));
        type Case<'a> = (Reason, Vec<(&'a str, String)>, String);
        let cases: Vec<Case> = vec![
            (
                Reason::BadSignature,
                vec![
                    ("Stripe-Signature", forged.clone()),
                    ("Authorization", "Bearer hk_must_not_be_kept".into()),
                ],
                body.into(),
            ),
            (Reason::MissingHeader, vec![], body.into()),
            (
                Reason::MalformedHeader,
                vec![("Stripe-Signature", "v1=abc".into())],
                body.into(),
            ),
            (
                Reason::StaleTimestamp,
                vec![(
                    "Stripe-Signature",
                    stripe_signature(STRIPE_SECRET, now - 3600, body),
                )],
                body.into(),
            ),
            (
                Reason::NotJson,
                vec![(
                    "Stripe-Signature",
                    stripe_signature(STRIPE_SECRET, now, "plain text"),
                )],
                "plain text".into(),
            ),
            (
                Reason::TooLarge,
                vec![(
                    "Stripe-Signature",
                    stripe_signature(STRIPE_SECRET, now, &big),
                )],
                big.clone(),
            ),
        ];
        for (reason, headers, body) in &cases {
            let (status, _) = post(&app, &id, headers, body).await;
            assert_eq!(status, reason.status(), "{reason:?} on {}", app.backend);
        }
        // Accepted: not a refusal.
        let ok = vec![(
            "Stripe-Signature",
            stripe_signature(STRIPE_SECRET, now, body),
        )];
        assert_eq!(post(&app, &id, &ok, body).await.0, 200);

        let rows = refusals_of(&app, &id, cases.len()).await;
        assert_eq!(rows.len(), cases.len(), "{rows:#?}");
        // Newest first: the cases in reverse.
        let listed: Vec<Reason> = rows.iter().rev().map(|r| r.reason.unwrap()).collect();
        let sent: Vec<Reason> = cases.iter().map(|c| c.0).collect();
        assert_eq!(listed, sent, "on {}", app.backend);
        for r in &rows {
            assert_eq!(r.status, r.reason.unwrap().status());
            assert_eq!(r.remote_addr, "127.0.0.1");
            assert!(!r.detail.is_empty());
        }
        let bad = rows.last().unwrap();
        assert_eq!(bad.size, body.len() as u64);
        assert_eq!(
            rows[0].size,
            big.len() as u64,
            "declared size of the one not read"
        );
        assert!(
            bad.detail.contains("no signature matches"),
            "{}",
            bad.detail
        );
        let header = |r: &store::Refusal, name: &str| {
            r.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header(bad, "authorization").as_deref(),
            Some(format!("hidden ({} bytes)", "Bearer hk_must_not_be_kept".len()).as_str())
        );
        assert_eq!(
            header(bad, "stripe-signature"),
            Some(format!("hidden ({} bytes)", forged.len()))
        );
        assert_eq!(
            header(bad, "content-type").as_deref(),
            Some("application/json")
        );
        // No secret, no signature value, anywhere in what is stored.
        let stored = format!("{rows:?}");
        for secret in ["hk_must_not_be_kept", &forged[2..], STRIPE_SECRET] {
            assert!(!stored.contains(secret), "{secret} stored");
        }

        // Another tenant sees none of it.
        let (other, _) = testkit::new_tenant(&app.store, "other").await;
        let src: domain::ids::SourceId = id.parse().unwrap();
        assert!(
            app.store
                .list_refusals(other, src, None, 100)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(app.store.get_source(other, &id).await.is_err());

        // Deleting the source deletes its Requests view.
        app.ok(Method::DELETE, &format!("/inbound/source/{id}"), None, 204)
            .await;
        assert!(
            app.store
                .list_refusals(app.tenant, src, None, 100)
                .await
                .unwrap()
                .is_empty()
        );
    }
}

/// A flood of bad requests costs no write each: each receiving process records at most
/// `RECORD_PER_SOURCE` a second per source and counts the rest, so recorded + counted is
/// every request.
#[tokio::test]
async fn a_flood_of_refused_requests_is_sampled_and_the_rest_counted() {
    const FLOOD: usize = 400;
    for app in apps().await {
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "in"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let (id, _) = source(
            &app,
            "gh",
            &a,
            json!({"scheme": "github", "secret": GITHUB_SECRET}),
        )
        .await;
        let started = std::time::Instant::now();
        let forged = [("X-Hub-Signature-256", "sha256=00".to_owned())];
        let sends = (0..FLOOD).map(|_| post(&app, &id, &forged, "{}"));
        for (status, _) in futures_util::future::join_all(sends).await {
            assert_eq!(status, 401);
        }
        let secs = started.elapsed().as_secs() as usize + 2;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let (recorded, unrecorded) = loop {
            let recorded = refusals_of(&app, &id, 0).await.len();
            let row = app.store.get_source(app.tenant, &id).await.unwrap().row;
            if recorded + row.unrecorded as usize == FLOOD || std::time::Instant::now() > deadline {
                break (recorded, row.unrecorded as usize);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(recorded + unrecorded, FLOOD, "on {}", app.backend);
        assert!(
            recorded <= service::refusals::RECORD_PER_SOURCE * secs && recorded > 0,
            "{recorded} recorded in about {secs} s on {}",
            app.backend
        );
    }
}

/// The Requests view is bounded twice: the newest `REFUSALS_KEPT` per source as they are
/// written, and the scheduler's prune removes those older than `REFUSAL_RETENTION`.
#[tokio::test]
async fn refused_requests_are_kept_to_the_newest_and_pruned_by_age() {
    use domain::inbound_refusal::Reason;
    // No scheduler of its own: the prune below is the only one.
    for app in TestApp::all(&[("HOOKD_ROLES", "api")]).await {
        let (busy, old) = (domain::ids::SourceId::new(), domain::ids::SourceId::new());
        let now = domain::Timestamp::now().as_millis();
        let row = |source, at_ms: i64, n: usize| store::NewRefusal {
            source_id: source,
            tenant_id: app.tenant,
            at: domain::Timestamp::from_millis(at_ms),
            reason: Reason::BadSignature,
            detail: format!("request {n}"),
            status: 401,
            size: 2,
            remote_addr: "192.0.2.1".into(),
            headers: vec![],
        };
        // 1,200 in six writes of 200 (the writer's most per second), a millisecond apart.
        let sys = app.store.system();
        for batch in 0..6 {
            let rows: Vec<_> = (0..200)
                .map(|i| {
                    let n = batch * 200 + i;
                    row(busy, now - 60_000 + n as i64, n)
                })
                .collect();
            sys.record_refusals(&rows, store::REFUSALS_KEPT)
                .await
                .unwrap();
        }
        let mut kept = Vec::new();
        let mut before = None;
        loop {
            let page = app
                .store
                .list_refusals(app.tenant, busy, before, 100)
                .await
                .unwrap();
            let Some(last) = page.last() else { break };
            before = Some(last.id);
            kept.extend(page);
        }
        assert_eq!(
            kept.len() as u64,
            store::REFUSALS_KEPT,
            "on {}",
            app.backend
        );
        assert_eq!(kept[0].detail, "request 1199", "the newest first");
        assert_eq!(
            kept.last().unwrap().detail,
            "request 200",
            "the oldest kept"
        );

        // Eight days old: gone at the next prune; the recent ones stay.
        let eight_days = 8 * 24 * 3600 * 1000;
        // Written as then (ids are minted no earlier than the last one this process made, so
        // these are made at their time by hand).
        for n in 0..5 {
            use sea_orm::{ActiveModelTrait, Set};
            store::entities::inbound_refusal::ActiveModel {
                id: Set(domain::ids::RefusalId::lower_bound(
                    domain::Timestamp::from_millis(now - eight_days + n),
                )),
                source_id: Set(old),
                tenant_id: Set(app.tenant),
                reason: Set("bad_signature".into()),
                detail: Set("old".into()),
                status: Set(401),
                size: Set(2),
                remote_addr: Set("192.0.2.1".into()),
                headers: Set("[]".into()),
            }
            .insert(app.store.connection())
            .await
            .unwrap();
        }
        assert_eq!(
            app.store
                .list_refusals(app.tenant, old, None, 100)
                .await
                .unwrap()
                .len(),
            5
        );
        let report = scheduler::prune(
            &app.store,
            domain::retention::Retention {
                payload: Duration::from_secs(30 * 86_400),
                metadata: Duration::from_secs(30 * 86_400),
            },
            false,
        )
        .await
        .unwrap();
        assert_eq!(report.refusals, 5, "on {}", app.backend);
        assert!(
            app.store
                .list_refusals(app.tenant, old, None, 100)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            app.store
                .list_refusals(app.tenant, busy, None, 100)
                .await
                .unwrap()
                .len(),
            100
        );
    }
}

/// A vendor's scheme made through hookd's own source API: its URL carries no token (`/in/{id}`,
/// what its `url` says), a URL-signing scheme signs that URL, and its form body is kept as JSON.
#[tokio::test]
async fn a_source_api_twilio_source_keeps_its_tokenless_url_and_takes_signed_forms() {
    use base64::Engine;
    use hmac::{Hmac, Mac};
    const TOKEN: &str = "twilio-auth-token-0123456789";
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        let (id, url) = source(
            &app,
            "sms",
            &a,
            json!({"scheme": "twilio", "secret": TOKEN}),
        )
        .await;
        assert!(url.ends_with(&format!("/in/{id}")), "{url}");
        let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(TOKEN.as_bytes()).unwrap();
        m.update(format!("{url}BodyHiFrom+15550001").as_bytes());
        let sig = base64::engine::general_purpose::STANDARD.encode(m.finalize().into_bytes());
        let send = |sig: String| {
            app.client
                .post(format!("{}/in/{id}", app.base))
                .header("X-Twilio-Signature", sig)
                .form(&[("From", "+15550001"), ("Body", "Hi")])
                .send()
        };
        let resp = send(sig).await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "on {}", app.backend);
        assert_eq!(send("AAAA".into()).await.unwrap().status().as_u16(), 401);
        let got = messages(&app, &a).await;
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0]["payload"],
            json!({"From": "+15550001", "Body": "Hi"})
        );
        s.stop().await;
    }
}
