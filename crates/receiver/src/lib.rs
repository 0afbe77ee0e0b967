//! hookd's receiving rules for teams who keep their own handler (issue 21): verify a webhook on
//! its raw bytes by its sender's scheme (Standard Webhooks — hookd, Svix —, Stripe, GitHub, a
//! generic HMAC), then record its event id in an insert-first inbox (`ON CONFLICT DO NOTHING`
//! in one statement, on SQLite or PostgreSQL), so a copy of an event already received is
//! acknowledged without doing the work twice. Answer 2xx as soon as [`Receiver::receive`]
//! returns; do the work from your own queue.
//!
//! ```ignore
//! let receiver = Receiver::new(db, "stripe", Scheme::Stripe { secret: secret.into() });
//! receiver.create_inbox().await?;
//! // in the handler, with the raw body:
//! match receiver.receive(&|name| header(&req, name), &body).await {
//!     Ok(Received::New(event)) => { queue.push(event.id, body); Ok(HttpResponse::Ok()) }
//!     Ok(Received::Duplicate(_)) => Ok(HttpResponse::Ok()),      // seen before: nothing to do
//!     Err(Rejected::Signature(why)) => Ok(HttpResponse::Unauthorized().body(why.to_string())),
//!     Err(e) => Err(e.into()),                                   // inbox down: the sender retries
//! }
//! ```

use std::time::Duration;

use domain::Timestamp;
pub use domain::inbound::{DEFAULT_TOLERANCE, GenericHmac, Refused, Scheme};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// The inbox table: one row per (source, event id).
pub const INBOX_TABLE: &str = "webhook_inbox";

/// A verified event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The sender's id for the event (`webhook-id`, Stripe's `id`, `X-GitHub-Delivery`, …).
    pub id: String,
    /// The sender's type for it, where its scheme names one (Stripe, GitHub).
    pub event_type: Option<String>,
}

/// What a verified request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// First seen now: do its work.
    New(Event),
    /// Its id is already in the inbox: acknowledge it and do nothing.
    Duplicate(Event),
}

/// The longest event id the inbox keeps (its column is `VARCHAR(255)`): a longer one is
/// refused as the sender's error, not failed as the inbox's.
pub const MAX_EVENT_ID: usize = 255;

/// Why a request was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    /// Answer 401: the signature, its headers or its timestamp are wrong. Nothing was recorded.
    #[error("{0}")]
    Signature(Refused),
    /// Answer 400: verified, but the scheme names no event id to deduplicate on, or one
    /// longer than the inbox keeps ([`MAX_EVENT_ID`] bytes).
    #[error("the request carries no event id of 1 to {MAX_EVENT_ID} bytes")]
    NoEventId,
    /// Answer 5xx (the sender retries): the inbox could not be written.
    #[error("inbox: {0}")]
    Inbox(#[from] sea_orm::DbErr),
}

/// One source's verification and inbox.
pub struct Receiver {
    db: DatabaseConnection,
    source: String,
    scheme: Scheme,
    tolerance: Duration,
}

impl Receiver {
    /// A receiver for `source` (the name its rows carry in the inbox) verifying by `scheme`.
    pub fn new(db: DatabaseConnection, source: impl Into<String>, scheme: Scheme) -> Receiver {
        Receiver {
            db,
            source: source.into(),
            scheme,
            tolerance: DEFAULT_TOLERANCE,
        }
    }

    /// How far a signed timestamp may be from now (5 minutes unless set).
    pub fn with_tolerance(mut self, tolerance: Duration) -> Receiver {
        self.tolerance = tolerance;
        self
    }

    /// Creates the inbox table if it does not exist (the same SQL on SQLite and PostgreSQL).
    pub async fn create_inbox(&self) -> Result<(), sea_orm::DbErr> {
        self.db
            .execute_unprepared(&format!(
                "CREATE TABLE IF NOT EXISTS {INBOX_TABLE} (source VARCHAR(255) NOT NULL, \
                 event_id VARCHAR(255) NOT NULL, received_at BIGINT NOT NULL, \
                 PRIMARY KEY (source, event_id))"
            ))
            .await?;
        self.db
            .execute_unprepared(&format!(
                "CREATE INDEX IF NOT EXISTS {INBOX_TABLE}_received ON {INBOX_TABLE} (received_at)"
            ))
            .await?;
        Ok(())
    }

