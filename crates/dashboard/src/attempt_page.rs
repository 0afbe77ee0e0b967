//! One attempt, explained: the request as sent, the response as kept, and in plain words what
//! happened and what comes next (the words are the domain's: `domain::attempt::explain`).

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use domain::Timestamp;
use domain::attempt::{
    AttemptFacts, BODY_KEPT_BYTES, DeliveryFacts, HeaderList, Reader, SentHeaders, StatusRules,
    explain,
};
use domain::portal::Capability;

use crate::error::PageError;
use crate::session::{self, Session, SessionKind};
use crate::views;

/// A header line of the page; `note` says where a value shown comes from when it is not the
/// stored copy of what was sent.
pub struct HeaderRow {
    pub name: String,
    pub value: String,
    pub note: &'static str,
}

#[derive(Template)]
#[template(path = "attempt.html")]
pub struct AttemptPage {
    pub csrf: Option<String>,
    /// What the page's links start with: "" on the dashboard, `/portal` in the portal.
    pub root: &'static str,
    pub app_id: String,
    pub app_name: String,
    pub msg_id: String,
    pub number: i32,
    pub trigger: String,
    pub when: crate::when::When,
    pub duration: String,
    /// The endpoint's page, unless it was deleted.
    pub endpoint_id: Option<String>,
    pub outcome: String,
    pub ok: bool,
    pub happened: String,
    pub next: String,
    pub url: String,
    pub request_headers: Vec<HeaderRow>,
    /// The headers of this try were not kept (sent before hookd kept them, or never sent).
    pub request_headers_missing: bool,
    pub body_bytes: usize,
    pub status: Option<i32>,
    pub response_headers: Vec<HeaderRow>,
    pub response_headers_omitted: u32,
    pub response_body: Option<String>,
    pub body_kept_bytes: usize,
    /// The failure's cause in one line, as the dispatcher logs it, and the raw error text:
    /// for the tenant only (a customer reads the sentence).
    pub cause: Option<String>,
    pub error_detail: Option<String>,
}

/// What a customer without the capability to see header values sees instead of one.
const VALUE_HIDDEN: &str = "(hidden: this link does not show header values)";

