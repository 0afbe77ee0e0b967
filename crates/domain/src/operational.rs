//! Operational webhooks: the events hookd sends a tenant about its own endpoints and messages,
//! in the types and payload shapes of Svix's operational webhooks (`{"type", "data"}`), when
//! an attempt's outcome makes one, and the per-tenant budget that bounds how many are sent.

use serde_json::{Value, json};

use crate::Timestamp;
use crate::ids::{ApplicationId, AttemptId, EndpointId, JobId, MessageId, SourceId};
use crate::time::rfc3339;

/// An endpoint was disabled: the operational event's type, and the kind of the audit record the
/// disable writes.
pub const ENDPOINT_DISABLED: &str = "endpoint.disabled";

/// Every operational event type, as an operational endpoint's `eventTypes` may name them.
pub const EVENT_TYPES: &[&str] = &[
    "endpoint.created",
    "endpoint.updated",
    "endpoint.deleted",
    "endpoint.enabled",
    ENDPOINT_DISABLED,
    "endpoint.failing",
    "message.attempt.failing",
    "message.attempt.exhausted",
    "message.attempt.recovered",
    "background_task.finished",
    "ingest.endpoint.disabled",
    "ingest.message.attempt.failing",
    "ingest.message.attempt.exhausted",
    "ingest.message.attempt.recovered",
];

/// The failed attempt of a delivery's current streak that makes `message.attempt.failing`
/// (Svix: "sent on the fourth failure").
pub const FAILING_AFTER: i32 = 4;

/// An endpoint as operational events name it.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointRef {
    pub app_id: ApplicationId,
    pub app_uid: Option<String>,
    pub endpoint_id: EndpointId,
    pub endpoint_uid: Option<String>,
    /// The Svix Ingest source whose endpoint it is (its application is the source's own): a
    /// disable is then Svix's `ingest.endpoint.disabled`, naming the source.
    pub source_id: Option<SourceId>,
}

/// Why an endpoint was disabled: by someone (API, dashboard) or by hookd (failing too long, a
/// 410 answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    Manual,
    Automatic,
}

/// The attempt an attempt event is about.
#[derive(Clone, Debug, PartialEq)]
pub struct LastAttempt {
    pub id: AttemptId,
    /// 0 when no HTTP answer came (timeout, connection refused, …), as in Svix.
    pub response_status_code: i32,
    pub timestamp: Timestamp,
}

/// A message's delivery to an endpoint, as the `message.attempt.*` events name it.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptEvent {
    pub app_id: ApplicationId,
    pub app_uid: Option<String>,
    pub msg_id: MessageId,
    pub msg_event_id: Option<String>,
    pub endpoint_id: EndpointId,
    pub last_attempt: LastAttempt,
    /// The source the message came through (`/in/{source}`): its events are Svix's
    /// `ingest.message.attempt.*`, which name the source instead of the application.
    pub source_id: Option<SourceId>,
}

/// Which `message.attempt.*` event an attempt makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptKind {
    Failing,
    Exhausted,
    Recovered,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OperationalEvent {
    EndpointCreated(EndpointRef),
    EndpointUpdated(EndpointRef),
    EndpointDeleted(EndpointRef),
    EndpointEnabled(EndpointRef),
    EndpointDisabled {
        endpoint: EndpointRef,
        /// When its failure streak started (none for a manual disable of a healthy one).
        fail_since: Option<Timestamp>,
        trigger: Trigger,
        /// hookd's extension: the reason shown on the endpoint (`disabledReason`).
        reason: String,
    },
    /// hookd's own (Svix has none): the early warning that an endpoint has been failing for
    /// `endpoint_warn_after` and will be disabled at `disable_at` unless a delivery succeeds.
    EndpointFailing {
        endpoint: EndpointRef,
        fail_since: Timestamp,
        disable_at: Timestamp,
        /// The newest failed attempts, newest first.
        last_errors: Vec<crate::health::RecentError>,
    },
    Attempt(AttemptKind, AttemptEvent),
    BackgroundTaskFinished {
        task_id: JobId,
        /// Svix's task type (`endpoint.recover`, `endpoint.replay`).
        task: String,
        /// `finished` or `failed`.
        status: String,
        data: Value,
    },
}

