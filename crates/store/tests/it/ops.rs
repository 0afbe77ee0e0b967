use std::time::Duration;

use domain::Timestamp;
use domain::ids::NodeId;
use store::ListParams;

use crate::helpers::*;

#[tokio::test]
async fn the_outbox_keeps_mail_until_it_is_sent() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let e = store
            .enqueue_email(t, "ops@t.test", "Endpoint disabled", "body")
            .await
            .unwrap();
        let now = Timestamp::now();
        let due = store.system().due_emails(now, 10).await.unwrap();
        assert_eq!(due.len(), 1);

        let retry_at = now.plus(Duration::from_secs(60));
        store
            .system()
            .email_outcome(
                e.id,
                Err(("connection refused".into(), Some(retry_at))),
                now,
            )
            .await
            .unwrap();
        assert!(store.system().due_emails(now, 10).await.unwrap().is_empty());
        let later = store.system().due_emails(retry_at, 10).await.unwrap();
        assert_eq!(later[0].attempts, 1);
        assert_eq!(later[0].last_error.as_deref(), Some("connection refused"));

        store
            .system()
            .email_outcome(e.id, Ok(()), retry_at)
            .await
            .unwrap();
        assert!(
            store
                .system()
                .due_emails(retry_at, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let listed = store.list_emails(t, &ListParams::default()).await.unwrap();
        assert_eq!(listed.data[0].state, domain::email::EmailState::Sent);
        assert_eq!(listed.data[0].attempts, 2);
        let other = tenant(&store, "o").await;
        assert!(
            store
                .list_emails(other, &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn operational_events_are_per_tenant() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let o = tenant(&store, "o").await;
        let detail = serde_json::json!({"reason": "no success for 5 days"});
        store
            .record_operational_event(
                t,
                "endpoint.disabled",
                Some(store::testing::named("app_x")),
                Some(store::testing::named("ep_x")),
                &detail,
            )
            .await
            .unwrap();
        let page = store
            .list_operational_events(t, &ListParams::default())
            .await
            .unwrap();
        assert_eq!(page.data.len(), 1);
        assert_eq!(page.data[0].kind, "endpoint.disabled");
        let back: serde_json::Value = serde_json::from_str(&page.data[0].detail).unwrap();
        assert_eq!(back, detail);
        assert!(
            store
                .list_operational_events(o, &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn heartbeats_upsert_and_expire() {
    each_backend(|store| async move {
        let node = NodeId::new();
        let start = Timestamp::now();
        store
            .system()
            .heartbeat(node, "api,dispatcher", "host", start, start)
            .await
            .unwrap();
        let later = start.plus(Duration::from_secs(10));
        store
            .system()
            .heartbeat(node, "api,dispatcher", "host", start, later)
            .await
            .unwrap();
        let live = store
            .system()
            .live_nodes(start.plus(Duration::from_secs(5)))
            .await
            .unwrap();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].last_seen_at, later.as_millis());
        assert!(
            store
                .system()
                .live_nodes(later.plus(Duration::from_secs(1)))
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn expired_idempotency_records_and_sessions_are_swept_in_batches() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let now = Timestamp::now();
        let day = Duration::from_secs(24 * 3600);
        let long_ago = Timestamp::from_millis(now.as_millis() - 2 * day.as_millis() as i64);
        // More old records than one batch, and a few fresh ones.
        let old = store::Swept::default();
        let n_old = 1500;
        for i in 0..n_old {
            store
                .idempotency_begin(t, &format!("old-{i}"), "h", long_ago)
                .await
                .unwrap();
        }
        for i in 0..3 {
            store
                .idempotency_begin(t, &format!("new-{i}"), "h", now)
                .await
                .unwrap();
        }
        let user = store
            .create_user(t, "u@t.test", "$argon2id$x", "owner")
            .await
            .unwrap();
        let user = user.id;
        store.create_session(t, user, "c", long_ago).await.unwrap();
        let (_, live) = store
            .create_session(t, user, "c", now.plus(day))
            .await
            .unwrap();

        let day_ago = Timestamp::from_millis(now.as_millis() - day.as_millis() as i64);
        let horizon = store::Horizons {
            idempotency: day_ago,
            events: day_ago,
            done: day_ago,
        };
        let swept = store.system().sweep_expired(horizon, now).await.unwrap();
        assert_ne!(swept, old);
        assert_eq!(
            (swept.idempotency_keys, swept.sessions),
            (n_old, 1),
            "only what expired"
        );
        // The fresh records still replay, the live session still opens.
        assert!(matches!(
            store.idempotency_begin(t, "new-0", "h", now).await.unwrap(),
            store::IdempotencyStart::InFlight
        ));
        assert!(
            store
                .system()
                .find_session(&live, now)
                .await
                .unwrap()
                .is_some()
        );
        assert_eq!(
            store.system().sweep_expired(horizon, now).await.unwrap(),
            store::Swept::default()
        );
    })
    .await;
}

#[tokio::test]
async fn events_done_emails_and_finished_jobs_go_past_their_horizons_the_rest_stays() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let event = store
            .record_operational_event(t, "endpoint.disabled", None, None, &serde_json::json!({}))
            .await
            .unwrap();
        let sent = store.enqueue_email(t, "a@t.test", "s", "b").await.unwrap();
        let failed = store.enqueue_email(t, "a@t.test", "s", "b").await.unwrap();
        let pending = store.enqueue_email(t, "a@t.test", "s", "b").await.unwrap();
        let now = Timestamp::now();
        store
            .system()
            .email_outcome(sent.id, Ok(()), now)
            .await
            .unwrap();
        store
            .system()
            .email_outcome(failed.id, Err(("refused".into(), None)), now)
            .await
            .unwrap();
        let params = serde_json::json!({});
        let finished = store
            .create_job(t, domain::jobs::JobKind::EndpointRecover, &params)
            .await
            .unwrap();
        let running = store
            .create_job(t, domain::jobs::JobKind::EndpointRecover, &params)
            .await
            .unwrap();
        store
            .system()
            .finish_job(finished.id, Ok(3), None)
            .await
            .unwrap();

        // Horizons before they were made: nothing goes.
        let before = Timestamp::from_millis(now.as_millis() - 60_000);
        let keep_all = store::Horizons {
            idempotency: before,
            events: before,
            done: before,
        };
        assert_eq!(
            store.system().sweep_expired(keep_all, now).await.unwrap(),
            store::Swept::default()
        );
        // Horizons after: the event, the sent and failed emails and the finished job go.
        let after = now.plus(Duration::from_secs(1));
        let swept = store
            .system()
            .sweep_expired(
                store::Horizons {
                    idempotency: before,
                    events: after,
                    done: after,
                },
                now,
            )
            .await
            .unwrap();
        assert_eq!((swept.events, swept.emails, swept.jobs), (1, 2, 1));
        let events = store
            .list_operational_events(t, &Default::default())
            .await
            .unwrap();
        assert!(events.data.iter().all(|e| e.id != event.id));
        let emails: Vec<_> = store
            .list_emails(t, &Default::default())
            .await
            .unwrap()
            .data
            .into_iter()
            .map(|e| e.id)
            .collect();
        assert_eq!(emails, [pending.id], "an email still to be sent stays");
        assert!(store.get_job(t, &finished.id.to_string()).await.is_err());
        assert!(
            store.get_job(t, &running.id.to_string()).await.is_ok(),
            "a running job stays"
        );
    })
    .await;
}

/// Inbound ordering (issue 21): an event ahead of its key's place is held, one behind it is
/// late, a repeat of a held one is a duplicate; a key idle past the horizon goes (and then
/// expects 1 again) unless events are still held for it.
#[tokio::test]
async fn ordering_keys_hold_what_is_ahead_and_idle_ones_are_swept_unless_events_wait() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let app = store
            .create_application(
                t,
                store::NewApplication {
                    name: "in".into(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let source = store
            .create_source(
                t,
                &app,
                "src",
                &store::SourceSettings {
                    event_type: "in.event".into(),
                    scheme: domain::inbound::Scheme::None,
                    ordering: Default::default(),
                    tolerance_secs: None,
                },
            )
            .await
            .unwrap();
        let id = source.row.id;
        let event = |seq| store::HeldEvent {
            seq,
            event_id: Some(format!("e{seq}")),
            event_type: "in.event".into(),
            payload: b"{}".to_vec(),
        };
        let message = |seq: i64| store::NewMessage {
            event_type: "in.event".into(),
            event_id: Some(format!("e{seq}")),
            payload: b"{}".to_vec(),
            ..Default::default()
        };
        let hold = Duration::from_secs(60);
        let offer = |key: &'static str, seq| {
            let store = store.clone();
            let source = source.clone();
            async move {
                store
                    .offer_inbound(&source, key, seq, &message(seq), hold, true)
                    .await
                    .unwrap()
            }
        };
        // In turn: the key is the caller's until it advances.
        assert_eq!(offer("idle", 1).await, store::Offer::Turn);
        assert!(
            !store.lease_inbound_key(id, "idle", hold).await.unwrap(),
            "one holder at a time"
        );
        assert_eq!(
            offer("idle", 2).await,
            store::Offer::Held,
            "its next waits while the key is held"
        );
        assert!(
            store.advance_inbound(id, "idle", 1).await.unwrap(),
            "2 waits behind it"
        );
        assert!(store.lease_inbound_key(id, "idle", hold).await.unwrap());
        let turn = store.inbound_turn(id, "idle", hold).await.unwrap();
        assert_eq!(turn.events, vec![event(2)]);
        store.forwarded_inbound(id, "idle", &[2]).await.unwrap();
        assert!(!store.unlease_inbound_key(id, "idle").await.unwrap());
        assert_eq!(
            offer("idle", 1).await,
            store::Offer::Late,
            "the key is past 1"
        );
        // Ahead of a gap: held, and a repeat of it is a duplicate.
        assert_eq!(offer("waiting", 3).await, store::Offer::Held);
        assert_eq!(offer("waiting", 3).await, store::Offer::Duplicate);
        assert!(
            store
                .inbound_turn(id, "waiting", hold)
                .await
                .unwrap()
                .events
                .is_empty()
        );
        assert_eq!(
            store.system().keys_with_held_inbound(10).await.unwrap(),
            vec![(id, "waiting".to_owned())]
        );
        let counts = store.held_inbound_counts(t).await.unwrap();
        assert_eq!(counts.len(), 1);
        assert_eq!((counts[0].0, counts[0].1), (id, 1));

        let now = Timestamp::now();
        let after = now.plus(Duration::from_secs(1));
        let swept = store
            .system()
            .sweep_expired(
                store::Horizons {
                    idempotency: now,
                    events: after,
                    done: now,
                },
                now,
            )
            .await
            .unwrap();
        assert_eq!(swept.inbound_keys, 1, "the idle key, not the waiting one");
        assert_eq!(
            offer("idle", 1).await,
            store::Offer::Turn,
            "a swept key starts again at 1"
        );
    })
    .await;
}
