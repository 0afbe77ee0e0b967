//! What the dispatcher reads for claimed work: the messages, and the endpoints with their
//! secrets and headers opened.

use std::collections::{BTreeSet, HashMap};

use domain::Timestamp;
use domain::ids::{ApplicationId, EndpointId, MessageId};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

use crate::Result;
use crate::dialect::IDS_PER_STATEMENT;
use crate::entities::{endpoint, endpoint_secret, message};

/// An endpoint with its signing secrets and custom headers opened, as the dispatcher needs it.
#[derive(Clone, Debug)]
pub struct DispatchEndpoint {
    pub endpoint: endpoint::Model,
    /// Current first, then any previous secret still in its grace period.
    pub secrets: Vec<String>,
    /// Its custom headers.
    pub headers: std::collections::BTreeMap<String, String>,
    /// How it authenticates beyond its signature.
    pub auth: Option<domain::endpoint_auth::EndpointAuth>,
    /// Its client certificate and receiver CA, for mutual TLS.
    pub mtls: Option<domain::endpoint_auth::Mtls>,
    /// Why its secrets or headers cannot be read (a key that is not configured, a value
    /// altered, unreadable JSON): nothing is sent to it without them; each attempt fails with
    /// this reason.
    pub unreadable: Option<String>,
}

impl DispatchEndpoint {
    /// `endpoint` with its opened `secrets` (or why they cannot be opened), its headers
    /// opened with `keys`.
    pub fn new(
        endpoint: endpoint::Model,
        secrets: Result<Vec<String>>,
        keys: &domain::seal::Keyring,
    ) -> DispatchEndpoint {
        let opened = secrets.and_then(|s| {
            let stored = endpoint.stored_headers()?;
            let headers = crate::sealed::open_headers(keys, &endpoint.id, stored)?;
            use crate::sealed::SealedJson;
            let auth = SealedJson::Auth.open(keys, &endpoint)?;
            Ok((s, headers, auth, SealedJson::Mtls.open(keys, &endpoint)?))
        });
        let (secrets, headers, auth, mtls, unreadable) = match opened {
            Ok((s, h, a, m)) => (s, h, a, m, None),
            Err(err) => (
                Vec::new(),
                Default::default(),
                None,
                None,
                Some(err.to_string()),
            ),
        };
        DispatchEndpoint {
            endpoint,
            secrets,
            headers,
            auth,
            mtls,
            unreadable,
        }
    }
}

/// Pairs endpoints with their signing secrets (opened with `keys`): current first, then any
/// previous one still in its grace period at `now`. An endpoint always has a live secret, so
/// one found without any was deleted between the two reads (its secrets go with it): it is
/// left out, as if not found, rather than sent unsigned.
pub(crate) fn with_secrets(
    endpoints: Vec<endpoint::Model>,
    mut secrets: Vec<endpoint_secret::Model>,
    now: Timestamp,
    keys: &domain::seal::Keyring,
) -> HashMap<EndpointId, DispatchEndpoint> {
    secrets.sort_by_key(|s| std::cmp::Reverse(s.id));
    let mut by_endpoint: HashMap<EndpointId, Vec<Result<String>>> = HashMap::new();
    for s in secrets {
        if s.expires_at.is_none_or(|e| e > now.as_millis()) {
            let opened = crate::sealed::open_secret(keys, &s);
            by_endpoint.entry(s.endpoint_id).or_default().push(opened);
        }
    }
    endpoints
        .into_iter()
        .filter_map(|e| {
            let secrets = by_endpoint.remove(&e.id)?.into_iter().collect();
            Some((e.id, DispatchEndpoint::new(e, secrets, keys)))
        })
        .collect()
}

/// The query of [`crate::System::messages_by_ids`]: the messages by their keys.
pub(crate) fn claimed_messages(
    sql: &crate::dialect::Dialect,
    keys: &[(ApplicationId, MessageId)],
) -> sea_orm::Select<message::Entity> {
    message::Entity::find().filter((sql.message_keys)(keys))
}

