//! What each inbound source refused, for the dashboard's Requests view: when, why, how large,
//! from where, and an excerpt of the headers with every credential and signature value hidden.
//! Bounded twice: the newest `store::REFUSALS_KEPT` per source (trimmed as rows are written)
//! and a retention (`store::REFUSAL_RETENTION`, the scheduler's prune, by id: ids start with
//! their creation time). Also marks the sources a configuration file declares (the dashboard
//! shows them read-only: the next start would undo an edit) and counts the refusals a flood
//! left unrecorded.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0021_inbound_refusals"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE inbound_refusals ( \
       id varchar NOT NULL PRIMARY KEY, \
       source_id varchar NOT NULL, \
       tenant_id varchar NOT NULL, \
       reason varchar NOT NULL, \
       detail text NOT NULL, \
       status integer NOT NULL, \
       size bigint NOT NULL, \
       remote_addr varchar NOT NULL, \
       headers text NOT NULL)",
    // A source's newest first, and its trim past the newest N.
    "CREATE INDEX ix_inbound_refusals_source ON inbound_refusals (source_id, id)",
    "ALTER TABLE inbound_sources ADD COLUMN declared boolean NOT NULL DEFAULT false",
    "ALTER TABLE inbound_sources ADD COLUMN unrecorded bigint NOT NULL DEFAULT 0",
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
        for sql in [
            "DROP TABLE inbound_refusals",
            "ALTER TABLE inbound_sources DROP COLUMN declared",
            "ALTER TABLE inbound_sources DROP COLUMN unrecorded",
        ] {
            m.get_connection().execute_unprepared(sql).await?;
        }
        Ok(())
    }
}
