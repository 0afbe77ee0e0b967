//! On SQLite, the attempts table is its primary key's b-tree (`WITHOUT ROWID`), issue 37 item 2.
//!
//! A rowid table keeps each attempt's 16-byte id twice: in the row, under a hidden rowid, and
//! again in the primary key's index (`sqlite_autoindex_attempts_1`, 28 B an attempt); and its
//! two indexes end each entry with the rowid. Clustered by id, the row is found by its key and
//! the indexes end with the id they already hold. Measured with `scripts/bytes-per-message`
//! (10,000 messages of 100 B, each delivered once): the attempts with their indexes 377 → 371
//! B a message, and everything that grows with messages 705 → 695 B. The table itself packs
//! less densely (257 → 283 B: SQLite splits a key b-tree's pages where it appends whole pages
//! to a rowid table; writing each batch's attempts in id order did not change that, 285 B),
//! which takes most of the 34 B a VACUUMed copy showed. Since a delivery that succeeded is not
//! kept (m0034), the attempt is the largest part of a message's bytes.
//!
//! The table is rebuilt once (every row copied). PostgreSQL is left alone: its tables have no
//! rowid. `down` rebuilds the rowid table.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0035_attempts_clustered"
    }
}

/// The columns of `attempts` as m0001 to m0032 left them, in order.
const COLUMNS: &str = "\"id\" varchar NOT NULL PRIMARY KEY, \"tenant_id\" varchar NOT NULL, \
     \"endpoint_id\" varchar NOT NULL, \"msg_id\" varchar NOT NULL, \
     \"attempt_number\" integer NOT NULL, \"trigger\" varchar NOT NULL, \"url\" text NOT NULL, \
     \"started_at\" bigint NOT NULL, \"duration_ms\" integer NOT NULL, \
     \"status_code\" integer NULL, \"response_excerpt\" text NULL, \"error_kind\" varchar NULL, \
     \"error_detail\" text NULL, \"classification\" varchar NOT NULL, \
     \"retry_after_ms\" bigint NULL, \"request_headers\" text NULL, \"response_headers\" text NULL";

const NAMES: &str = "id, tenant_id, endpoint_id, msg_id, attempt_number, trigger, url, \
     started_at, duration_ms, status_code, response_excerpt, error_kind, error_detail, \
     classification, retry_after_ms, request_headers, response_headers";

/// Rebuilds `attempts` as a table with `options` after its columns, with its two indexes: one
/// text of statements run on one connection as one transaction (a savepoint, which opens one
/// where none is open), so that a failure leaves the table as it was, and no statement is
/// prepared by a pooled connection against the schema as it was before the others.
async fn rebuild(m: &SchemaManager<'_>, options: &str) -> Result<(), DbErr> {
    let db = m.get_connection();
    if db.get_database_backend() != DbBackend::Sqlite {
        return Ok(());
    }
    let sql = format!(
        "SAVEPOINT m0035; \
         CREATE TABLE attempts_rebuilt ({COLUMNS}){options}; \
         INSERT INTO attempts_rebuilt ({NAMES}) SELECT {NAMES} FROM attempts ORDER BY id; \
         DROP TABLE attempts; \
         ALTER TABLE attempts_rebuilt RENAME TO attempts; \
         CREATE INDEX idx_attempts_endpoint ON attempts (endpoint_id, id); \
         CREATE INDEX idx_attempts_msg ON attempts (msg_id, id); \
         RELEASE m0035;"
    );
    db.execute_unprepared(&sql).await?;
    Ok(())
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        rebuild(m, " WITHOUT ROWID").await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        rebuild(m, "").await
    }
}
