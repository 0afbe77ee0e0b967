//! How an endpoint authenticates each request beyond its signature: a bearer token, HTTP basic
//! credentials, or an OAuth 2.0 access token got with the client-credentials grant. Stored
//! sealed (`seal`), checked here, sent by the dispatcher.

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

/// OAuth 2.0 client credentials (RFC 6749 §4.4).
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
}

/// How the client authenticates to the token endpoint (Svix's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OAuthMethod {
    /// HTTP basic with the client id and secret (RFC 6749 §2.3.1).
    #[serde(rename = "clientSecretBasic")]
    Basic,
    /// `client_id` and `client_secret` in the form body.
    #[serde(rename = "clientSecretPost")]
    Post,
}

impl OAuthMethod {
    /// Svix's name of it (`clientSecretBasic`, `clientSecretPost`).
    pub const fn as_str(self) -> &'static str {
        match self {
            OAuthMethod::Basic => "clientSecretBasic",
            OAuthMethod::Post => "clientSecretPost",
        }
    }

    /// By Svix's name; the error says what is supported.
    pub fn parse(name: &str) -> Result<OAuthMethod, String> {
        match name {
            "clientSecretBasic" => Ok(OAuthMethod::Basic),
            "clientSecretPost" => Ok(OAuthMethod::Post),
            "clientSecretJwt" => Err(
                "clientSecretJwt is not supported by hookd; use clientSecretBasic or clientSecretPost"
                    .to_owned(),
            ),
            other => Err(format!(
                "{other:?} is not an auth method: clientSecretBasic or clientSecretPost"
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
                    let reserved = ["grant_type", "client_id", "client_secret", "scope"];
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
                "grantType": "clientCredentials",
                "scopes": c.scopes,
                "extraParams": c.extra_params.keys().collect::<Vec<_>>(),
            }),
        }
    }
}

impl OAuthClient {
    /// The token request: its form fields and, for [`OAuthMethod::Basic`], its
    /// `Authorization` value.
    pub fn token_request(&self) -> (Vec<(String, String)>, Option<String>) {
        let mut form = vec![("grant_type".to_owned(), "client_credentials".to_owned())];
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
        }
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
}

/// Reads a token endpoint's JSON answer (RFC 6749 §5.1); the error says what is wrong,
/// without the token.
pub fn parse_token_response(body: &[u8]) -> Result<AccessToken, String> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: Option<String>,
        token_type: Option<String>,
        expires_in: Option<serde_json::Value>,
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
    Ok(AccessToken { token, expires_in })
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
        }
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
        let (form, auth) = oauth(OAuthMethod::Basic).token_request();
        assert_eq!(
            auth.unwrap(),
            format!("Basic {}", STANDARD.encode("hookd:s3cret"))
        );
        assert!(form.contains(&("scope".into(), "webhooks:write a".into())));
        assert!(form.contains(&("audience".into(), "https://api".into())));
        assert!(!form.iter().any(|(k, _)| k == "client_secret"));
        let (form, auth) = oauth(OAuthMethod::Post).token_request();
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
                expires_in: Some(3600)
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
