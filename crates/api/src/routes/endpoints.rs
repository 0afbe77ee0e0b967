use std::collections::BTreeMap;
use std::time::Duration;

use actix_web::{HttpResponse, web};
use domain::delivery::DeliveryState;
use domain::endpoint_auth::{EndpointAuth, OAuthClient, OAuthMethod};
use domain::ids::EndpointId;
use domain::signing::EndpointKey;
use store::entities::endpoint;
use store::{NewEndpoint, Store, StoreError};

use crate::dto::{
    BackgroundTaskOut, EndpointAuthIn, EndpointAuthOut, EndpointExtIn, EndpointHeadersIn,
    EndpointHeadersOut, EndpointHeadersPatchIn, EndpointIn, EndpointMessageOut,
    EndpointMessageQuery, EndpointMtlsConfigIn, EndpointMtlsConfigOut, EndpointOauthConfigIn,
    EndpointOauthConfigOut, EndpointOut, EndpointPatch, EndpointSecretOut, EndpointSecretRotateIn,
    EndpointStats, ListQuery, ListResponse, RecoverIn, list_params, time,
};
use crate::extract::{App, AppEndpoint, Caller, JsonBody, Tenant};
use crate::routes::messages::raw_payload;
use domain::jobs::{EndpointJob, JobKind, JobState};
use service::{endpoints as eps, rules};

use crate::{ApiConfig, ApiError};

const DEFAULT_GRACE: Duration = Duration::from_secs(24 * 3600);
const MAX_GRACE: u64 = 7 * 24 * 3600;

pub fn out(m: endpoint::Model) -> Result<EndpointOut, ApiError> {
    let overrides = m.status_overrides()?;
    let policy = m.retry_policy()?;
    let filter_types = m.filter_types()?;
    Ok(EndpointOut {
        channels: m.channels()?,
        metadata: m.metadata()?,
        event_types: filter_types.clone(),
        filter_types,
        retry_policy: serde_json::to_value(&policy).map_err(|_| ApiError::internal())?,
        timeout: rules::timeout_text(m.timeout_ms),
        max_concurrency: m
            .max_concurrency
            .map(|c| c as u32)
            .unwrap_or(rules::DEFAULT_MAX_CONCURRENCY),
        retry_on: overrides.retry_on().to_vec(),
        permanent_on: overrides.permanent_on().to_vec(),
        status_preset: overrides.preset().map(|p| p.to_string()),
        id: m.id.to_string(),
        uid: m.uid,
        url: m.url,
        description: m.description,
        version: m.version,
        throttle_rate: m.throttle_rate.map(|r| r as u32),
        disabled: m.disabled,
        disabled_reason: m.disabled_reason,
        created_at: time(m.created_at),
        updated_at: time(m.updated_at),
        breaker_state: m.breaker_state.to_string(),
        signature_headers: m.signature_headers.map(|s| s.to_string()),
        send_traceparent: m.send_traceparent,
    })
}

fn non_empty(v: Option<Vec<String>>) -> Option<Vec<String>> {
    v.filter(|v| !v.is_empty())
}

fn from_in(body: EndpointIn) -> Result<NewEndpoint, ApiError> {
    let EndpointExtIn {
        retry_policy,
        timeout,
        max_concurrency,
        retry_on,
        permanent_on,
        status_preset,
        signature_headers,
        send_traceparent,
    } = body.ext;
    Ok(eps::checked(NewEndpoint {
        url: body.url,
        uid: body.uid,
        description: body.description.unwrap_or_default(),
        version: body.version.unwrap_or(1),
        filter_types: non_empty(body.filter_types.or(body.event_types)),
        channels: non_empty(body.channels),
        headers: body.headers.unwrap_or_default(),
        metadata: body.metadata.unwrap_or_default(),
        disabled: body.disabled.unwrap_or(false),
        throttle_rate: rules::throttle_rate(body.throttle_rate)?,
        max_concurrency: max_concurrency.map(rules::max_concurrency).transpose()?,
        timeout_ms: timeout.as_deref().map(rules::timeout).transpose()?,
        retry_policy: retry_policy.map(rules::retry_policy).transpose()?,
        status_overrides: rules::status_overrides(
            status_preset.as_deref(),
            retry_on.unwrap_or_default(),
            permanent_on.unwrap_or_default(),
        )?,
        signature_headers: rules::signature_headers(signature_headers.as_deref())?,
        send_traceparent: send_traceparent.unwrap_or(false),
    })?)
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint", tag = "Endpoint",
    params(("app_id" = String, Path), ListQuery),
    responses((status = 200, body = ListResponse<EndpointOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = store.list_endpoints(t, app.id, &q.params()?).await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, out)?))
}

