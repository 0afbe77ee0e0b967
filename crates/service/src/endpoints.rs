//! Endpoints: the rules a whole endpoint must meet, its URL check (syntax, scheme policy, SSRF
//! guard), creating and changing one, and the work that starts on one (resend, recover,
//! replay).

use domain::Timestamp;
use domain::egress::Egress;
use domain::endpoint_auth::{EndpointAuth, Mtls};
use domain::endpoint_url::EndpointUrl;
use domain::ids::{EndpointId, TenantId};
use domain::jobs::EndpointJob;
use domain::signing::{EndpointKey, KeyType};
use serde_json::json;
use store::entities::{application, endpoint, job, message};
use store::{NewEndpoint, Store, retry_policy_of};

use crate::{Config, FieldError, Result, ServiceError, rules, ssrf};

/// Every rule a whole endpoint description breaks, in the order of its fields (empty when it
/// is valid). The URL is checked apart, by [`check_url`], because that takes a DNS lookup.
pub fn problems(new: &NewEndpoint) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut check = |r: std::result::Result<(), FieldError>| errors.extend(r.err());
    if let Some(uid) = &new.uid {
        check(rules::uid("uid", uid, EndpointId::PREFIX));
    }
    check(rules::description(&new.description));
    if let Some(types) = &new.filter_types {
        check(rules::event_type_list("filterTypes", types));
    }
    if let Some(chans) = &new.channels {
        check(rules::labels("channels", chans, rules::MAX_CHANNELS));
    }
    check(rules::headers(&new.headers));
    check(rules::metadata(&new.metadata));
    if new.version < 1 {
        check(Err(FieldError::new(
            "version",
            "version must be at least 1",
        )));
    }
    errors
}

/// Sets how an endpoint authenticates (`None`: by its signature only), or every rule it
/// breaks. An OAuth token URL is held to the endpoint URL's rules (scheme policy, SSRF guard).
pub async fn set_auth(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    actor: Actor,
    ep: endpoint::Model,
    auth: Option<EndpointAuth>,
) -> Result<endpoint::Model> {
    if let Some(a) = &auth {
        let mut errors = field_errors(a.problems());
        if let EndpointAuth::OAuth(c) = a
            && errors.iter().all(|e| e.field != "tokenUrl")
            && let Err(e) =
                check_url_with(cfg, &egress(store, cfg, tenant, actor).await?, &c.token_url).await
        {
            errors.push(FieldError::new("tokenUrl", e.msg));
        }
        if !errors.is_empty() {
            return Err(ServiceError::Invalid(errors));
        }
    }
    Ok(store.set_endpoint_auth(tenant, ep, auth.as_ref()).await?)
}

/// Sets an endpoint's mutual-TLS identity and receiver CA (`None` removes them), or every
/// rule they break.
pub async fn set_mtls(
    store: &Store,
    tenant: TenantId,
    ep: endpoint::Model,
    mtls: Option<Mtls>,
) -> Result<endpoint::Model> {
    if let Some(m) = &mtls {
        let errors = field_errors(m.problems());
        if !errors.is_empty() {
            return Err(ServiceError::Invalid(errors));
        }
    }
    Ok(store.set_endpoint_mtls(tenant, ep, mtls.as_ref()).await?)
}

/// The domain's `(field, reason)` problems as field errors.
fn field_errors(problems: Vec<(&'static str, String)>) -> Vec<FieldError> {
    problems
        .into_iter()
        .map(|(field, msg)| FieldError::new(field, msg))
        .collect()
}

/// `new`, or every rule it breaks.
pub fn checked(new: NewEndpoint) -> Result<NewEndpoint> {
    match problems(&new) {
        errors if errors.is_empty() => Ok(new),
        errors => Err(ServiceError::Invalid(errors)),
    }
}

/// Who changes an endpoint: the tenant (an API key, the dashboard) or one of the tenant's
/// customers through a portal link, who never reaches more than the tenant does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    Tenant,
    Portal,
}

