//! How an endpoint authenticates each request beyond its signature: a bearer token, HTTP basic
//! credentials, or an OAuth 2.0 access token got with the client-credentials or the
//! refresh-token grant, the client authenticating with its secret (basic or form) or a JWT
//! assertion signed with it (RFC 7523). Stored sealed (`seal`), checked here, sent by the
//! dispatcher.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// The longest token, password, client secret or URL accepted.
pub const MAX_CREDENTIAL: usize = 4096;
/// The most scopes and extra token-request parameters.
pub const MAX_SCOPES: usize = 32;
pub const MAX_EXTRA_PARAMS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum EndpointAuth {
    /// `Authorization: Bearer {token}` on every attempt.
    Bearer { token: String },
    /// `Authorization: Basic base64(username:password)` on every attempt.
    Basic { username: String, password: String },
    /// An access token from `token_url`, cached until shortly before it expires.
    #[serde(rename = "oauth")]
    OAuth(OAuthClient),
}

/// An OAuth 2.0 client: client credentials (RFC 6749 §4.4), or with `refresh_token` the
/// refresh-token grant (§6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthClient {
    pub token_url: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    pub auth_method: OAuthMethod,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub extra_params: BTreeMap<String, String>,
    /// The refresh-token grant's token; replaced when the token endpoint issues a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
}

/// The `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// How long a client assertion is valid: it is made for one token request.
pub const ASSERTION_LIFE_SECS: i64 = 300;

/// How the client authenticates to the token endpoint (Svix's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OAuthMethod {
    /// HTTP basic with the client id and secret (RFC 6749 §2.3.1).
    #[serde(rename = "clientSecretBasic")]
    Basic,
    /// `client_id` and `client_secret` in the form body.
    #[serde(rename = "clientSecretPost")]
    Post,
    /// A JWT signed (HS256) with the client secret, as `client_assertion` (RFC 7523 §2.2).
    #[serde(rename = "clientSecretJwt")]
    Jwt,
}

impl OAuthMethod {
    /// Svix's name of it (`clientSecretBasic`, `clientSecretPost`).
    pub const fn as_str(self) -> &'static str {
        match self {
            OAuthMethod::Basic => "clientSecretBasic",
            OAuthMethod::Post => "clientSecretPost",
            OAuthMethod::Jwt => "clientSecretJwt",
        }
    }

    /// By Svix's name; the error says what is supported.
    pub fn parse(name: &str) -> Result<OAuthMethod, String> {
        match name {
            "clientSecretBasic" => Ok(OAuthMethod::Basic),
            "clientSecretPost" => Ok(OAuthMethod::Post),
            "clientSecretJwt" => Ok(OAuthMethod::Jwt),
            other => Err(format!(
                "{other:?} is not an auth method: clientSecretBasic, clientSecretPost or clientSecretJwt"
            )),
        }
    }
}

fn header_safe(what: &str, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("{what} must not be empty"));
    }
    if v.len() > MAX_CREDENTIAL {
        return Err(format!("{what} is longer than {MAX_CREDENTIAL} bytes"));
    }
    if v.chars().any(|c| c.is_control()) {
        return Err(format!("{what} must not contain control characters"));
    }
    Ok(())
}

