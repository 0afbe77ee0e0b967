//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256(key, "{id}.{ts}.{body}")>`.
//!
//! Used by the dispatcher to sign and by `hookd sink` (and receivers' tests) to verify, so both
//! sides share one implementation checked against the spec's test vector.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::time::Timestamp;

type HmacSha256 = Hmac<Sha256>;

/// SHA-256's block size: keys up to this length are zero-padded by HMAC, never hashed.
const HMAC_BLOCK: usize = 64;

pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";
/// Svix's names for the same three values, which receivers written for Svix read.
pub const SVIX_HEADER_ID: &str = "svix-id";
pub const SVIX_HEADER_TIMESTAMP: &str = "svix-timestamp";
pub const SVIX_HEADER_SIGNATURE: &str = "svix-signature";

/// Which names a delivery's id, timestamp and signature go out under: Standard Webhooks'
/// `webhook-*`, Svix's `svix-*`, or both (the default: a receiver written for either accepts
/// it). The values are the same under both names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
pub enum SignatureHeaders {
    #[default]
    Both,
    Webhook,
    Svix,
}

crate::delivery::text_enum!(SignatureHeaders { Both => "both", Webhook => "webhook", Svix => "svix" });

impl SignatureHeaders {
    /// The (id, timestamp, signature) header names to send, one or two sets.
    pub fn names(self) -> &'static [[&'static str; 3]] {
        const WEBHOOK: [&str; 3] = [HEADER_ID, HEADER_TIMESTAMP, HEADER_SIGNATURE];
        const SVIX: [&str; 3] = [SVIX_HEADER_ID, SVIX_HEADER_TIMESTAMP, SVIX_HEADER_SIGNATURE];
        match self {
            SignatureHeaders::Both => &[WEBHOOK, SVIX],
            SignatureHeaders::Webhook => &[WEBHOOK],
            SignatureHeaders::Svix => &[SVIX],
        }
    }
}

/// The textual prefix of a secret, as Svix and the Standard Webhooks libraries write it.
pub const SECRET_PREFIX: &str = "whsec_";
/// Shortest key accepted: the spec's own test vector uses 24 bytes.
pub const MIN_SECRET_LEN: usize = 24;
/// Longest key accepted; also keeps keys within one HMAC block.
pub const MAX_SECRET_LEN: usize = HMAC_BLOCK;
/// Length of the keys hookd generates (256 bits, matching HMAC-SHA256's strength).
pub const DEFAULT_SECRET_LEN: usize = 32;

/// How far a `webhook-timestamp` may be from the receiver's clock, either way, to limit replays.
pub const TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// An endpoint's HMAC key. `Display` gives the `whsec_…` form (to show the tenant and to store);
/// `Debug` never shows the key, so it cannot leak through logs.
#[derive(Clone)]
pub struct SigningSecret {
    key: Vec<u8>,
}

/// Why a secret string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("secret is not valid base64 (expected whsec_ followed by base64)")]
    InvalidBase64,
    #[error(
        "secret key must be {MIN_SECRET_LEN} to {MAX_SECRET_LEN} bytes once base64-decoded, got {0}"
    )]
    InvalidLength(usize),
    #[error("an ed25519 key is whsk_ followed by base64 of 32 or 64 bytes, got {0}")]
    InvalidEd25519Length(usize),
    #[error("the public half of this whsk_ key does not belong to its private half")]
    PublicKeyMismatch,
}

impl SigningSecret {
    /// A fresh 32-byte secret.
    pub fn generate(rng: &mut (impl RngCore + ?Sized)) -> Self {
        let mut key = vec![0u8; DEFAULT_SECRET_LEN];
        rng.fill_bytes(&mut key);
        SigningSecret { key }
    }

    /// A fresh secret of `len` bytes (24..=64), for tenants whose receivers expect another size.
    pub fn generate_with_len(
        len: usize,
        rng: &mut (impl RngCore + ?Sized),
    ) -> Result<Self, SecretError> {
        check_len(len)?;
        let mut key = vec![0u8; len];
        rng.fill_bytes(&mut key);
        Ok(SigningSecret { key })
    }

