//! Operations: the email outbox, operational events and node heartbeats.

use domain::Timestamp;
use domain::email::EmailState;
use domain::ids::{
    ApplicationId, EmailId, EndpointId, JobId, NodeId, OperationalEventId, TenantId,
};
use domain::jobs::{JobKind, JobState};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    Set,
};

use crate::entities::Owned;
use crate::entities::{email, job, node_heartbeat, operational_event};
use crate::{ListParams, Page, Result, Store, page::fetch_page};

/// What a sent email to no tenant keeps as its body. Those are the sign-up mails, whose body
/// holds a link that creates an account: once sent, the row stays for the record but no
/// longer carries the link for whoever reads the database or its backups.
pub const SENT_SIGNUP_BODY: &str = "(sent; the body held a sign-up link and was removed)";

/// A new outbox row, due at once: the one shape of every email hookd queues.
pub(crate) fn email_row(
    tenant: Option<TenantId>,
    to: &str,
    subject: &str,
    body: &str,
    now: i64,
) -> email::ActiveModel {
    email::ActiveModel {
        id: Set(EmailId::new()),
        tenant_id: Set(tenant),
        to_addr: Set(to.to_owned()),
        subject: Set(subject.to_owned()),
        body_text: Set(body.to_owned()),
        state: Set(EmailState::Pending),
        attempts: Set(0),
        next_attempt_at: Set(now),
        last_error: Set(None),
        created_at: Set(now),
        sent_at: Set(None),
    }
}

impl Store {
    /// Queues an email to a tenant; the scheduler's outbox worker sends it.
    pub async fn enqueue_email(
        &self,
        tenant: TenantId,
        to: &str,
        subject: &str,
        body: &str,
    ) -> Result<email::Model> {
        let now = Timestamp::now().as_millis();
        Ok(email_row(Some(tenant), to, subject, body, now)
            .insert(&self.db)
            .await?)
    }

    pub async fn list_emails(
        &self,
        tenant: TenantId,
        params: &ListParams,
    ) -> Result<Page<email::Model>> {
        let select = email::Entity::find_in(tenant);
        fetch_page(
            &self.db,
            select,
            email::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    pub async fn record_operational_event(
        &self,
        tenant: TenantId,
        kind: &str,
        app_id: Option<ApplicationId>,
        endpoint_id: Option<EndpointId>,
        detail: &serde_json::Value,
    ) -> Result<operational_event::Model> {
        Ok(operational_event::ActiveModel {
            id: Set(OperationalEventId::new()),
            tenant_id: Set(tenant),
            kind: Set(kind.to_owned()),
            app_id: Set(app_id),
            endpoint_id: Set(endpoint_id),
            detail: Set(detail.to_string()),
            created_at: Set(Timestamp::now().as_millis()),
        }
        .insert(&self.db)
        .await?)
    }

    pub async fn list_operational_events(
        &self,
        tenant: TenantId,
        params: &ListParams,
    ) -> Result<Page<operational_event::Model>> {
        let select = operational_event::Entity::find_in(tenant);
        let id = operational_event::Column::Id;
        fetch_page(&self.db, select, id, |m| m.id.to_string(), params).await
    }
}

/// What to do with a request carrying an `Idempotency-Key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdempotencyStart {
    /// First time: run the request, then call `idempotency_complete`.
    New,
    /// The same key and request finished before: answer with this response again.
    Replay { status: u16, body: Vec<u8> },
    /// The same key is being processed by another request right now.
    InFlight,
    /// The key was used with a different request.
    Mismatch,
}

/// Keys are remembered this long (Svix and Stripe keep them a day).
pub const IDEMPOTENCY_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// A reservation older than this is taken to belong to a request that died.
const IDEMPOTENCY_STALE: std::time::Duration = std::time::Duration::from_secs(60);

impl Store {
    /// Reserves `key` for this request, or says how the key was used before.
    pub async fn idempotency_begin(
        &self,
        tenant: TenantId,
        key: &str,
        request_hash: &str,
        now: Timestamp,
    ) -> Result<IdempotencyStart> {
        use crate::entities::idempotency_key as ik;
        let reservation = || ik::ActiveModel {
            tenant_id: Set(tenant),
            key: Set(key.to_owned()),
            request_hash: Set(request_hash.to_owned()),
            response_status: Set(0),
            response_body: Set(Vec::new()),
            created_at: Set(now.as_millis()),
        };
        for _ in 0..2 {
            match ik::Entity::insert(reservation()).exec(&self.db).await {
                Ok(_) => return Ok(IdempotencyStart::New),
                Err(e) if crate::error::is_unique_violation(&e) => {}
                Err(e) => return Err(e.into()),
            }
            let Some(found) = ik::Entity::find_by_id((tenant, key.to_owned()))
                .one(&self.db)
                .await?
            else {
                continue; // expired and deleted in between: try to reserve again
            };
            let age = now.since(Timestamp::from_millis(found.created_at));
            let stale_reservation = found.response_status == 0 && age > IDEMPOTENCY_STALE;
            if age > IDEMPOTENCY_TTL || stale_reservation {
                ik::Entity::delete_in(tenant)
                    .filter(ik::Column::Key.eq(key))
                    .filter(ik::Column::CreatedAt.eq(found.created_at))
                    .exec(&self.db)
                    .await?;
                continue;
            }
            if found.request_hash != request_hash {
                return Ok(IdempotencyStart::Mismatch);
            }
            if found.response_status == 0 {
                return Ok(IdempotencyStart::InFlight);
            }
            return Ok(IdempotencyStart::Replay {
                status: u16::try_from(found.response_status).unwrap_or(500),
                body: found.response_body,
            });
        }
        Ok(IdempotencyStart::InFlight)
    }

