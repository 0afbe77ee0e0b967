use std::collections::HashMap;
use std::time::Duration;

use domain::Timestamp;
use domain::classify::Verdict;
use domain::delivery::DeliveryState;
use domain::ids::{ApplicationId, EndpointId};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use store::entities::{attempt, delivery, message};
use store::{
    AttemptFilter, ListParams, MessageFilter, NewAttempt, NewEndpoint, NewMessage, StoreError,
};

use crate::helpers::*;

fn ttl(_: &store::entities::endpoint::Model, now: Timestamp) -> Timestamp {
    now.plus(Duration::from_secs(3 * 86_400))
}

fn msg(event_type: &str) -> NewMessage {
    NewMessage {
        event_type: event_type.into(),
        payload: b"{\"a\" : 1,  \"b\":[ ]}".to_vec(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_message_fans_out_to_matching_enabled_endpoints_only() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let all = endpoint(&store, t, &a, url("all")).await;
        let users_only = endpoint(
            &store,
            t,
            &a,
            NewEndpoint {
                filter_types: Some(vec!["user.created".into()]),
                ..url("users")
            },
        )
        .await;
        let _invoices = endpoint(
            &store,
            t,
            &a,
            NewEndpoint {
                filter_types: Some(vec!["invoice.paid".into()]),
                ..url("inv")
            },
        )
        .await;
        let _eu = endpoint(
            &store,
            t,
            &a,
            NewEndpoint {
                channels: Some(vec!["eu".into()]),
                ..url("eu")
            },
        )
        .await;
        let _disabled = endpoint(
            &store,
            t,
            &a,
            NewEndpoint {
                disabled: true,
                ..url("off")
            },
        )
        .await;
        // An endpoint of another application never receives this app's messages.
        let other_app = app(&store, t, "other").await;
        endpoint(&store, t, &other_app, url("other")).await;

        let created = store
            .create_message(t, &a, msg("user.created"), ttl)
            .await
            .unwrap();
        let mut got: Vec<_> = created.deliveries.iter().map(|d| d.endpoint_id).collect();
        got.sort();
        let mut want = vec![all.id, users_only.id];
        want.sort();
        assert_eq!(got, want);
        for d in &created.deliveries {
            assert_eq!(d.state, DeliveryState::Pending);
            assert_eq!(d.attempt_count, 0);
            assert_eq!(d.give_up_at - d.created_at, 3 * 86_400_000);
        }
        let stored = store
            .deliveries_of_message(t, created.message.id)
            .await
            .unwrap();
        assert_eq!(stored.len(), 2);

        // The payload comes back byte for byte, odd whitespace and all.
        let m = store
            .get_message(t, a.id, &created.message.id.to_string())
            .await
            .unwrap();
        assert_eq!(m.payload, b"{\"a\" : 1,  \"b\":[ ]}");
    })
    .await;
}

/// The message writer answers while every worker of the runtime that opened the store is busy,
/// as a dispatcher's sending tasks keep the serving runtime's: a request's message does not
/// wait behind them (decisions 122). The busy task gives up after 30 s; a message written only
/// then was waiting for it.
#[test]
fn a_message_is_written_while_the_serving_runtime_is_busy() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let serving = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    // The caller's side: a runtime of its own, as an HTTP worker's.
    let caller = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for db in serving.block_on(store::testing::TestDb::all()) {
        let store = db.store.clone();
        let (t, a) = serving.block_on(async {
            let t = tenant(&store, "t").await;
            let a = app(&store, t, "a").await;
            endpoint(&store, t, &a, url("x")).await;
            (t, a)
        });
        let (started, written) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let busy = serving.spawn({
            let (started, written) = (started.clone(), written.clone());
            async move {
                started.store(true, Ordering::SeqCst);
                let since = std::time::Instant::now();
                while !written.load(Ordering::SeqCst) {
                    if since.elapsed() > Duration::from_secs(30) {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                true
            }
        });
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let created = caller.block_on(store.create_message(t, &a, msg("user.created"), ttl));
        written.store(true, Ordering::SeqCst);
        let answered_while_busy = serving.block_on(busy).unwrap();
        assert_eq!(created.unwrap().deliveries.len(), 1, "{}", db.backend_name);
        assert!(
            answered_while_busy,
            "{}: the message was written only once the serving runtime's worker was free",
            db.backend_name
        );
    }
}

#[tokio::test]
async fn a_repeated_event_id_conflicts_and_writes_nothing() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("x")).await;
        let with_id = NewMessage {
            event_id: Some("evt-1".into()),
            ..msg("user.created")
        };
        let first = store
            .create_message(t, &a, with_id.clone(), ttl)
            .await
            .unwrap();
        assert!(matches!(
            store.create_message(t, &a, with_id.clone(), ttl).await,
            Err(StoreError::Conflict { field: "eventId" })
        ));
        let db = store.connection();
        assert_eq!(message::Entity::find().count(db).await.unwrap(), 1);
        assert_eq!(delivery::Entity::find().count(db).await.unwrap(), 1);
        // The same eventId in another application is fine, and get accepts the eventId.
        let b = app(&store, t, "b").await;
        store.create_message(t, &b, with_id, ttl).await.unwrap();
        assert_eq!(
            store.get_message(t, a.id, "evt-1").await.unwrap().id,
            first.message.id
        );
    })
    .await;
}

/// Many ordered messages at once land in several group-committed batches: every one is
/// created, and each (endpoint, key) is numbered 1..n with no gap or repeat. (Messages in
/// flight together have no order between them; one accepted before the next was sent is always
/// numbered first, which the test above checks.)
#[tokio::test]
async fn concurrent_ordered_messages_on_two_keys_are_all_numbered_without_gaps() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let e1 = endpoint(&store, t, &a, url("1")).await;
        let e2 = endpoint(&store, t, &a, url("2")).await;
        let tasks: Vec<_> = (0..300)
            .map(|i| {
                let (store, a) = (store.clone(), a.clone());
                tokio::spawn(async move {
                    let key = if i % 2 == 0 { "order-A" } else { "order-B" };
                    let new = NewMessage {
                        ordering_key: Some(key.into()),
                        ..msg("x")
                    };
                    store.create_message(t, &a, new, ttl).await
                })
            })
            .collect();
        let mut seqs: HashMap<(EndpointId, String), Vec<i64>> = HashMap::new();
        for task in tasks {
            let created = task
                .await
                .unwrap()
                .expect("every ordered message is created");
            for d in created.deliveries {
                let key = d.ordering_key.clone().unwrap();
                seqs.entry((d.endpoint_id, key))
                    .or_default()
                    .push(d.seq.unwrap());
            }
        }
        for ep in [&e1.id, &e2.id] {
            for key in ["order-A", "order-B"] {
                let mut numbers = seqs[&(*ep, key.to_owned())].clone();
                numbers.sort();
                assert_eq!(numbers, (1..=150).collect::<Vec<_>>(), "{ep} {key}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn ordered_messages_are_numbered_per_endpoint_and_key() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let e1 = endpoint(&store, t, &a, url("1")).await;
        let e2 = endpoint(&store, t, &a, url("2")).await;
        let mut seqs: HashMap<(EndpointId, String), Vec<i64>> = HashMap::new();
        for i in 0..12 {
            let key = if i % 3 == 0 { "order-B" } else { "order-A" };
            let new = NewMessage {
                ordering_key: Some(key.into()),
                ..msg("x")
            };
            for d in store
                .create_message(t, &a, new, ttl)
                .await
                .unwrap()
                .deliveries
            {
                assert_eq!(d.ordering_key.as_deref(), Some(key));
                seqs.entry((d.endpoint_id, key.to_owned()))
                    .or_default()
                    .push(d.seq.unwrap());
            }
        }
        for ep in [&e1.id, &e2.id] {
            assert_eq!(seqs[&(*ep, "order-A".into())], (1..=8).collect::<Vec<_>>());
            assert_eq!(seqs[&(*ep, "order-B".into())], (1..=4).collect::<Vec<_>>());
        }
        // Unordered messages carry no sequence.
        let plain = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        assert!(plain.deliveries.iter().all(|d| d.seq.is_none()));
    })
    .await;
}

