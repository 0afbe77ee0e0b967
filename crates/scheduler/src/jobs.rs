//! Durable bulk jobs. The API writes a job row and answers 202; a runner claims it with a
//! lease, does the work and records the outcome. Jobs are idempotent (recover re-arms only
//! what is still failed; replay creates only what is still missing), so a job whose runner
//! died is simply run again when its lease expires.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, TenantId};
use domain::jobs::{AppStatsParams, JobKind};
use domain::operational::OperationalEvent;
use domain::time::rfc3339;
use serde::Deserialize;
use store::entities::job;
use store::{Store, retry_policy_of};
use tokio::sync::watch;

/// How long a runner may hold a job before another may take it over.
pub const JOB_LEASE: Duration = Duration::from_secs(300);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointJobParams {
    endpoint_id: EndpointId,
    app_id: ApplicationId,
    since: i64,
    until: Option<i64>,
}

/// Claims and runs at most one job. Returns whether one was found.
pub async fn run_one(store: &Store, owner: &str) -> Result<bool, store::StoreError> {
    let Some(job) = store
        .system()
        .claim_job(owner, Timestamp::now(), JOB_LEASE)
        .await?
    else {
        return Ok(false);
    };
    run_claimed(store, owner, &job).await?;
    Ok(true)
}

/// Runs a claimed job to its end, renewing its lease meanwhile (a job may take longer than
/// the lease: a recover over years of dead letters), and records the outcome.
async fn run_claimed(
    store: &Store,
    owner: &str,
    job: &job::Model,
) -> Result<(), store::StoreError> {
    let renew = async {
        loop {
            tokio::time::sleep(JOB_LEASE / 3).await;
            let until = Timestamp::now().plus(JOB_LEASE);
            match store.system().renew_job(job.id, owner, until).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(job_id = %job.id, "job lease lost; another runner may take it over")
                }
                Err(e) => {
                    tracing::warn!(job_id = %job.id, error = %e, "could not renew a job's lease")
                }
            }
        }
    };
    let done = tokio::select! {
        outcome = execute(store, job) => outcome,
        never = renew => never,
    };
    let (outcome, result) = match done {
        Ok((n, result)) => (Ok(n), result),
        Err(e) => (Err(e), None),
    };
    match &outcome {
        Ok(n) => tracing::info!(job_id = %job.id, kind = %job.kind, touched = n, "job finished"),
        Err(e) => tracing::warn!(job_id = %job.id, kind = %job.kind, error = %e, "job failed"),
    }
    let event = finished_event(job, &outcome);
    store
        .system()
        .finish_job(job.id, outcome, result.as_ref())
        .await?;
    store.emit(job.tenant_id, event).await;
    Ok(())
}

/// The `background_task.finished` operational webhook of a job: Svix's `data` for a recover or
/// replay (`messages_sent`, `endp_id`, `since`, `until`), with hookd's `deliveries` (as
/// `GET /background-task/{id}` shows it) or `error`.
fn finished_event(job: &job::Model, outcome: &Result<u64, String>) -> OperationalEvent {
    let params: Option<EndpointJobParams> = job.params().ok();
    let time = |ms: Option<i64>| ms.map(|t| rfc3339::format(Timestamp::from_millis(t)));
    let mut data = serde_json::json!({
        "endp_id": params.as_ref().map(|p| p.endpoint_id.to_string()),
        "since": time(params.as_ref().map(|p| p.since)),
        "until": time(params.as_ref().and_then(|p| p.until)),
    });
    let status = match outcome {
        Ok(n) => {
            data["messages_sent"] = serde_json::json!(n);
            data["deliveries"] = serde_json::json!(n);
            "finished"
        }
        Err(e) => {
            data["messages_sent"] = serde_json::json!(0);
            data["error"] = serde_json::json!(e);
            "failed"
        }
    };
    OperationalEvent::BackgroundTaskFinished {
        task_id: job.id,
        task: job.kind.to_string(),
        status: status.to_owned(),
        data,
    }
}

/// What a finished job did: deliveries touched, and for a statistics task its `data`.
type Done = (u64, Option<serde_json::Value>);

