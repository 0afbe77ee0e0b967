//! Tenants, their API keys, dashboard users and sessions.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::Timestamp;
use domain::classify::StatusPreset;
use domain::ids::{ApiKeyId, SessionId, TenantId, UserId};
use domain::retention::RetentionDays;
use rand::RngCore;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, IntoActiveModel, QueryFilter,
    QuerySelect, Set,
};
use sha2::{Digest, Sha256};

use crate::entities::Owned;
use crate::entities::{api_key, session, tenant, user};
use crate::error::conflict_as;
use crate::{ListParams, Page, Result, Store, StoreError, page::fetch_page};

#[derive(Clone, Debug)]
pub struct NewTenant {
    pub name: String,
    pub notification_email: String,
    pub ingest_rate: Option<i32>,
    pub ingest_burst: Option<i32>,
}

/// SHA-256 of a high-entropy token, URL-safe base64. API keys and session tokens are 256-bit
/// random values, so a fast hash suffices (a slow KDF protects low-entropy passwords only).
pub fn hash_token(token: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(token.as_bytes()))
}

pub(crate) fn random_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes))
}

impl Store {
    pub async fn create_tenant(&self, new: NewTenant) -> Result<tenant::Model> {
        let now = Timestamp::now().as_millis();
        let model = tenant::ActiveModel {
            id: Set(TenantId::new()),
            name: Set(new.name),
            notification_email: Set(new.notification_email),
            ingest_rate: Set(new.ingest_rate),
            ingest_burst: Set(new.ingest_burst),
            status_preset: Set(None),
            payload_retention_days: Set(None),
            metadata_retention_days: Set(None),
            portal_settings: Set(None),
            warning_recipient: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        };
        Ok(model.insert(&self.db).await?)
    }

