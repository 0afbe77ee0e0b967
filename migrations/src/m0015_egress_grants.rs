//! Egress grants: the private networks and hosts the operator opened to one tenant, with the
//! namespace the tenant keeps to on a broker it shares. `origin` tells a grant made with the
//! command line (`cli`) from one declared in the configuration file (`config`), which every
//! start brings in line with the file.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0015_egress_grants"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared(
                "CREATE TABLE egress_grants ( \
                   tenant_id varchar NOT NULL, \
                   target varchar NOT NULL, \
                   redis_prefix varchar NULL, \
                   amqp_vhost varchar NULL, \
                   nats_prefix varchar NULL, \
                   origin varchar NOT NULL, \
                   created_at bigint NOT NULL, \
                   PRIMARY KEY (tenant_id, target))",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("DROP TABLE egress_grants")
            .await?;
        Ok(())
    }
}
