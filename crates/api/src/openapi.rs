//! The OpenAPI 3 document, generated from the handlers' annotations.

use actix_web::HttpResponse;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::dto::*;
use crate::error::{HttpErrorOut, HttpValidationError, ValidationError};
use crate::health::HealthOut;
use crate::routes::{applications, attempts, endpoints, event_types, messages};

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("hk_…")
                    .build(),
            ),
        );
    }
}

/// The answers every operation can give, documented once: 422 (field errors, in the
/// validation shape) and every other error as `HttpErrorOut` (`default`). POSTs also take an
/// `Idempotency-Key` header.
struct CommonResponses;

impl Modify for CommonResponses {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
        use utoipa::openapi::{ObjectBuilder, Ref, ResponseBuilder, Type, content::ContentBuilder};
        let error = ResponseBuilder::new()
            .description("An error: `{code, detail}`")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("HttpErrorOut")))
                    .build(),
            )
            .build();
        let invalid = ResponseBuilder::new()
            .description("A field is invalid: `{code: \"validation\", detail: [{loc, msg, type}]}`")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("HttpValidationError")))
                    .build(),
            )
            .build();
        let key: Parameter = ParameterBuilder::new()
            .name("idempotency-key")
            .parameter_in(ParameterIn::Header)
            .description(Some(
                "Repeat a POST safely: the first response for a key is returned again.",
            ))
            .schema(Some(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .min_length(Some(1))
                    .max_length(Some(256)),
            ))
            .build();
        for (path, item) in doc.paths.paths.iter_mut() {
            if path == "/api/v1/health" || path == "/api/v1/openapi.json" {
                continue;
            }
            let ops = [
                (false, item.get.as_mut()),
                (false, item.put.as_mut()),
                (true, item.post.as_mut()),
                (false, item.patch.as_mut()),
                (false, item.delete.as_mut()),
            ];
            for (is_post, op) in ops {
                let Some(op) = op else { continue };
                op.responses
                    .responses
                    .entry("422".into())
                    .or_insert_with(|| invalid.clone().into());
                op.responses
                    .responses
                    .entry("default".into())
                    .or_insert_with(|| error.clone().into());
                if is_post {
                    op.parameters.get_or_insert_with(Vec::new).push(key.clone());
                }
            }
        }
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "hookd API", description = "Webhook delivery: the core of Svix's API shape plus hookd's extensions."),
    modifiers(&BearerAuth, &CommonResponses),
    paths(
        crate::health::health, crate::health::health_head, crate::health::ready, crate::health::ready_head,
        crate::health::ping, crate::health::ping_head, serve,
        applications::list, applications::create, applications::get, applications::upsert,
        applications::patch, applications::delete,
        event_types::list, event_types::create, event_types::get, event_types::upsert,
        event_types::patch, event_types::delete,
        endpoints::list, endpoints::create, endpoints::get, endpoints::upsert, endpoints::patch,
        endpoints::delete, endpoints::get_secret, endpoints::rotate_secret, endpoints::get_headers,
        endpoints::set_headers, endpoints::patch_headers, endpoints::get_oauth, endpoints::set_oauth,
        endpoints::delete_oauth, endpoints::get_auth, endpoints::set_auth, endpoints::delete_auth,
        endpoints::get_mtls, endpoints::set_mtls, endpoints::delete_mtls,
        crate::routes::inbound::create_source, crate::routes::inbound::list_sources,
        crate::routes::inbound::get_source, crate::routes::inbound::delete_source,
        crate::routes::inbound::receive,
        crate::routes::inbound::handshake,
        crate::routes::inbound::receive_at_token,
        crate::routes::inbound::handshake_at_token,
        endpoints::stats, endpoints::recover,
        endpoints::replay_missing, endpoints::send_example, endpoints::list_messages, endpoints::get_task, endpoints::list_tasks, endpoints::list_emails, endpoints::replay_from_message,
        messages::create, messages::list, messages::get,
        crate::routes::retention::get, crate::routes::retention::put,
        attempts::list_by_endpoint, attempts::list_by_msg, attempts::list_destinations, attempts::expunge_content, messages::expunge_content, attempts::get, attempts::resend, attempts::skip,
        crate::routes::auth::app_portal_access, crate::routes::auth::expire_all, crate::routes::auth::logout,
        crate::routes::auth::dashboard_access,
        crate::routes::integrations::list, crate::routes::integrations::create, crate::routes::integrations::get,
        crate::routes::integrations::update, crate::routes::integrations::delete, crate::routes::integrations::get_key,
        crate::routes::integrations::rotate_key,
        crate::routes::statistics::app_usage, crate::routes::statistics::event_types,
        crate::routes::ingest::list, crate::routes::ingest::create, crate::routes::ingest::get,
        crate::routes::ingest::upsert, crate::routes::ingest::patch, crate::routes::ingest::delete, crate::routes::ingest::rotate_token,
        crate::routes::ingest::list_endpoints, crate::routes::ingest::create_endpoint, crate::routes::ingest::get_endpoint,
        crate::routes::ingest::upsert_endpoint, crate::routes::ingest::delete_endpoint, crate::routes::ingest::get_endpoint_secret,
        crate::routes::ingest::rotate_endpoint_secret, crate::routes::ingest::get_endpoint_headers,
        crate::routes::ingest::set_endpoint_headers,
        crate::routes::operational::list, crate::routes::operational::create, crate::routes::operational::get,
        crate::routes::operational::upsert, crate::routes::operational::delete, crate::routes::operational::get_secret,
        crate::routes::operational::rotate_secret, crate::routes::operational::get_headers, crate::routes::operational::set_headers,
    ),
    components(schemas(
        HttpErrorOut, HttpValidationError, ValidationError, HealthOut,
        ApplicationIn, ApplicationOut, ApplicationPatch,
        EventTypeIn, EventTypeOut, EventTypePatch, EventTypeUpsertIn,
        EndpointIn, EndpointOut, EndpointPatch, EndpointSecretOut, EndpointSecretRotateIn, crate::routes::endpoints::EventExampleIn,
        EndpointHeadersIn, EndpointHeadersOut, EndpointOauthConfigIn, EndpointOauthConfigOut,
        EndpointAuthIn, EndpointAuthOut, EndpointMtlsConfigIn, EndpointMtlsConfigOut,
        crate::routes::inbound::SourceIn, crate::routes::inbound::SourceOut, EndpointHeadersPatchIn, EndpointStats, RecoverIn,
        BackgroundTaskOut, MessageIn, MessageOut, MessageAttemptOut, EndpointMessageOut, crate::routes::attempts::MessageEndpointOut,
        crate::routes::retention::RetentionIn, crate::routes::retention::RetentionOut,
        crate::routes::auth::AppPortalAccessIn, crate::routes::auth::AppPortalAccessOut, crate::routes::auth::ApplicationTokenExpireIn,
        crate::routes::operational::OperationalEndpointIn, crate::routes::operational::OperationalEndpointOut,
        crate::routes::integrations::IntegrationIn, crate::routes::integrations::IntegrationOut,
        crate::routes::integrations::IntegrationKeyOut,
        crate::routes::statistics::AppUsageStatsIn, crate::routes::statistics::AppUsageStatsOut,
        crate::routes::statistics::AggregateEventTypesOut,
        crate::routes::ingest::IngestSourceIn, crate::routes::ingest::IngestSourceOut,
    ))
)]
struct ApiDoc;

/// The document as JSON text.
pub fn openapi_json() -> String {
    ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|_| "{}".to_owned())
}

#[utoipa::path(get, path = "/api/v1/openapi.json", tag = "Health",
    responses((status = 200, description = "this document", content_type = "application/json")))]
pub(crate) async fn serve() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(openapi_json())
}
