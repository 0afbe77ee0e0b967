//! An application's messages: the listing (event-type filter, keyset paging) and a message's
//! detail with every delivery and attempt, and the actions on one delivery: resend, and replay
//! everything that failed since this message.
//!
//! Each page is a bounded number of queries: the detail page loads the message's deliveries,
//! its attempts and the application's endpoints in one query each and groups them in memory.

use std::collections::HashMap;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::Timestamp;
use domain::delivery::DeliveryState;
use domain::ids::EndpointId;
use domain::jobs::EndpointJob;
use serde::Deserialize;
use store::entities::endpoint;
use store::{AttemptFilter, ListParams, MessageFilter};

use crate::auth::see_other;
use crate::endpoints::job_notice;
use crate::error::PageError;
use crate::session::CsrfForm;
use crate::session::{self, Session};
use crate::views::{
    self, AttemptRow, DeliveriesFragment, DeliveryView, MessageDetail, MessageRow, MessagesPage,
};
use crate::when::{TzOffset, When};

const MESSAGES_PER_PAGE: u64 = 50;
/// The most delivery statuses one page of the log loads (50 messages × 20 endpoints); beyond
/// it the page says some are left out.
const STATUSES_PER_PAGE: u64 = 1_000;
/// Attempts loaded for one message (the store's largest page).
const ATTEMPTS_PER_MESSAGE: u64 = 250;

#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    event_type: String,
    /// A delivery state: messages with at least one delivery in it.
    #[serde(default)]
    status: String,
    /// `datetime-local` text (at `tz`): messages created at or after.
    #[serde(default)]
    since: String,
    /// `datetime-local` text (at `tz`): messages created before.
    #[serde(default)]
    until: String,
    /// The browser's offset from UTC in minutes (static/ui.js sets it): the range's times and
    /// "Today" are read at it. Empty: UTC.
    #[serde(default)]
    tz: String,
    /// A message id or an `eventId`.
    #[serde(default)]
    q: String,
    /// A tag (the sources page links with `source-{name}`: the events a source received).
    #[serde(default)]
    tag: String,
    /// An endpoint id: that endpoint's log (messages with a delivery to it, and its status).
    #[serde(default)]
    endpoint: String,
    /// A quick range ([`RANGE_PRESETS`]), read at each request: replaces `since` and `until`.
    #[serde(default)]
    range: String,
    #[serde(default)]
    iterator: Option<String>,
}

/// The quick ranges beside the exact one: (value, label).
pub const RANGE_PRESETS: [(&str, &str); 3] = [
    ("1h", "Last hour"),
    ("today", "Today"),
    ("7d", "Last 7 days"),
];

/// Where a quick range starts, at `now`; "today" is the day at the browser's offset. None for
/// an unknown one.
fn range_start(preset: &str, now: Timestamp, tz: TzOffset) -> Option<Timestamp> {
    const HOUR: i64 = 3_600_000;
    let ms = now.as_millis();
    let start = match preset {
        "1h" => ms - HOUR,
        "today" => return Some(tz.start_of_day(now)),
        "7d" => ms - 7 * 24 * HOUR,
        _ => return None,
    };
    Some(Timestamp::from_millis(start))
}

/// The status filter's choices: (value, label).
pub const STATUS_CHOICES: [(&str, &str); 6] = [
    ("failed", "Dead (failed for good)"),
    ("pending", "Waiting to retry"),
    ("sending", "Being sent"),
    ("succeeded", "Delivered"),
    ("skipped", "Skipped"),
    ("paused", "Paused (endpoint disabled)"),
];

