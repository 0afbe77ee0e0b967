//! Retention chosen per tenant and per application (whole days; NULL: the level above
//! decides), and per application how far its payloads are already expunged (a message id:
//! everything older is), so each prune starts where the last one stopped.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0006_retention"
    }
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    PayloadRetentionDays,
    MetadataRetentionDays,
}

#[derive(DeriveIden)]
enum Applications {
    Table,
    PayloadRetentionDays,
    MetadataRetentionDays,
    PayloadExpungedBefore,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite's ALTER TABLE adds one at a time.
        let add = |table: DynIden, col: ColumnDef| {
            let mut col = col;
            Table::alter().table(table).add_column(&mut col).take()
        };
        let days = |c: DynIden| ColumnDef::new(c).integer().null().take();
        for stmt in [
            add(
                Tenants::Table.into_iden(),
                days(Tenants::PayloadRetentionDays.into_iden()),
            ),
            add(
                Tenants::Table.into_iden(),
                days(Tenants::MetadataRetentionDays.into_iden()),
            ),
            add(
                Applications::Table.into_iden(),
                days(Applications::PayloadRetentionDays.into_iden()),
            ),
            add(
                Applications::Table.into_iden(),
                days(Applications::MetadataRetentionDays.into_iden()),
            ),
            add(
                Applications::Table.into_iden(),
                ColumnDef::new(Applications::PayloadExpungedBefore)
                    .string()
                    .null()
                    .take(),
            ),
        ] {
            m.alter_table(stmt).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let drop =
            |table: DynIden, col: DynIden| Table::alter().table(table).drop_column(col).take();
        for stmt in [
            drop(
                Applications::Table.into_iden(),
                Applications::PayloadExpungedBefore.into_iden(),
            ),
            drop(
                Applications::Table.into_iden(),
                Applications::MetadataRetentionDays.into_iden(),
            ),
            drop(
                Applications::Table.into_iden(),
                Applications::PayloadRetentionDays.into_iden(),
            ),
            drop(
                Tenants::Table.into_iden(),
                Tenants::MetadataRetentionDays.into_iden(),
            ),
            drop(
                Tenants::Table.into_iden(),
                Tenants::PayloadRetentionDays.into_iden(),
            ),
        ] {
            m.alter_table(stmt).await?;
        }
        Ok(())
    }
}
