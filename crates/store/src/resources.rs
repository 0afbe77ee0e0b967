//! Configuration a tenant manages: applications, event types, endpoints and their secrets.

use std::collections::BTreeMap;
use std::time::Duration;

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, EventTypeId, SecretId, TenantId};
use domain::operational::{OperationalEvent, Trigger};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, IntoActiveModel, QueryFilter,
    QueryOrder, QuerySelect, QueryTrait, Set,
};

use crate::entities::Owned;
use crate::entities::{
    application, attempt, delivery, endpoint, endpoint_secret, event_type, message,
    ordering_sequence,
};
use crate::error::check_owner;
use crate::error::conflict_as;
use crate::{ListParams, Page, Result, Store, StoreError, page::fetch_page, to_json};

/// Which applications a listing leaves out (Svix's `exclude_apps_with_…`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AppFilter {
    /// Leave out applications without any endpoint.
    pub without_endpoints: bool,
    /// Leave out applications whose endpoints are all disabled (one without endpoints stays,
    /// unless `without_endpoints`).
    pub with_only_disabled_endpoints: bool,
}

#[derive(Clone, Debug, Default)]
pub struct NewApplication {
    pub name: String,
    pub uid: Option<String>,
    pub rate_limit: Option<i32>,
    pub metadata: BTreeMap<String, String>,
    /// Days kept; unset: the tenant's choice, else the server's.
    pub retention: domain::retention::RetentionDays,
}

#[derive(Clone, Debug, Default)]
pub struct NewEventType {
    pub name: String,
    pub description: String,
    pub schemas: Option<serde_json::Value>,
    pub feature_flags: Option<Vec<String>>,
    pub group_name: Option<String>,
    pub deprecated: bool,
    pub archived: bool,
}

/// Everything about an endpoint a tenant sets. Create and full update take the same shape;
/// partial updates merge into the stored endpoint before calling update. The default is
/// version 1, as Svix's.
#[derive(Clone, Debug)]
pub struct NewEndpoint {
    pub url: String,
    pub uid: Option<String>,
    pub description: String,
    pub version: i32,
    pub filter_types: Option<Vec<String>>,
    pub channels: Option<Vec<String>>,
    pub headers: BTreeMap<String, String>,
    pub metadata: BTreeMap<String, String>,
    pub disabled: bool,
    pub throttle_rate: Option<i32>,
    pub max_concurrency: Option<i32>,
    pub timeout_ms: Option<i64>,
    /// JSON of the endpoint's retry policy (domain's serde form); `None` = the default.
    pub retry_policy: Option<String>,
    /// JSON of the endpoint's status-code overrides; `None` = the default table.
    pub status_overrides: Option<String>,
    /// None: the server's setting.
    pub signature_headers: Option<domain::signing::SignatureHeaders>,
    /// Its deliveries carry a W3C `traceparent` header (while tracing is on).
    pub send_traceparent: bool,
}

impl Default for NewEndpoint {
    fn default() -> Self {
        NewEndpoint {
            url: String::new(),
            uid: None,
            description: String::new(),
            version: 1,
            filter_types: None,
            channels: None,
            headers: BTreeMap::new(),
            metadata: BTreeMap::new(),
            disabled: false,
            throttle_rate: None,
            max_concurrency: None,
            timeout_ms: None,
            retry_policy: None,
            status_overrides: None,
            signature_headers: None,
            send_traceparent: false,
        }
    }
}

/// A change of the disabled flag, with the reason shown to the tenant.
#[derive(Clone, Debug)]
pub enum EndpointChanges {
    Disable { reason: String },
    Enable,
}

/// A number of retention days as stored (checked against `max_retention`, so it fits).
pub(crate) fn days_column(days: u32) -> i32 {
    i32::try_from(days).unwrap_or(i32::MAX)
}

/// The row whose id (`I`, stored as bytes) or uid is `id_or_uid`.
fn by_id_or_uid<I, C>(id_col: C, uid_col: C, id_or_uid: &str) -> Condition
where
    I: std::str::FromStr + Into<sea_orm::Value>,
    C: ColumnTrait,
{
    let any = Condition::any().add(uid_col.eq(id_or_uid));
    match id_or_uid.parse::<I>() {
        Ok(id) => any.add(id_col.eq(id)),
        Err(_) => any,
    }
}

