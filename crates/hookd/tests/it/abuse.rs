//! The abuse suite: what an unauthenticated client (or a careless operator) can make a live
//! `hookd serve` process do, measured on the process itself (RSS and open descriptors from
//! /proc). Each test states the bound it holds the server to.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{Server, hookd};

/// `hookd serve` (API role, SQLite in a temporary directory) with `env`.
fn serve(dir: &tempfile::TempDir, env: &[(&str, &str)]) -> Server {
    let mut cmd = hookd(dir.path());
    cmd.env("HOOKD_DATABASE_URL", "sqlite://hookd.db")
        .env("HOOKD_ROLES", "api");
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::start(cmd)
}

fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resident memory in MiB.
fn rss_mib(pid: u32) -> f64 {
    proc_status(pid, "VmRSS:") as f64 / 1024.0
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A login or sign-up form's token and the cookie that goes with it.
async fn form(c: &reqwest::Client, base: &str, page: &str) -> (String, String) {
    let r = c.get(format!("{base}{page}")).send().await.unwrap();
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("hookd_form="))
        .and_then(|c| c.split(';').next())
        .expect("form cookie")
        .to_owned();
    let body = r.text().await.unwrap();
    let marker = r#"name="csrf" value=""#;
    let start = body.find(marker).expect("csrf field") + marker.len();
    let len = body[start..].find('"').unwrap();
    (body[start..start + len].to_owned(), cookie)
}

async fn post_form(
    c: &reqwest::Client,
    base: &str,
    page: &str,
    (token, cookie): &(String, String),
    fields: &[(&str, &str)],
) -> reqwest::Response {
    let mut all = vec![("csrf", token.as_str())];
    all.extend_from_slice(fields);
    c.post(format!("{base}{page}"))
        .header("cookie", cookie)
        .form(&all)
        .send()
        .await
        .unwrap()
}

fn retry_after(r: &reqwest::Response) -> Option<u64> {
    r.headers().get("retry-after")?.to_str().ok()?.parse().ok()
}

