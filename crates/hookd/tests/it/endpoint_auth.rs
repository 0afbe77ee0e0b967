//! Endpoints that authenticate beyond the signature (issue 20): bearer, basic and OAuth 2.0
//! client credentials, delivered to a real receiver on loopback that enforces them, with a
//! real token endpoint served beside it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use reqwest::Method;
use serde_json::{Value, json};
use testkit::TestApp;

use crate::delivery::{SECRET, apps, eventually, send};

const BEARER: &str = "Bearer fixed-tok-7d1e";
/// `Basic base64("ops:pa ss")`.
const BASIC: &str = "Basic b3BzOnBhIHNz";
const CLIENT_BASIC: &str = "Basic aG9va2Q6Y2xpZW50LXMzY3JldA=="; // hookd:client-s3cret

#[derive(Default)]
struct State {
    /// Tokens issued so far; the last is the one the receiver accepts.
    issued: u32,
    /// What the token endpoint answers instead of a token (0: a token).
    token_fails_with: u16,
    /// Authorization of each hook request, by path.
    hooks: Vec<(String, Option<String>)>,
}

struct Receiver {
    base: String,
    state: Arc<Mutex<State>>,
    server: actix_web::dev::ServerHandle,
}

impl Receiver {
    fn accepted(&self, path: &str) -> usize {
        let st = self.state.lock().unwrap();
        st.hooks.iter().filter(|(p, _)| p == path).count()
    }
    fn issued(&self) -> u32 {
        self.state.lock().unwrap().issued
    }
}

async fn token(
    st: web::Data<Arc<Mutex<State>>>,
    req: HttpRequest,
    form: web::Form<Vec<(String, String)>>,
) -> HttpResponse {
    let mut st = st.lock().unwrap();
    if st.token_fails_with != 0 {
        return HttpResponse::build(
            actix_web::http::StatusCode::from_u16(st.token_fails_with).unwrap(),
        )
        .json(json!({"error": "invalid_client"}));
    }
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    let field = |k: &str| form.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
    let client_ok = auth == Some(CLIENT_BASIC)
        || (field("client_id") == Some("hookd") && field("client_secret") == Some("client-s3cret"));
    if field("grant_type") != Some("client_credentials")
        || field("scope") != Some("hooks:write")
        || !client_ok
    {
        return HttpResponse::Unauthorized().json(json!({"error": "invalid_client"}));
    }
    st.issued += 1;
    HttpResponse::Ok().json(json!({"access_token": format!("tok-{}", st.issued), "token_type": "Bearer", "expires_in": 2}))
}

async fn hook(st: web::Data<Arc<Mutex<State>>>, req: HttpRequest) -> HttpResponse {
    let mut st = st.lock().unwrap();
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let want = match req.path() {
        "/bearer" => BEARER.to_owned(),
        "/basic" => BASIC.to_owned(),
        _ => format!("Bearer tok-{}", st.issued),
    };
    if auth.as_deref() != Some(want.as_str()) {
        return HttpResponse::Unauthorized().finish();
    }
    st.hooks.push((req.path().to_owned(), auth));
    HttpResponse::Ok().finish()
}

async fn receiver() -> Receiver {
    let state = Arc::new(Mutex::new(State::default()));
    let data = web::Data::new(state.clone());
    let (base, handle) = crate::helpers::loopback_server(move |cfg| {
        cfg.app_data(data.clone())
            .route("/token", web::post().to(token))
            .default_service(web::post().to(hook));
    });
    Receiver {
        base,
        state,
        server: handle,
    }
}

async fn endpoint(app: &TestApp, a: &str, url: String) -> String {
    let e = app
        .ok(
            Method::POST,
            &format!("/app/{a}/endpoint"),
            Some(json!({"url": url, "secret": SECRET})),
            201,
        )
        .await;
    e["id"].as_str().unwrap().to_owned()
}

