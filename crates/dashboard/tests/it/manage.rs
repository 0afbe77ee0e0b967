//! Applications and endpoints made and changed in the browser; secrets; test events; the
//! fragments the pages poll.

use serde_json::Value;

use crate::helpers::{Browser, TestApp, api, app_with_endpoint, fail_due_deliveries, spawn_app};

async fn api_get(app: &TestApp, key: &str, path: &str) -> Value {
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1{path}", app.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("api request");
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    resp.json().await.expect("json")
}

/// The id in a `Location` like `/app/{app}/endpoint/{ep}?done=created`.
fn segment(location: &str, after: &str) -> String {
    let start = location.find(after).expect(after) + after.len();
    location[start..]
        .split(['/', '?'])
        .next()
        .expect("id")
        .to_owned()
}

#[tokio::test]
async fn create_an_application_then_an_endpoint_with_every_setting() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    // Endpoints filter only on event types the tenant has defined.
    for name in ["user.created", "invoice.paid"] {
        let body = serde_json::json!({"name": name, "description": name});
        api(&app, &key, "/event-type", body).await;
    }
    let home = b.get("/").await;
    home.assert(200, "Create application");
    let csrf = home.csrf();

    b.post("/app", &[("csrf", "forged"), ("name", "Shop")])
        .await
        .assert(403, "did not come from this dashboard");
    b.post("/app", &[("csrf", &csrf), ("name", " ")])
        .await
        .assert(422, "Give the application a name");
    let done = b.post("/app", &[("csrf", &csrf), ("name", "Shop")]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let app_id = segment(done.location(), "created=");
    let home = b.get(done.location()).await;
    home.assert(200, "Application created");
    assert!(home.body.contains("Shop"));
    assert!(home.body.contains(&format!("/app/{app_id}/endpoint/new")));
    assert_eq!(
        api_get(&app, &key, "/app").await["data"][0]["id"],
        app_id.as_str()
    );

    // Every problem is listed at once, with the values as typed; nothing is created.
    let new = format!("/app/{app_id}/endpoint/new");
    let form = b.get(&new).await;
    form.assert(200, "New endpoint");
    // Endpoints filter only on defined event types; the form's picker offers them.
    for name in ["user.created", "invoice.paid"] {
        let offered = format!(r#"<input type="checkbox" name="event_types" value="{name}">"#);
        assert!(form.body.contains(&offered), "{name}: {}", form.body);
    }
    let bad = b
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://10.1.2.3/hook"),
                ("event_types", "user.created, bad type"),
                ("channels", ""),
                ("timeout", "5 parsecs"),
                ("max_concurrency", "0"),
                ("throttle_rate", "fast"),
                ("retry_policy", r#"{"delays": "soon"}"#),
            ],
        )
        .await;
    bad.assert(422, "Please fix these 6 problems");
    for text in [
        "URL: ",
        "“bad type” is not valid",
        "Timeout: ",
        "Max concurrency: enter a whole number from 1 to 1000",
        "Throttle: enter a whole number from 1 to 65535",
        "Retry policy: ",
        r#"value="5 parsecs""#,
    ] {
        assert!(bad.body.contains(text), "{text:?} not in:\n{}", bad.body);
    }
    // Each field's problem is under it, the field marked invalid and pointing at it.
    for field in [
        "url",
        "event_types",
        "timeout",
        "max_concurrency",
        "throttle_rate",
        "retry_policy",
    ] {
        assert!(
            bad.body.contains(&format!(r#"id="{field}-error""#)),
            "{field}: no problem under it:\n{}",
            bad.body
        );
    }
    assert_eq!(
        bad.body.matches(r#"aria-invalid="true""#).count(),
        5,
        "{}",
        bad.body
    );
    // The SSRF guard alone refuses a private address, as the API does.
    let ssrf = b
        .post(&new, &[("csrf", &csrf), ("url", "http://10.1.2.3/hook")])
        .await;
    ssrf.assert(422, "URL: ");
    assert!(
        api_get(&app, &key, &format!("/app/{app_id}/endpoint")).await["data"]
            .as_array()
            .expect("list")
            .is_empty()
    );

    // Another tenant cannot add endpoints to it.
    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/").await.csrf();
    other
        .get(&new)
        .await
        .assert(404, "belongs to another account");
    other
        .post(
            &new,
            &[("csrf", &theirs), ("url", "http://127.0.0.1:9/hook")],
        )
        .await
        .assert(404, "belongs to another account");

    let done = b
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/hook"),
                ("description", "orders"),
                ("event_types", "user.created, invoice.paid"),
                ("channels", "eu"),
                ("timeout", "5s"),
                ("max_concurrency", "3"),
                ("throttle_rate", "20"),
                ("retry_policy", r#"{"delays": ["1s", "5s"]}"#),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let ep_id = segment(done.location(), "/endpoint/");
    b.get(done.location()).await.assert(200, "Endpoint created");
    let ep = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{ep_id}")).await;
    assert_eq!(ep["url"], "http://127.0.0.1:9/hook");
    assert_eq!(ep["description"], "orders");
    assert_eq!(
        ep["filterTypes"],
        serde_json::json!(["user.created", "invoice.paid"])
    );
    assert_eq!(ep["channels"], serde_json::json!(["eu"]));
    assert_eq!(ep["timeout"], "5s");
    assert_eq!(ep["maxConcurrency"], 3);
    assert_eq!(ep["throttleRate"], 20);
    assert_eq!(ep["retryPolicy"]["delays"], serde_json::json!(["1s", "5s"]));

    // Edit: the form shows the stored values; errors keep it unchanged; a save replaces them.
    let edit = format!("/app/{app_id}/endpoint/{ep_id}/edit");
    let form = b.get(&edit).await;
    for name in ["user.created", "invoice.paid"] {
        form.assert(
            200,
            &format!(r#"name="event_types" value="{name}" checked>"#),
        );
    }
    assert!(form.body.contains(r#"value="5s""#));
    assert!(form.body.contains("&#34;delays&#34;") || form.body.contains("&quot;delays&quot;"));
    other
        .get(&edit)
        .await
        .assert(404, "belongs to another account");
    other
        .post(&edit, &[("csrf", &theirs), ("url", "http://127.0.0.1:9/x")])
        .await
        .assert(404, "belongs to another account");
    b.post(
        &edit,
        &[("csrf", "forged"), ("url", "http://127.0.0.1:9/x")],
    )
    .await
    .assert(403, "did not come from this dashboard");
    b.post(
        &edit,
        &[
            ("csrf", &csrf),
            ("url", "http://127.0.0.1:9/x"),
            ("retry_policy", "[1, 2]"),
        ],
    )
    .await
    .assert(422, "Retry policy: ");
    let done = b
        .post(
            &edit,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/v2"),
                ("event_types", ""),
                ("timeout", ""),
                ("max_concurrency", "7"),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    b.get(done.location()).await.assert(200, "Endpoint saved");
    let ep = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{ep_id}")).await;
    assert_eq!(ep["url"], "http://127.0.0.1:9/v2");
    assert_eq!(ep["filterTypes"], Value::Null);
    assert_eq!(ep["channels"], Value::Null);
    assert_eq!(ep["timeout"], "15s");
    assert_eq!(ep["maxConcurrency"], 7);
    assert_eq!(ep["throttleRate"], Value::Null);
}

#[tokio::test]
async fn reveal_and_rotate_the_secret() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let page = b.get(&ep_page).await;
    page.assert(200, "Reveal secret");
    let api_secret = format!("/app/{app_id}/endpoint/{ep_id}/secret");
    let secret = api_get(&app, &key, &api_secret).await["key"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert!(!page.body.contains(&secret), "hidden until asked for");

    // htmx asks for the fragment; a plain link gets a page.
    let reveal = format!("{ep_page}/secret");
    let shown = b.get_with(&reveal, &[("HX-Request", "true")]).await;
    shown.assert(200, &secret);
    assert!(!shown.body.contains("<html"), "{}", shown.body);
    b.get(&reveal).await.assert(200, &secret);

    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/").await.csrf();
    let res = other.get(&reveal).await;
    res.assert(404, "belongs to another account");
    assert!(!res.body.contains(&secret));
    let rotate = format!("{ep_page}/rotate-secret");
    other
        .post(&rotate, &[("csrf", &theirs)])
        .await
        .assert(404, "belongs to another account");
    b.post(&rotate, &[("csrf", "forged")])
        .await
        .assert(403, "did not come from this dashboard");
    assert_eq!(
        api_get(&app, &key, &api_secret).await["key"],
        secret.as_str()
    );

    let done = b.post(&rotate, &[("csrf", &page.csrf())]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    b.get(done.location()).await.assert(200, "Secret rotated");
    let new_secret = api_get(&app, &key, &api_secret).await["key"]
        .as_str()
        .expect("secret")
        .to_owned();
    assert_ne!(new_secret, secret);
    assert!(new_secret.starts_with("whsec_"));
    b.get_with(&reveal, &[("HX-Request", "true")])
        .await
        .assert(200, &new_secret);
}

#[tokio::test]
async fn test_events_reach_the_endpoint_and_the_fragments_refresh() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    // Endpoints filter only on event types the tenant has defined.
    for name in ["user.created", "invoice.paid"] {
        let body = serde_json::json!({"name": name, "description": name});
        api(&app, &key, "/event-type", body).await;
    }
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");

    // The endpoint only wants user.created: the test event reaches it anyway.
    let edit = format!("{ep_page}/edit");
    let csrf = b.get(&edit).await.csrf();
    let saved = b
        .post(
            &edit,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/hook"),
                ("event_types", "user.created"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);

    // The polled fragments: only the fragment, polling every 5 s; another tenant's: 404.
    let page = b.get(&ep_page).await;
    let attempts = format!("{ep_page}/attempts");
    page.assert(
        200,
        &format!(r#"hx-get="{attempts}" hx-trigger="every 5s""#),
    );
    let frag = b.get(&attempts).await;
    frag.assert(200, "No attempts yet");
    assert!(frag.body.contains(r#"hx-trigger="every 5s""#));
    assert!(!frag.body.contains("<html"), "{}", frag.body);
    let badges = "/overview/apps".to_owned();
    b.get("/")
        .await
        .assert(200, &format!(r#"hx-get="{badges}" hx-trigger="every 5s""#));
    let frag = b.get(&badges).await;
    frag.assert(200, r#"<span class="badge new">No deliveries yet</span>"#);
    assert!(frag.body.contains(&app_id));
    assert!(!frag.body.contains("<html"), "{}", frag.body);

    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/").await.csrf();
    other
        .get(&attempts)
        .await
        .assert(404, "belongs to another account");
    // The overview's fragment has no ids: it lists the caller's own applications only.
    let theirs_live = other.get(&badges).await;
    theirs_live.assert(200, "No applications yet");
    assert!(!theirs_live.body.contains(&app_id));
    let test = format!("{ep_page}/test");
    other
        .post(&test, &[("csrf", &theirs)])
        .await
        .assert(404, "belongs to another account");
    b.post(&test, &[("csrf", "forged")])
        .await
        .assert(403, "did not come from this dashboard");
    assert_eq!(
        api_get(&app, &key, &format!("/app/{app_id}/msg")).await["data"],
        serde_json::json!([])
    );

    let done = b.post(&test, &[("csrf", &page.csrf())]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let msg_id = segment(done.location(), "msg=");
    b.get(done.location())
        .await
        .assert(200, &format!("Test event {msg_id} queued"));
    let msg = api_get(&app, &key, &format!("/app/{app_id}/msg/{msg_id}")).await;
    assert_eq!(msg["eventType"], "hookd.test");
    assert_eq!(msg["payload"]["endpointId"], ep_id.as_str());

    // One delivery, to this endpoint; once attempted it shows in both fragments.
    assert_eq!(fail_due_deliveries(&app, "nope").await, 1);
    let frag = b.get(&attempts).await;
    frag.assert(200, &msg_id);
    assert!(frag.body.contains("badge failing\">500"));
    let live = b.get(&badges).await;
    live.assert(200, "badge failing");
    assert!(live.body.contains("1 endpoint needs attention"));

    // A disabled endpoint gets no test event.
    let disabled = b
        .post(&format!("{ep_page}/disable"), &[("csrf", &page.csrf())])
        .await;
    assert_eq!(disabled.status, 303);
    b.get(&badges).await.assert(200, "badge disabled");
    b.post(&test, &[("csrf", &page.csrf())])
        .await
        .assert(422, "enable it before sending a test event");
}

#[tokio::test]
async fn set_the_endpoints_authentication_and_switch_to_an_ed25519_key() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let page = b.get(&ep_page).await;
    page.assert(200, "Signature only");
    let csrf = page.csrf();
    let auth = format!("{ep_page}/auth");
    let api_auth = format!("/app/{app_id}/endpoint/{ep_id}/auth");

    let done = b
        .post(
            &auth,
            &[
                ("csrf", &csrf),
                ("auth_type", "basic"),
                ("username", "ops"),
                ("password", "pa55-word"),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let shown = b.get(done.location()).await;
    shown.assert(200, "HTTP basic, user ops");
    assert!(!shown.body.contains("pa55-word"), "never shown again");
    assert_eq!(api_get(&app, &key, &api_auth).await["type"], "basic");

    // A bad one gets a message on the page and changes nothing.
    let bad = b
        .post(
            &auth,
            &[
                ("csrf", &csrf),
                ("auth_type", "oauth"),
                ("token_url", "http://10.9.8.7/token"),
                ("client_id", "c"),
                ("client_secret", "s"),
            ],
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("is a private address"), "{}", bad.body);
    assert_eq!(api_get(&app, &key, &api_auth).await["type"], "basic");
    b.post(&auth, &[("csrf", &csrf), ("auth_type", "none")])
        .await;
    assert_eq!(api_get(&app, &key, &api_auth).await["type"], "none");

    // Switching to ed25519: the page shows the public key, and so do the API's secret and the
    // page's "Reveal secret": the private key never leaves hookd.
    let done = b
        .post(&format!("{ep_page}/rotate-ed25519"), &[("csrf", &csrf)])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let secret = api_get(
        &app,
        &key,
        &format!("/app/{app_id}/endpoint/{ep_id}/secret"),
    )
    .await;
    let public = secret["publicKey"]
        .as_str()
        .expect("a public key")
        .to_owned();
    assert_eq!(secret["key"].as_str(), Some(public.as_str()), "{secret}");
    b.get(&ep_page).await.assert(200, &public);
    let revealed = b.get(&format!("{ep_page}/secret")).await;
    revealed.assert(200, &public);
    assert!(!revealed.body.contains("whsk_"), "{}", revealed.body);
    // Rotating again keeps the kind.
    b.post(&format!("{ep_page}/rotate-secret"), &[("csrf", &csrf)])
        .await;
    let again = api_get(
        &app,
        &key,
        &format!("/app/{app_id}/endpoint/{ep_id}/secret"),
    )
    .await;
    assert!(
        again["key"].as_str().unwrap().starts_with("whpk_"),
        "{again}"
    );
    assert_ne!(again["publicKey"], secret["publicKey"]);
}

#[tokio::test]
async fn set_and_remove_a_client_certificate() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let page = b.get(&ep_page).await;
    page.assert(200, "Client certificate (mutual TLS)");
    let csrf = page.csrf();
    let fixture = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/../../tests/fixtures/mtls/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let identity = fixture("client-identity.pem");
    let mtls = format!("{ep_page}/mtls");
    let api_mtls = format!("/app/{app_id}/endpoint/{ep_id}/mtls");
    let bad = b
        .post(&mtls, &[("csrf", &csrf), ("identity", "not pem")])
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("PEM"), "{}", bad.body);
    let done = b
        .post(
            &mtls,
            &[
                ("csrf", &csrf),
                ("identity", &identity),
                ("server_ca_cert", &fixture("server-ca.pem")),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    b.get(&ep_page)
        .await
        .assert(200, "presented on every connection");
    let shown = api_get(&app, &key, &api_mtls).await;
    assert!(
        shown["clientCert"]
            .as_str()
            .unwrap()
            .contains("BEGIN CERTIFICATE"),
        "{shown}"
    );
    b.post(&mtls, &[("csrf", &csrf), ("identity", "")]).await;
    let page = b.get(&ep_page).await;
    assert!(page.body.contains("id=\"mtls-now\">none"), "removed");
}
