//! Durable bulk jobs. The API writes a job row and answers 202; a runner claims it with a
//! lease, does the work and records the outcome. Jobs are idempotent (recover re-arms only
//! what is still failed; replay creates only what is still missing), so a job whose runner
//! died is simply run again when its lease expires.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::TenantId;
use serde::Deserialize;
use store::entities::job;
use store::{Store, retry_policy_of};
use tokio::sync::watch;

/// How long a runner may hold a job before another may take it over.
pub const JOB_LEASE: Duration = Duration::from_secs(300);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointJobParams {
    endpoint_id: String,
    app_id: String,
    since: i64,
    until: Option<i64>,
}

/// Claims and runs at most one job. Returns whether one was found.
pub async fn run_one(store: &Store, owner: &str) -> Result<bool, store::StoreError> {
    let Some(job) = store
        .system_claim_job(owner, Timestamp::now(), JOB_LEASE)
        .await?
    else {
        return Ok(false);
    };
    let outcome = execute(store, &job).await;
    match &outcome {
        Ok(n) => tracing::info!(job_id = %job.id, kind = %job.kind, touched = n, "job finished"),
        Err(e) => tracing::warn!(job_id = %job.id, kind = %job.kind, error = %e, "job failed"),
    }
    store.system_finish_job(&job.id, outcome).await?;
    Ok(true)
}

async fn execute(store: &Store, job: &job::Model) -> Result<u64, String> {
    let tenant = TenantId::parse(&job.tenant_id).map_err(|e| e.to_string())?;
    let params: EndpointJobParams =
        serde_json::from_str(&job.params).map_err(|e| format!("bad job parameters: {e}"))?;
    let ep = store
        .get_endpoint(tenant, &params.app_id, &params.endpoint_id)
        .await
        .map_err(|e| e.to_string())?;
    let ttl = retry_policy_of(&ep).ttl();
    let since = Timestamp::from_millis(params.since);
    let until = params.until.map(Timestamp::from_millis);
    let result = match job.kind.as_str() {
        "endpoint.recover" => {
            store
                .recover_failed(tenant, &ep.id, since, until, ttl)
                .await
        }
        "endpoint.replay" => store.replay_missing(tenant, &ep, since, until, ttl).await,
        other => return Err(format!("unknown job kind {other:?}")),
    };
    result.map_err(|e| e.to_string())
}

/// Runs jobs until `stop` turns true, polling every `idle` when there is nothing to do, and
/// waking `new_work` after each job (it may have made deliveries due).
pub async fn run(
    store: Store,
    owner: String,
    idle: Duration,
    new_work: std::sync::Arc<tokio::sync::Notify>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if *stop.borrow() {
            return;
        }
        let found = match run_one(&store, &owner).await {
            Ok(true) => {
                new_work.notify_one();
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!(error = %e, "job runner: database error");
                false
            }
        };
        if !found {
            tokio::select! {
                _ = tokio::time::sleep(idle) => {}
                _ = stop.changed() => {}
            }
        }
    }
}