fn opt_time(t: Option<Timestamp>) -> Value {
    t.map_or(Value::Null, |t| Value::String(rfc3339::format(t)))
}

impl EndpointRef {
    fn data(&self) -> Value {
        let mut d = json!({
            "appId": self.app_id.to_string(),
            "appUid": self.app_uid,
            "endpointId": self.endpoint_id.to_string(),
            "endpointUid": self.endpoint_uid,
        });
        if let Some(source) = self.source_id {
            d["sourceId"] = json!(source.to_string());
        }
        d
    }
}

impl OperationalEvent {
    pub fn event_type(&self) -> &'static str {
        match self {
            OperationalEvent::EndpointCreated(_) => "endpoint.created",
            OperationalEvent::EndpointUpdated(_) => "endpoint.updated",
            OperationalEvent::EndpointDeleted(_) => "endpoint.deleted",
            OperationalEvent::EndpointEnabled(_) => "endpoint.enabled",
            OperationalEvent::EndpointDisabled { endpoint, .. } => match endpoint.source_id {
                Some(_) => "ingest.endpoint.disabled",
                None => ENDPOINT_DISABLED,
            },
            OperationalEvent::EndpointFailing { .. } => "endpoint.failing",
            OperationalEvent::Attempt(kind, a) => match (kind, a.source_id.is_some()) {
                (AttemptKind::Failing, false) => "message.attempt.failing",
                (AttemptKind::Exhausted, false) => "message.attempt.exhausted",
                (AttemptKind::Recovered, false) => "message.attempt.recovered",
                (AttemptKind::Failing, true) => "ingest.message.attempt.failing",
                (AttemptKind::Exhausted, true) => "ingest.message.attempt.exhausted",
                (AttemptKind::Recovered, true) => "ingest.message.attempt.recovered",
            },
            OperationalEvent::BackgroundTaskFinished { .. } => "background_task.finished",
        }
    }

    /// The application the event is about, if any: events about the tenant's hidden
    /// operational application are never sent (an operational endpoint's own trouble would
    /// otherwise make events about itself, without end).
    pub fn subject_app(&self) -> Option<ApplicationId> {
        match self {
            OperationalEvent::EndpointCreated(e)
            | OperationalEvent::EndpointUpdated(e)
            | OperationalEvent::EndpointDeleted(e)
            | OperationalEvent::EndpointEnabled(e)
            | OperationalEvent::EndpointDisabled { endpoint: e, .. }
            | OperationalEvent::EndpointFailing { endpoint: e, .. } => Some(e.app_id),
            OperationalEvent::Attempt(_, a) => Some(a.app_id),
            OperationalEvent::BackgroundTaskFinished { .. } => None,
        }
    }

    /// The body sent: Svix's `{"type": …, "data": {…}}`.
    pub fn payload(&self) -> Value {
        let data = match self {
            OperationalEvent::EndpointCreated(e)
            | OperationalEvent::EndpointUpdated(e)
            | OperationalEvent::EndpointDeleted(e)
            | OperationalEvent::EndpointEnabled(e) => e.data(),
            OperationalEvent::EndpointDisabled {
                endpoint,
                fail_since,
                trigger,
                reason,
            } => {
                let mut d = endpoint.data();
                d["failSince"] = opt_time(*fail_since);
                d["trigger"] = json!(match trigger {
                    Trigger::Manual => "manual",
                    Trigger::Automatic => "automatic",
                });
                d["reason"] = json!(reason);
                d
            }
            OperationalEvent::EndpointFailing {
                endpoint,
                fail_since,
                disable_at,
                last_errors,
            } => {
                let mut d = endpoint.data();
                d["failSince"] = json!(rfc3339::format(*fail_since));
                d["disableAt"] = json!(rfc3339::format(*disable_at));
                d["lastErrors"] = last_errors
                    .iter()
                    .map(|e| {
                        json!({
                            "timestamp": rfc3339::format(e.at),
                            // 0 when no HTTP answer came, as Svix's attempt events.
                            "responseStatusCode": e.status_code.unwrap_or(0),
                            "error": e.error_kind,
                        })
                    })
                    .collect();
                d
            }
            OperationalEvent::Attempt(_, a) => {
                let mut d = json!({
                    "appId": a.app_id.to_string(),
                    "msgId": a.msg_id.to_string(),
                    "msgEventId": a.msg_event_id,
                    "endpointId": a.endpoint_id.to_string(),
                    "lastAttempt": {
                        "id": a.last_attempt.id.to_string(),
                        "responseStatusCode": a.last_attempt.response_status_code,
                        "timestamp": rfc3339::format(a.last_attempt.timestamp),
                    },
                });
                // Svix's ingest events name the source where the others name the application
                // (`appId` stays, as hookd's extension: the message lives in that application).
                match a.source_id {
                    Some(source) => d["sourceId"] = json!(source.to_string()),
                    None => d["appUid"] = json!(a.app_uid),
                }
                d
            }
            OperationalEvent::BackgroundTaskFinished {
                task_id,
                task,
                status,
                data,
            } => json!({
                "taskId": task_id.to_string(),
                "task": task,
                "status": status,
                "data": data,
            }),
        };
        json!({ "type": self.event_type(), "data": data })
    }
}

