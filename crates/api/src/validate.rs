//! Field checks shared by the handlers. Each returns a 422 naming the field.

use std::collections::BTreeMap;
use std::time::Duration;

use domain::Timestamp;
use domain::classify::{StatusOverrides, StatusPreset};
use domain::duration::{format_duration, parse_duration};
use domain::retry::RetryPolicy;
use domain::time::rfc3339;

use crate::ApiError;

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// uids, event type names, event ids: 1–256 of `[a-zA-Z0-9-_.]`.
pub fn ident(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > 256 || !value.chars().all(is_token_char) {
        return Err(ApiError::field(
            field,
            format!("{field} must be 1 to 256 characters of letters, digits, '-', '_' or '.'"),
        ));
    }
    Ok(())
}

/// uids also must not look like hookd ids, or lookups by "id or uid" would be ambiguous.
pub fn uid(field: &str, value: &str, id_prefix: &str) -> Result<(), ApiError> {
    ident(field, value)?;
    if value.starts_with(id_prefix) {
        return Err(ApiError::field(
            field,
            format!("{field} must not start with {id_prefix:?}"),
        ));
    }
    Ok(())
}

pub fn name(field: &str, value: &str) -> Result<String, ApiError> {
    let v = value.trim();
    if v.is_empty() || v.chars().count() > 256 || v.chars().any(char::is_control) {
        return Err(ApiError::field(
            field,
            format!("{field} must be 1 to 256 printable characters"),
        ));
    }
    Ok(v.to_owned())
}

pub fn description(value: Option<String>) -> Result<String, ApiError> {
    let v = value.unwrap_or_default();
    if v.chars().count() > 4096 {
        return Err(ApiError::field(
            "description",
            "description must be at most 4096 characters",
        ));
    }
    Ok(v)
}

/// Channels and tags: up to `max` items of 1–128 `[a-zA-Z0-9-_.:]`.
pub fn labels(field: &str, values: &[String], max: usize) -> Result<(), ApiError> {
    if values.len() > max {
        return Err(ApiError::field(
            field,
            format!("at most {max} {field} allowed"),
        ));
    }
    for v in values {
        let ok = !v.is_empty() && v.len() <= 128 && v.chars().all(|c| is_token_char(c) || c == ':');
        if !ok {
            return Err(ApiError::field(
                field,
                format!("{v:?} is not valid: use 1 to 128 letters, digits, '-', '_', '.' or ':'"),
            ));
        }
    }
    Ok(())
}

pub fn event_type_list(field: &str, values: &[String]) -> Result<(), ApiError> {
    if values.len() > 1000 {
        return Err(ApiError::field(field, "at most 1000 event types"));
    }
    values.iter().try_for_each(|v| ident(field, v))
}

pub fn throttle_rate(value: Option<u32>) -> Result<Option<i32>, ApiError> {
    match value {
        None => Ok(None),
        Some(n @ 1..=65535) => Ok(Some(n as i32)),
        Some(_) => Err(ApiError::field(
            "throttleRate",
            "throttleRate must be between 1 and 65535",
        )),
    }
}

pub fn metadata(value: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if value.len() > 50 || value.iter().any(|(k, v)| k.len() > 256 || v.len() > 4096) {
        return Err(ApiError::field(
            "metadata",
            "metadata allows at most 50 keys of up to 256 bytes with values up to 4096 bytes",
        ));
    }
    Ok(())
}

/// Headers hookd sets itself may not be overridden.
const RESERVED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "connection",
    "transfer-encoding",
    "user-agent",
    "te",
    "upgrade",
    "keep-alive",
    "proxy-authorization",
    "expect",
];

pub fn header_name(name: &str) -> Result<(), ApiError> {
    let lower = name.to_ascii_lowercase();
    let token = !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(ApiError::field(
            "headers",
            format!("{name:?} is not a valid header name"),
        ));
    }
    if lower.starts_with("webhook-")
        || lower.starts_with("svix-")
        || RESERVED_HEADERS.contains(&lower.as_str())
    {
        return Err(ApiError::field(
            "headers",
            format!("header {name:?} is set by hookd and cannot be overridden"),
        ));
    }
    Ok(())
}

pub fn headers(map: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if map.len() > 50 {
        return Err(ApiError::field("headers", "at most 50 custom headers"));
    }
    for (k, v) in map {
        header_name(k)?;
        let ok = v.len() <= 4096 && v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if !ok {
            return Err(ApiError::field(
                "headers",
                format!("the value of header {k:?} is not valid"),
            ));
        }
    }
    Ok(())
}

pub fn timestamp(loc: [&str; 2], value: &str) -> Result<Timestamp, ApiError> {
    rfc3339::parse(value).map_err(|e| ApiError::validation(loc, e.to_string()))
}

/// The `before` and `after` query parameters of a listing.
pub fn time_bounds(
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(Option<Timestamp>, Option<Timestamp>), ApiError> {
    Ok((
        before
            .map(|b| timestamp(["query", "before"], b))
            .transpose()?,
        after
            .map(|a| timestamp(["query", "after"], a))
            .transpose()?,
    ))
}

pub fn ordering_key(value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > 256 || value.chars().any(char::is_control) {
        return Err(ApiError::field(
            "orderingKey",
            "orderingKey must be 1 to 256 printable characters",
        ));
    }
    Ok(())
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
pub const DEFAULT_MAX_CONCURRENCY: u32 = 10;

pub fn timeout(value: &str) -> Result<i64, ApiError> {
    let d = parse_duration(value).map_err(|e| ApiError::field("timeout", e.to_string()))?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(120) {
        return Err(ApiError::field(
            "timeout",
            "timeout must be between 100ms and 120s",
        ));
    }
    Ok(d.as_millis() as i64)
}

pub fn timeout_text(ms: Option<i64>) -> String {
    let d = ms
        .map(|m| Duration::from_millis(m.max(0) as u64))
        .unwrap_or(DEFAULT_TIMEOUT);
    format_duration(d)
}

pub fn max_concurrency(value: u32) -> Result<i32, ApiError> {
    if (1..=1000).contains(&value) {
        Ok(value as i32)
    } else {
        Err(ApiError::field(
            "maxConcurrency",
            "maxConcurrency must be between 1 and 1000",
        ))
    }
}

/// Parses and re-serialises the retry policy in its canonical form.
pub fn retry_policy(value: serde_json::Value) -> Result<String, ApiError> {
    let policy: RetryPolicy = serde_json::from_value(value)
        .map_err(|e| ApiError::field("retryPolicy", format!("invalid retryPolicy: {}", e)))?;
    serde_json::to_string(&policy).map_err(|_| ApiError::internal())
}

pub fn status_overrides(
    preset: Option<&str>,
    retry_on: Vec<u16>,
    permanent_on: Vec<u16>,
) -> Result<Option<String>, ApiError> {
    let preset = match preset {
        None | Some("default") => StatusPreset::Default,
        Some("retry-all-but-410") => StatusPreset::RetryAllBut410,
        Some(other) => {
            return Err(ApiError::field(
                "statusPreset",
                format!("unknown statusPreset {other:?}: expected default or retry-all-but-410"),
            ));
        }
    };
    let overrides = StatusOverrides::new(preset, retry_on, permanent_on)
        .map_err(|e| ApiError::field(e.field(), e.to_string()))?;
    if overrides == StatusOverrides::default() {
        return Ok(None);
    }
    serde_json::to_string(&overrides)
        .map(Some)
        .map_err(|_| ApiError::internal())
}

pub fn stored_status_overrides(text: Option<&str>) -> StatusOverrides {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default()
}
