use actix_web::{HttpResponse, web};
use domain::delivery::AttemptTrigger;
use store::entities::attempt;
use store::{AttemptFilter, Store};

use crate::dto::{
    AttemptListQuery, ListResponse, MessageAttemptOut, MessageLabelsQuery, list_params, time,
};
use crate::extract::App;
use service::endpoints;

use crate::ApiError;

/// How an attempt is shown: `with_content` false leaves out the response body (Svix: `{}`).
fn out(a: attempt::Model, with_content: bool) -> MessageAttemptOut {
    let success = a.classification == domain::classify::Verdict::Success;
    MessageAttemptOut {
        id: a.id.to_string(),
        msg_id: a.msg_id.to_string(),
        endpoint_id: a.endpoint_id.to_string(),
        url: a.url,
        response: if with_content {
            a.response_excerpt.unwrap_or_default()
        } else {
            "{}".to_owned()
        },
        response_status_code: a.status_code.unwrap_or(0),
        response_duration_ms: i64::from(a.duration_ms),
        status: if success { 0 } else { 2 },
        status_text: if success { "success" } else { "fail" }.to_owned(),
        trigger_type: match a.trigger {
            AttemptTrigger::Manual => 1,
            AttemptTrigger::Scheduled => 0,
        },
        timestamp: time(a.started_at),
        attempt_number: a.attempt_number,
        error_kind: a.error_kind.map(|k| k.to_string()),
        error_detail: a.error_detail,
        msg: None,
    }
}

/// The store filter for a query; `None` when no attempt can match (pending, sending and
/// canceled describe deliveries, never a finished attempt).
fn filter(
    req: &actix_web::HttpRequest,
    q: &AttemptListQuery,
    labels: &MessageLabelsQuery,
) -> Result<Option<AttemptFilter>, ApiError> {
    // Every parameter is checked before deciding that nothing can match.
    let nothing_matches = matches!(q.status, Some(1 | 3 | 4));
    let success = match q.status {
        None | Some(1 | 3 | 4) => None,
        Some(0) => Some(true),
        Some(2) => Some(false),
        Some(_) => {
            return Err(ApiError::validation(
                ["query", "status"],
                "status must be 0 to 4",
            ));
        }
    };
    let status_code_class = match q.status_code_class {
        None => None,
        Some(c @ (0 | 100 | 200 | 300 | 400 | 500)) => Some(c),
        Some(_) => {
            return Err(ApiError::validation(
                ["query", "status_code_class"],
                "status_code_class must be 0, 100, 200, 300, 400 or 500",
            ));
        }
    };
    let (before, after) = crate::dto::time_bounds(q.before.as_deref(), q.after.as_deref())?;
    // `before` and `after` bound the attempts' times, not their messages'.
    let messages = crate::routes::messages::message_filter(req, labels, None, None)?;
    let filter = AttemptFilter {
        success,
        status_code_class,
        before,
        after,
        endpoint: None,
        messages,
    };
    Ok((!nothing_matches).then_some(filter))
}

fn empty() -> HttpResponse {
    HttpResponse::Ok().json(ListResponse::from_page(store::Page::empty(), |a| {
        out(a, true)
    }))
}

