//! The app portal (issue 19): what a tenant's customer sees through a portal link.
//!
//! The link (`/portal/#token=…`, from the API's app-portal-access or the dashboard's "Open
//! portal") carries a portal token in its fragment, which browsers never send to a server, so
//! it never reaches a log. The landing page's script moves it into a form and posts it to
//! `/portal/session`, which sets it as the HttpOnly portal cookie (path `/portal`) and sends
//! the customer to their application's page. Every other portal page is a dashboard page of
//! that one application, served under `/portal` by the same handlers: the session's
//! application is the only one `Session::app` finds.

use std::time::Duration;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{HttpMessage, HttpRequest, HttpResponse, web};
use domain::Timestamp;
use domain::ids::{ApplicationId, TenantId};
use domain::portal::PortalSettings;
use serde::Deserialize;
use store::ListParams;

use crate::error::PageError;
use crate::session::{self, PORTAL_COOKIE, PORTAL_ROOT, Session, SessionKind};
use crate::views::{
    self, EndpointRow, EventTypeRow, MessagePage, PortalHome, PortalLanding, PortalSwitch,
};

/// Endpoints and event types shown on the portal's home page.
const HOME_ENDPOINTS: u64 = 50;
const HOME_EVENT_TYPES: u64 = 100;

/// GET `/portal/`: the page whose script opens the session from the link's fragment. With a
/// portal session open, the script goes on to its application unless the address carries a
/// link (which the server cannot see): that link is posted, and `open` asks before it
/// replaces a session of another application.
pub async fn landing(req: HttpRequest) -> Result<HttpResponse, PageError> {
    let home = match session::current(&req).await? {
        Some(Session {
            kind: SessionKind::Portal { app, .. },
            ..
        }) => Some(format!("{PORTAL_ROOT}/app/{app}")),
        _ => None,
    };
    // Framed anywhere: it shows nothing and has no control, and a portal embedded on the
    // tenant's site starts here before the server can know the tenant (the token is in the
    // fragment). What it posts to answers with the token's tenant's rule.
    req.extensions_mut().insert(FrameAnywhere);
    Ok(views::render(
        StatusCode::OK,
        &PortalLanding {
            csrf: None,
            root: PORTAL_ROOT,
            home,
        },
    )?)
}

/// Marks the one portal response any site may frame (see [`landing`]).
#[derive(Clone, Copy)]
struct FrameAnywhere;

#[derive(Deserialize)]
pub struct OpenForm {
    #[serde(default)]
    token: String,
    /// On the "switch portal?" page: the open session's CSRF token, proving the customer
    /// chose to leave it.
    #[serde(default)]
    confirm: String,
}

/// POST `/portal/session`: the link's token becomes the portal cookie. Only a page of this
/// server may post it (any other site could otherwise sign a customer into a portal of its
/// own: login CSRF), and an open session for another application is replaced only when the
/// customer confirms, on a page that names both.
pub async fn open(req: HttpRequest, form: web::Form<OpenForm>) -> Result<HttpResponse, PageError> {
    if !session::from_this_origin(&req) {
        return Err(PageError::CrossSite);
    }
    let token = form.token.trim();
    let store = session::store_of(&req)?;
    let grant = match token {
        "" => None,
        t => store.system().authenticate_portal_token(t).await?,
    };
    let Some(grant) = grant else {
        return Err(PageError::PortalLink);
    };
    if let Some((open_token, open)) = session::portal_cookie_grant(&req).await?
        && open.app != grant.app
    {
        let csrf = session::portal_csrf(&open_token);
        if form.confirm.is_empty() {
            return switch_page(store, &open, &grant, token, csrf).await;
        }
        if !session::tokens_equal(&form.confirm, &csrf) {
            return Err(PageError::Csrf);
        }
    }
    // The response may be framed only where the token's tenant allows.
    session::put_portal_settings(&req, grant.tenant).await?;
    let left = grant.expires_at.as_millis() - Timestamp::now().as_millis();
    let mut resp = HttpResponse::SeeOther();
    resp.insert_header((header::LOCATION, format!("{PORTAL_ROOT}/app/{}", grant.app)));
    resp.append_header((
        header::SET_COOKIE,
        portal_cookie(&req, token, Duration::from_millis(left.max(0) as u64)),
    ));
    Ok(resp.finish())
}

