//! Durable background jobs a tenant starts on one endpoint.

use crate::delivery::text_enum;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
pub enum JobKind {
    /// Send again every delivery to the endpoint that failed since a date.
    EndpointRecover,
    /// Send the endpoint every message since a date that it never got.
    EndpointReplay,
}

text_enum!(JobKind { EndpointRecover => "endpoint.recover", EndpointReplay => "endpoint.replay" });

/// Where a job stands (Svix's background-task statuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::DeriveValueType),
    sea_orm(value_type = "String")
)]
pub enum JobState {
    Running,
    Finished,
    Failed,
    /// Stopped by the tenant between two batches; what the batches before did stays done.
    /// hookd's addition to Svix's statuses.
    Canceled,
}

text_enum!(JobState {
    Running => "running",
    Finished => "finished",
    Failed => "failed",
    Canceled => "canceled",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_from_their_text() {
        for k in [JobKind::EndpointRecover, JobKind::EndpointReplay] {
            assert_eq!(k.as_str().parse::<JobKind>(), Ok(k));
        }
        assert!("endpoint.other".parse::<JobKind>().is_err());
        for s in [
            JobState::Running,
            JobState::Finished,
            JobState::Failed,
            JobState::Canceled,
        ] {
            assert_eq!(s.as_str().parse::<JobState>(), Ok(s));
        }
    }
}
