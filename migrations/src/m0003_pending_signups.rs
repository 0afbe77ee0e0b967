//! Sign-ups waiting for their email address to be confirmed (when SMTP is configured): the
//! account is created only from the link mailed to that address, so the sign-up form answers
//! the same whether or not the address already has an account.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0003_pending_signups"
    }
}

#[derive(DeriveIden)]
enum PendingSignups {
    Table,
    TokenHash,
    Name,
    Email,
    PasswordHash,
    CreatedAt,
    ExpiresAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(PendingSignups::Table)
                .col(string(PendingSignups::TokenHash).primary_key())
                .col(string(PendingSignups::Name))
                .col(string(PendingSignups::Email))
                .col(string(PendingSignups::PasswordHash))
                .col(big_integer(PendingSignups::CreatedAt))
                .col(big_integer(PendingSignups::ExpiresAt))
                .take(),
        )
        .await?;
        m.create_index(
            Index::create()
                .name("idx_pending_signups_expiry")
                .table(PendingSignups::Table)
                .col(PendingSignups::ExpiresAt)
                .take(),
        )
        .await
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.drop_table(Table::drop().table(PendingSignups::Table).to_owned())
            .await
    }
}
