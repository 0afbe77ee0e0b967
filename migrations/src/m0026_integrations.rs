//! Integrations (Svix's integration API): an API key a tenant hands to a third party, good
//! only for one application's messages and attempts. The key is kept twice: hashed
//! (SHA-256, like API keys) for authentication, and sealed under the operator key for Svix's
//! `GET …/integration/{id}/key`, which reads it back (decision 88). Deleting the application
//! deletes its integrations.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0026_integrations"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE integrations ( \
       id varchar NOT NULL PRIMARY KEY, \
       tenant_id varchar NOT NULL, \
       app_id varchar NOT NULL REFERENCES applications (id) ON DELETE CASCADE, \
       name text NOT NULL, \
       feature_flags text NOT NULL, \
       key_hash varchar NOT NULL, \
       key_sealed text NOT NULL, \
       created_at bigint NOT NULL, \
       updated_at bigint NOT NULL)",
    "CREATE UNIQUE INDEX uq_integrations_key_hash ON integrations (key_hash)",
    "CREATE INDEX idx_integrations_app ON integrations (app_id, id)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for sql in UP {
            m.get_connection().execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("DROP TABLE integrations")
            .await?;
        Ok(())
    }
}
