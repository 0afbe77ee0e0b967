//! Secrets sealed at rest: what the tables hold, values stored before sealing, and values
//! moved between rows.

use std::collections::BTreeMap;

use domain::Timestamp;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use store::entities::{endpoint, endpoint_secret};
use store::{NewEndpoint, Reseal, StoreError};

use crate::helpers::{SECRET, app, each_backend, tenant, url};

fn with_header(path: &str) -> NewEndpoint {
    NewEndpoint {
        headers: BTreeMap::from([("X-Api-Key".to_owned(), "key-5f4e3d2c1b".to_owned())]),
        ..url(path)
    }
}

async fn stored(store: &store::Store, ep: &endpoint::Model) -> (String, String) {
    let row = endpoint::Entity::find_by_id(ep.id)
        .one(store.connection())
        .await
        .unwrap()
        .unwrap();
    let secret = endpoint_secret::Entity::find()
        .filter(endpoint_secret::Column::EndpointId.eq(ep.id))
        .one(store.connection())
        .await
        .unwrap()
        .unwrap();
    (secret.secret, row.headers)
}

#[tokio::test]
async fn values_stored_before_sealing_are_sealed_once_and_read_the_same() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = store
            .create_endpoint(t, &a, with_header("h"), SECRET)
            .await
            .unwrap();
        let (secret, headers) = stored(&store, &ep).await;
        assert!(secret.starts_with("sealed:v1:test:") && !secret.contains("MfKQ9r8G"), "{secret}");
        assert!(headers.contains("X-Api-Key") && !headers.contains("key-5f4e"), "{headers}");
        // As an older hookd left them: plain.
        store
            .execute_sql(&format!(
                "UPDATE endpoint_secrets SET secret = '{SECRET}' WHERE endpoint_id = {}; \
                 UPDATE endpoints SET headers = '{{\"X-Api-Key\":\"key-5f4e3d2c1b\"}}' WHERE id = {}",
                store.id_sql(ep.id),
                store.id_sql(ep.id)
            ))
            .await
            .unwrap();
        let r = store.system().reseal(Reseal::PlainOnly, 1).await.unwrap();
        assert_eq!((r.seen, r.sealed_plain, r.rekeyed), (2, 2, 0), "{r:?}");
        let (secret, headers) = stored(&store, &ep).await;
        assert!(secret.starts_with("sealed:v1:test:"), "{secret}");
        assert!(!headers.contains("key-5f4e"), "{headers}");
        let secrets = store.active_secrets(t, ep.id, Timestamp::now()).await.unwrap();
        assert_eq!(secrets[0].secret, SECRET);
        let ep = store.get_endpoint(t, a.id, &ep.id.to_string()).await.unwrap();
        assert_eq!(store.endpoint_headers(&ep).unwrap()["X-Api-Key"], "key-5f4e3d2c1b");
        // Once sealed, nothing more to do.
        let again = store.system().reseal(Reseal::All, 100).await.unwrap();
        assert_eq!((again.sealed_plain, again.rekeyed), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_secret_copied_into_another_tenants_row_does_not_open() {
    each_backend(|store| async move {
        let (t1, t2) = (tenant(&store, "one").await, tenant(&store, "two").await);
        let (a1, a2) = (app(&store, t1, "a").await, app(&store, t2, "b").await);
        let victim = store
            .create_endpoint(t1, &a1, url("v"), SECRET)
            .await
            .unwrap();
        let thief = store
            .create_endpoint(t2, &a2, url("t"), "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
            .await
            .unwrap();
        // Someone with write access to the database but not the key moves the sealed value.
        let (sealed, _) = stored(&store, &victim).await;
        store
            .execute_sql(&format!(
                "UPDATE endpoint_secrets SET secret = '{sealed}' WHERE endpoint_id = {}",
                store.id_sql(thief.id)
            ))
            .await
            .unwrap();
        let err = store
            .active_secrets(t2, thief.id, Timestamp::now())
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Sealed(_)), "{err:?}");
        assert!(err.to_string().contains("altered or moved"), "{err}");
    })
    .await;
}
