//! `/static/…`: the stylesheet and the vendored htmx, compiled into the binary so a release is
//! one file.

use actix_web::http::header;
use actix_web::{HttpResponse, web};

use crate::error::PageError;

const HTMX: &[u8] = include_bytes!("../../../static/htmx.min.js");
const CSS: &[u8] = include_bytes!("../../../static/hookd.css");
const ICON: &[u8] = include_bytes!("../../../static/favicon.svg");
const PORTAL: &[u8] = include_bytes!("../../../static/portal.js");
const UI: &[u8] = include_bytes!("../../../static/ui.js");

pub async fn serve(file: web::Path<String>) -> Result<HttpResponse, PageError> {
    let (body, content_type) = match file.as_str() {
        "htmx.min.js" => (HTMX, "text/javascript; charset=utf-8"),
        "hookd.css" => (CSS, "text/css; charset=utf-8"),
        "favicon.svg" => (ICON, "image/svg+xml"),
        "portal.js" => (PORTAL, "text/javascript; charset=utf-8"),
        "ui.js" => (UI, "text/javascript; charset=utf-8"),
        _ => return Err(PageError::NotFound),
    };
    Ok(HttpResponse::Ok()
        .content_type(content_type)
        // Short enough that a new release's stylesheet is picked up within the hour.
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .body(body))
}
