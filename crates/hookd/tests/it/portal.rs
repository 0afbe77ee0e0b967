//! App portal access through the API (issue 19): Svix's `app-portal-access`, `expire-all` and
//! `logout`, and what a portal token may reach: its own application and nothing else.

use reqwest::Method;
use serde_json::{Value, json};
use testkit::{TestApp, new_tenant};

/// Issues a portal token for `app` (id or uid) with `body`; returns (url, token).
async fn portal(t: &TestApp, app: &str, body: Value) -> (String, String) {
    let out = t
        .ok(
            Method::POST,
            &format!("/auth/app-portal-access/{app}"),
            Some(body),
            200,
        )
        .await;
    (
        out["url"].as_str().unwrap().to_owned(),
        out["token"].as_str().unwrap().to_owned(),
    )
}

async fn status(t: &TestApp, token: &str, method: Method, path: &str, body: Option<Value>) -> u16 {
    t.call_as(token, method, path, body, &[])
        .await
        .status
        .as_u16()
}

#[tokio::test]
async fn a_portal_token_reaches_its_own_application_and_nothing_else() {
    for t in TestApp::all(&[]).await {
        let (a, ep_a) = t.app_with_endpoint("cust-a").await;
        let (b, ep_b) = t.app_with_endpoint("cust-b").await;
        let msg_b = t
            .ok(
                Method::POST,
                &format!("/app/{b}/msg"),
                Some(json!({"eventType": "x.y", "payload": {}})),
                202,
            )
            .await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (url, token) = portal(&t, &a, json!({})).await;
        assert!(token.starts_with("hkp_"), "{token}");
        assert!(
            url.contains("/portal/#token=") && url.ends_with(&token) && !url.contains('?'),
            "the token travels in the fragment only: {url}"
        );
        // Its own application, by id and by uid: read, and manage endpoints.
        for path in [
            format!("/app/{a}"),
            "/app/cust-a".to_owned(),
            format!("/app/{a}/endpoint"),
            format!("/app/{a}/endpoint/{ep_a}"),
            format!("/app/{a}/endpoint/{ep_a}/secret"),
            format!("/app/{a}/msg"),
            "/event-type".to_owned(),
        ] {
            assert_eq!(
                status(&t, &token, Method::GET, &path, None).await,
                200,
                "{path} on {}",
                t.backend
            );
        }
        let created = t
            .call_as(
                &token,
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/new"})),
                &[],
            )
            .await;
        assert_eq!(created.status.as_u16(), 201, "{}", created.body);
        // Another application of the same tenant, another tenant's, and the tenant's own
        // resources: 404 as if they did not exist.
        let (_, other_key) = new_tenant(&t.store, "other").await;
        let c = t
            .call_as(
                &other_key,
                Method::POST,
                "/app",
                Some(json!({"name": "c"})),
                &[],
            )
            .await
            .body["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let ep_c = t
            .call_as(
                &other_key,
                Method::POST,
                &format!("/app/{c}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/c"})),
                &[],
            )
            .await
            .body["id"]
            .as_str()
            .unwrap()
            .to_owned();
        for (method, path, body) in [
            (Method::GET, format!("/app/{b}"), None),
            (Method::GET, "/app/cust-b".to_owned(), None),
            (Method::GET, format!("/app/{b}/endpoint/{ep_b}"), None),
            (
                Method::GET,
                format!("/app/{b}/endpoint/{ep_b}/secret"),
                None,
            ),
            (Method::GET, format!("/app/{b}/msg/{msg_b}"), None),
            (Method::GET, format!("/app/{b}/attempt/msg/{msg_b}"), None),
            (Method::DELETE, format!("/app/{b}/endpoint/{ep_b}"), None),
            (
                Method::POST,
                format!("/app/{b}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/x"})),
            ),
            (Method::GET, format!("/app/{c}"), None),
            (Method::GET, format!("/app/{c}/endpoint/{ep_c}"), None),
            (Method::GET, "/app".to_owned(), None),
            (
                Method::POST,
                "/app".to_owned(),
                Some(json!({"name": "mine"})),
            ),
            (Method::GET, "/retention".to_owned(), None),
            (Method::GET, "/background-task".to_owned(), None),
            (Method::GET, "/email".to_owned(), None),
            (
                Method::POST,
                "/event-type".to_owned(),
                Some(json!({"name": "a.b", "description": "x"})),
            ),
            (
                Method::POST,
                format!("/auth/app-portal-access/{a}"),
                Some(json!({})),
            ),
            (
                Method::POST,
                format!("/auth/app/{a}/expire-all"),
                Some(json!({})),
            ),
        ] {
            assert_eq!(
                status(&t, &token, method.clone(), &path, body).await,
                404,
                "{method} {path} with a portal token of another application, on {}",
                t.backend
            );
        }
        // Within its application it neither changes the application nor sends messages.
        assert_eq!(
            status(&t, &token, Method::DELETE, &format!("/app/{a}"), None).await,
            403
        );
        assert_eq!(
            status(
                &t,
                &token,
                Method::POST,
                &format!("/app/{a}/msg"),
                Some(json!({"eventType": "x.y", "payload": {}}))
            )
            .await,
            403
        );
        // With an Idempotency-Key (the Svix SDKs send one): still only its own application,
        // and never a reply stored for the tenant's request with the same key.
        let body = json!({"url": "http://127.0.0.1:9/idem"});
        let tenants = t
            .call_as(
                &t.key,
                Method::POST,
                &format!("/app/{b}/endpoint"),
                Some(body.clone()),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(tenants.status.as_u16(), 201);
        let mine = t
            .call_as(
                &token,
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(body.clone()),
                &[("idempotency-key", "k-1")],
            )
            .await;
        assert_eq!(mine.status.as_u16(), 201, "{}", mine.body);
        assert_ne!(
            mine.body["id"], tenants.body["id"],
            "a reply stored for another application"
        );
        let theirs = t
            .call_as(
                &token,
                Method::POST,
                &format!("/app/{b}/endpoint"),
                Some(body),
                &[("idempotency-key", "k-2")],
            )
            .await;
        assert_eq!(theirs.status.as_u16(), 404, "{}", theirs.body);
        // The application still exists and b's endpoint too.
        assert_eq!(
            t.get(&format!("/app/{b}/endpoint/{ep_b}"))
                .await
                .status
                .as_u16(),
            200
        );
    }
}

