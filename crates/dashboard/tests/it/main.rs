//! The dashboard as a browser uses it, over HTTP against the real application.

mod applications;
mod attempts;
mod bulk;
mod event_types;
mod helpers;
mod live;
mod manage;
mod messages;
mod portal;
mod settings;
mod sources;
mod warnings;

use helpers::{Browser, PASSWORD, app_with_endpoint, spawn_app};

#[tokio::test]
async fn sign_up_see_endpoint_disable_it_and_log_out() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "Ops@Acme.example").await;
    assert!(key.starts_with("hk_"), "{key}");
    let session = b
        .cookies
        .get("hookd_session")
        .cloned()
        .expect("session cookie");

    // Logged in, nothing yet.
    let home = b.get("/").await;
    home.assert(200, "No applications yet");
    assert!(home.body.contains("Acme"));

    // The key shown once works on the API; what it creates shows on the overview.
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let home = b.get("/").await;
    home.assert(200, "http://127.0.0.1:9/hook");
    assert!(
        home.body
            .contains(r#"<span class="badge new">No deliveries yet</span>"#)
    );
    assert!(
        home.body
            .contains(&format!("/app/{app_id}/endpoint/{ep_id}"))
    );

    // Disabling without the CSRF token is refused and changes nothing.
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let refused = b
        .post(&format!("{ep_page}/disable"), &[("csrf", "forged")])
        .await;
    refused.assert(403, "did not come from this dashboard");
    let refused = b.post(&format!("{ep_page}/disable"), &[]).await;
    assert_eq!(refused.status, 403);
    b.get(&ep_page).await.assert(200, "badge new");

    // With it (as the page's form sends it), the endpoint is disabled.
    let page = b.get(&ep_page).await;
    page.assert(200, ">Disable</button>");
    let done = b
        .post(&format!("{ep_page}/disable"), &[("csrf", &page.csrf())])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(done.location(), format!("{ep_page}?done=disabled"));
    let page = b.get(done.location()).await;
    page.assert(200, "Endpoint disabled");
    assert!(page.body.contains("disabled from the dashboard"));
    assert!(page.body.contains(">Enable</button>"));
    b.get("/").await.assert(200, "badge disabled");

    // htmx sends the token in a header instead.
    let csrf = page.csrf();
    let done = b
        .post_with(
            &format!("{ep_page}/enable"),
            &[],
            &[("X-CSRF-Token", &csrf)],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    b.get(done.location()).await.assert(200, "Endpoint enabled");
    b.get(&ep_page).await.assert(200, "badge new");

    // Log out: the old cookie no longer opens anything.
    let out = b.post("/logout", &[("csrf", &csrf)]).await;
    assert_eq!(out.status, 303);
    assert_eq!(out.location(), "/login");
    assert!(!b.cookies.contains_key("hookd_session"));
    b.cookies.insert("hookd_session".into(), session);
    let after = b.get("/").await;
    assert_eq!(after.status, 303);
    assert_eq!(after.location(), "/login");

    // And logging in again works.
    let back = b.log_in("ops@acme.example", PASSWORD).await;
    assert_eq!(back.status, 303, "{}", back.body);
    assert_eq!(back.location(), "/");
    b.get("/").await.assert(200, "http://127.0.0.1:9/hook");
}

#[tokio::test]
async fn another_tenant_never_sees_the_first_tenants_pages() {
    let app = spawn_app().await;
    let mut alice = Browser::new(&app);
    let key = alice.sign_up("Alice Inc", "alice@example.com").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/a").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    alice
        .get(&ep_page)
        .await
        .assert(200, "http://127.0.0.1:9/a");

    let mut mallory = Browser::new(&app);
    mallory.sign_up("Mallory", "mallory@example.com").await;
    let home = mallory.get("/").await;
    home.assert(200, "No applications yet");
    assert!(!home.body.contains("127.0.0.1:9/a"));
    let stolen = mallory.get(&ep_page).await;
    stolen.assert(404, "belongs to another account");
    assert!(!stolen.body.contains("127.0.0.1:9/a"));

    // Actions with Mallory's own valid token are 404 too, and change nothing.
    let token = home.csrf();
    for action in ["disable", "recover"] {
        let r = mallory
            .post(
                &format!("{ep_page}/{action}"),
                &[("csrf", &token), ("since", "2024-01-01T00:00")],
            )
            .await;
        assert_eq!(r.status, 404, "{action}: {}", r.body);
    }
    alice.get(&ep_page).await.assert(200, "badge new");
}

#[tokio::test]
async fn pages_need_a_session() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    for path in ["/", "/app/app_x/endpoint/ep_x"] {
        let r = b.get(path).await;
        assert_eq!(r.status, 303, "{path}");
        assert_eq!(r.location(), "/login", "{path}");
    }
    let r = b.post("/app/a/endpoint/e/disable", &[("csrf", "x")]).await;
    assert_eq!(r.status, 303);
    assert_eq!(r.location(), "/login");
    // A made-up cookie is no session.
    b.cookies.insert("hookd_session".into(), "made-up".into());
    assert_eq!(b.get("/").await.status, 303);
    b.get("/no/such/page").await.assert(404, "Not found");
}

