//! A delivery that succeeded is not kept (issue 37 item 2, decisions 104): its success attempt
//! says the same. The result write deletes it in the transaction that inserts that attempt;
//! this deletes the succeeded deliveries already stored that have a success attempt to stand
//! for them (one without, which no release of hookd wrote, stays and is read as before).
//!
//! On SQLite the freed pages are reused by new rows (the file does not shrink); on
//! PostgreSQL the next VACUUM frees them. `down` writes a succeeded delivery back for each
//! (message, endpoint) whose latest success attempt has none, from that attempt.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0034_succeeded_not_kept"
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::run_statements(
            m,
            &[
                "DELETE FROM deliveries WHERE state = 'succeeded' AND EXISTS \
               (SELECT 1 FROM attempts a WHERE a.msg_id = deliveries.msg_id \
                AND a.endpoint_id = deliveries.endpoint_id AND a.classification = 'success')",
            ],
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        crate::run_statements(
            m,
            &[
                "INSERT INTO deliveries (id, tenant_id, endpoint_id, msg_id, state, \
                 attempt_count, attempts_at_arm, next_trigger, next_attempt_at, give_up_at, \
                 ordering_key, last_status, last_attempt_at, created_at, updated_at) \
               SELECT a.id, a.tenant_id, a.endpoint_id, a.msg_id, 'succeeded', \
                 a.attempt_number, 0, 'scheduled', a.started_at, a.started_at, \
                 m.ordering_key, a.status_code, a.started_at, m.created_at, a.started_at \
               FROM attempts a JOIN messages m ON m.id = a.msg_id \
               WHERE a.classification = 'success' \
                 AND a.id = (SELECT b.id FROM attempts b WHERE b.msg_id = a.msg_id \
                   AND b.endpoint_id = a.endpoint_id AND b.classification = 'success' \
                   ORDER BY b.id DESC LIMIT 1) \
                 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.msg_id = a.msg_id \
                   AND d.endpoint_id = a.endpoint_id)",
            ],
        )
        .await
    }
}