    pub async fn get_tenant(&self, tenant: TenantId) -> Result<tenant::Model> {
        tenant::Entity::find_by_id(tenant)
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("tenant"))
    }

    pub async fn set_notification_email(&self, tenant: TenantId, email: &str) -> Result<()> {
        let mut model = self.get_tenant(tenant).await?.into_active_model();
        model.notification_email = Set(email.to_owned());
        model.updated_at = Set(Timestamp::now().as_millis());
        model.update(&self.db).await?;
        Ok(())
    }

    /// Who gets the tenant's early-warning emails (endpoints failing before the auto-disable).
    pub async fn set_warning_recipient(
        &self,
        tenant: TenantId,
        recipient: &domain::email::WarningRecipient,
    ) -> Result<()> {
        self.update_tenant(
            tenant,
            [(
                tenant::Column::WarningRecipient,
                Expr::value(recipient.to_column()),
            )],
        )
        .await
    }

    /// The tenant's default for endpoints that choose no `statusPreset`; `None` hands the choice
    /// back to the server's setting. This process's dispatchers use it from their next batch,
    /// other processes' within a second (see `cache`).
    pub async fn set_status_preset(
        &self,
        tenant: TenantId,
        preset: Option<StatusPreset>,
    ) -> Result<()> {
        let res = self
            .update_tenant(
                tenant,
                [(tenant::Column::StatusPreset, Expr::value(preset))],
            )
            .await;
        self.presets.clear();
        res
    }

    /// The tenant's retention choice (unset: the server's); checked by the caller against
    /// `max_retention`. The next prune applies it.
    pub async fn set_retention(&self, tenant: TenantId, days: RetentionDays) -> Result<()> {
        let column = |d: Option<u32>| Expr::value(d.map(crate::resources::days_column));
        self.update_tenant(
            tenant,
            [
                (tenant::Column::PayloadRetentionDays, column(days.payload)),
                (tenant::Column::MetadataRetentionDays, column(days.metadata)),
            ],
        )
        .await
    }

    /// The tenant's app-portal settings (checked by `PortalSettings::parse`); the portal's next
    /// page uses them.
    pub async fn set_portal_settings(
        &self,
        tenant: TenantId,
        settings: &domain::portal::PortalSettings,
    ) -> Result<()> {
        let json = (settings != &domain::portal::PortalSettings::default())
            .then(|| crate::to_json(settings));
        self.update_tenant(
            tenant,
            [(tenant::Column::PortalSettings, Expr::value(json))],
        )
        .await
    }

    /// Sets `columns` of the tenant's row and its `updated_at`; not found if there is none.
    async fn update_tenant<const N: usize>(
        &self,
        tenant: TenantId,
        columns: [(tenant::Column, sea_orm::sea_query::SimpleExpr); N],
    ) -> Result<()> {
        let mut update = tenant::Entity::update_many()
            .col_expr(
                tenant::Column::UpdatedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(tenant::Column::Id.eq(tenant));
        for (column, value) in columns {
            update = update.col_expr(column, value);
        }
        if update.exec(&self.db).await?.rows_affected == 0 {
            return Err(StoreError::not_found("tenant"));
        }
        Ok(())
    }

    /// Makes a new API key. The plaintext token is returned once and only its hash is kept.
    pub async fn create_api_key(
        &self,
        tenant: TenantId,
        name: &str,
    ) -> Result<(api_key::Model, String)> {
        let token = random_token("hk_");
        let model = api_key::ActiveModel {
            id: Set(ApiKeyId::new()),
            tenant_id: Set(tenant),
            name: Set(name.to_owned()),
            prefix: Set(token.chars().take(8).collect()),
            key_hash: Set(hash_token(&token)),
            created_at: Set(Timestamp::now().as_millis()),
            last_used_at: Set(None),
            revoked_at: Set(None),
        };
        let model = model.insert(&self.db).await?;
        Ok((model, token))
    }

    pub async fn list_api_keys(
        &self,
        tenant: TenantId,
        params: &ListParams,
    ) -> Result<Page<api_key::Model>> {
        let select = api_key::Entity::find_in(tenant);
        fetch_page(
            &self.db,
            select,
            api_key::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    pub async fn revoke_api_key(&self, tenant: TenantId, key: ApiKeyId) -> Result<()> {
        let res = api_key::Entity::update_in(tenant)
            .col_expr(
                api_key::Column::RevokedAt,
                Expr::value(Timestamp::now().as_millis()),
            )
            .filter(api_key::Column::Id.eq(key))
            .filter(api_key::Column::RevokedAt.is_null())
            .exec(&self.db)
            .await?;
        // Every copy goes, so the key stops working now (other processes: within a second).
        self.keys.clear();
        if res.rows_affected == 0 {
            return Err(StoreError::not_found("api key"));
        }
        Ok(())
    }

    /// Writes when a key was last used (shown to tenants, to spot unused or leaked keys), at
    /// most once a minute per key, in the background so no request waits for it. Runs only
    /// when the key is read from the database, which the one-second copies already limit.
    fn note_key_used(&self, key: &api_key::Model) {
        let now = Timestamp::now().as_millis();
        let stale = now - KEY_USE_RESOLUTION.as_millis() as i64;
        if key.last_used_at.is_some_and(|at| at >= stale) {
            return;
        }
        let (db, id) = (self.db.clone(), key.id);
        tokio::spawn(async move {
            let res = api_key::Entity::update_many()
                .col_expr(api_key::Column::LastUsedAt, Expr::value(now))
                .filter(api_key::Column::Id.eq(id))
                .filter(
                    Condition::any()
                        .add(api_key::Column::LastUsedAt.is_null())
                        .add(api_key::Column::LastUsedAt.lt(stale)),
                )
                .exec(&db)
                .await;
            if let Err(e) = res {
                tracing::debug!(error = %e, "could not note an API key's use");
            }
        });
    }

    pub async fn create_user(
        &self,
        tenant: TenantId,
        email: &str,
        password_hash: &str,
        role: &str,
    ) -> Result<user::Model> {
        let model = user::ActiveModel {
            id: Set(UserId::new()),
            tenant_id: Set(tenant),
            email: Set(email.to_lowercase()),
            password_hash: Set(password_hash.to_owned()),
            role: Set(role.to_owned()),
            created_at: Set(Timestamp::now().as_millis()),
            last_login_at: Set(None),
        };
        model.insert(&self.db).await.map_err(conflict_as("email"))
    }

    /// Opens a dashboard session; returns the plaintext token for the cookie.
    pub async fn create_session(
        &self,
        tenant: TenantId,
        user: UserId,
        csrf_token: &str,
        expires_at: Timestamp,
    ) -> Result<(session::Model, String)> {
        let token = random_token("");
        let model = session::ActiveModel {
            id: Set(SessionId::new()),
            tenant_id: Set(tenant),
            user_id: Set(user),
            token_hash: Set(hash_token(&token)),
            csrf_token: Set(csrf_token.to_owned()),
            created_at: Set(Timestamp::now().as_millis()),
            expires_at: Set(expires_at.as_millis()),
        };
        Ok((model.insert(&self.db).await?, token))
    }

    pub async fn delete_session(&self, tenant: TenantId, session: SessionId) -> Result<()> {
        session::Entity::delete_in(tenant)
            .filter(session::Column::Id.eq(session))
            .exec(&self.db)
            .await?;
        Ok(())
    }
}

/// How precisely an API key's last use is kept.
const KEY_USE_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(60);

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// Authentication: the tenant owning a live API key. Runs before any tenant is known.
    /// Answers from a copy at most a second old (see `cache`).
    pub async fn authenticate_api_key(&self, token: &str) -> Result<Option<TenantId>> {
        let hash = hash_token(token);
        let load = async {
            let found = api_key::Entity::find()
                .filter(api_key::Column::KeyHash.eq(hash.as_str()))
                .filter(api_key::Column::RevokedAt.is_null())
                .one(&self.db)
                .await?;
            if let Some(k) = &found {
                self.note_key_used(k);
            }
            Ok(found.map(|k| k.tenant_id))
        };
        self.keys.get_or_load(hash.clone(), load).await
    }

    /// Each tenant's `status_preset` (`None`: the server's), for the dispatcher's batch of
    /// claimed deliveries; from copies at most a second old, the rest in one query. A tenant
    /// not found (deleted meanwhile) is left out.
    pub async fn tenant_presets(
        &self,
        tenants: impl IntoIterator<Item = TenantId>,
    ) -> Result<HashMap<TenantId, Option<StatusPreset>>> {
        let mut found = HashMap::new();
        let mut missing = HashMap::new();
        for t in tenants {
            match self.presets.get(&t) {
                Ok(p) => {
                    found.insert(t, p);
                }
                Err(generation) => {
                    missing.insert(t, generation);
                }
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let rows: Vec<(TenantId, Option<StatusPreset>)> = tenant::Entity::find()
            .select_only()
            .column(tenant::Column::Id)
            .column(tenant::Column::StatusPreset)
            .filter(tenant::Column::Id.is_in(missing.keys().copied()))
            .into_tuple()
            .all(&self.db)
            .await?;
        for (t, preset) in rows {
            if let Some(generation) = missing.get(&t) {
                self.presets.put(t, preset, *generation);
            }
            found.insert(t, preset);
        }
        Ok(found)
    }

    /// Login: the user with this email in any tenant (emails are unique across hookd).
    pub async fn find_user_for_login(&self, email: &str) -> Result<Option<user::Model>> {
        Ok(user::Entity::find()
            .filter(user::Column::Email.eq(email.to_lowercase()))
            .one(&self.db)
            .await?)
    }

    /// Keeps a sign-up until its address is confirmed; returns the token for the link.
    pub async fn create_pending_signup(
        &self,
        name: &str,
        email: &str,
        password_hash: &str,
        expires_at: Timestamp,
    ) -> Result<String> {
        use crate::entities::pending_signup;
        let token = random_token("");
        pending_signup::ActiveModel {
            token_hash: Set(hash_token(&token)),
            name: Set(name.to_owned()),
            email: Set(email.to_lowercase()),
            password_hash: Set(password_hash.to_owned()),
            created_at: Set(Timestamp::now().as_millis()),
            expires_at: Set(expires_at.as_millis()),
        }
        .insert(&self.db)
        .await?;
        Ok(token)
    }

    /// The unexpired sign-up behind a link's token, removed so the link works once.
    pub async fn take_pending_signup(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Option<crate::entities::pending_signup::Model>> {
        use crate::entities::pending_signup;
        let hash = hash_token(token);
        let txn = self.write_txn().await?;
        let found = pending_signup::Entity::find_by_id(hash.clone())
            .one(&*txn)
            .await?;
        pending_signup::Entity::delete_by_id(hash)
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(found.filter(|p| p.expires_at > now.as_millis()))
    }

    /// Queues an email that belongs to no tenant yet (a sign-up's confirmation).
    pub async fn enqueue_email_to(&self, to: &str, subject: &str, body: &str) -> Result<()> {
        let now = Timestamp::now().as_millis();
        crate::ops::email_row(None, to, subject, body, now)
            .insert(&self.db)
            .await?;
        Ok(())
    }

    /// Authentication: the unexpired session behind a cookie token.
    pub async fn find_session(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Option<session::Model>> {
        Ok(session::Entity::find()
            .filter(session::Column::TokenHash.eq(hash_token(token)))
            .filter(session::Column::ExpiresAt.gt(now.as_millis()))
            .one(&self.db)
            .await?)
    }
}