#[tokio::test]
async fn concurrent_logins_with_varied_emails_keep_memory_bounded_and_answer_429() {
    let dir = tempfile::tempdir().unwrap();
    // The per-client bucket is opened wide here: this is about the global hashing bound.
    let server = serve(&dir, &[("HOOKD_LOGIN_ATTEMPTS_PER_MINUTE", "10000")]);
    let pid = server.child.id();
    let c = client();
    let f = form(&c, &server.base, "/login").await;
    // One login first, so the baseline includes a hash's worth of allocator state.
    post_form(
        &c,
        &server.base,
        "/login",
        &f,
        &[("email", "w@x.com"), ("password", "p")],
    )
    .await;
    let baseline = rss_mib(pid);

    let peak = std::sync::Arc::new(std::sync::Mutex::new(baseline));
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                let now = rss_mib(pid);
                let mut p = peak.lock().unwrap();
                *p = p.max(now);
                drop(p);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut statuses = Vec::new();
    let mut after_round = Vec::new();
    for round in 0..3 {
        let mut burst = tokio::task::JoinSet::new();
        for i in 0..64 {
            let (c, base, f) = (c.clone(), server.base.clone(), f.clone());
            burst.spawn(async move {
                let email = format!("guess{round}-{i}@victim.example");
                let r = post_form(
                    &c,
                    &base,
                    "/login",
                    &f,
                    &[("email", &email), ("password", "hunter22")],
                )
                .await;
                (r.status(), retry_after(&r))
            });
        }
        while let Some(r) = burst.join_next().await {
            statuses.push(r.unwrap());
        }
        after_round.push(rss_mib(pid));
    }
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = *peak.lock().unwrap();
    let refused = statuses
        .iter()
        .filter(|(s, _)| *s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    let checked = statuses
        .iter()
        .filter(|(s, _)| *s == StatusCode::UNAUTHORIZED)
        .count();
    assert!(
        statuses.iter().all(|(s, ra)| *s == StatusCode::UNAUTHORIZED
            || (*s == StatusCode::TOO_MANY_REQUESTS && ra.is_some_and(|r| r >= 1))),
        "every answer is 401 or 429 with Retry-After: {statuses:?}"
    );
    assert!(
        refused > 0 && checked > 0,
        "{refused} refused, {checked} checked"
    );
    // Two argon2 runs at once (19 MiB each) plus the requests in line: the stated bound is
    // 64 MiB above the idle server, where the unbounded server grew by 800 MB.
    assert!(
        peak - baseline < 64.0,
        "peak RSS {peak:.1} MiB, baseline {baseline:.1} MiB"
    );
    // Hashing memory is reused, not allocated per request: once the first burst has taken
    // its share, further bursts add nothing, and nothing grows after the burst.
    assert!(
        after_round[2] - after_round[0] < 4.0,
        "RSS after each burst: {after_round:?} MiB"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_mib(pid);
    assert!(
        after - baseline < 32.0,
        "RSS {after:.1} MiB two seconds after the bursts, baseline {baseline:.1} MiB"
    );
    eprintln!(
        "logins: {checked} checked, {refused} refused; RSS baseline {baseline:.1}, peak {peak:.1}, after {after:.1} MiB"
    );
}

#[tokio::test]
async fn logins_are_slowed_and_signups_limited_per_client_whatever_the_email() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        &dir,
        &[
            ("HOOKD_LOGIN_ATTEMPTS_PER_MINUTE", "5"),
            ("HOOKD_SIGNUPS_PER_HOUR", "2"),
        ],
    );
    let c = client();
    let f = form(&c, &server.base, "/login").await;
    let mut seen = Vec::new();
    // Five a minute: a burst of five, then one every 12 s. Past the burst a login waits for
    // its turn (and would log in with the right password); it is not refused.
    for i in 0..6 {
        let email = format!("user{i}@example.com");
        let started = std::time::Instant::now();
        let r = post_form(
            &c,
            &server.base,
            "/login",
            &f,
            &[("email", &email), ("password", "x")],
        )
        .await;
        seen.push((r.status().as_u16(), started.elapsed()));
    }
    assert_eq!(
        seen.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [401, 401, 401, 401, 401, 401]
    );
    assert!(
        seen[5].1 >= std::time::Duration::from_secs(8),
        "the sixth login waited only {:?}",
        seen[5].1
    );

    let f = form(&c, &server.base, "/signup").await;
    let mut codes = Vec::new();
    for i in 0..3 {
        let email = format!("owner{i}@example.com");
        let r = post_form(
            &c,
            &server.base,
            "/signup",
            &f,
            &[
                ("name", "Acme"),
                ("email", &email),
                ("password", "correct horse battery"),
            ],
        )
        .await;
        codes.push(r.status().as_u16());
        if r.status() == StatusCode::TOO_MANY_REQUESTS {
            assert!(retry_after(&r).is_some());
            let body = r.text().await.unwrap();
            assert!(body.contains("Too many sign-ups"), "{body}");
        }
    }
    assert_eq!(codes, [200, 200, 429]);
}

#[tokio::test]
async fn stalled_bodies_are_answered_408_and_closed_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir, &[("HOOKD_HTTP_BODY_TIMEOUT", "1s")]);
    let pid = server.child.id();
    let addr = server.base.trim_start_matches("http://").to_owned();
    // A few ordinary requests first, so pools and threads that open lazily are counted.
    let c = client();
    for _ in 0..4 {
        form(&c, &server.base, "/login").await;
    }
    drop(c);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let idle_fds = open_fds(pid);
    let started = Instant::now();
    let mut conns = tokio::task::JoinSet::new();
    for _ in 0..300 {
        let addr = addr.clone();
        conns.spawn(async move {
            let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
            s.write_all(
                b"POST /login HTTP/1.1\r\nHost: hookd\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ncsrf=",
            )
            .await
            .unwrap();
            // Never send the rest: read until the server closes the connection.
            let mut answer = Vec::new();
            let read = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut answer)).await;
            (read.is_ok(), String::from_utf8_lossy(&answer).into_owned())
        });
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = open_fds(pid);
    let mut closed = 0;
    while let Some(r) = conns.join_next().await {
        let (ok, answer) = r.unwrap();
        assert!(ok, "a stalled connection was still open after 20 s");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        closed += 1;
    }
    let took = started.elapsed();
    assert_eq!(closed, 300);
    // 1 s of timeout; the rest is 300 connections' set-up on a loaded 2-core machine.
    assert!(took < Duration::from_secs(6), "all closed after {took:?}");
    assert!(held > idle_fds, "the connections were open meanwhile");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        open_fds(pid) <= idle_fds + 2,
        "{} descriptors open after, {idle_fds} before",
        open_fds(pid)
    );
    eprintln!(
        "300 stalled bodies: all answered 408 and closed after {took:?}; descriptors {idle_fds} -> {held} -> {}",
        open_fds(pid)
    );
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_outside_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir, &[("HOOKD_HTTP_MAX_CONNECTIONS", "16")]);
    let pid = server.child.id();
    let addr = server.base.trim_start_matches("http://").to_owned();
    let idle_fds = open_fds(pid);
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fds = open_fds(pid);
    // 16 connections, split among the workers; each worker may have accepted a few more
    // before it paused accepting.
    assert!(
        fds <= idle_fds + 32,
        "{fds} descriptors with 100 idle connections, {idle_fds} before"
    );
    drop(held);
}

