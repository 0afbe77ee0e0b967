//! Claims: the dispatcher takes due deliveries (leased to it), renews, defers and gives them
//! back; expired leases return to pending.

use std::time::Duration;

use domain::Timestamp;
use domain::delivery::DeliveryState;
use domain::ids::{DeliveryId, EndpointId, MessageId};
use sea_orm::sea_query::{Expr, SimpleExpr, Value};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};

use crate::entities::Owned;
use crate::entities::delivery;
use crate::{Result, Store};

/// The earliest due time of pending work (through `idx_deliveries_due`).
pub(crate) const NEXT_DUE_SQL: &str =
    "SELECT MIN(next_attempt_at) AS at FROM deliveries WHERE state = 'pending'";

/// What a claim of new work takes: deliveries created since `since`, oldest first, except
/// those of the endpoints in `skip` (those whose line in this process is full: their new work
/// would only be deferred, and taking it first would keep other endpoints' new messages
/// waiting behind it; the claim of due work still takes it, oldest due first).
#[derive(Clone, Copy, Debug)]
pub struct Fresh<'a> {
    pub since: Timestamp,
    pub skip: &'a [EndpointId],
}

/// The claim with its values bound, as [`crate::System::claim_due`] runs it.
pub(crate) fn claim_statement(
    sql: &crate::dialect::Dialect,
    owner: &str,
    now: Timestamp,
    lease_until: Timestamp,
    limit: u64,
    fresh: Option<Fresh<'_>>,
) -> Statement {
    let mut values: Vec<Value> = vec![
        owner.into(),
        lease_until.as_millis().into(),
        now.as_millis().into(),
        now.as_millis().into(),
        (limit as i64).into(),
    ];
    if let Some(f) = fresh {
        values.push(f.since.as_millis().into());
        values.extend(f.skip.iter().map(|e| Value::from(*e)));
    }
    sql.statement((sql.claim)(fresh.map(|f| f.skip.len())), values)
}

/// How long an expired endpoint lease row is kept before the reaper removes it.
const ENDPOINT_LEASE_KEPT: std::time::Duration = std::time::Duration::from_secs(600);

/// The columns that hand a claimed delivery back to the queue, without counting an attempt.
fn back_to_pending(
    update: sea_orm::UpdateMany<delivery::Entity>,
) -> sea_orm::UpdateMany<delivery::Entity> {
    hand_back(update, DeliveryState::Pending)
}

/// Deliveries in `state`, written as a literal so that the partial index over that state
/// (`idx_deliveries_due`, `_leased`, `_failed`) applies: a bound parameter would not match
/// the index's WHERE in a prepared plan (m0007).
pub(crate) fn in_state(state: DeliveryState) -> SimpleExpr {
    Expr::cust(format!("state = '{}'", state.as_str()))
}

/// Sending deliveries whose lease ran out, back to pending (through `idx_deliveries_leased`).
pub(crate) fn expired_leases(now: Timestamp) -> sea_orm::UpdateMany<delivery::Entity> {
    back_to_pending(delivery::Entity::update_many())
        .filter(in_state(DeliveryState::Sending))
        .filter(delivery::Column::LeaseExpiresAt.lt(now.as_millis()))
}

/// The columns that end a claim (or any lease) and leave the delivery in `state`.
pub(crate) fn hand_back(
    update: sea_orm::UpdateMany<delivery::Entity>,
    state: DeliveryState,
) -> sea_orm::UpdateMany<delivery::Entity> {
    update
        .col_expr(delivery::Column::State, Expr::value(state.as_str()))
        .col_expr(
            delivery::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            delivery::Column::LeaseExpiresAt,
            Expr::value(Option::<i64>::None),
        )
}