/// "You are signed in to X's portal; switch to Y's?": the button posts the new token with the
/// open session's CSRF token, which no other site can read.
async fn switch_page(
    store: &store::Store,
    open: &store::PortalGrant,
    new: &store::PortalGrant,
    token: &str,
    confirm: String,
) -> Result<HttpResponse, PageError> {
    let name = |tenant: TenantId, app: ApplicationId| async move {
        let t = store.get_tenant(tenant).await?;
        let a = store.get_application(tenant, &app.to_string()).await?;
        let owner = t.portal_settings().display_name.unwrap_or(t.name);
        Ok::<_, PageError>(format!("{owner} ({})", a.name))
    };
    let view = PortalSwitch {
        csrf: None,
        root: PORTAL_ROOT,
        open_name: name(open.tenant, open.app).await?,
        open_app: open.app.to_string(),
        new_name: name(new.tenant, new.app).await?,
        token: token.to_owned(),
        confirm,
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

#[derive(Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// POST `/portal/logout`: ends the portal token (as the API's logout does) and the cookie.
pub async fn logout(
    req: HttpRequest,
    session: Session,
    form: web::Form<LogoutForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    if let Some(token) = session::cookie(&req, PORTAL_COOKIE) {
        session::store_of(&req)?
            .system()
            .revoke_portal_token(&token)
            .await?;
    }
    let page = MessagePage {
        csrf: None,
        root: PORTAL_ROOT,
        title: "Signed out",
        text: "You are signed out of this portal, and its link no longer works. Ask the \
               service that gave it to you for a new one."
            .to_owned(),
    };
    let mut resp = views::render(StatusCode::OK, &page)?;
    if let Ok(v) = header::HeaderValue::from_str(&portal_cookie(&req, "", Duration::ZERO)) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    Ok(resp)
}

/// GET `/portal/app/{app_id}`: the customer's home: their endpoints with their health, where
/// to see messages, and the event types they can subscribe to.
pub async fn home(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    let now = Timestamp::now();
    let eps = store
        .list_endpoints(session.tenant, app.id, &ListParams::first(HOME_ENDPOINTS))
        .await?;
    let types = store
        .list_event_types(session.tenant, false, &ListParams::first(HOME_EVENT_TYPES))
        .await?;
    let read_only = matches!(
        session.kind,
        SessionKind::Portal {
            read_only: true,
            ..
        }
    );
    let can = session.allowed();
    let view = PortalHome {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        read_only,
        can,
        endpoints: eps.data.iter().map(|e| EndpointRow::of(e, now)).collect(),
        more_endpoints: !eps.done,
        event_types: types.data.iter().map(EventTypeRow::of).collect(),
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

/// The portal cookie (`value` empty and `max_age` zero: its deletion): HttpOnly, sent only to
/// `/portal`. Over https it is `SameSite=None;
/// Secure; Partitioned`, so the portal works inside an iframe on the tenant's own site (the
/// browser keeps it apart per embedding site); over plain http browsers refuse `None` without
/// `Secure`, so it is `Lax` there.
fn portal_cookie(req: &HttpRequest, value: &str, max_age: Duration) -> String {
    cookie_like_the_portals(req, PORTAL_COOKIE, value, max_age)
}

fn cookie_like_the_portals(
    req: &HttpRequest,
    name: &str,
    value: &str,
    max_age: Duration,
) -> String {
    let site = if crate::auth::scheme(req) == "https" {
        "SameSite=None; Secure; Partitioned"
    } else {
        "SameSite=Lax"
    };
    format!(
        "{name}={value}; Path={PORTAL_ROOT}; Max-Age={}; HttpOnly; {site}",
        max_age.as_secs()
    )
}

/// The cookie of [`cookie_check`]: it carries nothing and lasts a minute.
const PROBE_COOKIE: &str = "hookd_probe";

/// GET `/portal/cookie-check`: whether this browser sent back the probe cookie (set again by
/// every answer, with the portal cookie's attributes). The landing page asks twice before it
/// spends a link inside a frame: a frame on another site over plain http cannot keep a
/// `SameSite=Lax` cookie, and the customer is then told to open the portal in its own tab
/// rather than that the link is not valid.
pub async fn cookie_check(req: HttpRequest) -> HttpResponse {
    let kept = session::cookie(&req, PROBE_COOKIE).is_some();
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .append_header((
            header::SET_COOKIE,
            cookie_like_the_portals(&req, PROBE_COOKIE, "1", Duration::from_secs(60)),
        ))
        .body(if kept {
            r#"{"kept":true}"#
        } else {
            r#"{"kept":false}"#
        })
}

/// Middleware of every portal response: who may frame it. A response of a portal session, or
/// of a valid link being opened, may be framed only by that tenant's allowed origins (none
/// listed: by nobody); any other response (this link is not valid, a refused request) by
/// nobody, except the landing page (see [`landing`]). Images may also come from https (the
/// tenant's logo).
pub async fn frame_policy(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = BRAND
        .scope(std::cell::RefCell::new(None), next.call(req))
        .await?;
    let ancestors = {
        let ext = res.request().extensions();
        match ext.get::<PortalSettings>() {
            Some(settings) => settings.frame_ancestors(),
            None if ext.get::<FrameAnywhere>().is_some() => "*".to_owned(),
            None => "'none'".to_owned(),
        }
    };
    let csp = crate::error::content_security_policy(&ancestors, "https:");
    if let Ok(v) = header::HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    Ok(res)
}

/// GET `/portal/brand.css`: the tenant's look (colour, dark theme, name and logo in the
/// header) as a stylesheet, since the pages allow no inline style. Empty without a session.
pub async fn brand_css(req: HttpRequest) -> Result<HttpResponse, PageError> {
    session::current(&req).await?;
    let settings = req
        .extensions()
        .get::<PortalSettings>()
        .cloned()
        .unwrap_or_default();
    Ok(HttpResponse::Ok()
        .content_type("text/css; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(brand_stylesheet(&settings)))
}

/// The stylesheet of [`brand_css`]: the accent made readable in the chosen theme
/// ([`PortalSettings::accent`]). The dark palette is `static/dark.css`, linked by the pages
/// when the tenant chose it; the name and logo are in the page itself (see [`brand`]).
fn brand_stylesheet(s: &PortalSettings) -> String {
    let mut css = String::new();
    if s.color.is_some() || s.dark {
        let accent = s.accent();
        css.push_str(&format!(
            ":root {{ --accent: {}; --on-accent: {}; }}\n",
            accent.color, accent.on_accent
        ));
    }
    css
}

/// The portal's name and logo, for the pages' title and header.
#[derive(Clone, Debug)]
pub struct Brand {
    pub name: String,
    pub logo_url: Option<String>,
    /// The tenant chose the dark theme: the pages link `static/dark.css`.
    pub dark: bool,
}

impl Brand {
    fn of(s: &PortalSettings) -> Brand {
        Brand {
            name: s
                .display_name
                .clone()
                .unwrap_or_else(|| "Webhooks".to_owned()),
            logo_url: s.logo_url.clone(),
            dark: s.dark,
        }
    }
}

tokio::task_local! {
    /// The brand of the portal session the current request runs in: set when the session is
    /// found, read when the page renders, so every portal page (error pages too) carries it
    /// without each view passing it along.
    static BRAND: std::cell::RefCell<Option<Brand>>;
}

/// Records the portal's brand for this request's pages (see [`brand`]).
pub(crate) fn set_brand(s: &PortalSettings) {
    let _ = BRAND.try_with(|b| *b.borrow_mut() = Some(Brand::of(s)));
}

/// The brand of this request's portal session; "Webhooks" without one (the landing page, an
/// invalid link).
pub fn brand() -> Brand {
    BRAND
        .try_with(|b| b.borrow().clone())
        .ok()
        .flatten()
        .unwrap_or_else(|| Brand::of(&PortalSettings::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brand_stylesheet_keeps_the_checked_values_and_readable_accents() {
        let s = PortalSettings::parse(
            "Acme",
            "https://acme.example/logo.png",
            "#112233",
            false,
            "",
        )
        .expect("valid");
        let css = brand_stylesheet(&s);
        assert!(
            css.contains("--accent: #112233; --on-accent: #ffffff;"),
            "{css}"
        );
        assert!(!css.contains("--bg"), "{css}");
        let dark = PortalSettings { dark: true, ..s };
        let css = brand_stylesheet(&dark);
        assert!(!css.contains("--accent: #112233;"), "{css}");
        assert!(css.contains("--on-accent: #12151c;"), "{css}");
        assert_eq!(brand_stylesheet(&PortalSettings::default()), "");
    }
}
