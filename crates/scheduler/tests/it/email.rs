//! The email outbox against a real SMTP server on loopback, on every backend.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{EmailId, TenantId};
use scheduler::email::{Mailer, render_endpoint_disabled, run_outbox, send_due};
use store::entities::email;
use store::testing::each_backend;
use store::{ListParams, NewTenant, Store};

use testkit::smtp::{REJECTED_MARK, TestSmtpServer};

const FROM: &str = "hookd <hookd@hookd.test>";
const TO: &str = "ops@tenant.test";
const PUBLIC_URL: &str = "https://hookd.example.com";

async fn tenant(store: &Store) -> TenantId {
    let t = store
        .create_tenant(NewTenant {
            name: "t".into(),
            notification_email: TO.into(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await
        .unwrap();
    t.id
}

/// Queues the endpoint-disabled email; returns its row and the dashboard link it must carry.
async fn enqueue_disabled_email(store: &Store, t: TenantId) -> (email::Model, String) {
    let (subject, body) = render_endpoint_disabled(
        "https://receiver.test/hooks",
        "ep_2xJ8kQ9vWm3LpR7tYc5NbF1aZ0e",
        "app_2xJ8kPq4Hs6GdT1uVw9MzX3cB7y",
        "no successful delivery for 120 h",
        PUBLIC_URL,
    );
    let mail = store.enqueue_email(t, TO, &subject, &body).await.unwrap();
    let link = format!(
        "{PUBLIC_URL}/app/app_2xJ8kPq4Hs6GdT1uVw9MzX3cB7y/endpoint/ep_2xJ8kQ9vWm3LpR7tYc5NbF1aZ0e"
    );
    (mail, link)
}

async fn outbox(store: &Store, t: TenantId) -> Vec<email::Model> {
    store
        .list_emails(t, &ListParams::default())
        .await
        .unwrap()
        .data
}

/// A loopback port with nothing listening on it.
async fn dead_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_sent_sign_up_link_does_not_stay_in_the_outbox() {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    each_backend(|store| async move {
        let server = TestSmtpServer::start().await;
        let mailer = Mailer::from_url(&server.url(), FROM).unwrap();
        let link = format!("{PUBLIC_URL}/signup/confirm?token=s3cr3t-one-use-token");
        store
            .system()
            .enqueue_email_to("new@owner.test", "Confirm your hookd account", &link)
            .await
            .unwrap();
        // A tenant's own notice keeps its body: the tenant reads it through the API.
        let t = tenant(&store).await;
        let (notice, _) = enqueue_disabled_email(&store, t).await;
        let sent = send_due(&store, Some(&mailer), Timestamp::now())
            .await
            .unwrap();
        assert_eq!(sent, 2);
        // The recipient got the link ...
        assert!(
            server
                .received()
                .iter()
                .any(|m| m.data.contains("s3cr3t-one-use-token")),
            "{:?}",
            server.received()
        );
        // ... and the row stays, sent, without it.
        let row = email::Entity::find()
            .filter(email::Column::ToAddr.eq("new@owner.test"))
            .one(store.connection())
            .await
            .unwrap()
            .expect("the row stays for the record");
        assert_eq!(row.state, domain::email::EmailState::Sent);
        assert!(!row.body_text.contains("s3cr3t"), "{}", row.body_text);
        assert_eq!(row.body_text, store::SENT_SIGNUP_BODY);
        let kept = outbox(&store, t).await;
        assert_eq!(kept[0].body_text, notice.body_text);
    })
    .await;
}

#[tokio::test]
async fn a_queued_email_is_delivered_over_smtp_with_recipient_subject_and_link() {
    each_backend(|store| async move {
        let server = TestSmtpServer::start().await;
        let mailer = Mailer::from_url(&server.url(), FROM).unwrap();
        let t = tenant(&store).await;
        let (mail, link) = enqueue_disabled_email(&store, t).await;

        let sent = send_due(&store, Some(&mailer), Timestamp::now())
            .await
            .unwrap();
        assert_eq!(sent, 1);

        let received = server.received();
        assert_eq!(received.len(), 1, "{received:?}");
        let got = &received[0];
        assert_eq!(got.from, "hookd@hookd.test");
        assert_eq!(got.recipients, [TO]);
        assert_eq!(got.header("To").as_deref(), Some(TO));
        assert!(
            got.header("Message-ID")
                .is_some_and(|id| id.starts_with('<'))
        );
        assert_eq!(
            got.header("Subject").as_deref(),
            Some("hookd: endpoint disabled \u{2014} https://receiver.test/hooks")
        );
        assert_eq!(
            got.header("Subject").as_deref(),
            Some(mail.subject.as_str())
        );
        let body = got.body_text();
        assert!(body.contains(&link), "no dashboard link in:\n{body}");
        assert!(body.contains("no successful delivery for 120 h"), "{body}");
        assert!(body.contains(r#"{"disabled": false}"#), "{body}");

        let row = &outbox(&store, t).await[0];
        assert_eq!(row.state, domain::email::EmailState::Sent);
        assert!(row.sent_at.is_some());
        // Sent mail is not sent again.
        let again = send_due(
            &store,
            Some(&mailer),
            Timestamp::now().plus(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
        assert_eq!(again, 0);
        assert_eq!(server.received().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn an_smtp_server_that_is_down_delays_mail_and_never_loses_it() {
    each_backend(|store| async move {
        let t = tenant(&store).await;
        let (_, link) = enqueue_disabled_email(&store, t).await;
        let down =
            Mailer::from_url(&format!("smtp://127.0.0.1:{}", dead_port().await), FROM).unwrap();

        let now = Timestamp::now();
        assert_eq!(send_due(&store, Some(&down), now).await.unwrap(), 0);
        let row = outbox(&store, t).await.remove(0);
        assert_eq!((row.state.as_str(), row.attempts), ("pending", 1));
        assert!(row.last_error.as_deref().is_some_and(|e| !e.is_empty()));
        assert_eq!(
            row.next_attempt_at,
            now.plus(Duration::from_secs(30)).as_millis(),
            "first retry after 30 s"
        );

        // A second failure backs off further.
        let retry_at = Timestamp::from_millis(row.next_attempt_at);
        assert_eq!(send_due(&store, Some(&down), retry_at).await.unwrap(), 0);
        let row = outbox(&store, t).await.remove(0);
        assert_eq!((row.state.as_str(), row.attempts), ("pending", 2));
        assert_eq!(
            row.next_attempt_at,
            retry_at.plus(Duration::from_secs(60)).as_millis()
        );

        // The server comes back: nothing is sent before the retry time, then the mail goes.
        let server = TestSmtpServer::start().await;
        let up = Mailer::from_url(&server.url(), FROM).unwrap();
        let retry_at = Timestamp::from_millis(row.next_attempt_at);
        let early = Timestamp::from_millis(row.next_attempt_at - 1);
        assert_eq!(send_due(&store, Some(&up), early).await.unwrap(), 0);
        assert!(server.received().is_empty());
        assert_eq!(send_due(&store, Some(&up), retry_at).await.unwrap(), 1);

        let received = server.received();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].recipients, [TO]);
        assert!(received[0].body_text().contains(&link));
        let row = outbox(&store, t).await.remove(0);
        assert_eq!((row.state.as_str(), row.attempts), ("sent", 3));
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_server_costs_one_attempt_per_sweep_not_one_per_email() {
    each_backend(|store| async move {
        let t = tenant(&store).await;
        for _ in 0..3 {
            enqueue_disabled_email(&store, t).await;
        }
        let down =
            Mailer::from_url(&format!("smtp://127.0.0.1:{}", dead_port().await), FROM).unwrap();
        let later = Timestamp::now().plus(Duration::from_secs(1));
        assert_eq!(send_due(&store, Some(&down), later).await.unwrap(), 0);
        let mut attempts: Vec<i32> = outbox(&store, t).await.iter().map(|m| m.attempts).collect();
        attempts.sort();
        assert_eq!(attempts, [0, 0, 1]);
    })
    .await;
}

#[tokio::test]
async fn a_refused_recipient_is_given_up_after_three_tries_and_tenants_never_see_the_server() {
    each_backend(|store| async move {
        let server = TestSmtpServer::start().await;
        let mailer = Mailer::from_url(&server.url(), FROM).unwrap();
        let t = tenant(&store).await;
        let bad_to = format!("{REJECTED_MARK}@tenant.test");
        let bad = store.enqueue_email(t, &bad_to, "s", "b").await.unwrap();
        let good = store.enqueue_email(t, TO, "s", "b").await.unwrap();

        let now = Timestamp::now().plus(Duration::from_secs(1));
        assert_eq!(send_due(&store, Some(&mailer), now).await.unwrap(), 1);
        let received = server.received();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].recipients, [TO]);
        let rows = outbox(&store, t).await;
        let row = |id: EmailId| rows.iter().find(|m| m.id == id).unwrap().clone();
        assert_eq!(row(good.id).state, domain::email::EmailState::Sent);
        let first = row(bad.id);
        assert_eq!((first.state.as_str(), first.attempts), ("pending", 1));
        assert_eq!(
            first.next_attempt_at,
            now.plus(Duration::from_secs(30)).as_millis()
        );
        // The tenant reads a reason, not the operator's SMTP host, port or reply.
        let shown = first.last_error.clone().unwrap_or_default();
        assert_eq!(shown, "the mail server refused this email");
        let port = server.url().rsplit(':').next().unwrap().to_owned();
        assert!(!shown.contains("127.0.0.1") && !shown.contains(&port) && !shown.contains("550"));

        // Refused again at each retry; the third refusal ends it.
        let mut at = Timestamp::from_millis(first.next_attempt_at);
        for tries in [2, 3] {
            send_due(&store, Some(&mailer), at).await.unwrap();
            let rows = outbox(&store, t).await;
            let row = rows.iter().find(|m| m.id == bad.id).unwrap();
            assert_eq!(row.attempts, tries);
            at = Timestamp::from_millis(row.next_attempt_at);
        }
        let rows = outbox(&store, t).await;
        let gone = rows.iter().find(|m| m.id == bad.id).unwrap();
        assert_eq!(gone.state, domain::email::EmailState::Failed);
        let much_later = now.plus(Duration::from_secs(30 * 86_400));
        assert!(
            store
                .system()
                .due_emails(much_later, 10)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn with_no_smtp_configured_mail_stays_in_the_outbox_without_attempts() {
    each_backend(|store| async move {
        let t = tenant(&store).await;
        let (mail, _) = enqueue_disabled_email(&store, t).await;
        let later = Timestamp::now().plus(Duration::from_secs(3600));
        assert_eq!(send_due(&store, None, later).await.unwrap(), 0);
        assert_eq!(send_due(&store, None, later).await.unwrap(), 0);

        // Still there, visible to the tenant, untouched and still due.
        let rows = outbox(&store, t).await;
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.id, mail.id);
        assert_eq!((row.state.as_str(), row.attempts), ("pending", 0));
        assert_eq!(row.last_error, None);
        assert_eq!(row.next_attempt_at, mail.next_attempt_at);

        // Configuring SMTP later sends it.
        let server = TestSmtpServer::start().await;
        let mailer = Mailer::from_url(&server.url(), FROM).unwrap();
        assert_eq!(send_due(&store, Some(&mailer), later).await.unwrap(), 1);
        assert_eq!(server.received().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn the_outbox_loop_sends_queued_mail_and_stops_when_told() {
    each_backend(|store| async move {
        let server = TestSmtpServer::start().await;
        let mailer = Mailer::from_url(&server.url(), FROM).unwrap();
        let t = tenant(&store).await;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let worker = tokio::spawn(run_outbox(
            store.clone(),
            Some(mailer),
            Duration::from_millis(20),
            stop_rx,
        ));
        enqueue_disabled_email(&store, t).await;
        tokio::time::timeout(Duration::from_secs(10), async {
            while server.received().is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the outbox loop sent the email");
        stop_tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(5), worker)
            .await
            .expect("the outbox loop stopped")
            .unwrap();
        assert_eq!(
            outbox(&store, t).await[0].state,
            domain::email::EmailState::Sent
        );
    })
    .await;
}

#[test]
fn smtp_urls_of_the_three_kinds_are_accepted() {
    for (url, shown) in [
        ("smtp://mail.test", "smtp://mail.test:25 (plain)"),
        ("smtp://mail.test:2525", "smtp://mail.test:2525 (plain)"),
        (
            "smtp://u:p@mail.test?tls=starttls",
            "smtp://mail.test:587 (STARTTLS)",
        ),
        (
            "smtp://mail.test:25?tls=required",
            "smtp://mail.test:25 (STARTTLS)",
        ),
        ("smtps://mail.test", "smtps://mail.test:465 (TLS)"),
        (
            "smtps://u%40x:p%2Fq@mail.test:1465/",
            "smtps://mail.test:1465 (TLS)",
        ),
        ("smtp://127.0.0.1:1025", "smtp://127.0.0.1:1025 (plain)"),
        ("smtp://[::1]:1025", "smtp://[::1]:1025 (plain)"),
    ] {
        let mailer = Mailer::from_url(url, "Hookd <hookd@hookd.test>")
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(
            mailer.to_string(),
            format!("{shown} from Hookd <hookd@hookd.test>"),
            "{url}"
        );
    }
}

#[test]
fn bad_smtp_urls_and_from_addresses_are_refused_with_the_reason() {
    let from = "hookd@hookd.test";
    for (url, expected) in [
        ("not a url", "not a valid URL"),
        (
            "http://mail.test",
            "scheme must be smtp or smtps, not \"http\"",
        ),
        (
            "smtp://mail.test?tls=opportunistic",
            "tls parameter must be",
        ),
        ("smtp://mail.test?tls=yes", "not \"yes\""),
        ("smtps://mail.test?tls=required", "drop the tls parameter"),
        ("smtp://mail.test?ssl=1", "unknown query parameter \"ssl\""),
        ("smtp://mail.test/ehlo-name", "must not have a path"),
        ("smtp://user@mail.test", "user name but no password"),
        ("smtp://mail.test:99999", "not a valid URL"),
        ("smtp://", "no host"),
        ("smtp:mail.test", "no host"),
    ] {
        let err = Mailer::from_url(url, from)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains(expected), "{url}: {err:?} lacks {expected:?}");
        assert!(
            err.contains("SMTP URL"),
            "{url}: {err:?} does not name the setting"
        );
    }
    for bad in ["", "hookd", "hookd@", "@hookd.test", "hookd hookd.test"] {
        let err = Mailer::from_url("smtp://mail.test", bad)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(err.contains("from address"), "{bad:?}: {err}");
        assert!(err.contains(&format!("{bad:?}")), "{bad:?}: {err}");
    }
}

#[test]
fn a_password_never_appears_in_errors_or_descriptions() {
    let password = "s3cr3t-Pa55";
    let from = "hookd@hookd.test";
    for url in [
        format!("http://user:{password}@mail.test"),
        format!("smtp://user:{password}@mail.test?tls=maybe"),
        format!("smtp://mail.test?user=u&password={password}"),
        format!("smtp://user:{password}@mail.test/{password}"),
        format!("smtp://user:{password}@mail.test:99999"),
        format!("smtps://user:{password}@mail.test?tls=required"),
        format!("smtp://user:{password}%FF@mail.test"),
    ] {
        let err = Mailer::from_url(&url, from).map(|_| ()).unwrap_err();
        assert!(!err.to_string().contains(password), "{err}");
        assert!(!format!("{err:?}").contains(password), "{err:?}");
    }
    let err = Mailer::from_url(&format!("smtp://user:{password}@mail.test"), "bad")
        .map(|_| ())
        .unwrap_err();
    assert!(!err.to_string().contains(password), "{err}");
    let mailer = Mailer::from_url(&format!("smtps://user:{password}@mail.test"), from).unwrap();
    assert!(!mailer.to_string().contains(password));
    assert!(!format!("{mailer:?}").contains(password));
}

#[test]
fn the_disabled_email_names_the_endpoint_and_says_how_to_re_enable_it() {
    let (subject, body) = render_endpoint_disabled(
        "https://r.test/h",
        "ep_1",
        "app_1",
        "the endpoint answered 410 Gone",
        "https://hookd.example.com/",
    );
    assert_eq!(
        subject,
        "hookd: endpoint disabled \u{2014} https://r.test/h"
    );
    for needle in [
        "https://r.test/h",
        "ep_1",
        "the endpoint answered 410 Gone",
        "https://hookd.example.com/app/app_1/endpoint/ep_1\n",
        "PATCH https://hookd.example.com/api/v1/app/app_1/endpoint/ep_1\n",
        r#"{"disabled": false}"#,
        "dashboard",
    ] {
        assert!(body.contains(needle), "{needle:?} missing from:\n{body}");
    }
}
