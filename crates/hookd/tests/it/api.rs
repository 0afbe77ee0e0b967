//! The REST API over real HTTP, on every backend.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use testkit::{TestApp, new_tenant};

#[tokio::test]
async fn requests_without_a_valid_key_answer_401_json() {
    for app in TestApp::all(&[]).await {
        for (key, what) in [("", "empty"), ("hk_wrong", "unknown key")] {
            let r = app.call_as(key, Method::GET, "/app", None, &[]).await;
            assert_eq!(r.status, 401, "{what}");
            assert_eq!(r.body["code"], "unauthorized");
        }
        let raw = app
            .client
            .get(format!("{}/api/v1/app", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(raw.status(), 401);
        let basic = app
            .client
            .get(format!("{}/api/v1/app", app.base))
            .header("authorization", format!("Basic {}", app.key))
            .send()
            .await
            .unwrap();
        assert_eq!(basic.status(), 401);
        // Health needs no key.
        let h = app
            .client
            .get(format!("{}/api/v1/health", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(h.status(), 200);
    }
}

#[tokio::test]
async fn another_tenants_ids_answer_404_on_every_route() {
    for app in TestApp::all(&[]).await {
        let (a, e) = app.app_with_endpoint("shop").await;
        app.ok(
            Method::POST,
            "/event-type",
            Some(json!({"name": "user.created", "description": "d"})),
            201,
        )
        .await;
        let m = app
            .ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(json!({"eventType": "user.created", "payload": {}})),
                202,
            )
            .await;
        let msg = m["id"].as_str().unwrap().to_owned();
        let task = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/recover"),
                Some(json!({"since": "2020-01-01T00:00:00Z"})),
                202,
            )
            .await;
        let task = task["id"].as_str().unwrap().to_owned();

        let (_, other) = new_tenant(&app.store, "intruder").await;
        let body = Some(
            json!({"name": "x", "url": "http://127.0.0.1:9/x", "description": "d",
            "eventType": "user.created", "payload": {}, "since": "2020-01-01T00:00:00Z", "headers": {}}),
        );
        let routes: Vec<(Method, String)> = vec![
            (Method::GET, format!("/app/{a}")),
            (Method::GET, "/app/shop".into()),
            (Method::PATCH, format!("/app/{a}")),
            (Method::DELETE, format!("/app/{a}")),
            (Method::GET, "/event-type/user.created".into()),
            (Method::PATCH, "/event-type/user.created".into()),
            (Method::DELETE, "/event-type/user.created".into()),
            (Method::GET, format!("/app/{a}/endpoint")),
            (Method::POST, format!("/app/{a}/endpoint")),
            (Method::GET, format!("/app/{a}/endpoint/{e}")),
            (Method::PUT, format!("/app/{a}/endpoint/{e}")),
            (Method::PATCH, format!("/app/{a}/endpoint/{e}")),
            (Method::DELETE, format!("/app/{a}/endpoint/{e}")),
            (Method::GET, format!("/app/{a}/endpoint/{e}/secret")),
            (Method::POST, format!("/app/{a}/endpoint/{e}/secret/rotate")),
            (Method::GET, format!("/app/{a}/endpoint/{e}/headers")),
            (Method::PUT, format!("/app/{a}/endpoint/{e}/headers")),
            (Method::PATCH, format!("/app/{a}/endpoint/{e}/headers")),
            (Method::GET, format!("/app/{a}/endpoint/{e}/stats")),
            (Method::POST, format!("/app/{a}/endpoint/{e}/recover")),
            (
                Method::POST,
                format!("/app/{a}/endpoint/{e}/replay-missing"),
            ),
            (Method::GET, format!("/app/{a}/endpoint/{e}/msg")),
            (Method::GET, format!("/app/{a}/msg")),
            (Method::POST, format!("/app/{a}/msg")),
            (Method::GET, format!("/app/{a}/msg/{msg}")),
            (
                Method::GET,
                format!("/app/{a}/msg/{msg}/attempt/atmpt_01M80VDMJNNSBFX1SRH697G36Y"),
            ),
            (
                Method::POST,
                format!("/app/{a}/msg/{msg}/endpoint/{e}/resend"),
            ),
            (Method::GET, format!("/app/{a}/attempt/endpoint/{e}")),
            (Method::GET, format!("/app/{a}/attempt/msg/{msg}")),
            (Method::GET, format!("/background-task/{task}")),
        ];
        for (method, path) in &routes {
            let r = app
                .call_as(&other, method.clone(), path, body.clone(), &[])
                .await;
            assert_eq!(
                r.status, 404,
                "{method} {path} on {}: {}",
                app.backend, r.body
            );
            assert_eq!(r.body["code"], "not_found");
        }
        // Nothing of the owner's changed.
        assert_eq!(app.get(&format!("/app/{a}/endpoint/{e}")).await.status, 200);
        let listed = app.call_as(&other, Method::GET, "/app", None, &[]).await;
        assert_eq!(listed.body["data"], json!([]));
    }
}

#[tokio::test]
async fn a_message_fans_out_once_to_enabled_matching_endpoints_and_keeps_its_bytes() {
    for app in TestApp::all(&[]).await {
        let (a, all) = app.app_with_endpoint("shop").await;
        let et = json!({"name": "invoice.paid", "description": "paid"});
        app.ok(Method::POST, "/event-type", Some(et), 201).await;
        let only_invoices = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/inv", "filterTypes": ["invoice.paid"]})),
                201,
            )
            .await;
        let disabled = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/off", "disabled": true})),
                201,
            )
            .await;
        let raw =
            r#"{"eventType":"user.created","eventId":"evt-1","payload":{"b" : [1,2],  "a":"é"}}"#;
        let resp = app
            .client
            .post(format!("{}/api/v1/app/{a}/msg", app.base))
            .bearer_auth(&app.key)
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        let text = resp.text().await.unwrap();
        assert!(
            text.contains(r#""payload":{"b" : [1,2],  "a":"é"}"#),
            "verbatim: {text}"
        );
        let msg: serde_json::Value = serde_json::from_str(&text).unwrap();
        let id = msg["id"].as_str().unwrap();
        assert!(id.starts_with("msg_"));

        let pending = |ep: &str| format!("/app/{a}/endpoint/{ep}/stats");
        assert_eq!(app.get(&pending(&all)).await.body["pending"], 1);
        for ep in [&only_invoices, &disabled] {
            assert_eq!(
                app.get(&pending(ep["id"].as_str().unwrap())).await.body["pending"],
                0
            );
        }
        let got = app.get(&format!("/app/{a}/msg/evt-1")).await;
        assert_eq!(got.body["id"], id);
        let listed = app
            .get(&format!("/app/{a}/endpoint/{all}/msg?status=1"))
            .await;
        assert_eq!(listed.body["data"][0]["id"], id);
        assert_eq!(listed.body["data"][0]["statusText"], "pending");
    }
}

#[tokio::test]
async fn event_ids_and_idempotency_keys_never_duplicate_a_message() {
    for app in TestApp::all(&[]).await {
        let (a, _) = app.app_with_endpoint("shop").await;
        let path = format!("/app/{a}/msg");
        let body = json!({"eventType": "user.created", "eventId": "evt-9", "payload": {"n": 1}});
        let first = app
            .call_as(
                &app.key,
                Method::POST,
                &path,
                Some(body.clone()),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(first.status, 202);
        let again = app
            .call_as(
                &app.key,
                Method::POST,
                &path,
                Some(body.clone()),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(again.status, 202, "the first response, replayed");
        assert_eq!(again.body, first.body);
        assert_eq!(
            again
                .headers
                .get("idempotent-replayed")
                .map(|v| v.to_str().unwrap()),
            Some("true")
        );

        let different = json!({"eventType": "user.created", "payload": {"n": 2}});
        let reused = app
            .call_as(
                &app.key,
                Method::POST,
                &path,
                Some(different),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(
            (reused.status.as_u16(), reused.body["code"].as_str()),
            (409, Some("idempotency_key_reused"))
        );

        let dup = app.post(&path, body).await;
        assert_eq!(dup.status, 409);
        assert_eq!(dup.body["code"], "conflict");
        assert!(dup.body["detail"].as_str().unwrap().contains("eventId"));

        let all = app.get(&path).await;
        assert_eq!(
            all.body["data"].as_array().unwrap().len(),
            1,
            "exactly one message stored"
        );
        // Keys belong to their tenant: another tenant's identical key is a new request.
        let (_, other) = new_tenant(&app.store, "other").await;
        let r = app
            .call_as(
                &other,
                Method::POST,
                "/app",
                Some(json!({"name": "x"})),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(r.status, 201);
    }
}

#[tokio::test]
async fn bad_input_gets_a_clear_error_never_a_500() {
    for app in TestApp::all(&[("HOOKD_MAX_PAYLOAD_BYTES", "2048")]).await {
        let (a, e) = app.app_with_endpoint("shop").await;
        let cases: Vec<(Method, String, serde_json::Value, u16, &str)> = vec![
            (Method::POST, "/app".into(), json!({}), 422, "name"),
            (
                Method::POST,
                "/app".into(),
                json!({"name": "x", "uid": "has space"}),
                422,
                "uid",
            ),
            (
                Method::POST,
                "/app".into(),
                json!({"name": "x", "uid": "app_lookslikeanid"}),
                422,
                "uid",
            ),
            (Method::POST, "/app".into(), json!({"name": 5}), 422, "name"),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "ftp://example.com"}),
                422,
                "url",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://10.1.2.3/x"}),
                422,
                "url",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://169.254.169.254/latest"}),
                422,
                "url",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://127.0.0.1:9/x", "timeout": "1h"}),
                422,
                "timeout",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://127.0.0.1:9/x", "retryOn": [200]}),
                422,
                "retryOn",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://127.0.0.1:9/x", "retryPolicy": {"delays": []}}),
                422,
                "retryPolicy",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://127.0.0.1:9/x", "headers": {"webhook-id": "x"}}),
                422,
                "headers",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint"),
                json!({"url": "http://127.0.0.1:9/x", "secret": "whsec_short"}),
                422,
                "secret",
            ),
            (
                Method::POST,
                format!("/app/{a}/msg"),
                json!({"eventType": "a b", "payload": {}}),
                422,
                "eventType",
            ),
            (
                Method::POST,
                format!("/app/{a}/msg"),
                json!({"eventType": "a", "payload": [1]}),
                422,
                "payload",
            ),
            (
                Method::POST,
                format!("/app/{a}/msg"),
                json!({"eventType": "a", "payload": {}, "channels": ["bad channel"]}),
                422,
                "channels",
            ),
            (
                Method::POST,
                format!("/app/{a}/endpoint/{e}/recover"),
                json!({"since": "yesterday"}),
                422,
                "since",
            ),
        ];
        for (method, path, body, status, field) in cases {
            let r = app.call(method.clone(), &path, Some(body.clone())).await;
            assert_eq!(
                r.status.as_u16(),
                status,
                "{method} {path} {body} on {}: {}",
                app.backend,
                r.body
            );
            let loc = r.body["detail"][0]["loc"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                loc.iter().any(|l| l == field),
                "{body}: error should name {field}: {}",
                r.body
            );
        }
        let big = "x".repeat(3000);
        let r = app
            .post(
                &format!("/app/{a}/msg"),
                json!({"eventType": "a", "payload": {"big": big}}),
            )
            .await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (413, Some("payload_too_large"))
        );

        let raw = |body: &'static str, ct: &'static str| {
            app.client
                .post(format!("{}/api/v1/app", app.base))
                .bearer_auth(&app.key)
                .header("content-type", ct)
                .body(body)
                .send()
        };
        let r = raw("{\"name\": ", "application/json").await.unwrap();
        assert_eq!(r.status(), 400);
        assert_eq!(
            r.json::<serde_json::Value>().await.unwrap()["code"],
            "invalid_json"
        );
        let r = raw("name=x", "application/x-www-form-urlencoded")
            .await
            .unwrap();
        assert_eq!(r.status(), 415);
        let r = app.get("/app?limit=0").await;
        assert_eq!(r.status, 422);
        let r = app.get(&format!("/app/{a}/msg?before=notadate")).await;
        assert_eq!(r.status, 422);
        let r = app.get("/nope").await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (404, Some("not_found"))
        );
    }
}