/// Where `actor`'s endpoints of `tenant` may point: the server-wide allow list and the
/// tenant's grants; only public addresses for a portal customer of a tenant whose portal
/// settings say so.
pub async fn egress(store: &Store, cfg: &Config, tenant: TenantId, actor: Actor) -> Result<Egress> {
    if actor == Actor::Portal
        && store
            .get_tenant(tenant)
            .await?
            .portal_settings()
            .public_endpoints_only
    {
        return Ok(Egress::public_only());
    }
    let grants = store.egress_grants(tenant).await?;
    Ok(Egress::new(cfg.allow_networks.clone(), grants.to_vec()))
}

/// Checks an endpoint URL: syntax, scheme policy, and where it resolves (SSRF guard, and the
/// namespace of a shared broker). Returns the URL in its normal form.
pub async fn check_url(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    actor: Actor,
    raw: &str,
) -> Result<String> {
    let egress = egress(store, cfg, tenant, actor).await?;
    check_url_with(cfg, &egress, raw)
        .await
        .map_err(|e| ServiceError::Invalid(vec![e]))
}

async fn check_url_with(
    cfg: &Config,
    egress: &Egress,
    raw: &str,
) -> std::result::Result<String, FieldError> {
    let url = EndpointUrl::parse(raw.trim(), cfg.https_only)
        .map_err(|e| FieldError::new("url", e.to_string()))?;
    ssrf::resolve_and_check(&url, egress)
        .await
        .map_err(|e| FieldError::new("url", e.to_string()))?;
    Ok(url.as_str().to_owned())
}

/// A signing key given by the tenant (`whsec_…` HMAC or `whsk_…` ed25519), or a new one of
/// `key_type` (`hmac`, the default, or `ed25519`).
pub fn secret_or_new(
    given: Option<&str>,
    key_type: Option<&str>,
    field: &str,
) -> std::result::Result<EndpointKey, FieldError> {
    let kind = key_type
        .map(str::parse::<KeyType>)
        .transpose()
        .map_err(|e| FieldError::new("keyType", e))?;
    match given {
        Some(s) => {
            let key = EndpointKey::parse(s).map_err(|e| FieldError::new(field, e.to_string()))?;
            let is = match key {
                EndpointKey::Hmac(_) => KeyType::Hmac,
                EndpointKey::Ed25519(_) => KeyType::Ed25519,
            };
            match kind {
                Some(k) if k != is => Err(FieldError::new(
                    "keyType",
                    format!(
                        "the {field} given is not of keyType {}",
                        key_type.unwrap_or("")
                    ),
                )),
                _ => Ok(key),
            }
        }
        None => Ok(EndpointKey::generate(
            kind.unwrap_or_default(),
            &mut rand::rng(),
        )),
    }
}

/// Makes a new signing key current (the given one, or a new one: of `key_type`, else of the
/// current key's type); the previous one keeps signing for `grace`. Returns the new key.
pub async fn rotate_key(
    store: &Store,
    tenant: TenantId,
    ep: &endpoint::Model,
    given: Option<&str>,
    key_type: Option<&str>,
    grace: std::time::Duration,
) -> Result<EndpointKey> {
    let same = match (given, key_type) {
        (None, None) => store
            .active_secrets(tenant, ep.id, Timestamp::now())
            .await?
            .first()
            .and_then(|s| EndpointKey::parse(&s.secret).ok())
            .map(|k| match k {
                EndpointKey::Hmac(_) => "hmac",
                EndpointKey::Ed25519(_) => "ed25519",
            }),
        _ => key_type,
    };
    let key = secret_or_new(given, same, "key").map_err(|e| ServiceError::Invalid(vec![e]))?;
    store
        .rotate_secret(tenant, ep.id, &key.to_string(), grace)
        .await?;
    Ok(key)
}

pub async fn create(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    actor: Actor,
    app: &application::Model,
    mut new: NewEndpoint,
    secret: EndpointKey,
) -> Result<endpoint::Model> {
    new = checked(new)?;
    known_event_types(
        store,
        tenant,
        app.internal,
        new.filter_types.as_deref(),
        &[],
    )
    .await?;
    new.url = check_url(store, cfg, tenant, actor, &new.url).await?;
    Ok(store
        .create_endpoint(tenant, app, new, &secret.to_string())
        .await?)
}

