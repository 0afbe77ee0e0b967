//! Durable bulk jobs. The API writes a job row and answers 202; a runner claims it with a
//! lease, does the work and records the outcome. Jobs are idempotent (recover re-arms only
//! what is still failed; replay creates only what is still missing), so a job whose runner
//! died is simply run again when its lease expires.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, TenantId};
use domain::jobs::JobKind;
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
    let outcome = tokio::select! {
        outcome = execute(store, job) => outcome,
        never = renew => never,
    };
    match &outcome {
        Ok(n) => tracing::info!(job_id = %job.id, kind = %job.kind, touched = n, "job finished"),
        Err(e) => tracing::warn!(job_id = %job.id, kind = %job.kind, error = %e, "job failed"),
    }
    store.system().finish_job(job.id, outcome).await
}

async fn execute(store: &Store, job: &job::Model) -> Result<u64, String> {
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
    let result = match job.kind {
        JobKind::EndpointRecover => {
            store
                .recover_failed(tenant, ep.id, since, until, ttl, run)
                .await
        }
        JobKind::EndpointReplay => {
            store
                .replay_missing(tenant, &ep, since, until, ttl, run)
                .await
        }
    };
    result.map_err(|e| e.to_string())
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
