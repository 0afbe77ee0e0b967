//! One attempt: build the signed request, send it, classify the outcome and decide what next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::Timestamp;
use domain::attempt::{HeaderList, SentHeaders, signing_headers};
use domain::classify::{Classification, Outcome, StatusOverrides, StatusPreset, classify};
use domain::delivery::ErrorKind;
use domain::egress::Egress;
use domain::endpoint_auth::EndpointAuth;
use domain::endpoint_url::EndpointUrl;
use domain::retry::{Decision, next_attempt};
use domain::retry_after::parse_retry_after;
use domain::signing::{EndpointKey, SignatureHeaders, signature_header};
use store::entities::{delivery, message};
use store::{AttemptResult, DispatchEndpoint, Next, attempt_row, retry_policy_of};

use crate::DispatcherConfig;

/// How much of a response body is kept with the attempt.
pub const EXCERPT_BYTES: usize = domain::attempt::BODY_KEPT_BYTES;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// The W3C trace context header an endpoint may opt in to.
const TRACEPARENT: &str = "traceparent";

/// An endpoint as its attempts need it, worked out once per batch of claims rather than once
/// per attempt: where to send (or why it cannot be sent to), the signing secrets, the custom
/// headers and the status overrides.
pub(crate) struct Prepared {
    pub ep: Arc<DispatchEndpoint>,
    url: Result<reqwest::Url, (ErrorKind, String)>,
    /// The URL of a broker destination (`url` is then not requested).
    broker: Option<EndpointUrl>,
    secrets: Vec<EndpointKey>,
    headers: Vec<(String, String)>,
    overrides: StatusOverrides,
    /// The endpoint's choice, or the server's.
    signature_headers: SignatureHeaders,
    /// Where the endpoint's tenant may send (checked again at connect time).
    pub egress: Arc<Egress>,
    /// The tenant's failure preset it was prepared with.
    pub tenant_preset: Option<StatusPreset>,
}

impl Prepared {
    /// `https_only` (the server's `endpoint_https_only`) holds at send time too: an `http://`
    /// endpoint set before it was turned on gets an attempt error, not a plain-text request.
    /// An endpoint whose stored headers or status overrides cannot be read is not sent to
    /// (without them): each attempt fails with the reason. Failures are classified by the
    /// endpoint's `statusPreset`, else its tenant's (`tenant_preset`), else the server's.
    pub(crate) fn new(
        ep: Arc<DispatchEndpoint>,
        cfg: &DispatcherConfig,
        tenant_preset: Option<StatusPreset>,
        egress: Arc<Egress>,
    ) -> Prepared {
        let https_only = cfg.https_only;
        let e = &ep.endpoint;
        let stored = match &ep.unreadable {
            Some(why) => Err(why.clone()),
            None => e
                .status_overrides()
                .map(|o| (ep.headers.clone(), o))
                .map_err(|err| err.to_string()),
        }
        .map_err(|why| (ErrorKind::Http, why));
        let (headers, overrides, url) = match stored {
            Ok((h, o)) => (
                h,
                o,
                EndpointUrl::parse(&e.url, https_only)
                    .map_err(|e| (ErrorKind::Http, e.to_string())),
            ),
            Err(err) => (Default::default(), Default::default(), Err(err)),
        };
        let broker = url
            .as_ref()
            .ok()
            .filter(|u| u.destination().is_some())
            .cloned();
        let url = url.and_then(|url| {
            // Names are checked by the resolver at connect time; literals never reach it.
            if let Some(ip) = url.host_ip() {
                egress
                    .admit(url.host(), ip)
                    .map_err(|e| (ErrorKind::Connect, e.to_string()))?;
            }
            reqwest::Url::parse(url.as_str()).map_err(|e| (ErrorKind::Http, e.to_string()))
        });
        let broker = broker.filter(|_| url.is_ok());
        let secrets = ep
            .secrets
            .iter()
            .filter_map(|s| EndpointKey::parse(s).ok())
            .collect();
        Prepared {
            overrides: overrides.or_preset(tenant_preset.unwrap_or(cfg.status_preset)),
            signature_headers: e.signature_headers.unwrap_or(cfg.signature_headers),
            url,
            broker,
            secrets,
            egress,
            tenant_preset,
            // The endpoint's authentication sets `Authorization`; a custom header of that name
            // would send two.
            headers: headers
                .into_iter()
                .filter(|(k, _)| ep.auth.is_none() || !k.eq_ignore_ascii_case("authorization"))
                .collect(),
            ep,
        }
    }
}

