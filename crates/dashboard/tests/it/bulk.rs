//! Bulk actions: a preview with the count before anything starts, the job's progress page
//! (polled), and cancel.

use serde_json::json;

use crate::helpers::{
    Browser, api, app_with_endpoint, fail_due_deliveries, send_message, spawn_app,
};

async fn task(base: &str, key: &str, id: &str) -> serde_json::Value {
    reqwest::Client::new()
        .get(format!("{base}/api/v1/background-task/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .expect("task")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn recover_shows_its_count_then_progress_and_a_cancel_stops_it() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    for n in 0..3 {
        send_message(&app, &key, &app_id, "order.paid", json!({ "n": n })).await;
    }
    assert_eq!(fail_due_deliveries(&app, "down").await, 3);
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let csrf = b.get(&ep_page).await.csrf();

    let preview = b
        .post(
            &format!("{ep_page}/recover"),
            &[("csrf", &csrf), ("since", "2000-01-01T00:00")],
        )
        .await;
    preview.assert(
        200,
        "Recover 3 failed messages since 2000-01-01 00:00:00 UTC?",
    );
    assert!(preview.body.contains(r#"name="expected" value="3""#));
    assert!(
        preview
            .body
            .contains(&format!(r#"href="{ep_page}">Cancel</a>"#))
    );

    let start = [
        ("csrf", csrf.as_str()),
        ("kind", "endpoint.recover"),
        ("since", "946684800000"),
        ("expected", "3"),
    ];
    let r = b.post(&format!("{ep_page}/bulk/start"), &start).await;
    assert_eq!(r.status, 303, "{}", r.body);
    let job_page = r.location().to_owned();
    let job_id = job_page.rsplit('/').next().expect("job id").to_owned();
    let running = b.get(&job_page).await;
    running.assert(200, "Running: 0 of 3 failed messages queued again so far.");
    assert!(running.body.contains("Cancel the job"));
    // htmx's poll gets the progress alone, which keeps polling while the job runs.
    let poll = b.get_with(&job_page, &[("HX-Request", "true")]).await;
    poll.assert(200, r#"hx-trigger="every 1s""#);
    assert!(!poll.body.contains("<html"), "{}", poll.body);

    // Another tenant, and another endpoint of this tenant, do not find the job.
    let (_, other_ep) = {
        let ep = api(
            &app,
            &key,
            &format!("/app/{app_id}/endpoint"),
            json!({"url": "http://127.0.0.1:9/other"}),
        )
        .await;
        ((), ep["id"].as_str().expect("id").to_owned())
    };
    let elsewhere = format!("/app/{app_id}/endpoint/{other_ep}/job/{job_id}");
    assert_eq!(b.get(&elsewhere).await.status, 404);
    let mut stranger = Browser::new(&app);
    let their_key = stranger.sign_up("Other", "ops@other.example").await;
    let (their_app, their_ep) = app_with_endpoint(&app, &their_key, "http://127.0.0.1:9/o").await;
    let theirs = format!("/app/{their_app}/endpoint/{their_ep}/job/{job_id}");
    assert_eq!(stranger.get(&theirs).await.status, 404);
    let their_csrf = stranger.get("/").await.csrf();
    let r = stranger
        .post(&format!("{theirs}/cancel"), &[("csrf", &their_csrf)])
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(task(&app.base, &key, &job_id).await["status"], "running");

    // Cancel: the job reads canceled here and in the API, and the polling stops.
    let r = b
        .post(&format!("{job_page}/cancel"), &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let canceled = b.get(r.location()).await;
    canceled.assert(
        200,
        "Canceled: 0 failed messages queued again before it stopped",
    );
    assert!(!canceled.body.contains("Cancel the job"));
    let poll = b.get_with(&job_page, &[("HX-Request", "true")]).await;
    assert!(!poll.body.contains("hx-trigger"), "{}", poll.body);
    let t = task(&app.base, &key, &job_id).await;
    assert_eq!(
        (t["status"].as_str(), &t["data"]),
        (Some("canceled"), &json!({"deliveries": 0}))
    );
}

#[tokio::test]
async fn replay_missing_counts_the_messages_the_endpoint_never_got() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let a = api(&app, &key, "/app", json!({"name": "Shop"})).await;
    let app_id = a["id"].as_str().expect("id");
    for n in 0..2 {
        send_message(&app, &key, app_id, "order.paid", json!({ "n": n })).await;
    }
    // The endpoint is made after the messages: it never got them.
    let ep = api(
        &app,
        &key,
        &format!("/app/{app_id}/endpoint"),
        json!({"url": "http://127.0.0.1:9/late"}),
    )
    .await;
    let ep_page = format!("/app/{app_id}/endpoint/{}", ep["id"].as_str().expect("id"));
    let page = b.get(&ep_page).await;
    page.assert(200, "Replay missing messages");
    let csrf = page.csrf();
    let preview = b
        .post(
            &format!("{ep_page}/replay-missing"),
            &[("csrf", &csrf), ("since", "2000-01-01T00:00")],
        )
        .await;
    preview.assert(
        200,
        "Replay 2 missing messages since 2000-01-01 00:00:00 UTC?",
    );
    assert!(
        preview
            .body
            .contains(r#"name="kind" value="endpoint.replay""#)
    );
    let start = [
        ("csrf", csrf.as_str()),
        ("kind", "endpoint.replay"),
        ("since", "946684800000"),
        ("expected", "2"),
    ];
    let r = b.post(&format!("{ep_page}/bulk/start"), &start).await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location()).await.assert(
        200,
        "Replaying missing messages since 2000-01-01 00:00:00 UTC",
    );
    // A kind the page never offers is refused with a message.
    let bad = [("csrf", csrf.as_str()), ("kind", "explode"), ("since", "0")];
    b.post(&format!("{ep_page}/bulk/start"), &bad)
        .await
        .assert(422, "Choose recover or replay.");
}
