//! What an attempt page shows beyond the status and body: the headers hookd sent that cannot be
//! worked out again later (the timestamp and signature of that try, under the endpoint's names),
//! and the receiver's response headers, each a bounded JSON list of `[name, value]` pairs.
//! NULL on attempts written before.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0019_attempt_headers"
    }
}

#[derive(DeriveIden)]
enum Attempts {
    Table,
    RequestHeaders,
    ResponseHeaders,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        for col in [Attempts::RequestHeaders, Attempts::ResponseHeaders] {
            m.alter_table(
                Table::alter()
                    .table(Attempts::Table)
                    .add_column(ColumnDef::new(col).text().null())
                    .take(),
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for col in [Attempts::RequestHeaders, Attempts::ResponseHeaders] {
            m.alter_table(
                Table::alter()
                    .table(Attempts::Table)
                    .drop_column(col)
                    .take(),
            )
            .await?;
        }
        Ok(())
    }
}
