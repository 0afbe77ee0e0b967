//! The receiving side's first rule: verify an inbound webhook on its raw bytes, before anything
//! is stored, by the scheme its sender uses, and name the event's natural id (what the inbox
//! deduplicates on). Pure: headers, body and the clock are passed in.
//!
//! Schemes: Standard Webhooks (hookd, Svix: `webhook-*` or `svix-*` headers), Stripe
//! (`Stripe-Signature: t=…,v1=…`), GitHub (`X-Hub-Signature-256: sha256=…`), Shopify
//! (`X-Shopify-Hmac-Sha256`), Slack (`X-Slack-Signature: v0=…` over `v0:{ts}:{body}`), a
//! generic HMAC (header, algorithm, encoding, what is signed), and none (explicitly).

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use crate::signing::{SigningSecret, VerifyError};
use crate::time::Timestamp;

/// The timestamp tolerance of schemes that sign one, unless configured.
pub const DEFAULT_TOLERANCE: Duration = Duration::from_secs(5 * 60);
/// The widest tolerance a source may be given: a wider one lets an old captured request be
/// replayed for longer (the event-id inbox still drops a copy of one already taken).
pub const MAX_TOLERANCE_SECS: u64 = 3600;

/// How a source's requests are verified. Its `Debug` names the scheme and hides the secrets.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scheme", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Scheme {
    /// Standard Webhooks (`whsec_…` secrets; several while a sender rotates).
    StandardWebhooks { secrets: Vec<String> },
    /// Stripe: HMAC-SHA256 (hex) of `{t}.{body}` with the endpoint secret as is.
    Stripe { secret: String },
    /// GitHub: HMAC-SHA256 (hex) of the body, `sha256=` prefixed.
    Github { secret: String },
    /// Shopify: HMAC-SHA256 (base64) of the body in `X-Shopify-Hmac-Sha256`.
    Shopify { secret: String },
    /// Slack: `v0=` + HMAC-SHA256 (hex) of `v0:{X-Slack-Request-Timestamp}:{body}` in
    /// `X-Slack-Signature`, the timestamp checked against the tolerance.
    Slack { secret: String },
    /// Any other HMAC.
    Hmac(GenericHmac),
    /// No verification: the operator chose it for this source.
    None,
}

impl Scheme {
    /// The scheme's name, as in its JSON (`{"scheme": "stripe", …}`).
    pub const fn name(&self) -> &'static str {
        match self {
            Scheme::StandardWebhooks { .. } => "standard-webhooks",
            Scheme::Stripe { .. } => "stripe",
            Scheme::Github { .. } => "github",
            Scheme::Shopify { .. } => "shopify",
            Scheme::Slack { .. } => "slack",
            Scheme::Hmac(_) => "hmac",
            Scheme::None => "none",
        }
    }

    /// Whether it signs a timestamp, which is then checked against a tolerance (GitHub's
    /// signature covers the body alone; a generic HMAC one when it names a timestamp header).
    pub fn signs_timestamp(&self) -> bool {
        match self {
            Scheme::StandardWebhooks { .. } | Scheme::Stripe { .. } | Scheme::Slack { .. } => true,
            Scheme::Hmac(h) => h.timestamp_header.is_some(),
            Scheme::Github { .. } | Scheme::Shopify { .. } | Scheme::None => false,
        }
    }
}

impl std::fmt::Debug for Scheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheme")
            .field("scheme", &self.name())
            .finish_non_exhaustive()
    }
}

/// A serde error about a scheme, without the values it quotes (a secret given where a list was
/// expected would otherwise be repeated in the message): `invalid type: string "…", expected a
/// sequence`.
pub fn scheme_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let mut out = String::with_capacity(text.len());
    let mut quoted = false;
    for c in text.chars() {
        match (c, quoted) {
            ('"', false) => {
                out.push_str("\"…");
                quoted = true;
            }
            ('"', true) => {
                out.push('"');
                quoted = false;
            }
            (_, true) => {}
            (c, false) => out.push(c),
        }
    }
    out
}

/// The tag each event a source received carries: how its events are found among its
/// application's messages.
pub fn source_tag(source_name: &str) -> String {
    format!("{SOURCE_TAG_PREFIX}{source_name}")
}

const SOURCE_TAG_PREFIX: &str = "source-";

/// The name of the source a message came through, from its tags ([`source_tag`]).
pub fn tagged_source(tags: &[String]) -> Option<&str> {
    tags.iter()
        .find_map(|t| t.strip_prefix(SOURCE_TAG_PREFIX))
        .filter(|name| !name.is_empty())
}

