//! App portal tokens (issue 19): a credential a tenant hands to one of its customers, good for
//! exactly one application. Stored hashed (SHA-256 of a 256-bit random value, like API keys);
//! each expires, and `expire-all` can bring that forward for every token of an application.

use sea_orm_migration::prelude::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0009_portal_tokens"
    }
}

const UP: &[&str] = &[
    "CREATE TABLE portal_tokens ( \
       id varchar NOT NULL PRIMARY KEY, \
       tenant_id varchar NOT NULL, \
       app_id varchar NOT NULL, \
       token_hash varchar NOT NULL, \
       session_id varchar NULL, \
       read_only boolean NOT NULL, \
       feature_flags text NOT NULL, \
       created_at bigint NOT NULL, \
       expires_at bigint NOT NULL, \
       revoked_at bigint NULL)",
    "CREATE UNIQUE INDEX uq_portal_tokens_hash ON portal_tokens (token_hash)",
    "CREATE INDEX idx_portal_tokens_app ON portal_tokens (app_id, expires_at)",
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
            .execute_unprepared("DROP TABLE portal_tokens")
            .await?;
        Ok(())
    }
}
