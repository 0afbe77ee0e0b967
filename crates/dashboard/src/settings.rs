//! `/settings`: the tenant's API keys (create — shown once —, list, revoke) and the address
//! that gets notifications.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::classify::StatusPreset;
use domain::duration::format_duration;
use domain::email::{EmailAddress, WarningRecipient};
use domain::ids::ApiKeyId;
use domain::portal::PortalSettings;
use domain::retention::{RetentionDays, max_days};
use serde::Deserialize;
use store::ListParams;

use crate::auth::see_other;
use crate::error::PageError;
use crate::problems::Problems;
use crate::session::CsrfForm;
use crate::session::{self, Session};
use crate::views::{
    self, ApiKeyRow, OperationalForm, OperationalRow, PortalView, PresetChoice, RetentionView,
    SettingsPage, WarningView,
};
use crate::when::When;

/// Keys listed on the page (revoked ones included).
const KEYS_SHOWN: u64 = 100;

/// What the page shows besides the stored state: a notice, a just-created key, an error and
/// the email as typed.
#[derive(Default)]
struct Extra {
    notice: Option<String>,
    new_key: Option<String>,
    error: Option<String>,
    email: Option<String>,
    /// The retention days as typed (payload, metadata), when refused.
    retention: Option<(String, String)>,
    /// The portal settings as typed, when refused.
    portal: Option<PortalView>,
    /// The operational-webhook form as typed and its problems, when refused.
    ops: Option<(OperationalForm, Problems)>,
    /// The warning-recipient form as typed (choice, address) and its problems, when refused.
    warn: Option<(String, String, Problems)>,
}

async fn page(
    req: &HttpRequest,
    session: Session,
    status: StatusCode,
    extra: Extra,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(req)?;
    let tenant = store.get_tenant(session.tenant).await?;
    let keys = store
        .list_api_keys(
            session.tenant,
            &ListParams {
                limit: KEYS_SHOWN,
                iterator: None,
                ascending: false,
                walk_window: 0,
            },
        )
        .await?;
    let cfg = crate::service_config(req)?;
    let server_preset = cfg.status_preset;
    let chosen = tenant.retention();
    let in_force = cfg.retention.choose(&[chosen]);
    let shown = |d: Option<u32>| d.map(|d| d.to_string()).unwrap_or_default();
    let (payload_days, metadata_days) = extra
        .retention
        .clone()
        .unwrap_or_else(|| (shown(chosen.payload), shown(chosen.metadata)));
    let retention = RetentionView {
        payload_days,
        metadata_days,
        payload_in_force: format_duration(in_force.payload),
        metadata_in_force: format_duration(in_force.metadata),
        server_payload: format_duration(cfg.retention.payload),
        server_metadata: format_duration(cfg.retention.metadata),
        max_days: max_days(cfg.max_retention),
    };
    let portal = extra
        .portal
        .unwrap_or_else(|| PortalView::of(&tenant.portal_settings()));
    let operational = operational_rows(store, session.tenant).await?;
    let (ops_form, ops_problems) = extra.ops.unwrap_or_default();
    let (choice, address, problems) = extra.warn.unwrap_or_else(|| {
        let r = tenant.warning_recipient();
        let address = match &r {
            WarningRecipient::Other(a) => a.to_string(),
            _ => String::new(),
        };
        (r.choice().to_owned(), address, Problems::new())
    });
    let warn = WarningView {
        choice,
        address,
        problems,
        after: format_duration(cfg.warn_after),
        disable_after: format_duration(cfg.disable_after),
    };
    let view = SettingsPage {
        csrf: Some(session.csrf),
        root: session.root,
        tenant_name: tenant.name,
        email: extra.email.unwrap_or(tenant.notification_email),
        keys: keys
            .data
            .into_iter()
            .map(|k| ApiKeyRow {
                created: When::at_ms(k.created_at),
                last_used: k.last_used_at.map(When::at_ms),
                revoked: k.revoked_at.map(When::at_ms),
                id: k.id.to_string(),
                name: k.name,
                prefix: k.prefix,
            })
            .collect(),
        more_keys: !keys.done,
        preset: tenant
            .status_preset
            .map(StatusPreset::as_str)
            .unwrap_or_default()
            .to_owned(),
        presets: PresetChoice::all(server_preset),
        retention,
        portal,
        operational,
        ops_form,
        ops_problems,
        ops_types: domain::operational::EVENT_TYPES,
        warn,
        notice: extra.notice,
        new_key: extra.new_key,
        error: extra.error,
    };
    Ok(views::render(status, &view)?)
}

