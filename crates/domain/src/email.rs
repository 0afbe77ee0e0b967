//! Email addresses for tenant notifications and dashboard logins.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid email address {0:?}: expected name@domain.tld")]
pub struct EmailError(pub String);

/// A syntactically plausible address: one `@`, a non-empty local part, a dotted domain, no
/// spaces or control characters. Deliverability is the mail server's business.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EmailAddress(String);

impl EmailAddress {
    pub fn parse(input: &str) -> Result<Self, EmailError> {
        let s = input.trim();
        let err = || EmailError(input.to_owned());
        if s.len() > 254 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err());
        }
        let (local, domain) = s.split_once('@').ok_or_else(err)?;
        let labels_ok = domain
            .split('.')
            .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-'));
        if local.is_empty() || domain.contains('@') || !domain.contains('.') || !labels_ok {
            return Err(err());
        }
        Ok(EmailAddress(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EmailAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who gets a tenant's early-warning emails (an endpoint failing, before hookd disables it).
/// Stored as NULL (the notification address), `none`, or the address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum WarningRecipient {
    /// The tenant's notification address (the default).
    #[default]
    Notification,
    /// An address of its own.
    Other(EmailAddress),
    /// No warning emails (the operational event is still sent).
    Nobody,
}

impl WarningRecipient {
    const NOBODY: &'static str = "none";

    /// The stored column: None for the notification address.
    pub fn to_column(&self) -> Option<String> {
        match self {
            WarningRecipient::Notification => None,
            WarningRecipient::Other(a) => Some(a.to_string()),
            WarningRecipient::Nobody => Some(Self::NOBODY.to_owned()),
        }
    }

    /// The stored column read back; an unreadable value falls back to the notification
    /// address (a warning is better sent than lost).
    pub fn from_column(column: Option<&str>) -> WarningRecipient {
        match column {
            None => WarningRecipient::Notification,
            Some(Self::NOBODY) => WarningRecipient::Nobody,
            Some(a) => EmailAddress::parse(a)
                .map(WarningRecipient::Other)
                .unwrap_or_default(),
        }
    }

    /// The form's choice (`notification`, `other`, `nobody`) and its address field.
    pub fn parse_choice(choice: &str, address: &str) -> Result<WarningRecipient, String> {
        match choice {
            "notification" => Ok(WarningRecipient::Notification),
            "nobody" => Ok(WarningRecipient::Nobody),
            "other" if address.trim().is_empty() => {
                Err("Enter the address that gets warning emails.".to_owned())
            }
            "other" => EmailAddress::parse(address)
                .map(WarningRecipient::Other)
                .map_err(|_| {
                    format!(
                        "“{}” is not an email address; use the form name@example.com.",
                        address.trim()
                    )
                }),
            _ => Err("Choose who gets warning emails.".to_owned()),
        }
    }

    /// The form's choice value.
    pub fn choice(&self) -> &'static str {
        match self {
            WarningRecipient::Notification => "notification",
            WarningRecipient::Other(_) => "other",
            WarningRecipient::Nobody => "nobody",
        }
    }

    /// The address warnings go to, given the tenant's notification address.
    pub fn address<'a>(&'a self, notification: &'a str) -> Option<&'a str> {
        match self {
            WarningRecipient::Notification => Some(notification),
            WarningRecipient::Other(a) => Some(a.as_str()),
            WarningRecipient::Nobody => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_addresses() {
        for ok in ["ops@acme.com", "a.b+tag@mail.example.co.uk", " x@y.io "] {
            assert!(EmailAddress::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(EmailAddress::parse(" x@y.io ").unwrap().as_str(), "x@y.io");
    }

    #[test]
    fn a_warning_recipient_survives_its_column_and_the_form_refuses_a_bad_address() {
        for r in [
            WarningRecipient::Notification,
            WarningRecipient::Nobody,
            WarningRecipient::Other(EmailAddress::parse("oncall@acme.com").unwrap()),
        ] {
            assert_eq!(WarningRecipient::from_column(r.to_column().as_deref()), r);
        }
        assert_eq!(
            WarningRecipient::parse_choice("other", "oncall@acme.com")
                .unwrap()
                .address("ops@acme.com"),
            Some("oncall@acme.com")
        );
        assert!(WarningRecipient::parse_choice("other", "nope").is_err());
        assert!(WarningRecipient::parse_choice("everyone", "").is_err());
        assert_eq!(
            WarningRecipient::parse_choice("nobody", "ignored")
                .unwrap()
                .address("x@y.io"),
            None
        );
    }

    #[test]
    fn rejects_what_cannot_be_an_address() {
        for bad in [
            "",
            "acme.com",
            "@acme.com",
            "ops@",
            "ops@acme",
            "a@b@c.com",
            "o ps@acme.com",
            "ops@.acme.com",
            "ops@acme..com",
            "ops@-acme.com",
        ] {
            assert!(
                EmailAddress::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }
}

/// Where a notification in the outbox stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
pub enum EmailState {
    /// Waiting to be sent (again).
    Pending,
    Sent,
    /// Refused for good; never tried again.
    Failed,
}

crate::delivery::text_enum!(EmailState { Pending => "pending", Sent => "sent", Failed => "failed" });
