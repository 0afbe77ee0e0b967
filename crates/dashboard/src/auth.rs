//! Sign-up, login and logout. Passwords are hashed with argon2 (default parameters) on the
//! blocking pool, through the process-wide limits of `limiter` (a bounded number at once,
//! per-client buckets, failed logins slowed down per email).

use std::sync::LazyLock;
use std::time::Instant;

use actix_web::http::{StatusCode, header};
use actix_web::{HttpRequest, HttpResponse, web};
use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, SaltString};
use domain::Timestamp;
use domain::ids::{TenantId, UserId};
use serde::Deserialize;
use store::{NewTenant, Store, StoreError};

use crate::error::PageError;
use crate::limiter::{AuthLimits, Busy};
use crate::password;
use crate::problems::Problems;
use crate::session::{self, FORM_COOKIE, SESSION_COOKIE, SESSION_TTL, Session};
use crate::views::{self, LoginPage, MessagePage, SignupConfirmPage, SignupDone, SignupPage};

const MIN_PASSWORD: usize = 10;
const MAX_PASSWORD: usize = 1024;
/// How long an unused login form stays valid.
const FORM_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

#[derive(Deserialize)]
pub struct SignupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

#[derive(Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

pub async fn signup_page(req: HttpRequest) -> Result<HttpResponse, PageError> {
    if session::current(&req).await?.is_some() {
        return Ok(see_other("/"));
    }
    let (token, _) = session::form_token(&req);
    let page = SignupPage {
        csrf: None,
        root: "",
        form_token: token.clone(),
        name: String::new(),
        email: String::new(),
        errors: Problems::new(),
    };
    with_form_cookie(&req, token, StatusCode::OK, &page)
}