#[tokio::test]
async fn attempts_are_recorded_and_listed_per_message_and_endpoint() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("x")).await;
        let created = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let dlv = &created.deliveries[0];
        for n in 1..=3 {
            store
                .record_attempt(
                    t,
                    dlv,
                    NewAttempt {
                        attempt_number: n,
                        response_excerpt: Some("busy".into()),
                        retry_after_ms: Some(5000),
                        ..first_try(&ep.url, 503)
                    },
                )
                .await
                .unwrap();
        }
        let by_msg = store
            .list_attempts_by_message(
                t,
                created.message.app_id,
                created.message.id,
                &AttemptFilter::default(),
                &ListParams::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            by_msg
                .data
                .iter()
                .map(|x| x.attempt_number)
                .collect::<Vec<_>>(),
            [3, 2, 1]
        );
        let by_ep = store
            .list_attempts_by_endpoint(
                t,
                ep.app_id,
                ep.id,
                &AttemptFilter::default(),
                &ListParams::default(),
            )
            .await
            .unwrap();
        assert_eq!(by_ep.data.len(), 3);
        let d = &store
            .deliveries_of_message(t, created.message.id)
            .await
            .unwrap()[0];
        assert_eq!(d.attempt_count, 3);
        assert_eq!(d.last_status, Some(503));
        assert_eq!(d.state, DeliveryState::Pending);

        let other = tenant(&store, "other").await;
        assert!(
            store
                .list_attempts_by_message(
                    other,
                    created.message.app_id,
                    created.message.id,
                    &AttemptFilter::default(),
                    &ListParams::default()
                )
                .await
                .unwrap()
                .data
                .is_empty()
        );
        assert!(
            store
                .deliveries_of_message(other, created.message.id)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn messages_created_at_once_share_a_commit_but_not_their_fate() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let b = app(&store, t, "b").await;
        endpoint(&store, t, &a, url("a1")).await;
        endpoint(&store, t, &a, url("a2")).await;
        endpoint(&store, t, &b, url("b1")).await;
        // 300 concurrent creates: 290 plain ones over two apps, and 10 that all claim the
        // same eventId in app a. Whatever batches they fall into, exactly one of the 10 wins.
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..300 {
            let store = store.clone();
            let (app, new) = match i {
                0..10 => (
                    a.clone(),
                    NewMessage {
                        event_id: Some("same".into()),
                        ..msg("x")
                    },
                ),
                _ if i % 2 == 0 => (a.clone(), msg("x")),
                _ => (b.clone(), msg("x")),
            };
            tasks.spawn(async move {
                let r = store.create_message(t, &app, new, ttl).await;
                (app.id, r)
            });
        }
        let (mut created, mut conflicts) = (0, 0);
        let mut fanout: HashMap<usize, usize> = HashMap::new();
        let mut ids = std::collections::HashSet::new();
        while let Some(joined) = tasks.join_next().await {
            let (app_id, r) = joined.unwrap();
            match r {
                Ok(c) => {
                    created += 1;
                    assert_eq!(c.message.app_id, app_id);
                    assert!(c.deliveries.iter().all(|d| d.msg_id == c.message.id));
                    *fanout.entry(c.deliveries.len()).or_default() += 1;
                    ids.insert(c.message.id);
                }
                Err(StoreError::Conflict { field: "eventId" }) => conflicts += 1,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((created, conflicts), (291, 9));
        assert_eq!(ids.len(), 291, "every message its own id");
        // App a: 145 plain + 1 with the eventId, two endpoints each; app b: 145, one endpoint.
        assert_eq!(fanout, HashMap::from([(2, 146), (1, 145)]));
        let db = store.connection();
        assert_eq!(message::Entity::find().count(db).await.unwrap(), 291);
        assert_eq!(
            delivery::Entity::find().count(db).await.unwrap(),
            146 * 2 + 145
        );
    })
    .await;
}

#[tokio::test]
async fn an_endpoints_message_log_lists_its_messages_with_their_statuses() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let all = endpoint(&store, t, &a, url("all")).await;
        let users = endpoint(
            &store,
            t,
            &a,
            NewEndpoint {
                filter_types: Some(vec!["user.created".into()]),
                ..url("users")
            },
        )
        .await;
        let both = store
            .create_message(t, &a, msg("user.created"), ttl)
            .await
            .unwrap()
            .message;
        let only_all = store
            .create_message(t, &a, msg("order.paid"), ttl)
            .await
            .unwrap();
        let log = |endpoint, state| MessageFilter {
            endpoint: Some(endpoint),
            delivery_state: state,
            ..Default::default()
        };
        let ids = |page: store::Page<message::Model>| {
            page.data.into_iter().map(|m| m.id).collect::<Vec<_>>()
        };
        let params = ListParams::default();
        let listed = store
            .list_messages(t, a.id, &log(users.id, None), &params)
            .await
            .unwrap();
        assert_eq!(ids(listed), [both.id]);
        let listed = store
            .list_messages(t, a.id, &log(all.id, None), &params)
            .await
            .unwrap();
        assert_eq!(ids(listed), [only_all.message.id, both.id]);

        // The state filter asks about the scoped endpoint's delivery, not any delivery.
        let mut dead: delivery::ActiveModel = only_all.deliveries[0].clone().into();
        dead.state = sea_orm::Set(DeliveryState::Failed);
        sea_orm::ActiveModelTrait::update(dead, store.connection())
            .await
            .unwrap();
        let failed = Some(DeliveryState::Failed);
        let listed = store
            .list_messages(t, a.id, &log(users.id, failed), &params)
            .await
            .unwrap();
        assert!(listed.data.is_empty());
        let listed = store
            .list_messages(t, a.id, &log(all.id, failed), &params)
            .await
            .unwrap();
        assert_eq!(ids(listed), [only_all.message.id]);

        // One query for a page's statuses: every endpoint's, or one endpoint's, bounded.
        let page = [both.id, only_all.message.id];
        let statuses = store
            .deliveries_of_messages(t, &page, None, 100)
            .await
            .unwrap();
        let mut seen: Vec<_> = statuses
            .iter()
            .map(|d| (d.msg_id, d.endpoint_id, d.state))
            .collect();
        seen.sort_by_key(|(m, e, _)| (m.to_string(), e.to_string()));
        let mut expected = vec![
            (both.id, all.id, DeliveryState::Pending),
            (both.id, users.id, DeliveryState::Pending),
            (only_all.message.id, all.id, DeliveryState::Failed),
        ];
        expected.sort_by_key(|(m, e, _)| (m.to_string(), e.to_string()));
        assert_eq!(seen, expected);
        let scoped = store
            .deliveries_of_messages(t, &page, Some(users.id), 100)
            .await
            .unwrap();
        assert_eq!(scoped.len(), 1);
        assert_eq!(
            (scoped[0].msg_id, scoped[0].endpoint_id),
            (both.id, users.id)
        );
        let capped = store
            .deliveries_of_messages(t, &page, None, 2)
            .await
            .unwrap();
        assert_eq!(capped.len(), 2);
        // Another tenant sees none of them.
        let other = tenant(&store, "other").await;
        assert!(
            store
                .deliveries_of_messages(other, &page, None, 100)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn message_listing_filters_by_type_and_time() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let first = store
            .create_message(t, &a, msg("a.one"), ttl)
            .await
            .unwrap()
            .message;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = store
            .create_message(t, &a, msg("b.two"), ttl)
            .await
            .unwrap()
            .message;
        let params = ListParams::default();
        let only_b = MessageFilter {
            event_types: vec!["b.two".into()],
            ..Default::default()
        };
        let page = store
            .list_messages(t, a.id, &only_b, &params)
            .await
            .unwrap();
        assert_eq!(
            page.data.iter().map(|m| &m.id).collect::<Vec<_>>(),
            [&second.id]
        );

        let after_first = MessageFilter {
            after: Some(Timestamp::from_millis(first.created_at)),
            ..Default::default()
        };
        let page = store
            .list_messages(t, a.id, &after_first, &params)
            .await
            .unwrap();
        assert_eq!(
            page.data.iter().map(|m| &m.id).collect::<Vec<_>>(),
            [&second.id]
        );

        let before_second = MessageFilter {
            before: Some(Timestamp::from_millis(second.created_at)),
            ..Default::default()
        };
        let page = store
            .list_messages(t, a.id, &before_second, &params)
            .await
            .unwrap();
        assert_eq!(
            page.data.iter().map(|m| &m.id).collect::<Vec<_>>(),
            [&first.id]
        );
    })
    .await;
}

#[tokio::test]
async fn deleting_an_application_removes_its_traffic() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let keep = app(&store, t, "keep").await;
        let gone = endpoint(&store, t, &a, url("x")).await;
        endpoint(&store, t, &keep, url("y")).await;
        let mut kept_attempts = Vec::new();
        for application in [&a, &keep] {
            let created = store
                .create_message(t, application, msg("x"), ttl)
                .await
                .unwrap();
            let attempt = store
                .record_attempt(t, &created.deliveries[0], first_try(&gone.url, 200))
                .await
                .unwrap();
            if application.id == keep.id {
                kept_attempts.push(attempt.id);
            }
        }
        store
            .delete_application(t, &a.id.to_string())
            .await
            .unwrap();
        let db = store.connection();
        assert_eq!(message::Entity::find().count(db).await.unwrap(), 1);
        assert_eq!(delivery::Entity::find().count(db).await.unwrap(), 1);
        // Its attempts go with it (found through its endpoints); the other application's stay.
        let left: Vec<_> = attempt::Entity::find()
            .all(db)
            .await
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(left, kept_attempts);
        assert!(
            store
                .list_endpoints(t, a.id, &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
    })
    .await;
}

