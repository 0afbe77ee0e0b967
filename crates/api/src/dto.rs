//! Wire types: Svix's shapes (camelCase) plus hookd's optional extension fields.

use std::collections::BTreeMap;

use domain::Timestamp;
use domain::time::rfc3339;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};

/// A field of a PATCH body: absent (keep), `null` (clear) or a value (set).
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            Some(v) => Patch::Value(v),
            None => Patch::Null,
        })
    }
}

impl<T> Patch<T> {
    /// The new value of an optional field: `current` when absent, `None` when null.
    pub fn apply(self, current: Option<T>) -> Option<T> {
        match self {
            Patch::Absent => current,
            Patch::Null => None,
            Patch::Value(v) => Some(v),
        }
    }

    /// The new value of a required field: `null` is treated like absent.
    pub fn apply_required(self, current: T) -> T {
        match self {
            Patch::Value(v) => v,
            _ => current,
        }
    }
}

pub fn time(ms: i64) -> String {
    rfc3339::format(Timestamp::from_millis(ms))
}

/// `{data, iterator, prevIterator, done}`, newest first.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListResponse<T: ToSchema> {
    pub data: Vec<T>,
    /// Pass as `iterator` to get the next page; null on an empty page.
    pub iterator: Option<String>,
    /// Pass as `iterator` to get the page before this one (`-` and the first item's id); null
    /// on an empty page.
    pub prev_iterator: Option<String>,
    /// True when this is the last page.
    pub done: bool,
}

impl<T: ToSchema> ListResponse<T> {
    /// A page whose rows may fail to convert (corrupt stored JSON).
    pub fn try_from_page<M>(
        page: store::Page<M>,
        f: impl FnMut(M) -> Result<T, crate::ApiError>,
    ) -> Result<Self, crate::ApiError> {
        Ok(ListResponse {
            data: page
                .data
                .into_iter()
                .map(f)
                .collect::<Result<Vec<_>, _>>()?,
            iterator: page.iterator,
            prev_iterator: page.prev_iterator,
            done: page.done,
        })
    }

    pub fn from_page<M>(page: store::Page<M>, f: impl FnMut(M) -> T) -> Self {
        let page = page.map(f);
        ListResponse {
            data: page.data,
            iterator: page.iterator,
            prev_iterator: page.prev_iterator,
            done: page.done,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Page size, 1 to 250 (default 50).
    #[param(minimum = 1, maximum = 250)]
    pub limit: Option<u64>,
    /// The `iterator` of the previous page.
    pub iterator: Option<String>,
    /// `descending` (newest first, the default) or `ascending`.
    #[param(inline, value_type = Option<String>, pattern = "^(ascending|descending)$")]
    pub order: Option<String>,
}

impl ListQuery {
    pub fn params(&self) -> Result<store::ListParams, crate::ApiError> {
        let mut p = list_params(self.limit, self.iterator.clone())?;
        p.ascending = ascending(self.order.as_deref())?;
        Ok(p)
    }
}

/// The query string as (name, value) pairs, repeated names kept (unreadable: none).
pub fn query_pairs(req: &actix_web::HttpRequest) -> Vec<(String, String)> {
    if req.query_string().is_empty() {
        return Vec::new();
    }
    actix_web::web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .unwrap_or_default()
}

/// Refuses query parameters that Svix documents on an operation and hookd does not implement,
/// when given with a value that would change the answer (anything but empty or `false`):
/// answering unfiltered data to a filter is worse than an error naming it.
#[allow(
    dead_code,
    reason = "every Svix parameter of today's operations has its effect; kept for the next one"
)]
pub fn refuse_unsupported(
    req: &actix_web::HttpRequest,
    names: &[&str],
) -> Result<(), crate::ApiError> {
    match query_pairs(req)
        .iter()
        .find(|(k, v)| names.contains(&k.as_str()) && !v.is_empty() && v != "false")
    {
        Some((k, _)) => Err(crate::ApiError::validation(
            ["query", k.as_str()],
            format!("hookd does not support `{k}` on this operation; leave it out"),
        )),
        None => Ok(()),
    }
}

