//! Usage statistics the statistics tasks compute (Svix's `application.stats` and
//! `event-type.aggregate`), each over one tenant's applications (its operational application
//! left out).

use std::collections::{BTreeMap, BTreeSet};

use domain::Timestamp;
use domain::ids::{ApplicationId, TenantId};
use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, QuerySelect};

use crate::entities::{Owned, application, delivery, endpoint};
use crate::{Result, Store};

/// One application's message destinations (a message × an endpoint it was sent to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppUsage {
    pub app_id: ApplicationId,
    pub app_uid: Option<String>,
    pub message_destinations: u64,
}

/// The event types one application's endpoints subscribe to by name, and whether one of them
/// takes every event type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppEventTypes {
    pub app_id: ApplicationId,
    pub explicitly_subscribed: BTreeSet<String>,
    pub has_catch_all: bool,
}

impl Store {
    /// The tenant's applications among `ids_or_uids` (every one when `None`), and the ids or
    /// uids that named none.
    pub async fn resolve_applications(
        &self,
        tenant: TenantId,
        ids_or_uids: Option<&[String]>,
    ) -> Result<(Vec<application::Model>, Vec<String>)> {
        let all = application::Entity::find_in(tenant)
            .filter(application::Column::Internal.eq(false))
            .order_by_asc(application::Column::Id)
            .all(&self.db)
            .await?;
        let Some(wanted) = ids_or_uids else {
            return Ok((all, Vec::new()));
        };
        let names = |a: &application::Model| (a.id.to_string(), a.uid.clone());
        let mut found = Vec::new();
        let mut unresolved = Vec::new();
        for w in wanted {
            match all
                .iter()
                .find(|a| names(a).0 == *w || names(a).1.as_deref() == Some(w))
            {
                Some(a) if !found.iter().any(|f: &application::Model| f.id == a.id) => {
                    found.push(a.clone())
                }
                Some(_) => {}
                None => unresolved.push(w.clone()),
            }
        }
        Ok((found, unresolved))
    }

    /// Message destinations created in `[since, until)` for each of `apps`.
    pub async fn app_usage(
        &self,
        tenant: TenantId,
        apps: &[application::Model],
        since: Timestamp,
        until: Timestamp,
    ) -> Result<Vec<AppUsage>> {
        let counts: Vec<(ApplicationId, i64)> = delivery::Entity::find_in(tenant)
            .select_only()
            .column(delivery::Column::AppId)
            .column_as(delivery::Column::Id.count(), "n")
            .filter(delivery::Column::AppId.is_in(apps.iter().map(|a| a.id)))
            .filter(delivery::Column::CreatedAt.gte(since.as_millis()))
            .filter(delivery::Column::CreatedAt.lt(until.as_millis()))
            .group_by(delivery::Column::AppId)
            .into_tuple()
            .all(&self.db)
            .await?;
        let counts: BTreeMap<ApplicationId, i64> = counts.into_iter().collect();
        Ok(apps
            .iter()
            .map(|a| AppUsage {
                app_id: a.id,
                app_uid: a.uid.clone(),
                message_destinations: counts.get(&a.id).copied().unwrap_or(0).max(0) as u64,
            })
            .collect())
    }

    /// For each of the tenant's applications, the event types its endpoints name and whether
    /// one of them has no filter (takes every event type). Disabled endpoints count too: they
    /// subscribe again when enabled.
    pub async fn app_event_types(&self, tenant: TenantId) -> Result<Vec<AppEventTypes>> {
        let (apps, _) = self.resolve_applications(tenant, None).await?;
        let endpoints = endpoint::Entity::find_in(tenant)
            .filter(endpoint::Column::AppId.is_in(apps.iter().map(|a| a.id)))
            .all(&self.db)
            .await?;
        let mut out: BTreeMap<ApplicationId, AppEventTypes> = apps
            .iter()
            .map(|a| {
                let empty = AppEventTypes {
                    app_id: a.id,
                    explicitly_subscribed: BTreeSet::new(),
                    has_catch_all: false,
                };
                (a.id, empty)
            })
            .collect();
        for ep in &endpoints {
            let Some(entry) = out.get_mut(&ep.app_id) else {
                continue;
            };
            match ep.filter_types()? {
                Some(types) => entry.explicitly_subscribed.extend(types),
                None => entry.has_catch_all = true,
            }
        }
        Ok(out.into_values().collect())
    }
}
