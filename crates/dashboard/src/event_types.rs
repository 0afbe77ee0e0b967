//! `/event-types`: the tenant's event-type catalog. List (bounded pages), create, edit the
//! description, JSON Schema and example payload, archive and unarchive. The rules are the
//! service's ([`service::event_types`]), the same the API's `/api/v1/event-type` applies;
//! this module turns form text into values and each field problem into a line under its field.
//!
//! The form edits version "1" of Svix's `schemas` (`{"1": {…JSON Schema…}}`); the example
//! payload is that schema's `examples[0]`, where send-example and the portal read it. Other
//! versions and further examples are kept as stored.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use serde::Deserialize;
use serde_json::{Map, Value};
use service::{FieldError, ServiceError};
use store::entities::event_type;
use store::{ListParams, NewEventType};

use crate::auth::see_other;
use crate::error::PageError;
use crate::problems::Problems;
use crate::session::CsrfForm;
use crate::session::{self, Session};
use crate::views;

/// Event types per page of the catalog.
const PER_PAGE: u64 = 50;

pub struct CatalogRow {
    pub name: String,
    pub description: String,
    pub archived: bool,
    pub has_schema: bool,
    pub has_example: bool,
    pub created: crate::when::When,
}

#[derive(Template)]
#[template(path = "event_types.html")]
pub struct CatalogPage {
    pub csrf: Option<String>,
    pub root: &'static str,
    pub rows: Vec<CatalogRow>,
    /// The next page's link, when there is one.
    pub next: Option<String>,
    /// Whether this is a later page (a link back to the first).
    pub paged: bool,
}

/// The form's fields as text.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct EventTypeForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Version 1's JSON Schema, without `examples`.
    #[serde(default)]
    pub schema: String,
    /// Version 1's `examples[0]`.
    #[serde(default)]
    pub example: String,
}

/// A service problem under its field (by the field's API name), unless that field has one.
fn add_problem(problems: &mut Problems, e: &FieldError) {
    let field = match e.field.as_str() {
        "name" => "name",
        "description" => "description",
        _ => "schema",
    };
    if problems.of(field).is_none() {
        problems.add(field, sentence(&e.msg));
    }
}

/// "name must be …" → "The name must be …."
fn sentence(msg: &str) -> String {
    let msg = msg.trim_end_matches('.');
    let msg = match msg.split_once(' ') {
        Some(("name" | "description" | "schemas", rest)) => {
            format!("The {} {rest}", msg.split(' ').next().unwrap_or_default())
        }
        _ => msg.to_owned(),
    };
    format!("{msg}.")
}

#[derive(Template)]
#[template(path = "event_type_form.html")]
pub struct FormPage {
    pub csrf: Option<String>,
    pub root: &'static str,
    /// `Some(name)` when editing that event type; `None` for a new one.
    pub editing: Option<String>,
    pub archived: bool,
    pub form: EventTypeForm,
    pub problems: Problems,
    pub notice: Option<String>,
    /// Examples beyond the first, kept as stored.
    pub more_examples: usize,
}

#[derive(Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    iterator: Option<String>,
    #[serde(default)]
    done: Option<String>,
}

