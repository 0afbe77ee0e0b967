//! `/sources`: the tenant's inbound sources (issue 21): where senders post, how requests are
//! verified, which application forwards the events, and a link to the events each received.
//! Sources are created, changed and deleted here with the API's rules (`service::inbound`);
//! each source's page lists the requests it refused (its Requests view).

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::ids::RefusalId;
use domain::inbound::{GenericHmac, Scheme};
use serde::Deserialize;
use service::ServiceError;
use service::inbound::{SourceFields, SourceSpec};
use store::{Source, StoreError};

use crate::auth::{SignupConfig, see_other};
use crate::error::PageError;
use crate::session::{self, Session, SessionKind};
use crate::views::{self, RefusalRow, SourceFormPage, SourcePage, SourceRow, SourcesPage};
use crate::when::When;

/// Requests listed per page of a source's Requests view.
const REQUESTS_PER_PAGE: u64 = 50;
/// Applications offered in the form's list (the tenant's first, by creation).
const APPS_OFFERED: u64 = 250;

/// The dashboard's session: sources are the tenant's, never a portal customer's.
fn tenant_only(session: &Session) -> Result<(), PageError> {
    match session.kind {
        SessionKind::Tenant { .. } => Ok(()),
        SessionKind::Portal { .. } => Err(PageError::NotFound),
    }
}

fn public_url(req: &HttpRequest) -> String {
    req.app_data::<web::Data<SignupConfig>>()
        .map(|c| c.public_url.clone())
        .unwrap_or_default()
}

/// How a source's verification reads on the pages.
fn scheme_text(s: &Source) -> String {
    match s.settings.signed_tolerance() {
        Some(t) => format!(
            "{}, timestamps within {} s",
            s.settings.scheme.name(),
            t.as_secs()
        ),
        None => s.settings.scheme.name().to_owned(),
    }
}