impl EndpointAuth {
    /// Every problem with it, as `(field, reason)`; the URL's reachability is the caller's
    /// check (the SSRF guard).
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let mut check_broker = None;
        let mut check = |field: &'static str, v: &str| {
            if let Err(e) = header_safe(field, v) {
                out.push((field, e));
            }
        };
        match self {
            EndpointAuth::Bearer { token } => {
                check("token", token);
                if token.chars().any(char::is_whitespace) {
                    out.push(("token", "token must not contain spaces".to_owned()));
                }
            }
            EndpointAuth::Basic { username, password } => {
                check("username", username);
                check("password", password);
                if username.contains(':') {
                    out.push(("username", "username must not contain `:`".to_owned()));
                }
            }
            EndpointAuth::OAuth(c) => {
                check("tokenUrl", &c.token_url);
                // A token is fetched over HTTP: a broker URL parses as an endpoint URL, but
                // would fail only at the first send.
                if let Ok(url) = crate::endpoint_url::EndpointUrl::parse(&c.token_url, false)
                    && url.destination().is_some()
                {
                    check_broker = Some(url.scheme());
                }
                check("clientId", &c.client_id);
                match (&c.client_secret, c.auth_method) {
                    (Some(s), _) => check("clientSecret", s),
                    (None, _) => out.push(("clientSecret", "clientSecret is required".to_owned())),
                }
                if c.auth_method == OAuthMethod::Basic && c.client_id.contains(':') {
                    // RFC 6749 form-encodes it; receivers rarely decode it: refuse it plainly.
                    out.push((
                        "clientId",
                        "clientId must not contain `:` with clientSecretBasic".to_owned(),
                    ));
                }
                if let Some(t) = &c.refresh_token
                    && let Err(e) = header_safe("refreshToken", t)
                {
                    out.push(("refreshToken", e));
                }
                if c.scopes.len() > MAX_SCOPES {
                    out.push(("scopes", format!("at most {MAX_SCOPES} scopes")));
                }
                for s in &c.scopes {
                    if s.is_empty()
                        || s.len() > 256
                        || s.chars().any(|c| c.is_whitespace() || c.is_control())
                    {
                        out.push((
                            "scopes",
                            format!("{s:?} is not a scope (1 to 256 characters, no spaces)"),
                        ));
                    }
                }
                if c.extra_params.len() > MAX_EXTRA_PARAMS {
                    out.push((
                        "extraParams",
                        format!("at most {MAX_EXTRA_PARAMS} parameters"),
                    ));
                }
                for (k, v) in &c.extra_params {
                    let reserved = [
                        "grant_type",
                        "client_id",
                        "client_secret",
                        "scope",
                        "refresh_token",
                        "client_assertion",
                        "client_assertion_type",
                    ];
                    if reserved.contains(&k.as_str()) {
                        out.push(("extraParams", format!("{k:?} is set by hookd")));
                    }
                    if k.is_empty() || k.len() > 256 || v.len() > MAX_CREDENTIAL {
                        out.push((
                            "extraParams",
                            format!("{k:?}: names 1 to 256 bytes, values at most {MAX_CREDENTIAL}"),
                        ));
                    }
                }
            }
        }
        if let Some(scheme) = check_broker {
            out.push((
                "tokenUrl",
                format!("tokenUrl must be an http:// or https:// URL, not {scheme}://"),
            ));
        }
        out
    }

    /// The `Authorization` value for bearer and basic; `None` for OAuth (a token is needed).
    pub fn fixed_authorization(&self) -> Option<String> {
        match self {
            EndpointAuth::Bearer { token } => Some(format!("Bearer {token}")),
            EndpointAuth::Basic { username, password } => Some(format!(
                "Basic {}",
                STANDARD.encode(format!("{username}:{password}"))
            )),
            EndpointAuth::OAuth(_) => None,
        }
    }

    /// What may be shown of it: the kind and the non-secret fields.
    pub fn shown(&self) -> serde_json::Value {
        match self {
            EndpointAuth::Bearer { .. } => serde_json::json!({"type": "bearer"}),
            EndpointAuth::Basic { username, .. } => {
                serde_json::json!({"type": "basic", "username": username})
            }
            EndpointAuth::OAuth(c) => serde_json::json!({
                "type": "oauth",
                "tokenUrl": c.token_url,
                "clientId": c.client_id,
                "authMethod": c.auth_method,
                "grantType": c.grant_type(),
                "scopes": c.scopes,
                "extraParams": c.extra_params.keys().collect::<Vec<_>>(),
            }),
        }
    }
}

