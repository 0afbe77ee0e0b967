//! Operational webhooks: each tenant's operational endpoints live in one hidden application of
//! its own (`internal`), which the tenant's application listings and lookups never show; the
//! events are messages in it, delivered by the same engine. At most one per tenant.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0023_operational_webhooks"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared(
            "ALTER TABLE applications ADD COLUMN internal boolean NOT NULL DEFAULT false",
        )
        .await?;
        db.execute_unprepared(
            "CREATE UNIQUE INDEX idx_applications_internal ON applications (tenant_id) WHERE internal",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("DROP INDEX idx_applications_internal")
            .await?;
        db.execute_unprepared("ALTER TABLE applications DROP COLUMN internal")
            .await?;
        Ok(())
    }
}
