//! How each kind of setting is read from text and shown back: the parsers and printers the
//! declaration in `config` names.

use std::net::SocketAddr;
use std::time::Duration;

use domain::duration::{format_duration, parse_duration};
use secrecy::{ExposeSecret, SecretString};

use super::LogFormat;

pub(super) const SECOND: Duration = Duration::from_secs(1);
pub(super) const MINUTE: Duration = Duration::from_secs(60);
pub(super) const DAY: Duration = Duration::from_secs(86_400);
pub(super) const YEAR: Duration = Duration::from_secs(365 * 86_400);
pub(super) const TEN_YEARS: Duration = Duration::from_secs(3650 * 86_400);

/// Which parts of hookd a `serve` process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    pub api: bool,
    pub dispatcher: bool,
    pub scheduler: bool,
    /// Only the inbound listener (`POST /in/{source}` and health), without the tenant API and
    /// the dashboard; `api` includes it.
    pub receive: bool,
}

impl Roles {
    pub fn parse(v: &str) -> Result<Roles, String> {
        let mut roles = Roles {
            api: false,
            dispatcher: false,
            scheduler: false,
            receive: false,
        };
        for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part {
                "api" => roles.api = true,
                "dispatcher" => roles.dispatcher = true,
                "scheduler" => roles.scheduler = true,
                "receive" => roles.receive = true,
                "all" => {
                    roles = Roles {
                        api: true,
                        dispatcher: true,
                        scheduler: true,
                        receive: roles.receive,
                    }
                }
                other => {
                    return Err(format!(
                        "unknown role {other:?}: expected api, receive, dispatcher, scheduler or all"
                    ));
                }
            }
        }
        if !(roles.api || roles.dispatcher || roles.scheduler || roles.receive) {
            return Err("name at least one role".to_owned());
        }
        Ok(roles)
    }
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = [
            (self.api, "api"),
            (self.receive && !self.api, "receive"),
            (self.dispatcher, "dispatcher"),
            (self.scheduler, "scheduler"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect();
        f.write_str(&names.join(","))
    }
}

pub(super) fn number_between(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from {lo} to {hi}")),
    }
}

const BYTE_UNITS: [(&str, u64); 4] = [
    ("GiB", 1 << 30),
    ("MiB", 1 << 20),
    ("KiB", 1 << 10),
    ("", 1),
];

/// A size: whole bytes, or whole KiB, MiB or GiB (`64MiB`), up to 1 TiB.
pub(super) fn parse_bytes(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let (digits, unit) = BYTE_UNITS
        .iter()
        .find_map(|(suffix, unit)| Some((v.strip_suffix(suffix)?.trim_end(), *unit)))
        .unwrap_or((v, 1));
    match digits.parse::<u64>().ok().and_then(|n| n.checked_mul(unit)) {
        Some(n) if n <= 1 << 40 => Ok(n),
        _ => Err("expected a size such as 67108864, 64MiB or 1GiB (at most 1024GiB)".to_owned()),
    }
}

/// A size as [`parse_bytes`] reads it, in the largest unit that divides it.
pub(super) fn format_bytes(n: u64) -> String {
    let (suffix, unit) = BYTE_UNITS
        .iter()
        .find(|(_, unit)| n.is_multiple_of(*unit) && n >= *unit)
        .copied()
        .unwrap_or(("", 1));
    format!("{}{suffix}", n / unit)
}

pub(super) fn duration_between(v: &str, lo: Duration, hi: Duration) -> Result<Duration, String> {
    let d = parse_duration(v).map_err(|e| e.to_string())?;
    if d < lo || d > hi {
        return Err(format!(
            "expected between {} and {}",
            format_duration(lo),
            format_duration(hi)
        ));
    }
    Ok(d)
}

pub(super) fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".to_owned()),
    }
}

/// A whole number from `lo` to `hi`, as the setting's type.
pub(super) fn whole<T: TryFrom<u64>>(v: &str, lo: u64, hi: u64) -> Result<T, String> {
    let n = number_between(v, lo, hi)?;
    T::try_from(n).map_err(|_| format!("expected a whole number from {lo} to {hi}"))
}

pub(super) fn database_url(v: &str) -> Result<SecretString, String> {
    store::Backend::of_url(v)
        .map(|_| SecretString::from(v.to_owned()))
        .map_err(|_| "expected sqlite://PATH or postgres://USER@HOST/DB".to_owned())
}

pub(super) fn socket_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse::<SocketAddr>()
        .map_err(|_| "expected IP:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080".to_owned())
}

pub(super) fn optional_socket_addr(v: &str) -> Result<Option<SocketAddr>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    v.parse::<SocketAddr>()
        .map(Some)
        .map_err(|_| "expected IP:PORT, e.g. 10.0.0.5:9100".to_owned())
}

