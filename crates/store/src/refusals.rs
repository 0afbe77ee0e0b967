//! The requests inbound sources refused (the dashboard's Requests view): written in batches by
//! each receiving process (at most one insert a second, whatever the flood), kept to the
//! newest [`REFUSALS_KEPT`] per source as they are written, and pruned after
//! [`REFUSAL_RETENTION`] by the scheduler.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{RefusalId, SourceId, TenantId};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set};

use crate::entities::{Owned, inbound_refusal};
use crate::{Result, Store, StoreError, System};

/// Refused requests kept per source: the newest.
pub const REFUSALS_KEPT: u64 = 1000;
/// How long a refused request is kept.
pub const REFUSAL_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most a Requests page lists at once.
pub const REFUSALS_PAGE: u64 = 100;

/// A refused request to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRefusal {
    pub source_id: SourceId,
    pub tenant_id: TenantId,
    pub at: Timestamp,
    pub reason: domain::inbound_refusal::Reason,
    pub detail: String,
    pub status: u16,
    pub size: u64,
    pub remote_addr: String,
    pub headers: Vec<(String, String)>,
}

/// A recorded refusal, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub id: RefusalId,
    pub at: Timestamp,
    /// None: a reason this version does not know (written by a newer one).
    pub reason: Option<domain::inbound_refusal::Reason>,
    pub detail: String,
    pub status: u16,
    pub size: u64,
    pub remote_addr: String,
    pub headers: Vec<(String, String)>,
}

impl TryFrom<inbound_refusal::Model> for Refusal {
    type Error = StoreError;
    fn try_from(m: inbound_refusal::Model) -> Result<Refusal> {
        let headers = serde_json::from_str(&m.headers).map_err(|e| {
            StoreError::Corrupt(format!("inbound refusal {}: column headers: {e}", m.id))
        })?;
        Ok(Refusal {
            at: m.id.created_at(),
            id: m.id,
            reason: domain::inbound_refusal::Reason::parse(&m.reason),
            detail: m.detail,
            status: u16::try_from(m.status).unwrap_or_default(),
            size: u64::try_from(m.size).unwrap_or_default(),
            remote_addr: m.remote_addr,
            headers,
        })
    }
}

impl Store {
    /// Source `source`'s refused requests, newest first, older than `before` when given, at
    /// most `limit` (up to [`REFUSALS_PAGE`]). Scoped to the tenant: another tenant's source
    /// lists nothing (its page answers not found first).
    pub async fn list_refusals(
        &self,
        tenant: TenantId,
        source: SourceId,
        before: Option<RefusalId>,
        limit: u64,
    ) -> Result<Vec<Refusal>> {
        let mut q = inbound_refusal::Entity::find_in(tenant)
            .filter(inbound_refusal::Column::SourceId.eq(source));
        if let Some(before) = before {
            q = q.filter(inbound_refusal::Column::Id.lt(before));
        }
        q.order_by_desc(inbound_refusal::Column::Id)
            .limit(limit.min(REFUSALS_PAGE))
            .all(&self.db)
            .await?
            .into_iter()
            .map(Refusal::try_from)
            .collect()
    }
}

impl System<'_> {
    /// Records refused requests in one transaction, then trims each source they belong to to
    /// its newest `keep` (one indexed read and one delete per source in the batch).
    pub async fn record_refusals(&self, rows: &[NewRefusal], keep: u64) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let models: Vec<inbound_refusal::ActiveModel> = rows
            .iter()
            .map(|r| inbound_refusal::ActiveModel {
                id: Set(RefusalId::new_at(r.at, &mut rand::rng())),
                source_id: Set(r.source_id),
                tenant_id: Set(r.tenant_id),
                reason: Set(r.reason.as_str().to_owned()),
                detail: Set(r.detail.clone()),
                status: Set(i32::from(r.status)),
                size: Set(i64::try_from(r.size).unwrap_or(i64::MAX)),
                remote_addr: Set(r.remote_addr.clone()),
                headers: Set(serde_json::to_string(&r.headers).expect("plain strings")),
            })
            .collect();
        let mut sources: Vec<SourceId> = rows.iter().map(|r| r.source_id).collect();
        sources.sort();
        sources.dedup();
        let txn = self.write_txn().await?;
        // A few hundred rows at most (the writer's bound); chunked below SQLite's 32k values.
        for chunk in models.chunks(500) {
            inbound_refusal::Entity::insert_many(chunk.to_vec())
                .exec_without_returning(&*txn)
                .await?;
        }
        for source in sources {
            let oldest_kept: Option<RefusalId> = inbound_refusal::Entity::find()
                .select_only()
                .column(inbound_refusal::Column::Id)
                .filter(inbound_refusal::Column::SourceId.eq(source))
                .order_by_desc(inbound_refusal::Column::Id)
                .offset(keep.saturating_sub(1))
                .limit(1)
                .into_tuple()
                .one(&*txn)
                .await?;
            if let Some(oldest) = oldest_kept {
                inbound_refusal::Entity::delete_many()
                    .filter(inbound_refusal::Column::SourceId.eq(source))
                    .filter(inbound_refusal::Column::Id.lt(oldest))
                    .exec(&*txn)
                    .await?;
            }
        }
        txn.commit().await?;
        Ok(())
    }
}
