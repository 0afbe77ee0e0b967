//! Sessions and CSRF. The `hookd_session` cookie holds a random token whose hash finds the
//! session row; the row holds the tenant and the CSRF token that every state-changing request
//! must carry (form field `csrf`, or the `X-CSRF-Token` header htmx sends).
//!
//! Before login there is no session, so the login and sign-up forms are protected by a
//! double-submitted token: the `hookd_form` cookie (SameSite=Strict) must equal the form field.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::{FromRequest, HttpMessage, HttpRequest, HttpResponseBuilder, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::Timestamp;
use domain::ids::{ApplicationId, SessionId, TenantId};
use domain::portal::{Capabilities, Capability};
use rand::RngCore;
use service::trace::{Field, note};
use store::Store;
use store::entities::{application, endpoint, message};

use crate::error::PageError;

pub const SESSION_COOKIE: &str = "hookd_session";
/// The portal's cookie: the portal token itself (HttpOnly, path `/portal`), so it expires and
/// is revoked with the token and needs no row of its own.
pub const PORTAL_COOKIE: &str = "hookd_portal";
/// Where the portal's pages live; every link of a portal page starts with it.
pub const PORTAL_ROOT: &str = "/portal";
pub const FORM_COOKIE: &str = "hookd_form";
pub const CSRF_HEADER: &str = "X-CSRF-Token";
/// Sessions end a week after login.
pub const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The logged-in user's session, or a tenant's customer's portal session (one application);
/// extracting it answers "log in first" (the portal: "this link is not valid") when there is
/// none.
#[derive(Clone, Debug)]
pub struct Session {
    pub tenant: TenantId,
    pub csrf: String,
    pub kind: SessionKind,
    /// What every link of the pages this session sees starts with: "" on the dashboard,
    /// [`PORTAL_ROOT`] in the portal.
    pub root: &'static str,
}

#[derive(Clone, Debug)]
pub enum SessionKind {
    /// A tenant's user, logged in with a password.
    Tenant { id: SessionId },
    /// A portal token's holder: one application of the tenant, nothing else, and there only
    /// what the token's capabilities allow.
    Portal {
        app: ApplicationId,
        read_only: bool,
        capabilities: Capabilities,
    },
}

impl Session {
    /// Who acts through this session, for the rules that tell a tenant from its customers.
    pub fn actor(&self) -> service::endpoints::Actor {
        match self.kind {
            SessionKind::Tenant { .. } => service::endpoints::Actor::Tenant,
            SessionKind::Portal { .. } => service::endpoints::Actor::Portal,
        }
    }

    /// Whether the session may do `c`: a tenant's user may do everything, a portal session
    /// what its token was issued for.
    pub fn can(&self, c: Capability) -> bool {
        match self.kind {
            SessionKind::Tenant { .. } => true,
            SessionKind::Portal { capabilities, .. } => capabilities.allows(c),
        }
    }

    /// Refuses (403, with a page saying what the link does not allow) unless [`Self::can`].
    pub fn require(&self, c: Capability) -> Result<(), PageError> {
        if self.can(c) {
            return Ok(());
        }
        let what = match c {
            Capability::ViewBase => "see this",
            Capability::ViewEndpointSecret => "see signing secrets or header values",
            Capability::ManageEndpointSecret => "rotate signing secrets",
            Capability::ManageTransformations => "change transformations",
            Capability::CreateAttempts => "send messages again or send test events",
            Capability::ManageEndpoint => "add, change or delete endpoints",
        };
        Err(PageError::BadInput(
            actix_web::http::StatusCode::FORBIDDEN,
            format!(
                "This portal link does not let you {what}. Ask the service that gave it to you \
                 if you need to."
            ),
        ))
    }

    /// Which of the pages' buttons to show.
    pub fn allowed(&self) -> crate::views::Can {
        crate::views::Can {
            manage: self.can(Capability::ManageEndpoint),
            rotate: self.can(Capability::ManageEndpointSecret),
            see_secret: self.can(Capability::ViewEndpointSecret),
            resend: self.can(Capability::CreateAttempts),
        }
    }

    /// Refuses the request unless it carries this session's CSRF token.
    pub fn check_csrf(&self, req: &HttpRequest, form_token: &str) -> Result<(), PageError> {
        let given = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .unwrap_or(form_token);
        if tokens_equal(given, &self.csrf) {
            Ok(())
        } else {
            Err(PageError::Csrf)
        }
    }

