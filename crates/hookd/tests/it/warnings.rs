//! Early warnings end to end: an endpoint failing (a real receiver answering 500 over
//! loopback) past `endpoint_warn_after` gets one email through the real SMTP test server and
//! one `endpoint.failing` operational event per failure streak, and a new streak after a
//! success warns again; a tenant that chose nobody gets the event and no email.

use std::time::Duration;

use bench::sink::Behaviour;
use serde_json::{Value, json};
use testkit::TestApp;
use testkit::smtp::{ReceivedMail, TestSmtpServer};

use crate::delivery::{apps_with, endpoint_at, eventually, send, sink};
use crate::operational::{events, of_type, operational_endpoint};

fn failing() -> Behaviour {
    Behaviour {
        fail_rate: 1.0,
        fail_status: 500,
        ..Default::default()
    }
}

/// Warned after 1 s of failures, disabled only after 60 s (never within a test), swept often.
async fn apps(smtp: &TestSmtpServer) -> Vec<TestApp> {
    apps_with(&[
        ("HOOKD_ENDPOINT_WARN_AFTER", "1s"),
        ("HOOKD_ENDPOINT_DISABLE_AFTER", "60s"),
        ("HOOKD_HEALTH_SWEEP_INTERVAL", "100ms"),
        ("HOOKD_BREAKER_FAILURES", "1000"),
        // An open breaker (the failure ratio) lets a probe through soon, so a receiver that
        // works again is heard from at once.
        ("HOOKD_BREAKER_OPEN_FOR", "200ms"),
        ("HOOKD_SMTP_URL", &smtp.url()),
        ("HOOKD_PUBLIC_URL", "https://hookd.example.com"),
    ])
    .await
}

/// The warning emails the server received about `url`.
fn warnings_about(smtp: &TestSmtpServer, url: &str) -> Vec<ReceivedMail> {
    smtp.received()
        .into_iter()
        .filter(|m| {
            m.header("subject")
                .is_some_and(|s| s.contains("endpoint failing") && s.contains(url))
        })
        .collect()
}

/// Retries every 200 ms for 20 s: long enough.
fn retrying() -> Value {
    json!({"retryPolicy": {"delays": ["200ms"], "maxAttempts": 100}})
}

#[tokio::test]
async fn a_failing_endpoint_is_warned_once_per_streak_by_email_and_operational_event() {
    let smtp = TestSmtpServer::start().await;
    for app in apps(&smtp).await {
        let ops = sink(Behaviour::default());
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let rx = sink(failing());
        let url = rx.url("/hook");
        let (a, e) = endpoint_at(&app, &rx, retrying()).await;
        send(&app, &a, json!({"n": 1})).await;
        eventually(Duration::from_secs(20), "the warning email", || async {
            !warnings_about(&smtp, &url).is_empty()
        })
        .await;
        let mail = warnings_about(&smtp, &url)[0].clone();
        assert_eq!(
            mail.recipients,
            ["acme@example.com"],
            "the tenant's notification address by default"
        );
        let body = mail.body_text().replace("\r\n", "\n");
        let stored = app
            .store
            .get_endpoint(app.tenant, a.parse().unwrap(), &e)
            .await
            .unwrap();
        let since = domain::Timestamp::from_millis(stored.failing_since.unwrap());
        let since_text = domain::time::rfc3339::format(since);
        let disable_at = domain::time::rfc3339::format(since.plus(Duration::from_secs(60)));
        for want in [
            url.clone(),
            format!("no successful delivery since\n{since_text}"),
            // About 59 seconds left: the warning came about 1 s into the streak.
            "hookd will disable it in 5".to_owned(),
            format!("seconds\n(at {disable_at})"),
            "Last errors:".to_owned(),
            "HTTP 500".to_owned(),
            format!("https://hookd.example.com/app/{a}/endpoint/{e}"),
        ] {
            assert!(body.contains(&want), "{want:?} in\n{body}");
        }

        eventually(Duration::from_secs(20), "endpoint.failing", || async {
            !of_type(&events(&ops, "/ops"), "endpoint.failing").is_empty()
        })
        .await;
        let got = events(&ops, "/ops");
        let ev = of_type(&got, "endpoint.failing")[0]["data"].clone();
        assert_eq!(ev["appId"], a.as_str());
        assert_eq!(ev["endpointId"], e.as_str());
        assert_eq!(ev["failSince"], since_text.as_str());
        assert_eq!(ev["disableAt"], disable_at.as_str());
        let last = ev["lastErrors"].as_array().unwrap();
        assert!(!last.is_empty() && last.len() <= 5, "{ev}");
        assert_eq!(last[0]["responseStatusCode"], 500, "{ev}");

        // Many more sweeps while it goes on failing: nothing more.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(warnings_about(&smtp, &url).len(), 1, "one email per streak");
        assert_eq!(
            of_type(&events(&ops, "/ops"), "endpoint.failing").len(),
            1,
            "one event per streak"
        );

        // A success ends the streak; failing again starts a new one, warned again.
        rx.state.set_behaviour(Behaviour::default());
        eventually(Duration::from_secs(20), "the streak ends", || async {
            app.store
                .get_endpoint(app.tenant, a.parse().unwrap(), &e)
                .await
                .unwrap()
                .failing_since
                .is_none()
        })
        .await;
        assert_eq!(warnings_about(&smtp, &url).len(), 1);
        rx.state.set_behaviour(failing());
        send(&app, &a, json!({"n": 2})).await;
        eventually(Duration::from_secs(20), "a second warning", || async {
            warnings_about(&smtp, &url).len() == 2
        })
        .await;
        eventually(
            Duration::from_secs(20),
            "a second endpoint.failing",
            || async { of_type(&events(&ops, "/ops"), "endpoint.failing").len() == 2 },
        )
        .await;
        let got = events(&ops, "/ops");
        let second = of_type(&got, "endpoint.failing")[1]["data"].clone();
        assert_ne!(second["failSince"], since_text.as_str(), "a new streak");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(warnings_about(&smtp, &url).len(), 2);
        rx.stop().await;
        ops.stop().await;
    }
}

#[tokio::test]
async fn a_tenant_that_chose_nobody_gets_the_event_and_no_email() {
    let smtp = TestSmtpServer::start().await;
    for app in apps(&smtp).await {
        app.store
            .set_warning_recipient(app.tenant, &domain::email::WarningRecipient::Nobody)
            .await
            .unwrap();
        let ops = sink(Behaviour::default());
        operational_endpoint(&app, &ops.url("/ops"), json!({})).await;
        let rx = sink(failing());
        let url = rx.url("/hook");
        let (a, _) = endpoint_at(&app, &rx, retrying()).await;
        send(&app, &a, json!({})).await;
        eventually(Duration::from_secs(20), "endpoint.failing", || async {
            !of_type(&events(&ops, "/ops"), "endpoint.failing").is_empty()
        })
        .await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(warnings_about(&smtp, &url).is_empty());
        let outbox = app.get("/email").await.body;
        assert_eq!(outbox["data"], json!([]), "nothing queued: {outbox}");
        rx.stop().await;
        ops.stop().await;
    }
}