/// The response header with which a receiver controls delivery (Svix's delivery control):
/// `abort-message` stops the retries of the message just sent; `disable` disables the endpoint.
const ABORT_HEADER: &str = "webhook-delivery";
const ABORT_VALUE: &str = "abort-message";
const DISABLE_VALUE: &str = "disable";

struct Response {
    status: Option<u16>,
    /// A broker destination confirmed the message (there is no status).
    published: bool,
    retry_after: Option<String>,
    /// End the retries whatever the status: the receiver answered `webhook-delivery:
    /// abort-message` (Svix's way), or nothing is left to send.
    abort: bool,
    /// The receiver answered `webhook-delivery: disable`: disable the endpoint.
    disable: bool,
    excerpt: Option<String>,
    /// The response's headers as a bounded [`HeaderList`] in JSON.
    headers: Option<String>,
    error: Option<(ErrorKind, String)>,
}

/// What sends: the shared client, the OAuth tokens, the clients of mTLS endpoints and the
/// broker connections.
pub(crate) struct Senders {
    pub clients: Arc<crate::http::Clients>,
    pub tokens: crate::auth::Tokens,
    pub mtls: crate::http::MtlsClients,
    pub brokers: crate::broker::Brokers,
}

pub(crate) async fn attempt(
    http: &Senders,
    target: &Prepared,
    msg: &message::Model,
    d: &delivery::Model,
) -> AttemptResult {
    let started = Timestamp::now();
    let clock = Instant::now();
    let e = &target.ep.endpoint;
    let timeout = e
        .timeout_ms
        .map(|ms| Duration::from_millis(ms.max(1) as u64))
        .unwrap_or(DEFAULT_TIMEOUT);
    // Worked out once: sent, and (all but the endpoint's own headers, which it keeps) stored.
    let sent = if msg.is_expunged() {
        Vec::new()
    } else {
        headers(target, msg, d, started)
    };
    let response = if msg.is_expunged() {
        // Expunged while a retry was pending: nothing is left to send, and nothing is sent.
        Response {
            status: None,
            published: false,
            retry_after: None,
            abort: true,
            disable: false,
            excerpt: None,
            headers: None,
            error: Some((ErrorKind::Http, store::EXPUNGED.to_owned())),
        }
    } else if let Some(url) = &target.broker {
        Box::pin(publish(http, target, url, msg, sent.clone(), timeout)).await
    } else {
        let tokens = &http.tokens;
        let egress = &target.egress;
        let shared = http
            .clients
            .client(egress)
            .map_err(|why| (ErrorKind::Connect, why));
        let client = match (&target.ep.mtls, &shared) {
            (Some(m), _) => http
                .mtls
                .client(m, egress)
                .map_err(|why| (ErrorKind::Tls, why)),
            (None, c) => c.clone(),
        };
        let built = client.and_then(|c| build(&c, target, msg, &sent, timeout));
        let req = match (built, &target.ep.auth, shared) {
            (Ok(req), Some(auth), Ok(shared)) => {
                Box::pin(tokens.authorization(&shared, egress, e.id, auth, timeout))
                    .await
                    .map(|v| req.header("authorization", v))
            }
            (Ok(_), Some(_), Err(err)) => Err(err),
            (req, ..) => req,
        };
        match req {
            Ok(req) => {
                let r = execute(req).await;
                if r.status == Some(401) && matches!(target.ep.auth, Some(EndpointAuth::OAuth(_))) {
                    // Refused, perhaps revoked early: the next attempt asks for a new token.
                    tokens.forget(e.id);
                }
                r
            }
            Err(err) => Response {
                status: None,
                published: false,
                retry_after: None,
                abort: false,
                disable: false,
                excerpt: None,
                headers: None,
                error: Some(err),
            },
        }
    };
    let duration_ms = i32::try_from(clock.elapsed().as_millis()).unwrap_or(i32::MAX);
    let outcome = match (response.status, &response.error) {
        (Some(s), _) => Outcome::Status(s),
        (None, Some((kind, _))) => Outcome::Error(*kind),
        (None, None) if response.published => Outcome::Published,
        (None, None) => Outcome::Error(ErrorKind::Http),
    };
    let class = match classify(outcome, &target.overrides) {
        // A receiver may end the retries of a message it will never accept, whatever its
        // status says; a 2xx is still a success.
        Classification::Retry | Classification::Permanent { .. } if response.abort => {
            Classification::Permanent {
                disable_endpoint: false,
            }
        }
        class => class,
    };
    // Retry-After counts on 429 and 503 only (DESIGN.md).
    let retry_after = match response.status {
        Some(429 | 503) => response
            .retry_after
            .as_deref()
            .and_then(|v| parse_retry_after(v, Timestamp::now())),
        _ => None,
    };
    let (next, gone) = match class {
        Classification::Success => (Next::Succeeded, None),
        Classification::Permanent { disable_endpoint } => (
            Next::Failed,
            disable_endpoint.then(|| "the endpoint answered 410 Gone".to_owned()),
        ),
        Classification::Retry => {
            let policy = retry_policy_of(e);
            let failed = (d.attempt_count + 1 - d.attempts_at_arm).max(1) as u32;
            let prev = d.last_attempt_at.map(|last| {
                Timestamp::from_millis(d.next_attempt_at).since(Timestamp::from_millis(last))
            });
            let now = Timestamp::now();
            let decision = next_attempt(
                &policy,
                failed,
                now,
                Timestamp::from_millis(d.give_up_at),
                retry_after,
                prev,
                &mut rand::rng(),
            );
            match decision {
                Decision::RetryAt { at, .. } => (Next::Retry { at }, None),
                Decision::GiveUp(_) => (Next::Failed, None),
            }
        }
    };
    // The receiver's own request to stop all deliveries; this message's result stands as its
    // status says (a retry waits, like every other delivery, until the endpoint is enabled).
    let disable = gone.or_else(|| {
        response.disable.then(|| {
            format!("the receiver asked to disable this endpoint ({ABORT_HEADER}: {DISABLE_VALUE})")
        })
    });
    let (error_kind, error_detail) = match response.error {
        Some((k, detail)) => (Some(k), Some(detail)),
        None if response.abort && class != Classification::Success => (
            None,
            Some(format!(
                "the receiver asked to stop retrying this message ({ABORT_HEADER}: {ABORT_VALUE})"
            )),
        ),
        None => (None, None),
    };
    let mut attempt = attempt_row(
        d,
        &e.url,
        started,
        duration_ms,
        response.status,
        response.excerpt,
        error_kind,
        error_detail,
        class.verdict(),
        retry_after.map(|r| r.as_millis() as i64),
    );
    let own = sent.len().saturating_sub(target.headers.len());
    attempt.request_headers =
        (own > 0).then(|| SentHeaders::keep(target.signature_headers, &sent[..own]).to_stored());
    attempt.response_headers = response.headers;
    AttemptResult {
        delivery: d.clone(),
        app_id: e.app_id,
        attempt,
        next,
        disable_endpoint: disable,
    }
}