/// Where senders post to source `id`: `{public_url}/in/{id}`.
pub fn source_url(public_url: &str, id: &impl std::fmt::Display) -> String {
    format!("{}/in/{id}", public_url.trim_end_matches('/'))
}

/// How long a source holds events that arrived ahead of a gap in their key's sequence, unless
/// configured; and the longest it may be configured to (held events wait in the database).
pub const DEFAULT_HOLD_GAP_SECS: u64 = 60;
pub const MAX_HOLD_GAP_SECS: u64 = 3600;

/// The headers hookd sends an ordered message's key and sequence in.
pub const ORDERING_KEY_HEADER: &str = "webhook-ordering-key";
pub const SEQUENCE_HEADER: &str = "webhook-sequence";

/// How a source orders what it receives: events that carry a key and a sequence number (by
/// default hookd's `webhook-ordering-key` and `webhook-sequence` headers; or members of the
/// body named by JSON pointers) are forwarded in sequence per key. An event that arrives ahead
/// of a gap is held until the gap fills, or for `hold_gap_secs`, then forwarded anyway (the
/// gap is reported). Sequences start at 1 per key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Ordering {
    /// A JSON pointer (`/data/customer`) to the key in the body, instead of the header.
    #[serde(default)]
    pub key_pointer: Option<String>,
    /// A JSON pointer to the sequence number (an integer from 1) in the body.
    #[serde(default)]
    pub sequence_pointer: Option<String>,
    /// Seconds an event ahead of a gap is held; 0 forwards in arrival order without holding.
    #[serde(default = "default_hold_gap")]
    pub hold_gap_secs: u64,
}

fn default_hold_gap() -> u64 {
    DEFAULT_HOLD_GAP_SECS
}

impl Default for Ordering {
    fn default() -> Self {
        Ordering {
            key_pointer: None,
            sequence_pointer: None,
            hold_gap_secs: DEFAULT_HOLD_GAP_SECS,
        }
    }
}

/// The highest sequence an event may carry: its key then expects the next one, which must
/// still be a number.
pub const MAX_SEQUENCE: i64 = i64::MAX - 1;

/// An event's place in its key's order, where it names one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    pub key: Option<String>,
    /// Only with a key: a sequence without a key orders nothing.
    pub seq: Option<i64>,
}

impl Ordering {
    /// What is wrong with these settings, if anything.
    pub fn problem(&self) -> Option<String> {
        for p in [&self.key_pointer, &self.sequence_pointer]
            .into_iter()
            .flatten()
        {
            if !p.starts_with('/') || p.len() > 256 {
                return Some(format!(
                    "{p:?} is not a JSON pointer (`/member/…`, at most 256 characters)"
                ));
            }
        }
        (self.hold_gap_secs > MAX_HOLD_GAP_SECS)
            .then(|| format!("holdGapSecs may be at most {MAX_HOLD_GAP_SECS}"))
    }

    /// The key and sequence of a verified event. A sequence that is not an integer from 1 is
    /// ignored (the event keeps its key's arrival order); one past [`MAX_SEQUENCE`] is refused,
    /// naming where it came from: its key could never move past it.
    pub fn place(
        &self,
        header: &dyn Fn(&str) -> Option<String>,
        body: &[u8],
    ) -> Result<Place, String> {
        let json = (self.key_pointer.is_some() || self.sequence_pointer.is_some())
            .then(|| serde_json::from_slice::<serde_json::Value>(body).ok())
            .flatten();
        let at = |pointer: &Option<String>, name: &str| match pointer {
            Some(p) => json.as_ref().and_then(|j| match j.pointer(p)? {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            }),
            None => header(name),
        };
        let key = at(&self.key_pointer, ORDERING_KEY_HEADER).filter(|k| !k.is_empty());
        let Some(given) = key
            .as_ref()
            .and_then(|_| at(&self.sequence_pointer, SEQUENCE_HEADER))
        else {
            return Ok(Place { key, seq: None });
        };
        let given = given.trim();
        let too_large = || {
            let from = match &self.sequence_pointer {
                Some(p) => format!("the body's {p}"),
                None => SEQUENCE_HEADER.to_owned(),
            };
            Err(format!(
                "{from} is {given}: a sequence may be at most {MAX_SEQUENCE}"
            ))
        };
        match given.parse::<i64>() {
            Ok(n) if (1..=MAX_SEQUENCE).contains(&n) => Ok(Place { key, seq: Some(n) }),
            Ok(n) if n > MAX_SEQUENCE => too_large(),
            Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => too_large(),
            // 0, negative, not a number: the key's arrival order.
            _ => Ok(Place { key, seq: None }),
        }
    }
}

