//! Early warnings in the dashboard: the overview lists endpoints at risk of the auto-disable
//! (oldest streak first, with the time left), and Settings chooses who gets warning emails.

use serde_json::json;

use crate::helpers::{Browser, app_with_endpoint, fail_due_deliveries, send_message, spawn_app};

#[tokio::test]
async fn the_overview_lists_a_failing_endpoint_with_the_time_left_and_links_its_page() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (a, e) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/down").await;

    let healthy = b.get("/").await;
    healthy.assert(200, "127.0.0.1:9/down");
    assert!(
        !healthy.body.contains("Endpoints at risk"),
        "nothing failing, nothing at risk"
    );

    send_message(&app, &key, &a, "order.created", json!({})).await;
    assert_eq!(fail_due_deliveries(&app, "down").await, 1);
    let page = b.get("/").await;
    page.assert(200, "Endpoints at risk");
    let section = &page.body[page.body.find(r#"id="at-risk""#).unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    let link = format!(r#"href="/app/{a}/endpoint/{e}">http://127.0.0.1:9/down</a>"#);
    assert!(section.contains(&link), "{section}");
    // The default endpoint_disable_after is 5 days: just under that is left.
    assert!(
        section.contains(r#"<strong class="time-left">4 days 23 hours</strong>"#),
        "{section}"
    );
    assert!(
        section.contains(r#"<time class="rel""#),
        "failing since, as a time"
    );

    // Following the link opens the endpoint's page.
    let start = section.find("href=\"").unwrap() + 6;
    let href = &section[start..start + section[start..].find('"').unwrap()];
    b.get(href).await.assert(200, "http://127.0.0.1:9/down");
}

#[tokio::test]
async fn settings_choose_who_gets_warning_emails_with_errors_by_the_field() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "ops@acme.example").await;
    let page = b.get("/settings").await;
    page.assert(
        200,
        r#"<input type="radio" name="recipient" value="notification" checked>"#,
    );
    page.assert(200, "The notification email (ops@acme.example)");
    let csrf = page.csrf();

    let forged = b
        .post(
            "/settings/warnings",
            &[("csrf", "forged"), ("recipient", "nobody")],
        )
        .await;
    forged.assert(403, "did not come from this dashboard");

    let bad = b
        .post(
            "/settings/warnings",
            &[
                ("csrf", &csrf),
                ("recipient", "other"),
                ("address", "oncall"),
            ],
        )
        .await;
    bad.assert(
        422,
        r#"id="warn_address-error">“oncall” is not an email address"#,
    );
    bad.assert(422, r#"value="oncall" aria-invalid="true""#);
    let empty = b
        .post(
            "/settings/warnings",
            &[("csrf", &csrf), ("recipient", "other"), ("address", "")],
        )
        .await;
    empty.assert(422, "Enter the address that gets warning emails.");

    let saved = b
        .post(
            "/settings/warnings",
            &[
                ("csrf", &csrf),
                ("recipient", "other"),
                ("address", "oncall@acme.example"),
            ],
        )
        .await;
    assert_eq!(saved.status.as_u16(), 303, "{}", saved.body);
    let after = b.get(saved.location()).await;
    after.assert(200, "early warnings go there");
    after.assert(200, r#"value="other" checked>"#);
    after.assert(200, r#"value="oncall@acme.example""#);

    let nobody = b
        .post(
            "/settings/warnings",
            &[("csrf", &csrf), ("recipient", "nobody"), ("address", "")],
        )
        .await;
    assert_eq!(nobody.status.as_u16(), 303);
    b.get("/settings")
        .await
        .assert(200, r#"value="nobody" checked>"#);
}
