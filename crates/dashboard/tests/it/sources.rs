//! Inbound sources in the dashboard: created and changed through the form with the API's
//! rules, another tenant's source not found, and a configuration file's source read-only.

use serde_json::json;
use store::testing::TestDb;

use crate::helpers::{Browser, TestApp, api, app_with_endpoint};

/// On SQLite and, with `HOOKD_TEST_POSTGRES_URL`, PostgreSQL.
async fn apps() -> Vec<TestApp> {
    let mut apps = Vec::new();
    for db in TestDb::all().await {
        apps.push(TestApp::start(db, &[("HOOKD_ROLES", "api")]).await);
    }
    apps
}

/// The tenant whose API key `key` is.
async fn tenant_of(app: &TestApp, key: &str) -> domain::ids::TenantId {
    app.store
        .system()
        .authenticate_api_key(key)
        .await
        .unwrap()
        .expect("a tenant's key")
}

#[tokio::test]
async fn a_source_is_made_and_changed_in_the_form_and_another_tenants_is_not_found() {
    for app in apps().await {
        let mut b = Browser::new(&app);
        let key = b.sign_up("Acme", "ops@acme.example").await;
        let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
        let form = b.get("/sources/new").await;
        form.assert(200, "New source");
        let csrf = form.csrf();
        // The API's rules, each problem under its field.
        let refused = b
            .post(
                "/sources/new",
                &[
                    ("csrf", &csrf),
                    ("name", "partner"),
                    ("app", &app_id),
                    ("event_type", "partner.event"),
                    ("scheme", "stripe"),
                    ("secret", "short"),
                ],
            )
            .await;
        refused.assert(422, r#"id="src-secret-error""#);
        assert!(
            refused.body.contains("at least 16 are needed"),
            "{}",
            refused.body
        );
        assert!(
            refused
                .body
                .contains(r#"aria-invalid="true" aria-describedby="src-secret-error""#)
        );
        let made = b
            .post(
                "/sources/new",
                &[
                    ("csrf", &csrf),
                    ("name", "partner"),
                    ("app", &app_id),
                    ("event_type", "partner.event"),
                    ("scheme", "stripe"),
                    ("secret", "whsec_0123456789abcdef"),
                    ("hold_gap", "60"),
                ],
            )
            .await;
        assert_eq!(made.status, 303, "{}", made.body);
        let page_path = made.location().split('?').next().unwrap().to_owned();
        let id = page_path.trim_start_matches("/sources/").to_owned();
        let page = b.get(made.location()).await;
        page.assert(200, "Source saved.");
        assert!(
            !page.body.contains("0123456789abcdef"),
            "the secret is never shown"
        );
        // A second of the same name: under the name.
        let again = b
            .post(
                "/sources/new",
                &[
                    ("csrf", &csrf),
                    ("name", "partner"),
                    ("app", &app_id),
                    ("event_type", "x"),
                    ("scheme", "none"),
                ],
            )
            .await;
        again.assert(422, "You have a source of this name already.");
        assert!(again.body.contains(r#"id="src-name-error""#));

        // Edited with the secret left empty: kept (sealed), the rest changed.
        let edit = b.get(&format!("/sources/{id}/edit")).await;
        edit.assert(200, "A stripe secret is set");
        let saved = b
            .post(
                &format!("/sources/{id}/edit"),
                &[
                    ("csrf", &csrf),
                    ("app", &app_id),
                    ("event_type", "partner.changed"),
                    ("scheme", "stripe"),
                    ("secret", ""),
                    ("tolerance", "600"),
                    ("hold_gap", "0"),
                ],
            )
            .await;
        assert_eq!(saved.status, 303, "{}", saved.body);
        let s = app
            .store
            .get_source(tenant_of(&app, &key).await, &id)
            .await
            .unwrap();
        assert_eq!(s.row.event_type, "partner.changed");
        assert_eq!(s.settings.tolerance_secs, Some(600));
        assert_eq!(
            s.settings.scheme,
            domain::inbound::Scheme::Stripe {
                secret: "whsec_0123456789abcdef".into()
            }
        );

        // Another tenant: every page and action of this source is not found.
        let mut other = Browser::new(&app);
        let _ = other.sign_up("Other", "ops@other.example").await;
        let theirs = other.get("/sources").await;
        let their_csrf = theirs.csrf();
        other.get(&format!("/sources/{id}")).await.assert(404, "");
        other
            .get(&format!("/sources/{id}/edit"))
            .await
            .assert(404, "");
        let del = other
            .post(&format!("/sources/{id}/delete"), &[("csrf", &their_csrf)])
            .await;
        assert_eq!(del.status, 404);
        b.get(&format!("/sources/{id}"))
            .await
            .assert(200, "partner");

        // Deleted by its tenant.
        let gone = b
            .post(&format!("/sources/{id}/delete"), &[("csrf", &csrf)])
            .await;
        assert_eq!(gone.status, 303);
        b.get(gone.location())
            .await
            .assert(200, "Source “partner” deleted.");
        b.get(&format!("/sources/{id}")).await.assert(404, "");
    }
}

/// Each vendor's scheme is offered by the form, and kept with its secret when the source is
/// edited with the secret left empty.
#[tokio::test]
async fn a_vendor_source_keeps_its_scheme_and_secret_when_edited_in_the_form() {
    for app in apps().await {
        let mut b = Browser::new(&app);
        let key = b.sign_up("Shop", "ops@shop.example").await;
        let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
        let csrf = b.get("/sources/new").await.csrf();
        for scheme in domain::inbound::Scheme::ONE_SECRET {
            let secret = format!("{scheme}-secret-0123456789abcdef");
            let made = b
                .post(
                    "/sources/new",
                    &[
                        ("csrf", &csrf),
                        ("name", scheme),
                        ("app", &app_id),
                        ("event_type", "shop.event"),
                        ("scheme", scheme),
                        ("secret", &secret),
                    ],
                )
                .await;
            assert_eq!(made.status, 303, "{scheme}: {}", made.body);
            let id = made
                .location()
                .split('?')
                .next()
                .unwrap()
                .trim_start_matches("/sources/")
                .to_owned();
            let edit = b.get(&format!("/sources/{id}/edit")).await;
            edit.assert(200, &format!(r#"<option value="{scheme}" selected>"#));
            let saved = b
                .post(
                    &format!("/sources/{id}/edit"),
                    &[
                        ("csrf", &csrf),
                        ("app", &app_id),
                        ("event_type", "shop.changed"),
                        ("scheme", scheme),
                        ("secret", ""),
                    ],
                )
                .await;
            assert_eq!(saved.status, 303, "{scheme}: {}", saved.body);
            let s = app
                .store
                .get_source(tenant_of(&app, &key).await, &id)
                .await
                .unwrap();
            assert_eq!(
                (s.settings.scheme.name(), s.settings.scheme.vendor_secret()),
                (*scheme, Some(secret.as_str()))
            );
        }
    }
}

#[tokio::test]
async fn a_source_the_configuration_file_declares_is_read_only() {
    for app in apps().await {
        let mut b = Browser::new(&app);
        let key = b.sign_up("Acme", "ops@acme.example").await;
        let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
        let tenant = tenant_of(&app, &key).await;
        let spec = service::inbound::SourceSpec::new(service::inbound::SourceFields {
            name: "stripe".into(),
            app: app_id.clone(),
            event_type: "stripe.event".into(),
            verification: json!({"scheme": "none"}),
            ordering: None,
            tolerance_secs: None,
        })
        .unwrap();
        let (s, _) = service::inbound::declare_source(&app.store, tenant, &spec)
            .await
            .unwrap();
        let id = s.row.id.to_string();
        let page = b.get(&format!("/sources/{id}")).await;
        page.assert(200, "defined in the configuration file");
        assert!(!page.body.contains("Edit source") && !page.body.contains("Delete source"));
        let csrf = page.csrf();
        b.get("/sources").await.assert(200, "configuration file");
        b.get(&format!("/sources/{id}/edit"))
            .await
            .assert(409, "defined in the configuration file");
        let del = b
            .post(&format!("/sources/{id}/delete"), &[("csrf", &csrf)])
            .await;
        del.assert(409, "defined in the configuration file");
        assert!(app.store.get_source(tenant, &id).await.is_ok());
        // The API's own source stays editable: only declared ones are marked.
        let made = api(
            &app,
            &key,
            "/inbound/source",
            json!({"name": "partner", "appId": app_id, "eventType": "p",
                   "verification": {"scheme": "none"}}),
        )
        .await;
        b.get(&format!("/sources/{}/edit", made["id"].as_str().unwrap()))
            .await
            .assert(200, "Save changes");
    }
}
