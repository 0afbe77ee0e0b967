//! Per-key ordering of inbound events (issue 21): a source's ordering settings, each key's next
//! expected sequence (with a short lease held by whoever is forwarding that key's events), and
//! the events that arrived ahead of a gap, held until the gap fills or its hold time passes.
//! Also each source's count of duplicates and of requests refused for a bad signature.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::{big_integer, blob, string, string_null};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0013_inbound_ordering"
    }
}

fn col(name: &str) -> Alias {
    Alias::new(name)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for sql in [
            "ALTER TABLE inbound_sources ADD COLUMN ordering text NULL",
            "ALTER TABLE inbound_sources ADD COLUMN duplicates bigint NOT NULL DEFAULT 0",
            "ALTER TABLE inbound_sources ADD COLUMN refused bigint NOT NULL DEFAULT 0",
            "ALTER TABLE inbound_sources ADD COLUMN last_refused_at bigint NULL",
        ] {
            m.get_connection().execute_unprepared(sql).await?;
        }
        m.create_table(
            Table::create()
                .table(col("inbound_keys"))
                .col(string(col("source_id")))
                .col(string(col("ordering_key")))
                .col(string(col("tenant_id")))
                .col(big_integer(col("next_seq")))
                .col(big_integer(col("lease_until")))
                .col(big_integer(col("touched_at")))
                .primary_key(
                    Index::create()
                        .col(col("source_id"))
                        .col(col("ordering_key")),
                )
                .take(),
        )
        .await?;
        m.create_table(
            Table::create()
                .table(col("inbound_held"))
                .col(string(col("source_id")))
                .col(string(col("ordering_key")))
                .col(big_integer(col("seq")))
                .col(string(col("tenant_id")))
                .col(big_integer(col("held_at")))
                .col(string_null(col("event_id")))
                .col(string(col("event_type")))
                .col(blob(col("payload")))
                .primary_key(
                    Index::create()
                        .col(col("source_id"))
                        .col(col("ordering_key"))
                        .col(col("seq")),
                )
                .take(),
        )
        .await?;
        // Idle keys are pruned by when they were last used.
        m.get_connection()
            .execute_unprepared("CREATE INDEX ix_inbound_keys_touched ON inbound_keys (touched_at)")
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let c = m.get_connection();
        c.execute_unprepared("DROP TABLE inbound_held").await?;
        c.execute_unprepared("DROP TABLE inbound_keys").await?;
        for column in ["ordering", "duplicates", "refused", "last_refused_at"] {
            c.execute_unprepared(&format!("ALTER TABLE inbound_sources DROP COLUMN {column}"))
                .await?;
        }
        Ok(())
    }
}
