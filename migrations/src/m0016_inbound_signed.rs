//! What each inbound source was sent, by the digest of the signed bytes, where its sender's
//! signature covers neither a timestamp nor the event's id (GitHub; a generic HMAC without a
//! signed timestamp): a captured request sent again with a new id header is known by it for
//! the replay window, then the row is pruned.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{big_integer, string, string_null};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0016_inbound_signed"
    }
}

fn col(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(col("inbound_signed"))
                .col(string(col("source_id")))
                .col(string(col("digest")))
                .col(string(col("tenant_id")))
                .col(string_null(col("event_id")))
                .col(big_integer(col("expires_at")))
                .primary_key(Index::create().col(col("source_id")).col(col("digest")))
                .take(),
        )
        .await?;
        // Pruned by when their window ends.
        m.get_connection()
            .execute_unprepared(
                "CREATE INDEX ix_inbound_signed_expires ON inbound_signed (expires_at)",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("DROP TABLE inbound_signed")
            .await?;
        Ok(())
    }
}
