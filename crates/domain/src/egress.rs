//! Where one tenant's deliveries may go beyond the public internet: the server-wide allow list
//! (`endpoint_allow_networks`, for single-tenant installs) and the networks and hosts the
//! operator granted to that tenant. A tenant reaches a private address only through one of
//! them; a grant may also confine the tenant to its own namespace on a shared broker (a Redis
//! key prefix, a RabbitMQ vhost, a NATS subject prefix), so that two tenants granted the same
//! broker cannot write into each other's queues.
//!
//! The rules are pure: the caller resolves names and asks [`Egress::admit`] about every address.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::broker::{Destination, MAX_NAME_LEN};
use crate::endpoint_url::{AllowList, ForbiddenDestination, check_destination, network_contains};

/// Most grants one tenant holds.
pub const MAX_GRANTS_PER_TENANT: usize = 100;
/// Longest host name a grant names (DNS's limit).
pub const MAX_HOST_LEN: usize = 253;

/// What a grant opens: a network (`10.0.0.0/8`, one address) or every address one host name
/// resolves to, for URLs that name that host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GrantTarget {
    Network(IpNet),
    Host(String),
}

/// A grant's target that is neither a network nor a host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid grant target {target:?}: {reason}")]
pub struct BadGrant {
    pub target: String,
    pub reason: String,
}

impl GrantTarget {
    /// `10.0.0.0/8`, `10.1.2.3`, `fd00::/8`, or a host name such as `rabbitmq.internal`
    /// (letters, digits, `-` and `.`; case is ignored; a trailing dot is dropped).
    pub fn parse(input: &str) -> Result<GrantTarget, BadGrant> {
        let raw = input.trim();
        let bad = |reason: &str| BadGrant {
            target: raw.to_owned(),
            reason: reason.to_owned(),
        };
        let looks_numeric = raw.contains(':')
            || raw.contains('/')
            || raw.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        if looks_numeric {
            let list = AllowList::parse(raw).map_err(|e| bad(e.reason))?;
            return match list.networks() {
                [net] => Ok(GrantTarget::Network(*net)),
                _ => Err(bad("expected one network")),
            };
        }
        let host = raw.trim_end_matches('.').to_ascii_lowercase();
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if host.is_empty() || host.len() > MAX_HOST_LEN || !host.split('.').all(label_ok) {
            return Err(bad(
                "expected a CIDR network (10.0.0.0/8), an IP address or a host name",
            ));
        }
        Ok(GrantTarget::Host(host))
    }
}

impl fmt::Display for GrantTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GrantTarget::Network(n) if n.prefix_len() == n.max_prefix_len() => {
                write!(f, "{}", n.addr())
            }
            GrantTarget::Network(n) => write!(f, "{n}"),
            GrantTarget::Host(h) => f.write_str(h),
        }
    }
}

/// Where on a shared broker a granted tenant may publish; `None`: anywhere on that broker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespace {
    /// Every Redis stream the tenant writes starts with this.
    pub redis_prefix: Option<String>,
    /// The only RabbitMQ vhost the tenant publishes into.
    pub amqp_vhost: Option<String>,
    /// Every NATS subject the tenant publishes to starts with this.
    pub nats_prefix: Option<String>,
}

impl Namespace {
    /// The namespace as given, or what is wrong with it (the same name rules as broker URLs).
    pub fn new(
        redis_prefix: Option<&str>,
        amqp_vhost: Option<&str>,
        nats_prefix: Option<&str>,
    ) -> Result<Namespace, String> {
        let check = |what: &str, v: Option<&str>| -> Result<Option<String>, String> {
            let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
                return Ok(None);
            };
            let ok = v.len() <= MAX_NAME_LEN
                && v.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-' | b'/')
                })
                && (what == "amqp vhost" || !v.contains('/'));
            if ok {
                Ok(Some(v.to_owned()))
            } else {
                Err(format!(
                    "the {what} must be 1 to {MAX_NAME_LEN} letters, digits, '.', '_', ':' or '-'"
                ))
            }
        };
        Ok(Namespace {
            redis_prefix: check("redis prefix", redis_prefix)?,
            amqp_vhost: check("amqp vhost", amqp_vhost)?,
            nats_prefix: check("nats prefix", nats_prefix)?,
        })
    }

    /// Whether `dest` lies inside this namespace, or a sentence saying where it must be.
    pub fn admits(&self, dest: &Destination) -> Result<(), String> {
        match dest {
            Destination::Redis { stream, .. } => match &self.redis_prefix {
                Some(p) if !stream.starts_with(p.as_str()) => Err(format!(
                    "this broker is shared: your Redis streams must start with {p:?}"
                )),
                _ => Ok(()),
            },
            Destination::Amqp { vhost, .. } => match &self.amqp_vhost {
                Some(v) if vhost != v => Err(format!(
                    "this broker is shared: your RabbitMQ vhost is {v:?} (amqp://host/{v}?…)"
                )),
                _ => Ok(()),
            },
            Destination::Nats { subject } => match &self.nats_prefix {
                Some(p) if !subject.starts_with(p.as_str()) => Err(format!(
                    "this broker is shared: your NATS subjects must start with {p:?}"
                )),
                _ => Ok(()),
            },
        }
    }

    pub fn is_empty(&self) -> bool {
        self == &Namespace::default()
    }
}

