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
    /// Count each application's message destinations in a window (Svix's statistics).
    ApplicationStats,
    /// List the event types each application's endpoints subscribe to (Svix's statistics).
    EventTypeAggregate,
}

text_enum!(JobKind {
    EndpointRecover => "endpoint.recover",
    EndpointReplay => "endpoint.replay",
    ApplicationStats => "application.stats",
    EventTypeAggregate => "event-type.aggregate",
});

impl JobKind {
    pub const ALL: [JobKind; 4] = [
        JobKind::EndpointRecover,
        JobKind::EndpointReplay,
        JobKind::ApplicationStats,
        JobKind::EventTypeAggregate,
    ];

    /// The endpoint job it is; `None` for the statistics tasks, which work on the tenant.
    pub fn endpoint_job(self) -> Option<EndpointJob> {
        match self {
            JobKind::EndpointRecover => Some(EndpointJob::Recover),
            JobKind::EndpointReplay => Some(EndpointJob::Replay),
            JobKind::ApplicationStats | JobKind::EventTypeAggregate => None,
        }
    }
}

/// The jobs that work on one endpoint's deliveries, which a tenant previews, starts, follows
/// and cancels on the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointJob {
    Recover,
    Replay,
}

impl EndpointJob {
    pub fn kind(self) -> JobKind {
        match self {
            EndpointJob::Recover => JobKind::EndpointRecover,
            EndpointJob::Replay => JobKind::EndpointReplay,
        }
    }
}

/// The parameters of an `application.stats` task: the window (milliseconds since the epoch,
/// `until` excluded), and the ids of the applications the request named (`None`: every one).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppStatsParams {
    pub since: i64,
    pub until: i64,
    pub app_ids: Option<Vec<String>>,
}

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
        for k in JobKind::ALL {
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