    /// Stores the response of a request that reserved `key`.
    pub async fn idempotency_complete(
        &self,
        tenant: TenantId,
        key: &str,
        status: u16,
        body: &[u8],
    ) -> Result<()> {
        use crate::entities::idempotency_key as ik;
        ik::Entity::update_in(tenant)
            .col_expr(ik::Column::ResponseStatus, Expr::value(i32::from(status)))
            .col_expr(ik::Column::ResponseBody, Expr::value(body.to_vec()))
            .filter(ik::Column::Key.eq(key))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Releases a reservation whose request failed unexpectedly, so a retry can run.
    pub async fn idempotency_abort(&self, tenant: TenantId, key: &str) -> Result<()> {
        use crate::entities::idempotency_key as ik;
        ik::Entity::delete_in(tenant)
            .filter(ik::Column::Key.eq(key))
            .filter(ik::Column::ResponseStatus.eq(0))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    // --- durable jobs (bulk recover / replay) ---------------------------------------------

    pub async fn create_job(
        &self,
        tenant: TenantId,
        kind: domain::jobs::JobKind,
        params: &serde_json::Value,
    ) -> Result<job::Model> {
        let now = Timestamp::now().as_millis();
        Ok(job::ActiveModel {
            id: Set(JobId::new()),
            tenant_id: Set(tenant),
            kind: Set(kind),
            params: Set(params.to_string()),
            state: Set(JobState::Running),
            progress: Set(0),
            error: Set(None),
            lease_owner: Set(None),
            lease_expires_at: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            result: Set(None),
        }
        .insert(&self.db)
        .await?)
    }

    /// The tenant's jobs, of one kind and in one state when given.
    pub async fn list_jobs(
        &self,
        tenant: TenantId,
        kind: Option<JobKind>,
        state: Option<JobState>,
        params: &ListParams,
    ) -> Result<Page<job::Model>> {
        let mut select = job::Entity::find_in(tenant);
        if let Some(kind) = kind {
            select = select.filter(job::Column::Kind.eq(kind.as_str()));
        }
        if let Some(state) = state {
            select = select.filter(job::Column::State.eq(state.as_str()));
        }
        fetch_page(
            &self.db,
            select,
            job::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    /// Cancels a running job of `tenant`: its runner stops before its next batch (see
    /// [`crate::Batches`]); what earlier batches did stays done. Returns the job as it is now;
    /// a job that already ended is left as it was.
    pub async fn cancel_job(&self, tenant: TenantId, id: &str) -> Result<job::Model> {
        let id = job_id(id)?;
        // Between the job's own batches on SQLite, not in its busy handler behind them.
        let turn = self.write_turn().await;
        job::Entity::update_in(tenant)
            .col_expr(job::Column::State, Expr::value(JobState::Canceled.as_str()))
            .col_expr(
                job::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(job::Column::Id.eq(id))
            .filter(job::Column::State.eq(JobState::Running.as_str()))
            .exec(&self.db)
            .await?;
        drop(turn);
        self.get_job(tenant, &id.to_string()).await
    }

    pub async fn get_job(&self, tenant: TenantId, id: &str) -> Result<job::Model> {
        let id = job_id(id)?;
        job::Entity::find_in(tenant)
            .filter(job::Column::Id.eq(id))
            .one(&self.db)
            .await?
            .ok_or(crate::StoreError::not_found("job"))
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Scheduler sweep (all tenants): pending emails that are due, oldest first.
    pub async fn due_emails(&self, now: Timestamp, limit: u64) -> Result<Vec<email::Model>> {
        Ok(email::Entity::find()
            .filter(email::Column::State.eq(EmailState::Pending))
            .filter(email::Column::NextAttemptAt.lte(now.as_millis()))
            .order_by_asc(email::Column::NextAttemptAt)
            .limit(limit)
            .all(&self.db)
            .await?)
    }

    /// Scheduler: records the outcome of one send: `Ok` sent; `Err((reason, Some(at)))` retry then; `Err((reason, None))`
    /// failed for good (state `failed`, never tried again).
    pub async fn email_outcome(
        &self,
        email_id: EmailId,
        outcome: std::result::Result<(), (String, Option<Timestamp>)>,
        now: Timestamp,
    ) -> Result<()> {
        let mut update = email::Entity::update_many()
            .col_expr(
                email::Column::Attempts,
                Expr::col(email::Column::Attempts).add(1),
            )
            .filter(email::Column::Id.eq(email_id));
        update = match outcome {
            Ok(()) => update
                .col_expr(email::Column::State, Expr::value(EmailState::Sent))
                .col_expr(email::Column::SentAt, Expr::value(now.as_millis()))
                .col_expr(
                    email::Column::BodyText,
                    sea_orm::sea_query::CaseStatement::new()
                        .case(
                            email::Column::TenantId.is_null(),
                            Expr::value(SENT_SIGNUP_BODY),
                        )
                        .finally(Expr::col(email::Column::BodyText))
                        .into(),
                ),
            Err((reason, Some(retry_at))) => update
                .col_expr(email::Column::LastError, Expr::value(reason))
                .col_expr(
                    email::Column::NextAttemptAt,
                    Expr::value(retry_at.as_millis()),
                ),
            Err((reason, None)) => update
                .col_expr(email::Column::LastError, Expr::value(reason))
                .col_expr(email::Column::State, Expr::value(EmailState::Failed)),
        };
        update.exec(&self.db).await?;
        Ok(())
    }

    /// Announces that `node` is alive (insert or refresh).
    pub async fn heartbeat(
        &self,
        node: NodeId,
        roles: &str,
        hostname: &str,
        started_at: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        use node_heartbeat::Column as C;
        let row = node_heartbeat::ActiveModel {
            node_id: Set(node.to_string()),
            roles: Set(roles.to_owned()),
            hostname: Set(hostname.to_owned()),
            version: Set(env!("CARGO_PKG_VERSION").to_owned()),
            started_at: Set(started_at.as_millis()),
            last_seen_at: Set(now.as_millis()),
        };
        // In turn with this process's other writes: in SQLite's busy handler it could wait
        // out its 10 s under a saturating write load and fail ("database is locked").
        let _turn = self.write_turn().await;
        node_heartbeat::Entity::insert(row)
            .on_conflict(
                OnConflict::column(C::NodeId)
                    .update_columns([C::Roles, C::LastSeenAt])
                    .to_owned(),
            )
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Nodes seen at or after `since`.
    pub async fn live_nodes(&self, since: Timestamp) -> Result<Vec<node_heartbeat::Model>> {
        Ok(node_heartbeat::Entity::find()
            .filter(node_heartbeat::Column::LastSeenAt.gte(since.as_millis()))
            .order_by_asc(node_heartbeat::Column::NodeId)
            .all(&self.db)
            .await?)
    }

    /// Scheduler (all tenants): takes the oldest running job that nobody holds, or whose
    /// holder's lease ran out (it died), leasing it to `owner` until `now + lease`.
    pub async fn claim_job(
        &self,
        owner: &str,
        now: Timestamp,
        lease: std::time::Duration,
    ) -> Result<Option<job::Model>> {
        self.claim_job_except(owner, now, lease, &[]).await
    }

    /// [`Store::system_claim_job`], skipping the jobs of `busy_tenants` (those with a job
    /// running in this runner already), so one tenant's long job never takes every slot.
    pub async fn claim_job_except(
        &self,
        owner: &str,
        now: Timestamp,
        lease: std::time::Duration,
        busy_tenants: &[TenantId],
    ) -> Result<Option<job::Model>> {
        let free = Condition::any()
            .add(job::Column::LeaseOwner.is_null())
            .add(job::Column::LeaseExpiresAt.lt(now.as_millis()));
        let mut candidates = job::Entity::find()
            .filter(job::Column::State.eq(JobState::Running.as_str()))
            .filter(free.clone());
        if !busy_tenants.is_empty() {
            candidates =
                candidates.filter(job::Column::TenantId.is_not_in(busy_tenants.iter().copied()));
        }
        let candidates = candidates
            .order_by_asc(job::Column::CreatedAt)
            .limit(5)
            .all(&self.db)
            .await?;
        for candidate in candidates {
            // Compare-and-set: only one claimer's update matches the free condition.
            let res = job::Entity::update_many()
                .col_expr(job::Column::LeaseOwner, Expr::value(owner))
                .col_expr(
                    job::Column::LeaseExpiresAt,
                    Expr::value(now.plus(lease).as_millis()),
                )
                .filter(job::Column::Id.eq(candidate.id))
                .filter(job::Column::State.eq(JobState::Running.as_str()))
                .filter(free.clone())
                .exec(&self.db)
                .await?;
            if res.rows_affected == 1 {
                return Ok(Some(candidate));
            }
        }
        Ok(None)
    }

    /// Extends a running job's lease while `owner` still holds it; false when it was lost.
    pub async fn renew_job(&self, id: JobId, owner: &str, until: Timestamp) -> Result<bool> {
        let res = job::Entity::update_many()
            .col_expr(job::Column::LeaseExpiresAt, Expr::value(until.as_millis()))
            .filter(job::Column::Id.eq(id))
            .filter(job::Column::LeaseOwner.eq(owner))
            .filter(job::Column::State.eq(JobState::Running.as_str()))
            .exec(&self.db)
            .await?;
        Ok(res.rows_affected == 1)
    }

    /// Scheduler: records a job's end. `Ok(n)` = finished having touched n deliveries (and
    /// computed `result`, for a statistics task). A job canceled meanwhile stays canceled, with
    /// the progress its last batch recorded.
    pub async fn finish_job(
        &self,
        id: JobId,
        outcome: std::result::Result<u64, String>,
        result: Option<&serde_json::Value>,
    ) -> Result<()> {
        let now = Timestamp::now().as_millis();
        let mut update = job::Entity::update_many()
            .col_expr(job::Column::UpdatedAt, Expr::value(now))
            .col_expr(job::Column::LeaseOwner, Expr::value(Option::<String>::None))
            .filter(job::Column::Id.eq(id))
            .filter(job::Column::State.eq(JobState::Running.as_str()));
        update = match outcome {
            Ok(n) => update
                .col_expr(job::Column::State, Expr::value(JobState::Finished.as_str()))
                .col_expr(job::Column::Progress, Expr::value(n as i64))
                .col_expr(
                    job::Column::Result,
                    Expr::value(result.map(|r| r.to_string())),
                ),
            Err(e) => update
                .col_expr(job::Column::State, Expr::value(JobState::Failed.as_str()))
                .col_expr(job::Column::Error, Expr::value(e)),
        };
        update.exec(&self.db).await?;
        Ok(())
    }
}

/// A job's id from a request; one that does not parse names no job.
fn job_id(id: &str) -> Result<JobId> {
    id.parse().map_err(|_| crate::StoreError::not_found("job"))
}