#[tokio::test]
async fn portal_tokens_expire_are_expired_all_and_log_out() {
    for t in TestApp::all(&[]).await {
        let (a, _) = t.app_with_endpoint("exp-a").await;
        // Svix's bounds: one hour to seven days; a bad field is a 422 naming it.
        for (body, field) in [
            (json!({"expiry": 10}), "expiry"),
            (json!({"expiry": 700_000}), "expiry"),
            (json!({"capabilities": ["Everything"]}), "capabilities"),
            (json!({"sessionId": ""}), "sessionId"),
        ] {
            let r = t
                .post(&format!("/auth/app-portal-access/{a}"), body.clone())
                .await;
            assert_eq!(r.status.as_u16(), 422, "{body}: {}", r.body);
            assert_eq!(r.body["detail"][0]["loc"][1], field, "{}", r.body);
        }
        assert_eq!(
            t.post(
                "/auth/app-portal-access/app_01J000000000000000000000000",
                json!({})
            )
            .await
            .status
            .as_u16(),
            404
        );
        // A read-only token reads and changes nothing.
        let (_, ro) = portal(&t, &a, json!({"readOnly": true, "expiry": 3600})).await;
        assert_eq!(
            status(&t, &ro, Method::GET, &format!("/app/{a}/endpoint"), None).await,
            200
        );
        assert_eq!(
            status(
                &t,
                &ro,
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/ro"}))
            )
            .await,
            403
        );
        // Logout ends one token, at once.
        let (_, one) = portal(&t, &a, json!({})).await;
        let (_, two) = portal(&t, &a, json!({"sessionId": "s-2"})).await;
        let (_, three) = portal(&t, &a, json!({"sessionId": "s-3"})).await;
        assert_eq!(
            status(&t, &one, Method::POST, "/auth/logout", None).await,
            204
        );
        assert_eq!(
            status(&t, &one, Method::GET, &format!("/app/{a}"), None).await,
            401
        );
        assert_eq!(
            status(&t, &two, Method::GET, &format!("/app/{a}"), None).await,
            200
        );
        // An API key is not logged out.
        assert_eq!(
            t.call(Method::POST, "/auth/logout", None)
                .await
                .status
                .as_u16(),
            400
        );
        // expire-all by session id, then all.
        assert_eq!(
            t.call(
                Method::POST,
                &format!("/auth/app/{a}/expire-all"),
                Some(json!({"sessionIds": ["s-2"]}))
            )
            .await
            .status
            .as_u16(),
            204
        );
        assert_eq!(
            status(&t, &two, Method::GET, &format!("/app/{a}"), None).await,
            401
        );
        assert_eq!(
            status(&t, &three, Method::GET, &format!("/app/{a}"), None).await,
            200
        );
        assert_eq!(
            t.call(
                Method::POST,
                &format!("/auth/app/{a}/expire-all"),
                Some(json!({}))
            )
            .await
            .status
            .as_u16(),
            204
        );
        for tok in [&three, &ro] {
            assert_eq!(
                status(&t, tok, Method::GET, &format!("/app/{a}"), None).await,
                401
            );
        }
        // A portal link can create the application it is for (Svix's `application`).
        let (_, fresh) = portal(
            &t,
            "new-cust",
            json!({"application": {"name": "New", "uid": "new-cust"}}),
        )
        .await;
        assert_eq!(
            status(&t, &fresh, Method::GET, "/app/new-cust", None).await,
            200
        );
    }
}

