//! Event types: the rules a whole event type meets, and creating, changing, archiving and
//! unarchiving one. The API (`/api/v1/event-type`) and the dashboard's catalog both call these.

use domain::ids::TenantId;
use store::entities::event_type;
use store::{NewEventType, Store};

use crate::{FieldError, Result, ServiceError, rules};

/// Every rule the event type breaks, in the order of its fields (empty when it is valid).
pub fn problems(new: &NewEventType) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut check = |r: std::result::Result<(), FieldError>| errors.extend(r.err());
    check(rules::ident("name", &new.name));
    check(rules::description(&new.description));
    if let Some(s) = &new.schemas {
        check(rules::schemas(s));
    }
    if let Some(flags) = &new.feature_flags {
        check(rules::labels(
            "featureFlags",
            flags,
            rules::MAX_FEATURE_FLAGS,
        ));
    }
    if let Some(g) = &new.group_name {
        check(rules::ident("groupName", g));
    }
    errors
}

/// `new`, or every rule it breaks.
pub fn checked(new: NewEventType) -> Result<NewEventType> {
    match problems(&new) {
        errors if errors.is_empty() => Ok(new),
        errors => Err(ServiceError::Invalid(errors)),
    }
}

/// Creates the event type; a name the tenant already has is a conflict on `name`, unless
/// that type is archived (deleted): then it is restored with `new`'s fields, as Svix does.
pub async fn create(
    store: &Store,
    tenant: TenantId,
    new: NewEventType,
) -> Result<event_type::Model> {
    let new = checked(new)?;
    Ok(store.create_or_restore_event_type(tenant, new).await?)
}

/// Replaces the event type named `new.name` (description, schemas, flags, archived state).
pub async fn update(
    store: &Store,
    tenant: TenantId,
    new: NewEventType,
) -> Result<event_type::Model> {
    let new = checked(new)?;
    Ok(store.update_event_type(tenant, new).await?)
}

/// Archives an event type (it is no longer offered for new endpoint filters; messages of
/// that type stay readable, and endpoints that filter on it keep it), or brings it back.
pub async fn set_archived(
    store: &Store,
    tenant: TenantId,
    name: &str,
    archived: bool,
) -> Result<event_type::Model> {
    let current = store.get_event_type(tenant, name).await?;
    let new = NewEventType {
        archived,
        ..as_new(&current)?
    };
    Ok(store.update_event_type(tenant, new).await?)
}

/// The stored event type as a `NewEventType`, for read-modify-write changes.
pub fn as_new(m: &event_type::Model) -> Result<NewEventType> {
    Ok(NewEventType {
        name: m.name.clone(),
        description: m.description.clone(),
        schemas: m.schemas()?,
        feature_flags: m.feature_flags()?,
        group_name: m.group_name.clone(),
        deprecated: m.deprecated,
        archived: m.archived,
    })
}
