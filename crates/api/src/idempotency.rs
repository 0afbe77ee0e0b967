//! `Idempotency-Key` on POST: the first response for a key is stored and replayed for every
//! repeat of the same request; the same key with a different request is refused. Svix's SDKs
//! send a fresh key with every POST, so this runs on every create.
//!
//! Only final answers are stored. A transient one (408, 409, 425, 429, any 5xx) releases the
//! key, so a client that backs off and retries with the same key, as it should, gets its
//! request run again rather than the stored refusal. An answer whose record cannot be written
//! is kept in memory and its write retried in the background, and a retry of that key is
//! answered from memory: it never runs twice (which would create a second message).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody, to_bytes};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpResponse, ResponseError, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use store::{IdempotencyStart, Store};

use crate::extract::{identify, payload_too_large, portal_grant};
use crate::{ApiConfig, ApiError};

const HEADER: &str = "idempotency-key";

pub async fn middleware(
    mut req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let key = match req.headers().get(HEADER) {
        Some(v) if req.method() == Method::POST => v.to_str().map(str::to_owned),
        _ => return Ok(next.call(req).await?.map_into_boxed_body()),
    };
    let reply = |req: ServiceRequest, e: ApiError| Ok(req.into_response(e.error_response()));
    let key = match key {
        Ok(k) if !k.is_empty() && k.len() <= 256 => k,
        _ => {
            let e = ApiError::bad_request(
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 256 visible characters",
            );
            return reply(req, e);
        }
    };
    let tenant = match identify(req.request()).await {
        Ok(t) => t,
        Err(e) => return reply(req, e),
    };
    // A portal token's keys live apart from the tenant's and other applications' tokens': it
    // can never be answered with a reply stored for a request outside its application.
    let key = match portal_grant(req.request()) {
        Some(grant) => format!("portal:{}:{key}", grant.app),
        None => key,
    };
    let (Some(store), Some(cfg)) = (
        req.app_data::<web::Data<Store>>().cloned(),
        req.app_data::<web::Data<ApiConfig>>().cloned(),
    ) else {
        return reply(req, ApiError::internal());
    };
    let body = {
        let (http_req, payload) = req.parts_mut();
        match web::Bytes::from_request(http_req, payload).await {
            Ok(b) => b,
            Err(e) => {
                let err = match e.as_error::<actix_web::error::PayloadError>() {
                    Some(actix_web::error::PayloadError::Overflow) => {
                        payload_too_large(cfg.max_body_bytes())
                    }
                    _ => ApiError::bad_request(
                        "bad_body",
                        format!("could not read the request body: {e}"),
                    ),
                };
                return reply(req, err);
            }
        }
    };
    let mut hasher = Sha256::new();
    hasher.update(req.method().as_str());
    hasher.update(b" ");
    hasher.update(req.uri().to_string());
    hasher.update(b"\n");
    hasher.update(&body);
    let hash = URL_SAFE_NO_PAD.encode(hasher.finalize());

    if let Some(unwritten) = cfg.unwritten_replies.get(tenant, &key) {
        return if unwritten.hash == hash {
            Ok(req.into_response(replay(unwritten.status, unwritten.body)))
        } else {
            reply(req, reused_key())
        };
    }
    let start = match store
        .idempotency_begin(tenant, &key, &hash, domain::Timestamp::now())
        .await
    {
        Ok(s) => s,
        Err(e) => return reply(req, e.into()),
    };
    match start {
        IdempotencyStart::Replay { status, body } => {
            Ok(req.into_response(replay(status, web::Bytes::from(body))))
        }
        IdempotencyStart::InFlight => reply(
            req,
            ApiError::conflict(
                "a request with this Idempotency-Key is still being processed; retry shortly",
            ),
        ),
        IdempotencyStart::Mismatch => reply(req, reused_key()),
        IdempotencyStart::New => {
            req.set_payload(Payload::from(body));
            let res = match next.call(req).await {
                Ok(res) => res,
                Err(e) => {
                    let _ = store.idempotency_abort(tenant, &key).await;
                    return Err(e);
                }
            };
            let status = res.status();
            if is_transient(status) {
                let _ = store.idempotency_abort(tenant, &key).await;
                return Ok(res.map_into_boxed_body());
            }
            let (http_req, res) = res.into_parts();
            let (head, body) = res.into_parts();
            let bytes = match to_bytes(body).await {
                Ok(b) => b,
                Err(_) => {
                    let _ = store.idempotency_abort(tenant, &key).await;
                    return Ok(ServiceResponse::new(
                        http_req,
                        ApiError::internal().error_response(),
                    ));
                }
            };
            record(
                &store,
                &cfg.unwritten_replies,
                tenant,
                key,
                hash,
                status,
                bytes.clone(),
            )
            .await;
            let res = head.set_body(BoxBody::new(bytes));
            Ok(ServiceResponse::new(http_req, res))
        }
    }
}

