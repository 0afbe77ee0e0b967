//! Each inbound source's timestamp tolerance (issue 21): how far a signed timestamp may be from
//! now, for the schemes that sign one; none: the default (5 minutes).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0014_source_tolerance"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE inbound_sources ADD COLUMN tolerance_secs bigint NULL")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE inbound_sources DROP COLUMN tolerance_secs")
            .await?;
        Ok(())
    }
}
