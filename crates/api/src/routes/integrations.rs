//! Svix's integration API: API keys a tenant hands to a third party, each good only for one
//! application's messages and attempts (the reach is decided in `extract::integration_allows`).

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use service::rules;
use store::entities::integration;
use store::{IntegrationChanges, Store};
use utoipa::ToSchema;

use crate::ApiError;
use crate::dto::{ListQuery, ListResponse, time};
use crate::extract::{App, JsonBody};

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationIn {
    pub name: String,
    /// Labels kept with the integration (Svix's feature flags); they grant nothing in hookd.
    pub feature_flags: Option<Vec<String>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IntegrationOut {
    pub id: String,
    pub name: String,
    /// Left out when empty: Svix's schema says at least one when present.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub feature_flags: Vec<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct IntegrationKeyOut {
    /// A bearer credential for this application's messages and attempts only.
    pub key: String,
}

fn out(m: integration::Model) -> Result<IntegrationOut, ApiError> {
    Ok(IntegrationOut {
        feature_flags: store::integration_feature_flags(&m)?,
        id: m.id.to_string(),
        name: m.name,
        created_at: time(m.created_at),
        updated_at: time(m.updated_at),
    })
}

fn changes(body: IntegrationIn) -> Result<IntegrationChanges, ApiError> {
    let name = rules::name("name", &body.name)?;
    let feature_flags = body.feature_flags.unwrap_or_default();
    rules::labels("featureFlags", &feature_flags, rules::MAX_FEATURE_FLAGS)?;
    Ok(IntegrationChanges {
        name,
        feature_flags,
    })
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/integration", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ListQuery),
    responses((status = 200, body = ListResponse<IntegrationOut>), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn list(
    store: web::Data<Store>,
    App { tenant, app }: App,
    q: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = store
        .list_integrations(tenant, app.id, &q.params()?)
        .await?;
    Ok(HttpResponse::Ok().json(ListResponse::try_from_page(page, out)?))
}

#[utoipa::path(post, path = "/api/v1/app/{app_id}/integration", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid")), request_body = IntegrationIn,
    responses((status = 201, body = IntegrationOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create(
    store: web::Data<Store>,
    App { tenant, app }: App,
    JsonBody(body): JsonBody<IntegrationIn>,
) -> Result<HttpResponse, ApiError> {
    let created = store
        .create_integration(tenant, app.id, changes(body)?)
        .await?;
    Ok(HttpResponse::Created().json(out(created)?))
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/integration/{integ_id}", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ("integ_id" = String, Path)),
    responses((status = 200, body = IntegrationOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get(
    store: web::Data<Store>,
    App { tenant, app }: App,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let row = store.get_integration(tenant, app.id, &path.1).await?;
    Ok(HttpResponse::Ok().json(out(row)?))
}

#[utoipa::path(put, path = "/api/v1/app/{app_id}/integration/{integ_id}", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ("integ_id" = String, Path)),
    request_body = IntegrationIn,
    responses((status = 200, body = IntegrationOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn update(
    store: web::Data<Store>,
    App { tenant, app }: App,
    path: web::Path<(String, String)>,
    JsonBody(body): JsonBody<IntegrationIn>,
) -> Result<HttpResponse, ApiError> {
    let row = store
        .update_integration(tenant, app.id, &path.1, changes(body)?)
        .await?;
    Ok(HttpResponse::Ok().json(out(row)?))
}

#[utoipa::path(delete, path = "/api/v1/app/{app_id}/integration/{integ_id}", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ("integ_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete(
    store: web::Data<Store>,
    App { tenant, app }: App,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    store.delete_integration(tenant, app.id, &path.1).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(get, path = "/api/v1/app/{app_id}/integration/{integ_id}/key", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ("integ_id" = String, Path)),
    responses((status = 200, body = IntegrationKeyOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_key(
    store: web::Data<Store>,
    App { tenant, app }: App,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let key = store.integration_key(tenant, app.id, &path.1).await?;
    Ok(HttpResponse::Ok().json(IntegrationKeyOut { key }))
}

#[utoipa::path(post, path = "/api/v1/app/{app_id}/integration/{integ_id}/key/rotate", tag = "Integration",
    params(("app_id" = String, Path, description = "id or uid"), ("integ_id" = String, Path)),
    responses((status = 200, body = IntegrationKeyOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn rotate_key(
    store: web::Data<Store>,
    App { tenant, app }: App,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let key = store
        .rotate_integration_key(tenant, app.id, &path.1)
        .await?;
    Ok(HttpResponse::Ok().json(IntegrationKeyOut { key }))
}
