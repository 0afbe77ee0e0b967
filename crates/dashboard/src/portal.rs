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
use domain::portal::PortalSettings;
use serde::Deserialize;
use store::ListParams;

use crate::auth::see_other;
use crate::error::PageError;
use crate::session::{self, PORTAL_COOKIE, PORTAL_ROOT, Session, SessionKind};
use crate::views::{self, EndpointRow, EventTypeRow, MessagePage, PortalHome, PortalLanding};

/// Endpoints and event types shown on the portal's home page.
const HOME_ENDPOINTS: u64 = 50;
const HOME_EVENT_TYPES: u64 = 100;

/// GET `/portal/`: straight to the application with a valid portal cookie; otherwise the page
/// whose script opens the session from the link's fragment.
pub async fn landing(req: HttpRequest) -> Result<HttpResponse, PageError> {
    if let Some(Session {
        kind: SessionKind::Portal { app, .. },
        ..
    }) = session::current(&req).await?
    {
        return Ok(see_other(&format!("{PORTAL_ROOT}/app/{app}")));
    }
    Ok(views::render(
        StatusCode::OK,
        &PortalLanding {
            csrf: None,
            root: PORTAL_ROOT,
        },
    )?)
}

#[derive(Deserialize)]
pub struct OpenForm {
    #[serde(default)]
    token: String,
}

/// POST `/portal/session`: the link's token becomes the portal cookie.
pub async fn open(req: HttpRequest, form: web::Form<OpenForm>) -> Result<HttpResponse, PageError> {
    let token = form.token.trim();
    let store = session::store_of(&req)?;
    let grant = match token {
        "" => None,
        t => store.system().authenticate_portal_token(t).await?,
    };
    let Some(grant) = grant else {
        return Err(PageError::PortalLink);
    };
    let left = grant.expires_at.as_millis() - Timestamp::now().as_millis();
    let mut resp = HttpResponse::SeeOther();
    resp.insert_header((header::LOCATION, format!("{PORTAL_ROOT}/app/{}", grant.app)));
    resp.append_header((
        header::SET_COOKIE,
        portal_cookie(&req, token, Duration::from_millis(left.max(0) as u64)),
    ));
    Ok(resp.finish())
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
    let view = PortalHome {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        read_only,
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
    let site = if req.connection_info().scheme() == "https" {
        "SameSite=None; Secure; Partitioned"
    } else {
        "SameSite=Lax"
    };
    format!(
        "{PORTAL_COOKIE}={value}; Path={PORTAL_ROOT}; Max-Age={}; HttpOnly; {site}",
        max_age.as_secs()
    )
}

/// Middleware of every portal response: who may frame it. A page of a portal session may be
/// framed only by the tenant's allowed origins (none listed: by nobody). A response without a
/// session (the landing page, "this link is not valid") shows nothing of anyone's and may be
/// framed anywhere, so a portal embedded on the tenant's site can open its link; the page it
/// then goes to is refused to every site the tenant did not list. Images may also come from
/// https (the tenant's logo).
pub async fn frame_policy(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = next.call(req).await?;
    let ancestors = res
        .request()
        .extensions()
        .get::<PortalSettings>()
        .map_or_else(|| "*".to_owned(), PortalSettings::frame_ancestors);
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

/// The stylesheet of [`brand_css`]. Every value was checked by `PortalSettings::parse` (a
/// colour is `#` and six hex digits, a logo URL has no quote, parenthesis or backslash); the
/// name is escaped character by character all the same.
fn brand_stylesheet(s: &PortalSettings) -> String {
    let mut css = String::new();
    if let Some(color) = &s.color {
        css.push_str(&format!(":root {{ --accent: {color}; }}\n"));
    }
    if s.dark {
        css.push_str(
            ":root { --bg: #12151c; --fg: #e4e7ee; --muted: #9aa3b5; --line: #2c3240; \
             --card: #1b1f28; --off: #c5cad6; --off-bg: #2a2f3a; }\n\
             .top { background: #0b0d12; }\n",
        );
    }
    if let Some(name) = &s.display_name {
        let escaped: String = name
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || c == ' ' {
                    c.to_string()
                } else {
                    format!("\\{:x} ", c as u32)
                }
            })
            .collect();
        css.push_str(&format!(
            ".top .brand {{ font-size: 0; }}\n.top .brand::after {{ content: \"{escaped}\"; font-size: 15px; }}\n"
        ));
    }
    if let Some(logo) = &s.logo_url {
        css.push_str(&format!(
            ".top .brand::before {{ content: \"\"; display: inline-block; width: 1.6rem; \
             height: 1.6rem; margin-right: .5rem; vertical-align: middle; \
             background: url(\"{logo}\") center / contain no-repeat; }}\n"
        ));
    }
    css
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brand_stylesheet_escapes_the_name_and_keeps_the_checked_values() {
        let s = PortalSettings::parse(
            "Acme\"}body{x",
            "https://acme.example/logo.png",
            "#112233",
            true,
            "",
        )
        .expect("valid");
        let css = brand_stylesheet(&s);
        assert!(css.contains("--accent: #112233;"), "{css}");
        assert!(css.contains("--bg: #12151c"), "{css}");
        assert!(
            css.contains(r#"content: "Acme\22 \7d body\7b x";"#),
            "{css}"
        );
        assert!(
            css.contains(r#"url("https://acme.example/logo.png")"#),
            "{css}"
        );
        assert_eq!(brand_stylesheet(&PortalSettings::default()), "");
    }
}
