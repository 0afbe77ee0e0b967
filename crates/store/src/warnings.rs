//! Early warnings before the auto-disable: an endpoint failing for `endpoint_warn_after` gets
//! one warning per failure streak (an email to whom its tenant chose and the `endpoint.failing`
//! operational event); the dashboard lists the endpoints at risk. A streak is one
//! `failing_since` value: `warned_failing_since` keeps the one warned about, so a new streak
//! warns again and no other state needs resetting.

use std::time::Duration;

use domain::Timestamp;
use domain::classify::Verdict;
use domain::health::{EndpointHealth, RecentError, disable_at};
use domain::ids::TenantId;
use domain::operational::OperationalEvent;
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entities::{application, attempt, endpoint, tenant};
use crate::{Result, Store, System};

/// Failed attempts a warning lists.
pub const WARNING_ERRORS: u64 = 5;

/// Endpoints of tenants' own applications (not the hidden operational one: its endpoints have
/// no page to link to, and their trouble makes no operational events).
fn not_operational() -> sea_orm::sea_query::SimpleExpr {
    endpoint::Column::AppId.not_in_subquery(
        Query::select()
            .column(application::Column::Id)
            .from(application::Entity)
            .and_where(application::Column::Internal.eq(true))
            .to_owned(),
    )
}

/// An endpoint row's health columns.
pub fn health_of(ep: &endpoint::Model) -> EndpointHealth {
    EndpointHealth {
        failing_since: ep.failing_since.map(Timestamp::from_millis),
        last_success_at: ep.last_success_at.map(Timestamp::from_millis),
    }
}

impl System<'_> {
    /// Scheduler sweep (all tenants): enabled endpoints failing since before `cutoff` whose
    /// streak has had no warning.
    pub async fn unwarned_failing_endpoints(
        &self,
        cutoff: Timestamp,
        limit: u64,
    ) -> Result<Vec<endpoint::Model>> {
        Ok(crate::disable::failing_before(cutoff)
            .filter(
                Condition::any()
                    .add(endpoint::Column::WarnedFailingSince.is_null())
                    .add(
                        Expr::col(endpoint::Column::WarnedFailingSince)
                            .ne(Expr::col(endpoint::Column::FailingSince)),
                    ),
            )
            .filter(not_operational())
            .limit(limit)
            .all(&self.db)
            .await?)
    }

    /// Warns `ep`'s tenant about its failure streak: marks the streak warned, queues the email
    /// (unless the tenant chose nobody) in the same transaction, then sends `endpoint.failing`.
    /// False when the streak was already warned about, ended, or the endpoint was disabled
    /// since `ep` was read: then nothing is sent.
    pub async fn warn_failing_endpoint(
        &self,
        ep: &endpoint::Model,
        disable_after: Duration,
        public_url: &str,
    ) -> Result<bool> {
        let (Some(since), Some(disable_at)) =
            (ep.failing_since, disable_at(&health_of(ep), disable_after))
        else {
            return Ok(false);
        };
        let now = Timestamp::now();
        let txn = self.write_txn().await?;
        let marked = endpoint::Entity::update_many()
            .col_expr(endpoint::Column::WarnedFailingSince, Expr::value(since))
            .filter(endpoint::Column::Id.eq(ep.id))
            .filter(endpoint::Column::Disabled.eq(false))
            .filter(endpoint::Column::FailingSince.eq(since))
            .filter(
                Condition::any()
                    .add(endpoint::Column::WarnedFailingSince.is_null())
                    .add(endpoint::Column::WarnedFailingSince.ne(since)),
            )
            .exec(&*txn)
            .await?;
        if marked.rows_affected == 0 {
            return Ok(false);
        }
        let last_errors: Vec<RecentError> = attempt::Entity::find()
            .filter(attempt::Column::EndpointId.eq(ep.id))
            .filter(attempt::Column::Classification.ne(Verdict::Success))
            .order_by_desc(attempt::Column::Id)
            .limit(WARNING_ERRORS)
            .all(&*txn)
            .await?
            .into_iter()
            .map(|a| RecentError {
                at: Timestamp::from_millis(a.started_at),
                status_code: a.status_code,
                error_kind: a.error_kind.map(|k| k.as_str().to_owned()),
            })
            .collect();
        if let Some(t) = tenant::Entity::find_by_id(ep.tenant_id).one(&*txn).await?
            && let Some(to) = t.warning_recipient().address(&t.notification_email)
        {
            let (subject, body) = domain::notify::render_endpoint_failing(
                &domain::notify::FailingEndpoint {
                    endpoint_url: &ep.url,
                    endpoint_id: &ep.id.to_string(),
                    app_id: &ep.app_id.to_string(),
                    failing_since: Timestamp::from_millis(since),
                    disable_at,
                    now,
                    last_errors: &last_errors,
                },
                public_url,
            );
            crate::entities::email::Entity::insert(crate::ops::email_row(
                Some(t.id),
                to,
                &subject,
                &body,
                now.as_millis(),
            ))
            .exec(&*txn)
            .await?;
        }
        txn.commit().await?;
        self.emit_for_endpoint(ep, |endpoint| OperationalEvent::EndpointFailing {
            endpoint,
            fail_since: Timestamp::from_millis(since),
            disable_at,
            last_errors,
        })
        .await;
        Ok(true)
    }
}

impl Store {
    /// The tenant's enabled endpoints in a failure streak, the oldest streak first: those the
    /// auto-disable comes to first (the dashboard's "at risk").
    pub async fn endpoints_at_risk(
        &self,
        tenant: TenantId,
        limit: u64,
    ) -> Result<Vec<endpoint::Model>> {
        use crate::entities::Owned;
        Ok(endpoint::Entity::find_in(tenant)
            .filter(endpoint::Column::FailingSince.is_not_null())
            .filter(endpoint::Column::Disabled.eq(false))
            .filter(not_operational())
            .order_by_asc(endpoint::Column::FailingSince)
            .order_by_asc(endpoint::Column::Id)
            .limit(limit)
            .all(&self.db)
            .await?)
    }
}
