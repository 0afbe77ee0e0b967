//! The overview (applications, their endpoints and badges) and the endpoint page with its
//! actions: enable, disable, recover failed messages since a date, rotate the secret, send a
//! test event; the endpoint's dead letters; the fragments the pages poll.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use domain::Timestamp;
use domain::endpoint_auth::EndpointAuth;
use domain::ids::{ApplicationId, EndpointId};
use domain::jobs::{EndpointJob, JobKind, JobState};
use domain::portal::Capability;
use serde::Deserialize;
use store::entities::{application, endpoint};
use store::{AttemptFilter, EndpointChanges, ListParams, Store};

use crate::auth::{base_url, see_other};
use crate::charts::ChartRange;
use crate::error::PageError;
use crate::manage::{self, TEST_EVENT_TYPE};
use crate::session::{self, Session};
use crate::views::{
    self, AppView, AtRiskRow, AttemptRow, ChartRangeLink, ChartsFragment, DeadLetterRow,
    DeadLettersPage, EndpointLive, EndpointPage, EndpointRow, EndpointView, Overview, OverviewApps,
};
use crate::when::{TzOffset, When};

/// Applications on the overview, and endpoints shown per application.
const OVERVIEW_APPS: u64 = 50;
/// Endpoints at risk of the auto-disable listed on the overview.
const AT_RISK_SHOWN: u64 = 20;
const ENDPOINTS_PER_APP: usize = 50;
const DEAD_LETTERS_PER_PAGE: u64 = 50;
const RECENT_ATTEMPTS: u64 = 25;
/// Event types offered for an endpoint's test event.
const EXAMPLE_TYPES: u64 = 100;

/// What the overview shows besides the stored state.
#[derive(Default)]
pub struct OverviewExtra {
    pub notice: Option<String>,
    pub error: Option<String>,
    /// The new-application name as typed, when it was refused.
    pub app_name: String,
    /// The charts' range (`range`; empty: the last 24 hours).
    pub chart_range: String,
}

