//! Schema migrations for hookd. They run unchanged on SQLite and PostgreSQL.
//!
//! Conventions (docs/decisions.md): ids are stored as their 16 bytes (a `uuid` on PostgreSQL,
//! a BLOB on SQLite; m0030, decisions 94), shown as prefixed text (`app_01J…`) at the edges, and
//! sort by creation time; times are BIGINT milliseconds since the Unix epoch; JSON documents
//! are TEXT; payloads are BLOB/BYTEA kept verbatim.

pub use sea_orm_migration::prelude::*;

/// Runs `statements` in order, each as written: migrations whose SQL is the same on both
/// databases.
pub(crate) async fn run_statements(
    m: &SchemaManager<'_>,
    statements: &[&str],
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::ConnectionTrait;
    let db = m.get_connection();
    for sql in statements {
        db.execute_unprepared(sql).await?;
    }
    Ok(())
}

/// Runs `statements` on PostgreSQL only: a change to its keys and indexes that SQLite does not
/// need.
pub(crate) async fn run_postgres_statements(
    m: &SchemaManager<'_>,
    statements: &[&str],
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::DbBackend;
    if m.get_connection().get_database_backend() == DbBackend::Postgres {
        run_statements(m, statements).await?;
    }
    Ok(())
}

/// A migration named `$name` that runs the module's `UP` statements, and `DOWN` to undo them
/// (with `postgres_only`, on PostgreSQL alone).
macro_rules! statements_migration {
    ($name:literal) => {
        statements_migration!($name, run_statements);
    };
    ($name:literal, postgres_only) => {
        statements_migration!($name, run_postgres_statements);
    };
    ($name:literal, $run:ident) => {
        pub struct Migration;

        impl MigrationName for Migration {
            fn name(&self) -> &str {
                $name
            }
        }

        #[async_trait::async_trait]
        impl MigrationTrait for Migration {
            async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
                crate::$run(m, UP).await
            }

            async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
                crate::$run(m, DOWN).await
            }
        }
    };
}

mod m0001_initial;
mod m0002_attempt_stats;
mod m0003_pending_signups;
mod m0004_signature_headers;
mod m0005_tenant_status_preset;
mod m0006_retention;
mod m0007_lean_indexes;
mod m0008_endpoint_leases;
mod m0009_portal_tokens;
mod m0010_portal_settings;
mod m0011_endpoint_auth;
mod m0012_inbound_sources;
mod m0013_inbound_ordering;
mod m0014_source_tolerance;
mod m0015_egress_grants;
mod m0016_inbound_signed;
mod m0017_portal_capabilities;
mod m0019_attempt_headers;
mod m0021_inbound_refusals;
mod m0022_message_deliver_at;
mod m0023_operational_webhooks;
mod m0025_failure_warnings;
mod m0026_integrations;
mod m0027_stats_and_ingest;
mod m0028_trace_context;
mod m0029_ingest_url_token;
pub mod m0030_binary_ids;
mod m0031_endpoint_history_index;
mod m0032_lean_attempts;
mod m0033_lean_deliveries;
mod m0034_succeeded_not_kept;
mod m0035_attempts_clustered;
mod m0036_attempts_keyed_by_message;
mod m0037_messages_keyed_by_app;
mod m0038_event_types_walked;
mod m0039_handoff_journal;
mod m0040_deliveries_seen;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m0001_initial::Migration),
            Box::new(m0002_attempt_stats::Migration),
            Box::new(m0003_pending_signups::Migration),
            Box::new(m0004_signature_headers::Migration),
            Box::new(m0005_tenant_status_preset::Migration),
            Box::new(m0006_retention::Migration),
            Box::new(m0007_lean_indexes::Migration),
            Box::new(m0008_endpoint_leases::Migration),
            Box::new(m0009_portal_tokens::Migration),
            Box::new(m0010_portal_settings::Migration),
            Box::new(m0011_endpoint_auth::Migration),
            Box::new(m0012_inbound_sources::Migration),
            Box::new(m0013_inbound_ordering::Migration),
            Box::new(m0014_source_tolerance::Migration),
            Box::new(m0015_egress_grants::Migration),
            Box::new(m0016_inbound_signed::Migration),
            Box::new(m0017_portal_capabilities::Migration),
            Box::new(m0019_attempt_headers::Migration),
            Box::new(m0021_inbound_refusals::Migration),
            Box::new(m0022_message_deliver_at::Migration),
            Box::new(m0023_operational_webhooks::Migration),
            Box::new(m0025_failure_warnings::Migration),
            Box::new(m0026_integrations::Migration),
            Box::new(m0027_stats_and_ingest::Migration),
            Box::new(m0028_trace_context::Migration),
            Box::new(m0029_ingest_url_token::Migration),
            Box::new(m0030_binary_ids::Migration),
            Box::new(m0031_endpoint_history_index::Migration),
            Box::new(m0032_lean_attempts::Migration),
            Box::new(m0033_lean_deliveries::Migration),
            Box::new(m0034_succeeded_not_kept::Migration),
            Box::new(m0035_attempts_clustered::Migration),
            Box::new(m0036_attempts_keyed_by_message::Migration),
            Box::new(m0037_messages_keyed_by_app::Migration),
            Box::new(m0038_event_types_walked::Migration),
            Box::new(m0039_handoff_journal::Migration),
            Box::new(m0040_deliveries_seen::Migration),
        ]
    }
}
