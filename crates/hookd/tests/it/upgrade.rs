//! Upgrading a database made by an older hookd: m0030 rewrites its text ids as bytes in place
//! (decisions 94), and every answer of the API is what the older hookd gave on it.
//!
//! The fixtures (tests/fixtures/m0029, made by `make.py` there with a build of main f489274)
//! hold a tenant, an application, endpoints with sealed secrets and headers, messages, attempts
//! that succeeded and failed, a dead letter and an inbound source, with each GET's answer as
//! that hookd gave it.

use std::path::{Path, PathBuf};

use sea_orm::ConnectionTrait;
use serde_json::Value;

use crate::helpers::{Server, hookd};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/m0029")
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(fixtures().join(name)).expect("expected answers");
    serde_json::from_str(&text).expect("JSON")
}

/// Starts this hookd (api role: nothing is sent or pruned meanwhile) on `url`, which migrates
/// it, and compares every recorded answer.
async fn answers_unchanged(url: &str, expected: &Value) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = hookd(dir.path());
    cmd.env("HOOKD_DATABASE_URL", url)
        .env("HOOKD_ROLES", "api")
        .env("HOOKD_PUBLIC_URL", "https://hooks.example.test")
        .env("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8");
    let server = Server::start(cmd);
    let key = expected["api_key"].as_str().unwrap();
    let client = reqwest::Client::new();
    let answers = expected["answers"].as_array().unwrap();
    assert!(answers.len() > 30, "{} answers", answers.len());
    for want in answers {
        let path = want["path"].as_str().unwrap();
        let res = client
            .get(format!("{}{path}", server.base))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let mut body: Value = res.json().await.unwrap_or(Value::Null);
        let mut want_body = want["body"].clone();
        if path.contains("/endpoint/") && path.split('?').next().unwrap().ends_with("/msg") {
            // An endpoint's message list pages by message id since decision 104 (a delivery
            // that succeeded is not kept), where it paged by delivery id: its cursors changed
            // form, and they are opaque to clients. The rows must not change.
            for b in [&mut body, &mut want_body] {
                if let Some(o) = b.as_object_mut() {
                    for cursor in ["iterator", "prevIterator"] {
                        if let Some(Value::String(c)) = o.remove(cursor) {
                            assert!(
                                c.trim_start_matches('-').starts_with("msg_")
                                    || c.trim_start_matches('-').starts_with("dlv_"),
                                "GET {path}: {cursor} {c}"
                            );
                        }
                    }
                }
            }
        }
        assert_eq!(
            (status, &body),
            (want["status"].as_u64().unwrap() as u16, &want_body),
            "GET {path}"
        );
    }
    server.stop_and_log();
}

#[tokio::test]
async fn a_sqlite_database_of_the_last_release_upgrades_with_every_answer_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hookd.db");
    std::fs::copy(fixtures().join("hookd.sqlite"), &file).unwrap();
    let url = format!("sqlite://{}", file.display());
    answers_unchanged(&url, &expected("expected-sqlite.json")).await;
    // Every id is now 16 bytes, none text.
    let store = store::Store::connect(&url, &store::testing::with_keys(Default::default()))
        .await
        .unwrap();
    for (table, column) in [
        ("messages", "id"),
        ("attempts", "endpoint_id"),
        ("tenants", "id"),
    ] {
        let row = store
            .connection()
            .query_one(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Sqlite,
                format!(
                    "SELECT COUNT(*) AS n, SUM(typeof({column}) = 'blob' AND length({column}) = 16) \
                     AS b FROM {table}"
                ),
            ))
            .await
            .unwrap()
            .unwrap();
        let (n, b): (i64, i64) = (row.try_get("", "n").unwrap(), row.try_get("", "b").unwrap());
        assert!(n > 0 && n == b, "{table}.{column}: {b} of {n} are 16 bytes");
    }
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_postgres_database_of_the_last_release_upgrades_with_every_answer_unchanged() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED the PostgreSQL upgrade: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    let name = format!("hookd_test_upgrade_{}", std::process::id());
    let (admin_store, url) = store::testing::empty_postgres_database(&admin, &name).await;
    let conn = admin_store.connection();
    let dump = std::fs::read_to_string(fixtures().join("hookd-pg.sql")).unwrap();
    let db = store::Store::connect(&url, &Default::default())
        .await
        .unwrap();
    db.connection().execute_unprepared(&dump).await.unwrap();
    db.close().await.unwrap();
    answers_unchanged(&url, &expected("expected-postgres.json")).await;
    let db = store::Store::connect(&url, &Default::default())
        .await
        .unwrap();
    let row = db
        .connection()
        .query_one(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT COUNT(*) AS n FROM information_schema.columns c \
             JOIN information_schema.tables t ON t.table_schema = c.table_schema \
               AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE' \
             WHERE c.table_schema = 'public' AND c.data_type = 'uuid'",
        ))
        .await
        .unwrap()
        .unwrap();
    // Every column of m0030's list (migrations/src/m0030_binary_ids.rs) but the two m0032
    // dropped (attempts' app_id and delivery_id) and the one m0033 dropped (deliveries'
    // app_id), and the journal's id (m0039; its arrays of ids are `ARRAY` columns). Tables
    // only: m0040's view repeats the deliveries' columns.
    assert_eq!(row.try_get::<i64>("", "n").unwrap(), 64, "uuid columns");
    db.close().await.unwrap();
    conn.execute_unprepared(&format!("DROP DATABASE \"{name}\" WITH (FORCE)"))
        .await
        .unwrap();
}

/// A value that is no id of its column stops the upgrade, naming it, and converts nothing.
#[tokio::test]
async fn an_id_that_does_not_parse_stops_the_upgrade_naming_table_column_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hookd.db");
    std::fs::copy(fixtures().join("hookd.sqlite"), &file).unwrap();
    let url = format!("sqlite://{}", file.display());
    let out = std::process::Command::new("sqlite3")
        .arg(&file)
        .arg("PRAGMA foreign_keys = OFF; UPDATE attempts SET msg_id = 'msg_NOT-AN-ID' WHERE rowid = 1")
        .output();
    let Ok(out) = out else {
        eprintln!("SKIPPED the refused upgrade: no sqlite3 command");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = crate::helpers::run(hookd(dir.path()).args(["migrate", "--database-url", &url]));
    let err = crate::helpers::stderr(&run);
    assert!(!run.status.success(), "{err}");
    assert!(
        err.contains("attempts.msg_id") && err.contains("msg_NOT-AN-ID"),
        "{err}"
    );
    let text = std::process::Command::new("sqlite3")
        .arg(&file)
        .arg("SELECT COUNT(*) FROM messages WHERE typeof(id) = 'text'")
        .output()
        .unwrap();
    assert_ne!(
        String::from_utf8_lossy(&text.stdout).trim(),
        "0",
        "nothing converted"
    );
}
