//! Retention as users meet it: the tenant's and an application's choices through the API,
//! the scheduler expiring payloads and removing messages on its own, and `hookd prune`.

use std::time::Duration;

use reqwest::Method;
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};
use testkit::TestApp;

use crate::delivery::{apps_with, endpoint_at, eventually, send, sink};
use crate::helpers::{hookd, run, stdout};

#[tokio::test]
async fn a_tenant_and_its_applications_choose_retention_within_the_servers_maximum() {
    for app in TestApp::all(&[("HOOKD_MAX_RETENTION", "60d")]).await {
        let r = app.ok(Method::GET, "/retention", None, 200).await;
        assert_eq!(
            r,
            json!({"payloadRetentionDays": null, "metadataRetentionDays": null,
                   "payloadRetention": "30d", "metadataRetention": "90d", "maxRetentionDays": 60})
        );
        // Choices are whole days from 1 to max_retention, each checked by name.
        for (body, field) in [
            (json!({"payloadRetentionDays": 0}), "payloadRetentionDays"),
            (
                json!({"metadataRetentionDays": 61}),
                "metadataRetentionDays",
            ),
            (
                json!({"metadataRetentionDays": "7"}),
                "metadataRetentionDays",
            ),
        ] {
            let refused = app.call(Method::PUT, "/retention", Some(body)).await;
            assert_eq!(refused.status, 422, "{}", refused.body);
            assert!(refused.body.to_string().contains(field), "{}", refused.body);
        }
        let set = app
            .ok(
                Method::PUT,
                "/retention",
                Some(json!({"metadataRetentionDays": 14})),
                200,
            )
            .await;
        assert_eq!(
            (
                &set["metadataRetentionDays"],
                &set["metadataRetention"],
                &set["payloadRetention"]
            ),
            (&json!(14), &json!("14d"), &json!("14d")),
            "a payload never outlives its message: {set}"
        );
        assert_eq!(app.ok(Method::GET, "/retention", None, 200).await, set);

        // An application's own, echoed, patched and reset.
        let created = app
            .ok(
                Method::POST,
                "/app",
                Some(json!({"name": "a", "payloadRetentionDays": 5})),
                201,
            )
            .await;
        assert_eq!(
            (
                &created["payloadRetentionDays"],
                &created["metadataRetentionDays"]
            ),
            (&json!(5), &Value::Null)
        );
        let id = created["id"].as_str().unwrap();
        let refused = app
            .call(
                Method::PATCH,
                &format!("/app/{id}"),
                Some(json!({"metadataRetentionDays": 61})),
            )
            .await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        let patched = app
            .ok(
                Method::PATCH,
                &format!("/app/{id}"),
                Some(json!({"metadataRetentionDays": 7})),
                200,
            )
            .await;
        assert_eq!(
            (
                &patched["payloadRetentionDays"],
                &patched["metadataRetentionDays"]
            ),
            (&json!(5), &json!(7))
        );
        let reset = app
            .ok(
                Method::PATCH,
                &format!("/app/{id}"),
                Some(json!({"payloadRetentionDays": null})),
                200,
            )
            .await;
        assert_eq!(reset["payloadRetentionDays"], Value::Null);
        assert_eq!(reset["metadataRetentionDays"], 7);
    }
}