#[tokio::test]
async fn endpoints_round_trip_their_settings_and_secrets_rotate_with_grace() {
    for app in TestApp::all(&[]).await {
        let (a, _) = app.app_with_endpoint("shop").await;
        let et = json!({"name": "user.created", "description": "new user"});
        app.ok(Method::POST, "/event-type", Some(et), 201).await;
        let created = app
            .ok(Method::POST, &format!("/app/{a}/endpoint"), Some(json!({
                "url": "http://127.0.0.1:9/full", "uid": "primary", "description": "main",
                "filterTypes": ["user.created"], "channels": ["eu"], "throttleRate": 50,
                "headers": {"X-Team": "billing"}, "metadata": {"owner": "ann"},
                "retryPolicy": {"exponential": {"base": "1s", "cap": "1m", "jitter": "equal"}, "maxAttempts": 4},
                "timeout": "5s", "maxConcurrency": 3, "statusPreset": "retry-all-but-410", "permanentOn": [418]
            })), 201)
            .await;
        let e = created["id"].as_str().unwrap();
        assert_eq!(created["uid"], "primary");
        assert_eq!(created["throttleRate"], 50);
        assert_eq!(created["timeout"], "5s");
        assert_eq!(created["maxConcurrency"], 3);
        assert_eq!(created["statusPreset"], "retry-all-but-410");
        assert_eq!(created["permanentOn"], json!([418]));
        assert_eq!(created["retryPolicy"]["maxAttempts"], 4);
        assert_eq!(created["breakerState"], "closed");
        assert_eq!(
            app.get(&format!("/app/{a}/endpoint/primary")).await.body,
            created
        );

        let patched = app
            .ok(
                Method::PATCH,
                &format!("/app/{a}/endpoint/{e}"),
                Some(json!({"timeout": null, "disabled": true, "channels": null})),
                200,
            )
            .await;
        assert_eq!(patched["timeout"], "15s", "null restores the default");
        assert_eq!(patched["disabled"], true);
        assert_eq!(patched["disabledReason"], "disabled by the tenant");
        assert_eq!(patched["channels"], json!(null));
        assert_eq!(patched["description"], "main", "absent fields stay");
        let enabled = app
            .ok(
                Method::PATCH,
                &format!("/app/{a}/endpoint/{e}"),
                Some(json!({"disabled": false})),
                200,
            )
            .await;
        assert_eq!(enabled["disabledReason"], json!(null));

        let headers = app
            .get(&format!("/app/{a}/endpoint/{e}/headers"))
            .await
            .body;
        assert_eq!(headers["headers"], json!({"X-Team": "billing"}));
        app.ok(
            Method::PATCH,
            &format!("/app/{a}/endpoint/{e}/headers"),
            Some(json!({"headers": {"X-New": "1", "X-Team": null}})),
            204,
        )
        .await;
        assert_eq!(
            app.get(&format!("/app/{a}/endpoint/{e}/headers"))
                .await
                .body["headers"],
            json!({"X-New": "1"})
        );

        let before = app.get(&format!("/app/{a}/endpoint/{e}/secret")).await.body["key"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(before.starts_with("whsec_"));
        app.ok(
            Method::POST,
            &format!("/app/{a}/endpoint/{e}/secret/rotate"),
            Some(json!({})),
            200,
        )
        .await;
        let after = app.get(&format!("/app/{a}/endpoint/{e}/secret")).await.body["key"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_ne!(before, after);
        let active = app
            .store
            .active_secrets(app.tenant, e.parse().unwrap(), domain::Timestamp::now())
            .await
            .unwrap();
        let keys: Vec<_> = active.iter().map(|s| s.secret.clone()).collect();
        assert_eq!(
            keys,
            [after, before],
            "the old secret signs alongside the new one"
        );
    }
}

#[tokio::test]
async fn recover_runs_as_a_background_task_and_resend_rearms_one_delivery() {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    use store::entities::delivery;
    for app in TestApp::all(&[]).await {
        let (a, e) = app.app_with_endpoint("shop").await;
        let mut ids = Vec::new();
        for i in 0..3 {
            let m = app
                .ok(
                    Method::POST,
                    &format!("/app/{a}/msg"),
                    Some(json!({"eventType": "x", "payload": {"i": i}})),
                    202,
                )
                .await;
            ids.push(m["id"].as_str().unwrap().to_owned());
        }
        delivery::Entity::update_many()
            .col_expr(
                delivery::Column::State,
                sea_orm::sea_query::Expr::value("failed"),
            )
            .filter(delivery::Column::EndpointId.eq(e.parse::<domain::ids::EndpointId>().unwrap()))
            .exec(app.store.connection())
            .await
            .unwrap();
        assert_eq!(
            app.get(&format!("/app/{a}/endpoint/{e}/stats")).await.body["fail"],
            3
        );

        let resend = app
            .call(
                Method::POST,
                &format!("/app/{a}/msg/{}/endpoint/{e}/resend", ids[0]),
                None,
            )
            .await;
        assert_eq!(resend.status, 202);
        assert_eq!(
            app.get(&format!("/app/{a}/endpoint/{e}/stats")).await.body["fail"],
            2
        );

        let task = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/recover"),
                Some(json!({"since": "2000-01-01T00:00:00Z"})),
                202,
            )
            .await;
        assert_eq!(
            (task["status"].as_str(), task["task"].as_str()),
            (Some("running"), Some("endpoint.recover"))
        );
        let path = format!("/background-task/{}", task["id"].as_str().unwrap());
        assert_eq!(wait_for_task(&app, &path).await, "finished");
        let stats = app.get(&format!("/app/{a}/endpoint/{e}/stats")).await.body;
        assert_eq!(
            (stats["fail"].as_i64(), stats["pending"].as_i64()),
            (Some(0), Some(3))
        );
        let manual = delivery::Entity::find()
            .filter(delivery::Column::EndpointId.eq(e.parse::<domain::ids::EndpointId>().unwrap()))
            .filter(delivery::Column::NextTrigger.eq("manual"))
            .all(app.store.connection())
            .await
            .unwrap();
        assert_eq!(
            manual.len(),
            3,
            "every recovered delivery's next attempt is manual"
        );
    }
}

#[tokio::test]
async fn applications_support_get_if_exists_upsert_patch_and_delete() {
    for app in TestApp::all(&[]).await {
        let body = json!({"name": "Shop", "uid": "shop", "metadata": {"tier": "gold"}});
        let first = app.ok(Method::POST, "/app", Some(body.clone()), 201).await;
        assert_eq!(app.post("/app", body.clone()).await.status, 409);
        let existing = app
            .ok(Method::POST, "/app?get_if_exists=true", Some(body), 200)
            .await;
        assert_eq!(existing["id"], first["id"]);

        let created = app
            .ok(
                Method::PUT,
                "/app/new-uid",
                Some(json!({"name": "New"})),
                201,
            )
            .await;
        assert_eq!(created["uid"], "new-uid");
        let replaced = app
            .ok(
                Method::PUT,
                "/app/new-uid",
                Some(json!({"name": "Newer", "uid": "new-uid"})),
                200,
            )
            .await;
        assert_eq!(
            (replaced["id"].clone(), replaced["name"].as_str()),
            (created["id"].clone(), Some("Newer"))
        );

        let patched = app
            .ok(
                Method::PATCH,
                "/app/shop",
                Some(json!({"throttleRate": 9})),
                200,
            )
            .await;
        assert_eq!(
            (
                patched["throttleRate"].as_i64(),
                patched["metadata"]["tier"].as_str()
            ),
            (Some(9), Some("gold"))
        );

        app.ok(Method::DELETE, "/app/shop", None, 204).await;
        assert_eq!(app.get("/app/shop").await.status, 404);
    }
}

#[tokio::test]
async fn ten_thousand_messages_page_through_in_order() {
    use sea_orm::EntityTrait;
    use store::entities::message;
    for app in TestApp::all(&[]).await {
        let (a, _) = app.app_with_endpoint("bulk").await;
        // Written in bulk straight to the table; the API under test is the listing.
        let mut ids = Vec::new();
        for chunk in 0..20 {
            let rows: Vec<message::ActiveModel> = (0..500)
                .map(|i| {
                    let id = domain::ids::MessageId::new();
                    ids.push(id.to_string());
                    message::ActiveModel::from(message::Model {
                        id,
                        tenant_id: app.tenant,
                        app_id: a.parse().unwrap(),
                        event_type: "bulk".into(),
                        event_id: Some(format!("e{chunk}-{i}")),
                        payload: b"{}".to_vec(),
                        channels: None,
                        tags: None,
                        ordering_key: None,
                        created_at: domain::Timestamp::now().as_millis(),
                        deliver_at: None,
                        trace_parent: None,
                    })
                })
                .collect();
            message::Entity::insert_many(rows)
                .exec(app.store.connection())
                .await
                .unwrap();
        }
        ids.reverse();
        let mut seen = Vec::new();
        let mut path = format!("/app/{a}/msg?limit=250");
        let mut pages = 0;
        loop {
            let page = app.get(&path).await.body;
            pages += 1;
            seen.extend(
                page["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m["id"].as_str().unwrap().to_owned()),
            );
            if page["done"] == true {
                break;
            }
            path = format!(
                "/app/{a}/msg?limit=250&iterator={}",
                page["iterator"].as_str().unwrap()
            );
        }
        assert_eq!(pages, 40, "on {}", app.backend);
        assert_eq!(seen, ids, "all 10,000, newest first, none twice");
    }
}

#[tokio::test]
async fn the_openapi_document_covers_every_route() {
    let app = TestApp::start(store::testing::TestDb::sqlite().await, &[]).await;
    let doc: serde_json::Value = app
        .client
        .get(format!("{}/api/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        doc["openapi"].as_str().map(|v| v.starts_with("3.")),
        Some(true)
    );
    let paths = doc["paths"].as_object().unwrap();
    // Every route registered in crates/api/src/lib.rs (`at!("path", method => handler, …)`)
    // must be documented. rustfmt wraps long calls, so read the source without whitespace.
    let source: String = include_str!("../../../api/src/lib.rs")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let mut checked = 0;
    for (at, _) in source.match_indices("at!(\"") {
        let rest = &source[at + "at!(\"".len()..];
        let (route, tail) = rest.split_once('"').unwrap();
        if route.contains('$') {
            continue; // the macro's own definition
        }
        let args = tail.split(')').next().unwrap();
        let scope_at = source[..at].rfind("web::scope(\"").unwrap();
        let scope = source[scope_at + "web::scope(\"".len()..]
            .split('"')
            .next()
            .unwrap();
        let full = match scope {
            "/api/v1" => format!("/api/v1{route}"),
            // Inbound webhooks live outside the API (`POST /in/{source_id}`).
            "/in" => format!("/in{route}"),
            // Svix's Ingest API has its own root.
            "/ingest/api/v1/source" => format!("/ingest/api/v1/source{route}"),
            nested => format!("/api/v1{nested}{route}"),
        };
        let item = paths
            .get(&full)
            .unwrap_or_else(|| panic!("{full} is not in the OpenAPI document"));
        for method in args
            .split(',')
            .filter_map(|a| a.split_once("=>"))
            .map(|(m, _)| m)
        {
            assert!(
                item.get(method).is_some(),
                "{method} {full} is not documented"
            );
            checked += 1;
        }
    }
    assert!(checked >= 38, "found only {checked} routes in lib.rs");
}

#[tokio::test]
async fn svix_compatible_edges_wrong_methods_arrays_order_and_tasks() {
    for app in TestApp::all(&[]).await {
        let (a, e) = app.app_with_endpoint("edges").await;
        // A known path with a method it lacks: 405 with Allow; an unknown path: JSON 404.
        let r = app
            .call(
                Method::DELETE,
                &format!("/app/{a}/endpoint/{e}/stats"),
                None,
            )
            .await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (405, Some("method_not_allowed"))
        );
        assert_eq!(r.headers["allow"], "GET");
        let r = app
            .get(&format!("/app/{a}/endpoint/{e}/attempt-stats"))
            .await;
        assert_eq!(
            (r.status.as_u16(), r.body["code"].as_str()),
            (404, Some("not_found"))
        );
        // JSON arrays are not objects.
        let r = app
            .post("/app", json!(["by-position", null, null, null]))
            .await;
        assert_eq!(r.status, 422, "{}", r.body);
        assert_eq!(r.body["detail"][0]["loc"], json!(["body"]));
        // order=ascending pages oldest first.
        for name in ["b1", "b2", "b3"] {
            app.ok(Method::POST, "/app", Some(json!({"name": name})), 201)
                .await;
        }
        let asc = app.get("/app?order=ascending&limit=2").await.body;
        let desc = app.get("/app?limit=2").await.body;
        assert_eq!(asc["data"][0]["name"], "edges");
        assert_eq!(desc["data"][0]["name"], "b3");
        let next = app
            .get(&format!(
                "/app?order=ascending&limit=2&iterator={}",
                asc["iterator"].as_str().unwrap()
            ))
            .await
            .body;
        assert_eq!(next["data"][0]["name"], "b2");
        assert_eq!(app.get("/app?order=sideways").await.status, 422);
        // deliverAt further ahead than max_deliver_ahead (30 days by default) is refused.
        let r = app
            .post(
                &format!("/app/{a}/msg"),
                json!({"eventType": "x", "payload": {}, "deliverAt": "2030-01-01T00:00:00Z"}),
            )
            .await;
        assert_eq!(r.status, 422);
        // Rotation returns the new key (Svix's cloud API and SDK 2.x read it; the open-source
        // server's 204 would break them); tasks list and carry data.
        let rotated = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/secret/rotate"),
                Some(json!({})),
                200,
            )
            .await;
        assert_eq!(
            rotated["key"],
            app.get(&format!("/app/{a}/endpoint/{e}/secret")).await.body["key"]
        );
        let task = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/recover"),
                Some(json!({"since": "2020-01-01T00:00:00Z"})),
                202,
            )
            .await;
        assert_eq!(task["data"], json!({}));
        let tasks = app.get("/background-task").await.body;
        assert_eq!(tasks["data"][0]["id"], task["id"]);
        // Attempt filters are validated whatever the status.
        let r = app
            .get(&format!(
                "/app/{a}/attempt/endpoint/{e}?status=4&after=garbage"
            ))
            .await;
        assert_eq!(r.status, 422);
    }
}