/// The event id of an ordered event that has none of its own: known by its key and sequence,
/// a repeat of it is a duplicate like any other.
pub fn sequence_id(key: &str, seq: i64) -> String {
    use sha2::Digest;
    let digest = Sha256::digest(key.as_bytes());
    format!("seq-{}-{seq}", hex(&digest[..8]))
}

/// A generic HMAC: `header` carries `prefix` + the encoded MAC of the body, or of
/// `{timestamp}.{body}` when `timestamp_header` is set (then checked against the tolerance).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub struct GenericHmac {
    pub secret: String,
    pub header: String,
    #[serde(default)]
    pub algorithm: Algorithm,
    #[serde(default)]
    pub encoding: Encoding,
    #[serde(default)]
    pub prefix: String,
    #[serde(default)]
    pub timestamp_header: Option<String>,
    /// The header naming the event's id (e.g. `X-Request-Id`); without one, a JSON path.
    #[serde(default)]
    pub id_header: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    #[default]
    Sha256,
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    #[default]
    Hex,
    Base64,
}

/// Why a request was refused. The text names what is wrong, never a secret or a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("the {0} header is malformed")]
    Malformed(&'static str),
    #[error("the signed timestamp is outside the tolerance")]
    Stale,
    #[error("no signature matches")]
    NoMatch,
}

/// A verified request: its natural id and its type, where the scheme names them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verified {
    pub event_id: Option<String>,
    /// Stripe's body `type`, GitHub's `X-GitHub-Event`.
    pub event_type: Option<String>,
    /// SHA-256 (hex) of the signed bytes, where the signature does not cover both a timestamp
    /// and the id (GitHub; `hmac` without `timestamp_header` or with `id_header`): the id and
    /// type come from headers anyone may change, so a captured request is known again by what
    /// was signed.
    pub signed_digest: Option<String>,
}

/// The shortest secret a source of the `stripe`, `github` or `hmac` scheme takes: 128 bits
/// even for a secret of random bytes (Stripe issues `whsec_` and 32 characters; GitHub takes
/// any string and advises a long random one).
pub const MIN_SECRET_BYTES: usize = 16;

/// The hex SHA-256 of what a signature covers.
fn digest_of(signed: &[u8]) -> String {
    use sha2::Digest;
    hex(&Sha256::digest(signed))
}

/// Verifies a request to a source. `header` looks a header up by name (any case).
pub fn verify(
    scheme: &Scheme,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    now: Timestamp,
    tolerance: Duration,
) -> Result<Verified, Refused> {
    match scheme {
        Scheme::StandardWebhooks { secrets } => standard(secrets, header, body, now),
        Scheme::Stripe { secret } => {
            let value =
                header("stripe-signature").ok_or(Refused::MissingHeader("Stripe-Signature"))?;
            let mut t = None;
            let mut sigs = Vec::new();
            for part in value.split(',') {
                match part.trim().split_once('=') {
                    Some(("t", v)) => t = v.parse::<i64>().ok(),
                    Some(("v1", v)) => sigs.push(v.to_owned()),
                    _ => {}
                }
            }
            let t = t.ok_or(Refused::Malformed("Stripe-Signature"))?;
            fresh(t, now, tolerance)?;
            let mut signed = format!("{t}.").into_bytes();
            signed.extend_from_slice(body);
            let mac = hex(&hmac256(secret.as_bytes(), &signed));
            if sigs.iter().any(|s| equal(s.as_bytes(), mac.as_bytes())) {
                let event = serde_json::from_slice(body).ok();
                Ok(Verified {
                    event_id: event.as_ref().and_then(|e| json_member(e, "id")),
                    event_type: event.as_ref().and_then(|e| json_member(e, "type")),
                    signed_digest: None,
                })
            } else {
                Err(Refused::NoMatch)
            }
        }
        Scheme::Github { secret } => {
            let value = header("x-hub-signature-256")
                .ok_or(Refused::MissingHeader("X-Hub-Signature-256"))?;
            let given = value
                .strip_prefix("sha256=")
                .ok_or(Refused::Malformed("X-Hub-Signature-256"))?;
            let mac = hex(&hmac256(secret.as_bytes(), body));
            if equal(given.trim().as_bytes(), mac.as_bytes()) {
                Ok(Verified {
                    event_id: header("x-github-delivery"),
                    event_type: header("x-github-event"),
                    signed_digest: Some(digest_of(body)),
                })
            } else {
                Err(Refused::NoMatch)
            }
        }
        Scheme::Shopify { secret } => {
            let given = header("x-shopify-hmac-sha256")
                .ok_or(Refused::MissingHeader("X-Shopify-Hmac-Sha256"))?;
            let mac = STANDARD.encode(hmac256(secret.as_bytes(), body));
            if !equal(given.trim().as_bytes(), mac.as_bytes()) {
                return Err(Refused::NoMatch);
            }
            Ok(Verified {
                event_id: header("x-shopify-webhook-id"),
                // `orders/create` reads `orders.create`: event type names take no `/`.
                event_type: header("x-shopify-topic").map(|t| t.replace('/', ".")),
                // Nothing signed makes a copy stale, and the id is a header anyone may change.
                signed_digest: Some(digest_of(body)),
            })
        }
        Scheme::Slack { secret } => slack(secret, header, body, now, tolerance),
        Scheme::Hmac(h) => generic(h, header, body, now, tolerance),
        Scheme::None => Ok(Verified::default()),
    }
}

