//! The app portal (issue 19) as a tenant's customer uses it: a portal link opens one
//! application's pages, and nothing of another application, another tenant or the dashboard.

use serde_json::json;

use crate::helpers::{Browser, api, app_with_endpoint, send_message, spawn_app};

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
        .post("/portal/session", &[("token", "hkp_not-a-token")])
        .await
        .assert(401, "This link is not valid");

    // The token becomes an HttpOnly cookie for /portal, and the customer lands on their page.
    let opened = customer.post("/portal/session", &[("token", &token)]).await;
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
    customer
        .get("/portal/")
        .await
        .location()
        .ends_with(&app_a)
        .then_some(())
        .expect("the landing page sends an open session to its application");
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

    // Another application of the tenant, another tenant's, and the dashboard: not found, or
    // (the dashboard) not logged in.
    for path in [
        format!("/portal/app/{app_b}"),
        format!("/portal/app/{app_b}/msg"),
        format!("/portal/app/{app_b}/msg/{msg_b}"),
        format!("/portal/app/{app_b}/endpoint/{ep_b}"),
        format!("/portal/app/{app_b}/endpoint/{ep_b}/attempts"),
        format!("/portal/app/{app_a}/endpoint/{ep_b}"),
        format!("/portal/app/{app_a}/msg/{msg_b}"),
        format!("/portal/app/{app_c}"),
        format!("/portal/app/{app_c}/endpoint/{ep_c}"),
        format!("/portal/app/{app_a}/endpoint/{ep_c}"),
        "/portal/settings".to_owned(),
        "/portal/overview/apps".to_owned(),
    ] {
        let page = customer.get(&path).await;
        assert_eq!(page.status.as_u16(), 404, "{path}: {}", page.body);
    }
    let csrf = home.csrf();
    let refused = customer
        .post(
            &format!("/portal/app/{app_b}/endpoint/{ep_b}/disable"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(refused.status.as_u16(), 404, "{}", refused.body);
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
    let opened = customer.post("/portal/session", &[("token", &token)]).await;
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

    // A full token's holder signs out: the token no longer works, in the portal or the API.
    let token = portal_token(&app, &key, &app_a, json!({})).await;
    let mut customer = Browser::new(&app);
    customer.post("/portal/session", &[("token", &token)]).await;
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
