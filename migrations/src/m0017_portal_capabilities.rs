//! Portal tokens carry the capabilities they were issued with (Svix's `capabilities`: a JSON
//! array of names; none: every capability, or reading only for a read-only token), and can be
//! pruned by expiry: an index on `expires_at` alone (revoking a token also brings its expiry
//! forward, so one range finds both).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0017_portal_capabilities"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE portal_tokens ADD COLUMN capabilities text NULL")
            .await?;
        db.execute_unprepared(
            "CREATE INDEX idx_portal_tokens_expiry ON portal_tokens (expires_at)",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("DROP INDEX idx_portal_tokens_expiry")
            .await?;
        db.execute_unprepared("ALTER TABLE portal_tokens DROP COLUMN capabilities")
            .await?;
        Ok(())
    }
}
