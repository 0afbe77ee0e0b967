//! An attempt no longer stores its application's id or its delivery's (issue 37 item 2).
//!
//! Both were copies: a message has one delivery per endpoint (`uq_deliveries_msg_endpoint`), so
//! an attempt's `(msg_id, endpoint_id)` names its delivery, and its endpoint names its
//! application. No query looked an attempt up by either; deleting an application now finds
//! its attempts through their endpoints (`idx_attempts_endpoint`) instead of scanning the
//! table for its `app_id`. 32 bytes less in every attempt row.
//!
//! SQLite rewrites the table's rows once (`ALTER TABLE … DROP COLUMN`, SQLite 3.35+);
//! PostgreSQL only marks the columns dropped, and new rows are written without them. `down`
//! adds both back, filled from the endpoints and deliveries.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0032_lean_attempts"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::run_statements(
            m,
            &[
                "ALTER TABLE attempts DROP COLUMN app_id",
                "ALTER TABLE attempts DROP COLUMN delivery_id",
            ],
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // The ids' stored type (decisions 94): `uuid` on PostgreSQL, a BLOB in a text-declared
        // column on SQLite.
        let id_type = match m.get_connection().get_database_backend() {
            DbBackend::Postgres => "uuid",
            _ => "varchar",
        };
        let add_app = format!("ALTER TABLE attempts ADD COLUMN app_id {id_type}");
        let add_delivery = format!("ALTER TABLE attempts ADD COLUMN delivery_id {id_type}");
        crate::run_statements(
            m,
            &[
                &add_app,
                &add_delivery,
                "UPDATE attempts SET \
                   app_id = (SELECT e.app_id FROM endpoints e WHERE e.id = attempts.endpoint_id), \
                   delivery_id = (SELECT d.id FROM deliveries d \
                     WHERE d.msg_id = attempts.msg_id AND d.endpoint_id = attempts.endpoint_id)",
            ],
        )
        .await
    }
}
