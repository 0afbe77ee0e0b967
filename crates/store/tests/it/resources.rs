use std::collections::HashSet;
use std::time::Duration;

use domain::Timestamp;
use domain::ids::EndpointId;
use store::{EndpointChanges, ListParams, NewApplication, NewEventType, StoreError};

use crate::helpers::*;

#[tokio::test]
async fn another_tenants_rows_are_invisible() {
    each_backend(|store| async move {
        let a = tenant(&store, "a").await;
        let b = tenant(&store, "b").await;
        let app_a = app(&store, a, "app-a").await;
        let ep_a = endpoint(&store, a, &app_a, url("a")).await;

        assert!(matches!(
            store.get_application(b, &app_a.id.to_string()).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(
            store
                .list_applications(b, Default::default(), &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
        assert!(matches!(
            store.get_endpoint(b, app_a.id, &ep_a.id.to_string()).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(
            store
                .list_endpoints(b, app_a.id, &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
        assert!(
            store
                .active_secrets(b, ep_a.id, Timestamp::now())
                .await
                .unwrap()
                .is_empty()
        );
        // Writes through a row of another tenant are refused too.
        assert!(matches!(
            store.delete_endpoint(b, &ep_a).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.create_endpoint(b, &app_a, url("x"), SECRET).await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.delete_application(b, &app_a.id.to_string()).await,
            Err(StoreError::NotFound { .. })
        ));
        // The owner still sees everything.
        assert_eq!(
            store
                .get_endpoint(a, app_a.id, &ep_a.id.to_string())
                .await
                .unwrap()
                .id,
            ep_a.id
        );
    })
    .await;
}

#[tokio::test]
async fn application_uid_is_unique_per_tenant_and_finds_the_app() {
    each_backend(|store| async move {
        let a = tenant(&store, "a").await;
        let b = tenant(&store, "b").await;
        let new = NewApplication {
            name: "Shop".into(),
            uid: Some("shop".into()),
            ..Default::default()
        };
        let created = store.create_application(a, new.clone()).await.unwrap();
        assert!(matches!(
            store.create_application(a, new.clone()).await,
            Err(StoreError::Conflict { field: "uid" })
        ));
        store.create_application(b, new).await.unwrap();
        assert_eq!(
            store.get_application(a, "shop").await.unwrap().id,
            created.id
        );

        let renamed = store
            .update_application(
                a,
                "shop",
                NewApplication {
                    name: "Shop 2".into(),
                    uid: Some("shop".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(renamed.name, "Shop 2");
        assert!(renamed.updated_at >= created.updated_at);
    })
    .await;
}

#[tokio::test]
async fn listing_pages_newest_first_without_gaps_or_repeats() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let mut made = Vec::new();
        for i in 0..120 {
            made.push(app(&store, t, &format!("app {i}")).await.id);
        }
        let mut seen = Vec::new();
        let mut params = ListParams::first(50);
        let mut pages = 0;
        loop {
            let page = store
                .list_applications(t, Default::default(), &params)
                .await
                .unwrap();
            pages += 1;
            seen.extend(page.data.iter().map(|a| a.id));
            if page.done {
                break;
            }
            params.iterator = page.iterator;
        }
        assert_eq!(pages, 3);
        made.reverse();
        assert_eq!(seen, made, "newest first, every app exactly once");
        assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 120);
    })
    .await;
}

/// A page's `prev_iterator` leads back to exactly the page before it, in the same order,
/// newest first and oldest first alike; going back from the first page finds nothing.
#[tokio::test]
async fn prev_iterator_walks_back_to_the_same_pages() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        for i in 0..25 {
            app(&store, t, &format!("app {i}")).await;
        }
        for ascending in [false, true] {
            let mut params = ListParams {
                ascending,
                walk_window: 0,
                ..ListParams::first(10)
            };
            let mut pages = Vec::new();
            loop {
                let page = store
                    .list_applications(t, Default::default(), &params)
                    .await
                    .unwrap();
                let ids: Vec<_> = page.data.iter().map(|a| a.id).collect();
                pages.push((ids, page.prev_iterator.clone()));
                if page.done {
                    break;
                }
                params.iterator = page.iterator;
            }
            assert_eq!(pages.len(), 3);
            // From the last page back: each prev_iterator gives the page before.
            for i in (1..pages.len()).rev() {
                params.iterator = pages[i].1.clone();
                let back = store
                    .list_applications(t, Default::default(), &params)
                    .await
                    .unwrap();
                let ids: Vec<_> = back.data.iter().map(|a| a.id).collect();
                assert_eq!(ids, pages[i - 1].0, "page {i} back, ascending {ascending}");
                assert_eq!(back.done, i == 1, "nothing before the first page");
            }
            params.iterator = pages[0].1.clone();
            let before_first = store
                .list_applications(t, Default::default(), &params)
                .await
                .unwrap();
            assert!(before_first.data.is_empty() && before_first.done);
        }
    })
    .await;
}

#[tokio::test]
async fn event_type_names_are_unique_and_archiving_hides_them() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let new = NewEventType {
            name: "user.created".into(),
            description: "A user".into(),
            ..Default::default()
        };
        store.create_event_type(t, new.clone()).await.unwrap();
        assert!(matches!(
            store.create_event_type(t, new.clone()).await,
            Err(StoreError::Conflict { field: "name" })
        ));
        store.archive_event_type(t, "user.created").await.unwrap();
        assert!(
            store
                .list_event_types(t, false, &ListParams::default())
                .await
                .unwrap()
                .data
                .is_empty()
        );
        let all = store
            .list_event_types(t, true, &ListParams::default())
            .await
            .unwrap();
        assert!(all.data[0].archived);
        // Updating brings it back.
        store.update_event_type(t, new).await.unwrap();
        assert_eq!(
            store
                .list_event_types(t, false, &ListParams::default())
                .await
                .unwrap()
                .data
                .len(),
            1
        );
    })
    .await;
}

#[tokio::test]
async fn rotation_keeps_the_previous_secret_for_the_grace_period() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("x")).await;
        let now = Timestamp::now();
        let first = store.active_secrets(t, ep.id, now).await.unwrap();
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].secret, SECRET);

        let new = "whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
        store
            .rotate_secret(t, ep.id, new, Duration::from_secs(86_400))
            .await
            .unwrap();
        let both = store
            .active_secrets(t, ep.id, Timestamp::now())
            .await
            .unwrap();
        let secrets: Vec<_> = both.iter().map(|s| s.secret.as_str()).collect();
        assert_eq!(secrets, [new, SECRET], "current first, previous second");

        let after_grace = Timestamp::now().plus(Duration::from_secs(86_401));
        let only = store.active_secrets(t, ep.id, after_grace).await.unwrap();
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].secret, new);
    })
    .await;
}

