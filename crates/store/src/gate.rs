//! "A disabled endpoint receives nothing from the moment the disable commits" (DESIGN.md), in
//! one place:
//!
//! - a disable (by the tenant, a 410, the auto-disable sweep) pauses the endpoint's pending
//!   and in-flight deliveries in its own transaction and revokes their leases; an enable turns
//!   them pending again, due at once. A paused delivery counts no attempt (decisions 31);
//! - every manual action that creates or re-arms a delivery (resend, recover, replay) reads the
//!   endpoint inside its write transaction through [`enabled_endpoint_in`], and is refused with
//!   [`StoreError::EndpointDisabled`] when it is disabled;
//! - the dispatcher asks [`Store::endpoint_stopped`] right before every request: a disable or
//!   delete made by this process marks the endpoint before it commits, and marks from other
//!   processes arrive through [`Store::refresh_stopped`] within its polling period.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use domain::delivery::DeliveryState;
use domain::ids::{DeliveryId, EndpointId, TenantId};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};

use crate::entities::Owned;
use crate::entities::{delivery, endpoint};
use crate::{Result, Store, StoreError};

/// How long a mark outlives the disable or delete that made it. Work a dispatcher holds in
/// memory is sent or given back within seconds (a line waits at most about a second, a
/// hand-off is admitted at once), and past that every claim reads the endpoint afresh.
const MARK_LIFETIME: Duration = Duration::from_secs(300);
/// A mark younger than this is kept even if the database still shows the endpoint enabled:
/// the disable that made it may not have committed yet.
const MARK_SETTLE: Duration = Duration::from_secs(5);

/// Endpoints this process must not send to, with when each was marked. Bounded: marks expire
/// after `MARK_LIFETIME`, and an enable removes its mark. Asked before every request, and
/// empty nearly always: `any` answers that without taking the lock.
#[derive(Debug, Default)]
pub(crate) struct StoppedEndpoints {
    marks: Mutex<HashMap<EndpointId, Instant>>,
    any: AtomicBool,
}

impl StoppedEndpoints {
    /// The marks, for a change that keeps `any` in step when the guard is dropped.
    fn edit(&self) -> Marks<'_> {
        Marks {
            map: self.marks.lock().unwrap_or_else(|p| p.into_inner()),
            any: &self.any,
        }
    }

    pub(crate) fn mark(&self, ids: impl IntoIterator<Item = EndpointId>) {
        let now = Instant::now();
        let mut all = self.edit();
        all.map
            .retain(|_, at| now.duration_since(*at) < MARK_LIFETIME);
        for id in ids {
            all.map.insert(id, now);
        }
    }

    pub(crate) fn unmark(&self, id: EndpointId) {
        self.edit().map.remove(&id);
    }

    fn contains(&self, id: EndpointId) -> bool {
        self.any.load(Ordering::Acquire)
            && self
                .edit()
                .map
                .get(&id)
                .is_some_and(|at| at.elapsed() < MARK_LIFETIME)
    }

    /// Unmarks `id` when its mark is old enough that its disable has surely committed.
    fn unmark_settled(&self, id: EndpointId) {
        let mut all = self.edit();
        if all
            .map
            .get(&id)
            .is_some_and(|at| at.elapsed() >= MARK_SETTLE)
        {
            all.map.remove(&id);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.edit().map.len()
    }
}

struct Marks<'a> {
    map: std::sync::MutexGuard<'a, HashMap<EndpointId, Instant>>,
    any: &'a AtomicBool,
}

impl Drop for Marks<'_> {
    fn drop(&mut self) {
        self.any.store(!self.map.is_empty(), Ordering::Release);
    }
}

/// Pauses (`disabled`) or resumes an endpoint's deliveries, in the caller's transaction.
/// Pausing takes in-flight ones too and revokes their leases, so a result that arrives later
/// is not written over the pause; resuming makes every paused one due now.
pub(crate) async fn pause_or_resume<C: ConnectionTrait>(
    txn: &C,
    endpoint_id: EndpointId,
    disabled: bool,
    now: i64,
) -> Result<u64> {
    Ok(pause_or_resume_update(
        crate::dialect_of_connection(txn),
        endpoint_id,
        disabled,
        now,
    )
    .exec(txn)
    .await?
    .rows_affected)
}

/// The statement behind [`pause_or_resume`]. A pause finds what it takes through the queue's
/// indexes (`open_of_endpoint`), a resume through the endpoint's held deliveries (m0031).
pub(crate) fn pause_or_resume_update(
    sql: &crate::dialect::Dialect,
    endpoint_id: EndpointId,
    disabled: bool,
    now: i64,
) -> sea_orm::UpdateMany<delivery::Entity> {
    use delivery::Column as C;
    let update = delivery::Entity::update_many().col_expr(C::UpdatedAt, Expr::value(now));
    // The endpoint is named inside the pause's subquery only: beside it, SQLite would walk the
    // endpoint's history instead.
    if disabled {
        crate::claims::hand_back(update, DeliveryState::Paused)
            .filter(C::State.is_in([
                DeliveryState::Pending.as_str(),
                DeliveryState::Sending.as_str(),
            ]))
            .filter(Expr::cust_with_values(
                format!("id IN ({})", sql.open_of_endpoint),
                [endpoint_id, endpoint_id],
            ))
    } else {
        update
            .col_expr(C::State, Expr::value(DeliveryState::Pending.as_str()))
            .col_expr(C::NextAttemptAt, Expr::value(now))
            .filter(C::EndpointId.eq(endpoint_id))
            .filter(C::State.eq(DeliveryState::Paused.as_str()))
    }
}