/// GET `/app/{app}/msg/{msg}/attempt/{attempt}`.
pub async fn show(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let t = session.tenant;
    let app = session.app(store, &path.0).await?;
    let msg = session.message(store, app.id, &path.1).await?;
    let a = store.get_attempt(t, msg.id, &path.2).await?;
    let delivery = store
        .deliveries_of_message(t, msg.id)
        .await?
        .into_iter()
        // A message has one delivery per endpoint.
        .find(|d| d.endpoint_id == a.endpoint_id)
        .ok_or(PageError::NotFound)?;
    let endpoint = match store
        .get_endpoint(t, app.id, &a.endpoint_id.to_string())
        .await
    {
        Ok(ep) => Some(ep),
        Err(store::StoreError::NotFound { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let reader = match session.kind {
        SessionKind::Tenant { .. } => Reader::Tenant,
        SessionKind::Portal { .. } => Reader::Customer,
    };
    let fallback = match store.get_tenant(t).await?.status_preset {
        Some(p) => p,
        None => crate::service_config(&req)?.status_preset,
    };
    let rules = StatusRules {
        endpoint: match &endpoint {
            Some(ep) => ep.status_overrides()?,
            None => Default::default(),
        },
        fallback,
    };
    let explained = explain(
        &AttemptFacts {
            url: &a.url,
            status: a.status_code.and_then(|c| u16::try_from(c).ok()),
            error: a.error_kind,
            error_detail: a.error_detail.as_deref(),
            classification: a.classification,
            duration_ms: a.duration_ms,
        },
        &DeliveryFacts {
            state: delivery.state,
            attempt_count: delivery.attempt_count,
            next_attempt_at: Timestamp::from_millis(delivery.next_attempt_at),
            latest: a.attempt_number == delivery.attempt_count,
        },
        &rules,
        reader,
        Timestamp::now(),
    );

    let unreadable = |e: domain::attempt::UnreadableHeaders| {
        PageError::Store(store::StoreError::Corrupt(format!(
            "attempt {}: unreadable headers: {e}",
            a.id
        )))
    };
    let msg_id = msg.id.to_string();
    let sent = a
        .request_headers
        .as_deref()
        .map(|stored| {
            SentHeaders::shown(
                stored,
                a.attempt_number,
                &msg_id,
                Timestamp::from_millis(a.started_at),
            )
        })
        .transpose()
        .map_err(unreadable)?;
    let mut request_headers = Vec::new();
    if let Some(sent) = &sent {
        request_headers.push(HeaderRow {
            name: "content-type".into(),
            value: "application/json".into(),
            note: "",
        });
        request_headers.extend(sent.headers.iter().map(|(name, value)| HeaderRow {
            name: name.clone(),
            value: value.clone(),
            note: "",
        }));
        if let Some(ep) = &endpoint {
            request_headers.extend(endpoint_headers(store, &session, ep)?);
        }
    }
    let received = a
        .response_headers
        .as_deref()
        .map(HeaderList::from_stored)
        .transpose()
        .map_err(unreadable)?
        .unwrap_or_default();
    let page = AttemptPage {
        csrf: Some(session.csrf.clone()),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        msg_id,
        number: a.attempt_number,
        trigger: a.trigger.to_string(),
        when: crate::when::When::at_ms(a.started_at),
        duration: domain::attempt::duration_words(std::time::Duration::from_millis(
            a.duration_ms.max(0) as u64,
        )),
        endpoint_id: endpoint.as_ref().map(|e| e.id.to_string()),
        outcome: views::AttemptRow::of(&a).outcome,
        ok: a.classification == domain::classify::Verdict::Success,
        happened: explained.happened,
        next: explained.next,
        url: a.url.clone(),
        request_headers_missing: sent.is_none(),
        request_headers,
        body_bytes: msg.payload.len(),
        status: a.status_code,
        response_headers: received
            .headers
            .into_iter()
            .map(|(name, value)| HeaderRow {
                name,
                value,
                note: "",
            })
            .collect(),
        response_headers_omitted: received.omitted,
        response_body: a.response_excerpt.clone(),
        body_kept_bytes: BODY_KEPT_BYTES,
        cause: (reader == Reader::Tenant)
            .then(|| {
                domain::attempt::failure_cause(&a.url, a.error_kind, a.error_detail.as_deref())
            })
            .flatten(),
        error_detail: (reader == Reader::Tenant)
            .then(|| a.error_detail.clone())
            .flatten(),
    };
    Ok(views::render(StatusCode::OK, &page)?)
}

/// The endpoint's own headers, as set now (they are not stored with each attempt): values
/// only for a session that may see them, and never a credential.
fn endpoint_headers(
    store: &store::Store,
    session: &Session,
    ep: &store::entities::endpoint::Model,
) -> Result<Vec<HeaderRow>, PageError> {
    const NOW: &str = "the endpoint's header, as set now";
    let see = session.can(Capability::ViewEndpointSecret);
    let auth = store.endpoint_auth(ep)?;
    let mut rows: Vec<HeaderRow> = store
        .endpoint_headers(ep)?
        .into_iter()
        // The endpoint's authentication replaces a custom header of that name when it sends.
        .filter(|(k, _)| auth.is_none() || !k.eq_ignore_ascii_case("authorization"))
        .map(|(name, value)| HeaderRow {
            name,
            value: if see { value } else { VALUE_HIDDEN.to_owned() },
            note: NOW,
        })
        .collect();
    if auth.is_some() {
        rows.push(HeaderRow {
            name: "authorization".into(),
            value: "(a credential: never shown)".into(),
            note: "from the endpoint's authentication",
        });
    }
    Ok(rows)
}
