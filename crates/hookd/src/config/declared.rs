//! The configuration file's tables: `[[sources]]` and `[[egress_grants]]`, each checked by the
//! rules the API applies to the same input.

use super::ConfigError;

/// An inbound source the configuration file declares (`[[sources]]`: `tenant` and the members
/// of the API's `POST /api/v1/inbound/source` body), checked by the API's rules; see
/// `service::inbound::declare_source` for what a start does with it.
#[derive(Debug, Clone)]
pub struct DeclaredSource {
    pub tenant: domain::ids::TenantId,
    pub spec: service::inbound::SourceSpec,
    /// Where it is declared, for messages: `sources[0] ("stripe") in hookd.toml`.
    pub origin: String,
}

/// One `[[egress_grants]]` table.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantIn {
    tenant: String,
    target: String,
    redis_prefix: Option<String>,
    amqp_vhost: Option<String>,
    nats_prefix: Option<String>,
}

/// `[[egress_grants]]`: each `tenant`, `target` (a network, an address or a host name) and
/// the namespace on a shared broker; a target twice for one tenant is refused.
pub(super) fn declared_grants(
    value: toml::Value,
    path: &str,
) -> Result<Vec<(domain::ids::TenantId, domain::egress::Grant)>, ConfigError> {
    use domain::egress::{Grant, MAX_GRANTS_PER_TENANT};
    let toml::Value::Array(items) = value else {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: "egress_grants must be an array of tables: [[egress_grants]]".to_owned(),
        });
    };
    if items.len() > MAX_DECLARED_SOURCES {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: format!("at most {MAX_DECLARED_SOURCES} egress_grants"),
        });
    }
    let mut out: Vec<(domain::ids::TenantId, Grant)> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let fail = |message: String| ConfigError::Toml {
            path: path.to_owned(),
            message: format!("egress_grants[{i}]: {message}"),
        };
        let g: GrantIn = item
            .try_into()
            .map_err(|e: toml::de::Error| fail(e.message().to_owned()))?;
        let tenant = g
            .tenant
            .parse::<domain::ids::TenantId>()
            .map_err(|_| fail(format!("tenant {:?} is not a tenant id (tnt_…)", g.tenant)))?;
        let grant = Grant::parse(
            &g.target,
            g.redis_prefix.as_deref(),
            g.amqp_vhost.as_deref(),
            g.nats_prefix.as_deref(),
        )
        .map_err(fail)?;
        if out
            .iter()
            .any(|(t, o)| *t == tenant && o.target == grant.target)
        {
            return Err(fail(format!(
                "{} is granted twice to {tenant}",
                grant.target
            )));
        }
        if out.iter().filter(|(t, _)| *t == tenant).count() >= MAX_GRANTS_PER_TENANT {
            return Err(fail(format!(
                "at most {MAX_GRANTS_PER_TENANT} grants per tenant"
            )));
        }
        out.push((tenant, grant));
    }
    Ok(out)
}

/// Most sources one file declares.
const MAX_DECLARED_SOURCES: usize = 1000;

/// `[[sources]]`: each a table of `tenant` and the API body's members, checked as the API
/// checks them; a name twice for one tenant is refused.
pub(super) fn declared_sources(
    value: toml::Value,
    path: &str,
) -> Result<Vec<DeclaredSource>, ConfigError> {
    let toml::Value::Array(items) = value else {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: "sources must be an array of tables: [[sources]]".to_owned(),
        });
    };
    if items.len() > MAX_DECLARED_SOURCES {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: format!("at most {MAX_DECLARED_SOURCES} sources"),
        });
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let toml::Value::Table(mut t) = item else {
            return Err(ConfigError::Toml {
                path: path.to_owned(),
                message: format!("sources[{i}] must be a table"),
            });
        };
        let origin = match t.get("name").and_then(toml::Value::as_str) {
            Some(name) => format!("sources[{i}] ({name:?}) in {path}"),
            None => format!("sources[{i}] in {path}"),
        };
        let fail = |message: String| ConfigError::Source {
            origin: origin.clone(),
            message,
        };
        let tenant = match t.remove("tenant") {
            Some(toml::Value::String(id)) => id
                .parse::<domain::ids::TenantId>()
                .map_err(|_| fail(format!("tenant {id:?} is not a tenant id (tnt_…)")))?,
            Some(_) => return Err(fail("tenant must be a tenant id (tnt_…)".to_owned())),
            None => {
                return Err(fail(
                    "tenant is missing: the id `hookd tenant create` printed (tnt_…)".to_owned(),
                ));
            }
        };
        let body: api::SourceIn = serde_json::to_value(&t)
            .and_then(serde_json::from_value)
            .map_err(|e| fail(e.to_string()))?;
        let spec = body.spec().map_err(|e| fail(e.to_string()))?;
        if !seen.insert((tenant, spec.name.clone())) {
            return Err(fail(format!(
                "source {:?} is declared twice for tenant {tenant}",
                spec.name
            )));
        }
        out.push(DeclaredSource {
            tenant,
            spec,
            origin,
        });
    }
    Ok(out)
}