/// A message to `app` with the tenant's key (or `key`); its id.
async fn message_of(t: &TestApp, key: Option<&str>, app: &str) -> String {
    let body = Some(json!({"eventType": "x.y", "payload": {"n": 1}}));
    let path = format!("/app/{app}/msg");
    let r = match key {
        Some(k) => t.call_as(k, Method::POST, &path, body, &[]).await,
        None => t.call(Method::POST, &path, body).await,
    };
    assert_eq!(r.status.as_u16(), 202, "{}", r.body);
    r.body["id"].as_str().unwrap().to_owned()
}

/// Every operation of the API, read from its own OpenAPI document, called with a portal token
/// of application A: with the ids of another application of the same tenant, of another
/// tenant's application, and with A's id but another application's endpoint or message, each
/// answers 404; so does every operation outside applications but reading event types and
/// logging out. Nothing of theirs changes.
#[tokio::test]
async fn every_api_operation_with_ids_not_its_own_is_not_found_to_a_portal_token() {
    for t in TestApp::all(&[]).await {
        let (a, _) = t.app_with_endpoint("walk-a").await;
        let (b, ep_b) = t.app_with_endpoint("walk-b").await;
        let msg_b = message_of(&t, None, &b).await;
        let (_, other_key) = new_tenant(&t.store, "walk-other").await;
        let c = t
            .call_as(
                &other_key,
                Method::POST,
                "/app",
                Some(json!({"name": "c"})),
                &[],
            )
            .await
            .body["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let ep_c = t
            .call_as(
                &other_key,
                Method::POST,
                &format!("/app/{c}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/c"})),
                &[],
            )
            .await
            .body["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let msg_c = message_of(&t, Some(&other_key), &c).await;
        let (_, token) = portal(&t, &a, json!({})).await;
        let doc = t.ok(Method::GET, "/openapi.json", None, 200).await;
        let allowed = [
            ("get", "/event-type"),
            ("get", "/event-type/{event_type_name}"),
            ("post", "/auth/logout"),
        ];
        let mut walked = 0;
        for (path, ops) in doc["paths"].as_object().expect("paths") {
            let Some(rest) = path.strip_prefix("/api/v1") else {
                continue;
            };
            if rest.starts_with("/health") || rest == "/openapi.json" {
                continue;
            }
            for (method, _) in ops.as_object().expect("operations") {
                let Ok(m) = method.to_uppercase().parse::<Method>() else {
                    continue;
                };
                if allowed.contains(&(method.as_str(), rest)) {
                    continue;
                }
                let theirs = [
                    (b.as_str(), ep_b.as_str(), msg_b.as_str()),
                    (c.as_str(), ep_c.as_str(), msg_c.as_str()),
                    (a.as_str(), ep_b.as_str(), msg_b.as_str()),
                    (a.as_str(), ep_c.as_str(), msg_c.as_str()),
                ];
                // Operations outside applications are tried once; those of A itself only with
                // another application's endpoint or message in the path.
                for (app, ep, m_id) in theirs {
                    let own_app = app == a;
                    // In its own application, with another application's endpoint or message:
                    // the reads and deletes (a body there is checked beside the lookup, as for
                    // an API key, and a PUT is an upsert naming a new endpoint).
                    if own_app
                        && (!matches!(m, Method::GET | Method::DELETE)
                            || !(rest.contains("{endpoint_id}") || rest.contains("{msg_id}")))
                    {
                        continue;
                    }
                    let p = rest
                        .replace("{app_id}", app)
                        .replace("{endpoint_id}", ep)
                        .replace("{msg_id}", m_id)
                        .replace("{attempt_id}", "atmpt_00000000000000000000000000")
                        .replace("{task_id}", "qtask_00000000000000000000000000")
                        .replace("{event_type_name}", "x.y");
                    let got = t.call_as(&token, m.clone(), &p, Some(json!({})), &[]).await;
                    assert_eq!(
                        got.status.as_u16(),
                        404,
                        "{method} {p} with A's portal token, on {}: {}",
                        t.backend,
                        got.body
                    );
                    walked += 1;
                    if !rest.contains("{app_id}") {
                        break;
                    }
                }
            }
        }
        assert!(walked >= 80, "walked {walked} operations");
        // B's and C's data are as they were.
        let ep = t
            .ok(Method::GET, &format!("/app/{b}/endpoint/{ep_b}"), None, 200)
            .await;
        assert_eq!(ep["disabled"], false);
        let got = t
            .call_as(
                &other_key,
                Method::GET,
                &format!("/app/{c}/msg/{msg_c}"),
                None,
                &[],
            )
            .await;
        assert_eq!(got.status.as_u16(), 200, "{}", got.body);
        assert_eq!(got.body["payload"], json!({"n": 1}));
    }
}

