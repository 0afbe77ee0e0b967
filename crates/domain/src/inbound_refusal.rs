//! What an inbound source's Requests view keeps of a refused request: why it was refused (in
//! words a sender's owner knows), and an excerpt of its headers that never holds a credential
//! or a signature value, bounded in count and size whatever the request carried.

use crate::inbound::{Refused, Scheme};

/// Why a source refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A signature was given but none matches the source's secrets.
    BadSignature,
    /// The signed timestamp is outside the source's tolerance.
    StaleTimestamp,
    /// A header the scheme needs is missing.
    MissingHeader,
    /// A header the scheme needs cannot be read.
    MalformedHeader,
    /// Verified, but the body is not one JSON object.
    NotJson,
    /// The body is larger than the server takes.
    TooLarge,
    /// The body could not be read (the client stopped sending, bad encoding).
    UnreadableBody,
    /// Verified, but its sequence number is past the largest a key may reach.
    BadSequence,
    /// Verified, ahead of a gap, while the source holds as many as it may (429).
    TooManyHeld,
    /// The tenant's message rate limit was reached (429).
    RateLimited,
    /// Verified, but breaks another rule of messages (its detail says which).
    Unacceptable,
}

impl Reason {
    pub const ALL: [Reason; 11] = [
        Reason::BadSignature,
        Reason::StaleTimestamp,
        Reason::MissingHeader,
        Reason::MalformedHeader,
        Reason::NotJson,
        Reason::TooLarge,
        Reason::UnreadableBody,
        Reason::BadSequence,
        Reason::TooManyHeld,
        Reason::RateLimited,
        Reason::Unacceptable,
    ];

    /// As stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::BadSignature => "bad_signature",
            Reason::StaleTimestamp => "stale_timestamp",
            Reason::MissingHeader => "missing_header",
            Reason::MalformedHeader => "malformed_header",
            Reason::NotJson => "not_json",
            Reason::TooLarge => "too_large",
            Reason::UnreadableBody => "unreadable_body",
            Reason::BadSequence => "bad_sequence",
            Reason::TooManyHeld => "too_many_held",
            Reason::RateLimited => "rate_limited",
            Reason::Unacceptable => "unacceptable",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// What a page calls it.
    pub const fn label(self) -> &'static str {
        match self {
            Reason::BadSignature => "Bad signature",
            Reason::StaleTimestamp => "Stale timestamp",
            Reason::MissingHeader => "Missing header",
            Reason::MalformedHeader => "Malformed header",
            Reason::NotJson => "Not JSON",
            Reason::TooLarge => "Too large",
            Reason::UnreadableBody => "Body not readable",
            Reason::BadSequence => "Sequence too large",
            Reason::TooManyHeld => "Too many held",
            Reason::RateLimited => "Rate limited",
            Reason::Unacceptable => "Not accepted",
        }
    }

    /// The HTTP status `POST /in/{source}` answers it with.
    pub const fn status(self) -> u16 {
        match self {
            Reason::BadSignature
            | Reason::StaleTimestamp
            | Reason::MissingHeader
            | Reason::MalformedHeader => 401,
            Reason::NotJson | Reason::UnreadableBody | Reason::BadSequence => 400,
            Reason::TooLarge => 413,
            Reason::TooManyHeld | Reason::RateLimited => 429,
            Reason::Unacceptable => 422,
        }
    }

    /// A verification failure's reason.
    pub const fn of(refused: &Refused) -> Reason {
        match refused {
            Refused::MissingHeader(_) => Reason::MissingHeader,
            Refused::Malformed(_) => Reason::MalformedHeader,
            Refused::Stale => Reason::StaleTimestamp,
            Refused::NoMatch => Reason::BadSignature,
        }
    }
}

/// Headers kept per refused request, value bytes kept per header, and bytes kept in all: a
/// request with 100 headers of 8 KiB costs the same stored row as one with a few.
pub const MAX_HEADERS: usize = 24;
pub const MAX_VALUE_BYTES: usize = 120;
pub const MAX_EXCERPT_BYTES: usize = 1536;

