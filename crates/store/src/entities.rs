//! sea-orm entities, one module a table. Ids are the domain's typed ids (stored as their
//! prefixed text, decoded in `domain::ids` with one policy: a bad id is an error naming the
//! column), times are epoch milliseconds, JSON documents are text (see migrations/ and
//! docs/decisions.md).

macro_rules! entity_boilerplate {
    () => {
        #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
        pub enum Relation {}
        impl ActiveModelBehavior for ActiveModel {}
    };
}

pub mod tenant {
    use domain::ids::TenantId;
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "tenants")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: TenantId,
        pub name: String,
        pub notification_email: String,
        pub ingest_rate: Option<i32>,
        pub ingest_burst: Option<i32>,
        pub created_at: i64,
        pub updated_at: i64,
        /// How failures of endpoints that choose no `statusPreset` are classified; None: the
        /// server's `status_preset` setting.
        pub status_preset: Option<domain::classify::StatusPreset>,
        /// Days kept (`domain::retention`); None: the server's setting.
        pub payload_retention_days: Option<i32>,
        pub metadata_retention_days: Option<i32>,
        /// `domain::portal::PortalSettings` as JSON; None: no embedding, hookd's look.
        pub portal_settings: Option<String>,
        /// Who gets early-warning emails (`domain::email::WarningRecipient`); None: the
        /// notification address.
        pub warning_recipient: Option<String>,
    }
    entity_boilerplate!();
}

pub mod user {
    use domain::ids::{TenantId, UserId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "users")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: UserId,
        pub tenant_id: TenantId,
        pub email: String,
        pub password_hash: String,
        pub role: String,
        pub created_at: i64,
        pub last_login_at: Option<i64>,
    }
    entity_boilerplate!();
}

pub mod session {
    use domain::ids::{SessionId, TenantId, UserId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "sessions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: SessionId,
        pub tenant_id: TenantId,
        pub user_id: UserId,
        pub token_hash: String,
        pub csrf_token: String,
        pub created_at: i64,
        pub expires_at: i64,
    }
    entity_boilerplate!();
}

pub mod api_key {
    use domain::ids::{ApiKeyId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "api_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: ApiKeyId,
        pub tenant_id: TenantId,
        pub name: String,
        /// The first characters of the key, shown in listings so people can tell keys apart.
        pub prefix: String,
        pub key_hash: String,
        pub created_at: i64,
        pub last_used_at: Option<i64>,
        pub revoked_at: Option<i64>,
    }
    entity_boilerplate!();
}

pub mod application {
    use domain::ids::{ApplicationId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "applications")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: ApplicationId,
        pub tenant_id: TenantId,
        pub uid: Option<String>,
        pub name: String,
        pub rate_limit: Option<i32>,
        /// JSON object of string → string.
        pub metadata: String,
        pub created_at: i64,
        pub updated_at: i64,
        /// Days kept (`domain::retention`); None: the tenant's choice, else the server's.
        pub payload_retention_days: Option<i32>,
        pub metadata_retention_days: Option<i32>,
        /// Every message of this application with a smaller id has had its payload expunged
        /// by retention (where the next prune starts).
        pub payload_expunged_before: Option<String>,
        /// The tenant's hidden application holding its operational-webhook endpoints and
        /// events (m0023): never listed or found by the tenant's application lookups.
        pub internal: bool,
    }
    entity_boilerplate!();
}

pub mod event_type {
    use domain::ids::{EventTypeId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "event_types")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: EventTypeId,
        pub tenant_id: TenantId,
        pub name: String,
        pub description: String,
        pub schemas: Option<String>,
        /// JSON array of feature-flag names.
        pub feature_flags: Option<String>,
        pub group_name: Option<String>,
        pub archived: bool,
        pub deprecated: bool,
        pub created_at: i64,
        pub updated_at: i64,
    }
    entity_boilerplate!();
}

