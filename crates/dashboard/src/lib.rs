//! The tenant dashboard: server-rendered pages (askama templates in `/templates`) made quicker
//! by htmx (`hx-boost`), over the same store and services as the REST API. Everything outside
//! `/api/v1` is the dashboard's.
//!
//! Every page that shows tenant data takes a [`session::Session`], and every store call takes
//! the session's tenant, so another tenant's ids answer 404.

mod applications;
mod assets;
mod attempt_page;
mod auth;
mod bulk;
mod charts;
mod customer;
mod endpoints;
mod error;
mod event_types;
mod limiter;
mod manage;
mod messages;
mod password;
mod portal;
mod problems;
mod session;
mod settings;
mod sources;
mod views;
mod when;

use actix_web::middleware::ErrorHandlers;
use actix_web::web;

pub use auth::SignupConfig;
pub use error::PageError;
pub use limiter::{AuthLimitConfig, AuthLimits};

/// The operations' settings, shared with the API (`web::Data<service::Config>`).
pub(crate) fn service_config(req: &actix_web::HttpRequest) -> Result<&service::Config, PageError> {
    req.app_data::<web::Data<service::Config>>()
        .map(|d| d.get_ref())
        .ok_or_else(|| PageError::Internal("the dashboard needs web::Data<service::Config>".into()))
}

/// Registers the dashboard's pages. Needs `web::Data<store::Store>`,
/// `web::Data<service::Config>` and `web::Data<AuthLimits>` (one per server, shared by its
/// workers) in the app data.
pub fn configure(cfg: &mut web::ServiceConfig) {
    let form = || web::FormConfig::default().error_handler(error::form_error);
    // Forms that carry JSON (an event type's schema and example, bounded by the service at
    // `rules::MAX_SCHEMAS_BYTES`) or many choices (an endpoint's event types).
    let big_form = || {
        web::FormConfig::default()
            .limit(BIG_FORM_BYTES)
            .error_handler(error::form_error)
    };
    cfg.service(web::resource("/static/{file}").route(web::get().to(assets::serve)))
        .service(
            web::resource("/signup")
                .app_data(form())
                .route(web::get().to(auth::signup_page))
                .route(web::post().to(auth::signup)),
        )
        .service(
            web::resource("/signup/confirm")
                .app_data(form())
                .route(web::get().to(auth::confirm_page))
                .route(web::post().to(auth::confirm)),
        )
        .service(
            web::resource("/login")
                .app_data(form())
                .route(web::get().to(auth::login_page))
                .route(web::post().to(auth::login)),
        )
        .service(
            web::resource("/logout")
                .app_data(form())
                .route(web::post().to(auth::logout)),
        )
        .service(web::resource("/").route(web::get().to(endpoints::overview)))
        .service(web::resource("/settings").route(web::get().to(settings::show)))
        .service(web::resource("/sources").route(web::get().to(sources::list)))
        .service(web::resource("/event-types").route(web::get().to(event_types::list)))
        // Before `/event-types/{name}/…`; an event type named "new" is edited at
        // `/event-types/new/edit`.
        .service(
            web::resource("/event-types/new")
                .app_data(big_form())
                .route(web::get().to(event_types::new_form))
                .route(web::post().to(event_types::create)),
        )
        .service(
            web::resource("/event-types/{name}/edit")
                .app_data(big_form())
                .route(web::get().to(event_types::edit_form))
                .route(web::post().to(event_types::update)),
        )
        .service(
            web::resource("/event-types/{name}/{action}")
                .app_data(form())
                .route(web::post().to(event_types::archive)),
        )
        // Before `/sources/{source_id}`, which would take "new" as an id.
        .service(
            web::resource("/sources/new")
                .app_data(form())
                .route(web::get().to(sources::new_form))
                .route(web::post().to(sources::create)),
        )
        .service(web::resource("/sources/{source_id}").route(web::get().to(sources::show)))
        .service(
            web::resource("/sources/{source_id}/edit")
                .app_data(form())
                .route(web::get().to(sources::edit_form))
                .route(web::post().to(sources::update)),
        )
        .service(
            web::resource("/sources/{source_id}/delete")
                .app_data(form())
                .route(web::post().to(sources::delete)),
        )
        .service(
            web::resource("/settings/keys")
                .app_data(form())
                .route(web::post().to(settings::create_key)),
        )
        .service(
            web::resource("/settings/keys/{key_id}/revoke")
                .app_data(form())
                .route(web::post().to(settings::revoke_key)),
        )
        .service(
            web::resource("/settings/retention")
                .app_data(form())
                .route(web::post().to(settings::set_retention)),
        )
        .service(
            web::resource("/settings/preset")
                .app_data(form())
                .route(web::post().to(settings::set_preset)),
        )
        .service(
            web::resource("/settings/portal")
                .app_data(form())
                .route(web::post().to(settings::set_portal)),
        )
        .service(
            web::resource("/settings/email")
                .app_data(form())
                .route(web::post().to(settings::set_email)),
        )
        .service(
            web::resource("/settings/warnings")
                .app_data(form())
                .route(web::post().to(settings::set_warnings)),
        )
        .service(
            web::resource("/settings/operational")
                .app_data(form())
                .route(web::post().to(settings::add_operational)),
        )
        .service(
            web::resource("/settings/operational/{endpoint_id}/delete")
                .app_data(form())
                .route(web::post().to(settings::remove_operational)),
        )
        .service(
            web::resource("/app")
                .app_data(form())
                .route(web::post().to(manage::create_app)),
        )
        .service(web::resource("/overview/apps").route(web::get().to(endpoints::apps_fragment)))
        .service(web::resource("/overview/charts").route(web::get().to(endpoints::charts_fragment)))
        .service(
            web::resource("/app/{app_id}/portal")
                .app_data(form())
                .route(web::post().to(manage::open_portal)),
        )
        // An application's own page, on the dashboard only: the portal's home is its own.
        .service(web::resource("/app/{app_id}").route(web::get().to(applications::show)))
        .service(
            web::resource("/app/{app_id}/rename")
                .app_data(form())
                .route(web::post().to(applications::rename)),
        )
        .service(
            web::resource("/app/{app_id}/delete")
                .app_data(form())
                .route(web::post().to(applications::delete)),
        )
        .service(
            web::resource("/app/{app_id}/portal/expire-all")
                .app_data(form())
                .route(web::post().to(applications::expire_all)),
        )
        .service(
            web::resource("/app/{app_id}/portal/{link_id}/revoke")
                .app_data(form())
                .route(web::post().to(applications::revoke_link)),
        )
        // The portal: its own pages, then the application's pages the dashboard has, for the
        // one application of the portal session (see `portal`).
        .service(
            web::scope(session::PORTAL_ROOT)
                .wrap(ErrorHandlers::new().default_handler(error::portal_errors))
                // Outside the error pages, so it also sets who may frame them.
                .wrap(actix_web::middleware::from_fn(portal::frame_policy))
                .app_data(form())
                .service(web::resource("/").route(web::get().to(portal::landing)))
                .service(web::resource("/session").route(web::post().to(portal::open)))
                .service(web::resource("/brand.css").route(web::get().to(portal::brand_css)))
                .service(web::resource("/cookie-check").route(web::get().to(portal::cookie_check)))
                .service(web::resource("/logout").route(web::post().to(portal::logout)))
                .service(web::resource("/app/{app_id}").route(web::get().to(portal::home)))
                .configure(app_pages)
                .default_service(web::to(error::not_found)),
        )
        .configure(app_pages)
        .default_service(web::to(error::not_found));
}

