//! hookd's REST API under `/api/v1`, on actix-web: the core of Svix's API shape, so Svix's
//! SDKs work unmodified, plus hookd's extension fields. Handlers are thin: parse, call the
//! store or the `service` crate, map to JSON. Errors are JSON `{code, detail}`.

mod dto;
mod error;
mod extract;
mod health;
mod idempotency;
pub use idempotency::UnwrittenReplies;
mod openapi;
mod routes;

use actix_web::{middleware, web};

pub use error::ApiError;
pub use openapi::openapi_json;
pub use routes::inbound::SourceIn;

/// Operator settings the API enforces.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// The settings the operations enforce, shared with the dashboard.
    pub service: service::Config,
    /// Message-create requests by result, for `/metrics`.
    pub ingest_counts: std::sync::Arc<IngestCounts>,
    /// Idempotent answers whose record could not be written yet (see `idempotency`).
    pub unwritten_replies: std::sync::Arc<UnwrittenReplies>,
    /// Where hookd is reached, for the portal links it issues.
    pub public_url: String,
    /// Inbound webhook requests by result, for `/metrics`.
    pub inbound_counts: std::sync::Arc<InboundCounts>,
}

/// What became of a request to an inbound source (`POST /in/{source}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InboundResult {
    /// Verified and stored: forwarded from now on.
    Stored,
    /// Verified and stored ahead of a gap in its key's sequence: forwarded when it fills.
    Held,
    /// Verified, but its event id was seen before (or a vendor's handshake, answered):
    /// acknowledged, nothing stored.
    Duplicate,
    /// The signature did not verify (401): nothing stored.
    Refused,
    /// No such source (404).
    UnknownSource,
    /// Verified but not taken: rate limited, not JSON, too large, or a failure.
    Failed,
    /// Verified, ahead of a gap, while its source holds as many as it may (429).
    Full,
}

impl InboundResult {
    pub const ALL: [InboundResult; 7] = [
        Self::Stored,
        Self::Held,
        Self::Duplicate,
        Self::Refused,
        Self::UnknownSource,
        Self::Failed,
        Self::Full,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stored => "stored",
            Self::Held => "held",
            Self::Duplicate => "duplicate",
            Self::Refused => "refused",
            Self::UnknownSource => "unknown_source",
            Self::Failed => "failed",
            Self::Full => "full",
        }
    }
}

/// Counts of [`InboundResult`]s (no per-source label: sources are the tenants' to create).
#[derive(Default, Debug)]
pub struct InboundCounts([std::sync::atomic::AtomicU64; InboundResult::ALL.len()]);

impl InboundCounts {
    pub fn record(&self, r: InboundResult) {
        self.0[r as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn each(&self) -> Vec<(InboundResult, u64)> {
        InboundResult::ALL
            .iter()
            .map(|r| {
                (
                    *r,
                    self.0[*r as usize].load(std::sync::atomic::Ordering::Relaxed),
                )
            })
            .collect()
    }
}

/// What became of a message-create request (`POST /api/v1/app/{app_id}/msg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestResult {
    Accepted,
    /// Refused with 429 by the tenant's ingest limit.
    RateLimited,
    /// Refused for any other reason: the body, the application, a duplicate eventId.
    Rejected,
}

impl IngestResult {
    pub const ALL: [IngestResult; 3] = [Self::Accepted, Self::RateLimited, Self::Rejected];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::RateLimited => "rate_limited",
            Self::Rejected => "rejected",
        }
    }
}

/// Counts of authenticated message-create requests by [`IngestResult`] since the process
/// started, per tenant when `/metrics` carries a tenant label.
#[derive(Debug)]
pub struct IngestCounts(domain::per_tenant::PerTenant<[std::sync::atomic::AtomicU64; 3]>);

impl Default for IngestCounts {
    fn default() -> Self {
        IngestCounts::new(false)
    }
}

impl IngestCounts {
    pub fn new(by_tenant: bool) -> Self {
        IngestCounts(domain::per_tenant::PerTenant::new(by_tenant))
    }

