//! The event-type catalog (`/event-types`) and the event-type picker of the endpoint form, on
//! the dashboard and in the portal.

use serde_json::{Value, json};

use crate::helpers::{Browser, Page, TestApp, api, spawn_app};

async fn api_get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}/api/v1{path}", app.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("api request");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The text of the element with `id` (up to its closing tag).
fn text_of(page: &Page, id: &str) -> String {
    let marker = format!(r#"id="{id}">"#);
    let Some(start) = page.body.find(&marker) else {
        panic!("no #{id} in:\n{}", page.body)
    };
    let rest = &page.body[start + marker.len()..];
    rest[..rest.find('<').unwrap_or(rest.len())].to_owned()
}

/// Whether the page offers `name` as a checkbox of the picker, and whether it is checked.
fn picker_box(page: &Page, name: &str) -> Option<bool> {
    let marker = format!(r#"name="event_types" value="{name}""#);
    let at = page.body.find(&marker)?;
    let tail = &page.body[at + marker.len()..];
    Some(tail[..tail.find('>').unwrap_or(0)].contains("checked"))
}

#[tokio::test]
async fn the_catalog_creates_edits_archives_and_restores_event_types() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    b.get("/")
        .await
        .assert(200, r#"<a href="/event-types">Event types</a>"#);
    b.get("/event-types")
        .await
        .assert(200, "No event types yet");
    let form = b.get("/event-types/new").await;
    form.assert(200, "New event type");
    let csrf = form.csrf();

    // Every problem under its own field, at once; what was typed is kept; nothing is stored.
    let bad = b
        .post(
            "/event-types/new",
            &[
                ("csrf", &csrf),
                ("name", "invoice paid"),
                ("description", "x"),
                ("schema", "[1, 2]"),
                ("example", "{oops"),
            ],
        )
        .await;
    bad.assert(422, "Please fix the 3 problems shown below");
    assert!(text_of(&bad, "name-error").starts_with("The name must be 1 to 256 characters"));
    assert!(text_of(&bad, "schema-error").contains("must be a JSON object"));
    assert!(text_of(&bad, "example-error").starts_with("The example is not valid JSON"));
    assert!(
        bad.body
            .contains(r#"aria-invalid="true" aria-describedby="name-error""#)
    );
    assert!(bad.body.contains(r#"value="invoice paid""#));
    let huge = format!(r#"{{"description": "{}"}}"#, "x".repeat(70 * 1024));
    let too_big = b
        .post(
            "/event-types/new",
            &[("csrf", &csrf), ("name", "big.one"), ("schema", &huge)],
        )
        .await;
    too_big.assert(422, "at most 64 KiB");
    assert!(text_of(&too_big, "schema-error").contains("64 KiB"));
    b.post("/event-types/new", &[("csrf", "forged"), ("name", "a.b")])
        .await
        .assert(403, "did not come from this dashboard");
    let (_, listed) = api_get(&app, &key, "/event-type?include_archived=true").await;
    assert_eq!(listed["data"], json!([]), "{listed}");

    // Created: stored as Svix keeps it, the example inside version 1's schema.
    let made = b
        .post(
            "/event-types/new",
            &[
                ("csrf", &csrf),
                ("name", "invoice.paid"),
                ("description", "An invoice was paid"),
                ("schema", r#"{"type": "object", "required": ["id"]}"#),
                ("example", r#"{"id": "inv_1"}"#),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    assert_eq!(
        made.location(),
        "/event-types/invoice.paid/edit?done=created"
    );
    b.get(made.location())
        .await
        .assert(200, "Event type created");
    let (_, et) = api_get(&app, &key, "/event-type/invoice.paid").await;
    assert_eq!(et["description"], "An invoice was paid");
    assert_eq!(
        et["schemas"],
        json!({"1": {"type": "object", "required": ["id"], "examples": [{"id": "inv_1"}]}})
    );
    let again = b
        .post(
            "/event-types/new",
            &[("csrf", &csrf), ("name", "invoice.paid")],
        )
        .await;
    again.assert(422, "already exists");
    assert_eq!(
        text_of(&again, "name-error"),
        "An event type with this name already exists."
    );
    let list = b.get("/event-types").await;
    list.assert(
        200,
        r#"<a href="/event-types/invoice.paid/edit">invoice.paid</a>"#,
    );
    assert!(list.body.contains("An invoice was paid"));
    assert!(list.body.contains("JSON Schema, example"));

    // Edit: description, schema and example; a bad schema changes nothing.
    let edit = "/event-types/invoice.paid/edit";
    let page = b.get(edit).await;
    page.assert(200, r#"value="An invoice was paid""#);
    assert!(page.body.contains("&#34;inv_1&#34;") || page.body.contains("&quot;inv_1&quot;"));
    let refused = b
        .post(
            edit,
            &[
                ("csrf", &csrf),
                ("description", "x"),
                ("schema", "{\"type\": "),
            ],
        )
        .await;
    refused.assert(422, "The schema is not valid JSON");
    let saved = b
        .post(
            edit,
            &[
                ("csrf", &csrf),
                ("description", "Paid in full"),
                ("schema", r#"{"type": "object"}"#),
                ("example", r#"{"id": "inv_2"}"#),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    b.get(saved.location())
        .await
        .assert(200, "Event type saved");
    let (_, et) = api_get(&app, &key, "/event-type/invoice.paid").await;
    assert_eq!(et["description"], "Paid in full");
    assert_eq!(
        et["schemas"],
        json!({"1": {"type": "object", "examples": [{"id": "inv_2"}]}})
    );

    // Archive: badge in the list, no longer offered to a new endpoint; then restored.
    let apps = api(&app, &key, "/app", json!({"name": "Shop"})).await;
    let new_endpoint = format!("/app/{}/endpoint/new", apps["id"].as_str().expect("id"));
    assert_eq!(
        picker_box(&b.get(&new_endpoint).await, "invoice.paid"),
        Some(false)
    );
    let done = b
        .post("/event-types/invoice.paid/archive", &[("csrf", &csrf)])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    b.get(done.location())
        .await
        .assert(200, "Event type archived");
    b.get("/event-types")
        .await
        .assert(200, "badge disabled\">Archived");
    assert_eq!(
        api_get(&app, &key, "/event-type/invoice.paid").await.1["archived"],
        true
    );
    assert_eq!(
        picker_box(&b.get(&new_endpoint).await, "invoice.paid"),
        None
    );
    let done = b
        .post("/event-types/invoice.paid/unarchive", &[("csrf", &csrf)])
        .await;
    b.get(done.location())
        .await
        .assert(200, "Event type restored");
    assert_eq!(
        api_get(&app, &key, "/event-type/invoice.paid").await.1["archived"],
        false
    );
    assert_eq!(
        picker_box(&b.get(&new_endpoint).await, "invoice.paid"),
        Some(false)
    );
    b.get("/event-types/no.such/edit")
        .await
        .assert(404, "Not found");
}

#[tokio::test]
async fn the_catalog_is_shown_a_page_at_a_time() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    for i in 0..55 {
        api(
            &app,
            &key,
            "/event-type",
            json!({"name": format!("t{i:02}"), "description": ""}),
        )
        .await;
    }
    let first = b.get("/event-types").await;
    assert_eq!(
        first.body.matches("/edit\">t").count(),
        50,
        "{}",
        first.body
    );
    let more = first
        .body
        .split("<a href=\"")
        .filter_map(|s| s.split('"').next())
        .find(|h| h.contains("iterator="));
    let more = more.expect("a Show more link").replace("&amp;", "&");
    let second = b.get(&more).await;
    second.assert(200, "First page");
    assert_eq!(
        second.body.matches("/edit\">t").count(),
        5,
        "{}",
        second.body
    );
    assert!(second.body.contains(">t54<"));
}

#[tokio::test]
async fn another_tenants_event_type_is_not_found() {
    let app = spawn_app().await;
    let mut alice = Browser::new(&app);
    let key = alice.sign_up("Alice", "alice@example.com").await;
    api(
        &app,
        &key,
        "/event-type",
        json!({"name": "secret.plan", "description": "hers"}),
    )
    .await;
    let mut mallory = Browser::new(&app);
    mallory.sign_up("Mallory", "mallory@example.com").await;
    let csrf = mallory.get("/").await.csrf();
    let list = mallory.get("/event-types").await;
    list.assert(200, "No event types yet");
    assert!(!list.body.contains("secret.plan"));
    mallory
        .get("/event-types/secret.plan/edit")
        .await
        .assert(404, "belongs to another account");
    for (path, form) in [
        (
            "/event-types/secret.plan/edit",
            vec![("csrf", csrf.as_str()), ("description", "mine")],
        ),
        (
            "/event-types/secret.plan/archive",
            vec![("csrf", csrf.as_str())],
        ),
    ] {
        let r = mallory.post(path, &form).await;
        assert_eq!(r.status, 404, "{path}: {}", r.body);
    }
    // Her own type of the same name is hers alone.
    let made = mallory
        .post(
            "/event-types/new",
            &[
                ("csrf", &csrf),
                ("name", "secret.plan"),
                ("description", "mine"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let (_, et) = api_get(&app, &key, "/event-type/secret.plan").await;
    assert_eq!(
        (et["description"].as_str(), et["archived"].as_bool()),
        (Some("hers"), Some(false))
    );
}

#[tokio::test]
async fn the_endpoint_form_picks_event_types_and_keeps_an_archived_choice() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    for name in ["user.created", "invoice.paid"] {
        api(
            &app,
            &key,
            "/event-type",
            json!({"name": name, "description": format!("About {name}")}),
        )
        .await;
    }
    let a = api(&app, &key, "/app", json!({"name": "Shop"})).await;
    let app_id = a["id"].as_str().expect("id").to_owned();
    let new = format!("/app/{app_id}/endpoint/new");
    let form = b.get(&new).await;
    form.assert(200, "All event types");
    assert!(
        form.body.contains(r#"name="filter" value="all" checked"#),
        "{}",
        form.body
    );
    assert_eq!(picker_box(&form, "user.created"), Some(false));
    assert_eq!(picker_box(&form, "invoice.paid"), Some(false));
    assert!(form.body.contains("About invoice.paid"));
    let csrf = form.csrf();

    let none = b
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/a"),
                ("filter", "some"),
            ],
        )
        .await;
    none.assert(
        422,
        "check at least one event type, or choose All event types",
    );
    let made = b
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/a"),
                ("filter", "some"),
                ("event_types", "user.created"),
                ("event_types", "invoice.paid"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let ep_path = made.location().split('?').next().expect("path").to_owned();
    let ep_id = ep_path.rsplit('/').next().expect("id").to_owned();
    let (_, ep) = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{ep_id}")).await;
    assert_eq!(ep["filterTypes"], json!(["user.created", "invoice.paid"]));
    b.get(&ep_path).await.assert(
        200,
        r#"id="endpoint-event-types"><span class="mono">user.created</span>, <span class="mono">invoice.paid</span>"#,
    );

    // Archived after the endpoint chose it: still shown and checked on its form, kept on save;
    // not offered to a new endpoint, and refused there.
    reqwest::Client::new()
        .delete(format!("{}/api/v1/event-type/invoice.paid", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("archive");
    let edit = b.get(&format!("{ep_path}/edit")).await;
    assert_eq!(
        picker_box(&edit, "invoice.paid"),
        Some(true),
        "{}",
        edit.body
    );
    assert!(
        edit.body
            .contains(r#"<span class="badge disabled">archived</span>"#)
    );
    assert!(edit.body.contains(r#"name="filter" value="some" checked"#));
    let saved = b
        .post(
            &format!("{ep_path}/edit"),
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/a"),
                ("filter", "some"),
                ("event_types", "invoice.paid"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let (_, ep) = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{ep_id}")).await;
    assert_eq!(ep["filterTypes"], json!(["invoice.paid"]));
    let form = b.get(&new).await;
    assert_eq!(picker_box(&form, "invoice.paid"), None);
    let refused = b
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/b"),
                ("filter", "some"),
                ("event_types", "invoice.paid"),
            ],
        )
        .await;
    refused.assert(422, "these event types do not exist: invoice.paid");

    // "All event types" clears the filter, whatever is left checked.
    let saved = b
        .post(
            &format!("{ep_path}/edit"),
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/a"),
                ("filter", "all"),
                ("event_types", "user.created"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let (_, ep) = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{ep_id}")).await;
    assert_eq!(ep["filterTypes"], Value::Null);
    b.get(&ep_path)
        .await
        .assert(200, r#"id="endpoint-event-types">All event types"#);
}

#[tokio::test]
async fn the_portal_offers_only_live_event_types_in_the_customers_words() {
    let app = spawn_app().await;
    let mut tenant = Browser::new(&app);
    let key = tenant.sign_up("Acme", "ops@acme.example").await;
    for name in ["order.paid", "order.refunded", "internal.audit"] {
        api(
            &app,
            &key,
            "/event-type",
            json!({"name": name, "description": ""}),
        )
        .await;
    }
    let a = api(&app, &key, "/app", json!({"name": "Shop"})).await;
    let app_id = a["id"].as_str().expect("id").to_owned();
    // An endpoint that chose a type the tenant archives afterwards.
    let ep = api(
        &app,
        &key,
        &format!("/app/{app_id}/endpoint"),
        json!({"url": "http://127.0.0.1:9/old", "filterTypes": ["internal.audit"]}),
    )
    .await;
    let ep_id = ep["id"].as_str().expect("id").to_owned();
    reqwest::Client::new()
        .delete(format!("{}/api/v1/event-type/internal.audit", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("archive");
    // Another tenant's type is never offered.
    let mut other = Browser::new(&app);
    let other_key = other.sign_up("Other", "ops@other.example").await;
    api(
        &app,
        &other_key,
        "/event-type",
        json!({"name": "their.type", "description": ""}),
    )
    .await;

    let access = api(
        &app,
        &key,
        &format!("/auth/app-portal-access/{app_id}"),
        json!({}),
    )
    .await;
    let token = access["token"].as_str().expect("token");
    let mut customer = Browser::new(&app);
    let opened = customer
        .post_with(
            "/portal/session",
            &[("token", token)],
            &[("sec-fetch-site", "same-origin")],
        )
        .await;
    assert_eq!(opened.status, 303, "{}", opened.body);

    let new = format!("/portal/app/{app_id}/endpoint/new");
    let form = customer.get(&new).await;
    form.assert(200, "All event types");
    assert_eq!(picker_box(&form, "order.paid"), Some(false));
    assert_eq!(picker_box(&form, "order.refunded"), Some(false));
    assert_eq!(
        picker_box(&form, "internal.audit"),
        None,
        "archived: not offered"
    );
    assert_eq!(picker_box(&form, "their.type"), None, "another tenant's");
    assert!(
        !form.body.contains("/event-types"),
        "no dashboard link in the portal"
    );
    let csrf = form.csrf();

    // A type that is not offered (archived, another tenant's) is refused in plain words.
    for name in ["internal.audit", "their.type"] {
        let refused = customer
            .post(
                &new,
                &[
                    ("csrf", &csrf),
                    ("url", "http://127.0.0.1:9/new"),
                    ("filter", "some"),
                    ("event_types", name),
                ],
            )
            .await;
        refused.assert(
            422,
            &format!("{name} is not offered here. Check event types from the list"),
        );
        assert!(!refused.body.contains("/api/"), "{}", refused.body);
        assert!(!refused.body.contains("filterTypes"), "{}", refused.body);
    }
    let made = customer
        .post(
            &new,
            &[
                ("csrf", &csrf),
                ("url", "http://127.0.0.1:9/new"),
                ("filter", "some"),
                ("event_types", "order.paid"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let new_id = made
        .location()
        .split('?')
        .next()
        .and_then(|p| p.rsplit('/').next())
        .expect("id")
        .to_owned();
    let (_, ep) = api_get(&app, &key, &format!("/app/{app_id}/endpoint/{new_id}")).await;
    assert_eq!(ep["filterTypes"], json!(["order.paid"]));

    // The older endpoint's archived choice stays shown and checked, in the customer's words.
    let edit = customer
        .get(&format!("/portal/app/{app_id}/endpoint/{ep_id}/edit"))
        .await;
    assert_eq!(
        picker_box(&edit, "internal.audit"),
        Some(true),
        "{}",
        edit.body
    );
    assert!(edit.body.contains("no longer offered"));
}
