//! Secrets sealed at rest: what hookd must read back (endpoint signing secrets, custom header
//! values) is stored as AES-256-GCM ciphertext under a data key derived (HKDF-SHA256) from an
//! operator key. Each sealed value names the key that sealed it, so several keys can be
//! configured while values are re-sealed under a new one (`hookd rekey`).
//!
//! A sealed value reads `sealed:v1:{key id}:{base64url(nonce ‖ ciphertext ‖ tag)}`. The
//! associated data binds it to where it is stored (say `endpoint_secret/{id}`), so a value
//! copied into another row, another tenant's, does not open.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rand::RngCore;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

/// What every sealed value starts with; anything else is a value stored before sealing.
pub const PREFIX: &str = "sealed:v1:";
/// The fewest bytes of key material accepted (the data key is 32 bytes).
pub const MIN_KEY_BYTES: usize = 32;
/// The longest key id.
pub const MAX_KEY_ID: usize = 32;

/// One operator key, as configured: `id:base64-key`.
#[derive(Clone)]
pub struct OperatorKey {
    id: String,
    key: LessSafeKeyBox,
}

/// `LessSafeKey` holds the expanded AES key; it has no `Debug` to leak it.
#[derive(Clone)]
struct LessSafeKeyBox(std::sync::Arc<LessSafeKey>);

impl fmt::Debug for OperatorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OperatorKey({})", self.id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "a key is written `id:base64`, e.g. `k1:{example}`",
        example = "<32 random bytes, base64>"
    )]
    Shape,
    #[error("key id {0:?} must be 1 to {MAX_KEY_ID} letters, digits, `-` or `_`")]
    Id(String),
    #[error("key {0:?} is not valid base64")]
    Base64(String),
    #[error(
        "key {id:?} has {len} bytes; at least {MIN_KEY_BYTES} are needed (e.g. `openssl rand -base64 32`)"
    )]
    Short { id: String, len: usize },
    #[error("key id {0:?} is given twice")]
    Twice(String),
    #[error("no key is given")]
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The value names a key this process was not given: the operator must add it.
    #[error(
        "a stored secret is sealed under key {0:?}, which is not among the configured secret_keys; add that key (the first key seals, the others only open)"
    )]
    UnknownKey(String),
    /// The value does not open under its key: corrupted, or moved from another row.
    #[error(
        "a stored secret sealed under key {0:?} does not open: it was altered or moved from where it was sealed"
    )]
    Corrupt(String),
    #[error("a stored secret is not in the sealed form")]
    Shape,
}

impl OperatorKey {
    /// Parses `id:base64-key` (standard or URL-safe base64, padding optional).
    pub fn parse(text: &str) -> Result<OperatorKey, KeyError> {
        let (id, b64) = text.trim().split_once(':').ok_or(KeyError::Shape)?;
        check_id(id)?;
        let b64 = b64.trim();
        let raw = STANDARD
            .decode(b64)
            .or_else(|_| base64::engine::general_purpose::STANDARD_NO_PAD.decode(b64))
            .or_else(|_| URL_SAFE_NO_PAD.decode(b64.trim_end_matches('=')))
            .map_err(|_| KeyError::Base64(id.to_owned()))?;
        if raw.len() < MIN_KEY_BYTES {
            return Err(KeyError::Short {
                id: id.to_owned(),
                len: raw.len(),
            });
        }
        Ok(OperatorKey::from_bytes(id, &raw))
    }

    fn from_bytes(id: &str, material: &[u8]) -> OperatorKey {
        let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"hookd seal v1");
        let prk = salt.extract(material);
        let okm = prk
            .expand(&[b"aes-256-gcm data key"], &AES_256_GCM)
            .expect("32 bytes is within HKDF-SHA256's output limit");
        let key = LessSafeKey::new(UnboundKey::from(okm));
        OperatorKey {
            id: id.to_owned(),
            key: LessSafeKeyBox(std::sync::Arc::new(key)),
        }
    }

    /// A new random key with this id, and its `id:base64` text to store.
    pub fn generate(
        id: &str,
        rng: &mut (impl RngCore + ?Sized),
    ) -> Result<(OperatorKey, String), KeyError> {
        check_id(id)?;
        let mut raw = [0u8; 32];
        rng.fill_bytes(&mut raw);
        let text = format!("{id}:{}", STANDARD.encode(raw));
        Ok((OperatorKey::from_bytes(id, &raw), text))
    }

    pub fn id(&self) -> &str {
        &self.id
    }
}

