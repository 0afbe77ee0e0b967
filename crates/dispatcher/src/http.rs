//! The HTTP client: pooled, no redirects, and a resolver that applies the SSRF guard to every
//! address a name resolves to, at connect time. Proxies come only from `delivery_proxy`: the
//! environment's `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` would take the guard out of the
//! path (the proxy, not hookd, would resolve the endpoint's name).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
    let builder = match proxy {
        Some(url) => reqwest::Client::builder().proxy(reqwest::Proxy::all(url)?),
        None => reqwest::Client::builder().no_proxy(),
    };
    builder
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(256)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_nodelay(true)
        .user_agent(concat!("hookd/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(GuardedResolver { allow }))
        .build()
}
