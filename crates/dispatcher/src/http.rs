//! The HTTP client: pooled, no redirects, and a resolver that applies the SSRF guard to every
//! address a name resolves to, at connect time. Proxies come only from `delivery_proxy`: the
//! environment's `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` would take the guard out of the
//! path (the proxy, not hookd, would resolve the endpoint's name).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use domain::endpoint_auth::Mtls;
use domain::endpoint_url::{AllowList, check_destination};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

struct GuardedResolver {
    allow: AllowList,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            for a in &addrs {
                check_destination(a.ip(), &allow)?;
            }
            let addrs: Addrs = Box::new(addrs.into_iter());
            Ok(addrs)
        })
    }
}

pub fn build_client(allow: AllowList, proxy: Option<&str>) -> reqwest::Result<reqwest::Client> {
    builder(allow, proxy)?.build()
}

fn builder(allow: AllowList, proxy: Option<&str>) -> reqwest::Result<reqwest::ClientBuilder> {
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
        .dns_resolver(Arc::new(GuardedResolver { allow })))
}

/// Clients for endpoints with mutual TLS: the same guard and settings as the shared client,
/// plus the endpoint's identity and any CA of its receiver; one per distinct configuration,
/// kept while used (at most [`MAX_MTLS_CLIENTS`]; beyond that the cache starts over).
pub struct MtlsClients {
    allow: AllowList,
    proxy: Option<String>,
    clients: std::sync::Mutex<std::collections::HashMap<Mtls, reqwest::Client>>,
}

pub const MAX_MTLS_CLIENTS: usize = 1_000;

impl MtlsClients {
    pub fn new(allow: AllowList, proxy: Option<String>) -> Self {
        MtlsClients {
            allow,
            proxy,
            clients: Default::default(),
        }
    }

    /// The client for `mtls`, built on first use; the error says why it cannot be built.
    pub fn client(&self, mtls: &Mtls) -> Result<reqwest::Client, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(mtls) {
            return Ok(c.clone());
        }
        let identity = reqwest::Identity::from_pem(mtls.identity.as_bytes())
            .map_err(|e| format!("the endpoint's client certificate cannot be used: {e}"))?;
        let mut b = builder(self.allow.clone(), self.proxy.as_deref())
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
        if clients.len() >= MAX_MTLS_CLIENTS {
            clients.clear();
        }
        clients.insert(mtls.clone(), client.clone());
        Ok(client)
    }
}
