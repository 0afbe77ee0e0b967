//! Request extractors: the authenticated tenant and JSON bodies whose errors name the field.

use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::{StatusCode, header};
use actix_web::{FromRequest, HttpMessage, HttpRequest, web};
use domain::ids::TenantId;
use domain::portal::Capability;
use serde::de::DeserializeOwned;
use service::trace::{Field, note};
use store::entities::{application, endpoint};

use crate::{ApiConfig, ApiError};

/// The tenant that owns the request's API key (`Authorization: Bearer hk_…`).
#[derive(Clone, Copy, Debug)]
pub struct Tenant(pub TenantId);

impl FromRequest for Tenant {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { authenticate(&req).await.map(Tenant) })
    }
}

/// The application the path's `{app_id}` names (its id or uid), of the authenticated tenant:
/// read once here instead of at the top of every handler. Another tenant's application, or
/// none, answers 404.
pub struct App {
    pub tenant: TenantId,
    pub app: application::Model,
}

/// The endpoint the path's `{app_id}` and `{endpoint_id}` name, of the authenticated tenant.
pub struct AppEndpoint {
    pub tenant: TenantId,
    pub app: application::Model,
    pub endpoint: endpoint::Model,
}

fn store_of(req: &HttpRequest) -> Result<&store::Store, ApiError> {
    req.app_data::<web::Data<store::Store>>()
        .map(|d| d.get_ref())
        .ok_or_else(ApiError::internal)
}

fn path_part<'r>(req: &'r HttpRequest, name: &str) -> Result<&'r str, ApiError> {
    req.match_info()
        .get(name)
        .ok_or_else(|| ApiError::not_found(&format!("resource ({name} missing)")))
}

async fn app_of(req: &HttpRequest) -> Result<App, ApiError> {
    let tenant = authenticate(req).await?;
    let store = store_of(req)?;
    // An Ingest source's endpoints are its application's.
    let app = match req.match_info().get("source_id") {
        Some(source) => service::ingest::application_of(store, tenant, source).await?,
        None => {
            store
                .get_application(tenant, path_part(req, "app_id")?)
                .await?
        }
    };
    note(Field::App, app.id);
    Ok(App { tenant, app })
}

impl FromRequest for App {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { app_of(&req).await })
    }
}

impl FromRequest for AppEndpoint {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let App { tenant, app } = app_of(&req).await?;
            let endpoint = store_of(&req)?
                .get_endpoint(tenant, app.id, path_part(&req, "endpoint_id")?)
                .await?;
            note(Field::Endpoint, endpoint.id);
            Ok(AppEndpoint {
                tenant,
                app,
                endpoint,
            })
        })
    }
}

/// Resolves the tenant behind the bearer token and, for a portal token, checks that the
/// route is within its reach (see [`portal_allows`]): what every handler's extractor calls.
pub(crate) async fn authenticate(req: &HttpRequest) -> Result<TenantId, ApiError> {
    let tenant = identify(req).await?;
    let unchecked = req.extensions().get::<PortalChecked>().is_none();
    if let Some(grant) = portal_grant(req).filter(|_| unchecked) {
        portal_allows(req, &grant).await?;
        req.extensions_mut().insert(PortalChecked);
    }
    let grant = req.extensions().get::<store::IntegrationGrant>().copied();
    if let Some(grant) = grant.filter(|_| unchecked) {
        integration_allows(req, &grant).await?;
        req.extensions_mut().insert(PortalChecked);
    }
    Ok(tenant)
}

/// Whether a token is scoped to one application (a portal token or an integration key), so
/// its reach must be decided before anything else of the request is read.
fn scoped(token: &str) -> bool {
    token.starts_with(store::PORTAL_TOKEN_PREFIX)
        || token.starts_with(store::INTEGRATION_KEY_PREFIX)
}

/// The one place an integration key's reach is decided: its application's messages (list,
/// create, get) and attempts (list, get), and nothing else — not another application, not
/// the application itself, its endpoints or integrations, not resending. Anything else answers
/// 403 `forbidden`.
async fn integration_allows(
    req: &HttpRequest,
    grant: &store::IntegrationGrant,
) -> Result<(), ApiError> {
    let pattern = req.match_pattern().unwrap_or_default();
    let reads = matches!(
        *req.method(),
        actix_web::http::Method::GET | actix_web::http::Method::HEAD
    );
    let reachable = match pattern.strip_prefix("/api/v1/app/{app_id}") {
        Some("/msg") => true,
        Some(rest) => {
            reads
                && (rest.starts_with("/msg/") || rest.starts_with("/attempt/"))
                && !rest.ends_with("/content")
        }
        None => false,
    };
    let own_app = reachable
        && match req.match_info().get("app_id") {
            Some(path) => matches!(
                store_of(req)?.get_application(grant.tenant, path).await,
                Ok(app) if app.id == grant.app
            ),
            None => false,
        };
    if !own_app {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "an integration key reaches only its application's messages and attempts",
        ));
    }
    Ok(())
}