/// The PEM of a test fixture (`tests/fixtures/mtls`).
fn mtls_fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/mtls/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Sets a bearer token and an mTLS identity on the endpoint at `path`.
async fn set_credentials(t: &TestApp, path: &str) {
    t.ok(
        Method::PUT,
        &format!("{path}/auth"),
        Some(json!({"type": "bearer", "token": "victims-secret-token"})),
        204,
    )
    .await;
    t.ok(
        Method::PUT,
        &format!("{path}/mtls"),
        Some(json!({"identity": mtls_fixture("client-identity.pem")})),
        204,
    )
    .await;
}

/// The endpoint's auth type and the status of its mTLS configuration (404: none).
async fn credentials_held(t: &TestApp, path: &str) -> (String, u16) {
    let auth = t.ok(Method::GET, &format!("{path}/auth"), None, 200).await;
    let mtls = t.get(&format!("{path}/mtls")).await.status.as_u16();
    (auth["type"].as_str().unwrap_or_default().to_owned(), mtls)
}

#[tokio::test]
async fn moving_an_endpoint_to_another_host_drops_its_credentials() {
    for t in TestApp::all(&[]).await {
        let (a, ep) = t.app_with_endpoint("cust-a").await;
        let (_, token) = portal(&t, &a, json!({})).await;
        let path = format!("/app/{a}/endpoint/{ep}");
        let kept = ("bearer".to_owned(), 200);
        let dropped = ("none".to_owned(), 404);
        set_credentials(&t, &path).await;
        assert_eq!(credentials_held(&t, &path).await, kept, "{}", t.backend);

        // Another path on the same host and port: the credentials stay.
        t.ok(
            Method::PATCH,
            &path,
            Some(json!({"url": "http://127.0.0.1:9/other-path"})),
            200,
        )
        .await;
        assert_eq!(credentials_held(&t, &path).await, kept, "{}", t.backend);

        // Another host (here through a portal token, as a customer would): both are gone.
        let moved = t
            .call_as(
                &token,
                Method::PATCH,
                &path,
                Some(json!({"url": "http://127.0.0.2:9/hook"})),
                &[],
            )
            .await;
        assert_eq!(moved.status.as_u16(), 200, "{}", moved.body);
        assert_eq!(credentials_held(&t, &path).await, dropped, "{}", t.backend);

        // Another port of the same host is another receiver too (PUT: the whole endpoint).
        set_credentials(&t, &path).await;
        t.ok(
            Method::PUT,
            &path,
            Some(json!({"url": "http://127.0.0.2:10/hook"})),
            200,
        )
        .await;
        assert_eq!(credentials_held(&t, &path).await, dropped, "{}", t.backend);
    }
}

