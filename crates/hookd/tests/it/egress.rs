//! Egress grants: with no server-wide allow list, a tenant reaches a private network only
//! through a grant of its own, made with `hookd tenant allow-network` (the real binary), and
//! taken back with `deny-network`; a portal customer never reaches more than the tenant.

use std::time::Duration;

use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::{Value, json};
use testkit::TestApp;

use crate::delivery::{SECRET, apps_with, eventually, send, sink};

/// No server-wide allow list: every private address needs a grant.
pub const NO_SERVER_LIST: (&str, &str) = ("HOOKD_ENDPOINT_ALLOW_NETWORKS", "");

/// Runs `hookd tenant ARGS…` against `app`'s database; its standard output, or a panic with
/// its error.
pub fn tenant_cli(app: &TestApp, args: &[&str]) -> String {
    let out = tenant_cli_result(app, args);
    assert!(out.0, "hookd tenant {args:?}: {}", out.1);
    out.1
}

/// `hookd tenant ARGS…`: whether it succeeded, and its output (standard error when it failed).
pub fn tenant_cli_result(app: &TestApp, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hookd"))
        .arg("tenant")
        .args(args)
        .args(["--database-url", &app.db.url])
        .env(store::testing::SERVER_ENV.0, store::testing::SERVER_ENV.1)
        .env("HOOKD_LOG_FORMAT", "text")
        .output()
        .expect("run hookd tenant");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match out.status.success() {
        true => (true, text(&out.stdout)),
        false => (false, text(&out.stderr)),
    }
}

async fn new_app(app: &TestApp, key: &str) -> String {
    let r = app
        .call_as(key, Method::POST, "/app", Some(json!({"name": "x"})), &[])
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["id"].as_str().unwrap().to_owned()
}

async fn create_endpoint(app: &TestApp, key: &str, a: &str, url: &str) -> (u16, Value) {
    let r = app
        .call_as(
            key,
            Method::POST,
            &format!("/app/{a}/endpoint"),
            Some(json!({"url": url, "secret": SECRET, "retryPolicy": {"delays": ["100ms"]}})),
            &[],
        )
        .await;
    (r.status.as_u16(), r.body)
}

#[tokio::test]
async fn a_private_network_is_reached_only_by_the_tenant_it_was_granted_to() {
    for app in apps_with(&[NO_SERVER_LIST]).await {
        let receiver = sink(Behaviour::default());
        let url = receiver.url("/hook");
        let (_, b_key) = testkit::new_tenant(&app.store, "other").await;
        let (a_app, b_app) = (new_app(&app, &app.key).await, new_app(&app, &b_key).await);

        // Before any grant, nobody reaches loopback, and the refusal says how it could.
        let (status, body) = create_endpoint(&app, &app.key, &a_app, &url).await;
        assert_eq!(status, 422, "{body}");
        assert!(body.to_string().contains("granted"), "{body}");

        let out = tenant_cli(
            &app,
            &["allow-network", &app.tenant.to_string(), "127.0.0.0/8"],
        );
        assert!(out.contains("granted 127.0.0.0/8"), "{out}");
        let listed = tenant_cli(&app, &["grants", &app.tenant.to_string()]);
        assert!(
            listed.contains("127.0.0.0/8") && listed.contains("command line"),
            "{listed}"
        );

        // The CLI wrote from another process: the server sees it within a second.
        let mut created = (0, Value::Null);
        for _ in 0..30 {
            created = create_endpoint(&app, &app.key, &a_app, &url).await;
            if created.0 == 201 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(created.0, 201, "{}", created.1);
        let a_ep = created.1["id"].as_str().unwrap().to_owned();
        // The grant is A's alone.
        let (status, body) = create_endpoint(&app, &b_key, &b_app, &url).await;
        assert_eq!(status, 422, "B reached A's grant: {body}");

        let first = send(&app, &a_app, json!({"n": 1})).await;
        eventually(Duration::from_secs(10), "A's message delivered", || async {
            receiver.state.received().iter().any(|r| r.msg_id == first)
        })
        .await;

        // Taken back: the next attempt is refused at send time and reaches nothing.
        let out = tenant_cli(
            &app,
            &["deny-network", &app.tenant.to_string(), "127.0.0.0/8"],
        );
        assert!(out.contains("revoked"), "{out}");
        let (ok, err) = tenant_cli_result(
            &app,
            &["deny-network", &app.tenant.to_string(), "127.0.0.0/8"],
        );
        assert!(!ok && err.contains("was not granted"), "{err}");
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let second = send(&app, &a_app, json!({"n": 2})).await;
        let path = format!("/app/{a_app}/attempt/endpoint/{a_ep}");
        eventually(Duration::from_secs(10), "a refused attempt", || async {
            let r = app.get(&path).await;
            r.body["data"].as_array().is_some_and(|d| {
                d.iter().any(|at| {
                    at["msgId"] == second.as_str()
                        && at["errorDetail"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("granted")
                })
            })
        })
        .await;
        assert!(
            !receiver.state.received().iter().any(|r| r.msg_id == second),
            "a message was sent after the grant was revoked"
        );
    }
}

#[tokio::test]
async fn a_portal_customer_reaches_no_more_than_the_tenant_and_can_be_kept_to_public_addresses() {
    for app in apps_with(&[NO_SERVER_LIST]).await {
        let url = "http://127.0.0.1:9/hook";
        let a = new_app(&app, &app.key).await;
        let portal = app
            .ok(
                Method::POST,
                &format!("/auth/app-portal-access/{a}"),
                Some(json!({})),
                200,
            )
            .await;
        let token = portal["token"].as_str().unwrap().to_owned();
        // No grant: the portal's token cannot reach what the tenant cannot.
        let (status, body) = create_endpoint(&app, &token, &a, url).await;
        assert_eq!(status, 422, "{body}");

        tenant_cli(
            &app,
            &["allow-network", &app.tenant.to_string(), "127.0.0.1"],
        );
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let (status, body) = create_endpoint(&app, &token, &a, url).await;
        assert_eq!(
            status, 201,
            "the tenant's grant holds for its portal: {body}"
        );

        // The tenant keeps its customers to the public internet.
        let mut tenant = app.store.get_tenant(app.tenant).await.unwrap();
        let mut settings = tenant.portal_settings();
        settings.public_endpoints_only = true;
        app.store
            .set_portal_settings(app.tenant, &settings)
            .await
            .unwrap();
        let (status, body) = create_endpoint(&app, &token, &a, url).await;
        assert_eq!(status, 422, "{body}");
        let (status, body) = create_endpoint(&app, &app.key, &a, url).await;
        assert_eq!(status, 201, "the tenant itself keeps its grant: {body}");
        tenant = app.store.get_tenant(app.tenant).await.unwrap();
        assert!(tenant.portal_settings().public_endpoints_only);
    }
}
