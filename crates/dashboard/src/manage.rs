//! Creating and changing things: applications (from the overview), endpoints (new and edit
//! forms), an endpoint's signing secret (reveal, rotate) and test events. The rules are the
//! `service` crate's, the same the API applies; this module only turns form text into values
//! and each field problem into a line under the form's label, all problems at once.

use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::Timestamp;
use domain::duration::format_duration;
use domain::portal::Capability;
use domain::signing::SigningSecret;
use serde::Deserialize;
use service::{FieldError, ServiceError, rules};
use store::entities::{application, endpoint};
use store::{NewApplication, NewEndpoint, Store};

use crate::auth::see_other;
use crate::endpoints::load;
use crate::error::PageError;
use crate::problems::Problems;
use crate::service_config;
use crate::session::{self, Session};
use crate::views::{self, EndpointFormPage, EndpointFormValues, MessagePage, SecretFragment};

/// How long the previous secret keeps signing after a rotation (as the API's default).
pub const ROTATION_GRACE: Duration = Duration::from_secs(24 * 3600);
/// The event type of test events.
pub const TEST_EVENT_TYPE: &str = "hookd.test";

#[derive(Deserialize)]
pub struct AppForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
}

/// POST `/app`: a new application, named on the overview.
pub async fn create_app(
    req: HttpRequest,
    session: Session,
    form: web::Form<AppForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let Ok(name) = rules::name("name", &form.name) else {
        let extra = crate::endpoints::OverviewExtra {
            error: Some("Give the application a name of 1 to 256 printable characters.".into()),
            app_name: form.name.clone(),
            ..Default::default()
        };
        return crate::endpoints::overview_page(
            &req,
            session,
            StatusCode::UNPROCESSABLE_ENTITY,
            extra,
        )
        .await;
    };
    let app = session::store_of(&req)?
        .create_application(
            session.tenant,
            NewApplication {
                name,
                ..NewApplication::default()
            },
        )
        .await?;
    Ok(see_other(&format!("/?created={}", app.id)))
}

#[derive(Deserialize)]
pub struct PortalForm {
    #[serde(default)]
    csrf: String,
    /// Present: show a link to hand to the customer instead of opening the portal.
    copy: Option<String>,
    /// Present (with `copy`): the link can look but not change anything.
    read_only: Option<String>,
}

/// How long "Open portal" lets the tenant look as their customer.
const OPEN_PORTAL_FOR: Duration = Duration::from_secs(3_600);

/// POST `/app/{app_id}/portal`: "Open portal" (the browser goes to a portal link valid for an
/// hour) or, with `copy`, "Create portal link" (the application's page shows a link for the
/// customer, valid for the API's default of seven days, this once).
pub async fn open_portal(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<PortalForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    let copy = form.copy.is_some();
    let expiry = if copy {
        store::PORTAL_MAX_EXPIRY
    } else {
        OPEN_PORTAL_FOR
    };
    let new = store::NewPortalToken {
        expiry,
        read_only: copy && form.read_only.is_some(),
        ..Default::default()
    };
    let (token, _) = store
        .create_portal_token(session.tenant, app.id, new)
        .await?;
    let url = store::portal_url(&crate::auth::base_url(&req), &token);
    if !copy {
        // The buttons' forms are not boosted (`hx-boost="false"`): a plain navigation.
        return Ok(see_other(&url));
    }
    crate::applications::with_new_link(&req, session, app, url).await
}

/// The form's label of an endpoint field, by the field's API name.
fn label(field: &str) -> &'static str {
    match field {
        "url" => "URL",
        "uid" => "uid",
        "description" => "Description",
        "filterTypes" => "Event types",
        "channels" => "Channels",
        "timeout" => "Timeout",
        "retryPolicy" => "Retry policy",
        "maxConcurrency" => "Max concurrency",
        "throttleRate" => "Throttle",
        "headers" => "Custom headers",
        "metadata" => "Metadata",
        _ => "Endpoint",
    }
}

