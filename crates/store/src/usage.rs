//! Usage statistics the statistics tasks compute (Svix's `application.stats` and
//! `event-type.aggregate`), each over one tenant's applications (its operational application
//! left out).

use std::collections::{BTreeMap, BTreeSet};

use domain::Timestamp;
use domain::ids::{ApplicationId, DeliveryId, EndpointId, TenantId};
use sea_orm::{ColumnTrait, ConnectionTrait, QueryFilter, QueryOrder, QuerySelect, QueryTrait};

use crate::entities::{Owned, application, delivery, endpoint};
use crate::{Result, Store};

/// One application's message destinations (a message × an endpoint it was sent to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppUsage {
    pub app_id: ApplicationId,
    pub app_uid: Option<String>,
    pub message_destinations: u64,
}

/// How many deliveries each of `endpoints` had created in `[since, until)`: (endpoint, n).
pub(crate) fn deliveries_per_endpoint(
    tenant: TenantId,
    endpoints: impl IntoIterator<Item = EndpointId>,
    since: Timestamp,
    until: Timestamp,
) -> sea_orm::Select<delivery::Entity> {
    crate::outcomes::seen(delivery::Entity::find_in(tenant))
        .select_only()
        .column(delivery::Column::EndpointId)
        .column_as(delivery::Column::Id.count(), "n")
        .filter(delivery::Column::EndpointId.is_in(endpoints))
        .filter(delivery_id_range(since, until))
        .filter(delivery::Column::CreatedAt.gte(since.as_millis()))
        .filter(delivery::Column::CreatedAt.lt(until.as_millis()))
        .group_by(delivery::Column::EndpointId)
}

/// Where the ids of deliveries created in `[since, until)` lie, for the endpoints' index
/// `(endpoint_id, id)`: an id carries the time it was minted, at most moments after its
/// delivery's `created_at`; a minute either side leaves room for a slow batch and a clock
/// step, and `created_at` itself decides.
fn delivery_id_range(since: Timestamp, until: Timestamp) -> sea_orm::Condition {
    const MINUTE: i64 = 60_000;
    // An id holds 48 bits of milliseconds (until the year 10889): no bound past them.
    const LAST: i64 = (1 << 48) - 1;
    let from = since.as_millis().saturating_sub(MINUTE).clamp(0, LAST);
    let to = until.as_millis().saturating_add(MINUTE);
    let mut range = sea_orm::Condition::all()
        .add(delivery::Column::Id.gte(DeliveryId::lower_bound(Timestamp::from_millis(from))));
    if (0..=LAST).contains(&to) {
        range =
            range.add(delivery::Column::Id.lt(DeliveryId::lower_bound(Timestamp::from_millis(to))));
    }
    range
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
        // A delivery's application is its endpoint's (m0033).
        let endpoints: BTreeMap<EndpointId, ApplicationId> = endpoint::Entity::find_in(tenant)
            .select_only()
            .column(endpoint::Column::Id)
            .column(endpoint::Column::AppId)
            .filter(endpoint::Column::AppId.is_in(apps.iter().map(|a| a.id)))
            .into_tuple()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        let ids: Vec<EndpointId> = endpoints.keys().copied().collect();
        let mut counts: BTreeMap<ApplicationId, i64> = BTreeMap::new();
        for chunk in ids.chunks(crate::dialect::IDS_PER_STATEMENT) {
            // A delivery that succeeded is not kept: its success attempt counts it.
            let statement = crate::outcomes::with_successes_per_endpoint(
                deliveries_per_endpoint(tenant, chunk.iter().copied(), since, until).into_query(),
                tenant,
                chunk,
                Some(since),
                Some(until),
            );
            let rows = self
                .db
                .query_all(self.db.get_database_backend().build(&statement))
                .await?;
            for row in &rows {
                let e = row.try_get_by_index::<EndpointId>(0)?;
                let n = row.try_get_by_index::<i64>(1)?;
                if let Some(app) = endpoints.get(&e) {
                    *counts.entry(*app).or_default() += n;
                }
            }
        }
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