/// An application may have more endpoints than one statement may bind (SQLite 32,766
/// parameters, PostgreSQL 65,535): its usage is still counted and it is still deleted, with
/// its deliveries and attempts, since both go by its endpoints (m0032, m0033).
#[tokio::test]
async fn an_application_with_66000_endpoints_is_counted_and_deleted() {
    use sea_orm::{ConnectionTrait, Iterable};
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let first = endpoint(&store, t, &a, url("first")).await;
        let created = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        store
            .record_attempt(t, &created.deliveries[0], first_try(&first.url, 200))
            .await
            .unwrap();
        // 65,999 copies of its endpoint, each with an id of its own, written in one statement.
        let db = store.connection();
        let postgres = db.get_database_backend() == sea_orm::DbBackend::Postgres;
        let columns: Vec<String> = store::entities::endpoint::Column::iter()
            .map(|c| format!("\"{}\"", sea_orm::IdenStatic::as_str(&c)))
            .collect();
        let new_id = if postgres {
            "gen_random_uuid()"
        } else {
            "randomblob(16)"
        };
        let copied: Vec<String> = columns
            .iter()
            .map(|c| {
                if c == "\"id\"" {
                    new_id.to_owned()
                } else {
                    format!("e.{c}")
                }
            })
            .collect();
        db.execute_unprepared(&format!(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 65999) \
             INSERT INTO endpoints ({}) SELECT {} FROM endpoints e, n WHERE e.id = {}",
            columns.join(", "),
            copied.join(", "),
            store.id_sql(first.id),
        ))
        .await
        .unwrap();
        let now = Timestamp::now();
        let usage = store
            .app_usage(
                t,
                std::slice::from_ref(&a),
                Timestamp::from_millis(now.as_millis() - 3_600_000),
                now.plus(Duration::from_secs(3600)),
            )
            .await
            .unwrap();
        assert_eq!(usage[0].message_destinations, 1);
        store
            .delete_application(t, &a.id.to_string())
            .await
            .unwrap();
        assert_eq!(delivery::Entity::find().count(db).await.unwrap(), 0);
        assert_eq!(attempt::Entity::find().count(db).await.unwrap(), 0);
        assert_eq!(
            store::entities::endpoint::Entity::find()
                .count(db)
                .await
                .unwrap(),
            0
        );
    })
    .await;
}

#[tokio::test]
async fn a_message_page_is_an_index_range_scan_not_a_full_scan() {
    use sea_orm::ConnectionTrait;
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let other = app(&store, t, "other").await;
        // 10,000 messages, one in ten of them in the listed application, written in bulk.
        for chunk in 0..20 {
            let rows: Vec<message::ActiveModel> = (0..500)
                .map(|i| {
                    let app_id = if i % 10 == 0 { &a.id } else { &other.id };
                    message::ActiveModel::from(message::Model {
                        id: domain::ids::MessageId::new(),
                        tenant_id: t,
                        app_id: *app_id,
                        event_type: "bulk".into(),
                        event_id: Some(format!("e{chunk}-{i}")),
                        payload: b"{}".to_vec(),
                        channels: None,
                        tags: None,
                        ordering_key: None,
                        created_at: Timestamp::now().as_millis(),
                        deliver_at: None,
                        trace_parent: None,
                    })
                })
                .collect();
            message::Entity::insert_many(rows)
                .exec(store.connection())
                .await
                .unwrap();
        }
        let analyze = match store.backend() {
            store::Backend::Sqlite => "ANALYZE",
            store::Backend::Postgres => "ANALYZE messages",
        };
        store
            .connection()
            .execute_unprepared(analyze)
            .await
            .unwrap();
        let first = store
            .list_messages(t, a.id, &MessageFilter::default(), &ListParams::first(100))
            .await
            .unwrap();
        let deep = ListParams {
            limit: 100,
            iterator: first.iterator.clone(),
            ascending: false,
            walk_window: 0,
        };
        let plan = store
            .explain_message_listing(t, a.id, &MessageFilter::default(), &deep)
            .await
            .unwrap();
        eprintln!("{plan}");
        assert!(
            plan.contains("idx_messages_app"),
            "uses the listing index:\n{plan}"
        );
        assert!(
            !plan.contains("SCAN messages") && !plan.contains("Seq Scan"),
            "no full scan:\n{plan}"
        );
        assert!(
            !plan.contains("TEMP B-TREE") && !plan.contains("Sort"),
            "no sort step:\n{plan}"
        );
    })
    .await;
}

/// A taker with room for as many deliveries as `permits` has, like the dispatcher's.
#[derive(Debug)]
struct Permits {
    permits: std::sync::Arc<tokio::sync::Semaphore>,
    tx: tokio::sync::mpsc::UnboundedSender<store::HandedOff>,
}

impl store::Taker for Permits {
    fn reserve(&self, _endpoint: domain::ids::EndpointId) -> Option<store::Slot> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        Some(store::Slot::new(permit))
    }
    fn take(&self, handed: store::HandedOff) -> bool {
        self.tx.send(handed).is_ok()
    }
    fn is_open(&self) -> bool {
        !self.tx.is_closed()
    }
}

#[tokio::test]
async fn a_registered_dispatcher_gets_new_deliveries_claimed_in_the_same_commit() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let one = endpoint(&store, t, &a, url("one")).await;
        endpoint(&store, t, &a, url("two")).await;
        let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(3));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        store.set_handoff(Some(store::Handoff {
            owner: "node-1".into(),
            lease: Duration::from_secs(30),
            taker: std::sync::Arc::new(Permits {
                permits: permits.clone(),
                tx,
            }),
        }));
        // Both deliveries are claimed for node-1 when written, and handed over with a permit.
        let first = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let stored = store
            .deliveries_of_message(t, first.message.id)
            .await
            .unwrap();
        // PostgreSQL journals them instead of writing their rows (see
        // `handed_off_deliveries_are_journaled_and_written_out_when_their_process_dies`); a
        // reader sees them in flight all the same (m0040).
        assert_eq!(stored.len(), 2);
        for d in &stored {
            assert_eq!(d.state, DeliveryState::Sending);
            assert_eq!(d.lease_owner.as_deref(), Some("node-1"));
            assert!(d.lease_expires_at.unwrap() > Timestamp::now().as_millis());
        }
        let handed: Vec<_> = (0..2).map(|_| rx.try_recv().unwrap()).collect();
        for h in &handed {
            assert_eq!(h.delivery.state, DeliveryState::Sending);
            assert_eq!(h.delivery.lease_owner.as_deref(), Some("node-1"));
        }
        assert!(rx.try_recv().is_err());
        assert_eq!(handed[0].message.id, first.message.id);
        assert_eq!(permits.available_permits(), 1);
        // Each comes with its endpoint and signing secrets, so the dispatcher need not read them.
        for h in &handed {
            let ep = h
                .endpoint
                .as_ref()
                .expect("the endpoint comes with the delivery");
            assert_eq!(ep.endpoint.id, h.delivery.endpoint_id);
            assert_eq!(ep.secrets, vec![SECRET.to_owned()]);
        }
        // A rotation committed before a message is what that message is signed with.
        const NEW: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
        store
            .rotate_secret(t, one.id, NEW, Duration::from_secs(3600))
            .await
            .unwrap();
        // One permit left: one delivery is handed over, the other waits in the queue.
        let second = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let h = rx.try_recv().unwrap();
        let secrets = &h.endpoint.as_ref().unwrap().secrets;
        if h.delivery.endpoint_id == one.id {
            assert_eq!(secrets, &vec![NEW.to_owned(), SECRET.to_owned()]);
        } else {
            assert_eq!(secrets, &vec![SECRET.to_owned()]);
        }
        let states: Vec<String> = store
            .deliveries_of_message(t, second.message.id)
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.state.to_string())
            .collect();
        assert_eq!(
            states.iter().filter(|s| *s == "sending").count(),
            1,
            "{states:?}"
        );
        assert_eq!(
            states.iter().filter(|s| *s == "pending").count(),
            1,
            "{states:?}"
        );
        assert_eq!(permits.available_permits(), 0);
        drop((handed, h));
        assert_eq!(permits.available_permits(), 3);
        // A message refused for its taken eventId hands nothing over and keeps no permit.
        let with_id = || NewMessage {
            event_id: Some("evt-h".into()),
            ..msg("x")
        };
        store.create_message(t, &a, with_id(), ttl).await.unwrap();
        drop((rx.try_recv().unwrap(), rx.try_recv().unwrap()));
        let again = store.create_message(t, &a, with_id(), ttl).await;
        assert!(
            matches!(again, Err(StoreError::Conflict { field: "eventId" })),
            "{again:?}"
        );
        assert!(rx.try_recv().is_err());
        assert_eq!(permits.available_permits(), 3);
        // An ordered message always takes its turn in the queue.
        let ordered = NewMessage {
            ordering_key: Some("k".into()),
            ..msg("x")
        };
        let third = store.create_message(t, &a, ordered, ttl).await.unwrap();
        for d in store
            .deliveries_of_message(t, third.message.id)
            .await
            .unwrap()
        {
            assert_eq!(d.state, DeliveryState::Pending);
        }
        // Unregistered: everything is queued again.
        store.set_handoff(None);
        let fourth = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        assert!(
            fourth
                .deliveries
                .iter()
                .all(|d| d.state == DeliveryState::Pending)
        );
    })
    .await;
}

#[tokio::test]
async fn the_sqlite_wal_is_checkpointed_without_commits_doing_it() {
    let db = store::testing::TestDb::sqlite().await;
    let store = db.store.clone();
    let t = tenant(&store, "t").await;
    let a = app(&store, t, "a").await;
    endpoint(&store, t, &a, url("one")).await;
    endpoint(&store, t, &a, url("two")).await;
    let wal = std::path::PathBuf::from(format!("{}-wal", db.url.trim_start_matches("sqlite://")));
    // 30,000 messages and 60,000 deliveries in transactions of ~290 pages: with no checkpoint
    // at all the WAL would pass 70 MB; checkpointed beside the writers it restarts once it is
    // 4,000 pages (16 MB) long and copied back, so it stays near 20 MB.
    let mut largest = 0;
    for _ in 0..60 {
        let news = (0..500).map(|_| msg("x")).collect();
        store
            .create_messages_in_bulk(t, &a, news, ttl)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        largest = largest.max(std::fs::metadata(&wal).unwrap().len());
    }
    assert!(
        largest < 28 * 1024 * 1024,
        "the WAL grew to {largest} bytes: nothing checkpointed it"
    );
}

