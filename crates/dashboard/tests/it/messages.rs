//! Messages, message detail with its actions, and dead letters.

use serde_json::json;

use crate::helpers::{Browser, app_with_endpoint, fail_due_deliveries, send_message, spawn_app};

/// How many links to a message's detail page `body` holds.
fn message_links(body: &str, app_id: &str) -> usize {
    body.matches(&format!(r#"href="/app/{app_id}/msg/msg_"#))
        .count()
}

async fn background_tasks(base: &str, key: &str) -> Vec<serde_json::Value> {
    let tasks = reqwest::Client::new()
        .get(format!("{base}/api/v1/background-task"))
        .bearer_auth(key)
        .send()
        .await
        .expect("tasks")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    tasks["data"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn message_detail_shows_the_payload_escaped_and_every_attempt() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    // Raw text, so that the keys are not in sorted order.
    let sent: serde_json::Value = reqwest::Client::new()
        .post(format!("{}/api/v1/app/{app_id}/msg", app.base))
        .bearer_auth(&key)
        .header("Content-Type", "application/json")
        .body(r#"{"eventType": "invoice.paid", "payload": {"zeta":1,"html":"<script>alert(1)</script>"}}"#)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let msg_id = sent["id"].as_str().expect("message id").to_owned();
    assert_eq!(fail_due_deliveries(&app, "<b>upstream down</b>").await, 1);

    // Found from the overview, the listing and the endpoint page.
    let home = b.get("/").await;
    home.assert(200, &format!(r#"href="/app/{app_id}/msg""#));
    let list = b.get(&format!("/app/{app_id}/msg")).await;
    list.assert(200, &format!(r#"href="/app/{app_id}/msg/{msg_id}""#));
    assert!(list.body.contains("invoice.paid"));
    let ep_page = b.get(&format!("/app/{app_id}/endpoint/{ep_id}")).await;
    ep_page.assert(200, &format!(r#"href="/app/{app_id}/msg/{msg_id}""#));
    assert!(
        ep_page
            .body
            .contains(&format!(r#"href="/app/{app_id}/endpoint/{ep_id}/dead""#))
    );

    let page = b.get(&format!("/app/{app_id}/msg/{msg_id}")).await;
    // Pretty-printed, in the order sent, and escaped: the markup is text, not a script.
    page.assert(
        200,
        "{\n  &#34;zeta&#34;: 1,\n  &#34;html&#34;: &#34;&#60;script&#62;alert(1)&#60;/script&#62;&#34;\n}",
    );
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    // The delivery, its state and its attempt with the (escaped) response.
    assert!(
        page.body
            .contains(r#"<span class="badge failing">failed</span>"#)
    );
    assert!(
        page.body
            .contains(r#"<span class="badge failing">500</span>"#)
    );
    assert!(page.body.contains("&#60;b&#62;upstream down&#60;/b&#62;"));
    assert!(page.body.contains("42 ms"));
    assert!(page.body.contains("http://127.0.0.1:9/hook"));
    assert!(page.body.contains(">Resend</button>"));
    assert!(
        page.body
            .contains(">Replay all failed since this message</button>")
    );

    // An unknown message of one's own application is 404 too.
    b.get(&format!("/app/{app_id}/msg/msg_nope"))
        .await
        .assert(404, "Not found");
}

#[tokio::test]
async fn resend_and_replay_need_the_csrf_token_and_confirm_what_they_did() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let msg_id = send_message(&app, &key, &app_id, "a.b", json!({"n": 1})).await;
    fail_due_deliveries(&app, "nope").await;
    let detail = format!("/app/{app_id}/msg/{msg_id}");
    let resend = format!("{detail}/endpoint/{ep_id}/resend");
    let replay = format!("{detail}/endpoint/{ep_id}/replay");

    // Without the token (or with a forged one): refused, nothing changes.
    b.post(&resend, &[])
        .await
        .assert(403, "did not come from this dashboard");
    b.post(&replay, &[("csrf", "forged")])
        .await
        .assert(403, "did not come from this dashboard");
    let page = b.get(&detail).await;
    page.assert(200, r#"<span class="badge failing">failed</span>"#);
    assert!(background_tasks(&app.base, &key).await.is_empty());

    // Resend: the delivery is due again now, and the page says so.
    let csrf = page.csrf();
    let r = b.post(&resend, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{detail}?done=resent&ep={ep_id}"));
    let done = b.get(r.location()).await;
    done.assert(200, "Resend queued");
    assert!(
        done.body
            .contains(r#"<span class="badge open">pending</span>"#),
        "{}",
        done.body
    );

    // Replay: a preview of the recovery from the message's creation; nothing starts yet.
    let r = b.post(&replay, &[("csrf", &csrf)]).await;
    r.assert(
        200,
        &format!("No failed messages from message {msg_id} on to recover."),
    );
    assert!(background_tasks(&app.base, &key).await.is_empty());

    // An action the page does not offer is 404.
    let r = b
        .post(
            &format!("{detail}/endpoint/{ep_id}/explode"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn another_tenants_messages_and_dead_letters_are_404() {
    let app = spawn_app().await;
    let mut alice = Browser::new(&app);
    let key = alice.sign_up("Alice Inc", "alice@example.com").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/a").await;
    let msg_id = send_message(&app, &key, &app_id, "secret.event", json!({"pin": "4711"})).await;
    fail_due_deliveries(&app, "down").await;
    let detail = format!("/app/{app_id}/msg/{msg_id}");
    let dead = format!("/app/{app_id}/endpoint/{ep_id}/dead");
    alice.get(&detail).await.assert(200, "4711");

    let mut mallory = Browser::new(&app);
    mallory.sign_up("Mallory", "mallory@example.com").await;
    let token = mallory.get("/").await.csrf();
    for path in [format!("/app/{app_id}/msg"), detail.clone(), dead.clone()] {
        let r = mallory.get(&path).await;
        r.assert(404, "belongs to another account");
        assert!(
            !r.body.contains("4711") && !r.body.contains("secret.event"),
            "{path}"
        );
    }
    for path in [
        format!("{detail}/endpoint/{ep_id}/resend"),
        format!("{detail}/endpoint/{ep_id}/replay"),
        format!("/app/{app_id}/endpoint/{ep_id}/recover-all"),
    ] {
        let r = mallory.post(&path, &[("csrf", &token)]).await;
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }
    // Nothing happened to Alice's message.
    alice
        .get(&detail)
        .await
        .assert(200, r#"<span class="badge failing">failed</span>"#);
    assert!(background_tasks(&app.base, &key).await.is_empty());
}

#[tokio::test]
async fn messages_filter_by_event_type_and_page_to_older_ones() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let first = send_message(&app, &key, &app_id, "rare.event", json!({})).await;
    for i in 0..51 {
        send_message(&app, &key, &app_id, "common.event", json!({"i": i})).await;
    }

    let page = b.get(&format!("/app/{app_id}/msg")).await;
    page.assert(200, "Older");
    assert_eq!(message_links(&page.body, &app_id), 50);
    assert!(
        !page.body.contains(&first),
        "the oldest is on the next page"
    );
    let marker = r#"<a href=""#;
    let older = page
        .body
        .rmatch_indices(marker)
        .map(|(i, _)| &page.body[i + marker.len()..])
        .find(|rest| rest.contains("Older"))
        .and_then(|rest| rest.split('"').next())
        .expect("older link")
        .replace("&#38;", "&");
    assert!(older.contains("iterator=msg_"), "{older}");
    let next = b.get(&older).await;
    next.assert(200, &first);
    assert_eq!(message_links(&next.body, &app_id), 2);
    assert!(!next.body.contains("Older"));
    assert!(next.body.contains(">Newest</a>"));

    let rare = b
        .get(&format!("/app/{app_id}/msg?event_type=rare.event"))
        .await;
    rare.assert(200, &first);
    assert_eq!(message_links(&rare.body, &app_id), 1);
    assert!(!rare.body.contains("Older"));
    let none = b
        .get(&format!("/app/{app_id}/msg?event_type=%3Cb%3E"))
        .await;
    none.assert(200, "No messages match these filters");
    assert!(none.body.contains("&#60;b&#62;") && !none.body.contains("<b>"));
}

#[tokio::test]
async fn dead_letters_list_failed_deliveries_and_recover_all_of_them() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let dead = format!("/app/{app_id}/endpoint/{ep_id}/dead");
    b.get(&dead).await.assert(200, "No dead letters");

    let failed = send_message(&app, &key, &app_id, "order.failed", json!({})).await;
    fail_due_deliveries(&app, "down").await;
    let pending = send_message(&app, &key, &app_id, "order.pending", json!({})).await;

    let page = b.get(&dead).await;
    page.assert(200, &format!(r#"href="/app/{app_id}/msg/{failed}""#));
    assert!(
        !page.body.contains(&pending),
        "only failed deliveries are dead letters"
    );
    assert!(
        page.body
            .contains(r#"<span class="badge failing">500</span>"#)
    );

    let recover = format!("/app/{app_id}/endpoint/{ep_id}/recover-all");
    b.post(&recover, &[])
        .await
        .assert(403, "did not come from this dashboard");
    assert!(background_tasks(&app.base, &key).await.is_empty());

    // "Recover all" asks first, with the count; confirming starts the job.
    let csrf = page.csrf();
    let preview = b.post(&recover, &[("csrf", &csrf)]).await;
    preview.assert(200, "Recover 1 failed message ever?");
    assert!(background_tasks(&app.base, &key).await.is_empty());
    let start = format!("/app/{app_id}/endpoint/{ep_id}/bulk/start");
    let form = [
        ("csrf", csrf.as_str()),
        ("kind", "endpoint.recover"),
        ("since", "0"),
        ("expected", "1"),
    ];
    let r = b.post(&start, &form).await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location())
        .await
        .assert(200, "Running: 0 of 1 failed message queued again so far.");
    let tasks = background_tasks(&app.base, &key).await;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
}

#[tokio::test]
async fn messages_filter_by_status_id_and_dates_and_charts_count_the_attempts() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let failed = send_message(&app, &key, &app_id, "order.failed", json!({})).await;
    fail_due_deliveries(&app, "down").await;
    let pending = send_message(&app, &key, &app_id, "order.pending", json!({})).await;
    let list = format!("/app/{app_id}/msg");

    let dead = b.get(&format!("{list}?status=failed")).await;
    dead.assert(200, &failed);
    assert_eq!(message_links(&dead.body, &app_id), 1, "only the dead one");
    let waiting = b.get(&format!("{list}?status=pending")).await;
    waiting.assert(200, &pending);
    assert_eq!(message_links(&waiting.body, &app_id), 1);

    let by_id = b.get(&format!("{list}?q={pending}")).await;
    assert_eq!(message_links(&by_id.body, &app_id), 1);
    assert!(by_id.body.contains(&pending));
    let nothing = b.get(&format!("{list}?q=msg_nope")).await;
    nothing.assert(200, "No messages match these filters");

    // A range that ends before the first message holds nothing; one around now holds both.
    let empty = b.get(&format!("{list}?until=2020-01-01T00:00")).await;
    empty.assert(200, "No messages match these filters");
    let now = domain::Timestamp::now().as_millis();
    let hour_ago = domain::time::rfc3339::format(domain::Timestamp::from_millis(now - 3_600_000));
    let around = b.get(&format!("{list}?since={}", &hour_ago[..16])).await;
    assert_eq!(message_links(&around.body, &app_id), 2, "{}", around.body);

    let bad = b.get(&format!("{list}?since=yesterday&status=lost")).await;
    bad.assert(200, "These filters could not be used");
    assert!(
        bad.body
            .contains("From “yesterday” is not a date and time.")
    );
    assert!(bad.body.contains("Unknown status “lost”."));

    // The dead letter was counted as an attempt: the charts say so, tenant-wide and per endpoint.
    let overview = b.get("/").await;
    overview.assert(200, "1 attempt: 0 delivered, 0 to retry, 1 dead");
    assert!(overview.body.contains("1 delivery failed for good"));
    assert!(
        overview
            .body
            .contains(r#"<svg viewBox="0 0 720 160" class="chart""#)
    );
    let charts = b
        .get(&format!("/app/{app_id}/endpoint/{ep_id}/charts"))
        .await;
    charts.assert(200, "0.0 % of attempts succeeded");

    // Each range draws a bounded number of buckets, each with its values on hover, and the
    // dead letter is in exactly one of them; the switch keeps the range in the page's address.
    for (range, max, heading) in [
        ("1h", 61, "Last hour"),
        ("24h", 145, "Last 24 hours"),
        ("7d", 169, "Last 7 days"),
    ] {
        let charts = b
            .get(&format!(
                "/app/{app_id}/endpoint/{ep_id}/charts?range={range}"
            ))
            .await;
        charts.assert(200, heading);
        let buckets = charts.body.matches(r#"class="hit""#).count();
        assert!(buckets > 0 && buckets <= 4 * max, "{range}: {buckets}");
        assert_eq!(
            charts.body.matches(", 1 dead</title>").count(),
            1,
            "{range}"
        );
        assert!(charts.body.contains(&format!(
            r#"hx-get="/app/{app_id}/endpoint/{ep_id}/charts?range={range}" hx-trigger="every 30s""#
        )));
        assert!(charts.body.contains(&format!(
            r#"hx-push-url="/app/{app_id}/endpoint/{ep_id}?range={range}" title="{heading}" aria-current="true""#
        )));
    }
    let page = b
        .get(&format!("/app/{app_id}/endpoint/{ep_id}?range=7d"))
        .await;
    page.assert(200, "Last 7 days");
    b.get("/?range=1h").await.assert(200, "Last hour");
}

#[tokio::test]
async fn the_range_and_today_are_read_in_the_browsers_time_zone() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let msg = send_message(&app, &key, &app_id, "order.paid", json!({})).await;
    let list = format!("/app/{app_id}/msg");
    let now = domain::Timestamp::now();

    // "Until ten minutes from now", typed in New York (UTC−5 here), holds the message; the
    // same text read as UTC ends five hours earlier and holds nothing.
    let ny = when_at(now.as_millis() + 600_000, -300);
    let local = b.get(&format!("{list}?until={ny}&tz=-300")).await;
    assert_eq!(message_links(&local.body, &app_id), 1, "{}", local.body);
    local.assert(200, "To <span data-tz-label>(your time, UTC−05:00)</span>");
    assert!(
        local
            .body
            .contains(&format!(r#"value="{ny}" data-tz-from="-300""#))
    );
    // Its links keep the zone.
    assert!(
        local.body.contains("msg?tz=-300&#38;range=today"),
        "{}",
        local.body
    );
    let as_utc = b.get(&format!("{list}?until={ny}")).await;
    assert_eq!(message_links(&as_utc.body, &app_id), 0, "{}", as_utc.body);
    as_utc.assert(200, "To <span data-tz-label>(UTC)</span>");

    // "Today" starts at the browser's midnight, shown as such.
    let today = b.get(&format!("{list}?range=today&tz=-300")).await;
    assert!(today.body.contains(&msg));
    let midnight = format!("{}T00:00", &when_at(now.as_millis(), -300)[..10]);
    assert!(
        today
            .body
            .contains(&format!(r#"value="{midnight}" data-tz-from="-300""#)),
        "{}",
        today.body
    );

    let bad = b.get(&format!("{list}?tz=EST")).await;
    bad.assert(200, "Your browser sent a time zone we cannot read");
}

/// `datetime-local` text for `ms` at `offset` minutes east of UTC.
fn when_at(ms: i64, offset: i64) -> String {
    domain::time::rfc3339::format(domain::Timestamp::from_millis(ms + offset * 60_000))[..16]
        .to_owned()
}

#[tokio::test]
async fn a_large_payload_renders_a_small_page_with_a_download() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    // About 1 MiB, nested as deeply as the API allows, with many small values: indented per
    // level it made a page of over 100 MB.
    let items: Vec<serde_json::Value> = (0..70_000).map(|i| json!([[[i]]])).collect();
    let mut payload = json!({"items": items});
    for _ in 0..59 {
        payload = json!({"d": payload});
    }
    let raw = payload.to_string();
    assert!(raw.len() > 800_000, "{}", raw.len());
    let msg_id = send_message(&app, &key, &app_id, "big.event", payload).await;
    let page = b.get(&format!("/app/{app_id}/msg/{msg_id}")).await;
    page.assert(200, "Download the whole payload");
    assert!(
        page.body.len() < 200_000,
        "page of {} bytes",
        page.body.len()
    );
    assert!(page.body.contains(&format!("of {} bytes", raw.len())));
    let download = b.get(&format!("/app/{app_id}/msg/{msg_id}/payload")).await;
    assert_eq!(download.status, 200);
    assert_eq!(download.body, raw, "the payload exactly as sent");
    assert!(
        download.headers["content-disposition"]
            .to_str()
            .unwrap()
            .contains("attachment")
    );
}

/// The sources page (issue 21) lists each source with where senders post and how it verifies,
/// and links to the events it received: its application's messages with the source's tag,
/// not the application's other messages.
#[tokio::test]
async fn the_sources_page_lists_each_source_and_links_to_the_events_it_received() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let empty = b.get("/sources").await;
    empty.assert(200, "No sources yet.");
    let source = crate::helpers::api(
        &app,
        &key,
        "/inbound/source",
        json!({"name": "partner", "appId": app_id, "eventType": "partner.event",
               "verification": {"scheme": "none"}}),
    )
    .await;
    let url = source["url"].as_str().expect("source url").to_owned();
    let id = source["id"].as_str().expect("source id");
    let received = reqwest::Client::new()
        .post(format!("{}/in/{id}", app.base))
        .header("content-type", "application/json")
        .body(r#"{"from":"the partner"}"#)
        .send()
        .await
        .expect("post to the source");
    assert_eq!(received.status(), 200);
    let received: serde_json::Value = received.json().await.expect("json");
    let inbound_id = received["id"].as_str().expect("stored").to_owned();
    let direct = send_message(&app, &key, &app_id, "direct.event", json!({"n": 1})).await;

    let page = b.get("/sources").await;
    page.assert(200, "partner");
    assert!(page.body.contains(&url), "the URL senders post to");
    assert!(page.body.contains("none") && page.body.contains("Shop"));
    assert!(
        b.get("/").await.body.contains(r#"href="/sources""#),
        "in the nav"
    );
    let events = format!("/app/{app_id}/msg?tag=source-partner");
    assert!(page.body.contains(&events), "{}", page.body);
    let list = b.get(&events).await;
    list.assert(200, &inbound_id);
    assert!(
        !list.body.contains(&direct),
        "only what the source received"
    );
    assert!(list.body.contains(r#"name="tag" value="source-partner""#));

    // Each source's bad signatures and held events, once written (every second).
    let stripe = crate::helpers::api(
        &app,
        &key,
        "/inbound/source",
        json!({"name": "stripe", "appId": app_id, "eventType": "stripe.event",
               "verification": {"scheme": "stripe", "secret": "whsec_0123456789abcdef"}}),
    )
    .await;
    let client = reqwest::Client::new();
    for _ in 0..2 {
        let refused = client
            .post(format!(
                "{}/in/{}",
                app.base,
                stripe["id"].as_str().unwrap()
            ))
            .header("Stripe-Signature", "t=1,v1=00")
            .body(r#"{"id":"evt_1"}"#)
            .send()
            .await
            .expect("post");
        assert_eq!(refused.status(), 401);
    }
    let held = client
        .post(format!("{}/in/{id}", app.base))
        .header("webhook-ordering-key", "k")
        .header("webhook-sequence", "2")
        .body(r#"{"n":2}"#)
        .send()
        .await
        .expect("post");
    assert_eq!(held.status(), 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = b.get("/sources").await;
        let shown = page.body.contains(r#"2 <span class="muted">(last"#)
            && page.body.contains("1, the oldest for")
            && page
                .body
                .contains("by webhook-ordering-key; gaps held 60 s");
        if shown {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "counts not shown:\n{}",
            page.body
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// The table row of message `id` in a listing page.
fn row_of<'a>(body: &'a str, id: &str) -> &'a str {
    body.split("<tr>")
        .find(|row| row.contains(&format!("/msg/{id}\"")))
        .unwrap_or_else(|| panic!("no row for {id}: {body}"))
}

#[tokio::test]
async fn the_message_log_shows_each_endpoints_status_and_scopes_to_one_endpoint() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, first_ep) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/first").await;
    let dead = send_message(&app, &key, &app_id, "order.paid", json!({"n": 1})).await;
    assert_eq!(fail_due_deliveries(&app, "down").await, 1);
    let second_ep = crate::helpers::api(
        &app,
        &key,
        &format!("/app/{app_id}/endpoint"),
        json!({"url": "http://127.0.0.1:9/second"}),
    )
    .await["id"]
        .as_str()
        .expect("endpoint id")
        .to_owned();
    let fresh = send_message(&app, &key, &app_id, "order.paid", json!({"n": 2})).await;

    // The whole application's log: a status per endpoint on each row; a failed message
    // reads dead, never like a delivered one.
    let list = b.get(&format!("/app/{app_id}/msg")).await;
    list.assert(200, "<th>Status</th>");
    let row = row_of(&list.body, &dead);
    assert!(
        row.contains(r#"<span class="badge failing">Dead</span>"#),
        "{row}"
    );
    assert!(row.contains("http://127.0.0.1:9/first"), "{row}");
    assert!(
        !row.contains("Delivered") && !row.contains("/second"),
        "{row}"
    );
    let row = row_of(&list.body, &fresh);
    assert_eq!(
        row.matches(r#"<span class="badge open">Pending</span>"#)
            .count(),
        2,
        "{row}"
    );
    assert!(row.contains("next try"), "{row}");

    // The endpoint page's Messages opens that endpoint's log.
    let ep_page = b.get(&format!("/app/{app_id}/endpoint/{second_ep}")).await;
    let log_href = format!("/app/{app_id}/msg?endpoint={second_ep}");
    ep_page.assert(200, &format!(r#"href="{log_href}">Messages</a>"#));
    let log = b.get(&log_href).await;
    log.assert(200, "Messages to this endpoint");
    assert!(log.body.contains(&format!("/msg/{fresh}\"")));
    assert!(
        !log.body.contains(&format!("/msg/{dead}\"")),
        "{}",
        log.body
    );
    // One endpoint's status per row: its URL need not be repeated.
    let row = row_of(&log.body, &fresh);
    assert_eq!(row.matches("badge open").count(), 1, "{row}");
    // The filters keep the scope; a status filter asks about this endpoint's delivery.
    assert!(
        log.body
            .contains(&format!(r#"name="endpoint" value="{second_ep}""#))
    );
    let first_dead = b
        .get(&format!(
            "/app/{app_id}/msg?endpoint={first_ep}&status=failed"
        ))
        .await;
    assert!(first_dead.body.contains(&format!("/msg/{dead}\"")));
    assert!(!first_dead.body.contains(&format!("/msg/{fresh}\"")));
    let second_dead = b
        .get(&format!(
            "/app/{app_id}/msg?endpoint={second_ep}&status=failed"
        ))
        .await;
    second_dead.assert(200, "No messages match these filters.");

    // Quick ranges beside the exact one, keeping the other filters.
    log.assert(
        200,
        &format!(r#"href="/app/{app_id}/msg?endpoint={second_ep}&#38;range=1h">Last hour</a>"#),
    );
    let today = b.get(&format!("/app/{app_id}/msg?range=today")).await;
    today.assert(
        200,
        r#"aria-current="true">Today<span data-tz-today> (UTC)</span></a>"#,
    );
    assert!(today.body.contains(&format!("/msg/{dead}\"")));
    let week = b.get(&format!("/app/{app_id}/msg?range=7d")).await;
    assert_eq!(message_links(&week.body, &app_id), 2);

    // Bad input is named on the page.
    let bad = b
        .get(&format!("/app/{app_id}/msg?endpoint=ep_nope&range=1y"))
        .await;
    bad.assert(200, "That endpoint is not one of this application");
    bad.assert(200, "Unknown range “1y”.");
}