/// GET `/sources`.
pub async fn list(req: HttpRequest, session: Session) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    let store = session::store_of(&req)?;
    let public_url = public_url(&req);
    let sources = store.list_sources(session.tenant).await?;
    let held: HashMap<_, _> = store
        .held_inbound_counts(session.tenant)
        .await?
        .into_iter()
        .map(|(id, n, since)| (id, (n, since)))
        .collect();
    let now = domain::Timestamp::now().as_millis();
    let mut rows = Vec::with_capacity(sources.len());
    // Sources often share an application: each is read once.
    let mut apps = HashMap::new();
    for s in sources {
        let app = match apps.get(&s.row.app_id) {
            Some(a) => a,
            None => {
                let a = store
                    .get_application(session.tenant, &s.row.app_id.to_string())
                    .await?;
                apps.entry(s.row.app_id).or_insert(a)
            }
        };
        let app: store::entities::application::Model = app.clone();
        let tag = domain::inbound::source_tag(&s.row.name);
        let o = &s.settings.ordering;
        let ordering = match (&o.key_pointer, &o.sequence_pointer, o.hold_gap_secs) {
            (_, _, 0) => "arrival order".to_owned(),
            (None, None, hold) => format!("by webhook-ordering-key; gaps held {hold} s"),
            (k, q, hold) => format!(
                "key {}, sequence {}; gaps held {hold} s",
                k.as_deref().unwrap_or("webhook-ordering-key"),
                q.as_deref().unwrap_or("webhook-sequence")
            ),
        };
        let held = held
            .get(&s.row.id)
            .map(|(n, since)| format!("{n}, the oldest for {} s", (now - since).max(0) / 1000));
        rows.push(SourceRow {
            ordering,
            held,
            duplicates: s.row.duplicates,
            refused: s.row.refused,
            last_refused: s.row.last_refused_at.map(When::at_ms),
            url: domain::inbound::source_url(&public_url, &s.row.id),
            scheme: scheme_text(&s),
            event_type: s.row.event_type.clone(),
            events_href: format!(
                "{}/app/{}/msg?tag={}",
                session.root,
                app.id,
                views::query_value(&tag)
            ),
            id: s.row.id.to_string(),
            declared: s.row.declared,
            app_id: app.id.to_string(),
            app_name: app.name,
            created: When::at_ms(s.row.created_at),
            name: s.row.name,
        });
    }
    let notice = web::Query::<Done>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().deleted)
        .map(|name| format!("Source “{name}” deleted."));
    let view = SourcesPage {
        csrf: Some(session.csrf),
        root: session.root,
        sources: rows,
        notice,
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

#[derive(Deserialize)]
struct Done {
    deleted: Option<String>,
    saved: Option<String>,
}

#[derive(Deserialize)]
pub struct RequestsQuery {
    before: Option<String>,
}

/// GET `/sources/{source_id}`: the source and its Requests view (refused requests, newest
/// first, [`REQUESTS_PER_PAGE`] a page).
pub async fn show(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    query: web::Query<RequestsQuery>,
) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    let store = session::store_of(&req)?;
    let source = store.get_source(session.tenant, &path).await?;
    let app = store
        .get_application(session.tenant, &source.row.app_id.to_string())
        .await?;
    let before = query
        .before
        .as_deref()
        .map(|b| b.parse::<RefusalId>())
        .transpose()
        .map_err(|_| PageError::bad_input("That page of requests does not exist."))?;
    let refusals = store
        .list_refusals(session.tenant, source.row.id, before, REQUESTS_PER_PAGE)
        .await?;
    let older = (refusals.len() as u64 == REQUESTS_PER_PAGE)
        .then(|| refusals.last().map(|r| r.id.to_string()))
        .flatten();
    let requests = refusals.into_iter().map(RefusalRow::of).collect();
    let saved = web::Query::<Done>::from_query(req.query_string())
        .ok()
        .and_then(|q| q.into_inner().saved)
        .is_some();
    let view = SourcePage {
        csrf: Some(session.csrf),
        root: session.root,
        id: source.row.id.to_string(),
        url: domain::inbound::source_url(&public_url(&req), &source.row.id),
        scheme: scheme_text(&source),
        event_type: source.row.event_type.clone(),
        app_id: app.id.to_string(),
        app_name: app.name,
        declared: source.row.declared,
        refused: source.row.refused,
        unrecorded: source.row.unrecorded,
        name: source.row.name,
        requests,
        paged: before.is_some(),
        older,
        notice: saved.then(|| "Source saved.".to_owned()),
        kept: store::REFUSALS_KEPT,
        days: store::REFUSAL_RETENTION.as_secs() / 86_400,
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

/// The source form's fields, as typed.
#[derive(Deserialize, Default, Clone)]
pub struct SourceForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub app: String,
    #[serde(default)]
    pub event_type: String,
    #[serde(default)]
    pub scheme: String,
    #[serde(default)]
    pub secret: String,
    #[serde(default)]
    pub hmac_header: String,
    #[serde(default)]
    pub hmac_algorithm: String,
    #[serde(default)]
    pub hmac_encoding: String,
    #[serde(default)]
    pub hmac_prefix: String,
    #[serde(default)]
    pub hmac_timestamp_header: String,
    #[serde(default)]
    pub hmac_id_header: String,
    #[serde(default)]
    pub tolerance: String,
    #[serde(default)]
    pub key_pointer: String,
    #[serde(default)]
    pub sequence_pointer: String,
    #[serde(default)]
    pub hold_gap: String,
}

impl SourceForm {
    /// A source's settings as the form shows them (never its secret).
    fn of(s: &Source) -> SourceForm {
        let mut f = SourceForm {
            name: s.row.name.clone(),
            app: s.row.app_id.to_string(),
            event_type: s.row.event_type.clone(),
            scheme: s.settings.scheme.name().to_owned(),
            tolerance: s
                .settings
                .tolerance_secs
                .map(|t| t.to_string())
                .unwrap_or_default(),
            key_pointer: s.settings.ordering.key_pointer.clone().unwrap_or_default(),
            sequence_pointer: s
                .settings
                .ordering
                .sequence_pointer
                .clone()
                .unwrap_or_default(),
            hold_gap: s.settings.ordering.hold_gap_secs.to_string(),
            ..SourceForm::default()
        };
        if let Scheme::Hmac(h) = &s.settings.scheme {
            f.hmac_header = h.header.clone();
            f.hmac_algorithm = json_name(&h.algorithm);
            f.hmac_encoding = json_name(&h.encoding);
            f.hmac_prefix = h.prefix.clone();
            f.hmac_timestamp_header = h.timestamp_header.clone().unwrap_or_default();
            f.hmac_id_header = h.id_header.clone().unwrap_or_default();
        }
        f
    }
}

fn json_name(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// Problems by form field.
pub type FieldErrors = HashMap<&'static str, String>;

/// The form field an API field's problem is shown under.
fn form_field(api_field: &str) -> &'static str {
    match api_field {
        "name" => "name",
        "appId" => "app",
        "eventType" => "event_type",
        "toleranceSecs" => "tolerance",
        "ordering" => "ordering",
        f if f.starts_with("verification") => "secret",
        _ => "form",
    }
}

fn note(errors: &mut FieldErrors, field: &'static str, msg: impl Into<String>) {
    let msg = msg.into();
    let mut msg = msg.trim_end_matches('.').to_owned();
    if let Some(first) = msg.get(..1) {
        msg.replace_range(..1, &first.to_uppercase());
    }
    errors.entry(field).or_insert(format!("{msg}."));
}

/// The form's text as the API's members, checked by the API's rules (`SourceSpec::new`).
/// A secret left empty keeps `current`'s, when the scheme is the same.
fn spec_of(f: &SourceForm, current: Option<&Scheme>) -> Result<SourceSpec, FieldErrors> {
    let mut errors = FieldErrors::new();
    let lines: Vec<String> = f
        .secret
        .lines()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let one = |errors: &mut FieldErrors| -> String {
        // The secret kept when the field is left empty: the current one, of the same scheme.
        let kept = current
            .filter(|c| c.name() == f.scheme)
            .and_then(|c| match c {
                Scheme::Hmac(h) => Some(h.secret.as_str()),
                vendor => vendor.vendor_secret(),
            });
        match (lines.as_slice(), kept) {
            ([], Some(secret)) => secret.to_owned(),
            ([s], _) => s.clone(),
            ([], _) => {
                note(errors, "secret", "Enter the secret the sender signs with");
                String::new()
            }
            _ => {
                note(errors, "secret", "This scheme takes one secret");
                String::new()
            }
        }
    };
    let opt = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let verification = match f.scheme.as_str() {
        "standard-webhooks" => {
            let secrets = match (lines.is_empty(), current) {
                (true, Some(Scheme::StandardWebhooks { secrets })) => secrets.clone(),
                (true, _) => {
                    note(
                        &mut errors,
                        "secret",
                        "Enter the sender's signing secret (whsec_…)",
                    );
                    Vec::new()
                }
                (false, _) => lines.clone(),
            };
            serde_json::json!({"scheme": "standard-webhooks", "secrets": secrets})
        }
        // Meta's verify token is kept as it was (set through the Ingest API or the source API).
        "meta" => serde_json::json!({
            "scheme": "meta",
            "secret": one(&mut errors),
            "verify_token": match current {
                Some(Scheme::Meta { verify_token, .. }) => verify_token.clone(),
                _ => None,
            },
        }),
        name if Scheme::ONE_SECRET.contains(&name) => {
            serde_json::json!({"scheme": f.scheme, "secret": one(&mut errors)})
        }
        "hmac" => {
            if f.hmac_header.trim().is_empty() {
                note(
                    &mut errors,
                    "hmac_header",
                    "Name the header that carries the signature",
                );
            }
            let h = GenericHmac {
                secret: one(&mut errors),
                header: f.hmac_header.trim().to_owned(),
                algorithm: serde_json::from_value(serde_json::json!(f.hmac_algorithm))
                    .unwrap_or_default(),
                encoding: serde_json::from_value(serde_json::json!(f.hmac_encoding))
                    .unwrap_or_default(),
                prefix: f.hmac_prefix.trim().to_owned(),
                timestamp_header: opt(&f.hmac_timestamp_header),
                id_header: opt(&f.hmac_id_header),
            };
            let mut v = serde_json::to_value(Scheme::Hmac(h)).expect("plain data");
            v["scheme"] = "hmac".into();
            v
        }
        "none" => serde_json::json!({"scheme": "none"}),
        _ => {
            note(&mut errors, "scheme", "Choose how requests are verified");
            serde_json::Value::Null
        }
    };
    let tolerance_secs = match f.tolerance.trim() {
        "" => None,
        t => match t.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                note(&mut errors, "tolerance", "Enter a whole number of seconds");
                None
            }
        },
    };
    let mut ordering = serde_json::Map::new();
    if let Some(p) = opt(&f.key_pointer) {
        ordering.insert("keyPointer".into(), p.into());
    }
    if let Some(p) = opt(&f.sequence_pointer) {
        ordering.insert("sequencePointer".into(), p.into());
    }
    match f.hold_gap.trim() {
        "" => {}
        t => match t.parse::<u64>() {
            Ok(n) => {
                ordering.insert("holdGapSecs".into(), n.into());
            }
            Err(_) => note(
                &mut errors,
                "ordering",
                "Hold time: a whole number of seconds",
            ),
        },
    }
    if f.name.trim().is_empty() {
        note(&mut errors, "name", "Give the source a name");
    }
    if f.event_type.trim().is_empty() {
        note(
            &mut errors,
            "event_type",
            "Enter the event type of what arrives",
        );
    }
    if f.app.trim().is_empty() {
        note(
            &mut errors,
            "app",
            "Choose the application that forwards the events",
        );
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let fields = SourceFields {
        name: f.name.trim().to_owned(),
        app: f.app.trim().to_owned(),
        event_type: f.event_type.trim().to_owned(),
        verification,
        ordering: Some(serde_json::Value::Object(ordering)),
        tolerance_secs,
    };
    SourceSpec::new(fields).map_err(|e| {
        field_errors(e).unwrap_or_else(|e| {
            let mut errors = FieldErrors::new();
            note(&mut errors, "form", e.to_string());
            errors
        })
    })
}

