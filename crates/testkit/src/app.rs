//! [`TestApp`]: the real application in-process on port 0 over a fresh database, with a
//! tenant and its API key, and a client that speaks JSON.

use std::collections::BTreeMap;

use domain::ids::TenantId;
use hookd::config::{Overrides, Settings};
use hookd::startup::Application;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use store::testing::TestDb;
use store::{NewTenant, Store};

pub struct TestApp {
    pub base: String,
    pub key: String,
    pub tenant: TenantId,
    pub store: Store,
    pub client: reqwest::Client,
    pub backend: &'static str,
    /// The app's database, for setting up what only the dispatcher could (failed attempts).
    pub db: TestDb,
}

pub struct Resp {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl TestApp {
    pub async fn start(db: TestDb, extra_env: &[(&str, &str)]) -> TestApp {
        init_test_log();
        let mut env: BTreeMap<String, String> = [
            ("HOOKD_DATABASE_URL", db.url.as_str()),
            ("HOOKD_BIND", "127.0.0.1:0"),
            ("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8,::1/128"),
            // API tests look at deliveries as the API leaves them; delivery tests add the
            // dispatcher with HOOKD_ROLES=all.
            ("HOOKD_ROLES", "api,scheduler"),
            store::testing::SERVER_ENV,
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in extra_env {
            env.insert(k.to_string(), v.to_string());
        }
        let settings = Settings::load_from(None, &env, &Overrides::default()).expect("settings");
        let app = Application::build(&settings).await.expect("build app");
        let base = format!("http://127.0.0.1:{}", app.port().expect("api role"));
        tokio::spawn(app.run_until_stopped());
        let store = db.store.clone();
        let (tenant, key) = new_tenant(&store, "acme").await;
        TestApp {
            base,
            key,
            tenant,
            store,
            client: reqwest::Client::new(),
            backend: db.backend_name,
            db,
        }
    }

    /// One app per backend this run covers.
    pub async fn all(extra_env: &[(&str, &str)]) -> Vec<TestApp> {
        let mut apps = Vec::new();
        for db in TestDb::all().await {
            apps.push(TestApp::start(db, extra_env).await);
        }
        apps
    }

    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> Resp {
        self.call_as(&self.key, method, path, body, &[]).await
    }

    pub async fn call_as(
        &self,
        key: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(key);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("non-JSON answer {status}: {text}"))
        };
        assert_ne!(
            status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "500 from {path}: {body}"
        );
        Resp {
            status,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.call(Method::POST, path, Some(body)).await
    }

    /// POST that must succeed with `want`; returns the body.
    pub async fn ok(&self, method: Method, path: &str, body: Option<Value>, want: u16) -> Value {
        let r = self.call(method, path, body).await;
        assert_eq!(
            r.status.as_u16(),
            want,
            "{path} on {}: {}",
            self.backend,
            r.body
        );
        r.body
    }

    /// An application with one endpoint at a (never contacted) loopback URL.
    pub async fn app_with_endpoint(&self, uid: &str) -> (String, String) {
        let app = self
            .ok(
                Method::POST,
                "/app",
                Some(serde_json::json!({"name": uid, "uid": uid})),
                201,
            )
            .await;
        let app_id = app["id"].as_str().unwrap().to_owned();
        let ep = self
            .ok(
                Method::POST,
                &format!("/app/{app_id}/endpoint"),
                Some(serde_json::json!({"url": "http://127.0.0.1:9/hook"})),
                201,
            )
            .await;
        (app_id, ep["id"].as_str().unwrap().to_owned())
    }
}

pub async fn new_tenant(store: &Store, name: &str) -> (TenantId, String) {
    let t = store
        .create_tenant(NewTenant {
            name: name.into(),
            notification_email: format!("{name}@example.com"),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await
        .unwrap();
    let tenant = t.id;
    let (_, key) = store.create_api_key(tenant, "default").await.unwrap();
    (tenant, key)
}

/// `TEST_LOG=1` shows the application's logs.
pub fn init_test_log() {
    if std::env::var("TEST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("info")
            .with_test_writer()
            .try_init();
    }
}
