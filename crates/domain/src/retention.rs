//! How long what a message leaves behind is kept: its payload (and its attempts' response
//! bodies), and its metadata (the message row, its deliveries and attempts).
//!
//! The operator sets defaults; a tenant, and within it an application, may choose its own
//! number of days for either, between one day and the operator's `max_retention`. The most
//! specific choice wins, and a payload never outlives its message.

use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

/// Kept periods in force for one application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    pub payload: Duration,
    pub metadata: Duration,
}

/// One level's choices in days (`None`: the level above decides).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionDays {
    pub payload: Option<u32>,
    pub metadata: Option<u32>,
}

impl RetentionDays {
    /// From stored columns; values outside `u32` (never written by hookd) count as unset.
    pub fn from_columns(payload: Option<i32>, metadata: Option<i32>) -> RetentionDays {
        RetentionDays {
            payload: payload.and_then(|d| u32::try_from(d).ok()),
            metadata: metadata.and_then(|d| u32::try_from(d).ok()),
        }
    }

    /// Checks each chosen value against `1..=max_days`; the error names the field.
    pub fn check(&self, max: Duration) -> Result<(), RetentionError> {
        let max_days = max_days(max);
        for (field, v) in [
            ("payloadRetentionDays", self.payload),
            ("metadataRetentionDays", self.metadata),
        ] {
            if let Some(d) = v
                && !(1..=max_days).contains(&d)
            {
                return Err(RetentionError { field, max_days });
            }
        }
        Ok(())
    }
}

/// A chosen number of days outside what the operator allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be between 1 and {max_days} days (the server's max_retention)")]
pub struct RetentionError {
    pub field: &'static str,
    pub max_days: u32,
}

/// Whole days in `max`, at least one.
pub fn max_days(max: Duration) -> u32 {
    u32::try_from(max.as_secs() / DAY.as_secs())
        .unwrap_or(u32::MAX)
        .max(1)
}

impl Retention {
    /// The periods after `levels` (outermost first: the tenant's, then the application's)
    /// have chosen; the payload's is capped at the metadata's.
    pub fn choose(self, levels: &[RetentionDays]) -> Retention {
        let days = |d: u32| DAY * d;
        let mut out = self;
        for level in levels {
            if let Some(d) = level.payload {
                out.payload = days(d);
            }
            if let Some(d) = level.metadata {
                out.metadata = days(d);
            }
        }
        out.payload = out.payload.min(out.metadata);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER: Retention = Retention {
        payload: Duration::from_secs(30 * 86_400),
        metadata: Duration::from_secs(90 * 86_400),
    };

    fn days(n: u64) -> Duration {
        Duration::from_secs(n * 86_400)
    }

    #[test]
    fn the_most_specific_choice_wins_and_a_payload_never_outlives_its_message() {
        assert_eq!(SERVER.choose(&[]), SERVER);
        let tenant = RetentionDays {
            payload: Some(7),
            metadata: None,
        };
        let app = RetentionDays {
            payload: None,
            metadata: Some(14),
        };
        assert_eq!(
            SERVER.choose(&[tenant, app]),
            Retention {
                payload: days(7),
                metadata: days(14)
            }
        );
        let short = RetentionDays {
            payload: None,
            metadata: Some(5),
        };
        assert_eq!(
            SERVER.choose(&[short]),
            Retention {
                payload: days(5),
                metadata: days(5)
            },
            "the server's 30-day payload is capped at the tenant's 5-day metadata"
        );
        let app_longer = RetentionDays {
            payload: Some(60),
            metadata: None,
        };
        assert_eq!(SERVER.choose(&[tenant, app_longer]).payload, days(60));
    }

    #[test]
    fn choices_are_whole_days_within_the_operators_maximum() {
        let max = days(90);
        assert!(
            RetentionDays {
                payload: Some(1),
                metadata: Some(90)
            }
            .check(max)
            .is_ok()
        );
        let err = RetentionDays {
            payload: Some(0),
            metadata: None,
        }
        .check(max)
        .unwrap_err();
        assert_eq!(err.field, "payloadRetentionDays");
        let err = RetentionDays {
            payload: None,
            metadata: Some(91),
        }
        .check(max)
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "metadataRetentionDays must be between 1 and 90 days (the server's max_retention)"
        );
        assert_eq!(max_days(Duration::from_secs(60)), 1);
        assert_eq!(
            RetentionDays::from_columns(Some(-1), Some(3)),
            RetentionDays {
                payload: None,
                metadata: Some(3)
            }
        );
    }
}
