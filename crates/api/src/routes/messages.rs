use actix_web::{HttpResponse, web};
use domain::ids::TenantId;
use serde_json::value::RawValue;
use service::rules;
use store::entities::{application, message};
use store::{MessageFilter, NewMessage, Store, StoreError};

use crate::dto::{
    ListResponse, MessageIn, MessageLabelsQuery, MessageListQuery, MessageOut, WithContent,
    list_params, time,
};
use crate::extract::{App, JsonBody, Tenant};
use crate::{ApiConfig, ApiError, IngestResult};

/// The stored payload as raw JSON (or `{}` when content was not asked for). One that is not
/// JSON (stored before inbound bodies were checked) is shown as an error value of its own,
/// `{"unreadable": true, "error": "…"}`, so that the message, and any list holding it, can
/// still be read.
pub fn raw_payload(m: &message::Model, with_content: bool) -> Box<RawValue> {
    let text = if !with_content {
        "{}".to_owned()
    } else if m.payload.is_empty() {
        // Expunged (`message::Model::is_expunged`): Svix's marker.
        r#"{"expired":true}"#.to_owned()
    } else {
        match std::str::from_utf8(&m.payload)
            .ok()
            .and_then(|t| RawValue::from_string(t.to_owned()).ok())
        {
            Some(raw) => return raw,
            None => unreadable(m),
        }
    };
    RawValue::from_string(text).expect("the texts above are JSON")
}

fn unreadable(m: &message::Model) -> String {
    let problem =
        domain::payload::json_problem(&m.payload).unwrap_or_else(|| "not a JSON value".to_owned());
    tracing::warn!(message = %m.id, problem, "a stored payload is not JSON; shown as an error value");
    serde_json::json!({
        "unreadable": true,
        "error": format!("the stored payload cannot be shown: it is {problem}"),
    })
    .to_string()
}

/// A message's channels and tags, decoded from their JSON columns.
pub type Labels = (Option<Vec<String>>, Option<Vec<String>>);

pub fn labels(m: &message::Model) -> Result<Labels, ApiError> {
    Ok((m.channels()?, m.tags()?))
}

pub fn out(m: message::Model, with_content: bool) -> Result<MessageOut, ApiError> {
    let (channels, tags) = labels(&m)?;
    Ok(MessageOut {
        payload: raw_payload(&m, with_content),
        channels,
        tags,
        id: m.id.to_string(),
        event_type: m.event_type,
        event_id: m.event_id,
        ordering_key: m.ordering_key,
        timestamp: time(m.created_at),
        deliver_at: m.deliver_at.map(time),
    })
}

/// The `event_types` query parameter in each form Svix's server takes: comma-separated
/// (`a,b`, what the SDKs send), repeated (`event_types=a&event_types=b`) and with brackets
/// (`event_types[]=a&event_types[]=b`), or a mix.
pub fn event_types_param(req: &actix_web::HttpRequest) -> Result<Vec<String>, ApiError> {
    let mut types: Vec<String> = Vec::new();
    for (_, v) in crate::dto::query_pairs(req)
        .into_iter()
        .filter(|(k, _)| k == "event_types" || k == "event_types[]")
    {
        types.extend(
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
        );
    }
    for t in &types {
        rules::ident("event_types", t).map_err(|_| {
            ApiError::validation(
                ["query", "event_types"],
                format!("{t:?} is not a valid event type name"),
            )
        })?;
    }
    Ok(types)
}

/// The message filter of a listing: `channel`, `tag` and `event_types` (any form, see
/// [`event_types_param`]), and the `before`/`after` bounds on when the message was created.
pub fn message_filter(
    req: &actix_web::HttpRequest,
    labels: &crate::dto::MessageLabelsQuery,
    before: Option<&str>,
    after: Option<&str>,
) -> Result<MessageFilter, ApiError> {
    let (before, after) = crate::dto::time_bounds(before, after)?;
    let filter = MessageFilter {
        event_types: event_types_param(req)?,
        channel: labels.channel.clone().filter(|c| !c.is_empty()),
        tag: labels.tag.clone().filter(|c| !c.is_empty()),
        before,
        after,
        ..Default::default()
    };
    for (name, v) in [("channel", &filter.channel), ("tag", &filter.tag)] {
        if let Some(v) = v {
            rules::labels(name, std::slice::from_ref(v), 1)
                .map_err(|e| ApiError::validation(["query", name], e.msg))?;
        }
    }
    Ok(filter)
}

