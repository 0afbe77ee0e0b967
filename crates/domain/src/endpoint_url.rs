//! Endpoint URLs and the pure half of the SSRF guard: which destinations are refused by default
//! and which networks the operator exempts (`HOOKD_ENDPOINT_ALLOW_NETWORKS`).
//!
//! Resolving a host name is I/O and lives in `service::ssrf`; this module only judges addresses.
//!
//! The URL parser is deliberately stricter than the WHATWG parser that the HTTP client uses:
//! wherever the two could disagree about the host (backslashes, `127.1`-style IPv4 shorthand,
//! percent-encoded or non-ASCII host names) the URL is refused, so the host checked here is the
//! host the request goes to.

use crate::broker::{BrokerKind, Destination};
use ipnet::{IpNet, Ipv4Net};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Longest accepted URL, in bytes (after trimming surrounding whitespace).
pub const MAX_URL_LEN: usize = 2048;
const MAX_HOST_LEN: usize = 253;
const MAX_LABEL_LEN: usize = 63;

/// Why a URL was refused. Messages name the problem and, where it helps, the offending part;
/// never the whole URL, which may hold secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointUrlError {
    #[error("url is empty")]
    Empty,
    #[error("url is {len} bytes long; the limit is {max} bytes", max = MAX_URL_LEN)]
    TooLong { len: usize },
    #[error("url must not contain spaces or control characters")]
    InvalidCharacter,
    #[error(
        "url must not contain a backslash (URL parsers disagree on what it means); \
         percent-encode it as %5C"
    )]
    Backslash,
    #[error(
        "url must start with http:// or https:// (or name a broker: amqp://, nats://, redis://)"
    )]
    Scheme,
    #[error("url must start with https:// (plain http is disabled on this server)")]
    HttpsRequired,
    #[error(
        "url must start with https://: this server sends only over TLS, and broker \
         destinations ({0}://) are plain TCP"
    )]
    PlainBroker(&'static str),
    #[error("url names no usable {0} destination: {1}")]
    Broker(&'static str, crate::broker::BadDestination),
    #[error(
        "url must not contain a username or password: credentials in URLs leak into logs; \
         send them in a header instead"
    )]
    Credentials,
    #[error("url must have a host, e.g. https://example.com/webhook")]
    MissingHost,
    #[error("url host {host:?} is invalid: {reason}")]
    InvalidHost { host: String, reason: &'static str },
    #[error("url port {port:?} is invalid: it must be a number from 1 to 65535")]
    InvalidPort { port: String },
    #[error("url must not contain a fragment (#...): fragments are never sent to the server")]
    Fragment,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Scheme {
    Http,
    Https,
    Broker(BrokerKind),
}

/// An absolute `http`/`https` URL fit to deliver webhooks to, or a broker destination
/// (`amqp`, `nats`, `redis`: see `crate::broker`).
///
/// The stored form is normalised: scheme and host in lower case, an IPv6 host in its canonical
/// text, an explicit port as a plain number. Path and query are kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointUrl {
    serialized: String,
    scheme: Scheme,
    /// Lower case; an IPv6 literal without its brackets.
    host: String,
    ip: Option<IpAddr>,
    port: Option<u16>,
    /// Byte offset of the path-and-query in `serialized`.
    path_start: usize,
    /// Where on the broker, for a broker URL.
    destination: Option<Destination>,
}

impl EndpointUrl {
    /// Parses an endpoint URL. Surrounding whitespace is trimmed; anything else that is not a
    /// plain `scheme://host[:port][/path][?query]` is refused. `https_only` refuses `http://`.
    ///
    /// Host names may contain `_` (Docker and Kubernetes service names often do; resolvers
    /// accept them). That is safe because the SSRF guard judges resolved addresses, not names.
    pub fn parse(input: &str, https_only: bool) -> Result<EndpointUrl, EndpointUrlError> {
        use EndpointUrlError as E;

        let s = input.trim();
        if s.is_empty() {
            return Err(E::Empty);
        }
        if s.len() > MAX_URL_LEN {
            return Err(E::TooLong { len: s.len() });
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(E::InvalidCharacter);
        }
        // WHATWG parsers read `\` as `/` in http URLs; others read it as data. Refusing it
        // means `http://a.com\@10.0.0.1/` cannot mean one host here and another in the client.
        if s.contains('\\') {
            return Err(E::Backslash);
        }
        if s.contains('#') {
            return Err(E::Fragment);
        }

        let (scheme, rest) = s.split_once("://").ok_or(E::Scheme)?;
        let scheme = if scheme.eq_ignore_ascii_case("https") {
            Scheme::Https
        } else if scheme.eq_ignore_ascii_case("http") {
            Scheme::Http
        } else if let Some(kind) = BrokerKind::from_scheme(scheme) {
            Scheme::Broker(kind)
        } else {
            return Err(E::Scheme);
        };
        match scheme {
            Scheme::Http if https_only => return Err(E::HttpsRequired),
            Scheme::Broker(kind) if https_only => return Err(E::PlainBroker(kind.scheme())),
            _ => {}
        }

        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(E::Credentials);
        }
        let (host, ip, port) = parse_authority(authority)?;
        let destination = match scheme {
            Scheme::Broker(kind) => Some(
                Destination::parse(kind, path_and_query)
                    .map_err(|e| E::Broker(kind.scheme(), e))?,
            ),
            _ => None,
        };