pub mod endpoint {
    use domain::breaker::BreakerPhase;
    use domain::ids::{ApplicationId, EndpointId, TenantId};
    use domain::signing::SignatureHeaders;
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "endpoints")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: EndpointId,
        pub tenant_id: TenantId,
        pub app_id: ApplicationId,
        pub uid: Option<String>,
        pub url: String,
        pub description: String,
        pub version: i32,
        /// JSON array of event type names; NULL means every event type.
        pub filter_types: Option<String>,
        /// JSON array of channels; NULL means every message regardless of channel.
        pub channels: Option<String>,
        /// JSON object of custom headers sent with every attempt.
        pub headers: String,
        pub metadata: String,
        pub disabled: bool,
        pub disabled_reason: Option<String>,
        pub disabled_at: Option<i64>,
        pub throttle_rate: Option<i32>,
        pub max_concurrency: Option<i32>,
        pub timeout_ms: Option<i64>,
        pub retry_policy: Option<String>,
        pub status_overrides: Option<String>,
        /// None: the server's `signature_headers` setting.
        pub signature_headers: Option<SignatureHeaders>,
        /// `EndpointAuth` as JSON, sealed (see `sealed`); None: the signature only.
        pub auth: Option<String>,
        /// `Mtls` as JSON, sealed; None: no client certificate.
        pub mtls: Option<String>,
        pub failing_since: Option<i64>,
        pub last_success_at: Option<i64>,
        /// The `failing_since` of the streak its tenant was warned about (m0025).
        pub warned_failing_since: Option<i64>,
        pub breaker_state: BreakerPhase,
        pub breaker_until: Option<i64>,
        pub created_at: i64,
        pub updated_at: i64,
        /// Its deliveries carry a W3C `traceparent` header naming their attempt's span (m0028).
        pub send_traceparent: bool,
    }
    entity_boilerplate!();
}

pub mod endpoint_secret {
    use domain::ids::{EndpointId, SecretId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "endpoint_secrets")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: SecretId,
        pub tenant_id: TenantId,
        pub endpoint_id: EndpointId,
        /// The `whsec_…` form. It must be readable to sign, so it is not hashed.
        pub secret: String,
        pub created_at: i64,
        /// Set on the previous secret at rotation: it keeps signing until then.
        pub expires_at: Option<i64>,
    }
    entity_boilerplate!();
}

pub mod message {
    use domain::ids::{ApplicationId, MessageId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "messages")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: MessageId,
        pub tenant_id: TenantId,
        pub app_id: ApplicationId,
        pub event_type: String,
        pub event_id: Option<String>,
        /// The payload exactly as submitted.
        pub payload: Vec<u8>,
        pub channels: Option<String>,
        pub tags: Option<String>,
        pub ordering_key: Option<String>,
        pub created_at: i64,
        /// Svix's `deliverAt` as asked (ms), for a scheduled message.
        pub deliver_at: Option<i64>,
        /// The W3C `traceparent` of the request that created it, while tracing was on
        /// (m0028; see `trace`); its deliveries' spans join that trace.
        pub trace_parent: Option<String>,
    }
    entity_boilerplate!();
}

pub mod delivery {
    use domain::delivery::{AttemptTrigger, DeliveryState};
    use domain::ids::{DeliveryId, EndpointId, MessageId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "deliveries")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: DeliveryId,
        pub tenant_id: TenantId,
        /// Its application is its endpoint's (m0033).
        pub endpoint_id: EndpointId,
        pub msg_id: MessageId,
        pub state: DeliveryState,
        pub attempt_count: i32,
        /// `attempt_count` when the delivery was last (re-)armed: the retry budget counts from here.
        pub attempts_at_arm: i32,
        /// `scheduled`, or `manual` after a resend or recovery.
        pub next_trigger: AttemptTrigger,
        pub next_attempt_at: i64,
        pub lease_owner: Option<String>,
        pub lease_expires_at: Option<i64>,
        pub give_up_at: i64,
        pub ordering_key: Option<String>,
        pub seq: Option<i64>,
        pub last_status: Option<i32>,
        pub last_error: Option<String>,
        pub last_attempt_at: Option<i64>,
        pub created_at: i64,
        pub updated_at: i64,
    }
    entity_boilerplate!();
}

