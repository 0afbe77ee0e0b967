//! An application's page on the dashboard: rename it, hand its customer portal links (listed
//! with their expiry; revoke one, or expire them all), and delete it. The rules are the ones
//! the API applies: `rules::name`, the store's portal tokens and its delete.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use domain::Timestamp;
use serde::Deserialize;
use service::rules;
use store::NewApplication;
use store::entities::{application, portal_token};

use crate::auth::see_other;
use crate::charts::group;
use crate::error::PageError;
use crate::session::CsrfForm;
use crate::session::{self, Session};
use crate::views;
use crate::when::When;

/// Portal links listed on the page, newest first.
const LINKS_SHOWN: u64 = 50;

/// One portal link as the list shows it.
struct LinkRow {
    id: String,
    created: When,
    /// When it expires, or when it was revoked (`revoked`).
    expires: When,
    revoked: bool,
    /// "Active", "Expired" or "Revoked".
    status: &'static str,
    live: bool,
    access: String,
}

#[derive(Template)]
#[template(path = "application.html")]
struct AppPage {
    csrf: Option<String>,
    root: &'static str,
    id: String,
    uid: Option<String>,
    name: String,
    notice: Option<String>,
    /// The rename field as typed, and what is wrong with it.
    name_value: String,
    name_error: Option<String>,
    /// A link just created: shown this once, with a copy button.
    new_link: Option<String>,
    links: Vec<LinkRow>,
    /// Links older than the listed ones: "and 3 more".
    more_links: Option<String>,
    endpoints: usize,
    delete_value: String,
    delete_error: Option<String>,
}

/// What the page shows besides the stored state.
#[derive(Default)]
struct Extra {
    notice: Option<String>,
    name_value: Option<String>,
    name_error: Option<String>,
    new_link: Option<String>,
    delete_value: String,
    delete_error: Option<String>,
}

fn link_row(t: &portal_token::Model, now: Timestamp) -> LinkRow {
    let live = t.revoked_at.is_none() && t.expires_at > now.as_millis();
    let status = match (t.revoked_at, live) {
        (Some(_), _) => "Revoked",
        (None, true) => "Active",
        (None, false) => "Expired",
    };
    let mut access = vec![if t.read_only {
        "Read-only".to_owned()
    } else {
        "Full".to_owned()
    }];
    if let Ok(flags) = serde_json::from_str::<Vec<String>>(&t.feature_flags)
        && !flags.is_empty()
    {
        access.push(format!("flags: {}", flags.join(", ")));
    }
    if let Some(session) = &t.session_id {
        access.push(format!("session {session}"));
    }
    LinkRow {
        id: t.id.to_string(),
        created: When::at_ms(t.created_at),
        expires: When::at_ms(t.revoked_at.unwrap_or(t.expires_at)),
        revoked: t.revoked_at.is_some(),
        status,
        live,
        access: access.join(" · "),
    }
}

async fn page(
    req: &HttpRequest,
    session: Session,
    app: application::Model,
    status: StatusCode,
    extra: Extra,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(req)?;
    let (tokens, total) = store
        .list_portal_tokens(session.tenant, app.id, LINKS_SHOWN)
        .await?;
    let now = Timestamp::now();
    let rest = total.n.saturating_sub(tokens.len() as u64);
    let more_links = (rest > 0 || total.more).then(|| {
        format!(
            "and {}{} older link{} not listed",
            group(rest as i64),
            if total.more { "+" } else { "" },
            if rest == 1 && !total.more { "" } else { "s" }
        )
    });
    let endpoints = store
        .list_endpoints_of_apps(session.tenant, &[app.id])
        .await?
        .len();
    let view = AppPage {
        csrf: Some(session.csrf),
        root: session.root,
        id: app.id.to_string(),
        uid: app.uid,
        name_value: extra.name_value.unwrap_or_else(|| app.name.clone()),
        name: app.name,
        notice: extra.notice,
        name_error: extra.name_error,
        new_link: extra.new_link,
        links: tokens.iter().map(|t| link_row(t, now)).collect(),
        more_links,
        endpoints,
        delete_value: extra.delete_value,
        delete_error: extra.delete_error,
    };
    Ok(views::render(status, &view)?)
}

