//! The time a scheduled message was asked to be delivered at (Svix's `deliverAt`), kept on the
//! message so that reading it back shows what was asked. Null for a message sent at once.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0022_message_deliver_at"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE messages ADD COLUMN deliver_at bigint")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("ALTER TABLE messages DROP COLUMN deliver_at")
            .await?;
        Ok(())
    }
}