/// The page again, answering 422, with `extra` saying what was refused.
async fn refused(
    req: &HttpRequest,
    session: Session,
    extra: Extra,
) -> Result<HttpResponse, PageError> {
    page(req, session, StatusCode::UNPROCESSABLE_ENTITY, extra).await
}

/// GET `/settings`.
pub async fn show(
    req: HttpRequest,
    session: Session,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, PageError> {
    let notice = match query.get("done").map(String::as_str) {
        Some("revoked") => {
            Some("API key revoked: requests made with it are now refused.".to_owned())
        }
        Some("email") => Some("Notification email saved.".to_owned()),
        Some("warnings") => Some("Saved: early warnings go there from the next one.".to_owned()),
        Some("retention") => Some(
            "Retention saved: the next prune applies it to messages already stored too.".to_owned(),
        ),
        Some("portal") => {
            Some("Portal settings saved: the portal's next page uses them.".to_owned())
        }
        Some("operational") => Some(
            "Operational webhook endpoint added: hookd's events about your endpoints and \
             messages go there from now on."
                .to_owned(),
        ),
        Some("operational-removed") => {
            Some("Operational webhook endpoint removed: it gets no more events.".to_owned())
        }
        Some("preset") => Some(
            "Saved: failed attempts of endpoints without a preset of their own are classified \
             this way from now on."
                .to_owned(),
        ),
        _ => None,
    };
    page(
        &req,
        session,
        StatusCode::OK,
        Extra {
            notice,
            ..Extra::default()
        },
    )
    .await
}

#[derive(Deserialize)]
pub struct KeyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// POST `/settings/keys`: a new key, shown on the answer only (never in a URL or again).
pub async fn create_key(
    req: HttpRequest,
    session: Session,
    form: web::Form<KeyForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let name = form.name.trim();
    if name.is_empty() || name.chars().count() > 256 || name.chars().any(char::is_control) {
        return refused(
            &req,
            session,
            Extra {
                error: Some("Give the key a name of 1 to 256 printable characters.".to_owned()),
                ..Extra::default()
            },
        )
        .await;
    }
    let store = session::store_of(&req)?;
    let (key, token) = store.create_api_key(session.tenant, name).await?;
    let mut resp = page(
        &req,
        session,
        StatusCode::OK,
        Extra {
            notice: Some(format!("API key “{}” created.", key.name)),
            new_key: Some(token),
            ..Extra::default()
        },
    )
    .await?;
    // The page holds a secret: keep it out of the back/forward cache and htmx's history.
    resp.headers_mut().insert(
        actix_web::http::header::HeaderName::from_static("hx-push-url"),
        actix_web::http::header::HeaderValue::from_static("/settings"),
    );
    Ok(resp)
}

/// POST `/settings/keys/{key_id}/revoke`.
pub async fn revoke_key(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let id = ApiKeyId::parse(&path).map_err(|_| PageError::NotFound)?;
    session::store_of(&req)?
        .revoke_api_key(session.tenant, id)
        .await?;
    Ok(see_other("/settings?done=revoked"))
}

#[derive(Deserialize)]
pub struct EmailForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
}

/// POST `/settings/email`: where hookd sends notifications (endpoint disabled, …).
pub async fn set_email(
    req: HttpRequest,
    session: Session,
    form: web::Form<EmailForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    match EmailAddress::parse(&form.email) {
        Ok(email) => {
            session::store_of(&req)?
                .set_notification_email(session.tenant, email.as_str())
                .await?;
            Ok(see_other("/settings?done=email"))
        }
        Err(_) => {
            refused(
                &req,
                session,
                Extra {
                    error: Some(format!(
                        "“{}” is not an email address; use the form name@example.com.",
                        form.email.trim()
                    )),
                    email: Some(form.email.clone()),
                    ..Extra::default()
                },
            )
            .await
        }
    }
}

#[derive(Deserialize)]
pub struct WarningForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    recipient: String,
    #[serde(default)]
    address: String,
}