fn build(
    client: &reqwest::Client,
    target: &Prepared,
    msg: &message::Model,
    sent: &[(&str, String)],
    timeout: Duration,
) -> Result<reqwest::RequestBuilder, (ErrorKind, String)> {
    let url = target.url.clone()?;
    let mut req = client
        .post(url)
        .timeout(timeout)
        .header("content-type", "application/json");
    for (k, v) in sent {
        req = req.header(*k, v);
    }
    Ok(req.body(msg.payload.clone()))
}

/// What goes with every attempt's body, to a receiver as HTTP headers and to a broker as its
/// message headers: the attempt number, the signed id and timestamp with the signature (under
/// the endpoint's names), the ordering key and sequence, then the endpoint's own headers.
fn headers<'a>(
    target: &'a Prepared,
    msg: &message::Model,
    d: &delivery::Model,
    now: Timestamp,
) -> Vec<(&'a str, String)> {
    let ts = now.as_secs();
    let msg_id = msg.id.to_string();
    let signature = signature_header(&target.secrets, &msg_id, ts, &msg.payload);
    let mut out = signing_headers(
        target.signature_headers,
        d.attempt_count + 1,
        &msg_id,
        ts,
        &signature,
    );
    if let (Some(key), Some(seq)) = (&d.ordering_key, d.seq) {
        out.push(("webhook-ordering-key", key.clone()));
        out.push(("webhook-sequence", seq.to_string()));
    }
    // An endpoint that opted in learns the attempt's span (it runs in it), unless it set a
    // `traceparent` of its own. Outside the signature, as every header but the signed three.
    if target.ep.endpoint.send_traceparent
        && !target
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case(TRACEPARENT))
        && let Some(traceparent) = store::trace::current()
    {
        out.push((TRACEPARENT, traceparent));
    }
    for (k, v) in &target.headers {
        out.push((k.as_str(), v.clone()));
    }
    out
}

