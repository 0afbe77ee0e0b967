//! API errors. Every failure is JSON with a stable `code`:
//! - field problems: 422 `{"code": "validation", "detail": [{"loc": ["body", "url"], "msg": …,
//!   "type": "value_error"}]}` (the shape Svix's SDKs parse);
//! - everything else: `{"code": …, "detail": "…"}` with the fitting status.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
    /// For validation errors: where the problem is, e.g. `["body", "url"]`.
    pub loc: Option<Vec<String>>,
    /// Seconds, for 429 and 503 answers.
    pub retry_after: Option<u64>,
    /// The storage fault behind a 503, for the server to note (see `store::FaultSeen`).
    pub fault: Option<(store::StorageFault, String)>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HttpErrorOut {
    /// A stable, machine-readable error code.
    pub code: String,
    /// What went wrong, for people.
    pub detail: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct ValidationError {
    /// Where the problem is: `["body", "field", …]`, `["query", "name"]` or `["path", "name"]`.
    pub loc: Vec<String>,
    pub msg: String,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct HttpValidationError {
    pub code: String,
    pub detail: Vec<ValidationError>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            loc: None,
            retry_after: None,
            fault: None,
        }
    }

    /// 503 for a request the database could not serve because it cannot write (or cannot be
    /// reached) right now; `cause` goes to the log, never to the client.
    pub fn storage(fault: store::StorageFault, cause: String) -> Self {
        use store::StorageFault as F;
        let secs = store::FAULT_RETRY_AFTER_SECS;
        let detail = match fault {
            F::Full | F::ReadOnly => format!(
                "hookd cannot write to its database right now ({}); nothing was changed; retry in {secs} s",
                fault.plain()
            ),
            F::Unavailable => {
                format!("hookd cannot reach its database right now; retry in {secs} s")
            }
        };
        ApiError {
            retry_after: Some(secs),
            fault: Some((fault, cause)),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, fault.code(), detail)
        }
    }

    /// 422 naming the field: `loc` is e.g. `["body", "url"]`.
    pub fn validation<S: Into<String>>(
        loc: impl IntoIterator<Item = S>,
        msg: impl Into<String>,
    ) -> Self {
        ApiError {
            loc: Some(loc.into_iter().map(Into::into).collect()),
            ..ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "validation", msg)
        }
    }

    /// 422 for a body field.
    pub fn field(name: &str, msg: impl Into<String>) -> Self {
        let loc: Vec<String> = std::iter::once("body".to_owned())
            .chain(name.split('.').map(str::to_owned))
            .collect();
        ApiError::validation(loc, msg)
    }

    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, detail)
    }

    pub fn not_found(what: &str) -> Self {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, "conflict", detail)
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn internal() -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; it has been logged",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.detail)
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.status
    }

    fn error_response(&self) -> HttpResponse {
        let mut resp = HttpResponse::build(self.status);
        if let Some(secs) = self.retry_after {
            resp.insert_header((header::RETRY_AFTER, HeaderValue::from(secs)));
        }
        if let Some((fault, cause)) = &self.fault {
            resp.extensions_mut().insert(store::FaultSeen {
                fault: *fault,
                cause: cause.clone(),
            });
        }
        match &self.loc {
            Some(loc) => resp.json(json!({
                "code": self.code,
                "detail": [{ "loc": loc, "msg": self.detail, "type": "value_error" }],
            })),
            None => resp.json(json!({ "code": self.code, "detail": self.detail })),
        }
    }
}

impl From<service::FieldError> for ApiError {
    fn from(e: service::FieldError) -> Self {
        ApiError::field(&e.field, e.msg)
    }
}

/// The service's refusals in Svix's shapes. Of several field problems the first is answered,
/// as Svix's server does.
impl From<service::ServiceError> for ApiError {
    fn from(e: service::ServiceError) -> Self {
        use service::ServiceError as E;
        match e {
            E::Invalid(mut errors) if !errors.is_empty() => errors.swap_remove(0).into(),
            E::Invalid(_) => ApiError::internal(),
            E::PayloadTooLarge { limit } => crate::extract::payload_too_large(limit),
            E::RateLimited { retry_after } => {
                let secs = service::ServiceError::retry_after_secs(retry_after);
                ApiError {
                    retry_after: Some(secs),
                    ..ApiError::new(
                        StatusCode::TOO_MANY_REQUESTS,
                        "rate_limited",
                        format!("this tenant's message rate limit is reached; retry in {secs} s"),
                    )
                }
            }
            E::Conflict(detail) => ApiError::conflict(detail),
            E::Store(e) => e.into(),
        }
    }
}