/// With a one-second payload retention and a three-second metadata retention, the scheduler
/// on its own makes a delivered message read as expired (resend refused), then removes it;
/// nothing is touched while its delivery is still to be made.
#[tokio::test]
async fn the_scheduler_expires_payloads_then_removes_messages_on_its_own() {
    for app in apps_with(&[
        ("HOOKD_PAYLOAD_RETENTION", "1s"),
        ("HOOKD_METADATA_RETENTION", "3s"),
        ("HOOKD_PRUNE_INTERVAL", "1s"),
    ])
    .await
    {
        let s = sink(Default::default());
        let (a, e) = endpoint_at(&app, &s, json!({})).await;
        let id = send(&app, &a, json!({"card": "4242"})).await;
        let msg = format!("/app/{a}/msg/{id}");
        eventually(Duration::from_secs(15), "the payload expired", || async {
            app.get(&msg).await.body["payload"] == json!({"expired": true})
        })
        .await;
        let resend = app
            .call(
                Method::POST,
                &format!("/app/{a}/msg/{id}/endpoint/{e}/resend"),
                None,
            )
            .await;
        assert_eq!(resend.status, 409, "{}", resend.body);
        eventually(
            Duration::from_secs(15),
            "the message was removed",
            || async { app.get(&msg).await.status == 404 },
        )
        .await;
        // /metrics counts what went (once the pass that removed it has finished) and shows
        // the database's size.
        eventually(
            Duration::from_secs(15),
            "the removal was counted",
            || async {
                let m = crate::metrics::scrape(&app).await;
                m.get(r#"hookd_pruned_rows_total{kind="messages"}"#) >= 1.0
            },
        )
        .await;
        let m = crate::metrics::scrape(&app).await;
        assert!(m.get(r#"hookd_pruned_rows_total{kind="payloads"}"#) >= 1.0);
        assert!(m.get("hookd_database_bytes") > 0.0);
        // Its deliveries and attempts went with it.
        for table in ["deliveries", "attempts"] {
            let left = sea_orm::ConnectionTrait::query_one(
                app.store.connection(),
                sea_orm::Statement::from_string(
                    app.store.connection().get_database_backend(),
                    format!(
                        "SELECT COUNT(*) AS n FROM {table} WHERE msg_id = {}",
                        app.store
                            .id_sql(id.parse::<domain::ids::MessageId>().unwrap())
                    ),
                ),
            )
            .await
            .unwrap()
            .unwrap()
            .try_get::<i64>("", "n")
            .unwrap();
            assert_eq!(left, 0, "{table}");
        }
        s.stop().await;
    }
}

#[tokio::test]
async fn hookd_prune_reports_what_it_would_remove_and_then_removes_it() {
    let app = TestApp::start(
        store::testing::TestDb::sqlite().await,
        &[("HOOKD_ROLES", "api")],
    )
    .await;
    let (a, _) = app.app_with_endpoint("prune").await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(send(&app, &a, json!({"i": i})).await);
    }
    // Two delivered, one still to be made (no dispatcher runs: mark two as delivered).
    let connection = app.store.connection();
    for id in &ids[..2] {
        sea_orm::ConnectionTrait::execute_unprepared(
            connection,
            &format!(
                "UPDATE deliveries SET state = 'succeeded' WHERE msg_id = {}",
                app.store
                    .id_sql(id.parse::<domain::ids::MessageId>().unwrap())
            ),
        )
        .await
        .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let dir = tempfile::tempdir().unwrap();
    let prune = |dry: bool| {
        let mut cmd = hookd(dir.path());
        cmd.args(["prune", "--database-url", &app.db.url])
            .env("HOOKD_PAYLOAD_RETENTION", "1s")
            .env("HOOKD_METADATA_RETENTION", "1s");
        if dry {
            cmd.arg("--dry-run");
        }
        run(&mut cmd)
    };
    let dry = prune(true);
    assert!(dry.status.success(), "{dry:?}");
    let text = stdout(&dry);
    assert!(
        text.contains("would remove: 2 messages with 2 deliveries and 0 attempts"),
        "{text}"
    );
    assert!(text.contains("kept: 1 messages past a horizon"), "{text}");
    assert!(text.contains("dry run: nothing changed"), "{text}");
    assert_eq!(
        app.get(&format!("/app/{a}/msg/{}", ids[0])).await.status,
        200
    );

    let done = prune(false);
    assert!(done.status.success(), "{done:?}");
    let text = stdout(&done);
    assert!(
        text.contains("removed: 2 messages with 2 deliveries and 0 attempts"),
        "{text}"
    );
    for id in &ids[..2] {
        assert_eq!(app.get(&format!("/app/{a}/msg/{id}")).await.status, 404);
    }
    let kept = app.get(&format!("/app/{a}/msg/{}", ids[2])).await;
    assert_eq!(kept.body["payload"], json!({"i": 2}), "live: kept whole");
}