/// `with_msg` on the attempts of an endpoint: each attempt's message, without its payload.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WithMsg {
    /// `true`: each attempt carries its message as `msg` (never its payload, as Svix).
    pub with_msg: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/endpoint/{endpoint_id}", tag = "Message Attempt",
    params(("app_id" = String, Path), ("endpoint_id" = String, Path), AttemptListQuery,
        MessageLabelsQuery, crate::dto::EventTypesParam, WithMsg),
    responses((status = 200, body = ListResponse<MessageAttemptOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list_by_endpoint(
    req: actix_web::HttpRequest,
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String)>,
    q: web::Query<AttemptListQuery>,
    labels: web::Query<MessageLabelsQuery>,
    with_msg: web::Query<WithMsg>,
) -> Result<HttpResponse, ApiError> {
    let ep = store.get_endpoint(t, app.id, &path.1).await?;
    let params = list_params(q.limit, q.iterator.clone())?;
    let Some(filter) = filter(&req, &q, &labels)? else {
        return Ok(empty());
    };
    let page = store
        .list_attempts_by_endpoint(t, ep.app_id, ep.id, &filter, &params)
        .await?;
    let with_content = q.with_content.unwrap_or(true);
    if !with_msg.with_msg.unwrap_or(false) {
        return Ok(HttpResponse::Ok().json(ListResponse::from_page(page, |a| out(a, with_content))));
    }
    let ids: Vec<_> = page.data.iter().map(|a| a.msg_id).collect();
    let messages = store.messages_by_id(t, ep.app_id, &ids).await?;
    Ok(
        HttpResponse::Ok().json(ListResponse::try_from_page(page, |a| {
            // Several attempts may share a message: each gets its own copy.
            let msg = messages
                .get(&a.msg_id)
                .cloned()
                .map(|m| crate::routes::messages::out(m, false))
                .transpose()?;
            Ok(MessageAttemptOut {
                msg,
                ..out(a, with_content)
            })
        })?),
    )
}

/// Svix's filters on the attempts of one message: `endpoint_id`, and `channel`, `tag` and
/// `event_types`, which match the message itself, so all or none of its attempts.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ByMsgQuery {
    /// Attempts to this endpoint (id or uid) only.
    pub endpoint_id: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/attempt/msg/{msg_id}", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), AttemptListQuery,
        MessageLabelsQuery, crate::dto::EventTypesParam, ByMsgQuery),
    responses((status = 200, body = ListResponse<MessageAttemptOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list_by_msg(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String)>,
    q: web::Query<AttemptListQuery>,
    labels: web::Query<MessageLabelsQuery>,
    by: web::Query<ByMsgQuery>,
    req: actix_web::HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    let params = list_params(q.limit, q.iterator.clone())?;
    let Some(mut filter) = filter(&req, &q, &labels)? else {
        return Ok(empty());
    };
    if let Some(ep) = by.endpoint_id.as_deref().filter(|e| !e.is_empty()) {
        filter.endpoint = Some(store.get_endpoint(t, app.id, ep).await?.id);
    }
    let page = store
        .list_attempts_by_message(t, msg.app_id, msg.id, &filter, &params)
        .await?;
    let with_content = q.with_content.unwrap_or(true);
    Ok(HttpResponse::Ok().json(ListResponse::from_page(page, |a| out(a, with_content))))
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), ("attempt_id" = String, Path)),
    responses((status = 200, body = MessageAttemptOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    let a = store.get_attempt(t, msg.id, &path.2).await?;
    Ok(HttpResponse::Ok().json(out(a, true)))
}

/// Svix's `MessageEndpointOut`: an endpoint the message went to, and how its delivery stands.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageEndpointOut {
    pub id: String,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub throttle_rate: Option<u32>,
    pub disabled: bool,
    pub event_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    /// 0 delivered, 1 pending, 2 failed, 3 sending, 4 skipped.
    pub status: i32,
    pub status_text: String,
    #[schema(format = DateTime)]
    pub next_attempt: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

/// The endpoints a message was sent (or is to be sent) to, with each delivery's state.
#[utoipa::path(get, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), crate::dto::ListQuery),
    responses((status = 200, body = ListResponse<MessageEndpointOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list_destinations(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String)>,
    q: web::Query<crate::dto::ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    let page = store.message_destinations(t, msg.id, &q.params()?).await?;
    Ok(
        HttpResponse::Ok().json(ListResponse::try_from_page(page, |(ep, d)| {
            let (status, status_text) = crate::routes::endpoints::state_code(d.state);
            Ok(MessageEndpointOut {
                event_types: ep.filter_types()?,
                channels: ep.channels()?,
                id: ep.id.to_string(),
                uid: ep.uid,
                url: ep.url,
                description: ep.description,
                throttle_rate: ep.throttle_rate.map(|r| r as u32),
                disabled: ep.disabled,
                status,
                status_text: status_text.to_owned(),
                next_attempt: crate::routes::endpoints::next_attempt(&d),
                created_at: time(ep.created_at),
                updated_at: time(ep.updated_at),
            })
        })?),
    )
}

/// Deletes one attempt's response body; its status, timing and error stay.
#[utoipa::path(delete, path = "/api/v1/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}/content", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), ("attempt_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn expunge_content(
    store: web::Data<Store>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    store.expunge_attempt_content(t, msg.id, &path.2).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Sends the message to the endpoint again now, as a manual attempt.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/resend", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 202), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn resend(
    store: web::Data<Store>,
    cfg: web::Data<crate::ApiConfig>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    let ep = store.get_endpoint(t, app.id, &path.2).await?;
    let target = endpoints::Delivery {
        tenant: t,
        msg: &msg,
        ep: &ep,
    };
    endpoints::resend(&store, &cfg.service, target).await?;
    Ok(HttpResponse::Accepted().json(serde_json::json!({})))
}

/// hookd extension: gives up on this message for this endpoint (state `skipped`), so that a
/// dead head of an ordering key stops blocking the messages behind it.
#[utoipa::path(post, path = "/api/v1/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/skip", tag = "Message Attempt",
    params(("app_id" = String, Path), ("msg_id" = String, Path), ("endpoint_id" = String, Path)),
    responses((status = 202), (status = 404, body = crate::error::HttpErrorOut),
        (status = 409, description = "already delivered or being sent", body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn skip(
    store: web::Data<Store>,
    cfg: web::Data<crate::ApiConfig>,
    App { tenant: t, app }: App,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, ApiError> {
    let msg = store.get_message(t, app.id, &path.1).await?;
    let ep = store.get_endpoint(t, app.id, &path.2).await?;
    let target = endpoints::Delivery {
        tenant: t,
        msg: &msg,
        ep: &ep,
    };
    endpoints::skip(&store, &cfg.service, target).await?;
    Ok(HttpResponse::Accepted().json(serde_json::json!({})))
}
