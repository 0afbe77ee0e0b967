//! The `Authorization` an endpoint's attempts carry (`domain::endpoint_auth`): bearer and basic
//! as configured; OAuth access tokens fetched with the client-credentials grant, cached per
//! endpoint until shortly before they expire and shared by every sending task of the process
//! (one fetch at a time per endpoint). A token endpoint that fails is an attempt error of its
//! own kind (`auth`), retried like a network error; nothing is sent to the endpoint without
//! its token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::delivery::ErrorKind;
use domain::egress::Egress;
use domain::endpoint_auth::{EndpointAuth, OAuthClient, parse_token_response};
use domain::endpoint_url::EndpointUrl;
use domain::ids::EndpointId;

/// The most of a token endpoint's answer read.
const MAX_TOKEN_ANSWER: usize = 64 * 1024;
/// How long a token without `expires_in` is used.
const DEFAULT_LIFE: Duration = Duration::from_secs(60);
/// Endpoints whose tokens are kept before idle ones are forgotten.
const MAX_CACHED: usize = 10_000;

struct Cached {
    /// The configuration it was got with: another one fetches anew.
    config: OAuthClient,
    authorization: String,
    good_until: Instant,
}

type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// The process's OAuth tokens, one slot per endpoint.
pub struct Tokens {
    slots: std::sync::Mutex<HashMap<EndpointId, Slot>>,
    https_only: bool,
}

impl Tokens {
    /// Token URLs are held to the endpoints' rules: the SSRF guard (the tenant's egress) and
    /// `https_only`.
    pub fn new(https_only: bool) -> Tokens {
        Tokens {
            slots: Default::default(),
            https_only,
        }
    }

    fn slot(&self, endpoint: EndpointId) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        if slots.len() >= MAX_CACHED && !slots.contains_key(&endpoint) {
            // Forget the slots no task holds; their endpoints fetch again when next sent to.
            slots.retain(|_, s| Arc::strong_count(s) > 1);
        }
        slots.entry(endpoint).or_default().clone()
    }

    /// The `Authorization` value for an attempt to `endpoint`, or why there is none.
    pub async fn authorization(
        &self,
        client: &reqwest::Client,
        egress: &Egress,
        endpoint: EndpointId,
        auth: &EndpointAuth,
        timeout: Duration,
    ) -> Result<String, (ErrorKind, String)> {
        let oauth = match auth {
            EndpointAuth::OAuth(c) => c,
            fixed => return Ok(fixed.fixed_authorization().expect("bearer or basic")),
        };
        let slot = self.slot(endpoint);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref()
            && c.config == *oauth
            && c.good_until > Instant::now()
        {
            return Ok(c.authorization.clone());
        }
        let (authorization, life) = self.fetch(client, egress, oauth, timeout).await?;
        // Renewed a little before it expires (a tenth of its life, at most 30 s), so a request
        // never leaves with a token about to lapse.
        let margin = (life / 10).min(Duration::from_secs(30));
        *cached = Some(Cached {
            config: oauth.clone(),
            authorization: authorization.clone(),
            good_until: Instant::now() + life - margin,
        });
        Ok(authorization)
    }

    /// Drops `endpoint`'s token (its receiver refused it): the next attempt fetches a new one.
    pub fn forget(&self, endpoint: EndpointId) {
        let slot = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&endpoint)
            .cloned();
        if let Some(slot) = slot
            && let Ok(mut cached) = slot.try_lock()
        {
            *cached = None;
        }
    }

    async fn fetch(
        &self,
        client: &reqwest::Client,
        egress: &Egress,
        c: &OAuthClient,
        timeout: Duration,
    ) -> Result<(String, Duration), (ErrorKind, String)> {
        let fail = |why: String| (ErrorKind::Auth, format!("OAuth token endpoint: {why}"));
        let url =
            EndpointUrl::parse(&c.token_url, self.https_only).map_err(|e| fail(e.to_string()))?;
        if let Some(ip) = url.host_ip() {
            egress
                .admit(url.host(), ip)
                .map_err(|e| fail(e.to_string()))?;
        }
        let (form, basic) = c.token_request();
        let mut req = client
            .post(url.as_str())
            .timeout(timeout)
            .header("accept", "application/json")
            .form(&form);
        if let Some(b) = basic {
            req = req.header("authorization", b);
        }
        let mut resp = req
            .send()
            .await
            .map_err(|e| fail(crate::send::error_text(&e)))?;
        let status = resp.status();
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| fail(crate::send::error_text(&e)))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_TOKEN_ANSWER {
                return Err(fail(format!(
                    "its answer is larger than {MAX_TOKEN_ANSWER} bytes"
                )));
            }
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&body);
            let excerpt: String = text.chars().take(200).collect();
            return Err(fail(format!("it answered {}: {excerpt}", status.as_u16())));
        }
        let token = parse_token_response(&body).map_err(fail)?;
        let life = token
            .expires_in
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_LIFE)
            .min(Duration::from_secs(86_400));
        Ok((format!("Bearer {}", token.token), life))
    }
}
