//! Scheduler tests, on SQLite and (when configured) PostgreSQL.

mod email;

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, TenantId};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use store::entities::delivery;
use store::testing::each_backend;
use store::{NewApplication, NewEndpoint, NewMessage, NewTenant, Store};

async fn setup(store: &Store) -> (TenantId, store::entities::application::Model) {
    let t = store
        .create_tenant(NewTenant {
            name: "t".into(),
            notification_email: "t@t.test".into(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await
        .unwrap();
    let t = t.id;
    let app = store
        .create_application(
            t,
            NewApplication {
                name: "a".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    (t, app)
}

fn endpoint(path: &str) -> NewEndpoint {
    NewEndpoint {
        url: format!("https://example.com/{path}"),
        version: 1,
        ..Default::default()
    }
}

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn send(store: &Store, t: TenantId, app: &store::entities::application::Model) -> String {
    let new = NewMessage {
        event_type: "x".into(),
        payload: b"{}".to_vec(),
        ..Default::default()
    };
    let ttl =
        |_: &store::entities::endpoint::Model, now: Timestamp| now.plus(Duration::from_secs(60));
    store
        .create_message(t, app, new, ttl)
        .await
        .unwrap()
        .message
        .id
        .to_string()
}

async fn states(store: &Store, endpoint_id: EndpointId) -> Vec<(String, String, String)> {
    delivery::Entity::find()
        .filter(delivery::Column::EndpointId.eq(endpoint_id))
        .all(store.connection())
        .await
        .unwrap()
        .into_iter()
        .map(|d| {
            let msg = d.msg_id.to_string();
            (msg, d.state.to_string(), d.next_trigger.to_string())
        })
        .collect()
}

#[tokio::test]
async fn a_recover_job_rearms_failed_deliveries_since_the_date_as_manual() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("a"), SECRET)
            .await
            .unwrap();
        let old = send(&store, t, &app).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let since = Timestamp::now();
        let recent = send(&store, t, &app).await;
        let ok = send(&store, t, &app).await;
        // Dead-letter the first two, mark the third delivered.
        for (msg, state) in [(&old, "failed"), (&recent, "failed"), (&ok, "succeeded")] {
            delivery::Entity::update_many()
                .col_expr(
                    delivery::Column::State,
                    sea_orm::sea_query::Expr::value(state),
                )
                .filter(delivery::Column::MsgId.eq(msg.parse::<domain::ids::MessageId>().unwrap()))
                .exec(store.connection())
                .await
                .unwrap();
        }
        let job = store
            .create_job(
                t,
                domain::jobs::JobKind::EndpointRecover,
                &serde_json::json!({
                    "endpointId": ep.id, "appId": app.id, "since": since.as_millis(), "until": null
                }),
            )
            .await
            .unwrap();
        assert!(scheduler::jobs::run_one(&store, "node-a").await.unwrap());
        assert!(
            !scheduler::jobs::run_one(&store, "node-a").await.unwrap(),
            "nothing left"
        );

        let mut got = states(&store, ep.id).await;
        got.sort();
        let mut want = vec![
            (old, "failed".to_owned(), "scheduled".to_owned()),
            (recent, "pending".to_owned(), "manual".to_owned()),
            (ok, "succeeded".to_owned(), "scheduled".to_owned()),
        ];
        want.sort();
        assert_eq!(got, want);
        let job = store.get_job(t, &job.id.to_string()).await.unwrap();
        assert_eq!((job.state.as_str(), job.progress), ("finished", 1));
    })
    .await;
}

#[tokio::test]
async fn a_replay_job_creates_only_the_missing_deliveries() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let since = Timestamp::now();
        let before_endpoint = send(&store, t, &app).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("late"), SECRET)
            .await
            .unwrap();
        let after_endpoint = send(&store, t, &app).await;
        store
            .create_job(
                t,
                domain::jobs::JobKind::EndpointReplay,
                &serde_json::json!({
                    "endpointId": ep.id, "appId": app.id, "since": since.as_millis()
                }),
            )
            .await
            .unwrap();
        assert!(scheduler::jobs::run_one(&store, "n").await.unwrap());
        let got = states(&store, ep.id).await;
        assert_eq!(got.len(), 2, "{got:?}");
        let replayed = got.iter().find(|(m, _, _)| *m == before_endpoint).unwrap();
        assert_eq!(
            (replayed.1.as_str(), replayed.2.as_str()),
            ("pending", "manual")
        );
        let normal = got.iter().find(|(m, _, _)| *m == after_endpoint).unwrap();
        assert_eq!(normal.2, "scheduled");
        // Running the same replay again creates nothing more.
        store
            .create_job(
                t,
                domain::jobs::JobKind::EndpointReplay,
                &serde_json::json!({
                    "endpointId": ep.id, "appId": app.id, "since": since.as_millis()
                }),
            )
            .await
            .unwrap();
        assert!(scheduler::jobs::run_one(&store, "n").await.unwrap());
        assert_eq!(states(&store, ep.id).await.len(), 2);
    })
    .await;
}

