//! The JSON text columns, each decoded here and only here, with one policy for unreadable
//! data: an error ([`StoreError::Corrupt`]) naming the table, the row and the column. Never a
//! silent default: an endpoint whose stored headers cannot be read is not sent to without
//! them.

use domain::retention::RetentionDays;
use std::collections::BTreeMap;

use domain::classify::StatusOverrides;
use domain::retry::RetryPolicy;
use serde::de::DeserializeOwned;

use crate::entities::{application, endpoint, event_type, job, message};
use crate::{Result, StoreError};

pub(crate) fn decode<T: DeserializeOwned>(
    table: &str,
    id: &dyn std::fmt::Display,
    column: &str,
    text: &str,
) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("{table} {id}: column {column}: {e}")))
}

fn decode_opt<T: DeserializeOwned>(
    table: &str,
    id: &dyn std::fmt::Display,
    column: &str,
    text: &Option<String>,
) -> Result<Option<T>> {
    text.as_deref()
        .map(|t| decode(table, id, column, t))
        .transpose()
}

impl endpoint::Model {
    /// The event types it accepts; `None` = every type.
    pub fn filter_types(&self) -> Result<Option<Vec<String>>> {
        decode_opt("endpoint", &self.id, "filter_types", &self.filter_types)
    }

    /// The channels it accepts; `None` = every message.
    pub fn channels(&self) -> Result<Option<Vec<String>>> {
        decode_opt("endpoint", &self.id, "channels", &self.channels)
    }

    /// Its custom headers as stored: the values sealed ([`crate::Store::endpoint_headers`]
    /// opens them).
    pub(crate) fn stored_headers(&self) -> Result<BTreeMap<String, String>> {
        decode("endpoint", &self.id, "headers", &self.headers)
    }

    pub fn metadata(&self) -> Result<BTreeMap<String, String>> {
        decode("endpoint", &self.id, "metadata", &self.metadata)
    }

    /// Its retry policy; the default when none is stored.
    pub fn retry_policy(&self) -> Result<RetryPolicy> {
        Ok(
            decode_opt("endpoint", &self.id, "retry_policy", &self.retry_policy)?
                .unwrap_or_default(),
        )
    }

    /// Its status-code overrides; the default table when none are stored.
    pub fn status_overrides(&self) -> Result<StatusOverrides> {
        Ok(decode_opt(
            "endpoint",
            &self.id,
            "status_overrides",
            &self.status_overrides,
        )?
        .unwrap_or_default())
    }
}

impl application::Model {
    pub fn metadata(&self) -> Result<BTreeMap<String, String>> {
        decode("application", &self.id, "metadata", &self.metadata)
    }

    /// The application's own retention choice (unset: its tenant's, else the server's).
    pub fn retention(&self) -> RetentionDays {
        RetentionDays::from_columns(self.payload_retention_days, self.metadata_retention_days)
    }
}

impl crate::entities::tenant::Model {
    /// The tenant's retention choice (unset: the server's).
    pub fn retention(&self) -> RetentionDays {
        RetentionDays::from_columns(self.payload_retention_days, self.metadata_retention_days)
    }

    /// The tenant's app-portal settings (none stored: no embedding, hookd's look). Stored only
    /// through [`crate::Store::set_portal_settings`], checked there; text that does not read
    /// back (never written by hookd) counts as none, with a warning.
    pub fn portal_settings(&self) -> domain::portal::PortalSettings {
        self.portal_settings
            .as_deref()
            .and_then(|s| {
                serde_json::from_str(s)
                    .inspect_err(|e| tracing::warn!(tenant = %self.id, error = %e, "unreadable portal settings"))
                    .ok()
            })
            .unwrap_or_default()
    }

    /// Who gets the tenant's early-warning emails.
    pub fn warning_recipient(&self) -> domain::email::WarningRecipient {
        domain::email::WarningRecipient::from_column(self.warning_recipient.as_deref())
    }
}

/// Why nothing more is sent for a message whose content was expunged (a skipped delivery's
/// last error, an attempt's detail).
pub const EXPUNGED: &str = "the message's content was expunged";

/// The SQL side of [`message::Model::is_expunged`], on the `messages` table.
pub(crate) fn expunged_payload() -> sea_orm::sea_query::SimpleExpr {
    sea_orm::sea_query::Expr::cust("length(messages.payload) = 0")
}

impl message::Model {
    /// Its content was expunged (deleted for privacy): the payload is stored empty, which no
    /// accepted message can be (a payload is a JSON object). It cannot be sent again.
    pub fn is_expunged(&self) -> bool {
        self.payload.is_empty()
    }

    pub fn channels(&self) -> Result<Option<Vec<String>>> {
        decode_opt("message", &self.id, "channels", &self.channels)
    }

    pub fn tags(&self) -> Result<Option<Vec<String>>> {
        decode_opt("message", &self.id, "tags", &self.tags)
    }
}

impl event_type::Model {
    pub fn schemas(&self) -> Result<Option<serde_json::Value>> {
        decode_opt("event type", &self.name, "schemas", &self.schemas)
    }

    /// Example `index` of the event type: its version-1 schema's `examples[index]` (what
    /// send-example sends, the portal's catalogue and the dashboard's test event show).
    pub fn example(&self, index: usize) -> Result<Option<serde_json::Value>> {
        Ok(self
            .schemas()?
            .as_ref()
            .and_then(|s| s.get("1"))
            .and_then(|v| v.get("examples"))
            .and_then(|e| e.get(index))
            .cloned())
    }

    pub fn feature_flags(&self) -> Result<Option<Vec<String>>> {
        decode_opt(
            "event type",
            &self.name,
            "feature_flags",
            &self.feature_flags,
        )
    }
}

impl job::Model {
    /// Its parameters, in the shape its kind takes.
    pub fn params<T: DeserializeOwned>(&self) -> Result<T> {
        decode("job", &self.id, "params", &self.params)
    }

    /// What a finished statistics task computed (Svix's `data`); None for the other kinds.
    pub fn result(&self) -> Result<Option<serde_json::Value>> {
        decode_opt("job", &self.id, "result", &self.result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_headers_are_an_error_naming_the_row_not_an_empty_map() {
        let ep = endpoint::Model {
            headers: "{not json".into(),
            ..crate::testing::endpoint_model("ep_1", "https://example.com/hook")
        };
        let err = ep.stored_headers().unwrap_err().to_string();
        assert!(
            err.contains(&ep.id.to_string()) && err.contains("headers"),
            "{err}"
        );
    }
}