/// What an attempt of a delivery makes, given the attempt's outcome and the delivery before
/// it: `failed_before` failed attempts since it was last armed (by the schedule, a resend or
/// a recovery), and whether a manual action re-armed it after a failed attempt.
///
/// - failing: the fourth failed attempt since it was armed (once per streak);
/// - exhausted: the delivery is given up (dead letter);
/// - recovered: a success after a failing or exhausted one (a streak of four or more, or a
///   resend or recovery of one whose last attempt failed).
pub fn attempt_kind(
    succeeded: bool,
    dead: bool,
    failed_before: i32,
    rearmed_after_failure: bool,
) -> Option<AttemptKind> {
    if succeeded {
        return (failed_before >= FAILING_AFTER || rearmed_after_failure)
            .then_some(AttemptKind::Recovered);
    }
    if dead {
        return Some(AttemptKind::Exhausted);
    }
    (failed_before + 1 == FAILING_AFTER).then_some(AttemptKind::Failing)
}

/// A tenant's operational events per second (sustained) and at once, per process: a tenant
/// with thousands of failing deliveries gets at most this many events; the rest are dropped
/// and counted (`/metrics`).
pub const BUDGET_RATE: f64 = 10.0;
pub const BUDGET_BURST: f64 = 100.0;

/// A token bucket of [`BUDGET_RATE`] and [`BUDGET_BURST`], on the time given.
#[derive(Clone, Debug)]
pub struct Budget {
    tokens: f64,
    at: Timestamp,
}

impl Budget {
    pub fn new(now: Timestamp) -> Self {
        Budget {
            tokens: BUDGET_BURST,
            at: now,
        }
    }

