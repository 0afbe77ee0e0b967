//! Endpoint health end to end: auto-disable after the (shortened) window, 410, the email over
//! real SMTP, re-enabling, mail kept when SMTP is absent, and scheduler leadership.

use std::time::Duration;

use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::json;

use crate::delivery::{apps_with, endpoint_at, eventually, send, sink};
use testkit::smtp::TestSmtpServer;

#[tokio::test]
async fn an_endpoint_failing_past_the_window_is_disabled_and_the_tenant_emailed() {
    let smtp = TestSmtpServer::start().await;
    let smtp_url = smtp.url();
    for app in apps_with(&[
        ("HOOKD_ENDPOINT_DISABLE_AFTER", "2s"),
        // Less than the disable, as it must be: the early warning comes first (see warnings.rs).
        ("HOOKD_ENDPOINT_WARN_AFTER", "1s"),
        ("HOOKD_HEALTH_SWEEP_INTERVAL", "200ms"),
        ("HOOKD_BREAKER_FAILURES", "1000"),
        ("HOOKD_SMTP_URL", &smtp_url),
        ("HOOKD_PUBLIC_URL", "https://hookd.example.com"),
    ])
    .await
    {
        let before = smtp.received().len();
        let s = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 500,
            ..Default::default()
        });
        let (a, e) = endpoint_at(
            &app,
            &s,
            json!({"retryPolicy": {"delays": ["200ms"], "maxAttempts": 100}}),
        )
        .await;
        send(&app, &a, json!({})).await;
        eventually(
            Duration::from_secs(15),
            "endpoint auto-disabled",
            || async { app.get(&format!("/app/{a}/endpoint/{e}")).await.body["disabled"] == true },
        )
        .await;
        let ep = app.get(&format!("/app/{a}/endpoint/{e}")).await.body;
        let reason = ep["disabledReason"].as_str().unwrap();
        assert!(reason.contains("no successful delivery for 2s"), "{reason}");
        let events = app
            .store
            .list_operational_events(app.tenant, &Default::default())
            .await
            .unwrap();
        assert!(events.data.iter().any(|ev| ev.kind == "endpoint.disabled"
            && ev.endpoint_id.map(|id| id.to_string()).as_deref() == Some(e.as_str())));

        let s_url = s.url("/hook");
        // This endpoint's: the other database's run may still be disabling its own.
        let disabled_mail = || {
            smtp.received().into_iter().skip(before).find(|m| {
                m.header("subject")
                    .is_some_and(|s| s.contains("endpoint disabled") && s.contains(&s_url))
            })
        };
        eventually(Duration::from_secs(10), "email sent", || async {
            disabled_mail().is_some()
        })
        .await;
        let mail = disabled_mail().unwrap();
        assert_eq!(
            mail.recipients,
            ["acme@example.com"],
            "the tenant's notification address"
        );
        assert!(
            mail.from.contains("hookd@localhost.localdomain"),
            "sent from smtp_from: {}",
            mail.from
        );
        let subject = mail.header("subject").unwrap();
        assert!(
            subject.contains("endpoint disabled") && subject.contains(&s.url("/hook")),
            "{subject}"
        );
        let body = mail.body_text();
        assert!(
            body.contains(&format!("https://hookd.example.com/app/{a}/endpoint/{e}")),
            "{body}"
        );
        // The SMTP server has the mail; the outbox row is marked sent when the scheduler hears
        // the server's answer, a moment later.
        eventually(
            Duration::from_secs(10),
            "the outbox marks it sent",
            || async {
                app.get("/email").await.body["data"]
                    .as_array()
                    .is_some_and(|d| d.iter().all(|m| m["state"] == "sent"))
            },
        )
        .await;

        // Re-enabling resets the endpoint's health. The message's delivery is still pending
        // and the sink still fails, so a new streak may start at once: what must not survive
        // is the streak from before the endpoint was disabled.
        let re_enabled_at = domain::Timestamp::now().as_millis();
        let enabled = app
            .ok(
                Method::PATCH,
                &format!("/app/{a}/endpoint/{e}"),
                Some(json!({"disabled": false})),
                200,
            )
            .await;
        assert_eq!(
            (
                enabled["disabled"].as_bool(),
                enabled["disabledReason"].as_str()
            ),
            (Some(false), None)
        );
        let stored = app
            .store
            .get_endpoint(app.tenant, a.parse().unwrap(), &e)
            .await
            .unwrap();
        assert!(
            stored
                .failing_since
                .is_none_or(|since| since >= re_enabled_at),
            "the failure streak starts over: failing since {:?}, re-enabled at {re_enabled_at}",
            stored.failing_since
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn a_410_disables_at_once_with_the_same_email() {
    let smtp = TestSmtpServer::start().await;
    let smtp_url = smtp.url();
    for app in apps_with(&[("HOOKD_SMTP_URL", &smtp_url)]).await {
        let before = smtp.received().len();
        let s = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 410,
            ..Default::default()
        });
        let (a, e) = endpoint_at(&app, &s, json!({})).await;
        send(&app, &a, json!({})).await;
        eventually(Duration::from_secs(10), "email for the 410", || async {
            smtp.received().len() > before
        })
        .await;
        let mail = smtp.received()[before].clone();
        assert!(mail.body_text().contains("410"), "{}", mail.body_text());
        assert!(mail.body_text().contains(&format!("/app/{a}/endpoint/{e}")));
        assert_eq!(
            app.get(&format!("/app/{a}/endpoint/{e}")).await.body["disabled"],
            true
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn without_smtp_mail_stays_in_the_outbox_where_the_tenant_sees_it() {
    for app in apps_with(&[]).await {
        let s = sink(Behaviour {
            fail_rate: 1.0,
            fail_status: 410,
            ..Default::default()
        });
        let (a, _) = endpoint_at(&app, &s, json!({})).await;
        send(&app, &a, json!({})).await;
        eventually(Duration::from_secs(10), "email queued", || async {
            app.get("/email").await.body["data"]
                .as_array()
                .is_some_and(|d| !d.is_empty())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(700)).await;
        let mail = &app.get("/email").await.body["data"][0];
        assert_eq!(
            (mail["state"].as_str(), mail["attempts"].as_i64()),
            (Some("pending"), Some(0))
        );
        assert_eq!(mail["to"], "acme@example.com");
        s.stop().await;
    }
}

#[tokio::test]
async fn one_scheduler_leads_on_postgres_and_a_standby_takes_over() {
    let Some(url) = store::testing::postgres_url() else {
        eprintln!("SKIPPED scheduler leadership: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    let db = store::testing::TestDb::postgres(&url).await;
    let mut first = scheduler::leader::Leadership::for_url(&db.url);
    let mut second = scheduler::leader::Leadership::for_url(&db.url);
    assert!(first.ensure().await, "the first scheduler leads");
    assert!(!second.ensure().await, "the second stands by");
    assert!(first.ensure().await, "the leader keeps leading");
    first.release().await; // as if its process died: the lock's connection closes
    assert!(second.ensure().await, "the standby takes over");
    assert!(!first.ensure().await, "the old leader now stands by");
    second.release().await;
}