fn check_id(id: &str) -> Result<(), KeyError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_KEY_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(KeyError::Id(id.to_owned()))
    }
}

/// The configured keys: the first seals, every one opens what it sealed.
#[derive(Clone, Debug)]
pub struct Keyring {
    current: OperatorKey,
    by_id: BTreeMap<String, OperatorKey>,
}

impl Keyring {
    /// The keys in order; the first one seals.
    pub fn new(keys: Vec<OperatorKey>) -> Result<Keyring, KeyError> {
        let current = keys.first().cloned().ok_or(KeyError::None)?;
        let mut by_id = BTreeMap::new();
        for k in keys {
            if by_id.insert(k.id.clone(), k.clone()).is_some() {
                return Err(KeyError::Twice(k.id));
            }
        }
        Ok(Keyring { current, by_id })
    }

    /// Parses keys separated by commas, spaces or lines (`id:base64` each); `#` starts a
    /// comment to the end of its line.
    pub fn parse(text: &str) -> Result<Keyring, KeyError> {
        let keys = text
            .lines()
            .map(|line| line.split('#').next().unwrap_or(""))
            .flat_map(|line| line.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|s| !s.is_empty())
            .map(OperatorKey::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Keyring::new(keys)
    }

    /// The id of the key that seals.
    pub fn current_id(&self) -> &str {
        &self.current.id
    }

    /// Every configured key id, the sealing one first.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids = vec![self.current.id.as_str()];
        ids.extend(
            self.by_id
                .keys()
                .map(String::as_str)
                .filter(|id| *id != self.current.id),
        );
        ids
    }

    /// Seals `plain` for the place `context` names (e.g. `endpoint_secret/{id}`).
    pub fn seal(&self, plain: &str, context: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut buf = plain.as_bytes().to_vec();
        let aad = aad(&self.current.id, context);
        self.current
            .key
            .0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&aad),
                &mut buf,
            )
            .expect("AES-GCM seals any input shorter than 64 GiB");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        format!(
            "{PREFIX}{}:{}",
            self.current.id,
            URL_SAFE_NO_PAD.encode(out)
        )
    }

    /// Opens a value sealed for `context`. A value not in the sealed form (stored before
    /// sealing existed) is returned as it is; [`Sealing::of`] tells which it is.
    pub fn open(&self, stored: &str, context: &str) -> Result<String, OpenError> {
        let Some(rest) = stored.strip_prefix(PREFIX) else {
            return Ok(stored.to_owned());
        };
        let (id, b64) = rest.split_once(':').ok_or(OpenError::Shape)?;
        let key = self
            .by_id
            .get(id)
            .ok_or_else(|| OpenError::UnknownKey(id.to_owned()))?;
        let mut raw = URL_SAFE_NO_PAD
            .decode(b64)
            .map_err(|_| OpenError::Corrupt(id.to_owned()))?;
        if raw.len() < NONCE_LEN {
            return Err(OpenError::Corrupt(id.to_owned()));
        }
        let mut ciphertext = raw.split_off(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(&raw).map_err(|_| OpenError::Shape)?;
        let plain = key
            .key
            .0
            .open_in_place(nonce, Aad::from(&aad(id, context)), &mut ciphertext)
            .map_err(|_| OpenError::Corrupt(id.to_owned()))?;
        String::from_utf8(plain.to_vec()).map_err(|_| OpenError::Corrupt(id.to_owned()))
    }

    /// Whether `stored` needs sealing again: plain, or sealed under a key that is not the
    /// current one (`Err` names a key that is not configured).
    pub fn needs_reseal(&self, stored: &str) -> Result<bool, OpenError> {
        match Sealing::of(stored) {
            Sealing::Plain => Ok(true),
            Sealing::Sealed(id) if id == self.current.id => Ok(false),
            Sealing::Sealed(id) if self.by_id.contains_key(id) => Ok(true),
            Sealing::Sealed(id) => Err(OpenError::UnknownKey(id.to_owned())),
        }
    }
}

fn aad(key_id: &str, context: &str) -> Vec<u8> {
    format!("{key_id}\n{context}").into_bytes()
}

