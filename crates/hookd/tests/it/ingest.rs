//! Svix's Ingest API on hookd's sources: sources made through it, their endpoints (their
//! application's), and the Shopify and Slack schemes it adds, over real HTTP on every backend.

use std::time::Duration;

use base64::Engine;
use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::{Value, json};
use testkit::{TestApp, new_tenant};

use crate::delivery::{SECRET, apps, eventually, sink};

const SHOPIFY_SECRET: &str = "shpss_5c8d2e0123456789abcdef";
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// A call to `/ingest/api/v1{path}` as `key`.
async fn ingest(
    t: &TestApp,
    key: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = t
        .client
        .request(method, format!("{}/ingest/api/v1{path}", t.base))
        .bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    assert_ne!(status, 500, "{path}");
    (status, resp.json().await.unwrap_or_default())
}

async fn post_in(t: &TestApp, url: &str, headers: &[(&str, String)], body: &str) -> (u16, Value) {
    let mut req = t
        .client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or_default(),
    )
}

fn hmac256(secret: &str, msg: &[u8]) -> Vec<u8> {
    use hmac::{Hmac, Mac};
    let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(msg);
    m.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn an_ingest_source_forwards_to_its_own_endpoints_and_keeps_to_its_tenant() {
    for t in apps().await {
        let s = sink(Behaviour::default());
        let key = t.key.clone();
        let (status, src) = ingest(
            &t,
            &key,
            Method::POST,
            "/source",
            Some(json!({"name": "Orders in", "uid": "orders-in", "type": "generic-webhook", "metadata": {"team": "a"}})),
        )
        .await;
        assert_eq!(status, 201, "{src} on {}", t.backend);
        let id = src["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("src_"), "{src}");
        assert_eq!(
            (&src["uid"], &src["name"], &src["type"], &src["metadata"]),
            (
                &json!("orders-in"),
                &json!("Orders in"),
                &json!("generic-webhook"),
                &json!({"team": "a"})
            )
        );
        let shown = src["ingestUrl"].as_str().unwrap();
        assert!(shown.ends_with(&format!("/in/{id}")), "{shown}");
        // (The test server's public URL is its bind setting, port 0.)
        let url = format!("{}/in/{id}", t.base);
        // Its endpoints: created, listed, read, their secret, by the source's id or uid.
        let (status, ep) = ingest(
            &t,
            &key,
            Method::POST,
            "/source/orders-in/endpoint",
            Some(json!({"url": s.url("/ingested"), "secret": SECRET})),
        )
        .await;
        assert_eq!(status, 201, "{ep}");
        let ep_id = ep["id"].as_str().unwrap().to_owned();
        let (_, list) = ingest(
            &t,
            &key,
            Method::GET,
            &format!("/source/{id}/endpoint"),
            None,
        )
        .await;
        assert_eq!(list["data"][0]["id"], ep_id.as_str(), "{list}");
        let (status, secret) = ingest(
            &t,
            &key,
            Method::GET,
            &format!("/source/{id}/endpoint/{ep_id}/secret"),
            None,
        )
        .await;
        assert_eq!((status, secret["key"].as_str()), (200, Some(SECRET)));
        // What arrives at its URL reaches its endpoint.
        let (status, got) = post_in(&t, &url, &[], r#"{"order": 7}"#).await;
        assert_eq!(status, 200, "{got}");
        eventually(
            Duration::from_secs(10),
            "the ingested event at the endpoint",
            || async { s.state.received().iter().any(|r| r.path == "/ingested") },
        )
        .await;
        let (_, listed) = ingest(&t, &key, Method::GET, "/source", None).await;
        assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
        let (status, by_uid) = ingest(&t, &key, Method::GET, "/source/orders-in", None).await;
        assert_eq!((status, &by_uid["id"]), (200, &json!(id)));

        // Types without a scheme, and configs hookd would not use, are refused by name.
        for (body, loc) in [
            (
                json!({"name": "cron", "type": "cron", "config": {"schedule": "* * * * *", "payload": "{}"}}),
                "type",
            ),
            (
                json!({"name": "docs", "type": "docusign", "config": {"secret": "x"}}),
                "type",
            ),
            (
                json!({"name": "gh", "type": "github", "config": {}}),
                "config",
            ),
            (
                json!({"name": "sv", "type": "svix", "config": {"secret": SECRET, "extra": 1}}),
                "config",
            ),
        ] {
            let (status, err) = ingest(&t, &key, Method::POST, "/source", Some(body.clone())).await;
            assert_eq!(status, 422, "{body}: {err}");
            assert_eq!(err["detail"][0]["loc"][1], loc, "{body}: {err}");
        }
        let (status, err) = ingest(
            &t,
            &key,
            Method::POST,
            "/source",
            Some(json!({"name": "dd", "type": "docusign", "config": {}})),
        )
        .await;
        assert!(
            status == 422 && err.to_string().contains("docusign"),
            "{err}"
        );
        let (status, err) = ingest(
            &t,
            &key,
            Method::POST,
            &format!("/source/{id}/token/rotate"),
            None,
        )
        .await;
        assert_eq!(status, 422, "{err}");

        // Another tenant sees none of it.
        let (_, intruder) = new_tenant(&t.store, "intruder").await;
        for path in [
            format!("/source/{id}"),
            format!("/source/{id}/endpoint"),
            format!("/source/{id}/endpoint/{ep_id}"),
        ] {
            assert_eq!(
                ingest(&t, &intruder, Method::GET, &path, None).await.0,
                404,
                "{path}"
            );
        }
        let (_, none) = ingest(&t, &intruder, Method::GET, "/source", None).await;
        assert_eq!(none["data"], json!([]));

        // Changing its type changes how it verifies; deleting it ends its URL.
        let (status, changed) = ingest(
            &t,
            &key,
            Method::PUT,
            &format!("/source/{id}"),
            Some(
                json!({"name": "Orders", "type": "shopify", "config": {"secret": SHOPIFY_SECRET}}),
            ),
        )
        .await;
        assert_eq!(
            (status, &changed["type"], &changed["uid"]),
            (200, &json!("shopify"), &json!("orders-in")),
            "{changed}"
        );
        assert_eq!(post_in(&t, &url, &[], r#"{"order": 8}"#).await.0, 401);
        assert_eq!(
            ingest(&t, &key, Method::DELETE, &format!("/source/{id}"), None)
                .await
                .0,
            204
        );
        assert_eq!(post_in(&t, &url, &[], r#"{"order": 9}"#).await.0, 404);
        assert_eq!(
            ingest(
                &t,
                &key,
                Method::GET,
                &format!("/source/{id}/endpoint"),
                None
            )
            .await
            .0,
            404
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn shopify_and_slack_sources_take_signed_requests_and_refuse_bad_or_stale_ones() {
    for t in apps().await {
        let key = t.key.clone();
        let make = |kind: &'static str, secret: &'static str| json!({"name": kind, "uid": kind, "type": kind, "config": {"secret": secret}});
        let (_, shopify) = ingest(
            &t,
            &key,
            Method::POST,
            "/source",
            Some(make("shopify", SHOPIFY_SECRET)),
        )
        .await;
        let (_, slack) = ingest(
            &t,
            &key,
            Method::POST,
            "/source",
            Some(make("slack", SLACK_SECRET)),
        )
        .await;
        let in_url = |src: &Value| format!("{}/in/{}", t.base, src["id"].as_str().unwrap());
        let (shopify_url, slack_url) = (in_url(&shopify), in_url(&slack));

        let body = r#"{"id":820982911946154508,"email":"jon@doe.ca"}"#;
        let sig = base64::engine::general_purpose::STANDARD
            .encode(hmac256(SHOPIFY_SECRET, body.as_bytes()));
        let good = vec![
            ("X-Shopify-Hmac-Sha256", sig.clone()),
            ("X-Shopify-Topic", "orders/create".to_owned()),
            ("X-Shopify-Webhook-Id", "wh-1".to_owned()),
        ];
        let (status, got) = post_in(&t, &shopify_url, &good, body).await;
        assert_eq!(status, 200, "{got} on {}", t.backend);
        let bad = vec![(
            "X-Shopify-Hmac-Sha256",
            base64::engine::general_purpose::STANDARD
                .encode(hmac256("shpss_wrong_secret_00000", body.as_bytes())),
        )];
        let (status, err) = post_in(&t, &shopify_url, &bad, body).await;
        assert_eq!(
            (status, &err["code"]),
            (401, &json!("invalid_signature")),
            "{err}"
        );
        assert_eq!(post_in(&t, &shopify_url, &[], body).await.0, 401);

        let now = domain::Timestamp::now().as_secs();
        let slack_body =
            r#"{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}"#;
        let signed = |ts: i64| {
            vec![
                ("X-Slack-Request-Timestamp", ts.to_string()),
                (
                    "X-Slack-Signature",
                    format!(
                        "v0={}",
                        hex(&hmac256(
                            SLACK_SECRET,
                            format!("v0:{ts}:{slack_body}").as_bytes()
                        ))
                    ),
                ),
            ]
        };
        let (status, got) = post_in(&t, &slack_url, &signed(now), slack_body).await;
        assert_eq!(status, 200, "{got}");
        let (status, err) = post_in(&t, &slack_url, &signed(now - 3600), slack_body).await;
        assert_eq!(status, 401, "a stale timestamp: {err}");
        assert!(
            err["detail"].as_str().unwrap().contains("tolerance"),
            "{err}"
        );
        let mut forged = signed(now);
        forged[1].1 = format!("v0={}", "0".repeat(64));
        assert_eq!(post_in(&t, &slack_url, &forged, slack_body).await.0, 401);

        // What was taken is among the source application's messages, typed by the sender.
        for (src, event_type) in [(&shopify, "orders.create"), (&slack, "app_mention")] {
            let id = src["id"].as_str().unwrap();
            let a = t.store.get_source(t.tenant, id).await.unwrap().row.app_id;
            let msgs = t.get(&format!("/app/{a}/msg")).await.body;
            let types: Vec<&str> = msgs["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["eventType"].as_str().unwrap())
                .collect();
            assert_eq!(types, vec![event_type], "{msgs}");
        }
    }
}
