//! What a service operation can refuse, in terms of fields and resources rather than HTTP:
//! the API turns these into Svix's JSON shapes, the dashboard into messages on its pages.

use std::time::Duration;

use store::StoreError;

/// One problem with one input field. `field` is the field's API name, dotted for nested
/// fields (`retryPolicy.delays`); `msg` says what is wrong, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub msg: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, msg: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            msg: msg.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.msg)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The input breaks one or more rules; never empty.
    #[error("invalid input: {}", .0.first().map(ToString::to_string).unwrap_or_default())]
    Invalid(Vec<FieldError>),
    /// The payload is larger than the operator allows (bytes).
    #[error("the payload is larger than {limit} bytes")]
    PayloadTooLarge { limit: usize },
    /// The tenant's message rate limit is reached; a token is free after `retry_after`.
    #[error("the tenant's message rate limit is reached")]
    RateLimited { retry_after: Duration },
    /// A state the request cannot apply to (`what` says which, for people).
    #[error("{0}")]
    Conflict(String),
    /// Not found, a uniqueness conflict, a disabled endpoint, or a failure of the database.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<FieldError> for ServiceError {
    fn from(e: FieldError) -> Self {
        ServiceError::Invalid(vec![e])
    }
}

impl ServiceError {
    pub fn field(field: &str, msg: impl Into<String>) -> Self {
        FieldError::new(field, msg).into()
    }

    /// Whole seconds to wait, at least one, for a `RateLimited` answer.
    pub fn retry_after_secs(wait: Duration) -> u64 {
        wait.as_secs_f64().ceil().max(1.0) as u64
    }
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