        let mut serialized = String::with_capacity(s.len());
        serialized.push_str(match scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Broker(kind) => kind.scheme(),
        });
        serialized.push_str("://");
        if matches!(ip, Some(IpAddr::V6(_))) {
            serialized.push('[');
            serialized.push_str(&host);
            serialized.push(']');
        } else {
            serialized.push_str(&host);
        }
        if let Some(port) = port {
            serialized.push(':');
            serialized.push_str(&port.to_string());
        }
        let path_start = serialized.len();
        serialized.push_str(path_and_query);

        Ok(EndpointUrl {
            serialized,
            scheme,
            host,
            ip,
            port,
            path_start,
            destination,
        })
    }

    /// The broker destination, for an `amqp`, `nats` or `redis` URL.
    pub fn destination(&self) -> Option<&Destination> {
        self.destination.as_ref()
    }

    pub fn as_str(&self) -> &str {
        &self.serialized
    }

    /// `"http"`, `"https"` or a broker's scheme.
    pub fn scheme(&self) -> &'static str {
        match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::Broker(kind) => kind.scheme(),
        }
    }

    pub fn is_https(&self) -> bool {
        self.scheme == Scheme::Https
    }

    /// The host in lower case; an IPv6 literal without brackets (ready for a DNS lookup or
    /// `IpAddr::from_str`).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The explicit port, or the scheme's (80, 443, or the broker's).
    pub fn port(&self) -> u16 {
        self.port.unwrap_or(match self.scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
            Scheme::Broker(kind) => kind.default_port(),
        })
    }

    /// The address when the host is an IP literal (no DNS lookup needed).
    pub fn host_ip(&self) -> Option<IpAddr> {
        self.ip
    }

    /// Whether `other` reaches the same receiver: the same host and port. Credentials given
    /// for one receiver must not follow the URL to another.
    pub fn same_receiver(&self, other: &EndpointUrl) -> bool {
        self.host == other.host && self.port() == other.port()
    }

    /// Everything after the authority, verbatim: `/path?query`, possibly empty.
    pub fn path_and_query(&self) -> &str {
        &self.serialized[self.path_start..]
    }
}

impl fmt::Display for EndpointUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.serialized)
    }
}

/// Splits `host[:port]` or `[v6][:port]` (userinfo already refused).
fn parse_authority(
    authority: &str,
) -> Result<(String, Option<IpAddr>, Option<u16>), EndpointUrlError> {
    use EndpointUrlError as E;

    if let Some(bracketed) = authority.strip_prefix('[') {
        let invalid = |reason| E::InvalidHost {
            host: authority.to_owned(),
            reason,
        };
        let (inner, after) = bracketed
            .split_once(']')
            .ok_or_else(|| invalid("'[' without a closing ']'"))?;
        let ip: Ipv6Addr = inner
            .parse()
            .map_err(|_| invalid("not a valid IPv6 address (zone ids are not supported)"))?;
        let port = match after {
            "" => None,
            _ => {
                let port = after
                    .strip_prefix(':')
                    .ok_or_else(|| invalid("unexpected characters after ']'"))?;
                Some(parse_port(port)?)
            }
        };
        return Ok((ip.to_string(), Some(IpAddr::V6(ip)), port));
    }

    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if port.is_some_and(|p| p.contains(':')) {
        return Err(E::InvalidHost {
            host: authority.to_owned(),
            reason: "an IPv6 address must be written in brackets, e.g. http://[2001:db8::1]/",
        });
    }
    if host.is_empty() {
        return Err(E::MissingHost);
    }
    let (host, ip) = parse_host(host)?;
    let port = port.map(parse_port).transpose()?;
    Ok((host, ip, port))
}

fn parse_port(port: &str) -> Result<u16, EndpointUrlError> {
    let invalid = || EndpointUrlError::InvalidPort {
        port: port.to_owned(),
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    let significant = port.trim_start_matches('0');
    if significant.len() > 5 {
        return Err(invalid());
    }
    match significant.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(invalid()),
    }
}

/// A DNS name or a dotted-quad IPv4 literal, lower-cased.
fn parse_host(host: &str) -> Result<(String, Option<IpAddr>), EndpointUrlError> {
    let invalid = |reason| EndpointUrlError::InvalidHost {
        host: host.to_owned(),
        reason,
    };
    if !host.is_ascii() {
        return Err(invalid(
            "non-ASCII host names must be written in their punycode (xn--) form",
        ));
    }
    let lower = host.to_ascii_lowercase();
    // One trailing dot marks a fully qualified name and is legal.
    let name = lower.strip_suffix('.').unwrap_or(&lower);

    // Like the WHATWG parser: a host whose last label is a number is an IPv4 address. Only the
    // plain a.b.c.d form is accepted, so `127.1`, `0x7f.1` or `2130706433` (which the HTTP
    // client would read as 127.0.0.1) cannot pass as names.
    let last_label = name.rsplit('.').next().unwrap_or(name);
    if is_numeric_label(last_label) {
        return match name.parse::<Ipv4Addr>() {
            Ok(ip) => Ok((ip.to_string(), Some(IpAddr::V4(ip)))),
            Err(_) => Err(invalid(
                "not a valid IPv4 address; write it as four decimal numbers, e.g. 192.0.2.1",
            )),
        };
    }

    if name.is_empty() {
        return Err(invalid("the host name is empty"));
    }
    if name.len() > MAX_HOST_LEN {
        return Err(invalid("a host name must be at most 253 characters long"));
    }
    for label in name.split('.') {
        if label.is_empty() {
            return Err(invalid(
                "a host name must not contain empty labels (\"..\")",
            ));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(invalid(
                "each label of a host name must be at most 63 characters",
            ));
        }
        let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
        if !label.bytes().all(allowed) {
            return Err(invalid(
                "a host name may contain only letters, digits, '-', '_' and '.'",
            ));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid("a host name label must not start or end with '-'"));
        }
    }
    Ok((lower, None))
}

/// Whether the WHATWG IPv4 parser would treat this label as a number (decimal, or `0x` hex).
fn is_numeric_label(label: &str) -> bool {
    if let Some(hex) = label.strip_prefix("0x") {
        return hex.bytes().all(|b| b.is_ascii_hexdigit());
    }
    !label.is_empty() && label.bytes().all(|b| b.is_ascii_digit())
}

// ---------------------------------------------------------------------------------------------
// Forbidden destinations

const PRIVATE_V4: &str = "a private address (RFC 1918)";