/// The form field (its `name`) of an endpoint field, by the field's API name; "" for a
/// problem of the endpoint as a whole.
fn form_field(field: &str) -> &'static str {
    match field {
        "url" => "url",
        "description" => "description",
        "filterTypes" => "event_types",
        "channels" => "channels",
        "timeout" => "timeout",
        "retryPolicy" => "retry_policy",
        "maxConcurrency" => "max_concurrency",
        "throttleRate" => "throttle_rate",
        "headers" => "headers",
        _ => "",
    }
}

/// A field problem, for under its field and the form's list.
fn problem(e: &FieldError) -> (&'static str, String) {
    (
        form_field(&e.field),
        format!("{}: {}.", label(&e.field), e.msg.trim_end_matches('.')),
    )
}

/// Adds the service's `found` problems to `errors`.
fn add_all(errors: &mut Problems, found: &[FieldError]) {
    for (field, text) in found.iter().map(problem) {
        errors.add(field, text);
    }
}

/// The URL's own problems (syntax, the SSRF guard, a shared broker's namespace) put first in
/// `errors`, so one round trip shows everything.
async fn url_problems(
    store: &store::Store,
    cfg: &service::Config,
    session: &Session,
    url: &str,
    errors: &mut Problems,
) -> Result<(), PageError> {
    match service::endpoints::check_url(store, cfg, session.tenant, session.actor(), url).await {
        Ok(_) => Ok(()),
        Err(service::ServiceError::Invalid(found)) => {
            for (field, text) in found.iter().map(problem).rev() {
                errors.add_first(field, text);
            }
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// The form's text turned into an endpoint, or every problem with it. The text is parsed
/// here; the rules are the service's ([`service::endpoints::problems`]). Without `advanced`
/// (a portal whose tenant hides that part) the fields of "Advanced" keep `base`'s values,
/// whatever the request carries.
fn parse_form(
    f: &EndpointFormValues,
    base: NewEndpoint,
    advanced: bool,
) -> Result<NewEndpoint, Problems> {
    let mut errors = Problems::new();
    let mut new = base;
    new.url = f.url.trim().to_owned();
    if new.url.is_empty() {
        errors.add(
            "url",
            "URL: enter the address hookd should send webhooks to.",
        );
    }
    new.description = f.description.trim().to_owned();
    let list = |text: &str| -> Option<Vec<String>> {
        let items: Vec<String> = text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        (!items.is_empty()).then_some(items)
    };
    new.filter_types = if f.all_types() {
        None
    } else {
        let chosen = f.chosen_types();
        if chosen.is_empty() {
            errors.add(
                "event_types",
                "Event types: check at least one event type, or choose All event types.",
            );
        }
        Some(chosen).filter(|c| !c.is_empty())
    };
    if !advanced {
        add_all(&mut errors, &service::endpoints::problems(&new));
        return if errors.is_empty() {
            Ok(new)
        } else {
            Err(errors)
        };
    }
    new.channels = list(&f.channels);
    let mut parsed = |r: Result<i64, FieldError>| {
        r.map_err(|e| add_all(&mut errors, std::slice::from_ref(&e)))
            .ok()
    };
    new.timeout_ms = match f.timeout.trim() {
        "" => None,
        t => parsed(rules::timeout(t)),
    };
    new.retry_policy = match f.retry_policy.trim() {
        "" => None,
        text => serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| FieldError::new("retryPolicy", format!("not JSON: {e}")))
            .and_then(rules::retry_policy)
            .map_err(|e| add_all(&mut errors, std::slice::from_ref(&e)))
            .ok(),
    };
    // A number the rule refuses, or no number at all: the form says which numbers it takes.
    let mut number =
        |text: &str, field: &str, max: u32, rule: fn(u32) -> Option<i32>| match text.trim() {
            "" => None,
            t => {
                let n = t.parse::<u32>().ok().and_then(rule);
                if n.is_none() {
                    errors.add(
                        form_field(field),
                        format!("{}: enter a whole number from 1 to {max}.", label(field)),
                    );
                }
                n
            }
        };
    new.max_concurrency = number(
        &f.max_concurrency,
        "maxConcurrency",
        rules::MAX_CONCURRENCY,
        |n| rules::max_concurrency(n).ok(),
    );
    new.throttle_rate = number(
        &f.throttle_rate,
        "throttleRate",
        rules::MAX_THROTTLE_RATE,
        |n| rules::throttle_rate(Some(n)).ok().flatten(),
    );
    let mut headers = std::collections::BTreeMap::new();
    for (i, line) in f.headers.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => {
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            _ => errors.add(
                "headers",
                format!("Custom headers: line {} is not “Name: value”.", i + 1),
            ),
        }
    }
    new.headers = headers;
    if f.traceparent_shown {
        new.send_traceparent = f.send_traceparent;
    }
    add_all(&mut errors, &service::endpoints::problems(&new));
    if errors.is_empty() {
        Ok(new)
    } else {
        Err(errors)
    }
}

/// The form's values for a stored endpoint.
/// The form's values for `ep`, with its `headers` (opened: [`store::Store::endpoint_headers`]).
fn values_of(
    ep: &endpoint::Model,
    headers: std::collections::BTreeMap<String, String>,
) -> Result<EndpointFormValues, store::StoreError> {
    let list = |v: Option<Vec<String>>| v.map(|v| v.join(", ")).unwrap_or_default();
    let types = ep.filter_types()?;
    Ok(EndpointFormValues {
        csrf: String::new(),
        url: ep.url.clone(),
        description: ep.description.clone(),
        filter: if types.is_some() { "some" } else { "all" }.to_owned(),
        event_types: types.unwrap_or_default(),
        channels: list(ep.channels()?),
        timeout: ep
            .timeout_ms
            .map(|ms| format_duration(Duration::from_millis(ms.max(0) as u64)))
            .unwrap_or_default(),
        max_concurrency: ep
            .max_concurrency
            .map(|n| n.to_string())
            .unwrap_or_default(),
        throttle_rate: ep.throttle_rate.map(|n| n.to_string()).unwrap_or_default(),
        retry_policy: ep.retry_policy.clone().unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("\n"),
        send_traceparent: ep.send_traceparent,
        traceparent_shown: false,
    })
}

async fn form_page(
    req: &HttpRequest,
    session: Session,
    status: StatusCode,
    app: application::Model,
    ep_id: Option<String>,
    form: EndpointFormValues,
    errors: Problems,
) -> Result<HttpResponse, PageError> {
    // Endpoints filter only on defined event types: the picker offers the live ones.
    let (picker, more_event_types) = picker_items(session::store_of(req)?, &session, &form).await?;
    let portal = session.actor() == service::endpoints::Actor::Portal;
    let advanced = has_advanced(req, &session);
    // In the portal the advanced part starts closed, unless it holds what was just refused.
    let advanced_open = !portal
        || (!errors.is_empty()
            && [
                &form.channels,
                &form.timeout,
                &form.max_concurrency,
                &form.throttle_rate,
                &form.retry_policy,
                &form.headers,
            ]
            .iter()
            .any(|v| !v.trim().is_empty()));
    let errors = if portal {
        errors.map(crate::customer::words)
    } else {
        errors
    };
    let page = EndpointFormPage {
        advanced,
        advanced_open,
        picker,
        more_event_types,
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        ep_id,
        form: EndpointFormValues {
            csrf: String::new(),
            ..form
        },
        errors,
    };
    Ok(views::render(status, &page)?)
}

/// Whether the endpoint form has its "Advanced" part: always on the dashboard; in the portal
/// unless the tenant hides it.
fn has_advanced(req: &HttpRequest, session: &Session) -> bool {
    use actix_web::HttpMessage;
    session.actor() != service::endpoints::Actor::Portal
        || !req
            .extensions()
            .get::<domain::portal::PortalSettings>()
            .is_some_and(|s| s.hide_advanced)
}

/// The picker's checkboxes: the tenant's live event types (the first
/// [`views::PICKER_TYPES`]) and whatever the form has checked besides (an archived type the
/// endpoint chose before stays shown and checked, marked retired), sorted by name.
async fn picker_items(
    store: &Store,
    session: &Session,
    form: &EndpointFormValues,
) -> Result<(Vec<views::PickerItem>, bool), PageError> {
    /// Characters of a description shown beside its checkbox.
    const DESCRIPTION_SHOWN: usize = 120;
    let live = store
        .list_event_types(
            session.tenant,
            false,
            &store::ListParams::first(views::PICKER_TYPES),
        )
        .await?;
    let mut chosen = form.chosen_types();
    chosen.truncate(rules::MAX_FILTER_TYPES);
    let mut items: Vec<views::PickerItem> = live
        .data
        .into_iter()
        .map(|t| {
            let mut description: String = t.description.chars().take(DESCRIPTION_SHOWN).collect();
            if description.len() < t.description.len() {
                description.push('…');
            }
            views::PickerItem {
                checked: chosen.contains(&t.name),
                name: t.name,
                description,
                retired: false,
            }
        })
        .collect();
    let others: Vec<String> = chosen
        .into_iter()
        .filter(|n| !items.iter().any(|i| &i.name == n))
        .collect();
    let retired = store.unknown_event_types(session.tenant, &others).await?;
    items.extend(others.into_iter().map(|name| views::PickerItem {
        retired: retired.contains(&name),
        checked: true,
        description: String::new(),
        name,
    }));
    items.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((items, !live.done))
}

/// What the service refused, as lines of the form's error list; failures that are not about
/// the input become an error page.
fn form_problems(e: ServiceError) -> Result<Problems, PageError> {
    match e {
        ServiceError::Invalid(found) => {
            let mut errors = Problems::new();
            add_all(&mut errors, &found);
            Ok(errors)
        }
        ServiceError::Store(store::StoreError::Conflict { field }) => {
            let mut errors = Problems::new();
            errors.add(form_field(field), format!("{field} already exists"));
            Ok(errors)
        }
        other => Err(other.into()),
    }
}

/// GET `/app/{app}/endpoint/new`.
pub async fn new_form(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    session.require(Capability::ManageEndpoint)?;
    let app = session.app(session::store_of(&req)?, &path).await?;
    form_page(
        &req,
        session,
        StatusCode::OK,
        app,
        None,
        EndpointFormValues::default(),
        Problems::new(),
    )
    .await
}

/// POST `/app/{app}/endpoint/new`.
pub async fn create_endpoint(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, PageError> {
    let form = EndpointFormValues::from_pairs(form.into_inner());
    session.check_csrf(&req, &form.csrf)?;
    session.require(Capability::ManageEndpoint)?;
    let store = session::store_of(&req)?;
    let cfg = service_config(&req)?;
    let app = session.app(store, &path).await?;
    let new = match parse_form(&form, NewEndpoint::default(), has_advanced(&req, &session)) {
        Ok(new) => new,
        Err(mut errors) => {
            // The URL's own checks too, so one round trip shows everything.
            if !form.url.trim().is_empty() {
                url_problems(store, cfg, &session, &form.url, &mut errors).await?;
            }
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            return form_page(&req, session, status, app, None, form, errors).await;
        }
    };
    let secret = domain::signing::EndpointKey::Hmac(SigningSecret::generate(&mut rand::rng()));
    match service::endpoints::create(
        store,
        cfg,
        session.tenant,
        session.actor(),
        &app,
        new,
        secret,
    )
    .await
    {
        Ok(ep) => Ok(see_other(&format!(
            "{}/app/{}/endpoint/{}?done=created",
            session.root, app.id, ep.id
        ))),
        Err(e) => {
            let errors = form_problems(e)?;
            form_page(
                &req,
                session,
                StatusCode::UNPROCESSABLE_ENTITY,
                app,
                None,
                form,
                errors,
            )
            .await
        }
    }
}

/// GET `/app/{app}/endpoint/{ep}/edit`.
pub async fn edit_form(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    // The form shows the custom header values.
    session.require(Capability::ManageEndpoint)?;
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let values = values_of(&ep, store.endpoint_headers(&ep)?)?;
    form_page(
        &req,
        session,
        StatusCode::OK,
        app,
        Some(ep.id.to_string()),
        values,
        Problems::new(),
    )
    .await
}

/// POST `/app/{app}/endpoint/{ep}/edit`: the form's fields replace the stored ones; what the
/// form does not show (uid, metadata, status overrides, disabled) is kept.
pub async fn update_endpoint(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    form: web::Form<Vec<(String, String)>>,
) -> Result<HttpResponse, PageError> {
    let form = EndpointFormValues::from_pairs(form.into_inner());
    session.check_csrf(&req, &form.csrf)?;
    session.require(Capability::ManageEndpoint)?;
    let store = session::store_of(&req)?;
    let cfg = service_config(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let base = service::endpoints::as_new(store, &ep)?;
    let ep_id = ep.id;
    let new = match parse_form(&form, base, has_advanced(&req, &session)) {
        Ok(new) => new,
        Err(mut errors) => {
            let url = form.url.trim();
            if !url.is_empty() && url != ep.url {
                url_problems(store, cfg, &session, url, &mut errors).await?;
            }
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            let ep_id = Some(ep_id.to_string());
            return form_page(&req, session, status, app, ep_id, form, errors).await;
        }
    };
    match service::endpoints::update(store, cfg, session.tenant, session.actor(), ep, new).await {
        Ok(ep) => Ok(see_other(&format!(
            "{}/app/{}/endpoint/{}?done=saved",
            session.root, app.id, ep.id
        ))),
        Err(e) => {
            let errors = form_problems(e)?;
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            let ep_id = Some(ep_id.to_string());
            form_page(&req, session, status, app, ep_id, form, errors).await
        }
    }
}

/// GET `/app/{app}/endpoint/{ep}/secret`: the current signing secret, as a fragment for htmx
/// ("Reveal secret") or as a page without it.
pub async fn secret(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    session.require(Capability::ViewEndpointSecret)?;
    let store = session::store_of(&req)?;
    let (_, ep) = load(store, &session, &path.0, &path.1).await?;
    let stored = store
        .active_secrets(session.tenant, ep.id, Timestamp::now())
        .await?
        .into_iter()
        .next()
        .ok_or(PageError::NotFound)?
        .secret;
    // An ed25519 endpoint shows its public key: the private one never leaves hookd.
    let secret = domain::signing::EndpointKey::parse(&stored)
        .map_err(|e| PageError::Internal(e.to_string()))?
        .shareable();
    if req.headers().contains_key("HX-Request") {
        Ok(views::render(StatusCode::OK, &SecretFragment { secret })?)
    } else {
        let page = MessagePage {
            csrf: Some(session.csrf),
            root: session.root,
            title: "Signing secret",
            text: secret,
        };
        Ok(views::render(StatusCode::OK, &page)?)
    }
}

/// Makes a new secret current; the old one keeps signing for [`ROTATION_GRACE`].
/// `key_type`: `None` keeps the current key's kind (HMAC or ed25519).
pub async fn rotate_secret(
    store: &Store,
    session: &Session,
    ep: &endpoint::Model,
    key_type: Option<&str>,
) -> Result<(), PageError> {
    service::endpoints::rotate_key(store, session.tenant, ep, None, key_type, ROTATION_GRACE)
        .await?;
    Ok(())
}

/// Sends a `hookd.test` message, or the example of the chosen `event_type`, to this endpoint
/// only (whatever its filters), through the same service as the API's `send-example`.
/// Returns the message id.
pub async fn send_test_event(
    req: &HttpRequest,
    store: &Store,
    session: &Session,
    app: &application::Model,
    ep: &endpoint::Model,
    event_type: &str,
) -> Result<String, PageError> {
    if ep.disabled {
        return Err(PageError::bad_input(
            "This endpoint is disabled; enable it before sending a test event.",
        ));
    }
    let chosen = event_type.trim();
    let (event_type, payload) = if chosen.is_empty() || chosen == TEST_EVENT_TYPE {
        let payload = serde_json::json!({
            "type": TEST_EVENT_TYPE,
            "endpointId": ep.id,
            "sentAt": domain::time::rfc3339::format(Timestamp::now()),
            "note": "A test event sent from the hookd dashboard.",
        });
        (TEST_EVENT_TYPE, payload.to_string().into_bytes())
    } else {
        // The chosen event type's example, as the API's send-example sends it.
        let example = service::endpoints::example_payload(store, session.tenant, chosen, 0)
            .await?
            .ok_or_else(|| {
                PageError::bad_input(format!(
                    "The event type {chosen} has no example payload to send; add one to its \
                     schema's \"examples\", or send the test event."
                ))
            })?;
        (chosen, example)
    };
    let created = service::endpoints::send_to_endpoint(
        store,
        service_config(req)?,
        session.tenant,
        app,
        ep,
        event_type,
        payload,
    )
    .await?;
    Ok(created.message.id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(f: impl FnOnce(&mut EndpointFormValues)) -> EndpointFormValues {
        let mut v = EndpointFormValues {
            url: "https://example.com/hook".into(),
            ..EndpointFormValues::default()
        };
        f(&mut v);
        v
    }

    #[test]
    fn the_trace_context_box_decides_only_where_the_form_shows_it() {
        let on = NewEndpoint {
            send_traceparent: true,
            ..NewEndpoint::default()
        };
        let parse = |f: EndpointFormValues, base: NewEndpoint| {
            parse_form(&f, base, true).expect("valid").send_traceparent
        };
        let shown = |checked: bool| {
            form(move |v| {
                v.traceparent_shown = true;
                v.send_traceparent = checked;
            })
        };
        assert!(parse(shown(true), NewEndpoint::default()));
        assert!(!parse(shown(false), on.clone()));
        // The portal's form has no such box: the stored choice stays.
        assert!(parse(form(|_| {}), on));
        let posted = EndpointFormValues::from_pairs(vec![
            ("traceparent_shown".into(), "1".into()),
            ("send_traceparent".into(), "1".into()),
        ]);
        assert!(posted.traceparent_shown && posted.send_traceparent);
    }

    #[test]
    fn empty_optional_fields_mean_the_defaults() {
        let new = parse_form(&form(|_| {}), NewEndpoint::default(), true).expect("valid");
        assert_eq!(new.url, "https://example.com/hook");
        assert_eq!(new.filter_types, None);
        assert_eq!(new.channels, None);
        assert_eq!(new.timeout_ms, None);
        assert_eq!(new.max_concurrency, None);
        assert_eq!(new.throttle_rate, None);
        assert_eq!(new.retry_policy, None);
    }

    #[test]
    fn without_the_advanced_part_its_fields_keep_the_stored_values() {
        let base = NewEndpoint {
            timeout_ms: Some(2000),
            max_concurrency: Some(3),
            retry_policy: Some(r#"{"delays":["1s"]}"#.into()),
            ..NewEndpoint::default()
        };
        let posted = form(|v| {
            v.timeout = "100s".into();
            v.max_concurrency = "".into();
            v.retry_policy = "{".into();
            v.headers = "X-Sneaky: 1".into();
        });
        let new = parse_form(&posted, base, false).expect("the advanced fields are not read");
        assert_eq!(new.timeout_ms, Some(2000));
        assert_eq!(new.max_concurrency, Some(3));
        assert_eq!(new.retry_policy.as_deref(), Some(r#"{"delays":["1s"]}"#));
        assert!(new.headers.is_empty());
    }

    #[test]
    fn the_picker_chooses_all_or_the_checked_types() {
        let checked = |filter: &str, types: &[&str]| {
            form(|v| {
                v.filter = filter.into();
                v.event_types = types.iter().map(|t| t.to_string()).collect();
            })
        };
        let base = NewEndpoint::default;
        // "All event types" wins over boxes left checked.
        let all = parse_form(&checked("all", &["a.b"]), base(), false).expect("valid");
        assert_eq!(all.filter_types, None);
        let some = parse_form(&checked("some", &["a.b", "c.d", "a.b"]), base(), false);
        assert_eq!(
            some.expect("valid").filter_types,
            Some(vec!["a.b".to_owned(), "c.d".to_owned()])
        );
        let none = parse_form(&checked("some", &[]), base(), false).expect_err("nothing checked");
        assert_eq!(
            none.of("event_types"),
            Some("Event types: check at least one event type, or choose All event types.")
        );
        assert_eq!(none.len(), 1);
        // Without the picker's radio (a script, an old page): the checked ones, else all.
        let bare = parse_form(&checked("", &["a.b"]), base(), false).expect("valid");
        assert_eq!(bare.filter_types, Some(vec!["a.b".to_owned()]));
        assert_eq!(
            parse_form(&checked("", &[]), base(), false)
                .expect("valid")
                .filter_types,
            None
        );
        // Repeated checkboxes arrive as repeated pairs.
        let posted = EndpointFormValues::from_pairs(vec![
            ("url".into(), "https://example.com/a".into()),
            ("filter".into(), "some".into()),
            ("event_types".into(), "a.b".into()),
            ("event_types".into(), "c.d".into()),
            ("unknown".into(), "ignored".into()),
        ]);
        assert_eq!(posted.chosen_types(), ["a.b", "c.d"]);
        assert!(!posted.all_types());
    }

    #[test]
    fn every_problem_is_reported() {
        let bad = form(|v| {
            v.url = " ".into();
            v.event_types = vec!["a.b, c d".into()];
            v.channels = "eu, x/y".into();
            v.timeout = "99ms".into();
            v.max_concurrency = "1001".into();
            v.throttle_rate = "-1".into();
            v.retry_policy = "{".into();
            v.headers = "no colon here\nwebhook-id: mine".into();
        });
        let errors = parse_form(&bad, NewEndpoint::default(), true).expect_err("invalid");
        assert_eq!(errors.len(), 9, "{errors:#?}");
        assert!(
            errors
                .messages()
                .any(|e| e == "Custom headers: line 1 is not “Name: value”.")
        );
        assert!(
            errors
                .messages()
                .any(|e| e.starts_with("Custom headers: header \"webhook-id\"")),
            "{errors:#?}"
        );
        // Each is under its own field.
        for field in [
            "url",
            "timeout",
            "max_concurrency",
            "throttle_rate",
            "retry_policy",
            "headers",
        ] {
            assert!(errors.of(field).is_some(), "{field}: {errors:#?}");
        }
    }

    #[test]
    fn stored_values_fill_the_form_and_parse_back() {
        let filled = form(|v| {
            v.event_types = vec!["user.created".into(), "invoice.paid".into()];
            v.channels = "eu".into();
            v.timeout = "2500ms".into();
            v.max_concurrency = "4".into();
            v.throttle_rate = "9".into();
            v.retry_policy = r#"{"delays": ["1s", "1m"], "maxAttempts": 3}"#.into();
            v.headers = " X-Team: a:b \n\nX-Env:prod".into();
        });
        let new = parse_form(&filled, NewEndpoint::default(), true).expect("valid");
        assert_eq!(new.headers.get("X-Team").map(String::as_str), Some("a:b"));
        let ep = endpoint::Model {
            description: new.description.clone(),
            filter_types: new
                .filter_types
                .as_ref()
                .map(|t| serde_json::to_string(t).unwrap()),
            channels: new
                .channels
                .as_ref()
                .map(|t| serde_json::to_string(t).unwrap()),
            throttle_rate: new.throttle_rate,
            max_concurrency: new.max_concurrency,
            timeout_ms: new.timeout_ms,
            retry_policy: new.retry_policy.clone(),
            ..store::testing::endpoint_model("ep_1", &new.url)
        };
        let shown = values_of(&ep, new.headers.clone()).expect("readable");
        assert_eq!(shown.event_types, ["user.created", "invoice.paid"]);
        assert_eq!(shown.filter, "some");
        assert_eq!(shown.timeout, "2500ms");
        let again = parse_form(&shown, NewEndpoint::default(), true).expect("valid");
        assert_eq!(again.filter_types, new.filter_types);
        assert_eq!(again.channels, new.channels);
        assert_eq!(again.timeout_ms, Some(2500));
        assert_eq!(again.max_concurrency, Some(4));
        assert_eq!(again.throttle_rate, Some(9));
        assert_eq!(again.retry_policy, new.retry_policy);
        assert_eq!(shown.headers, "X-Env: prod\nX-Team: a:b");
        assert_eq!(again.headers, new.headers);
    }
}
