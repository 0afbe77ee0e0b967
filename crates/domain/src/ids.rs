//! Typed, prefixed, sortable ids: `tnt_01JD…`, `app_01JD…`, `msg_01JD…`.
//!
//! The body is a ULID-style 128-bit value (48-bit millisecond time, 80 random bits) written as
//! 26 Crockford base32 characters, so ids sort by creation time as plain strings: listings page
//! newest-first on the primary key alone. Within one process ids are strictly increasing, even
//! within one millisecond. One macro makes every type; parsing checks the prefix.

use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;

use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::time::Timestamp;

const BODY_LEN: usize = 26;
const RANDOM_BITS: u32 = 80;
const RANDOM_MASK: u128 = (1u128 << RANDOM_BITS) - 1;

/// Why an id string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("expected an id starting with {expected:?}")]
    WrongPrefix { expected: &'static str },
    #[error("malformed id: expected {expected:?} followed by 26 base32 characters")]
    Malformed { expected: &'static str },
}

/// Encodes 128 bits as 26 Crockford base32 characters (the top two bits of the first are zero).
fn encode(value: u128) -> [u8; BODY_LEN] {
    let mut out = [0u8; BODY_LEN];
    ulid::Ulid(value).array_to_str(&mut out);
    out
}

/// The value of 26 Crockford base32 characters, either case. The first carries only 3 bits
/// (26 × 5 = 130 > 128): above `7` the text names no 128-bit value, and ulid's decoder would
/// silently drop the top bits, so two spellings would name one id.
fn decode(body: &str) -> Option<u128> {
    if body.as_bytes().first().is_none_or(|&c| c > b'7') {
        return None;
    }
    ulid::Ulid::from_string(body).ok().map(|u| u.0)
}

/// The stored bytes (see `to_bytes` of each id type) of an id of any type, from its text
/// (`msg_01J…`): for a listing's cursor, which names a position in id order whatever its
/// prefix. None when the text after the last `_` is not 26 base32 characters.
pub fn any_id_bytes(text: &str) -> Option<[u8; 16]> {
    let (_, body) = text.rsplit_once('_')?;
    decode(body).map(u128::to_be_bytes)
}

static LAST: Mutex<u128> = Mutex::new(0);

/// A new id value for time `now`: strictly greater than every value this process made before.
fn next_value(now: Timestamp, rng: &mut impl RngCore) -> u128 {
    let ms = (now.as_millis().max(0) as u128) & ((1u128 << 48) - 1);
    let mut random = [0u8; 16];
    rng.fill_bytes(&mut random);
    let fresh = (ms << RANDOM_BITS) | (u128::from_be_bytes(random) & RANDOM_MASK);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    let value = if fresh > *last { fresh } else { *last + 1 };
    *last = value;
    value
}

/// The millisecond timestamp an id was minted at.
fn value_time(value: u128) -> Timestamp {
    Timestamp::from_millis((value >> RANDOM_BITS) as i64)
}

macro_rules! define_id {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u128);

        impl $name {
            pub const PREFIX: &'static str = concat!($prefix, "_");

            /// A new id stamped with the current system time.
            pub fn new() -> Self {
                Self::new_at(Timestamp::now(), &mut rand::rng())
            }

            /// A new id stamped with `now`, its random part drawn from `rng`.
            pub fn new_at(now: Timestamp, rng: &mut impl RngCore) -> Self {
                $name(next_value(now, rng))
            }

            /// When this id was created (millisecond precision).
            pub fn created_at(&self) -> Timestamp {
                value_time(self.0)
            }

            /// The smallest id that could have been minted at `t`: the bound for "after t"
            /// keyset queries on id-ordered tables.
            pub fn lower_bound(t: Timestamp) -> Self {
                $name(((t.as_millis().max(0) as u128) & ((1u128 << 48) - 1)) << RANDOM_BITS)
            }

            pub fn parse(s: &str) -> Result<Self, IdError> {
                let body = s
                    .strip_prefix(Self::PREFIX)
                    .ok_or(IdError::WrongPrefix { expected: Self::PREFIX })?;
                decode(body)
                    .map($name)
                    .ok_or(IdError::Malformed { expected: Self::PREFIX })
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(Self::PREFIX)?;
                // The alphabet is ASCII, so this is always valid UTF-8.
                f.write_str(std::str::from_utf8(&encode(self.0)).map_err(|_| fmt::Error)?)
            }
        }

        impl $name {
            /// The 16 bytes it is stored as: the value big-endian, so byte order is id order.
            pub fn to_bytes(self) -> [u8; 16] {
                self.0.to_be_bytes()
            }

            /// The id stored as `bytes` (see [`Self::to_bytes`]).
            pub fn from_bytes(bytes: [u8; 16]) -> Self {
                $name(u128::from_be_bytes(bytes))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                Self::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        // Stored as the value's 16 bytes, big-endian (decisions 94): a PostgreSQL `uuid`, a
        // SQLite BLOB, so byte order is id order is time order and keyset paging by id holds.
        // A row whose id is not 16 bytes is an error naming the column, never a default: the
        // one policy for bad stored ids.
        #[cfg(feature = "sea-orm")]
        impl From<$name> for sea_orm::Value {
            fn from(id: $name) -> Self {
                sea_orm::Value::Uuid(Some(Box::new(sea_orm::prelude::Uuid::from_u128(id.0))))
            }
        }

        #[cfg(feature = "sea-orm")]
        impl From<&$name> for sea_orm::Value {
            fn from(id: &$name) -> Self {
                (*id).into()
            }
        }

        #[cfg(feature = "sea-orm")]
        impl sea_orm::TryGetable for $name {
            fn try_get_by<I: sea_orm::ColIdx>(
                res: &sea_orm::QueryResult,
                idx: I,
            ) -> Result<Self, sea_orm::TryGetError> {
                match <sea_orm::prelude::Uuid as sea_orm::TryGetable>::try_get_by(res, idx) {
                    Ok(u) => Ok($name(u.as_u128())),
                    Err(sea_orm::TryGetError::DbErr(e)) => {
                        // Named with what the column holds, as far as it can be read.
                        let held = match <Vec<u8> as sea_orm::TryGetable>::try_get_by(res, idx) {
                            Ok(b) => match String::from_utf8(b) {
                                Ok(text) => format!("{text:?}"),
                                Err(b) => format!("{:02x?}", b.as_bytes()),
                            },
                            Err(_) => "a value".to_owned(),
                        };
                        Err(sea_orm::TryGetError::DbErr(sea_orm::DbErr::Type(format!(
                            "column {idx:?} holds {held}, not a stored {}: {e}",
                            stringify!($name)
                        ))))
                    }
                    Err(null) => Err(null),
                }
            }
        }

        #[cfg(feature = "sea-orm")]
        impl sea_orm::sea_query::ValueType for $name {
            fn try_from(v: sea_orm::Value) -> Result<Self, sea_orm::sea_query::ValueTypeErr> {
                <sea_orm::prelude::Uuid as sea_orm::sea_query::ValueType>::try_from(v)
                    .map(|u| $name(u.as_u128()))
            }
            fn type_name() -> String {
                stringify!($name).to_owned()
            }
            fn array_type() -> sea_orm::sea_query::ArrayType {
                sea_orm::sea_query::ArrayType::Uuid
            }
            fn column_type() -> sea_orm::sea_query::ColumnType {
                sea_orm::sea_query::ColumnType::Uuid
            }
        }

        #[cfg(feature = "sea-orm")]
        impl sea_orm::sea_query::Nullable for $name {
            fn null() -> sea_orm::Value {
                sea_orm::Value::Uuid(None)
            }
        }

        #[cfg(feature = "rusqlite")]
        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(rusqlite::types::ToSqlOutput::Owned(rusqlite::types::Value::Blob(
                    self.0.to_be_bytes().to_vec(),
                )))
            }
        }

        #[cfg(feature = "rusqlite")]
        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                let bytes = value.as_blob()?;
                let bytes: [u8; 16] = bytes.try_into().map_err(|_| {
                    rusqlite::types::FromSqlError::InvalidBlobSize {
                        expected_size: 16,
                        blob_size: bytes.len(),
                    }
                })?;
                Ok($name(u128::from_be_bytes(bytes)))
            }
        }

        #[cfg(feature = "sea-orm")]
        impl sea_orm::TryFromU64 for $name {
            fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
                Err(sea_orm::DbErr::ConvertFromU64(stringify!($name)))
            }
        }
    };
}