    pub fn record(&self, tenant: domain::ids::TenantId, result: IngestResult) {
        let add = |n: &[std::sync::atomic::AtomicU64; 3]| {
            n[result as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        };
        self.0.with(tenant, add);
    }

    /// Every count: the tenant (when split), the result and how many.
    pub fn each(&self) -> Vec<(Option<String>, IngestResult, u64)> {
        let mut out = Vec::new();
        for (tenant, n) in self.0.each() {
            for r in IngestResult::ALL {
                let v = n[r as usize].load(std::sync::atomic::Ordering::Relaxed);
                out.push((tenant.map(|t| t.to_string()), r, v));
            }
        }
        out
    }
}

impl ApiConfig {
    /// The request-body limit: the payload limit plus room for the message envelope.
    pub fn max_body_bytes(&self) -> usize {
        self.service.max_payload_bytes.saturating_add(64 * 1024)
    }
}

/// One resource: its methods and handlers; any other method answers 405 with `Allow`.
macro_rules! at {
    ($path:literal $(, $method:ident => $handler:expr)+ $(,)?) => {
        web::resource($path)
            $(.route(web::$method().to($handler)))+
            .default_service(web::to(|req: actix_web::HttpRequest| async move {
                error::method_not_allowed(&req, &[$(stringify!($method)),+])
            }))
    };
}

/// Accepts every API path with a trailing slash as without it (`GET /api/v1/app/`), as Svix's
/// server does, so scripts written against Svix's docs keep working. Cheaper than actix's
/// `NormalizePath`, which runs a regex over every request's path.
async fn trim_trailing_slash(
    mut req: actix_web::dev::ServiceRequest,
    next: middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    let path = req.path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let new = match req.query_string() {
            "" => trimmed.to_owned(),
            q => [trimmed, "?", q].concat(),
        };
        if let Ok(uri) = new.parse::<actix_web::http::Uri>() {
            // Only the end of the path changes, so what the scope already matched stays valid.
            req.match_info_mut().get_mut().update(&uri);
            req.head_mut().uri = uri;
        }
    }
    next.call(req).await
}

/// Notes the storage fault behind an answer (an API error or a dashboard page, which leave a
/// `store::FaultSeen` in the response) in the store's health, which logs the change of state
/// once and starts its probe. Wraps the whole app in every role.
pub async fn note_storage_faults(
    req: actix_web::dev::ServiceRequest,
    next: middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    // A store whose reads cannot be trusted (SQLite's WAL index lost) answers nothing but
    // health: a read from its torn view could say that an existing application is missing.
    if let Some(store) = req.app_data::<web::Data<store::Store>>()
        && let Err(refused) = store.storage().may_read()
        && !req.path().starts_with("/health")
        && req.path() != "/api/v1/health"
    {
        let answer = actix_web::ResponseError::error_response(&ApiError::from(refused));
        return Ok(req.into_response(answer));
    }
    let res = next.call(req).await?.map_into_boxed_body();
    // Only an answer that carries a fault looks up the store: nothing is added to the others.
    let seen = res
        .response()
        .extensions()
        .get::<store::FaultSeen>()
        .cloned();
    if let Some(seen) = seen
        && let Some(store) = res.request().app_data::<web::Data<store::Store>>()
    {
        store.note_fault(seen.fault, seen.cause);
    }
    Ok(res)
}

