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
pub enum EmailState {
    /// Waiting to be sent (again).
    Pending,
    Sent,
    /// Refused for good; never tried again.
    Failed,
}

crate::delivery::text_enum!(EmailState { Pending => "pending", Sent => "sent", Failed => "failed" });