/// An http(s) base URL without its trailing slash; empty stays empty.
pub(super) fn public_url(v: &str) -> Result<String, String> {
    if v.is_empty() {
        return Ok(String::new());
    }
    match v.split_once("://") {
        Some(("http" | "https", rest)) if !rest.is_empty() => {
            Ok(v.trim_end_matches('/').to_owned())
        }
        _ => Err("expected http(s)://HOST[:PORT][/PATH]".to_owned()),
    }
}

pub(super) fn otlp_endpoint(v: &str) -> Result<Option<String>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    match v.split_once("://") {
        Some(("http" | "https", rest))
            if !rest.is_empty() && !rest.contains(char::is_whitespace) =>
        {
            Ok(Some(v.trim_end_matches('/').to_owned()))
        }
        _ => Err("expected http(s)://HOST:PORT, e.g. http://127.0.0.1:4318".to_owned()),
    }
}

pub(super) fn smtp_url(v: &str) -> Result<Option<SecretString>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    scheduler::email::Mailer::from_url(v, "hookd@localhost")
        .map(|_| Some(SecretString::from(v.to_owned())))
        .map_err(|e| e.to_string())
}

pub(super) fn email(v: &str) -> Result<String, String> {
    domain::email::EmailAddress::parse(v)
        .map(|a| a.to_string())
        .map_err(|e| e.to_string())
}

pub(super) fn ratio(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err("expected a number above 0 and at most 1".to_owned()),
    }
}

pub(super) fn duration(v: &str) -> Result<Duration, String> {
    parse_duration(v).map_err(|e| e.to_string())
}

pub(super) fn log_format(v: &str) -> Result<LogFormat, String> {
    match v {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        _ => Err("expected text or json".to_owned()),
    }
}

pub(super) fn log_level(v: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(v)
        .map(|_| v.to_owned())
        .map_err(|e| format!("not a log filter: {e}"))
}

pub(super) fn delivery_proxy(v: &str) -> Result<Option<SecretString>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    let scheme_ok = ["http://", "https://", "socks5://", "socks5h://"]
        .iter()
        .any(|s| v.starts_with(s));
    if !scheme_ok || reqwest::Proxy::all(v).is_err() {
        return Err("expected http://, https:// or socks5://HOST:PORT".to_owned());
    }
    Ok(Some(SecretString::from(v.to_owned())))
}

pub(super) fn metrics_token(v: &str) -> Result<Option<SecretString>, String> {
    if v.is_empty() {
        Ok(None)
    } else if v.len() < 16 || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err("expected at least 16 characters without spaces".to_owned())
    } else {
        Ok(Some(SecretString::from(v.to_owned())))
    }
}

pub(super) fn keyring(v: &str) -> Result<Option<domain::seal::Keyring>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    domain::seal::Keyring::parse(v)
        .map(Some)
        .map_err(|e| e.to_string())
}

pub(super) fn optional_path(v: &str) -> Result<Option<std::path::PathBuf>, String> {
    Ok((!v.is_empty()).then(|| v.into()))
}

/// Printers for `hookd config`: what a value reads back as, secrets never in full.
pub(super) mod show {
    use super::*;

    pub fn plain<T: std::fmt::Display>(v: &T) -> String {
        v.to_string()
    }

    pub fn optional<T: std::fmt::Display>(v: &Option<T>) -> String {
        v.as_ref().map(T::to_string).unwrap_or_default()
    }

    pub fn duration(d: &Duration) -> String {
        format_duration(*d)
    }

    pub fn bytes(n: &u64) -> String {
        format_bytes(*n)
    }

    pub fn url(u: &SecretString) -> String {
        store::redact_url(u.expose_secret())
    }

    pub fn optional_url(u: &Option<SecretString>) -> String {
        u.as_ref().map(url).unwrap_or_default()
    }

    /// `(set)` or nothing: a token is never printed.
    pub fn set(v: &Option<SecretString>) -> String {
        if v.is_some() { "(set)" } else { "" }.to_owned()
    }

    pub fn optional_path(p: &Option<std::path::PathBuf>) -> String {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    }

    pub fn log_format(f: &LogFormat) -> String {
        match f {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
        .to_owned()
    }

    /// The keys' ids and which one seals, never the keys.
    pub fn keyring(k: &Option<domain::seal::Keyring>) -> String {
        match k {
            Some(keys) => format!(
                "(set: {}; {} seals)",
                keys.ids().join(", "),
                keys.current_id()
            ),
            None => String::new(),
        }
    }
}

pub(super) const MILLI: Duration = Duration::from_millis(1);

pub(super) fn allow_list(v: &str) -> Result<domain::endpoint_url::AllowList, String> {
    domain::endpoint_url::AllowList::parse(v).map_err(|e| e.to_string())
}
