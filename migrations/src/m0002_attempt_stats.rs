//! Per-endpoint, per-minute attempt counts and a latency histogram: what the dashboard's
//! charts and the per-endpoint series read, written with each batch of attempt results.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0002_attempt_stats"
    }
}

/// Upper bounds (ms) of the latency buckets `lat_0` … `lat_10`; `lat_11` is everything above.
/// The store's copy (`store::stats::LATENCY_BOUNDS_MS`) must match.
pub const LATENCY_BUCKETS: usize = 12;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let mut table = Table::create()
            .table(AttemptStats::Table)
            .col(string(AttemptStats::EndpointId))
            .col(big_integer(AttemptStats::Minute))
            .col(string(AttemptStats::TenantId))
            .col(string(AttemptStats::AppId))
            .col(big_integer(AttemptStats::Succeeded).default(0))
            .col(big_integer(AttemptStats::Retried).default(0))
            .col(big_integer(AttemptStats::Dead).default(0))
            .col(big_integer(AttemptStats::DurationMsSum).default(0))
            .primary_key(
                Index::create()
                    .col(AttemptStats::EndpointId)
                    .col(AttemptStats::Minute),
            )
            .take();
        for i in 0..LATENCY_BUCKETS {
            table.col(big_integer(Alias::new(format!("lat_{i}"))).default(0));
        }
        m.create_table(table).await?;
        m.create_index(
            Index::create()
                .name("idx_attempt_stats_tenant")
                .table(AttemptStats::Table)
                .col(AttemptStats::TenantId)
                .col(AttemptStats::Minute)
                .take(),
        )
        .await?;
        // The tenant-wide dead-letter view pages failed deliveries by id.
        m.create_index(
            Index::create()
                .name("idx_deliveries_tenant_state")
                .table(Alias::new("deliveries"))
                .col(Alias::new("tenant_id"))
                .col(Alias::new("state"))
                .col(Alias::new("id"))
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let mut drop = Index::drop();
        drop.name("idx_deliveries_tenant_state")
            .table(Alias::new("deliveries"));
        m.drop_index(drop).await?;
        m.drop_table(Table::drop().table(AttemptStats::Table).take())
            .await
    }
}

#[derive(DeriveIden)]
enum AttemptStats {
    Table,
    EndpointId,
    Minute,
    TenantId,
    AppId,
    Succeeded,
    Retried,
    Dead,
    DurationMsSum,
}
