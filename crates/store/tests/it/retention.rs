//! Retention: payloads expire, then messages go with their deliveries and attempts, per the
//! application's, the tenant's or the server's choice; live deliveries keep their messages.

use std::time::Duration;

use domain::Timestamp;
use domain::delivery::DeliveryState;
use domain::ids::MessageId;
use domain::retention::{Retention, RetentionDays};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use store::entities::{application, attempt, delivery, message};
use store::{NewApplication, NewAttempt, NewMessage, Pruned, Store};

use crate::helpers::*;

const DAY: Duration = Duration::from_secs(86_400);
const SERVER: Retention = Retention {
    payload: Duration::from_secs(30 * 86_400),
    metadata: Duration::from_secs(90 * 86_400),
};

fn ttl(_: &store::entities::endpoint::Model, now: Timestamp) -> Timestamp {
    now.plus(Duration::from_secs(3 * 86_400))
}

fn later(days: u32) -> Timestamp {
    Timestamp::now().plus(DAY * days)
}

/// A message to `a`'s endpoints whose deliveries are then put in `state`, with one attempt
/// that recorded a response body.
async fn message_in(
    store: &Store,
    a: &application::Model,
    state: DeliveryState,
    ordering_key: Option<&str>,
) -> MessageId {
    let created = store
        .create_message(
            a.tenant_id,
            a,
            NewMessage {
                event_type: "x".into(),
                payload: br#"{"secret": "card 4242"}"#.to_vec(),
                ordering_key: ordering_key.map(str::to_owned),
                ..Default::default()
            },
            ttl,
        )
        .await
        .unwrap();
    let d = &created.deliveries[0];
    store
        .record_attempt(
            a.tenant_id,
            d,
            NewAttempt {
                response_excerpt: Some("thanks, card 4242".into()),
                ..first_try("https://example.com/x", 200)
            },
        )
        .await
        .unwrap();
    delivery::Entity::update_many()
        .col_expr(delivery::Column::State, Expr::value(state.as_str()))
        .filter(delivery::Column::MsgId.eq(created.message.id))
        .exec(store.connection())
        .await
        .unwrap();
    created.message.id
}

/// (payload, response body of its attempt), or None once the message is gone.
async fn contents(store: &Store, id: MessageId) -> Option<(Vec<u8>, Option<String>)> {
    let m = message::Entity::find_by_id(id)
        .one(store.connection())
        .await
        .unwrap()?;
    let a = attempt::Entity::find()
        .filter(attempt::Column::MsgId.eq(id))
        .one(store.connection())
        .await
        .unwrap();
    Some((m.payload, a.and_then(|a| a.response_excerpt)))
}

async fn rows_of(store: &Store, id: MessageId) -> (u64, u64) {
    let d = delivery::Entity::find()
        .filter(delivery::Column::MsgId.eq(id))
        .count(store.connection())
        .await
        .unwrap();
    let a = attempt::Entity::find()
        .filter(attempt::Column::MsgId.eq(id))
        .count(store.connection())
        .await
        .unwrap();
    (d, a)
}

#[tokio::test]
async fn payloads_expire_then_messages_go_but_live_deliveries_keep_theirs() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        endpoint(&store, t, &a, url("x")).await;
        let delivered = message_in(&store, &a, DeliveryState::Succeeded, None).await;
        let dead = message_in(&store, &a, DeliveryState::Failed, None).await;
        let pending = message_in(&store, &a, DeliveryState::Pending, None).await;
        let paused = message_in(&store, &a, DeliveryState::Paused, None).await;
        let blocking = message_in(&store, &a, DeliveryState::Failed, Some("order-1")).await;
        let prune = |at, dry| {
            let store = store.clone();
            async move {
                let mut p = store
                    .system()
                    .prune_retention(SERVER, at, dry)
                    .await
                    .unwrap();
                p.more = false;
                p
            }
        };

        // Within both horizons nothing is touched.
        assert_eq!(prune(Timestamp::now(), false).await, Pruned::default());

        // 31 days on: a dry run counts the two finished messages' payloads and changes nothing.
        let dry = prune(later(31), true).await;
        assert_eq!((dry.payloads, dry.messages, dry.kept_live), (2, 0, 3));
        assert!(!contents(&store, delivered).await.unwrap().0.is_empty());

        // Then their payloads and response bodies go; the live ones keep theirs.
        let p = prune(later(31), false).await;
        assert_eq!((p.payloads, p.messages, p.kept_live), (2, 0, 3));
        for id in [delivered, dead] {
            assert_eq!(contents(&store, id).await, Some((Vec::new(), None)));
            let m = store.get_message(t, a.id, &id.to_string()).await.unwrap();
            assert!(m.is_expunged(), "reads as expunged through the API's query");
        }
        for id in [pending, paused, blocking] {
            let (payload, body) = contents(&store, id).await.unwrap();
            assert!(!payload.is_empty() && body.is_some(), "{id}: live, kept");
        }
        // The next pass starts where this one stopped: nothing is walked twice (a message
        // kept for a live delivery keeps its payload until its metadata horizon).
        let again = prune(later(31), false).await;
        assert_eq!(again, Pruned::default());

        // 91 days on: the finished messages go with their deliveries and attempts.
        let dry = prune(later(91), true).await;
        assert_eq!((dry.messages, dry.deliveries, dry.attempts), (2, 2, 2));
        assert!(
            contents(&store, delivered).await.is_some(),
            "dry: nothing removed"
        );
        let p = prune(later(91), false).await;
        assert_eq!(
            (p.messages, p.deliveries, p.attempts, p.kept_live),
            (2, 2, 2, 3)
        );
        for id in [delivered, dead] {
            assert_eq!(contents(&store, id).await, None);
            assert_eq!(rows_of(&store, id).await, (0, 0));
        }
        for id in [pending, paused, blocking] {
            assert_eq!(rows_of(&store, id).await, (1, 1), "{id}: live, kept");
        }

        // Once its delivery is made, a kept message goes at the next pass.
        delivery::Entity::update_many()
            .col_expr(
                delivery::Column::State,
                Expr::value(DeliveryState::Succeeded.as_str()),
            )
            .filter(delivery::Column::MsgId.eq(pending))
            .exec(store.connection())
            .await
            .unwrap();
        let p = prune(later(91), false).await;
        assert_eq!((p.messages, p.kept_live), (1, 2));
        assert_eq!(contents(&store, pending).await, None);
    })
    .await;
}