#[tokio::test]
async fn expired_and_revoked_portal_tokens_are_pruned() {
    for t in TestApp::all(&[]).await {
        let (a, _) = t.app_with_endpoint("cust-a").await;
        let (b, _) = t.app_with_endpoint("cust-b").await;
        let (_, live) = portal(&t, &a, json!({})).await;
        let (_, revoked) = portal(&t, &a, json!({})).await;
        let (_, expired) = portal(&t, &b, json!({})).await;
        assert_eq!(
            status(&t, &revoked, Method::POST, "/auth/logout", None).await,
            204
        );
        t.ok(
            Method::POST,
            &format!("/auth/app/{b}/expire-all"),
            Some(json!({})),
            204,
        )
        .await;
        let sweep = || async {
            let now = domain::Timestamp::now().plus(std::time::Duration::from_millis(5));
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            t.store
                .system()
                .sweep_expired(
                    store::Horizons {
                        idempotency: domain::Timestamp::from_millis(0),
                        events: domain::Timestamp::from_millis(0),
                        done: domain::Timestamp::from_millis(0),
                    },
                    now,
                )
                .await
                .unwrap()
                .portal_tokens
        };
        assert_eq!(sweep().await, 2, "the revoked and the expired one");
        assert_eq!(sweep().await, 0, "gone");
        let path = format!("/app/{a}/endpoint");
        assert_eq!(status(&t, &live, Method::GET, &path, None).await, 200);
        for gone in [&revoked, &expired] {
            assert_eq!(status(&t, gone, Method::GET, &path, None).await, 401);
        }
    }
}

