//! The life-cycle states of a delivery (one message to one endpoint) and of an attempt.

/// Requests in flight to one endpoint at most when it sets no `maxConcurrency`.
pub const DEFAULT_MAX_CONCURRENCY: u32 = 10;

use serde::{Deserialize, Serialize};

/// Where a delivery stands. `Failed` is the dead-letter state; `Skipped` is a dead ordered head
/// the tenant chose to skip so that its key can flow again. `Paused`: its endpoint is disabled;
/// it waits, without counting an attempt, and turns pending again when the endpoint is enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Pending,
    Sending,
    Succeeded,
    Failed,
    Skipped,
    Paused,
}

/// What set an attempt off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
#[serde(rename_all = "snake_case")]
pub enum AttemptTrigger {
    Scheduled,
    Manual,
}

/// Why an attempt produced no HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Timeout,
    Connect,
    Dns,
    Tls,
    Http,
    /// The endpoint's OAuth token endpoint failed: no request was sent to the endpoint.
    Auth,
    /// A broker destination did not take the message (refused, unroutable, no stream, or an
    /// error of its protocol); retried like a network error.
    Broker,
}

macro_rules! text_enum {
    ($ty:ty { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl ::std::str::FromStr for $ty {
            type Err = $crate::delivery::UnknownVariant;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err($crate::delivery::UnknownVariant { kind: stringify!($ty), value: s.to_owned() }),
                }
            }
        }
    };
}

pub(crate) use text_enum;

text_enum!(DeliveryState { Pending => "pending", Sending => "sending", Succeeded => "succeeded", Failed => "failed", Skipped => "skipped", Paused => "paused" });
text_enum!(AttemptTrigger { Scheduled => "scheduled", Manual => "manual" });
text_enum!(ErrorKind { Timeout => "timeout", Connect => "connect", Dns => "dns", Tls => "tls", Http => "http", Auth => "auth", Broker => "broker" });

impl DeliveryState {
    /// No more attempts will be made unless a person asks for one.
    pub const fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Skipped)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?}")]
pub struct UnknownVariant {
    pub kind: &'static str,
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_text() {
        for s in [
            DeliveryState::Pending,
            DeliveryState::Sending,
            DeliveryState::Succeeded,
            DeliveryState::Failed,
            DeliveryState::Skipped,
            DeliveryState::Paused,
        ] {
            assert_eq!(s.as_str().parse::<DeliveryState>(), Ok(s));
        }
        assert!("dead".parse::<DeliveryState>().is_err());
        assert!(DeliveryState::Failed.is_final());
        assert!(!DeliveryState::Sending.is_final());
        assert!(!DeliveryState::Paused.is_final());
    }
}
