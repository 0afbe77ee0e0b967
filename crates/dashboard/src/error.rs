//! What can go wrong on a page, and the page each failure shows. Bad input is always a message
//! on a page (4xx); only failures of hookd itself answer 500, logged with their cause chain.

use actix_web::dev::ServiceResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::ErrorHandlerResponse;
use actix_web::{HttpRequest, HttpResponse, ResponseError};

use crate::views::{self, MessagePage};

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No valid session: the browser is sent to the login page.
    #[error("login required")]
    LoginRequired,
    /// In the portal: no valid portal session (the link expired, was revoked or is cut short).
    #[error("portal link not valid")]
    PortalLink,
    #[error("not found")]
    NotFound,
    /// A portal link posted by a page of another site (see `session::from_this_origin`).
    #[error("cross-site portal link")]
    CrossSite,
    /// The form's CSRF token is missing or is not the session's.
    #[error("CSRF token mismatch")]
    Csrf,
    /// Input the user can fix; the text is shown on the page.
    #[error("{1}")]
    BadInput(StatusCode, String),
    /// Too many requests: 429 with `Retry-After`, the text shown on the page.
    #[error("{text}")]
    TooBusy { retry_after: u64, text: String },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot render a page: {0}")]
    Render(#[from] askama::Error),
    #[error("{0}")]
    Internal(String),
}