/// A service refusal as problems under the form's fields; `None` for a failure that is not
/// the input's.
fn field_errors(e: ServiceError) -> Result<FieldErrors, ServiceError> {
    let mut errors = FieldErrors::new();
    match e {
        ServiceError::Invalid(found) => {
            for f in found {
                note(&mut errors, form_field(&f.field), f.msg);
            }
        }
        ServiceError::Store(StoreError::Conflict { .. }) => {
            note(
                &mut errors,
                "name",
                "You have a source of this name already",
            );
        }
        ServiceError::Store(StoreError::NotFound { .. }) => {
            note(&mut errors, "app", "Choose one of your applications");
        }
        ServiceError::Conflict(text) => note(&mut errors, "form", text),
        e => return Err(e),
    }
    Ok(errors)
}

async fn form_page(
    req: &HttpRequest,
    session: Session,
    status: StatusCode,
    editing: Option<&Source>,
    form: SourceForm,
    errors: FieldErrors,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(req)?;
    let apps = store
        .list_applications(
            session.tenant,
            Default::default(),
            &store::ListParams::first(APPS_OFFERED),
        )
        .await?
        .data
        .into_iter()
        .map(|a| (a.id.to_string(), a.name))
        .collect();
    let page = SourceFormPage {
        csrf: Some(session.csrf),
        root: session.root,
        id: editing.map(|s| s.row.id.to_string()),
        secret_set: editing
            .map(|s| s.settings.scheme.name() != "none")
            .unwrap_or(false),
        current_scheme: editing
            .map(|s| s.settings.scheme.name().to_owned())
            .unwrap_or_default(),
        apps,
        form,
        errors,
    };
    Ok(views::render(status, &page)?)
}

