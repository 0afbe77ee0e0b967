//! The stored form of ids (decisions 94): what m0030's SQL makes of an id's text is the 16
//! bytes the domain stores, on each database, for edge values and random ones in either case.

use domain::ids::MessageId;
use rand::RngCore;
use sea_orm::{ConnectionTrait, Statement};
use store::testing::each_backend;

#[tokio::test]
async fn m0030_decodes_the_text_of_an_id_to_the_bytes_the_domain_stores() {
    each_backend(|store| async move {
        let backend = store.connection().get_database_backend();
        let mut rng = rand::rng();
        let mut values: Vec<[u8; 16]> = [0u128, 1, u64::MAX as u128, 1 << 127, u128::MAX]
            .iter()
            .map(|v| v.to_be_bytes())
            .collect();
        for _ in 0..200 {
            let mut b = [0u8; 16];
            rng.fill_bytes(&mut b);
            values.push(b);
        }
        let expr = migration::m0030_binary_ids::hex_of(backend, "upper(?)");
        for (i, bytes) in values.into_iter().enumerate() {
            let id = MessageId::from_bytes(bytes);
            let text = id.to_string();
            // Either case, as ids parse.
            let body = if i % 2 == 0 {
                text[4..].to_owned()
            } else {
                text[4..].to_lowercase()
            };
            let sql = match backend {
                sea_orm::DbBackend::Postgres => format!("SELECT {} AS h", expr.replace('?', "$1")),
                _ => format!("SELECT {} AS h", expr.replace('?', "?1")),
            };
            let row = store
                .connection()
                .query_one(Statement::from_sql_and_values(backend, sql, [body.into()]))
                .await
                .unwrap()
                .unwrap();
            let hex: String = row.try_get("", "h").unwrap();
            let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(hex.to_lowercase(), want, "{text}");
        }
    })
    .await;
}

/// m0032 drops an attempt's copies of its application's and delivery's ids (they follow from
/// its endpoint, and from its message and endpoint), m0033 a delivery's copy of its
/// application's; undone, they give each attempt and each delivery back the ids it had, on
/// each database.
#[tokio::test]
async fn m0032_and_m0033_undone_give_attempts_and_deliveries_their_ids_back() {
    use std::time::Duration;

    use migration::MigratorTrait;
    use store::NewMessage;

    use crate::helpers::{app, endpoint, first_try, steps_to_undo, tenant, url};

    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let mut expected = Vec::new();
        let mut expected_deliveries = Vec::new();
        for name in ["a", "b"] {
            let a = app(&store, t, name).await;
            for path in ["one", "two"] {
                endpoint(&store, t, &a, url(path)).await;
            }
            let created = store
                .create_message(
                    t,
                    &a,
                    NewMessage {
                        event_type: "x".into(),
                        payload: b"{}".to_vec(),
                        ..Default::default()
                    },
                    |_, now| now.plus(Duration::from_secs(60)),
                )
                .await
                .unwrap();
            assert_eq!(created.deliveries.len(), 2);
            for d in &created.deliveries {
                expected_deliveries.push((d.id.to_bytes().to_vec(), a.id.to_bytes().to_vec()));
                let attempt = store
                    .record_attempt(t, d, first_try("http://example.com/", 500))
                    .await
                    .unwrap();
                expected.push((
                    attempt.id.to_bytes().to_vec(),
                    a.id.to_bytes().to_vec(),
                    d.id.to_bytes().to_vec(),
                ));
            }
        }
        expected.sort();
        expected_deliveries.sort();
        let conn = store.connection();
        migration::Migrator::down(conn, Some(steps_to_undo("m0032_lean_attempts")))
            .await
            .unwrap();
        let bytes = |r: &sea_orm::QueryResult, c: &str| -> Vec<u8> {
            match conn.get_database_backend() {
                sea_orm::DbBackend::Postgres => r
                    .try_get::<sea_orm::prelude::Uuid>("", c)
                    .unwrap()
                    .as_bytes()
                    .to_vec(),
                _ => r.try_get::<Vec<u8>>("", c).unwrap(),
            }
        };
        let rows = conn
            .query_all(Statement::from_string(
                conn.get_database_backend(),
                "SELECT id, app_id, delivery_id FROM attempts ORDER BY id",
            ))
            .await
            .unwrap();
        let mut found: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> = rows
            .iter()
            .map(|r| (bytes(r, "id"), bytes(r, "app_id"), bytes(r, "delivery_id")))
            .collect();
        found.sort();
        assert_eq!(found, expected);
        let rows = conn
            .query_all(Statement::from_string(
                conn.get_database_backend(),
                "SELECT id, app_id FROM deliveries ORDER BY id",
            ))
            .await
            .unwrap();
        let mut found: Vec<(Vec<u8>, Vec<u8>)> = rows
            .iter()
            .map(|r| (bytes(r, "id"), bytes(r, "app_id")))
            .collect();
        found.sort();
        assert_eq!(found, expected_deliveries);
        // And forward again, as an upgrade would run it.
        migration::Migrator::up(conn, None).await.unwrap();
        // m0035: on SQLite the attempts are clustered by id, every one of them still there.
        if conn.get_database_backend() == sea_orm::DbBackend::Sqlite {
            let sql = conn
                .query_one(Statement::from_string(
                    sea_orm::DbBackend::Sqlite,
                    "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'attempts'",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<String>("", "sql")
                .unwrap();
            assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
        } else {
            // Each index of `table`, as PostgreSQL writes its definition.
            let index_defs = |table: &'static str| async move {
                let rows = conn
                    .query_all(Statement::from_string(
                        sea_orm::DbBackend::Postgres,
                        format!(
                            "SELECT indexdef FROM pg_indexes WHERE tablename = '{table}' \
                             AND schemaname = current_schema() ORDER BY indexname"
                        ),
                    ))
                    .await
                    .unwrap();
                rows.iter()
                    .map(|r| r.try_get::<String>("", "indexdef").unwrap())
                    .collect::<Vec<String>>()
            };
            // m0036: on PostgreSQL the attempts' key is (msg_id, id), and no index of the id
            // alone is left beside it; m0037: the messages' is (app_id, id), likewise; m0038:
            // no index of the messages' event types either.
            for (table, key, columns) in [
                (
                    "attempts",
                    "UNIQUE INDEX idx_attempts_msg ",
                    " (msg_id, id)",
                ),
                (
                    "messages",
                    "UNIQUE INDEX idx_messages_app ",
                    " (app_id, id)",
                ),
            ] {
                let defs = index_defs(table).await;
                assert_eq!(defs.len(), 2, "{defs:?}");
                assert!(
                    defs.iter().any(|d| d.contains(key) && d.contains(columns)),
                    "{defs:?}"
                );
            }
        }
        let rows = conn
            .query_all(Statement::from_string(
                conn.get_database_backend(),
                "SELECT id FROM attempts ORDER BY id",
            ))
            .await
            .unwrap();
        let ids: Vec<Vec<u8>> = rows.iter().map(|r| bytes(r, "id")).collect();
        let want: Vec<Vec<u8>> = expected.iter().map(|(id, _, _)| id.clone()).collect();
        assert_eq!(ids, want);
    })
    .await;
}
