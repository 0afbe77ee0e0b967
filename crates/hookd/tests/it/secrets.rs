//! Secrets sealed at rest (issue 20): what an operator's database copy, backup, logs and
//! metrics hold of the endpoints' credentials, and how keys are made, rotated and missed.

use std::path::Path;
use std::time::Duration;

use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::json;

use crate::delivery::{SECRET, apps, endpoint_at, eventually, send, sink};
use crate::helpers::{Server, hookd, run, stderr, stdout};

/// A header value as a tenant would set one: a bearer token for the receiver.
const TOKEN: &str = "Bearer tok_9f8e7d6c5b4a39281706";

/// Everything the database holds, as text: `pg_dump` of a PostgreSQL database; the SQLite
/// file and its write-ahead log byte for byte (free pages included), which shows more than
/// `sqlite3 .dump` would.
fn dump(url: &str) -> String {
    if url.starts_with("postgres") {
        let out = std::process::Command::new("pg_dump")
            .arg(url)
            .output()
            .expect("run pg_dump (PostgreSQL's client tools)");
        assert!(
            out.status.success(),
            "pg_dump: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        let file = url.trim_start_matches("sqlite://");
        let mut bytes = std::fs::read(file).expect("read the database file");
        if let Ok(wal) = std::fs::read(format!("{file}-wal")) {
            bytes.extend(wal);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

#[tokio::test]
async fn a_database_copy_holds_no_endpoint_secret_or_header_value_in_clear() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, e) = endpoint_at(&app, &s, json!({"headers": {"Authorization": TOKEN}})).await;
        // Rotated: the previous secret keeps signing for a while, so it is stored too.
        let rotated = app
            .call(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/secret/rotate"),
                Some(json!({})),
            )
            .await;
        assert!(rotated.status.is_success(), "{:?}", rotated.body);
        let new_secret = app.get(&format!("/app/{a}/endpoint/{e}/secret")).await.body["key"]
            .as_str()
            .unwrap()
            .to_owned();
        let id = send(&app, &a, json!({"n": 1})).await;
        eventually(Duration::from_secs(10), "the delivery", || async {
            s.state.acked_ids().contains(&id)
        })
        .await;
        // Delivered with the header and verified with the secrets: sealing is invisible to
        // the receiver and the API.
        let got = s.state.received();
        assert_eq!(
            got[0].headers.get("authorization").map(String::as_str),
            Some(TOKEN)
        );
        assert_eq!(s.state.report().bad_signatures, 0);
        let headers = app
            .get(&format!("/app/{a}/endpoint/{e}/headers"))
            .await
            .body;
        assert_eq!(headers["headers"]["Authorization"], TOKEN);

        // Credentials of endpoints that authenticate beyond the signature (another
        // application, so the deliveries above are not involved).
        let other = app
            .ok(Method::POST, "/app", Some(json!({"name": "auth"})), 201)
            .await;
        let identity = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/mtls/client-identity.pem"
        ))
        .unwrap();
        // The client certificate's private key: a line of its base64 body.
        let key_line = identity
            .split("-----BEGIN PRIVATE KEY-----")
            .nth(1)
            .and_then(|k| k.lines().find(|l| l.len() > 20))
            .unwrap()
            .to_owned();
        let other = other["id"].as_str().unwrap().to_owned();
        for (kind, body) in [
            (
                "auth",
                json!({"type": "bearer", "token": "bearer-tok-61e0a9"}),
            ),
            (
                "auth",
                json!({"type": "basic", "username": "u", "password": "basic-pw-5c2b7f"}),
            ),
            (
                "oauth",
                json!({"authMethod": "clientSecretPost", "grantType": "clientCredentials",
                "clientId": "c", "clientSecret": "oauth-s3cret-94d1", "tokenUrl": s.url("/token")}),
            ),
            ("mtls", json!({"identity": identity})),
        ] {
            let ep = app
                .ok(
                    Method::POST,
                    &format!("/app/{other}/endpoint"),
                    Some(json!({"url": s.url("/x")})),
                    201,
                )
                .await;
            let ep = ep["id"].as_str().unwrap();
            app.ok(
                Method::PUT,
                &format!("/app/{other}/endpoint/{ep}/{kind}"),
                Some(body),
                204,
            )
            .await;
        }
        let text = dump(&app.db.url);
        assert!(
            text.contains("sealed:v1:test:"),
            "the dump has sealed values ({})",
            app.backend
        );
        for (what, secret) in [
            ("first signing secret", SECRET.trim_start_matches("whsec_")),
            (
                "rotated signing secret",
                new_secret.trim_start_matches("whsec_"),
            ),
            ("header value", "tok_9f8e7d6c5b4a39281706"),
            ("bearer token", "bearer-tok-61e0a9"),
            ("basic password", "basic-pw-5c2b7f"),
            ("OAuth client secret", "oauth-s3cret-94d1"),
            ("mTLS private key", key_line.as_str()),
        ] {
            assert!(
                !text.contains(secret),
                "the {what} is in the {} dump in clear",
                app.backend
            );
        }
        s.stop().await;
    }
}