/// GET `/sources/new`.
pub async fn new_form(req: HttpRequest, session: Session) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    let form = SourceForm {
        scheme: "standard-webhooks".into(),
        hold_gap: domain::inbound::DEFAULT_HOLD_GAP_SECS.to_string(),
        ..SourceForm::default()
    };
    form_page(
        &req,
        session,
        StatusCode::OK,
        None,
        form,
        FieldErrors::new(),
    )
    .await
}

/// POST `/sources/new`.
pub async fn create(
    req: HttpRequest,
    session: Session,
    form: web::Form<SourceForm>,
) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let form = form.into_inner();
    let errors = match spec_of(&form, None) {
        Ok(spec) => match service::inbound::create_source(store, session.tenant, &spec).await {
            Ok(s) => return Ok(see_other(&format!("/sources/{}?saved=1", s.row.id))),
            Err(e) => field_errors(e)?,
        },
        Err(errors) => errors,
    };
    form_page(
        &req,
        session,
        StatusCode::UNPROCESSABLE_ENTITY,
        None,
        form,
        errors,
    )
    .await
}

/// A source this session may change: the tenant's, not declared by a configuration file.
async fn editable(req: &HttpRequest, session: &Session, id: &str) -> Result<Source, PageError> {
    let source = session::store_of(req)?
        .get_source(session.tenant, id)
        .await?;
    if source.row.declared {
        return Err(PageError::BadInput(
            StatusCode::CONFLICT,
            format!(
                "The source “{}” is defined in the configuration file: change or remove it there.",
                source.row.name
            ),
        ));
    }
    Ok(source)
}

/// GET `/sources/{source_id}/edit`.
pub async fn edit_form(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    let source = editable(&req, &session, &path).await?;
    let form = SourceForm::of(&source);
    form_page(
        &req,
        session,
        StatusCode::OK,
        Some(&source),
        form,
        FieldErrors::new(),
    )
    .await
}

/// POST `/sources/{source_id}/edit`.
pub async fn update(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<SourceForm>,
) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    session.check_csrf(&req, &form.csrf)?;
    let source = editable(&req, &session, &path).await?;
    let store = session::store_of(&req)?;
    let mut form = form.into_inner();
    // The name is not a field of the edit form: it tags the source's events.
    form.name = source.row.name.clone();
    let errors = match spec_of(&form, Some(&source.settings.scheme)) {
        Ok(spec) => {
            match service::inbound::change_source(store, session.tenant, &path, &spec).await {
                Ok(s) => return Ok(see_other(&format!("/sources/{}?saved=1", s.row.id))),
                Err(e) => field_errors(e)?,
            }
        }
        Err(errors) => errors,
    };
    form_page(
        &req,
        session,
        StatusCode::UNPROCESSABLE_ENTITY,
        Some(&source),
        form,
        errors,
    )
    .await
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// POST `/sources/{source_id}/delete` (the button asks first).
pub async fn delete(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    tenant_only(&session)?;
    session.check_csrf(&req, &form.csrf)?;
    let source = editable(&req, &session, &path).await?;
    session::store_of(&req)?
        .delete_source(session.tenant, &path)
        .await?;
    Ok(see_other(&format!(
        "/sources?deleted={}",
        views::query_value(&source.row.name)
    )))
}
