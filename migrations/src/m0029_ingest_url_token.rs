//! A Svix Ingest source's URL token (`/in/{source}/{token}`), sealed under the operator key
//! like the source's verification secrets (decision 92); null for sources that have none
//! (those made through hookd's own API or a configuration file), which keep `/in/{source}`.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0029_ingest_url_token"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE inbound_sources ADD COLUMN url_token text")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE inbound_sources DROP COLUMN url_token")
            .await?;
        Ok(())
    }
}
