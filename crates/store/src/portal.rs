//! App portal tokens (issue 19): what a tenant hands to one of its customers so that customer
//! can manage exactly one application — through the Svix API with the token as bearer
//! credential, or through the portal. Stored hashed; each expires; `expire-all` brings the
//! expiry of an application's tokens forward; logout revokes one. A lookup answers from a copy
//! at most a second old (see `cache`), so a revoked token fails on every process within a
//! second and at once on the process that revoked it.

use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, PortalTokenId, TenantId};
use domain::portal::{Capabilities, Capability};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait,
    Set,
};

use crate::entities::{Owned, portal_token};
use crate::tenants::{hash_token, random_token};
use crate::{Result, Store};

/// The prefix that tells a portal token from an API key (`hk_`).
pub const PORTAL_TOKEN_PREFIX: &str = "hkp_";

/// Svix's bounds on a portal token's life: one hour to seven days, seven days by default.
pub const PORTAL_MIN_EXPIRY: Duration = Duration::from_secs(3_600);
pub const PORTAL_MAX_EXPIRY: Duration = Duration::from_secs(7 * 86_400);

/// The portal link of a token: the token in the fragment, which browsers never send to a
/// server, so it never reaches an access log or a `Referer`.
pub fn portal_url(base: &str, token: &str) -> String {
    format!("{}/portal/#token={token}", base.trim_end_matches('/'))
}

/// What a live portal token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortalGrant {
    pub tenant: TenantId,
    pub app: ApplicationId,
    pub read_only: bool,
    pub capabilities: Capabilities,
    pub expires_at: Timestamp,
}

/// A token to issue.
#[derive(Clone, Debug, Default)]
pub struct NewPortalToken {
    pub expiry: Duration,
    pub read_only: bool,
    pub session_id: Option<String>,
    pub feature_flags: Vec<String>,
    /// Svix's `capabilities`; None: the default for `read_only`.
    pub capabilities: Option<Vec<Capability>>,
}

/// A stored token's capabilities. Names this version does not know (a newer version wrote
/// them) grant nothing, and are logged.
fn capabilities_of(row: &portal_token::Model) -> Capabilities {
    let given = row.capabilities.as_deref().map(|json| {
        let names: Vec<String> = serde_json::from_str(json).unwrap_or_else(|e| {
            tracing::warn!(token = %row.id, error = %e, "unreadable portal capabilities");
            Vec::new()
        });
        names
            .iter()
            .filter_map(|n| {
                Capabilities::parse(std::slice::from_ref(n))
                    .inspect_err(
                        |e| tracing::warn!(token = %row.id, error = %e, "portal capability"),
                    )
                    .ok()
            })
            .flatten()
            .collect::<Vec<_>>()
    });
    Capabilities::granted(row.read_only, given.as_deref())
}

impl Store {
    /// Issues a token for `app` of `tenant`; returns the token (shown once, never stored) and
    /// its row.
    pub async fn create_portal_token(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        new: NewPortalToken,
    ) -> Result<(String, portal_token::Model)> {
        let token = random_token(PORTAL_TOKEN_PREFIX);
        let now = Timestamp::now();
        let row = portal_token::ActiveModel {
            id: Set(PortalTokenId::new()),
            tenant_id: Set(tenant),
            app_id: Set(app),
            token_hash: Set(hash_token(&token)),
            session_id: Set(new.session_id),
            read_only: Set(new.read_only),
            feature_flags: Set(crate::to_json(&new.feature_flags)),
            created_at: Set(now.as_millis()),
            expires_at: Set(now.plus(new.expiry).as_millis()),
            revoked_at: Set(None),
            capabilities: Set(new
                .capabilities
                .map(|caps| crate::to_json(&caps.iter().map(|c| c.name()).collect::<Vec<_>>()))),
        }
        .insert(&self.db)
        .await?;
        Ok((token, row))
    }

    /// Makes every live token of `app` (only those of `session_ids`, when given) expire within
    /// `within`. Returns how many were brought forward.
    pub async fn expire_portal_tokens(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        within: Duration,
        session_ids: &[String],
    ) -> Result<u64> {
        let at = Timestamp::now().plus(within).as_millis();
        let mut update = portal_token::Entity::update_in(tenant)
            .col_expr(portal_token::Column::ExpiresAt, Expr::value(at))
            .filter(portal_token::Column::AppId.eq(app))
            .filter(portal_token::Column::ExpiresAt.gt(at));
        if !session_ids.is_empty() {
            update = update.filter(portal_token::Column::SessionId.is_in(session_ids.to_vec()));
        }
        let res = update.exec(&self.db).await?;
        self.portal.clear();
        Ok(res.rows_affected)
    }
}

