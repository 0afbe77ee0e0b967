//! Operational webhooks (Svix's shape): each tenant's operational endpoints live in one hidden
//! application of its own (`applications.internal`), which the tenant's application lookups
//! and listings never return; each event is a message in it, delivered, signed, retried and
//! dead-lettered by the same engine as any other. Writing one never takes an ingest token.
//!
//! Every event goes through [`Store::emit`] or [`Store::emit_for_app`], the one place that
//! (1) writes nothing while the tenant has no enabled operational endpoint, (2) sends nothing about
//! that application itself (an operational endpoint's own failures, changes or disable make no
//! events: they would feed themselves), and (3) bounds each tenant's events per process
//! ([`domain::operational::Budget`]): over it, events are dropped and counted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use domain::Timestamp;
use domain::ids::{ApplicationId, SourceId, TenantId};
use domain::operational::{Budget, EndpointRef, OperationalEvent};
use sea_orm::{ActiveModelTrait, ColumnTrait, QueryFilter, QuerySelect, Set};

use crate::entities::{Owned, application, endpoint, inbound_source};
use crate::{NewMessage, Result, Store, StoreError, retry_policy_of, to_json};

/// The name the hidden application carries (never shown to tenants as an application).
const APP_NAME: &str = "Operational webhooks";
/// Budgets kept before full (idle) ones are forgotten.
const BUDGETS_KEPT: usize = 1024;

/// This process's operational-event state: each tenant's budget and what was sent or dropped.
#[derive(Debug, Default)]
pub(crate) struct Operational {
    budgets: Mutex<HashMap<TenantId, Budget>>,
    sent: AtomicU64,
    dropped: AtomicU64,
}

impl Operational {
    /// Takes one of `tenant`'s event tokens.
    fn admit(&self, tenant: TenantId, now: Timestamp) -> bool {
        // A poisoned lock only means a panic elsewhere mid-update; the map is still usable.
        let mut budgets = self.budgets.lock().unwrap_or_else(|e| e.into_inner());
        if budgets.len() > BUDGETS_KEPT {
            budgets.retain(|_, b| !b.is_full_at(now));
        }
        budgets
            .entry(tenant)
            .or_insert_with(|| Budget::new(now))
            .take(now)
    }
}

impl Store {
    /// The tenant's operational application, if it has one (a copy at most a second old).
    pub async fn operational_app(&self, tenant: TenantId) -> Result<Option<application::Model>> {
        Ok(self.operational(tenant).await?.map(|(app, _)| app))
    }

    /// The tenant's operational application and whether any of its endpoints is enabled (a
    /// copy at most a second old; this process's endpoint writes clear it).
    async fn operational(&self, tenant: TenantId) -> Result<Option<(application::Model, bool)>> {
        let load = async {
            let Some(app) = application::Entity::find_in(tenant)
                .filter(application::Column::Internal.eq(true))
                .one(&self.db)
                .await?
            else {
                return Ok::<_, StoreError>(Some(None));
            };
            let listening = endpoint::Entity::find_in(tenant)
                .filter(endpoint::Column::AppId.eq(app.id))
                .filter(endpoint::Column::Disabled.eq(false))
                .one(&self.db)
                .await?
                .is_some();
            Ok(Some(Some((app, listening))))
        };
        Ok(self.ops_apps.get_or_load(tenant, load).await?.flatten())
    }

    /// The tenant's operational application while one of its endpoints listens: where events
    /// are written (none is written for a tenant with nobody to send it to).
    async fn listening(&self, tenant: TenantId) -> Result<Option<application::Model>> {
        Ok(self
            .operational(tenant)
            .await?
            .and_then(|(app, listening)| listening.then_some(app)))
    }

    /// Forgets the copies of operational applications and of endpoints as the dispatcher reads
    /// them: an endpoint was made, changed or deleted, or its secrets changed.
    pub(crate) fn endpoints_changed(&self) {
        self.ops_apps.clear();
        self.dispatch.clear();
    }

    /// The tenant's operational application, made on first use.
    pub async fn operational_app_or_create(&self, tenant: TenantId) -> Result<application::Model> {
        if let Some(app) = self.operational_app(tenant).await? {
            return Ok(app);
        }
        let now = Timestamp::now().as_millis();
        let made = application::ActiveModel {
            id: Set(ApplicationId::new()),
            tenant_id: Set(tenant),
            uid: Set(None),
            name: Set(APP_NAME.to_owned()),
            rate_limit: Set(None),
            metadata: Set(to_json(&serde_json::json!({}))),
            created_at: Set(now),
            updated_at: Set(now),
            payload_retention_days: Set(None),
            metadata_retention_days: Set(None),
            payload_expunged_before: Set(None),
            internal: Set(true),
        }
        .insert(&self.db)
        .await;
        self.ops_apps.clear();
        match made {
            Ok(app) => Ok(app),
            // Another request made it first (one per tenant, by a unique index); any other
            // failure is the insert's own.
            Err(e) => match self.operational_app(tenant).await? {
                Some(app) => Ok(app),
                None => Err(e.into()),
            },
        }
    }