/// An attempt to a broker destination: the same body and headers as an HTTP attempt, published
/// and confirmed (see `crate::broker`).
async fn publish(
    senders: &Senders,
    target: &Prepared,
    url: &EndpointUrl,
    msg: &message::Model,
    sent: Vec<(&str, String)>,
    timeout: Duration,
) -> Response {
    let id = msg.id.to_string();
    let out = crate::broker::Outgoing {
        id: &id,
        event_type: &msg.event_type,
        payload: &msg.payload,
        headers: sent,
    };
    let (excerpt, error) = match (&target.ep.mtls, &target.ep.auth) {
        (Some(_), _) => (
            None,
            Some((
                ErrorKind::Tls,
                "mutual TLS is for https endpoints; broker destinations are plain TCP".into(),
            )),
        ),
        (None, auth) => match senders
            .brokers
            .publish(url, &target.egress, auth.as_ref(), out, timeout)
            .await
        {
            Ok(receipt) => (Some(receipt), None),
            Err(e) => (None, Some(e)),
        },
    };
    Response {
        status: None,
        published: error.is_none(),
        retry_after: None,
        abort: false,
        disable: false,
        excerpt,
        headers: None,
        error,
    }
}

async fn execute(req: reqwest::RequestBuilder) -> Response {
    match req.send().await {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let control = resp
                .headers()
                .get(ABORT_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::trim);
            let abort = control.is_some_and(|v| v.eq_ignore_ascii_case(ABORT_VALUE));
            let disable = control.is_some_and(|v| v.eq_ignore_ascii_case(DISABLE_VALUE));
            let headers = HeaderList::bounded(
                resp.headers()
                    .iter()
                    .map(|(k, v)| (k.as_str(), String::from_utf8_lossy(v.as_bytes()))),
            )
            .to_stored();
            let mut body = Vec::new();
            loop {
                match resp.chunk().await {
                    Ok(Some(chunk)) => {
                        let room = EXCERPT_BYTES - body.len();
                        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        if body.len() >= EXCERPT_BYTES {
                            break;
                        }
                    }
                    Ok(None) => break,
                    // The status arrived; a body cut short does not change the outcome.
                    Err(_) => break,
                }
            }
            Response {
                status: Some(status),
                published: false,
                retry_after,
                abort,
                disable,
                excerpt: Some(String::from_utf8_lossy(&body).into_owned()),
                headers: Some(headers),
                error: None,
            }
        }
        Err(e) => Response {
            status: None,
            published: false,
            retry_after: None,
            abort: false,
            disable: false,
            excerpt: None,
            headers: None,
            error: Some((kind_of(&e), error_text(&e))),
        },
    }
}