/// Where the count of an application's portal links stops.
const PORTAL_COUNT_CAP: u64 = 10_000;

impl Store {
    /// The newest `limit` portal tokens of `app` (live, expired and revoked), and how many it
    /// has in all (counted up to 10,000).
    pub async fn list_portal_tokens(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        limit: u64,
    ) -> Result<(Vec<portal_token::Model>, crate::Capped)> {
        let of_app =
            || portal_token::Entity::find_in(tenant).filter(portal_token::Column::AppId.eq(app));
        let rows = of_app()
            .order_by_desc(portal_token::Column::CreatedAt)
            .order_by_desc(portal_token::Column::Id)
            .limit(limit)
            .all(&self.db)
            .await?;
        let all = of_app()
            .select_only()
            .column(portal_token::Column::Id)
            .into_query();
        let total = crate::recovery::capped_count(&self.db, all, PORTAL_COUNT_CAP).await?;
        Ok((rows, total))
    }

    /// Revokes one portal token of `app` by its id: its link stops working at once on this
    /// process and within a second on the others. Returns whether it was live; a token of
    /// another tenant or application is not found.
    pub async fn revoke_portal_token_id(
        &self,
        tenant: TenantId,
        app: ApplicationId,
        id: &str,
    ) -> Result<bool> {
        let id: PortalTokenId = id
            .parse()
            .map_err(|_| crate::StoreError::not_found("portal link"))?;
        let now = Timestamp::now().as_millis();
        let res = portal_token::Entity::update_in(tenant)
            .col_expr(portal_token::Column::RevokedAt, Expr::value(now))
            .col_expr(portal_token::Column::ExpiresAt, Expr::value(now))
            .filter(portal_token::Column::AppId.eq(app))
            .filter(portal_token::Column::Id.eq(id))
            .filter(portal_token::Column::RevokedAt.is_null())
            .exec(&self.db)
            .await?;
        self.portal.clear();
        if res.rows_affected > 0 {
            return Ok(true);
        }
        let exists = portal_token::Entity::find_in(tenant)
            .filter(portal_token::Column::AppId.eq(app))
            .filter(portal_token::Column::Id.eq(id))
            .one(&self.db)
            .await?
            .is_some();
        if exists {
            Ok(false)
        } else {
            Err(crate::StoreError::not_found("portal link"))
        }
    }
}

impl crate::System<'_> {
    /// Authentication: what a live portal token allows (`None`: unknown, revoked or expired).
    pub async fn authenticate_portal_token(&self, token: &str) -> Result<Option<PortalGrant>> {
        let hash = hash_token(token);
        let load = async {
            let found = portal_token::Entity::find()
                .filter(portal_token::Column::TokenHash.eq(hash.as_str()))
                .filter(portal_token::Column::RevokedAt.is_null())
                .one(&self.db)
                .await?;
            Ok::<_, crate::StoreError>(found.map(|t| PortalGrant {
                tenant: t.tenant_id,
                app: t.app_id,
                read_only: t.read_only,
                capabilities: capabilities_of(&t),
                expires_at: Timestamp::from_millis(t.expires_at),
            }))
        };
        let grant = self.portal.get_or_load(hash.clone(), load).await?;
        // The copy may be up to a second old; its expiry is checked at every use.
        Ok(grant.filter(|g| g.expires_at > Timestamp::now()))
    }

    /// Revokes one portal token (logout). Returns whether it was live.
    pub async fn revoke_portal_token(&self, token: &str) -> Result<bool> {
        let now = Timestamp::now().as_millis();
        let res = portal_token::Entity::update_many()
            .col_expr(portal_token::Column::RevokedAt, Expr::value(now))
            // Expired from now on too, so pruning by expiry finds it.
            .col_expr(portal_token::Column::ExpiresAt, Expr::value(now))
            .filter(portal_token::Column::TokenHash.eq(hash_token(token)))
            .filter(portal_token::Column::RevokedAt.is_null())
            .exec(&self.db)
            .await?;
        self.portal.clear();
        Ok(res.rows_affected > 0)
    }
}