/// Registers every API route. The caller provides `web::Data<store::Store>` and
/// `web::Data<ApiConfig>`.
pub fn configure(cfg: &mut web::ServiceConfig, api: &ApiConfig) {
    use routes::{
        applications as apps, attempts, endpoints as eps, event_types as ets,
        integrations as integ, messages as msgs,
    };
    // actix-web tries a scope's routes in the order registered, one regular expression each,
    // until one matches: message creation, the request of nearly every API call, is first
    // (it was the 18th; the tries before it took 4 % of hookd's CPU at one endpoint). No other
    // route of a scope matches a path one before it matches, so the order decides nothing else.
    let app_scope = web::scope("/app")
        .service(at!("/{app_id}/msg", get => msgs::list, post => msgs::create))
        .service(at!("", get => apps::list, post => apps::create))
        .service(at!("/{app_id}", get => apps::get, put => apps::upsert, patch => apps::patch, delete => apps::delete))
        .service(at!("/{app_id}/endpoint", get => eps::list, post => eps::create))
        .service(at!("/{app_id}/endpoint/{endpoint_id}", get => eps::get, put => eps::upsert, patch => eps::patch, delete => eps::delete))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/secret", get => eps::get_secret))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/secret/rotate", post => eps::rotate_secret))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/headers", get => eps::get_headers, put => eps::set_headers, patch => eps::patch_headers))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/oauth", get => eps::get_oauth, put => eps::set_oauth, delete => eps::delete_oauth))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/auth", get => eps::get_auth, put => eps::set_auth, delete => eps::delete_auth))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/mtls", get => eps::get_mtls, put => eps::set_mtls, delete => eps::delete_mtls))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/stats", get => eps::stats))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/recover", post => eps::recover))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/replay-missing", post => eps::replay_missing))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/send-example", post => eps::send_example))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/replay-from-message", post => eps::replay_from_message))
        .service(at!("/{app_id}/endpoint/{endpoint_id}/msg", get => eps::list_messages))
        .service(at!("/{app_id}/msg/{msg_id}", get => msgs::get))
        .service(at!("/{app_id}/msg/{msg_id}/endpoint", get => attempts::list_destinations))
        .service(at!("/{app_id}/msg/{msg_id}/content", delete => msgs::expunge_content))
        .service(at!("/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", delete => attempts::expunge_content))
        .service(at!("/{app_id}/msg/{msg_id}/attempt/{attempt_id}", get => attempts::get))
        .service(at!("/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend", post => attempts::resend))
        .service(at!("/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/skip", post => attempts::skip))
        .service(at!("/{app_id}/attempt/endpoint/{endpoint_id}", get => attempts::list_by_endpoint))
        .service(at!("/{app_id}/attempt/msg/{msg_id}", get => attempts::list_by_msg))
        .service(at!("/{app_id}/integration", get => integ::list, post => integ::create))
        .service(at!("/{app_id}/integration/{integ_id}", get => integ::get, put => integ::update, delete => integ::delete))
        .service(at!("/{app_id}/integration/{integ_id}/key", get => integ::get_key))
        .service(at!("/{app_id}/integration/{integ_id}/key/rotate", post => integ::rotate_key))
        .default_service(web::to(error::no_route));
    let operational_scope = {
        use routes::operational as ops;
        web::scope("/operational-webhook/endpoint")
            .service(at!("", get => ops::list, post => ops::create))
            .service(
                at!("/{endpoint_id}", get => ops::get, put => ops::upsert, delete => ops::delete),
            )
            .service(at!("/{endpoint_id}/secret", get => ops::get_secret))
            .service(at!("/{endpoint_id}/secret/rotate", post => ops::rotate_secret))
            .service(
                at!("/{endpoint_id}/headers", get => ops::get_headers, put => ops::set_headers),
            )
            .default_service(web::to(error::no_route))
    };
    let event_type_scope = web::scope("/event-type")
        .service(at!("", get => ets::list, post => ets::create))
        .service(at!("/{event_type_name}", get => ets::get, put => ets::upsert, patch => ets::patch, delete => ets::delete))
        .default_service(web::to(error::no_route));
    cfg.service(
        web::scope("/api/v1")
            .app_data(web::PayloadConfig::new(api.max_body_bytes()))
            .app_data(web::QueryConfig::default().error_handler(error::query_error))
            .app_data(web::PathConfig::default().error_handler(error::path_error))
            .wrap(middleware::from_fn(idempotency::middleware))
            .wrap(middleware::from_fn(trim_trailing_slash))
            .service(app_scope)
            .service(at!("/health", get => health::health, head => health::health_head))
            .service(at!("/health/ping", get => health::ping, head => health::ping_head))
            .service(at!("/health/ready", get => health::ready, head => health::ready_head))
            .service(at!("/openapi.json", get => openapi::serve))
            .service(at!("/background-task", get => eps::list_tasks))
            .service(at!("/background-task/{task_id}", get => eps::get_task))
            .service(at!("/email", get => eps::list_emails))
            .service(
                at!("/retention", get => routes::retention::get, put => routes::retention::put),
            )
            .service(
                at!("/auth/app-portal-access/{app_id}", post => routes::auth::app_portal_access),
            )
            .service(
                at!("/auth/dashboard-access/{app_id}", post => routes::auth::dashboard_access),
            )
            .service(at!("/auth/app/{app_id}/expire-all", post => routes::auth::expire_all))
            .service(at!("/stats/usage/app", post => routes::statistics::app_usage))
            .service(at!("/stats/usage/event-types", put => routes::statistics::event_types))
            .service(at!("/auth/logout", post => routes::auth::logout))
            .service(at!("/inbound/source", get => routes::inbound::list_sources, post => routes::inbound::create_source))
            .service(at!("/inbound/source/{source_id}", get => routes::inbound::get_source, delete => routes::inbound::delete_source))
            .service(operational_scope)
            .service(event_type_scope)
            .default_service(web::to(error::no_route)),
    );
    configure_ingest(cfg, api);
    configure_inbound(cfg, api);
}

