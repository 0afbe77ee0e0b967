//! The whole initial data model of DESIGN.md, tenant-scoped everywhere.

use sea_orm_migration::prelude::*;
use sea_orm_migration::schema::*;

pub struct Migration;

impl MigrationName for Migration {
    fn name(&self) -> &str {
        "m0001_initial"
    }
}

/// A text primary key (`tnt_…`, `app_…`).
fn id<T: IntoIden>(col: T) -> ColumnDef {
    string(col).primary_key().take()
}

/// Milliseconds since the Unix epoch.
fn ts<T: IntoIden>(col: T) -> ColumnDef {
    big_integer(col)
}

fn ts_null<T: IntoIden>(col: T) -> ColumnDef {
    big_integer_null(col)
}

fn fk(
    name: &str,
    from: (impl IntoIden + 'static, impl IntoIden + 'static),
    to: (impl IntoIden + 'static, impl IntoIden + 'static),
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .name(name)
        .from(from.0, from.1)
        .to(to.0, to.1)
        .on_delete(ForeignKeyAction::Cascade)
        .take()
}

fn index(
    name: &str,
    table: impl IntoIden + 'static,
    cols: &[&'static str],
) -> IndexCreateStatement {
    let mut stmt = Index::create().name(name).table(table).take();
    for c in cols {
        stmt.col(Alias::new(*c));
    }
    stmt
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // --- tenants and people -------------------------------------------------------------
        m.create_table(
            Table::create()
                .table(Tenants::Table)
                .col(id(Tenants::Id))
                .col(string(Tenants::Name))
                .col(string(Tenants::NotificationEmail))
                .col(integer_null(Tenants::IngestRate))
                .col(integer_null(Tenants::IngestBurst))
                .col(ts(Tenants::CreatedAt))
                .col(ts(Tenants::UpdatedAt))
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Users::Table)
                .col(id(Users::Id))
                .col(string(Users::TenantId))
                .col(string_uniq(Users::Email))
                .col(string(Users::PasswordHash))
                .col(string(Users::Role))
                .col(ts(Users::CreatedAt))
                .col(ts_null(Users::LastLoginAt))
                .foreign_key(&mut fk(
                    "fk_users_tenant",
                    (Users::Table, Users::TenantId),
                    (Tenants::Table, Tenants::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_users_tenant",
            Users::Table,
            &["tenant_id", "id"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(Sessions::Table)
                .col(id(Sessions::Id))
                .col(string(Sessions::TenantId))
                .col(string(Sessions::UserId))
                .col(string_uniq(Sessions::TokenHash))
                .col(string(Sessions::CsrfToken))
                .col(ts(Sessions::CreatedAt))
                .col(ts(Sessions::ExpiresAt))
                .foreign_key(&mut fk(
                    "fk_sessions_user",
                    (Sessions::Table, Sessions::UserId),
                    (Users::Table, Users::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(index("idx_sessions_user", Sessions::Table, &["user_id"]))
            .await?;
        m.create_index(index(
            "idx_sessions_expiry",
            Sessions::Table,
            &["expires_at"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(ApiKeys::Table)
                .col(id(ApiKeys::Id))
                .col(string(ApiKeys::TenantId))
                .col(string(ApiKeys::Name))
                .col(string(ApiKeys::Prefix))
                .col(string_uniq(ApiKeys::KeyHash))
                .col(ts(ApiKeys::CreatedAt))
                .col(ts_null(ApiKeys::LastUsedAt))
                .col(ts_null(ApiKeys::RevokedAt))
                .foreign_key(&mut fk(
                    "fk_api_keys_tenant",
                    (ApiKeys::Table, ApiKeys::TenantId),
                    (Tenants::Table, Tenants::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_api_keys_tenant",
            ApiKeys::Table,
            &["tenant_id", "id"],
        ))
        .await?;

        // --- configuration ------------------------------------------------------------------
        m.create_table(
            Table::create()
                .table(Applications::Table)
                .col(id(Applications::Id))
                .col(string(Applications::TenantId))
                .col(string_null(Applications::Uid))
                .col(string(Applications::Name))
                .col(integer_null(Applications::RateLimit))
                .col(text(Applications::Metadata))
                .col(ts(Applications::CreatedAt))
                .col(ts(Applications::UpdatedAt))
                .foreign_key(&mut fk(
                    "fk_applications_tenant",
                    (Applications::Table, Applications::TenantId),
                    (Tenants::Table, Tenants::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(
            index(
                "uq_applications_uid",
                Applications::Table,
                &["tenant_id", "uid"],
            )
            .unique()
            .take(),
        )
        .await?;
        m.create_index(index(
            "idx_applications_list",
            Applications::Table,
            &["tenant_id", "id"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(EventTypes::Table)
                .col(id(EventTypes::Id))
                .col(string(EventTypes::TenantId))
                .col(string(EventTypes::Name))
                .col(text(EventTypes::Description))
                .col(text_null(EventTypes::Schemas))
                .col(text_null(EventTypes::FeatureFlags))
                .col(string_null(EventTypes::GroupName))
                .col(boolean(EventTypes::Archived))
                .col(boolean(EventTypes::Deprecated))
                .col(ts(EventTypes::CreatedAt))
                .col(ts(EventTypes::UpdatedAt))
                .foreign_key(&mut fk(
                    "fk_event_types_tenant",
                    (EventTypes::Table, EventTypes::TenantId),
                    (Tenants::Table, Tenants::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(
            index(
                "uq_event_types_name",
                EventTypes::Table,
                &["tenant_id", "name"],
            )
            .unique()
            .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Endpoints::Table)
                .col(id(Endpoints::Id))
                .col(string(Endpoints::TenantId))
                .col(string(Endpoints::AppId))
                .col(string_null(Endpoints::Uid))
                .col(text(Endpoints::Url))
                .col(text(Endpoints::Description))
                .col(integer(Endpoints::Version))
                .col(text_null(Endpoints::FilterTypes))
                .col(text_null(Endpoints::Channels))
                .col(text(Endpoints::Headers))
                .col(text(Endpoints::Metadata))
                .col(boolean(Endpoints::Disabled))
                .col(text_null(Endpoints::DisabledReason))
                .col(ts_null(Endpoints::DisabledAt))
                .col(integer_null(Endpoints::ThrottleRate))
                .col(integer_null(Endpoints::MaxConcurrency))
                .col(big_integer_null(Endpoints::TimeoutMs))
                .col(text_null(Endpoints::RetryPolicy))
                .col(text_null(Endpoints::StatusOverrides))
                .col(ts_null(Endpoints::FailingSince))
                .col(ts_null(Endpoints::LastSuccessAt))
                .col(string(Endpoints::BreakerState))
                .col(ts_null(Endpoints::BreakerUntil))
                .col(ts(Endpoints::CreatedAt))
                .col(ts(Endpoints::UpdatedAt))
                .foreign_key(&mut fk(
                    "fk_endpoints_app",
                    (Endpoints::Table, Endpoints::AppId),
                    (Applications::Table, Applications::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(
            index("uq_endpoints_uid", Endpoints::Table, &["app_id", "uid"])
                .unique()
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_endpoints_list",
            Endpoints::Table,
            &["tenant_id", "app_id", "id"],
        ))
        .await?;
        // The auto-disable sweep scans only endpoints that are currently failing.
        m.create_index(index(
            "idx_endpoints_failing",
            Endpoints::Table,
            &["failing_since"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(EndpointSecrets::Table)
                .col(id(EndpointSecrets::Id))
                .col(string(EndpointSecrets::TenantId))
                .col(string(EndpointSecrets::EndpointId))
                .col(string(EndpointSecrets::Secret))
                .col(ts(EndpointSecrets::CreatedAt))
                .col(ts_null(EndpointSecrets::ExpiresAt))
                .foreign_key(&mut fk(
                    "fk_endpoint_secrets_endpoint",
                    (EndpointSecrets::Table, EndpointSecrets::EndpointId),
                    (Endpoints::Table, Endpoints::Id),
                ))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_endpoint_secrets_endpoint",
            EndpointSecrets::Table,
            &["endpoint_id", "id"],
        ))
        .await?;

        // --- traffic (high volume: no database foreign keys, see docs/decisions.md) -----------
        m.create_table(
            Table::create()
                .table(Messages::Table)
                .col(id(Messages::Id))
                .col(string(Messages::TenantId))
                .col(string(Messages::AppId))
                .col(string(Messages::EventType))
                .col(string_null(Messages::EventId))
                .col(blob(Messages::Payload))
                .col(text_null(Messages::Channels))
                .col(text_null(Messages::Tags))
                .col(string_null(Messages::OrderingKey))
                .col(ts(Messages::CreatedAt))
                .take(),
        )
        .await?;
        m.create_index(
            index(
                "uq_messages_event_id",
                Messages::Table,
                &["app_id", "event_id"],
            )
            .unique()
            .take(),
        )
        .await?;
        m.create_index(index(
            "idx_messages_list",
            Messages::Table,
            &["tenant_id", "app_id", "id"],
        ))
        .await?;
        m.create_index(index(
            "idx_messages_event_type",
            Messages::Table,
            &["app_id", "event_type", "id"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(Deliveries::Table)
                .col(id(Deliveries::Id))
                .col(string(Deliveries::TenantId))
                .col(string(Deliveries::AppId))
                .col(string(Deliveries::EndpointId))
                .col(string(Deliveries::MsgId))
                .col(string(Deliveries::State))
                .col(integer(Deliveries::AttemptCount))
                .col(integer(Deliveries::AttemptsAtArm))
                .col(string(Deliveries::NextTrigger))
                .col(ts(Deliveries::NextAttemptAt))
                .col(string_null(Deliveries::LeaseOwner))
                .col(ts_null(Deliveries::LeaseExpiresAt))
                .col(ts(Deliveries::GiveUpAt))
                .col(string_null(Deliveries::OrderingKey))
                .col(big_integer_null(Deliveries::Seq))
                .col(integer_null(Deliveries::LastStatus))
                .col(string_null(Deliveries::LastError))
                .col(ts_null(Deliveries::LastAttemptAt))
                .col(ts(Deliveries::CreatedAt))
                .col(ts(Deliveries::UpdatedAt))
                .take(),
        )
        .await?;
        // The claim query: due pending work, oldest first.
        m.create_index(index(
            "idx_deliveries_claim",
            Deliveries::Table,
            &["state", "next_attempt_at"],
        ))
        .await?;
        // The fresh claim: new deliveries first, whatever backlog is due.
        m.create_index(index(
            "idx_deliveries_fresh",
            Deliveries::Table,
            &["state", "created_at"],
        ))
        .await?;
        m.create_index(
            index(
                "uq_deliveries_msg_endpoint",
                Deliveries::Table,
                &["msg_id", "endpoint_id"],
            )
            .unique()
            .take(),
        )
        .await?;
        m.create_index(index(
            "idx_deliveries_endpoint",
            Deliveries::Table,
            &["endpoint_id", "state", "id"],
        ))
        .await?;
        m.create_index(index(
            "idx_deliveries_dead",
            Deliveries::Table,
            &["tenant_id", "state", "updated_at"],
        ))
        .await?;
        m.create_index(
            index(
                "uq_deliveries_ordering",
                Deliveries::Table,
                &["endpoint_id", "ordering_key", "seq"],
            )
            .unique()
            .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(OrderingSequences::Table)
                .col(string(OrderingSequences::EndpointId))
                .col(string(OrderingSequences::OrderingKey))
                .col(string(OrderingSequences::TenantId))
                .col(big_integer(OrderingSequences::LastSeq))
                .primary_key(
                    Index::create()
                        .col(OrderingSequences::EndpointId)
                        .col(OrderingSequences::OrderingKey),
                )
                .take(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Attempts::Table)
                .col(id(Attempts::Id))
                .col(string(Attempts::TenantId))
                .col(string(Attempts::AppId))
                .col(string(Attempts::EndpointId))
                .col(string(Attempts::MsgId))
                .col(string(Attempts::DeliveryId))
                .col(integer(Attempts::AttemptNumber))
                .col(string(Attempts::Trigger))
                .col(text(Attempts::Url))
                .col(ts(Attempts::StartedAt))
                .col(integer(Attempts::DurationMs))
                .col(integer_null(Attempts::StatusCode))
                .col(text_null(Attempts::ResponseExcerpt))
                .col(string_null(Attempts::ErrorKind))
                .col(text_null(Attempts::ErrorDetail))
                .col(string(Attempts::Classification))
                .col(big_integer_null(Attempts::RetryAfterMs))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_attempts_endpoint",
            Attempts::Table,
            &["endpoint_id", "id"],
        ))
        .await?;
        m.create_index(index(
            "idx_attempts_msg",
            Attempts::Table,
            &["msg_id", "id"],
        ))
        .await?;
        m.create_index(index(
            "idx_attempts_delivery",
            Attempts::Table,
            &["delivery_id", "id"],
        ))
        .await?;
        m.create_index(index(
            "idx_attempts_tenant_time",
            Attempts::Table,
            &["tenant_id", "started_at"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(IdempotencyKeys::Table)
                .col(string(IdempotencyKeys::TenantId))
                .col(string(IdempotencyKeys::Key))
                .col(string(IdempotencyKeys::RequestHash))
                .col(integer(IdempotencyKeys::ResponseStatus))
                .col(blob(IdempotencyKeys::ResponseBody))
                .col(ts(IdempotencyKeys::CreatedAt))
                .primary_key(
                    Index::create()
                        .col(IdempotencyKeys::TenantId)
                        .col(IdempotencyKeys::Key),
                )
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_idempotency_keys_age",
            IdempotencyKeys::Table,
            &["created_at"],
        ))
        .await?;

        // --- operations ---------------------------------------------------------------------
        m.create_table(
            Table::create()
                .table(Jobs::Table)
                .col(id(Jobs::Id))
                .col(string(Jobs::TenantId))
                .col(string(Jobs::Kind))
                .col(text(Jobs::Params))
                .col(string(Jobs::State))
                .col(big_integer(Jobs::Progress))
                .col(text_null(Jobs::Error))
                .col(string_null(Jobs::LeaseOwner))
                .col(ts_null(Jobs::LeaseExpiresAt))
                .col(ts(Jobs::CreatedAt))
                .col(ts(Jobs::UpdatedAt))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_jobs_state",
            Jobs::Table,
            &["state", "created_at"],
        ))
        .await?;
        m.create_index(index("idx_jobs_tenant", Jobs::Table, &["tenant_id", "id"]))
            .await?;

        m.create_table(
            Table::create()
                .table(EmailOutbox::Table)
                .col(id(EmailOutbox::Id))
                .col(string_null(EmailOutbox::TenantId))
                .col(string(EmailOutbox::ToAddr))
                .col(text(EmailOutbox::Subject))
                .col(text(EmailOutbox::BodyText))
                .col(string(EmailOutbox::State))
                .col(integer(EmailOutbox::Attempts))
                .col(ts(EmailOutbox::NextAttemptAt))
                .col(text_null(EmailOutbox::LastError))
                .col(ts(EmailOutbox::CreatedAt))
                .col(ts_null(EmailOutbox::SentAt))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_email_outbox_due",
            EmailOutbox::Table,
            &["state", "next_attempt_at"],
        ))
        .await?;
        m.create_index(index(
            "idx_email_outbox_tenant",
            EmailOutbox::Table,
            &["tenant_id", "id"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(OperationalEvents::Table)
                .col(id(OperationalEvents::Id))
                .col(string(OperationalEvents::TenantId))
                .col(string(OperationalEvents::Kind))
                .col(string_null(OperationalEvents::AppId))
                .col(string_null(OperationalEvents::EndpointId))
                .col(text(OperationalEvents::Detail))
                .col(ts(OperationalEvents::CreatedAt))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_operational_events_tenant",
            OperationalEvents::Table,
            &["tenant_id", "id"],
        ))
        .await?;

        m.create_table(
            Table::create()
                .table(NodeHeartbeats::Table)
                .col(id(NodeHeartbeats::NodeId))
                .col(string(NodeHeartbeats::Roles))
                .col(string(NodeHeartbeats::Hostname))
                .col(string(NodeHeartbeats::Version))
                .col(ts(NodeHeartbeats::StartedAt))
                .col(ts(NodeHeartbeats::LastSeenAt))
                .take(),
        )
        .await?;
        m.create_index(index(
            "idx_node_heartbeats_seen",
            NodeHeartbeats::Table,
            &["last_seen_at"],
        ))
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        // Children before parents, so foreign keys never dangle.
        let tables: [DynIden; 17] = [
            NodeHeartbeats::Table.into_iden(),
            OperationalEvents::Table.into_iden(),
            EmailOutbox::Table.into_iden(),
            Jobs::Table.into_iden(),
            IdempotencyKeys::Table.into_iden(),
            Attempts::Table.into_iden(),
            OrderingSequences::Table.into_iden(),
            Deliveries::Table.into_iden(),
            Messages::Table.into_iden(),
            EndpointSecrets::Table.into_iden(),
            Endpoints::Table.into_iden(),
            EventTypes::Table.into_iden(),
            Applications::Table.into_iden(),
            ApiKeys::Table.into_iden(),
            Sessions::Table.into_iden(),
            Users::Table.into_iden(),
            Tenants::Table.into_iden(),
        ];
        for t in tables {
            m.drop_table(Table::drop().table(t).take()).await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
    Name,
    NotificationEmail,
    IngestRate,
    IngestBurst,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    TenantId,
    Email,
    PasswordHash,
    Role,
    CreatedAt,
    LastLoginAt,
}
#[derive(DeriveIden)]
enum Sessions {
    Table,
    Id,
    TenantId,
    UserId,
    TokenHash,
    CsrfToken,
    CreatedAt,
    ExpiresAt,
}
#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    TenantId,
    Name,
    Prefix,
    KeyHash,
    CreatedAt,
    LastUsedAt,
    RevokedAt,
}
#[derive(DeriveIden)]
enum Applications {
    Table,
    Id,
    TenantId,
    Uid,
    Name,
    RateLimit,
    Metadata,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum EventTypes {
    Table,
    Id,
    TenantId,
    Name,
    Description,
    Schemas,
    FeatureFlags,
    GroupName,
    Archived,
    Deprecated,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum Endpoints {
    Table,
    Id,
    TenantId,
    AppId,
    Uid,
    Url,
    Description,
    Version,
    FilterTypes,
    Channels,
    Headers,
    Metadata,
    Disabled,
    DisabledReason,
    DisabledAt,
    ThrottleRate,
    MaxConcurrency,
    TimeoutMs,
    RetryPolicy,
    StatusOverrides,
    FailingSince,
    LastSuccessAt,
    BreakerState,
    BreakerUntil,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum EndpointSecrets {
    Table,
    Id,
    TenantId,
    EndpointId,
    Secret,
    CreatedAt,
    ExpiresAt,
}
#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    TenantId,
    AppId,
    EventType,
    EventId,
    Payload,
    Channels,
    Tags,
    OrderingKey,
    CreatedAt,
}
#[derive(DeriveIden)]
enum Deliveries {
    Table,
    Id,
    TenantId,
    AppId,
    EndpointId,
    MsgId,
    State,
    AttemptCount,
    AttemptsAtArm,
    NextTrigger,
    NextAttemptAt,
    LeaseOwner,
    LeaseExpiresAt,
    GiveUpAt,
    OrderingKey,
    Seq,
    LastStatus,
    LastError,
    LastAttemptAt,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum OrderingSequences {
    Table,
    EndpointId,
    OrderingKey,
    TenantId,
    LastSeq,
}
#[derive(DeriveIden)]
enum Attempts {
    Table,
    Id,
    TenantId,
    AppId,
    EndpointId,
    MsgId,
    DeliveryId,
    AttemptNumber,
    Trigger,
    Url,
    StartedAt,
    DurationMs,
    StatusCode,
    ResponseExcerpt,
    ErrorKind,
    ErrorDetail,
    Classification,
    RetryAfterMs,
}
#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    TenantId,
    Key,
    RequestHash,
    ResponseStatus,
    ResponseBody,
    CreatedAt,
}
#[derive(DeriveIden)]
enum Jobs {
    Table,
    Id,
    TenantId,
    Kind,
    Params,
    State,
    Progress,
    Error,
    LeaseOwner,
    LeaseExpiresAt,
    CreatedAt,
    UpdatedAt,
}
#[derive(DeriveIden)]
enum EmailOutbox {
    Table,
    Id,
    TenantId,
    ToAddr,
    Subject,
    BodyText,
    State,
    Attempts,
    NextAttemptAt,
    LastError,
    CreatedAt,
    SentAt,
}
#[derive(DeriveIden)]
enum OperationalEvents {
    Table,
    Id,
    TenantId,
    Kind,
    AppId,
    EndpointId,
    Detail,
    CreatedAt,
}
#[derive(DeriveIden)]
enum NodeHeartbeats {
    Table,
    NodeId,
    Roles,
    Hostname,
    Version,
    StartedAt,
    LastSeenAt,
}