/// One network or host opened to one tenant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Grant {
    pub target: GrantTarget,
    pub namespace: Namespace,
}

impl Grant {
    /// A grant from its text parts, as the command line, the configuration file and a stored
    /// row give them; the error is a sentence naming the part that is wrong.
    pub fn parse(
        target: &str,
        redis_prefix: Option<&str>,
        amqp_vhost: Option<&str>,
        nats_prefix: Option<&str>,
    ) -> Result<Grant, String> {
        Ok(Grant {
            target: GrantTarget::parse(target).map_err(|e| e.to_string())?,
            namespace: Namespace::new(redis_prefix, amqp_vhost, nats_prefix)?,
        })
    }
}

/// Why an address may be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted<'a> {
    /// A public address: anyone's deliveries may go there.
    Public,
    /// In `endpoint_allow_networks`, open to every tenant.
    Server,
    /// Through this grant of the tenant's (its namespace applies).
    Granted(&'a Grant),
}

/// What one tenant's deliveries may reach: the server-wide list and its own grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Egress {
    server: AllowList,
    grants: Vec<Grant>,
}

impl Egress {
    pub fn new(server: AllowList, grants: Vec<Grant>) -> Egress {
        Egress { server, grants }
    }

    /// Public addresses only: neither the server-wide list nor any grant.
    pub fn public_only() -> Egress {
        Egress::default()
    }