/// Svix's `order` query parameter.
pub fn ascending(order: Option<&str>) -> Result<bool, crate::ApiError> {
    match order {
        None | Some("descending") => Ok(false),
        Some("ascending") => Ok(true),
        Some(_) => Err(crate::ApiError::validation(
            ["query", "order"],
            "order must be ascending or descending",
        )),
    }
}

/// The `before` and `after` query parameters of a listing.
pub fn time_bounds(
    before: Option<&str>,
    after: Option<&str>,
) -> Result<(Option<Timestamp>, Option<Timestamp>), crate::ApiError> {
    let at = |name: &str, v: &str| {
        service::rules::timestamp(name, v)
            .map_err(|e| crate::ApiError::validation(["query", name], e.msg))
    };
    Ok((
        before.map(|b| at("before", b)).transpose()?,
        after.map(|a| at("after", a)).transpose()?,
    ))
}

pub fn list_params(
    limit: Option<u64>,
    iterator: Option<String>,
) -> Result<store::ListParams, crate::ApiError> {
    let limit = match limit {
        None => 0,
        Some(n @ 1..=250) => n,
        Some(_) => {
            return Err(crate::ApiError::validation(
                ["query", "limit"],
                "limit must be between 1 and 250",
            ));
        }
    };
    Ok(store::ListParams {
        limit,
        iterator: iterator.filter(|s| !s.is_empty()),
        ascending: false,
        walk_window: 0,
    })
}