define_id!(/** A tenant: one customer of hookd. */ TenantId, "tnt");
define_id!(/** A dashboard user. */ UserId, "usr");
define_id!(/** A dashboard login session. */ SessionId, "sess");
define_id!(/** An API key (its secret part is never stored). */ ApiKeyId, "key");
define_id!(/** A Svix "application": one of the tenant's consumers. */ ApplicationId, "app");
define_id!(/** An event type. */ EventTypeId, "evtype");
define_id!(/** An endpoint URL of an application. */ EndpointId, "ep");
define_id!(/** A signing secret of an endpoint. */ SecretId, "whsk");
define_id!(/** A message (an event as submitted). */ MessageId, "msg");
define_id!(/** A delivery: one message to one endpoint. */ DeliveryId, "dlv");
define_id!(/** One HTTP try of a delivery. */ AttemptId, "atmpt");
define_id!(/** A queued email. */ EmailId, "eml");
define_id!(/** An operational event (endpoint disabled, …). */ OperationalEventId, "oev");
define_id!(/** A running hookd process. */ NodeId, "node");
define_id!(/** A durable background job (bulk recover or replay). */ JobId, "job");
define_id!(/** An app portal token (its secret part is never stored). */ PortalTokenId, "ptk");
define_id!(/** An inbound source: a URL that receives webhooks (`hookd receive`). */ SourceId, "src");
define_id!(/** A request an inbound source refused, as its Requests view lists it. */ RefusalId, "rfs");
define_id!(/** An integration: an API key limited to one application's messages. */ IntegrationId, "integ");

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn text_naming_no_128_bit_value_is_refused_not_wrapped() {
        let max = format!("msg_7{}", "Z".repeat(25));
        assert_eq!(MessageId::parse(&max).unwrap().to_string(), max);
        for first in ['8', 'Z'] {
            let text = format!("msg_{first}{}", "0".repeat(25));
            assert!(MessageId::parse(&text).is_err(), "{text}");
        }
        assert!(MessageId::parse(&format!("msg_0{}", "O".repeat(25))).is_err());
    }

    #[test]
    fn display_has_prefix_and_26_chars() {
        let id = MessageId::new();
        let s = id.to_string();
        assert!(s.starts_with("msg_"), "{s}");
        assert_eq!(s.len(), 4 + 26);
        assert_eq!(MessageId::parse(&s), Ok(id));
    }

    #[test]
    fn parse_checks_the_prefix() {
        let app = ApplicationId::new().to_string();
        assert_eq!(
            EndpointId::parse(&app),
            Err(IdError::WrongPrefix { expected: "ep_" })
        );
        assert_eq!(
            EndpointId::parse("ep_tooshort"),
            Err(IdError::Malformed { expected: "ep_" })
        );
        // 'U' is not in Crockford's alphabet; '8' as the first char would overflow 128 bits.
        assert!(EndpointId::parse("ep_0000000000000000000000000U").is_err());
        assert!(EndpointId::parse("ep_80000000000000000000000000").is_err());
        assert!(EndpointId::parse("").is_err());
    }

    #[test]
    fn ids_sort_by_creation_time_even_within_one_millisecond() {
        let mut rng = StdRng::seed_from_u64(7);
        let t = Timestamp::from_millis(1_700_000_000_000);
        let ids: Vec<String> = (0..1000)
            .map(|_| MessageId::new_at(t, &mut rng).to_string())
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        let later = MessageId::new_at(t.plus(std::time::Duration::from_millis(1)), &mut rng);
        assert!(later.to_string() > ids[999]);
    }

    #[test]
    fn created_at_and_lower_bound_agree() {
        let mut rng = StdRng::seed_from_u64(1);
        let t = Timestamp::from_millis(1_750_000_000_123);
        let id = AttemptId::new_at(t, &mut rng);
        assert_eq!(id.created_at(), t);
        assert!(AttemptId::lower_bound(t) <= id);
        assert!(AttemptId::lower_bound(t.plus(std::time::Duration::from_millis(1))) > id);
    }

    #[test]
    fn serde_uses_the_string_form() {
        let id = TenantId::new();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<TenantId>(&json).unwrap(), id);
        assert!(serde_json::from_str::<ApplicationId>(&json).is_err());
    }

    proptest! {
        #[test]
        fn any_value_round_trips(hi in any::<u64>(), lo in any::<u64>()) {
            let id = EndpointId(((hi as u128) << 64) | lo as u128);
            prop_assert_eq!(EndpointId::parse(&id.to_string()), Ok(id));
        }

        #[test]
        fn stored_bytes_sort_as_the_ids_and_read_back(a in any::<u128>(), b in any::<u128>()) {
            let (x, y) = (MessageId(a), MessageId(b));
            prop_assert_eq!(x.to_bytes().cmp(&y.to_bytes()), x.cmp(&y));
            prop_assert_eq!(x.to_string().cmp(&y.to_string()), x.cmp(&y));
            prop_assert_eq!(MessageId::from_bytes(x.to_bytes()), x);
            prop_assert_eq!(any_id_bytes(&x.to_string()), Some(x.to_bytes()));
        }

        #[test]
        fn lowercase_is_accepted(hi in any::<u64>(), lo in any::<u64>()) {
            let id = MessageId(((hi as u128) << 64) | lo as u128);
            let s = id.to_string();
            let lower = format!("msg_{}", s[4..].to_ascii_lowercase());
            prop_assert_eq!(MessageId::parse(&lower), Ok(id));
        }
    }
}