#[tokio::test]
async fn failed_logins_are_slowed_down_but_the_right_password_still_logs_in() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "owner@acme.example").await;
    // A stranger on the same network guesses: five failures cost nothing extra, the sixth
    // and seventh are answered only after 1 s and 2 s.
    let mut other = Browser::new(&app);
    for _ in 0..5 {
        other
            .log_in("owner@acme.example", "wrong password!")
            .await
            .assert(401, "do not match an account");
    }
    for want in [1, 2] {
        let started = std::time::Instant::now();
        other
            .log_in("owner@acme.example", "wrong password!")
            .await
            .assert(401, "do not match an account");
        assert!(
            started.elapsed() >= std::time::Duration::from_secs(want),
            "failure answered after {:?}",
            started.elapsed()
        );
    }
    // The owner, from the same address, is not locked out: the right password logs in.
    let mut owner = Browser::new(&app);
    let r = owner.log_in("owner@acme.example", PASSWORD).await;
    assert_eq!((r.status.as_u16(), r.location()), (303, "/"), "{}", r.body);
    // An unknown email fails the same way as a wrong password.
    other
        .log_in("nobody@acme.example", PASSWORD)
        .await
        .assert(401, "do not match an account");
}

#[tokio::test]
async fn a_guesser_on_the_same_address_slows_logins_but_never_locks_the_owner_out() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "owner@acme.example").await;
    // 25 wrong guesses from the owner's address (a proxy, a NAT), across accounts, past the
    // 20 a minute: each one is checked and answered, the ones past the bucket only later.
    let mut other = Browser::new(&app);
    let started = std::time::Instant::now();
    for i in 0..25 {
        other
            .log_in(&format!("user{i}@acme.example"), "wrong password!")
            .await
            .assert(401, "do not match an account");
    }
    // Five past the burst of 20 at one every 3 s: guessing stays at the limit's rate.
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(12),
        "25 guesses in {:?}",
        started.elapsed()
    );
    let mut owner = Browser::new(&app);
    let r = owner.log_in("owner@acme.example", PASSWORD).await;
    assert_eq!((r.status.as_u16(), r.location()), (303, "/"), "{}", r.body);
}

