//! Egress grants: the private networks and hosts the operator opened to one tenant (rules in
//! `domain::egress`). Read on every endpoint change and by the dispatcher for every batch, so a
//! lookup answers from a copy at most a second old (see `cache`); a change made here empties
//! this process's copies at once.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use domain::Timestamp;
use domain::egress::{Grant, GrantTarget, MAX_GRANTS_PER_TENANT};
use domain::ids::TenantId;
use sea_orm::sea_query::OnConflict;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, Set};

use crate::entities::{Owned, egress_grant, tenant};
use crate::{Result, Store, StoreError, System};

/// Where a grant was made: the command line (kept until revoked) or the configuration file
/// (kept while the file declares it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantOrigin {
    Cli,
    Config,
}

impl GrantOrigin {
    fn as_str(self) -> &'static str {
        match self {
            GrantOrigin::Cli => "cli",
            GrantOrigin::Config => "config",
        }
    }
}

/// A tenant's grants as the dispatcher and the endpoint checks use them.
pub type Grants = Arc<Vec<Grant>>;

fn decode(row: egress_grant::Model) -> Result<Grant> {
    let corrupt = |why: String| {
        StoreError::Corrupt(format!(
            "egress grant {:?} of tenant {}: {why}",
            row.target, row.tenant_id
        ))
    };
    Grant::parse(
        &row.target,
        row.redis_prefix.as_deref(),
        row.amqp_vhost.as_deref(),
        row.nats_prefix.as_deref(),
    )
    .map_err(corrupt)
}

impl Store {
    /// Opens `grant.target` to `tenant` (or changes the namespace of that grant). Past
    /// [`MAX_GRANTS_PER_TENANT`] a new target is refused.
    pub async fn grant_egress(
        &self,
        tenant: TenantId,
        grant: &Grant,
        origin: GrantOrigin,
    ) -> Result<()> {
        self.get_tenant(tenant).await?;
        let target = grant.target.to_string();
        let held = egress_grant::Entity::find_in(tenant).all(&self.db).await?;
        if held.len() >= MAX_GRANTS_PER_TENANT && !held.iter().any(|g| g.target == target) {
            return Err(StoreError::Conflict {
                field: "grants (at most 100 per tenant)",
            });
        }
        let ns = &grant.namespace;
        let row = egress_grant::ActiveModel {
            tenant_id: Set(tenant),
            target: Set(target),
            redis_prefix: Set(ns.redis_prefix.clone()),
            amqp_vhost: Set(ns.amqp_vhost.clone()),
            nats_prefix: Set(ns.nats_prefix.clone()),
            origin: Set(origin.as_str().to_owned()),
            created_at: Set(Timestamp::now().as_millis()),
        };
        egress_grant::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([egress_grant::Column::TenantId, egress_grant::Column::Target])
                    .update_columns([
                        egress_grant::Column::RedisPrefix,
                        egress_grant::Column::AmqpVhost,
                        egress_grant::Column::NatsPrefix,
                        egress_grant::Column::Origin,
                    ])
                    .to_owned(),
            )
            .exec(&self.db)
            .await?;
        self.grants.clear();
        Ok(())
    }

    /// Closes `target` to `tenant`; false when it was not granted.
    pub async fn revoke_egress(&self, tenant: TenantId, target: &GrantTarget) -> Result<bool> {
        let done = egress_grant::Entity::delete_in(tenant)
            .filter(egress_grant::Column::Target.eq(target.to_string()))
            .exec(&self.db)
            .await?;
        self.grants.clear();
        Ok(done.rows_affected > 0)
    }

    /// The tenant's grants, in the order they were made (from a copy at most a second old).
    pub async fn egress_grants(&self, tenant: TenantId) -> Result<Grants> {
        Ok(self
            .system()
            .egress_grants_of([tenant])
            .await?
            .remove(&tenant)
            .unwrap_or_default())
    }

    /// The tenant's grants with where each came from, for `hookd tenant grants`.
    pub async fn list_egress_grants(&self, tenant: TenantId) -> Result<Vec<(Grant, GrantOrigin)>> {
        egress_grant::Entity::find_in(tenant)
            .order_by_asc(egress_grant::Column::CreatedAt)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|row| {
                let origin = match row.origin.as_str() {
                    "config" => GrantOrigin::Config,
                    _ => GrantOrigin::Cli,
                };
                decode(row).map(|g| (g, origin))
            })
            .collect()
    }
}

impl System<'_> {
    /// How many tenants exist (the start warns about a server-wide allow list when several do).
    pub async fn count_tenants(&self) -> Result<u64> {
        Ok(tenant::Entity::find().count(&self.db).await?)
    }

    /// The grants of each of `tenants` (a tenant with none maps to an empty list), from copies
    /// at most a second old; one query for those not held.
    pub async fn egress_grants_of(
        &self,
        tenants: impl IntoIterator<Item = TenantId>,
    ) -> Result<HashMap<TenantId, Grants>> {
        let mut found = HashMap::new();
        let mut missing = HashMap::new();
        for t in tenants.into_iter().collect::<HashSet<_>>() {
            match self.grants.get(&t) {
                Ok(g) => {
                    found.insert(t, g);
                }
                Err(generation) => {
                    missing.insert(t, generation);
                }
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let rows = egress_grant::Entity::find()
            .filter(egress_grant::Column::TenantId.is_in(missing.keys().copied()))
            .order_by_asc(egress_grant::Column::CreatedAt)
            .all(&self.db)
            .await?;
        let mut read: HashMap<TenantId, Vec<Grant>> = HashMap::new();
        for row in rows {
            let tenant = row.tenant_id;
            read.entry(tenant).or_default().push(decode(row)?);
        }
        for (t, generation) in missing {
            let grants: Grants = Arc::new(read.remove(&t).unwrap_or_default());
            self.grants.put(t, grants.clone(), generation);
            found.insert(t, grants);
        }
        Ok(found)
    }

    /// Makes the grants declared in the configuration file exactly `declared`: each is made
    /// or brought in line, and a grant the file declared before but no longer does is revoked.
    /// Grants made with the command line are left alone unless the file names the same target.
    pub async fn declare_egress_grants(&self, declared: &[(TenantId, Grant)]) -> Result<()> {
        for (tenant, grant) in declared {
            self.grant_egress(*tenant, grant, GrantOrigin::Config)
                .await?;
        }
        let keep: HashSet<(TenantId, String)> = declared
            .iter()
            .map(|(t, g)| (*t, g.target.to_string()))
            .collect();
        let stale: Vec<egress_grant::Model> = egress_grant::Entity::find()
            .filter(egress_grant::Column::Origin.eq(GrantOrigin::Config.as_str()))
            .all(&self.db)
            .await?
            .into_iter()
            .filter(|row| !keep.contains(&(row.tenant_id, row.target.clone())))
            .collect();
        for row in stale {
            egress_grant::Entity::delete_in(row.tenant_id)
                .filter(egress_grant::Column::Target.eq(row.target))
                .exec(&self.db)
                .await?;
        }
        self.grants.clear();
        Ok(())
    }
}