impl PageError {
    pub fn bad_input(msg: impl Into<String>) -> Self {
        PageError::BadInput(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
    }
}

/// The operations' refusals as pages: what the user can fix keeps its text.
impl From<service::ServiceError> for PageError {
    fn from(e: service::ServiceError) -> Self {
        use service::ServiceError as E;
        match e {
            E::Invalid(errors) => PageError::bad_input(
                errors
                    .iter()
                    .map(|e| e.msg.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
            E::PayloadTooLarge { limit } => PageError::BadInput(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("The payload is larger than the limit of {limit} bytes."),
            ),
            E::RateLimited { retry_after } => {
                let secs = service::ServiceError::retry_after_secs(retry_after);
                PageError::TooBusy {
                    retry_after: secs,
                    text: format!(
                        "Your account's message rate limit is reached; try again in {secs} s."
                    ),
                }
            }
            E::Conflict(text) => PageError::BadInput(StatusCode::CONFLICT, text),
            E::Store(e) => PageError::Store(e),
        }
    }
}

impl ResponseError for PageError {
    fn status_code(&self) -> StatusCode {
        match self {
            PageError::LoginRequired => StatusCode::SEE_OTHER,
            PageError::PortalLink => StatusCode::UNAUTHORIZED,
            PageError::NotFound | PageError::Store(store::StoreError::NotFound { .. }) => {
                StatusCode::NOT_FOUND
            }
            PageError::Csrf | PageError::CrossSite => StatusCode::FORBIDDEN,
            PageError::BadInput(status, _) => *status,
            PageError::TooBusy { .. } => StatusCode::TOO_MANY_REQUESTS,
            PageError::Store(
                store::StoreError::Conflict { .. } | store::StoreError::EndpointDisabled { .. },
            ) => StatusCode::CONFLICT,
            PageError::Store(store::StoreError::Sealed(_)) => StatusCode::SERVICE_UNAVAILABLE,
            PageError::Store(e) if e.storage_fault().is_some() => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        self.page("")
    }
}

impl PageError {
    /// The error's page, its links starting with `root` (the portal's pages show the portal's
    /// chrome; see [`portal_errors`]).
    pub fn page(&self, root: &'static str) -> HttpResponse {
        let status = self.status_code();
        let mut fault_seen = None;
        let (title, text) = match self {
            PageError::LoginRequired => {
                // htmx follows redirects inside XHR; HX-Redirect makes it a full navigation.
                return HttpResponse::SeeOther()
                    .insert_header((header::LOCATION, "/login"))
                    .insert_header(("HX-Redirect", "/login"))
                    .finish();
            }
            PageError::PortalLink => (
                "This link is not valid",
                "This portal link has expired, was revoked, or was cut short when it was \
                 copied. Ask the service that gave it to you for a new link."
                    .to_owned(),
            ),
            PageError::Csrf => (
                "Request refused",
                "This form has expired or did not come from this dashboard. Reload the page \
                 and try again."
                    .to_owned(),
            ),
            PageError::CrossSite => (
                "This link was not opened",
                "Another website tried to open a portal in your browser, so nothing was \
                 changed. To open your portal, paste the link you were given into the \
                 address bar."
                    .to_owned(),
            ),
            PageError::BadInput(_, msg) => ("That did not work", msg.clone()),
            PageError::TooBusy { text, .. } => ("Please wait", text.clone()),
            PageError::Store(store::StoreError::EndpointDisabled { .. }) => (
                "That did not work",
                "This endpoint is disabled, so nothing is sent to it. Enable it first; its \
                 waiting deliveries then go out too."
                    .to_owned(),
            ),
            PageError::Store(e @ store::StoreError::Sealed(_)) => {
                tracing::error!(error = %e, "a sealed secret does not open");
                (
                    "This endpoint's secrets cannot be read",
                    "Its signing secret or a header value is sealed under a key this server \
                     was not given, or was altered. Nothing is sent to it until the operator \
                     adds the key; the server's log names it."
                        .to_owned(),
                )
            }
            PageError::Store(store::StoreError::Conflict { field }) => (
                "That did not work",
                format!("That {field} is already taken."),
            ),
            PageError::Store(e) if e.storage_fault().is_some() => {
                let fault = e
                    .storage_fault()
                    .unwrap_or(store::StorageFault::Unavailable);
                tracing::debug!(error = %error_chain(e), "refused: storage fault");
                // A refusal comes from a state the store already knows: not noted again.
                fault_seen = (!e.is_refusal()).then(|| store::FaultSeen {
                    fault,
                    cause: error_chain(e),
                });
                (
                    "Nothing was saved",
                    match fault {
                        store::StorageFault::Unavailable => {
                            "hookd cannot reach its database right now; try again in a minute."
                                .to_owned()
                        }
                        _ => format!(
                            "hookd cannot write to its database right now ({}); nothing was \
                             changed. Try again in a minute.",
                            fault.plain()
                        ),
                    },
                )
            }
            _ if status == StatusCode::NOT_FOUND => (
                "Not found",
                "There is nothing here, or it belongs to another account.".to_owned(),
            ),
            other => {
                tracing::error!(error = %error_chain(other), "dashboard request failed");
                (
                    "Something went wrong",
                    "hookd could not complete this request; the error has been logged. Try \
                     again in a moment."
                        .to_owned(),
                )
            }
        };
        // The portal's reader is the tenant's customer.
        let text = if root == crate::session::PORTAL_ROOT {
            crate::customer::words(&text)
        } else {
            text
        };
        let page = MessagePage {
            csrf: None,
            root,
            title,
            text,
        };
        let mut resp = views::render(status, &page).unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot render the error page");
            HttpResponse::build(status)
                .content_type("text/plain; charset=utf-8")
                .body(title)
        });
        if let PageError::TooBusy { retry_after, .. } = self {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        if let Some(seen) = fault_seen {
            resp.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(store::FAULT_RETRY_AFTER_SECS),
            );
            resp.extensions_mut().insert(seen);
        }
        resp
    }
}

/// The portal's error pages: the same pages as the dashboard's, in the portal's chrome (no
/// dashboard links for a tenant's customer).
pub fn portal_errors<B>(res: ServiceResponse<B>) -> actix_web::Result<ErrorHandlerResponse<B>> {
    let page = res
        .response()
        .error()
        .and_then(|e| e.as_error::<PageError>())
        .map(|e| e.page(crate::session::PORTAL_ROOT));
    Ok(ErrorHandlerResponse::Response(match page {
        Some(page) => res.into_response(page).map_into_right_body(),
        None => res.map_into_left_body(),
    }))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A form body that cannot be read (wrong content type, too large, not urlencoded).
pub fn form_error(err: actix_web::error::UrlencodedError, _: &HttpRequest) -> actix_web::Error {
    PageError::BadInput(
        StatusCode::BAD_REQUEST,
        format!("The form could not be read: {err}."),
    )
    .into()
}

/// Any path the dashboard and the API do not know.
pub async fn not_found() -> Result<HttpResponse, PageError> {
    Err(PageError::NotFound)
}

/// The pages' `Content-Security-Policy`: everything from hookd itself, no inline script or
/// style; framed only by `frame_ancestors` (`'none'` for the dashboard; the portal's own list,
/// see `portal::frame_policy`), images also from `images`.
pub fn content_security_policy(frame_ancestors: &str, images: &str) -> String {
    let sep = if images.is_empty() { "" } else { " " };
    format!(
        "default-src 'self'; img-src 'self'{sep}{images}; frame-ancestors {frame_ancestors}; \
         form-action 'self'; base-uri 'none'"
    )
}

/// For responses that must not be cached or framed.
pub fn harden(resp: &mut HttpResponse) {
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy("'none'", "")) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::PageError;

    #[tokio::test]
    async fn a_storage_fault_is_a_503_page_that_says_nothing_was_changed() {
        let e = PageError::Store(store::testing::read_only_error());
        let resp = e.page("");
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers().get("retry-after").unwrap(), "5");
        assert!(resp.extensions().get::<store::FaultSeen>().is_some());
        let body = actix_web::body::to_bytes(resp.into_body()).await.unwrap();
        let html = String::from_utf8_lossy(&body);
        assert!(
            html.contains(
                "hookd cannot write to its database right now (the database is read-only); \
                 nothing was changed"
            ),
            "{html}"
        );
        assert!(!html.contains("has been logged"), "{html}");
    }
}