    /// Verifies the raw `body` with the request's headers (`header` looks one up by name, any
    /// case), then records its event id insert-first. Nothing is written for a request that
    /// does not verify.
    pub async fn receive(
        &self,
        header: &(dyn Fn(&str) -> Option<String> + Sync),
        body: &[u8],
    ) -> Result<Received, Rejected> {
        let now = Timestamp::now();
        let verified =
            domain::inbound::verify(&self.scheme, None, header, body, now, self.tolerance)
                .map_err(Rejected::Signature)?;
        let event = Event {
            id: verified
                .event_id
                .filter(|id| !id.is_empty() && id.len() <= MAX_EVENT_ID)
                .ok_or(Rejected::NoEventId)?,
            event_type: verified.event_type,
        };
        // Where the signature does not cover the id (GitHub, an HMAC without signed time or
        // with an id header), the digest of the signed bytes is recorded beside it, in the
        // same statement: the same bytes under a new id are then a duplicate too, for as long
        // as the inbox keeps its rows ([`Receiver::prune`]).
        let keys: Vec<String> = std::iter::once(event.id.clone())
            .chain(verified.signed_digest.map(|d| format!("sha256:{d}")))
            .collect();
        let backend = self.db.get_database_backend();
        let rows: Vec<String> = (0..keys.len())
            .map(|i| {
                format!(
                    "({}, {}, {})",
                    placeholder(backend, 3 * i + 1),
                    placeholder(backend, 3 * i + 2),
                    placeholder(backend, 3 * i + 3)
                )
            })
            .collect();
        let sql = format!(
            "INSERT INTO {INBOX_TABLE} (source, event_id, received_at) VALUES {} \
             ON CONFLICT DO NOTHING",
            rows.join(", ")
        );
        let values = keys.iter().flat_map(|k| {
            [
                self.source.clone().into(),
                k.clone().into(),
                now.as_millis().into(),
            ]
        });
        let inserted = self
            .db
            .execute(Statement::from_sql_and_values(backend, sql, values))
            .await?
            .rows_affected();
        Ok(if inserted == keys.len() as u64 {
            Received::New(event)
        } else {
            Received::Duplicate(event)
        })
    }

    /// Forgets ids received more than `kept` ago (a sender's retries stop within days; keep
    /// ids longer than that). Returns how many went.
    pub async fn prune(&self, kept: Duration) -> Result<u64, sea_orm::DbErr> {
        let backend = self.db.get_database_backend();
        let before = Timestamp::now().as_millis() - kept.as_millis() as i64;
        let sql = format!(
            "DELETE FROM {INBOX_TABLE} WHERE source = {} AND received_at < {}",
            placeholder(backend, 1),
            placeholder(backend, 2)
        );
        Ok(self
            .db
            .execute(Statement::from_sql_and_values(
                backend,
                sql,
                [self.source.clone().into(), before.into()],
            ))
            .await?
            .rows_affected())
    }
}