/// GET `/app/{app}`: the application's page.
pub async fn show(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    query: web::Query<std::collections::HashMap<String, String>>,
) -> Result<HttpResponse, PageError> {
    let app = session.app(session::store_of(&req)?, &path).await?;
    let notice = match query.get("done").map(String::as_str) {
        Some("renamed") => Some("Application renamed.".to_owned()),
        Some("revoked") => Some("Portal link revoked: it no longer opens the portal.".to_owned()),
        Some("expired") => Some(format!(
            "{} portal link{} expired: none of them opens the portal any more.",
            query.get("n").map(String::as_str).unwrap_or("0"),
            if query.get("n").map(String::as_str) == Some("1") {
                ""
            } else {
                "s"
            }
        )),
        _ => None,
    };
    let extra = Extra {
        notice,
        ..Extra::default()
    };
    page(&req, session, app, StatusCode::OK, extra).await
}

#[derive(Deserialize)]
pub struct NameForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// POST `/app/{app}/rename`.
pub async fn rename(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<NameForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    let Ok(name) = rules::name("name", &form.name) else {
        let extra = Extra {
            name_value: Some(form.name.clone()),
            name_error: Some(
                "Give the application a name of 1 to 256 printable characters.".into(),
            ),
            ..Extra::default()
        };
        return page(&req, session, app, StatusCode::UNPROCESSABLE_ENTITY, extra).await;
    };
    // Everything but the name stays as it is, as the API's PATCH with only a name.
    let new = NewApplication {
        name,
        uid: app.uid.clone(),
        rate_limit: app.rate_limit,
        metadata: app.metadata()?,
        retention: app.retention(),
    };
    store
        .update_application(session.tenant, &app.id.to_string(), new)
        .await?;
    Ok(see_other(&format!("/app/{}?done=renamed", app.id)))
}

#[derive(Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    csrf: String,
    /// The application's name, typed to confirm.
    #[serde(default)]
    confirm_name: String,
}

/// POST `/app/{app}/delete`: deletes the application once its name is typed to confirm.
pub async fn delete(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<DeleteForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    if form.confirm_name.trim() != app.name.trim() {
        let extra = Extra {
            delete_value: form.confirm_name.clone(),
            delete_error: Some(format!(
                "Type the application's name, {}, exactly to delete it.",
                app.name
            )),
            ..Extra::default()
        };
        return page(&req, session, app, StatusCode::UNPROCESSABLE_ENTITY, extra).await;
    }
    store
        .delete_application(session.tenant, &app.id.to_string())
        .await?;
    // Its portal links would open nothing now; they stop at once rather than at expiry.
    store
        .expire_portal_tokens(session.tenant, app.id, std::time::Duration::ZERO, &[])
        .await?;
    Ok(see_other(&format!(
        "/?deleted={}",
        views::query_value(&app.name)
    )))
}

/// The page after "Create portal link": the new link, shown this once.
pub async fn with_new_link(
    req: &HttpRequest,
    session: Session,
    app: application::Model,
    url: String,
) -> Result<HttpResponse, PageError> {
    let extra = Extra {
        notice: Some("Portal link created. Copy it now: hookd keeps only a hash of it, so it cannot be shown again.".into()),
        new_link: Some(url),
        ..Extra::default()
    };
    page(req, session, app, StatusCode::OK, extra).await
}

/// POST `/app/{app}/portal/{link}/revoke`: one link stops working.
pub async fn revoke_link(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let app = session.app(store, &path.0).await?;
    store
        .revoke_portal_token_id(session.tenant, app.id, &path.1)
        .await?;
    Ok(see_other(&format!("/app/{}?done=revoked", app.id)))
}

/// POST `/app/{app}/portal/expire-all`: every live link of the application stops working
/// now (the API's expire-all with no delay).
pub async fn expire_all(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    let n = store
        .expire_portal_tokens(session.tenant, app.id, std::time::Duration::ZERO, &[])
        .await?;
    Ok(see_other(&format!("/app/{}?done=expired&n={n}", app.id)))
}