#[tokio::test]
async fn metrics_can_require_a_token_or_live_on_an_address_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let token = "s3cret-metrics-token-0123";
    let server = serve(&dir, &[("HOOKD_METRICS_TOKEN", token)]);
    let c = client();
    let url = format!("{}/metrics", server.base);
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c
        .get(&url)
        .bearer_auth("wrong-token-wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("hookd_database_up 1"));
    drop(server);

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let server = serve(
        &dir,
        &[("HOOKD_METRICS_BIND", &format!("127.0.0.1:{port}"))],
    );
    let r = c
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "not on the public address"
    );
    let r = c
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("hookd_database_up 1"));
}

#[tokio::test]
async fn the_receiving_edge_serves_metrics_only_when_asked() {
    let c = client();
    // The public edge, as configured by default: no /metrics for the internet.
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&dir, &[("HOOKD_ROLES", "receive")]);
    let r = c
        .get(format!("{}/metrics", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let health = c
        .get(format!("{}/api/v1/health", server.base))
        .send()
        .await
        .unwrap();
    assert!(health.status().is_success(), "the edge is up");
    drop(server);
    // With a token, behind it.
    let dir = tempfile::tempdir().unwrap();
    let token = "s3cret-metrics-token-0123";
    let server = serve(
        &dir,
        &[("HOOKD_ROLES", "receive"), ("HOOKD_METRICS_TOKEN", token)],
    );
    let url = format!("{}/metrics", server.base);
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = c.get(&url).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.text().await.unwrap().contains("hookd_database_up 1"));
}

/// A stand-in forward proxy that answers every request itself with 200, recording the
/// request lines it saw (`POST http://host:port/path HTTP/1.1` for a proxied request).
async fn fake_proxy() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                log.lock()
                    .unwrap()
                    .push(text.lines().next().unwrap_or("").to_owned());
                let _ = s
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            });
        }
    });
    (url, seen)
}

/// `hookd serve` with every role on `db`, with `env`; returns the server and an API key.
async fn serve_all(
    dir: &tempfile::TempDir,
    db: &store::testing::TestDb,
    env: &[(&str, &str)],
) -> (Server, String) {
    let (_, key) = testkit::new_tenant(&db.store, "abuse").await;
    let mut cmd = hookd(dir.path());
    cmd.env("HOOKD_DATABASE_URL", &db.url)
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8")
        .env("HOOKD_DELIVERY_POLL_INTERVAL", "50ms");
    for (k, v) in env {
        cmd.env(k, v);
    }
    (Server::start(cmd), key)
}