/// Answers a client may well get differently if it retries: not stored.
fn is_transient(status: StatusCode) -> bool {
    status.is_server_error() || matches!(status.as_u16(), 408 | 409 | 425 /* Too Early */ | 429)
}

fn replay(status: u16, body: web::Bytes) -> HttpResponse {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    HttpResponse::build(status)
        .insert_header((header::CONTENT_TYPE, "application/json"))
        .insert_header(("idempotent-replayed", "true"))
        .body(body)
}

fn reused_key() -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "idempotency_key_reused",
        "this Idempotency-Key was used for a different request",
    )
}

/// Stores the answer for `key`; if the database refuses, keeps it in `unwritten` and keeps
/// trying in the background (every retry of the key is answered from there meanwhile).
async fn record(
    store: &Store,
    unwritten: &Arc<UnwrittenReplies>,
    tenant: domain::ids::TenantId,
    key: String,
    hash: String,
    status: StatusCode,
    body: web::Bytes,
) {
    let status = status.as_u16();
    match store
        .idempotency_complete(tenant, &key, status, &body)
        .await
    {
        Ok(()) => return,
        Err(e) => {
            tracing::warn!(error = %e, "could not store an idempotent response; retrying in the background")
        }
    }
    if !unwritten.insert(
        tenant,
        &key,
        Unwritten {
            hash,
            status,
            body: body.clone(),
        },
    ) {
        tracing::error!("too many idempotent responses waiting to be stored; this one is not kept");
        return;
    }
    let (store, unwritten) = (store.clone(), unwritten.clone());
    tokio::spawn(async move {
        let mut wait = Duration::from_millis(100);
        let deadline = tokio::time::Instant::now() + UNWRITTEN_KEPT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(wait).await;
            if store
                .idempotency_complete(tenant, &key, status, &body)
                .await
                .is_ok()
            {
                break;
            }
            wait = (wait * 2).min(Duration::from_secs(30));
        }
        unwritten.remove(tenant, &key);
    });
}

/// How long an answer is kept in memory while its record cannot be written.
const UNWRITTEN_KEPT: Duration = Duration::from_secs(15 * 60);
/// Most answers kept in memory at once (each holds its response body).
const UNWRITTEN_MAX: usize = 1000;

#[derive(Clone, Debug)]
struct Unwritten {
    hash: String,
    status: u16,
    body: web::Bytes,
}

/// Answers whose idempotency record could not be written yet, by (tenant, key).
#[derive(Default, Debug)]
pub struct UnwrittenReplies(Mutex<HashMap<(domain::ids::TenantId, String), Unwritten>>);

impl UnwrittenReplies {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(domain::ids::TenantId, String), Unwritten>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, tenant: domain::ids::TenantId, key: &str) -> Option<Unwritten> {
        let map = self.lock();
        if map.is_empty() {
            return None;
        }
        map.get(&(tenant, key.to_owned())).cloned()
    }

    fn insert(&self, tenant: domain::ids::TenantId, key: &str, u: Unwritten) -> bool {
        let mut map = self.lock();
        if map.len() >= UNWRITTEN_MAX {
            return false;
        }
        map.insert((tenant, key.to_owned()), u);
        true
    }

    fn remove(&self, tenant: domain::ids::TenantId, key: &str) {
        self.lock().remove(&(tenant, key.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_answers_are_not_stored() {
        for code in [408, 409, 425, 429, 500, 502, 503] {
            assert!(is_transient(StatusCode::from_u16(code).unwrap()), "{code}");
        }
        for code in [200, 201, 202, 204, 400, 401, 404, 413, 422] {
            assert!(!is_transient(StatusCode::from_u16(code).unwrap()), "{code}");
        }
    }
}