/// Slack's request signing: the id and type are members of the signed body (Events API
/// `event_id`, `event.type` or `type`).
fn slack(
    secret: &str,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    now: Timestamp,
    tolerance: Duration,
) -> Result<Verified, Refused> {
    let ts = header("x-slack-request-timestamp")
        .ok_or(Refused::MissingHeader("X-Slack-Request-Timestamp"))?;
    let t: i64 = ts
        .trim()
        .parse()
        .map_err(|_| Refused::Malformed("X-Slack-Request-Timestamp"))?;
    let value = header("x-slack-signature").ok_or(Refused::MissingHeader("X-Slack-Signature"))?;
    let given = value
        .trim()
        .strip_prefix("v0=")
        .ok_or(Refused::Malformed("X-Slack-Signature"))?;
    fresh(t, now, tolerance)?;
    let mut signed = format!("v0:{t}:").into_bytes();
    signed.extend_from_slice(body);
    let mac = hex(&hmac256(secret.as_bytes(), &signed));
    if !equal(given.as_bytes(), mac.as_bytes()) {
        return Err(Refused::NoMatch);
    }
    let event: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let event_type = event.as_ref().and_then(|e| {
        e.get("event")
            .and_then(|inner| json_member(inner, "type"))
            .or_else(|| json_member(e, "type"))
    });
    Ok(Verified {
        event_id: event.as_ref().and_then(|e| json_member(e, "event_id")),
        event_type,
        signed_digest: None,
    })
}

fn standard(
    secrets: &[String],
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    now: Timestamp,
) -> Result<Verified, Refused> {
    // hookd sends both name sets; a Svix sender only `svix-*`.
    let prefix = if header("webhook-id").is_some() {
        "webhook"
    } else {
        "svix"
    };
    let get = |name: &str| header(&format!("{prefix}-{name}"));
    let id = get("id").ok_or(Refused::MissingHeader("webhook-id"))?;
    let ts = get("timestamp").ok_or(Refused::MissingHeader("webhook-timestamp"))?;
    let sig = get("signature").ok_or(Refused::MissingHeader("webhook-signature"))?;
    let keys: Vec<SigningSecret> = secrets
        .iter()
        .filter_map(|s| SigningSecret::parse(s).ok())
        .collect();
    crate::signing::verify(&keys, &id, &ts, &sig, body, now).map_err(|e| match e {
        VerifyError::MissingHeaders => Refused::MissingHeader("webhook-signature"),
        VerifyError::InvalidTimestamp => Refused::Malformed("webhook-timestamp"),
        VerifyError::TimestampTooOld | VerifyError::TimestampTooNew => Refused::Stale,
        VerifyError::NoMatchingSignature => Refused::NoMatch,
    })?;
    Ok(Verified {
        event_id: Some(id),
        event_type: None,
        signed_digest: None,
    })
}