// --- applications -----------------------------------------------------------------------------

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationIn {
    #[schema(min_length = 1, max_length = 256)]
    pub name: String,
    /// Maximum messages per second delivered to each endpoint of this application.
    #[schema(minimum = 1, maximum = 65535)]
    pub throttle_rate: Option<u32>,
    /// Your own unique identifier for the application (letters, digits, `-_.`).
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub uid: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    /// hookd: days this application's payloads and attempt response bodies are kept (null:
    /// the tenant's choice, else the server's `payload_retention`); 1 to the server's
    /// `max_retention`.
    #[schema(minimum = 1)]
    #[serde(default)]
    pub payload_retention_days: Option<u32>,
    /// hookd: days its messages, deliveries and attempts are kept (null: the tenant's, else
    /// the server's `metadata_retention`).
    #[schema(minimum = 1)]
    #[serde(default)]
    pub metadata_retention_days: Option<u32>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationPatch {
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 256)]
    pub name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 65535)]
    pub throttle_rate: Patch<u32>,
    #[serde(default)]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub uid: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1)]
    pub payload_retention_days: Patch<u32>,
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1)]
    pub metadata_retention_days: Patch<u32>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationOut {
    pub id: String,
    pub uid: Option<String>,
    pub name: String,
    pub throttle_rate: Option<u32>,
    pub metadata: BTreeMap<String, String>,
    /// hookd: the application's own retention choices (null: the tenant's, else the server's).
    pub payload_retention_days: Option<u32>,
    pub metadata_retention_days: Option<u32>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetIfExists {
    /// Return the existing application (200) instead of 409 when `uid` is taken.
    pub get_if_exists: Option<bool>,
}

// --- event types ------------------------------------------------------------------------------

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeIn {
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub name: String,
    pub description: String,
    pub archived: Option<bool>,
    pub deprecated: Option<bool>,
    /// JSON Schemas of the payload, by version.
    #[schema(value_type = Option<Object>)]
    pub schemas: Option<serde_json::Value>,
    pub group_name: Option<String>,
    pub feature_flags: Option<Vec<String>>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeUpsertIn {
    #[serde(default)]
    pub description: Option<String>,
    pub archived: Option<bool>,
    pub deprecated: Option<bool>,
    #[schema(value_type = Option<Object>)]
    pub schemas: Option<serde_json::Value>,
    pub group_name: Option<String>,
    pub feature_flags: Option<Vec<String>>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EventTypePatch {
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub archived: Patch<bool>,
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub deprecated: Patch<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub schemas: Patch<serde_json::Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub group_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub feature_flags: Patch<Vec<String>>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventTypeOut {
    pub name: String,
    pub description: String,
    pub archived: bool,
    pub deprecated: bool,
    #[schema(value_type = Option<Object>)]
    pub schemas: Option<serde_json::Value>,
    pub group_name: Option<String>,
    pub feature_flags: Option<Vec<String>>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventTypeListQuery {
    #[param(minimum = 1, maximum = 250)]
    pub limit: Option<u64>,
    pub iterator: Option<String>,
    /// Include archived event types.
    pub include_archived: Option<bool>,
    /// `false`: leave out each type's `schemas` (hookd includes them unless told not to).
    pub with_content: Option<bool>,
    /// `descending` (the default) or `ascending`.
    #[param(inline, value_type = Option<String>, pattern = "^(ascending|descending)$")]
    pub order: Option<String>,
}

// --- endpoints --------------------------------------------------------------------------------

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointIn {
    /// Where deliveries go. Changing it to another host or port drops the endpoint's
    /// credentials (bearer, basic, OAuth, mTLS): set them again for the new receiver.
    #[schema(min_length = 1, max_length = 2048)]
    pub url: String,
    #[serde(default)]
    pub description: Option<String>,
    #[schema(minimum = 1, maximum = 65535)]
    pub throttle_rate: Option<u32>,
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub uid: Option<String>,
    pub disabled: Option<bool>,
    /// Only these event types are delivered; absent or null means all.
    pub filter_types: Option<Vec<String>>,
    /// Alias of `filterTypes` used by Svix's newer SDKs.
    pub event_types: Option<Vec<String>>,
    /// Only messages on one of these channels are delivered.
    pub channels: Option<Vec<String>>,
    /// A signing secret to use (`whsec_` + base64 of 24–64 bytes, or hookd: an ed25519 key
    /// `whsk_…`); generated when absent.
    pub secret: Option<String>,
    /// hookd: the kind of key generated when `secret` is absent: `hmac` (default, `v1`
    /// signatures) or `ed25519` (`v1a` signatures; `GET …/secret` gives the public key).
    #[serde(default, rename = "keyType")]
    pub key_type: Option<String>,
    pub metadata: Option<BTreeMap<String, String>>,
    /// Custom headers sent with every request.
    pub headers: Option<BTreeMap<String, String>>,
    pub version: Option<i32>,
    #[serde(flatten)]
    pub ext: EndpointExtIn,
}

/// hookd's endpoint extensions (all optional).
#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EndpointExtIn {
    #[schema(value_type = Option<Object>)]
    pub retry_policy: Option<serde_json::Value>,
    /// Per-attempt timeout, e.g. `"15s"` (100ms to 120s).
    pub timeout: Option<String>,
    /// Most requests in flight to this endpoint at once (1 to 1000; default 10).
    #[schema(minimum = 1, maximum = 1000)]
    pub max_concurrency: Option<u32>,
    /// Status codes to retry even if the table says permanent.
    pub retry_on: Option<Vec<u16>>,
    /// Status codes that end retries at once.
    pub permanent_on: Option<Vec<u16>>,
    /// `default` or `retry-all-but-410`.
    pub status_preset: Option<String>,
    /// `both` (`webhook-*` and Svix's `svix-*` signature headers), `webhook` or `svix`;
    /// absent or null: the server's `signature_headers` setting.
    #[schema(pattern = "^(both|webhook|svix)$")]
    pub signature_headers: Option<String>,
    /// Send a W3C `traceparent` header naming each attempt's span, while the server exports
    /// OpenTelemetry traces (default false).
    pub send_traceparent: Option<bool>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPatch {
    /// Where deliveries go. Changing it to another host or port drops the endpoint's
    /// credentials (bearer, basic, OAuth, mTLS): set them again for the new receiver.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub url: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 65535)]
    pub throttle_rate: Patch<u32>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub uid: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub disabled: Patch<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub filter_types: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub event_types: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<String>>)]
    pub channels: Patch<Vec<String>>,
    #[serde(default)]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    pub metadata: Patch<BTreeMap<String, String>>,
    #[serde(default)]
    #[schema(value_type = Option<i32>)]
    pub version: Patch<i32>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub retry_policy: Patch<serde_json::Value>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub timeout: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<u32>)]
    pub max_concurrency: Patch<u32>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<u16>>)]
    pub retry_on: Patch<Vec<u16>>,
    #[serde(default)]
    #[schema(value_type = Option<Vec<u16>>)]
    pub permanent_on: Patch<Vec<u16>>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub status_preset: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(both|webhook|svix)$")]
    pub signature_headers: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<bool>)]
    pub send_traceparent: Patch<bool>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOut {
    pub id: String,
    pub uid: Option<String>,
    pub url: String,
    pub description: String,
    pub version: i32,
    pub throttle_rate: Option<u32>,
    pub disabled: bool,
    /// Why the endpoint is disabled (hookd extension).
    pub disabled_reason: Option<String>,
    pub filter_types: Option<Vec<String>>,
    pub event_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    pub metadata: BTreeMap<String, String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
    /// hookd extensions.
    #[schema(value_type = Object)]
    pub retry_policy: serde_json::Value,
    pub timeout: String,
    pub max_concurrency: u32,
    pub retry_on: Vec<u16>,
    pub permanent_on: Vec<u16>,
    /// `default` or `retry-all-but-410`; null: the server's `status_preset` setting.
    pub status_preset: Option<String>,
    /// `both`, `webhook` or `svix`; null: the server's setting.
    pub signature_headers: Option<String>,
    /// Deliveries carry a W3C `traceparent` header (while traces are exported).
    pub send_traceparent: bool,
    /// `closed`, `open` or `half_open`.
    pub breaker_state: String,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct EndpointSecretOut {
    /// What receivers verify with: the HMAC secret `whsec_…`, or for an ed25519 key its public
    /// key `whpk_…` (as Svix; the private `whsk_…` key never leaves hookd).
    pub key: String,
    /// hookd: for an ed25519 key, the public key (`whpk_…`) receivers verify `v1a` signatures
    /// with.
    #[serde(rename = "publicKey", skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
}

#[derive(Deserialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSecretRotateIn {
    /// The new secret; generated when absent.
    pub key: Option<String>,
    /// hookd: the kind of key to generate when `key` is absent: `hmac` or `ed25519`; default:
    /// the current key's kind.
    #[serde(default)]
    pub key_type: Option<String>,
    /// How long the previous secret keeps signing (default 86400, at most 604800).
    #[schema(minimum = 0, maximum = 604800)]
    pub grace_period_seconds: Option<u64>,
}

