//! Inbound sources (issue 21): where webhooks from outside arrive, how they are verified
//! (sealed, as endpoint secrets are), and which application's endpoints receive them.

use domain::Timestamp;
use domain::ids::{SourceId, TenantId};
use domain::inbound::Scheme;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use crate::entities::{Owned, application, inbound_source};
use crate::error::conflict_as;
use crate::resources::check_owner;
use crate::sealed::{open_json, seal_json};
use crate::{Result, Store, StoreError, System};

/// A source with its verification opened.
#[derive(Debug, Clone)]
pub struct Source {
    pub row: inbound_source::Model,
    pub scheme: Scheme,
}

pub(crate) fn context(id: &SourceId) -> String {
    format!("inbound_source/{id}")
}

impl Store {
    fn open_source(&self, row: inbound_source::Model) -> Result<Source> {
        let what = format!("inbound source {}: column verification", row.id);
        let scheme = open_json(&self.seal, &context(&row.id), &row.verification, &what)?;
        Ok(Source { row, scheme })
    }

    /// Creates a source forwarding to `app`; its name is unique within the tenant.
    pub async fn create_source(
        &self,
        tenant: TenantId,
        app: &application::Model,
        name: &str,
        event_type: &str,
        scheme: &Scheme,
    ) -> Result<Source> {
        check_owner(tenant, &app.tenant_id, "application")?;
        let id = SourceId::new();
        let row = inbound_source::ActiveModel {
            id: Set(id),
            tenant_id: Set(tenant),
            app_id: Set(app.id),
            name: Set(name.to_owned()),
            event_type: Set(event_type.to_owned()),
            verification: Set(seal_json(&self.seal, &context(&id), scheme)),
            created_at: Set(Timestamp::now().as_millis()),
        };
        let txn = self.write_txn().await?;
        let row = row.insert(&*txn).await.map_err(conflict_as("name"))?;
        txn.commit().await?;
        self.open_source(row)
    }

    /// The tenant's sources, oldest first.
    pub async fn list_sources(&self, tenant: TenantId) -> Result<Vec<Source>> {
        inbound_source::Entity::find_in(tenant)
            .order_by_asc(inbound_source::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|r| self.open_source(r))
            .collect()
    }

    pub async fn get_source(&self, tenant: TenantId, id: &str) -> Result<Source> {
        let id: SourceId = id.parse().map_err(|_| StoreError::not_found("source"))?;
        let row = inbound_source::Entity::find_in(tenant)
            .filter(inbound_source::Column::Id.eq(id))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("source"))?;
        self.open_source(row)
    }

    pub async fn delete_source(&self, tenant: TenantId, id: &str) -> Result<()> {
        let source = self.get_source(tenant, id).await?;
        let txn = self.write_txn().await?;
        inbound_source::Entity::delete_by_id(source.row.id)
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        self.sources.clear();
        Ok(())
    }
}

impl System<'_> {
    /// The source an inbound request names, whoever's it is (the request carries no
    /// credential but its signature, checked next). A copy at most a second old (`cache`):
    /// a flood of requests to a source costs no query each; unknown ids are never kept.
    pub async fn source(&self, id: &str) -> Result<Source> {
        let id: SourceId = id.parse().map_err(|_| StoreError::not_found("source"))?;
        let load = async {
            let row = inbound_source::Entity::find_by_id(id).one(&self.db).await?;
            row.map(|r| self.open_source(r)).transpose()
        };
        self.sources
            .get_or_load(id, load)
            .await?
            .ok_or(StoreError::not_found("source"))
    }
}