/// The token of `Authorization: Bearer <token>`.
pub(crate) fn bearer_token(req: &HttpRequest) -> Result<&str, ApiError> {
    let value = req.headers().get(header::AUTHORIZATION).ok_or_else(|| {
        ApiError::unauthorized("missing Authorization header: expected Bearer <api key>")
    })?;
    let value = value
        .to_str()
        .map_err(|_| ApiError::unauthorized("Authorization header is not valid text"))?;
    value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::unauthorized("expected Authorization: Bearer <api key>"))
}

/// Marks a request whose scoped token (portal or integration) was checked against its route.
#[derive(Clone, Copy)]
struct PortalChecked;

/// Resolves (once per request) the tenant behind the bearer token, without deciding whether
/// the route is within a portal token's reach: for middleware that runs before routing (the
/// idempotency layer); handlers go through [`authenticate`].
pub(crate) async fn identify(req: &HttpRequest) -> Result<TenantId, ApiError> {
    if let Some(t) = req.extensions().get::<TenantId>() {
        return Ok(*t);
    }
    let token = bearer_token(req)?;
    let tenant = if token.starts_with(store::INTEGRATION_KEY_PREFIX) {
        let grant = store_of(req)?
            .system()
            .authenticate_integration_key(token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("invalid, rotated or deleted integration key"))?;
        req.extensions_mut().insert(grant);
        grant.tenant
    } else if token.starts_with(store::PORTAL_TOKEN_PREFIX) {
        let grant = store_of(req)?
            .system()
            .authenticate_portal_token(token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("invalid, expired or revoked portal token"))?;
        req.extensions_mut().insert(grant);
        grant.tenant
    } else {
        store_of(req)?
            .system()
            .authenticate_api_key(token)
            .await?
            .ok_or_else(|| ApiError::unauthorized("invalid or revoked API key"))?
    };
    req.extensions_mut().insert(tenant);
    note(Field::Tenant, tenant);
    Ok(tenant)
}

/// The one place a portal token's reach is decided (issue 19): routes of its own application,
/// reading the tenant's event-type catalogue, and logging out. Anything else — another
/// application, the tenant's own resources, issuing or expiring portal tokens — answers 404 as
/// if it did not exist. Within its application a token neither changes nor deletes the
/// application itself nor sends messages (the tenant does), a read-only token only reads, and
/// a token issued with `capabilities` does only what they allow (see [`capability_for`]).
async fn portal_allows(req: &HttpRequest, grant: &store::PortalGrant) -> Result<(), ApiError> {
    let pattern = req.match_pattern().unwrap_or_default();
    let reads = matches!(
        *req.method(),
        actix_web::http::Method::GET | actix_web::http::Method::HEAD
    );
    if pattern == "/api/v1/auth/logout" {
        return Ok(());
    }
    let own_app = match req.match_info().get("app_id") {
        Some(path) if pattern.starts_with("/api/v1/app/") => matches!(
            store_of(req)?.get_application(grant.tenant, path).await,
            Ok(app) if app.id == grant.app
        ),
        _ => false,
    };
    let catalogue = reads && pattern.starts_with("/api/v1/event-type");
    if !own_app && !catalogue {
        return Err(ApiError::not_found("resource"));
    }
    let forbidden =
        |detail: &str| ApiError::new(actix_web::http::StatusCode::FORBIDDEN, "forbidden", detail);
    if !reads && grant.read_only {
        return Err(forbidden("this portal token is read-only"));
    }
    if !reads && pattern == "/api/v1/app/{app_id}" {
        return Err(forbidden(
            "a portal token cannot change or delete its application",
        ));
    }
    if !reads && pattern == "/api/v1/app/{app_id}/msg" {
        return Err(forbidden(
            "messages are sent by the tenant's API key, not a portal token",
        ));
    }
    let needed = capability_for(reads, &pattern);
    if !grant.capabilities.allows(needed) {
        return Err(ApiError::new(
            actix_web::http::StatusCode::FORBIDDEN,
            "missing_capability",
            format!(
                "this portal token was issued without the {} capability",
                needed.name()
            ),
        ));
    }
    Ok(())
}

/// Who makes the request: the tenant (an API key) or a customer of the tenant's (a portal
/// token), for the rules that tell them apart (see `service::endpoints::Actor`).
pub struct Caller(pub service::endpoints::Actor);

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            authenticate(&req).await?;
            Ok(Caller(match portal_grant(&req) {
                Some(_) => service::endpoints::Actor::Portal,
                None => service::endpoints::Actor::Tenant,
            }))
        })
    }
}

