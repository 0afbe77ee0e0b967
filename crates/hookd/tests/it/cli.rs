use sea_orm::ConnectionTrait;

use crate::helpers::*;

#[test]
fn tenant_create_json_prints_the_id_and_a_working_key_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hookd(dir.path()).args([
        "tenant",
        "create",
        "--name",
        "Acme",
        "--email",
        "ops@acme.test",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    let tenant_id = v["tenant_id"].as_str().unwrap();
    let api_key = v["api_key"].as_str().unwrap();
    assert!(tenant_id.starts_with("tnt_"), "{tenant_id}");
    assert!(api_key.starts_with("hk_"), "{api_key}");
    assert_eq!(v.as_object().unwrap().len(), 2);

    // The key authenticates as that tenant, and the database holds only its hash.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let url = format!("sqlite://{}/data/hookd.db", dir.path().display());
        let store = store::Store::connect(&url, &Default::default())
            .await
            .unwrap();
        let t = store
            .system()
            .authenticate_api_key(api_key)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(t.to_string(), tenant_id);
        let db = store.connection();
        let row = db
            .query_one(sea_orm::Statement::from_string(
                db.get_database_backend(),
                "SELECT key_hash FROM api_keys",
            ))
            .await
            .unwrap()
            .unwrap();
        let hash: String = row.try_get("", "key_hash").unwrap();
        assert!(!hash.contains(&api_key[3..]));
    });
    let raw = std::fs::read(dir.path().join("data/hookd.db")).unwrap();
    let needle = api_key.as_bytes();
    assert!(
        !raw.windows(needle.len()).any(|w| w == needle),
        "plaintext key not on disk"
    );
}

#[test]
fn tenant_create_text_output_and_input_checks() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hookd(dir.path()).args([
        "tenant",
        "create",
        "--name",
        "Acme",
        "--email",
        "ops@acme.test",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("tenant created: tnt_"), "{text}");
    assert!(text.contains("API key") && text.contains("hk_"), "{text}");

    let bad = run(hookd(dir.path()).args([
        "tenant",
        "create",
        "--name",
        "Acme",
        "--email",
        "not-an-email",
    ]));
    assert_clean_failure(&bad, &["--email", "not-an-email"]);
    let bad =
        run(hookd(dir.path()).args(["tenant", "create", "--name", "  ", "--email", "a@b.co"]));
    assert_clean_failure(&bad, &["--name"]);
}

#[test]
fn invalid_settings_stop_start_up_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hookd(dir.path())
        .env("HOOKD_BIND", "localhost:http")
        .arg("serve"));
    assert_clean_failure(&out, &["bind", "HOOKD_BIND", "localhost:http"]);

    let out = run(hookd(dir.path())
        .env("HOOKD_LOG_FORMAT", "yaml")
        .arg("serve"));
    assert_clean_failure(&out, &["log_format", "yaml"]);

    let cfg = dir.path().join("hookd.toml");
    std::fs::write(
        &cfg,
        "bind = \"127.0.0.1:0\"\nshutdown_timeout = \"forever\"\n",
    )
    .unwrap();
    let out = run(hookd(dir.path()).args(["--config", cfg.to_str().unwrap(), "serve"]));
    assert_clean_failure(&out, &["shutdown_timeout", "hookd.toml"]);

    std::fs::write(&cfg, "bind = 127.0.0.1:0\n").unwrap();
    let out = run(hookd(dir.path()).args(["--config", cfg.to_str().unwrap(), "serve"]));
    assert_clean_failure(&out, &["not valid TOML"]);

    let out = run(hookd(dir.path()).args(["--config", "missing.toml", "serve"]));
    assert_clean_failure(&out, &["missing.toml"]);
    assert!(
        !dir.path().join("data").exists(),
        "nothing created when config is invalid"
    );
}

#[test]
fn database_problems_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on port 1.
    let out = run(hookd(dir.path()).args([
        "serve",
        "--database-url",
        "postgres://hookd:pw@127.0.0.1:1/hookd",
    ]));
    assert_clean_failure(&out, &["cannot connect", "127.0.0.1:1"]);
    assert!(
        !stderr(&out).contains(":pw@"),
        "password must not be printed"
    );

    let out =
        run(hookd(dir.path()).args(["migrate", "--database-url", "mysql://root@localhost/x"]));
    assert_clean_failure(&out, &["database_url", "sqlite://"]);

    // A data directory that cannot be created (its parent is a regular file).
    std::fs::write(dir.path().join("blocker"), "").unwrap();
    let out =
        run(hookd(dir.path()).args(["serve", "--database-url", "sqlite://blocker/data/hookd.db"]));
    assert_clean_failure(&out, &["data directory", "blocker/data"]);
}

