//! Svix's integration API (an application-scoped key), its statistics tasks and
//! `dashboard-access`, over real HTTP on every backend.

use reqwest::Method;
use serde_json::{Value, json};
use testkit::{TestApp, new_tenant};

use crate::api::wait_for_task;

async fn status(t: &TestApp, key: &str, method: Method, path: &str, body: Option<Value>) -> u16 {
    t.call_as(key, method, path, body, &[])
        .await
        .status
        .as_u16()
}

#[tokio::test]
async fn an_integration_key_reaches_only_its_applications_messages_and_attempts() {
    for t in TestApp::all(&[]).await {
        let (a, ep_a) = t.app_with_endpoint("integ-a").await;
        let (b, _) = t.app_with_endpoint("integ-b").await;
        let integ = t
            .ok(
                Method::POST,
                &format!("/app/{a}/integration"),
                Some(json!({"name": "Zapier", "featureFlags": ["beta"]})),
                201,
            )
            .await;
        let id = integ["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("integ_"), "{integ}");
        assert_eq!(
            (&integ["name"], &integ["featureFlags"]),
            (&json!("Zapier"), &json!(["beta"]))
        );
        assert!(integ["createdAt"].is_string() && integ["updatedAt"].is_string());
        let key = t
            .ok(
                Method::GET,
                &format!("/app/{a}/integration/{id}/key"),
                None,
                200,
            )
            .await["key"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(key.starts_with("integsk_"), "{key}");

        // Its application's messages and attempts: send, list, read.
        let sent = t
            .call_as(
                &key,
                Method::POST,
                "/app/integ-a/msg",
                Some(json!({"eventType": "order.paid", "payload": {"n": 1}})),
                &[],
            )
            .await;
        assert_eq!(sent.status.as_u16(), 202, "{} on {}", sent.body, t.backend);
        let msg = sent.body["id"].as_str().unwrap().to_owned();
        for path in [
            format!("/app/{a}/msg"),
            format!("/app/{a}/msg/{msg}"),
            format!("/app/{a}/attempt/msg/{msg}"),
            format!("/app/{a}/attempt/endpoint/{ep_a}"),
            format!("/app/{a}/msg/{msg}/endpoint"),
        ] {
            assert_eq!(
                status(&t, &key, Method::GET, &path, None).await,
                200,
                "{path}"
            );
        }
        // Nothing else: another application, the application itself, its endpoints and
        // integrations, resending, the tenant's catalogue and lists.
        let body = Some(
            json!({"name": "x", "url": "http://127.0.0.1:9/x", "eventType": "a", "payload": {}}),
        );
        for (method, path) in [
            (Method::GET, format!("/app/{b}/msg")),
            (Method::POST, format!("/app/{b}/msg")),
            (Method::GET, format!("/app/{a}")),
            (Method::DELETE, format!("/app/{a}")),
            (Method::GET, format!("/app/{a}/endpoint")),
            (Method::POST, format!("/app/{a}/endpoint")),
            (Method::GET, format!("/app/{a}/endpoint/{ep_a}/secret")),
            (Method::GET, format!("/app/{a}/integration")),
            (Method::GET, format!("/app/{a}/integration/{id}/key")),
            (
                Method::POST,
                format!("/app/{a}/msg/{msg}/endpoint/{ep_a}/resend"),
            ),
            (Method::DELETE, format!("/app/{a}/msg/{msg}/content")),
            (Method::GET, "/app".to_owned()),
            (Method::GET, "/event-type".to_owned()),
            (Method::POST, format!("/auth/app-portal-access/{a}")),
            (Method::PUT, "/stats/usage/event-types".to_owned()),
        ] {
            let r = t
                .call_as(&key, method.clone(), &path, body.clone(), &[])
                .await;
            assert_eq!(
                r.status.as_u16(),
                403,
                "{method} {path} on {}: {}",
                t.backend,
                r.body
            );
            assert_eq!(r.body["code"], "forbidden", "{path}");
        }

        // Rotating replaces the key: the old one is refused at once.
        let rotated = t
            .ok(
                Method::POST,
                &format!("/app/{a}/integration/{id}/key/rotate"),
                None,
                200,
            )
            .await["key"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_ne!(rotated, key);
        let msgs = format!("/app/{a}/msg");
        assert_eq!(status(&t, &key, Method::GET, &msgs, None).await, 401);
        assert_eq!(status(&t, &rotated, Method::GET, &msgs, None).await, 200);
        let read = t
            .ok(
                Method::GET,
                &format!("/app/{a}/integration/{id}/key"),
                None,
                200,
            )
            .await;
        assert_eq!(read["key"], rotated.as_str());

        // Update, list, and another tenant's view.
        let updated = t
            .ok(
                Method::PUT,
                &format!("/app/{a}/integration/{id}"),
                Some(json!({"name": "Make"})),
                200,
            )
            .await;
        assert_eq!(
            (&updated["name"], &updated["featureFlags"]),
            // Cleared flags are left out: Svix's schema allows no empty list.
            (&json!("Make"), &serde_json::Value::Null)
        );
        let list = t
            .ok(Method::GET, &format!("/app/{a}/integration"), None, 200)
            .await;
        assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
        assert_eq!(list["done"], true);
        let other = t
            .ok(
                Method::GET,
                &format!("/app/{b}/integration/{id}"),
                None,
                404,
            )
            .await;
        assert_eq!(other["code"], "not_found");
        let (_, intruder) = new_tenant(&t.store, "intruder").await;
        for (method, path) in [
            (Method::GET, format!("/app/{a}/integration/{id}")),
            (Method::GET, format!("/app/{a}/integration/{id}/key")),
            (
                Method::POST,
                format!("/app/{a}/integration/{id}/key/rotate"),
            ),
            (Method::DELETE, format!("/app/{a}/integration/{id}")),
        ] {
            assert_eq!(
                status(&t, &intruder, method, &path, None).await,
                404,
                "{path}"
            );
        }
        let bad = t
            .call(
                Method::POST,
                &format!("/app/{a}/integration"),
                Some(json!({"name": ""})),
            )
            .await;
        assert_eq!(bad.status.as_u16(), 422, "{}", bad.body);
        assert_eq!(bad.body["detail"][0]["loc"], json!(["body", "name"]));

        // Deleting it ends the key.
        t.ok(
            Method::DELETE,
            &format!("/app/{a}/integration/{id}"),
            None,
            204,
        )
        .await;
        assert_eq!(status(&t, &rotated, Method::GET, &msgs, None).await, 401);
        t.ok(
            Method::GET,
            &format!("/app/{a}/integration/{id}"),
            None,
            404,
        )
        .await;
    }
}

#[tokio::test]
async fn statistics_run_as_background_tasks_with_svixs_shapes() {
    for t in TestApp::all(&[]).await {
        let (a, _) = t.app_with_endpoint("stats-a").await;
        let (b, _) = t.app_with_endpoint("stats-b").await;
        for name in ["user.signup", "user.deleted"] {
            t.ok(
                Method::POST,
                "/event-type",
                Some(json!({"name": name, "description": name})),
                201,
            )
            .await;
        }
        t.ok(
            Method::POST,
            &format!("/app/{b}/endpoint"),
            Some(json!({"url": "http://127.0.0.1:9/typed", "filterTypes": ["user.signup", "user.deleted"]})),
            201,
        )
        .await;
        for _ in 0..3 {
            t.ok(
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(json!({"eventType": "user.signup", "payload": {}})),
                202,
            )
            .await;
        }
        let started = t
            .ok(
                Method::POST,
                "/stats/usage/app",
                Some(
                    json!({"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z",
                    "appIds": ["stats-a", b, "nope"]}),
                ),
                202,
            )
            .await;
        assert_eq!(
            (
                &started["task"],
                &started["status"],
                &started["unresolvedAppIds"]
            ),
            (
                &json!("application.stats"),
                &json!("running"),
                &json!(["nope"])
            )
        );
        let path = format!("/background-task/{}", started["id"].as_str().unwrap());
        assert_eq!(wait_for_task(&t, &path).await, "finished", "{}", t.backend);
        let task = t.get(&path).await.body;
        assert_eq!(
            task["data"]["appStats"],
            json!([
                {"appId": a, "appUid": "stats-a", "messageDestinations": 3},
                {"appId": b, "appUid": "stats-b", "messageDestinations": 0},
            ]),
            "{task}"
        );
        let none = t
            .call(
                Method::POST,
                "/stats/usage/app",
                Some(json!({"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z", "appIds": ["nope"]})),
            )
            .await;
        assert_eq!(none.status.as_u16(), 422, "{}", none.body);
        assert_eq!(none.body["detail"][0]["loc"], json!(["body", "appIds"]));

        let started = t
            .ok(Method::PUT, "/stats/usage/event-types", None, 202)
            .await;
        assert_eq!(started["task"], "event-type.aggregate");
        let path = format!("/background-task/{}", started["id"].as_str().unwrap());
        assert_eq!(wait_for_task(&t, &path).await, "finished");
        let task = t.get(&path).await.body;
        assert_eq!(
            task["data"]["event_types"],
            json!([
                {"appId": a, "explicitlySubscribedEventTypes": [], "hasCatchAllEndpoint": true},
                {"appId": b, "explicitlySubscribedEventTypes": ["user.deleted", "user.signup"], "hasCatchAllEndpoint": true},
            ]),
            "{task}"
        );
        let listed = t.get("/background-task?task=application.stats").await.body;
        assert_eq!(listed["data"].as_array().unwrap().len(), 1, "{listed}");
    }
}

#[tokio::test]
async fn dashboard_access_issues_a_portal_token_like_app_portal_access() {
    for t in TestApp::all(&[]).await {
        let (a, _) = t.app_with_endpoint("dash").await;
        let out = t
            .ok(Method::POST, "/auth/dashboard-access/dash", None, 200)
            .await;
        let token = out["token"].as_str().unwrap();
        assert!(token.starts_with("hkp_"), "{out}");
        assert!(out["url"].as_str().unwrap().ends_with(token), "{out}");
        assert_eq!(
            status(&t, token, Method::GET, &format!("/app/{a}/endpoint"), None).await,
            200
        );
        t.ok(Method::POST, "/auth/dashboard-access/missing", None, 404)
            .await;
    }
}