/// Processes sharing a SQLite database coordinate through POSIX locks on its `-shm` file, and
/// Linux drops every lock a process holds on a file when it closes any descriptor of that file.
/// While a store is open, another process must still find its shared lock on the WAL-index's
/// "dead man switch" byte (128): without it, the next process to open the database truncates
/// and rebuilds a WAL-index this one has mapped (which killed a test process with SIGBUS), and
/// the locks that keep a checkpoint from overwriting pages a reader still reads are gone too.
#[tokio::test]
async fn an_open_sqlite_store_keeps_the_locks_other_processes_rely_on() {
    let db = store::testing::TestDb::sqlite().await;
    let store = db.store.clone();
    let t = tenant(&store, "t").await;
    let a = app(&store, t, "a").await;
    endpoint(&store, t, &a, url("one")).await;
    let shm = format!("{}-shm", db.url.trim_start_matches("sqlite://"));
    // Every part of the store gets its turn: writes, reads, and the WAL checkpointer's looks.
    for _ in 0..10 {
        let news = (0..50).map(|_| msg("x")).collect();
        store
            .create_messages_in_bulk(t, &a, news, ttl)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    let probe = "import fcntl, sys\n\
                 f = open(sys.argv[1], 'r+b')\n\
                 try:\n    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)\n\
                 except OSError:\n    print('held')\nelse:\n    print('free')\n";
    let out = std::process::Command::new("python3")
        .args(["-c", probe, &shm])
        .output()
        .expect("python3 (the probe is another process: a process never conflicts with itself)");
    assert!(
        out.status.success(),
        "probe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "held",
        "another process could take the WAL-index's exclusive lock while the store is open"
    );
}

#[tokio::test]
async fn a_claim_of_new_work_skips_the_endpoints_it_is_told_to_and_the_claim_of_due_work_does_not()
{
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let busy = endpoint(&store, t, &a, url("busy")).await;
        let b = app(&store, t, "b").await;
        endpoint(&store, t, &b, url("other")).await;
        // Three new messages for the busy endpoint, then one for the other.
        for _ in 0..3 {
            store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        }
        let other = store.create_message(t, &b, msg("x"), ttl).await.unwrap();
        let now = Timestamp::now().plus(Duration::from_secs(1));
        let lease = now.plus(Duration::from_secs(60));
        let since = Timestamp::from_millis(now.as_millis() - 60_000);
        let fresh = store::Fresh {
            since,
            skip: &[busy.id],
        };
        let system = store.system();
        let claimed = system
            .claim_due("d", now, lease, 1, Some(fresh))
            .await
            .unwrap();
        let ids: Vec<_> = claimed.iter().map(|d| d.msg_id).collect();
        assert_eq!(
            ids,
            vec![other.message.id],
            "the oldest new work not skipped"
        );
        let due = system.claim_due("d", now, lease, 10, None).await.unwrap();
        assert_eq!(
            due.len(),
            3,
            "the busy endpoint's work is still claimed as due"
        );
        assert!(due.iter().all(|d| d.endpoint_id == busy.id));
    })
    .await;
}

/// A claim returns each delivery as it is stored, every column: on SQLite the claim is read
/// on the writer thread's own connection, column by column, not by sea-orm.
#[tokio::test]
async fn a_claimed_delivery_comes_back_with_every_column_as_stored() {
    each_backend(|store| async move {
        use sea_orm::ConnectionTrait;
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("one")).await;
        let created = store
            .create_message(
                t,
                &a,
                NewMessage {
                    ordering_key: Some("k".into()),
                    ..msg("x")
                },
                ttl,
            )
            .await
            .unwrap();
        let id = created.deliveries[0].id;
        // A delivery retried twice since a resend: every column holds a value of its own.
        let db = store.connection();
        let set = "UPDATE deliveries SET attempt_count = 3, attempts_at_arm = 1, \
                   next_trigger = 'manual', last_status = 503, last_error = 'timeout', \
                   last_attempt_at = 1700000000123, give_up_at = 1900000000456, \
                   updated_at = 1700000000789";
        db.execute_unprepared(set).await.unwrap();
        let now = Timestamp::now().plus(Duration::from_secs(1));
        let lease = now.plus(Duration::from_secs(60));
        let claimed = store
            .system()
            .claim_due("owner-1", now, lease, 10, None)
            .await
            .unwrap();
        let stored = delivery::Entity::find_by_id(id)
            .one(db)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(claimed, vec![stored.clone()]);
        assert_eq!(
            (
                stored.attempt_count,
                stored.attempts_at_arm,
                stored.next_trigger,
                stored.state,
                stored.lease_owner.as_deref(),
                stored.lease_expires_at,
                stored.ordering_key.as_deref(),
                stored.seq,
                stored.last_status,
                stored.last_error.as_deref(),
                stored.last_attempt_at,
                stored.give_up_at,
            ),
            (
                3,
                1,
                domain::delivery::AttemptTrigger::Manual,
                DeliveryState::Sending,
                Some("owner-1"),
                Some(lease.as_millis()),
                Some("k"),
                Some(1),
                Some(503),
                Some("timeout"),
                Some(1_700_000_000_123),
                1_900_000_000_456,
            )
        );
    })
    .await;
}

#[tokio::test]
async fn a_batch_of_results_finishes_only_deliveries_whose_lease_is_still_held() {
    each_backend(|store| async move {
        use store::AttemptResult;
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("one")).await;
        let kept = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let lost = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let now = Timestamp::now().plus(Duration::from_secs(1));
        let lease = now.plus(Duration::from_secs(60));
        let claimed = store
            .system()
            .claim_due("a", now, lease, 10, None)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        // The second delivery's claim passes to another dispatcher before "a" reports (on
        // PostgreSQL once "a"'s lease of the endpoint has run out too).
        let lost_id = lost.deliveries[0].id;
        store
            .system()
            .release_claims("a", std::slice::from_ref(&lost_id))
            .await
            .unwrap();
        let later = lease.plus(Duration::from_secs(1));
        assert_eq!(
            store
                .system()
                .claim_due("b", later, later.plus(Duration::from_secs(60)), 10, None)
                .await
                .unwrap()
                .len(),
            1
        );
        let results: Vec<AttemptResult> = claimed
            .iter()
            .map(|d| result(a.id, d, now, d.msg_id == kept.message.id))
            .collect();
        let not_written = store
            .system()
            .record_results("a", &results, "http://localhost")
            .await
            .unwrap();
        assert_eq!(not_written, vec![lost_id], "on {:?}", store.backend());
        let done = &store
            .deliveries_of_message(t, kept.message.id)
            .await
            .unwrap()[0];
        assert_eq!(done.state, DeliveryState::Succeeded);
        assert_eq!((done.attempt_count, done.last_status), (1, Some(200)));
        assert_eq!(done.lease_owner, None);
        // The other is left to its new holder, untouched.
        let other = &store
            .deliveries_of_message(t, lost.message.id)
            .await
            .unwrap()[0];
        assert_eq!(other.state, DeliveryState::Sending);
        assert_eq!(other.lease_owner.as_deref(), Some("b"));
        assert_eq!(other.attempt_count, 0);
        // Both attempts happened and are shown; the endpoint's health saw the success.
        for m in [&kept.message.id, &lost.message.id] {
            let attempts = store
                .list_attempts_by_message(t, a.id, *m, &Default::default(), &Default::default())
                .await
                .unwrap();
            assert_eq!(attempts.data.len(), 1);
        }
        let ep = store
            .get_endpoint(t, a.id, &ep.id.to_string())
            .await
            .unwrap();
        assert_eq!(ep.last_success_at, Some(now.as_millis()));
    })
    .await;
}

#[tokio::test]
async fn a_payload_that_is_not_text_is_stored_byte_for_byte() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("one")).await;
        // Not UTF-8 and with a NUL: PostgreSQL text cannot carry it.
        let payload = b"{\"a\":\"\0\xff\"}".to_vec();
        let new = NewMessage {
            payload: payload.clone(),
            ..msg("x")
        };
        let m = store.create_message(t, &a, new, ttl).await.unwrap();
        assert_eq!(m.deliveries.len(), 1);
        let stored = store
            .get_message(t, a.id, &m.message.id.to_string())
            .await
            .unwrap();
        assert_eq!(stored.payload, payload);
    })
    .await;
}

/// One batch writes many messages at once (on PostgreSQL their payloads travel together in one
/// parameter): each message keeps its own payload, whatever the lengths and bytes beside it.
#[tokio::test]
async fn messages_written_in_one_batch_each_keep_their_own_payload() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("one")).await;
        let payloads: Vec<Vec<u8>> = vec![
            b"{}".to_vec(),
            b"{\"quote\":\"\\\"x\\\"\",\"u\":\"\xc3\xa9\"}".to_vec(),
            b"{\"a\":\"\0\xff\"}".to_vec(),
            format!("{{\"big\":\"{}\"}}", "y".repeat(70_000)).into_bytes(),
            b"[1]".to_vec(),
        ];
        let news = payloads
            .iter()
            .map(|p| NewMessage {
                payload: p.clone(),
                ..msg("x")
            })
            .collect();
        let created = store
            .create_messages_in_bulk(t, &a, news, ttl)
            .await
            .unwrap();
        assert_eq!(created.len(), payloads.len());
        for (m, payload) in created.into_iter().zip(&payloads) {
            let m = m.unwrap();
            let stored = store
                .get_message(t, a.id, &m.message.id.to_string())
                .await
                .unwrap();
            assert_eq!(&stored.payload, payload);
        }
    })
    .await;
}