#[test]
fn a_taken_port_is_a_clean_error() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(hookd(dir.path()).args(["serve", "--bind", &addr]));
    assert_clean_failure(&out, &["cannot listen", &addr]);
}

#[test]
fn config_prints_effective_settings_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hookd(dir.path())
        .env("HOOKD_DATABASE_URL", "postgres://u:topsecret@db/hookd")
        .arg("config"));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("database_url = \"postgres://u:***@db/hookd\"  # from HOOKD_DATABASE_URL\n"),
        "{text}"
    );
    assert!(!text.contains("topsecret"));
    assert!(
        text.contains("bind = \"127.0.0.1:0\"  # from HOOKD_BIND\n"),
        "{text}"
    );
    assert!(
        text.contains("log_format = \"text\"  # default\n"),
        "{text}"
    );
}

#[tokio::test]
async fn migrate_on_an_empty_postgres_database_then_again_is_a_no_op() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED migrate_on_postgres: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    // An empty database: create it by hand rather than through TestDb, which migrates.
    let name = format!("hookd_test_migrate_{}", std::process::id());
    let (admin_store, url) = store::testing::empty_postgres_database(&admin, &name).await;
    let conn = admin_store.connection();
    let dir = tempfile::tempdir().unwrap();

    let first = run(hookd(dir.path()).args(["migrate", "--database-url", &url]));
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        stdout(&first).contains(
            "applied 37 migration(s): m0001_initial, m0002_attempt_stats, m0003_pending_signups, m0004_signature_headers, m0005_tenant_status_preset, m0006_retention, m0007_lean_indexes, m0008_endpoint_leases, m0009_portal_tokens, m0010_portal_settings, m0011_endpoint_auth, m0012_inbound_sources, m0013_inbound_ordering, m0014_source_tolerance, m0015_egress_grants, m0016_inbound_signed, m0017_portal_capabilities, m0019_attempt_headers, m0021_inbound_refusals, m0022_message_deliver_at, m0023_operational_webhooks, m0025_failure_warnings, m0026_integrations, m0027_stats_and_ingest, m0028_trace_context, m0029_ingest_url_token, m0030_binary_ids, m0031_endpoint_history_index, m0032_lean_attempts, m0033_lean_deliveries, m0034_succeeded_not_kept, m0035_attempts_clustered, m0036_attempts_keyed_by_message, m0037_messages_keyed_by_app, m0038_event_types_walked, m0039_handoff_journal, m0040_deliveries_seen"
        ),
        "{}",
        stdout(&first)
    );
    let second = run(hookd(dir.path()).args(["migrate", "--database-url", &url]));
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(
        stdout(&second).contains("nothing to do"),
        "{}",
        stdout(&second)
    );

    let migrated = store::Store::connect(&url, &Default::default())
        .await
        .unwrap();
    assert!(migrated.pending_migrations().await.unwrap().is_empty());
    migrated.close().await.unwrap();
    conn.execute_unprepared(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}

#[test]
fn sink_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(hookd(dir.path()).args(["sink", "--fail-rate", "2"]));
    assert_clean_failure(&out, &["--fail-rate"]);
    let out = run(hookd(dir.path()).args(["sink", "--secret", "whsec_nope"]));
    assert_clean_failure(&out, &["--secret"]);
}

#[tokio::test]
async fn sink_refuses_bad_signatures_and_writes_its_report_on_sigterm() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let mut child = hookd(dir.path())
        .args([
            "sink",
            "--bind",
            "127.0.0.1:0",
            "--secret",
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ])
        .arg("--report")
        .arg(&report)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let addr = first
        .split("http://")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let resp = reqwest::Client::new()
        .post(format!("http://{addr}/hook"))
        .header("webhook-id", "msg_x")
        .header(
            "webhook-timestamp",
            domain::Timestamp::now().as_secs().to_string(),
        )
        .header("webhook-signature", "v1,bm90IGEgc2lnbmF0dXJl")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "a bad signature is refused");
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    assert!(child.wait().unwrap().success(), "clean exit on SIGTERM");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(
        (
            written["received"].as_u64(),
            written["bad_signatures"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(written["unique"], 0);
}
