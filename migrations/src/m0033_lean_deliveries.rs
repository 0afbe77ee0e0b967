//! A delivery no longer stores its application's id (issue 37 item 2).
//!
//! It was a copy: a delivery's endpoint names its application, and an endpoint's deletion
//! takes its deliveries with it, so every delivery's endpoint is there to ask. The two queries
//! that read it now go through the endpoints: deleting an application deletes its deliveries
//! by its endpoints (`idx_deliveries_of_endpoint`, where it scanned the table for its
//! `app_id`), and the usage statistics count each endpoint's deliveries in an id range of that
//! index and add them up per application. 16 bytes less in every delivery row.
//!
//! As m0032: SQLite rewrites the table's rows once (`ALTER TABLE … DROP COLUMN`); PostgreSQL
//! only marks the column dropped. `down` adds it back, filled from the endpoints.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0033_lean_deliveries"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::run_statements(m, &["ALTER TABLE deliveries DROP COLUMN app_id"]).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // The ids' stored type (decisions 94): `uuid` on PostgreSQL, a BLOB in a text-declared
        // column on SQLite.
        let id_type = match m.get_connection().get_database_backend() {
            DbBackend::Postgres => "uuid",
            _ => "varchar",
        };
        let add_app = format!("ALTER TABLE deliveries ADD COLUMN app_id {id_type}");
        crate::run_statements(
            m,
            &[
                &add_app,
                "UPDATE deliveries SET app_id = \
                   (SELECT e.app_id FROM endpoints e WHERE e.id = deliveries.endpoint_id)",
            ],
        )
        .await
    }
}