async fn attempts(app: &TestApp, a: &str, e: &str) -> Vec<Value> {
    let got = app
        .get(&format!("/app/{a}/attempt/endpoint/{e}"))
        .await
        .body;
    got["data"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn bearer_basic_and_oauth_deliver_to_a_receiver_that_enforces_them() {
    for app in apps().await {
        let r = receiver().await;
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "auth"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let bearer = endpoint(&app, &a, format!("{}/bearer", r.base)).await;
        let basic = endpoint(&app, &a, format!("{}/basic", r.base)).await;
        let oauth = endpoint(&app, &a, format!("{}/oauth", r.base)).await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{bearer}/auth"),
            Some(json!({"type": "bearer", "token": "fixed-tok-7d1e"})),
            204,
        )
        .await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{basic}/auth"),
            Some(json!({"type": "basic", "username": "ops", "password": "pa ss"})),
            204,
        )
        .await;
        let oauth_cfg = json!({
            "authMethod": "clientSecretBasic", "grantType": "clientCredentials",
            "clientId": "hookd", "clientSecret": "client-s3cret",
            "tokenUrl": format!("{}/token", r.base), "scopes": ["hooks:write"],
        });
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{oauth}/oauth"),
            Some(oauth_cfg.clone()),
            204,
        )
        .await;

        // Shown without their secrets.
        let shown = app
            .ok(
                Method::GET,
                &format!("/app/{a}/endpoint/{basic}/auth"),
                None,
                200,
            )
            .await;
        assert_eq!(shown, json!({"type": "basic", "username": "ops"}));
        let shown = app
            .ok(
                Method::GET,
                &format!("/app/{a}/endpoint/{oauth}/oauth"),
                None,
                200,
            )
            .await;
        assert_eq!(shown["clientId"], "hookd");
        assert!(!shown.to_string().contains("s3cret"), "{shown}");
        let none = app
            .ok(
                Method::GET,
                &format!("/app/{a}/endpoint/{bearer}/oauth"),
                None,
                404,
            )
            .await;
        assert_eq!(none["code"], "not_found");

        for n in 0..5 {
            send(&app, &a, json!({"n": n})).await;
        }
        eventually(
            Duration::from_secs(15),
            "5 messages at each endpoint",
            || async {
                r.accepted("/bearer") == 5 && r.accepted("/basic") == 5 && r.accepted("/oauth") == 5
            },
        )
        .await;
        assert_eq!(
            r.issued(),
            1,
            "one token, cached and shared by every attempt"
        );
        // It lives 2 s: the next message after that gets a fresh one.
        tokio::time::sleep(Duration::from_millis(2200)).await;
        send(&app, &a, json!({"n": 5})).await;
        eventually(Duration::from_secs(15), "the sixth message", || async {
            r.accepted("/oauth") == 6
        })
        .await;
        assert_eq!(r.issued(), 2, "a new token after the first expired");

        // The token endpoint refuses: an `auth` attempt error naming it; nothing reaches the
        // endpoint without a token.
        tokio::time::sleep(Duration::from_millis(2200)).await;
        r.state.lock().unwrap().token_fails_with = 401;
        send(&app, &a, json!({"n": 6})).await;
        eventually(Duration::from_secs(15), "an auth error", || async {
            attempts(&app, &a, &oauth)
                .await
                .iter()
                .any(|t| t["errorKind"] == "auth")
        })
        .await;
        let failed = attempts(&app, &a, &oauth).await;
        let failed = failed.iter().find(|t| t["errorKind"] == "auth").unwrap();
        let detail = failed["errorDetail"].as_str().unwrap();
        assert!(
            detail.contains("OAuth token endpoint") && detail.contains("401"),
            "{detail}"
        );
        assert!(!detail.contains("s3cret"), "{detail}");
        assert_eq!(r.accepted("/oauth"), 6);
        r.server.stop(false).await;
    }
}