#[tokio::test]
async fn replay_from_a_message_rearms_it_and_every_later_failure_only() {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    use store::entities::delivery;
    for app in TestApp::all(&[]).await {
        let (a, e) = app.app_with_endpoint("replay").await;
        let mut ids = Vec::new();
        for i in 0..3 {
            let m = app
                .ok(
                    Method::POST,
                    &format!("/app/{a}/msg"),
                    Some(json!({"eventType": "x", "eventId": format!("e{i}"), "payload": {}})),
                    202,
                )
                .await;
            ids.push(m["id"].as_str().unwrap().to_owned());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        delivery::Entity::update_many()
            .col_expr(
                delivery::Column::State,
                sea_orm::sea_query::Expr::value("failed"),
            )
            .filter(delivery::Column::EndpointId.eq(e.parse::<domain::ids::EndpointId>().unwrap()))
            .exec(app.store.connection())
            .await
            .unwrap();
        let task = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/replay-from-message"),
                Some(json!({"msgId": "e1"})),
                202,
            )
            .await;
        let path = format!("/background-task/{}", task["id"].as_str().unwrap());
        assert_eq!(wait_for_task(&app, &path).await, "finished");
        let dead = app
            .get(&format!("/app/{a}/endpoint/{e}/msg?status=2"))
            .await
            .body;
        let still_dead: Vec<_> = dead["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            still_dead,
            [ids[0].clone()],
            "only the message before the replay point stays dead"
        );
        let pending = app
            .get(&format!("/app/{a}/endpoint/{e}/msg?status=1"))
            .await
            .body;
        assert_eq!(pending["data"].as_array().unwrap().len(), 2);
        let r = app
            .post(
                &format!("/app/{a}/endpoint/{e}/replay-from-message"),
                json!({"msgId": "nope"}),
            )
            .await;
        assert_eq!(r.status, 404);
    }
}

