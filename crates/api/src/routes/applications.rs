use actix_web::{HttpResponse, web};
use domain::ids::ApplicationId;
use domain::retention::RetentionDays;
use store::entities::application;
use store::{NewApplication, Store, StoreError};

use crate::dto::{
    ApplicationIn, ApplicationOut, ApplicationPatch, GetIfExists, ListQuery, ListResponse, time,
};
use crate::extract::{App, JsonBody, Tenant};
use service::rules;

use crate::{ApiConfig, ApiError};

pub fn out(m: application::Model) -> Result<ApplicationOut, ApiError> {
    let retention = m.retention();
    Ok(ApplicationOut {
        metadata: m.metadata()?,
        id: m.id.to_string(),
        uid: m.uid,
        name: m.name,
        throttle_rate: m.rate_limit.map(|r| r as u32),
        payload_retention_days: retention.payload,
        metadata_retention_days: retention.metadata,
        created_at: time(m.created_at),
        updated_at: time(m.updated_at),
    })
}

pub(crate) fn new_app(
    body: ApplicationIn,
    max_retention: std::time::Duration,
) -> Result<NewApplication, ApiError> {
    if let Some(uid) = &body.uid {
        rules::uid("uid", uid, ApplicationId::PREFIX)?;
    }
    let metadata = body.metadata.unwrap_or_default();
    rules::metadata(&metadata)?;
    Ok(NewApplication {
        name: rules::name("name", &body.name)?,
        uid: body.uid,
        rate_limit: rules::throttle_rate(body.throttle_rate)?,
        metadata,
        retention: rules::retention(
            RetentionDays {
                payload: body.payload_retention_days,
                metadata: body.metadata_retention_days,
            },
            max_retention,
        )?,
    })
}

/// Svix's filters on the application list.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AppListFilter {
    /// `true`: leave out applications without endpoints.
    pub exclude_apps_with_no_endpoints: Option<bool>,
    /// `true`: leave out applications whose endpoints are all disabled.
    pub exclude_apps_with_disabled_endpoints: Option<bool>,
    /// hookd has no Svix Play endpoints: `true` leaves out nothing.
    #[expect(
        dead_code,
        reason = "no endpoint is a Svix Play one: both values answer the same"
    )]
    pub exclude_apps_with_svix_play_endpoints: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/app", tag = "Application", params(ListQuery, AppListFilter),
    responses((status = 200, body = ListResponse<ApplicationOut>)), security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    q: web::Query<ListQuery>,
    f: web::Query<AppListFilter>,
) -> Result<HttpResponse, ApiError> {
    let filter = store::AppFilter {
        without_endpoints: f.exclude_apps_with_no_endpoints.unwrap_or(false),
        with_only_disabled_endpoints: f.exclude_apps_with_disabled_endpoints.unwrap_or(false),
    };
    let page = store.list_applications(t, filter, &q.params()?).await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, out)?))
}

#[utoipa::path(post, path = "/api/v1/app", tag = "Application", params(GetIfExists),
    request_body = ApplicationIn,
    responses((status = 201, body = ApplicationOut), (status = 200, description = "existing application (get_if_exists)", body = ApplicationOut),
        (status = 409, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    q: web::Query<GetIfExists>,
    JsonBody(body): JsonBody<ApplicationIn>,
) -> Result<HttpResponse, ApiError> {
    let new = new_app(body, cfg.service.max_retention)?;
    let uid = new.uid.clone();
    match store.create_application(t, new).await {
        Ok(app) => Ok(HttpResponse::Created().json(out(app)?)),
        Err(StoreError::Conflict { .. }) if q.get_if_exists == Some(true) => {
            let existing = store
                .get_application(t, uid.as_deref().unwrap_or_default())
                .await?;
            Ok(HttpResponse::Ok().json(out(existing)?))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}", tag = "Application",
    params(("app_id" = String, Path, description = "id or uid")),
    responses((status = 200, body = ApplicationOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(App { app, .. }: App) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(out(app)?))
}

/// Replaces the application; creates it (with `app_id` as its uid) when none matches.
#[utoipa::path(put, path = "/api/v1/app/{app_id}", tag = "Application",
    params(("app_id" = String, Path, description = "id or uid")), request_body = ApplicationIn,
    responses((status = 200, body = ApplicationOut), (status = 201, body = ApplicationOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn upsert(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
    JsonBody(body): JsonBody<ApplicationIn>,
) -> Result<HttpResponse, ApiError> {
    let mut new = new_app(body, cfg.service.max_retention)?;
    match store.get_application(t, &path).await {
        Ok(_) => {
            let app = store.update_application(t, &path, new).await?;
            Ok(HttpResponse::Ok().json(out(app)?))
        }
        Err(StoreError::NotFound { .. }) if !path.starts_with(ApplicationId::PREFIX) => {
            rules::uid("uid", &path, ApplicationId::PREFIX)
                .map_err(|_| ApiError::not_found("application"))?;
            new.uid = Some(path.into_inner());
            let app = store.create_application(t, new).await?;
            Ok(HttpResponse::Created().json(out(app)?))
        }
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(patch, path = "/api/v1/app/{app_id}", tag = "Application",
    params(("app_id" = String, Path)), request_body = ApplicationPatch,
    responses((status = 200, body = ApplicationOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn patch(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    App {
        tenant: t,
        app: current,
    }: App,
    JsonBody(body): JsonBody<ApplicationPatch>,
) -> Result<HttpResponse, ApiError> {
    let metadata = current.metadata()?;
    let retention = current.retention();
    let merged = ApplicationIn {
        name: body.name.apply_required(current.name),
        throttle_rate: body
            .throttle_rate
            .apply(current.rate_limit.map(|r| r as u32)),
        uid: body.uid.apply(current.uid),
        metadata: Some(body.metadata.apply(Some(metadata)).unwrap_or_default()),
        payload_retention_days: body.payload_retention_days.apply(retention.payload),
        metadata_retention_days: body.metadata_retention_days.apply(retention.metadata),
    };
    let app = store
        .update_application(
            t,
            &current.id.to_string(),
            new_app(merged, cfg.service.max_retention)?,
        )
        .await?;
    Ok(HttpResponse::Ok().json(out(app)?))
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}", tag = "Application",
    params(("app_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    store.delete_application(t, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}