fn generic(
    h: &GenericHmac,
    header: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
    now: Timestamp,
    tolerance: Duration,
) -> Result<Verified, Refused> {
    let value = header(&h.header).ok_or(Refused::MissingHeader("signature"))?;
    let given = value
        .trim()
        .strip_prefix(h.prefix.as_str())
        .ok_or(Refused::Malformed("signature"))?;
    let mut signed = Vec::new();
    if let Some(ts_header) = &h.timestamp_header {
        let ts = header(ts_header).ok_or(Refused::MissingHeader("timestamp"))?;
        let t: i64 = ts
            .trim()
            .parse()
            .map_err(|_| Refused::Malformed("timestamp"))?;
        fresh(t, now, tolerance)?;
        signed.extend_from_slice(format!("{t}.").as_bytes());
    }
    signed.extend_from_slice(body);
    let mac = match h.algorithm {
        Algorithm::Sha256 => hmac256(h.secret.as_bytes(), &signed).to_vec(),
        Algorithm::Sha512 => {
            let mut m =
                <Hmac<Sha512> as Mac>::new_from_slice(h.secret.as_bytes()).expect("any key length");
            m.update(&signed);
            m.finalize().into_bytes().to_vec()
        }
    };
    let expected = match h.encoding {
        Encoding::Hex => hex(&mac),
        Encoding::Base64 => STANDARD.encode(&mac),
    };
    if !equal(given.as_bytes(), expected.as_bytes()) {
        return Err(Refused::NoMatch);
    }
    let event_id = match &h.id_header {
        Some(name) => header(name),
        None => serde_json::from_slice(body)
            .ok()
            .and_then(|e| json_member(&e, "id")),
    };
    Ok(Verified {
        event_id,
        event_type: None,
        // Without a signed timestamp nothing makes a copy stale, and an id from a header is
        // not signed: such a copy is known by its bytes.
        signed_digest: (h.timestamp_header.is_none() || h.id_header.is_some())
            .then(|| digest_of(&signed)),
    })
}

fn fresh(t: i64, now: Timestamp, tolerance: Duration) -> Result<(), Refused> {
    let skew = (now.as_secs() - t).unsigned_abs();
    if skew > tolerance.as_secs() {
        Err(Refused::Stale)
    } else {
        Ok(())
    }
}

