//! Per endpoint, which signature header names its deliveries carry (`webhook-*`, `svix-*` or
//! both); NULL follows the server's `signature_headers` setting.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0004_signature_headers"
    }
}

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    SignatureHeaders,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Endpoints::Table)
                .add_column(ColumnDef::new(Endpoints::SignatureHeaders).string().null())
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Endpoints::Table)
                .drop_column(Endpoints::SignatureHeaders)
                .take(),
        )
        .await
    }
}