pub async fn update(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    actor: Actor,
    current: endpoint::Model,
    mut new: NewEndpoint,
) -> Result<endpoint::Model> {
    new = checked(new)?;
    // Names the endpoint already listed stay allowed (their type may have been archived since).
    let had = current.filter_types()?.unwrap_or_default();
    let operational = crate::operational::is_operational(store, &current).await?;
    known_event_types(
        store,
        tenant,
        operational,
        new.filter_types.as_deref(),
        &had,
    )
    .await?;
    let mut moved = false;
    if new.url != current.url {
        new.url = check_url(store, cfg, tenant, actor, &new.url).await?;
        moved = !same_receiver(&current.url, &new.url);
    }
    Ok(store.update_endpoint(tenant, current, new, moved).await?)
}

/// Whether two endpoint URLs reach the same receiver (host and port). Credentials (bearer,
/// basic, OAuth client, mTLS identity) were given for one receiver: when the URL moves to
/// another, they are dropped in the same write, so that whoever can change the URL cannot
/// send them elsewhere. No update request carries credentials; they are set again with their
/// own requests.
fn same_receiver(old: &str, new: &str) -> bool {
    match (
        EndpointUrl::parse(old, false),
        EndpointUrl::parse(new, false),
    ) {
        (Ok(a), Ok(b)) => a.same_receiver(&b),
        _ => false,
    }
}

/// An endpoint may only filter on event types the tenant has defined (and not archived), as
/// in Svix: a typo would otherwise silently filter out every message. Names in `allowed` pass.
/// An operational endpoint's may only name operational event types.
async fn known_event_types(
    store: &Store,
    tenant: TenantId,
    operational: bool,
    types: Option<&[String]>,
    allowed: &[String],
) -> Result<()> {
    if operational {
        return crate::operational::event_types(types.unwrap_or_default());
    }
    let new: Vec<String> = types
        .unwrap_or_default()
        .iter()
        .filter(|t| !allowed.contains(t))
        .cloned()
        .collect();
    let unknown = store.unknown_event_types(tenant, &new).await?;
    if unknown.is_empty() {
        return Ok(());
    }
    Err(ServiceError::Invalid(vec![FieldError::new(
        "filterTypes",
        format!(
            "these event types do not exist: {}; create them first (POST /api/v1/event-type)",
            unknown.join(", ")
        ),
    )]))
}

/// The endpoint as a `NewEndpoint` (its headers opened), for read-modify-write updates.
pub fn as_new(store: &Store, ep: &endpoint::Model) -> Result<NewEndpoint> {
    Ok(NewEndpoint {
        url: ep.url.clone(),
        uid: ep.uid.clone(),
        description: ep.description.clone(),
        version: ep.version,
        filter_types: ep.filter_types()?,
        channels: ep.channels()?,
        headers: store.endpoint_headers(ep)?,
        metadata: ep.metadata()?,
        disabled: ep.disabled,
        throttle_rate: ep.throttle_rate,
        max_concurrency: ep.max_concurrency,
        timeout_ms: ep.timeout_ms,
        retry_policy: ep.retry_policy.clone(),
        status_overrides: ep.status_overrides.clone(),
        signature_headers: ep.signature_headers,
        send_traceparent: ep.send_traceparent,
    })
}

/// The event type whose example is sent when none is named, with Svix's payload.
pub const PING_EVENT_TYPE: &str = "svix.ping";