/// `hookd` on SQLite in `dir` with `keys` (none: the key file), for `Server::start`.
fn serve(dir: &Path, keys: Option<&str>) -> std::process::Command {
    let mut cmd = hookd(dir);
    cmd.env("HOOKD_DATABASE_URL", "sqlite://data/hookd.db")
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8")
        .env("HOOKD_LOG_LEVEL", "debug");
    match keys {
        Some(k) => cmd.env("HOOKD_SECRET_KEYS", k),
        None => cmd.env_remove("HOOKD_SECRET_KEYS"),
    };
    cmd
}

const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

struct Api {
    base: String,
    key: String,
    client: reqwest::Client,
}

impl Api {
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut req = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or_default())
    }
}

#[tokio::test]
async fn a_single_machine_makes_its_key_file_and_a_missing_key_stops_the_start_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(serve(dir.path(), None));
    let key_file = dir.path().join("data").join(store::KEY_FILE);
    assert!(
        key_file.exists(),
        "the key file is made beside the database"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "only its owner reads the key file");
    }
    let made = std::fs::read_to_string(&key_file).unwrap();
    let (tenant, key) = crate::helpers::create_tenant(dir.path());
    let _ = tenant;
    let api = Api {
        base: server.base.clone(),
        key,
        client: reqwest::Client::new(),
    };
    let (_, a) = api
        .call(Method::POST, "/app", Some(json!({"name": "a"})))
        .await;
    let a = a["id"].as_str().unwrap().to_owned();
    let (status, e) = api
        .call(
            Method::POST,
            &format!("/app/{a}/endpoint"),
            Some(json!({"url": "http://127.0.0.1:9/h", "secret": SECRET, "headers": {"Authorization": TOKEN}})),
        )
        .await;
    assert_eq!(status, 201, "{e}");
    let e = e["id"].as_str().unwrap().to_owned();
    let metrics = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let log = server.stop_and_log();
    assert!(
        log.contains("NO secret_keys SET"),
        "a loud warning names the generated key:\n{log}"
    );
    // Nothing secret in the debug log or the metrics.
    for text in [&log, &metrics] {
        assert!(!text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"));
        assert!(!text.contains("tok_9f8e7d6c5b4a39281706"));
        assert!(!text.contains(made.trim().split(':').nth(1).unwrap()));
    }
    // `hookd config` names the key, never shows it.
    let out = run(hookd(dir.path())
        .arg("config")
        .env("HOOKD_SECRET_KEYS", format!("{K2},{K1}")));
    assert!(
        stdout(&out).contains("k2, k1; k2 seals"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("ICEiIy") && !stdout(&out).contains("AAECAw"));

    // Started again: the same key, the secret reads back.
    let server = Server::start(serve(dir.path(), None));
    let api = Api {
        base: server.base.clone(),
        ..api
    };
    let (_, got) = api
        .call(Method::GET, &format!("/app/{a}/endpoint/{e}/secret"), None)
        .await;
    assert_eq!(got["key"], SECRET);
    drop(server);
    assert_eq!(
        std::fs::read_to_string(&key_file).unwrap(),
        made,
        "never overwritten"
    );

    // A copy without its key (here: other keys given) yields no secret: hookd refuses to
    // start and names the key it lacks, in the log and without the secret.
    let key_id = made.split(':').next().unwrap().to_owned();
    let out = run(serve(dir.path(), Some(K1)).arg("serve"));
    assert!(!out.status.success());
    let err = stderr(&out) + &stdout(&out);
    assert!(err.contains(&format!("under key {key_id:?}")), "{err}");
    assert!(
        !err.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") && !err.contains("tok_9f8e"),
        "{err}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn the_key_file_and_the_database_are_private_and_a_bad_key_stops_the_start_untouched() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let key_file = data.join(store::KEY_FILE);
    let server = Server::start(serve(dir.path(), None));
    let (_, key) = crate::helpers::create_tenant(dir.path());
    let api = Api {
        base: server.base.clone(),
        key,
        client: reqwest::Client::new(),
    };
    let (_, a) = api
        .call(Method::POST, "/app", Some(json!({"name": "a"})))
        .await;
    let a = a["id"].as_str().unwrap().to_owned();
    let (status, e) = api
        .call(
            Method::POST,
            &format!("/app/{a}/endpoint"),
            Some(json!({"url": "http://127.0.0.1:9/h", "secret": SECRET})),
        )
        .await;
    assert_eq!(status, 201, "{e}");
    let e = e["id"].as_str().unwrap().to_owned();
    // The database, its write-ahead log and shared memory: the owner's only.
    for name in ["hookd.db", "hookd.db-wal", "hookd.db-shm"] {
        assert_eq!(mode(&data.join(name)), 0o600, "{name}");
    }
    drop(server);
    let made = std::fs::read_to_string(&key_file).unwrap();
    let key_id = made.split(':').next().unwrap().to_owned();
    let refused = |keys: Option<&str>| {
        let out = run(serve(dir.path(), keys).arg("serve"));
        assert!(!out.status.success(), "started");
        let text = stderr(&out) + &stdout(&out);
        assert!(!text.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), "{text}");
        text
    };

    // Readable by others: refused, saying how to mend it, as ssh does.
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = refused(None);
    assert!(
        err.contains(&format!(
            "chmod 600 {}",
            Path::new("data").join(store::KEY_FILE).display()
        )),
        "{err}"
    );
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();

    // Lost: refused, naming the key it needs, and no new key file stands in the backup's way.
    let backup = dir.path().join("hookd.key.backup");
    std::fs::rename(&key_file, &backup).unwrap();
    let err = refused(None);
    assert!(err.contains("is missing"), "{err}");
    assert!(err.contains(&format!("key {key_id:?}")), "{err}");
    assert!(!key_file.exists(), "a refused start wrote a key file");
    std::fs::rename(&backup, &key_file).unwrap();

    // Another key under the same id: refused, naming the id, rather than failing deliveries.
    let err = refused(Some(&format!("{key_id}:{}", K1.split_once(':').unwrap().1)));
    assert!(
        err.contains(&format!("key id {key_id:?}")) && err.contains("same id"),
        "{err}"
    );

    // Put right, it starts and reads the secret back.
    let server = Server::start(serve(dir.path(), None));
    let api = Api {
        base: server.base.clone(),
        ..api
    };
    let (status, got) = api
        .call(Method::GET, &format!("/app/{a}/endpoint/{e}/secret"), None)
        .await;
    assert_eq!((status, &got["key"]), (200, &json!(SECRET)), "{got}");
}

#[tokio::test]
async fn rekey_moves_every_value_to_the_new_key_while_deliveries_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let s = sink(Behaviour::default());
    // Endpoints made under k1 only.
    let server = Server::start(serve(dir.path(), Some(K1)));
    let (_, key) = crate::helpers::create_tenant(dir.path());
    let mut api = Api {
        base: server.base.clone(),
        key,
        client: reqwest::Client::new(),
    };
    let (_, a) = api
        .call(Method::POST, "/app", Some(json!({"name": "a"})))
        .await;
    let a = a["id"].as_str().unwrap().to_owned();
    const ENDPOINTS: usize = 30;
    for i in 0..ENDPOINTS {
        let (status, body) = api
            .call(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": s.url(&format!("/e{i}")), "secret": SECRET, "headers": {"Authorization": TOKEN}})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    // And an integration's key.
    let (status, integ) = api
        .call(
            Method::POST,
            &format!("/app/{a}/integration"),
            Some(json!({"name": "i"})),
        )
        .await;
    assert_eq!(status, 201, "{integ}");
    let integ_path = format!("/app/{a}/integration/{}/key", integ["id"].as_str().unwrap());
    let (_, integ_key) = api.call(Method::GET, &integ_path, None).await;
    // And an Ingest source: its verification and its URL token.
    let ingest_source = |base: &str, method: Method, path: &str| {
        api.client
            .request(method, format!("{base}/ingest/api/v1/source{path}"))
            .bearer_auth(&api.key)
    };
    let src: serde_json::Value = ingest_source(&api.base, Method::POST, "")
        .json(&json!({"name": "in", "uid": "in", "type": "generic-webhook"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ingest_url = src["ingestUrl"].as_str().unwrap().to_owned();
    drop(server);
    let db = dir.path().join("data/hookd.db");
    let url = format!("sqlite://{}", db.display());
    let under = |key: &str| dump(&url).matches(&format!("sealed:v1:{key}:")).count();
    // 30 secrets and 30 header values; what was stored once may also linger in the WAL.
    assert!(under("k1") >= 2 * ENDPOINTS, "{}", under("k1"));

    // k2 first (it seals), k1 still opens; messages flow while `hookd rekey` runs.
    let both = format!("{K2},{K1}");
    let server = Server::start(serve(dir.path(), Some(&both)));
    api.base = server.base.clone();
    let sender = {
        let api = Api {
            base: api.base.clone(),
            key: api.key.clone(),
            client: api.client.clone(),
        };
        let a = a.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 0..60 {
                let (status, m) = api
                    .call(
                        Method::POST,
                        &format!("/app/{a}/msg"),
                        Some(json!({"eventType": "t.e", "payload": {"n": n}})),
                    )
                    .await;
                assert_eq!(status, 202, "{m}");
                ids.push(m["id"].as_str().unwrap().to_owned());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ids
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rekey_dir = dir.path().to_owned();
    let both2 = both.clone();
    let out = tokio::task::spawn_blocking(move || {
        run(hookd(&rekey_dir)
            .arg("rekey")
            .env("HOOKD_DATABASE_URL", "sqlite://data/hookd.db")
            .env("HOOKD_SECRET_KEYS", both2))
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // 30 secrets, 30 header values, the integration's key, and the Ingest source's
    // verification and URL token.
    assert!(stdout(&out).contains("63 re-sealed"), "{}", stdout(&out));
    let ids = sender.await.unwrap();
    eventually(
        Duration::from_secs(20),
        "every message at every endpoint",
        || async { s.state.report().unique as usize >= ids.len() },
    )
    .await;
    eventually(Duration::from_secs(20), "every delivery", || async {
        s.state.received().len() >= ids.len() * ENDPOINTS
    })
    .await;
    assert_eq!(s.state.report().bad_signatures, 0);
    assert!(
        s.state
            .received()
            .iter()
            .all(|r| r.headers.get("authorization").map(String::as_str) == Some(TOKEN))
    );
    drop(server);

    // Only k2 now: everything opens.
    let server = Server::start(serve(dir.path(), Some(K2)));
    api.base = server.base.clone();
    let (_, eps) = api
        .call(Method::GET, &format!("/app/{a}/endpoint?limit=100"), None)
        .await;
    let eps = eps["data"].as_array().unwrap().clone();
    assert_eq!(eps.len(), ENDPOINTS);
    for ep in eps {
        let e = ep["id"].as_str().unwrap();
        let (status, got) = api
            .call(Method::GET, &format!("/app/{a}/endpoint/{e}/secret"), None)
            .await;
        assert_eq!((status, got["key"].as_str()), (200, Some(SECRET)));
        let (_, h) = api
            .call(Method::GET, &format!("/app/{a}/endpoint/{e}/headers"), None)
            .await;
        assert_eq!(h["headers"]["Authorization"], TOKEN);
    }
    let (status, got) = api.call(Method::GET, &integ_path, None).await;
    assert_eq!((status, &got), (200, &integ_key));
    let shown: serde_json::Value = ingest_source(&api.base, Method::GET, "/in")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["ingestUrl"], ingest_url.as_str(), "{shown}");
    s.stop().await;
}

#[tokio::test]
async fn a_secret_that_does_not_open_is_an_error_naming_the_key_and_nothing_is_sent_unsigned() {
    for app in apps().await {
        let s = sink(Behaviour::default());
        let (a, e) = endpoint_at(&app, &s, json!({})).await;
        // Sealed under a key this server was not given (another node's, say).
        let other = domain::seal::Keyring::parse(K2).unwrap();
        let rows = app
            .store
            .active_secrets(app.tenant, e.parse().unwrap(), domain::Timestamp::now())
            .await
            .unwrap();
        let foreign = other.seal(SECRET, &format!("endpoint_secret/{}", rows[0].id));
        app.store
            .execute_sql(&format!(
                "UPDATE endpoint_secrets SET secret = '{foreign}' WHERE endpoint_id = {}",
                app.store
                    .id_sql(e.parse::<domain::ids::EndpointId>().unwrap())
            ))
            .await
            .unwrap();
        let got = app.get(&format!("/app/{a}/endpoint/{e}/secret")).await;
        assert_eq!(got.status.as_u16(), 503, "{}", got.body);
        assert_eq!(got.body["code"], "secret_unavailable");
        let detail = got.body["detail"].as_str().unwrap();
        assert!(detail.contains("\"k2\""), "{detail}");
        let id = send(&app, &a, json!({"n": 1})).await;
        let path = format!("/app/{a}/attempt/endpoint/{e}");
        eventually(Duration::from_secs(10), "an attempt", || async {
            !app.get(&path).await.body["data"][0].is_null()
        })
        .await;
        let stored = app
            .store
            .list_attempts_by_message(
                app.tenant,
                a.parse().unwrap(),
                id.parse().unwrap(),
                &Default::default(),
                &store::ListParams::first(10),
            )
            .await
            .unwrap()
            .data;
        let why = stored[0].error_detail.clone().unwrap_or_default();
        assert!(why.contains("\"k2\""), "{why}");
        assert!(s.state.received().is_empty(), "nothing sent unsigned");
        s.stop().await;
    }
}
