//! Receiving webhooks (issue 21): sources (`/api/v1/inbound/source`) and the inbound URL each
//! one has (`POST /in/{source_id}`), which verifies, deduplicates and acknowledges, then
//! forwards through the source's application's endpoints.

use actix_web::{HttpRequest, HttpResponse, web};
use domain::inbound_refusal::Reason;
use serde::{Deserialize, Serialize};
use service::inbound::{Received, Refusal};
use store::{Source, Store};
use utoipa::ToSchema;

use crate::extract::{JsonBody, Tenant};
use crate::{ApiConfig, ApiError};

#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceIn {
    /// Unique within the tenant: 1–256 of letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// The application (id or uid) whose endpoints receive what arrives.
    pub app_id: String,
    /// The event type of what arrives, unless the scheme names one (Stripe's `type`, GitHub's
    /// `X-GitHub-Event`).
    pub event_type: String,
    /// How requests are verified (every secret but Standard Webhooks': at least 16 bytes):
    /// `{"scheme": "standard-webhooks", "secrets": ["whsec_…"]}`,
    /// `{"scheme": "stripe", "secret": "whsec_…"}`, `{"scheme": "github", "secret": "…"}`,
    /// `{"scheme": "shopify", "secret": "…"}`, `{"scheme": "slack", "secret": "…"}`, the same
    /// for `zoom`, `tailscale`, `segment`, `docusign`, `airwallex`, `hubspot` and `twilio`
    /// (its auth token), `{"scheme": "meta", "secret": "…", "verify_token": "…"}`,
    /// `{"scheme": "hmac", "secret", "header", "algorithm", "encoding", "prefix",
    /// "timestamp_header", "id_header"}` or `{"scheme": "none"}`.
    #[schema(value_type = Object)]
    pub verification: serde_json::Value,
    /// Per-key ordering: `{"keyPointer": "/data/customer", "sequencePointer": "/data/seq",
    /// "holdGapSecs": 60}`, every member optional. Without pointers the key and sequence are
    /// hookd's `webhook-ordering-key` and `webhook-sequence` headers; an event ahead of a gap
    /// is held up to `holdGapSecs` (default 60, at most 3600; 0: arrival order, no holding).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub ordering: Option<serde_json::Value>,
    /// For schemes that sign a timestamp (Standard Webhooks, Stripe, an HMAC with a
    /// `timestamp_header`): how far it may be from now, 1–3600 s (default 300).
    #[serde(default)]
    pub tolerance_secs: Option<u64>,
}

impl SourceIn {
    /// Checked: the same rules for the API and the configuration file's `[[sources]]`.
    pub fn spec(self) -> Result<service::inbound::SourceSpec, service::ServiceError> {
        service::inbound::SourceSpec::new(service::inbound::SourceFields {
            name: self.name,
            app: self.app_id,
            event_type: self.event_type,
            verification: self.verification,
            ordering: self.ordering,
            tolerance_secs: self.tolerance_secs,
        })
    }
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceOut {
    pub id: String,
    pub name: String,
    pub app_id: String,
    pub event_type: String,
    /// The verification scheme's name (its secret is never shown again).
    pub scheme: String,
    /// Where the sender posts: `{public_url}/in/{id}`.
    pub url: String,
    #[schema(value_type = Object)]
    pub ordering: domain::inbound::Ordering,
    /// How far a signed timestamp may be from now; null for schemes that sign none.
    pub tolerance_secs: Option<u64>,
}

fn out(cfg: &ApiConfig, s: Source) -> SourceOut {
    let scheme = s.settings.scheme.name().to_owned();
    let tolerance_secs = s.settings.signed_tolerance().map(|t| t.as_secs());
    SourceOut {
        url: domain::inbound::source_url(&cfg.public_url, &s.row.id),
        id: s.row.id.to_string(),
        name: s.row.name,
        app_id: s.row.app_id.to_string(),
        event_type: s.row.event_type,
        scheme,
        ordering: s.settings.ordering,
        tolerance_secs,
    }
}

#[utoipa::path(post, path = "/api/v1/inbound/source", tag = "Inbound", request_body = SourceIn,
    responses((status = 201, body = SourceOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 409, body = crate::error::HttpErrorOut), (status = 422, body = crate::error::HttpValidationError)),
    security(("bearer" = [])))]
pub async fn create_source(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    JsonBody(body): JsonBody<SourceIn>,
) -> Result<HttpResponse, ApiError> {
    let s = service::inbound::create_source(&store, t, &body.spec()?).await?;
    Ok(HttpResponse::Created().json(out(&cfg, s)))
}

#[utoipa::path(get, path = "/api/v1/inbound/source", tag = "Inbound",
    responses((status = 200, body = Vec<SourceOut>)), security(("bearer" = [])))]
