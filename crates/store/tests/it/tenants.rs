use domain::Timestamp;
use domain::ids::TenantId;
use sea_orm::{EntityTrait, PaginatorTrait};
use store::entities::api_key;
use store::{ListParams, StoreError};

use crate::helpers::*;

#[tokio::test]
async fn migrating_twice_is_a_no_op() {
    each_backend(|store| async move {
        assert!(store.pending_migrations().await.unwrap().is_empty());
        store.migrate().await.unwrap();
        store.ping().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn api_keys_authenticate_until_revoked_and_only_a_hash_is_stored() {
    each_backend(|store| async move {
        let t = tenant(&store, "acme").await;
        let (key, token) = store.create_api_key(t, "default").await.unwrap();
        assert!(token.starts_with("hk_") && token.len() > 40, "{token}");
        assert_eq!(
            store.system().authenticate_api_key(&token).await.unwrap(),
            Some(t)
        );
        assert_eq!(
            store
                .system()
                .authenticate_api_key("hk_wrong")
                .await
                .unwrap(),
            None
        );

        let rows = api_key::Entity::find()
            .all(store.connection())
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_ne!(rows[0].key_hash, token);
        assert!(!rows[0].key_hash.contains(&token[3..]));
        assert_eq!(rows[0].prefix, token[..8]);

        // Another tenant cannot revoke it.
        let other = tenant(&store, "other").await;
        let key_id = key.id;
        assert!(matches!(
            store.revoke_api_key(other, key_id).await,
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(
            store.system().authenticate_api_key(&token).await.unwrap(),
            Some(t)
        );

        store.revoke_api_key(t, key_id).await.unwrap();
        assert_eq!(
            store.system().authenticate_api_key(&token).await.unwrap(),
            None
        );
        let listed = store
            .list_api_keys(t, &ListParams::first(10))
            .await
            .unwrap();
        assert!(listed.data[0].revoked_at.is_some());
        assert!(
            store
                .list_api_keys(other, &ListParams::first(10))
                .await
                .unwrap()
                .data
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn user_emails_are_unique_and_sessions_expire() {
    each_backend(|store| async move {
        let t = tenant(&store, "acme").await;
        let u = store
            .create_user(t, "Ann@Example.com", "argon2-hash", "owner")
            .await
            .unwrap();
        let t2 = tenant(&store, "other").await;
        assert!(matches!(
            store.create_user(t2, "ann@example.com", "x", "owner").await,
            Err(StoreError::Conflict { field: "email" })
        ));
        let found = store
            .system()
            .find_user_for_login("ANN@example.com")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found.id, u.id);

        let now = Timestamp::now();
        let expires = now.plus(std::time::Duration::from_secs(3600));
        let user = u.id;
        let (sess, token) = store
            .create_session(t, user, "csrf", expires)
            .await
            .unwrap();
        let got = store
            .system()
            .find_session(&token, now)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.id, sess.id);
        assert_eq!(got.tenant_id, t);
        assert!(
            store
                .system()
                .find_session(&token, expires)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            store
                .system()
                .find_session("nope", now)
                .await
                .unwrap()
                .is_none()
        );
    })
    .await;
}

#[tokio::test]
async fn tenant_lookup_by_id() {
    each_backend(|store| async move {
        let t = tenant(&store, "acme").await;
        assert_eq!(store.get_tenant(t).await.unwrap().name, "acme");
        assert!(matches!(
            store.get_tenant(TenantId::new()).await,
            Err(StoreError::NotFound { entity: "tenant" })
        ));
        store
            .set_notification_email(t, "ops@acme.test")
            .await
            .unwrap();
        assert_eq!(
            store.get_tenant(t).await.unwrap().notification_email,
            "ops@acme.test"
        );
        let count = store::entities::tenant::Entity::find()
            .count(store.connection())
            .await
            .unwrap();
        assert_eq!(count, 1);
    })
    .await;
}

/// API keys and applications are cached for a second (decisions 26): a change made by another
/// process, which cannot clear this one's copies, must still be seen within that second.
#[tokio::test]
async fn a_key_revoked_or_an_app_deleted_by_another_process_is_seen_within_a_second() {
    use std::time::{Duration, Instant};
    for db in store::testing::TestDb::all().await {
        let here = &db.store;
        let t = tenant(here, "acme").await;
        let (key, token) = here.create_api_key(t, "default").await.unwrap();
        let a = app(here, t, "shop").await;
        // Both lookups are now copied in this process.
        assert_eq!(
            here.system().authenticate_api_key(&token).await.unwrap(),
            Some(t)
        );
        here.get_application(t, &a.id.to_string()).await.unwrap();

        let there = store::Store::connect(&db.url, &Default::default())
            .await
            .unwrap();
        there.revoke_api_key(t, key.id).await.unwrap();
        there
            .delete_application(t, &a.id.to_string())
            .await
            .unwrap();
        let changed = Instant::now();
        loop {
            let key_live = here
                .system()
                .authenticate_api_key(&token)
                .await
                .unwrap()
                .is_some();
            let app_live = here.get_application(t, &a.id.to_string()).await.is_ok();
            if !key_live && !app_live {
                break;
            }
            assert!(
                changed.elapsed() < Duration::from_millis(1500),
                "{}: still accepted after {:?} (key {key_live}, app {app_live})",
                db.backend_name,
                changed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        there.close().await.unwrap();
    }
}

/// The dispatcher reads claimed work's endpoints from copies at most a second old (decisions
/// 95): a change made through this process must apply to its very next batch (a rotated secret
/// signs with both at once, a new URL is the one requested), and another process's change must
/// still be seen within that second.
#[tokio::test]
async fn the_dispatchers_endpoint_copies_follow_a_change_here_at_once_and_elsewhere_within_a_second()
 {
    use std::time::{Duration, Instant};
    for db in store::testing::TestDb::all().await {
        let here = &db.store;
        let name = db.backend_name;
        let t = tenant(here, "acme").await;
        let a = app(here, t, "shop").await;
        let ep = endpoint(here, t, &a, url("first")).await;
        let read = || async {
            here.system()
                .dispatch_endpoints(&[ep.id], Timestamp::now())
                .await
                .unwrap()
                .remove(&ep.id)
                .expect("the endpoint")
        };
        assert_eq!(read().await.secrets, [SECRET], "{name}");

        let new = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        here.rotate_secret(t, ep.id, new, Duration::from_secs(86_400))
            .await
            .unwrap();
        assert_eq!(
            read().await.secrets,
            [new, SECRET],
            "{name}: the next batch after a rotation signs with the new and the old secret"
        );
        let current = here
            .get_endpoint(t, a.id, &ep.id.to_string())
            .await
            .unwrap();
        here.update_endpoint(t, current, url("second"), false)
            .await
            .unwrap();
        assert_eq!(
            read().await.endpoint.url,
            "https://example.com/second",
            "{name}: an edit applies to the next batch"
        );

        let there = store::Store::connect(&db.url, &Default::default())
            .await
            .unwrap();
        let current = there
            .get_endpoint(t, a.id, &ep.id.to_string())
            .await
            .unwrap();
        there
            .update_endpoint(t, current, url("third"), false)
            .await
            .unwrap();
        let changed = Instant::now();
        while read().await.endpoint.url != "https://example.com/third" {
            assert!(
                changed.elapsed() < Duration::from_millis(1500),
                "{name}: another process's edit still unseen after {:?}",
                changed.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        there.close().await.unwrap();
    }
}
