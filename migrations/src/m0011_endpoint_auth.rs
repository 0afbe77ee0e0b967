//! Per endpoint, how it authenticates each request beyond its signature
//! (`domain::endpoint_auth::EndpointAuth` as JSON, sealed: bearer, basic or OAuth client
//! credentials; NULL: the signature only), and its mutual-TLS identity and receiver CA
//! (`domain::endpoint_auth::Mtls` as JSON, sealed; NULL: none).

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
    Mtls,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one thing at a time.
        for column in [Endpoints::Auth, Endpoints::Mtls] {
            m.alter_table(
                Table::alter()
                    .table(Endpoints::Table)
                    .add_column(ColumnDef::new(column).text().null())
                    .take(),
            )
            .await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for column in [Endpoints::Auth, Endpoints::Mtls] {
            m.alter_table(
                Table::alter()
                    .table(Endpoints::Table)
                    .drop_column(column)
                    .take(),
            )
            .await?;
        }
        Ok(())
    }
}