pub async fn list_sources(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
) -> Result<HttpResponse, ApiError> {
    let all: Vec<SourceOut> = store
        .list_sources(t)
        .await?
        .into_iter()
        .map(|s| out(&cfg, s))
        .collect();
    Ok(HttpResponse::Ok().json(all))
}

#[utoipa::path(get, path = "/api/v1/inbound/source/{source_id}", tag = "Inbound",
    params(("source_id" = String, Path)),
    responses((status = 200, body = SourceOut), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn get_source(
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let s = store.get_source(t, &path).await?;
    Ok(HttpResponse::Ok().json(out(&cfg, s)))
}

#[utoipa::path(delete, path = "/api/v1/inbound/source/{source_id}", tag = "Inbound",
    params(("source_id" = String, Path)),
    responses((status = 204), (status = 404, body = crate::error::HttpErrorOut)),
    security(("bearer" = [])))]
pub async fn delete_source(
    store: web::Data<Store>,
    Tenant(t): Tenant,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    store.delete_source(t, &path).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[utoipa::path(post, path = "/in/{source_id}", tag = "Inbound",
    params(("source_id" = String, Path)),
    request_body(content = Object, description = "the sender's webhook, verified on its raw bytes"),
    responses((status = 200, description = "stored (`id`) or a duplicate (`duplicate: true`)"),
        (status = 400, body = crate::error::HttpErrorOut, description = "verified, but the body is not JSON (`invalid_payload`) or its sequence is too large (`invalid_sequence`)"),
        (status = 401, body = crate::error::HttpErrorOut), (status = 404, body = crate::error::HttpErrorOut),
        (status = 413, body = crate::error::HttpErrorOut)))]
/// `POST /in/{source_id}`: unauthenticated but for its signature. A bad signature answers 401
/// and stores nothing; a body that is not JSON answers 400 and stores nothing; a verified event
/// is stored and answered 200 at once (a copy of one seen before: 200 with `duplicate`), then
/// forwarded.
pub async fn receive(
    req: HttpRequest,
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    let (path, token) = source_in(&req);
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let headers = || {
        req.headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect()
    };
    let arrival = service::inbound::Arrival {
        header: &header,
        headers: &headers,
        remote: req
            .peer_addr()
            .map(|a| a.ip().to_string())
            .unwrap_or_default(),
        token,
        url: signed_url(&cfg, &req),
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            let err = crate::extract::body_error(&req, e);
            let reason = if err.status == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE {
                Reason::TooLarge
            } else {
                Reason::UnreadableBody
            };
            service::inbound::refused_unread(
                &store,
                &cfg.service,
                path,
                &arrival,
                reason,
                &err.detail,
            )
            .await;
            return Err(err);
        }
    };
    let answer = service::inbound::receive(&store, &cfg.service, path, &arrival, &body).await;
    cfg.inbound_counts.record(match &answer {
        Ok(Received::Stored(_)) => crate::InboundResult::Stored,
        Ok(Received::Held) => crate::InboundResult::Held,
        // A handshake, like a duplicate, verified and stored nothing.
        Ok(Received::Duplicate | Received::Challenge(_)) => crate::InboundResult::Duplicate,
        Err(Refusal::Unverified(_)) => crate::InboundResult::Refused,
        Err(Refusal::NotFound) => crate::InboundResult::UnknownSource,
        Err(Refusal::Full(_)) => crate::InboundResult::Full,
        Err(Refusal::Invalid { .. }) => crate::InboundResult::Failed,
        Err(Refusal::Service(_)) => crate::InboundResult::Failed,
    });
    match answer {
        Ok(Received::Stored(id)) => {
            Ok(HttpResponse::Ok().json(serde_json::json!({"id": id.to_string()})))
        }
        Ok(Received::Duplicate) => {
            Ok(HttpResponse::Ok().json(serde_json::json!({"duplicate": true})))
        }
        Ok(Received::Held) => Ok(HttpResponse::Ok().json(serde_json::json!({"held": true}))),
        Ok(Received::Challenge(answer)) => Ok(HttpResponse::Ok().json(answer)),
        Err(Refusal::NotFound) => Err(ApiError::not_found("source")),
        Err(Refusal::Unverified(why)) => {
            tracing::info!(source = %path, reason = %why, "inbound request refused");
            Err(ApiError::new(
                actix_web::http::StatusCode::UNAUTHORIZED,
                "invalid_signature",
                why.to_string(),
            ))
        }
        Err(Refusal::Invalid { code, detail }) => Err(ApiError::bad_request(code, detail)),
        Err(full @ Refusal::Full(_)) => Err(ApiError {
            retry_after: Some(FULL_RETRY_AFTER_SECS),
            ..ApiError::new(
                actix_web::http::StatusCode::TOO_MANY_REQUESTS,
                "too_many_held",
                full.to_string(),
            )
        }),
        Err(Refusal::Service(e)) => Err(e.into()),
    }
}