/// How a stored value is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sealing<'a> {
    /// Stored before sealing existed: [`Keyring::needs_reseal`] says to seal it.
    Plain,
    /// Sealed under the key with this id.
    Sealed(&'a str),
}

impl<'a> Sealing<'a> {
    pub fn of(stored: &'a str) -> Sealing<'a> {
        match stored.strip_prefix(PREFIX).and_then(|r| r.split_once(':')) {
            Some((id, _)) => Sealing::Sealed(id),
            None => Sealing::Plain,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    const K2: &str = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

    fn ring(text: &str) -> Keyring {
        Keyring::parse(text).unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_where_it_was_sealed_and_hides_the_text() {
        let keys = ring(K1);
        let sealed = keys.seal("whsec_topsecret", "endpoint_secret/s1");
        assert!(sealed.starts_with("sealed:v1:k1:"), "{sealed}");
        assert!(!sealed.contains("topsecret"));
        assert_eq!(
            keys.open(&sealed, "endpoint_secret/s1").unwrap(),
            "whsec_topsecret"
        );
        // Moved to another row: refused, naming the key.
        assert_eq!(
            keys.open(&sealed, "endpoint_secret/s2"),
            Err(OpenError::Corrupt("k1".into()))
        );
        // Two seals of one value differ (a fresh nonce each).
        assert_ne!(sealed, keys.seal("whsec_topsecret", "endpoint_secret/s1"));
        // A flipped character is caught.
        let mut bad = sealed.clone().into_bytes();
        let last = bad.len() - 3;
        bad[last] = if bad[last] == b'A' { b'B' } else { b'A' };
        assert!(
            keys.open(std::str::from_utf8(&bad).unwrap(), "endpoint_secret/s1")
                .is_err()
        );
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens_its_own() {
        let old = ring(K1).seal("v", "c");
        let both = ring(&format!("{K2}, {K1}"));
        assert_eq!(both.current_id(), "k2");
        assert_eq!(both.ids(), vec!["k2", "k1"]);
        assert_eq!(both.open(&old, "c").unwrap(), "v");
        assert_eq!(both.needs_reseal(&old), Ok(true));
        let new = both.seal("v", "c");
        assert_eq!(both.needs_reseal(&new), Ok(false));
        assert_eq!(both.needs_reseal("whsec_plain"), Ok(true));
        // Without the key that sealed it: an error naming that key, never the plain text.
        let only_new = ring(K2);
        assert_eq!(
            only_new.open(&old, "c"),
            Err(OpenError::UnknownKey("k1".into()))
        );
        assert_eq!(
            only_new.needs_reseal(&old),
            Err(OpenError::UnknownKey("k1".into()))
        );
        assert!(
            OpenError::UnknownKey("k1".into())
                .to_string()
                .contains("\"k1\"")
        );
    }

    #[test]
    fn values_from_before_sealing_read_as_they_are() {
        assert_eq!(ring(K1).open("whsec_old", "c").unwrap(), "whsec_old");
        assert_eq!(Sealing::of("whsec_old"), Sealing::Plain);
    }

    #[test]
    fn bad_keys_are_refused_with_the_reason() {
        assert_eq!(Keyring::parse("").unwrap_err(), KeyError::None);
        assert_eq!(OperatorKey::parse("nocolon").unwrap_err(), KeyError::Shape);
        assert_eq!(
            OperatorKey::parse("k 1:AAAA").unwrap_err(),
            KeyError::Id("k 1".into())
        );
        assert_eq!(
            OperatorKey::parse("k1:***").unwrap_err(),
            KeyError::Base64("k1".into())
        );
        assert_eq!(
            OperatorKey::parse("k1:AAAA").unwrap_err(),
            KeyError::Short {
                id: "k1".into(),
                len: 3
            }
        );
        assert_eq!(
            Keyring::parse(&format!("{K1}\n{K1}")).unwrap_err(),
            KeyError::Twice("k1".into())
        );
        // The key text never shows in Debug.
        let dbg = format!("{:?}", ring(K1));
        assert!(!dbg.contains("AAECAw"), "{dbg}");
    }

    #[test]
    fn a_generated_key_parses_back_to_the_same_key() {
        let (key, text) = OperatorKey::generate("local", &mut rand::rng()).unwrap();
        let sealed = Keyring::new(vec![key]).unwrap().seal("x", "c");
        assert_eq!(ring(&text).open(&sealed, "c").unwrap(), "x");
    }
}
