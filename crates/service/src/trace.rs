//! The span every HTTP request (API, dashboard, metrics) runs in, and how what a request
//! resolves is added to it: every line logged while serving the request then says whose it
//! was. The span is opened by the binary around the whole application; the API's extractors
//! and the dashboard's session and loaders [`note`] the ids as they learn them.

use std::fmt::Display;

/// What a request can be about, in the order it is usually resolved.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    Tenant,
    App,
    Endpoint,
    Msg,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Tenant => "tenant",
            Field::App => "app",
            Field::Endpoint => "endpoint",
            Field::Msg => "msg",
        }
    }
}

/// The `request` span: method and path now, the [`Field`]s empty until noted.
pub fn request_span(method: &str, path: &str) -> tracing::Span {
    use tracing::field::Empty;
    tracing::info_span!(
        "request",
        method,
        path,
        tenant = Empty,
        app = Empty,
        endpoint = Empty,
        msg = Empty,
    )
}

/// Records `value` as `field` of the current request's span (nothing outside a request).
pub fn note(field: Field, value: impl Display) {
    tracing::Span::current().record(field.name(), tracing::field::display(value));
}