#[tokio::test]
async fn misconfigured_authentication_is_refused_or_fails_clearly() {
    for app in apps().await {
        let r = receiver().await;
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "auth"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let e = endpoint(&app, &a, format!("{}/bearer", r.base)).await;
        let path = format!("/app/{a}/endpoint/{e}");
        for (body, field) in [
            (json!({"type": "bearer"}), "token"),
            (
                json!({"type": "basic", "username": "a:b", "password": "p"}),
                "username",
            ),
            (json!({"type": "digest"}), "type"),
            (json!({"type": "bearer", "token": "two words"}), "token"),
        ] {
            let got = app
                .call(Method::PUT, &format!("{path}/auth"), Some(body.clone()))
                .await;
            assert_eq!(got.status.as_u16(), 422, "{body}: {}", got.body);
            assert!(got.body.to_string().contains(field), "{body}: {}", got.body);
        }
        let oauth = |url: &str, method: &str| {
            json!({
                "authMethod": method, "grantType": "clientCredentials", "clientId": "c",
                "clientSecret": "s", "tokenUrl": url,
            })
        };
        for (body, field) in [
            // A private address the server may not reach: the endpoints' SSRF guard holds.
            (
                oauth("http://10.1.2.3/token", "clientSecretPost"),
                "tokenUrl",
            ),
            (oauth("not a url", "clientSecretPost"), "tokenUrl"),
            // A broker URL is an endpoint URL, but no token endpoint.
            (
                oauth("redis://127.0.0.1:6379/?stream=s", "clientSecretPost"),
                "tokenUrl must be an http",
            ),
            (
                oauth(&format!("{}/token", r.base), "clientSecretKey"),
                "authMethod",
            ),
            (
                {
                    let mut o = oauth(&format!("{}/token", r.base), "clientSecretJwt");
                    o["jwtParams"] = json!({"kid": "k1"});
                    o
                },
                "jwtParams",
            ),
            (
                {
                    let mut o = oauth(&format!("{}/token", r.base), "clientSecretPost");
                    o["grantType"] = json!("refreshToken");
                    o
                },
                "refreshToken",
            ),
        ] {
            let got = app
                .call(Method::PUT, &format!("{path}/oauth"), Some(body.clone()))
                .await;
            assert_eq!(got.status.as_u16(), 422, "{body}: {}", got.body);
            assert!(got.body.to_string().contains(field), "{body}: {}", got.body);
        }
        // A wrong token reaches the receiver, which refuses it: the attempt shows its 401.
        app.ok(
            Method::PUT,
            &format!("{path}/auth"),
            Some(json!({"type": "bearer", "token": "wrong"})),
            204,
        )
        .await;
        send(&app, &a, json!({})).await;
        eventually(Duration::from_secs(15), "a refused attempt", || async {
            attempts(&app, &a, &e)
                .await
                .iter()
                .any(|t| t["responseStatusCode"] == 401)
        })
        .await;
        // Removed: the signature alone again.
        app.ok(Method::DELETE, &format!("{path}/auth"), None, 204)
            .await;
        let shown = app
            .ok(Method::GET, &format!("{path}/auth"), None, 200)
            .await;
        assert_eq!(shown, json!({"type": "none"}));
        r.server.stop(false).await;
    }
}

fn node_verify(doc: &Value) -> std::process::Output {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/verify/ed25519_verify.mjs"
    );
    crate::helpers::run_script("node", script, doc.to_string().as_bytes(), "Node.js")
}