#[tokio::test]
async fn the_applications_choice_beats_the_tenants_which_beats_the_servers() {
    each_backend(|store| async move {
        // The tenant keeps messages 10 days; one application 3, another (unset) follows it.
        let t = tenant(&store, "short").await;
        store
            .set_retention(
                t,
                RetentionDays {
                    payload: None,
                    metadata: Some(10),
                },
            )
            .await
            .unwrap();
        let follows = app(&store, t, "follows").await;
        let own = store
            .create_application(
                t,
                NewApplication {
                    name: "own".into(),
                    retention: RetentionDays {
                        payload: Some(1),
                        metadata: Some(3),
                    },
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        // Another tenant on the server's defaults.
        let other = tenant(&store, "default").await;
        let server_app = app(&store, other, "server").await;
        let mut ids = Vec::new();
        for a in [&follows, &own, &server_app] {
            endpoint(&store, a.tenant_id, a, url("x")).await;
            ids.push(message_in(&store, a, DeliveryState::Succeeded, None).await);
        }
        let [in_follows, in_own, in_server] = ids[..] else {
            unreachable!()
        };
        let prune = |days| {
            let store = store.clone();
            async move {
                store
                    .system()
                    .prune_retention(SERVER, later(days), false)
                    .await
                    .unwrap()
            }
        };

        // Day 2: only the application's own 1-day payload retention has passed.
        let p = prune(2).await;
        assert_eq!((p.payloads, p.messages), (1, 0));
        assert!(contents(&store, in_own).await.unwrap().0.is_empty());
        // Day 4: its messages go (3 days); the tenant's 10 days still hold for the other.
        let p = prune(4).await;
        assert_eq!(p.messages, 1);
        assert_eq!(contents(&store, in_own).await, None);
        // The tenant's payloads follow its metadata: capped at 10 days, not the server's 30.
        let p = prune(11).await;
        assert_eq!(p.messages, 1);
        assert_eq!(contents(&store, in_follows).await, None);
        assert!(!contents(&store, in_server).await.unwrap().0.is_empty());
        // The other tenant: the server's 30 and 90 days.
        assert_eq!(prune(31).await.payloads, 1);
        assert_eq!(prune(91).await.messages, 1);
        assert_eq!(contents(&store, in_server).await, None);
    })
    .await;
}

/// Space that pruning freed is used again: SQLite reuses free pages by itself; PostgreSQL
/// needs a VACUUM, which hookd runs itself when the server's autovacuum is off.
#[tokio::test]
async fn the_space_of_removed_rows_is_used_again() {
    each_backend(|store| async move {
        use sea_orm::ConnectionTrait;
        let backend = store.connection().get_database_backend();
        let reclaim = store.system().reclaim_space().await.unwrap();
        if backend != sea_orm::DbBackend::Postgres {
            assert_eq!(reclaim, store::Reclaim::Automatic);
            return;
        }
        let autovacuum = store
            .connection()
            .query_one(sea_orm::Statement::from_string(
                backend,
                "SELECT current_setting('autovacuum') AS v",
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get::<String>("", "v")
            .unwrap();
        if autovacuum == "on" {
            assert_eq!(reclaim, store::Reclaim::Automatic);
            eprintln!(
                "SKIPPED the PostgreSQL reuse check: this server's autovacuum is on, so the \
                 server, not hookd, decides when space is reused"
            );
            return;
        }
        assert_eq!(reclaim, store::Reclaim::Vacuumed);
        let fill = "INSERT INTO messages (id, tenant_id, app_id, event_type, payload, created_at) \
             SELECT CAST(lpad(to_hex(g), 32, '0') AS uuid), CAST(md5('t') AS uuid), \
               CAST(md5('a') AS uuid), 'x', \
               convert_to(repeat('x', 500), 'UTF8'), 0 FROM generate_series(1, 5000) g";
        let size = || async {
            store
                .connection()
                .query_one(sea_orm::Statement::from_string(
                    backend,
                    "SELECT pg_total_relation_size('messages') AS n",
                ))
                .await
                .unwrap()
                .unwrap()
                .try_get::<i64>("", "n")
                .unwrap()
        };
        let exec = |sql: &'static str| {
            let store = store.clone();
            async move { store.connection().execute_unprepared(sql).await.unwrap() }
        };
        exec(fill).await;
        let full = size().await;
        exec("DELETE FROM messages").await;
        store.system().reclaim_space().await.unwrap();
        exec(fill).await;
        let again = size().await;
        assert!(
            // Without the VACUUM the table and its indexes hold both generations (2×).
            (again as f64) < full as f64 * 1.5,
            "the same rows again took {again} B where they took {full} B: the deleted rows' \
             space was not reused"
        );
    })
    .await;
}
