//! The I/O half of the SSRF guard: resolve an endpoint's host and refuse it if any address it
//! resolves to is forbidden. The rules themselves are pure and live in `domain::endpoint_url`.
//!
//! Checked when an endpoint is created or updated, and again by the dispatcher before each
//! delivery (DNS answers change). The dispatcher should connect only to the addresses returned
//! here, so a name cannot pass the check and then resolve elsewhere for the connection.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use domain::egress::Egress;
use domain::endpoint_url::{EndpointUrl, ForbiddenDestination};

/// getaddrinfo can wait through every retry of every configured resolver; an API request or a
/// delivery should not.
const DNS_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SsrfError {
    /// The host did not resolve, or resolved to no address.
    Unresolvable { host: String, detail: String },
    /// The host is, or resolves to, an address the guard refuses.
    Forbidden(ForbiddenDestination),
    /// A broker the tenant shares with others, at a name outside the tenant's namespace.
    OutsideNamespace(String),
}

impl fmt::Display for SsrfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SsrfError::Unresolvable { host, detail } => {
                write!(f, "cannot resolve host {host:?}: {detail}")
            }
            SsrfError::Forbidden(forbidden) => forbidden.fmt(f),
            SsrfError::OutsideNamespace(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SsrfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SsrfError::Unresolvable { .. } | SsrfError::OutsideNamespace(_) => None,
            SsrfError::Forbidden(forbidden) => Some(forbidden),
        }
    }
}

impl From<ForbiddenDestination> for SsrfError {
    fn from(forbidden: ForbiddenDestination) -> Self {
        SsrfError::Forbidden(forbidden)
    }
}

/// Resolves `url`'s host (an IP literal is used as is) and returns every address with the
/// URL's port, or refuses the URL if *any* address is one `egress` does not open, or (a
/// broker) lies outside the namespace of the grant that opens it.
///
/// Refusing rather than dropping the bad addresses means a DNS answer that mixes a public
/// address with, say, 127.0.0.1 never gets through, whichever address a client would pick.
pub async fn resolve_and_check(
    url: &EndpointUrl,
    egress: &Egress,
) -> Result<Vec<SocketAddr>, SsrfError> {
    let port = url.port();
    let addrs = match url.host_ip() {
        Some(ip) => vec![SocketAddr::new(ip, port)],
        None => resolve(url.host(), port).await?,
    };
    check_all(url, addrs, egress)
}