#[tokio::test]
async fn disabling_records_a_reason_and_enabling_resets_health() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let ep = endpoint(&store, t, &a, url("x")).await;
        let ep = store
            .set_endpoint_disabled(
                t,
                ep,
                EndpointChanges::Disable {
                    reason: "410 Gone".into(),
                },
            )
            .await
            .unwrap();
        assert!(ep.disabled);
        assert_eq!(ep.disabled_reason.as_deref(), Some("410 Gone"));
        assert!(ep.disabled_at.is_some());
        let ep = store
            .set_endpoint_disabled(t, ep, EndpointChanges::Enable)
            .await
            .unwrap();
        assert!(!ep.disabled);
        assert_eq!(ep.disabled_reason, None);
        assert_eq!(ep.failing_since, None);
        assert_eq!(ep.breaker_state, domain::breaker::BreakerPhase::Closed);
        let stored = store
            .get_endpoint(t, a.id, &ep.id.to_string())
            .await
            .unwrap();
        assert_eq!(stored, ep);
    })
    .await;
}

#[tokio::test]
async fn endpoint_uid_is_unique_within_its_application() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let a = app(&store, t, "a").await;
        let b = app(&store, t, "b").await;
        let mut new = url("x");
        new.uid = Some("primary".into());
        let ep = endpoint(&store, t, &a, new.clone()).await;
        assert!(matches!(
            store.create_endpoint(t, &a, new.clone(), SECRET).await,
            Err(StoreError::Conflict { field: "uid" })
        ));
        endpoint(&store, t, &b, new).await;
        assert_eq!(
            store.get_endpoint(t, a.id, "primary").await.unwrap().id,
            ep.id
        );
    })
    .await;
}

