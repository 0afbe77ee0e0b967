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

/// A call to `/ingest/api/v1{path}` as `key` (also used by other modules' tests).
pub(crate) async fn ingest(
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

/// Where a test posts to an Ingest source: the path of its `ingestUrl` (token and all) on the
/// test server (whose public URL is its bind setting, port 0).
fn in_url(t: &TestApp, src: &Value) -> String {
    let shown = src["ingestUrl"].as_str().unwrap();
    let path = &shown[shown.find("/in/").expect("an ingest URL")..];
    format!("{}{path}", t.base)
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
        let url = in_url(&t, &src);
        assert!(url.contains(&format!("/in/{id}/")), "{src}");
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
                json!({"name": "vapi", "type": "vapi", "config": {"secret": "x"}}),
                "type",
            ),
            (
                json!({"name": "ts", "type": "tailscale", "config": {"secret": SLACK_SECRET, "verifyToken": "x"}}),
                "config",
            ),
            (
                json!({"name": "meta", "type": "meta", "config": {"secret": SLACK_SECRET}}),
                "config",
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
            Some(json!({"name": "vf", "type": "veriff", "config": {"secret": SLACK_SECRET}})),
        )
        .await;
        assert!(status == 422 && err.to_string().contains("veriff"), "{err}");

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
        let (shopify_url, slack_url) = (in_url(&t, &shopify), in_url(&t, &slack));

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

/// Creates an Ingest source of `kind` with `config`, answering its body.
async fn make_source(t: &TestApp, kind: &str, config: Value) -> Value {
    let (status, src) = ingest(
        t,
        &t.key,
        Method::POST,
        "/source",
        Some(json!({"name": kind, "uid": kind, "type": kind, "config": config})),
    )
    .await;
    assert_eq!(status, 201, "{kind}: {src} on {}", t.backend);
    src
}

/// The payloads and event types of what source `src` forwarded, oldest first.
async fn taken(t: &TestApp, src: &Value) -> Vec<(String, Value)> {
    let id = src["id"].as_str().unwrap();
    let a = t.store.get_source(t.tenant, id).await.unwrap().row.app_id;
    let msgs = t.get(&format!("/app/{a}/msg")).await.body;
    let mut out: Vec<(String, Value)> = msgs["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["eventType"].as_str().unwrap().to_owned(),
                m["payload"].clone(),
            )
        })
        .collect();
    out.reverse();
    out
}