    /// Accepts `whsec_<base64>` or the bare base64 (tenants bring secrets from other systems).
    pub fn parse(s: &str) -> Result<Self, SecretError> {
        let s = s.trim();
        let encoded = s.strip_prefix(SECRET_PREFIX).unwrap_or(s);
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::InvalidBase64)?;
        check_len(key.len())?;
        Ok(SigningSecret { key })
    }

    /// HMAC-SHA256 of `{msg_id}.{timestamp}.{body}`.
    fn mac(&self, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> [u8; 32] {
        // Keys are at most one block long (enforced on construction), and HMAC zero-pads such
        // keys to a block: padding here gives the same MAC and a constructor that cannot fail.
        let mut block = [0u8; HMAC_BLOCK];
        let len = self.key.len().min(HMAC_BLOCK);
        block[..len].copy_from_slice(&self.key[..len]);
        let mut mac = <HmacSha256 as hmac::digest::KeyInit>::new(&block.into());
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp_secs.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac.finalize().into_bytes().into()
    }
}

fn check_len(len: usize) -> Result<(), SecretError> {
    if (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&len) {
        Ok(())
    } else {
        Err(SecretError::InvalidLength(len))
    }
}

impl FromStr for SigningSecret {
    type Err = SecretError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SECRET_PREFIX}{}", STANDARD.encode(&self.key))
    }
}

impl fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningSecret(whsec_<redacted>)")
    }
}

impl PartialEq for SigningSecret {
    fn eq(&self, other: &Self) -> bool {
        self.key.ct_eq(&other.key).into()
    }
}

impl Eq for SigningSecret {}

/// The prefix of an ed25519 signing key (Standard Webhooks' asymmetric scheme).
pub const KEY_PREFIX: &str = "whsk_";
/// The prefix of the public key receivers verify `v1a` signatures with.
pub const PUBLIC_KEY_PREFIX: &str = "whpk_";

/// An endpoint's ed25519 signing key. `Display` gives `whsk_` + base64 of the 32-byte seed and
/// the 32-byte public key (libsodium's secret-key layout); `Debug` never shows it.
#[derive(Clone)]
pub struct Ed25519Secret {
    seed: [u8; 32],
    pair: std::sync::Arc<ring::signature::Ed25519KeyPair>,
}

impl Ed25519Secret {
    pub fn generate(rng: &mut (impl RngCore + ?Sized)) -> Self {
        let mut seed = [0u8; 32];
        rng.fill_bytes(&mut seed);
        Self::from_seed(seed)
    }

    fn from_seed(seed: [u8; 32]) -> Self {
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .expect("any 32 bytes are an ed25519 seed");
        Ed25519Secret {
            seed,
            pair: std::sync::Arc::new(pair),
        }
    }

    /// Accepts `whsk_` + base64 of the seed (32 bytes) or of seed and public key (64 bytes,
    /// the public key checked against the seed).
    pub fn parse(s: &str) -> Result<Self, SecretError> {
        let encoded = s
            .trim()
            .strip_prefix(KEY_PREFIX)
            .ok_or(SecretError::InvalidBase64)?;
        let raw = STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::InvalidBase64)?;
        let seed: [u8; 32] = match raw.len() {
            32 | 64 => raw[..32].try_into().expect("32 bytes"),
            n => return Err(SecretError::InvalidEd25519Length(n)),
        };
        let key = Self::from_seed(seed);
        if raw.len() == 64 && raw[32..] != *key.public_bytes() {
            return Err(SecretError::PublicKeyMismatch);
        }
        Ok(key)
    }

    fn public_bytes(&self) -> &[u8] {
        use ring::signature::KeyPair;
        self.pair.public_key().as_ref()
    }

    /// `whpk_` + base64 of the public key: what receivers verify with.
    pub fn public_key(&self) -> String {
        format!(
            "{PUBLIC_KEY_PREFIX}{}",
            STANDARD.encode(self.public_bytes())
        )
    }

    fn sign(&self, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
        let mut signed = format!("{msg_id}.{timestamp_secs}.").into_bytes();
        signed.extend_from_slice(body);
        format!("v1a,{}", STANDARD.encode(self.pair.sign(&signed)))
    }
}

impl fmt::Display for Ed25519Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut raw = self.seed.to_vec();
        raw.extend_from_slice(self.public_bytes());
        write!(f, "{KEY_PREFIX}{}", STANDARD.encode(raw))
    }
}