/// Polls a background task until it is no longer running; returns its final status.
pub(crate) async fn wait_for_task(app: &TestApp, path: &str) -> String {
    for _ in 0..100 {
        let status = app.get(path).await.body["status"]
            .as_str()
            .unwrap()
            .to_owned();
        if status != "running" {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    "running".to_owned()
}

#[tokio::test]
async fn payloads_nest_at_most_64_levels() {
    for app in TestApp::all(&[]).await {
        let (a, _) = app.app_with_endpoint("depth").await;
        let nested = |levels: usize| {
            // `{"a": [[…[1]…]]}`: the object is one level, the arrays the rest.
            format!(
                r#"{{"eventType":"a","payload":{{"a":{}1{}}}}}"#,
                "[".repeat(levels - 1),
                "]".repeat(levels - 1)
            )
        };
        let send = |body: String| {
            app.client
                .post(format!("{}/api/v1/app/{a}/msg", app.base))
                .bearer_auth(&app.key)
                .header("content-type", "application/json")
                .body(body)
                .send()
        };
        assert_eq!(
            send(nested(64)).await.unwrap().status(),
            202,
            "{}",
            app.backend
        );
        for levels in [65, 100_000] {
            let r = send(nested(levels)).await.unwrap();
            assert_eq!(r.status(), 422, "{levels} levels on {}", app.backend);
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["detail"][0]["loc"], json!(["body", "payload"]));
            let msg = body["detail"][0]["msg"].as_str().unwrap();
            assert!(msg.contains("at most 64"), "{msg}");
        }
    }
}

#[tokio::test]
async fn a_429_is_not_replayed_to_a_client_that_retries_with_the_same_key() {
    for app in TestApp::all(&[
        ("HOOKD_TENANT_INGEST_RATE", "1"),
        ("HOOKD_TENANT_INGEST_BURST", "1"),
    ])
    .await
    {
        let (a, _) = app.app_with_endpoint("limited").await;
        let msg = json!({"eventType": "x", "payload": {"n": 1}});
        let (app, path) = (&app, format!("/app/{a}/msg"));
        let post = |key: &'static str| {
            let (path, msg) = (path.clone(), msg.clone());
            async move {
                app.call_as(
                    &app.key,
                    Method::POST,
                    &path,
                    Some(msg),
                    &[("idempotency-key", key)],
                )
                .await
            }
        };
        assert_eq!(post("first").await.status.as_u16(), 202);
        let refused = post("second").await;
        assert_eq!(refused.status.as_u16(), 429, "{}", app.backend);
        let wait: u64 = refused.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(wait)).await;
        // Backing off and retrying with the same key, as a client should: accepted.
        let retried = post("second").await;
        assert_eq!(
            retried.status.as_u16(),
            202,
            "on {}: {}",
            app.backend,
            retried.body
        );
        assert!(retried.headers.get("idempotent-replayed").is_none());
        // From now on that answer is the one replayed.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let again = post("second").await;
        assert_eq!(again.body["id"], retried.body["id"]);
        assert_eq!(again.headers["idempotent-replayed"], "true");
    }
}