/// GET `/`.
pub async fn overview(
    req: HttpRequest,
    session: Session,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, PageError> {
    let notice = match (query.get("created"), query.get("deleted")) {
        (Some(id), _) => Some(format!(
            "Application created ({id}). Add an endpoint to it below."
        )),
        (None, Some(name)) => Some(format!(
            "Application {name} deleted, with its endpoints and messages."
        )),
        (None, None) => None,
    };
    let extra = OverviewExtra {
        notice,
        chart_range: query.get("range").cloned().unwrap_or_default(),
        ..OverviewExtra::default()
    };
    overview_page(&req, session, StatusCode::OK, extra).await
}

/// An application's endpoints with their badges.
fn app_view(app: application::Model, eps: Vec<endpoint::Model>, now: Timestamp) -> AppView {
    AppView {
        endpoints: eps
            .iter()
            .take(ENDPOINTS_PER_APP)
            .map(|e| EndpointRow::of(e, now))
            .collect(),
        more_endpoints: eps.len() > ENDPOINTS_PER_APP,
        id: app.id.to_string(),
        name: app.name,
        uid: app.uid,
    }
}

pub async fn overview_page(
    req: &HttpRequest,
    session: Session,
    status: StatusCode,
    extra: OverviewExtra,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(req)?;
    let tenant = store.get_tenant(session.tenant).await?;
    let live = overview_apps(req, store, &session).await?;
    let range = ChartRange::parse(&extra.chart_range);
    let charts = charts_of(store, &session, None, range, Timestamp::now()).await?;
    let at_risk = at_risk(req, store, &session).await?;
    let page = Overview {
        at_risk,
        csrf: Some(session.csrf),
        root: session.root,
        tenant_name: tenant.name,
        apps: live.apps,
        more_apps: live.more_apps,
        attention: live.attention,
        base_url: live.base_url,
        notice: extra.notice,
        error: extra.error,
        app_name: extra.app_name,
        charts,
    };
    Ok(views::render(status, &page)?)
}

/// The overview's endpoints at risk: enabled ones in a failure streak, the oldest first, with
/// the time left before the auto-disable (`endpoint_disable_after`).
async fn at_risk(
    req: &HttpRequest,
    store: &Store,
    session: &Session,
) -> Result<Vec<AtRiskRow>, PageError> {
    let disable_after = crate::service_config(req)?.disable_after;
    let now = Timestamp::now();
    let eps = store
        .endpoints_at_risk(session.tenant, AT_RISK_SHOWN)
        .await?;
    Ok(eps
        .into_iter()
        .filter_map(|ep| {
            let since = ep.failing_since?;
            let at = domain::health::disable_at(&store::health_of(&ep), disable_after)?;
            let left = at.since(now);
            Some(AtRiskRow {
                id: ep.id.to_string(),
                app_id: ep.app_id.to_string(),
                url: ep.url,
                failing_since: When::at_ms(since),
                time_left: if left.is_zero() {
                    "due now".to_owned()
                } else {
                    domain::health::time_left(left)
                },
                disable_at: When::at_ms(at.as_millis()),
            })
        })
        .collect())
}

/// The overview's live part: applications, their endpoints and badges. Two queries however
/// many applications: their endpoints come in one listing.
async fn overview_apps(
    req: &HttpRequest,
    store: &Store,
    session: &Session,
) -> Result<OverviewApps, PageError> {
    let t = session.tenant;
    let now = Timestamp::now();
    let apps = store
        .list_applications(t, Default::default(), &ListParams::first(OVERVIEW_APPS))
        .await?;
    let app_ids: Vec<ApplicationId> = apps.data.iter().map(|a| a.id).collect();
    let mut by_app: HashMap<ApplicationId, Vec<endpoint::Model>> = HashMap::new();
    for ep in store.list_endpoints_of_apps(t, &app_ids).await? {
        by_app.entry(ep.app_id).or_default().push(ep);
    }
    let views: Vec<AppView> = apps
        .data
        .into_iter()
        .map(|app| {
            let eps = by_app.remove(&app.id).unwrap_or_default();
            app_view(app, eps, now)
        })
        .collect();
    let attention = views
        .iter()
        .flat_map(|a| &a.endpoints)
        .filter(|e| e.status.needs_attention())
        .count();
    Ok(OverviewApps {
        csrf: Some(session.csrf.clone()),
        apps: views,
        more_apps: !apps.done,
        attention,
        base_url: base_url(req),
    })
}

/// GET `/overview/apps`: the overview's applications and badges alone, for polling.
pub async fn apps_fragment(req: HttpRequest, session: Session) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let view = overview_apps(&req, store, &session).await?;
    Ok(views::render(StatusCode::OK, &view)?)
}

/// The endpoint page's live part (see [`EndpointLive`]): the endpoint as just loaded, its
/// deliveries by state (the same counts as the API's `GET …/endpoint/{id}/stats`, from the same
/// query) and its newest attempts.
async fn endpoint_live(
    req: &HttpRequest,
    store: &Store,
    session: &Session,
    app_id: ApplicationId,
    ep: &endpoint::Model,
    now: Timestamp,
) -> Result<EndpointLive, PageError> {
    let s = store
        .endpoint_stats(session.tenant, ep.id, None, None)
        .await?;
    let attempts = store
        .list_attempts_by_endpoint(
            session.tenant,
            ep.app_id,
            ep.id,
            &AttemptFilter::default(),
            &ListParams::first(RECENT_ATTEMPTS),
        )
        .await?;
    Ok(EndpointLive {
        root: session.root,
        app_id: app_id.to_string(),
        ep_id: ep.id.to_string(),
        ep: EndpointView::of(ep, now, &crate::service_config(req)?.breaker),
        states: [
            ("succeeded", s.success, "ok"),
            ("pending", s.pending, "muted"),
            ("sending", s.sending, "muted"),
            ("failed", s.fail, "bad"),
            ("canceled", s.canceled, "muted"),
        ]
        .into_iter()
        .map(|(label, n, class)| (label, crate::charts::group(n), class))
        .collect(),
        attempts: attempts.data.iter().map(AttemptRow::of).collect(),
        more_attempts: !attempts.done,
    })
}