/// GET `/app/{app}/msg`: newest first, 50 a page, filtered by event type, delivery status,
/// date range, id or eventId, and tag. A filter that cannot be read is named on the page, never
/// silently dropped.
pub async fn list(
    req: HttpRequest,
    session: Session,
    path: web::Path<String>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let app = session.app(store, &path).await?;
    let event_type = query.event_type.trim().to_owned();
    let status = query.status.trim().to_owned();
    let q = query.q.trim().to_owned();
    let tag = query.tag.trim().to_owned();
    let range = query.range.trim().to_owned();
    let mut problems = Vec::new();
    let tz = TzOffset::parse(&query.tz).unwrap_or_else(|| {
        problems.push("Your browser sent a time zone we cannot read; the times are in UTC.".into());
        TzOffset::UTC
    });
    let tz_text = match tz.minutes() {
        0 => String::new(),
        m => m.to_string(),
    };
    // One query: the endpoint filter's check, and the URLs the statuses name.
    let endpoints: HashMap<EndpointId, endpoint::Model> = store
        .list_endpoints_of_apps(session.tenant, std::slice::from_ref(&app.id))
        .await?
        .into_iter()
        .map(|e| (e.id, e))
        .collect();
    let scoped = match query.endpoint.trim() {
        "" => None,
        text => match parsed(text).and_then(|id| endpoints.get(&id)) {
            Some(ep) => Some(ep),
            None => {
                problems.push("That endpoint is not one of this application's.".to_owned());
                None
            }
        },
    };
    let (since, until) = if range.is_empty() {
        (query.since.trim().to_owned(), query.until.trim().to_owned())
    } else {
        match range_start(&range, Timestamp::now(), tz) {
            Some(start) => (tz.datetime_local(start), String::new()),
            None => {
                problems.push(format!("Unknown range “{range}”."));
                (String::new(), String::new())
            }
        }
    };
    let delivery_state = if status.is_empty() {
        None
    } else {
        match status.parse::<DeliveryState>() {
            Ok(s) => Some(s),
            Err(_) => {
                problems.push(format!("Unknown status “{status}”."));
                None
            }
        }
    };
    let mut time = |text: &str, what: &str| {
        if text.is_empty() {
            return None;
        }
        let t = tz.parse_datetime_local(text);
        if t.is_none() {
            problems.push(format!("{what} “{text}” is not a date and time."));
        }
        t
    };
    let after = time(&since, "From").map(|t| Timestamp::from_millis(t.as_millis() - 1));
    let before = time(&until, "To");
    if let (Some(a), Some(b)) = (after, before)
        && a.as_millis() + 1 >= b.as_millis()
    {
        problems.push("“From” must be before “To”.".to_owned());
    }
    let filter = MessageFilter {
        event_types: if event_type.is_empty() {
            Vec::new()
        } else {
            vec![event_type.clone()]
        },
        after,
        before,
        delivery_state,
        id_or_event_id: (!q.is_empty()).then(|| q.clone()),
        tag: (!tag.is_empty()).then(|| tag.clone()),
        endpoint: scoped.map(|ep| ep.id),
        ..Default::default()
    };
    let params = ListParams {
        limit: MESSAGES_PER_PAGE,
        iterator: query.iterator.clone().filter(|i| !i.is_empty()),
        ascending: false,
        walk_window: 0,
    };
    let page = if problems.is_empty() {
        store
            .list_messages(session.tenant, app.id, &filter, &params)
            .await?
    } else {
        store::Page::empty()
    };
    let msg_ids: Vec<_> = page.data.iter().map(|m| m.id).collect();
    let deliveries = store
        .deliveries_of_messages(session.tenant, &msg_ids, filter.endpoint, STATUSES_PER_PAGE)
        .await?;
    let statuses_cut = deliveries.len() as u64 >= STATUSES_PER_PAGE;
    let now = Timestamp::now();
    let mut statuses: HashMap<_, Vec<views::StatusCell>> = HashMap::new();
    for d in &deliveries {
        let url = match scoped {
            Some(_) => None,
            None => Some(
                endpoints
                    .get(&d.endpoint_id)
                    .map_or_else(|| format!("{} (deleted)", d.endpoint_id), |e| e.url.clone()),
            ),
        };
        statuses
            .entry(d.msg_id)
            .or_default()
            .push(views::StatusCell::of(d, url, now));
    }
    let endpoint_id = scoped.map(|ep| ep.id.to_string()).unwrap_or_default();
    let typed_range: [(&str, &str); 2] = if range.is_empty() {
        [("since", since.as_str()), ("until", until.as_str())]
    } else {
        [("range", range.as_str()), ("until", "")]
    };
    let filters: Vec<(&str, &str)> = [
        ("endpoint", endpoint_id.as_str()),
        ("event_type", event_type.as_str()),
        ("status", status.as_str()),
        ("q", q.as_str()),
        ("tag", tag.as_str()),
        ("tz", tz_text.as_str()),
    ]
    .into_iter()
    .chain(typed_range)
    .filter(|(_, v)| !v.is_empty())
    .collect();
    // The endpoint scope is where the log is, and the time zone how it reads: not filters.
    let filtered = filters
        .iter()
        .any(|(k, _)| !matches!(*k, "endpoint" | "tz"));
    let link = |pairs: &mut dyn Iterator<Item = (&str, &str)>| {
        let parts: Vec<String> = pairs
            .map(|(k, v)| format!("{k}={}", views::query_value(v)))
            .collect();
        if parts.is_empty() {
            format!("{}/app/{}/msg", session.root, app.id)
        } else {
            format!("{}/app/{}/msg?{}", session.root, app.id, parts.join("&"))
        }
    };
    let with = |extra: Option<(&str, &str)>| link(&mut filters.iter().copied().chain(extra));
    let newest = with(None);
    let older = match (&page.iterator, page.done) {
        (Some(it), false) => Some(with(Some(("iterator", it.as_str())))),
        _ => None,
    };
    // A quick range keeps every other filter and replaces the exact range.
    let presets = RANGE_PRESETS
        .iter()
        .map(|(value, label)| views::RangePreset {
            label,
            href: link(
                &mut filters
                    .iter()
                    .copied()
                    .filter(|(k, _)| !matches!(*k, "since" | "until" | "range"))
                    .chain([("range", *value)]),
            ),
            current: range == *value,
        })
        .collect();
    let clear = link(
        &mut filters
            .iter()
            .copied()
            .filter(|(k, _)| matches!(*k, "endpoint" | "tz")),
    );
    let view = MessagesPage {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name.clone(),
        messages: page
            .data
            .iter()
            .map(|m| MessageRow {
                id: m.id.to_string(),
                event_type: m.event_type.clone(),
                event_id: m.event_id.clone(),
                when: When::at_ms(m.created_at),
                statuses: statuses.remove(&m.id).unwrap_or_default(),
            })
            .collect(),
        endpoint_id,
        endpoint_url: scoped.map(|ep| ep.url.clone()),
        presets,
        clear,
        statuses_cut,
        event_type,
        status,
        since,
        until,
        tz: tz.minutes(),
        tz_label: tz.label(),
        q,
        tag,
        statuses: STATUS_CHOICES.to_vec(),
        problems,
        filtered,
        older,
        paged: params.iterator.is_some(),
        newest,
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

/// GET `/app/{app}/msg/{msg}`.
pub async fn detail(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let app = session.app(store, &path.0).await?;
    let msg = session.message(store, app.id, &path.1).await?;
    let endpoints = endpoints_of(store, &session, app.id).await?;
    let deliveries = deliveries_of(store, &session, app.id, msg.id, &endpoints).await?;

    let notice = match (query.get("done").map(String::as_str), query.get("ep")) {
        (Some("resent"), Some(ep_id)) => {
            parsed(ep_id).and_then(|id| endpoints.get(&id)).map(|ep| {
                format!(
                    "Resend queued: this message goes to {} again now, as a manual attempt.",
                    ep.url
                )
            })
        }
        _ => match (
            query.get("job"),
            query
                .get("ep")
                .and_then(|e| parsed(e))
                .and_then(|id| endpoints.get(&id)),
        ) {
            (Some(job), Some(ep)) => job_notice(store, &session, ep, job, "Replay").await?,
            _ => None,
        },
    };

    let page = MessageDetail {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        id: msg.id.to_string(),
        event_type: msg.event_type,
        event_id: msg.event_id,
        when: When::at_ms(msg.created_at),
        payload: views::payload_view(&msg.payload),
        notice,
        deliveries,
    };
    Ok(views::render(StatusCode::OK, &page)?)
}

/// GET `/app/{app}/msg/{msg}/deliveries`: the message page's deliveries alone, for polling.
pub async fn deliveries(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let app = session.app(store, &path.0).await?;
    let msg = session.message(store, app.id, &path.1).await?;
    let endpoints = endpoints_of(store, &session, app.id).await?;
    let view = deliveries_of(store, &session, app.id, msg.id, &endpoints).await?;
    Ok(views::render(StatusCode::OK, &view)?)
}

/// The application's endpoints by id (one query): the URLs a message page names.
async fn endpoints_of(
    store: &store::Store,
    session: &Session,
    app: domain::ids::ApplicationId,
) -> Result<HashMap<EndpointId, endpoint::Model>, PageError> {
    Ok(store
        .list_endpoints_of_apps(session.tenant, std::slice::from_ref(&app))
        .await?
        .into_iter()
        .map(|e| (e.id, e))
        .collect())
}

/// A message's deliveries and their attempts: two queries, grouped in memory.
async fn deliveries_of(
    store: &store::Store,
    session: &Session,
    app: domain::ids::ApplicationId,
    msg: domain::ids::MessageId,
    endpoints: &HashMap<EndpointId, endpoint::Model>,
) -> Result<DeliveriesFragment, PageError> {
    let t = session.tenant;
    let deliveries = store.deliveries_of_message(t, msg).await?;
    let attempts = store
        .list_attempts_by_message(
            t,
            app,
            msg,
            &AttemptFilter::default(),
            &ListParams::first(ATTEMPTS_PER_MESSAGE),
        )
        .await?;
    // Newest attempt first within each delivery, as listed. A message has one delivery per
    // endpoint, so its attempts are grouped by endpoint.
    let mut by_endpoint: HashMap<EndpointId, Vec<AttemptRow>> = HashMap::new();
    for a in &attempts.data {
        by_endpoint
            .entry(a.endpoint_id)
            .or_default()
            .push(AttemptRow::of(a));
    }
    let views = deliveries
        .iter()
        .map(|d| DeliveryView {
            endpoint_id: d.endpoint_id.to_string(),
            url: endpoints.get(&d.endpoint_id).map(|e| e.url.clone()),
            state: d.state.to_string(),
            class: views::state_class(d.state),
            next_attempt: (d.state == DeliveryState::Pending)
                .then(|| When::at_ms(d.next_attempt_at)),
            attempts: by_endpoint.remove(&d.endpoint_id).unwrap_or_default(),
        })
        .collect();
    Ok(DeliveriesFragment {
        csrf: Some(session.csrf.clone()),
        can: session.allowed(),
        root: session.root,
        app_id: app.to_string(),
        id: msg.to_string(),
        deliveries: views,
        more_attempts: !attempts.done,
    })
}

/// GET `/app/{app}/msg/{msg}/payload`: the payload exactly as sent, as a download.
pub async fn payload(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let app = session.app(store, &path.0).await?;
    let msg = session.message(store, app.id, &path.1).await?;
    let mut resp = HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((
            actix_web::http::header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{}.json\"", msg.id),
        ))
        .body(msg.payload);
    crate::error::harden(&mut resp);
    Ok(resp)
}

/// POST `/app/{app}/msg/{msg}/endpoint/{ep}/{action}`: `resend` (this message, to that
/// endpoint, now) or `replay` (every failed delivery to that endpoint since this message).
pub async fn act(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String, String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let t = session.tenant;
    let (app_id, msg_id, ep_id, action) = path.into_inner();
    if action != "resend" && action != "replay" {
        return Err(PageError::NotFound);
    }
    session.require(domain::portal::Capability::CreateAttempts)?;
    let app = session.app(store, &app_id).await?;
    let msg = session.message(store, app.id, &msg_id).await?;
    let ep = session.endpoint(store, app.id, &ep_id).await?;
    let page = format!("{}/app/{}/msg/{}", session.root, app.id, msg.id);
    if action == "resend" {
        let target = service::endpoints::Delivery {
            tenant: t,
            msg: &msg,
            ep: &ep,
        };
        service::endpoints::resend(store, crate::service_config(&req)?, target).await?;
        return Ok(see_other(&format!("{page}?done=resent&ep={}", ep.id)));
    }
    let bulk = crate::bulk::Bulk {
        kind: EndpointJob::Recover,
        since: Timestamp::from_millis(msg.created_at),
        from_message: Some(msg.id.to_string()),
    };
    crate::bulk::preview(&req, session, app, ep, bulk).await
}

/// An endpoint id from a query parameter; anything else names no endpoint.
fn parsed(text: &str) -> Option<EndpointId> {
    EndpointId::parse(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_ranges_start_an_hour_ago_at_the_browsers_midnight_and_a_week_ago() {
        // 2024-05-01T13:45:00Z
        let now = Timestamp::from_millis(1_714_571_100_000);
        let utc = TzOffset::UTC;
        let start = |p, tz: TzOffset| range_start(p, now, tz).map(|t| utc.datetime_local(t));
        assert_eq!(start("1h", utc).as_deref(), Some("2024-05-01T12:45"));
        assert_eq!(start("today", utc).as_deref(), Some("2024-05-01T00:00"));
        assert_eq!(start("7d", utc).as_deref(), Some("2024-04-24T13:45"));
        assert_eq!(start("1y", utc), None);
        // In New York (UTC−4) today began at 04:00 UTC; in Tokyo (UTC+9), at 15:00 UTC the
        // day before.
        let ny = TzOffset::parse("-240").unwrap();
        assert_eq!(start("today", ny).as_deref(), Some("2024-05-01T04:00"));
        assert_eq!(start("1h", ny).as_deref(), Some("2024-05-01T12:45"));
        let tokyo = TzOffset::parse("540").unwrap();
        assert_eq!(start("today", tokyo).as_deref(), Some("2024-04-30T15:00"));
    }
}