pub async fn signup(
    req: HttpRequest,
    form: web::Form<SignupForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    session::check_form_token(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let limits = limits_of(&req)?;
    limits
        .signup_attempt(limits.client_ip(&req))
        .map_err(|b| too_busy(b, "Too many sign-ups from your network."))?;
    let by_email = req
        .app_data::<web::Data<SignupConfig>>()
        .filter(|m| m.confirm_by_email);
    let name = form.name.trim().to_owned();
    let email = form.email.trim().to_lowercase();
    let mut errors = Problems::new();
    if name.is_empty() || name.chars().count() > 100 {
        errors.add(
            "name",
            "Enter your organisation's name (at most 100 characters).",
        );
    }
    if !plausible_email(&email) {
        errors.add(
            "email",
            "Enter a valid email address, like ops@example.com.",
        );
    }
    if form.password.chars().count() < MIN_PASSWORD || form.password.len() > MAX_PASSWORD {
        errors.add(
            "password",
            format!("Choose a password of at least {MIN_PASSWORD} characters."),
        );
    }
    if errors.is_empty()
        && by_email.is_none()
        && store.system().find_user_for_login(&email).await?.is_some()
    {
        // Without SMTP there is no way to answer uniformly: the account is created right here.
        errors.add(
            "email",
            "An account with this email already exists. Log in instead.",
        );
    }
    if !errors.is_empty() {
        let page = SignupPage {
            csrf: None,
            root: "",
            form_token: form.csrf,
            name,
            email,
            errors,
        };
        return Ok(views::render(StatusCode::UNPROCESSABLE_ENTITY, &page)?);
    }
    let hash = hash_password(limits, form.password).await?;
    if let Some(mode) = by_email {
        // Past its hourly share of sign-up mail, an address gets none, and the page is the
        // same (it must not tell anything about the address either).
        if limits.mail_to(&email) {
            confirm_by_email(store, mode, &name, &email, &hash).await?;
        }
        return sent_page(&email);
    }
    let (tenant_name, tenant_id, user_id) = create_account(store, &name, &email, &hash).await?;
    welcome(&req, store, tenant_name, tenant_id, user_id).await
}

/// How sign-up proves the address (set when SMTP is configured, see `SignupConfig`).
#[derive(Clone, Debug, Default)]
pub struct SignupConfig {
    /// Create the account only from a link mailed to the address; the form answers the same
    /// whether or not the address has an account.
    pub confirm_by_email: bool,
    /// Where the link points.
    pub public_url: String,
}

/// How long a sign-up link works.
const SIGNUP_LINK_TTL: std::time::Duration = std::time::Duration::from_secs(3600);

/// Mails the link that finishes the sign-up, or, when the address already has an account, a
/// note saying so. The caller answers the same page either way (the password was hashed
/// either way, so the time taken is the same too).
async fn confirm_by_email(
    store: &Store,
    mode: &SignupConfig,
    name: &str,
    email: &str,
    hash: &str,
) -> Result<(), PageError> {
    let base = mode.public_url.trim_end_matches('/');
    if store.system().find_user_for_login(email).await?.is_some() {
        let body = format!(
            "Someone, perhaps you, tried to create a hookd account with this address, which \
             already has one.\n\nLog in at {base}/login\n\nIf it was not you, you can ignore \
             this email."
        );
        store
            .system()
            .enqueue_email_to(email, "Your hookd account already exists", &body)
            .await?;
    } else {
        let expires = Timestamp::now().plus(SIGNUP_LINK_TTL);
        let token = store
            .system()
            .create_pending_signup(name, email, hash, expires)
            .await?;
        let body = format!(
            "To finish creating the hookd account for {name}, open this link within an hour:\n\n\
             {base}/signup/confirm?token={token}\n\nIf you did not sign up, ignore this email."
        );
        store
            .system()
            .enqueue_email_to(email, "Confirm your hookd account", &body)
            .await?;
    }
    Ok(())
}

/// What every sign-up answers when the address is confirmed by email.
fn sent_page(email: &str) -> Result<HttpResponse, PageError> {
    let page = MessagePage {
        csrf: None,
        root: "",
        title: "Check your email",
        text: format!(
            "We sent a message to {email}. Open the link in it within an hour to finish \
             creating your account."
        ),
    };
    finish(HttpResponse::Ok(), &page)
}

#[derive(Deserialize)]
pub struct ConfirmQuery {
    #[serde(default)]
    token: String,
}

/// GET `/signup/confirm?token=…`: a button, so that mail scanners that open links do not use
/// the link up.
pub async fn confirm_page(
    req: HttpRequest,
    q: web::Query<ConfirmQuery>,
) -> Result<HttpResponse, PageError> {
    let (form_token, _) = session::form_token(&req);
    let page = SignupConfirmPage {
        csrf: None,
        root: "",
        form_token: form_token.clone(),
        token: q.token.clone(),
    };
    with_form_cookie(&req, form_token, StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// POST `/signup/confirm`: creates the account the link stands for, once.
pub async fn confirm(
    req: HttpRequest,
    form: web::Form<ConfirmForm>,
) -> Result<HttpResponse, PageError> {
    session::check_form_token(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let Some(pending) = store
        .system()
        .take_pending_signup(&form.token, Timestamp::now())
        .await?
    else {
        return Err(PageError::BadInput(
            StatusCode::GONE,
            "This link has expired or was already used. Sign up again.".into(),
        ));
    };
    let (tenant_name, tenant_id, user_id) =
        create_account(store, &pending.name, &pending.email, &pending.password_hash).await?;
    welcome(&req, store, tenant_name, tenant_id, user_id).await
}

/// Creates the tenant, its owner and a first API key.
async fn create_account(
    store: &Store,
    name: &str,
    email: &str,
    hash: &str,
) -> Result<(String, TenantId, UserId), PageError> {
    let tenant = store
        .create_tenant(NewTenant {
            name: name.to_owned(),
            notification_email: email.to_owned(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await?;
    let tenant_id = tenant.id;
    // The email check before and this insert are not one transaction: a concurrent sign-up
    // with the same email leaves an empty tenant behind and this one gets the message.
    let user = match store.create_user(tenant_id, email, hash, "owner").await {
        Err(StoreError::Conflict { .. }) => {
            return Err(PageError::BadInput(
                StatusCode::CONFLICT,
                "An account with this email already exists. Log in instead.".into(),
            ));
        }
        other => other?,
    };
    Ok((tenant.name, tenant_id, user.id))
}

/// The page after an account is created: its first API key, shown once, and a session.
async fn welcome(
    req: &HttpRequest,
    store: &Store,
    tenant_name: String,
    tenant_id: TenantId,
    user_id: UserId,
) -> Result<HttpResponse, PageError> {
    let (_, api_key) = store.create_api_key(tenant_id, "default").await?;
    let (cookie, csrf) = open_session(store, tenant_id, user_id).await?;
    let page = SignupDone {
        csrf: Some(csrf),
        root: "",
        tenant_name,
        api_key,
        base_url: base_url(req),
    };
    let mut resp = HttpResponse::Ok();
    session::set_cookie(&mut resp, req, SESSION_COOKIE, &cookie, SESSION_TTL, "Lax");
    finish(resp, &page)
}

pub async fn login_page(req: HttpRequest) -> Result<HttpResponse, PageError> {
    if session::current(&req).await?.is_some() {
        return Ok(see_other("/"));
    }
    let (token, _) = session::form_token(&req);
    let page = LoginPage {
        csrf: None,
        root: "",
        form_token: token.clone(),
        email: String::new(),
        error: None,
    };
    with_form_cookie(&req, token, StatusCode::OK, &page)
}

pub async fn login(
    req: HttpRequest,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, PageError> {
    let form = form.into_inner();
    session::check_form_token(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let email = form.email.trim().to_lowercase();
    let limits = limits_of(&req)?;
    let failed = |status: StatusCode, error: String| -> Result<HttpResponse, PageError> {
        let page = LoginPage {
            csrf: None,
            root: "",
            form_token: form.csrf.clone(),
            email: email.clone(),
            error: Some(error),
        };
        Ok(views::render(status, &page)?)
    };
    // Per client address, whatever the email: varying it buys nothing. Past the limit the
    // check waits its turn rather than being refused, so the right password always logs in.
    limits
        .login_turn(limits.client_ip(&req))
        .await
        .map_err(|b| too_busy(b, "Too many login attempts from your network."))?;
    let user = if email.is_empty() || form.password.len() > MAX_PASSWORD {
        None
    } else {
        store.system().find_user_for_login(&email).await?
    };
    // Without a user, a dummy hash is verified anyway, so timing does not tell which emails
    // have accounts.
    let stored = user
        .as_ref()
        .map(|u| u.password_hash.clone())
        .unwrap_or_else(|| DUMMY_HASH.clone());
    let ok = verify_password(limits, form.password.clone(), stored).await? && user.is_some();
    let Some(user) = user.filter(|_| ok) else {
        // Slowed down, never refused: the right password still logs in at once.
        let delay = limits.failed_login(&email, Instant::now());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        return failed(
            StatusCode::UNAUTHORIZED,
            "That email and password do not match an account.".into(),
        );
    };
    limits.logged_in(&email);
    let (cookie, _) = open_session(store, user.tenant_id, user.id).await?;
    let mut resp = HttpResponse::SeeOther();
    resp.insert_header((header::LOCATION, "/"));
    session::set_cookie(&mut resp, &req, SESSION_COOKIE, &cookie, SESSION_TTL, "Lax");
    session::set_cookie(
        &mut resp,
        &req,
        FORM_COOKIE,
        "",
        Default::default(),
        "Strict",
    );
    Ok(resp.finish())
}

pub async fn logout(
    req: HttpRequest,
    session: Session,
    form: web::Form<LogoutForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    if let session::SessionKind::Tenant { id } = session.kind {
        session::store_of(&req)?
            .delete_session(session.tenant, id)
            .await?;
    }
    let mut resp = HttpResponse::SeeOther();
    resp.insert_header((header::LOCATION, "/login"));
    session::set_cookie(
        &mut resp,
        &req,
        SESSION_COOKIE,
        "",
        Default::default(),
        "Lax",
    );
    Ok(resp.finish())
}

/// Opens a session; returns the cookie token and the session's CSRF token.
async fn open_session(
    store: &Store,
    tenant: TenantId,
    user: UserId,
) -> Result<(String, String), PageError> {
    let csrf = session::random_token();
    let expires = Timestamp::now().plus(SESSION_TTL);
    let (_, token) = store.create_session(tenant, user, &csrf, expires).await?;
    Ok((token, csrf))
}

fn with_form_cookie(
    req: &HttpRequest,
    token: String,
    status: StatusCode,
    page: &impl askama::Template,
) -> Result<HttpResponse, PageError> {
    let mut resp = HttpResponse::build(status);
    session::set_cookie(&mut resp, req, FORM_COOKIE, &token, FORM_TTL, "Strict");
    finish(resp, page)
}

/// Renders `page` into a response that already has its status and cookies.
fn finish(
    mut resp: actix_web::HttpResponseBuilder,
    page: &impl askama::Template,
) -> Result<HttpResponse, PageError> {
    let mut resp = resp
        .content_type("text/html; charset=utf-8")
        .body(page.render()?);
    crate::error::harden(&mut resp);
    Ok(resp)
}

pub fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .finish()
}

/// `scheme://host` as the browser sees it: for links (a portal link, examples on the pages)
/// and for telling the server's own origin from another site's.
pub fn base_url(req: &HttpRequest) -> String {
    let (scheme, host) = scheme_and_host(req);
    format!("{scheme}://{host}")
}

/// The request's scheme as the browser used it (`https` decides cookies' `Secure`).
pub fn scheme(req: &HttpRequest) -> String {
    scheme_and_host(req).0
}

/// `Forwarded` and `X-Forwarded-Host`/`-Proto` are believed only from a trusted proxy
/// (`trusted_proxies`): from anyone else they would let a client choose where a portal link
/// points (`https://evil.test/portal/#token=…`). Otherwise: the connection's own scheme and
/// the `Host` header the browser sent.
fn scheme_and_host(req: &HttpRequest) -> (String, String) {
    let trusted = req
        .app_data::<web::Data<AuthLimits>>()
        .is_some_and(|l| l.from_trusted_proxy(req));
    if trusted {
        let info = req.connection_info();
        return (info.scheme().to_owned(), info.host().to_owned());
    }
    let scheme = if req.app_config().secure() {
        "https"
    } else {
        "http"
    };
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()))
        .unwrap_or_else(|| req.app_config().host());
    (scheme.to_owned(), host.to_owned())
}

/// One `@`, something on both sides, a dot in the domain, no spaces; the mailbox proves the
/// rest.
fn plausible_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    email.len() <= 254
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn limits_of(req: &HttpRequest) -> Result<&AuthLimits, PageError> {
    req.app_data::<web::Data<AuthLimits>>()
        .map(|d| d.get_ref())
        .ok_or_else(|| PageError::Internal("AuthLimits missing from app data".into()))
}

/// 429 with `Retry-After`, and a page that says when to try again.
fn too_busy(busy: Busy, what: &str) -> PageError {
    let secs = busy.retry_after_secs();
    PageError::TooBusy {
        retry_after: secs,
        text: format!(
            "{what} Try again in {secs} second{}.",
            if secs == 1 { "" } else { "s" }
        ),
    }
}

const HASH_BUSY: &str = "The server is busy checking passwords.";

async fn hash_password(limits: &AuthLimits, password: String) -> Result<String, PageError> {
    limits
        .hash(move |mem| password::hash(mem, password.as_bytes()))
        .await
        .map_err(|b| too_busy(b, HASH_BUSY))?
        .ok_or_else(|| PageError::Internal("password hashing stopped".into()))?
        .map_err(PageError::Internal)
}

async fn verify_password(
    limits: &AuthLimits,
    password: String,
    stored: String,
) -> Result<bool, PageError> {
    limits
        .hash(move |mem| password::verify(mem, password.as_bytes(), &stored))
        .await
        .map_err(|b| too_busy(b, HASH_BUSY))?
        .ok_or_else(|| PageError::Internal("password check stopped".into()))
}

/// Verified when the email has no account, so both paths cost one argon2 run.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    let salt = SaltString::encode_b64(&[7u8; 16]).ok();
    salt.and_then(|s| {
        Argon2::default()
            .hash_password(b"no such user", &s)
            .ok()
            .map(|h| h.to_string())
    })
    .unwrap_or_default()
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emails_need_a_local_part_and_a_dotted_domain() {
        for good in ["ops@example.com", "a.b+c@sub.example.co"] {
            assert!(plausible_email(good), "{good}");
        }
        for bad in [
            "",
            "ops",
            "ops@",
            "@example.com",
            "ops@example",
            "a b@x.com",
            "a@b@c.com",
            "a@.com",
            "a@x.",
        ] {
            assert!(!plausible_email(bad), "{bad}");
        }
    }

    #[actix_web::test]
    async fn passwords_verify_only_against_their_own_hash() {
        let l = &AuthLimits::new(Default::default());
        let hash = hash_password(l, "correct horse battery".into())
            .await
            .unwrap();
        assert!(hash.starts_with("$argon2id$"));
        assert!(
            verify_password(l, "correct horse battery".into(), hash.clone())
                .await
                .unwrap()
        );
        assert!(
            !verify_password(l, "wrong horse battery".into(), hash)
                .await
                .unwrap()
        );
        assert!(
            !verify_password(l, "x".into(), "not a hash".into())
                .await
                .unwrap()
        );
    }
}