impl Store {
    /// Skips a dead (failed) delivery so that its ordering key flows again.
    pub async fn skip_delivery(
        &self,
        tenant: domain::ids::TenantId,
        msg_id: MessageId,
        endpoint_id: EndpointId,
    ) -> Result<bool> {
        let res = delivery::Entity::update_in(tenant)
            .col_expr(
                delivery::Column::State,
                Expr::value(DeliveryState::Skipped.as_str()),
            )
            .col_expr(
                delivery::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(delivery::Column::MsgId.eq(msg_id))
            .filter(delivery::Column::EndpointId.eq(endpoint_id))
            .filter(delivery::Column::State.is_in([
                DeliveryState::Failed.as_str(),
                DeliveryState::Pending.as_str(),
            ]))
            .exec(&self.db)
            .await?;
        Ok(res.rows_affected == 1)
    }
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Claims up to `limit` due deliveries for `owner` until `lease_until`, oldest due first,
    /// or, with `fresh_since`, only those created since then. An ordered delivery
    /// is due only when no earlier sequence number of its (endpoint, key) is still pending,
    /// being sent or dead: that keeps per-key order and makes a dead head block its key.
    pub async fn claim_due(
        &self,
        owner: &str,
        now: Timestamp,
        lease_until: Timestamp,
        limit: u64,
        fresh: Option<Fresh<'_>>,
    ) -> Result<Vec<delivery::Model>> {
        // Planned for each claim on PostgreSQL: the queue swings from empty to a backlog and
        // back, and a plan kept from an empty table reads a backlog whole (see
        // `query_planned_now`). SQLite plans from the schema alone.
        self.claim(claim_statement(
            self.sql,
            owner,
            now,
            lease_until,
            limit,
            fresh,
        ))
        .await
    }

    /// Returns deliveries whose lease ran out (their worker died) to pending, without counting
    /// an attempt. Returns how many.
    pub async fn reap_expired_leases(&self, now: Timestamp) -> Result<u64> {
        let journaled = self.reap_journals(now.as_millis()).await?;
        let _turn = self.write_turn().await;
        let res = expired_leases(now).exec(&self.db).await?;
        if let Some(leases) = &self.sql.endpoint_leases {
            // Endpoint leases expire by their time alone; rows long expired (a deleted
            // endpoint's, an idle one's) are removed so the table stays as small as the set of
            // endpoints recently sent to.
            let stale = now.as_millis() - ENDPOINT_LEASE_KEPT.as_millis() as i64;
            self.db
                .execute(self.sql.statement(leases.forget_expired, [stale.into()]))
                .await?;
        }
        Ok(journaled + res.rows_affected)
    }

    /// Gives back claims `owner` will not start (shutdown), without counting an attempt.
    pub async fn release_claims(&self, owner: &str, ids: &[DeliveryId]) -> Result<u64> {
        self.hand_back_claims(owner, ids, DeliveryState::Pending)
            .await
    }

    /// Ends `owner`'s claims on `ids` that it still holds, leaving them in `state`.
    pub(crate) async fn hand_back_claims(
        &self,
        owner: &str,
        ids: &[DeliveryId],
        state: DeliveryState,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.write_out_handed(owner, ids.iter().copied(), Duration::ZERO)
            .await?;
        let _turn = self.write_turn().await;
        let res = hand_back(delivery::Entity::update_many(), state)
            .filter(delivery::Column::Id.is_in(ids.iter().copied()))
            .filter(delivery::Column::LeaseOwner.eq(owner))
            .filter(delivery::Column::State.eq(DeliveryState::Sending.as_str()))
            .exec(&self.db)
            .await?;
        Ok(res.rows_affected)
    }

    /// The earliest time a pending delivery becomes due, to know how long to sleep.
    pub async fn next_due_at(&self) -> Result<Option<Timestamp>> {
        let backend = self.db.get_database_backend();
        let sql = NEXT_DUE_SQL;
        let row = self
            .db
            .query_one(Statement::from_string(backend, sql))
            .await?;
        Ok(row
            .and_then(|r| r.try_get::<Option<i64>>("", "at").ok().flatten())
            .map(Timestamp::from_millis))
    }

    /// Extends to `until` `owner`'s leases on `endpoints` (PostgreSQL; see `endpoint_leases`)
    /// and answers which it still holds: one taken over by another process after it expired
    /// is not renewed, and its deliveries must no longer be handed to this one.
    pub async fn renew_endpoint_leases(
        &self,
        owner: &str,
        endpoints: &[EndpointId],
        until: Timestamp,
    ) -> Result<Vec<EndpointId>> {
        let Some(leases) = &self.sql.endpoint_leases else {
            return Ok(endpoints.to_vec());
        };
        if endpoints.is_empty() {
            return Ok(Vec::new());
        }
        let mut kept = Vec::with_capacity(endpoints.len());
        let mut sorted = endpoints.to_vec();
        sorted.sort();
        for chunk in sorted.chunks(500) {
            let sql = leases
                .renew
                .replace("{ids}", &self.sql.params(3, chunk.len()));
            let mut values: Vec<Value> = vec![until.as_millis().into(), owner.into()];
            values.extend(chunk.iter().map(Value::from));
            let rows = self.db.query_all(self.sql.statement(sql, values)).await?;
            for r in rows {
                kept.push(r.try_get("", "endpoint_id")?);
            }
        }
        Ok(kept)
    }

    /// Gives up every endpoint lease `owner` holds (a dispatcher stopping, after its claims
    /// are recorded or given back), so other processes take its endpoints at once.
    pub async fn release_endpoint_leases(&self, owner: &str) -> Result<u64> {
        let Some(leases) = &self.sql.endpoint_leases else {
            return Ok(0);
        };
        let res = self
            .db
            .execute(self.sql.statement(leases.release, [owner.into()]))
            .await?;
        Ok(res.rows_affected())
    }

    /// Extends to `until` the leases `owner` holds on `ids`.
    pub async fn renew_leases(
        &self,
        owner: &str,
        ids: &[DeliveryId],
        until: Timestamp,
    ) -> Result<u64> {
        // An attempt running this long is shown (see `journal::SHOWN_AFTER`); the others'
        // journals are younger than a third of their lease, which the next renewal finds.
        self.write_out_handed(
            owner,
            ids.iter().copied(),
            crate::postgres::journal::SHOWN_AFTER,
        )
        .await?;
        let _turn = self.write_turn().await;
        let mut renewed = 0;
        for chunk in ids.chunks(500) {
            // Only the claims this process still holds in memory: a claim it lost track of
            // (an error between claim and send) expires and returns to pending by itself.
            let sql = self
                .sql
                .renew_leases
                .replace("{ids}", &self.sql.params(3, chunk.len()));
            let mut values: Vec<Value> = vec![until.as_millis().into(), owner.into()];
            values.extend(chunk.iter().map(Value::from));
            let res = self.db.execute(self.sql.statement(sql, values)).await?;
            renewed += res.rows_affected();
        }
        Ok(renewed)
    }

    /// Puts claimed deliveries back, each until its time, without counting an attempt (flow
    /// control: breaker open, endpoint saturated, throttled).
    pub async fn defer_claims(
        &self,
        owner: &str,
        deferrals: &[(DeliveryId, Timestamp)],
    ) -> Result<()> {
        self.write_out_handed(owner, deferrals.iter().map(|(id, _)| *id), Duration::ZERO)
            .await?;
        let _turn = self.write_turn().await;
        use sea_orm::sea_query::{CaseStatement, SimpleExpr};
        // One statement per chunk however many deliveries: the claim loop waits on this.
        for chunk in deferrals.chunks(200) {
            let mut case = CaseStatement::new();
            for (id, until) in chunk {
                case = case.case(delivery::Column::Id.eq(id), Expr::value(until.as_millis()));
            }
            let next_at: SimpleExpr = case
                .finally(Expr::col(delivery::Column::NextAttemptAt))
                .into();
            back_to_pending(delivery::Entity::update_many())
                .col_expr(delivery::Column::NextAttemptAt, next_at)
                .filter(delivery::Column::Id.is_in(chunk.iter().map(|(id, _)| *id)))
                .filter(delivery::Column::LeaseOwner.eq(owner))
                .filter(delivery::Column::State.eq(DeliveryState::Sending.as_str()))
                .exec(&self.db)
                .await?;
        }
        Ok(())
    }

    /// Moves an endpoint's due backlog to `until` (its breaker opened), so it is not claimed
    /// and deferred one by one. Returns how many moved.
    pub async fn defer_endpoint_backlog(
        &self,
        endpoint_id: EndpointId,
        until: Timestamp,
    ) -> Result<u64> {
        let values: Vec<Value> = vec![until.as_millis().into(), endpoint_id.into()];
        let res = self
            .db
            .execute(self.sql.statement(self.sql.defer_backlog, values))
            .await?;
        Ok(res.rows_affected())
    }
}
