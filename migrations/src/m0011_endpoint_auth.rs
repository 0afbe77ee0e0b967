//! Per endpoint, how it authenticates each request beyond its signature
//! (`domain::endpoint_auth::EndpointAuth` as JSON, sealed: bearer, basic or OAuth client
//! credentials). NULL: the signature only.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0011_endpoint_auth"
    }
}

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    Auth,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Endpoints::Table)
                .add_column(ColumnDef::new(Endpoints::Auth).text().null())
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.alter_table(
            Table::alter()
                .table(Endpoints::Table)
                .drop_column(Endpoints::Auth)
                .take(),
        )
        .await
    }
}
