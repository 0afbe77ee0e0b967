//! The email outbox worker: sends queued emails over SMTP and retries with backoff, so an SMTP
//! server that is down delays mail and never loses it. Also renders the emails hookd sends.

use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

use domain::Timestamp;
use domain::ids::EmailId;
use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use store::entities::email;
use store::{Store, StoreError};
use tokio::sync::watch;

/// How many due emails one sweep takes.
const BATCH: u64 = 50;

/// Limit on connecting and on each SMTP command, so a hung server cannot stall the outbox.
const SMTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an SMTP URL or from address was refused. Messages never contain the URL's password.
#[derive(Debug, thiserror::Error)]
pub enum MailerError {
    #[error("the SMTP URL is not a valid URL: {0}")]
    InvalidUrl(url::ParseError),
    #[error("the SMTP URL scheme must be smtp or smtps, not {0:?}")]
    UnsupportedScheme(String),
    #[error("the SMTP URL has no host")]
    MissingHost,
    #[error(
        "the SMTP URL's tls parameter must be \"starttls\" or \"required\" (or absent for plain SMTP), not {0:?}"
    )]
    UnknownTls(String),
    #[error("smtps:// is always TLS; drop the tls parameter from the SMTP URL")]
    TlsOnSmtps,
    #[error("the SMTP URL has an unknown query parameter {0:?}; only tls is understood")]
    UnknownParameter(String),
    #[error("the SMTP URL must not have a path")]
    UnexpectedPath,
    #[error("the SMTP URL has a user name but no password")]
    MissingPassword,
    #[error("the SMTP URL's user name or password is not valid percent-encoded UTF-8")]
    BadCredentials,
    #[error("the SMTP from address {address:?} is not a valid email address: {reason}")]
    InvalidFrom { address: String, reason: String },
    #[error("cannot set up TLS for the SMTP server: {0}")]
    Tls(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Security {
    Plain,
    StartTls,
    ImplicitTls,
}

/// An SMTP client and the from address of every email hookd sends.
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// `scheme://host:port` and the TLS mode, without credentials: safe to log.
    target: String,
}

impl Mailer {
    /// Builds a mailer from `smtp://[user:pass@]host[:port]` (plain, port 25),
    /// `smtp://…?tls=starttls` or `?tls=required` (STARTTLS, port 587) or
    /// `smtps://[user:pass@]host[:port]` (implicit TLS, port 465). Certificates are checked
    /// against the webpki roots. User name and password are percent-decoded.
    pub fn from_url(url: &str, from: &str) -> Result<Mailer, MailerError> {
        let from: Mailbox =
            from.parse().map_err(
                |e: lettre::address::AddressError| MailerError::InvalidFrom {
                    address: from.to_owned(),
                    reason: e.to_string(),
                },
            )?;
        let url = url::Url::parse(url).map_err(MailerError::InvalidUrl)?;
        let mut tls_param = None;
        for (key, value) in url.query_pairs() {
            match &*key {
                "tls" => tls_param = Some(value.into_owned()),
                _ => return Err(MailerError::UnknownParameter(key.into_owned())),
            }
        }
        let security = match (url.scheme(), tls_param.as_deref()) {
            ("smtp", None) => Security::Plain,
            ("smtp", Some("starttls" | "required")) => Security::StartTls,
            ("smtp", Some(other)) => return Err(MailerError::UnknownTls(other.to_owned())),
            ("smtps", None) => Security::ImplicitTls,
            ("smtps", Some(_)) => return Err(MailerError::TlsOnSmtps),
            (other, _) => return Err(MailerError::UnsupportedScheme(other.to_owned())),
        };
        let host = match url.host() {
            Some(url::Host::Domain(d)) if !d.is_empty() => d.to_owned(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => ip.to_string(),
            _ => return Err(MailerError::MissingHost),
        };
        if !matches!(url.path(), "" | "/") {
            return Err(MailerError::UnexpectedPath);
        }
        let port = url.port().unwrap_or(match security {
            Security::Plain => 25,
            Security::StartTls => 587,
            Security::ImplicitTls => 465,
        });

        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host.as_str())
            .port(port)
            .timeout(Some(SMTP_TIMEOUT));
        let tls = |host: &str| {
            TlsParameters::new(host.to_owned()).map_err(|e| MailerError::Tls(e.to_string()))
        };
        builder = match security {
            Security::Plain => builder.tls(Tls::None),
            Security::StartTls => builder.tls(Tls::Required(tls(&host)?)),
            Security::ImplicitTls => builder.tls(Tls::Wrapper(tls(&host)?)),
        };
        match (url.username(), url.password()) {
            ("", None) => {}
            (_, None) => return Err(MailerError::MissingPassword),
            (user, Some(password)) => {
                let user = percent_decode(user).ok_or(MailerError::BadCredentials)?;
                let password = percent_decode(password).ok_or(MailerError::BadCredentials)?;
                builder = builder.credentials(Credentials::new(user, password));
            }
        }
        let mode = match security {
            Security::Plain => "plain",
            Security::StartTls => "STARTTLS",
            Security::ImplicitTls => "TLS",
        };
        let shown_host = match url.host() {
            Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
            _ => host,
        };
        Ok(Mailer {
            transport: builder.build(),
            from,
            target: format!("{}://{shown_host}:{port} ({mode})", url.scheme()),
        })
    }

