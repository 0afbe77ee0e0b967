//! The input rules for everything a tenant creates, in one place: the API and the dashboard
//! both check through these, so a form and an API call accept exactly the same values. Each
//! returns a [`FieldError`] naming the field (by its API name).

use std::collections::BTreeMap;
use std::time::Duration;

use domain::Timestamp;
use domain::classify::{StatusOverrides, StatusPreset};
use domain::duration::{format_duration, parse_duration};
use domain::retry::RetryPolicy;
use domain::time::rfc3339;

use crate::FieldError;

/// Longest description of an endpoint or event type (characters).
pub const MAX_DESCRIPTION: usize = 4096;
/// Most channels on an endpoint or a message.
pub const MAX_CHANNELS: usize = 10;
/// Most tags on a message.
pub const MAX_TAGS: usize = 5;
/// Most feature flags on an event type.
pub const MAX_FEATURE_FLAGS: usize = 10;
/// Largest `schemas` of an event type (bytes of its JSON): room for a detailed schema and
/// examples, while a form or an API call cannot store megabytes per event type.
pub const MAX_SCHEMAS_BYTES: usize = 64 * 1024;
/// Most event types an endpoint may filter on.
pub const MAX_FILTER_TYPES: usize = 1000;
/// Largest `maxConcurrency` of an endpoint.
pub const MAX_CONCURRENCY: u32 = 1000;
/// Most metadata entries, and most custom headers, on one endpoint or application.
pub const MAX_ENTRIES: usize = 50;
/// Longest metadata or custom-header value (bytes).
pub const MAX_VALUE_BYTES: usize = 4096;
/// Largest `throttleRate` (deliveries per second) of an endpoint or application.
pub const MAX_THROTTLE_RATE: u32 = 65535;

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// uids, event type names, event ids: 1–256 of `[a-zA-Z0-9-_.]`.
pub fn ident(field: &str, value: &str) -> Result<(), FieldError> {
    if value.is_empty() || value.len() > 256 || !value.chars().all(is_token_char) {
        return Err(FieldError::new(
            field,
            format!("{field} must be 1 to 256 characters of letters, digits, '-', '_' or '.'"),
        ));
    }
    Ok(())
}

/// uids also must not look like hookd ids, or lookups by "id or uid" would be ambiguous.
pub fn uid(field: &str, value: &str, id_prefix: &str) -> Result<(), FieldError> {
    ident(field, value)?;
    if value.starts_with(id_prefix) {
        return Err(FieldError::new(
            field,
            format!("{field} must not start with {id_prefix:?}"),
        ));
    }
    Ok(())
}

/// A Svix Ingest source's uid (Svix: at most 60 letters, digits, '-' or '_', not `src_…`).
pub fn source_uid(field: &str, value: &str, id_prefix: &str) -> Result<(), FieldError> {
    uid(field, value, id_prefix)?;
    if value.len() > 60 || value.contains('.') {
        return Err(FieldError::new(
            field,
            format!("{field} must be 1 to 60 letters, digits, '-' or '_'"),
        ));
    }
    Ok(())
}

pub fn name(field: &str, value: &str) -> Result<String, FieldError> {
    let v = value.trim();
    if v.is_empty() || v.chars().count() > 256 || v.chars().any(char::is_control) {
        return Err(FieldError::new(
            field,
            format!("{field} must be 1 to 256 printable characters"),
        ));
    }
    Ok(v.to_owned())
}

pub fn description(value: &str) -> Result<(), FieldError> {
    if value.chars().count() > MAX_DESCRIPTION {
        return Err(FieldError::new(
            "description",
            format!("description must be at most {MAX_DESCRIPTION} characters"),
        ));
    }
    Ok(())
}

