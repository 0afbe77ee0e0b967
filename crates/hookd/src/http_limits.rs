//! Bounds on what a client can hold of the HTTP server before it is authenticated: the time
//! to send a request body (a stalled body is answered 408 and its connection closed), on top
//! of actix-web's own limits on the request head (`client_request_timeout`, 5 s) and the
//! number of connections per worker (`max_connections`, set from `http_max_connections`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::{BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web::Bytes;
use actix_web::{Error, HttpResponse};
use futures_core::Stream;
use tokio::time::Sleep;

/// The longest time a request body may take to arrive (app data of the server).
#[derive(Clone, Copy, Debug)]
pub struct BodyTimeout(pub Duration);

/// Middleware: the request body must arrive within [`BodyTimeout`] of the handler starting;
/// past that, reading it fails, the answer is 408 and the connection is closed.
pub async fn body_deadline(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let has_body = req.headers().contains_key(header::CONTENT_LENGTH)
        || req.headers().contains_key(header::TRANSFER_ENCODING);
    if !has_body {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let limit = req
        .app_data::<actix_web::web::Data<BodyTimeout>>()
        .map(|d| d.0)
        .unwrap_or(Duration::from_secs(10));
    let expired = Arc::new(AtomicBool::new(false));
    let (http_req, payload) = req.into_parts();
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(Deadline {
        inner: payload,
        sleep: Box::pin(tokio::time::sleep(limit)),
        expired: expired.clone(),
        done: false,
    });
    let req = ServiceRequest::from_parts(http_req, Payload::from(stream));
    let res = next.call(req).await?;
    if !expired.load(Ordering::Relaxed) {
        return Ok(res.map_into_boxed_body());
    }
    let (http_req, _) = res.into_parts();
    let mut resp = timed_out(&http_req, limit);
    resp.head_mut()
        .set_connection_type(actix_web::http::ConnectionType::Close);
    Ok(ServiceResponse::new(http_req, resp))
}

fn timed_out(req: &actix_web::HttpRequest, limit: Duration) -> HttpResponse {
    let detail = format!(
        "the request body did not arrive within {}",
        domain::duration::format_duration(limit)
    );
    let mut resp = HttpResponse::build(StatusCode::REQUEST_TIMEOUT);
    resp.insert_header((header::CONNECTION, HeaderValue::from_static("close")));
    if req.path().starts_with("/api/") {
        resp.json(serde_json::json!({"code": "request_timeout", "detail": detail}))
    } else {
        resp.content_type("text/plain; charset=utf-8")
            .body(format!("Request timed out: {detail}."))
    }
}

/// A request body that fails once its deadline passes.
struct Deadline {
    inner: Payload,
    sleep: Pin<Box<Sleep>>,
    expired: Arc<AtomicBool>,
    done: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Ready(None) => {
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(item) => Poll::Ready(item),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.done = true;
                    this.expired.store(true, Ordering::Relaxed);
                    Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "request body timed out",
                    )))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