/// Non-public IPv4 ranges, most specific first (the first match names the reason).
const FORBIDDEN_V4: &[(Ipv4Addr, u8, &str)] = &[
    (
        Ipv4Addr::new(0, 0, 0, 0),
        32,
        "an unspecified address (0.0.0.0)",
    ),
    (
        Ipv4Addr::new(0, 0, 0, 0),
        8,
        "a \"this network\" address (0.0.0.0/8)",
    ),
    (Ipv4Addr::new(10, 0, 0, 0), 8, PRIVATE_V4),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "a carrier-grade NAT address (100.64.0.0/10)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "a loopback address"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "a link-local address (169.254.0.0/16, where cloud metadata services live)",
    ),
    (Ipv4Addr::new(172, 16, 0, 0), 12, PRIVATE_V4),
    (
        Ipv4Addr::new(192, 0, 0, 0),
        24,
        "an IETF protocol assignment (192.0.0.0/24)",
    ),
    (
        Ipv4Addr::new(192, 0, 2, 0),
        24,
        "a documentation address (192.0.2.0/24)",
    ),
    (Ipv4Addr::new(192, 168, 0, 0), 16, PRIVATE_V4),
    (
        Ipv4Addr::new(198, 18, 0, 0),
        15,
        "a benchmarking address (198.18.0.0/15)",
    ),
    (
        Ipv4Addr::new(198, 51, 100, 0),
        24,
        "a documentation address (198.51.100.0/24)",
    ),
    (
        Ipv4Addr::new(203, 0, 113, 0),
        24,
        "a documentation address (203.0.113.0/24)",
    ),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "a multicast address"),
    (
        Ipv4Addr::new(255, 255, 255, 255),
        32,
        "the broadcast address",
    ),
    (
        Ipv4Addr::new(240, 0, 0, 0),
        4,
        "a reserved address (240.0.0.0/4)",
    ),
];

/// Non-public IPv6 ranges, most specific first. `::`, `::1` and the ranges that embed an IPv4
/// address are handled before this table; anything outside 2000::/3 is refused after it.
const FORBIDDEN_V6: &[(Ipv6Addr, u8, &str)] = &[
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        "a local-use NAT64 address (64:ff9b:1::/48)",
    ),
    (
        Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0),
        64,
        "a discard-only address (100::/64)",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        32,
        "a Teredo tunnel address (2001::/32)",
    ),
    (
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0),
        48,
        "a benchmarking address (2001:2::/48)",
    ),
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        "an IETF protocol assignment (2001::/23)",
    ),
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        "a documentation address (2001:db8::/32)",
    ),
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        "a documentation address (3fff::/20)",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "a private address (unique local, fc00::/7)",
    ),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        "a link-local address (fe80::/10)",
    ),
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        "a site-local address (fec0::/10, deprecated)",
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        "a multicast address",
    ),
];

/// Why hookd refuses to deliver to `ip` unless the operator allows it, or `None` for a public
/// address. The reason reads after "is": "a loopback address".
///
/// IPv6 forms that carry an IPv4 destination (IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
/// `::a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`)
/// are judged by that IPv4 address.
pub fn is_forbidden_ip(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    FORBIDDEN_V4
        .iter()
        .find(|(net, prefix, _)| v4_in(ip, *net, *prefix))
        .map(|(_, _, reason)| *reason)
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("an unspecified address (::)");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if let Some(v4) = embedded_v4(ip) {
        return forbidden_v4(v4);
    }
    if let Some(&(_, _, reason)) = FORBIDDEN_V6
        .iter()
        .find(|(net, prefix, _)| v6_in(ip, *net, *prefix))
    {
        return Some(reason);
    }
    // Only 2000::/3 is allocated for global unicast; the rest is reserved.
    if !v6_in(ip, Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3) {
        return Some("a reserved address (outside the global unicast range 2000::/3)");
    }
    None
}

/// The IPv4 address an IPv6 address stands for, where it stands for one. `::` and `::1` are
/// not IPv4-compatible addresses and are left to the caller.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let bits = u128::from(ip);
    // Truncation is the point: the IPv4 address is the low 32 bits.
    let low32 = Ipv4Addr::from(bits as u32);
    let carries_low32 = [
        Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), // IPv4-mapped
        Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), // IPv4-translated (SIIT)
        Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), // NAT64
        Ipv6Addr::UNSPECIFIED,                      // IPv4-compatible (deprecated)
    ];
    if !ip.is_unspecified()
        && !ip.is_loopback()
        && carries_low32.iter().any(|&net| v6_in(ip, net, 96))
    {
        return Some(low32);
    }
    if v6_in(ip, Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16) {
        // 6to4: the gateway's IPv4 address sits in bits 16..48.
        return Some(Ipv4Addr::from((bits >> 80) as u32));
    }
    None
}

fn v4_mask(prefix: u8) -> u32 {
    // checked_shl refuses a shift by 32 (prefix 0): that mask is all zeros.
    u32::MAX
        .checked_shl(32 - u32::from(prefix.min(32)))
        .unwrap_or(0)
}

fn v6_mask(prefix: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(prefix.min(128)))
        .unwrap_or(0)
}

fn v4_in(ip: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    let mask = v4_mask(prefix);
    u32::from(ip) & mask == u32::from(net) & mask
}

fn v6_in(ip: Ipv6Addr, net: Ipv6Addr, prefix: u8) -> bool {
    let mask = v6_mask(prefix);
    u128::from(ip) & mask == u128::from(net) & mask
}

// ---------------------------------------------------------------------------------------------
// Operator exemptions

/// Networks exempt from the SSRF guard (`HOOKD_ENDPOINT_ALLOW_NETWORKS`).
///
/// Entries are stored as network addresses (host bits cleared), and an IPv6 network inside
/// `::ffff:0:0/96` is stored as the IPv4 network it denotes, so each address has one form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AllowList(Vec<IpNet>);

/// An entry of the allow list that is not an IP address or CIDR network.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid network {entry:?}: {reason}")]
pub struct AllowListError {
    pub entry: String,
    pub reason: &'static str,
}

impl AllowList {
    /// Parses a comma-separated list of CIDR networks, e.g. `127.0.0.0/8, ::1/128`. A bare
    /// address means that address alone (/32 or /128). Empty entries are ignored, so `""` is
    /// the empty list and a trailing comma is harmless. Host bits are cleared:
    /// `10.1.2.3/8` means `10.0.0.0/8`.
    pub fn parse(input: &str) -> Result<AllowList, AllowListError> {
        input
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(parse_network)
            .collect::<Result<Vec<_>, _>>()
            .map(AllowList)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The networks, normalised.
    pub fn networks(&self) -> &[IpNet] {
        &self.0
    }

    /// Whether `ip` lies in one of the networks. IPv4-mapped IPv6 addresses are IPv4
    /// addresses; NAT64, 6to4 and IPv4-compatible addresses match both IPv6 networks and the
    /// IPv4 networks of the address they embed.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| network_contains(net, ip))
    }
}

