use actix_web::{HttpResponse, web};
use store::entities::event_type;
use store::{NewEventType, Store, StoreError};

use crate::dto::{
    EventTypeIn, EventTypeListQuery, EventTypeOut, EventTypePatch, EventTypeUpsertIn, ListResponse,
    list_params, time,
};
use crate::extract::{JsonBody, Tenant};
use service::event_types as service;

use crate::ApiError;

fn out(m: event_type::Model) -> Result<EventTypeOut, ApiError> {
    Ok(EventTypeOut {
        schemas: m.schemas()?,
        feature_flags: m.feature_flags()?,
        name: m.name,
        description: m.description,
        archived: m.archived,
        deprecated: m.deprecated,
        group_name: m.group_name,
        created_at: time(m.created_at),
        updated_at: time(m.updated_at),
    })
}

#[utoipa::path(get, path = "/api/v1/event-type", tag = "Event Type", params(EventTypeListQuery),
    responses((status = 200, body = ListResponse<EventTypeOut>)), security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    q: web::Query<EventTypeListQuery>,
) -> Result<HttpResponse, ApiError> {
    let mut params = list_params(q.limit, q.iterator.clone())?;
    params.ascending = crate::dto::ascending(q.order.as_deref())?;
    let page = store
        .list_event_types(t, q.include_archived.unwrap_or(false), &params)
        .await?;
    let with_content = q.with_content.unwrap_or(true);
    Ok(
        HttpResponse::Ok().json(ListResponse::try_from_page(page, |m| {
            let mut o = out(m)?;
            if !with_content {
                o.schemas = None;
            }
            Ok(o)
        })?),
    )
}

#[utoipa::path(post, path = "/api/v1/event-type", tag = "Event Type", request_body = EventTypeIn,
    responses((status = 201, body = EventTypeOut), (status = 409, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<EventTypeIn>,
) -> Result<HttpResponse, ApiError> {
    let new = NewEventType {
        name: body.name,
        description: body.description,
        schemas: body.schemas,
        feature_flags: body.feature_flags,
        group_name: body.group_name,
        deprecated: body.deprecated.unwrap_or(false),
        archived: body.archived.unwrap_or(false),
    };
    let created = service::create(&store, t, new).await?;
    Ok(HttpResponse::Created().json(out(created)?))
}

#[utoipa::path(get, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type",
    params(("event_type_name" = String, Path)),
    responses((status = 200, body = EventTypeOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(store.get_event_type(t, &path).await?)?))
}

/// Replaces the event type, creating it when it does not exist.
#[utoipa::path(put, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type",
    params(("event_type_name" = String, Path)), request_body = EventTypeUpsertIn,
    responses((status = 200, body = EventTypeOut), (status = 201, body = EventTypeOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<EventTypeUpsertIn>,
) -> Result<HttpResponse, ApiError> {
    let new = service::checked(NewEventType {
        name: path.into_inner(),
        description: body.description.unwrap_or_default(),
        schemas: body.schemas,
        feature_flags: body.feature_flags,
        group_name: body.group_name,
        deprecated: body.deprecated.unwrap_or(false),
        archived: body.archived.unwrap_or(false),
    })?;
    match store.get_event_type(t, &new.name).await {
        Ok(_) => Ok(HttpResponse::Ok().json(out(service::update(&store, t, new).await?)?)),
        Err(StoreError::NotFound { .. }) => {
            Ok(HttpResponse::Created().json(out(service::create(&store, t, new).await?)?))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(patch, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type",
    params(("event_type_name" = String, Path)), request_body = EventTypePatch,
    responses((status = 200, body = EventTypeOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn patch(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<EventTypePatch>,
) -> Result<HttpResponse, ApiError> {
    let current = out(store.get_event_type(t, &path).await?)?;
    let new = NewEventType {
        name: current.name,
        description: body.description.apply_required(current.description),
        schemas: body.schemas.apply(current.schemas),
        feature_flags: body.feature_flags.apply(current.feature_flags),
        group_name: body.group_name.apply(current.group_name),
        deprecated: body.deprecated.apply_required(current.deprecated),
        archived: body.archived.apply_required(current.archived),
    };
    Ok(HttpResponse::Ok().json(out(service::update(&store, t, new).await?)?))
}

/// `expunge` on deleting an event type.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExpungeQuery {
    /// `true`: delete the event type for good (its name is free again); else it is archived
    /// and creating one of that name restores it.
    pub expunge: Option<bool>,
}

/// Archives the event type (messages of that type stay readable), or with `expunge=true`
/// deletes it for good.
#[utoipa::path(delete, path = "/api/v1/event-type/{event_type_name}", tag = "Event Type",
    params(("event_type_name" = String, Path), ExpungeQuery),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    q: web::Query<ExpungeQuery>,
) -> Result<HttpResponse, ApiError> {
    if q.expunge.unwrap_or(false) {
        store.expunge_event_type(t, &path).await?;
    } else {
        store.archive_event_type(t, &path).await?;
    }
    Ok(HttpResponse::NoContent().finish())
}
