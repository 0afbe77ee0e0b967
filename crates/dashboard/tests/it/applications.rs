//! An application's page: rename, portal links (create, list, revoke, expire all), delete.

use crate::helpers::{Browser, app_with_endpoint, spawn_app};

const SAME_ORIGIN: &[(&str, &str)] = &[("sec-fetch-site", "same-origin")];

/// The token of the link the page shows after "Create portal link".
fn new_link_token(body: &str) -> String {
    let marker = "/portal/#token=";
    let start = body.find(marker).expect("a new link on the page") + marker.len();
    let len = body[start..].find('<').expect("end of the link");
    body[start..start + len].to_owned()
}

/// Opens the portal with a link's token, as the portal's landing page does.
async fn open(c: &mut Browser, token: &str) -> crate::helpers::Page {
    c.post_with("/portal/session", &[("token", token)], SAME_ORIGIN)
        .await
}

/// The ids of the listed portal links, newest first.
fn link_ids(body: &str) -> Vec<String> {
    body.split(r#"<tr id="link-"#)
        .skip(1)
        .map(|s| s[..s.find('"').expect("id end")].to_owned())
        .collect()
}

#[tokio::test]
async fn rename_then_delete_an_application_confirmed_by_its_name() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let page_path = format!("/app/{app_id}");
    let home = b.get("/").await;
    home.assert(200, &format!(r#"<a href="/app/{app_id}">Shop</a>"#));
    let page = b.get(&page_path).await;
    page.assert(200, "Delete this application");
    assert!(
        page.body.contains("deletes its 1 endpoint,"),
        "{}",
        page.body
    );
    let csrf = page.csrf();

    // A bad name is refused under its field, and nothing changes.
    let rename = format!("{page_path}/rename");
    let bad = b.post(&rename, &[("csrf", &csrf), ("name", "  ")]).await;
    bad.assert(
        422,
        r#"aria-invalid="true" aria-describedby="app-name-error""#,
    );
    assert!(bad.body.contains("Give the application a name"));
    b.post(&rename, &[("csrf", "forged"), ("name", "X")])
        .await
        .assert(403, "did not come from this dashboard");
    let r = b
        .post(&rename, &[("csrf", &csrf), ("name", "Shop EU")])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location())
        .await
        .assert(200, "Application renamed.");
    let got = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_id}", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("get")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(got["name"], "Shop EU");

    // Delete asks for the name; a wrong one is refused under the field.
    let delete = format!("{page_path}/delete");
    let wrong = b
        .post(&delete, &[("csrf", &csrf), ("confirm_name", "Shop")])
        .await;
    wrong.assert(422, "Type the application&#39;s name, Shop EU, exactly");
    assert!(
        wrong
            .body
            .contains(r#"aria-describedby="confirm-name-error""#)
    );
    let r = b
        .post(&delete, &[("csrf", &csrf), ("confirm_name", "Shop EU")])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location())
        .await
        .assert(200, "Application Shop EU deleted");
    assert_eq!(b.get(&page_path).await.status, 404);
    let gone = reqwest::Client::new()
        .get(format!("{}/api/v1/app/{app_id}", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .expect("get");
    assert_eq!(gone.status(), 404);
}

#[tokio::test]
async fn portal_links_are_listed_revoked_one_by_one_or_all_and_stay_the_tenants() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let key = b.sign_up("Acme", "ops@acme.example").await;
    let (app_id, _) = app_with_endpoint(&app, &key, "http://127.0.0.1:9/hook").await;
    let page_path = format!("/app/{app_id}");
    let page = b.get(&page_path).await;
    page.assert(200, "No portal links yet.");
    let csrf = page.csrf();

    // Created: shown once, with its copy button; listed with its expiry.
    let portal = format!("{page_path}/portal");
    let made = b.post(&portal, &[("csrf", &csrf), ("copy", "1")]).await;
    made.assert(200, r#"data-copy="portal-link""#);
    let token = new_link_token(&made.body);
    let ro = b
        .post(
            &portal,
            &[("csrf", &csrf), ("copy", "1"), ("read_only", "1")],
        )
        .await;
    let ro_token = new_link_token(&ro.body);
    let listed = b.get(&page_path).await;
    assert!(
        !listed.body.contains(&token),
        "an old link is never shown again"
    );
    listed.assert(200, "cannot be shown or copied again");
    let ids = link_ids(&listed.body);
    assert_eq!(ids.len(), 2, "{}", listed.body);
    assert!(listed.body.contains("Read-only"));
    assert_eq!(listed.body.matches(">Active</span>").count(), 2);

    // The customer's link works until it is revoked, then says it is not valid.
    let mut customer = Browser::new(&app);
    assert_eq!(open(&mut customer, &token).await.status, 303);
    customer
        .get(&format!("/portal/app/{app_id}"))
        .await
        .assert(200, "hook");
    // The newest link (read-only) is listed first; revoke the older one, the customer's.
    let revoke = format!("{page_path}/portal/{}/revoke", ids[1]);
    let r = b.post(&revoke, &[("csrf", &csrf)]).await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location()).await.assert(200, "Portal link revoked");
    customer
        .get(&format!("/portal/app/{app_id}"))
        .await
        .assert(401, "This link is not valid");

    // Another tenant can neither see nor revoke these links.
    let mut stranger = Browser::new(&app);
    let other_key = stranger.sign_up("Other", "ops@other.example").await;
    let (other_app, _) = app_with_endpoint(&app, &other_key, "http://127.0.0.1:9/o").await;
    let their_csrf = stranger.get("/").await.csrf();
    assert_eq!(stranger.get(&page_path).await.status, 404);
    let theirs = format!("/app/{other_app}/portal/{}/revoke", ids[0]);
    let r = stranger.post(&theirs, &[("csrf", &their_csrf)]).await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = stranger
        .post(
            &format!("{page_path}/portal/expire-all"),
            &[("csrf", &their_csrf)],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let mut reader = Browser::new(&app);
    assert_eq!(open(&mut reader, &ro_token).await.status, 303);

    // Expire all: the remaining live link stops too.
    let r = b
        .post(
            &format!("{page_path}/portal/expire-all"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    b.get(r.location())
        .await
        .assert(200, "1 portal link expired");
    reader
        .get(&format!("/portal/app/{app_id}"))
        .await
        .assert(401, "This link is not valid");
    let after = b.get(&page_path).await;
    assert_eq!(after.body.matches(">Active</span>").count(), 0);
    assert_eq!(after.body.matches(">Revoked</span>").count(), 1);
    assert_eq!(after.body.matches(">Expired</span>").count(), 1);
}