pub(crate) fn error_text(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// reqwest reports DNS, refused-by-guard and TLS failures all as connect errors; the cause
/// chain tells them apart.
fn kind_of(e: &reqwest::Error) -> ErrorKind {
    if e.is_timeout() {
        return ErrorKind::Timeout;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.downcast_ref::<domain::endpoint_url::ForbiddenDestination>()
            .is_some()
        {
            return ErrorKind::Dns;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            return ErrorKind::Timeout;
        }
        let text = s.to_string().to_ascii_lowercase();
        if text.contains("dns error") || text.contains("failed to lookup") {
            return ErrorKind::Dns;
        }
        if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
            return ErrorKind::Tls;
        }
        source = s.source();
    }
    if e.is_connect() {
        ErrorKind::Connect
    } else {
        ErrorKind::Http
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The egress of a tenant without grants under `cfg`.
    fn egress(cfg: &DispatcherConfig) -> Arc<Egress> {
        Arc::new(Egress::new(cfg.allow_networks.clone(), Vec::new()))
    }
    use domain::endpoint_url::AllowList;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn target(url: &str, headers: &str, overrides: Option<&str>, allow: &str) -> Prepared {
        let mut endpoint = store::testing::endpoint_model("ep_1", url);
        endpoint.headers = headers.into();
        endpoint.status_overrides = overrides.map(str::to_owned);
        let ep = DispatchEndpoint::new(
            endpoint,
            Ok(vec![SECRET.into(), "not a secret".into(), SECRET.into()]),
            &store::testing::keys(),
        );
        let cfg = DispatcherConfig::new("n".into(), AllowList::parse(allow).unwrap());
        Prepared::new(Arc::new(ep), &cfg, None, egress(&cfg))
    }

    #[test]
    fn unreadable_stored_headers_or_overrides_fail_the_attempt_instead_of_being_dropped() {
        let headers = target("https://example.com/hook", "{not json", None, "");
        let (kind, why) = headers.url.as_ref().unwrap_err();
        assert_eq!(*kind, ErrorKind::Http);
        let ep_1 = store::testing::named::<domain::ids::EndpointId>("ep_1").to_string();
        assert!(why.contains(&ep_1) && why.contains("headers"), "{why}");
        let overrides = target("https://example.com/hook", "{}", Some("[1,"), "");
        let (_, why) = overrides.url.as_ref().unwrap_err();
        assert!(why.contains("status_overrides"), "{why}");
        let fine = target("https://example.com/hook", r#"{"X-Team": "a"}"#, None, "");
        assert!(fine.url.is_ok());
        assert_eq!(fine.headers, vec![("X-Team".to_owned(), "a".to_owned())]);
    }

    #[test]
    fn a_literal_address_outside_the_allow_list_is_refused_before_any_request() {
        let refused = target("http://10.0.0.7/hook", "{}", None, "");
        let (kind, _) = refused.url.as_ref().unwrap_err();
        assert_eq!(*kind, ErrorKind::Connect);
        let allowed = target("http://10.0.0.7/hook", "{}", None, "10.0.0.0/8");
        assert_eq!(
            allowed.url.as_ref().unwrap().as_str(),
            "http://10.0.0.7/hook"
        );
        let bad = target("not a url", "{}", None, "");
        assert_eq!(bad.url.as_ref().unwrap_err().0, ErrorKind::Http);
    }

    /// An endpoint at `url` on loopback (allowed), prepared, and the senders to reach it.
    fn on_loopback(url: &str) -> (Prepared, Senders) {
        let ep = DispatchEndpoint::new(
            store::testing::endpoint_model("ep_1", url),
            Ok(vec![SECRET.into()]),
            &store::testing::keys(),
        );
        let cfg = DispatcherConfig::new("n".into(), AllowList::parse("127.0.0.0/8").unwrap());
        let http = Senders {
            clients: Arc::new(crate::http::Clients::new((*egress(&cfg)).clone(), None, 8).unwrap()),
            tokens: crate::auth::Tokens::new(false, None),
            mtls: crate::http::MtlsClients::new(None, 8),
            brokers: crate::broker::Brokers::default(),
        };
        (Prepared::new(Arc::new(ep), &cfg, None, egress(&cfg)), http)
    }

    /// A retry that comes due after its message's content was expunged sends nothing (no
    /// request reaches the receiver) and ends the delivery, saying why.
    #[tokio::test]
    async fn an_expunged_message_is_never_sent() {
        let receiver = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        receiver.set_nonblocking(true).unwrap();
        let url = format!("http://{}/h", receiver.local_addr().unwrap());
        let (target, http) = on_loopback(&url);
        let msg = message::Model {
            payload: Vec::new(),
            ..store::testing::message_model()
        };
        let d = store::testing::delivery_model();
        let r = attempt(&http, &target, &msg, &d).await;
        assert!(matches!(r.next, Next::Failed), "{:?}", r.next);
        assert!(
            r.attempt
                .error_detail
                .as_deref()
                .unwrap_or_default()
                .contains("expunged"),
            "{:?}",
            r.attempt.error_detail
        );
        assert!(receiver.accept().is_err(), "no connection was made");
    }

    /// Every delivery in flight is a task that holds its attempt's future: a broker's publish
    /// and an OAuth token request, which few endpoints use, are boxed where they are awaited,
    /// so that an HTTP attempt does not carry their room (16 KB in a release build, 10 KB per
    /// task in flight; boxed, 1.7 KB and 3.4 KB).
    #[test]
    fn an_attempt_in_flight_does_not_carry_the_room_of_its_rare_paths() {
        let (target, http) = on_loopback("http://127.0.0.1:9/h");
        let msg = store::testing::message_model();
        let d = store::testing::delivery_model();
        let future = attempt(&http, &target, &msg, &d);
        let size = std::mem::size_of_val(&future);
        assert!(size <= 4096, "an attempt's future holds {size} bytes");
    }

    /// The id, timestamp and signature go out under the endpoint's names, else the server's;
    /// under both sets the values are the same.
    #[test]
    fn signature_headers_follow_the_endpoint_then_the_server() {
        let client = reqwest::Client::new();
        let msg = message::Model {
            payload: br#"{"a":1}"#.to_vec(),
            ..store::testing::message_model()
        };
        let d = store::testing::delivery_model();
        let sent = |endpoint_choice: Option<SignatureHeaders>, server: SignatureHeaders| {
            let mut endpoint = store::testing::endpoint_model("ep_1", "http://127.0.0.1:9/h");
            endpoint.signature_headers = endpoint_choice;
            let ep =
                DispatchEndpoint::new(endpoint, Ok(vec![SECRET.into()]), &store::testing::keys());
            let mut cfg =
                DispatcherConfig::new("n".into(), AllowList::parse("127.0.0.0/8").unwrap());
            cfg.signature_headers = server;
            let target = Prepared::new(Arc::new(ep), &cfg, None, egress(&cfg));
            let req = build(
                &client,
                &target,
                &msg,
                &headers(&target, &msg, &d, Timestamp::now()),
                Duration::from_secs(1),
            )
            .unwrap()
            .build()
            .unwrap();
            let h = req.headers();
            let get = |n: &str| h.get(n).map(|v| v.to_str().unwrap().to_owned());
            (
                [
                    get("webhook-id"),
                    get("webhook-timestamp"),
                    get("webhook-signature"),
                ],
                [get("svix-id"), get("svix-timestamp"), get("svix-signature")],
            )
        };
        let (webhook, svix) = sent(None, SignatureHeaders::Both);
        assert!(webhook.iter().all(Option::is_some));
        assert_eq!(webhook, svix, "the same values under both names");
        let (webhook, svix) = sent(None, SignatureHeaders::Svix);
        assert!(webhook.iter().all(Option::is_none) && svix.iter().all(Option::is_some));
        let (webhook, svix) = sent(Some(SignatureHeaders::Webhook), SignatureHeaders::Svix);
        assert!(webhook.iter().all(Option::is_some) && svix.iter().all(Option::is_none));
    }

    #[test]
    fn an_endpoint_is_prepared_with_its_headers_valid_secrets_and_overrides() {
        let t = target(
            "http://127.0.0.1:9/hook",
            r#"{"X-Team": "billing", "A-First": "1"}"#,
            Some(r#"{"permanentOn": [503]}"#),
            "127.0.0.0/8",
        );
        assert_eq!(
            t.headers,
            vec![
                ("A-First".to_owned(), "1".to_owned()),
                ("X-Team".to_owned(), "billing".to_owned())
            ]
        );
        assert_eq!(t.secrets.len(), 2, "the unparseable secret is skipped");
        assert!(matches!(
            classify(Outcome::Status(503), &t.overrides),
            Classification::Permanent { .. }
        ));
        let plain = target("http://127.0.0.1:9/hook", "{}", None, "127.0.0.0/8");
        assert_eq!(
            classify(Outcome::Status(503), &plain.overrides),
            Classification::Retry
        );
    }

    #[test]
    fn the_status_preset_is_the_endpoints_then_the_tenants_then_the_servers() {
        use StatusPreset::{Default as Strict, RetryAllBut410 as Svix};
        // Whether a 401 is retried, for the endpoint's, the tenant's and the server's choice.
        let retries_401 = |own: Option<&str>, tenant: Option<StatusPreset>, server| {
            let mut endpoint = store::testing::endpoint_model("ep_1", "http://127.0.0.1:9/h");
            endpoint.status_overrides = own.map(str::to_owned);
            let ep =
                DispatchEndpoint::new(endpoint, Ok(vec![SECRET.into()]), &store::testing::keys());
            let mut cfg =
                DispatcherConfig::new("n".into(), AllowList::parse("127.0.0.0/8").unwrap());
            cfg.status_preset = server;
            let t = Prepared::new(Arc::new(ep), &cfg, tenant, egress(&cfg));
            classify(Outcome::Status(401), &t.overrides) == Classification::Retry
        };
        assert!(!retries_401(None, None, Strict));
        assert!(retries_401(None, None, Svix));
        assert!(
            retries_401(None, Some(Svix), Strict),
            "the tenant's over the server's"
        );
        assert!(
            !retries_401(None, Some(Strict), Svix),
            "the tenant's over the server's"
        );
        let own_strict = Some(r#"{"statusPreset": "default"}"#);
        assert!(
            !retries_401(own_strict, Some(Svix), Svix),
            "the endpoint's over both"
        );
        let own_svix = Some(r#"{"statusPreset": "retry-all-but-410"}"#);
        assert!(
            retries_401(own_svix, Some(Strict), Strict),
            "the endpoint's over both"
        );
    }
}