impl From<store::StoreError> for ApiError {
    fn from(e: store::StoreError) -> Self {
        use store::StoreError as E;
        match e {
            E::NotFound { entity } => ApiError::not_found(entity),
            E::Conflict { field } => ApiError::conflict(format!("{field} already exists")),
            e @ E::EndpointDisabled { .. } => {
                ApiError::new(StatusCode::CONFLICT, "endpoint_disabled", e.to_string())
            }
            // The operator's keys, not the request: the text names the key, never the value.
            e @ E::Sealed(_) => {
                tracing::error!(error = %e, "a sealed secret does not open");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "secret_unavailable",
                    e.to_string(),
                )
            }
            other => match other.storage_fault() {
                // Logged once when the state changes (see `store::StorageHealth`).
                Some(fault) => {
                    let cause = error_chain(&other);
                    tracing::debug!(error = %cause, "refused: storage fault");
                    let mut e = ApiError::storage(fault, cause);
                    // Refused by the store's own state, which it already knows: not noted
                    // again, and said in the store's words (they are meant for people).
                    if let E::Refused { why, .. } = &other {
                        e.fault = None;
                        e.detail = format!(
                            "hookd cannot take this right now: {why}; nothing was changed; retry in {} s",
                            store::FAULT_RETRY_AFTER_SECS
                        );
                    }
                    e
                }
                None => {
                    // Internals stay in the log, with their whole cause chain.
                    tracing::error!(error = %error_chain(&other), "store error");
                    ApiError::internal()
                }
            },
        }
    }
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

pub(crate) async fn no_route(req: HttpRequest) -> HttpResponse {
    ApiError::not_found(&format!("route {} {}", req.method(), req.path())).error_response()
}

/// Query-string problems (actix's `web::Query`) as 422 naming the parameter.
pub(crate) fn query_error(
    err: actix_web::error::QueryPayloadError,
    _: &HttpRequest,
) -> actix_web::Error {
    ApiError::validation(["query"], format!("invalid query string: {err}")).into()
}

/// Path problems as 404: an id that cannot exist names nothing.
pub(crate) fn path_error(err: actix_web::error::PathError, _: &HttpRequest) -> actix_web::Error {
    ApiError::not_found(&format!("resource ({err})")).into()
}

/// 405 for a known path and a method it does not have, with the `Allow` header.
pub(crate) fn method_not_allowed(req: &HttpRequest, allowed: &[&str]) -> HttpResponse {
    let allow: Vec<String> = allowed.iter().map(|m| m.to_ascii_uppercase()).collect();
    let mut resp = ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} {} is not supported; allowed: {}",
            req.method(),
            req.path(),
            allow.join(", ")
        ),
    )
    .error_response();
    if let Ok(v) = HeaderValue::from_str(&allow.join(", ")) {
        resp.headers_mut().insert(header::ALLOW, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::ApiError;
    use actix_web::ResponseError;

    #[tokio::test]
    async fn a_storage_fault_is_a_503_with_retry_after_and_its_code() {
        let e = ApiError::from(store::testing::read_only_error());
        let resp = e.error_response();
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers().get("retry-after").unwrap(), "5");
        assert!(resp.extensions().get::<store::FaultSeen>().is_some());
        let body = actix_web::body::to_bytes(resp.into_body()).await.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["code"], "storage_read_only");
        let detail = json["detail"].as_str().unwrap();
        assert!(detail.contains("the database is read-only"), "{detail}");
        assert!(
            !detail.contains("attempt to write"),
            "driver text stays in the log: {detail}"
        );
        // Other store errors keep their answers.
        let e = ApiError::from(store::StoreError::not_found("application"));
        assert_eq!(e.status, 404);
    }
}