/// The endpoint, read in the caller's write transaction, if it may receive deliveries. Every
/// manual action that creates or re-arms deliveries calls this first. On PostgreSQL the row is
/// share-locked until the caller commits, so a concurrent disable waits for it and then pauses
/// what it armed; on SQLite the write transaction already excludes every other writer.
pub(crate) async fn enabled_endpoint_in<C: ConnectionTrait>(
    txn: &C,
    sql: &crate::dialect::Dialect,
    tenant: TenantId,
    endpoint_id: EndpointId,
) -> Result<endpoint::Model> {
    read_enabled(txn, sql.lock_endpoint_row, tenant, endpoint_id).await
}

async fn read_enabled<C: ConnectionTrait>(
    db: &C,
    lock: bool,
    tenant: TenantId,
    endpoint_id: EndpointId,
) -> Result<endpoint::Model> {
    let mut select = endpoint::Entity::find_in(tenant).filter(endpoint::Column::Id.eq(endpoint_id));
    if lock {
        select = select.lock_shared();
    }
    let ep = select
        .one(db)
        .await?
        .ok_or(StoreError::not_found("endpoint"))?;
    if ep.disabled {
        return Err(StoreError::EndpointDisabled {
            endpoint_id: ep.id.to_string(),
        });
    }
    Ok(ep)
}

impl Store {
    /// The endpoint as stored now, if it may receive deliveries: for requests that queue work
    /// to run later (recover, replay), so they answer 409 at once. The work itself checks again.
    pub async fn enabled_endpoint(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
    ) -> Result<endpoint::Model> {
        read_enabled(&self.db, false, tenant, endpoint_id).await
    }

    /// Marks endpoints stopped in this process before the transaction that disables or
    /// deletes them commits, runs `work`, and takes the marks back if it fails.
    pub(crate) async fn stopping<T, F>(&self, ids: &[EndpointId], work: F) -> Result<T>
    where
        F: Future<Output = Result<T>>,
    {
        self.stopped.mark(ids.iter().copied());
        let out = work.await;
        if out.is_err() {
            for id in ids {
                self.stopped.unmark(*id);
            }
        }
        out
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Whether this process must not start a request to the endpoint: it was disabled or
    /// deleted here, or another process's disable was seen by [`Store::refresh_stopped`].
    /// Checked by the dispatcher right before every request.
    pub fn endpoint_stopped(&self, endpoint_id: EndpointId) -> bool {
        self.stopped.contains(endpoint_id)
    }

    /// Reads whether the given endpoints (those a dispatcher holds work for) are still enabled,
    /// and marks the disabled and deleted ones: how a disable committed by another process
    /// reaches this one's in-memory work.
    pub async fn refresh_stopped(&self, endpoint_ids: &[EndpointId]) -> Result<()> {
        // Bounded by the dispatcher's in-flight permits, which may be set up to 100,000: read
        // in chunks under every database's limit on bound parameters.
        for chunk in endpoint_ids.chunks(crate::dialect::IDS_PER_STATEMENT) {
            let rows: Vec<(EndpointId, bool)> = endpoint::Entity::find()
                .select_only()
                .column(endpoint::Column::Id)
                .column(endpoint::Column::Disabled)
                .filter(endpoint::Column::Id.is_in(chunk.iter().copied()))
                .into_tuple()
                .all(&self.db)
                .await?;
            let disabled: HashMap<EndpointId, bool> = rows.into_iter().collect();
            // Missing (deleted) counts as disabled.
            let (stop, go): (Vec<EndpointId>, Vec<EndpointId>) = chunk
                .iter()
                .copied()
                .partition(|id| disabled.get(id).copied().unwrap_or(true));
            for id in go {
                self.stopped.unmark_settled(id);
            }
            self.stopped.mark(stop);
        }
        Ok(())
    }

    /// Gives claims of a disabled endpoint back as paused (the dispatcher found the endpoint
    /// disabled when it read it for a claimed batch).
    pub async fn pause_claims(&self, owner: &str, ids: &[DeliveryId]) -> Result<u64> {
        self.hand_back_claims(owner, ids, DeliveryState::Paused)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::named;

    #[test]
    fn marks_expire_and_an_enable_removes_one() {
        let s = StoppedEndpoints::default();
        let [a, b, c, old] = ["ep_a", "ep_b", "ep_c", "ep_old"].map(named::<EndpointId>);
        s.mark([a, b]);
        assert!(s.contains(a) && s.contains(b));
        s.unmark(a);
        assert!(!s.contains(a));
        // A fresh mark survives a read that still shows the endpoint enabled.
        s.unmark_settled(b);
        assert!(s.contains(b));
        // An expired mark is dropped at the next mark, so the set stays bounded.
        if let Some(at) = Instant::now().checked_sub(MARK_LIFETIME + Duration::from_secs(1)) {
            s.edit().map.insert(old, at);
            assert!(!s.contains(old));
        }
        s.mark([c]);
        assert_eq!(s.len(), 2, "ep_b and ep_c; ep_old expired");
    }
}