async fn execute(store: &Store, job: &job::Model) -> Result<Done, String> {
    let recover = match job.kind {
        JobKind::EndpointRecover => true,
        JobKind::EndpointReplay => false,
        JobKind::ApplicationStats => return app_stats(store, job).await.map(|d| (0, Some(d))),
        JobKind::EventTypeAggregate => {
            return event_type_stats(store, job).await.map(|d| (0, Some(d)));
        }
    };
    let tenant = job.tenant_id;
    let params: EndpointJobParams = job.params().map_err(|e| e.to_string())?;
    let ep = store
        .get_endpoint(tenant, params.app_id, &params.endpoint_id.to_string())
        .await
        .map_err(|e| e.to_string())?;
    let ttl = retry_policy_of(&ep).ttl();
    let since = Timestamp::from_millis(params.since);
    let until = params.until.map(Timestamp::from_millis);
    let run = store::Batches::of_job(job.id);
    let result = if recover {
        store
            .recover_failed(tenant, ep.id, since, until, ttl, run)
            .await
    } else {
        store
            .replay_missing(tenant, &ep, since, until, ttl, run)
            .await
    };
    result.map(|n| (n, None)).map_err(|e| e.to_string())
}

fn fail(e: store::StoreError) -> String {
    e.to_string()
}

/// Svix's `data` of a finished `application.stats` task.
async fn app_stats(store: &Store, job: &job::Model) -> Result<serde_json::Value, String> {
    let tenant = job.tenant_id;
    let p: AppStatsParams = job.params().map_err(fail)?;
    let (apps, _) = store
        .resolve_applications(tenant, p.app_ids.as_deref())
        .await
        .map_err(fail)?;
    let since = Timestamp::from_millis(p.since);
    let until = Timestamp::from_millis(p.until);
    let usage = store
        .app_usage(tenant, &apps, since, until)
        .await
        .map_err(fail)?;
    let stats: Vec<_> = usage
        .into_iter()
        .map(|u| {
            serde_json::json!({
                "appId": u.app_id.to_string(),
                "appUid": u.app_uid,
                "messageDestinations": u.message_destinations,
            })
        })
        .collect();
    Ok(serde_json::json!({ "appStats": stats }))
}

/// Svix's `data` of a finished `event-type.aggregate` task.
async fn event_type_stats(store: &Store, job: &job::Model) -> Result<serde_json::Value, String> {
    let apps = store.app_event_types(job.tenant_id).await.map_err(fail)?;
    let types: Vec<_> = apps
        .into_iter()
        .map(|a| {
            serde_json::json!({
                "appId": a.app_id.to_string(),
                "explicitlySubscribedEventTypes": a.explicitly_subscribed,
                "hasCatchAllEndpoint": a.has_catch_all,
            })
        })
        .collect();
    // Svix's documented key (snake case, unlike the rest of the shape).
    Ok(serde_json::json!({ "event_types": types }))
}

/// Jobs one runner runs at once.
pub const JOB_SLOTS: usize = 4;

/// Runs jobs until `stop` turns true, beside (not inside) the scheduler's other work: up to
/// [`JOB_SLOTS`] at once and never two of one tenant, so one tenant's long job delays neither
/// another tenant's jobs nor email or the auto-disable sweep. Polls every `idle` when there
/// is nothing to claim, and wakes `new_work` after each job (it may have made deliveries due).
pub async fn run(
    store: Store,
    owner: String,
    idle: Duration,
    new_work: std::sync::Arc<tokio::sync::Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut running: tokio::task::JoinSet<TenantId> = tokio::task::JoinSet::new();
    let mut busy: Vec<TenantId> = Vec::new();
    loop {
        while let Some(done) = running.try_join_next() {
            if let Ok(tenant) = done {
                busy.retain(|t| *t != tenant);
                new_work.notify_one();
            }
        }
        if *stop.borrow() {
            break;
        }
        let claimed = if running.len() < JOB_SLOTS {
            store
                .system()
                .claim_job_except(&owner, Timestamp::now(), JOB_LEASE, &busy)
                .await
        } else {
            Ok(None)
        };
        match claimed {
            Ok(Some(job)) => {
                busy.push(job.tenant_id);
                let (store, owner) = (store.clone(), owner.clone());
                running.spawn(async move {
                    if let Err(e) = run_claimed(&store, &owner, &job).await {
                        tracing::warn!(job_id = %job.id, error = %e, "job runner: database error");
                    }
                    job.tenant_id
                });
                continue;
            }
            Ok(None) => {}
            Err(e) => store.warn_unless_fault(&e, "job runner: database error"),
        }
        tokio::select! {
            _ = tokio::time::sleep(idle) => {}
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Ok(tenant) = done {
                    busy.retain(|t| *t != tenant);
                    new_work.notify_one();
                }
            }
            _ = stop.changed() => {}
        }
    }
    // Jobs are idempotent: one stopped mid-way is taken over once its lease runs out.
    running.abort_all();
    while running.join_next().await.is_some() {}
}