/// Channels and tags: up to `max` items of 1–128 `[a-zA-Z0-9-_.:]`.
pub fn labels(field: &str, values: &[String], max: usize) -> Result<(), FieldError> {
    if values.len() > max {
        return Err(FieldError::new(
            field,
            format!("at most {max} {field} allowed"),
        ));
    }
    for (i, v) in values.iter().enumerate() {
        // Svix's lists of labels are sets (`uniqueItems`): a repeat is refused, not kept twice.
        if values[..i].contains(v) {
            return Err(FieldError::new(field, format!("“{v}” is listed twice")));
        }
        let ok = !v.is_empty() && v.len() <= 128 && v.chars().all(|c| is_token_char(c) || c == ':');
        if !ok {
            return Err(FieldError::new(
                field,
                format!("“{v}” is not valid: use 1 to 128 letters, digits, '-', '_', '.' or ':'"),
            ));
        }
    }
    Ok(())
}

pub fn event_type_list(field: &str, values: &[String]) -> Result<(), FieldError> {
    if values.len() > MAX_FILTER_TYPES {
        return Err(FieldError::new(
            field,
            format!("at most {MAX_FILTER_TYPES} event types"),
        ));
    }
    match values.iter().find(|v| ident(field, v).is_err()) {
        Some(v) => Err(FieldError::new(
            field,
            format!("“{v}” is not valid: use 1 to 256 letters, digits, '-', '_' or '.'"),
        )),
        None => Ok(()),
    }
}

/// An event type's `schemas`: an object of JSON Schemas by version (`{"1": {"type":
/// "object", …}}`), as in Svix; a schema is itself an object.
pub fn schemas(value: &serde_json::Value) -> Result<(), FieldError> {
    let Some(versions) = value.as_object() else {
        return Err(FieldError::new(
            "schemas",
            "schemas must be an object of JSON Schemas by version, like {\"1\": {\"type\": \"object\"}}",
        ));
    };
    if value.to_string().len() > MAX_SCHEMAS_BYTES {
        return Err(FieldError::new(
            "schemas",
            format!(
                "schemas must be at most {} KiB of JSON",
                MAX_SCHEMAS_BYTES / 1024
            ),
        ));
    }
    match versions.iter().find(|(_, schema)| !schema.is_object()) {
        Some((version, _)) => Err(FieldError::new(
            "schemas",
            format!("schemas.{version} must be a JSON Schema object"),
        )),
        None => Ok(()),
    }
}

/// An endpoint's `signatureHeaders`: `both`, `webhook` or `svix`; none follows the server.
pub fn signature_headers(
    value: Option<&str>,
) -> Result<Option<domain::signing::SignatureHeaders>, FieldError> {
    value
        .map(|v| {
            v.parse().map_err(|_| {
                FieldError::new(
                    "signatureHeaders",
                    "signatureHeaders must be both, webhook or svix",
                )
            })
        })
        .transpose()
}

pub fn throttle_rate(value: Option<u32>) -> Result<Option<i32>, FieldError> {
    match value {
        None => Ok(None),
        Some(n @ 1..=MAX_THROTTLE_RATE) => Ok(Some(n as i32)),
        Some(_) => Err(FieldError::new(
            "throttleRate",
            format!("throttleRate must be between 1 and {MAX_THROTTLE_RATE}"),
        )),
    }
}

/// A tenant's or application's retention choice: whole days within the operator's
/// `max_retention` (see `domain::retention`).
pub fn retention(
    days: domain::retention::RetentionDays,
    max: std::time::Duration,
) -> Result<domain::retention::RetentionDays, FieldError> {
    days.check(max)
        .map(|()| days)
        .map_err(|e| FieldError::new(e.field, e.to_string()))
}

