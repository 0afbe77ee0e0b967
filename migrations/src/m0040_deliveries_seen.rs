//! `deliveries_seen`: the deliveries as readers see them (decisions 114).
//!
//! Since m0039 a delivery handed to the dispatcher as its message is written is, on
//! PostgreSQL, an entry of its batch's journal (`handoffs`) until it succeeds or is written
//! out, not a row of `deliveries`. Every reader of deliveries' state (a message's
//! destinations, an endpoint's statistics and message list, the in-flight gauge, replay's
//! "never delivered") reads this view instead of the table, so that such a delivery shows as
//! `sending` from its first moment: on PostgreSQL the table's rows and, as rows in `sending`,
//! the journaled deliveries neither written out nor succeeded (nor of an endpoint or message
//! deleted meanwhile); on SQLite, which writes every delivery's row, the table itself.
//! Writers keep writing the table. A later migration that changes `deliveries`' columns
//! recreates the view on PostgreSQL (which fixes a view's columns when it is created).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0040_deliveries_seen"
    }
}

const COLUMNS: &str = "id, tenant_id, endpoint_id, msg_id, state, attempt_count, \
     attempts_at_arm, next_trigger, next_attempt_at, lease_owner, lease_expires_at, give_up_at, \
     ordering_key, seq, last_status, last_error, last_attempt_at, created_at, updated_at";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        let sql = if m.get_connection().get_database_backend() == DbBackend::Postgres {
            // As the journal's write-out would write them (state sending, leased by the
            // journal's owner, never attempted), less those it wrote or that succeeded. Each
            // check is a subquery with LIMIT, which PostgreSQL runs as a probe of the key for
            // each journaled delivery: as NOT EXISTS it may plan an anti join that reads the
            // whole table (a hash of every delivery) when it knows nothing of the tables.
            format!(
                "CREATE VIEW deliveries_seen ({COLUMNS}) AS \
                 SELECT {COLUMNS} FROM deliveries \
                 UNION ALL \
                 SELECT j.id, e.tenant_id, j.endpoint_id, j.msg_id, 'sending'::varchar, 0, 0, \
                   'scheduled'::varchar, h.created_at, h.owner::varchar, h.expires_at, \
                   j.give_up_at, NULL::varchar, NULL::bigint, NULL::integer, NULL::varchar, \
                   NULL::bigint, h.created_at, h.created_at \
                 FROM handoffs h CROSS JOIN LATERAL \
                   unnest(h.delivery_ids, h.msg_ids, h.endpoint_ids, h.give_up_at) \
                   AS j(id, msg_id, endpoint_id, give_up_at) \
                 CROSS JOIN LATERAL (SELECT tenant_id, app_id FROM endpoints \
                   WHERE id = j.endpoint_id LIMIT 1) e \
                 WHERE (SELECT 1 FROM deliveries d WHERE d.id = j.id LIMIT 1) IS NULL \
                   AND (SELECT 1 FROM attempts s WHERE s.msg_id = j.msg_id \
                     AND s.endpoint_id = j.endpoint_id AND s.classification = 'success' \
                     LIMIT 1) IS NULL \
                   AND (SELECT 1 FROM messages g WHERE g.app_id = e.app_id \
                     AND g.id = j.msg_id LIMIT 1) IS NOT NULL"
            )
        } else {
            format!("CREATE VIEW deliveries_seen AS SELECT {COLUMNS} FROM deliveries")
        };
        crate::run_statements(m, &[&sql]).await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::run_statements(m, &["DROP VIEW deliveries_seen"]).await
    }
}