fn hmac256(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    m.update(msg);
    m.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn equal(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A top-level string (or number) member of a JSON object body, e.g. Stripe's `id`.
fn json_member(body: &serde_json::Value, member: &str) -> Option<String> {
    match body.get(member)? {
        serde_json::Value::String(s) if !s.is_empty() && s.len() <= 256 => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scheme_error_keeps_what_is_wrong_and_drops_the_values_it_quotes() {
        let bad = serde_json::json!({"scheme": "standard-webhooks", "secrets": "whsec_leak"});
        let e = serde_json::from_value::<Scheme>(bad).unwrap_err();
        assert!(e.to_string().contains("whsec_leak"), "serde quotes it: {e}");
        let shown = scheme_error(&e);
        assert!(!shown.contains("whsec_leak"), "{shown}");
        assert!(
            shown.contains("invalid type: string \"…\", expected a sequence"),
            "{shown}"
        );
        let unknown = serde_json::json!({"scheme": "nope"});
        let e = serde_json::from_value::<Scheme>(unknown).unwrap_err();
        assert!(scheme_error(&e).contains("unknown variant `nope`"), "{e}");
        let s = Scheme::Stripe {
            secret: "whsec_leak".into(),
        };
        assert!(!format!("{s:?}").contains("whsec_leak"));
    }
    use std::collections::HashMap;

    const NOW: i64 = 1_700_000_000;

    fn headers(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
            .collect();
        move |name: &str| map.get(&name.to_ascii_lowercase()).cloned()
    }

    fn check(scheme: &Scheme, pairs: &[(&str, String)], body: &[u8]) -> Result<Verified, Refused> {
        verify(
            scheme,
            &headers(pairs),
            body,
            Timestamp::from_millis(NOW * 1000),
            DEFAULT_TOLERANCE,
        )
    }

    #[test]
    fn shopify_verifies_the_base64_hmac_of_the_body() {
        // Computed apart from hookd (Python's hmac module).
        let scheme = Scheme::Shopify {
            secret: "shpss_0123456789abcdef0123".into(),
        };
        let body = br#"{"id":820982911946154508,"email":"jon@doe.ca"}"#;
        let good = "c+ldqv9qlBgUg16yiYWi7/I6GHAKFIBC+Sdad6klZo0=".to_owned();
        let pairs = [
            ("X-Shopify-Hmac-Sha256", good.clone()),
            ("X-Shopify-Topic", "orders/create".to_owned()),
            ("X-Shopify-Webhook-Id", "b54557e4".to_owned()),
        ];
        let v = check(&scheme, &pairs, body).unwrap();
        assert_eq!(v.event_type.as_deref(), Some("orders.create"));
        assert_eq!(v.event_id.as_deref(), Some("b54557e4"));
        assert!(v.signed_digest.is_some(), "a copy is known by its bytes");
        let tampered = br#"{"id":820982911946154509,"email":"jon@doe.ca"}"#;
        assert_eq!(check(&scheme, &pairs, tampered), Err(Refused::NoMatch));
        assert_eq!(
            check(&scheme, &[], body),
            Err(Refused::MissingHeader("X-Shopify-Hmac-Sha256"))
        );
        assert!(!scheme.signs_timestamp());
    }

    #[test]
    fn slack_verifies_slacks_published_example_and_refuses_a_stale_one() {
        // Slack's documentation example ("Verifying requests from Slack").
        let scheme = Scheme::Slack {
            secret: "8f742231b10e8888abcd99yyyzzz85a5".into(),
        };
        let body = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
        let pairs = [
            ("X-Slack-Request-Timestamp", "1531420618".to_owned()),
            (
                "X-Slack-Signature",
                "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503".to_owned(),
            ),
        ];
        let at = |secs: i64| {
            verify(
                &scheme,
                &headers(&pairs),
                body,
                Timestamp::from_millis(secs * 1000),
                DEFAULT_TOLERANCE,
            )
        };
        assert!(at(1_531_420_618 + 60).is_ok());
        assert_eq!(at(1_531_420_618 + 301), Err(Refused::Stale));
        assert_eq!(at(1_531_420_618 - 301), Err(Refused::Stale));
        let mut forged = pairs.clone();
        forged[1].1 = format!("v0={}", "0".repeat(64));
        let v = verify(
            &scheme,
            &headers(&forged),
            body,
            Timestamp::from_millis(1_531_420_618_000),
            DEFAULT_TOLERANCE,
        );
        assert_eq!(v, Err(Refused::NoMatch));
        // An Events API body names its id and type.
        let body =
            br#"{"type":"event_callback","event_id":"Ev123","event":{"type":"app_mention"}}"#;
        let mut signed = format!("v0:{NOW}:").into_bytes();
        signed.extend_from_slice(body);
        let sig = format!(
            "v0={}",
            hex(&hmac256(b"8f742231b10e8888abcd99yyyzzz85a5", &signed))
        );
        let pairs = [
            ("X-Slack-Request-Timestamp", NOW.to_string()),
            ("X-Slack-Signature", sig),
        ];
        let v = check(&scheme, &pairs, body).unwrap();
        assert_eq!(
            (v.event_id.as_deref(), v.event_type.as_deref()),
            (Some("Ev123"), Some("app_mention"))
        );
    }

    fn stripe_header(secret: &str, t: i64, body: &[u8]) -> String {
        let mut signed = format!("{t}.").into_bytes();
        signed.extend_from_slice(body);
        format!(
            "t={t},v1={},v0=deadbeef",
            hex(&hmac256(secret.as_bytes(), &signed))
        )
    }

    #[test]
    fn an_events_place_comes_from_hookds_headers_or_from_json_pointers() {
        let ordering = Ordering::default();
        let pairs = [
            ("webhook-ordering-key", "cust-1".to_owned()),
            ("webhook-sequence", "7".to_owned()),
        ];
        let h = headers(&pairs);
        assert_eq!(
            ordering.place(&h, b"{}"),
            Ok(Place {
                key: Some("cust-1".into()),
                seq: Some(7)
            })
        );
        // A sequence that is not an integer from 1 keeps the key (arrival order) only.
        for bad in ["0", "-3", "x", ""] {
            let pairs = [
                ("webhook-ordering-key", "k".to_owned()),
                ("webhook-sequence", bad.to_owned()),
            ];
            let h = headers(&pairs);
            assert_eq!(ordering.place(&h, b"{}").unwrap().seq, None, "{bad:?}");
        }
        // A sequence without a key orders nothing.
        let pairs = [("webhook-sequence", "3".to_owned())];
        let h = headers(&pairs);
        assert_eq!(ordering.place(&h, b"{}"), Ok(Place::default()));
        let by_body = Ordering {
            key_pointer: Some("/data/customer".into()),
            sequence_pointer: Some("/data/version".into()),
            ..Ordering::default()
        };
        let body = br#"{"data": {"customer": 42, "version": 3}}"#;
        assert_eq!(
            by_body.place(&|_: &str| None, body),
            Ok(Place {
                key: Some("42".into()),
                seq: Some(3)
            })
        );
        assert_eq!(
            by_body.place(&|_: &str| None, b"not json"),
            Ok(Place::default())
        );
        // A sequence whose successor is past i64 is refused, naming where it came from: its
        // key could never move past it.
        for huge in ["9223372036854775807", "99999999999999999999"] {
            let pairs = [
                ("webhook-ordering-key", "k".to_owned()),
                ("webhook-sequence", huge.to_owned()),
            ];
            let e = ordering.place(&headers(&pairs), b"{}").unwrap_err();
            assert!(e.starts_with("webhook-sequence is "), "{e}");
        }
        let last = [
            ("webhook-ordering-key", "k".to_owned()),
            ("webhook-sequence", MAX_SEQUENCE.to_string()),
        ];
        assert_eq!(
            ordering.place(&headers(&last), b"{}").unwrap().seq,
            Some(MAX_SEQUENCE)
        );
        let body = br#"{"data": {"customer": 42, "version": 9223372036854775807}}"#;
        let e = by_body.place(&|_: &str| None, body).unwrap_err();
        assert!(e.starts_with("the body's /data/version is "), "{e}");
        assert!(by_body.problem().is_none());
        let wrong = Ordering {
            key_pointer: Some("data.customer".into()),
            ..Ordering::default()
        };
        assert!(wrong.problem().unwrap().contains("JSON pointer"));
        let long = Ordering {
            hold_gap_secs: MAX_HOLD_GAP_SECS + 1,
            ..Ordering::default()
        };
        assert!(long.problem().unwrap().contains("holdGapSecs"));
    }

    #[test]
    fn stripe_signatures_verify_with_their_event_id_and_fail_when_tampered_stale_or_wrong() {
        let secret = "whsec_stripe_test_secret";
        let s = Scheme::Stripe {
            secret: secret.into(),
        };
        let body = br#"{"id":"evt_1NG8Du2eZvKYlo2C","type":"charge.succeeded"}"#;
        let ok = check(
            &s,
            &[("Stripe-Signature", stripe_header(secret, NOW, body))],
            body,
        )
        .unwrap();
        assert_eq!(ok.event_id.as_deref(), Some("evt_1NG8Du2eZvKYlo2C"));
        let tampered = br#"{"id":"evt_1NG8Du2eZvKYlo2C","type":"charge.refunded"}"#;
        assert_eq!(
            check(
                &s,
                &[("Stripe-Signature", stripe_header(secret, NOW, body))],
                tampered
            ),
            Err(Refused::NoMatch)
        );
        assert_eq!(
            check(
                &s,
                &[("Stripe-Signature", stripe_header("whsec_other", NOW, body))],
                body
            ),
            Err(Refused::NoMatch)
        );
        assert_eq!(
            check(
                &s,
                &[("Stripe-Signature", stripe_header(secret, NOW - 301, body))],
                body
            ),
            Err(Refused::Stale)
        );
        assert_eq!(
            check(&s, &[], body),
            Err(Refused::MissingHeader("Stripe-Signature"))
        );
        assert_eq!(
            check(&s, &[("Stripe-Signature", "v1=abc".into())], body),
            Err(Refused::Malformed("Stripe-Signature"))
        );
    }

    #[test]
    fn github_signatures_verify_with_the_delivery_id() {
        let s = Scheme::Github {
            secret: "It's a Secret to Everybody".into(),
        };
        // GitHub's documented example.
        let body = b"Hello, World!";
        let sig =
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".to_owned();
        let ok = check(
            &s,
            &[
                ("X-Hub-Signature-256", sig.clone()),
                ("X-GitHub-Delivery", "72d3162e".into()),
            ],
            body,
        )
        .unwrap();
        assert_eq!(ok.event_id.as_deref(), Some("72d3162e"));
        // The delivery id and event type are not signed: a replay that changes them has the
        // same digest, which is what tells it apart.
        let replay = check(
            &s,
            &[
                ("X-Hub-Signature-256", sig.clone()),
                ("X-GitHub-Delivery", "another".into()),
                ("X-GitHub-Event", "push".into()),
            ],
            body,
        )
        .unwrap();
        assert_eq!(replay.signed_digest, ok.signed_digest);
        assert_eq!(
            ok.signed_digest.as_deref(),
            Some("dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f")
        );
        assert_eq!(
            check(&s, &[("X-Hub-Signature-256", sig)], b"Hello, World?"),
            Err(Refused::NoMatch)
        );
        assert_eq!(
            check(&s, &[("X-Hub-Signature-256", "md5=00".into())], body),
            Err(Refused::Malformed("X-Hub-Signature-256"))
        );
    }

    #[test]
    fn standard_webhooks_verify_from_either_header_set() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let key = crate::signing::EndpointKey::parse(secret).unwrap();
        let body = br#"{"test": 2432232314}"#;
        let sig = key.sign("msg_1", NOW, body);
        let s = Scheme::StandardWebhooks {
            secrets: vec![
                "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".into(),
                secret.into(),
            ],
        };
        for prefix in ["webhook", "svix"] {
            let h = [
                (format!("{prefix}-id"), "msg_1".to_owned()),
                (format!("{prefix}-timestamp"), NOW.to_string()),
                (format!("{prefix}-signature"), sig.clone()),
            ];
            let pairs: Vec<(&str, String)> =
                h.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            assert_eq!(
                check(&s, &pairs, body).unwrap().event_id.as_deref(),
                Some("msg_1")
            );
            assert_eq!(check(&s, &pairs, b"{}"), Err(Refused::NoMatch));
        }
        let stale = [
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", (NOW - 600).to_string()),
            ("webhook-signature", key.sign("msg_1", NOW - 600, body)),
        ];
        assert_eq!(check(&s, &stale, body), Err(Refused::Stale));
    }

    #[test]
    fn a_generic_hmac_follows_its_configuration() {
        let h = GenericHmac {
            secret: "k3y".into(),
            header: "X-Signature".into(),
            algorithm: Algorithm::Sha512,
            encoding: Encoding::Base64,
            prefix: "sha512=".into(),
            timestamp_header: Some("X-Timestamp".into()),
            id_header: Some("X-Request-Id".into()),
        };
        let body = b"{\"a\":1}";
        let mut m = <Hmac<Sha512> as Mac>::new_from_slice(b"k3y").unwrap();
        m.update(format!("{NOW}.").as_bytes());
        m.update(body);
        let sig = format!("sha512={}", STANDARD.encode(m.finalize().into_bytes()));
        let s = Scheme::Hmac(h.clone());
        let pairs = [
            ("X-Signature", sig.clone()),
            ("X-Timestamp", NOW.to_string()),
            ("X-Request-Id", "r-9".into()),
        ];
        let ok = check(&s, &pairs, body).unwrap();
        assert_eq!(ok.event_id.as_deref(), Some("r-9"));
        assert!(ok.signed_digest.is_some(), "the id header is not signed");
        let late = [
            ("X-Signature", sig),
            ("X-Timestamp", (NOW + 3600).to_string()),
        ];
        assert_eq!(check(&s, &late, body), Err(Refused::Stale));
        // Body only, hex, id from the JSON body.
        let plain = Scheme::Hmac(GenericHmac {
            algorithm: Algorithm::Sha256,
            encoding: Encoding::Hex,
            prefix: String::new(),
            timestamp_header: None,
            id_header: None,
            ..h
        });
        let body = br#"{"id": 42}"#;
        let pairs = [("X-Signature", hex(&hmac256(b"k3y", body)))];
        let ok = check(&plain, &pairs, body).unwrap();
        assert_eq!(ok.event_id.as_deref(), Some("42"));
        assert_eq!(ok.signed_digest, Some(digest_of(body)), "no signed time");
        let timed = Scheme::Hmac(GenericHmac {
            timestamp_header: Some("X-Timestamp".into()),
            ..match plain.clone() {
                Scheme::Hmac(h) => h,
                _ => unreachable!(),
            }
        });
        let mut signed = format!("{NOW}.").into_bytes();
        signed.extend_from_slice(body);
        let pairs = [
            ("X-Signature", hex(&hmac256(b"k3y", &signed))),
            ("X-Timestamp", NOW.to_string()),
        ];
        assert_eq!(
            check(&timed, &pairs, body).unwrap().signed_digest,
            None,
            "time and body id both signed"
        );
        assert_eq!(check(&Scheme::None, &[], b"x").unwrap().event_id, None);
    }

    #[test]
    fn schemes_read_from_configuration() {
        let s: Scheme = serde_json::from_str(r#"{"scheme": "github", "secret": "s"}"#).unwrap();
        assert_eq!(s, Scheme::Github { secret: "s".into() });
        let s: Scheme = serde_json::from_str(
            r#"{"scheme": "hmac", "secret": "s", "header": "X-Sig", "algorithm": "sha512"}"#,
        )
        .unwrap();
        assert!(matches!(
            s,
            Scheme::Hmac(GenericHmac {
                algorithm: Algorithm::Sha512,
                ..
            })
        ));
        assert!(serde_json::from_str::<Scheme>(r#"{"scheme": "md5"}"#).is_err());
    }
}