pub fn metadata(value: &BTreeMap<String, String>) -> Result<(), FieldError> {
    if value.len() > MAX_ENTRIES
        || value
            .iter()
            .any(|(k, v)| k.len() > 256 || v.len() > MAX_VALUE_BYTES)
    {
        return Err(FieldError::new(
            "metadata",
            format!(
                "metadata allows at most {MAX_ENTRIES} keys of up to 256 bytes with values up to {MAX_VALUE_BYTES} bytes"
            ),
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

pub fn header_name(name: &str) -> Result<(), FieldError> {
    let lower = name.to_ascii_lowercase();
    let token = !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(FieldError::new(
            "headers",
            format!("{name:?} is not a valid header name"),
        ));
    }
    if lower.starts_with("webhook-")
        || lower.starts_with("svix-")
        || RESERVED_HEADERS.contains(&lower.as_str())
    {
        return Err(FieldError::new(
            "headers",
            format!("header {name:?} is set by hookd and cannot be overridden"),
        ));
    }
    Ok(())
}

pub fn headers(map: &BTreeMap<String, String>) -> Result<(), FieldError> {
    if map.len() > MAX_ENTRIES {
        return Err(FieldError::new(
            "headers",
            format!("at most {MAX_ENTRIES} custom headers"),
        ));
    }
    for (k, v) in map {
        header_name(k)?;
        let ok = v.len() <= MAX_VALUE_BYTES
            && v.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if !ok {
            return Err(FieldError::new(
                "headers",
                format!("the value of header {k:?} is not valid"),
            ));
        }
    }
    Ok(())
}

/// An RFC 3339 date and time.
pub fn timestamp(field: &str, value: &str) -> Result<Timestamp, FieldError> {
    rfc3339::parse(value).map_err(|e| FieldError::new(field, e.to_string()))
}

pub fn ordering_key(value: &str) -> Result<(), FieldError> {
    if value.is_empty() || value.len() > 256 || value.chars().any(char::is_control) {
        return Err(FieldError::new(
            "orderingKey",
            "orderingKey must be 1 to 256 printable characters",
        ));
    }
    Ok(())
}

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
pub use domain::delivery::DEFAULT_MAX_CONCURRENCY;

pub fn timeout(value: &str) -> Result<i64, FieldError> {
    let d = parse_duration(value).map_err(|e| FieldError::new("timeout", e.to_string()))?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(120) {
        return Err(FieldError::new(
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

pub fn max_concurrency(value: u32) -> Result<i32, FieldError> {
    if (1..=MAX_CONCURRENCY).contains(&value) {
        Ok(value as i32)
    } else {
        Err(FieldError::new(
            "maxConcurrency",
            format!("maxConcurrency must be between 1 and {MAX_CONCURRENCY}"),
        ))
    }
}

/// Parses and re-serialises the retry policy in its canonical form.
pub fn retry_policy(value: serde_json::Value) -> Result<String, FieldError> {
    let policy: RetryPolicy = serde_json::from_value(value)
        .map_err(|e| FieldError::new("retryPolicy", format!("invalid retryPolicy: {}", e)))?;
    // A parsed policy is plain data; serialising it cannot fail.
    Ok(serde_json::to_string(&policy).unwrap_or_default())
}

pub fn status_overrides(
    preset: Option<&str>,
    retry_on: Vec<u16>,
    permanent_on: Vec<u16>,
) -> Result<Option<String>, FieldError> {
    let preset = preset
        .map(|p| {
            p.parse::<StatusPreset>().map_err(|_| {
                FieldError::new(
                    "statusPreset",
                    format!("unknown statusPreset {p:?}: expected default or retry-all-but-410"),
                )
            })
        })
        .transpose()?;
    let overrides = StatusOverrides::new(preset, retry_on, permanent_on)
        .map_err(|e| FieldError::new(e.field(), e.to_string()))?;
    if overrides == StatusOverrides::default() {
        return Ok(None);
    }
    Ok(serde_json::to_string(&overrides).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_listed_twice_is_refused_by_name() {
        let twice = vec!["beta".to_owned(), "beta".to_owned()];
        let e = labels("featureFlags", &twice, 10).unwrap_err();
        assert!(e.msg.contains("“beta” is listed twice"), "{}", e.msg);
        assert!(labels("featureFlags", &["beta".to_owned(), "gamma".to_owned()], 10).is_ok());
    }

    #[test]
    fn an_ingest_uid_is_at_most_60_characters_without_dots() {
        assert!(source_uid("uid", &"0".repeat(60), "src_").is_ok());
        assert!(source_uid("uid", &"0".repeat(61), "src_").is_err());
        assert!(source_uid("uid", "orders.in", "src_").is_err());
        assert!(source_uid("uid", "src_x", "src_").is_err());
    }
}