#[tokio::test]
async fn an_answer_whose_record_cannot_be_written_is_replayed_not_run_twice() {
    for app in TestApp::all(&[]).await {
        let (a, _) = app.app_with_endpoint("unwritten").await;
        // Make completing an idempotency record fail, as a database hiccup would.
        let (create, drop) = match app.store.backend() {
            store::Backend::Sqlite => (
                "CREATE TRIGGER refuse_idem BEFORE UPDATE ON idempotency_keys \
                 BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
                "DROP TRIGGER refuse_idem",
            ),
            store::Backend::Postgres => (
                "CREATE FUNCTION refuse_idem() RETURNS trigger AS $$ BEGIN \
                 RAISE EXCEPTION 'injected failure'; END $$ LANGUAGE plpgsql; \
                 CREATE TRIGGER refuse_idem BEFORE UPDATE ON idempotency_keys \
                 FOR EACH ROW EXECUTE FUNCTION refuse_idem()",
                "DROP TRIGGER refuse_idem ON idempotency_keys; DROP FUNCTION refuse_idem()",
            ),
        };
        app.store.execute_sql(create).await.unwrap();
        let (app, path) = (&app, format!("/app/{a}/msg"));
        let post = || {
            let path = path.clone();
            async move {
                app.call_as(
                    &app.key,
                    Method::POST,
                    &path,
                    Some(json!({"eventType": "x", "payload": {"n": 1}})),
                    &[("idempotency-key", "k-unwritten")],
                )
                .await
            }
        };
        let first = post().await;
        assert_eq!(first.status.as_u16(), 202, "{}", app.backend);
        // The answer got lost on its way; the client retries.
        let retried = post().await;
        assert_eq!(
            (retried.status.as_u16(), &retried.body["id"]),
            (202, &first.body["id"]),
            "on {}: {}",
            app.backend,
            retried.body
        );
        app.store.execute_sql(drop).await.unwrap();
        // The record gets written in the background; the answer stays the same.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let later = post().await;
        assert_eq!(later.body["id"], first.body["id"]);
        let listed = app.get(&format!("/app/{a}/msg")).await.body;
        assert_eq!(
            listed["data"].as_array().unwrap().len(),
            1,
            "{}",
            app.backend
        );
    }
}