#[tokio::test]
async fn a_response_with_a_nul_byte_is_recorded_not_refused() {
    each_backend(|store| async move {
        use store::{AttemptResult, Next, attempt_row};
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("one")).await;
        let m = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let now = Timestamp::now().plus(Duration::from_secs(1));
        let lease = now.plus(Duration::from_secs(60));
        let claimed = store
            .system()
            .claim_due("a", now, lease, 10, None)
            .await
            .unwrap();
        let d = &claimed[0];
        // PostgreSQL text cannot hold NUL: written as is, the whole batch of results failed.
        let body = Some("ok\0done".to_owned());
        let detail = Some("odd\0error".to_owned());
        let results = [AttemptResult {
            delivery: d.clone(),
            app_id: ep.app_id,
            attempt: attempt_row(
                d,
                &ep.url,
                now,
                7,
                Some(200),
                body,
                None,
                detail,
                Verdict::Success,
                None,
            ),
            next: Next::Succeeded,
            disable_endpoint: None,
        }];
        let lost = store
            .system()
            .record_results("a", &results, "http://localhost")
            .await
            .unwrap();
        assert!(lost.is_empty());
        let attempts = store
            .list_attempts_by_message(
                t,
                m.message.app_id,
                m.message.id,
                &Default::default(),
                &Default::default(),
            )
            .await
            .unwrap();
        let shown = &attempts.data[0];
        assert_eq!(shown.response_excerpt.as_deref(), Some("ok\u{FFFD}done"));
        assert_eq!(shown.error_detail.as_deref(), Some("odd\u{FFFD}error"));
    })
    .await;
}