#[tokio::test]
async fn an_ed25519_private_key_never_leaves_hookd() {
    use domain::signing::EndpointKey;
    for app in apps().await {
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "asym"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let private = "whsk_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";
        let given = EndpointKey::parse(private).unwrap();
        // The base64 after `whsk_`: the part that must not show in any answer.
        let body = private.trim_start_matches("whsk_").to_owned();
        let created = app
            .call(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": "http://127.0.0.1:9/hook", "secret": private})),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
        assert!(
            !created.body.to_string().contains(&body),
            "{}",
            created.body
        );
        let e = created.body["id"].as_str().unwrap().to_owned();
        let secret = app
            .call(Method::GET, &format!("/app/{a}/endpoint/{e}/secret"), None)
            .await;
        assert_eq!(secret.status, 200, "{}", secret.body);
        assert!(!secret.body.to_string().contains(&body), "{}", secret.body);
        assert_eq!(
            secret.body["key"].as_str(),
            given.public_key().as_deref(),
            "{}",
            secret.body
        );
        // A rotation hookd generates answers only the new public key too.
        let rotated = app
            .call(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/secret/rotate"),
                Some(json!({"keyType": "ed25519"})),
            )
            .await;
        assert_eq!(rotated.status, 200, "{}", rotated.body);
        assert!(
            !rotated.body.to_string().contains("whsk_"),
            "{}",
            rotated.body
        );
        assert_eq!(rotated.body["key"], rotated.body["publicKey"]);
        let after = app
            .call(Method::GET, &format!("/app/{a}/endpoint/{e}/secret"), None)
            .await;
        assert_eq!(after.body["key"], rotated.body["key"], "{}", after.body);
    }
}

#[tokio::test]
async fn an_ed25519_endpoint_signs_v1a_that_its_public_key_verifies_across_a_rotation() {
    use bench::sink::Behaviour;
    for app in apps().await {
        // A receiver that checks no HMAC: the v1a signatures are checked below, by Node.
        let s = bench::sink::Sink::start(bench::sink::SinkConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            secrets: vec![],
            behaviour: Behaviour::default(),
            report: None,
            record: true,
        })
        .unwrap();
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "asym"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let e = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": s.url("/hook"), "keyType": "ed25519"})),
                201,
            )
            .await;
        let e = e["id"].as_str().unwrap().to_owned();
        let secret = app
            .ok(
                Method::GET,
                &format!("/app/{a}/endpoint/{e}/secret"),
                None,
                200,
            )
            .await;
        // As Svix: `key` is the public key.
        let first = secret["publicKey"].as_str().unwrap().to_owned();
        assert!(first.starts_with("whpk_"));
        assert_eq!(secret["key"], secret["publicKey"], "{secret}");
        for n in 0..3 {
            send(&app, &a, json!({"n": n})).await;
        }
        eventually(Duration::from_secs(10), "3 delivered", || async {
            s.state.report().received >= 3
        })
        .await;
        // Rotated without saying the kind: a new ed25519 key; both sign during the grace.
        let rotated = app
            .ok(
                Method::POST,
                &format!("/app/{a}/endpoint/{e}/secret/rotate"),
                Some(json!({})),
                200,
            )
            .await;
        let second = rotated["publicKey"].as_str().unwrap().to_owned();
        assert_ne!(second, first);
        assert_eq!(rotated["key"], rotated["publicKey"], "{rotated}");
        send(&app, &a, json!({"n": 3})).await;
        eventually(Duration::from_secs(10), "4 delivered", || async {
            s.state.report().received >= 4
        })
        .await;
        let mut got = s.state.received();
        got.sort_by_key(|r| r.msg_id.clone());
        let requests: Vec<Value> = got
            .iter()
            .map(|r| json!({"headers": r.headers, "body": String::from_utf8_lossy(&r.body)}))
            .collect();
        assert!(
            got.iter()
                .all(|r| r.headers["webhook-signature"].starts_with("v1a,"))
        );
        for (key, reqs) in [
            (&first, requests.clone()),
            (&second, requests[3..].to_vec()),
        ] {
            let out = node_verify(&json!({"publicKey": key, "requests": reqs}));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains(&format!("verified {}", reqs.len())), "{text}");
        }
        // A tampered body, or the other key, fails: the check proves something.
        let mut tampered = requests[0].clone();
        tampered["body"] = json!("{\"n\": 99}");
        assert!(
            !node_verify(&json!({"publicKey": first, "requests": [tampered]}))
                .status
                .success()
        );
        assert!(
            !node_verify(&json!({"publicKey": second, "requests": [requests[0].clone()]}))
                .status
                .success()
        );
        // A key of the wrong kind for keyType is refused.
        let bad = app
            .call(
                Method::POST,
                &format!("/app/{a}/endpoint"),
                Some(json!({"url": s.url("/x"), "keyType": "ed25519", "secret": SECRET})),
            )
            .await;
        assert_eq!(bad.status.as_u16(), 422, "{}", bad.body);
        s.stop().await;
    }
}

// --- mutual TLS -------------------------------------------------------------------------------

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../../tests/fixtures/mtls/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// An HTTPS receiver on loopback that requires a client certificate from `client-ca.pem`
/// (rustls on both sides): the paths it answered 200, and how many handshakes it refused.
struct TlsReceiver {
    base: String,
    paths: Arc<Mutex<Vec<String>>>,
    refused: Arc<std::sync::atomic::AtomicUsize>,
}

