//! Bulk work on one endpoint, in three steps: a preview says how many messages a recover
//! (failed since a date, or since a message) or a replay of missing messages will touch and
//! asks to confirm; the confirmed job's page shows its progress, polled by htmx, with a
//! Cancel button that stops it before its next batch. The counting, the job and the cancel are
//! the `service` and `store` functions the API's recover and replay use.

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use domain::Timestamp;
use domain::jobs::{EndpointJob, JobKind, JobState};
use domain::portal::Capability;
use serde::Deserialize;
use store::entities::{application, endpoint, job};

use crate::auth::see_other;
use crate::charts::group;
use crate::endpoints::load;
use crate::error::PageError;
use crate::session::CsrfForm;
use crate::session::{self, Session};
use crate::views::{self, show_time};

/// What a bulk action is about to do, asked before it starts.
pub struct Bulk {
    pub kind: EndpointJob,
    pub since: Timestamp,
    /// For a replay from a message: that message, named in the question.
    pub from_message: Option<String>,
}

#[derive(Template)]
#[template(path = "bulk_preview.html")]
struct PreviewPage {
    csrf: Option<String>,
    root: &'static str,
    app_id: String,
    app_name: String,
    ep_id: String,
    ep_url: String,
    title: &'static str,
    /// "Recover 1,234 failed messages since …?"; None when there is nothing to do.
    question: Option<String>,
    /// "No failed messages since … to recover."
    nothing: String,
    explain: &'static str,
    capped: bool,
    cap: String,
    kind: &'static str,
    since: i64,
    expected: u64,
    confirm: &'static str,
}

/// The preview page of `bulk` on `ep`: the count, and [Confirm] [Cancel].
pub async fn preview(
    req: &HttpRequest,
    session: Session,
    app: application::Model,
    ep: endpoint::Model,
    bulk: Bulk,
) -> Result<HttpResponse, PageError> {
    session.require(Capability::CreateAttempts)?;
    let store = session::store_of(req)?;
    let count =
        service::endpoints::preview_job(store, session.tenant, &ep, bulk.kind, bulk.since, None)
            .await?;
    let when = match (&bulk.from_message, bulk.since.as_millis()) {
        (Some(msg), _) => format!("from message {msg} on"),
        (None, 0) => "ever".to_owned(),
        (None, ms) => format!("since {}", show_time(ms)),
    };
    let n = format!(
        "{}{}",
        group(count.n as i64),
        if count.more { "+" } else { "" }
    );
    let plural = if count.n == 1 && !count.more { "" } else { "s" };
    let (title, question, nothing, explain, confirm) = match bulk.kind {
        EndpointJob::Recover => (
            "Recover failed messages",
            format!("Recover {n} failed message{plural} {when}?"),
            format!("No failed messages {when} to recover."),
            "Each is sent to this endpoint again with a fresh set of retries.",
            "Recover",
        ),
        EndpointJob::Replay => (
            "Replay missing messages",
            format!("Replay {n} missing message{plural} {when}?"),
            format!("No messages {when} that this endpoint missed."),
            "Each message this endpoint never received (sent while it was disabled or before \
             it existed), and that its event types and channels take, is sent to it now.",
            "Replay",
        ),
    };
    let page = PreviewPage {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        ep_id: ep.id.to_string(),
        ep_url: ep.url,
        title,
        question: (count.n > 0).then_some(question),
        nothing,
        explain,
        capped: count.more,
        cap: group(store::PREVIEW_CAP as i64),
        kind: bulk.kind.kind().as_str(),
        since: bulk.since.as_millis(),
        expected: count.n,
        confirm,
    };
    Ok(views::render(StatusCode::OK, &page)?)
}

#[derive(Deserialize)]
pub struct StartForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    kind: String,
    /// Milliseconds since the epoch, as the preview wrote it.
    #[serde(default)]
    since: String,
    #[serde(default)]
    expected: String,
}

/// POST `/app/{app}/endpoint/{ep}/bulk`: the confirmed preview starts its job; the browser
/// goes to the job's page.
pub async fn start(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String)>,
    form: web::Form<StartForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    session.require(Capability::CreateAttempts)?;
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let kind = form
        .kind
        .parse::<JobKind>()
        .ok()
        .and_then(JobKind::endpoint_job)
        .ok_or_else(|| PageError::bad_input("Choose recover or replay."))?;
    let since = form
        .since
        .trim()
        .parse::<i64>()
        .map_err(|_| PageError::bad_input("Start from the recover or replay form."))?;
    let since = Timestamp::from_millis(since.max(0));
    let expected = form.expected.trim().parse::<u64>().ok();
    let job =
        service::endpoints::start_job(store, session.tenant, &ep, kind, since, None, expected)
            .await?;
    Ok(see_other(&format!(
        "{}/app/{}/endpoint/{}/job/{}",
        session.root, app.id, ep.id, job.id
    )))
}

/// The job's progress, polled every second while it runs.
#[derive(Template)]
#[template(path = "job_progress.html")]
struct ProgressFragment {
    csrf: Option<String>,
    url: String,
    running: bool,
    state: &'static str,
    /// "Running: 500 of 1,234 messages queued again."
    text: String,
    done: i64,
    /// For the progress bar: what the preview counted (never below `done`).
    total: Option<i64>,
    can_cancel: bool,
}