/// Whether `ip` lies in `net` (a network in [`AllowList`]'s normal form). IPv4-mapped IPv6
/// addresses are IPv4 addresses; NAT64, 6to4 and IPv4-compatible addresses match both IPv6
/// networks and the IPv4 networks of the address they embed.
pub fn network_contains(net: &IpNet, ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    match (net, ip) {
        (IpNet::V4(net), IpAddr::V4(ip)) => net.contains(&ip),
        (IpNet::V6(net), IpAddr::V6(ip)) => net.contains(&ip),
        (IpNet::V4(net), IpAddr::V6(v6)) => embedded_v4(v6).is_some_and(|v4| net.contains(&v4)),
        (IpNet::V6(_), IpAddr::V4(_)) => false,
    }
}

impl FromStr for AllowList {
    type Err = AllowListError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AllowList::parse(s)
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, net) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{net}")?;
        }
        Ok(())
    }
}

/// The text is split by hand for the error messages (ipnet's parser says only "invalid IP
/// address syntax"); the network itself is ipnet's.
fn parse_network(entry: &str) -> Result<IpNet, AllowListError> {
    let invalid = |reason| AllowListError {
        entry: entry.to_owned(),
        reason,
    };
    let (addr, prefix) = match entry.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (entry, None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| {
        invalid("expected an IP address or a CIDR network such as 10.0.0.0/8 or fd00::/8")
    })?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => max,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ if max == 32 => return Err(invalid("an IPv4 prefix length must be 0 to 32")),
                _ => return Err(invalid("an IPv6 prefix length must be 0 to 128")),
            }
        }
        Some(_) => return Err(invalid("the prefix length after '/' must be a number")),
    };
    let net = IpNet::new(ip, prefix)
        .map_err(|_| invalid("the prefix length is too long"))?
        .trunc();
    Ok(match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        net => net,
    })
}

// ---------------------------------------------------------------------------------------------
// The verdict

/// A destination the SSRF guard refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "destination {ip} is {reason}; hookd reaches it only where the operator granted that network \
     to your account"
)]
pub struct ForbiddenDestination {
    pub ip: IpAddr,
    pub reason: &'static str,
}

