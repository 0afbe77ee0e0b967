//! What a finished statistics task computed (`application.stats`, `event-type.aggregate`):
//! Svix's `data` of the background task, as JSON (NULL for recover and replay, whose `data` is
//! their count). And what Svix's Ingest API says of a source it created (type, name, uid,
//! metadata, when it last changed), as JSON; NULL for sources made through hookd's own API or
//! configuration file, which the Ingest API does not show (decision 89).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0027_stats_and_ingest"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE jobs ADD COLUMN result text")
            .await?;
        db.execute_unprepared("ALTER TABLE inbound_sources ADD COLUMN ingest text")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE inbound_sources DROP COLUMN ingest")
            .await?;
        db.execute_unprepared("ALTER TABLE jobs DROP COLUMN result")
            .await?;
        Ok(())
    }
}