async fn tls_receiver() -> TlsReceiver {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let certs: Vec<CertificateDer> =
        CertificateDer::pem_slice_iter(fixture("server.pem").as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(fixture("server.key").as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(fixture("client-ca.pem").as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let paths = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (p, r) = (paths.clone(), refused.clone());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, p, r) = (acceptor.clone(), p.clone(), r.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    return;
                };
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // The head, then as much body as content-length says.
                let head_end = loop {
                    let Ok(n) = tls.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let Ok(n) = tls.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let path = head
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned();
                p.lock().unwrap().push(path);
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    TlsReceiver {
        base,
        paths,
        refused,
    }
}

#[tokio::test]
async fn mutual_tls_delivers_with_the_client_certificate_and_fails_clearly_without_it() {
    for app in apps().await {
        let r = tls_receiver().await;
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "mtls"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let good = endpoint(&app, &a, format!("{}/good", r.base)).await;
        let stranger = endpoint(&app, &a, format!("{}/stranger", r.base)).await;
        let no_ca = endpoint(&app, &a, format!("{}/no-ca", r.base)).await;
        let none = endpoint(&app, &a, format!("{}/none", r.base)).await;
        let mtls = |identity: &str, ca: Option<String>| json!({"identity": fixture(identity), "serverCaCert": ca});
        let ca = Some(fixture("server-ca.pem"));
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{good}/mtls"),
            Some(mtls("client-identity.pem", ca.clone())),
            204,
        )
        .await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{stranger}/mtls"),
            Some(mtls("stranger-identity.pem", ca.clone())),
            204,
        )
        .await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{no_ca}/mtls"),
            Some(mtls("client-identity.pem", None)),
            204,
        )
        .await;
        // Shown without the key.
        let shown = app
            .ok(
                Method::GET,
                &format!("/app/{a}/endpoint/{good}/mtls"),
                None,
                200,
            )
            .await;
        assert!(
            shown["clientCert"]
                .as_str()
                .unwrap()
                .contains("BEGIN CERTIFICATE"),
            "{shown}"
        );
        assert!(!shown.to_string().contains("PRIVATE KEY"), "{shown}");
        // Not PEM: refused, naming the field.
        let bad = app
            .call(
                Method::PUT,
                &format!("/app/{a}/endpoint/{none}/mtls"),
                Some(json!({"identity": "hello"})),
            )
            .await;
        assert_eq!(bad.status.as_u16(), 422, "{}", bad.body);
        assert!(bad.body.to_string().contains("identity"), "{}", bad.body);
        // PEM lines around something that is no certificate: refused now, not at send time.
        let bad = app
            .call(
                Method::PUT,
                &format!("/app/{a}/endpoint/{none}/mtls"),
                Some(mtls(
                    "client-identity.pem",
                    Some(
                        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n"
                            .to_owned(),
                    ),
                )),
            )
            .await;
        assert_eq!(bad.status.as_u16(), 422, "{}", bad.body);
        assert!(
            bad.body.to_string().contains("serverCaCert"),
            "{}",
            bad.body
        );

        send(&app, &a, json!({"n": 1})).await;
        eventually(
            Duration::from_secs(15),
            "the delivery with the client certificate",
            || async { r.paths.lock().unwrap().iter().any(|p| p == "/good") },
        )
        .await;
        for (ep, why) in [
            (&stranger, "a certificate the receiver does not trust"),
            (&no_ca, "a receiver certificate from a private CA not given"),
            (&none, "no client certificate"),
        ] {
            eventually(Duration::from_secs(15), why, || async {
                attempts(&app, &a, ep)
                    .await
                    .iter()
                    .any(|t| !t["errorKind"].is_null())
            })
            .await;
            let got = attempts(&app, &a, ep).await;
            let detail = got[0]["errorDetail"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(!detail.is_empty(), "{why}: {}", got[0]);
            assert!(!detail.contains("PRIVATE KEY"), "{detail}");
        }
        let no_ca_detail = attempts(&app, &a, &no_ca).await[0]["errorDetail"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            no_ca_detail.to_lowercase().contains("certificate"),
            "{no_ca_detail}"
        );
        assert_eq!(
            r.paths
                .lock()
                .unwrap()
                .iter()
                .filter(|p| *p != "/good")
                .count(),
            0,
            "nothing reached the receiver without a certificate it trusts"
        );
        assert!(
            r.refused.load(std::sync::atomic::Ordering::SeqCst) >= 2,
            "the receiver refused the stranger and the anonymous client"
        );
    }
}

// --- clientSecretJwt and the refresh-token grant, against a token server that checks them ---

const JWT_SECRET: &str = "jwt-client-s3cret-0123456789";

#[derive(Default)]
struct Issuer {
    base: String,
    /// Assertions whose signature and claims verified, by `jti` (each used once).
    jtis: std::collections::HashSet<String>,
    /// Requests refused, with why.
    refused: Vec<String>,
    /// The refresh token it takes now; each use replaces it.
    refresh: String,
    issued: u32,
    hooks: u32,
}

/// Checks an RFC 7523 client assertion: HS256 with [`JWT_SECRET`], `iss` = `sub` = the client
/// id, `aud` = this token URL, `exp` in the future and at most 10 minutes ahead, `jti` unused.
fn verify_assertion(st: &Issuer, jwt: &str) -> Result<String, String> {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use hmac::{Hmac, Mac};
    let parts: Vec<&str> = jwt.split('.').collect();
    let [h, c, sig] = parts[..] else {
        return Err("not a JWT".into());
    };
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(JWT_SECRET.as_bytes()).unwrap();
    mac.update(format!("{h}.{c}").as_bytes());
    let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|e| e.to_string())?;
    mac.verify_slice(&sig)
        .map_err(|_| "bad signature".to_owned())?;
    let decode =
        |p: &str| -> Value { serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap() };
    if decode(h)["alg"] != "HS256" {
        return Err("alg".into());
    }
    let claims = decode(c);
    let now = domain::Timestamp::now().as_secs();
    let exp = claims["exp"].as_i64().unwrap_or(0);
    let jti = claims["jti"].as_str().unwrap_or_default().to_owned();
    if claims["iss"] != "hookd-jwt" || claims["sub"] != "hookd-jwt" {
        return Err(format!("iss/sub: {claims}"));
    }
    if claims["aud"] != format!("{}/token", st.base).as_str() {
        return Err(format!("aud: {claims}"));
    }
    if exp <= now || exp > now + 600 {
        return Err(format!("exp: {claims}"));
    }
    if jti.is_empty() || st.jtis.contains(&jti) {
        return Err(format!("jti reused: {claims}"));
    }
    Ok(jti)
}