async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, SsrfError> {
    let unresolvable = |detail: String| SsrfError::Unresolvable {
        host: host.to_owned(),
        detail,
    };
    let found = tokio::time::timeout(DNS_TIMEOUT, tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| {
            unresolvable(format!(
                "DNS lookup timed out after {}s",
                DNS_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| unresolvable(e.to_string()))?;
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for addr in found {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    if addrs.is_empty() {
        return Err(unresolvable("DNS returned no addresses".to_owned()));
    }
    Ok(addrs)
}

/// All addresses pass or none do; a broker's destination must lie in the namespace of the
/// grant that opens it.
fn check_all(
    url: &EndpointUrl,
    addrs: Vec<SocketAddr>,
    egress: &Egress,
) -> Result<Vec<SocketAddr>, SsrfError> {
    for addr in &addrs {
        egress.admit(url.host(), addr.ip())?;
    }
    if let Some(dest) = url.destination() {
        egress
            .admit_broker(url.host(), addrs.iter().map(|a| a.ip()), dest)
            .map_err(SsrfError::OutsideNamespace)?;
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::endpoint_url::AllowList;
    use std::net::IpAddr;

    fn url(s: &str) -> EndpointUrl {
        EndpointUrl::parse(s, false).unwrap()
    }

    fn allow(s: &str) -> Egress {
        Egress::new(AllowList::parse(s).unwrap(), vec![])
    }

    #[tokio::test]
    async fn localhost_is_refused_by_default() {
        let err = resolve_and_check(&url("http://localhost:8080/hook"), &Egress::public_only())
            .await
            .unwrap_err();
        match err {
            SsrfError::Forbidden(f) => {
                assert!(f.ip.is_loopback(), "{f}");
                assert!(f.to_string().contains("loopback"), "{f}");
                assert!(f.to_string().contains("granted"), "{f}");
            }
            other => panic!("expected Forbidden, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn localhost_is_allowed_when_loopback_is_allowed() {
        // localhost may resolve to 127.0.0.1, ::1 or both; all must be allowed.
        let addrs = resolve_and_check(
            &url("http://localhost:8080/hook"),
            &allow("127.0.0.0/8, ::1/128"),
        )
        .await
        .unwrap();
        assert!(!addrs.is_empty());
        for addr in &addrs {
            assert!(addr.ip().is_loopback(), "{addr}");
            assert_eq!(addr.port(), 8080);
        }
    }

    #[tokio::test]
    async fn allowing_only_ipv4_loopback_refuses_an_ipv6_answer() {
        // Where localhost also resolves to ::1, that answer alone refuses the URL.
        match resolve_and_check(&url("http://localhost/"), &allow("127.0.0.0/8")).await {
            Ok(addrs) => assert!(addrs.iter().all(|a| a.ip().is_ipv4()), "{addrs:?}"),
            Err(SsrfError::Forbidden(f)) => assert_eq!(f.ip, "::1".parse::<IpAddr>().unwrap()),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn ip_literals_are_judged_without_dns() {
        let none = Egress::public_only();
        let cases = [
            ("http://10.1.2.3/", false),
            ("https://203.0.113.5/", false),
            ("http://169.254.169.254/latest/meta-data/", false),
            ("http://[::1]:9000/", false),
            ("http://[::ffff:127.0.0.1]/", false),
            ("http://[fd00::1]/", false),
            ("https://93.184.216.34/hook", true),
            ("http://[2606:4700:4700::1111]/", true),
        ];
        for (input, ok) in cases {
            let result = resolve_and_check(&url(input), &none).await;
            assert_eq!(result.is_ok(), ok, "{input}: {result:?}");
            if let Err(err) = result {
                assert!(matches!(err, SsrfError::Forbidden(_)), "{input}: {err:?}");
            }
        }
    }

    #[tokio::test]
    async fn a_public_literal_returns_its_address_and_port() {
        let addrs = resolve_and_check(&url("https://93.184.216.34/hook"), &Egress::public_only())
            .await
            .unwrap();
        assert_eq!(addrs, vec!["93.184.216.34:443".parse().unwrap()]);
        let addrs = resolve_and_check(&url("http://[2606:4700::1]:8443/"), &Egress::public_only())
            .await
            .unwrap();
        assert_eq!(addrs, vec!["[2606:4700::1]:8443".parse().unwrap()]);
    }

    #[tokio::test]
    async fn the_allow_list_admits_private_literals() {
        let addrs = resolve_and_check(&url("http://10.1.2.3:8080/"), &allow("10.0.0.0/8"))
            .await
            .unwrap();
        assert_eq!(addrs, vec!["10.1.2.3:8080".parse().unwrap()]);
        let err = resolve_and_check(&url("http://10.1.2.3/"), &allow("10.2.0.0/16"))
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "destination 10.1.2.3 is a private address (RFC 1918); hookd reaches it only \
             where the operator granted that network to your account"
        );
    }

    #[tokio::test]
    async fn a_name_that_does_not_resolve_is_unresolvable() {
        let err = resolve_and_check(
            &url("https://nonexistent.invalid/hook"),
            &Egress::public_only(),
        )
        .await
        .unwrap_err();
        match &err {
            SsrfError::Unresolvable { host, detail } => {
                assert_eq!(host, "nonexistent.invalid");
                assert!(!detail.is_empty());
            }
            other => panic!("expected Unresolvable, got {other:?}"),
        }
        assert!(
            err.to_string()
                .starts_with("cannot resolve host \"nonexistent.invalid\"")
        );
    }

    #[test]
    fn one_forbidden_address_refuses_a_mixed_answer() {
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        let private: SocketAddr = "10.0.0.1:443".parse().unwrap();
        let none = Egress::public_only();
        for addrs in [vec![public, private], vec![private, public]] {
            let err = check_all(&url("https://example.com/"), addrs, &none).unwrap_err();
            assert_eq!(
                err,
                SsrfError::Forbidden(ForbiddenDestination {
                    ip: private.ip(),
                    reason: "a private address (RFC 1918)",
                })
            );
        }
        assert_eq!(
            check_all(
                &url("https://example.com/"),
                vec![public, private],
                &allow("10.0.0.0/8")
            ),
            Ok(vec![public, private])
        );
        assert_eq!(
            check_all(&url("https://example.com/"), vec![public], &none),
            Ok(vec![public])
        );
    }
}