impl fmt::Debug for Ed25519Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Ed25519Secret(whsk_<redacted>)")
    }
}

/// An endpoint's signing key: HMAC-SHA256 (`whsec_`, `v1` signatures, the default) or ed25519
/// (`whsk_`, `v1a` signatures verified with the public `whpk_` key).
#[derive(Clone, Debug)]
pub enum EndpointKey {
    Hmac(SigningSecret),
    Ed25519(Ed25519Secret),
}

/// Which kind of key to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KeyType {
    #[default]
    Hmac,
    Ed25519,
}

impl FromStr for KeyType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hmac" => Ok(KeyType::Hmac),
            "ed25519" => Ok(KeyType::Ed25519),
            other => Err(format!("{other:?} is not a key type: hmac or ed25519")),
        }
    }
}

impl EndpointKey {
    pub fn generate(kind: KeyType, rng: &mut (impl RngCore + ?Sized)) -> Self {
        match kind {
            KeyType::Hmac => EndpointKey::Hmac(SigningSecret::generate(rng)),
            KeyType::Ed25519 => EndpointKey::Ed25519(Ed25519Secret::generate(rng)),
        }
    }

    /// `whsk_…` is an ed25519 key; anything else an HMAC secret (`whsec_…` or bare base64).
    pub fn parse(s: &str) -> Result<Self, SecretError> {
        if s.trim().starts_with(KEY_PREFIX) {
            Ed25519Secret::parse(s).map(EndpointKey::Ed25519)
        } else {
            SigningSecret::parse(s).map(EndpointKey::Hmac)
        }
    }

    /// What may leave hookd: the HMAC secret (receivers verify with it) or, for ed25519, the
    /// public key only. The private half of an ed25519 key stays inside: whoever holds it can
    /// sign as the sender, and receivers never need it.
    pub fn shareable(&self) -> String {
        match self {
            EndpointKey::Hmac(s) => s.to_string(),
            EndpointKey::Ed25519(k) => k.public_key(),
        }
    }

    /// The public key receivers verify with (ed25519 only).
    pub fn public_key(&self) -> Option<String> {
        match self {
            EndpointKey::Hmac(_) => None,
            EndpointKey::Ed25519(k) => Some(k.public_key()),
        }
    }

    /// One signature entry: `v1,…` or `v1a,…`.
    pub fn sign(&self, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
        match self {
            EndpointKey::Hmac(s) => sign(s, msg_id, timestamp_secs, body),
            EndpointKey::Ed25519(k) => k.sign(msg_id, timestamp_secs, body),
        }
    }
}

impl fmt::Display for EndpointKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointKey::Hmac(s) => s.fmt(f),
            EndpointKey::Ed25519(k) => k.fmt(f),
        }
    }
}

/// One signature entry: `v1,<base64>`.
pub fn sign(secret: &SigningSecret, msg_id: &str, timestamp_secs: i64, body: &[u8]) -> String {
    format!(
        "v1,{}",
        STANDARD.encode(secret.mac(msg_id, timestamp_secs, body))
    )
}