/// Cross-tenant work (claims, sweeps, authentication): reached only through
/// [`Store::system`], so a tenant-scoped caller cannot use it by accident.
impl crate::System<'_> {
    /// The messages of a claimed batch, each named by a delivery's endpoint and message. The
    /// endpoints (whose applications name the messages) come from
    /// [`crate::System::dispatch_endpoints`], which the dispatcher reads for the same batch
    /// next and then finds copied; the messages in one query per [`IDS_PER_STATEMENT`] keys.
    pub async fn messages_by_ids(
        &self,
        wanted: &[(EndpointId, MessageId)],
    ) -> Result<HashMap<MessageId, message::Model>> {
        let endpoints: Vec<EndpointId> = wanted
            .iter()
            .map(|(e, _)| *e)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let endpoints = self
            .dispatch_endpoints(&endpoints, Timestamp::now())
            .await?;
        // Fan-out deliveries of one message name it once; an endpoint deleted since the
        // claim took its deliveries with it.
        let keys: Vec<(ApplicationId, MessageId)> = wanted
            .iter()
            .filter_map(|(e, m)| endpoints.get(e).map(|ep| (ep.endpoint.app_id, *m)))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut rows = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(IDS_PER_STATEMENT) {
            rows.extend(claimed_messages(self.sql, chunk).all(&self.db).await?);
        }
        Ok(rows.into_iter().map(|m| (m.id, m)).collect())
    }

    /// Endpoints with their active secrets opened, from copies at most a second old (decisions
    /// 95); the rest in two queries. A change made through this process (an edit, a rotated
    /// secret, a disable) empties the copies at once; another process's within a second. A
    /// disable or delete needs no copy to be fresh: the gate stops every request to it (see
    /// `gate`).
    pub async fn dispatch_endpoints(
        &self,
        ids: &[EndpointId],
        now: Timestamp,
    ) -> Result<HashMap<EndpointId, std::sync::Arc<DispatchEndpoint>>> {
        let generation = self.dispatch.generation();
        let mut found = HashMap::with_capacity(ids.len());
        let mut missing = Vec::new();
        for id in ids {
            match self.dispatch.get(id) {
                Ok(ep) => {
                    found.insert(*id, ep);
                }
                Err(_) => missing.push(*id),
            }
        }
        if missing.is_empty() {
            return Ok(found);
        }
        let endpoints = endpoint::Entity::find()
            .filter(endpoint::Column::Id.is_in(missing.iter().copied()))
            .all(&self.db)
            .await?;
        let secrets = endpoint_secret::Entity::find()
            .filter(endpoint_secret::Column::EndpointId.is_in(missing.iter().copied()))
            .all(&self.db)
            .await?;
        for (id, ep) in with_secrets(endpoints, secrets, now, &self.seal) {
            let ep = std::sync::Arc::new(ep);
            self.dispatch.put(id, ep.clone(), generation);
            found.insert(id, ep);
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(id: &str, endpoint_id: &str, expires_at: Option<i64>) -> endpoint_secret::Model {
        endpoint_secret::Model {
            id: crate::testing::named(&format!("whsk_{id}")),
            tenant_id: crate::testing::named("tnt_t"),
            endpoint_id: crate::testing::named(endpoint_id),
            secret: format!("whsec_{id}"),
            created_at: 0,
            expires_at,
        }
    }

    #[test]
    fn secrets_come_newest_first_without_expired_ones_and_an_endpoint_without_any_is_left_out() {
        let now = Timestamp::from_millis(1_000);
        let found = with_secrets(
            vec![
                crate::testing::endpoint_model("ep_a", "https://example.com/"),
                crate::testing::endpoint_model("ep_gone", "https://example.com/"),
            ],
            vec![
                secret("s1", "ep_a", Some(500)),
                secret("s2", "ep_a", Some(2_000)),
                secret("s3", "ep_a", None),
            ],
            now,
            &crate::testing::keys(),
        );
        assert_eq!(
            found[&crate::testing::named::<EndpointId>("ep_a")].secrets,
            vec!["whsec_s3", "whsec_s2"]
        );
        assert!(
            !found.contains_key(&crate::testing::named::<EndpointId>("ep_gone")),
            "deleted between the two reads: not sent unsigned"
        );
    }

    #[test]
    fn secrets_and_headers_are_opened_and_a_key_not_configured_is_named_not_sent_without() {
        let keys = crate::testing::keys();
        let other =
            domain::seal::Keyring::parse("gone:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=")
                .unwrap();
        let now = Timestamp::from_millis(1_000);
        let mut a = crate::testing::endpoint_model("ep_a", "https://example.com/");
        let headers = [("X-Token".to_owned(), "t0ken".to_owned())].into();
        a.headers = crate::sealed::seal_headers(&keys, &a.id, &headers);
        assert!(!a.headers.contains("t0ken"), "{}", a.headers);
        let b = crate::testing::endpoint_model("ep_b", "https://example.com/");
        let mut sa = secret("s1", "ep_a", None);
        sa.secret = crate::sealed::seal_secret(&keys, &sa.id, "whsec_sealed");
        let mut sb = secret("s2", "ep_b", None);
        sb.secret = crate::sealed::seal_secret(&other, &sb.id, "whsec_other");
        let found = with_secrets(vec![a, b], vec![sa, sb], now, &keys);
        let a = &found[&crate::testing::named::<EndpointId>("ep_a")];
        assert_eq!(a.secrets, vec!["whsec_sealed"]);
        assert_eq!(a.headers, headers);
        assert_eq!(a.unreadable, None);
        let b = &found[&crate::testing::named::<EndpointId>("ep_b")];
        assert!(b.secrets.is_empty());
        let why = b.unreadable.clone().unwrap();
        assert!(why.contains("\"gone\""), "{why}");
    }
}
