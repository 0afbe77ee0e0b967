//! `/settings`: API keys (create, shown once; list; revoke) and the notification email.

use crate::helpers::{Browser, Page, spawn_app};

/// The id in the first revoke form after `name` on the page.
fn key_id_after(page: &Page, name: &str) -> String {
    let at = page
        .body
        .find(&format!(">{name}</td>"))
        .unwrap_or_else(|| panic!("{name} not listed:\n{}", page.body));
    let marker = "/settings/keys/";
    let start = page.body[at..].find(marker).expect("revoke form") + at + marker.len();
    let len = page.body[start..].find('/').expect("end of id");
    page.body[start..start + len].to_owned()
}

async fn api_status(base: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}/api/v1/app"))
        .bearer_auth(key)
        .send()
        .await
        .expect("api request")
        .status()
        .as_u16()
}

#[tokio::test]
async fn api_keys_are_created_once_listed_and_revoked() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let first = b.sign_up("Acme", "ops@acme.example").await;

    let page = b.get("/settings").await;
    page.assert(200, ">default</td>");
    assert!(page.body.contains(&format!("{}…", &first[..8])));
    assert!(!page.body.contains(&first), "a key is shown only once");
    assert!(page.body.contains("badge healthy\">Active"));

    // Creating needs the CSRF token.
    let refused = b
        .post("/settings/keys", &[("csrf", "forged"), ("name", "ci")])
        .await;
    refused.assert(403, "did not come from this dashboard");
    let blank = b
        .post("/settings/keys", &[("csrf", &page.csrf()), ("name", "  ")])
        .await;
    blank.assert(422, "Give the key a name");

    let made = b
        .post("/settings/keys", &[("csrf", &page.csrf()), ("name", "ci")])
        .await;
    made.assert(200, "Shown <strong>only this once</strong>");
    // One click copies it.
    made.assert(200, r#"data-copy="new-api-key">Copy</button>"#);
    let marker = r#"id="new-api-key">"#;
    let start = made.body.find(marker).expect("new key") + marker.len();
    let len = made.body[start..].find('<').expect("end of key");
    let key = made.body[start..start + len].to_owned();
    assert!(key.starts_with("hk_") && key != first, "{key}");
    assert_eq!(api_status(&app.base, &key).await, 200);

    // Listed afterwards by name and prefix, never in full.
    let page = b.get("/settings").await;
    page.assert(200, ">ci</td>");
    assert!(page.body.contains(&format!("{}…", &key[..8])));
    assert!(!page.body.contains(&key));
    let id = key_id_after(&page, "ci");

    // Another tenant cannot revoke it.
    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/settings").await;
    let revoke = format!("/settings/keys/{id}/revoke");
    other
        .post(&revoke, &[("csrf", &theirs.csrf())])
        .await
        .assert(404, "belongs to another account");
    assert_eq!(api_status(&app.base, &key).await, 200);

    // Revoking needs the token; then the key stops working and shows as revoked.
    b.post(&revoke, &[("csrf", "forged")])
        .await
        .assert(403, "did not come from this dashboard");
    assert_eq!(api_status(&app.base, &key).await, 200);
    let done = b.post(&revoke, &[("csrf", &page.csrf())]).await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.location(), "/settings?done=revoked");
    let page = b.get(done.location()).await;
    page.assert(200, "API key revoked");
    assert!(page.body.contains("badge disabled\">Revoked"));
    assert_eq!(api_status(&app.base, &key).await, 401);
    assert_eq!(api_status(&app.base, &first).await, 200);
    // Twice, or a key id that is not one: not found.
    b.post(&revoke, &[("csrf", &page.csrf())])
        .await
        .assert(404, "Not found");
    b.post("/settings/keys/nonsense/revoke", &[("csrf", &page.csrf())])
        .await
        .assert(404, "Not found");
}