/// Deferring an open endpoint's backlog runs beside the claim loop, lease renewals and result
/// writes. On PostgreSQL it skips rows another transaction holds rather than waiting on them:
/// an UPDATE locks a row that changed under it before rechecking its WHERE, and waiting in no
/// particular order deadlocked against deferring claims (five times in one failure benchmark),
/// which left those claims to wait for their leases to run out.
#[tokio::test]
async fn deferring_an_endpoints_backlog_never_waits_on_rows_another_transaction_holds() {
    use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!(
            "SKIPPED deferring_an_endpoints_backlog (row locks are PostgreSQL's): HOOKD_TEST_POSTGRES_URL is not set"
        );
        return;
    };
    let db = store::testing::TestDb::postgres(&admin).await;
    let store = db.store.clone();
    let t = tenant(&store, "t").await;
    let a = app(&store, t, "a").await;
    let ep = endpoint(&store, t, &a, url("one")).await;
    let news = (0..5).map(|_| msg("x")).collect();
    store
        .create_messages_in_bulk(t, &a, news, ttl)
        .await
        .unwrap();
    let other = store.connection().begin().await.unwrap();
    let held: domain::ids::DeliveryId = other
        .query_one(Statement::from_string(
            DbBackend::Postgres,
            "SELECT id FROM deliveries ORDER BY id LIMIT 1 FOR UPDATE",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index(0)
        .unwrap();
    let until = Timestamp::now().plus(Duration::from_secs(60));
    let moved = tokio::time::timeout(
        Duration::from_secs(5),
        store.system().defer_endpoint_backlog(ep.id, until),
    )
    .await
    .expect("deferring the backlog waited for a row another transaction holds")
    .unwrap();
    assert_eq!(moved, 4, "every due delivery but the held one moves");
    other.rollback().await.unwrap();
    let later = delivery::Entity::find_by_id(held)
        .one(store.connection())
        .await
        .unwrap()
        .unwrap();
    assert!(
        later.next_attempt_at < until.as_millis(),
        "the held one kept its time"
    );
}

#[tokio::test]
async fn a_stored_id_that_does_not_parse_is_an_error_naming_its_column() {
    each_backend(|store| async move {
        use sea_orm::ConnectionTrait;
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("one")).await;
        let created = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        // A hand-edited row: the id no longer names an endpoint. Only SQLite can hold one:
        // PostgreSQL's `uuid` column refuses anything but 16 bytes (decisions 94).
        if store.connection().get_database_backend() == sea_orm::DbBackend::Postgres {
            return;
        }
        store
            .connection()
            .execute_unprepared("UPDATE deliveries SET endpoint_id = 'ep_not-an-id'")
            .await
            .unwrap();
        let err = store
            .deliveries_of_message(t, created.message.id)
            .await
            .expect_err("an unreadable id is an error, not a default")
            .to_string();
        assert!(
            err.contains("endpoint_id") && err.contains("ep_not-an-id"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test]
async fn on_postgres_an_endpoint_is_claimed_by_one_dispatcher_until_its_lease_runs_out() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED endpoint leases: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    let db = store::testing::TestDb::postgres(&admin).await;
    let store = db.store.clone();
    let t = tenant(&store, "t").await;
    let a = app(&store, t, "a").await;
    let one = endpoint(&store, t, &a, url("one")).await;
    for _ in 0..4 {
        store.create_message(t, &a, msg("x"), ttl).await.unwrap();
    }
    let now = Timestamp::now().plus(Duration::from_secs(1));
    let lease = now.plus(Duration::from_secs(30));
    let system = store.system();
    let first = system.claim_due("a", now, lease, 2, None).await.unwrap();
    assert_eq!(first.len(), 2);
    // "b" takes nothing of an endpoint "a" holds, while "a" goes on claiming it.
    assert!(
        system
            .claim_due("b", now, lease, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
    // A second endpoint is free for "b": its message's delivery to `two` is b's.
    let two = endpoint(&store, t, &a, url("two")).await;
    store.create_message(t, &a, msg("x"), ttl).await.unwrap();
    let of_b = system.claim_due("b", now, lease, 10, None).await.unwrap();
    assert!(
        !of_b.is_empty() && of_b.iter().all(|d| d.endpoint_id == two.id),
        "b claims only the free endpoint's work: {of_b:?}"
    );
    assert_eq!(
        system
            .claim_due("a", now, lease, 10, None)
            .await
            .unwrap()
            .len(),
        3,
        "a claims the rest of its endpoint's work (2 + the new message's), none of b's"
    );
    // Renewal keeps what is still held; a lease taken over after it ran out is not renewed.
    let later = lease.plus(Duration::from_secs(1));
    assert_eq!(
        system
            .renew_endpoint_leases("a", &[one.id, two.id], later)
            .await
            .unwrap(),
        vec![one.id],
    );
    // Released (a dispatcher stopping), the endpoint is free at once.
    let more = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
    assert!(
        system
            .claim_due("b", now, lease, 10, None)
            .await
            .unwrap()
            .iter()
            .all(|d| d.endpoint_id == two.id)
    );
    assert_eq!(system.release_endpoint_leases("a").await.unwrap(), 1);
    let taken = system.claim_due("b", now, lease, 10, None).await.unwrap();
    assert!(
        taken
            .iter()
            .any(|d| d.msg_id == more.message.id && d.endpoint_id == one.id),
        "after the release b claims the endpoint a held: {taken:?}"
    );
}

/// An endpoint's deliveries and attempts filter on their messages (Svix's channel, tag,
/// event_types, before and after), the stats count a window, and a scheduled message keeps
/// its deliverAt.
#[tokio::test]
async fn deliveries_and_attempts_filter_on_their_messages() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("x")).await;
        let at = Timestamp::from_millis(Timestamp::now().as_millis() + 3_600_000);
        let labelled = |ty: &str, label: Option<&str>| NewMessage {
            channels: label.map(|l| vec![format!("ch-{l}")]).unwrap_or_default(),
            tags: label.map(|l| vec![format!("tag-{l}")]).unwrap_or_default(),
            ..msg(ty)
        };
        let mut made = Vec::new();
        for new in [
            NewMessage {
                deliver_at: Some(at),
                ..labelled("t.a", Some("a"))
            },
            labelled("t.b", Some("b")),
            labelled("t.c", None),
        ] {
            made.push(store.create_message(t, &a, new, ttl).await.unwrap());
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
        let id = |i: usize| made[i].message.id;
        assert_eq!(made[0].message.deliver_at, Some(at.as_millis()));
        let read = store
            .get_message(t, a.id, &id(0).to_string())
            .await
            .unwrap();
        assert_eq!(
            read.deliver_at,
            Some(at.as_millis()),
            "{:?}",
            store.backend()
        );
        assert_eq!(made[1].message.deliver_at, None);

        let b_time = Timestamp::from_millis(made[1].message.created_at);
        let deliveries = |filter: MessageFilter| {
            let store = store.clone();
            let ep = ep.clone();
            async move {
                store
                    .list_endpoint_deliveries(t, &ep, None, &filter, &ListParams::default())
                    .await
                    .unwrap()
                    .data
                    .into_iter()
                    .map(|(_, m)| m.id)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(
            deliveries(MessageFilter::default()).await,
            [id(2), id(1), id(0)]
        );
        let cases = [
            (
                MessageFilter {
                    channel: Some("ch-a".into()),
                    ..Default::default()
                },
                vec![id(0)],
            ),
            (
                MessageFilter {
                    tag: Some("tag-b".into()),
                    ..Default::default()
                },
                vec![id(1)],
            ),
            (
                MessageFilter {
                    event_types: vec!["t.b".into(), "t.c".into()],
                    ..Default::default()
                },
                vec![id(2), id(1)],
            ),
            (
                MessageFilter {
                    before: Some(b_time),
                    ..Default::default()
                },
                vec![id(0)],
            ),
            (
                MessageFilter {
                    after: Some(b_time),
                    ..Default::default()
                },
                vec![id(2)],
            ),
            (
                MessageFilter {
                    channel: Some("ch-none".into()),
                    ..Default::default()
                },
                vec![],
            ),
        ];
        for (filter, want) in cases {
            assert_eq!(deliveries(filter.clone()).await, want, "{filter:?}");
        }

        for c in &made {
            store
                .record_attempt(t, &c.deliveries[0], first_try(&ep.url, 200))
                .await
                .unwrap();
        }
        let attempts = |messages: MessageFilter| {
            let store = store.clone();
            async move {
                let filter = AttemptFilter {
                    messages,
                    ..Default::default()
                };
                store
                    .list_attempts_by_endpoint(t, ep.app_id, ep.id, &filter, &ListParams::default())
                    .await
                    .unwrap()
                    .data
                    .into_iter()
                    .map(|x| x.msg_id)
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(attempts(MessageFilter::default()).await.len(), 3);
        let tagged = MessageFilter {
            tag: Some("tag-a".into()),
            event_types: vec!["t.a".into()],
            ..Default::default()
        };
        assert_eq!(attempts(tagged).await, [id(0)]);
        let by_type = MessageFilter {
            event_types: vec!["t.c".into()],
            ..Default::default()
        };
        assert_eq!(attempts(by_type).await, [id(2)]);

        let total =
            |s: store::DeliveryStats| s.success + s.pending + s.sending + s.fail + s.canceled;
        let first = Timestamp::from_millis(made[0].deliveries[0].created_at);
        let all = store.endpoint_stats(t, ep.id, None, None).await.unwrap();
        assert_eq!(total(all), 3);
        let from_b = store
            .endpoint_stats(t, ep.id, Some(b_time), None)
            .await
            .unwrap();
        assert_eq!(total(from_b), 2);
        let before_first = store
            .endpoint_stats(t, ep.id, None, Some(first))
            .await
            .unwrap();
        assert_eq!(total(before_first), 0);
    })
    .await;
}

/// The result of one attempt at `d` made at `at`: a 200, or a 503 retried a second later.
fn result(
    app: ApplicationId,
    d: &store::entities::delivery::Model,
    at: Timestamp,
    ok: bool,
) -> store::AttemptResult {
    use store::{AttemptResult, Next, attempt_row};
    AttemptResult {
        delivery: d.clone(),
        app_id: app,
        attempt: attempt_row(
            d,
            "http://x",
            at,
            7,
            Some(if ok { 200 } else { 503 }),
            None,
            None,
            None,
            if ok { Verdict::Success } else { Verdict::Retry },
            None,
        ),
        next: if ok {
            Next::Succeeded
        } else {
            Next::Retry {
                at: at.plus(Duration::from_secs(1)),
            }
        },
        disable_endpoint: None,
    }
}

/// One batch of results across endpoints writes each endpoint's health: a success ends its
/// streak, a first failure starts one, a failure during a streak leaves its start alone.
#[tokio::test]
async fn a_batch_of_results_across_endpoints_writes_each_endpoints_health() {
    each_backend(|store| async move {
        use store::AttemptResult;
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let mut eps = Vec::new();
        for name in ["recovers", "starts", "goes-on"] {
            eps.push(endpoint(&store, t, &a, url(name)).await);
        }
        // (On PostgreSQL a claim of 30 takes up to three endpoints it does not hold yet.)
        // First round: "recovers" and "goes-on" fail, which starts their streaks.
        let m = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        assert_eq!(m.deliveries.len(), 3);
        let first = Timestamp::now().plus(Duration::from_secs(1));
        let claimed = store
            .system()
            .claim_due("w", first, first.plus(Duration::from_secs(60)), 30, None)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 3, "on {:?}", store.backend());
        let round: Vec<AttemptResult> = claimed
            .iter()
            .filter(|d| d.endpoint_id != eps[1].id)
            .map(|d| result(a.id, d, first, false))
            .collect();
        store
            .system()
            .record_results("w", &round, "http://localhost")
            .await
            .unwrap();
        // Second round, one batch: "recovers" succeeds, "starts" and "goes-on" fail.
        let second = first.plus(Duration::from_secs(5));
        let round: Vec<AttemptResult> = claimed
            .iter()
            .map(|d| {
                let mut d = d.clone();
                if d.endpoint_id != eps[1].id {
                    d.attempt_count = 1;
                }
                result(a.id, &d, second, d.endpoint_id == eps[0].id)
            })
            .collect();
        // The first round's retries are pending again: claim them back for "w".
        let again = store
            .system()
            .claim_due(
                "w",
                second.plus(Duration::from_secs(1)),
                second.plus(Duration::from_secs(60)),
                10,
                None,
            )
            .await
            .unwrap();
        assert_eq!(again.len(), 2, "on {:?}", store.backend());
        store
            .system()
            .record_results("w", &round, "http://localhost")
            .await
            .unwrap();
        let health = |i: usize| {
            let store = store.clone();
            let id = eps[i].id.to_string();
            let app = a.id;
            async move {
                let ep = store.get_endpoint(t, app, &id).await.unwrap();
                (ep.failing_since, ep.last_success_at)
            }
        };
        let ms = |t: Timestamp| Some(t.as_millis());
        assert_eq!(
            health(0).await,
            (None, ms(second)),
            "on {:?}",
            store.backend()
        );
        assert_eq!(
            health(1).await,
            (ms(second), None),
            "on {:?}",
            store.backend()
        );
        assert_eq!(
            health(2).await,
            (ms(first), None),
            "on {:?}",
            store.backend()
        );
    })
    .await;
}

/// A batch over more endpoints than one health statement lists writes every endpoint's.
#[tokio::test]
async fn a_batch_of_results_over_hundreds_of_endpoints_writes_each_ones_health() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let mut eps = Vec::new();
        for i in 0..250 {
            eps.push(endpoint(&store, t, &a, url(&format!("e{i}"))).await);
        }
        store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let at = Timestamp::now().plus(Duration::from_secs(1));
        // (On PostgreSQL a claim takes a tenth of its limit in endpoints it does not hold yet.)
        let claimed = store
            .system()
            .claim_due("w", at, at.plus(Duration::from_secs(60)), 2500, None)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 250, "on {:?}", store.backend());
        let results: Vec<store::AttemptResult> =
            claimed.iter().map(|d| result(a.id, d, at, true)).collect();
        store
            .system()
            .record_results("w", &results, "http://localhost")
            .await
            .unwrap();
        for ep in &eps {
            let ep = store
                .get_endpoint(t, a.id, &ep.id.to_string())
                .await
                .unwrap();
            assert_eq!(
                ep.last_success_at,
                Some(at.as_millis()),
                "on {:?}",
                store.backend()
            );
        }
    })
    .await;
}

/// A healthy endpoint's last success is written at most once a second: a fan-out's result
/// batches each hold a success for hundreds of endpoints, and rewriting each one's row every
/// batch cost every delivery a row write. A success that ends a failure streak is always
/// written.
#[tokio::test]
async fn a_healthy_endpoints_last_success_is_written_once_a_second() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("e")).await;
        for i in 0..5 {
            store
                .create_message(t, &a, msg(&format!("m{i}")), ttl)
                .await
                .unwrap();
        }
        let start = Timestamp::now().plus(Duration::from_secs(1));
        let claimed = store
            .system()
            .claim_due("w", start, start.plus(Duration::from_secs(60)), 10, None)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 5, "on {:?}", store.backend());
        let health = || {
            let store = store.clone();
            let id = ep.id.to_string();
            async move {
                let ep = store.get_endpoint(t, a.id, &id).await.unwrap();
                (ep.failing_since, ep.last_success_at)
            }
        };
        let ms = |t: Timestamp| Some(t.as_millis());
        let report = |i: usize, at: Timestamp, ok: bool| {
            let store = store.clone();
            let r = result(a.id, &claimed[i], at, ok);
            async move {
                store
                    .system()
                    .record_results("w", &[r], "http://localhost")
                    .await
                    .unwrap();
            }
        };
        let backend = store.backend();
        report(0, start, true).await;
        assert_eq!(health().await, (None, ms(start)), "on {backend:?}");
        // 900 ms later: within the second, the row is left as it is.
        report(1, start.plus(Duration::from_millis(900)), true).await;
        assert_eq!(health().await, (None, ms(start)), "on {backend:?}");
        // 1.5 s later: written.
        let later = start.plus(Duration::from_millis(1_500));
        report(2, later, true).await;
        assert_eq!(health().await, (None, ms(later)), "on {backend:?}");
        // A failure starts a streak; a success 100 ms later ends it, and is written.
        let failed = later.plus(Duration::from_millis(100));
        report(3, failed, false).await;
        assert_eq!(health().await, (ms(failed), ms(later)), "on {backend:?}");
        let ended = failed.plus(Duration::from_millis(100));
        report(4, ended, true).await;
        assert_eq!(health().await, (None, ms(ended)), "on {backend:?}");
    })
    .await;
}