    /// Sends one plain-text email. The error says why, for the outbox's `last_error`.
    pub async fn send(&self, to: &str, subject: &str, body: &str) -> Result<(), String> {
        self.try_send(to, subject, body).await.map_err(|e| e.reason)
    }

    async fn try_send(&self, to: &str, subject: &str, body: &str) -> Result<(), SendError> {
        let refused = |reason| SendError {
            reason,
            shown: "the email could not be built for this address",
            unreachable: false,
            permanent: true,
        };
        let to: Mailbox = to
            .parse()
            .map_err(|e| refused(format!("invalid recipient address {to:?}: {e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            // Receivers' spam filters expect one; `None` generates `<random@hostname>`.
            .message_id(None)
            .header(ContentType::TEXT_PLAIN)
            .body(body.to_owned())
            .map_err(|e| refused(format!("cannot build the email: {e}")))?;
        self.transport.send(message).await.map(drop).map_err(|e| {
            // No SMTP reply at all: connection, TLS or timeout trouble.
            let unreachable = !(e.is_permanent() || e.is_transient());
            SendError {
                reason: format!("SMTP {}: {e}", self.target),
                shown: if e.is_permanent() {
                    "the mail server refused this email"
                } else if unreachable {
                    "the mail server could not be reached; will retry"
                } else {
                    "the mail server asked to try again later; will retry"
                },
                unreachable,
                permanent: e.is_permanent(),
            }
        })
    }
}

struct SendError {
    /// The whole story, for the operator's log: names the SMTP server.
    reason: String,
    /// What the tenant sees in the outbox's `lastError`: nothing about the operator's setup.
    shown: &'static str,
    /// The server could not be reached, so the rest of the batch would fail the same way.
    unreachable: bool,
    /// The message itself was refused (an SMTP 5xx, a bad address): trying again will not help.
    permanent: bool,
}

/// Tries of an email the server refuses for good before it is given up on; mail to a server
/// that is only unreachable or busy waits and is retried as long as it takes.
pub const MAX_PERMANENT_FAILURES: i32 = 3;

/// Shows where mail goes, never the credentials.
impl fmt::Display for Mailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} from {}", self.target, self.from)
    }
}

impl fmt::Debug for Mailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mailer")
            .field("target", &self.target)
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

/// Percent-decodes a URL's user name or password; `None` if the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h)? * 16 + hex(l)?) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// How long to wait before the next try, given how many tries have failed (this one
/// included): 30 s, 1 min, 5 min, 15 min, then hourly.
fn retry_delay(failed_attempts: i32) -> Duration {
    Duration::from_secs(match failed_attempts {
        ..=1 => 30,
        2 => 60,
        3 => 300,
        4 => 900,
        _ => 3600,
    })
}

/// What one sweep did.
struct Sweep {
    sent: usize,
    /// Due emails left untouched because no SMTP server is configured.
    kept: Vec<email::Model>,
}