/// GET `/app/{app}/endpoint/{ep}/attempts`: the endpoint page's live part, for polling.
pub async fn attempts(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let view = endpoint_live(&req, store, &session, app.id, &ep, Timestamp::now()).await?;
    Ok(views::render(StatusCode::OK, &view)?)
}

pub async fn detail(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    query: web::Query<HashMap<String, String>>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    // `done` says what the last action did; `job` is the recovery just started. Other
    // parameters are ignored: this is a page, not an API.
    let done = query.get("done").map(String::as_str);
    let notice = match (done, query.get("job")) {
        (Some("enabled"), _) => {
            Some("Endpoint enabled: new messages will be delivered to it again.".to_owned())
        }
        (Some("disabled"), _) => {
            Some("Endpoint disabled: it gets no new deliveries until you enable it.".to_owned())
        }
        (Some("created"), _) => Some(
            "Endpoint created. Reveal its signing secret below to verify our signatures."
                .to_owned(),
        ),
        (Some("saved"), _) => Some("Endpoint saved.".to_owned()),
        (Some("auth"), _) => Some("Authentication saved: the next deliveries carry it.".to_owned()),
        (Some("rotated"), _) => Some(
            "Secret rotated: new deliveries are signed with the new secret; the previous one \
             also signs them for 24 hours."
                .to_owned(),
        ),
        (Some("test"), _) => query
            .get("msg")
            .map(|m| format!("Test event {m} queued for delivery to this endpoint.")),
        (_, Some(job)) => job_notice(store, &session, &ep, job, "Recovery").await?,
        _ => None,
    };
    let now = Timestamp::now();
    let live = endpoint_live(&req, store, &session, app.id, &ep, now).await?;
    let range = ChartRange::parse(query.get("range").map_or("", String::as_str));
    let charts = charts_of(store, &session, Some((app.id, ep.id)), range, now).await?;
    let example_types = store
        .list_event_types(session.tenant, false, &ListParams::first(EXAMPLE_TYPES))
        .await?
        .data
        .into_iter()
        .filter(|et| matches!(et.example(0), Ok(Some(_))))
        .map(|et| et.name)
        .collect();
    let public_key = store
        .active_secrets(session.tenant, ep.id, now)
        .await?
        .first()
        .and_then(|s| domain::signing::EndpointKey::parse(&s.secret).ok())
        .and_then(|k| k.public_key());
    let auth = auth_text(&store.endpoint_auth(&ep)?);
    let mtls = store.endpoint_mtls(&ep)?.is_some();
    let page = EndpointPage {
        can: session.allowed(),
        public_key,
        auth,
        mtls,
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        ep: live.ep.clone(),
        live,
        notice,
        since_default: TzOffset::UTC
            .datetime_local(Timestamp::from_millis(now.as_millis() - 24 * 3600 * 1000)),
        charts,
        example_types,
        test_event_type: TEST_EVENT_TYPE,
    };
    Ok(views::render(StatusCode::OK, &page)?)
}

/// The tenant's attempts (or one endpoint's) over `range` as charts: one query.
async fn charts_of(
    store: &Store,
    session: &Session,
    endpoint: Option<(ApplicationId, EndpointId)>,
    range: ChartRange,
    now: Timestamp,
) -> Result<ChartsFragment, PageError> {
    let bucket = Duration::from_secs(range.bucket_minutes() as u64 * 60);
    let since = Timestamp::from_millis(now.as_millis() - range.window().as_millis() as i64);
    let points = store
        .attempt_series(
            session.tenant,
            endpoint.map(|(_, ep)| ep),
            since,
            now,
            bucket,
        )
        .await?;
    // The card alone (polled, and swapped in by the range switch) and the page it is on,
    // which keeps the range in its address.
    let (fragment, page) = match endpoint {
        Some((app, ep)) => {
            let page = format!("{}/app/{app}/endpoint/{ep}", session.root);
            (format!("{page}/charts"), page)
        }
        None => ("/overview/charts".to_owned(), "/".to_owned()),
    };
    debug_assert!(
        points.len() <= range.max_points(),
        "{range:?}: {}",
        points.len()
    );
    Ok(ChartsFragment {
        charts: crate::charts::overview_charts(&points, range.bucket_minutes()),
        range,
        ranges: ChartRange::ALL
            .into_iter()
            .map(|r| ChartRangeLink {
                short: r.short(),
                label: r.label(),
                page: format!("{page}?range={}", r.as_str()),
                fragment: format!("{fragment}?range={}", r.as_str()),
                current: r == range,
            })
            .collect(),
        poll_url: format!("{fragment}?range={}", range.as_str()),
    })
}