    /// Takes one event's token; false when none is left.
    pub fn take(&mut self, now: Timestamp) -> bool {
        let elapsed = now.as_millis().saturating_sub(self.at.as_millis()).max(0) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * BUDGET_RATE).min(BUDGET_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Whether forgetting this bucket changes nothing (it would be full again by `now`).
    pub fn is_full_at(&self, now: Timestamp) -> bool {
        let elapsed = now.as_millis().saturating_sub(self.at.as_millis()) as f64 / 1000.0;
        self.tokens + elapsed * BUDGET_RATE >= BUDGET_BURST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_is_the_fourth_failure_of_a_streak_and_only_that_one() {
        let kinds: Vec<_> = (0..8)
            .map(|before| attempt_kind(false, false, before, false))
            .collect();
        assert_eq!(
            kinds,
            vec![
                None,
                None,
                None,
                Some(AttemptKind::Failing),
                None,
                None,
                None,
                None
            ]
        );
        assert_eq!(
            attempt_kind(false, true, 3, false),
            Some(AttemptKind::Exhausted),
            "the last attempt is exhausted, even when it is the fourth"
        );
    }

    #[test]
    fn recovered_follows_only_a_failing_or_an_exhausted_one() {
        assert_eq!(attempt_kind(true, false, 0, false), None);
        assert_eq!(attempt_kind(true, false, 3, false), None);
        assert_eq!(
            attempt_kind(true, false, 4, false),
            Some(AttemptKind::Recovered)
        );
        assert_eq!(
            attempt_kind(true, false, 0, true),
            Some(AttemptKind::Recovered)
        );
    }

    #[test]
    fn the_budget_allows_a_burst_then_the_rate() {
        let t0 = Timestamp::from_millis(1_000_000);
        let mut b = Budget::new(t0);
        let burst = (0..1000).take_while(|_| b.take(t0)).count();
        assert_eq!(burst, BUDGET_BURST as usize);
        let later = t0.plus(std::time::Duration::from_secs(1));
        let more = (0..1000).take_while(|_| b.take(later)).count();
        assert_eq!(more, BUDGET_RATE as usize);
        assert!(!b.is_full_at(later));
        assert!(b.is_full_at(later.plus(std::time::Duration::from_secs(60))));
    }

    #[test]
    fn a_disabled_event_has_svix_fields_and_the_reason() {
        let e = OperationalEvent::EndpointDisabled {
            endpoint: EndpointRef {
                app_id: "app_01JD0000000000000000000000".parse().unwrap(),
                app_uid: Some("acme".into()),
                endpoint_id: "ep_01JD0000000000000000000000".parse().unwrap(),
                endpoint_uid: None,
                source_id: None,
            },
            fail_since: Some(Timestamp::from_millis(0)),
            trigger: Trigger::Automatic,
            reason: "failing".into(),
        };
        let p = e.payload();
        assert_eq!(p["type"], "endpoint.disabled");
        assert_eq!(p["data"]["failSince"], "1970-01-01T00:00:00.000Z");
        assert_eq!(p["data"]["trigger"], "automatic");
        assert_eq!(p["data"]["appUid"], "acme");
        assert_eq!(p["data"]["endpointUid"], Value::Null);
        assert_eq!(p["data"]["reason"], "failing");
    }

    #[test]
    fn an_attempt_of_a_message_from_a_source_is_an_ingest_event_naming_the_source() {
        let event = |source_id| {
            OperationalEvent::Attempt(
                AttemptKind::Exhausted,
                AttemptEvent {
                    app_id: "app_01JD0000000000000000000000".parse().unwrap(),
                    app_uid: Some("acme".into()),
                    msg_id: "msg_01JD0000000000000000000000".parse().unwrap(),
                    msg_event_id: None,
                    endpoint_id: "ep_01JD0000000000000000000000".parse().unwrap(),
                    last_attempt: LastAttempt {
                        id: "atmpt_01JD0000000000000000000000".parse().unwrap(),
                        response_status_code: 0,
                        timestamp: Timestamp::from_millis(0),
                    },
                    source_id,
                },
            )
            .payload()
        };
        let api = event(None);
        assert_eq!(api["type"], "message.attempt.exhausted");
        assert_eq!(api["data"]["appUid"], "acme");
        assert!(api["data"].get("sourceId").is_none());
        let inbound = event(Some("src_01JD0000000000000000000000".parse().unwrap()));
        assert_eq!(inbound["type"], "ingest.message.attempt.exhausted");
        assert_eq!(
            inbound["data"]["sourceId"],
            "src_01JD0000000000000000000000"
        );
        assert_eq!(inbound["data"]["lastAttempt"]["responseStatusCode"], 0);
        assert!(inbound["data"].get("appUid").is_none());
        assert!(EVENT_TYPES.contains(&"ingest.message.attempt.exhausted"));
    }

    #[test]
    fn a_message_names_its_source_by_its_tag() {
        let tags = vec!["vip".to_owned(), crate::inbound::source_tag("stripe")];
        assert_eq!(crate::inbound::tagged_source(&tags), Some("stripe"));
        assert_eq!(crate::inbound::tagged_source(&["source-".to_owned()]), None);
        assert_eq!(crate::inbound::tagged_source(&[]), None);
    }
}