async fn issue(
    st: web::Data<Arc<Mutex<Issuer>>>,
    form: web::Form<Vec<(String, String)>>,
) -> HttpResponse {
    let mut st = st.lock().unwrap();
    let field = |k: &str| form.iter().find(|(f, _)| f == k).map(|(_, v)| v.clone());
    let outcome = match field("grant_type").as_deref() {
        Some("client_credentials") => {
            if field("client_assertion_type").as_deref()
                != Some(domain::endpoint_auth::JWT_BEARER_ASSERTION)
            {
                Err("no client assertion".to_owned())
            } else {
                verify_assertion(&st, &field("client_assertion").unwrap_or_default()).map(|jti| {
                    st.jtis.insert(jti);
                    None
                })
            }
        }
        Some("refresh_token") => {
            if field("client_secret").as_deref() != Some("client-s3cret") {
                Err("client".to_owned())
            } else if field("refresh_token") != Some(st.refresh.clone()) {
                Err(format!(
                    "refresh token {:?} is not {:?}",
                    field("refresh_token"),
                    st.refresh
                ))
            } else {
                let next = format!("rt-{}", st.issued + 2);
                st.refresh = next.clone();
                Ok(Some(next))
            }
        }
        other => Err(format!("grant {other:?}")),
    };
    match outcome {
        Ok(refresh) => {
            st.issued += 1;
            let mut answer = json!({"access_token": format!("tok-{}", st.issued), "token_type": "Bearer", "expires_in": 1});
            if let Some(r) = refresh {
                answer["refresh_token"] = json!(r);
            }
            HttpResponse::Ok().json(answer)
        }
        Err(why) => {
            st.refused.push(why);
            HttpResponse::BadRequest().json(json!({"error": "invalid_grant"}))
        }
    }
}