/// GET `/event-types`: the catalog, oldest first, [`PER_PAGE`] at a time.
pub async fn list(
    req: HttpRequest,
    session: Session,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let params = ListParams {
        limit: PER_PAGE,
        iterator: query.iterator.clone().filter(|i| !i.is_empty()),
        ascending: true,
        walk_window: 0,
    };
    let page = store
        .list_event_types(session.tenant, true, &params)
        .await?;
    let mut rows = Vec::with_capacity(page.data.len());
    for m in &page.data {
        let example = m.example(0)?;
        let schema = version_one(m)?;
        rows.push(CatalogRow {
            name: m.name.clone(),
            description: m.description.clone(),
            archived: m.archived,
            has_schema: schema.is_some_and(|s| s.keys().any(|k| k != "examples")),
            has_example: example.is_some(),
            created: crate::when::When::at_ms(m.created_at),
        });
    }
    let next = match (&page.iterator, page.done) {
        (Some(it), false) => Some(format!("/event-types?iterator={}", views::query_value(it))),
        _ => None,
    };
    let view = CatalogPage {
        csrf: Some(session.csrf),
        root: session.root,
        rows,
        next,
        paged: params.iterator.is_some(),
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

/// Version 1 of the stored schemas, when it is an object.
fn version_one(m: &event_type::Model) -> Result<Option<Map<String, Value>>, PageError> {
    Ok(m.schemas()?
        .and_then(|s| s.get("1").cloned())
        .and_then(|v| match v {
            Value::Object(o) => Some(o),
            _ => None,
        }))
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The form's text for a stored event type, and how many examples beyond the first it keeps.
fn form_of(m: &event_type::Model) -> Result<(EventTypeForm, usize), PageError> {
    let mut v1 = version_one(m)?.unwrap_or_default();
    let examples = match v1.remove("examples") {
        Some(Value::Array(e)) => e,
        Some(other) => vec![other],
        None => Vec::new(),
    };
    let form = EventTypeForm {
        csrf: String::new(),
        name: m.name.clone(),
        description: m.description.clone(),
        schema: if v1.is_empty() {
            String::new()
        } else {
            pretty(&Value::Object(v1))
        },
        example: examples.first().map(pretty).unwrap_or_default(),
    };
    Ok((form, examples.len().saturating_sub(1)))
}

/// The event type the form describes, over `stored` (its other versions and further
/// examples kept), or the problems of the fields it could not read.
fn parse(f: &EventTypeForm, stored: Option<&event_type::Model>) -> Result<NewEventType, Problems> {
    let mut problems = Problems::new();
    let json = |text: &str, what: &str| -> Result<Option<Value>, String> {
        match text.trim() {
            "" => Ok(None),
            t => serde_json::from_str(t)
                .map(Some)
                .map_err(|e| format!("The {what} is not valid JSON: {e}.")),
        }
    };
    let schema = match json(&f.schema, "schema") {
        Ok(None) => Some(Map::new()),
        Ok(Some(Value::Object(o))) => Some(o),
        Ok(Some(_)) => {
            problems.add(
                "schema",
                "The schema must be a JSON object, like {\"type\": \"object\"}.",
            );
            None
        }
        Err(e) => {
            problems.add("schema", e);
            None
        }
    };
    let example = json(&f.example, "example").unwrap_or_else(|e| {
        problems.add("example", e);
        None
    });
    if let (Some(s), Some(_)) = (&schema, &example)
        && s.contains_key("examples")
    {
        problems.add(
            "example",
            "Give the example here or in the schema's \"examples\", not in both.",
        );
    }
    let (mut new, kept) = match stored {
        Some(m) => {
            let new = service::event_types::as_new(m).map_err(|_| {
                let mut p = Problems::new();
                p.add("schema", "The stored schemas could not be read.");
                p
            })?;
            let kept = match version_one(m) {
                Ok(Some(mut v1)) => match v1.remove("examples") {
                    Some(Value::Array(e)) => e.into_iter().skip(1).collect(),
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            (new, kept)
        }
        None => (NewEventType::default(), Vec::new()),
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut v1 = schema.unwrap_or_default();
    if !v1.contains_key("examples") {
        let examples: Vec<Value> = example.into_iter().chain(kept).collect();
        if !examples.is_empty() {
            v1.insert("examples".into(), Value::Array(examples));
        }
    }
    let mut versions = match new.schemas.take() {
        Some(Value::Object(o)) => o,
        _ => Map::new(),
    };
    if v1.is_empty() {
        versions.remove("1");
    } else {
        versions.insert("1".into(), Value::Object(v1));
    }
    new.schemas = (!versions.is_empty()).then_some(Value::Object(versions));
    if stored.is_none() {
        new.name = f.name.trim().to_owned();
    }
    new.description = f.description.trim().to_owned();
    Ok(new)
}

/// The service's refusal as problems under the fields; failures that are not about the
/// input become an error page.
fn refused(e: ServiceError) -> Result<Problems, PageError> {
    let mut problems = Problems::new();
    match e {
        ServiceError::Invalid(errors) => errors.iter().for_each(|e| add_problem(&mut problems, e)),
        ServiceError::Store(store::StoreError::Conflict { .. }) => {
            problems.add("name", "An event type with this name already exists.")
        }
        other => return Err(other.into()),
    }
    Ok(problems)
}

fn form_page(
    session: Session,
    status: StatusCode,
    stored: Option<&event_type::Model>,
    form: EventTypeForm,
    problems: Problems,
    notice: Option<String>,
) -> Result<HttpResponse, PageError> {
    let more_examples = match stored {
        Some(m) => form_of(m)?.1,
        None => 0,
    };
    let page = FormPage {
        csrf: Some(session.csrf),
        root: session.root,
        editing: stored.map(|m| m.name.clone()),
        archived: stored.is_some_and(|m| m.archived),
        form: EventTypeForm {
            csrf: String::new(),
            ..form
        },
        problems,
        notice,
        more_examples,
    };
    Ok(views::render(status, &page)?)
}

/// GET `/event-types/new`.
pub async fn new_form(session: Session) -> Result<HttpResponse, PageError> {
    form_page(
        session,
        StatusCode::OK,
        None,
        EventTypeForm::default(),
        Problems::new(),
        None,
    )
}

/// POST `/event-types/new`.
pub async fn create(
    req: HttpRequest,
    session: Session,
    form: web::Form<EventTypeForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let form = form.into_inner();
    let status = StatusCode::UNPROCESSABLE_ENTITY;
    let new = match parse(&form, None) {
        Ok(new) => new,
        Err(mut problems) => {
            // The name's and description's rules too, so one round trip shows everything.
            let named = NewEventType {
                name: form.name.trim().to_owned(),
                description: form.description.trim().to_owned(),
                ..NewEventType::default()
            };
            service::event_types::problems(&named)
                .iter()
                .for_each(|e| add_problem(&mut problems, e));
            return form_page(session, status, None, form, problems, None);
        }
    };
    match service::event_types::create(store, session.tenant, new).await {
        Ok(m) => Ok(see_other(&format!(
            "/event-types/{}/edit?done=created",
            views::query_value(&m.name)
        ))),
        Err(e) => form_page(session, status, None, form, refused(e)?, None),
    }
}

/// GET `/event-types/{name}/edit`.
pub async fn edit_form(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let m = store.get_event_type(session.tenant, &path).await?;
    let notice = match query.done.as_deref() {
        Some("created") => Some("Event type created. Endpoints can now choose it.".to_owned()),
        Some("saved") => Some("Event type saved.".to_owned()),
        Some("archived") => Some(
            "Event type archived: it is no longer offered to new endpoint filters; endpoints \
             that already chose it keep it."
                .to_owned(),
        ),
        Some("unarchived") => {
            Some("Event type restored: endpoints can choose it again.".to_owned())
        }
        _ => None,
    };
    let (form, _) = form_of(&m)?;
    form_page(
        session,
        StatusCode::OK,
        Some(&m),
        form,
        Problems::new(),
        notice,
    )
}

/// POST `/event-types/{name}/edit`: the description, schema and example replace the stored
/// ones; the name, other schema versions, flags and archived state are kept.
pub async fn update(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    form: web::Form<EventTypeForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let m = store.get_event_type(session.tenant, &path).await?;
    let form = form.into_inner();
    let status = StatusCode::UNPROCESSABLE_ENTITY;
    let new = match parse(&form, Some(&m)) {
        Ok(new) => new,
        Err(problems) => return form_page(session, status, Some(&m), form, problems, None),
    };
    match service::event_types::update(store, session.tenant, new).await {
        Ok(saved) => Ok(see_other(&format!(
            "/event-types/{}/edit?done=saved",
            views::query_value(&saved.name)
        ))),
        Err(e) => form_page(session, status, Some(&m), form, refused(e)?, None),
    }
}

/// POST `/event-types/{name}/{archive|unarchive}`.
pub async fn archive(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let (name, action) = path.into_inner();
    let archived = match action.as_str() {
        "archive" => true,
        "unarchive" => false,
        _ => return Err(PageError::NotFound),
    };
    let store = session::store_of(&req)?;
    let m = service::event_types::set_archived(store, session.tenant, &name, archived).await?;
    Ok(see_other(&format!(
        "/event-types/{}/edit?done={action}d",
        views::query_value(&m.name)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(schemas: Value) -> event_type::Model {
        event_type::Model {
            id: domain::ids::EventTypeId::new(),
            tenant_id: domain::ids::TenantId::new(),
            name: "order.paid".into(),
            description: "old".into(),
            schemas: Some(schemas.to_string()),
            feature_flags: None,
            group_name: None,
            archived: false,
            deprecated: false,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn the_example_is_the_first_of_version_ones_examples_and_the_rest_is_kept() {
        let m = stored(json!({
            "1": {"type": "object", "examples": [{"a": 1}, {"a": 2}]},
            "2": {"type": "object"}
        }));
        let (form, more) = form_of(&m).expect("readable");
        assert_eq!(more, 1);
        assert!(!form.schema.contains("examples"), "{}", form.schema);
        assert_eq!(
            serde_json::from_str::<Value>(&form.example).unwrap(),
            json!({"a": 1})
        );
        let edited = EventTypeForm {
            example: r#"{"a": 9}"#.into(),
            description: " new ".into(),
            ..form
        };
        let new = parse(&edited, Some(&m)).expect("valid");
        assert_eq!(new.name, "order.paid");
        assert_eq!(new.description, "new");
        assert_eq!(
            new.schemas,
            Some(json!({
                "1": {"type": "object", "examples": [{"a": 9}, {"a": 2}]},
                "2": {"type": "object"}
            }))
        );
    }

    #[test]
    fn no_schema_and_no_example_store_no_schemas() {
        let form = EventTypeForm {
            name: "user.created".into(),
            ..EventTypeForm::default()
        };
        assert_eq!(parse(&form, None).expect("valid").schemas, None);
        let form = EventTypeForm {
            example: "[1]".into(),
            ..form
        };
        assert_eq!(
            parse(&form, None).expect("valid").schemas,
            Some(json!({"1": {"examples": [[1]]}}))
        );
    }

    #[test]
    fn each_unreadable_field_gets_its_own_line() {
        let form = EventTypeForm {
            name: "x".into(),
            schema: "[1, 2]".into(),
            example: "{oops".into(),
            ..EventTypeForm::default()
        };
        let p = parse(&form, None).expect_err("invalid");
        assert!(p.of("schema").is_some_and(|s| s.contains("JSON object")));
        assert!(
            p.of("example")
                .is_some_and(|s| s.contains("not valid JSON"))
        );
        assert_eq!(p.len(), 2);
    }
}