#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint", tag = "Endpoint",
    params(("app_id" = String, Path)), request_body = EndpointIn,
    responses((status = 201, body = EndpointOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 409, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    App { tenant: t, app }: App,
    Caller(actor): Caller,
    JsonBody(body): JsonBody<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let secret = eps::secret_or_new(body.secret.as_deref(), body.key_type.as_deref(), "secret")?;
    let new = from_in(body)?;
    let ep = eps::create(&store, &cfg.service, t, actor, &app, new, secret).await?;
    Ok(HttpResponse::Created().json(out(ep)?))
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = EndpointOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(AppEndpoint { endpoint: ep, .. }: AppEndpoint) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(ep)?))
}

/// Replaces the endpoint; creates it (with `endpoint_id` as its uid) when none matches. A new
/// `url` on another host or port drops the endpoint's stored credentials (bearer, basic,
/// OAuth, mTLS) in the same write; set them again with `…/auth`, `…/oauth` or `…/mtls`.
#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointIn,
    responses((status = 200, body = EndpointOut), (status = 201, body = EndpointOut),
        (status = 404, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    App { tenant: t, app }: App,
    Caller(actor): Caller,
    path: web::Path<(String, String)>,
    JsonBody(body): JsonBody<EndpointIn>,
) -> Result<HttpResponse, ApiError> {
    let (_, ep_id) = path.into_inner();
    let given_secret = body.secret.clone();
    let key_type = body.key_type.clone();
    let mut new = from_in(body)?;
    match store.get_endpoint(t, app.id, &ep_id).await {
        Ok(current) => {
            if given_secret.is_some() {
                return Err(ApiError::field(
                    "secret",
                    "use POST …/secret/rotate to change the secret",
                ));
            }
            let ep = eps::update(&store, &cfg.service, t, actor, current, new).await?;
            Ok(HttpResponse::Ok().json(out(ep)?))
        }
        Err(StoreError::NotFound { .. }) if !ep_id.starts_with(EndpointId::PREFIX) => {
            rules::uid("uid", &ep_id, EndpointId::PREFIX)
                .map_err(|_| ApiError::not_found("endpoint"))?;
            new.uid = Some(ep_id);
            let secret =
                eps::secret_or_new(given_secret.as_deref(), key_type.as_deref(), "secret")?;
            let ep = eps::create(&store, &cfg.service, t, actor, &app, new, secret).await?;
            Ok(HttpResponse::Created().json(out(ep)?))
        }
        Err(e) => Err(e.into()),
    }
}

/// Changes the fields given. A new `url` on another host or port drops the endpoint's stored
/// credentials (bearer, basic, OAuth, mTLS) in the same write; set them again with
/// `…/auth`, `…/oauth` or `…/mtls`.
#[utoipa::path(patch, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointPatch,
    responses((status = 200, body = EndpointOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn patch(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: current,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
    JsonBody(p): JsonBody<EndpointPatch>,
) -> Result<HttpResponse, ApiError> {
    let cur = eps::as_new(&store, &current)?;
    let overrides = current.status_overrides()?;
    let preset = overrides.preset().map(|p| p.to_string());
    let filter_types = match (p.filter_types, p.event_types) {
        (crate::dto::Patch::Absent, other) | (other, _) => other,
    };
    let new = eps::checked(NewEndpoint {
        url: p.url.apply_required(cur.url),
        uid: p.uid.apply(cur.uid),
        description: p.description.apply_required(cur.description),
        version: p.version.apply_required(cur.version),
        filter_types: non_empty(filter_types.apply(cur.filter_types)),
        channels: non_empty(p.channels.apply(cur.channels)),
        headers: cur.headers,
        metadata: p.metadata.apply(Some(cur.metadata)).unwrap_or_default(),
        disabled: p.disabled.apply_required(cur.disabled),
        throttle_rate: rules::throttle_rate(
            p.throttle_rate.apply(cur.throttle_rate.map(|r| r as u32)),
        )?,
        max_concurrency: p
            .max_concurrency
            .apply(cur.max_concurrency.map(|c| c as u32))
            .map(rules::max_concurrency)
            .transpose()?,
        timeout_ms: match p.timeout {
            crate::dto::Patch::Absent => cur.timeout_ms,
            crate::dto::Patch::Null => None,
            crate::dto::Patch::Value(v) => Some(rules::timeout(&v)?),
        },
        retry_policy: match p.retry_policy {
            crate::dto::Patch::Absent => cur.retry_policy,
            crate::dto::Patch::Null => None,
            crate::dto::Patch::Value(v) => Some(rules::retry_policy(v)?),
        },
        status_overrides: rules::status_overrides(
            p.status_preset.apply(preset).as_deref(),
            p.retry_on
                .apply(Some(overrides.retry_on().to_vec()))
                .unwrap_or_default(),
            p.permanent_on
                .apply(Some(overrides.permanent_on().to_vec()))
                .unwrap_or_default(),
        )?,
        signature_headers: rules::signature_headers(
            p.signature_headers
                .apply(cur.signature_headers.map(|s| s.to_string()))
                .as_deref(),
        )?,
        send_traceparent: p.send_traceparent.apply_required(cur.send_traceparent),
    })?;
    let ep = eps::update(&store, &cfg.service, t, actor, current, new).await?;
    Ok(HttpResponse::Ok().json(out(ep)?))
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    store.delete_endpoint(t, &ep).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointSecretOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_secret(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    secret_of(&store, t, &ep).await
}

/// `GET …/secret` of any endpoint: its current key, as receivers verify with it.
pub(crate) async fn secret_of(
    store: &Store,
    t: domain::ids::TenantId,
    ep: &endpoint::Model,
) -> Result<HttpResponse, ApiError> {
    let secrets = store
        .active_secrets(t, ep.id, domain::Timestamp::now())
        .await?;
    let current = secrets
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found("secret"))?;
    let key = EndpointKey::parse(&current.secret).map_err(|e| {
        tracing::error!(error = %e, "a stored signing key does not parse");
        ApiError::internal()
    })?;
    Ok(HttpResponse::Ok().json(EndpointSecretOut {
        key: key.shareable(),
        public_key: key.public_key(),
    }))
}

/// Makes a new secret current (and returns it); the previous one keeps signing for the grace
/// period (24 h).
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/secret/rotate", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointSecretRotateIn,
    responses((status = 200, body = EndpointSecretOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn rotate_secret(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    JsonBody(body): JsonBody<EndpointSecretRotateIn>,
) -> Result<HttpResponse, ApiError> {
    let grace = grace_period(body.grace_period_seconds)?;
    // 200 with the new key, not the 204 of Svix's specs: the Python SDK hookd is tested with
    // (2.9.1) parses a body here and fails on 204; the JavaScript SDKs ignore the body.
    let key = eps::rotate_key(
        &store,
        t,
        &ep,
        body.key.as_deref(),
        body.key_type.as_deref(),
        grace,
    )
    .await?;
    Ok(HttpResponse::Ok().json(EndpointSecretOut {
        public_key: key.public_key(),
        key: key.shareable(),
    }))
}

/// How long the previous secret keeps signing after a rotation: `gracePeriodSeconds`, 0 to 7
/// days, 24 h when absent.
pub(crate) fn grace_period(seconds: Option<u64>) -> Result<Duration, ApiError> {
    match seconds {
        None => Ok(DEFAULT_GRACE),
        Some(s) if s <= MAX_GRACE => Ok(Duration::from_secs(s)),
        Some(_) => Err(ApiError::field(
            "gracePeriodSeconds",
            format!("at most {MAX_GRACE}"),
        )),
    }
}

pub(crate) fn headers_of(
    store: &Store,
    ep: &endpoint::Model,
) -> Result<BTreeMap<String, String>, ApiError> {
    Ok(store.endpoint_headers(ep)?)
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointHeadersOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_headers(
    store: web::Data<Store>,
    AppEndpoint { endpoint: ep, .. }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(EndpointHeadersOut {
        headers: headers_of(&store, &ep)?,
        sensitive: vec![],
    }))
}

pub(crate) async fn save_headers(
    store: &Store,
    cfg: &ApiConfig,
    t: domain::ids::TenantId,
    actor: eps::Actor,
    ep: endpoint::Model,
    headers: BTreeMap<String, String>,
) -> Result<HttpResponse, ApiError> {
    rules::headers(&headers)?;
    let mut new = eps::as_new(store, &ep)?;
    new.headers = headers;
    eps::update(store, &cfg.service, t, actor, ep, new).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointHeadersIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_headers(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
    JsonBody(body): JsonBody<EndpointHeadersIn>,
) -> Result<HttpResponse, ApiError> {
    save_headers(&store, &cfg, t, actor, ep, body.headers).await
}

#[utoipa::path(patch, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/headers", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointHeadersPatchIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn patch_headers(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
    JsonBody(body): JsonBody<EndpointHeadersPatchIn>,
) -> Result<HttpResponse, ApiError> {
    let mut headers = headers_of(&store, &ep)?;
    for (k, v) in body.headers {
        match v {
            Some(v) => headers.insert(k, v),
            None => headers.remove(&k),
        };
    }
    for k in body.delete_headers.unwrap_or_default() {
        headers.remove(&k);
    }
    save_headers(&store, &cfg, t, actor, ep, headers).await
}

/// The window of an endpoint's statistics.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsWindow {
    /// Count deliveries created at or after this time (default: the endpoint's whole history).
    #[param(format = DateTime)]
    pub since: Option<String>,
    /// Count deliveries created before this time (default: now).
    #[param(format = DateTime)]
    pub until: Option<String>,
}

/// How the endpoint's deliveries stand, by state: all of them, or those created in the window.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/stats", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path), StatsWindow),
    responses((status = 200, body = EndpointStats), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn stats(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    w: web::Query<StatsWindow>,
) -> Result<HttpResponse, ApiError> {
    let at = |name: &str, v: &Option<String>| {
        v.as_deref()
            .map(|v| {
                service::rules::timestamp(name, v)
                    .map_err(|e| ApiError::validation(["query", name], e.msg))
            })
            .transpose()
    };
    let (since, until) = (at("since", &w.since)?, at("until", &w.until)?);
    if let (Some(s), Some(u)) = (since, until)
        && s > u
    {
        return Err(ApiError::validation(
            ["query", "since"],
            "since must not be after until",
        ));
    }
    let s = store.endpoint_stats(t, ep.id, since, until).await?;
    Ok(HttpResponse::Ok().json(EndpointStats {
        success: s.success,
        pending: s.pending,
        sending: s.sending,
        fail: s.fail,
        canceled: s.canceled,
    }))
}

pub fn task_out(job: store::entities::job::Model) -> Result<BackgroundTaskOut, ApiError> {
    let data = match (job.state, &job.error, job.result()?) {
        (JobState::Failed, Some(e), _) => serde_json::json!({ "error": e }),
        // A statistics task: the figures it computed.
        (JobState::Finished, _, Some(figures)) => figures,
        // Canceled: what the batches before the cancel did.
        (JobState::Finished | JobState::Canceled, _, _) => {
            serde_json::json!({ "deliveries": job.progress })
        }
        (JobState::Failed | JobState::Running, _, _) => serde_json::json!({}),
    };
    Ok(BackgroundTaskOut {
        id: job.id.to_string(),
        status: job.state.to_string(),
        task: job.kind.to_string(),
        data,
        updated_at: time(job.updated_at),
    })
}

async fn start_job(
    store: &Store,
    t: domain::ids::TenantId,
    ep: endpoint::Model,
    body: RecoverIn,
    kind: EndpointJob,
) -> Result<HttpResponse, ApiError> {
    let since = rules::timestamp("since", &body.since)?;
    let until = body
        .until
        .as_deref()
        .map(|u| rules::timestamp("until", u))
        .transpose()?;
    let job = eps::start_job(store, t, &ep, kind, since, until, None).await?;
    Ok(HttpResponse::Accepted().json(task_out(job)?))
}

/// Sends again every failed message created since `since` (runs as a background job).
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/recover", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = RecoverIn,
    responses((status = 202, body = BackgroundTaskOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn recover(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint,
        ..
    }: AppEndpoint,
    JsonBody(body): JsonBody<RecoverIn>,
) -> Result<HttpResponse, ApiError> {
    start_job(&store, t, endpoint, body, EndpointJob::Recover).await
}

/// Sends the messages since `since` that this endpoint never received (background job).
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay-missing", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = RecoverIn,
    responses((status = 202, body = BackgroundTaskOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn replay_missing(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint,
        ..
    }: AppEndpoint,
    JsonBody(body): JsonBody<RecoverIn>,
) -> Result<HttpResponse, ApiError> {
    start_job(&store, t, endpoint, body, EndpointJob::Replay).await
}

/// Svix's `EventExampleIn`.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventExampleIn {
    /// An event type with an example in its version-1 schema, or `svix.ping`.
    #[schema(min_length = 1, max_length = 256)]
    pub event_type: String,
    /// Which of the schema's `examples` (default 0).
    #[schema(minimum = 0, maximum = 100)]
    pub example_index: Option<usize>,
}

/// Sends an example of an event type to this endpoint only (Svix's send-example): a message,
/// stored and listed like any other, delivered whatever the endpoint's filters.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/send-example", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EventExampleIn,
    responses((status = 200, body = crate::dto::MessageOut),
        (status = 400, description = "the event type has no example", body = crate::error::HttpErrorOut),
        (status = 404, body = crate::error::HttpErrorOut), (status = 409, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError),
        (status = 429, description = "rate limited; see Retry-After", body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn send_example(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        app,
        endpoint,
    }: AppEndpoint,
    JsonBody(body): JsonBody<EventExampleIn>,
) -> Result<HttpResponse, ApiError> {
    rules::ident("eventType", &body.event_type)?;
    let index = body.example_index.unwrap_or(0);
    let Some(payload) = eps::example_payload(&store, t, &body.event_type, index).await? else {
        return Err(ApiError::bad_request(
            "invalid_scheme",
            "the event type's schema (version 1) has no such example: add one to its \"examples\"",
        ));
    };
    let created = eps::send_to_endpoint(
        &store,
        &cfg.service,
        t,
        &app,
        &endpoint,
        &body.event_type,
        payload,
    )
    .await?;
    Ok(HttpResponse::Ok().json(crate::routes::messages::out(created.message, true)?))
}

/// When a pending delivery's next attempt is due (none for any other state).
pub fn next_attempt(d: &store::entities::delivery::Model) -> Option<String> {
    (d.state == DeliveryState::Pending).then(|| time(d.next_attempt_at))
}

pub fn state_code(state: DeliveryState) -> (i32, &'static str) {
    match state {
        DeliveryState::Succeeded => (0, "success"),
        // Paused (endpoint disabled) waits to be sent: Svix's pending.
        DeliveryState::Pending | DeliveryState::Paused => (1, "pending"),
        DeliveryState::Failed => (2, "fail"),
        DeliveryState::Sending => (3, "sending"),
        DeliveryState::Skipped => (4, "canceled"),
    }
}

/// Deliveries of messages to this endpoint, with their state; `status=2` lists dead letters.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/msg", tag = "Message Attempt",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path), EndpointMessageQuery,
        crate::dto::MessageLabelsQuery, crate::dto::EventTypesParam),
    responses((status = 200, body = ListResponse<EndpointMessageOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list_messages(
    req: actix_web::HttpRequest,
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    q: web::Query<EndpointMessageQuery>,
    labels: web::Query<crate::dto::MessageLabelsQuery>,
) -> Result<HttpResponse, ApiError> {
    let state = match q.status {
        None => None,
        Some(0) => Some(DeliveryState::Succeeded),
        Some(1) => Some(DeliveryState::Pending),
        Some(2) => Some(DeliveryState::Failed),
        Some(3) => Some(DeliveryState::Sending),
        Some(4) => Some(DeliveryState::Skipped),
        Some(_) => {
            return Err(ApiError::validation(
                ["query", "status"],
                "status must be 0 to 4",
            ));
        }
    };
    let messages = crate::routes::messages::message_filter(
        &req,
        &labels,
        q.before.as_deref(),
        q.after.as_deref(),
    )?;
    let with_content = q.with_content.unwrap_or(true);
    let expanded = q.expanded_statuses.unwrap_or(true);
    let params = list_params(q.limit, q.iterator.clone())?;
    let page = store
        .list_endpoint_deliveries(t, &ep, state, &messages, &params)
        .await?;
    let mut data = Vec::with_capacity(page.data.len());
    for (d, m) in page.data {
        let (status, status_text) = match state_code(d.state) {
            // Svix's older answer, without expanded statuses: a canceled message reads as 0.
            (4, _) if !expanded => (0, "success"),
            code => code,
        };
        let (channels, tags) = crate::routes::messages::labels(&m)?;
        data.push(EndpointMessageOut {
            payload: raw_payload(&m, with_content),
            channels,
            tags,
            id: m.id.to_string(),
            event_type: m.event_type,
            event_id: m.event_id,
            timestamp: time(m.created_at),
            deliver_at: m.deliver_at.map(time),
            status,
            status_text: status_text.to_owned(),
            next_attempt: next_attempt(&d),
            attempt_count: d.attempt_count,
            last_status_code: d.last_status,
            last_error: d.last_error,
            ordering_key: d.ordering_key.or_else(|| m.ordering_key.clone()),
            sequence: d.seq,
        });
    }
    Ok(HttpResponse::Ok().json(ListResponse {
        data,
        iterator: page.iterator,
        prev_iterator: page.prev_iterator,
        done: page.done,
    }))
}

/// A background task started by recover or replay-missing: poll until `finished`, `failed`
/// or `canceled` (hookd's addition: the tenant stopped it in the dashboard).
#[utoipa::path(get, path = "/api/v1/background-task/{task_id}", tag = "Background Task",
    params(("task_id" = String, Path)),
    responses((status = 200, body = BackgroundTaskOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_task(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let job = store.get_job(t, &path).await?;
    Ok(HttpResponse::Ok().json(task_out(job)?))
}

/// Svix's filters on the background-task list.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskFilter {
    /// `running`, `finished`, `failed` or `canceled`.
    #[param(inline, value_type = Option<String>, pattern = "^(running|finished|failed|canceled)$")]
    status: Option<String>,
    /// `endpoint.recover`, `endpoint.replay`, `application.stats` or `event-type.aggregate`.
    #[param(inline, value_type = Option<String>, pattern = "^(endpoint\\.recover|endpoint\\.replay|application\\.stats|event-type\\.aggregate)$")]
    task: Option<String>,
}

/// The tenant's background tasks, newest first.
#[utoipa::path(get, path = "/api/v1/background-task", tag = "Background Task", params(ListQuery, TaskFilter),
    responses((status = 200, body = ListResponse<BackgroundTaskOut>), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn list_tasks(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    q: web::Query<ListQuery>,
    f: web::Query<TaskFilter>,
) -> Result<HttpResponse, ApiError> {
    let status = match f.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(s.parse::<JobState>().map_err(|_| {
            ApiError::validation(
                ["query", "status"],
                "status must be running, finished, failed or canceled",
            )
        })?),
    };
    let kind = match f.task.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(k) => Some(k.parse::<JobKind>().map_err(|_| {
            ApiError::validation(
                ["query", "task"],
                "task must be endpoint.recover, endpoint.replay, application.stats or \
                 event-type.aggregate",
            )
        })?),
    };
    let page = store.list_jobs(t, kind, status, &q.params()?).await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, task_out)?))
}

/// An email hookd sent or will send to the tenant (hookd extension).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmailOut {
    pub id: String,
    pub to: String,
    pub subject: String,
    /// `pending` (not yet sent: no SMTP configured, or the server is unreachable), `sent`, or
    /// `failed` (the mail server refused it for good).
    pub state: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub sent_at: Option<String>,
}

/// hookd extension: the notifications hookd sent or holds for this tenant, newest first.
#[utoipa::path(get, path = "/api/v1/email", tag = "Notifications", params(ListQuery),
    responses((status = 200, body = ListResponse<EmailOut>)), security(("bearer" = [])))]
pub async fn list_emails(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = store.list_emails(t, &q.params()?).await?;
    Ok(
        HttpResponse::Ok().json(ListResponse::from_page(page, |m| EmailOut {
            id: m.id.to_string(),
            to: m.to_addr,
            subject: m.subject,
            state: m.state.to_string(),
            attempts: m.attempts,
            last_error: m.last_error,
            created_at: time(m.created_at),
            sent_at: m.sent_at.map(time),
        })),
    )
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplayFromMessageIn {
    /// The message (id or eventId) to start from: it and every later failed message of this
    /// endpoint are sent again.
    pub msg_id: String,
}

/// hookd extension: sends again every failed message of this endpoint from the given message
/// on (inclusive), as manual attempts, in a background job.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/replay-from-message", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = ReplayFromMessageIn,
    responses((status = 202, body = BackgroundTaskOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn replay_from_message(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        app,
        endpoint: ep,
    }: AppEndpoint,
    JsonBody(body): JsonBody<ReplayFromMessageIn>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &body.msg_id).await?;
    let since = domain::Timestamp::from_millis(msg.created_at);
    let job = eps::start_job(&store, t, &ep, EndpointJob::Recover, since, None, None).await?;
    Ok(HttpResponse::Accepted().json(task_out(job)?))
}

// --- authentication beyond the signature ----------------------------------------------------

fn oauth_of(body: EndpointOauthConfigIn) -> Result<OAuthClient, ApiError> {
    let auth_method =
        OAuthMethod::parse(&body.auth_method).map_err(|e| ApiError::field("authMethod", e))?;
    let refresh_token = match (body.grant_type.as_str(), body.refresh_token) {
        ("clientCredentials", None) => None,
        ("clientCredentials", Some(_)) => {
            return Err(ApiError::field(
                "refreshToken",
                "a refresh token is used with grantType refreshToken",
            ));
        }
        ("refreshToken", Some(t)) => Some(t),
        ("refreshToken", None) => {
            return Err(ApiError::field(
                "refreshToken",
                "grantType refreshToken needs the refreshToken",
            ));
        }
        _ => {
            return Err(ApiError::field(
                "grantType",
                "grantType must be clientCredentials or refreshToken",
            ));
        }
    };
    if body.jwt_params.is_some() {
        return Err(ApiError::field(
            "jwtParams",
            "not supported by hookd: its client assertion carries the RFC 7523 claims only",
        ));
    }
    Ok(OAuthClient {
        token_url: body.token_url.trim().to_owned(),
        client_id: body.client_id,
        client_secret: body.client_secret,
        auth_method,
        scopes: body.scopes.unwrap_or_default(),
        extra_params: body.extra_params.unwrap_or_default(),
        refresh_token,
    })
}

#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/oauth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointOauthConfigIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_oauth(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
    JsonBody(body): JsonBody<EndpointOauthConfigIn>,
) -> Result<HttpResponse, ApiError> {
    let auth = EndpointAuth::OAuth(oauth_of(body)?);
    eps::set_auth(&store, &cfg.service, t, actor, ep, Some(auth)).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/oauth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointOauthConfigOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_oauth(
    store: web::Data<Store>,
    AppEndpoint { endpoint: ep, .. }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    match store.endpoint_auth(&ep)? {
        Some(EndpointAuth::OAuth(c)) => Ok(HttpResponse::Ok().json(EndpointOauthConfigOut {
            grant_type: c.grant_type().to_owned(),
            auth_method: c.auth_method.as_str().to_owned(),
            client_id: c.client_id,
            extra_params: c.extra_params,
            scopes: c.scopes,
            token_url: c.token_url,
        })),
        _ => Err(ApiError::not_found("oauth configuration")),
    }
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/oauth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete_oauth(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
) -> Result<HttpResponse, ApiError> {
    if matches!(store.endpoint_auth(&ep)?, Some(EndpointAuth::OAuth(_))) {
        eps::set_auth(&store, &cfg.service, t, actor, ep, None).await?;
    }
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/auth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointAuthIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_auth(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
    JsonBody(body): JsonBody<EndpointAuthIn>,
) -> Result<HttpResponse, ApiError> {
    let need = |v: Option<String>, field: &str| {
        v.ok_or_else(|| {
            ApiError::field(field, format!("{field} is required for type {}", body.kind))
        })
    };
    let auth = match body.kind.as_str() {
        "bearer" => EndpointAuth::Bearer {
            token: need(body.token.clone(), "token")?,
        },
        "basic" => EndpointAuth::Basic {
            username: need(body.username.clone(), "username")?,
            password: need(body.password.clone(), "password")?,
        },
        "oauth" => {
            return Err(ApiError::field("type", "set OAuth with PUT …/oauth"));
        }
        other => {
            return Err(ApiError::field(
                "type",
                format!("{other:?} is not an auth type: bearer or basic (OAuth: PUT …/oauth)"),
            ));
        }
    };
    eps::set_auth(&store, &cfg.service, t, actor, ep, Some(auth)).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/auth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointAuthOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_auth(
    store: web::Data<Store>,
    AppEndpoint { endpoint: ep, .. }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    let shown = match store.endpoint_auth(&ep)? {
        Some(a) => a.shown(),
        None => serde_json::json!({"type": "none"}),
    };
    Ok(HttpResponse::Ok().json(EndpointAuthOut { shown }))
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/auth", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete_auth(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    Caller(actor): Caller,
) -> Result<HttpResponse, ApiError> {
    eps::set_auth(&store, &cfg.service, t, actor, ep, None).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(put, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/mtls", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)), request_body = EndpointMtlsConfigIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn set_mtls(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
    JsonBody(body): JsonBody<EndpointMtlsConfigIn>,
) -> Result<HttpResponse, ApiError> {
    let mtls = domain::endpoint_auth::Mtls {
        identity: body.identity,
        server_ca_cert: body.server_ca_cert.filter(|c| !c.trim().is_empty()),
    };
    eps::set_mtls(&store, t, ep, Some(mtls)).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/mtls", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 200, body = EndpointMtlsConfigOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_mtls(
    store: web::Data<Store>,
    AppEndpoint { endpoint: ep, .. }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    let m = store
        .endpoint_mtls(&ep)?
        .ok_or_else(|| ApiError::not_found("mtls configuration"))?;
    // The certificates only: the private key is never shown again.
    let client_cert = m
        .identity
        .split_inclusive("-----END CERTIFICATE-----")
        .filter(|part| part.contains("-----BEGIN CERTIFICATE-----"))
        .map(|part| format!("{}\n", part.trim_start()))
        .collect();
    Ok(HttpResponse::Ok().json(EndpointMtlsConfigOut {
        client_cert,
        server_ca_cert: m.server_ca_cert,
    }))
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}/endpoint/{endpoint_id}/mtls", tag = "Endpoint",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete_mtls(
    store: web::Data<Store>,
    AppEndpoint {
        tenant: t,
        endpoint: ep,
        ..
    }: AppEndpoint,
) -> Result<HttpResponse, ApiError> {
    eps::set_mtls(&store, t, ep, None).await?;
    Ok(HttpResponse::NoContent().finish())
}
