//! Svix's authentication operations for the app portal (issue 19): issue a portal token for one
//! application, expire an application's tokens, log a token out. Issuing and expiring need the
//! tenant's API key; a portal token reaches only its own application (see
//! `extract::portal_allows`).

use std::time::Duration;

use actix_web::{HttpRequest, HttpResponse, web};
use domain::portal::Capabilities;
use serde::{Deserialize, Serialize};
use store::{NewPortalToken, PORTAL_MAX_EXPIRY, PORTAL_MIN_EXPIRY, Store, portal_url};
use utoipa::ToSchema;

use crate::dto::ApplicationIn;
use crate::extract::{JsonBody, Tenant, bearer_token, portal_grant};
use crate::{ApiConfig, ApiError};

/// Most feature flags and longest session id or flag a token carries.
const MAX_FLAGS: usize = 64;
const MAX_LABEL: usize = 256;
/// Longest delay `expire-all` accepts before the tokens expire.
const MAX_EXPIRE_DELAY: Duration = Duration::from_secs(7 * 86_400);

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct AppPortalAccessIn {
    /// Creates the application (uid: the one in the path) when it does not exist yet.
    pub application: Option<ApplicationIn>,
    /// Seconds the token stays valid: 3,600 to 604,800 (the default).
    pub expiry: Option<i64>,
    pub feature_flags: Option<Vec<String>>,
    /// Only reads: every change answers 403.
    pub read_only: Option<bool>,
    /// A label `expire-all` can select tokens by.
    pub session_id: Option<String>,
    /// What the token may do with its application, as in Svix (one or more of `ViewBase`,
    /// `ViewEndpointSecret`, `ManageEndpointSecret`, `ManageTransformations`,
    /// `CreateAttempts`, `ManageEndpoint`), in the portal and with the token as an API bearer
    /// credential; a call it does not allow answers 403 `missing_capability`, and the
    /// portal shows no button for it. Every token reads (`ViewBase`); an endpoint's signing
    /// secret and custom header values need `ViewEndpointSecret`, rotating the secret
    /// `ManageEndpointSecret`, resend/recover/replay/test events `CreateAttempts`, and
    /// creating, changing or deleting endpoints, their headers and authentication
    /// `ManageEndpoint` (which includes seeing and rotating secrets). Not given: every
    /// capability, or with `readOnly` only `ViewBase`. With `readOnly`, nothing beyond
    /// reading is granted whatever is listed.
    pub capabilities: Option<Vec<String>>,
}

#[derive(Serialize, ToSchema)]
pub struct AppPortalAccessOut {
    /// The portal, the token in its fragment (never sent to a server or written to a log).
    pub url: String,
    /// A bearer credential for the API limited to this application.
    pub token: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationTokenExpireIn {
    /// Seconds until the tokens expire (default 0: at once), at most 604,800.
    pub expiry: Option<i64>,
    /// Only tokens issued with one of these session ids.
    pub session_ids: Option<Vec<String>>,
}

fn label(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > MAX_LABEL {
        return Err(ApiError::field(
            field,
            format!("must be 1 to {MAX_LABEL} characters"),
        ));
    }
    Ok(())
}

fn seconds(field: &str, value: i64, min: Duration, max: Duration) -> Result<Duration, ApiError> {
    u64::try_from(value)
        .ok()
        .map(Duration::from_secs)
        .filter(|d| (min..=max).contains(d))
        .ok_or_else(|| {
            ApiError::field(
                field,
                format!(
                    "must be from {} to {} seconds",
                    min.as_secs(),
                    max.as_secs()
                ),
            )
        })
}

#[utoipa::path(post, path = "/api/v1/auth/app-portal-access/{app_id}", tag = "Authentication",
    params(("app_id" = String, Path, description = "id or uid")),
    request_body = AppPortalAccessIn,
    responses((status = 200, body = AppPortalAccessOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn app_portal_access(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<AppPortalAccessIn>,
) -> Result<HttpResponse, ApiError> {
    let out = portal_access(&store, &cfg, t, &path, body).await?;
    Ok(HttpResponse::Ok().json(out))
}

/// Svix's older name for app-portal-access (SDK 1.x `authentication.dashboardAccess`): a
/// portal token with every default, for an application that exists.
#[utoipa::path(post, path = "/api/v1/auth/dashboard-access/{app_id}", tag = "Authentication",
    params(("app_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = AppPortalAccessOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn dashboard_access(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let out = portal_access(&store, &cfg, t, &path, AppPortalAccessIn::default()).await?;
    Ok(HttpResponse::Ok().json(out))
}

/// Issues a portal token for the application `app` names: the one rule behind both
/// operations.
async fn portal_access(
    store: &Store,
    cfg: &ApiConfig,
    t: domain::ids::TenantId,
    app: &str,
    body: AppPortalAccessIn,
) -> Result<AppPortalAccessOut, ApiError> {
    let expiry = match body.expiry {
        Some(s) => seconds("expiry", s, PORTAL_MIN_EXPIRY, PORTAL_MAX_EXPIRY)?,
        None => PORTAL_MAX_EXPIRY,
    };
    let flags = body.feature_flags.unwrap_or_default();
    if flags.len() > MAX_FLAGS {
        return Err(ApiError::field(
            "featureFlags",
            format!("at most {MAX_FLAGS} flags"),
        ));
    }
    for f in &flags {
        label("featureFlags", f)?;
    }
    if let Some(s) = &body.session_id {
        label("sessionId", s)?;
    }
    let capabilities = body
        .capabilities
        .as_deref()
        .map(Capabilities::parse)
        .transpose()
        .map_err(|e| ApiError::field("capabilities", e))?;
    let app =
        crate::routes::messages::find_or_create_app(store, cfg, t, app, body.application).await?;
    let (token, _) = store
        .create_portal_token(
            t,
            app.id,
            NewPortalToken {
                expiry,
                read_only: body.read_only.unwrap_or(false),
                session_id: body.session_id,
                feature_flags: flags,
                capabilities,
            },
        )
        .await?;
    let url = portal_url(&cfg.public_url, &token);
    Ok(AppPortalAccessOut { url, token })
}

#[utoipa::path(post, path = "/api/v1/auth/app/{app_id}/expire-all", tag = "Authentication",
    params(("app_id" = String, Path, description = "id or uid")),
    request_body = ApplicationTokenExpireIn,
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn expire_all(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<ApplicationTokenExpireIn>,
) -> Result<HttpResponse, ApiError> {
    let within = match body.expiry {
        Some(s) => seconds("expiry", s, Duration::ZERO, MAX_EXPIRE_DELAY)?,
        None => Duration::ZERO,
    };
    let sessions = body.session_ids.unwrap_or_default();
    if sessions.len() > MAX_FLAGS {
        return Err(ApiError::field(
            "sessionIds",
            format!("at most {MAX_FLAGS} session ids"),
        ));
    }
    let app = store.get_application(t, &path).await?;
    store
        .expire_portal_tokens(t, app.id, within, &sessions)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(post, path = "/api/v1/auth/logout", tag = "Authentication",
    responses((status = 204), (status = 400, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn logout(
    req: HttpRequest,
    store: web::Data<Store>,
    Tenant(_): Tenant,
) -> Result<HttpResponse, ApiError> {
    if portal_grant(&req).is_none() {
        return Err(ApiError::bad_request(
            "not_a_portal_token",
            "logout ends a portal token; API keys are revoked in the dashboard",
        ));
    }
    let token = bearer_token(&req)?;
    store.system().revoke_portal_token(token).await?;
    Ok(HttpResponse::NoContent().finish())
}