#[derive(Deserialize, ToSchema)]
pub struct EndpointHeadersIn {
    pub headers: BTreeMap<String, String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointHeadersPatchIn {
    /// Headers to add or replace; a `null` value removes that header.
    pub headers: BTreeMap<String, Option<String>>,
    #[serde(default)]
    pub delete_headers: Option<Vec<String>>,
}

/// Svix's OAuth configuration of an endpoint: client credentials or a refresh token.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOauthConfigIn {
    /// `clientSecretBasic`, `clientSecretPost` or `clientSecretJwt` (an HS256 JWT assertion
    /// signed with the client secret, RFC 7523).
    pub auth_method: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub extra_params: Option<BTreeMap<String, String>>,
    /// `clientCredentials`, or `refreshToken` with `refreshToken` (kept sealed, replaced when
    /// the token endpoint issues a new one).
    pub grant_type: String,
    /// Not supported: answers 422.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub jwt_params: Option<serde_json::Value>,
    #[serde(default)]
    pub refresh_token: Option<String>,
    #[serde(default)]
    pub scopes: Option<Vec<String>>,
    pub token_url: String,
}

/// An endpoint's OAuth configuration without its secret.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointOauthConfigOut {
    pub auth_method: String,
    pub client_id: String,
    /// The extra token-request fields, by name (as Svix: an object).
    pub extra_params: BTreeMap<String, String>,
    pub grant_type: String,
    pub scopes: Vec<String>,
    pub token_url: String,
}

