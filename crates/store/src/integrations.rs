//! Integrations (Svix's integration API): API keys a tenant hands to a third party, each good
//! only for one application's messages and attempts (the API decides which routes). The key is
//! kept hashed for authentication and sealed for Svix's `GET …/key`, which reads it back
//! (decision 88). A lookup answers from a copy at most a second old (see `cache`), so a rotated
//! or deleted key fails on every process within a second and at once on the one that changed it.

use domain::Timestamp;
use domain::ids::{ApplicationId, IntegrationId, TenantId};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

use crate::entities::{Owned, integration};
use crate::tenants::{hash_token, random_token};
use crate::{ListParams, Page, Result, Store, StoreError, page::fetch_page};

/// The prefix that tells an integration key from an API key (`hk_`) or a portal token.
pub const INTEGRATION_KEY_PREFIX: &str = "integsk_";

/// What a live integration key allows: its tenant's one application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegrationGrant {
    pub tenant: TenantId,
    pub app: ApplicationId,
    pub integration: IntegrationId,
}

/// An integration's name and feature flags, as created or replaced.
#[derive(Clone, Debug, Default)]
pub struct IntegrationChanges {
    pub name: String,
    pub feature_flags: Vec<String>,
}

use crate::sealed::integration_key_context as context;

impl Store {
    /// A new integration of `app`, with a new key (read it with [`Store::integration_key`]).
    pub async fn create_integration(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        new: IntegrationChanges,
    ) -> Result<integration::Model> {
        let id = IntegrationId::new();
        let key = random_token(INTEGRATION_KEY_PREFIX);
        let now = Timestamp::now().as_millis();
        Ok(integration::ActiveModel {
            id: Set(id),
            tenant_id: Set(tenant),
            app_id: Set(app),
            name: Set(new.name),
            feature_flags: Set(crate::to_json(&new.feature_flags)),
            key_hash: Set(hash_token(&key)),
            key_sealed: Set(self.keyring().seal(&key, &context(&id))),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(&self.db)
        .await?)
    }

    pub async fn list_integrations(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        params: &ListParams,
    ) -> Result<Page<integration::Model>> {
        let select =
            integration::Entity::find_in(tenant).filter(integration::Column::AppId.eq(app));
        fetch_page(
            &self.db,
            select,
            integration::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    /// One integration of `app`; another tenant's or application's is not found.
    pub async fn get_integration(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
    ) -> Result<integration::Model> {
        let id: IntegrationId = id
            .parse()
            .map_err(|_| StoreError::not_found("integration"))?;
        integration::Entity::find_in(tenant)
            .filter(integration::Column::AppId.eq(app))
            .filter(integration::Column::Id.eq(id))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("integration"))
    }

    pub async fn update_integration(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
        changes: IntegrationChanges,
    ) -> Result<integration::Model> {
        let row = self.get_integration(tenant, app, id).await?;
        integration::Entity::update_in(tenant)
            .col_expr(integration::Column::Name, Expr::value(changes.name))
            .col_expr(
                integration::Column::FeatureFlags,
                Expr::value(crate::to_json(&changes.feature_flags)),
            )
            .col_expr(
                integration::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(integration::Column::Id.eq(row.id))
            .exec(&self.db)
            .await?;
        self.get_integration(tenant, app, id).await
    }

    /// Deletes an integration: its key stops working (on other processes within a second).
    pub async fn delete_integration(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
    ) -> Result<()> {
        let id: IntegrationId = id
            .parse()
            .map_err(|_| StoreError::not_found("integration"))?;
        let res = integration::Entity::delete_in(tenant)
            .filter(integration::Column::AppId.eq(app))
            .filter(integration::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        self.integrations.clear();
        if res.rows_affected == 0 {
            return Err(StoreError::not_found("integration"));
        }
        Ok(())
    }

    /// The integration's current key.
    pub async fn integration_key(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
    ) -> Result<String> {
        let row = self.get_integration(tenant, app, id).await?;
        Ok(self.keyring().open(&row.key_sealed, &context(&row.id))?)
    }

    /// Replaces the integration's key and returns the new one; the old one stops working at
    /// once (on other processes within a second).
    pub async fn rotate_integration_key(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
    ) -> Result<String> {
        let row = self.get_integration(tenant, app, id).await?;
        let key = random_token(INTEGRATION_KEY_PREFIX);
        integration::Entity::update_in(tenant)
            .col_expr(integration::Column::KeyHash, Expr::value(hash_token(&key)))
            .col_expr(
                integration::Column::KeySealed,
                Expr::value(self.keyring().seal(&key, &context(&row.id))),
            )
            .col_expr(
                integration::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(integration::Column::Id.eq(row.id))
            .exec(&self.db)
            .await?;
        self.integrations.clear();
        Ok(key)
    }
}

impl crate::System<'_> {
    /// Authentication: what a live integration key allows (`None`: unknown, rotated or
    /// deleted).
    pub async fn authenticate_integration_key(
        &self,
        key: &str,
    ) -> Result<Option<IntegrationGrant>> {
        let hash = hash_token(key);
        let load = async {
            let found = integration::Entity::find()
                .filter(integration::Column::KeyHash.eq(hash.as_str()))
                .one(&self.db)
                .await?;
            Ok::<_, StoreError>(found.map(|i| IntegrationGrant {
                tenant: i.tenant_id,
                app: i.app_id,
                integration: i.id,
            }))
        };
        self.integrations.get_or_load(hash.clone(), load).await
    }
}

/// The feature flags of a stored integration.
pub fn feature_flags(row: &integration::Model) -> Result<Vec<String>> {
    crate::from_json(
        &format!("integration {}: feature_flags", row.id),
        &row.feature_flags,
    )
}