#[derive(Template)]
#[template(path = "job.html")]
struct JobPage {
    csrf: Option<String>,
    root: &'static str,
    app_id: String,
    app_name: String,
    ep_id: String,
    ep_url: String,
    title: String,
    progress: ProgressFragment,
}

#[derive(Deserialize)]
struct JobParams {
    /// From the job's kind, not its parameters.
    #[serde(skip, default = "recover")]
    kind: EndpointJob,
    #[serde(rename = "endpointId")]
    endpoint_id: String,
    since: i64,
    #[serde(default)]
    expected: Option<u64>,
}

fn recover() -> EndpointJob {
    EndpointJob::Recover
}

/// The job `job_id` of `ep` (another endpoint's, application's or tenant's is not found).
async fn job_of(
    store: &store::Store,
    session: &Session,
    ep: &endpoint::Model,
    job_id: &str,
) -> Result<(job::Model, JobParams), PageError> {
    let job = match store.get_job(session.tenant, job_id).await {
        Ok(job) => job,
        Err(store::StoreError::NotFound { .. }) => return Err(PageError::NotFound),
        Err(e) => return Err(e.into()),
    };
    // A statistics task is the tenant's, not an endpoint's.
    let Some(kind) = job.kind.endpoint_job() else {
        return Err(PageError::NotFound);
    };
    let params = JobParams {
        kind,
        ..job.params()?
    };
    if params.endpoint_id != ep.id.to_string() {
        return Err(PageError::NotFound);
    }
    Ok((job, params))
}

fn progress_of(
    session: &Session,
    url: String,
    job: &job::Model,
    params: &JobParams,
) -> ProgressFragment {
    let done = job.progress;
    let total = params.expected.map(|e| (e as i64).max(done));
    // "1 failed message", "2 failed messages".
    let what = |n: i64| match (params.kind, n == 1) {
        (EndpointJob::Recover, true) => "failed message queued again",
        (EndpointJob::Recover, false) => "failed messages queued again",
        (EndpointJob::Replay, true) => "missing message queued",
        (EndpointJob::Replay, false) => "missing messages queued",
    };
    let of = match total {
        Some(t) => format!("{} of {} {}", group(done), group(t), what(t)),
        None => format!("{} {}", group(done), what(done)),
    };
    let text = match job.state {
        JobState::Running => format!("Running: {of} so far."),
        JobState::Finished => format!("Finished: {} {}.", group(done), what(done)),
        JobState::Canceled => format!(
            "Canceled: {} {} before it stopped; the rest were left as they were.",
            group(done),
            what(done)
        ),
        JobState::Failed => format!(
            "Failed after {} {}: {}",
            group(done),
            what(done),
            job.error.as_deref().unwrap_or("no reason recorded")
        ),
    };
    ProgressFragment {
        csrf: Some(session.csrf.clone()),
        url,
        running: job.state == JobState::Running,
        state: job.state.as_str(),
        text,
        done,
        total,
        can_cancel: session.can(Capability::CreateAttempts),
    }
}

/// GET `/app/{app}/endpoint/{ep}/job/{job}`: the job's page, or its progress alone for htmx's
/// polling.
pub async fn show(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, PageError> {
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let (job, params) = job_of(store, &session, &ep, &path.2).await?;
    let url = format!(
        "{}/app/{}/endpoint/{}/job/{}",
        session.root, app.id, ep.id, job.id
    );
    let progress = progress_of(&session, url, &job, &params);
    // The poll asks for the fragment; a boosted navigation wants the page.
    let headers = req.headers();
    if headers.contains_key("HX-Request") && !headers.contains_key("HX-Boosted") {
        return Ok(views::render(StatusCode::OK, &progress)?);
    }
    let title = match (params.kind, params.since) {
        (EndpointJob::Recover, 0) => "Recovering every failed message".to_owned(),
        (EndpointJob::Recover, ms) => {
            format!("Recovering failed messages since {}", show_time(ms))
        }
        (EndpointJob::Replay, ms) => {
            format!("Replaying missing messages since {}", show_time(ms))
        }
    };
    let page = JobPage {
        csrf: Some(session.csrf),
        root: session.root,
        app_id: app.id.to_string(),
        app_name: app.name,
        ep_id: ep.id.to_string(),
        ep_url: ep.url,
        title,
        progress,
    };
    Ok(views::render(StatusCode::OK, &page)?)
}

/// POST `/app/{app}/endpoint/{ep}/job/{job}/cancel`: the job stops before its next batch.
pub async fn cancel(
    req: HttpRequest,
    session: Session,
    path: web::Path<(String, String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, PageError> {
    session.check_csrf(&req, &form.csrf)?;
    session.require(Capability::CreateAttempts)?;
    let store = session::store_of(&req)?;
    let (app, ep) = load(store, &session, &path.0, &path.1).await?;
    let (job, _) = job_of(store, &session, &ep, &path.2).await?;
    store
        .cancel_job(session.tenant, &job.id.to_string())
        .await?;
    Ok(see_other(&format!(
        "{}/app/{}/endpoint/{}/job/{}",
        session.root, app.id, ep.id, job.id
    )))
}
