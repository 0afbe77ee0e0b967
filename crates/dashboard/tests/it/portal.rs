//! The app portal (issue 19) as a tenant's customer uses it: a portal link opens one
//! application's pages, and nothing of another application, another tenant or the dashboard.

use serde_json::json;

use crate::helpers::{Browser, Page, api, app_with_endpoint, send_message, spawn_app};

/// What a browser adds to the landing page's post: it comes from a page of the server itself.
const SAME_ORIGIN: &[(&str, &str)] = &[("sec-fetch-site", "same-origin")];

/// A portal token for `app_id` through the API (as the tenant's code asks for it).
async fn portal_token(
    app: &testkit::TestApp,
    key: &str,
    app_id: &str,
    body: serde_json::Value,
) -> String {
    let access = api(app, key, &format!("/auth/app-portal-access/{app_id}"), body).await;
    let url = access["url"].as_str().expect("url");
    let token = access["token"].as_str().expect("token").to_owned();
    assert!(url.ends_with(&format!("/portal/#token={token}")), "{url}");
    token
}

#[tokio::test]
async fn a_portal_link_opens_its_application_and_nothing_else() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, ep_a) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let (app_b, ep_b) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-b").await;
    let msg_b = send_message(&app, &key, &app_b, "order.paid", json!({"b": 1})).await;
    let msg_a = send_message(&app, &key, &app_a, "order.paid", json!({"a": 1})).await;
    let mut stranger = Browser::new(&app);
    let other_key = stranger.sign_up("Other", "ops@other.example").await;
    let (app_c, ep_c) = app_with_endpoint(&app, &other_key, "http://127.0.0.1:9/hook-c").await;
    let token = portal_token(&app, &key, &app_a, json!({})).await;

    let mut customer = Browser::new(&app);
    // The landing page carries its script and no token; without a session every portal page
    // says the link is not valid (no dashboard chrome, no login link).
    customer
        .get("/portal/")
        .await
        .assert(200, "/static/portal.js");
    let none = customer.get(&format!("/portal/app/{app_a}")).await;
    none.assert(401, "This link is not valid");
    assert!(!none.body.contains("/login"), "{}", none.body);
    customer
        .post_with(
            "/portal/session",
            &[("token", "hkp_not-a-token")],
            SAME_ORIGIN,
        )
        .await
        .assert(401, "This link is not valid");

    // The token becomes an HttpOnly cookie for /portal, and the customer lands on their page.
    let opened = customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    assert_eq!(opened.location(), format!("/portal/app/{app_a}"));
    let cookie = opened
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("hookd_portal="))
        .expect("portal cookie")
        .to_owned();
    for attr in ["HttpOnly", "Path=/portal", "SameSite=Lax"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    // The landing page's script sends an open session on to its application.
    customer
        .get("/portal/")
        .await
        .assert(200, &format!(r#"data-home="/portal/app/{app_a}""#));
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    home.assert(200, "http://127.0.0.1:9/hook-a");
    assert!(!home.body.contains("hook-b"), "{}", home.body);
    assert!(!home.body.contains(r#"href="/settings""#), "{}", home.body);
    let ep_page = customer
        .get(&format!("/portal/app/{app_a}/endpoint/{ep_a}"))
        .await;
    ep_page.assert(200, &format!(r#"href="/portal/app/{app_a}/msg""#));
    assert!(!ep_page.body.contains(r#"href="/app/"#), "{}", ep_page.body);
    customer
        .get(&format!("/portal/app/{app_a}/msg/{msg_a}"))
        .await
        .assert(200, &msg_a);

    // Every page and action of an application, with another application's ids (the tenant's
    // own and another tenant's), and with this application's id but another's endpoint or
    // message: not found. The tenant's own pages under /portal do not exist.
    let csrf = home.csrf();
    let theirs = [
        (app_b.as_str(), ep_b.as_str(), msg_b.as_str()),
        (app_c.as_str(), ep_c.as_str(), msg_b.as_str()),
        (app_a.as_str(), ep_b.as_str(), msg_b.as_str()),
        (app_a.as_str(), ep_c.as_str(), msg_b.as_str()),
    ];
    let mut walked = 0;
    for (a, e, m) in theirs {
        let gets = [
            format!("/portal/app/{a}/endpoint/{e}"),
            format!("/portal/app/{a}/endpoint/{e}/edit"),
            format!("/portal/app/{a}/endpoint/{e}/secret"),
            format!("/portal/app/{a}/endpoint/{e}/charts"),
            format!("/portal/app/{a}/endpoint/{e}/attempts"),
            format!("/portal/app/{a}/endpoint/{e}/dead"),
            format!("/portal/app/{a}/msg/{m}"),
            format!("/portal/app/{a}/msg/{m}/payload"),
        ];
        let posts = [
            format!("/portal/app/{a}/endpoint/{e}/edit"),
            format!("/portal/app/{a}/endpoint/{e}/enable"),
            format!("/portal/app/{a}/endpoint/{e}/disable"),
            format!("/portal/app/{a}/endpoint/{e}/test"),
            format!("/portal/app/{a}/endpoint/{e}/rotate-secret"),
            format!("/portal/app/{a}/endpoint/{e}/rotate-ed25519"),
            format!("/portal/app/{a}/endpoint/{e}/auth"),
            format!("/portal/app/{a}/endpoint/{e}/mtls"),
            format!("/portal/app/{a}/endpoint/{e}/recover"),
            format!("/portal/app/{a}/endpoint/{e}/recover-all"),
            format!("/portal/app/{a}/endpoint/{e}/replay-missing"),
            format!("/portal/app/{a}/endpoint/{e}/bulk/start"),
            format!("/portal/app/{a}/endpoint/{e}/delete"),
            format!("/portal/app/{a}/msg/{m}/endpoint/{e}/resend"),
            format!("/portal/app/{a}/msg/{m}/endpoint/{e}/replay"),
        ];
        for path in gets {
            let page = customer.get(&path).await;
            assert_eq!(page.status.as_u16(), 404, "GET {path}: {}", page.body);
            walked += 1;
        }
        for path in posts {
            let form = [
                ("csrf", csrf.as_str()),
                ("url", "http://127.0.0.1:9/x"),
                ("since", "2020-01-01T00:00"),
            ];
            let page = customer.post(&path, &form).await;
            assert_eq!(page.status.as_u16(), 404, "POST {path}: {}", page.body);
            walked += 1;
        }
    }
    for a in [&app_b, &app_c] {
        for path in [
            format!("/portal/app/{a}"),
            format!("/portal/app/{a}/msg"),
            format!("/portal/app/{a}/endpoint/new"),
        ] {
            let page = customer.get(&path).await;
            assert_eq!(page.status.as_u16(), 404, "GET {path}: {}", page.body);
            walked += 1;
        }
        let path = format!("/portal/app/{a}/endpoint/new");
        let page = customer
            .post(&path, &[("csrf", &csrf), ("url", "http://127.0.0.1:9/x")])
            .await;
        assert_eq!(page.status.as_u16(), 404, "POST {path}: {}", page.body);
    }
    for path in ["/portal/settings", "/portal/overview/apps", "/portal/app"] {
        let page = customer.get(path).await;
        assert_eq!(page.status.as_u16(), 404, "GET {path}: {}", page.body);
    }
    assert_eq!(walked, 4 * 23 + 2 * 3);
    // Nothing of theirs changed: B's endpoint is still enabled and has its URL.
    let b_ep = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_b}/endpoint/{ep_b}", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("get")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(b_ep["disabled"], false, "{b_ep}");
    assert_eq!(b_ep["url"], "http://127.0.0.1:9/hook-b", "{b_ep}");
    for path in [
        "/".to_owned(),
        "/settings".to_owned(),
        format!("/app/{app_a}/msg"),
    ] {
        let page = customer.get(&path).await;
        assert_eq!(page.status.as_u16(), 303, "{path}");
        assert_eq!(page.location(), "/login", "{path}");
    }

    // The customer adds an endpoint with the dashboard's form and rules; it is the
    // application's, as the tenant's API shows.
    let form = customer
        .get(&format!("/portal/app/{app_a}/endpoint/new"))
        .await;
    form.assert(
        200,
        &format!(r#"action="/portal/app/{app_a}/endpoint/new""#),
    );
    let bad = customer
        .post(
            &format!("/portal/app/{app_a}/endpoint/new"),
            &[("csrf", &form.csrf()), ("url", "not a url")],
        )
        .await;
    assert_eq!(bad.status.as_u16(), 422, "{}", bad.body);
    let made = customer
        .post(
            &format!("/portal/app/{app_a}/endpoint/new"),
            &[("csrf", &form.csrf()), ("url", "http://127.0.0.1:9/added")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    assert!(
        made.location()
            .starts_with(&format!("/portal/app/{app_a}/endpoint/ep_")),
        "{}",
        made.location()
    );
    let listed = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_a}/endpoint", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("list")
        .text()
        .await
        .expect("body");
    assert!(listed.contains("http://127.0.0.1:9/added"), "{listed}");

    // A test event of a chosen type carries that type's example; then the endpoint is deleted.
    api(
        &app,
        &key,
        "/event-type",
        json!({"name": "order.paid", "description": "An order was paid",
               "schemas": {"1": {"type": "object", "examples": [{"order": 42}]}}}),
    )
    .await;
    let added = made.location().split('?').next().expect("path").to_owned();
    let page = customer.get(&added).await;
    page.assert(200, r#"<option value="order.paid">"#);
    let sent = customer
        .post(
            &format!("{added}/test"),
            &[("csrf", &page.csrf()), ("event_type", "order.paid")],
        )
        .await;
    assert_eq!(sent.status, 303, "{}", sent.body);
    let msg_id = sent
        .location()
        .split("msg=")
        .nth(1)
        .expect("msg id")
        .to_owned();
    let got = reqwest::Client::new()
        .get(format!(
            "{}/api/v1/app/{app_a}/msg/{msg_id}?with_content=true",
            app.base
        ))
        .bearer_auth(&key)
        .send()
        .await
        .expect("get")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(got["eventType"], "order.paid", "{got}");
    assert_eq!(got["payload"], json!({"order": 42}), "{got}");
    let gone = customer
        .post(&format!("{added}/delete"), &[("csrf", &page.csrf())])
        .await;
    assert_eq!(gone.status, 303, "{}", gone.body);
    assert_eq!(gone.location(), format!("/portal/app/{app_a}"));
    assert_eq!(customer.get(&added).await.status.as_u16(), 404);

    // expire-all ends the session at the next request.
    let status = reqwest::Client::new()
        .post(format!("{}/api/v1/auth/app/{app_a}/expire-all", app.base))
        .bearer_auth(&key)
        .json(&json!({}))
        .send()
        .await
        .expect("expire-all")
        .status();
    assert_eq!(status.as_u16(), 204);
    customer
        .get(&format!("/portal/app/{app_a}"))
        .await
        .assert(401, "This link is not valid");
}

#[tokio::test]
async fn a_read_only_link_reads_and_signing_out_ends_the_link() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, ep_a) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let token = portal_token(&app, &key, &app_a, json!({"readOnly": true})).await;
    let mut customer = Browser::new(&app);
    let opened = customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    assert_eq!(opened.status, 303, "{}", opened.body);
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    home.assert(200, "read-only");
    assert!(!home.body.contains("Add an endpoint"), "{}", home.body);
    let page = customer
        .get(&format!("/portal/app/{app_a}/endpoint/{ep_a}"))
        .await;
    page.assert(200, "hook-a");
    let refused = customer
        .post(
            &format!("/portal/app/{app_a}/endpoint/{ep_a}/disable"),
            &[("csrf", &page.csrf())],
        )
        .await;
    refused.assert(403, "read-only");
    // It signs out all the same: that changes nothing but itself.
    customer
        .post("/portal/logout", &[("csrf", &page.csrf())])
        .await
        .assert(200, "signed out");
    customer
        .get(&format!("/portal/app/{app_a}"))
        .await
        .assert(401, "This link is not valid");

    // A full token's holder signs out: the token no longer works, in the portal or the API.
    let token = portal_token(&app, &key, &app_a, json!({})).await;
    let mut customer = Browser::new(&app);
    customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    let forged = customer.post("/portal/logout", &[("csrf", "forged")]).await;
    assert_eq!(forged.status.as_u16(), 403, "{}", forged.body);
    let out = customer
        .post("/portal/logout", &[("csrf", &home.csrf())])
        .await;
    out.assert(200, "signed out");
    customer
        .get(&format!("/portal/app/{app_a}"))
        .await
        .assert(401, "This link is not valid");
    let api_status = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_a}/endpoint", app.base))
        .bearer_auth(&token)
        .send()
        .await
        .expect("api")
        .status();
    assert_eq!(api_status.as_u16(), 401);
}

#[tokio::test]
async fn only_the_tenants_sites_may_frame_the_portal_which_wears_the_tenants_brand() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let mut customer = Browser::new(&app);
    let token = portal_token(&app, &key, &app_a, json!({})).await;
    customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    let csp = |p: &crate::helpers::Page| {
        p.headers
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };

    // Nothing listed: no site may frame the portal's pages; the landing page (no data) may be.
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    assert!(
        csp(&home).contains("frame-ancestors 'none'"),
        "{}",
        csp(&home)
    );
    let landing = Browser::new(&app).get("/portal/").await;
    assert!(
        csp(&landing).contains("frame-ancestors *"),
        "{}",
        csp(&landing)
    );
    // Any other response without a session: framed by nobody.
    let stale = Browser::new(&app)
        .get(&format!("/portal/app/{app_a}"))
        .await;
    stale.assert(401, "This link is not valid");
    assert!(
        csp(&stale).contains("frame-ancestors 'none'"),
        "{}",
        csp(&stale)
    );
    assert!(
        csp(&tenant.get("/").await).contains("frame-ancestors 'none'"),
        "the dashboard is never framed"
    );
    assert_eq!(customer.get("/portal/brand.css").await.body, "");

    // Bad settings are refused with every reason and change nothing.
    let settings = tenant.get("/settings").await;
    settings.assert(200, "Customer portal");
    let refused = tenant
        .post(
            "/settings/portal",
            &[
                ("csrf", &settings.csrf()),
                ("color", "red"),
                ("allowed_origins", "https://app.example.com/embed"),
            ],
        )
        .await;
    refused.assert(422, "The colour must look like #3552d8.");
    assert!(
        refused.body.contains("is not an origin"),
        "{}",
        refused.body
    );
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    assert!(
        csp(&home).contains("frame-ancestors 'none'"),
        "{}",
        csp(&home)
    );

    // Saved: the listed sites may frame it, and the portal wears the brand.
    let saved = tenant
        .post(
            "/settings/portal",
            &[
                ("csrf", &settings.csrf()),
                ("display_name", "Acme Webhooks"),
                ("logo_url", "https://acme.example/logo.png"),
                ("color", "#AA3300"),
                ("dark", "1"),
                (
                    "allowed_origins",
                    "https://app.acme.example\nhttp://127.0.0.1:3000",
                ),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let shown = tenant.get("/settings").await;
    shown.assert(
        200,
        "https://app.acme.example\nhttp://127.0.0.1:3000</textarea>",
    );
    // The colour is kept as chosen, and Settings says how the portal shows it.
    shown.assert(200, "#aa3300 is too faint for text on the dark theme");
    // Opening a link answers with its tenant's rule.
    let token = portal_token(&app, &key, &app_a, json!({})).await;
    let opening = Browser::new(&app)
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    assert!(
        csp(&opening).contains("frame-ancestors https://app.acme.example http://127.0.0.1:3000;"),
        "{}",
        csp(&opening)
    );
    let home = customer.get(&format!("/portal/app/{app_a}")).await;
    assert!(
        csp(&home).contains("frame-ancestors https://app.acme.example http://127.0.0.1:3000;"),
        "{}",
        csp(&home)
    );
    assert!(
        csp(&home).contains("img-src 'self' https:"),
        "{}",
        csp(&home)
    );
    assert!(
        home.body.contains(r#"href="/portal/brand.css""#),
        "{}",
        home.body
    );
    // The name is the page's text and title, the logo an image with alt text.
    for part in [
        " · Acme Webhooks</title>",
        r#"<img class="logo" src="https://acme.example/logo.png" alt="Acme Webhooks logo">"#,
        "<span>Acme Webhooks</span>",
    ] {
        assert!(home.body.contains(part), "{part} not in {}", home.body);
    }
    // The dark theme is the shared dark palette.
    assert!(
        home.body
            .contains(r#"<link rel="stylesheet" href="/static/dark.css">"#),
        "{}",
        home.body
    );
    let css = customer.get("/portal/brand.css").await;
    assert_eq!(css.status.as_u16(), 200);
    // #aa3300 is too dark to read on the dark theme: it is lightened there.
    assert!(css.body.contains("--accent: #"), "{}", css.body);
    assert!(!css.body.contains("--accent: #aa3300;"), "{}", css.body);
    // Error pages of the session follow the same rule.
    let missing = customer
        .get(&format!("/portal/app/{app_a}/msg/msg_nope"))
        .await;
    assert_eq!(missing.status.as_u16(), 404);
    assert!(
        missing.body.contains("<span>Acme Webhooks</span>"),
        "{}",
        missing.body
    );
    assert!(
        csp(&missing).contains("frame-ancestors https://app.acme.example"),
        "{}",
        csp(&missing)
    );
}

#[tokio::test]
async fn another_site_cannot_plant_a_portal_session_and_a_new_link_asks_first() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let token_a = portal_token(&app, &key, &app_a, json!({})).await;
    // The attacker: a tenant of its own, and a portal link of its own.
    let mut attacker = Browser::new(&app);
    let evil_key = attacker.sign_up("Evil", "ops@evil.example").await;
    let (app_e, _) = app_with_endpoint(&app, &evil_key, "http://127.0.0.1:9/evil").await;
    let token_e = portal_token(&app, &evil_key, &app_e, json!({})).await;
    let csp = |p: &crate::helpers::Page| {
        p.headers
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };

    let mut customer = Browser::new(&app);
    let opened = customer
        .post_with("/portal/session", &[("token", &token_a)], SAME_ORIGIN)
        .await;
    assert_eq!(opened.location(), format!("/portal/app/{app_a}"));
    let own = customer.cookies.get("hookd_portal").cloned();

    // Posts another site's page makes (as browsers label them, or by Origin alone) are
    // refused with a page saying so; the customer's session is untouched.
    let other = [
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        vec![("sec-fetch-site", "none")],
        vec![("origin", "http://evil.test")],
        vec![("origin", "null")],
        vec![],
        vec![("sec-fetch-site", "cross-site"), ("origin", &app.base)],
    ];
    for headers in &other {
        let refused = customer
            .post_with("/portal/session", &[("token", &token_e)], headers)
            .await;
        refused.assert(403, "Another website tried to open a portal");
        assert!(refused.set_cookies().is_empty(), "{headers:?}");
        assert!(
            csp(&refused).contains("frame-ancestors 'none'"),
            "{}",
            csp(&refused)
        );
    }
    assert_eq!(customer.cookies.get("hookd_portal"), own.as_ref());
    // An old browser sending only Origin, when it is the server's own, is believed.
    let by_origin = Browser::new(&app)
        .post_with(
            "/portal/session",
            &[("token", &token_a)],
            &[("origin", &app.base)],
        )
        .await;
    assert_eq!(by_origin.status.as_u16(), 303, "{}", by_origin.body);

    // A link of another application opened in the same browser (the attacker may make the
    // customer's browser open the portal's own page with its link): the customer is asked,
    // and nothing changes until they confirm.
    let asked = customer
        .post_with("/portal/session", &[("token", &token_e)], SAME_ORIGIN)
        .await;
    asked.assert(200, "You are signed in to the webhook portal of Acme (");
    assert!(
        asked
            .body
            .contains("The link you\n    opened is for the portal of Evil ("),
        "{}",
        asked.body
    );
    assert!(asked.set_cookies().is_empty());
    assert_eq!(customer.cookies.get("hookd_portal"), own.as_ref());
    // Forged confirmation: refused.
    let forged = customer
        .post_with(
            "/portal/session",
            &[("token", &token_e), ("confirm", "forged")],
            SAME_ORIGIN,
        )
        .await;
    assert_eq!(forged.status.as_u16(), 403, "{}", forged.body);
    assert_eq!(customer.cookies.get("hookd_portal"), own.as_ref());
    // A new link of the same application replaces the session without asking.
    let token_a2 = portal_token(&app, &key, &app_a, json!({})).await;
    let same = customer
        .post_with("/portal/session", &[("token", &token_a2)], SAME_ORIGIN)
        .await;
    assert_eq!(same.status.as_u16(), 303, "{}", same.body);
    // The customer's own choice, with the page's button: switched.
    let asked = customer
        .post_with("/portal/session", &[("token", &token_e)], SAME_ORIGIN)
        .await;
    let confirm = asked
        .body
        .split(r#"name="confirm" value=""#)
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("confirm field")
        .to_owned();
    let switched = customer
        .post_with(
            "/portal/session",
            &[("token", &token_e), ("confirm", &confirm)],
            SAME_ORIGIN,
        )
        .await;
    assert_eq!(switched.location(), format!("/portal/app/{app_e}"));
    customer
        .get(&format!("/portal/app/{app_e}"))
        .await
        .assert(200, "evil");
}

#[tokio::test]
async fn forwarded_host_and_scheme_are_believed_only_from_trusted_proxies() {
    // The dashboard's "Open portal" sends the tenant to a new portal link: where that link
    // points must not be chosen by whoever sends the request.
    let forged = [
        ("x-forwarded-host", "evil.test"),
        ("x-forwarded-proto", "https"),
        ("forwarded", "host=evil.test;proto=https"),
    ];

    let app = spawn_app().await;
    let base = app.base.clone();
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_a, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let csrf = b.get("/").await.csrf();
    let opened = b
        .post_with(&format!("/app/{app_a}/portal"), &[("csrf", &csrf)], &forged)
        .await;
    assert_eq!(opened.status.as_u16(), 303, "{}", opened.body);
    assert!(
        opened
            .location()
            .starts_with(&format!("{base}/portal/#token=hkp_")),
        "{}",
        opened.location()
    );
    // Nor does a client's claim of https make the session cookie `Secure`.
    let mut other = Browser::new(&app);
    let token = other.get("/login").await.csrf();
    let r = other
        .post_with(
            "/login",
            &[
                ("csrf", &token),
                ("email", "ops@acme.example"),
                ("password", crate::helpers::PASSWORD),
            ],
            &[("x-forwarded-proto", "https")],
        )
        .await;
    let cookie = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("hookd_session="))
        .expect("session cookie")
        .to_owned();
    assert!(!cookie.contains("Secure"), "{cookie}");

    // Behind a proxy the operator lists, its headers are believed.
    let app = testkit::TestApp::start(
        store::testing::TestDb::sqlite().await,
        &[
            ("HOOKD_ROLES", "api"),
            ("HOOKD_TRUSTED_PROXIES", "127.0.0.0/8"),
        ],
    )
    .await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_a, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let csrf = b.get("/").await.csrf();
    let opened = b
        .post_with(
            &format!("/app/{app_a}/portal"),
            &[("csrf", &csrf)],
            &[
                ("x-forwarded-host", "hooks.example.test"),
                ("x-forwarded-proto", "https"),
            ],
        )
        .await;
    assert!(
        opened
            .location()
            .starts_with("https://hooks.example.test/portal/#token=hkp_"),
        "{}",
        opened.location()
    );
}

#[tokio::test]
async fn a_portal_link_shows_and_does_only_what_its_capabilities_allow() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, ep_a) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook-a").await;
    let msg = send_message(&app, &key, &app_a, "order.paid", json!({"a": 1})).await;
    let ep_path = format!("/portal/app/{app_a}/endpoint/{ep_a}");
    let secret_of = || async {
        reqwest::Client::new()
            .get(format!(
                "{}/api/v1/app/{app_a}/endpoint/{ep_a}/secret",
                app.base
            ))
            .bearer_auth(&key)
            .send()
            .await
            .expect("secret")
            .json::<serde_json::Value>()
            .await
            .expect("json")["key"]
            .clone()
    };
    let before = secret_of().await;
    let buttons = [
        "Reveal secret",
        "Rotate secret",
        ">Edit<",
        ">Delete</button>",
        ">Disable</button>",
        "Send test event",
        "Save authentication",
        "Recover failed messages",
    ];

    // ViewBase only (and a read-only link, the same): every page reads, no button shows,
    // and a forged post is refused with a page saying what the link does not allow.
    for body in [
        json!({"capabilities": ["ViewBase"]}),
        json!({"readOnly": true}),
    ] {
        let token = portal_token(&app, &key, &app_a, body.clone()).await;
        let mut customer = Browser::new(&app);
        customer
            .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
            .await;
        let home = customer.get(&format!("/portal/app/{app_a}")).await;
        home.assert(200, "hook-a");
        assert!(!home.body.contains("Add an endpoint"), "{body}");
        let page = customer.get(&ep_path).await;
        page.assert(200, "hook-a");
        for b in buttons {
            assert!(!page.body.contains(b), "{body}: {b} shown");
        }
        let detail = customer
            .get(&format!("/portal/app/{app_a}/msg/{msg}"))
            .await;
        detail.assert(200, &msg);
        assert!(!detail.body.contains(">Resend</button>"), "{body}");
        customer
            .get(&format!("{ep_path}/secret"))
            .await
            .assert(403, "does not let you see signing secrets");
        customer
            .get(&format!("{ep_path}/edit"))
            .await
            .assert(403, "does not let you add, change or delete endpoints");
        let forged = customer
            .post(
                &format!("{ep_path}/rotate-secret"),
                &[("csrf", &page.csrf())],
            )
            .await;
        assert_eq!(forged.status.as_u16(), 403, "{body}: {}", forged.body);
        assert!(!forged.body.contains("whsec_"), "{}", forged.body);
    }
    assert_eq!(secret_of().await, before, "nothing rotated the secret");

    // Rotating and resending, not managing: those buttons only, and they work.
    let token = portal_token(
        &app,
        &key,
        &app_a,
        json!({"capabilities": ["ViewBase", "ManageEndpointSecret", "CreateAttempts"]}),
    )
    .await;
    let mut customer = Browser::new(&app);
    customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    let page = customer.get(&ep_path).await;
    for shown in [
        "Reveal secret",
        "Rotate secret",
        "Send test event",
        "Recover failed messages",
    ] {
        assert!(page.body.contains(shown), "{shown} not shown");
    }
    for hidden in [">Edit<", ">Delete</button>", "Save authentication"] {
        assert!(!page.body.contains(hidden), "{hidden} shown");
    }
    let rotated = customer
        .post(
            &format!("{ep_path}/rotate-secret"),
            &[("csrf", &page.csrf())],
        )
        .await;
    assert_eq!(rotated.status.as_u16(), 303, "{}", rotated.body);
    assert_ne!(secret_of().await, before);
    customer
        .post(&format!("{ep_path}/delete"), &[("csrf", &page.csrf())])
        .await
        .assert(403, "does not let you add, change or delete endpoints");
}

#[tokio::test]
async fn hidden_advanced_options_are_absent_and_ignored_in_any_request() {
    let app = spawn_app().await;
    let (mut tenant, key, app_a, mut customer) = tenant_and_customer(&app).await;
    let new = format!("/portal/app/{app_a}/endpoint/new");
    // Shown by default, behind "Advanced", closed.
    let form = customer.get(&new).await;
    form.assert(200, r#"<details class="advanced">"#);
    assert!(form.body.contains(r#"name="timeout""#), "{}", form.body);

    let settings = tenant.get("/settings").await;
    let saved = tenant
        .post(
            "/settings/portal",
            &[("csrf", &settings.csrf()), ("hide_advanced", "1")],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    tenant
        .get("/settings")
        .await
        .assert(200, r#"name="hide_advanced" value="1" checked"#);

    let form = customer.get(&new).await;
    for field in [
        "timeout",
        "max_concurrency",
        "throttle_rate",
        "retry_policy",
        "headers",
    ] {
        assert!(
            !form.body.contains(&format!(r#"name="{field}""#)),
            "{field} in {}",
            form.body
        );
    }
    // A request that carries them all the same: they keep their defaults.
    let made = customer
        .post(
            &new,
            &[
                ("csrf", &form.csrf()),
                ("url", "http://127.0.0.1:9/short"),
                ("timeout", "100s"),
                ("max_concurrency", "1"),
                ("headers", "X-Sneaky: 1"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let ep_id = made
        .location()
        .rsplit('/')
        .next()
        .and_then(|s| s.split('?').next())
        .expect("an endpoint id")
        .to_owned();
    let ep: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_a}/endpoint/{ep_id}", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("api request")
        .json()
        .await
        .expect("json");
    assert_eq!(ep["timeout"], "15s", "{ep}");
    assert_eq!(ep["maxConcurrency"], 10, "{ep}");
}

/// A tenant may keep its portal customers to the public internet: ticked in Settings, a
/// customer's endpoint on a network the tenant itself may reach is refused, in the customer's
/// words, while the tenant's own dashboard still takes it.
#[tokio::test]
async fn a_tenant_can_keep_its_portal_customers_to_public_addresses() {
    let app = spawn_app().await;
    let (mut tenant, _, app_a, mut customer) = tenant_and_customer(&app).await;
    let new = format!("/portal/app/{app_a}/endpoint/new");
    // Before: the customer reaches what the tenant reaches (here the server's loopback).
    assert_eq!(
        add(&mut customer, &new, "http://127.0.0.1:9/before")
            .await
            .status,
        303
    );

    let settings = tenant.get("/settings").await;
    let saved = tenant
        .post(
            "/settings/portal",
            &[("csrf", &settings.csrf()), ("public_endpoints_only", "1")],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    tenant
        .get("/settings")
        .await
        .assert(200, r#"name="public_endpoints_only" value="1" checked"#);

    let refused = add(&mut customer, &new, "http://127.0.0.1:9/after").await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("private or internal network") && !refused.body.contains("HOOKD_"),
        "{}",
        refused.body
    );
    // The tenant's own dashboard is not bound by its portal setting.
    let form = tenant.get(&format!("/app/{app_a}/endpoint/new")).await;
    let made = tenant
        .post(
            &format!("/app/{app_a}/endpoint/new"),
            &[("csrf", &form.csrf()), ("url", "http://127.0.0.1:9/tenant")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
}

/// Adds an endpoint at `url` through the form at `new`, as its page hands it out.
async fn add(browser: &mut Browser, new: &str, url: &str) -> Page {
    let form = browser.get(new).await;
    browser
        .post(new, &[("csrf", &form.csrf()), ("url", url)])
        .await
}

/// A signed-up tenant (its browser and API key), an application of its with one endpoint, and
/// a customer's browser with a portal session on that application.
async fn tenant_and_customer(app: &testkit::TestApp) -> (Browser, String, String, Browser) {
    let mut tenant = Browser::new(app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    let (app_a, _) = app_with_endpoint(app, &key, "http://127.0.0.1:9/hook-a").await;
    let mut customer = Browser::new(app);
    let token = portal_token(app, &key, &app_a, json!({})).await;
    customer
        .post_with("/portal/session", &[("token", &token)], SAME_ORIGIN)
        .await;
    (tenant, key, app_a, customer)
}