fn hmac_sha1(secret: &str, msg: &[u8]) -> Vec<u8> {
    use hmac::{Hmac, Mac};
    let mut m = <Hmac<sha1::Sha1> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(msg);
    m.finalize().into_bytes().to_vec()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

const VENDOR_SECRET: &str = "vendor-secret-0123456789abcdef";

/// A request signed by each vendor's published algorithm (computed here, apart from hookd):
/// taken when signed, refused 401 when forged, unsigned or (where a time is signed) stale.
#[tokio::test]
async fn vendor_sources_take_signed_requests_and_refuse_forged_missing_and_stale_ones() {
    type Signer = Box<dyn Fn(&str, i64, &str) -> Vec<(&'static str, String)>>;
    let cases: Vec<(&str, Value, &str, Signer, bool, &str)> = vec![
        (
            "meta",
            json!({"secret": VENDOR_SECRET, "verifyToken": "vt-1"}),
            r#"{"object":"whatsapp_business_account","entry":[{"id":"1"}]}"#,
            Box::new(|secret, _, body| {
                vec![(
                    "X-Hub-Signature-256",
                    format!("sha256={}", hex(&hmac256(secret, body.as_bytes()))),
                )]
            }),
            false,
            "meta",
        ),
        (
            "zoom",
            json!({"secret": VENDOR_SECRET}),
            r#"{"event":"meeting.started","event_ts":1,"payload":{}}"#,
            Box::new(|secret, ts, body| {
                vec![
                    ("x-zm-request-timestamp", ts.to_string()),
                    (
                        "x-zm-signature",
                        format!(
                            "v0={}",
                            hex(&hmac256(secret, format!("v0:{ts}:{body}").as_bytes()))
                        ),
                    ),
                ]
            }),
            true,
            "meeting.started",
        ),
        (
            "tailscale",
            json!({"secret": VENDOR_SECRET, "timestampGraceSeconds": 120}),
            r#"[{"type":"nodeCreated","tailnet":"example.com"}]"#,
            Box::new(|secret, ts, body| {
                vec![(
                    "Tailscale-Webhook-Signature",
                    format!(
                        "t={ts},v1={}",
                        hex(&hmac256(secret, format!("{ts}.{body}").as_bytes()))
                    ),
                )]
            }),
            true,
            "tailscale",
        ),
        (
            "segment",
            json!({"secret": VENDOR_SECRET}),
            r#"{"type":"track","messageId":"m-1","event":"Signed Up"}"#,
            Box::new(|secret, _, body| {
                vec![("X-Signature", hex(&hmac_sha1(secret, body.as_bytes())))]
            }),
            false,
            "track",
        ),
        (
            "docusign",
            json!({"secret": VENDOR_SECRET}),
            r#"{"event":"envelope-completed","data":{"envelopeId":"e-1"}}"#,
            Box::new(|secret, _, body| {
                vec![(
                    "X-DocuSign-Signature-1",
                    b64(&hmac256(secret, body.as_bytes())),
                )]
            }),
            false,
            "envelope-completed",
        ),
        (
            "airwallex",
            json!({"secret": VENDOR_SECRET}),
            r#"{"id":"evt_a1","name":"payment_intent.succeeded","data":{}}"#,
            Box::new(|secret, ts, body| {
                let ms = format!("{}000", ts);
                vec![
                    (
                        "x-signature",
                        hex(&hmac256(secret, format!("{ms}{body}").as_bytes())),
                    ),
                    ("x-timestamp", ms),
                ]
            }),
            true,
            "payment_intent.succeeded",
        ),
    ];
    for t in apps().await {
        let now = domain::Timestamp::now().as_secs();
        for (kind, config, body, sign, timed, event_type) in &cases {
            let src = make_source(&t, kind, config.clone()).await;
            let url = in_url(&t, &src);
            let (status, got) = post_in(&t, &url, &sign(VENDOR_SECRET, now, body), body).await;
            assert_eq!(status, 200, "{kind}: {got} on {}", t.backend);
            let forged = sign("another-secret-0123456789abcdef", now, body);
            let (status, err) = post_in(&t, &url, &forged, body).await;
            assert_eq!(
                (status, &err["code"]),
                (401, &json!("invalid_signature")),
                "{kind}: {err}"
            );
            let (status, err) = post_in(&t, &url, &[], body).await;
            assert!(
                status == 401
                    && err["detail"]
                        .as_str()
                        .unwrap()
                        .starts_with("missing header"),
                "{kind}: {err}"
            );
            if *timed {
                let stale = sign(VENDOR_SECRET, now - 3600, body);
                let (status, err) = post_in(&t, &url, &stale, body).await;
                assert!(
                    status == 401 && err["detail"].as_str().unwrap().contains("tolerance"),
                    "{kind}: {err}"
                );
            }
            let got = taken(&t, &src).await;
            assert_eq!(got.len(), 1, "{kind}: only the signed request was taken");
            assert_eq!(got[0].0, *event_type, "{kind}");
            let sent = serde_json::from_str::<Value>(body).unwrap();
            // Tailscale's list of events is kept as an object's `events`.
            let kept = if sent.is_array() {
                json!({"events": sent})
            } else {
                sent
            };
            assert_eq!(got[0].1, kept, "{kind}");
        }

        // Tailscale's grace (120 s above) is the source's tolerance.
        let id = t
            .store
            .source_named(t.tenant, "tailscale")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(id.settings.tolerance_secs, Some(120));
    }
}

/// Zoom's URL validation and Meta's subscription handshake, which a vendor sends before any
/// event: answered with the source's secrets, and nothing stored.
#[tokio::test]
async fn zoom_and_meta_handshakes_are_answered_and_store_nothing() {
    for t in apps().await {
        let zoom = make_source(&t, "zoom", json!({"secret": VENDOR_SECRET})).await;
        let now = domain::Timestamp::now().as_secs();
        let body = r#"{"event":"endpoint.url_validation","payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1}"#;
        let sig = format!(
            "v0={}",
            hex(&hmac256(
                VENDOR_SECRET,
                format!("v0:{now}:{body}").as_bytes()
            ))
        );
        let headers = [
            ("x-zm-request-timestamp", now.to_string()),
            ("x-zm-signature", sig),
        ];
        let (status, answer) = post_in(&t, &in_url(&t, &zoom), &headers, body).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(
            answer,
            json!({
                "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
                "encryptedToken": hex(&hmac256(VENDOR_SECRET, b"qgg8vlvZRS6UYooatFL8Aw")),
            })
        );
        // An unsigned validation is refused like any request.
        assert_eq!(post_in(&t, &in_url(&t, &zoom), &[], body).await.0, 401);
        assert!(taken(&t, &zoom).await.is_empty(), "a handshake is no event");

        let meta = make_source(
            &t,
            "meta",
            json!({"secret": VENDOR_SECRET, "verifyToken": "my-verify-token"}),
        )
        .await;
        let get = |token: &str| {
            let url = format!(
                "{}?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444",
                in_url(&t, &meta)
            );
            let client = t.client.clone();
            async move {
                let resp = client.get(url).send().await.unwrap();
                (resp.status().as_u16(), resp.text().await.unwrap())
            }
        };
        assert_eq!(get("my-verify-token").await, (200, "1158201444".to_owned()));
        let (status, err) = get("a-guess").await;
        assert_eq!(status, 403, "{err}");
        assert!(err.contains("\"code\":\"forbidden\""), "{err}");
        assert!(taken(&t, &meta).await.is_empty());
    }
}

/// Twilio signs the URL it was given (the source's `ingestUrl`, so hookd's public URL) and the
/// form's parameters sorted by name; the form reaches the endpoints as a JSON object. A JSON
/// body is covered by the URL's `bodySHA256`.
#[tokio::test]
async fn twilio_sources_verify_the_signed_url_and_forward_the_form_as_json() {
    for t in apps().await {
        let src = make_source(&t, "twilio", json!({"secret": VENDOR_SECRET})).await;
        let shown = src["ingestUrl"].as_str().unwrap().to_owned();
        let url = in_url(&t, &src);
        let params = [
            ("To", "+18005551212"),
            ("From", "+14158675310"),
            ("Body", "Hello & welcome"),
            ("MessageSid", "SM123"),
        ];
        let sign = |signed_url: &str| {
            let mut sorted = params.to_vec();
            sorted.sort();
            let mut s = signed_url.to_owned();
            for (k, v) in sorted {
                s.push_str(k);
                s.push_str(v);
            }
            b64(&hmac_sha1(VENDOR_SECRET, s.as_bytes()))
        };
        let post_form = |sig: String| {
            let req = t
                .client
                .post(&url)
                .header("X-Twilio-Signature", sig)
                .header("I-Twilio-Idempotency-Token", "idem-1")
                .form(&params);
            async move {
                let resp = req.send().await.unwrap();
                let status = resp.status().as_u16();
                (status, resp.json::<Value>().await.unwrap_or_default())
            }
        };
        let (status, got) = post_form(sign(&shown)).await;
        assert_eq!(status, 200, "{got} on {}", t.backend);
        // Signed over another URL (the address the test server is bound to): refused.
        let (status, err) = post_form(sign(&url)).await;
        assert_eq!(
            (status, &err["code"]),
            (401, &json!("invalid_signature")),
            "{err}"
        );
        assert_eq!(post_form(String::new()).await.0, 401);
        let got = taken(&t, &src).await;
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            got[0].1,
            json!({"To": "+18005551212", "From": "+14158675310", "Body": "Hello & welcome", "MessageSid": "SM123"})
        );

        // A JSON body: Twilio adds its SHA-256 to the URL and signs the URL alone.
        let body = r#"{"EventType":"onMessageAdded","Sid":"IM1"}"#;
        use sha2::Digest;
        let sha = hex(&sha2::Sha256::digest(body.as_bytes()));
        let signed_url = format!("{shown}?bodySHA256={sha}");
        let sig = b64(&hmac_sha1(VENDOR_SECRET, signed_url.as_bytes()));
        let json_url = format!("{url}?bodySHA256={sha}");
        let (status, got) =
            post_in(&t, &json_url, &[("X-Twilio-Signature", sig.clone())], body).await;
        assert_eq!(status, 200, "{got}");
        let other = r#"{"EventType":"onMessageAdded","Sid":"IM2"}"#;
        assert_eq!(
            post_in(&t, &json_url, &[("X-Twilio-Signature", sig)], other)
                .await
                .0,
            401,
            "a body that is not the one whose SHA-256 was signed"
        );
    }
}

/// HubSpot's signature v3 covers the method, the URL it was given (the source's `ingestUrl`),
/// the body and the time; its list of events reaches the endpoints as `{"events": […]}`.
#[tokio::test]
async fn hubspot_sources_verify_method_url_body_and_time() {
    for t in apps().await {
        let src = make_source(&t, "hubspot", json!({"secret": VENDOR_SECRET})).await;
        let shown = src["ingestUrl"].as_str().unwrap().to_owned();
        let url = in_url(&t, &src);
        let body = r#"[{"eventId":7,"subscriptionType":"contact.creation","objectId":123}]"#;
        let sign = |signed_url: &str, secs: i64| {
            let ts = format!("{secs}000");
            let sig = b64(&hmac256(
                VENDOR_SECRET,
                format!("POST{signed_url}{body}{ts}").as_bytes(),
            ));
            vec![
                ("X-HubSpot-Request-Timestamp", ts),
                ("X-HubSpot-Signature-v3", sig),
            ]
        };
        let now = domain::Timestamp::now().as_secs();
        let (status, got) = post_in(&t, &url, &sign(&shown, now), body).await;
        assert_eq!(status, 200, "{got} on {}", t.backend);
        for (why, headers) in [
            ("another URL", sign(&url, now)),
            ("stale", sign(&shown, now - 3600)),
            ("unsigned", vec![]),
        ] {
            let (status, err) = post_in(&t, &url, &headers, body).await;
            assert_eq!(
                (status, &err["code"]),
                (401, &json!("invalid_signature")),
                "{why}: {err}"
            );
        }
        let got = taken(&t, &src).await;
        assert_eq!(
            got,
            vec![(
                "hubspot".to_owned(),
                json!({"events": [{"eventId": 7, "subscriptionType": "contact.creation", "objectId": 123}]})
            )]
        );
    }
}

/// An Ingest source's URL carries a token; rotating it answers the new URL, and the old one
/// is not found from then on. A database read shows no token.
#[tokio::test]
async fn an_ingest_url_carries_a_token_that_rotation_replaces_at_once() {
    for t in apps().await {
        let src = make_source(&t, "generic-webhook", Value::Null).await;
        let id = src["id"].as_str().unwrap().to_owned();
        let old = in_url(&t, &src);
        let token = old.rsplit('/').next().unwrap().to_owned();
        assert!(token.len() >= 32, "{old}");
        assert_eq!(post_in(&t, &old, &[], r#"{"n": 1}"#).await.0, 200);
        // The source's id alone, or with another token, names no URL.
        for wrong in [
            format!("{}/in/{id}", t.base),
            format!("{}/in/{id}/{}", t.base, "A".repeat(32)),
        ] {
            let (status, err) = post_in(&t, &wrong, &[], r#"{"n": 2}"#).await;
            assert_eq!(
                (status, &err["code"]),
                (404, &json!("not_found")),
                "{wrong}: {err}"
            );
        }
        let row = t.store.get_source(t.tenant, &id).await.unwrap().row;
        let stored = row.url_token.expect("a stored token");
        assert!(!stored.contains(&token), "sealed at rest: {stored}");

        let (status, rotated) = ingest(
            &t,
            &t.key,
            Method::POST,
            &format!("/source/{id}/token/rotate"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{rotated}");
        let new = in_url(&t, &rotated);
        assert_ne!(new, old);
        assert_eq!(
            post_in(&t, &old, &[], r#"{"n": 3}"#).await.0,
            404,
            "the old URL"
        );
        assert_eq!(post_in(&t, &new, &[], r#"{"n": 4}"#).await.0, 200);
        let (_, shown) = ingest(&t, &t.key, Method::GET, &format!("/source/{id}"), None).await;
        assert_eq!(shown["ingestUrl"], rotated["ingestUrl"]);
        let payloads: Vec<Value> = taken(&t, &src).await.into_iter().map(|(_, p)| p).collect();
        assert_eq!(payloads, vec![json!({"n": 1}), json!({"n": 4})]);
        let (status, _) = ingest(
            &t,
            &t.key,
            Method::POST,
            "/source/no-such-source/token/rotate",
            None,
        )
        .await;
        assert_eq!(status, 404);
    }
}

/// PATCH changes what it names and keeps the rest: the type, uid, URL and (without `config`)
/// the secret.
#[tokio::test]
async fn patching_an_ingest_source_changes_what_it_names_and_keeps_the_rest() {
    for t in apps().await {
        let src = make_source(&t, "slack", json!({"secret": SLACK_SECRET})).await;
        let id = src["id"].as_str().unwrap().to_owned();
        let url = in_url(&t, &src);
        let signed = |secret: &str, n: u32| {
            let now = domain::Timestamp::now().as_secs();
            let body =
                format!(r#"{{"type":"event_callback","event_id":"Ev{n}","event":{{"type":"x"}}}}"#);
            let sig = format!(
                "v0={}",
                hex(&hmac256(secret, format!("v0:{now}:{body}").as_bytes()))
            );
            (
                vec![
                    ("X-Slack-Request-Timestamp", now.to_string()),
                    ("X-Slack-Signature", sig),
                ],
                body,
            )
        };
        let path = format!("/source/{id}");
        let patch = |body: Value| ingest(&t, &t.key, Method::PATCH, &path, Some(body));
        let (status, changed) =
            patch(json!({"name": "Slack events", "metadata": {"team": "b"}})).await;
        assert_eq!(status, 200, "{changed} on {}", t.backend);
        assert_eq!(
            (
                &changed["name"],
                &changed["metadata"],
                &changed["type"],
                &changed["uid"],
                &changed["ingestUrl"]
            ),
            (
                &json!("Slack events"),
                &json!({"team": "b"}),
                &json!("slack"),
                &json!("slack"),
                &src["ingestUrl"]
            )
        );
        let (h, b) = signed(SLACK_SECRET, 1);
        assert_eq!(post_in(&t, &url, &h, &b).await.0, 200, "the secret is kept");

        let new_secret = "slack-signing-secret-rotated-01";
        let (status, _) = patch(json!({"config": {"secret": new_secret}})).await;
        assert_eq!(status, 200);
        let (h, b) = signed(SLACK_SECRET, 2);
        assert_eq!(post_in(&t, &url, &h, &b).await.0, 401, "the old secret");
        let (h, b) = signed(new_secret, 3);
        assert_eq!(post_in(&t, &url, &h, &b).await.0, 200, "the new secret");
        let (_, got) = ingest(&t, &t.key, Method::GET, &format!("/source/{id}"), None).await;
        assert_eq!(got["name"], "Slack events", "a config patch keeps the name");

        for (body, loc) in [
            (json!({"uid": "another"}), "uid"),
            (json!({"name": "x"}), "name"),
            (
                json!({"config": {"secret": "short"}}),
                r#""config","secret""#,
            ),
            (json!({"type": "stripe"}), "body"),
        ] {
            let (status, err) = patch(body.clone()).await;
            assert_eq!(status, 422, "{body}: {err}");
            let detail = err["detail"].to_string();
            assert!(detail.contains(loc), "{body}: {err}");
        }
        assert_eq!(
            ingest(
                &t,
                &t.key,
                Method::PATCH,
                "/source/none-such",
                Some(json!({"name": "ab"}))
            )
            .await
            .0,
            404
        );
    }
}
