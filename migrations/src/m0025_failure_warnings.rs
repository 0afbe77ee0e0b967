//! Early warnings before the auto-disable: the failure streak (its `failing_since`) an
//! endpoint's tenant was last warned about, so each streak warns once and a new one again;
//! and who gets a tenant's warning emails (NULL: its notification address; `none`: nobody;
//! else an address of its own).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0025_failure_warnings"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE endpoints ADD COLUMN warned_failing_since bigint")
            .await?;
        db.execute_unprepared("ALTER TABLE tenants ADD COLUMN warning_recipient text")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let db = m.get_connection();
        db.execute_unprepared("ALTER TABLE tenants DROP COLUMN warning_recipient")
            .await?;
        db.execute_unprepared("ALTER TABLE endpoints DROP COLUMN warned_failing_since")
            .await?;
        Ok(())
    }
}