async fn sweep(
    store: &Store,
    mailer: Option<&Mailer>,
    now: Timestamp,
) -> Result<Sweep, StoreError> {
    let due = store.system().due_emails(now, BATCH).await?;
    let Some(mailer) = mailer else {
        if !due.is_empty() {
            tracing::debug!(
                count = due.len(),
                "no SMTP configured; due emails kept in the outbox"
            );
        }
        return Ok(Sweep { sent: 0, kept: due });
    };
    let mut sent = 0;
    for mail in due {
        match mailer
            .try_send(&mail.to_addr, &mail.subject, &mail.body_text)
            .await
        {
            Ok(()) => {
                store.system().email_outcome(mail.id, Ok(()), now).await?;
                tracing::info!(email_id = %mail.id, tenant_id = ?mail.tenant_id, "email sent");
                sent += 1;
            }
            Err(SendError {
                reason,
                shown,
                unreachable,
                permanent,
            }) => {
                let failed = mail.attempts.saturating_add(1);
                if permanent && failed >= MAX_PERMANENT_FAILURES {
                    tracing::warn!(
                        email_id = %mail.id,
                        attempt = failed,
                        error = %reason,
                        "email refused for good; giving up"
                    );
                    store
                        .system()
                        .email_outcome(mail.id, Err((shown.to_owned(), None)), now)
                        .await?;
                    continue;
                }
                let delay = retry_delay(failed);
                tracing::warn!(
                    email_id = %mail.id,
                    attempt = failed,
                    retry_in_secs = delay.as_secs(),
                    error = %reason,
                    "email not sent; will retry"
                );
                store
                    .system()
                    .email_outcome(mail.id, Err((shown.to_owned(), Some(now.plus(delay)))), now)
                    .await?;
                // Leave the rest untried (and uncounted) for the next sweep rather than wait
                // out a timeout per email.
                if unreachable {
                    break;
                }
            }
        }
    }
    Ok(Sweep {
        sent,
        kept: Vec::new(),
    })
}

/// Sends the emails that are due (at most 50). A failed send is retried later, backing off
/// by attempt count up to hourly; if the server cannot be reached at all, the sweep stops
/// there and the rest wait, untried, for the next one. With no mailer, due emails stay
/// pending and no attempt is counted. Returns how many were sent.
pub async fn send_due(
    store: &Store,
    mailer: Option<&Mailer>,
    now: Timestamp,
) -> Result<usize, StoreError> {
    Ok(sweep(store, mailer, now).await?.sent)
}

/// Sweeps the outbox every `every` until `stop` turns true.
pub async fn run_outbox(
    store: Store,
    mailer: Option<Mailer>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    match &mailer {
        Some(m) => tracing::info!(smtp = %m, "email outbox started"),
        None => tracing::info!("email outbox started without SMTP; email stays in the outbox"),
    }
    // Emails already reported as kept, so each is logged once, not every sweep. Only the
    // current batch is remembered, which bounds the set.
    let mut reported: HashSet<EmailId> = HashSet::new();
    loop {
        if *stop.borrow() {
            return;
        }
        match sweep(&store, mailer.as_ref(), Timestamp::now()).await {
            Ok(done) => {
                for mail in &done.kept {
                    if !reported.contains(&mail.id) {
                        tracing::info!(
                            email_id = %mail.id,
                            tenant_id = ?mail.tenant_id,
                            "no SMTP configured; email kept in the outbox"
                        );
                    }
                }
                reported = done.kept.into_iter().map(|m| m.id).collect();
            }
            Err(e) => store.warn_unless_fault(&e, "email outbox: database error"),
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}

pub use domain::notify::render_endpoint_disabled;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_hourly() {
        let secs: Vec<u64> = (1..=7).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(secs, [30, 60, 300, 900, 3600, 3600, 3600]);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(
            percent_decode("p%40ss%2Fw0rd").as_deref(),
            Some("p@ss/w0rd")
        );
        assert_eq!(percent_decode("100%").as_deref(), Some("100%"));
        assert_eq!(percent_decode("%C3%A9").as_deref(), Some("é"));
        assert_eq!(percent_decode("%FF"), None);
    }
}