    /// This tenant's application (by id or uid), noted on the request's span.
    pub async fn app(
        &self,
        store: &Store,
        id_or_uid: &str,
    ) -> Result<application::Model, PageError> {
        let app = store.get_application(self.tenant, id_or_uid).await?;
        // The one place a portal session's reach is decided: every page of an application
        // loads it here, and another application is not found.
        if let SessionKind::Portal { app: own, .. } = self.kind
            && app.id != own
        {
            return Err(PageError::NotFound);
        }
        note(Field::App, app.id);
        Ok(app)
    }

    /// An endpoint (by id or uid) of this tenant's application, noted on the request's span.
    pub async fn endpoint(
        &self,
        store: &Store,
        app: ApplicationId,
        id_or_uid: &str,
    ) -> Result<endpoint::Model, PageError> {
        let ep = store.get_endpoint(self.tenant, app, id_or_uid).await?;
        note(Field::Endpoint, ep.id);
        Ok(ep)
    }

    /// A message (by id or eventId) of this tenant's application, noted on the request's span.
    pub async fn message(
        &self,
        store: &Store,
        app: ApplicationId,
        id_or_event_id: &str,
    ) -> Result<message::Model, PageError> {
        let msg = store.get_message(self.tenant, app, id_or_event_id).await?;
        note(Field::Msg, msg.id);
        Ok(msg)
    }
}

impl FromRequest for Session {
    type Error = PageError;
    type Future = Pin<Box<dyn Future<Output = Result<Session, PageError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            current(&req).await?.ok_or(if in_portal(&req) {
                PageError::PortalLink
            } else {
                PageError::LoginRequired
            })
        })
    }
}

/// Whether the request is for the portal's pages.
pub fn in_portal(req: &HttpRequest) -> bool {
    req.path()
        .strip_prefix(PORTAL_ROOT)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The session behind the request's cookie, if it is valid: under [`PORTAL_ROOT`] only the
/// portal's cookie counts, elsewhere only the dashboard's.
pub async fn current(req: &HttpRequest) -> Result<Option<Session>, PageError> {
    if in_portal(req) {
        return portal_session(req).await;
    }
    let Some(token) = cookie(req, SESSION_COOKIE) else {
        return Ok(None);
    };
    let store = store_of(req)?;
    let Some(row) = store
        .system()
        .find_session(&token, Timestamp::now())
        .await?
    else {
        return Ok(None);
    };
    note(Field::Tenant, row.tenant_id);
    Ok(Some(Session {
        tenant: row.tenant_id,
        csrf: row.csrf_token,
        kind: SessionKind::Tenant { id: row.id },
        root: "",
    }))
}

/// The live portal token of the portal cookie and what it allows, with the tenant's portal
/// settings put on the request: its response may be framed only by the tenant's sites, and
/// its pages wear the tenant's brand (see `portal`).
pub async fn portal_cookie_grant(
    req: &HttpRequest,
) -> Result<Option<(String, store::PortalGrant)>, PageError> {
    let Some(token) = cookie(req, PORTAL_COOKIE) else {
        return Ok(None);
    };
    let store = store_of(req)?;
    let Some(grant) = store.system().authenticate_portal_token(&token).await? else {
        return Ok(None);
    };
    note(Field::Tenant, grant.tenant);
    put_portal_settings(req, grant.tenant).await?;
    Ok(Some((token, grant)))
}

/// Puts `tenant`'s portal settings on the request (see [`portal_cookie_grant`]).
pub async fn put_portal_settings(req: &HttpRequest, tenant: TenantId) -> Result<(), PageError> {
    let settings = store_of(req)?.get_tenant(tenant).await?.portal_settings();
    crate::portal::set_brand(&settings);
    req.extensions_mut().insert(settings);
    Ok(())
}

/// The portal session behind the portal cookie. A read-only token's session can only read.
async fn portal_session(req: &HttpRequest) -> Result<Option<Session>, PageError> {
    let Some((token, grant)) = portal_cookie_grant(req).await? else {
        return Ok(None);
    };
    // A link that may change nothing posts nothing, except signing out (which only ends
    // itself).
    let signing_out = req.path() == format!("{PORTAL_ROOT}/logout");
    if !grant.capabilities.changes_anything()
        && req.method() != actix_web::http::Method::GET
        && !signing_out
    {
        return Err(PageError::BadInput(
            actix_web::http::StatusCode::FORBIDDEN,
            "This portal link is read-only: it shows your endpoints and messages but cannot \
             change them."
                .into(),
        ));
    }
    Ok(Some(Session {
        tenant: grant.tenant,
        csrf: portal_csrf(&token),
        kind: SessionKind::Portal {
            app: grant.app,
            read_only: grant.read_only,
            capabilities: grant.capabilities,
        },
        root: PORTAL_ROOT,
    }))
}

/// A portal session's CSRF token: derived from its portal token (which only the browser's
/// HttpOnly cookie holds), so it needs no storage and changes with the token.
pub fn portal_csrf(token: &str) -> String {
    use sha2::{Digest, Sha256};
    URL_SAFE_NO_PAD.encode(Sha256::digest(format!("hookd-portal-csrf:{token}")))
}

pub fn store_of(req: &HttpRequest) -> Result<&Store, PageError> {
    req.app_data::<web::Data<Store>>()
        .map(|d| d.get_ref())
        .ok_or_else(|| PageError::Internal("the dashboard needs web::Data<Store>".into()))
}

/// A value of the request's `Cookie` header. Our cookies hold URL-safe base64 only, so no
/// decoding is needed.
pub fn cookie(req: &HttpRequest, name: &str) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim_matches('"').to_owned())
        .filter(|v| !v.is_empty())
}