/// The capability (Svix's) a portal token needs for a route of its application: reading
/// needs `ViewBase`, except an endpoint's secret and custom header values; sending again
/// needs `CreateAttempts`; rotating a secret `ManageEndpointSecret`; every other change
/// `ManageEndpoint`.
fn capability_for(reads: bool, pattern: &str) -> Capability {
    const ENDPOINT: &str = "/api/v1/app/{app_id}/endpoint/{endpoint_id}";
    let Some(rest) = pattern.strip_prefix(ENDPOINT).or_else(|| {
        pattern.strip_prefix("/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}")
    }) else {
        return if reads {
            Capability::ViewBase
        } else {
            Capability::ManageEndpoint
        };
    };
    match (reads, rest) {
        (true, "/secret" | "/headers") => Capability::ViewEndpointSecret,
        (true, _) => Capability::ViewBase,
        (false, "/secret/rotate") => Capability::ManageEndpointSecret,
        (
            false,
            "/recover"
            | "/replay-missing"
            | "/send-example"
            | "/replay-from-message"
            | "/resend"
            | "/skip",
        ) => Capability::CreateAttempts,
        (false, _) => Capability::ManageEndpoint,
    }
}

/// The portal token the request was authenticated with, if it was one.
pub(crate) fn portal_grant(req: &HttpRequest) -> Option<store::PortalGrant> {
    req.extensions().get::<store::PortalGrant>().copied()
}

/// A JSON body, parsed into `T`. Syntax errors answer 400 `invalid_json`; a missing field or a
/// wrong type answers 422 naming the field; a body over the size limit answers 413.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for JsonBody<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let bytes = web::Bytes::from_request(&req, payload);
        Box::pin(async move {
            // A scoped token's reach is decided before its body is read: a handler's
            // extractors run side by side, and a route out of its reach must answer 404 or
            // 403 whatever the body (see `portal_allows`, `integration_allows`). API keys are
            // unaffected.
            if bearer_token(&req).is_ok_and(scoped) {
                authenticate(&req).await?;
            }
            check_content_type(&req)?;
            let body = bytes.await.map_err(|e| body_error(&req, e))?;
            parse_json(&body).map(JsonBody)
        })
    }
}

fn check_content_type(req: &HttpRequest) -> Result<(), ApiError> {
    match req.headers().get(header::CONTENT_TYPE).map(|v| v.to_str()) {
        None => Ok(()),
        Some(Ok(ct))
            if ct
                .trim()
                .to_ascii_lowercase()
                .starts_with("application/json") =>
        {
            Ok(())
        }
        Some(_) => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "the body must be JSON (Content-Type: application/json)",
        )),
    }
}

pub(crate) fn body_error(req: &HttpRequest, e: actix_web::Error) -> ApiError {
    let limit = req
        .app_data::<web::Data<ApiConfig>>()
        .map(|c| c.max_body_bytes())
        .unwrap_or_default();
    match e.as_error::<actix_web::error::PayloadError>() {
        Some(actix_web::error::PayloadError::Overflow) => payload_too_large(limit),
        _ => ApiError::bad_request("bad_body", format!("could not read the request body: {e}")),
    }
}

pub(crate) fn payload_too_large(limit: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the request body is larger than the limit of {limit} bytes"),
    )
}

pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    // serde would fill a struct from a JSON array by position; bodies are objects.
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(
        first,
        Some(b'[')
            | Some(b'"')
            | Some(b'0'..=b'9')
            | Some(b'-')
            | Some(b't')
            | Some(b'f')
            | Some(b'n')
    ) {
        if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
            return Err(ApiError::bad_request(
                "invalid_json",
                "the body is not valid JSON",
            ));
        }
        return Err(ApiError::validation(
            ["body"],
            "the body must be a JSON object",
        ));
    }
    match serde_json::from_slice::<T>(body) {
        Ok(v) => Ok(v),
        Err(e) if e.is_syntax() || e.is_eof() => Err(ApiError::bad_request(
            "invalid_json",
            format!("the body is not valid JSON: {e}"),
        )),
        Err(e) => {
            // Parse again, tracking the path, only to name the field in the error.
            let de = &mut serde_json::Deserializer::from_slice(body);
            let path = match serde_path_to_error::deserialize::<_, T>(de) {
                Err(pe) => pe.path().to_string(),
                Ok(_) => String::new(),
            };
            let mut loc = vec!["body".to_owned()];
            if !path.is_empty() && path != "." {
                loc.extend(path.split('.').map(str::to_owned));
            } else if let Some(field) = missing_field(&e) {
                loc.push(field);
            }
            Err(ApiError::validation(loc, strip_position(&e.to_string())))
        }
    }
}

/// serde reports a missing field only in its message: "missing field `url` at line 1 …".
fn missing_field(e: &serde_json::Error) -> Option<String> {
    let msg = e.to_string();
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest.split('`').next()?.to_owned())
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}