pub mod ordering_sequence {
    use domain::ids::{EndpointId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "ordering_sequences")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub endpoint_id: EndpointId,
        #[sea_orm(primary_key, auto_increment = false)]
        pub ordering_key: String,
        pub tenant_id: TenantId,
        pub last_seq: i64,
    }
    entity_boilerplate!();
}

pub mod attempt {
    use domain::delivery::{AttemptTrigger, ErrorKind};
    use domain::ids::{AttemptId, EndpointId, MessageId, TenantId};
    use sea_orm::entity::prelude::*;
    /// One try of a delivery. Its delivery is the one of `(msg_id, endpoint_id)`, and its
    /// application the endpoint's: neither is stored again here (m0032).
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "attempts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: AttemptId,
        pub tenant_id: TenantId,
        pub endpoint_id: EndpointId,
        pub msg_id: MessageId,
        pub attempt_number: i32,
        pub trigger: AttemptTrigger,
        pub url: String,
        pub started_at: i64,
        pub duration_ms: i32,
        pub status_code: Option<i32>,
        pub response_excerpt: Option<String>,
        pub error_kind: Option<ErrorKind>,
        pub error_detail: Option<String>,
        pub classification: domain::classify::Verdict,
        pub retry_after_ms: Option<i64>,
        /// What cannot be worked out again of the headers this try sent: the signature and the
        /// names it went under, then any ordering or trace headers, as a
        /// `domain::attempt::SentHeaders` in its text form (decisions 99); older rows hold it
        /// as JSON (decisions 97), or the whole list as a `domain::attempt::HeaderList` in JSON.
        /// Read with `SentHeaders::shown`.
        pub request_headers: Option<String>,
        /// The receiver's response headers, bounded: a `domain::attempt::HeaderList` in its
        /// text form (JSON in older rows). Read with `HeaderList::from_stored`.
        pub response_headers: Option<String>,
    }
    entity_boilerplate!();
}

pub mod idempotency_key {
    use domain::ids::TenantId;
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "idempotency_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant_id: TenantId,
        #[sea_orm(primary_key, auto_increment = false)]
        pub key: String,
        pub request_hash: String,
        pub response_status: i32,
        pub response_body: Vec<u8>,
        pub created_at: i64,
    }
    entity_boilerplate!();
}

pub mod job {
    use domain::ids::{JobId, TenantId};
    use domain::jobs::{JobKind, JobState};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "jobs")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: JobId,
        pub tenant_id: TenantId,
        pub kind: JobKind,
        pub params: String,
        pub state: JobState,
        pub progress: i64,
        pub error: Option<String>,
        pub lease_owner: Option<String>,
        pub lease_expires_at: Option<i64>,
        pub created_at: i64,
        pub updated_at: i64,
        /// JSON: what a statistics task computed, Svix's `data` (m0027); None for the others.
        pub result: Option<String>,
    }
    entity_boilerplate!();
}

pub mod pending_signup {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "pending_signups")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub token_hash: String,
        pub name: String,
        pub email: String,
        pub password_hash: String,
        pub created_at: i64,
        pub expires_at: i64,
    }
    entity_boilerplate!();
}

pub mod email {
    use domain::ids::{EmailId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "email_outbox")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: EmailId,
        pub tenant_id: Option<TenantId>,
        pub to_addr: String,
        pub subject: String,
        pub body_text: String,
        pub state: domain::email::EmailState,
        pub attempts: i32,
        pub next_attempt_at: i64,
        pub last_error: Option<String>,
        pub created_at: i64,
        pub sent_at: Option<i64>,
    }
    entity_boilerplate!();
}

pub mod operational_event {
    use domain::ids::{ApplicationId, EndpointId, OperationalEventId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "operational_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: OperationalEventId,
        pub tenant_id: TenantId,
        pub kind: String,
        pub app_id: Option<ApplicationId>,
        pub endpoint_id: Option<EndpointId>,
        /// JSON object with the event's particulars.
        pub detail: String,
        pub created_at: i64,
    }
    entity_boilerplate!();
}