    /// Sends `event` to the tenant's operational endpoints (see the module's rules). Never
    /// fails the caller's operation: a write that fails is logged.
    pub async fn emit(&self, tenant: TenantId, event: OperationalEvent) {
        match self.listening(tenant).await {
            Ok(Some(ops)) => {
                if event.subject_app() != Some(ops.id) && self.admit_event(tenant) {
                    self.write_event(tenant, &ops, event).await
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, %tenant, "could not send an operational event"),
        }
    }

    /// Sends the event `build` makes from the uid of `app_id` (one of the tenant's
    /// applications), unless no operational endpoint listens or `app_id` is their application.
    pub async fn emit_for_app(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        build: impl FnOnce(Option<String>) -> OperationalEvent,
    ) {
        self.emit_with_source(tenant, app_id, SourceOf::None, |uid, _| build(uid))
            .await
    }

    /// As [`Store::emit_for_app`], for a message that came through the source named
    /// `source_name`: `build` also gets that source's id (none if it was deleted since).
    pub async fn emit_for_message(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        source_name: Option<&str>,
        build: impl FnOnce(Option<String>, Option<SourceId>) -> OperationalEvent,
    ) {
        let source = source_name.map_or(SourceOf::None, SourceOf::Named);
        self.emit_with_source(tenant, app_id, source, build).await
    }

    /// Sends the event `build` makes from the application's uid and the source `source`
    /// names; the source is read only when the event is to be sent.
    async fn emit_with_source(
        &self,
        tenant: TenantId,
        app_id: ApplicationId,
        source: SourceOf<'_>,
        build: impl FnOnce(Option<String>, Option<SourceId>) -> OperationalEvent,
    ) {
        let found = async {
            let Some(ops) = self.listening(tenant).await? else {
                return Ok(None);
            };
            // The no-loop rule, before the budget: events about the operational application
            // itself are never sent, so they take none of it.
            if ops.id == app_id {
                return Ok(None);
            }
            // The budget before any further read: a storm of events over it costs no query.
            if !self.admit_event(tenant) {
                return Ok(None);
            }
            let app = application::Entity::find_in(tenant)
                .filter(application::Column::Id.eq(app_id))
                .one(&self.db)
                .await?;
            let which = match source {
                SourceOf::None => None,
                SourceOf::Named(name) => Some(inbound_source::Column::Name.eq(name)),
                SourceOf::Owner => Some(
                    inbound_source::Column::AppId
                        .eq(app_id)
                        .and(inbound_source::Column::Ingest.is_not_null()),
                ),
            };
            let source = match which {
                Some(filter) => {
                    inbound_source::Entity::find_in(tenant)
                        .select_only()
                        .column(inbound_source::Column::Id)
                        .filter(filter)
                        .into_tuple::<SourceId>()
                        .one(&self.db)
                        .await?
                }
                None => None,
            };
            Ok::<_, StoreError>(app.map(|a| (ops, a.uid, source)))
        };
        match found.await {
            Ok(Some((ops, uid, source))) => {
                self.write_event(tenant, &ops, build(uid, source)).await
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, %tenant, "could not send an operational event"),
        }
    }

    /// [`Store::emit_for_app`] for an event about an endpoint.
    pub async fn emit_for_endpoint(
        &self,
        ep: &endpoint::Model,
        build: impl FnOnce(EndpointRef) -> OperationalEvent,
    ) {
        self.emit_with_source(
            ep.tenant_id,
            ep.app_id,
            SourceOf::Owner,
            |app_uid, source_id| {
                build(EndpointRef {
                    app_id: ep.app_id,
                    app_uid,
                    endpoint_id: ep.id,
                    endpoint_uid: ep.uid.clone(),
                    source_id,
                })
            },
        )
        .await
    }

    /// Takes one of the tenant's event tokens; counts and (once per hundred) logs a drop.
    fn admit_event(&self, tenant: TenantId) -> bool {
        if self.operational.admit(tenant, Timestamp::now()) {
            return true;
        }
        let n = self.operational.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // One line per hundred dropped, not one each: the case is a storm.
        if n % 100 == 1 {
            tracing::warn!(%tenant, dropped_total = n,
                "operational events over the tenant's budget are dropped");
        }
        false
    }

    /// Writes an admitted event as a message of the operational application.
    async fn write_event(
        &self,
        tenant: TenantId,
        ops: &application::Model,
        event: OperationalEvent,
    ) {
        // The no-loop rule, whoever built the event.
        if event.subject_app() == Some(ops.id) {
            return;
        }
        let new = NewMessage {
            event_type: event.event_type().to_owned(),
            payload: event.payload().to_string().into_bytes(),
            ..Default::default()
        };
        match self
            .create_message(tenant, ops, new, |ep, now| {
                retry_policy_of(ep).give_up_at(now)
            })
            .await
        {
            Ok(_) => {
                self.operational.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!(error = %e, %tenant, "could not send an operational event"),
        }
    }

    /// Operational events this process wrote, and dropped over tenants' budgets.
    pub fn operational_counts(&self) -> (u64, u64) {
        (
            self.operational.sent.load(Ordering::Relaxed),
            self.operational.dropped.load(Ordering::Relaxed),
        )
    }
}

/// Which source an event names, if any.
enum SourceOf<'a> {
    None,
    /// The source a message came through, by its name (its tag `source-{name}`).
    Named(&'a str),
    /// The Svix Ingest source that owns the event's application (its endpoints are the
    /// source's).
    Owner,
}