/// The deletes of `ids`' attempts and deliveries, as an application's deletion runs them for
/// each chunk of its endpoints: each through its table's endpoint index (m0032, m0033).
pub(crate) fn traffic_of_endpoints(
    ids: &[EndpointId],
) -> (
    sea_orm::DeleteMany<attempt::Entity>,
    sea_orm::DeleteMany<delivery::Entity>,
) {
    (
        attempt::Entity::delete_many()
            .filter(attempt::Column::EndpointId.is_in(ids.iter().copied())),
        delivery::Entity::delete_many()
            .filter(delivery::Column::EndpointId.is_in(ids.iter().copied())),
    )
}

impl Store {
    // --- applications -----------------------------------------------------------------------

    pub async fn create_application(
        &self,
        tenant: TenantId,
        new: NewApplication,
    ) -> Result<application::Model> {
        let now = Timestamp::now().as_millis();
        let model = application::ActiveModel {
            id: Set(ApplicationId::new()),
            tenant_id: Set(tenant),
            uid: Set(new.uid),
            name: Set(new.name),
            rate_limit: Set(new.rate_limit),
            metadata: Set(to_json(&new.metadata)),
            created_at: Set(now),
            updated_at: Set(now),
            payload_retention_days: Set(new.retention.payload.map(days_column)),
            metadata_retention_days: Set(new.retention.metadata.map(days_column)),
            payload_expunged_before: Set(None),
            internal: Set(false),
        };
        model.insert(&self.db).await.map_err(conflict_as("uid"))
    }

    /// Creates `new` (which has a uid), or, when its uid is taken (a request or a process
    /// racing this one made it), the application that has it.
    pub async fn create_application_or_get(
        &self,
        tenant: TenantId,
        new: NewApplication,
    ) -> Result<application::Model> {
        let uid = new.uid.clone().unwrap_or_default();
        match self.create_application(tenant, new).await {
            Err(StoreError::Conflict { .. }) if !uid.is_empty() => {
                self.get_application(tenant, &uid).await
            }
            made => made,
        }
    }

    /// Finds an application by its id or its uid (never the hidden operational one).
    pub async fn get_application(
        &self,
        tenant: TenantId,
        id_or_uid: &str,
    ) -> Result<application::Model> {
        // A copy at most a second old (see `cache`); this process's changes clear it. The
        // query is built only on a miss.
        let load = async {
            application::Entity::find_in(tenant)
                .filter(application::Column::Internal.eq(false))
                .filter(by_id_or_uid::<ApplicationId, _>(
                    application::Column::Id,
                    application::Column::Uid,
                    id_or_uid,
                ))
                .one(&self.db)
                .await
                .map_err(StoreError::from)
        };
        let key = (tenant, id_or_uid.to_owned());
        self.apps
            .get_or_load(key, load)
            .await?
            .ok_or(StoreError::not_found("application"))
    }