/// Svix's mutual-TLS configuration of an endpoint.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMtlsConfigIn {
    /// PEM: the client certificate (and any intermediates) and its private key.
    pub identity: String,
    /// PEM: CA certificates the receiver's certificate is checked against, besides the public
    /// roots (for receivers with a private CA).
    #[serde(default)]
    pub server_ca_cert: Option<String>,
}

/// An endpoint's mutual-TLS configuration without its private key.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMtlsConfigOut {
    /// The client certificate(s) hookd presents (PEM, no key).
    pub client_cert: String,
    pub server_ca_cert: Option<String>,
}

/// hookd: how an endpoint authenticates beyond its signature. `type` is `bearer` (with
/// `token`) or `basic` (with `username` and `password`); OAuth is set with `…/oauth`.
#[derive(Deserialize, ToSchema)]
pub struct EndpointAuthIn {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
}

/// hookd: what an endpoint's authentication is, without its secrets: `type` is `none`,
/// `bearer`, `basic` (with `username`) or `oauth` (with `tokenUrl`, `clientId`, `authMethod`,
/// `grantType`, `scopes` and the names of `extraParams`).
#[derive(Serialize, ToSchema)]
pub struct EndpointAuthOut {
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub shown: serde_json::Value,
}

#[derive(Serialize, ToSchema)]
pub struct EndpointHeadersOut {
    pub headers: BTreeMap<String, String>,
    pub sensitive: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct EndpointStats {
    pub success: i64,
    pub pending: i64,
    pub sending: i64,
    pub fail: i64,
    pub canceled: i64,
}

#[derive(Deserialize, ToSchema)]
pub struct RecoverIn {
    /// Failed messages created at or after this time are sent again.
    #[schema(format = DateTime)]
    pub since: String,
    #[schema(format = DateTime)]
    pub until: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundTaskOut {
    pub id: String,
    /// What the task did: `{"deliveries": n}` once a recover or replay finished, the figures of
    /// a statistics task (`appStats`, `event_types`), `{"error": "..."}` if it failed.
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
    /// `running`, `finished`, `failed` or `canceled`.
    pub status: String,
    /// `endpoint.recover`, `endpoint.replay`, `application.stats` or `event-type.aggregate`.
    pub task: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

// --- messages ---------------------------------------------------------------------------------

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageIn {
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub event_type: String,
    /// Your unique id of this event; a second message with the same id answers 409.
    #[schema(min_length = 1, max_length = 256, pattern = r"^[a-zA-Z0-9\-_.]+$")]
    pub event_id: Option<String>,
    /// The JSON object to deliver, byte for byte.
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    /// hookd: messages with the same key reach each endpoint in the order they were sent.
    #[schema(min_length = 1, max_length = 256)]
    pub ordering_key: Option<String>,
    /// Scheduled delivery: stored now, delivered from then on (RFC 3339; at most the server's
    /// `max_deliver_ahead` ahead; a past time means now).
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
    /// Creates the application with its first message when the path's application does not
    /// exist yet; its `uid` must be the path's. Ignored when the application exists.
    pub application: Option<ApplicationIn>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageOut {
    pub id: String,
    pub event_type: String,
    pub event_id: Option<String>,
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    pub ordering_key: Option<String>,
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// When a scheduled message was asked to be delivered (null: at once).
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
}

/// The filters on messages that Svix's listings share: `channel` and `tag` here, and
/// `event_types` ([`EventTypesParam`]).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageLabelsQuery {
    /// Only messages on this channel.
    pub channel: Option<String>,
    /// Only messages with this tag.
    pub tag: Option<String>,
}

/// `event_types` in the OpenAPI document. The value is read from the raw query string
/// ([`crate::routes::messages::event_types_param`]): serde's query extractor refuses a
/// repeated key and never sees `event_types[]`.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[expect(
    dead_code,
    reason = "documents the parameter; event_types_param reads it"
)]
pub struct EventTypesParam {
    /// Only messages of these event types: comma-separated (`a,b`), repeated
    /// (`event_types=a&event_types=b`) or `event_types[]=a&event_types[]=b`.
    pub event_types: Option<Vec<String>>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageListQuery {
    #[param(minimum = 1, maximum = 250)]
    pub limit: Option<u64>,
    pub iterator: Option<String>,
    /// Only messages created before this time.
    #[param(format = DateTime)]
    pub before: Option<String>,
    /// Only messages created after this time.
    #[param(format = DateTime)]
    pub after: Option<String>,
    /// Include payloads (default true).
    pub with_content: Option<bool>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WithContent {
    pub with_content: Option<bool>,
}

// --- attempts ---------------------------------------------------------------------------------

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MessageAttemptOut {
    pub id: String,
    pub msg_id: String,
    pub endpoint_id: String,
    pub url: String,
    /// The start of the response body.
    pub response: String,
    /// 0 when no response arrived (see `errorKind`).
    pub response_status_code: i32,
    pub response_duration_ms: i64,
    /// 0 success, 2 failed.
    pub status: i32,
    pub status_text: String,
    /// 0 scheduled, 1 manual.
    pub trigger_type: i32,
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// hookd: 1-based attempt number of this delivery.
    pub attempt_number: i32,
    /// hookd: `timeout`, `connect`, `dns`, `tls`, `auth`, `broker` or `http` when no status arrived.
    pub error_kind: Option<String>,
    /// hookd: why the attempt failed or ended the retries, in words (a transport error, or
    /// the receiver's `webhook-delivery: abort-message`).
    pub error_detail: Option<String>,
    /// The attempt's message, without its payload (`with_msg=true` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<MessageOut>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AttemptListQuery {
    #[param(minimum = 1, maximum = 250)]
    pub limit: Option<u64>,
    pub iterator: Option<String>,
    /// 0 success, 2 failed (1 pending and 3 sending match no attempt).
    #[param(minimum = 0, maximum = 4)]
    pub status: Option<i32>,
    /// 0 (no response), 100, 200, 300, 400 or 500.
    pub status_code_class: Option<u16>,
    #[param(format = DateTime)]
    pub before: Option<String>,
    #[param(format = DateTime)]
    pub after: Option<String>,
    /// `false`: each attempt's `response` reads `{}` (default true).
    pub with_content: Option<bool>,
    /// Attempts are never canceled in hookd (a skipped delivery makes no attempt), so both
    /// values answer the same.
    #[expect(
        dead_code,
        reason = "no attempt has status 4: both values answer the same"
    )]
    pub expanded_statuses: Option<bool>,
}

/// A delivery of a message to an endpoint (Svix's `EndpointMessageOut`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointMessageOut {
    pub id: String,
    pub event_type: String,
    pub event_id: Option<String>,
    #[schema(value_type = Object)]
    pub payload: Box<RawValue>,
    pub channels: Option<Vec<String>>,
    pub tags: Option<Vec<String>>,
    #[schema(format = DateTime)]
    pub timestamp: String,
    /// When a scheduled message was asked to be delivered (null: at once).
    #[schema(format = DateTime)]
    pub deliver_at: Option<String>,
    /// 0 success, 1 pending, 2 failed (dead letter), 3 sending, 4 skipped.
    pub status: i32,
    pub status_text: String,
    #[schema(format = DateTime)]
    pub next_attempt: Option<String>,
    /// hookd: attempts made so far, the last HTTP status and error.
    pub attempt_count: i32,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    pub ordering_key: Option<String>,
    pub sequence: Option<i64>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EndpointMessageQuery {
    #[param(minimum = 1, maximum = 250)]
    pub limit: Option<u64>,
    pub iterator: Option<String>,
    /// 0 success, 1 pending, 2 failed (dead letters), 3 sending, 4 skipped.
    #[param(minimum = 0, maximum = 4)]
    pub status: Option<i32>,
    /// Include payloads (default true).
    pub with_content: Option<bool>,
    /// Only messages created before this time.
    #[param(format = DateTime)]
    pub before: Option<String>,
    /// Only messages created after this time.
    #[param(format = DateTime)]
    pub after: Option<String>,
    /// `false`: a skipped delivery (4) reads as 0 `success`, as Svix shows a canceled one;
    /// absent or `true`: 4 `canceled`.
    pub expanded_statuses: Option<bool>,
}