impl OAuthClient {
    /// Svix's name of its grant: `clientCredentials` or `refreshToken`.
    pub fn grant_type(&self) -> &'static str {
        match self.refresh_token {
            Some(_) => "refreshToken",
            None => "clientCredentials",
        }
    }

    /// The token request: its form fields and, for [`OAuthMethod::Basic`], its
    /// `Authorization` value. `now` and `jti` (unique per request) make a JWT assertion's
    /// claims.
    pub fn token_request(
        &self,
        now: crate::Timestamp,
        jti: &str,
    ) -> (Vec<(String, String)>, Option<String>) {
        let mut form = match &self.refresh_token {
            Some(t) => vec![
                ("grant_type".to_owned(), "refresh_token".to_owned()),
                ("refresh_token".to_owned(), t.clone()),
            ],
            None => vec![("grant_type".to_owned(), "client_credentials".to_owned())],
        };
        if !self.scopes.is_empty() {
            form.push(("scope".to_owned(), self.scopes.join(" ")));
        }
        form.extend(
            self.extra_params
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        let secret = self.client_secret.clone().unwrap_or_default();
        match self.auth_method {
            OAuthMethod::Post => {
                form.push(("client_id".to_owned(), self.client_id.clone()));
                form.push(("client_secret".to_owned(), secret));
                (form, None)
            }
            OAuthMethod::Basic => {
                let pair = format!("{}:{}", self.client_id, secret);
                (form, Some(format!("Basic {}", STANDARD.encode(pair))))
            }
            OAuthMethod::Jwt => {
                let assertion = self.client_assertion(&secret, now, jti);
                form.push(("client_id".to_owned(), self.client_id.clone()));
                form.push((
                    "client_assertion_type".to_owned(),
                    JWT_BEARER_ASSERTION.to_owned(),
                ));
                form.push(("client_assertion".to_owned(), assertion));
                (form, None)
            }
        }
    }

    /// RFC 7523 §3: an HS256 JWT whose issuer and subject are the client id and whose
    /// audience is the token URL, valid [`ASSERTION_LIFE_SECS`], signed with the client
    /// secret.
    fn client_assertion(&self, secret: &str, now: crate::Timestamp, jti: &str) -> String {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use hmac::{Hmac, Mac};
        let header = serde_json::json!({"alg": "HS256", "typ": "JWT"});
        let iat = now.as_secs();
        let claims = serde_json::json!({
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.token_url,
            "jti": jti,
            "iat": iat,
            "exp": iat + ASSERTION_LIFE_SECS,
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(secret.as_bytes())
            .expect("HMAC takes any key length");
        mac.update(signing_input.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{signature}")
    }
}

/// The largest PEM text accepted for an identity or a CA bundle.
pub const MAX_PEM: usize = 64 * 1024;

/// Mutual TLS for an endpoint (Svix's `mtls`): the client certificate (chain) and private key
/// hookd presents, and optionally the CA certificates its receiver's certificate is checked
/// against, besides the public roots (receivers with a private CA).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mtls {
    /// PEM: the certificate, any intermediates, and the private key (PKCS#8, PKCS#1 or SEC1).
    pub identity: String,
    #[serde(default)]
    pub server_ca_cert: Option<String>,
}

impl Mtls {
    /// Every problem with it, as `(field, reason)`: each part must be PEM that parses.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let mut out = Vec::new();
        let certs = |pem: &str| {
            CertificateDer::pem_slice_iter(pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map(|c| c.len())
        };
        // Each block must be a certificate TLS can trust, not just base64 between PEM lines:
        // the same parse rustls makes of a root when the client is built at send time.
        let trust_anchors = |pem: &str| {
            CertificateDer::pem_slice_iter(pem.as_bytes())
                .all(|c| c.is_ok_and(|der| webpki::anchor_from_trusted_cert(&der).is_ok()))
        };
        if self.identity.len() > MAX_PEM {
            out.push(("identity", format!("at most {MAX_PEM} bytes of PEM")));
        } else {
            match certs(&self.identity) {
                Ok(0) | Err(_) => out.push((
                    "identity",
                    "identity must hold the client certificate in PEM (-----BEGIN CERTIFICATE-----)".to_owned(),
                )),
                Ok(_) => {}
            }
            if PrivateKeyDer::from_pem_slice(self.identity.as_bytes()).is_err() {
                out.push((
                    "identity",
                    "identity must hold the certificate's private key in PEM (-----BEGIN PRIVATE KEY-----)".to_owned(),
                ));
            }
        }
        if let Some(ca) = &self.server_ca_cert {
            if ca.len() > MAX_PEM {
                out.push(("serverCaCert", format!("at most {MAX_PEM} bytes of PEM")));
            } else if !matches!(certs(ca), Ok(n) if n > 0) || !trust_anchors(ca) {
                out.push((
                    "serverCaCert",
                    "serverCaCert must be certificates in PEM (-----BEGIN CERTIFICATE-----)"
                        .to_owned(),
                ));
            }
        }
        out
    }
}

/// An access token and how long it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessToken {
    pub token: String,
    /// Seconds from issue; `None` when the server did not say.
    pub expires_in: Option<u64>,
    /// A new refresh token, which replaces the one used (RFC 6749 §6).
    pub refresh_token: Option<String>,
}

/// Reads a token endpoint's JSON answer (RFC 6749 §5.1); the error says what is wrong,
/// without the token.
pub fn parse_token_response(body: &[u8]) -> Result<AccessToken, String> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: Option<String>,
        token_type: Option<String>,
        expires_in: Option<serde_json::Value>,
        refresh_token: Option<String>,
    }
    let a: Answer = serde_json::from_slice(body)
        .map_err(|_| "the token endpoint's answer is not a JSON object".to_owned())?;
    let token = a
        .access_token
        .filter(|t| !t.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    header_safe("access_token", &token)?;
    if let Some(t) = &a.token_type
        && !t.eq_ignore_ascii_case("bearer")
    {
        return Err(format!(
            "the token endpoint gave a {t:?} token; only bearer tokens are supported"
        ));
    }
    let expires_in = match a.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    let refresh_token = a.refresh_token.filter(|t| !t.is_empty());
    if let Some(t) = &refresh_token {
        header_safe("refresh_token", t)?;
    }
    Ok(AccessToken {
        token,
        expires_in,
        refresh_token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(method: OAuthMethod) -> OAuthClient {
        OAuthClient {
            token_url: "https://auth.example.com/token".into(),
            client_id: "hookd".into(),
            client_secret: Some("s3cret".into()),
            auth_method: method,
            scopes: vec!["webhooks:write".into(), "a".into()],
            extra_params: BTreeMap::from([("audience".into(), "https://api".into())]),
            refresh_token: None,
        }
    }

    const NOW: i64 = 1_700_000_000;

    fn request(c: &OAuthClient) -> (Vec<(String, String)>, Option<String>) {
        c.token_request(crate::Timestamp::from_millis(NOW * 1000), "jti-1")
    }

    #[test]
    fn a_jwt_assertion_is_hs256_over_rfc_7523_claims() {
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        use hmac::{Hmac, Mac};
        let (form, basic) = request(&oauth(OAuthMethod::Jwt));
        assert!(basic.is_none());
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(
            get("client_assertion_type").as_deref(),
            Some(JWT_BEARER_ASSERTION)
        );
        assert_eq!(get("client_id").as_deref(), Some("hookd"));
        assert_eq!(get("client_secret"), None, "the secret never leaves");
        let jwt = get("client_assertion").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let json = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        assert_eq!(
            json(parts[0]),
            serde_json::json!({"alg": "HS256", "typ": "JWT"})
        );
        assert_eq!(
            json(parts[1]),
            serde_json::json!({"iss": "hookd", "sub": "hookd", "aud": "https://auth.example.com/token",
                "jti": "jti-1", "iat": NOW, "exp": NOW + ASSERTION_LIFE_SECS})
        );
        let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(b"s3cret").unwrap();
        mac.update(format!("{}.{}", parts[0], parts[1]).as_bytes());
        mac.verify_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap())
            .expect("signed with the client secret");
    }

    #[test]
    fn the_refresh_grant_sends_its_token_and_reads_a_new_one() {
        let mut c = oauth(OAuthMethod::Post);
        c.refresh_token = Some("rt-1".into());
        let (form, _) = request(&c);
        assert_eq!(form[0], ("grant_type".into(), "refresh_token".into()));
        assert_eq!(form[1], ("refresh_token".into(), "rt-1".into()));
        assert_eq!(
            EndpointAuth::OAuth(c.clone()).shown()["grantType"],
            "refreshToken"
        );
        assert!(!EndpointAuth::OAuth(c).shown().to_string().contains("rt-1"));
        let a = parse_token_response(br#"{"access_token":"a","refresh_token":"rt-2"}"#).unwrap();
        assert_eq!(a.refresh_token.as_deref(), Some("rt-2"));
    }

    #[test]
    fn bearer_and_basic_give_their_header_and_show_no_secret() {
        let b = EndpointAuth::Bearer {
            token: "tok".into(),
        };
        assert_eq!(b.fixed_authorization().unwrap(), "Bearer tok");
        let basic = EndpointAuth::Basic {
            username: "u".into(),
            password: "p w".into(),
        };
        assert_eq!(basic.fixed_authorization().unwrap(), "Basic dTpwIHc=");
        assert!(!basic.shown().to_string().contains("p w"));
        let o = EndpointAuth::OAuth(oauth(OAuthMethod::Basic));
        assert!(!o.shown().to_string().contains("s3cret"), "{}", o.shown());
        assert!(o.problems().is_empty(), "{:?}", o.problems());
    }

    #[test]
    fn the_token_request_follows_the_auth_method() {
        let (form, auth) = request(&oauth(OAuthMethod::Basic));
        assert_eq!(
            auth.unwrap(),
            format!("Basic {}", STANDARD.encode("hookd:s3cret"))
        );
        assert!(form.contains(&("scope".into(), "webhooks:write a".into())));
        assert!(form.contains(&("audience".into(), "https://api".into())));
        assert!(!form.iter().any(|(k, _)| k == "client_secret"));
        let (form, auth) = request(&oauth(OAuthMethod::Post));
        assert!(auth.is_none());
        assert!(form.contains(&("client_secret".into(), "s3cret".into())));
        assert_eq!(form[0], ("grant_type".into(), "client_credentials".into()));
    }

    #[test]
    fn bad_credentials_are_named() {
        let bad = EndpointAuth::Basic {
            username: "a:b".into(),
            password: "".into(),
        };
        let fields: Vec<_> = bad.problems().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["password", "username"]);
        let mut o = oauth(OAuthMethod::Post);
        o.client_secret = None;
        o.extra_params
            .insert("grant_type".into(), "password".into());
        let fields: Vec<_> = EndpointAuth::OAuth(o)
            .problems()
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(fields, vec!["clientSecret", "extraParams"]);
        let mut o = oauth(OAuthMethod::Post);
        o.token_url = "redis://127.0.0.1:6379/?stream=s".into();
        assert_eq!(
            EndpointAuth::OAuth(o).problems(),
            vec![(
                "tokenUrl",
                "tokenUrl must be an http:// or https:// URL, not redis://".to_owned()
            )]
        );
        let t = EndpointAuth::Bearer {
            token: "a\nb".into(),
        };
        assert!(!t.problems().is_empty());
    }

    #[test]
    fn token_answers_are_read_or_refused_with_a_reason() {
        let ok = parse_token_response(
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":3600}"#,
        )
        .unwrap();
        assert_eq!(
            ok,
            AccessToken {
                token: "abc".into(),
                expires_in: Some(3600),
                refresh_token: None,
            }
        );
        let s = parse_token_response(br#"{"access_token":"abc","expires_in":"60"}"#).unwrap();
        assert_eq!(s.expires_in, Some(60));
        assert!(
            parse_token_response(b"<html>")
                .unwrap_err()
                .contains("not a JSON")
        );
        assert!(
            parse_token_response(br#"{"error":"invalid_client"}"#)
                .unwrap_err()
                .contains("no access_token")
        );
        assert!(
            parse_token_response(br#"{"access_token":"abc","token_type":"mac"}"#)
                .unwrap_err()
                .contains("bearer")
        );
    }
}

#[cfg(test)]
mod mtls_tests {
    use super::*;

    const IDENTITY: &str = include_str!("../../../tests/fixtures/mtls/client-identity.pem");
    const CA: &str = include_str!("../../../tests/fixtures/mtls/server-ca.pem");

    #[test]
    fn an_identity_needs_its_certificate_and_key_and_a_ca_must_be_certificates() {
        let good = Mtls {
            identity: IDENTITY.into(),
            server_ca_cert: Some(CA.into()),
        };
        assert!(good.problems().is_empty(), "{:?}", good.problems());
        let cert_only: String = IDENTITY
            .split("-----BEGIN PRIVATE KEY-----")
            .next()
            .unwrap()
            .into();
        let no_key = Mtls {
            identity: cert_only,
            server_ca_cert: None,
        };
        assert_eq!(no_key.problems().len(), 1, "{:?}", no_key.problems());
        let junk = Mtls {
            identity: "hello".into(),
            server_ca_cert: Some("nope".into()),
        };
        let fields: Vec<_> = junk.problems().into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, vec!["identity", "identity", "serverCaCert"]);
        // PEM armour around base64 that is no certificate.
        let armoured = Mtls {
            identity: IDENTITY.into(),
            server_ca_cert: Some(
                "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n".into(),
            ),
        };
        let problems = armoured.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "serverCaCert");
        // Two good ones and a bad one: refused too.
        let mixed = Mtls {
            identity: IDENTITY.into(),
            server_ca_cert: Some(format!(
                "{CA}\n-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"
            )),
        };
        assert_eq!(mixed.problems().len(), 1, "{:?}", mixed.problems());
    }
}