    /// The same server-wide list with no grants: what a tenant without grants reaches.
    pub fn server_only(&self) -> Egress {
        Egress::new(self.server.clone(), Vec::new())
    }

    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// Whether a URL naming `host` may connect to `ip`, and why. A grant of the host name
    /// comes first (it names the service, not its addresses), then a granted network, then
    /// the server-wide list; a private address that none of them opens is refused.
    pub fn admit(&self, host: &str, ip: IpAddr) -> Result<Admitted<'_>, ForbiddenDestination> {
        let host = host.trim_end_matches('.');
        let by_host = self
            .grants
            .iter()
            .find(|g| matches!(&g.target, GrantTarget::Host(h) if h.eq_ignore_ascii_case(host)));
        let by_network = || {
            self.grants.iter().find(|g| match &g.target {
                GrantTarget::Network(n) => network_contains(n, ip),
                GrantTarget::Host(_) => false,
            })
        };
        if let Some(g) = by_host.or_else(by_network) {
            return Ok(Admitted::Granted(g));
        }
        check_destination(ip, &self.server)?;
        Ok(if self.server.contains(ip) {
            Admitted::Server
        } else {
            Admitted::Public
        })
    }

    /// [`Egress::admit`] for a broker destination: every address must be admitted, and where a
    /// grant admits one, the destination must lie in that grant's namespace.
    pub fn admit_broker(
        &self,
        host: &str,
        ips: impl IntoIterator<Item = IpAddr>,
        dest: &Destination,
    ) -> Result<(), String> {
        for ip in ips {
            match self.admit(host, ip).map_err(|e| e.to_string())? {
                Admitted::Granted(g) => g.namespace.admits(dest)?,
                Admitted::Public | Admitted::Server => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn grant(target: &str, ns: Namespace) -> Grant {
        Grant {
            target: GrantTarget::parse(target).unwrap(),
            namespace: ns,
        }
    }

    #[test]
    fn targets_parse_as_networks_or_host_names() {
        assert_eq!(
            GrantTarget::parse(" 10.1.2.3/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            GrantTarget::parse("10.1.2.3").unwrap().to_string(),
            "10.1.2.3"
        );
        assert_eq!(
            GrantTarget::parse("fd00::/8").unwrap().to_string(),
            "fd00::/8"
        );
        assert_eq!(
            GrantTarget::parse("RabbitMQ.Internal.").unwrap(),
            GrantTarget::Host("rabbitmq.internal".into())
        );
        for bad in [
            "",
            "a b",
            "-x.internal",
            "10.0.0.0/33",
            "x..y",
            "h_st",
            "a,b",
        ] {
            assert!(GrantTarget::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_tenant_reaches_a_private_address_only_through_a_grant_or_the_server_list() {
        let none = Egress::public_only();
        assert_eq!(
            none.admit("example.com", ip("93.184.216.34")),
            Ok(Admitted::Public)
        );
        assert!(none.admit("redis.internal", ip("10.0.0.5")).is_err());
        assert!(none.admit("127.0.0.1", ip("127.0.0.1")).is_err());

        let a = Egress::new(
            AllowList::default(),
            vec![
                grant("10.0.0.0/24", Namespace::default()),
                grant("mq.internal", Namespace::default()),
            ],
        );
        assert!(matches!(
            a.admit("x", ip("10.0.0.9")),
            Ok(Admitted::Granted(_))
        ));
        assert!(
            a.admit("x", ip("10.0.1.9")).is_err(),
            "outside the granted /24"
        );
        // A host grant opens whatever that name resolves to, for that name only.
        assert!(matches!(
            a.admit("MQ.internal.", ip("172.16.0.3")),
            Ok(Admitted::Granted(_))
        ));
        assert!(a.admit("other.internal", ip("172.16.0.3")).is_err());
        // An IPv4-mapped IPv6 address is the IPv4 address.
        assert!(matches!(
            a.admit("x", ip("::ffff:10.0.0.9")),
            Ok(Admitted::Granted(_))
        ));

        let server = Egress::new(AllowList::parse("127.0.0.0/8").unwrap(), vec![]);
        assert_eq!(
            server.admit("localhost", ip("127.0.0.1")),
            Ok(Admitted::Server)
        );
        assert!(
            server
                .server_only()
                .admit("localhost", ip("127.0.0.1"))
                .is_ok()
        );
    }

    #[test]
    fn a_shared_broker_keeps_each_tenant_in_its_namespace() {
        let ns = Namespace::new(Some("a-"), Some("tenant-a"), Some("a.")).unwrap();
        let a = Egress::new(AllowList::default(), vec![grant("10.0.0.5", ns)]);
        let redis = |s: &str| Destination::Redis {
            stream: s.into(),
            maxlen: None,
        };
        let at = [ip("10.0.0.5")];
        assert_eq!(a.admit_broker("10.0.0.5", at, &redis("a-orders")), Ok(()));
        let err = a
            .admit_broker("10.0.0.5", at, &redis("b-orders"))
            .unwrap_err();
        assert!(err.contains("\"a-\""), "{err}");
        let amqp = |v: &str| Destination::Amqp {
            vhost: v.into(),
            exchange: String::new(),
            routing_key: "q".into(),
        };
        assert!(a.admit_broker("10.0.0.5", at, &amqp("tenant-a")).is_ok());
        assert!(a.admit_broker("10.0.0.5", at, &amqp("/")).is_err());
        let nats = |s: &str| Destination::Nats { subject: s.into() };
        assert!(a.admit_broker("10.0.0.5", at, &nats("a.orders")).is_ok());
        assert!(a.admit_broker("10.0.0.5", at, &nats("b.orders")).is_err());
        // Not granted at all: refused before any namespace is looked at.
        assert!(
            a.admit_broker("10.0.0.6", [ip("10.0.0.6")], &redis("a-x"))
                .is_err()
        );
        // A public broker has no namespace to keep.
        assert!(
            a.admit_broker("b.example", [ip("93.184.216.34")], &redis("b-x"))
                .is_ok()
        );
    }

    #[test]
    fn namespace_names_follow_the_broker_url_rules() {
        assert!(Namespace::new(Some("a b"), None, None).is_err());
        assert!(Namespace::new(Some("a/"), None, None).is_err());
        assert_eq!(
            Namespace::new(Some(""), Some(" "), None).unwrap(),
            Namespace::default()
        );
        assert!(Namespace::new(None, Some("team/a"), None).is_ok());
    }
}