#[tokio::test]
async fn a_job_whose_runner_died_is_taken_over_after_its_lease() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("a"), SECRET)
            .await
            .unwrap();
        let job = store
            .create_job(
                t,
                domain::jobs::JobKind::EndpointRecover,
                &serde_json::json!({
                    "endpointId": ep.id, "appId": app.id, "since": 0
                }),
            )
            .await
            .unwrap();
        let now = Timestamp::now();
        let lease = Duration::from_secs(60);
        let first = store
            .system()
            .claim_job("dead-node", now, lease)
            .await
            .unwrap();
        assert_eq!(first.map(|j| j.id), Some(job.id));
        assert!(
            store
                .system()
                .claim_job("other", now, lease)
                .await
                .unwrap()
                .is_none(),
            "leased"
        );
        let later = now.plus(Duration::from_secs(61));
        let taken = store
            .system()
            .claim_job("other", later, lease)
            .await
            .unwrap();
        assert_eq!(taken.map(|j| j.id), Some(job.id));
    })
    .await;
}

#[tokio::test]
async fn a_job_for_a_deleted_endpoint_fails_with_a_reason() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("a"), SECRET)
            .await
            .unwrap();
        let job = store
            .create_job(
                t,
                domain::jobs::JobKind::EndpointRecover,
                &serde_json::json!({
                    "endpointId": ep.id, "appId": app.id, "since": 0
                }),
            )
            .await
            .unwrap();
        store.delete_endpoint(t, &ep).await.unwrap();
        assert!(scheduler::jobs::run_one(&store, "n").await.unwrap());
        let job = store.get_job(t, &job.id.to_string()).await.unwrap();
        assert_eq!(job.state.as_str(), "failed");
        assert!(job.error.unwrap().contains("not found"));
    })
    .await;
}

#[tokio::test]
async fn a_tenant_with_a_job_running_does_not_hold_up_another_tenants_and_leases_renew() {
    each_backend(|store| async move {
        let (a, app_a) = setup(&store).await;
        let (b, app_b) = setup(&store).await;
        let ep_a = store
            .create_endpoint(a, &app_a, endpoint("a"), SECRET)
            .await
            .unwrap();
        let ep_b = store
            .create_endpoint(b, &app_b, endpoint("b"), SECRET)
            .await
            .unwrap();
        let job = |t, ep: &store::entities::endpoint::Model, app: ApplicationId| {
            let params = serde_json::json!({"endpointId": ep.id, "appId": app, "since": 0});
            let store = store.clone();
            async move {
                store
                    .create_job(t, domain::jobs::JobKind::EndpointRecover, &params)
                    .await
                    .unwrap()
            }
        };
        // Tenant A queued a long recover and then another; tenant B's comes last.
        let a1 = job(a, &ep_a, app_a.id).await;
        let _a2 = job(a, &ep_a, app_a.id).await;
        let b1 = job(b, &ep_b, app_b.id).await;
        let now = Timestamp::now();
        let lease = Duration::from_secs(60);
        let first = store
            .system()
            .claim_job_except("n", now, lease, &[])
            .await
            .unwrap();
        assert_eq!(first.map(|j| j.id), Some(a1.id));
        // With A busy, the next slot goes to B, not to A's second job.
        let next = store
            .system()
            .claim_job_except("n", now, lease, &[a])
            .await
            .unwrap();
        assert_eq!(next.map(|j| j.id), Some(b1.id));

        // A running job's lease is extended by its owner only.
        let later = now.plus(Duration::from_secs(50));
        assert!(
            store
                .system()
                .renew_job(a1.id, "n", later.plus(lease))
                .await
                .unwrap()
        );
        assert!(
            !store
                .system()
                .renew_job(a1.id, "intruder", later.plus(lease))
                .await
                .unwrap()
        );
        let after_first_lease = now.plus(Duration::from_secs(61));
        let stolen = store
            .system()
            .claim_job_except("other", after_first_lease, lease, &[b])
            .await
            .unwrap()
            .map(|j| j.id);
        assert_ne!(stolen, Some(a1.id), "a renewed job is not taken over");
    })
    .await;
}

async fn send_typed(
    store: &Store,
    t: TenantId,
    app: &store::entities::application::Model,
    event_type: &str,
) -> String {
    let new = NewMessage {
        event_type: event_type.into(),
        payload: b"{}".to_vec(),
        ..Default::default()
    };
    let ttl =
        |_: &store::entities::endpoint::Model, now: Timestamp| now.plus(Duration::from_secs(60));
    let created = store.create_message(t, app, new, ttl).await.unwrap();
    created.message.id.to_string()
}

async fn set_state(store: &Store, msg: &str, state: &str) {
    delivery::Entity::update_many()
        .col_expr(
            delivery::Column::State,
            sea_orm::sea_query::Expr::value(state),
        )
        .filter(delivery::Column::MsgId.eq(msg.parse::<domain::ids::MessageId>().unwrap()))
        .exec(store.connection())
        .await
        .unwrap();
}

fn job_params(ep: &store::entities::endpoint::Model) -> serde_json::Value {
    serde_json::json!({"endpointId": ep.id, "appId": ep.app_id, "since": 0, "until": null})
}