/// Svix's Ingest API on hookd's sources (`routes::ingest`): a source's endpoints are its
/// application's, served by the endpoint handlers (`extract::App` reads `{source_id}`) under
/// their own OpenAPI paths.
fn configure_ingest(cfg: &mut web::ServiceConfig, api: &ApiConfig) {
    use routes::ingest;
    cfg.service(
        web::scope("/ingest/api/v1/source")
            .app_data(web::PayloadConfig::new(api.max_body_bytes()))
            .app_data(web::QueryConfig::default().error_handler(error::query_error))
            .app_data(web::PathConfig::default().error_handler(error::path_error))
            .wrap(middleware::from_fn(idempotency::middleware))
            .wrap(middleware::from_fn(trim_trailing_slash))
            .service(at!("", get => ingest::list, post => ingest::create))
            .service(at!("/{source_id}", get => ingest::get, put => ingest::upsert, patch => ingest::patch, delete => ingest::delete))
            .service(at!("/{source_id}/token/rotate", post => ingest::rotate_token))
            .service(at!("/{source_id}/endpoint", get => ingest::list_endpoints, post => ingest::create_endpoint))
            .service(at!("/{source_id}/endpoint/{endpoint_id}", get => ingest::get_endpoint, put => ingest::upsert_endpoint, delete => ingest::delete_endpoint))
            .service(at!("/{source_id}/endpoint/{endpoint_id}/secret", get => ingest::get_endpoint_secret))
            .service(at!("/{source_id}/endpoint/{endpoint_id}/secret/rotate", post => ingest::rotate_endpoint_secret))
            .service(at!("/{source_id}/endpoint/{endpoint_id}/headers", get => ingest::get_endpoint_headers, put => ingest::set_endpoint_headers))
            .default_service(web::to(error::no_route)),
    );
}

/// Webhooks from outside, `POST /in/{source_id}`: the signature is their only credential (see
/// `routes::inbound`). Part of [`configure`]; alone in the `receive` role.
fn configure_inbound(cfg: &mut web::ServiceConfig, api: &ApiConfig) {
    cfg.service(
        web::scope("/in")
            .app_data(web::PayloadConfig::new(api.max_body_bytes()))
            .app_data(web::PathConfig::default().error_handler(error::path_error))
            .service(at!("/{source_id}", post => routes::inbound::receive, get => routes::inbound::handshake))
            // An Ingest source's URL carries a token (decision 92).
            .service(at!("/{source_id}/{token}", post => routes::inbound::receive_at_token, get => routes::inbound::handshake_at_token)),
    );
}

/// The `receive` role's routes (issue 21): `POST /in/{source_id}` and the health probes, and
/// nothing of the tenant API or the dashboard (every other path answers 404 as JSON), for a
/// receiving edge exposed apart from the management API.
pub fn configure_receiving(cfg: &mut web::ServiceConfig, api: &ApiConfig) {
    cfg.service(
        web::scope("/api/v1")
            .service(at!("/health", get => health::health, head => health::health_head))
            .service(at!("/health/ping", get => health::ping, head => health::ping_head))
            .service(at!("/health/ready", get => health::ready, head => health::ready_head)),
    );
    configure_inbound(cfg, api);
    cfg.default_service(web::to(error::no_route));
}