/// Whether hookd may connect to `ip` by the server-wide list alone: yes if the operator allows
/// its network or it is public (a tenant's grants: `egress::Egress::admit`).
pub fn check_destination(ip: IpAddr, allow: &AllowList) -> Result<(), ForbiddenDestination> {
    if allow.contains(ip) {
        return Ok(());
    }
    match is_forbidden_ip(ip) {
        Some(reason) => Err(ForbiddenDestination { ip, reason }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    // ----- EndpointUrl::parse -----

    #[test]
    fn broker_urls_name_their_destination_and_keep_the_guards_of_http() {
        let u = EndpointUrl::parse("AMQP://MQ.internal/?routing_key=hooks", false).unwrap();
        assert_eq!(u.as_str(), "amqp://mq.internal/?routing_key=hooks");
        assert_eq!((u.scheme(), u.port()), ("amqp", 5672));
        assert_eq!(
            u.destination().map(|d| d.kind()),
            Some(crate::broker::BrokerKind::Amqp)
        );
        let n = EndpointUrl::parse("nats://10.0.0.5?subject=a.b", false).unwrap();
        assert_eq!((n.port(), n.host_ip().is_some()), (4222, true));
        let r = EndpointUrl::parse("redis://[::1]:7000?stream=s", false).unwrap();
        assert_eq!(r.port(), 7000);
        assert!(
            EndpointUrl::parse("https://example.com/?stream=s", false)
                .unwrap()
                .destination()
                .is_none()
        );
        // Credentials stay out of URLs (they are the endpoint's sealed auth), TLS-only servers
        // refuse plain brokers, and a destination that names nothing is refused.
        assert_eq!(
            EndpointUrl::parse("redis://u:p@h?stream=s", false),
            Err(EndpointUrlError::Credentials)
        );
        assert_eq!(
            EndpointUrl::parse("nats://h?subject=s", true),
            Err(EndpointUrlError::PlainBroker("nats"))
        );
        let err = EndpointUrl::parse("amqp://h/", false).unwrap_err();
        assert!(err.to_string().contains("routing_key is required"), "{err}");
    }

    #[test]
    fn accepts_and_normalises_good_urls() {
        // (input, as_str, scheme, host, port, is an IP literal)
        let cases = [
            (
                "https://example.com/webhook?x=1&y=%20",
                "https://example.com/webhook?x=1&y=%20",
                "https",
                "example.com",
                443,
                false,
            ),
            (
                "HTTP://Example.COM:8080/Path/To?Q=A",
                "http://example.com:8080/Path/To?Q=A",
                "http",
                "example.com",
                8080,
                false,
            ),
            (
                "https://example.com",
                "https://example.com",
                "https",
                "example.com",
                443,
                false,
            ),
            (
                "http://example.com",
                "http://example.com",
                "http",
                "example.com",
                80,
                false,
            ),
            (
                "https://example.com?q=1",
                "https://example.com?q=1",
                "https",
                "example.com",
                443,
                false,
            ),
            (
                "  https://example.com/hook \n",
                "https://example.com/hook",
                "https",
                "example.com",
                443,
                false,
            ),
            (
                "http://127.0.0.1:3000/hook",
                "http://127.0.0.1:3000/hook",
                "http",
                "127.0.0.1",
                3000,
                true,
            ),
            (
                "http://127.0.0.1./",
                "http://127.0.0.1/",
                "http",
                "127.0.0.1",
                80,
                true,
            ),
            (
                "http://[::1]:8080/",
                "http://[::1]:8080/",
                "http",
                "::1",
                8080,
                true,
            ),
            (
                "https://[2001:DB8:0:0::1]/x",
                "https://[2001:db8::1]/x",
                "https",
                "2001:db8::1",
                443,
                true,
            ),
            (
                "http://[::ffff:10.0.0.1]/",
                "http://[::ffff:10.0.0.1]/",
                "http",
                "::ffff:10.0.0.1",
                80,
                true,
            ),
            (
                "https://my_service.internal/x",
                "https://my_service.internal/x",
                "https",
                "my_service.internal",
                443,
                false,
            ),
            (
                "https://example.com./",
                "https://example.com./",
                "https",
                "example.com.",
                443,
                false,
            ),
            (
                "https://example.com:0443/",
                "https://example.com:443/",
                "https",
                "example.com",
                443,
                false,
            ),
            (
                "http://localhost:65535",
                "http://localhost:65535",
                "http",
                "localhost",
                65535,
                false,
            ),
            (
                "http://receiver:1/",
                "http://receiver:1/",
                "http",
                "receiver",
                1,
                false,
            ),
            (
                "https://a.b/p@q:r",
                "https://a.b/p@q:r",
                "https",
                "a.b",
                443,
                false,
            ),
            (
                "https://xn--bcher-kva.example/",
                "https://xn--bcher-kva.example/",
                "https",
                "xn--bcher-kva.example",
                443,
                false,
            ),
            (
                "https://123.example/",
                "https://123.example/",
                "https",
                "123.example",
                443,
                false,
            ),
            (
                "https://e.com/caf\u{e9}",
                "https://e.com/caf\u{e9}",
                "https",
                "e.com",
                443,
                false,
            ),
        ];
        for (input, as_str, scheme, host, port, literal) in cases {
            let url = EndpointUrl::parse(input, false)
                .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"));
            assert_eq!(url.as_str(), as_str, "{input:?}");
            assert_eq!(url.to_string(), as_str, "{input:?}");
            assert_eq!(url.scheme(), scheme, "{input:?}");
            assert_eq!(url.is_https(), scheme == "https", "{input:?}");
            assert_eq!(url.host(), host, "{input:?}");
            assert_eq!(url.port(), port, "{input:?}");
            assert_eq!(url.host_ip().is_some(), literal, "{input:?}");
            if literal {
                assert_eq!(url.host_ip(), Some(ip(host)), "{input:?}");
            }
            // The normalised form is a fixed point.
            assert_eq!(EndpointUrl::parse(url.as_str(), false).as_ref(), Ok(&url));
        }
    }

    #[test]
    fn path_and_query_are_kept_verbatim() {
        let cases = [
            ("https://Example.com/A%2Fb?X=Y&z", "/A%2Fb?X=Y&z"),
            ("https://example.com", ""),
            ("https://example.com?a=b", "?a=b"),
            ("http://[::1]:81//double//", "//double//"),
        ];
        for (input, pq) in cases {
            assert_eq!(
                EndpointUrl::parse(input, false).unwrap().path_and_query(),
                pq
            );
        }
    }

    #[test]
    fn https_only_refuses_http_and_accepts_https() {
        assert_eq!(
            EndpointUrl::parse("http://example.com/", true),
            Err(EndpointUrlError::HttpsRequired)
        );
        assert_eq!(
            EndpointUrl::parse("HTTP://example.com/", true),
            Err(EndpointUrlError::HttpsRequired)
        );
        assert!(EndpointUrl::parse("https://example.com/", true).is_ok());
        assert!(EndpointUrl::parse("HTTPS://example.com/", true).is_ok());
    }

    #[test]
    fn refuses_bad_urls_with_the_right_error() {
        use EndpointUrlError as E;
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        let long_label = format!("https://{}.com/", "a".repeat(64));
        let long_host = format!("https://{}com/", "abcdefghi.".repeat(26));
        let bad_host =
            |url: &str| matches!(EndpointUrl::parse(url, false), Err(E::InvalidHost { .. }));
        let cases: Vec<(&str, E)> = vec![
            ("", E::Empty),
            ("   ", E::Empty),
            (
                long.as_str(),
                E::TooLong {
                    len: 20 + MAX_URL_LEN,
                },
            ),
            ("https://exa mple.com/", E::InvalidCharacter),
            ("https://example.com/a b", E::InvalidCharacter),
            ("https://example.com/\ta", E::InvalidCharacter),
            ("https://example.com/\na", E::InvalidCharacter),
            ("https://example.com/\u{0}", E::InvalidCharacter),
            ("https://example.com/\u{7f}", E::InvalidCharacter),
            ("https://example.com/\u{a0}x", E::InvalidCharacter),
            ("https://example.com\\@127.0.0.1/", E::Backslash),
            ("https://example.com/a\\b", E::Backslash),
            ("https://example.com/#frag", E::Fragment),
            ("https://example.com#", E::Fragment),
            ("ftp://example.com/", E::Scheme),
            ("example.com/hook", E::Scheme),
            ("//example.com/hook", E::Scheme),
            ("http:/example.com", E::Scheme),
            ("http:example.com", E::Scheme),
            ("javascript:alert(1)", E::Scheme),
            ("file:///etc/passwd", E::Scheme),
            ("httpx://example.com", E::Scheme),
            (" https ://example.com", E::InvalidCharacter),
            ("https://user:pass@example.com/", E::Credentials),
            ("https://user@example.com/", E::Credentials),
            ("https://@example.com/", E::Credentials),
            ("https://a:b@127.0.0.1:80@example.com/", E::Credentials),
            ("https://", E::MissingHost),
            ("https:///path", E::MissingHost),
            ("https://?x=1", E::MissingHost),
            ("https://:443/", E::MissingHost),
            (
                "https://example.com:0/",
                E::InvalidPort { port: "0".into() },
            ),
            (
                "https://example.com:65536/",
                E::InvalidPort {
                    port: "65536".into(),
                },
            ),
            (
                "https://example.com:000000/",
                E::InvalidPort {
                    port: "000000".into(),
                },
            ),
            (
                "https://example.com:99999999999999999999999/",
                E::InvalidPort {
                    port: "99999999999999999999999".into(),
                },
            ),
            ("https://example.com:/", E::InvalidPort { port: "".into() }),
            (
                "https://example.com:+80/",
                E::InvalidPort { port: "+80".into() },
            ),
            (
                "https://example.com:-1/",
                E::InvalidPort { port: "-1".into() },
            ),
            (
                "https://example.com:80a/",
                E::InvalidPort { port: "80a".into() },
            ),
            ("http://[::1]:/", E::InvalidPort { port: "".into() }),
            (
                "http://[::1]:99999/",
                E::InvalidPort {
                    port: "99999".into(),
                },
            ),
        ];
        for (input, expected) in &cases {
            assert_eq!(
                EndpointUrl::parse(input, false).as_ref(),
                Err(expected),
                "{input:?}"
            );
        }

        let bad_hosts = [
            // IPv4 shorthand the HTTP client would read as an address.
            "http://127.1/",
            "http://0x7f.0.0.1/",
            "http://0x7f000001/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://127.0.0.01/",
            "http://1.2.3.4.5/",
            "http://256.0.0.1/",
            "http://1.2.3/",
            "http://example.123/",
            "http://example.0x1/",
            "http://0x/",
            // Names.
            "http://-bad.com/",
            "http://bad-.com/",
            "http://a..b/",
            "http://.a/",
            "http://./",
            "http://a.b../",
            "http://ex%41mple.com/",
            "http://exa!mple.com/",
            "http://exa*mple.com/",
            "http://b\u{fc}cher.de/",
            "http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/",
            long_label.as_str(),
            long_host.as_str(),
            // IPv6.
            "http://::1/",
            "http://2001:db8::1:80/",
            "http://[::1/",
            "http://[127.0.0.1]/",
            "http://[::1]x/",
            "http://[::1]]/",
            "http://[fe80::1%25eth0]/",
            "http://[]/",
            "http://[example.com]/",
        ];
        for input in bad_hosts {
            assert!(
                bad_host(input),
                "{input:?}: {:?}",
                EndpointUrl::parse(input, false)
            );
        }
    }

    #[test]
    fn errors_explain_themselves() {
        let msg = |s: &str| EndpointUrl::parse(s, false).unwrap_err().to_string();
        assert_eq!(
            msg("ftp://x.com"),
            "url must start with http:// or https:// (or name a broker: amqp://, nats://, redis://)"
        );
        assert!(msg("https://u:p@x.com").contains("credentials in URLs leak into logs"));
        assert!(!msg("https://u:secret@x.com").contains("secret"));
        assert!(msg("https://x.com:0/").contains("1 to 65535"));
        assert!(msg("https://x.com/#a").contains("fragment"));
        assert!(msg("http://127.1/").contains("\"127.1\""));
        assert!(msg("http://::1/").contains("brackets"));
        assert_eq!(
            EndpointUrl::parse("http://x.com", true)
                .unwrap_err()
                .to_string(),
            "url must start with https:// (plain http is disabled on this server)"
        );
    }

    #[test]
    fn length_limit_is_inclusive() {
        let base = "https://example.com/";
        let at_limit = format!("{base}{}", "a".repeat(MAX_URL_LEN - base.len()));
        assert_eq!(at_limit.len(), MAX_URL_LEN);
        assert!(EndpointUrl::parse(&at_limit, false).is_ok());
        let over = format!("{at_limit}a");
        assert_eq!(
            EndpointUrl::parse(&over, false),
            Err(EndpointUrlError::TooLong {
                len: MAX_URL_LEN + 1
            })
        );
    }

    #[test]
    fn host_length_limits_are_inclusive() {
        let label63 = "a".repeat(63);
        assert!(EndpointUrl::parse(&format!("https://{label63}.com/"), false).is_ok());
        // 4 labels of 63 + 3 dots = 255; trim to exactly 253.
        let host253 = format!("{label63}.{label63}.{label63}.{}", "a".repeat(61));
        assert_eq!(host253.len(), 253);
        let url = EndpointUrl::parse(&format!("https://{host253}/"), false).unwrap();
        assert_eq!(url.host(), host253);
        // A trailing dot does not count against the limit.
        assert!(EndpointUrl::parse(&format!("https://{host253}./"), false).is_ok());
        let host254 = format!("{host253}a");
        assert!(EndpointUrl::parse(&format!("https://{host254}/"), false).is_err());
    }

    // ----- is_forbidden_ip -----

    #[test]
    fn public_addresses_are_not_forbidden() {
        for s in [
            "8.8.8.8",
            "1.1.1.1",
            "93.184.216.34",
            "1.0.0.0",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "169.253.255.255",
            "169.255.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "198.51.99.255",
            "203.0.112.255",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "2a00:1450:4001::200e",
            "2001:200::1",
            "::ffff:8.8.8.8",
            "::8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert_eq!(is_forbidden_ip(ip(s)), None, "{s}");
        }
    }

    #[test]
    fn non_public_addresses_are_forbidden_with_a_reason() {
        // (address, a word the reason must contain)
        let cases = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "this network"),
            ("0.255.255.255", "this network"),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.1", "carrier-grade NAT"),
            ("100.127.255.255", "carrier-grade NAT"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.0.1", "link-local"),
            ("169.254.169.254", "cloud metadata"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "IETF"),
            ("192.0.2.1", "documentation"),
            ("192.168.0.1", "private"),
            ("192.168.255.255", "private"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.5", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.250", "multicast"),
            ("240.0.0.1", "reserved"),
            ("254.255.255.255", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::ffff:10.1.2.3", "private"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::ffff:0:127.0.0.1", "loopback"),
            ("::127.0.0.1", "loopback"),
            ("::2", "this network"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::a00:1", "private"),
            ("64:ff9b::7f00:1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("64:ff9b:1::1", "local-use NAT64"),
            ("2002:7f00:1::", "loopback"),
            ("2002:a00:1::1", "private"),
            ("100::1", "discard"),
            ("2001::1", "Teredo"),
            ("2001:2::1", "benchmarking"),
            ("2001:10::1", "IETF"),
            ("2001:db8::1", "documentation"),
            ("3fff::1", "documentation"),
            ("3fff:fff::1", "documentation"),
            ("fc00::1", "private"),
            ("fd12:3456::1", "private"),
            ("fd00:ec2::254", "private"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("ff0e::1", "multicast"),
            ("::1:0:0:0", "reserved"),
            ("4000::1", "reserved"),
            ("e000::1", "reserved"),
        ];
        for (s, word) in cases {
            let reason =
                is_forbidden_ip(ip(s)).unwrap_or_else(|| panic!("{s} should be forbidden"));
            assert!(
                reason.contains(word),
                "{s}: {reason:?} should mention {word:?}"
            );
        }
    }

    #[test]
    fn embedded_ipv4_gets_the_ipv4_verdict() {
        for (v6, v4) in [
            ("::ffff:127.0.0.1", "127.0.0.1"),
            ("64:ff9b::c000:0201", "192.0.2.1"),
            ("2002:c0a8:0101::1", "192.168.1.1"),
            ("::ffff:0:172.16.0.1", "172.16.0.1"),
        ] {
            assert_eq!(is_forbidden_ip(ip(v6)), is_forbidden_ip(ip(v4)), "{v6}");
        }
    }

    // ----- AllowList -----

    #[test]
    fn allow_list_parses_and_matches() {
        let list = AllowList::parse("127.0.0.0/8, ::1/128,10.0.0.0/8").unwrap();
        assert_eq!(list.networks().len(), 3);
        assert_eq!(list.to_string(), "127.0.0.0/8, ::1/128, 10.0.0.0/8");
        let cases = [
            ("127.0.0.1", true),
            ("127.255.255.255", true),
            ("128.0.0.0", false),
            ("126.255.255.255", false),
            ("::1", true),
            ("::2", false),
            ("10.0.0.0", true),
            ("10.255.0.1", true),
            ("11.0.0.1", false),
            ("9.255.255.255", false),
            ("192.168.1.1", false),
            ("::ffff:127.0.0.1", true),
            ("::ffff:10.9.8.7", true),
            ("::ffff:11.0.0.1", false),
            ("64:ff9b::a00:1", true),
            ("2002:a00:1::", true),
            ("fe80::1", false),
        ];
        for (s, expected) in cases {
            assert_eq!(list.contains(ip(s)), expected, "{s}");
        }
    }

    #[test]
    fn allow_list_edge_forms() {
        let empty = AllowList::parse("").unwrap();
        assert!(empty.is_empty());
        assert!(!empty.contains(ip("127.0.0.1")));
        assert!(AllowList::parse("  ").unwrap().is_empty());
        assert_eq!(
            AllowList::parse(" 10.0.0.0/8 , ").unwrap().networks().len(),
            1
        );
        assert_eq!(" ::1 ".parse::<AllowList>().unwrap().to_string(), "::1/128");

        // A bare address is that address only.
        let one = AllowList::parse("192.168.1.10").unwrap();
        assert_eq!(one.to_string(), "192.168.1.10/32");
        assert!(one.contains(ip("192.168.1.10")));
        assert!(!one.contains(ip("192.168.1.11")));

        // Host bits are cleared.
        assert_eq!(
            AllowList::parse("10.1.2.3/8").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(
            AllowList::parse("fd12::1/16").unwrap().to_string(),
            "fd12::/16"
        );

        // Prefix 0 matches its whole family and nothing else.
        let all_v4 = AllowList::parse("0.0.0.0/0").unwrap();
        assert!(all_v4.contains(ip("0.0.0.0")));
        assert!(all_v4.contains(ip("255.255.255.255")));
        assert!(all_v4.contains(ip("::ffff:1.2.3.4")));
        assert!(!all_v4.contains(ip("2001:db8::1")));
        let all_v6 = AllowList::parse("::/0").unwrap();
        assert!(all_v6.contains(ip("::")));
        assert!(all_v6.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!all_v6.contains(ip("127.0.0.1")));
        assert!(!all_v6.contains(ip("::ffff:127.0.0.1")));

        // An IPv4-mapped network is an IPv4 network.
        let mapped = AllowList::parse("::ffff:10.0.0.0/104").unwrap();
        assert_eq!(mapped.to_string(), "10.0.0.0/8");
        assert!(mapped.contains(ip("10.1.1.1")));
        assert!(mapped.contains(ip("::ffff:10.1.1.1")));

        // An IPv6 network covers NAT64 addresses directly too.
        let nat64 = AllowList::parse("64:ff9b::/96").unwrap();
        assert!(nat64.contains(ip("64:ff9b::a00:1")));
        assert!(!nat64.contains(ip("10.0.0.1")));
    }

    #[test]
    fn allow_list_errors_name_the_entry() {
        for (input, entry) in [
            ("banana", "banana"),
            ("10.0.0.0/8, banana", "banana"),
            ("10.0.0.0/33", "10.0.0.0/33"),
            ("::/129", "::/129"),
            ("10.0.0.0/", "10.0.0.0/"),
            ("10.0.0.0/-1", "10.0.0.0/-1"),
            ("10.0.0.0/+8", "10.0.0.0/+8"),
            ("10.0.0.0/256", "10.0.0.0/256"),
            ("10.0.0.0/8/9", "10.0.0.0/8/9"),
            ("10.0.0.0 /8", "10.0.0.0 /8"),
            ("10.0.0.0/8 ::1/128", "10.0.0.0/8 ::1/128"),
            ("[::1]/128", "[::1]/128"),
            ("127.1/8", "127.1/8"),
            ("/8", "/8"),
        ] {
            let err = AllowList::parse(input).unwrap_err();
            assert_eq!(err.entry, entry, "{input:?}");
            assert!(err.to_string().contains(&format!("{entry:?}")), "{err}");
        }
        assert!(
            AllowList::parse("1.2.3.4/40")
                .unwrap_err()
                .to_string()
                .contains("0 to 32")
        );
        assert!(
            AllowList::parse("::/200")
                .unwrap_err()
                .to_string()
                .contains("0 to 128")
        );
    }

    // ----- check_destination -----

    #[test]
    fn check_destination_verdicts() {
        let empty = AllowList::default();
        let local = AllowList::parse("127.0.0.0/8,::1/128").unwrap();
        let err = check_destination(ip("127.0.0.1"), &empty).unwrap_err();
        assert_eq!(err.ip, ip("127.0.0.1"));
        assert_eq!(
            err.to_string(),
            "destination 127.0.0.1 is a loopback address; hookd reaches it only where the \
             operator granted that network to your account"
        );
        let cases = [
            ("127.0.0.1", &empty, false),
            ("127.0.0.1", &local, true),
            ("::1", &empty, false),
            ("::1", &local, true),
            ("::ffff:127.0.0.1", &local, true),
            ("10.0.0.1", &local, false),
            ("169.254.169.254", &local, false),
            ("93.184.216.34", &empty, true),
            ("93.184.216.34", &local, true),
            ("2606:4700:4700::1111", &empty, true),
        ];
        for (s, allow, ok) in cases {
            assert_eq!(
                check_destination(ip(s), allow).is_ok(),
                ok,
                "{s} with {allow}"
            );
        }
        let metadata = check_destination(ip("169.254.169.254"), &local).unwrap_err();
        assert!(metadata.to_string().contains("link-local"));
    }

    // ----- properties -----

    fn naive_prefix_match(a: u128, b: u128, bits: u32, prefix: u32) -> bool {
        (0..prefix).all(|i| {
            let shift = bits - 1 - i;
            (a >> shift) & 1 == (b >> shift) & 1
        })
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,80}", https_only in any::<bool>()) {
            let _ = EndpointUrl::parse(&s, https_only);
        }

        #[test]
        fn parse_never_panics_on_url_like_input(
            s in "(?i:https?)://[a-zA-Z0-9.:\\[\\]@%_\\-]{0,40}[/?]?[ -~]{0,20}",
            https_only in any::<bool>(),
        ) {
            if let Ok(url) = EndpointUrl::parse(&s, https_only) {
                // Whatever is accepted re-parses to itself.
                prop_assert_eq!(EndpointUrl::parse(url.as_str(), https_only), Ok(url.clone()));
                prop_assert!(url.as_str().len() <= MAX_URL_LEN);
            }
        }

        #[test]
        fn well_formed_urls_round_trip(
            host in "[a-z]([a-z0-9_-]{0,8}[a-z0-9])?(\\.[a-z]{2,6}){0,3}",
            port in proptest::option::of(1u16..),
            path in "(/[a-zA-Z0-9._~%!$&'()*+,;=:@-]{0,12}){0,3}(\\?[a-zA-Z0-9=&%/?]{0,12})?",
            https in any::<bool>(),
        ) {
            let scheme = if https { "https" } else { "http" };
            let port_part = port.map(|p| format!(":{p}")).unwrap_or_default();
            let input = format!("{scheme}://{host}{port_part}{path}");
            let url = EndpointUrl::parse(&input, false).unwrap();
            prop_assert_eq!(url.as_str(), input.as_str());
            prop_assert_eq!(url.host(), host.as_str());
            prop_assert_eq!(url.path_and_query(), path.as_str());
            prop_assert_eq!(url.port(), port.unwrap_or(if https { 443 } else { 80 }));
            prop_assert_eq!(url.host_ip(), None);
        }

        #[test]
        fn ip_literals_parse_to_their_address(addr in any::<IpAddr>()) {
            let input = match addr {
                IpAddr::V4(v4) => format!("http://{v4}/"),
                IpAddr::V6(v6) => format!("http://[{v6}]/"),
            };
            let url = EndpointUrl::parse(&input, false).unwrap();
            prop_assert_eq!(url.host_ip(), Some(addr));
            prop_assert_eq!(url.host(), addr.to_string());
        }

        #[test]
        fn mapped_v6_gets_the_v4_verdict(bits in any::<u32>()) {
            let v4 = Ipv4Addr::from(bits);
            let mapped = IpAddr::V6(v4.to_ipv6_mapped());
            prop_assert_eq!(is_forbidden_ip(IpAddr::V4(v4)), is_forbidden_ip(mapped));
            for allow in ["", "127.0.0.0/8, 10.0.0.0/8", "0.0.0.0/0", "::/0", "::ffff:0:0/96"] {
                let allow = AllowList::parse(allow).unwrap();
                prop_assert_eq!(
                    check_destination(IpAddr::V4(v4), &allow).is_ok(),
                    check_destination(mapped, &allow).is_ok(),
                    "{} with {}", v4, allow
                );
            }
        }

        #[test]
        fn nat64_and_6to4_get_the_v4_verdict(bits in any::<u32>(), low in any::<u16>()) {
            let v4 = Ipv4Addr::from(bits);
            let nat64 = Ipv6Addr::from((0x64_ff9b_u128 << 96) | u128::from(bits));
            let six_to_four = Ipv6Addr::from(
                (0x2002_u128 << 112) | (u128::from(bits) << 80) | u128::from(low),
            );
            let v4_verdict = is_forbidden_ip(IpAddr::V4(v4));
            prop_assert_eq!(is_forbidden_ip(IpAddr::V6(nat64)), v4_verdict);
            prop_assert_eq!(is_forbidden_ip(IpAddr::V6(six_to_four)), v4_verdict);
        }

        #[test]
        fn v4_networks_match_like_a_bitwise_reference(
            addr in any::<u32>(), net in any::<u32>(), prefix in 0u8..=32,
        ) {
            let list = AllowList::parse(&format!("{}/{prefix}", Ipv4Addr::from(net))).unwrap();
            let expected =
                naive_prefix_match(u128::from(addr), u128::from(net), 32, u32::from(prefix));
            prop_assert_eq!(list.contains(IpAddr::V4(Ipv4Addr::from(addr))), expected);
        }

        #[test]
        fn v6_networks_match_like_a_bitwise_reference(
            addr in any::<u128>(), net in any::<u128>(), prefix in 0u8..=128,
        ) {
            // Keep the network out of ::ffff:0:0/96 so it stays an IPv6 network.
            let net = net | (1 << 127);
            let addr = addr | (1 << 127);
            let list = AllowList::parse(&format!("{}/{prefix}", Ipv6Addr::from(net))).unwrap();
            let expected = naive_prefix_match(addr, net, 128, u32::from(prefix));
            prop_assert_eq!(list.contains(IpAddr::V6(Ipv6Addr::from(addr))), expected);
        }
    }
}