/// Usage statistics count an application's deliveries through its endpoints (m0033: a
/// delivery no longer names its application): every endpoint's, in the period and only
/// there, to the millisecond at both ends; an application without endpoints has none, and
/// another tenant's application is not counted.
#[tokio::test]
async fn usage_counts_each_applications_deliveries_through_its_endpoints_within_the_period() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let b = app(&store, t, "b").await;
        let c = app(&store, t, "c").await;
        for path in ["a1", "a2"] {
            endpoint(&store, t, &a, url(path)).await;
        }
        endpoint(&store, t, &b, url("b1")).await;
        let mut created_of_a = Vec::new();
        for _ in 0..3 {
            let m = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
            created_of_a.extend(m.deliveries.iter().map(|d| d.created_at));
        }
        store.create_message(t, &b, msg("x"), ttl).await.unwrap();
        // Another tenant's deliveries, in the same period.
        let other = tenant(&store, "other").await;
        let oa = app(&store, other, "a").await;
        endpoint(&store, other, &oa, url("o")).await;
        store
            .create_message(other, &oa, msg("x"), ttl)
            .await
            .unwrap();

        let apps = [a.clone(), b.clone(), c.clone()];
        let counts = |since: i64, until: i64| {
            let (store, apps) = (&store, &apps);
            async move {
                store
                    .app_usage(
                        t,
                        apps,
                        Timestamp::from_millis(since),
                        Timestamp::from_millis(until),
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|u| u.message_destinations)
                    .collect::<Vec<_>>()
            }
        };
        let now = Timestamp::now().as_millis();
        assert_eq!(counts(now - 3_600_000, now + 3_600_000).await, [6, 1, 0]);
        // The first millisecond of a's deliveries, alone: [first, first + 1).
        let first = *created_of_a.iter().min().unwrap();
        let at_first = created_of_a.iter().filter(|&&c| c == first).count() as u64;
        assert_eq!(counts(first, first + 1).await[0], at_first);
        assert_eq!(counts(first - 3_600_000, first).await[0], 0);
        let last = *created_of_a.iter().max().unwrap();
        assert_eq!(counts(first, last + 1).await[0], 6);
        assert_eq!(counts(last + 1, last + 3_600_000).await[0], 0);
    })
    .await;
}

/// A delivery that succeeds is not kept (m0034, decisions 104): the result write deletes it,
/// and every reader finds the success through its attempt — a message's outcomes and
/// destinations, an endpoint's message list and statistics, the message list's filters — and
/// a replay does not send it again. A resend makes a new delivery. m0034 undone writes the
/// succeeded delivery back, and done again deletes it.
#[tokio::test]
async fn a_delivery_that_succeeds_is_not_kept_and_its_attempt_stands_for_it() {
    use migration::MigratorTrait;
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ok = endpoint(&store, t, &a, url("ok")).await;
        let down = endpoint(&store, t, &a, url("down")).await;
        let m = store.create_message(t, &a, msg("x"), ttl).await.unwrap();
        let at = Timestamp::now().plus(Duration::from_secs(1));
        let claimed = store
            .system()
            // (On PostgreSQL a claim of 30 takes up to three endpoints it does not hold yet.)
            .claim_due("w", at, at.plus(Duration::from_secs(60)), 30, None)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 2);
        let results: Vec<_> = claimed
            .iter()
            .map(|d| result(a.id, d, at, d.endpoint_id == ok.id))
            .collect();
        let stale = store
            .system()
            .record_results("w", &results, "http://localhost")
            .await
            .unwrap();
        assert!(stale.is_empty());
        let kept = || async {
            delivery::Entity::find()
                .all(store.connection())
                .await
                .unwrap()
                .into_iter()
                .map(|d| (d.endpoint_id, d.state))
                .collect::<Vec<_>>()
        };
        assert_eq!(kept().await, vec![(down.id, DeliveryState::Pending)]);
        let outcomes = |store: store::Store| async move {
            store
                .deliveries_of_message(t, m.message.id)
                .await
                .unwrap()
                .into_iter()
                .map(|d| (d.endpoint_id, (d.state, d.attempt_count, d.last_status)))
                .collect::<HashMap<_, _>>()
        };
        let expected = HashMap::from([
            (ok.id, (DeliveryState::Succeeded, 1, Some(200))),
            (down.id, (DeliveryState::Pending, 1, Some(503))),
        ]);
        assert_eq!(outcomes(store.clone()).await, expected);
        let statuses = store
            .deliveries_of_messages(t, &[m.message.id], Some(ok.id), 10)
            .await
            .unwrap();
        assert_eq!(statuses.len(), 1);
        assert_eq!(statuses[0].state, DeliveryState::Succeeded);
        let destinations = store
            .message_destinations(t, m.message.id, &ListParams::default())
            .await
            .unwrap();
        let mut found: Vec<_> = destinations
            .data
            .iter()
            .map(|(e, d)| (e.id, d.state))
            .collect();
        found.sort_by_key(|(e, _)| *e);
        let mut want = vec![
            (ok.id, DeliveryState::Succeeded),
            (down.id, DeliveryState::Pending),
        ];
        want.sort_by_key(|(e, _)| *e);
        assert_eq!(found, want);
        // The endpoint's message list, whole and by state.
        let listed = |state: Option<DeliveryState>| {
            let store = store.clone();
            let ok = ok.clone();
            async move {
                store
                    .list_endpoint_deliveries(
                        t,
                        &ok,
                        state,
                        &MessageFilter::default(),
                        &ListParams::default(),
                    )
                    .await
                    .unwrap()
                    .data
                    .into_iter()
                    .map(|(d, m)| (m.id, d.state))
                    .collect::<Vec<_>>()
            }
        };
        let succeeded = vec![(m.message.id, DeliveryState::Succeeded)];
        assert_eq!(listed(None).await, succeeded);
        assert_eq!(listed(Some(DeliveryState::Succeeded)).await, succeeded);
        assert!(listed(Some(DeliveryState::Pending)).await.is_empty());
        let filtered = |endpoint: EndpointId, state: Option<DeliveryState>| {
            let store = store.clone();
            async move {
                let filter = MessageFilter {
                    endpoint: Some(endpoint),
                    delivery_state: state,
                    ..MessageFilter::default()
                };
                store
                    .list_messages(t, a.id, &filter, &ListParams::default())
                    .await
                    .unwrap()
                    .data
                    .len()
            }
        };
        assert_eq!(filtered(ok.id, Some(DeliveryState::Succeeded)).await, 1);
        assert_eq!(filtered(ok.id, None).await, 1);
        assert_eq!(filtered(down.id, Some(DeliveryState::Succeeded)).await, 0);
        assert_eq!(filtered(down.id, Some(DeliveryState::Pending)).await, 1);
        let stats = store.endpoint_stats(t, ok.id, None, None).await.unwrap();
        assert_eq!((stats.success, stats.pending), (1, 0));
        let since = Timestamp::from_millis(m.message.created_at);
        let missing = store.count_missing(t, &ok, since, None, 10).await.unwrap();
        assert_eq!(missing.n, 0, "a replay would send the success again");
        // m0034 undone (with every migration after it) writes the succeeded delivery back;
        // done again, deletes it.
        let conn = store.connection();
        migration::Migrator::down(conn, Some(steps_to_undo("m0034_succeeded_not_kept")))
            .await
            .unwrap();
        let mut back = kept().await;
        back.sort_by_key(|(e, _)| *e);
        assert_eq!(back, want);
        let restored = delivery::Entity::find()
            .filter(delivery::Column::EndpointId.eq(ok.id))
            .one(conn)
            .await
            .unwrap()
            .unwrap();
        migration::Migrator::up(conn, None).await.unwrap();
        assert_eq!(kept().await, vec![(down.id, DeliveryState::Pending)]);
        // Such a row beside its success attempt (the readers need m0040's view, so they are
        // asked with every migration done): the pair counts once, as its kept row.
        delivery::Entity::insert(delivery::ActiveModel::from(restored.clone()))
            .exec(conn)
            .await
            .unwrap();
        assert_eq!(outcomes(store.clone()).await, expected);
        assert_eq!(
            store
                .endpoint_stats(t, ok.id, None, None)
                .await
                .unwrap()
                .success,
            1,
            "counted once, as its kept row"
        );
        delivery::Entity::delete_by_id(restored.id)
            .exec(conn)
            .await
            .unwrap();
        // A resend makes a new delivery, which stands for the pair until it succeeds.
        store
            .resend(t, &m.message, &ok, Duration::from_secs(60))
            .await
            .unwrap();
        let now = outcomes(store.clone()).await;
        assert_eq!(now[&ok.id].0, DeliveryState::Pending);
        let stats = store.endpoint_stats(t, ok.id, None, None).await.unwrap();
        assert_eq!(
            (stats.success, stats.pending),
            (0, 1),
            "the pair counts once, as its new delivery"
        );
        assert_eq!(listed(Some(DeliveryState::Succeeded)).await, vec![]);
    })
    .await;
}