/// [`receive`] at an Ingest source's URL, which carries its token (decision 92).
#[utoipa::path(post, path = "/in/{source_id}/{token}", tag = "Inbound",
    params(("source_id" = String, Path), ("token" = String, Path, description = "the source's URL token (`ingestUrl`)")),
    request_body(content = Object, description = "the sender's webhook, verified on its raw bytes"),
    responses((status = 200, description = "stored (`id`), a duplicate (`duplicate: true`) or a handshake's answer"),
        (status = 400, body = crate::error::HttpErrorOut), (status = 401, body = crate::error::HttpErrorOut),
        (status = 404, body = crate::error::HttpErrorOut, description = "no such source, or not its token"),
        (status = 413, body = crate::error::HttpErrorOut)))]
pub async fn receive_at_token(
    req: HttpRequest,
    store: web::Data<Store>,
    cfg: web::Data<ApiConfig>,
    body: Result<web::Bytes, actix_web::Error>,
) -> Result<HttpResponse, ApiError> {
    receive(req, store, cfg, body).await
}

/// [`handshake`] at an Ingest source's URL, which carries its token.
#[utoipa::path(get, path = "/in/{source_id}/{token}", tag = "Inbound",
    params(("source_id" = String, Path), ("token" = String, Path)),
    responses((status = 200, description = "the `hub.challenge` echoed"),
        (status = 403, body = crate::error::HttpErrorOut), (status = 404, body = crate::error::HttpErrorOut)))]
pub async fn handshake_at_token(
    req: HttpRequest,
    store: web::Data<Store>,
) -> Result<HttpResponse, ApiError> {
    handshake(req, store).await
}

/// The source id and URL token a request to `/in/{source_id}[/{token}]` names.
fn source_in(req: &HttpRequest) -> (&str, Option<&str>) {
    let info = req.match_info();
    (info.get("source_id").unwrap_or_default(), info.get("token"))
}

/// The URL a sender posted to, as hookd shows it: the public URL (what the tenant gave the
/// sender), the source's path and the request's query. Behind a proxy that rewrites paths or
/// schemes, `public_url` must still be the address senders use, or URL-signing schemes
/// (Twilio) cannot match.
fn signed_url(cfg: &ApiConfig, req: &HttpRequest) -> String {
    let (id, token) = source_in(req);
    let url = domain::inbound::source_url_with(&cfg.public_url, &id, token);
    match req.query_string() {
        "" => url,
        q => format!("{url}?{q}"),
    }
}

#[utoipa::path(get, path = "/in/{source_id}", tag = "Inbound",
    params(("source_id" = String, Path)),
    responses((status = 200, description = "the `hub.challenge` echoed (Meta's subscription handshake)"),
        (status = 403, body = crate::error::HttpErrorOut), (status = 404, body = crate::error::HttpErrorOut)))]
/// `GET /in/{source_id}`: a vendor's subscription handshake (Meta: `hub.mode=subscribe`,
/// `hub.verify_token`, `hub.challenge`), answered with the challenge as text when the verify
/// token is the source's; 403 otherwise.
pub async fn handshake(
    req: HttpRequest,
    store: web::Data<Store>,
) -> Result<HttpResponse, ApiError> {
    let (id, token) = source_in(&req);
    let query: Vec<(String, String)> = form_urlencoded_pairs(req.query_string());
    match service::inbound::handshake(&store, id, token, &query).await {
        Ok(Some(challenge)) => Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .body(challenge)),
        Ok(None) => Err(ApiError::new(
            actix_web::http::StatusCode::FORBIDDEN,
            "forbidden",
            "this source answers no handshake with this verify token (Meta sources: \
             hub.mode=subscribe and the source's verify token)",
        )),
        Err(Refusal::NotFound) => Err(ApiError::not_found("source")),
        Err(Refusal::Service(e)) => Err(e.into()),
        Err(other) => Err(ApiError::bad_request("invalid_request", other.to_string())),
    }
}

fn form_urlencoded_pairs(query: &str) -> Vec<(String, String)> {
    web::Query::<Vec<(String, String)>>::from_query(query)
        .map(|q| q.into_inner())
        .unwrap_or_default()
}

/// When a sender refused for a full source should try again: the gaps it waits on fill as
/// their events arrive (those are still taken), or are given up after the source's hold time.
const FULL_RETRY_AFTER_SECS: u64 = 5;
