//! What a finished statistics task computed (`application.stats`, `event-type.aggregate`):
//! Svix's `data` of the background task, as JSON. NULL for recover and replay, whose `data`
//! is their count.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0027_job_results"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE jobs ADD COLUMN result text")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE jobs DROP COLUMN result")
            .await?;
        Ok(())
    }
}