/// POST `/settings/warnings`: who gets the early-warning emails (an endpoint failing for
/// `endpoint_warn_after`): the notification address, another one, or nobody.
pub async fn set_warnings(
    req: HttpRequest,
    session: Session,
    form: web::Form<WarningForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    match WarningRecipient::parse_choice(&form.recipient, &form.address) {
        Ok(recipient) => {
            session::store_of(&req)?
                .set_warning_recipient(session.tenant, &recipient)
                .await?;
            Ok(see_other("/settings?done=warnings#warnings"))
        }
        Err(message) => {
            let mut problems = Problems::new();
            let field = if form.recipient == "other" {
                "warn_address"
            } else {
                "warn_recipient"
            };
            problems.add(field, message);
            refused(
                &req,
                session,
                Extra {
                    warn: Some((form.recipient.clone(), form.address.clone(), problems)),
                    ..Extra::default()
                },
            )
            .await
        }
    }
}

#[derive(Deserialize)]
pub struct PortalForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    display_name: String,
    #[serde(default)]
    logo_url: String,
    #[serde(default)]
    color: String,
    /// Present: the dark theme.
    dark: Option<String>,
    #[serde(default)]
    allowed_origins: String,
    /// Present: customers' endpoints go to public addresses only.
    public_endpoints_only: Option<String>,
    /// Present: the customer's endpoint form has no "Advanced" part.
    hide_advanced: Option<String>,
}

/// POST `/settings/portal`: the app portal's branding and the sites that may embed it.
pub async fn set_portal(
    req: HttpRequest,
    session: Session,
    form: web::Form<PortalForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let parsed = PortalSettings::parse(
        &form.display_name,
        &form.logo_url,
        &form.color,
        form.dark.is_some(),
        &form.allowed_origins,
    );
    match parsed {
        Ok(mut settings) => {
            settings.public_endpoints_only = form.public_endpoints_only.is_some();
            settings.hide_advanced = form.hide_advanced.is_some();
            session::store_of(&req)?
                .set_portal_settings(session.tenant, &settings)
                .await?;
            Ok(see_other("/settings?done=portal"))
        }
        Err(problems) => {
            let text: Vec<String> = problems.into_iter().map(|(_, m)| m).collect();
            let portal = PortalView {
                display_name: form.display_name.clone(),
                logo_url: form.logo_url.clone(),
                color: form.color.clone(),
                dark: form.dark.is_some(),
                allowed_origins: form.allowed_origins.clone(),
                public_endpoints_only: form.public_endpoints_only.is_some(),
                hide_advanced: form.hide_advanced.is_some(),
                accent_note: None,
            };
            refused(
                &req,
                session,
                Extra {
                    error: Some(text.join(" ")),
                    portal: Some(portal),
                    ..Extra::default()
                },
            )
            .await
        }
    }
}

#[derive(Deserialize)]
pub struct PresetForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    preset: String,
}

/// POST `/settings/preset`: how failed attempts are classified for the tenant's endpoints
/// that choose no `statusPreset` (empty: the server's choice).
pub async fn set_preset(
    req: HttpRequest,
    session: Session,
    form: web::Form<PresetForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let preset =
        match form.preset.as_str() {
            "" => None,
            other => match other.parse::<StatusPreset>() {
                Ok(p) => Some(p),
                Err(_) => {
                    let known: Vec<&str> = StatusPreset::ALL.map(StatusPreset::as_str).to_vec();
                    return refused(&req, session, Extra {
                        error: Some(format!(
                            "“{other}” is not a preset; choose one of {}, or the server's choice.",
                            known.join(", ")
                        )),
                        ..Extra::default()
                    },
                )
                .await;
                }
            },
        };
    session::store_of(&req)?
        .set_status_preset(session.tenant, preset)
        .await?;
    Ok(see_other("/settings?done=preset"))
}

#[derive(Deserialize)]
pub struct RetentionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    payload_days: String,
    #[serde(default)]
    metadata_days: String,
}