/// The body limit of forms that carry JSON or many choices: room for
/// `service::rules::MAX_SCHEMAS_BYTES` of schema and example, percent-encoded, or for
/// `service::rules::MAX_FILTER_TYPES` event type names.
const BIG_FORM_BYTES: usize = 512 * 1024;

/// The pages of one application, on the dashboard (`/app/…`) and in the portal
/// (`/portal/app/…`): the same handlers, and the session decides which applications they find.
fn app_pages(cfg: &mut web::ServiceConfig) {
    let form = || web::FormConfig::default().error_handler(error::form_error);
    let big_form = || {
        web::FormConfig::default()
            .limit(BIG_FORM_BYTES)
            .error_handler(error::form_error)
    };
    cfg
        // Before `/app/{app_id}/endpoint/{endpoint_id}`, which would take "new" as an id.
        .service(
            web::resource("/app/{app_id}/endpoint/new")
                .app_data(big_form())
                .route(web::get().to(manage::new_form))
                .route(web::post().to(manage::create_endpoint)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}")
                .route(web::get().to(endpoints::detail)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/edit")
                .app_data(big_form())
                .route(web::get().to(manage::edit_form))
                .route(web::post().to(manage::update_endpoint)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/secret")
                .route(web::get().to(manage::secret)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/charts")
                .route(web::get().to(endpoints::endpoint_charts)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/attempts")
                .route(web::get().to(endpoints::attempts)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/dead")
                .route(web::get().to(endpoints::dead_letters)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/{action}")
                .app_data(form())
                .route(web::post().to(endpoints::act)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/bulk/start")
                .app_data(form())
                .route(web::post().to(bulk::start)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/job/{job_id}")
                .route(web::get().to(bulk::show)),
        )
        .service(
            web::resource("/app/{app_id}/endpoint/{endpoint_id}/job/{job_id}/cancel")
                .app_data(form())
                .route(web::post().to(bulk::cancel)),
        )
        .service(web::resource("/app/{app_id}/msg").route(web::get().to(messages::list)))
        .service(web::resource("/app/{app_id}/msg/{msg_id}").route(web::get().to(messages::detail)))
        .service(
            web::resource("/app/{app_id}/msg/{msg_id}/deliveries")
                .route(web::get().to(messages::deliveries)),
        )
        .service(
            web::resource("/app/{app_id}/msg/{msg_id}/payload")
                .route(web::get().to(messages::payload)),
        )
        .service(
            web::resource("/app/{app_id}/msg/{msg_id}/attempt/{attempt_id}")
                .route(web::get().to(attempt_page::show)),
        )
        .service(
            web::resource("/app/{app_id}/msg/{msg_id}/endpoint/{endpoint_id}/{action}")
                .app_data(form())
                .route(web::post().to(messages::act)),
        );
}