/// Headers whose value is a credential or a signature wherever they appear: shown as
/// "hidden" with the value's length.
const SECRET_NAMES: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];
/// Name parts that mark a signature or a credential (`X-Hub-Signature-256`,
/// `Stripe-Signature`, `webhook-signature`, `X-Shopify-Hmac-Sha256`, `X-Api-Key`, …).
const SECRET_PARTS: [&str; 10] = [
    "signature",
    "hmac",
    "token",
    "secret",
    "api-key",
    "apikey",
    "auth",
    "password",
    "session",
    "credential",
];

/// Whether the value of header `name` is hidden under `scheme` (its own signature header is,
/// whatever its name).
pub fn is_secret(name: &str, scheme: &Scheme) -> bool {
    let lower = name.to_ascii_lowercase();
    if SECRET_NAMES.contains(&lower.as_str()) || SECRET_PARTS.iter().any(|p| lower.contains(p)) {
        return true;
    }
    matches!(scheme, Scheme::Hmac(h) if h.header.eq_ignore_ascii_case(name))
}

/// The excerpt of a refused request's headers that is kept: names lower-cased, in the order
/// given, secret values replaced by `hidden (N bytes)`, other values cut at
/// [`MAX_VALUE_BYTES`] (marked `…`), at most [`MAX_HEADERS`] and [`MAX_EXCERPT_BYTES`]; a last
/// entry says how many were left out.
pub fn excerpt<'a>(
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    scheme: &Scheme,
) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    let mut bytes = 0;
    let mut left_out = 0usize;
    for (name, value) in headers {
        let name = cut(&name.to_ascii_lowercase(), 64);
        let value = if is_secret(&name, scheme) {
            format!("hidden ({} bytes)", value.len())
        } else {
            cut(&String::from_utf8_lossy(value), MAX_VALUE_BYTES)
        };
        if kept.len() >= MAX_HEADERS || bytes + name.len() + value.len() > MAX_EXCERPT_BYTES {
            left_out += 1;
            continue;
        }
        bytes += name.len() + value.len();
        kept.push((name, value));
    }
    if left_out > 0 {
        kept.push(("…".to_owned(), format!("{left_out} more headers not kept")));
    }
    kept
}

/// `s` cut to at most `max` bytes on a character boundary, marked `…` when cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbound::GenericHmac;

    #[test]
    fn reasons_read_back_as_stored() {
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
        }
        assert_eq!(Reason::parse("nope"), None);
    }

    #[test]
    fn an_excerpt_hides_credentials_and_signatures_and_is_bounded() {
        let hmac = Scheme::Hmac(GenericHmac {
            secret: "0123456789abcdef".into(),
            header: "X-Partner-Mac".into(),
            algorithm: Default::default(),
            encoding: Default::default(),
            prefix: String::new(),
            timestamp_header: None,
            id_header: None,
        });
        let long = "x".repeat(5000);
        let given: Vec<(&str, &[u8])> = vec![
            ("Authorization", b"Bearer hk_topsecret"),
            ("Stripe-Signature", b"t=1,v1=abcdef"),
            ("webhook-signature", b"v1,abc="),
            ("X-Partner-Mac", b"deadbeef"),
            ("Content-Type", b"application/json"),
            ("X-Long", long.as_bytes()),
        ];
        let kept = excerpt(given, &hmac);
        let text = format!("{kept:?}");
        for secret in ["hk_topsecret", "abcdef", "abc=", "deadbeef"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(
            kept[0],
            ("authorization".into(), "hidden (19 bytes)".into())
        );
        assert_eq!(kept[4], ("content-type".into(), "application/json".into()));
        assert_eq!(kept[5].1.len(), MAX_VALUE_BYTES + '…'.len_utf8());

        let many: Vec<(String, String)> = (0..100)
            .map(|i| (format!("x-h{i}"), "v".repeat(100)))
            .collect();
        let kept = excerpt(
            many.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
            &Scheme::None,
        );
        let bytes: usize = kept.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert!(kept.len() <= MAX_HEADERS + 1 && bytes <= MAX_EXCERPT_BYTES + 64);
        assert!(kept.last().unwrap().1.ends_with("more headers not kept"));
    }
}
