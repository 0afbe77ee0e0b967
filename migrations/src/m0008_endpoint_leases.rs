//! Endpoint leases: on PostgreSQL each endpoint's deliveries are sent by one dispatcher process
//! at a time, so its concurrency cap, throttle and circuit breaker (kept in that process's
//! memory) hold for the whole deployment (issue 18, decisions 52).
//!
//! One row per endpoint some dispatcher holds or held: who holds it and until when. A claim
//! takes an endpoint whose lease is free or expired and renews its own; the holder renews it
//! while it has claims of the endpoint, so a dead holder's endpoints move on when the lease
//! runs out (the same length as a delivery lease). SQLite runs one process and leaves the table
//! empty.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0008_endpoint_leases"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared(
                "CREATE TABLE endpoint_leases ( \
                   endpoint_id varchar NOT NULL PRIMARY KEY, \
                   owner varchar NOT NULL, \
                   expires_at bigint NOT NULL)",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.get_connection()
            .execute_unprepared("DROP TABLE endpoint_leases")
            .await?;
        Ok(())
    }
}