/// The example payload of `event_type`: Svix's ping, or the first of the `examples` of the
/// event type's version-1 schema (`examples[index]`). None when it has none.
pub async fn example_payload(
    store: &Store,
    tenant: TenantId,
    event_type: &str,
    index: usize,
) -> Result<Option<Vec<u8>>> {
    if event_type == PING_EVENT_TYPE {
        return Ok(Some(br#"{"success": true}"#.to_vec()));
    }
    let et = store.get_event_type(tenant, event_type).await?;
    Ok(et.example(index)?.map(|e| e.to_string().into_bytes()))
}

/// Sends a message to this one endpoint only, whatever its filters (an example or a test
/// event): admitted like any message (the tenant's rate limit, payload rules), stored, listed,
/// and delivered like one. A disabled endpoint is refused rather than skipped silently.
pub async fn send_to_endpoint(
    store: &Store,
    cfg: &Config,
    tenant: TenantId,
    app: &application::Model,
    ep: &endpoint::Model,
    event_type: &str,
    payload: Vec<u8>,
) -> Result<store::CreatedMessage> {
    if ep.disabled {
        // The store's refusal, as resend and recover give it.
        return Err(store::StoreError::EndpointDisabled {
            endpoint_id: ep.id.to_string(),
        }
        .into());
    }
    crate::messages::admit(store, cfg, tenant).await?;
    let new = store::NewMessage {
        event_type: event_type.to_owned(),
        payload,
        to_endpoint: Some(ep.id),
        ..Default::default()
    };
    crate::messages::create(store, cfg, tenant, app, new).await
}

/// One message's delivery to one endpoint, both of `tenant`: what resend and skip act on.
pub struct Delivery<'a> {
    pub tenant: TenantId,
    pub msg: &'a message::Model,
    pub ep: &'a endpoint::Model,
}

/// Sends the message to the endpoint again now, as a manual attempt, and wakes this
/// process's dispatcher.
pub async fn resend(store: &Store, cfg: &Config, d: Delivery<'_>) -> Result<()> {
    let Delivery { tenant, msg, ep } = d;
    if msg.is_expunged() {
        return Err(ServiceError::Conflict(
            "this message's content was expunged; it cannot be sent again".into(),
        ));
    }
    store
        .resend(tenant, msg, ep, retry_policy_of(ep).ttl())
        .await?;
    cfg.new_work.notify_one();
    Ok(())
}

/// Gives up on the delivery (state `skipped`), so that a dead head of an ordering key stops
/// blocking the messages behind it; wakes the dispatcher for those.
pub async fn skip(store: &Store, cfg: &Config, d: Delivery<'_>) -> Result<()> {
    let Delivery { tenant, msg, ep } = d;
    if !store.skip_delivery(tenant, msg.id, ep.id).await? {
        return Err(ServiceError::Conflict(
            "only a failed or pending delivery can be skipped; this one was delivered, is being sent, or does not exist".into(),
        ));
    }
    cfg.new_work.notify_one();
    Ok(())
}

/// The window of a bulk job over one endpoint: `[since, until)`, `until` after `since`, and
/// the endpoint enabled (a disabled one gets nothing, manual work included).
async fn job_window(
    store: &Store,
    tenant: TenantId,
    ep: &endpoint::Model,
    since: Timestamp,
    until: Option<Timestamp>,
) -> Result<()> {
    if let Some(until) = until
        && until <= since
    {
        return Err(ServiceError::field(
            "until",
            "until must be later than since",
        ));
    }
    store.enabled_endpoint(tenant, ep.id).await?;
    Ok(())
}

/// How many deliveries a job of `kind` started now would touch (recover: failed ones to
/// re-arm; replay: missing ones to create), counted up to [`store::PREVIEW_CAP`], with the
/// same checks as [`start_job`].
pub async fn preview_job(
    store: &Store,
    tenant: TenantId,
    ep: &endpoint::Model,
    kind: EndpointJob,
    since: Timestamp,
    until: Option<Timestamp>,
) -> Result<store::Capped> {
    job_window(store, tenant, ep, since, until).await?;
    let cap = store::PREVIEW_CAP;
    Ok(match kind {
        EndpointJob::Recover => {
            store
                .count_recoverable(tenant, ep.id, since, until, cap)
                .await?
        }
        EndpointJob::Replay => store.count_missing(tenant, ep, since, until, cap).await?,
    })
}

/// Starts a durable background job over one endpoint: recover (failed deliveries since a
/// date) or replay (messages it never got). `expected`: what a preview counted, kept with the
/// job so its progress reads "n of expected".
pub async fn start_job(
    store: &Store,
    tenant: TenantId,
    ep: &endpoint::Model,
    kind: EndpointJob,
    since: Timestamp,
    until: Option<Timestamp>,
    expected: Option<u64>,
) -> Result<job::Model> {
    job_window(store, tenant, ep, since, until).await?;
    let params = json!({
        "endpointId": ep.id,
        "appId": ep.app_id,
        "since": since.as_millis(),
        "until": until.map(|u| u.as_millis()),
        "expected": expected,
    });
    Ok(store.create_job(tenant, kind.kind(), &params).await?)
}
