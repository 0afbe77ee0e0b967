//! The `Authorization` an endpoint's attempts carry (`domain::endpoint_auth`): bearer and basic
//! as configured; OAuth access tokens fetched with the client-credentials or refresh-token
//! grant, cached per endpoint until shortly before they expire and shared by every sending task
//! of the process (one fetch at a time per endpoint). A refresh token the token endpoint
//! replaces is used from then on and stored (sealed) in place of the old one. A token endpoint that fails is an attempt error of its
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
    /// The configuration it was got with, without its refresh token: another one fetches anew.
    config: OAuthClient,
    /// The refresh token the stored configuration had, and the newest the token endpoint gave
    /// (the one to use, while the stored one is either).
    refresh: Option<(String, String)>,
    authorization: String,
    good_until: Instant,
}

impl Cached {
    /// The refresh token to use for `oauth`: the newest given, while `oauth` still names the
    /// one this copy started from or the newest (a copy read before the rotation was stored);
    /// else the tenant set another, which stands.
    fn refresh_for(&self, oauth: &OAuthClient) -> Option<String> {
        match (&self.refresh, &oauth.refresh_token) {
            (Some((given, newest)), Some(stored))
                if self.config == without_refresh(oauth)
                    && (stored == given || stored == newest) =>
            {
                Some(newest.clone())
            }
            (_, stored) => stored.clone(),
        }
    }
}

fn without_refresh(c: &OAuthClient) -> OAuthClient {
    OAuthClient {
        refresh_token: None,
        ..c.clone()
    }
}

type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// The process's OAuth tokens, one slot per endpoint.
pub struct Tokens {
    slots: std::sync::Mutex<HashMap<EndpointId, Slot>>,
    https_only: bool,
    /// Where a replaced refresh token is stored; `None` (unit tests): in this process only.
    store: Option<store::Store>,
}

impl Tokens {
    /// Token URLs are held to the endpoints' rules: the SSRF guard (the tenant's egress) and
    /// `https_only`.
    pub fn new(https_only: bool, store: Option<store::Store>) -> Tokens {
        Tokens {
            slots: Default::default(),
            https_only,
            store,
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
        let refresh = match cached.as_ref() {
            Some(c) => c.refresh_for(oauth),
            None => oauth.refresh_token.clone(),
        };
        if let Some(c) = cached.as_ref()
            && c.config == without_refresh(oauth)
            && c.refresh.as_ref().map(|(_, newest)| newest) == refresh.as_ref()
            && c.good_until > Instant::now()
        {
            return Ok(c.authorization.clone());
        }
        let using = OAuthClient {
            refresh_token: refresh.clone(),
            ..oauth.clone()
        };
        let (authorization, life, replaced) = self.fetch(client, egress, &using, timeout).await?;
        let newest = match (refresh, replaced) {
            (Some(used), Some(new)) if new != used => {
                self.keep_refresh_token(endpoint, &used, &new).await;
                Some(new)
            }
            (used, _) => used,
        };
        // Renewed a little before it expires (a tenth of its life, at most 30 s), so a request
        // never leaves with a token about to lapse.
        let margin = (life / 10).min(Duration::from_secs(30));
        *cached = Some(Cached {
            config: without_refresh(oauth),
            refresh: oauth.refresh_token.clone().zip(newest),
            authorization: authorization.clone(),
            good_until: Instant::now() + life - margin,
        });
        Ok(authorization)
    }

    /// Stores a refresh token the token endpoint issued in place of `used`. A failure is
    /// logged: this process goes on with the new one, and the stored one may still work.
    async fn keep_refresh_token(&self, endpoint: EndpointId, used: &str, new: &str) {
        let Some(store) = &self.store else { return };
        match store
            .system()
            .replace_refresh_token(endpoint, used, new)
            .await
        {
            Ok(true) => tracing::info!(endpoint_id = %endpoint, "OAuth refresh token rotated"),
            Ok(false) => tracing::info!(
                endpoint_id = %endpoint,
                "OAuth refresh token rotated, but the endpoint's configuration changed meanwhile"
            ),
            Err(e) => tracing::warn!(
                endpoint_id = %endpoint, error = %e,
                "could not store the endpoint's new OAuth refresh token"
            ),
        }
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
    ) -> Result<(String, Duration, Option<String>), (ErrorKind, String)> {
        let fail = |why: String| (ErrorKind::Auth, format!("OAuth token endpoint: {why}"));
        let url =
            EndpointUrl::parse(&c.token_url, self.https_only).map_err(|e| fail(e.to_string()))?;
        if let Some(ip) = url.host_ip() {
            egress
                .admit(url.host(), ip)
                .map_err(|e| fail(e.to_string()))?;
        }
        // A fresh id for each client assertion (RFC 7523 §3: `jti` is never reused).
        let jti = format!("{:032x}", rand::random::<u128>());
        let (form, basic) = c.token_request(domain::Timestamp::now(), &jti);
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
        Ok((format!("Bearer {}", token.token), life, token.refresh_token))
    }
}