pub mod node_heartbeat {
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "node_heartbeats")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub node_id: String,
        pub roles: String,
        pub hostname: String,
        pub version: String,
        pub started_at: i64,
        pub last_seen_at: i64,
    }
    entity_boilerplate!();
}

pub mod portal_token {
    use domain::ids::{ApplicationId, PortalTokenId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "portal_tokens")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: PortalTokenId,
        pub tenant_id: TenantId,
        pub app_id: ApplicationId,
        pub token_hash: String,
        pub session_id: Option<String>,
        pub read_only: bool,
        /// JSON array of the feature flags the tenant attached.
        pub feature_flags: String,
        pub created_at: i64,
        /// Brought forward to the revocation time when revoked, so pruning finds both.
        pub expires_at: i64,
        pub revoked_at: Option<i64>,
        /// JSON array of Svix capability names it was issued with; None: the default
        /// (`domain::portal::Capabilities::default_for`).
        pub capabilities: Option<String>,
    }
    entity_boilerplate!();
}

pub mod egress_grant {
    use domain::ids::TenantId;
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "egress_grants")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub tenant_id: TenantId,
        /// `domain::egress::GrantTarget` in its normal text form.
        #[sea_orm(primary_key, auto_increment = false)]
        pub target: String,
        pub redis_prefix: Option<String>,
        pub amqp_vhost: Option<String>,
        pub nats_prefix: Option<String>,
        /// `cli` or `config` (see `store::GrantOrigin`).
        pub origin: String,
        pub created_at: i64,
    }
    entity_boilerplate!();
}

/// The one root of tenant scoping (like Svix's `secure_find`): a query of a tenant-owned
/// table that a tenant's request runs starts here, already filtered to that tenant. Queries
/// that must cross tenants are on [`crate::System`].
pub trait Owned: sea_orm::EntityTrait {
    /// The table's `tenant_id` column.
    fn tenant_column() -> Self::Column;

    fn find_in(tenant: domain::ids::TenantId) -> sea_orm::Select<Self> {
        use sea_orm::{ColumnTrait, QueryFilter};
        Self::find().filter(Self::tenant_column().eq(tenant))
    }

    fn update_in(tenant: domain::ids::TenantId) -> sea_orm::UpdateMany<Self> {
        use sea_orm::{ColumnTrait, QueryFilter};
        Self::update_many().filter(Self::tenant_column().eq(tenant))
    }

    fn delete_in(tenant: domain::ids::TenantId) -> sea_orm::DeleteMany<Self> {
        use sea_orm::{ColumnTrait, QueryFilter};
        Self::delete_many().filter(Self::tenant_column().eq(tenant))
    }
}

pub mod inbound_source {
    use domain::ids::{ApplicationId, SourceId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "inbound_sources")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: SourceId,
        pub tenant_id: TenantId,
        pub app_id: ApplicationId,
        pub name: String,
        /// The event type of what it receives, unless the scheme names one (Stripe's `type`,
        /// GitHub's `X-GitHub-Event`).
        pub event_type: String,
        /// `domain::inbound::Scheme` as JSON, sealed (see `sealed`).
        pub verification: String,
        pub created_at: i64,
        /// `domain::inbound::Ordering` as JSON; none: the defaults.
        pub ordering: Option<String>,
        /// Requests acknowledged as repeats of an event already taken.
        pub duplicates: i64,
        /// Requests refused for a bad signature, and when the last was.
        pub refused: i64,
        pub last_refused_at: Option<i64>,
        /// How far a signed timestamp may be from now, for schemes that sign one; none: the
        /// default (`domain::inbound::DEFAULT_TOLERANCE`).
        pub tolerance_secs: Option<i64>,
        /// Declared by a configuration file (`[[sources]]`): the dashboard shows it read-only,
        /// since the next start would bring it back in line with the file.
        pub declared: bool,
        /// Refused requests a flood left out of the Requests view (counted, not recorded).
        pub unrecorded: i64,
        /// What Svix's Ingest API says of a source it created, as JSON (m0027); None for the
        /// others, which that API does not show.
        pub ingest: Option<String>,
        /// The Ingest source's URL token, sealed (m0029): requests then go to
        /// `/in/{id}/{token}`. None for the others, which take `/in/{id}`.
        pub url_token: Option<String>,
    }
    entity_boilerplate!();
}

