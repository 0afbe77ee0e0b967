//! The HTTP clients: pooled, no redirects, and a resolver that applies the SSRF guard to every
//! address a name resolves to, at connect time. Proxies come only from `delivery_proxy`: the
//! environment's `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` would take the guard out of the
//! path (the proxy, not hookd, would resolve the endpoint's name).
//!
//! A client's guard is one tenant's egress (see `domain::egress`): tenants without grants share
//! one client that reaches public addresses and the server-wide list; a tenant with grants gets
//! a client of its own, so no connection it opened into a granted network is ever pooled for a
//! tenant without that grant.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use domain::egress::Egress;
use domain::endpoint_auth::Mtls;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

struct GuardedResolver {
    egress: Egress,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let egress = self.egress.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for a in &addrs {
                egress.admit(&host, a.ip())?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

/// Most clients kept for tenants with grants, and for mTLS endpoints; beyond that the cache
/// starts over.
pub const MAX_CLIENTS: usize = 1_000;

/// The shared client and one per egress with grants.
pub struct Clients {
    shared: reqwest::Client,
    proxy: Option<String>,
    idle: usize,
    granted: Mutex<HashMap<Egress, reqwest::Client>>,
}

impl Clients {
    /// `server`: the egress of a tenant without grants (public addresses and the server-wide
    /// list); `idle`: the idle connections each client keeps per host (see [`builder`]).
    pub fn new(server: Egress, proxy: Option<String>, idle: usize) -> reqwest::Result<Clients> {
        Ok(Clients {
            shared: build_client(server, proxy.as_deref(), idle)?,
            proxy,
            idle,
            granted: Default::default(),
        })
    }

    /// The client whose guard is `egress`.
    pub fn client(&self, egress: &Egress) -> Result<reqwest::Client, String> {
        if egress.grants().is_empty() {
            return Ok(self.shared.clone());
        }
        let mut granted = self.granted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = granted.get(egress) {
            return Ok(c.clone());
        }
        let client = build_client(egress.clone(), self.proxy.as_deref(), self.idle)
            .map_err(|e| e.to_string())?;
        if granted.len() >= MAX_CLIENTS {
            granted.clear();
        }
        granted.insert(egress.clone(), client.clone());
        Ok(client)
    }
}

pub fn build_client(
    egress: Egress,
    proxy: Option<&str>,
    idle: usize,
) -> reqwest::Result<reqwest::Client> {
    builder(egress, proxy, idle)?.build()
}

/// A client's settings. `idle` connections are kept per host: the dispatcher passes its most
/// requests in flight (`delivery_max_in_flight`), so that every connection it opened for a burst
/// to one host is there for the next (a connection is only opened for a request in flight, so
/// that bounds them too). At 256, a fan-out to 1,000 endpoints on one host (1,024 requests in
/// flight) closed and opened again a connection for one delivery in 30: 3,381 TCP connections
/// for 100,000 deliveries in `hookd bench --endpoints 1000 --messages 100`, 44 at one endpoint.
fn builder(
    egress: Egress,
    proxy: Option<&str>,
    idle: usize,
) -> reqwest::Result<reqwest::ClientBuilder> {
    let builder = match proxy {
        Some(url) => reqwest::Client::builder().proxy(reqwest::Proxy::all(url)?),
        None => reqwest::Client::builder().no_proxy(),
    };
    Ok(builder
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(idle)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .user_agent(concat!("hookd/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(GuardedResolver { egress })))
}

/// Clients for endpoints with mutual TLS: the same guard (the tenant's egress) and settings
/// as the shared client, plus the endpoint's identity and any CA of its receiver; one per
/// distinct configuration, kept while used (at most [`MAX_CLIENTS`]).
pub struct MtlsClients {
    proxy: Option<String>,
    idle: usize,
    clients: Mutex<HashMap<(Mtls, Egress), reqwest::Client>>,
}

impl MtlsClients {
    /// `idle`: as for [`Clients::new`].
    pub fn new(proxy: Option<String>, idle: usize) -> Self {
        MtlsClients {
            proxy,
            idle,
            clients: Default::default(),
        }
    }

    /// The client for `mtls` under `egress`, built on first use; the error says why it cannot
    /// be built.
    pub fn client(&self, mtls: &Mtls, egress: &Egress) -> Result<reqwest::Client, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let key = (mtls.clone(), egress.clone());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let identity = reqwest::Identity::from_pem(mtls.identity.as_bytes())
            .map_err(|e| format!("the endpoint's client certificate cannot be used: {e}"))?;
        let mut b = builder(egress.clone(), self.proxy.as_deref(), self.idle)
            .map_err(|e| e.to_string())?
            .identity(identity);
        if let Some(ca) = &mtls.server_ca_cert {
            let certs = reqwest::Certificate::from_pem_bundle(ca.as_bytes())
                .map_err(|e| format!("the endpoint's serverCaCert cannot be used: {e}"))?;
            for c in certs {
                b = b.add_root_certificate(c);
            }
        }
        let client = b.build().map_err(|e| e.to_string())?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::endpoint_url::AllowList;

    /// A receiver on 127.0.0.1 that holds each request until `burst` are waiting, then answers
    /// them all (keep-alive); returns its address and a count of the connections it accepted.
    async fn receiver(burst: usize) -> (SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let barrier = Arc::new(tokio::sync::Barrier::new(burst));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut seen = Vec::new();
                    loop {
                        if stream.readable().await.is_err() {
                            return;
                        }
                        match stream.try_read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                            Err(_) => return,
                        }
                        // One request without a body per round: answer once its head is in.
                        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            seen.clear();
                            barrier.wait().await;
                            let answer = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
                            if stream.writable().await.is_err() || stream.try_write(answer).is_err()
                            {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    /// A burst of as many requests to one host as may be in flight leaves its connections
    /// pooled for the next burst: a fan-out to many endpoints of one receiver does not open a
    /// connection again for each request above a fixed idle cap (it was 256).
    #[tokio::test]
    async fn a_burst_to_one_host_reuses_every_connection_of_the_one_before() {
        const IN_FLIGHT: usize = 300;
        let (addr, accepted) = receiver(IN_FLIGHT).await;
        let egress = Egress::new(AllowList::parse("127.0.0.0/8").unwrap(), Vec::new());
        let client = build_client(egress, None, IN_FLIGHT).unwrap();
        for round in 0..2 {
            let mut requests = tokio::task::JoinSet::new();
            for i in 0..IN_FLIGHT {
                let client = client.clone();
                requests.spawn(async move {
                    client
                        .get(format!("http://{addr}/endpoint/{i}"))
                        .send()
                        .await
                        .map(|r| r.status())
                });
            }
            while let Some(status) = requests.join_next().await {
                let status = status.unwrap().unwrap();
                assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "round {round}");
            }
        }
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            IN_FLIGHT,
            "the second burst opened connections again"
        );
    }
}