#[tokio::test]
async fn endpoints_of_several_apps_come_in_one_listing_of_the_tenants_own() {
    each_backend(|store| async move {
        let a = tenant(&store, "a").await;
        let b = tenant(&store, "b").await;
        let app_1 = app(&store, a, "one").await;
        let app_2 = app(&store, a, "two").await;
        let app_3 = app(&store, a, "three").await;
        let app_b = app(&store, b, "b").await;
        let ep_1 = endpoint(&store, a, &app_1, url("1")).await;
        let ep_2a = endpoint(&store, a, &app_2, url("2a")).await;
        let ep_2b = endpoint(&store, a, &app_2, url("2b")).await;
        endpoint(&store, a, &app_3, url("3")).await;
        let ep_b = endpoint(&store, b, &app_b, url("b")).await;

        let ids = |eps: Vec<store::entities::endpoint::Model>| -> Vec<EndpointId> {
            eps.into_iter().map(|e| e.id).collect()
        };
        // Only the applications asked for, newest endpoint first.
        let got = store
            .list_endpoints_of_apps(a, &[app_1.id, app_2.id])
            .await
            .unwrap();
        assert_eq!(ids(got), vec![ep_2b.id, ep_2a.id, ep_1.id]);

        // Another tenant's application ids, alone or mixed in, bring nothing of theirs.
        let got = store
            .list_endpoints_of_apps(a, &[app_1.id, app_b.id])
            .await
            .unwrap();
        assert_eq!(ids(got), vec![ep_1.id]);
        let got = store
            .list_endpoints_of_apps(b, &[app_1.id, app_2.id])
            .await
            .unwrap();
        assert!(got.is_empty(), "{got:?}");
        let got = store
            .list_endpoints_of_apps(b, &[app_b.id, app_1.id])
            .await
            .unwrap();
        assert_eq!(ids(got), vec![ep_b.id]);

        assert!(
            store
                .list_endpoints_of_apps(a, &[])
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test]
async fn applications_list_without_those_lacking_endpoints_or_with_only_disabled_ones() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let bare = app(&store, t, "bare").await;
        let live = app(&store, t, "live").await;
        endpoint(&store, t, &live, url("live")).await;
        let off = app(&store, t, "off").await;
        let ep = endpoint(&store, t, &off, url("off")).await;
        store
            .set_endpoint_disabled(
                t,
                ep,
                EndpointChanges::Disable {
                    reason: "test".into(),
                },
            )
            .await
            .unwrap();
        // Another tenant's endpoint never counts for this tenant's applications.
        let other = tenant(&store, "other").await;
        let theirs = app(&store, other, "theirs").await;
        endpoint(&store, other, &theirs, url("theirs")).await;
        let names = |filter: store::AppFilter| {
            let store = store.clone();
            async move {
                let mut names: Vec<String> = store
                    .list_applications(t, filter, &ListParams::default())
                    .await
                    .unwrap()
                    .data
                    .into_iter()
                    .map(|a| a.name)
                    .collect();
                names.sort();
                names
            }
        };
        let _ = bare;
        assert_eq!(names(Default::default()).await, ["bare", "live", "off"]);
        let with_endpoints = store::AppFilter {
            without_endpoints: true,
            ..Default::default()
        };
        assert_eq!(names(with_endpoints).await, ["live", "off"]);
        let not_all_disabled = store::AppFilter {
            with_only_disabled_endpoints: true,
            ..Default::default()
        };
        assert_eq!(names(not_all_disabled).await, ["bare", "live"]);
        let both = store::AppFilter {
            without_endpoints: true,
            with_only_disabled_endpoints: true,
        };
        assert_eq!(names(both).await, ["live"]);
    })
    .await;
}

#[tokio::test]
async fn an_archived_event_type_is_restored_by_creating_it_and_expunged_for_good() {
    each_backend(|store| async move {
        let t = tenant(&store, "t").await;
        let new = |description: &str| NewEventType {
            name: "order.paid".into(),
            description: description.into(),
            ..Default::default()
        };
        let first = store
            .create_or_restore_event_type(t, new("one"))
            .await
            .unwrap();
        assert!(matches!(
            store.create_or_restore_event_type(t, new("dup")).await,
            Err(StoreError::Conflict { field: "name" })
        ));
        store.archive_event_type(t, "order.paid").await.unwrap();
        let restored = store
            .create_or_restore_event_type(t, new("two"))
            .await
            .unwrap();
        assert_eq!(
            (
                restored.id,
                restored.archived,
                restored.description.as_str()
            ),
            (first.id, false, "two")
        );
        // Another tenant's type of the same name is untouched by this tenant's expunge.
        let other = tenant(&store, "other").await;
        store.create_event_type(other, new("theirs")).await.unwrap();
        store.expunge_event_type(t, "order.paid").await.unwrap();
        assert!(matches!(
            store.get_event_type(t, "order.paid").await,
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.expunge_event_type(t, "order.paid").await,
            Err(StoreError::NotFound { .. })
        ));
        assert_eq!(
            store
                .get_event_type(other, "order.paid")
                .await
                .unwrap()
                .description,
            "theirs"
        );
        // Its name is free again: a new type, not a restored one.
        let again = store
            .create_or_restore_event_type(t, new("three"))
            .await
            .unwrap();
        assert_ne!(again.id, first.id);
    })
    .await;
}