/// A request a source refused, as its Requests view lists it (bounded: see
/// `store::REFUSALS_KEPT` and `store::REFUSAL_RETENTION`).
pub mod inbound_refusal {
    use domain::ids::{RefusalId, SourceId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "inbound_refusals")]
    pub struct Model {
        /// Minted when the request arrived: its time, and the list's order.
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: RefusalId,
        pub source_id: SourceId,
        pub tenant_id: TenantId,
        /// `domain::inbound_refusal::Reason` as stored.
        pub reason: String,
        /// What the sender was answered (names what is wrong, never a secret).
        pub detail: String,
        /// The HTTP status it was answered.
        pub status: i32,
        /// Body bytes (as declared, for one too large to read).
        pub size: i64,
        pub remote_addr: String,
        /// JSON array of `[name, value]`: `domain::inbound_refusal::excerpt`.
        pub headers: String,
    }
    entity_boilerplate!();
}

/// Each ordering key a source has seen: the sequence forwarded next, and until when one
/// process holds the key to forward its events (so two never interleave them).
pub mod inbound_key {
    use domain::ids::{SourceId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "inbound_keys")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub source_id: SourceId,
        #[sea_orm(primary_key, auto_increment = false)]
        pub ordering_key: String,
        pub tenant_id: TenantId,
        pub next_seq: i64,
        pub lease_until: i64,
        pub touched_at: i64,
    }
    entity_boilerplate!();
}

/// An inbound event waiting for its turn in its key's sequence.
pub mod inbound_held {
    use domain::ids::{SourceId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "inbound_held")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub source_id: SourceId,
        #[sea_orm(primary_key, auto_increment = false)]
        pub ordering_key: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub seq: i64,
        pub tenant_id: TenantId,
        pub held_at: i64,
        pub event_id: Option<String>,
        pub event_type: String,
        pub payload: Vec<u8>,
    }
    entity_boilerplate!();
}

/// The digest of what a source was sent, where the signature covers neither a timestamp nor
/// the id: a copy sent again within the replay window is a duplicate, whatever its id header.
pub mod inbound_signed {
    use domain::ids::{SourceId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "inbound_signed")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub source_id: SourceId,
        /// Hex SHA-256 of the signed bytes.
        #[sea_orm(primary_key, auto_increment = false)]
        pub digest: String,
        pub tenant_id: TenantId,
        /// The id header of the request that was taken: the same request sent again (a retry
        /// after an error) goes on to the event-id dedup instead of being refused here.
        pub event_id: Option<String>,
        pub expires_at: i64,
    }
    entity_boilerplate!();
}

pub mod integration {
    use domain::ids::{ApplicationId, IntegrationId, TenantId};
    use sea_orm::entity::prelude::*;
    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "integrations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: IntegrationId,
        pub tenant_id: TenantId,
        pub app_id: ApplicationId,
        pub name: String,
        /// JSON array of feature flag names.
        pub feature_flags: String,
        /// SHA-256 of the key, for authentication.
        pub key_hash: String,
        /// The key sealed under the operator key, for `GET …/key`.
        pub key_sealed: String,
        pub created_at: i64,
        pub updated_at: i64,
    }
    entity_boilerplate!();
}

macro_rules! owned {
    ($($table:ident),* $(,)?) => {$(
        impl Owned for $table::Entity {
            fn tenant_column() -> $table::Column {
                $table::Column::TenantId
            }
        }
    )*};
}

owned!(
    user,
    session,
    api_key,
    application,
    event_type,
    endpoint,
    endpoint_secret,
    message,
    delivery,
    ordering_sequence,
    attempt,
    idempotency_key,
    job,
    email,
    operational_event,
    portal_token,
    inbound_source,
    inbound_key,
    inbound_held,
    egress_grant,
    inbound_signed,
    inbound_refusal,
    integration,
);
