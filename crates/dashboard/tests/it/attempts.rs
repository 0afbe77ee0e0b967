//! The attempt page: a real dispatcher sends to a real receiver (`hookd sink`), and the page
//! reached from the message's page shows the request and response as they were, with what
//! happened and what comes next in words, on every backend.

use std::time::{Duration, Instant};

use bench::sink::{Behaviour, Sink, SinkConfig};
use serde_json::json;

use crate::helpers::{Browser, Page, api, send_message};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn sink(status: u16, retry_after: Option<&str>) -> Sink {
    Sink::start(SinkConfig {
        bind: "127.0.0.1:0".parse().expect("address"),
        secrets: vec![domain::signing::SigningSecret::parse(SECRET).expect("secret")],
        behaviour: Behaviour {
            fail_rate: 1.0,
            fail_status: status,
            retry_after: retry_after.map(str::to_owned),
            ..Default::default()
        },
        report: None,
        record: true,
    })
    .expect("start sink")
}

/// The links to attempt pages on `page`, in order.
fn attempt_links(page: &Page) -> Vec<String> {
    page.body
        .split("href=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .filter(|href| href.contains("/attempt/"))
        .map(str::to_owned)
        .collect()
}

/// Reloads `path` until it links to `n` attempt pages (the dispatcher runs on its own).
async fn page_with_attempts(b: &mut Browser, path: &str, n: usize) -> Page {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let page = b.get(path).await;
        if attempt_links(&page).len() >= n {
            return page;
        }
        assert!(
            Instant::now() < deadline,
            "no {n} attempts on {path}: {}",
            page.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_attempt_page_shows_the_request_and_response_and_says_what_comes_next() {
    for app in testkit::TestApp::all(&[
        ("HOOKD_ROLES", "all"),
        ("HOOKD_DELIVERY_POLL_INTERVAL", "50ms"),
    ])
    .await
    {
        let refusing = sink(401, None);
        let busy = sink(503, Some("7"));
        let mut b = Browser::new(&app);
        let key = b.sign_up("Acme", "ops@acme.example").await;
        let app_id = api(&app, &key, "/app", json!({"name": "Shop"})).await["id"]
            .as_str()
            .expect("app id")
            .to_owned();
        for (sink, path) in [(&refusing, "/refusing"), (&busy, "/busy")] {
            api(
                &app,
                &key,
                &format!("/app/{app_id}/endpoint"),
                json!({"url": sink.url(path), "secret": SECRET,
                       "headers": {"X-Team": "blue-team-value"}}),
            )
            .await;
        }
        let msg = send_message(&app, &key, &app_id, "order.paid", json!({"n": 1})).await;

        // From the message's page, by its links.
        let message = page_with_attempts(&mut b, &format!("/app/{app_id}/msg/{msg}"), 2).await;
        let pages: Vec<Page> = {
            let mut pages = Vec::new();
            for link in attempt_links(&message) {
                pages.push(b.get(&link).await);
            }
            pages
        };
        let by_url = |path: &str| {
            pages
                .iter()
                .find(|p| p.body.contains("POST http://127.0.0.1:") && p.body.contains(path))
                .unwrap_or_else(|| panic!("{}: no attempt page for {path}", app.backend))
        };

        // The request as the receiver got it: the id, this try's timestamp and signature.
        let refused = by_url("/refusing");
        refused.assert(200, "webhook-signature");
        let got = refusing.state.received();
        let got = &got[0].headers;
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            let sent = got.get(name).unwrap_or_else(|| panic!("{name} received"));
            assert!(
                refused.body.contains(&format!(
                    r#"<td class="mono">{name}</td><td class="mono detail">{sent}"#
                )),
                "{}: {name} {sent} not shown: {}",
                app.backend,
                refused.body
            );
        }
        assert!(refused.body.contains("blue-team-value"), "{}", app.backend);
        assert!(
            refused
                .body
                .contains(&format!("/app/{app_id}/msg/{msg}/payload"))
        );
        // The response and, in words, why it ends here and where that is decided.
        assert!(
            refused
                .body
                .contains("The endpoint answered 401 Unauthorized"),
            "{}",
            refused.body
        );
        assert!(
            refused
                .body
                .contains("401 ends retries under this endpoint")
                && refused
                    .body
                    .contains("change it in Settings → Failed deliveries"),
            "{}: {}",
            app.backend,
            refused.body
        );

        // A failure that is retried: its response headers, and when the next try comes.
        let retried = by_url("/busy");
        assert!(
            retried
                .body
                .contains(r#"<td class="mono">retry-after</td><td class="mono detail">7</td>"#),
            "{}: {}",
            app.backend,
            retried.body
        );
        assert!(
            retried.body.contains("503 Service Unavailable"),
            "{}",
            retried.body
        );
        assert!(
            retried.body.contains("Next attempt in "),
            "{}",
            retried.body
        );

        // The customer's portal shows the same page, without custom header values unless the
        // link may see them, and without any setting's name.
        let access = api(
            &app,
            &key,
            &format!("/auth/app-portal-access/{app_id}"),
            json!({"capabilities": ["ViewBase"]}),
        )
        .await;
        let token = access["token"].as_str().expect("token");
        let mut customer = Browser::new(&app);
        customer
            .post_with(
                "/portal/session",
                &[("token", token)],
                &[("sec-fetch-site", "same-origin")],
            )
            .await;
        let message = customer
            .get(&format!("/portal/app/{app_id}/msg/{msg}"))
            .await;
        let mut seen = 0;
        for link in attempt_links(&message) {
            assert!(link.starts_with("/portal/"), "{link}");
            let page = customer.get(&link).await;
            page.assert(200, "webhook-signature");
            assert!(!page.body.contains("blue-team-value"), "{}", page.body);
            assert!(page.body.contains("this link does not show header values"));
            assert!(!page.body.contains("Settings"), "{}", page.body);
            seen += 1;
        }
        assert_eq!(seen, 2, "{}", app.backend);
        refusing.stop().await;
        busy.stop().await;
    }
}
