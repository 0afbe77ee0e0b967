//! Tracing across the queue: a message keeps the W3C `traceparent` of the request that created
//! it (null unless OpenTelemetry tracing was on then, so a message costs no bytes more), and an
//! endpoint may opt in to receiving a `traceparent` header with its deliveries.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0028_trace_context"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE messages ADD COLUMN trace_parent varchar(55)")
            .await?;
        db.execute_unprepared(
            "ALTER TABLE endpoints ADD COLUMN send_traceparent boolean NOT NULL DEFAULT false",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE endpoints DROP COLUMN send_traceparent")
            .await?;
        db.execute_unprepared("ALTER TABLE messages DROP COLUMN trace_parent")
            .await?;
        Ok(())
    }
}