#[tokio::test]
async fn login_and_signup_forms_need_their_token() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.get("/signup").await;
    let r = b
        .post(
            "/signup",
            &[
                ("csrf", "forged"),
                ("name", "X"),
                ("email", "x@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = b
        .post(
            "/login",
            &[("email", "x@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
}

#[tokio::test]
async fn bad_sign_up_input_gets_a_message_on_the_page() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Taken", "taken@example.com").await;
    let mut b = Browser::new(&app);
    let token = b.get("/signup").await.csrf();
    // Each problem is shown under its field, which is marked invalid and points at it.
    let cases = [
        ("", "a@example.com", PASSWORD, "organisation", "name"),
        ("Acme", "not-an-email", PASSWORD, "valid email", "email"),
        (
            "Acme",
            "a@example.com",
            "short",
            "at least 10 characters",
            "password",
        ),
        (
            "Acme",
            "TAKEN@example.com",
            PASSWORD,
            "already exists",
            "email",
        ),
    ];
    for (name, email, password, message, field) in cases {
        let r = b
            .post(
                "/signup",
                &[
                    ("csrf", &token),
                    ("name", name),
                    ("email", email),
                    ("password", password),
                ],
            )
            .await;
        r.assert(422, message);
        r.assert(
            422,
            &format!(r#"aria-invalid="true" aria-describedby="{field}-error""#),
        );
        let under = r.body.split(&format!(r#"id="{field}-error">"#)).nth(1);
        assert!(
            under.is_some_and(|rest| rest[..rest.find('<').unwrap_or(0)].contains(message)),
            "{message} under {field}: {}",
            r.body
        );
        assert_eq!(r.body.matches("aria-invalid").count(), 1, "{}", r.body);
        // What was typed is kept (escaped), the password is not.
        assert!(
            r.body
                .contains(&format!(r#"value="{}""#, email.to_lowercase()))
        );
        assert!(!r.body.contains(password) || password.is_empty());
    }
    // Not a form at all.
    let r = b.post_raw("/signup", "application/json", "{}").await;
    r.assert(400, "could not be read");
    // Markup in input comes back escaped.
    let r = b
        .post(
            "/signup",
            &[
                ("csrf", &token),
                ("name", "<script>x</script>"),
                ("email", "bad"),
                ("password", PASSWORD),
            ],
        )
        .await;
    r.assert(422, "&#60;script&#62;x");
    assert!(!r.body.contains("<script>x"));
}

#[tokio::test]
async fn recover_since_a_date_starts_a_job_and_confirms_it() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, ep_id) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let ep_page = format!("/app/{app_id}/endpoint/{ep_id}");
    let page = b.get(&ep_page).await;
    page.assert(200, "Recover failed messages");
    let csrf = page.csrf();

    for (since, message) in [
        ("", "Choose a date and time"),
        ("yesterday", "Choose a date and time"),
        ("2999-01-01T00:00", "in the future"),
    ] {
        b.post(
            &format!("{ep_page}/recover"),
            &[("csrf", &csrf), ("since", since)],
        )
        .await
        .assert(422, message);
    }

    // A valid date shows what would be done, and starts nothing.
    let r = b
        .post(
            &format!("{ep_page}/recover"),
            &[("csrf", &csrf), ("since", "2024-05-01T12:00")],
        )
        .await;
    r.assert(
        200,
        "No failed messages since 2024-05-01 12:00:00 UTC to recover.",
    );
    // The confirm step starts the job and goes to its page.
    let since = "1714564800000";
    let start = format!("{ep_page}/bulk/start");
    let form = [
        ("csrf", csrf.as_str()),
        ("kind", "endpoint.recover"),
        ("since", since),
    ];
    let r = b.post(&start, &form).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert!(
        r.location().starts_with(&format!("{ep_page}/job/job_")),
        "{}",
        r.location()
    );
    b.get(r.location()).await.assert(
        200,
        "Recovering failed messages since 2024-05-01 12:00:00 UTC",
    );

    // The job is the API's: it lists it as a background task.
    let tasks = reqwest::Client::new()
        .get(format!("{}/api/v1/background-task", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("tasks")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(tasks["data"].as_array().map(Vec::len), Some(1), "{tasks}");
}

#[tokio::test]
async fn session_cookie_is_httponly_lax_and_secure_behind_https() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    b.sign_up("Acme", "ops@acme.example").await;

    let mut plain = Browser::new(&app);
    let r = plain.log_in("ops@acme.example", PASSWORD).await;
    let cookie = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("hookd_session="))
        .expect("session cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"), "{cookie}");

    // Behind a proxy the operator trusts, its `X-Forwarded-Proto` says the browser used https.
    let app = testkit::TestApp::start(
        store::testing::TestDb::sqlite().await,
        &[
            ("HOOKD_ROLES", "api"),
            ("HOOKD_TRUSTED_PROXIES", "127.0.0.0/8"),
        ],
    )
    .await;
    Browser::new(&app).sign_up("Acme", "ops@acme.example").await;
    let mut proxied = Browser::new(&app);
    let token = proxied.get("/login").await.csrf();
    let r = proxied
        .post_with(
            "/login",
            &[
                ("csrf", &token),
                ("email", "ops@acme.example"),
                ("password", PASSWORD),
            ],
            &[("X-Forwarded-Proto", "https")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    let cookie = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("hookd_session="))
        .expect("session cookie");
    assert!(cookie.contains("; Secure"), "{cookie}");
}

#[tokio::test]
async fn static_assets_are_served() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let js = b.get("/static/htmx.min.js").await;
    assert_eq!(js.status, 200);
    assert!(js.body.starts_with("var htmx="), "{}", &js.body[..40]);
    let css = b.get("/static/hookd.css").await;
    assert_eq!(css.status, 200);
    assert!(css.body.contains(".badge.healthy"));
    assert_eq!(b.get("/static/../Cargo.toml").await.status, 404);
    assert_eq!(b.get("/static/nope.js").await.status, 404);
}
