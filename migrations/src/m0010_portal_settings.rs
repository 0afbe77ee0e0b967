//! Per tenant, the app portal's settings (`domain::portal::PortalSettings` as JSON): the
//! origins that may embed it and its branding. NULL: none (no embedding, hookd's look).

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0010_portal_settings"
    }
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    PortalSettings,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Tenants::Table)
                .add_column(ColumnDef::new(Tenants::PortalSettings).text().null())
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Tenants::Table)
                .drop_column(Tenants::PortalSettings)
                .take(),
        )
        .await
    }
}