/// A listing checked message by message (an endpoint's messages, a tag, an event type since
/// m0038) reads at most its walk window of the application's messages for one page: two matches among thirty, with a window
/// of five, take several pages, the first of them empty and not done, and following the
/// iterators forward finds both, newest first, then ends; reading back from there finds no
/// more and ends. With the default window it is one page. Without the window the first page
/// would be both matches, done.
#[tokio::test]
async fn a_checked_listing_reads_a_bounded_window_per_page_and_its_iterators_reach_every_match() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let busy = endpoint(&store, t, &a, url("busy")).await;
        let rare = endpoint(&store, t, &a, url("rare")).await;
        let mut want = Vec::new();
        for n in 0..30 {
            let to = if n < 2 { rare.id } else { busy.id };
            let created = store
                .create_message(
                    t,
                    &a,
                    NewMessage {
                        event_type: if n < 2 { "rare.event" } else { "x" }.into(),
                        payload: b"{}".to_vec(),
                        tags: if n < 2 { vec!["rare".into()] } else { vec![] },
                        to_endpoint: Some(to),
                        ..Default::default()
                    },
                    |_, now| now,
                )
                .await
                .unwrap();
            if n < 2 {
                want.insert(0, created.message.id);
            }
        }
        let by_tag = MessageFilter {
            tag: Some("rare".into()),
            ..Default::default()
        };
        let by_type = MessageFilter {
            event_types: vec!["rare.event".into()],
            ..Default::default()
        };
        let s = &store;
        let rare_ep = &rare;
        // One page of a listing (the endpoint's, or the messages by `filter`): its message
        // ids, iterators and done.
        let page = |listing: Option<&MessageFilter>, iterator: Option<String>, window: u64| {
            let filter = listing.cloned();
            async move {
                let params = ListParams {
                    limit: 50,
                    iterator,
                    ascending: false,
                    walk_window: window,
                };
                if filter.is_none() {
                    let p = s
                        .list_endpoint_deliveries(
                            t,
                            rare_ep,
                            None,
                            &MessageFilter::default(),
                            &params,
                        )
                        .await
                        .unwrap();
                    let ids = p.data.iter().map(|(_, m)| m.id).collect::<Vec<_>>();
                    (ids, p.iterator, p.prev_iterator, p.done)
                } else {
                    let filter = filter.unwrap_or_default();
                    let p = s.list_messages(t, a.id, &filter, &params).await.unwrap();
                    let ids = p.data.iter().map(|m| m.id).collect::<Vec<_>>();
                    (ids, p.iterator, p.prev_iterator, p.done)
                }
            }
        };
        for listing in [None, Some(&by_tag), Some(&by_type)] {
            let (ids, _, _, done) = page(listing, None, 0).await;
            assert_eq!((ids, done), (want.clone(), true), "default window");
            let (first, mut iterator, _, mut done) = page(listing, None, 5).await;
            assert!(first.is_empty() && !done, "the newest five hold no match");
            let mut found = Vec::new();
            let mut pages = 1;
            let mut last_prev = None;
            while !done {
                let (ids, next, prev, d) = page(listing, iterator.clone(), 5).await;
                found.extend(ids);
                (iterator, done) = (next, d);
                last_prev = prev.or(last_prev);
                pages += 1;
                assert!(
                    pages <= 7,
                    "30 messages in windows of 5 take 6 pages, 7 at most"
                );
            }
            assert_eq!(found, want, "listing: {listing:?}");
            // Back from the page that ended: the newer messages hold no match.
            let mut back = last_prev;
            let mut found_back = Vec::new();
            for _ in 0..8 {
                let Some(it) = back.clone() else { break };
                let (ids, _, prev, d) = page(listing, Some(it), 5).await;
                found_back.extend(ids);
                back = prev;
                if d {
                    back = None;
                }
            }
            assert!(back.is_none(), "reading back ends");
            assert!(found_back.is_empty(), "back: {found_back:?}");
        }
    })
    .await;
}

/// A delivery handed to the dispatcher as its message is written is never lost: on PostgreSQL
/// it has no row while in flight, only its batch's journal (decisions 113). A success leaves
/// its attempt alone, a failure writes its row for the retry, and the journal of a process
/// that died before the attempt becomes a pending delivery once its lease runs out, without
/// bringing back the one that succeeded. SQLite writes every row and gives the same answers.
#[tokio::test]
async fn handed_off_deliveries_are_journaled_and_written_out_when_their_process_dies() {
    each_backend(|store| async move {
        use sea_orm::{ConnectionTrait, Statement};
        use store::{AttemptResult, Next, attempt_row};
        let journaled = store.backend() == store::Backend::Postgres;
        let count = |sql: &'static str| {
            let store = store.clone();
            async move {
                let row = store
                    .connection()
                    .query_one(Statement::from_string(
                        store.connection().get_database_backend(),
                        sql,
                    ))
                    .await
                    .unwrap()
                    .unwrap();
                row.try_get::<i64>("", "n").unwrap()
            }
        };
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("one")).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        store.set_handoff(Some(store::Handoff {
            owner: "node-1".into(),
            lease: Duration::from_secs(30),
            taker: std::sync::Arc::new(Permits {
                permits: std::sync::Arc::new(tokio::sync::Semaphore::new(10)),
                tx,
            }),
        }));
        let mut messages = Vec::new();
        for _ in 0..4 {
            messages.push(
                store
                    .create_message(t, &a, msg("x"), ttl)
                    .await
                    .unwrap()
                    .message,
            );
        }
        let handed: Vec<_> = (0..4).map(|_| rx.try_recv().unwrap()).collect();
        assert!(
            handed
                .iter()
                .all(|h| h.delivery.state == DeliveryState::Sending)
        );
        let rows = "SELECT COUNT(*) AS n FROM deliveries";
        assert_eq!(count(rows).await, if journaled { 0 } else { 4 });
        let journals = "SELECT COUNT(*) AS n FROM handoffs";
        if journaled {
            assert_eq!(count(journals).await, 4, "one journal per message written");
        }
        let now = Timestamp::now();
        let result = |i: usize, status: u16, next: Next| {
            let d = &handed[i].delivery;
            let verdict = if status < 300 {
                Verdict::Success
            } else {
                Verdict::Retry
            };
            AttemptResult {
                delivery: d.clone(),
                app_id: a.id,
                attempt: attempt_row(
                    d,
                    &ep.url,
                    now,
                    5,
                    Some(status),
                    None,
                    None,
                    None,
                    verdict,
                    None,
                ),
                next,
                disable_endpoint: None,
            }
        };
        let retry_at = now.plus(Duration::from_secs(600));
        let results = [
            result(0, 200, Next::Succeeded),
            result(1, 503, Next::Retry { at: retry_at }),
        ];
        let lost = store
            .system()
            .record_results("node-1", &results, "http://localhost")
            .await
            .unwrap();
        assert!(lost.is_empty(), "{lost:?}");
        let state_of = |i: usize| {
            let (store, id) = (store.clone(), messages[i].id);
            async move {
                let mut ds = store.deliveries_of_message(t, id).await.unwrap();
                assert!(ds.len() <= 1, "{ds:?}");
                ds.pop()
            }
        };
        assert_eq!(state_of(0).await.unwrap().state, DeliveryState::Succeeded);
        let retried = state_of(1).await.unwrap();
        assert_eq!(
            (
                retried.state,
                retried.attempt_count,
                retried.next_attempt_at
            ),
            (DeliveryState::Pending, 1, retry_at.as_millis())
        );
        // The third is given back (a dispatcher stopping): pending again, at once.
        let released = store
            .system()
            .release_claims("node-1", &[handed[2].delivery.id])
            .await
            .unwrap();
        assert_eq!(released, 1);
        assert_eq!(state_of(2).await.unwrap().state, DeliveryState::Pending);
        // The process dies with the fourth in flight: nothing comes of it until its lease
        // runs out, then it is pending, and the success is not sent again.
        store.set_handoff(None);
        drop(handed);
        // Any process reaps (another one's dispatcher, or the scheduler): the journal is in the
        // database, and this process's memory of it is not asked.
        let reaper = store.clone();
        reaper
            .system()
            .reap_expired_leases(Timestamp::now())
            .await
            .unwrap();
        let flying = state_of(3).await.expect("in flight, and seen so");
        assert_eq!(
            (flying.state, flying.lease_owner.as_deref()),
            (DeliveryState::Sending, Some("node-1"))
        );
        assert_eq!(
            count(rows).await,
            if journaled { 2 } else { 3 },
            "written out before its lease ran out"
        );
        let after_lease = Timestamp::now().plus(Duration::from_secs(31));
        reaper
            .system()
            .reap_expired_leases(after_lease)
            .await
            .unwrap();
        let back = state_of(3)
            .await
            .expect("the dead process's delivery is pending again");
        assert_eq!(
            (back.state, back.lease_owner),
            (DeliveryState::Pending, None)
        );
        assert_eq!(state_of(0).await.unwrap().state, DeliveryState::Succeeded);
        assert_eq!(count(rows).await, 3, "succeeded deliveries are not kept");
        if journaled {
            assert_eq!(count(journals).await, 0, "every journal is deleted");
        }
        let due = reaper
            .system()
            .claim_due(
                "node-2",
                after_lease,
                after_lease.plus(Duration::from_secs(30)),
                10,
                None,
            )
            .await
            .unwrap();
        let mut due: Vec<_> = due.iter().map(|d| d.msg_id).collect();
        due.sort();
        let mut want = vec![messages[2].id, messages[3].id];
        want.sort();
        assert_eq!(
            due, want,
            "the released and the dead process's deliveries are claimed"
        );
    })
    .await;
}