fn placeholder(backend: DbBackend, n: usize) -> String {
    match backend {
        DbBackend::Postgres => format!("${n}"),
        _ => "?".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::{Hmac, Mac};
    use store::testing::TestDb;

    const SECRET: &str = "whsec_stripe_5c8d2e";

    fn stripe_signature(t: i64, body: &str) -> String {
        let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(SECRET.as_bytes()).unwrap();
        m.update(format!("{t}.{body}").as_bytes());
        let hex: String = m
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("t={t},v1={hex}")
    }

    async fn inbox_rows(db: &DatabaseConnection) -> i64 {
        let row = db
            .query_one(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT COUNT(*) AS n FROM {INBOX_TABLE}"),
            ))
            .await
            .unwrap()
            .unwrap();
        row.try_get("", "n").unwrap()
    }

    /// A Stripe-signed event is new once: the same event five times at once is one `New` and
    /// four `Duplicate`s; a tampered body or a stale signature is rejected and records nothing.
    #[tokio::test]
    async fn an_event_is_new_once_and_a_bad_signature_records_nothing() {
        for db in TestDb::all().await {
            let conn = db.store.connection().clone();
            let r = std::sync::Arc::new(Receiver::new(
                conn.clone(),
                "stripe",
                Scheme::Stripe {
                    secret: SECRET.into(),
                },
            ));
            r.create_inbox().await.unwrap();
            r.create_inbox().await.unwrap();
            let body = r#"{"id":"evt_1","type":"invoice.paid"}"#;
            let now = Timestamp::now().as_secs();
            let sig = stripe_signature(now, body);

            let tampered = body.replace("paid", "void");
            let header = |s: String| move |n: &str| (n == "stripe-signature").then(|| s.clone());
            let bad = r.receive(&header(sig.clone()), tampered.as_bytes()).await;
            assert!(matches!(bad, Err(Rejected::Signature(_))), "{bad:?}");
            let stale = stripe_signature(now - 600, body);
            let old = r.receive(&header(stale), body.as_bytes()).await;
            assert!(matches!(old, Err(Rejected::Signature(Refused::Stale))));
            assert_eq!(inbox_rows(&conn).await, 0, "nothing recorded for a bad one");

            let mut tasks = Vec::new();
            for _ in 0..5 {
                let (r, sig) = (r.clone(), sig.clone());
                tasks.push(tokio::spawn(async move {
                    r.receive(&header(sig), body.as_bytes()).await.unwrap()
                }));
            }
            let mut new = 0;
            for t in tasks {
                match t.await.unwrap() {
                    Received::New(e) => {
                        new += 1;
                        assert_eq!(e.id, "evt_1");
                        assert_eq!(e.event_type.as_deref(), Some("invoice.paid"));
                    }
                    Received::Duplicate(e) => assert_eq!(e.id, "evt_1"),
                }
            }
            assert_eq!(new, 1, "{}: once, however many copies", db.backend_name);
            assert_eq!(inbox_rows(&conn).await, 1);
            // Another source's inbox is its own; pruning forgets old ids.
            let other = Receiver::new(conn.clone(), "other", Scheme::None);
            assert_eq!(other.prune(Duration::ZERO).await.unwrap(), 0);
            assert_eq!(r.prune(Duration::from_secs(3600)).await.unwrap(), 0);
            assert_eq!(r.prune(Duration::ZERO).await.unwrap(), 1);
            assert!(matches!(
                r.receive(&header(sig), body.as_bytes()).await.unwrap(),
                Received::New(_)
            ));
        }
    }

    /// An event id longer than the inbox's column is the sender's error (400), not a failed
    /// write the sender would retry forever; nothing is recorded.
    #[tokio::test]
    async fn an_event_id_too_long_for_the_inbox_is_refused_as_the_senders_error() {
        for db in TestDb::all().await {
            let conn = db.store.connection().clone();
            let secret = "gh-secret";
            let r = Receiver::new(
                conn.clone(),
                "github",
                Scheme::Github {
                    secret: secret.into(),
                },
            );
            r.create_inbox().await.unwrap();
            let body = br#"{"action":"opened"}"#;
            let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
            m.update(body);
            let sig: String = m
                .finalize()
                .into_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            for (id, ok) in [
                ("d".repeat(MAX_EVENT_ID), true),
                ("d".repeat(MAX_EVENT_ID + 1), false),
            ] {
                let header = |n: &str| match n {
                    "x-hub-signature-256" => Some(format!("sha256={sig}")),
                    "x-github-delivery" => Some(id.clone()),
                    _ => None,
                };
                let got = r.receive(&header, body).await;
                if ok {
                    assert!(matches!(got, Ok(Received::New(_))), "{got:?}");
                } else {
                    assert!(
                        matches!(got, Err(Rejected::NoEventId)),
                        "{}: {got:?}",
                        db.backend_name
                    );
                }
            }
            assert_eq!(
                inbox_rows(&conn).await,
                2,
                "only the one that fits, and its body's digest"
            );
        }
    }

    /// GitHub signs the body only: the same signed body under another `X-GitHub-Delivery`,
    /// or none, is a duplicate, not a new event; another body is new.
    #[tokio::test]
    async fn a_github_body_replayed_under_a_new_delivery_id_is_a_duplicate() {
        for db in TestDb::all().await {
            let conn = db.store.connection().clone();
            let secret = "gh-secret-0123456789";
            let r = Receiver::new(
                conn.clone(),
                "github",
                Scheme::Github {
                    secret: secret.into(),
                },
            );
            r.create_inbox().await.unwrap();
            let sign = |body: &[u8]| {
                let mut m = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes()).unwrap();
                m.update(body);
                let hex: String = m
                    .finalize()
                    .into_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                format!("sha256={hex}")
            };
            let receive = |body: &'static [u8], delivery: &'static str| {
                let sig = sign(body);
                let r = &r;
                async move {
                    let header = |n: &str| match n {
                        "x-hub-signature-256" => Some(sig.clone()),
                        "x-github-delivery" => Some(delivery.to_owned()),
                        "x-github-event" => Some("push".to_owned()),
                        _ => None,
                    };
                    r.receive(&header, body).await.unwrap()
                }
            };
            let body: &[u8] = br#"{"ref":"refs/heads/main"}"#;
            assert!(matches!(receive(body, "d-1").await, Received::New(_)));
            for delivery in ["d-2", "d-1"] {
                assert!(
                    matches!(receive(body, delivery).await, Received::Duplicate(_)),
                    "{}: {delivery}",
                    db.backend_name
                );
            }
            let other: &[u8] = br#"{"ref":"refs/heads/dev"}"#;
            assert!(matches!(receive(other, "d-3").await, Received::New(_)));
        }
    }
}
