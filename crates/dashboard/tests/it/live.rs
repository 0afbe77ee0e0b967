//! What changes while a page is open: the endpoint page's poll brings the badge, the facts and
//! the counts with the attempts (one request, so they agree); the message page's deliveries
//! poll; every time is a `<time>` the browser can show as "3 min ago"; the portal's check of
//! whether a browser keeps its cookie.

use serde_json::json;

use crate::helpers::{Browser, app_with_endpoint, fail_due_deliveries, send_message, spawn_app};

#[tokio::test]
async fn the_endpoint_poll_brings_badge_facts_and_counts_with_the_attempts() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let poll = format!("/app/{app_id}/endpoint/{ep_id}/attempts");

    let before = b.get(&poll).await;
    before.assert(
        200,
        r#"<span class="badge new" id="ep-badge" hx-swap-oob="true">No deliveries yet</span>"#,
    );
    before.assert(
        200,
        r#"<dl class="facts" id="ep-facts" hx-swap-oob="true">"#,
    );
    before.assert(200, r#"<dd data-state="failed">0</dd>"#);
    before.assert(200, "No attempts yet.");
    assert!(!before.body.contains("Failing since"));

    let msg = send_message(&app, &key, &app_id, "order.paid", json!({})).await;
    fail_due_deliveries(&app, "down").await;
    let after = b.get(&poll).await;
    after.assert(200, r#"id="ep-badge" hx-swap-oob="true">Failing</span>"#);
    after.assert(
        200,
        r#"<dt>Failing since</dt><dd><time class="rel" datetime=""#,
    );
    after.assert(200, r#"<dd data-state="failed">1</dd>"#);
    after.assert(200, &format!("/msg/{msg}/attempt/"));
    // The page itself shows the same parts in their places, without the out-of-band marks.
    let page = b.get(&format!("/app/{app_id}/endpoint/{ep_id}")).await;
    page.assert(
        200,
        r#"<span class="badge failing" id="ep-badge">Failing</span>"#,
    );
    page.assert(200, r#"<dd data-state="failed">1</dd>"#);
    assert!(!page.body.contains("hx-swap-oob"));

    // The message page's deliveries, alone, for its poll.
    let deliveries = format!("/app/{app_id}/msg/{msg}/deliveries");
    let d = b.get(&deliveries).await;
    d.assert(
        200,
        &format!(r#"<div id="deliveries" hx-get="{deliveries}" hx-trigger="every 5s""#),
    );
    d.assert(200, r#"<span class="badge failing">failed</span>"#);
    d.assert(200, r#"<a href="/app/"#);
    d.assert(200, r#"<time class="rel" datetime=""#);

    // Another tenant's ids are not found.
    let mut stranger = Browser::new(&app);
    stranger.sign_up("Other", "ops@other.example").await;
    for path in [&poll, &deliveries] {
        let p = stranger.get(path).await;
        assert_eq!(p.status, 404, "{path}: {}", p.body);
    }
}

#[tokio::test]
async fn the_portals_cookie_check_says_whether_the_cookie_came_back() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let first = b.get("/portal/cookie-check").await;
    first.assert(200, r#"{"kept":false}"#);
    let set = first.set_cookies().join(" | ");
    assert!(
        set.contains("hookd_probe=1; Path=/portal; Max-Age=60; HttpOnly; SameSite=Lax"),
        "{set}"
    );
    b.get("/portal/cookie-check")
        .await
        .assert(200, r#"{"kept":true}"#);
    // The landing page carries where to ask, and the words for a frame that cannot keep it.
    let landing = b.get("/portal/").await;
    landing.assert(200, r#"data-check="/portal/cookie-check""#);
    landing.assert(200, "Open it in its own tab");
}
