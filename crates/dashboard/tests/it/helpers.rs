//! `spawn_app()`: the real hookd (API + dashboard) in-process on port 0 over a fresh SQLite
//! file (testkit's `TestApp`), and `Browser`, a client that keeps cookies, does not follow
//! redirects, and reads the CSRF token out of pages the way a form would.

use std::collections::BTreeMap;

use reqwest::StatusCode;
use reqwest::header::{self, HeaderMap};
use serde_json::Value;
use store::testing::TestDb;

pub const PASSWORD: &str = "correct horse battery staple";

pub use testkit::TestApp;

/// The real hookd (API + dashboard) in-process over a fresh SQLite file (see `testkit`).
pub async fn spawn_app() -> TestApp {
    TestApp::start(TestDb::sqlite().await, &[("HOOKD_ROLES", "api")]).await
}

pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The value of the first `name="csrf"` hidden field.
    pub fn csrf(&self) -> String {
        let marker = r#"name="csrf" value=""#;
        let start = self
            .body
            .find(marker)
            .unwrap_or_else(|| panic!("no csrf field in:\n{}", self.body))
            + marker.len();
        let len = self.body[start..].find('"').expect("closing quote");
        self.body[start..start + len].to_owned()
    }

    pub fn set_cookies(&self) -> Vec<&str> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    }

    #[track_caller]
    pub fn assert(&self, status: u16, contains: &str) {
        assert_eq!(self.status.as_u16(), status, "body:\n{}", self.body);
        assert!(
            self.body.contains(contains),
            "{contains:?} not in:\n{}",
            self.body
        );
    }
}

/// One browser: its own cookie jar.
pub struct Browser {
    pub base: String,
    client: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
}

impl Browser {
    pub fn new(app: &TestApp) -> Browser {
        Browser {
            base: app.base.clone(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                // Idle connections are dropped well before the server's keep-alive (actix:
                // 5 s) closes them: a request sent on one just as the server closes it fails
                // with `IncompleteMessage` (seen in CI, after a 1 MiB message took ~5 s to send).
                .pool_idle_timeout(std::time::Duration::from_secs(2))
                .build()
                .expect("client"),
            cookies: BTreeMap::new(),
        }
    }

    pub async fn get(&mut self, path: &str) -> Page {
        let req = self.client.get(format!("{}{path}", self.base));
        self.send(req).await
    }

    pub async fn get_with(&mut self, path: &str, headers: &[(&str, &str)]) -> Page {
        let mut req = self.client.get(format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        self.post_with(path, form, &[]).await
    }

    pub async fn post_with(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let mut req = self.client.post(format!("{}{path}", self.base)).form(form);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req).await
    }

    pub async fn post_raw(&mut self, path: &str, content_type: &str, body: &str) -> Page {
        let req = self
            .client
            .post(format!("{}{path}", self.base))
            .header(header::CONTENT_TYPE, content_type)
            .body(body.to_owned());
        self.send(req).await
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let jar: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let req = if jar.is_empty() {
            req
        } else {
            req.header(header::COOKIE, jar.join("; "))
        };
        let resp = req.send().await.expect("request");
        let page = Page {
            status: resp.status(),
            headers: resp.headers().clone(),
            body: resp.text().await.expect("body"),
        };
        assert_ne!(
            page.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "500:\n{}",
            page.body
        );
        for c in page.set_cookies() {
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (name, value) = pair.split_once('=').expect("cookie pair");
            if value.is_empty() || attrs.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        page
    }

    /// Signs up a new organisation; returns the API key the welcome page shows.
    pub async fn sign_up(&mut self, name: &str, email: &str) -> String {
        let form = self.get("/signup").await;
        form.assert(200, "Create your hookd account");
        let token = form.csrf();
        let done = self
            .post(
                "/signup",
                &[
                    ("csrf", &token),
                    ("name", name),
                    ("email", email),
                    ("password", PASSWORD),
                ],
            )
            .await;
        done.assert(200, "shown <strong>only this once</strong>");
        let marker = r#"id="api-key">"#;
        let start = done.body.find(marker).expect("api key on the page") + marker.len();
        let len = done.body[start..].find('<').expect("end of key");
        done.body[start..start + len].to_owned()
    }

    pub async fn log_in(&mut self, email: &str, password: &str) -> Page {
        let token = self.get("/login").await.csrf();
        self.post(
            "/login",
            &[("csrf", &token), ("email", email), ("password", password)],
        )
        .await
    }
}

/// The REST API, as a tenant's code would use it.
pub async fn api(app: &TestApp, key: &str, path: &str, body: Value) -> Value {
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v1{path}", app.base))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .expect("api request");
    let status = resp.status();
    let body: Value = resp.json().await.expect("json");
    assert!(status.is_success(), "{path}: {status} {body}");
    body
}

/// An application with one endpoint, made through the API; returns their ids.
pub async fn app_with_endpoint(app: &TestApp, key: &str, url: &str) -> (String, String) {
    let a = api(app, key, "/app", serde_json::json!({"name": "Shop"})).await;
    let app_id = a["id"].as_str().expect("app id").to_owned();
    let ep = api(
        app,
        key,
        &format!("/app/{app_id}/endpoint"),
        serde_json::json!({"url": url}),
    )
    .await;
    (app_id, ep["id"].as_str().expect("endpoint id").to_owned())
}

/// A message through the API; returns its id.
pub async fn send_message(
    app: &TestApp,
    key: &str,
    app_id: &str,
    event_type: &str,
    payload: Value,
) -> String {
    let m = api(
        app,
        key,
        &format!("/app/{app_id}/msg"),
        serde_json::json!({"eventType": event_type, "payload": payload}),
    )
    .await;
    m["id"].as_str().expect("message id").to_owned()
}

/// Plays the dispatcher: every due delivery gets one attempt that answered 500 with
/// `response`, and becomes a dead letter.
pub async fn fail_due_deliveries(app: &TestApp, response: &str) -> usize {
    use domain::Timestamp;
    use std::time::Duration;
    use store::{AttemptResult, Next, attempt_row};
    let store = &app.db.store;
    // Claimed as if a second from now, so that everything just created is due; the attempt
    // itself happens now (a second ahead it could fall into a minute the charts do not show
    // yet).
    let now = Timestamp::now();
    let due = now.plus(Duration::from_secs(1));
    let claimed = store
        .system()
        .claim_due("test", due, due.plus(Duration::from_secs(60)), 100, None)
        .await
        .expect("claim");
    // Each delivery's application, as the dispatcher has it: its endpoint's.
    let ids: Vec<_> = claimed.iter().map(|d| d.endpoint_id).collect();
    let endpoints = store
        .system()
        .dispatch_endpoints(&ids, now)
        .await
        .expect("the deliveries' endpoints");
    let results: Vec<AttemptResult> = claimed
        .iter()
        .map(|d| AttemptResult {
            delivery: d.clone(),
            app_id: endpoints[&d.endpoint_id].endpoint.app_id,
            attempt: attempt_row(
                d,
                "http://127.0.0.1:9/hook",
                now,
                42,
                Some(500),
                Some(response.to_owned()),
                None,
                None,
                domain::classify::Verdict::Permanent,
                None,
            ),
            next: Next::Failed,
            disable_endpoint: None,
        })
        .collect();
    store
        .system()
        .record_results("test", &results, "http://localhost")
        .await
        .expect("record");
    results.len()
}