/// The `webhook-signature` value: one entry per active secret, space separated, so receivers
/// keep verifying while they switch to a rotated secret.
pub fn signature_header(
    keys: &[EndpointKey],
    msg_id: &str,
    timestamp_secs: i64,
    body: &[u8],
) -> String {
    keys.iter()
        .map(|k| k.sign(msg_id, timestamp_secs, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Why a webhook failed verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing webhook-id, webhook-timestamp or webhook-signature")]
    MissingHeaders,
    #[error("webhook-timestamp is not a whole number of seconds")]
    InvalidTimestamp,
    #[error("webhook-timestamp is too old")]
    TimestampTooOld,
    #[error("webhook-timestamp is too far in the future")]
    TimestampTooNew,
    #[error("no signature matches")]
    NoMatchingSignature,
}

/// Checks a received webhook against any of `secrets`.
///
/// The timestamp must be within [`TOLERANCE`] of `now` either way. Entries of other versions
/// (`v1a,…`, `v2,…`) and malformed entries are skipped, not fatal, so senders can add schemes
/// without breaking receivers. Signatures are compared in constant time.
pub fn verify(
    secrets: &[SigningSecret],
    msg_id: &str,
    timestamp_header: &str,
    signature_header: &str,
    body: &[u8],
    now: Timestamp,
) -> Result<(), VerifyError> {
    let timestamp = timestamp_header.trim();
    if msg_id.is_empty() || timestamp.is_empty() || signature_header.trim().is_empty() {
        return Err(VerifyError::MissingHeaders);
    }
    let ts: i64 = timestamp
        .parse()
        .map_err(|_| VerifyError::InvalidTimestamp)?;
    let now = now.as_secs();
    let tolerance = TOLERANCE.as_secs() as i64;
    if ts < now.saturating_sub(tolerance) {
        return Err(VerifyError::TimestampTooOld);
    }
    if ts > now.saturating_add(tolerance) {
        return Err(VerifyError::TimestampTooNew);
    }
    let expected: Vec<[u8; 32]> = secrets.iter().map(|s| s.mac(msg_id, ts, body)).collect();
    let matched = signature_header
        .split_whitespace()
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, sig)| STANDARD.decode(sig).ok())
        .any(|given| {
            expected
                .iter()
                .any(|e| bool::from(e.as_slice().ct_eq(given.as_slice())))
        });
    if matched {
        Ok(())
    } else {
        Err(VerifyError::NoMatchingSignature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TS: i64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const GOOD: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    const BAD: &str = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";

    fn secret() -> SigningSecret {
        SigningSecret::parse(SECRET).unwrap()
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_secs(secs)
    }

    fn check(sig: &str, ts: &str, now: Timestamp) -> Result<(), VerifyError> {
        verify(&[secret()], MSG_ID, ts, sig, BODY, now)
    }

    #[test]
    fn spec_test_vector_signs() {
        assert_eq!(sign(&secret(), MSG_ID, TS, BODY), GOOD);
        let key = EndpointKey::Hmac(secret());
        assert_eq!(signature_header(&[key], MSG_ID, TS, BODY), GOOD);
    }

    #[test]
    fn ed25519_keys_sign_v1a_and_round_trip_in_their_text_form() {
        use ring::signature::{ED25519, UnparsedPublicKey};
        let key = Ed25519Secret::generate(&mut rand::rng());
        let text = key.to_string();
        assert!(text.starts_with("whsk_"), "{text}");
        let again = EndpointKey::parse(&text).unwrap();
        assert_eq!(again.to_string(), text);
        let public = again.public_key().unwrap();
        assert!(public.starts_with("whpk_"));
        let hmac = EndpointKey::Hmac(secret());
        let header = signature_header(&[again, hmac], MSG_ID, TS, BODY);
        let (v1a, v1) = header.split_once(' ').unwrap();
        assert_eq!(v1, GOOD, "the HMAC entry is unchanged beside it");
        let sig = STANDARD.decode(v1a.strip_prefix("v1a,").unwrap()).unwrap();
        let pk = STANDARD
            .decode(public.strip_prefix("whpk_").unwrap())
            .unwrap();
        let signed = format!("{MSG_ID}.{TS}.{}", std::str::from_utf8(BODY).unwrap());
        UnparsedPublicKey::new(&ED25519, &pk)
            .verify(signed.as_bytes(), &sig)
            .expect("verifies with the public key");
        // The seed alone (32 bytes) is accepted too; a public half that does not match is not.
        let seed = &STANDARD
            .decode(text.strip_prefix("whsk_").unwrap())
            .unwrap()[..32];
        let short = format!("whsk_{}", STANDARD.encode(seed));
        assert_eq!(
            EndpointKey::parse(&short).unwrap().public_key().unwrap(),
            public
        );
        let mut bad = STANDARD
            .decode(text.strip_prefix("whsk_").unwrap())
            .unwrap();
        bad[40] ^= 1;
        let bad = format!("whsk_{}", STANDARD.encode(bad));
        assert_eq!(
            Ed25519Secret::parse(&bad).unwrap_err(),
            SecretError::PublicKeyMismatch
        );
        assert!(format!("{:?}", EndpointKey::parse(&text).unwrap()).contains("redacted"));
    }

    #[test]
    fn spec_test_vector_verifies() {
        assert_eq!(check(GOOD, "1614265330", at(TS)), Ok(()));
        // Sub-second "now" is the same second.
        assert_eq!(
            check(GOOD, "1614265330", Timestamp::from_millis(TS * 1000 + 999)),
            Ok(())
        );
    }

    #[test]
    fn wrong_signature_fails() {
        assert_eq!(
            check(BAD, "1614265330", at(TS)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn timestamp_tolerance_is_five_minutes_both_ways() {
        // The signature is over the timestamp, so sign for each timestamp tried.
        let signed_at = |ts: i64| {
            let sig = sign(&secret(), MSG_ID, ts, BODY);
            check(&sig, &ts.to_string(), at(TS))
        };
        assert_eq!(signed_at(TS - 300), Ok(()));
        assert_eq!(signed_at(TS + 300), Ok(()));
        assert_eq!(signed_at(TS - 301), Err(VerifyError::TimestampTooOld));
        assert_eq!(signed_at(TS + 301), Err(VerifyError::TimestampTooNew));
        // The vector's own signature, checked an hour later and an hour earlier.
        assert_eq!(
            check(GOOD, "1614265330", at(TS + 3600)),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            check(GOOD, "1614265330", at(TS - 3600)),
            Err(VerifyError::TimestampTooNew)
        );
    }

    #[test]
    fn other_versions_and_bad_entries_are_skipped() {
        let header = format!("{BAD} v2,{} {GOOD}", &GOOD[3..]);
        assert_eq!(check(&header, "1614265330", at(TS)), Ok(()));
        let junk = format!("v1 v1,!!! , garbage v1a,{} v1,{BAD} {GOOD}", &GOOD[3..]);
        assert_eq!(check(&junk, "1614265330", at(TS)), Ok(()));
        // A good signature under another version tag does not count.
        let wrong_version = format!("v2,{}", &GOOD[3..]);
        assert_eq!(
            check(&wrong_version, "1614265330", at(TS)),
            Err(VerifyError::NoMatchingSignature)
        );
    }

    #[test]
    fn secret_without_prefix_verifies() {
        let bare = SigningSecret::parse(&SECRET[SECRET_PREFIX.len()..]).unwrap();
        assert_eq!(bare, secret());
        assert_eq!(
            verify(&[bare], MSG_ID, "1614265330", GOOD, BODY, at(TS)),
            Ok(())
        );
    }

    #[test]
    fn malformed_headers() {
        assert_eq!(check(GOOD, "", at(TS)), Err(VerifyError::MissingHeaders));
        assert_eq!(
            check("  ", "1614265330", at(TS)),
            Err(VerifyError::MissingHeaders)
        );
        assert_eq!(
            verify(&[secret()], "", "1614265330", GOOD, BODY, at(TS)),
            Err(VerifyError::MissingHeaders)
        );
        for ts in ["soon", "1614265330.5", "1e9", "99999999999999999999"] {
            assert_eq!(
                check(GOOD, ts, at(TS)),
                Err(VerifyError::InvalidTimestamp),
                "{ts}"
            );
        }
        assert_eq!(check(GOOD, " 1614265330 ", at(TS)), Ok(()));
        // No secrets: nothing can match.
        assert_eq!(
            verify(&[], MSG_ID, "1614265330", GOOD, BODY, at(TS)),
            Err(VerifyError::NoMatchingSignature)
        );
        // Extreme clocks and timestamps do not overflow.
        assert_eq!(
            check(
                GOOD,
                &i64::MIN.to_string(),
                Timestamp::from_millis(i64::MAX)
            ),
            Err(VerifyError::TimestampTooOld)
        );
        assert_eq!(
            check(
                GOOD,
                &i64::MAX.to_string(),
                Timestamp::from_millis(i64::MIN)
            ),
            Err(VerifyError::TimestampTooNew)
        );
    }

    #[test]
    fn parse_checks_base64_and_length() {
        assert_eq!(secret().to_string(), SECRET);
        assert_eq!(SECRET.parse::<SigningSecret>().unwrap(), secret());
        assert_eq!(
            SigningSecret::parse("whsec_not base64!"),
            Err(SecretError::InvalidBase64)
        );
        let short = format!("whsec_{}", STANDARD.encode([7u8; 23]));
        assert_eq!(
            SigningSecret::parse(&short),
            Err(SecretError::InvalidLength(23))
        );
        let long = STANDARD.encode([7u8; 65]);
        assert_eq!(
            SigningSecret::parse(&long),
            Err(SecretError::InvalidLength(65))
        );
        for len in [24, 32, 64] {
            let s = format!("whsec_{}", STANDARD.encode(vec![1u8; len]));
            assert_eq!(SigningSecret::parse(&s).unwrap().to_string(), s);
        }
        assert_eq!(SigningSecret::parse(""), Err(SecretError::InvalidLength(0)));
    }

    #[test]
    fn generated_secrets() {
        let mut rng = StdRng::seed_from_u64(1);
        let a = SigningSecret::generate(&mut rng);
        let b = SigningSecret::generate(&mut rng);
        assert_ne!(a, b);
        let text = a.to_string();
        assert!(text.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&text[6..]).unwrap().len(), 32);
        assert_eq!(SigningSecret::parse(&text).unwrap(), a);

        let long = SigningSecret::generate_with_len(64, &mut rng).unwrap();
        assert_eq!(STANDARD.decode(&long.to_string()[6..]).unwrap().len(), 64);
        assert_eq!(
            SigningSecret::generate_with_len(16, &mut rng),
            Err(SecretError::InvalidLength(16))
        );
        assert_eq!(
            SigningSecret::generate_with_len(65, &mut rng),
            Err(SecretError::InvalidLength(65))
        );
    }

    #[test]
    fn debug_redacts_the_key() {
        let shown = format!("{:?}", secret());
        assert!(!shown.contains("MfKQ9r8"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }

    fn any_secret() -> impl Strategy<Value = SigningSecret> {
        proptest::collection::vec(any::<u8>(), MIN_SECRET_LEN..=MAX_SECRET_LEN)
            .prop_map(|key| SigningSecret { key })
    }

    proptest! {
        #[test]
        fn sign_then_verify(
            secret in any_secret(),
            id in "[ -~]{1,40}",
            ts in 0i64..=10_000_000_000,
            body in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let sig = sign(&secret, &id, ts, &body);
            prop_assert_eq!(
                verify(&[secret], &id, &ts.to_string(), &sig, &body, at(ts)),
                Ok(())
            );
        }

        #[test]
        fn any_changed_byte_fails(
            secret in any_secret(),
            id in "[!-~]{1,40}",
            ts in 0i64..=10_000_000_000,
            body in proptest::collection::vec(any::<u8>(), 1..256),
            index in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            ascii in 0x21u8..=0x7e,
        ) {
            let sig = sign(&secret, &id, ts, &body);
            let secrets = [secret];
            let ts_text = ts.to_string();

            let mut body2 = body.clone();
            body2[index.index(body.len())] ^= flip;
            prop_assert!(verify(&secrets, &id, &ts_text, &sig, &body2, at(ts)).is_err());

            let mut id2 = id.clone().into_bytes();
            let i = index.index(id2.len());
            id2[i] = if id2[i] == ascii { b' ' } else { ascii };
            let id2 = String::from_utf8(id2).unwrap();
            prop_assert!(verify(&secrets, &id2, &ts_text, &sig, &body, at(ts)).is_err());

            let mut ts2 = ts_text.clone().into_bytes();
            let i = index.index(ts2.len());
            ts2[i] = if ts2[i] == ascii { b' ' } else { ascii };
            let ts2 = String::from_utf8(ts2).unwrap();
            prop_assert!(verify(&secrets, &id, &ts2, &sig, &body, at(ts)).is_err());
        }

        #[test]
        fn multi_secret_header_verifies_with_either(
            old in any_secret(),
            new in any_secret(),
            other in any_secret(),
            body in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            prop_assume!(old != other && new != other);
            let keys = [EndpointKey::Hmac(old.clone()), EndpointKey::Hmac(new.clone())];
            let header = signature_header(&keys, MSG_ID, TS, &body);
            prop_assert_eq!(header.split(' ').count(), 2);
            for s in [old, new] {
                prop_assert_eq!(verify(&[s], MSG_ID, "1614265330", &header, &body, at(TS)), Ok(()));
            }
            prop_assert_eq!(
                verify(&[other], MSG_ID, "1614265330", &header, &body, at(TS)),
                Err(VerifyError::NoMatchingSignature)
            );
        }
    }
}
