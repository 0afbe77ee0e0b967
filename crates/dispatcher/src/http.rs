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
    granted: Mutex<HashMap<Egress, reqwest::Client>>,
}

impl Clients {
    /// `server`: the egress of a tenant without grants (public addresses and the server-wide
    /// list).
    pub fn new(server: Egress, proxy: Option<String>) -> reqwest::Result<Clients> {
        Ok(Clients {
            shared: build_client(server, proxy.as_deref())?,
            proxy,
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
        let client =
            build_client(egress.clone(), self.proxy.as_deref()).map_err(|e| e.to_string())?;
        if granted.len() >= MAX_CLIENTS {
            granted.clear();
        }
        granted.insert(egress.clone(), client.clone());
        Ok(client)
    }
}

pub fn build_client(egress: Egress, proxy: Option<&str>) -> reqwest::Result<reqwest::Client> {
    builder(egress, proxy)?.build()
}

fn builder(egress: Egress, proxy: Option<&str>) -> reqwest::Result<reqwest::ClientBuilder> {
    let builder = match proxy {
        Some(url) => reqwest::Client::builder().proxy(reqwest::Proxy::all(url)?),
        None => reqwest::Client::builder().no_proxy(),
    };
    Ok(builder
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(256)
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
    clients: Mutex<HashMap<(Mtls, Egress), reqwest::Client>>,
}

impl MtlsClients {
    pub fn new(proxy: Option<String>) -> Self {
        MtlsClients {
            proxy,
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
        let mut b = builder(egress.clone(), self.proxy.as_deref())
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
