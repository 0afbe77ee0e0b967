use domain::egress::{Grant, GrantTarget, Namespace};
use store::GrantOrigin;

use crate::helpers::*;

fn grant(target: &str, redis_prefix: Option<&str>) -> Grant {
    Grant {
        target: GrantTarget::parse(target).unwrap(),
        namespace: Namespace::new(redis_prefix, None, None).unwrap(),
    }
}

#[tokio::test]
async fn a_grant_belongs_to_its_tenant_and_is_gone_when_revoked() {
    each_backend(|store| async move {
        let (a, b) = (tenant(&store, "a").await, tenant(&store, "b").await);
        store
            .grant_egress(a, &grant("10.0.0.5", Some("a-")), GrantOrigin::Cli)
            .await
            .unwrap();
        // Made again: the namespace changes, no second row.
        store
            .grant_egress(a, &grant("10.0.0.5", Some("tenant-a-")), GrantOrigin::Cli)
            .await
            .unwrap();
        let got = store.egress_grants(a).await.unwrap();
        assert_eq!(*got, vec![grant("10.0.0.5", Some("tenant-a-"))]);
        assert!(
            store.egress_grants(b).await.unwrap().is_empty(),
            "b got a's grant"
        );
        let both = store.system().egress_grants_of([a, b]).await.unwrap();
        assert_eq!(both[&a].len(), 1);
        assert!(both[&b].is_empty());

        let target = GrantTarget::parse("10.0.0.5").unwrap();
        assert!(
            !store.revoke_egress(b, &target).await.unwrap(),
            "b held nothing"
        );
        assert!(store.revoke_egress(a, &target).await.unwrap());
        // At once on this process (the copies are dropped).
        assert!(store.egress_grants(a).await.unwrap().is_empty());

        let unknown = domain::ids::TenantId::new();
        assert!(matches!(
            store
                .grant_egress(unknown, &grant("10.0.0.0/8", None), GrantOrigin::Cli)
                .await,
            Err(store::StoreError::NotFound { .. })
        ));
    })
    .await;
}

#[tokio::test]
async fn the_configuration_file_makes_and_takes_back_only_its_own_grants() {
    each_backend(|store| async move {
        let a = tenant(&store, "a").await;
        store
            .grant_egress(a, &grant("mq.internal", None), GrantOrigin::Cli)
            .await
            .unwrap();
        let sys = store.system();
        sys.declare_egress_grants(&[
            (a, grant("10.1.0.0/16", None)),
            (a, grant("10.2.0.0/16", None)),
        ])
        .await
        .unwrap();
        let targets = |gs: &[(Grant, GrantOrigin)]| {
            let mut t: Vec<String> = gs.iter().map(|(g, _)| g.target.to_string()).collect();
            t.sort();
            t
        };
        assert_eq!(
            targets(&store.list_egress_grants(a).await.unwrap()),
            ["10.1.0.0/16", "10.2.0.0/16", "mq.internal"]
        );
        // The file no longer declares 10.1.0.0/16: taken back; the command line's grant stays.
        sys.declare_egress_grants(&[(a, grant("10.2.0.0/16", None))])
            .await
            .unwrap();
        assert_eq!(
            targets(&store.list_egress_grants(a).await.unwrap()),
            ["10.2.0.0/16", "mq.internal"]
        );
        assert_eq!(
            store.egress_grants(a).await.unwrap().len(),
            2,
            "the copies follow the declaration"
        );
    })
    .await;
}