/// Adds a `Set-Cookie`. `max_age` zero deletes the cookie. Secure when the request came over
/// https (directly, or per a trusted proxy's `X-Forwarded-Proto`/`Forwarded`).
pub fn set_cookie(
    resp: &mut HttpResponseBuilder,
    req: &HttpRequest,
    name: &str,
    value: &str,
    max_age: Duration,
    same_site: &str,
) {
    let secure = if crate::auth::scheme(req) == "https" {
        "; Secure"
    } else {
        ""
    };
    resp.append_header((
        header::SET_COOKIE,
        format!(
            "{name}={value}; Path=/; Max-Age={}; HttpOnly; SameSite={same_site}{secure}",
            max_age.as_secs()
        ),
    ));
}

/// 256 random bits, URL-safe base64.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Compares in time independent of where the strings differ.
pub fn tokens_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && !a.is_empty()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a form post came from a page of this server, as browsers tell: `Sec-Fetch-Site`
/// when sent (every current browser sends it) must be `same-origin`; without it, `Origin`
/// must be this server's own. A request with neither proves nothing and is refused: a
/// browser old enough to send neither is rare, and a script is not a browser being misled.
pub fn from_this_origin(req: &HttpRequest) -> bool {
    let text = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(site) = text("sec-fetch-site") {
        return site.eq_ignore_ascii_case("same-origin");
    }
    text("origin").is_some_and(|o| o.eq_ignore_ascii_case(&crate::auth::base_url(req)))
}

/// The pre-session form token: the browser's `hookd_form` cookie, or a new one.
pub fn form_token(req: &HttpRequest) -> (String, bool) {
    match cookie(req, FORM_COOKIE) {
        Some(t) => (t, false),
        None => (random_token(), true),
    }
}

/// Refuses a login or sign-up post whose form token is not the cookie's.
pub fn check_form_token(req: &HttpRequest, given: &str) -> Result<(), PageError> {
    match cookie(req, FORM_COOKIE) {
        Some(t) if tokens_equal(&t, given) => Ok(()),
        _ => Err(PageError::Csrf),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let req = TestRequest::default()
            .insert_header((header::COOKIE, "a=1; hookd_session_x=2; hookd_session=abc"))
            .to_http_request();
        assert_eq!(cookie(&req, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&req, FORM_COOKIE), None);
    }

    #[test]
    fn tokens_must_match_exactly_and_not_be_empty() {
        assert!(tokens_equal("abc", "abc"));
        assert!(!tokens_equal("abc", "abd"));
        assert!(!tokens_equal("abc", "abcd"));
        assert!(!tokens_equal("", ""));
    }
}

/// A form that carries only its CSRF token (a button: revoke, archive, cancel, …).
#[derive(serde::Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}
