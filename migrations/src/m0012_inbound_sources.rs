//! Inbound sources (issue 21): named URLs (`POST /in/{id}`) that receive webhooks, each with
//! the scheme its requests are verified by (`domain::inbound::Scheme` as JSON, sealed: it holds
//! the secret) and the application whose endpoints the verified events are forwarded to.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0012_inbound_sources"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE inbound_sources ( \
       id varchar NOT NULL PRIMARY KEY, \
       tenant_id varchar NOT NULL, \
       app_id varchar NOT NULL, \
       name varchar NOT NULL, \
       event_type varchar NOT NULL, \
       verification text NOT NULL, \
       created_at bigint NOT NULL)",
    "CREATE UNIQUE INDEX uq_inbound_sources_name ON inbound_sources (tenant_id, name)",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for sql in UP {
            m.get_connection().execute_unprepared(sql).await?;
        }
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("DROP TABLE inbound_sources")
            .await?;
        Ok(())
    }
}