#[tokio::test]
async fn a_portal_tokens_capabilities_decide_what_it_may_do_through_the_api() {
    for t in TestApp::all(&[]).await {
        let (a, ep) = t.app_with_endpoint("cust-a").await;
        let path = format!("/app/{a}/endpoint/{ep}");
        let secret = || async {
            t.ok(Method::GET, &format!("{path}/secret"), None, 200)
                .await["key"]
                .clone()
        };
        let before = secret().await;
        let refused = |r: testkit::Resp, cap: &str| {
            assert_eq!(r.status.as_u16(), 403, "{cap}: {}", r.body);
            assert_eq!(r.body["code"], "missing_capability", "{}", r.body);
            assert!(r.body.to_string().contains(cap), "{}", r.body);
        };
        let since = json!({"since": "2020-01-01T00:00:00Z"});

        // ViewBase alone reads, and nothing more: no secret, no header values, no changes.
        let (_, view) = portal(&t, &a, json!({"capabilities": ["ViewBase"]})).await;
        assert_eq!(status(&t, &view, Method::GET, &path, None).await, 200);
        assert_eq!(
            status(&t, &view, Method::GET, &format!("/app/{a}/msg"), None).await,
            200
        );
        let call = |token: &str, m: Method, p: String, b: Option<Value>| {
            let token = token.to_owned();
            let t = &t;
            async move { t.call_as(&token, m, &p, b, &[]).await }
        };
        refused(
            call(&view, Method::GET, format!("{path}/secret"), None).await,
            "ViewEndpointSecret",
        );
        refused(
            call(&view, Method::GET, format!("{path}/headers"), None).await,
            "ViewEndpointSecret",
        );
        refused(
            call(
                &view,
                Method::POST,
                format!("{path}/secret/rotate"),
                Some(json!({})),
            )
            .await,
            "ManageEndpointSecret",
        );
        refused(
            call(
                &view,
                Method::PATCH,
                path.clone(),
                Some(json!({"url": "http://127.0.0.1:9/x"})),
            )
            .await,
            "ManageEndpoint",
        );
        refused(
            call(&view, Method::DELETE, path.clone(), None).await,
            "ManageEndpoint",
        );
        refused(
            call(
                &view,
                Method::POST,
                format!("{path}/recover"),
                Some(since.clone()),
            )
            .await,
            "CreateAttempts",
        );
        refused(
            call(
                &view,
                Method::POST,
                format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/y"})),
            )
            .await,
            "ManageEndpoint",
        );
        assert_eq!(
            secret().await,
            before,
            "{}: the secret was not rotated",
            t.backend
        );

        // A read-only token without capabilities reads but sees no secret either.
        let (_, read_only) = portal(&t, &a, json!({"readOnly": true})).await;
        assert_eq!(status(&t, &read_only, Method::GET, &path, None).await, 200);
        refused(
            call(&read_only, Method::GET, format!("{path}/secret"), None).await,
            "ViewEndpointSecret",
        );
        refused(
            call(&read_only, Method::GET, format!("{path}/headers"), None).await,
            "ViewEndpointSecret",
        );

        // Each capability opens its own operations and no others.
        let (_, attempts) = portal(
            &t,
            &a,
            json!({"capabilities": ["ViewBase", "CreateAttempts"]}),
        )
        .await;
        assert_eq!(
            status(
                &t,
                &attempts,
                Method::POST,
                &format!("{path}/recover"),
                Some(since.clone())
            )
            .await,
            202
        );
        refused(
            call(
                &attempts,
                Method::POST,
                format!("{path}/secret/rotate"),
                Some(json!({})),
            )
            .await,
            "ManageEndpointSecret",
        );
        let (_, rotate) = portal(
            &t,
            &a,
            json!({"capabilities": ["ViewBase", "ManageEndpointSecret"]}),
        )
        .await;
        assert_eq!(
            status(&t, &rotate, Method::GET, &format!("{path}/secret"), None).await,
            200
        );
        let rotated = call(
            &rotate,
            Method::POST,
            format!("{path}/secret/rotate"),
            Some(json!({})),
        )
        .await;
        assert!(rotated.status.is_success(), "{}", rotated.body);
        assert_ne!(secret().await, before);
        refused(
            call(
                &rotate,
                Method::PATCH,
                path.clone(),
                Some(json!({"description": "x"})),
            )
            .await,
            "ManageEndpoint",
        );
        let (_, manage) = portal(&t, &a, json!({"capabilities": ["ManageEndpoint"]})).await;
        assert_eq!(
            status(
                &t,
                &manage,
                Method::PATCH,
                &path,
                Some(json!({"description": "x"}))
            )
            .await,
            200
        );
        assert_eq!(
            status(&t, &manage, Method::GET, &format!("{path}/headers"), None).await,
            200
        );
        refused(
            call(
                &manage,
                Method::POST,
                format!("{path}/recover"),
                Some(since.clone()),
            )
            .await,
            "CreateAttempts",
        );
        // No capabilities given: everything, as before.
        let (_, all) = portal(&t, &a, json!({})).await;
        assert_eq!(
            status(&t, &all, Method::GET, &format!("{path}/secret"), None).await,
            200
        );
        assert_eq!(
            status(
                &t,
                &all,
                Method::POST,
                &format!("{path}/recover"),
                Some(since.clone())
            )
            .await,
            202
        );
    }
}