/// Sends a message: stored once, with one delivery per matching enabled endpoint, in one
/// transaction. A repeated `eventId` in the application answers 409.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/msg", tag = "Message",
    params(("app_id" = String, Path), WithContent), request_body = MessageIn,
    responses((status = 202, body = MessageOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 409, body = crate::error::HttpErrorOut), (status = 413, body = crate::error::HttpErrorOut),
        (status = 429, description = "rate limited; see Retry-After", body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    q: web::Query<WithContent>,
    body: Result<JsonBody<MessageIn>, ApiError>,
) -> Result<HttpResponse, ApiError> {
    // The body is taken as a Result so that an unreadable one is counted too.
    let answer = match body {
        Ok(JsonBody(body)) => accept(&store, &cfg, t, &path, &q, body).await,
        Err(e) => Err(e),
    };
    cfg.ingest_counts.record(
        t,
        match &answer {
            Ok(_) => IngestResult::Accepted,
            Err(e) if e.status == actix_web::http::StatusCode::TOO_MANY_REQUESTS => {
                IngestResult::RateLimited
            }
            Err(_) => IngestResult::Rejected,
        },
    );
    answer
}

async fn accept(
    store: &Store,
    cfg: &ApiConfig,
    t: TenantId,
    path: &str,
    q: &WithContent,
    body: MessageIn,
) -> Result<HttpResponse, ApiError> {
    service::messages::admit(store, &cfg.service, t).await?;
    let deliver_at = body
        .deliver_at
        .as_deref()
        .map(|at| rules::timestamp("deliverAt", at))
        .transpose()?;
    let app = find_or_create_app(store, cfg, t, path, body.application).await?;
    let new = NewMessage {
        event_type: body.event_type,
        event_id: body.event_id,
        payload: body.payload.get().as_bytes().to_vec(),
        channels: body.channels.unwrap_or_default(),
        tags: body.tags.unwrap_or_default(),
        ordering_key: body.ordering_key,
        to_endpoint: None,
        deliver_at,
        trace_parent: None,
    };
    let created = service::messages::create(store, &cfg.service, t, &app, new).await?;
    service::trace::note(service::trace::Field::Msg, created.message.id);
    // 202 as in Svix: stored, delivery to follow.
    Ok(HttpResponse::Accepted().json(out(created.message, q.with_content.unwrap_or(true))?))
}

/// The application the path names or, when it does not exist and `new` says how, a new one
/// (Svix's implicit creation with a first message or a portal link).
pub(crate) async fn find_or_create_app(
    store: &Store,
    cfg: &ApiConfig,
    t: TenantId,
    path: &str,
    new: Option<crate::dto::ApplicationIn>,
) -> Result<application::Model, ApiError> {
    match (store.get_application(t, path).await, new) {
        (Err(StoreError::NotFound { .. }), Some(new_app)) => {
            create_app_for(store, cfg, t, path, new_app).await
        }
        (found, _) => Ok(found?),
    }
}

/// Svix's implicit application creation: the request names the application by the uid in the
/// path, and carries what to create it with.
async fn create_app_for(
    store: &Store,
    cfg: &ApiConfig,
    t: TenantId,
    path: &str,
    body: crate::dto::ApplicationIn,
) -> Result<application::Model, ApiError> {
    match body.uid.as_deref() {
        Some(uid) if uid == path => {}
        Some(_) => {
            return Err(ApiError::validation(
                ["body", "application", "uid"],
                "the application's uid must be the one in the path",
            ));
        }
        None => {
            return Err(ApiError::validation(
                ["body", "application", "uid"],
                "to create the application with its first message, give its uid (the one in the path)",
            ));
        }
    }
    let new = crate::routes::applications::new_app(body, cfg.service.max_retention)?;
    // Another request may have created it meanwhile: then that one.
    Ok(store.create_application_or_get(t, new).await?)
}

/// Deletes the message's payload and its attempts' response bodies for privacy; the metadata
/// stays. The message then reads `{"expired": true}` and cannot be resent, recovered or
/// replayed; deliveries still waiting are skipped.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/msg/{msg_id}/content", tag = "Message",
    params(("app_id" = String, Path), ("msg_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn expunge_content(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    store.expunge_message_content(t, &msg).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg", tag = "Message",
    params(("app_id" = String, Path), MessageListQuery, MessageLabelsQuery, crate::dto::EventTypesParam),
    responses((status = 200, body = ListResponse<MessageOut>), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn list(
    req: actix_web::HttpRequest,
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    q: web::Query<MessageListQuery>,
    labels: web::Query<crate::dto::MessageLabelsQuery>,
) -> Result<HttpResponse, ApiError> {
    let filter = message_filter(&req, &labels, q.before.as_deref(), q.after.as_deref())?;
    let with_content = q.with_content.unwrap_or(true);
    let page = store
        .list_messages(
            t,
            app.id,
            &filter,
            &list_params(q.limit, q.iterator.clone())?,
        )
        .await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, |m| out(m, with_content))?))
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}", tag = "Message",
    params(("app_id" = String, Path), ("msg_id" = String, Path, description = "id or eventId"), WithContent),
    responses((status = 200, body = MessageOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String)>,
    q: web::Query<WithContent>,
) -> Result<HttpResponse, ApiError> {
    let m = store.get_message(t, app.id, &path.1).await?;
    Ok(HttpResponse::Ok().json(out(m, q.with_content.unwrap_or(true))?))
}
