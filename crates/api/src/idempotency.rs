//! `Idempotency-Key` on POST: the first response for a key is stored and replayed for every
//! repeat of the same request; the same key with a different request is refused. Svix's SDKs
//! send a fresh key with every POST, so this runs on every create.

use actix_web::body::{BoxBody, MessageBody, to_bytes};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode, header};
use actix_web::middleware::Next;
use actix_web::{FromRequest, HttpResponse, ResponseError, web};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use store::{IdempotencyStart, Store};

use crate::extract::{authenticate, payload_too_large};
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
    let tenant = match authenticate(req.request()).await {
        Ok(t) => t,
        Err(e) => return reply(req, e),
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

    let start = match store
        .idempotency_begin(tenant, &key, &hash, domain::Timestamp::now())
        .await
    {
        Ok(s) => s,
        Err(e) => return reply(req, e.into()),
    };
    match start {
        IdempotencyStart::Replay { status, body } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let resp = HttpResponse::build(status)
                .insert_header((header::CONTENT_TYPE, "application/json"))
                .insert_header(("idempotent-replayed", "true"))
                .body(body);
            Ok(req.into_response(resp))
        }
        IdempotencyStart::InFlight => reply(
            req,
            ApiError::conflict(
                "a request with this Idempotency-Key is still being processed; retry shortly",
            ),
        ),
        IdempotencyStart::Mismatch => reply(
            req,
            ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_reused",
                "this Idempotency-Key was used for a different request",
            ),
        ),
        IdempotencyStart::New => {
            req.set_payload(Payload::from(body));
            let res = next.call(req).await?;
            let status = res.status();
            if status.is_server_error() {
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
            if let Err(e) = store
                .idempotency_complete(tenant, &key, status.as_u16(), &bytes)
                .await
            {
                tracing::warn!(error = %e, "could not store idempotent response");
            }
            let res = head.set_body(BoxBody::new(bytes));
            Ok(ServiceResponse::new(http_req, res))
        }
    }
}
