//! Endpoint health that outlives one attempt: the breaker state shown to tenants, the endpoints
//! failing for too long, and disabling one (a 410, or five days of failures) with its email
//! and operational event.

use domain::Timestamp;
use domain::ids::{EndpointId, OperationalEventId};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};

use crate::entities::{endpoint, operational_event};
use crate::{Result, Store};

/// Disables an enabled endpoint with `reason`, records an `endpoint.disabled` operational event
/// and queues the email to the tenant's notification address, all in the caller's transaction.
/// Returns the endpoint disabled, or None when it was already disabled (nothing is sent twice);
/// the caller sends the operational webhook once the transaction commits ([`disabled_event`]).
pub(crate) async fn disable_and_notify(
    txn: &sea_orm::DatabaseTransaction,
    endpoint_id: EndpointId,
    reason: &str,
    public_url: &str,
    now: i64,
) -> Result<Option<endpoint::Model>> {
    use crate::entities::{email, tenant};
    let res = endpoint::Entity::update_many()
        .col_expr(endpoint::Column::Disabled, Expr::value(true))
        .col_expr(endpoint::Column::DisabledReason, Expr::value(reason))
        .col_expr(endpoint::Column::DisabledAt, Expr::value(now))
        .col_expr(endpoint::Column::UpdatedAt, Expr::value(now))
        .filter(endpoint::Column::Id.eq(endpoint_id))
        .filter(endpoint::Column::Disabled.eq(false))
        .exec(txn)
        .await?;
    if res.rows_affected == 0 {
        return Ok(None);
    }
    crate::gate::pause_or_resume(txn, endpoint_id, true, now).await?;
    let Some(ep) = endpoint::Entity::find_by_id(endpoint_id).one(txn).await? else {
        return Ok(None);
    };
    operational_event::Entity::insert(operational_event::ActiveModel {
        id: Set(OperationalEventId::new()),
        tenant_id: Set(ep.tenant_id),
        kind: Set(domain::operational::ENDPOINT_DISABLED.to_owned()),
        app_id: Set(Some(ep.app_id)),
        endpoint_id: Set(Some(ep.id)),
        detail: Set(serde_json::json!({ "reason": reason, "url": ep.url }).to_string()),
        created_at: Set(now),
    })
    .exec(txn)
    .await?;
    if let Some(t) = tenant::Entity::find_by_id(ep.tenant_id).one(txn).await? {
        let (subject, body) = domain::notify::render_endpoint_disabled(
            &ep.url,
            &ep.id.to_string(),
            &ep.app_id.to_string(),
            reason,
            public_url,
        );
        email::Entity::insert(crate::ops::email_row(
            Some(t.id),
            &t.notification_email,
            &subject,
            &body,
            now,
        ))
        .exec(txn)
        .await?;
    }
    Ok(Some(ep))
}

/// The `endpoint.disabled` operational webhook of an endpoint hookd disabled.
pub(crate) async fn disabled_event(store: &Store, ep: &endpoint::Model) {
    let fail_since = ep.failing_since.map(Timestamp::from_millis);
    let reason = ep.disabled_reason.clone().unwrap_or_default();
    store
        .emit_for_endpoint(ep, |endpoint| {
            domain::operational::OperationalEvent::EndpointDisabled {
                endpoint,
                fail_since,
                trigger: domain::operational::Trigger::Automatic,
                reason,
            }
        })
        .await
}

/// Enabled endpoints (of every tenant) failing since before `cutoff`: the auto-disable and
/// early-warning sweeps' candidates.
pub(crate) fn failing_before(cutoff: Timestamp) -> sea_orm::Select<endpoint::Entity> {
    endpoint::Entity::find()
        .filter(endpoint::Column::FailingSince.lte(cutoff.as_millis()))
        .filter(endpoint::Column::Disabled.eq(false))
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Records an endpoint's circuit-breaker state for the API and dashboard.
    pub async fn set_breaker_state(
        &self,
        endpoint_id: EndpointId,
        state: domain::breaker::BreakerPhase,
        until: Option<Timestamp>,
    ) -> Result<()> {
        endpoint::Entity::update_many()
            .col_expr(endpoint::Column::BreakerState, Expr::value(state))
            .col_expr(
                endpoint::Column::BreakerUntil,
                Expr::value(until.map(|u| u.as_millis())),
            )
            .filter(endpoint::Column::Id.eq(endpoint_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Scheduler sweep (all tenants): enabled endpoints failing since before `cutoff`.
    pub async fn failing_endpoints(
        &self,
        cutoff: Timestamp,
        limit: u64,
    ) -> Result<Vec<endpoint::Model>> {
        use sea_orm::QuerySelect;
        Ok(failing_before(cutoff).limit(limit).all(&self.db).await?)
    }

    /// Disables an endpoint for `reason`, records the operational event and queues the email to
    /// its tenant, in one transaction. False when it was already disabled.
    pub async fn disable_endpoint_and_notify(
        &self,
        endpoint_id: EndpointId,
        reason: &str,
        public_url: &str,
    ) -> Result<bool> {
        let txn = self.write_txn().await?;
        let done = self
            .stopping(&[endpoint_id], async {
                let done = disable_and_notify(
                    &txn,
                    endpoint_id,
                    reason,
                    public_url,
                    Timestamp::now().as_millis(),
                )
                .await?;
                txn.commit().await?;
                Ok(done)
            })
            .await?;
        self.endpoints_changed();
        if let Some(ep) = &done {
            disabled_event(self.0, ep).await;
        }
        Ok(done.is_some())
    }
}
