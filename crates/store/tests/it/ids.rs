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