#[derive(Deserialize)]
pub struct ChartQuery {
    #[serde(default)]
    range: String,
}

/// GET `/overview/charts`: the tenant's charts alone, for polling and the range switch.
pub async fn charts_fragment(
    req: HttpRequest,
    session: Session,
    query: web::Query<ChartQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let range = ChartRange::parse(&query.range);
    let view = charts_of(store, &session, None, range, Timestamp::now()).await?;
    Ok(views::render(StatusCode::OK, &view)?)
}

/// GET `/app/{app}/endpoint/{ep}/charts`: one endpoint's charts alone, for polling and the
/// range switch.
pub async fn endpoint_charts(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    query: web::Query<ChartQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let range = ChartRange::parse(&query.range);
    let view = charts_of(
        store,
        &session,
        Some((app.id, ep.id)),
        range,
        Timestamp::now(),
    )
    .await?;
    Ok(views::render(StatusCode::OK, &view)?)
}

/// What a recovery job of this endpoint has done so far: "Recovery started …" or, with
/// `label` "Replay", "Replay started: job …". `None` for another endpoint's or kind's job.
pub async fn job_notice(
    store: &Store,
    session: &Session,
    ep: &endpoint::Model,
    job_id: &str,
    label: &str,
) -> Result<Option<String>, PageError> {
    let job = match store.get_job(session.tenant, job_id).await {
        Ok(job) => job,
        Err(store::StoreError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let params: serde_json::Value = job.params()?;
    if job.kind != JobKind::EndpointRecover || params["endpointId"] != ep.id.to_string().as_str() {
        return Ok(None);
    }
    let since = params["since"].as_i64();
    let what = match since {
        Some(0) => "all failed messages".to_owned(),
        Some(ms) => format!("failed messages since {}", views::show_time(ms)),
        None => "failed messages since the chosen time".to_owned(),
    };
    let state = match job.state {
        JobState::Finished => format!("finished, {} failed messages queued again", job.progress),
        JobState::Failed => format!(
            "failed: {}",
            job.error.as_deref().unwrap_or("no reason recorded")
        ),
        JobState::Running | JobState::Canceled => job.state.to_string(),
    };
    Ok(Some(match label {
        "Replay" => format!("Replay started: job {} ({state}), for {what}.", job.id),
        _ => format!("{label} started for {what} (job {}: {state}).", job.id),
    }))
}

/// Wakes this process's dispatcher after something made deliveries due.
#[derive(Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    iterator: Option<String>,
    #[serde(default)]
    job: Option<String>,
}

/// GET `/app/{app}/endpoint/{ep}/dead`: the endpoint's failed deliveries, newest first, with
/// "Recover all".
pub async fn dead_letters(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let notice = match &query.job {
        Some(job) => job_notice(store, &session, &ep, job, "Recovery").await?,
        None => None,
    };
    let params = ListParams {
        limit: DEAD_LETTERS_PER_PAGE,
        iterator: query.iterator.clone().filter(|i| !i.is_empty()),
        ascending: false,
        walk_window: 0,
    };
    let page = store
        .list_endpoint_deliveries(
            session.tenant,
            &ep,
            Some(domain::delivery::DeliveryState::Failed),
            &store::MessageFilter::default(),
            &params,
        )
        .await?;
    let older = match (&page.iterator, page.done) {
        (Some(it), false) => Some(format!(
            "{}/app/{}/endpoint/{}/dead?iterator={}",
            session.root,
            app.id,
            ep.id,
            views::query_value(it)
        )),
        _ => None,
    };
    let rows = page
        .data
        .iter()
        .map(|(d, m)| DeadLetterRow {
            msg_id: m.id.to_string(),
            event_type: m.event_type.clone(),
            created: When::at_ms(m.created_at),
            attempts: d.attempt_count,
            last_outcome: match (d.last_status, &d.last_error) {
                (Some(code), _) => code.to_string(),
                (None, Some(kind)) => kind.clone(),
                (None, None) => "—".to_owned(),
            },
            last_attempt: d.last_attempt_at.map(When::at_ms),
        })
        .collect();
    let view = DeadLettersPage {
        can: session.allowed(),
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        ep_id: ep.id.to_string(),
        ep_url: ep.url,
        notice,
        rows,
        older,
        paged: params.iterator.is_some(),
    };
    Ok(views::render(StatusCode::OK, &view)?)
}

#[derive(Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    /// For `recover`: a `datetime-local` value, at the offset `tz` (minutes east of UTC, set
    /// by static/ui.js; empty: UTC).
    #[serde(default)]
    since: String,
    #[serde(default)]
    tz: String,
    /// The test event's type (empty: hookd's test event).
    #[serde(default)]
    event_type: String,
    /// For `auth`: `none`, `bearer`, `basic` or `oauth`, and the fields of that kind.
    #[serde(default)]
    auth_type: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    token_url: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    client_secret: String,
    /// `clientSecretBasic` or `clientSecretPost`.
    #[serde(default)]
    auth_method: String,
    /// Space separated.
    #[serde(default)]
    scopes: String,
    /// For `mtls`: the client certificate and key (PEM), and the receiver's CA (PEM, optional).
    /// Empty `identity`: remove mutual TLS.
    #[serde(default)]
    identity: String,
    #[serde(default)]
    server_ca_cert: String,
}

