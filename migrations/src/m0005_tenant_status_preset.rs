//! Per tenant, how failed attempts of endpoints that do not choose a `statusPreset` are
//! classified (`default` or `retry-all-but-410`); NULL follows the server's `status_preset` setting.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0005_tenant_status_preset"
    }
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    StatusPreset,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Tenants::Table)
                .add_column(ColumnDef::new(Tenants::StatusPreset).string().null())
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Tenants::Table)
                .drop_column(Tenants::StatusPreset)
                .take(),
        )
        .await
    }
}