async fn app_and_endpoint(c: &reqwest::Client, base: &str, key: &str, url: &str) -> String {
    let a: serde_json::Value = c
        .post(format!("{base}/api/v1/app"))
        .bearer_auth(key)
        .json(&serde_json::json!({"name": "a"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let a = a["id"].as_str().unwrap().to_owned();
    let r = c
        .post(format!("{base}/api/v1/app/{a}/endpoint"))
        .bearer_auth(key)
        .json(&serde_json::json!({"url": url, "secret": crate::delivery::SECRET}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = c
        .post(format!("{base}/api/v1/app/{a}/msg"))
        .bearer_auth(key)
        .json(&serde_json::json!({"eventType": "e", "payload": {"x": 1}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    a
}

#[tokio::test]
async fn deliveries_ignore_proxy_variables_and_use_only_delivery_proxy() {
    let (proxy, proxied) = fake_proxy().await;
    let c = client();
    // The environment's proxy variables would take the SSRF guard out of the path: ignored.
    let sink = crate::delivery::sink(Default::default());
    let dir = tempfile::tempdir().unwrap();
    let db = store::testing::TestDb::sqlite().await;
    let env = [
        ("HTTP_PROXY", proxy.as_str()),
        ("http_proxy", proxy.as_str()),
        ("HTTPS_PROXY", proxy.as_str()),
        ("ALL_PROXY", proxy.as_str()),
    ];
    let (server, key) = serve_all(&dir, &db, &env).await;
    app_and_endpoint(&c, &server.base, &key, &sink.url("/hook")).await;
    crate::delivery::eventually(Duration::from_secs(15), "delivered directly", || async {
        sink.state.acked_ids().len() == 1
    })
    .await;
    assert!(
        proxied.lock().unwrap().is_empty(),
        "{:?}",
        proxied.lock().unwrap()
    );
    drop(server);

    // An explicit delivery_proxy carries every delivery.
    let dir = tempfile::tempdir().unwrap();
    let db = store::testing::TestDb::sqlite().await;
    let (server, key) = serve_all(&dir, &db, &[("HOOKD_DELIVERY_PROXY", proxy.as_str())]).await;
    app_and_endpoint(&c, &server.base, &key, &sink.url("/via-proxy")).await;
    crate::delivery::eventually(
        Duration::from_secs(15),
        "delivered through the proxy",
        || async { !proxied.lock().unwrap().is_empty() },
    )
    .await;
    let line = proxied.lock().unwrap()[0].clone();
    assert!(
        line.starts_with("POST http://127.0.0.1:") && line.contains("/via-proxy"),
        "{line}"
    );
    assert_eq!(
        sink.state.received().len(),
        1,
        "nothing more reached the sink directly"
    );
    sink.stop().await;
}

#[tokio::test]
async fn with_smtp_sign_up_answers_the_same_whether_or_not_the_email_has_an_account() {
    let smtp = testkit::smtp::TestSmtpServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hookd(dir.path());
    cmd.env("HOOKD_DATABASE_URL", "sqlite://hookd.db")
        .env("HOOKD_SMTP_URL", smtp.url())
        .env("HOOKD_PUBLIC_URL", "https://hookd.example.com");
    let server = Server::start(cmd);
    let c = client();
    let sign_up = |email: &'static str| {
        let (c, base) = (c.clone(), server.base.clone());
        async move {
            let f = form(&c, &base, "/signup").await;
            let fields = [
                ("name", "Acme"),
                ("email", email),
                ("password", "correct horse battery"),
            ];
            let r = post_form(&c, &base, "/signup", &f, &fields).await;
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let mail_to = |n: usize| {
        let smtp = &smtp;
        async move {
            crate::delivery::eventually(Duration::from_secs(15), "the email", || async {
                smtp.received().len() >= n
            })
            .await;
            smtp.received()[n - 1].clone()
        }
    };
    let first = sign_up("owner@acme.example").await;
    assert_eq!(first.0, 200);
    assert!(first.1.contains("Check your email"), "{}", first.1);
    let mail = mail_to(1).await;
    let body = mail.body_text();
    let link = body
        .lines()
        .find(|l| l.starts_with("https://hookd.example.com/signup/confirm?token="))
        .unwrap_or_else(|| panic!("{body}"));
    let token = link.rsplit('=').next().unwrap().trim().to_owned();
    // Following the link shows a button; pressing it creates the account and shows its key.
    let f = form(&c, &server.base, &format!("/signup/confirm?token={token}")).await;
    let done = post_form(
        &c,
        &server.base,
        "/signup/confirm",
        &f,
        &[("token", &token)],
    )
    .await;
    assert_eq!(done.status(), StatusCode::OK);
    assert!(done.text().await.unwrap().contains("only this once"));
    let again = post_form(
        &c,
        &server.base,
        "/signup/confirm",
        &f,
        &[("token", &token)],
    )
    .await;
    assert_eq!(again.status(), StatusCode::GONE, "a link works once");

    // The same email again: the very same answer, and the owner is told by mail instead.
    let second = sign_up("owner@acme.example").await;
    assert_eq!(
        second, first,
        "the answer does not tell whether the account exists"
    );
    let note = mail_to(2).await;
    assert!(
        note.body_text().contains("already has one"),
        "{}",
        note.body_text()
    );
    assert!(!note.body_text().contains("token="));

    // Nobody can make hookd mail an address without end: after 3 sign-up emails in an hour
    // it gets no more, and the page still does not tell.
    let mut same = first.clone();
    same.1 = same
        .1
        .replace("owner@acme.example", "stranger@victim.example");
    let to_stranger = || {
        smtp.received()
            .iter()
            .filter(|m| m.recipients.iter().any(|r| r == "stranger@victim.example"))
            .count()
    };
    for _ in 0..3 {
        assert_eq!(sign_up("stranger@victim.example").await, same);
    }
    mail_to(5).await;
    assert_eq!(to_stranger(), 3);
    assert_eq!(sign_up("stranger@victim.example").await, same);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(to_stranger(), 3, "the fourth sign-up sent nothing");
}