    /// The tenant's applications, those `filter` leaves out excepted.
    pub async fn list_applications(
        &self,
        tenant: TenantId,
        filter: AppFilter,
        params: &ListParams,
    ) -> Result<Page<application::Model>> {
        let apps_with = |only_enabled: bool| {
            let mut endpoints = endpoint::Entity::find_in(tenant)
                .select_only()
                .column(endpoint::Column::AppId);
            if only_enabled {
                endpoints = endpoints.filter(endpoint::Column::Disabled.eq(false));
            }
            endpoints.into_query()
        };
        let mut select =
            application::Entity::find_in(tenant).filter(application::Column::Internal.eq(false));
        if filter.without_endpoints {
            select = select.filter(application::Column::Id.in_subquery(apps_with(false)));
        }
        if filter.with_only_disabled_endpoints {
            // Kept: no endpoint at all, or at least one enabled.
            select = select.filter(
                Condition::any()
                    .add(application::Column::Id.not_in_subquery(apps_with(false)))
                    .add(application::Column::Id.in_subquery(apps_with(true))),
            );
        }
        fetch_page(
            &self.db,
            select,
            application::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    pub async fn update_application(
        &self,
        tenant: TenantId,
        id_or_uid: &str,
        new: NewApplication,
    ) -> Result<application::Model> {
        let mut model = self
            .get_application(tenant, id_or_uid)
            .await?
            .into_active_model();
        model.name = Set(new.name);
        model.uid = Set(new.uid);
        model.rate_limit = Set(new.rate_limit);
        model.metadata = Set(to_json(&new.metadata));
        model.payload_retention_days = Set(new.retention.payload.map(days_column));
        model.metadata_retention_days = Set(new.retention.metadata.map(days_column));
        model.updated_at = Set(Timestamp::now().as_millis());
        let updated = model.update(&self.db).await.map_err(conflict_as("uid"));
        self.apps.clear();
        updated
    }

    /// Deletes an application with its endpoints, messages, deliveries and attempts. Its
    /// endpoints stop receiving from the moment this commits, as if disabled (see `gate`).
    pub async fn delete_application(&self, tenant: TenantId, id_or_uid: &str) -> Result<()> {
        let app = self.get_application(tenant, id_or_uid).await?;
        let txn = self.write_txn().await?;
        let endpoint_ids: Vec<EndpointId> = endpoint::Entity::find()
            .filter(endpoint::Column::AppId.eq(app.id))
            .all(&*txn)
            .await?
            .into_iter()
            .map(|e| e.id)
            .collect();
        self.stopping(&endpoint_ids, async {
            // By its endpoints: its attempts through their endpoint index (m0032), its
            // deliveries through theirs (m0033: a delivery's application is its endpoint's, and
            // an endpoint's deletion takes its deliveries with it). An application may have
            // more endpoints than a statement may bind: in chunks.
            for ids in endpoint_ids.chunks(crate::dialect::IDS_PER_STATEMENT) {
                let (attempts, deliveries) = traffic_of_endpoints(ids);
                attempts.exec(&*txn).await?;
                deliveries.exec(&*txn).await?;
                ordering_sequence::Entity::delete_many()
                    .filter(ordering_sequence::Column::EndpointId.is_in(ids.iter().copied()))
                    .exec(&*txn)
                    .await?;
            }
            message::Entity::delete_many()
                .filter(message::Column::AppId.eq(app.id))
                .exec(&*txn)
                .await?;
            // The inbound sources forwarding to it go with it, with their ordering state.
            crate::inbound::delete_sources_of(&*txn, app.id).await?;
            // Endpoints and their secrets follow by ON DELETE CASCADE.
            application::Entity::delete_by_id(app.id)
                .exec(&*txn)
                .await?;
            txn.commit().await
        })
        .await?;
        self.apps.clear();
        self.sources.clear();
        Ok(())
    }

    // --- event types ------------------------------------------------------------------------

    pub async fn create_event_type(
        &self,
        tenant: TenantId,
        new: NewEventType,
    ) -> Result<event_type::Model> {
        let now = Timestamp::now().as_millis();
        let model = event_type::ActiveModel {
            id: Set(EventTypeId::new()),
            tenant_id: Set(tenant),
            name: Set(new.name),
            description: Set(new.description),
            schemas: Set(new.schemas.map(|s| to_json(&s))),
            feature_flags: Set(new.feature_flags.map(|f| to_json(&f))),
            group_name: Set(new.group_name),
            archived: Set(new.archived),
            deprecated: Set(new.deprecated),
            created_at: Set(now),
            updated_at: Set(now),
        };
        model.insert(&self.db).await.map_err(conflict_as("name"))
    }

    /// Creates an event type, or restores one of that name that was archived (deleted), with
    /// the new description, schemas and flags, as Svix does; a live one of that name is a
    /// conflict.
    pub async fn create_or_restore_event_type(
        &self,
        tenant: TenantId,
        new: NewEventType,
    ) -> Result<event_type::Model> {
        match self.get_event_type(tenant, &new.name).await {
            Ok(existing) if existing.archived => self.update_event_type(tenant, new).await,
            Ok(_) => Err(StoreError::Conflict { field: "name" }),
            Err(StoreError::NotFound { .. }) => self.create_event_type(tenant, new).await,
            Err(e) => Err(e),
        }
    }

    /// Deletes an event type for good (Svix's `expunge`): its name is free again, and
    /// messages of that type keep their type's name.
    pub async fn expunge_event_type(&self, tenant: TenantId, name: &str) -> Result<()> {
        let found = self.get_event_type(tenant, name).await?;
        event_type::Entity::delete_many()
            .filter(event_type::Column::TenantId.eq(tenant))
            .filter(event_type::Column::Id.eq(found.id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Those of `names` that are not a live (unarchived) event type of the tenant, in the
    /// order given.
    pub async fn unknown_event_types(
        &self,
        tenant: TenantId,
        names: &[String],
    ) -> Result<Vec<String>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let known: std::collections::HashSet<String> = event_type::Entity::find_in(tenant)
            .filter(event_type::Column::Name.is_in(names.iter().map(String::as_str)))
            .filter(event_type::Column::Archived.eq(false))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|e| e.name)
            .collect();
        Ok(names
            .iter()
            .filter(|n| !known.contains(*n))
            .cloned()
            .collect())
    }

    pub async fn get_event_type(&self, tenant: TenantId, name: &str) -> Result<event_type::Model> {
        event_type::Entity::find_in(tenant)
            .filter(event_type::Column::Name.eq(name))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("event type"))
    }

    pub async fn list_event_types(
        &self,
        tenant: TenantId,
        include_archived: bool,
        params: &ListParams,
    ) -> Result<Page<event_type::Model>> {
        let mut select = event_type::Entity::find_in(tenant);
        if !include_archived {
            select = select.filter(event_type::Column::Archived.eq(false));
        }
        fetch_page(
            &self.db,
            select,
            event_type::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    /// Replaces an event type's description, schemas, flags and archived state.
    pub async fn update_event_type(
        &self,
        tenant: TenantId,
        new: NewEventType,
    ) -> Result<event_type::Model> {
        let mut model = self
            .get_event_type(tenant, &new.name)
            .await?
            .into_active_model();
        model.description = Set(new.description);
        model.schemas = Set(new.schemas.map(|s| to_json(&s)));
        model.feature_flags = Set(new.feature_flags.map(|f| to_json(&f)));
        model.group_name = Set(new.group_name);
        model.deprecated = Set(new.deprecated);
        model.archived = Set(new.archived);
        model.updated_at = Set(Timestamp::now().as_millis());
        Ok(model.update(&self.db).await?)
    }

    /// Deleting an event type archives it: messages of that type stay readable.
    pub async fn archive_event_type(&self, tenant: TenantId, name: &str) -> Result<()> {
        let mut model = self.get_event_type(tenant, name).await?.into_active_model();
        model.archived = Set(true);
        model.updated_at = Set(Timestamp::now().as_millis());
        model.update(&self.db).await?;
        Ok(())
    }

    // --- endpoints --------------------------------------------------------------------------

    /// Creates an endpoint with its first signing secret (`whsec_…`).
    pub async fn create_endpoint(
        &self,
        tenant: TenantId,
        app: &application::Model,
        new: NewEndpoint,
        secret: &str,
    ) -> Result<endpoint::Model> {
        check_owner(tenant, &app.tenant_id, "application")?;
        let now = Timestamp::now().as_millis();
        let id = EndpointId::new();
        let model = endpoint::ActiveModel {
            id: Set(id),
            tenant_id: Set(tenant),
            app_id: Set(app.id),
            uid: Set(new.uid),
            url: Set(new.url),
            description: Set(new.description),
            version: Set(new.version),
            filter_types: Set(new.filter_types.map(|v| to_json(&v))),
            channels: Set(new.channels.map(|v| to_json(&v))),
            headers: Set(crate::sealed::seal_headers(&self.seal, &id, &new.headers)),
            metadata: Set(to_json(&new.metadata)),
            disabled: Set(new.disabled),
            disabled_reason: Set(new.disabled.then(|| "disabled by the tenant".to_owned())),
            disabled_at: Set(new.disabled.then_some(now)),
            throttle_rate: Set(new.throttle_rate),
            max_concurrency: Set(new.max_concurrency),
            timeout_ms: Set(new.timeout_ms),
            retry_policy: Set(new.retry_policy),
            status_overrides: Set(new.status_overrides),
            signature_headers: Set(new.signature_headers),
            auth: Set(None),
            mtls: Set(None),
            failing_since: Set(None),
            last_success_at: Set(None),
            warned_failing_since: Set(None),
            breaker_state: Set(domain::breaker::BreakerPhase::Closed),
            breaker_until: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
            send_traceparent: Set(new.send_traceparent),
        };
        let txn = self.write_txn().await?;
        let created = model.insert(&*txn).await.map_err(conflict_as("uid"))?;
        insert_secret(&*txn, &self.seal, tenant, id, secret, now).await?;
        txn.commit().await?;
        self.endpoints_changed();
        self.emit_for_endpoint(&created, OperationalEvent::EndpointCreated)
            .await;
        Ok(created)
    }

    pub async fn get_endpoint(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        id_or_uid: &str,
    ) -> Result<endpoint::Model> {
        endpoint::Entity::find_in(tenant)
            .filter(endpoint::Column::AppId.eq(app_id))
            .filter(by_id_or_uid::<EndpointId, _>(
                endpoint::Column::Id,
                endpoint::Column::Uid,
                id_or_uid,
            ))
            .one(&self.db)
            .await?
            .ok_or(StoreError::not_found("endpoint"))
    }

    pub async fn list_endpoints(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        params: &ListParams,
    ) -> Result<Page<endpoint::Model>> {
        let select = endpoint::Entity::find_in(tenant).filter(endpoint::Column::AppId.eq(app_id));
        fetch_page(
            &self.db,
            select,
            endpoint::Column::Id,
            |m| m.id.to_string(),
            params,
        )
        .await
    }

    /// The endpoints of several applications in one query (newest first), for pages that show
    /// many applications at once. Ids of other tenants' applications match nothing. Not paged:
    /// callers pass a bounded list of applications and cut each one's endpoints themselves.
    pub async fn list_endpoints_of_apps(
        &self,
        tenant: TenantId,
        app_ids: &[ApplicationId],
    ) -> Result<Vec<endpoint::Model>> {
        if app_ids.is_empty() {
            return Ok(Vec::new());
        }
        Ok(endpoint::Entity::find_in(tenant)
            .filter(endpoint::Column::AppId.is_in(app_ids.iter().copied()))
            .order_by_desc(endpoint::Column::Id)
            .all(&self.db)
            .await?)
    }

    /// Replaces an endpoint's settings. Turning `disabled` on pauses its deliveries (see
    /// `gate`); turning it off resets its health and resumes them. `drop_credentials` removes
    /// its authentication and mTLS identity in the same write.
    pub async fn update_endpoint(
        &self,
        tenant: TenantId,
        current: endpoint::Model,
        new: NewEndpoint,
        drop_credentials: bool,
    ) -> Result<endpoint::Model> {
        check_owner(tenant, &current.tenant_id, "endpoint")?;
        let disabled = new.disabled;
        let headers = crate::sealed::seal_headers(&self.seal, &current.id, &new.headers);
        let (ep, was_disabled) = self
            .write_endpoint(current, move |model, was_disabled, now| {
                model.uid = Set(new.uid);
                model.url = Set(new.url);
                model.description = Set(new.description);
                model.version = Set(new.version);
                model.filter_types = Set(new.filter_types.map(|v| to_json(&v)));
                model.channels = Set(new.channels.map(|v| to_json(&v)));
                model.headers = Set(headers);
                model.metadata = Set(to_json(&new.metadata));
                model.throttle_rate = Set(new.throttle_rate);
                model.max_concurrency = Set(new.max_concurrency);
                model.timeout_ms = Set(new.timeout_ms);
                model.retry_policy = Set(new.retry_policy);
                model.status_overrides = Set(new.status_overrides);
                model.signature_headers = Set(new.signature_headers);
                model.send_traceparent = Set(new.send_traceparent);
                if drop_credentials {
                    model.auth = Set(None);
                    model.mtls = Set(None);
                }
                apply_disabled(model, was_disabled, disabled, "disabled by the tenant", now);
                disabled
            })
            .await?;
        Ok(self.endpoint_changed(ep, was_disabled, true).await)
    }

    /// Sends the operational events of a change to an endpoint by the tenant: `updated`
    /// (unless only its state changed) and `enabled` or `disabled` when its state flipped.
    async fn endpoint_changed(
        &self,
        ep: endpoint::Model,
        was_disabled: bool,
        updated: bool,
    ) -> endpoint::Model {
        if updated {
            self.emit_for_endpoint(&ep, OperationalEvent::EndpointUpdated)
                .await;
        }
        match (was_disabled, ep.disabled) {
            (false, true) => {
                let fail_since = ep.failing_since.map(Timestamp::from_millis);
                let reason = ep.disabled_reason.clone().unwrap_or_default();
                self.emit_for_endpoint(&ep, |endpoint| OperationalEvent::EndpointDisabled {
                    endpoint,
                    fail_since,
                    trigger: Trigger::Manual,
                    reason,
                })
                .await
            }
            (true, false) => {
                self.emit_for_endpoint(&ep, OperationalEvent::EndpointEnabled)
                    .await
            }
            _ => {}
        }
        ep
    }

    /// Disables (with a reason shown to the tenant) or re-enables an endpoint.
    pub async fn set_endpoint_disabled(
        &self,
        tenant: TenantId,
        current: endpoint::Model,
        change: EndpointChanges,
    ) -> Result<endpoint::Model> {
        check_owner(tenant, &current.tenant_id, "endpoint")?;
        let (ep, was_disabled) = self
            .write_endpoint(current, move |model, was_disabled, now| match change {
                EndpointChanges::Disable { reason } => {
                    apply_disabled(model, was_disabled, true, &reason, now);
                    true
                }
                EndpointChanges::Enable => {
                    apply_disabled(model, was_disabled, false, "", now);
                    false
                }
            })
            .await?;
        Ok(self.endpoint_changed(ep, was_disabled, false).await)
    }

    /// Writes an endpoint changed by `change` (which returns whether it is now disabled) and,
    /// in the same transaction, pauses or resumes its deliveries. Whether it *was* disabled is
    /// read inside the transaction, not taken from the caller's copy; it is returned with the
    /// endpoint as written.
    async fn write_endpoint(
        &self,
        current: endpoint::Model,
        change: impl FnOnce(&mut endpoint::ActiveModel, bool, i64) -> bool,
    ) -> Result<(endpoint::Model, bool)> {
        let now = Timestamp::now().as_millis();
        let id = current.id;
        let txn = self.write_txn().await?;
        let stored = endpoint::Entity::find_by_id(id)
            .one(&*txn)
            .await?
            .ok_or(StoreError::not_found("endpoint"))?;
        // Only the columns `change` sets are written: health columns the dispatcher keeps
        // moving stay as stored.
        let mut model = current.into_active_model();
        let disabled = change(&mut model, stored.disabled, now);
        model.updated_at = Set(now);
        let ids = if disabled { vec![id] } else { Vec::new() };
        let updated = self
            .stopping(&ids, async {
                let updated = model.update(&*txn).await.map_err(conflict_as("uid"))?;
                crate::gate::pause_or_resume(&*txn, id, disabled, now).await?;
                txn.commit().await?;
                Ok(updated)
            })
            .await?;
        if !disabled {
            self.stopped.unmark(id);
        }
        self.endpoints_changed();
        Ok((updated, stored.disabled))
    }

    /// Deletes an endpoint with its deliveries and attempts; nothing more is sent to it from
    /// the moment this commits (see `gate`).
    pub async fn delete_endpoint(&self, tenant: TenantId, ep: &endpoint::Model) -> Result<()> {
        check_owner(tenant, &ep.tenant_id, "endpoint")?;
        let txn = self.write_txn().await?;
        self.stopping(std::slice::from_ref(&ep.id), async {
            attempt::Entity::delete_many()
                .filter(attempt::Column::EndpointId.eq(ep.id))
                .exec(&*txn)
                .await?;
            delivery::Entity::delete_many()
                .filter(delivery::Column::EndpointId.eq(ep.id))
                .exec(&*txn)
                .await?;
            ordering_sequence::Entity::delete_many()
                .filter(ordering_sequence::Column::EndpointId.eq(ep.id))
                .exec(&*txn)
                .await?;
            endpoint::Entity::delete_by_id(ep.id).exec(&*txn).await?;
            txn.commit().await
        })
        .await?;
        self.endpoints_changed();
        self.emit_for_endpoint(ep, OperationalEvent::EndpointDeleted)
            .await;
        Ok(())
    }

    /// The secrets that sign right now, opened: the current one first, then any previous one
    /// still inside its rotation grace period.
    pub async fn active_secrets(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        now: Timestamp,
    ) -> Result<Vec<endpoint_secret::Model>> {
        let rows = endpoint_secret::Entity::find_in(tenant)
            .filter(endpoint_secret::Column::EndpointId.eq(endpoint_id))
            .filter(
                Condition::any()
                    .add(endpoint_secret::Column::ExpiresAt.is_null())
                    .add(endpoint_secret::Column::ExpiresAt.gt(now.as_millis())),
            )
            .order_by_desc(endpoint_secret::Column::Id)
            .all(&self.db)
            .await?;
        rows.into_iter()
            .map(|mut row| {
                row.secret = crate::sealed::open_secret(&self.seal, &row)?;
                Ok(row)
            })
            .collect()
    }

    /// Sets (sealed) or removes how an endpoint authenticates; the dispatcher reads it with the
    /// endpoint's next batch.
    pub async fn set_endpoint_auth(
        &self,
        tenant: TenantId,
        current: endpoint::Model,
        auth: Option<&domain::endpoint_auth::EndpointAuth>,
    ) -> Result<endpoint::Model> {
        self.set_sealed_json(tenant, current, crate::sealed::SealedJson::Auth, auth)
            .await
    }

    /// Sets (sealed) or removes an endpoint's mutual-TLS identity and receiver CA.
    pub async fn set_endpoint_mtls(
        &self,
        tenant: TenantId,
        current: endpoint::Model,
        mtls: Option<&domain::endpoint_auth::Mtls>,
    ) -> Result<endpoint::Model> {
        self.set_sealed_json(tenant, current, crate::sealed::SealedJson::Mtls, mtls)
            .await
    }

    async fn set_sealed_json(
        &self,
        tenant: TenantId,
        current: endpoint::Model,
        kind: crate::sealed::SealedJson,
        value: Option<&impl serde::Serialize>,
    ) -> Result<endpoint::Model> {
        check_owner(tenant, &current.tenant_id, "endpoint")?;
        let sealed = value.map(|v| kind.seal(&self.seal, &current.id, v));
        let (ep, was_disabled) = self
            .write_endpoint(current, move |model, was_disabled, _| {
                match kind {
                    crate::sealed::SealedJson::Auth => model.auth = Set(sealed),
                    crate::sealed::SealedJson::Mtls => model.mtls = Set(sealed),
                }
                was_disabled
            })
            .await?;
        Ok(self.endpoint_changed(ep, was_disabled, true).await)
    }

    /// Makes `new_secret` current; the old current secret keeps signing for `grace`.
    pub async fn rotate_secret(
        &self,
        tenant: TenantId,
        endpoint_id: EndpointId,
        new_secret: &str,
        grace: Duration,
    ) -> Result<()> {
        let now = Timestamp::now();
        let txn = self.write_txn().await?;
        endpoint_secret::Entity::update_in(tenant)
            .col_expr(
                endpoint_secret::Column::ExpiresAt,
                Expr::value(now.plus(grace).as_millis()),
            )
            .filter(endpoint_secret::Column::EndpointId.eq(endpoint_id))
            .filter(endpoint_secret::Column::ExpiresAt.is_null())
            .exec(&*txn)
            .await?;
        insert_secret(
            &*txn,
            &self.seal,
            tenant,
            endpoint_id,
            new_secret,
            now.as_millis(),
        )
        .await?;
        txn.commit().await?;
        self.endpoints_changed();
        Ok(())
    }
}

fn apply_disabled(
    model: &mut endpoint::ActiveModel,
    was: bool,
    now_disabled: bool,
    reason: &str,
    now: i64,
) {
    model.disabled = Set(now_disabled);
    if now_disabled && !was {
        model.disabled_reason = Set(Some(reason.to_owned()));
        model.disabled_at = Set(Some(now));
    } else if !now_disabled && was {
        // A re-enabled endpoint starts with a clean bill of health.
        model.disabled_reason = Set(None);
        model.disabled_at = Set(None);
        model.failing_since = Set(None);
        model.breaker_state = Set(domain::breaker::BreakerPhase::Closed);
        model.breaker_until = Set(None);
    }
}

async fn insert_secret(
    db: &impl sea_orm::ConnectionTrait,
    keys: &domain::seal::Keyring,
    tenant: TenantId,
    endpoint_id: EndpointId,
    secret: &str,
    now: i64,
) -> Result<()> {
    let id = SecretId::new();
    endpoint_secret::ActiveModel {
        id: Set(id),
        tenant_id: Set(tenant),
        endpoint_id: Set(endpoint_id),
        secret: Set(crate::sealed::seal_secret(keys, &id, secret)),
        created_at: Set(now),
        expires_at: Set(None),
    }
    .insert(db)
    .await?;
    Ok(())
}

/// The endpoint's retry policy, where a policy must be had (a message's give-up time, the
/// next retry): the default when none is stored, and when the stored one is unreadable,
/// which is logged as an error naming the endpoint (policies are checked when written, so
/// only a hand-edited row gets here).
pub fn retry_policy_of(ep: &endpoint::Model) -> domain::retry::RetryPolicy {
    ep.retry_policy().unwrap_or_else(|e| {
        tracing::error!(error = %e, "unreadable retry policy; using the default");
        Default::default()
    })
}