impl ActionForm {
    /// The authentication the `auth` form describes; `None`: the signature only.
    fn auth(&self) -> Result<Option<EndpointAuth>, PageError> {
        use domain::endpoint_auth::{OAuthClient, OAuthMethod};
        Ok(Some(match self.auth_type.as_str() {
            "none" => return Ok(None),
            "bearer" => EndpointAuth::Bearer {
                token: self.token.trim().to_owned(),
            },
            "basic" => EndpointAuth::Basic {
                username: self.username.trim().to_owned(),
                password: self.password.clone(),
            },
            "oauth" => EndpointAuth::OAuth(OAuthClient {
                token_url: self.token_url.trim().to_owned(),
                client_id: self.client_id.trim().to_owned(),
                client_secret: Some(self.client_secret.clone()),
                // The form's own default when the field is left out.
                auth_method: match self.auth_method.as_str() {
                    "" => OAuthMethod::Basic,
                    name => OAuthMethod::parse(name).map_err(PageError::bad_input)?,
                },
                scopes: self.scopes.split_whitespace().map(str::to_owned).collect(),
                extra_params: Default::default(),
                refresh_token: None,
            }),
            _ => {
                return Err(PageError::bad_input(
                    "Choose how the endpoint authenticates.",
                ));
            }
        }))
    }
}

/// How the endpoint page describes an endpoint's authentication.
fn auth_text(auth: &Option<EndpointAuth>) -> String {
    match auth {
        None => "Signature only".to_owned(),
        Some(EndpointAuth::Bearer { .. }) => "Bearer token (sent as Authorization)".to_owned(),
        Some(EndpointAuth::Basic { username, .. }) => format!("HTTP basic, user {username}"),
        Some(EndpointAuth::OAuth(c)) => format!(
            "OAuth 2.0 client credentials: client {} at {}",
            c.client_id, c.token_url
        ),
    }
}