/// POST `/settings/retention`: how many days the tenant's payloads and messages are kept
/// (blank: the server's default), within the server's `max_retention`.
pub async fn set_retention(
    req: HttpRequest,
    session: Session,
    form: web::Form<RetentionForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let max = crate::service_config(&req)?.max_retention;
    let parse = |v: &str| match v.trim() {
        "" => Ok(None),
        t => t.parse::<u32>().map(Some).map_err(|_| ()),
    };
    let days = match (parse(&form.payload_days), parse(&form.metadata_days)) {
        (Ok(payload), Ok(metadata)) => {
            let days = RetentionDays { payload, metadata };
            service::rules::retention(days, max).map_err(|_| ())
        }
        _ => Err(()),
    };
    match days {
        Ok(days) => {
            session::store_of(&req)?
                .set_retention(session.tenant, days)
                .await?;
            Ok(see_other("/settings?done=retention"))
        }
        Err(()) => {
            let typed = (form.payload_days.clone(), form.metadata_days.clone());
            refused(
                &req,
                session,
                Extra {
                    error: Some(format!(
                        "Give each retention as a whole number of days from 1 to {}, or leave it \
                         blank for the server's default.",
                        max_days(max)
                    )),
                    retention: Some(typed),
                    ..Extra::default()
                },
            )
            .await
        }
    }
}

/// Operational-webhook endpoints listed on the page.
const OPERATIONAL_SHOWN: u64 = 50;

async fn operational_rows(
    store: &store::Store,
    tenant: domain::ids::TenantId,
) -> Result<Vec<OperationalRow>, PageError> {
    let page =
        service::operational::list(store, tenant, &ListParams::first(OPERATIONAL_SHOWN)).await?;
    let mut rows = Vec::with_capacity(page.data.len());
    for ep in page.data {
        let secret = store
            .active_secrets(tenant, ep.id, domain::Timestamp::now())
            .await?
            .into_iter()
            .next()
            .and_then(|s| domain::signing::EndpointKey::parse(&s.secret).ok())
            .map(|k| k.shareable())
            .unwrap_or_default();
        rows.push(OperationalRow {
            id: ep.id.to_string(),
            types: match ep.filter_types()? {
                Some(t) if !t.is_empty() => t.join(", "),
                _ => "every event".to_owned(),
            },
            url: ep.url,
            description: ep.description,
            disabled_reason: ep.disabled.then(|| ep.disabled_reason.unwrap_or_default()),
            secret,
        });
    }
    Ok(rows)
}

/// The field of the Settings form a service problem belongs under.
fn operational_field(field: &str) -> &'static str {
    match field {
        "url" => "ops_url",
        "description" => "ops_description",
        "eventTypes" | "filterTypes" => "ops_types",
        _ => "",
    }
}

/// POST `/settings/operational`: adds an operational-webhook endpoint (URL, description,
/// the event types it gets: none ticked is every one), with a new signing secret.
pub async fn add_operational(
    req: HttpRequest,
    session: Session,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, PageError> {
    let mut csrf = String::new();
    let mut typed = OperationalForm::default();
    for (k, v) in form.into_inner() {
        match k.as_str() {
            "csrf" => csrf = v,
            "url" => typed.url = v,
            "description" => typed.description = v,
            "types" => typed.types.push(v),
            _ => {}
        }
    }
    session.check_csrf(&req, &csrf)?;
    let mut problems = Problems::new();
    if typed.url.trim().is_empty() {
        problems.add("ops_url", "Enter the URL that receives the events.");
    }
    if problems.is_empty() {
        let store = session::store_of(&req)?;
        let cfg = crate::service_config(&req)?;
        let new = store::NewEndpoint {
            url: typed.url.trim().to_owned(),
            description: typed.description.trim().to_owned(),
            filter_types: (!typed.types.is_empty()).then(|| typed.types.clone()),
            ..Default::default()
        };
        let secret = domain::signing::EndpointKey::generate(
            domain::signing::KeyType::Hmac,
            &mut rand::rng(),
        );
        match service::operational::create(store, cfg, session.tenant, new, secret).await {
            Ok(_) => return Ok(see_other("/settings?done=operational#operational-webhooks")),
            Err(service::ServiceError::Invalid(found)) => {
                for f in found {
                    let field = operational_field(&f.field);
                    if field.is_empty() || problems.of(field).is_none() {
                        problems.add(field, f.msg);
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    refused(
        &req,
        session,
        Extra {
            ops: Some((typed, problems)),
            ..Extra::default()
        },
    )
    .await
}

/// POST `/settings/operational/{endpoint_id}/delete`.
pub async fn remove_operational(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let ep = service::operational::get(store, session.tenant, &path).await?;
    store.delete_endpoint(session.tenant, &ep).await?;
    Ok(see_other(
        "/settings?done=operational-removed#operational-webhooks",
    ))
}