#[tokio::test]
async fn every_api_path_works_with_a_trailing_slash_as_on_svix() {
    for app in TestApp::all(&[]).await {
        let created = app.post("/app/", json!({"name": "slash"})).await;
        assert_eq!(created.status.as_u16(), 201, "{}", created.body);
        let a = created.body["id"].as_str().unwrap().to_owned();
        for path in [
            "/app/".to_owned(),
            "/app/?limit=1".to_owned(),
            format!("/app/{a}/"),
            format!("/app/{a}/endpoint/"),
            "/health/".to_owned(),
        ] {
            let with = app.get(&path).await;
            let without = app.get(path.replace("/?", "?").trim_end_matches('/')).await;
            assert_eq!(
                with.status.as_u16(),
                200,
                "{path} on {}: {}",
                app.backend,
                with.body
            );
            assert_eq!(with.body, without.body, "{path}");
        }
        let limited = app.get("/app/?limit=1").await.body;
        assert_eq!(limited["data"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn an_api_keys_last_use_is_recorded() {
    for app in TestApp::all(&[]).await {
        let (_, unused) = app
            .store
            .create_api_key(app.tenant, "unused")
            .await
            .unwrap();
        let before = domain::Timestamp::now().as_millis();
        assert_eq!(app.get("/app").await.status.as_u16(), 200);
        let mut used_at = None;
        for _ in 0..100 {
            let keys = app
                .store
                .list_api_keys(app.tenant, &Default::default())
                .await
                .unwrap()
                .data;
            let default = keys.iter().find(|k| k.name == "default").unwrap();
            assert!(
                keys.iter()
                    .find(|k| k.name == "unused")
                    .unwrap()
                    .last_used_at
                    .is_none()
            );
            used_at = default.last_used_at;
            if used_at.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let used_at =
            used_at.unwrap_or_else(|| panic!("last use never written on {}", app.backend));
        assert!(used_at >= before - 1000, "{used_at} vs {before}");
        drop(unused);
    }
}