async fn issuer_hook(st: web::Data<Arc<Mutex<Issuer>>>, req: HttpRequest) -> HttpResponse {
    let mut st = st.lock().unwrap();
    let want = format!("Bearer tok-{}", st.issued);
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if auth != Some(want.as_str()) {
        return HttpResponse::Unauthorized().finish();
    }
    st.hooks += 1;
    HttpResponse::Ok().finish()
}

async fn issuer() -> (Arc<Mutex<Issuer>>, actix_web::dev::ServerHandle) {
    let state = Arc::new(Mutex::new(Issuer {
        refresh: "rt-1".into(),
        ..Issuer::default()
    }));
    let data = web::Data::new(state.clone());
    let (base, handle) = crate::helpers::loopback_server(move |cfg| {
        cfg.app_data(data.clone())
            .route("/token", web::post().to(issue))
            .default_service(web::post().to(issuer_hook));
    });
    state.lock().unwrap().base = base;
    (state, handle)
}

#[tokio::test]
async fn a_jwt_assertion_and_a_rotating_refresh_token_get_tokens_the_receiver_takes() {
    for app in apps().await {
        let (st, server) = issuer().await;
        let base = st.lock().unwrap().base.clone();
        let a = app
            .ok(Method::POST, "/app", Some(json!({"name": "jwt"})), 201)
            .await;
        let a = a["id"].as_str().unwrap().to_owned();
        let jwt = endpoint(&app, &a, format!("{base}/jwt")).await;
        app.ok(
            Method::PUT,
            &format!("/app/{a}/endpoint/{jwt}/oauth"),
            Some(json!({
                "authMethod": "clientSecretJwt", "grantType": "clientCredentials",
                "clientId": "hookd-jwt", "clientSecret": JWT_SECRET, "tokenUrl": format!("{base}/token"),
            })),
            204,
        )
        .await;
        send(&app, &a, json!({"n": 1})).await;
        eventually(
            Duration::from_secs(15),
            "a delivery with a JWT-got token",
            || async { st.lock().unwrap().hooks >= 1 },
        )
        .await;
        {
            let s = st.lock().unwrap();
            assert!(s.refused.is_empty(), "{:?}", s.refused);
            assert_eq!(s.jtis.len(), 1);
        }
        app.ok(
            Method::DELETE,
            &format!("/app/{a}/endpoint/{jwt}"),
            None,
            204,
        )
        .await;

        // The refresh-token grant: each token lives a second, each use replaces the refresh
        // token, and the replaced one is what hookd uses and keeps.
        let refreshing = endpoint(&app, &a, format!("{base}/refresh")).await;
        let path = format!("/app/{a}/endpoint/{refreshing}/oauth");
        app.ok(
            Method::PUT,
            &path,
            Some(json!({
                "authMethod": "clientSecretPost", "grantType": "refreshToken", "refreshToken": "rt-1",
                "clientId": "hookd", "clientSecret": "client-s3cret", "tokenUrl": format!("{base}/token"),
            })),
            204,
        )
        .await;
        let shown = app.ok(Method::GET, &path, None, 200).await;
        assert_eq!(shown["grantType"], "refreshToken");
        assert!(!shown.to_string().contains("rt-1"), "{shown}");
        for n in 0..3 {
            let before = st.lock().unwrap().hooks;
            send(&app, &a, json!({"n": n})).await;
            eventually(
                Duration::from_secs(15),
                "a delivery with a refreshed token",
                || async { st.lock().unwrap().hooks > before },
            )
            .await;
            // Past the token's life: the next one needs the refresh token again.
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let (refused, current) = {
            let s = st.lock().unwrap();
            (s.refused.clone(), s.refresh.clone())
        };
        assert!(refused.is_empty(), "{refused:?}");
        assert_ne!(current, "rt-1");
        let ep = app
            .store
            .get_endpoint(app.tenant, a.parse().unwrap(), &refreshing)
            .await
            .unwrap();
        match app.store.endpoint_auth(&ep).unwrap() {
            Some(domain::endpoint_auth::EndpointAuth::OAuth(c)) => {
                assert_eq!(
                    c.refresh_token.as_deref(),
                    Some(current.as_str()),
                    "the newest is stored"
                )
            }
            other => panic!("{other:?}"),
        }
        server.stop(true).await;
    }
}