#[tokio::test]
async fn previews_count_exactly_what_recover_and_replay_jobs_then_do() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("a"), SECRET)
            .await
            .unwrap();
        let mut sent = Vec::new();
        for _ in 0..5 {
            sent.push(send_typed(&store, t, &app, "x").await);
        }
        for msg in &sent[..3] {
            set_state(&store, msg, "failed").await;
        }
        set_state(&store, &sent[3], "succeeded").await;
        let zero = Timestamp::from_millis(0);
        let capped = |n, more| store::Capped { n, more };
        let preview = store
            .count_recoverable(t, ep.id, zero, None, 100)
            .await
            .unwrap();
        assert_eq!(preview, capped(3, false));
        assert_eq!(
            store
                .count_recoverable(t, ep.id, zero, None, 2)
                .await
                .unwrap(),
            capped(2, true),
            "a count stops at its cap and says so"
        );
        let job = store
            .create_job(t, domain::jobs::JobKind::EndpointRecover, &job_params(&ep))
            .await
            .unwrap();
        assert!(scheduler::jobs::run_one(&store, "n").await.unwrap());
        let job = store.get_job(t, &job.id.to_string()).await.unwrap();
        assert_eq!((job.state.as_str(), job.progress), ("finished", 3));

        // Replay: an endpoint made later that takes only "b" events.
        for _ in 0..2 {
            send_typed(&store, t, &app, "b").await;
        }
        let late = NewEndpoint {
            filter_types: Some(vec!["b".into()]),
            ..endpoint("late")
        };
        let late = store.create_endpoint(t, &app, late, SECRET).await.unwrap();
        let preview = store
            .count_missing(t, &late, zero, None, 100)
            .await
            .unwrap();
        assert_eq!(preview, capped(2, false));
        assert_eq!(
            store.count_missing(t, &late, zero, None, 1).await.unwrap(),
            capped(1, true)
        );
        let job = store
            .create_job(t, domain::jobs::JobKind::EndpointReplay, &job_params(&late))
            .await
            .unwrap();
        assert!(scheduler::jobs::run_one(&store, "n").await.unwrap());
        let job = store.get_job(t, &job.id.to_string()).await.unwrap();
        assert_eq!((job.state.as_str(), job.progress), ("finished", 2));
        assert_eq!(states(&store, late.id).await.len(), 2);
        assert_eq!(
            store
                .count_missing(t, &late, zero, None, 100)
                .await
                .unwrap(),
            capped(0, false),
            "nothing is missing any more"
        );
    })
    .await;
}

#[tokio::test]
async fn a_canceled_job_stops_before_its_next_batch_and_stays_canceled() {
    each_backend(|store| async move {
        let (t, app) = setup(&store).await;
        let ep = store
            .create_endpoint(t, &app, endpoint("a"), SECRET)
            .await
            .unwrap();
        const N: u64 = 100;
        for _ in 0..N {
            let msg = send_typed(&store, t, &app, "x").await;
            set_state(&store, &msg, "failed").await;
        }
        let job = store
            .create_job(t, domain::jobs::JobKind::EndpointRecover, &job_params(&ep))
            .await
            .unwrap();
        let id = job.id.to_string();
        // Another tenant cannot cancel it.
        let other = store
            .create_tenant(NewTenant {
                name: "other".into(),
                notification_email: "o@o.test".into(),
                ingest_rate: None,
                ingest_burst: None,
            })
            .await
            .unwrap();
        assert!(store.cancel_job(other.id, &id).await.is_err());
        // A runner taking one delivery per batch, canceled once it has done some.
        let runner = {
            let store = store.clone();
            let run = store::Batches {
                job: Some(job.id),
                size: Some(1),
            };
            let ttl = Duration::from_secs(60);
            let zero = Timestamp::from_millis(0);
            tokio::spawn(async move { store.recover_failed(t, ep.id, zero, None, ttl, run).await })
        };
        while store.get_job(t, &id).await.unwrap().progress == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let canceled = store.cancel_job(t, &id).await.unwrap();
        assert_eq!(canceled.state.as_str(), "canceled");
        let done = runner.await.unwrap().unwrap();
        assert!(0 < done && done < N, "stopped part way: {done}");
        // What it did is exactly what it recorded: whole batches, no more.
        let job = store.get_job(t, &id).await.unwrap();
        assert_eq!(
            (job.state.as_str(), job.progress as u64),
            ("canceled", done)
        );
        let pending = states(&store, ep.id)
            .await
            .into_iter()
            .filter(|(_, s, _)| s == "pending")
            .count() as u64;
        assert_eq!(pending, done);
        // A runner finishing afterwards does not undo the cancel, and nobody runs it again.
        store
            .system()
            .finish_job(job.id, Ok(N), None)
            .await
            .unwrap();
        let job = store.get_job(t, &id).await.unwrap();
        assert_eq!(
            (job.state.as_str(), job.progress as u64),
            ("canceled", done)
        );
        assert!(!scheduler::jobs::run_one(&store, "n").await.unwrap());
    })
    .await;
}