#[tokio::test]
async fn notification_email_is_validated_and_saved() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "ops@acme.example").await;
    let page = b.get("/settings").await;
    page.assert(200, "Notification email");
    let csrf = page.csrf();

    b.post(
        "/settings/email",
        &[("csrf", "forged"), ("email", "alerts@acme.example")],
    )
    .await
    .assert(403, "did not come from this dashboard");

    let bad = b
        .post(
            "/settings/email",
            &[("csrf", &csrf), ("email", "alerts@acme")],
        )
        .await;
    bad.assert(422, "is not an email address");
    assert!(
        bad.body.contains(r#"value="alerts@acme""#),
        "typed value kept"
    );
    assert!(!b.get("/settings").await.body.contains("alerts@acme"));

    let done = b
        .post(
            "/settings/email",
            &[("csrf", &csrf), ("email", " alerts@acme.example ")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let page = b.get(done.location()).await;
    page.assert(200, "Notification email saved");
    assert!(page.body.contains(r#"value="alerts@acme.example""#));

    // Each tenant sees its own.
    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/settings").await;
    theirs.assert(200, "Globex");
    assert!(!theirs.body.contains("alerts@acme.example"));
}

#[tokio::test]
async fn the_tenants_status_preset_is_chosen_validated_and_kept_per_tenant() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let tenant = app
        .store
        .system()
        .authenticate_api_key(&key)
        .await
        .unwrap()
        .expect("the sign-up's key");
    // As stored (the dispatchers' copies, in the server's process, follow within a second).
    let preset_of = |t| {
        let store = app.store.clone();
        async move { store.get_tenant(t).await.unwrap().status_preset }
    };
    let page = b.get("/settings").await;
    page.assert(200, "Failed deliveries");
    // Until chosen, the server's choice applies and the page names it.
    assert!(
        page.body
            .contains(r#"<option value="" selected>The server&#39;s choice (now “default”"#),
        "{}",
        page.body
    );
    assert_eq!(preset_of(tenant).await, None);
    let csrf = page.csrf();

    b.post(
        "/settings/preset",
        &[("csrf", "forged"), ("preset", "retry-all-but-410")],
    )
    .await
    .assert(403, "did not come from this dashboard");
    b.post(
        "/settings/preset",
        &[("csrf", &csrf), ("preset", "retry-all")],
    )
    .await
    .assert(
        422,
        "“retry-all” is not a preset; choose one of default, retry-all-but-410",
    );
    assert_eq!(preset_of(tenant).await, None);

    let done = b
        .post(
            "/settings/preset",
            &[("csrf", &csrf), ("preset", "retry-all-but-410")],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let page = b.get(done.location()).await;
    page.assert(200, "Saved: failed attempts of endpoints without a preset");
    assert!(
        page.body
            .contains(r#"<option value="retry-all-but-410" selected>"#)
    );
    assert_eq!(
        preset_of(tenant).await,
        Some(domain::classify::StatusPreset::RetryAllBut410)
    );

    // Another tenant keeps the server's choice.
    let mut other = Browser::new(&app);
    other.sign_up("Globex", "ops@globex.example").await;
    let theirs = other.get("/settings").await;
    assert!(theirs.body.contains(r#"<option value="" selected>"#));

    // Back to the server's choice.
    let done = b
        .post("/settings/preset", &[("csrf", &csrf), ("preset", "")])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(preset_of(tenant).await, None);
}

#[tokio::test]
async fn the_tenants_retention_is_shown_validated_and_saved() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let tenant = app
        .store
        .system()
        .authenticate_api_key(&key)
        .await
        .unwrap()
        .expect("the sign-up's key");
    let page = b.get("/settings").await;
    page.assert(200, "Retention");
    assert!(
        page.body
            .contains(r#"<strong id="payload-retention">30d</strong>"#)
    );
    assert!(
        page.body
            .contains(r#"<strong id="metadata-retention">90d</strong>"#)
    );
    let csrf = page.csrf();

    b.post(
        "/settings/retention",
        &[
            ("csrf", "forged"),
            ("payload_days", "7"),
            ("metadata_days", ""),
        ],
    )
    .await
    .assert(403, "did not come from this dashboard");
    for (payload, metadata) in [("0", ""), ("", "91"), ("seven", ""), ("1.5", "")] {
        let refused = b
            .post(
                "/settings/retention",
                &[
                    ("csrf", &csrf),
                    ("payload_days", payload),
                    ("metadata_days", metadata),
                ],
            )
            .await;
        refused.assert(422, "whole number of days from 1 to 90");
        assert!(
            refused.body.contains(&format!(
                r#"name="payload_days" min="1" max="90" value="{payload}""#
            )),
            "typed value kept"
        );
    }
    assert_eq!(
        app.store.get_tenant(tenant).await.unwrap().retention(),
        Default::default()
    );

    let done = b
        .post(
            "/settings/retention",
            &[
                ("csrf", &csrf),
                ("payload_days", "7"),
                ("metadata_days", " 14 "),
            ],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let page = b.get(done.location()).await;
    page.assert(200, "Retention saved");
    assert!(
        page.body
            .contains(r#"<strong id="payload-retention">7d</strong>"#)
    );
    assert!(
        page.body
            .contains(r#"<strong id="metadata-retention">14d</strong>"#)
    );
    assert_eq!(
        app.store.get_tenant(tenant).await.unwrap().retention(),
        domain::retention::RetentionDays {
            payload: Some(7),
            metadata: Some(14)
        }
    );
}

#[tokio::test]
async fn operational_webhooks_are_added_with_field_errors_listed_and_removed() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let page = b.get("/settings").await;
    page.assert(200, "No operational webhook endpoints.");
    let csrf = page.csrf();

    // Each problem under its field: no URL; then a URL the SSRF guard refuses.
    let blank = b
        .post("/settings/operational", &[("csrf", &csrf), ("url", " ")])
        .await;
    blank.assert(
        422,
        r#"id="ops_url-error">Enter the URL that receives the events."#,
    );
    assert!(
        blank
            .body
            .contains(r#"id="ops_url" value=" " aria-invalid="true""#),
        "{}",
        blank.body
    );
    let private = b
        .post(
            "/settings/operational",
            &[
                ("csrf", &csrf),
                ("url", "http://10.0.0.5/ops"),
                ("description", "kept"),
            ],
        )
        .await;
    private.assert(422, r#"id="ops_url-error""#);
    assert!(
        private.body.contains(r#"value="kept""#),
        "what was typed stays"
    );

    let added = b
        .post(
            "/settings/operational",
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/ops"),
                ("description", "pager"),
                ("types", "endpoint.disabled"),
                ("types", "message.attempt.exhausted"),
            ],
        )
        .await;
    assert_eq!(added.status, 303);
    let page = b.get("/settings?done=operational").await;
    page.assert(200, "Operational webhook endpoint added");
    page.assert(200, "endpoint.disabled, message.attempt.exhausted");
    page.assert(200, "http://127.0.0.1:9/ops");

    // The API sees the same endpoint.
    let listed = reqwest::Client::new()
        .get(format!("{}/api/v1/operational-webhook/endpoint", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let id = listed["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["data"][0]["description"], "pager");
    assert!(
        page.body
            .contains(&format!("/settings/operational/{id}/delete"))
    );

    let removed = b
        .post(
            &format!("/settings/operational/{id}/delete"),
            &[("csrf", &page.csrf())],
        )
        .await;
    assert_eq!(removed.status, 303);
    let page = b.get("/settings?done=operational-removed").await;
    page.assert(200, "No operational webhook endpoints.");
}

#[tokio::test]
async fn an_operational_webhook_for_an_unknown_event_type_is_refused_under_the_event_types() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "ops@acme.example").await;
    let csrf = b.get("/settings").await.csrf();
    let refused = b
        .post(
            "/settings/operational",
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/ops"),
                ("types", "invoice.paid"),
            ],
        )
        .await;
    refused.assert(
        422,
        r#"id="ops_types-error">these are not operational event types: invoice.paid"#,
    );
    refused.assert(
        422,
        r#"<fieldset id="ops_types" aria-describedby="ops_types-error">"#,
    );
    refused.assert(422, r#"value="http://127.0.0.1:9/ops""#);
    b.get("/settings")
        .await
        .assert(200, "No operational webhook endpoints.");
}