/// POST `/app/{app}/endpoint/{ep}/{action}`: `enable`, `disable`, `recover` (since a date),
/// `recover-all` (every failed delivery, from the dead-letter page) and `replay-missing`
/// (since a date), which show their preview (see `bulk`), `rotate-secret`, `test`
/// (a test event, or the example of a chosen event type) or `delete`.
pub async fn act(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String, String)>,
    form: web::Form<ActionForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    let store = session::store_of(&req)?;
    let (app_id, ep_id, action) = path.into_inner();
    session.require(match action.as_str() {
        "rotate-secret" | "rotate-ed25519" => Capability::ManageEndpointSecret,
        "recover" | "recover-all" | "replay-missing" | "test" => Capability::CreateAttempts,
        _ => Capability::ManageEndpoint,
    })?;
    let (app, ep) = load(store, &session, &app_id, &ep_id).await?;
    let page = format!("{}/app/{}/endpoint/{}", session.root, app.id, ep.id);
    match action.as_str() {
        "enable" => {
            store
                .set_endpoint_disabled(session.tenant, ep, EndpointChanges::Enable)
                .await?;
            Ok(see_other(&format!("{page}?done=enabled")))
        }
        "disable" => {
            let reason = "disabled from the dashboard".to_owned();
            store
                .set_endpoint_disabled(session.tenant, ep, EndpointChanges::Disable { reason })
                .await?;
            Ok(see_other(&format!("{page}?done=disabled")))
        }
        "recover" | "replay-missing" => {
            let tz = TzOffset::parse(&form.tz).ok_or_else(|| {
                PageError::bad_input(
                    "Your browser sent a time zone we cannot read; reload the page and try again.",
                )
            })?;
            let since = tz.parse_datetime_local(&form.since).ok_or_else(|| {
                PageError::bad_input(format!(
                    "Choose a date and time to start from, like 2024-05-01 12:00 ({}).",
                    tz.label()
                ))
            })?;
            let now = Timestamp::now();
            if since > now.plus(Duration::from_secs(60)) {
                return Err(PageError::bad_input(format!(
                    "The start is in the future; choose a time in the past ({}).",
                    tz.label()
                )));
            }
            let kind = if action == "recover" {
                EndpointJob::Recover
            } else {
                EndpointJob::Replay
            };
            let bulk = crate::bulk::Bulk {
                kind,
                since,
                from_message: None,
            };
            crate::bulk::preview(&req, session, app, ep, bulk).await
        }
        "rotate-secret" => {
            manage::rotate_secret(store, &session, &ep, None).await?;
            Ok(see_other(&format!("{page}?done=rotated")))
        }
        "rotate-ed25519" => {
            manage::rotate_secret(store, &session, &ep, Some("ed25519")).await?;
            Ok(see_other(&format!("{page}?done=rotated")))
        }
        "mtls" => {
            let mtls = (!form.identity.trim().is_empty()).then(|| domain::endpoint_auth::Mtls {
                identity: form.identity.clone(),
                server_ca_cert: Some(form.server_ca_cert.clone()).filter(|c| !c.trim().is_empty()),
            });
            service::endpoints::set_mtls(store, session.tenant, ep, mtls).await?;
            Ok(see_other(&format!("{page}?done=auth")))
        }
        "auth" => {
            let auth = form.auth()?;
            let cfg = crate::service_config(&req)?;
            service::endpoints::set_auth(store, cfg, session.tenant, session.actor(), ep, auth)
                .await?;
            Ok(see_other(&format!("{page}?done=auth")))
        }
        "test" => {
            let msg =
                manage::send_test_event(&req, store, &session, &app, &ep, &form.event_type).await?;
            Ok(see_other(&format!("{page}?done=test&msg={msg}")))
        }
        "delete" => {
            store.delete_endpoint(session.tenant, &ep).await?;
            let home = if session.root.is_empty() {
                "/".to_owned()
            } else {
                format!("{}/app/{}", session.root, app.id)
            };
            Ok(see_other(&home))
        }
        "recover-all" => {
            let bulk = crate::bulk::Bulk {
                kind: EndpointJob::Recover,
                since: Timestamp::from_millis(0),
                from_message: None,
            };
            crate::bulk::preview(&req, session, app, ep, bulk).await
        }
        _ => Err(PageError::NotFound),
    }
}

/// The application (by id or uid) and its endpoint, both the session tenant's.
pub(crate) async fn load(
    store: &Store,
    session: &Session,
    app_id: &str,
    ep_id: &str,
) -> Result<(application::Model, endpoint::Model), PageError> {
    let app = session.app(store, app_id).await?;
    let ep = session.endpoint(store, app.id, ep_id).await?;
    Ok((app, ep))
}
