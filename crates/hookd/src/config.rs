//! Settings: defaults < TOML file (`--config`) < `HOOKD_*` environment < command-line flags.
//!
//! Every value, whatever its source, goes through the same parser, and an invalid one stops
//! start-up with a message naming the setting and where it came from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use domain::duration::{format_duration, parse_duration};
use domain::endpoint_url::AllowList;
use secrecy::SecretString;

/// One setting: its name in the TOML file (the env variable is `HOOKD_` + upper case), its
/// default and what it means. The README's configuration table mirrors this list.
pub struct SettingSpec {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
}

pub const SETTINGS: &[SettingSpec] = &[
    SettingSpec {
        name: "database_url",
        default: "sqlite://data/hookd.db",
        help: "sqlite://PATH (file and directory are created) or postgres://USER:PASS@HOST/DB",
    },
    SettingSpec {
        name: "bind",
        default: "127.0.0.1:8080",
        help: "address and port the HTTP server listens on",
    },
    SettingSpec {
        name: "max_payload_bytes",
        default: "1048576",
        help: "largest message payload accepted, in bytes (1 KiB to 64 MiB); larger ones answer 413",
    },
    SettingSpec {
        name: "max_deliver_ahead",
        default: "30d",
        help: "how far in the future a message's deliverAt may be (1m to 365d); later answers 422",
    },
    SettingSpec {
        name: "payload_retention",
        default: "30d",
        help: "how long message payloads and attempt response bodies are kept, unless a tenant or application chooses (1s to 3650d); then they read as expunged",
    },
    SettingSpec {
        name: "metadata_retention",
        default: "90d",
        help: "how long messages, their deliveries and attempts are kept, unless a tenant or application chooses (1s to 3650d, at least payload_retention); live deliveries are never removed",
    },
    SettingSpec {
        name: "max_retention",
        default: "90d",
        help: "the longest retention, in whole days, a tenant or application may choose for either kind (1d to 3650d)",
    },
    SettingSpec {
        name: "prune_interval",
        default: "1m",
        help: "how often expired payloads and messages are removed (1s to 1d)",
    },
    SettingSpec {
        name: "endpoint_allow_networks",
        default: "",
        help: "comma-separated CIDR networks endpoint URLs may point into despite the SSRF guard, e.g. 127.0.0.0/8,10.0.0.0/8",
    },
    SettingSpec {
        name: "endpoint_https_only",
        default: "false",
        help: "true to refuse http:// endpoint URLs",
    },
    SettingSpec {
        name: "status_preset",
        default: "default",
        help: "how failures are treated unless an endpoint chooses: default (400, 401, 403, 410, 413, 415, 422 end retries at once) or retry-all-but-410 (Svix's rule: everything but 410 is retried)",
    },
    SettingSpec {
        name: "signature_headers",
        default: "both",
        help: "signature header names deliveries carry unless an endpoint chooses: both (webhook-* and Svix's svix-*), webhook or svix",
    },
    SettingSpec {
        name: "roles",
        default: "api,dispatcher,scheduler",
        help: "what `hookd serve` runs: any of api (REST API, dashboard and inbound sources), receive (only inbound sources, POST /in/{source}), dispatcher (delivery workers), scheduler (background jobs)",
    },
    SettingSpec {
        name: "delivery_lease",
        default: "30s",
        help: "how long a claimed delivery stays reserved without renewal; after a crash, work returns to the queue within this time (1s-10m)",
    },
    SettingSpec {
        name: "inbound_max_held",
        default: "10000",
        help: "most events one inbound source holds ahead of gaps in their keys' sequences, per receiving process (1-1000000); past it an event that would be held answers 429 and the sender retries",
    },
    SettingSpec {
        name: "inbound_replay_window",
        default: "24h",
        help: "how long a github source, or an hmac one without timestamp_header or with id_header, knows a request by the digest of its signed bytes, so a copy sent again with a new id header is a duplicate (1m-30d)",
    },
    SettingSpec {
        name: "delivery_max_in_flight",
        default: "1024",
        help: "most HTTP requests in flight from one dispatcher process (1-100000)",
    },
    SettingSpec {
        name: "delivery_batch_size",
        default: "256",
        help: "most deliveries claimed per database round trip (1-10000)",
    },
    SettingSpec {
        name: "delivery_poll_interval",
        default: "200ms",
        help: "how often a dispatcher looks for due work when not woken (retries coming due, other processes' messages)",
    },
    SettingSpec {
        name: "public_url",
        default: "",
        help: "where people reach hookd, for links in emails (default http://BIND)",
    },
    SettingSpec {
        name: "smtp_url",
        default: "",
        help: "SMTP server for notifications: smtp://[user:pass@]host[:port] (plain; credentials then travel unencrypted), add ?tls=starttls for STARTTLS, smtps://host for TLS; empty keeps mail in the outbox",
    },
    SettingSpec {
        name: "smtp_from",
        default: "hookd@localhost.localdomain",
        help: "the From address of notification emails",
    },
    SettingSpec {
        name: "endpoint_disable_after",
        default: "120h",
        help: "an endpoint failing with no success for this long is disabled and its tenant emailed",
    },
    SettingSpec {
        name: "endpoint_warn_after",
        default: "24h",
        help: "an endpoint failing with no success for this long gets one early warning per failure streak (an email and the endpoint.failing operational event); less than endpoint_disable_after",
    },
    SettingSpec {
        name: "health_sweep_interval",
        default: "1m",
        help: "how often the scheduler looks for endpoints to disable",
    },
    SettingSpec {
        name: "tenant_ingest_rate",
        default: "5000",
        help: "messages per second a tenant may send, across all API processes, unless the tenant has its own limit; over it, 429 with Retry-After",
    },
    SettingSpec {
        name: "tenant_ingest_burst",
        default: "10000",
        help: "how many messages a tenant may send at once above its rate",
    },
    SettingSpec {
        name: "breaker_failures",
        default: "5",
        help: "consecutive failed attempts that open an endpoint's circuit breaker (1-1000); a failure ratio (breaker_failure_ratio) over 60 s with at least 10 attempts opens it too",
    },
    SettingSpec {
        name: "breaker_failure_ratio",
        default: "0.5",
        help: "share of failed attempts over 60 s (with at least 10 attempts) that opens an endpoint's circuit breaker (above 0, at most 1)",
    },
    SettingSpec {
        name: "breaker_open_for",
        default: "30s",
        help: "how long an open breaker holds an endpoint's deliveries (without counting attempts) before one probe is let through",
    },
    SettingSpec {
        name: "db_max_connections",
        default: "16",
        help: "size of the database connection pool (1-1000)",
    },
    SettingSpec {
        name: "storage_min_free",
        default: "64MiB",
        help: "SQLite: new messages answer 503 storage_full while the database's disk has less free space than this (bytes, or KiB/MiB/GiB; 0: never), so deliveries keep the rest",
    },
    SettingSpec {
        name: "shutdown_timeout",
        default: "30s",
        help: "on SIGINT/SIGTERM, how long in-flight requests may take to finish",
    },
    SettingSpec {
        name: "log_format",
        default: "text",
        help: "text or json (one JSON object per line on stderr)",
    },
    SettingSpec {
        name: "metrics_tenant_label",
        default: "false",
        help: "true to label /metrics' attempt and ingest series by tenant id (one series set per tenant seen since start; for deployments with few tenants)",
    },
    SettingSpec {
        name: "otlp_endpoint",
        default: "",
        help: "an OpenTelemetry collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318: log records passing log_level are also exported to ENDPOINT/v1/logs and traces of requests and delivery attempts to ENDPOINT/v1/traces (OTLP protobuf); empty exports nothing",
    },
    SettingSpec {
        name: "password_hash_concurrency",
        default: "2",
        help: "password checks (argon2, 19 MiB each) run at once in this process (1-64); beyond that and a short line, login and sign-up answer 429 with Retry-After",
    },
    SettingSpec {
        name: "login_attempts_per_minute",
        default: "20",
        help: "password checks one client address (an IPv6 /64) gets per minute, whatever the email (1-10000); over it a login waits for its turn (429 with Retry-After only past 30 s), so the right password still logs in",
    },
    SettingSpec {
        name: "signups_per_hour",
        default: "10",
        help: "sign-ups one client address (an IPv6 /64) may make per hour (1-10000); over it, 429 with Retry-After",
    },
    SettingSpec {
        name: "trusted_proxies",
        default: "",
        help: "comma-separated CIDR networks of reverse proxies whose X-Forwarded-For is believed for the client address; empty believes no one",
    },
    SettingSpec {
        name: "http_body_timeout",
        default: "10s",
        help: "longest time a client may take to send a request body, from the end of its headers (100ms-10m); a slower request is answered 408 and its connection closed",
    },
    SettingSpec {
        name: "http_max_connections",
        default: "10000",
        help: "most open HTTP connections the server keeps (16-1000000); further ones wait in the listen backlog",
    },
    SettingSpec {
        name: "metrics_bind",
        default: "",
        help: "IP:PORT to serve /metrics on instead of the main address (e.g. a private interface); empty serves it on bind, except in a process with the receive role and not the api role (the public edge), which serves it on bind only with metrics_token",
    },
    SettingSpec {
        name: "metrics_token",
        default: "",
        help: "when set, /metrics answers only requests with Authorization: Bearer TOKEN (401 otherwise)",
    },
    SettingSpec {
        name: "delivery_proxy",
        default: "",
        help: "send every delivery through this proxy: http://HOST:PORT, https://HOST:PORT or socks5://HOST:PORT (user:pass@ allowed); it must enforce egress rules itself, as it resolves endpoint names. HTTP_PROXY and the like are never used",
    },
    SettingSpec {
        name: "secret_keys",
        default: "",
        help: "keys that seal endpoint secrets and header values at rest: `id:base64` (32+ random bytes, e.g. `k1:$(openssl rand -base64 32)`), several separated by commas; the first seals, the others only open (rotation: put the new key first, run `hookd rekey`, then drop the old one). Empty on SQLite: the key file hookd.key beside the database, made on first start. Required on PostgreSQL",
    },
    SettingSpec {
        name: "secret_keys_file",
        default: "",
        help: "a file holding secret_keys (one key per line), e.g. a mounted Docker or Kubernetes secret; instead of secret_keys",
    },
    SettingSpec {
        name: "log_level",
        default: "info",
        help: "a tracing filter: error, warn, info, debug, or e.g. info,store=debug",
    },
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: SecretString,
    pub bind: SocketAddr,
    pub max_payload_bytes: usize,
    pub max_deliver_ahead: Duration,
    pub payload_retention: Duration,
    pub metadata_retention: Duration,
    pub max_retention: Duration,
    pub prune_interval: Duration,
    pub endpoint_allow_networks: AllowList,
    pub endpoint_https_only: bool,
    pub signature_headers: domain::signing::SignatureHeaders,
    pub status_preset: domain::classify::StatusPreset,
    pub roles: Roles,
    pub delivery_lease: Duration,
    pub inbound_max_held: u64,
    pub inbound_replay_window: Duration,
    pub delivery_max_in_flight: usize,
    pub delivery_batch_size: u64,
    pub delivery_poll_interval: Duration,
    pub public_url: String,
    pub smtp_url: Option<SecretString>,
    pub smtp_from: String,
    pub endpoint_disable_after: Duration,
    pub endpoint_warn_after: Duration,
    pub health_sweep_interval: Duration,
    pub tenant_ingest_rate: u32,
    pub tenant_ingest_burst: u32,
    pub breaker_failures: u32,
    pub breaker_failure_ratio: f64,
    pub breaker_open_for: Duration,
    pub db_max_connections: u32,
    /// Bytes (see the spec's help).
    pub storage_min_free: u64,
    pub shutdown_timeout: Duration,
    pub log_format: LogFormat,
    pub log_level: String,
    pub metrics_tenant_label: bool,
    /// OTLP/HTTP base URL (no trailing slash), when log export is on.
    pub otlp_endpoint: Option<String>,
    pub password_hash_concurrency: usize,
    pub login_attempts_per_minute: u32,
    pub signups_per_hour: u32,
    pub trusted_proxies: AllowList,
    pub http_body_timeout: Duration,
    pub http_max_connections: usize,
    pub metrics_bind: Option<SocketAddr>,
    pub metrics_token: Option<SecretString>,
    pub delivery_proxy: Option<SecretString>,
    /// `secret_keys` or the keys in `secret_keys_file`; `None`: the store's default (the key
    /// file beside a SQLite database).
    pub secret_keys: Option<domain::seal::Keyring>,
    /// The file's `[[sources]]`: made or brought in line with it at every start.
    pub sources: Vec<DeclaredSource>,
    /// The file's `[[egress_grants]]`, when a file was given: at every start the grants the
    /// file made become exactly these (see `store::System::declare_egress_grants`).
    pub egress_grants: Option<Vec<(domain::ids::TenantId, domain::egress::Grant)>>,
}

/// One `[[egress_grants]]` table.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantIn {
    tenant: String,
    target: String,
    redis_prefix: Option<String>,
    amqp_vhost: Option<String>,
    nats_prefix: Option<String>,
}

/// `[[egress_grants]]`: each `tenant`, `target` (a network, an address or a host name) and
/// the namespace on a shared broker; a target twice for one tenant is refused.
fn declared_grants(
    value: toml::Value,
    path: &str,
) -> Result<Vec<(domain::ids::TenantId, domain::egress::Grant)>, ConfigError> {
    use domain::egress::{Grant, MAX_GRANTS_PER_TENANT};
    let toml::Value::Array(items) = value else {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: "egress_grants must be an array of tables: [[egress_grants]]".to_owned(),
        });
    };
    if items.len() > MAX_DECLARED_SOURCES {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: format!("at most {MAX_DECLARED_SOURCES} egress_grants"),
        });
    }
    let mut out: Vec<(domain::ids::TenantId, Grant)> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let fail = |message: String| ConfigError::Toml {
            path: path.to_owned(),
            message: format!("egress_grants[{i}]: {message}"),
        };
        let g: GrantIn = item
            .try_into()
            .map_err(|e: toml::de::Error| fail(e.message().to_owned()))?;
        let tenant = g
            .tenant
            .parse::<domain::ids::TenantId>()
            .map_err(|_| fail(format!("tenant {:?} is not a tenant id (tnt_…)", g.tenant)))?;
        let grant = Grant::parse(
            &g.target,
            g.redis_prefix.as_deref(),
            g.amqp_vhost.as_deref(),
            g.nats_prefix.as_deref(),
        )
        .map_err(fail)?;
        if out
            .iter()
            .any(|(t, o)| *t == tenant && o.target == grant.target)
        {
            return Err(fail(format!(
                "{} is granted twice to {tenant}",
                grant.target
            )));
        }
        if out.iter().filter(|(t, _)| *t == tenant).count() >= MAX_GRANTS_PER_TENANT {
            return Err(fail(format!(
                "at most {MAX_GRANTS_PER_TENANT} grants per tenant"
            )));
        }
        out.push((tenant, grant));
    }
    Ok(out)
}

/// An inbound source the configuration file declares (`[[sources]]`: `tenant` and the members
/// of the API's `POST /api/v1/inbound/source` body), checked by the API's rules; see
/// `service::inbound::declare_source` for what a start does with it.
#[derive(Debug, Clone)]
pub struct DeclaredSource {
    pub tenant: domain::ids::TenantId,
    pub spec: service::inbound::SourceSpec,
    /// Where it is declared, for messages: `sources[0] ("stripe") in hookd.toml`.
    pub origin: String,
}

/// A setting that could not be used. The message names the setting and its source.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Toml { path: String, message: String },
    #[error("unknown setting {name:?} in {path} (known: {known})")]
    Unknown {
        name: String,
        path: String,
        known: String,
    },
    #[error("{origin}: {message}")]
    Source { origin: String, message: String },
    #[error("invalid {setting} {value:?} (from {source_name}): {reason}")]
    Invalid {
        setting: &'static str,
        value: String,
        source_name: String,
        reason: String,
    },
}

/// Where a value that no file, variable or flag set comes from, as messages name it.
const DEFAULT_SOURCE: &str = "the default";

/// A raw value and where it came from, for error messages.
#[derive(Debug, Clone)]
struct Raw {
    value: String,
    source: String,
}

/// Overrides from command-line flags (the highest layer).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub database_url: Option<String>,
    pub bind: Option<String>,
    pub roles: Option<String>,
}

impl Settings {
    /// Loads settings from the optional file, the process environment and flag overrides.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        Self::load_from(file, &env, overrides)
    }

    /// As [`Settings::load`], with the environment passed in (for tests).
    pub fn load_from(
        file: Option<&Path>,
        env: &BTreeMap<String, String>,
        overrides: &Overrides,
    ) -> Result<Settings, ConfigError> {
        let mut raw: BTreeMap<&'static str, Raw> = SETTINGS
            .iter()
            .map(|s| {
                let raw = Raw {
                    value: s.default.to_owned(),
                    source: DEFAULT_SOURCE.to_owned(),
                };
                (s.name, raw)
            })
            .collect();

        let mut sources = Vec::new();
        let mut egress_grants = None;
        if let Some(path) = file {
            let (values, declared, grants) = read_file(path)?;
            sources = declared;
            egress_grants = Some(grants);
            for (name, value) in values {
                let spec = SETTINGS.iter().find(|s| s.name == name).ok_or_else(|| {
                    ConfigError::Unknown {
                        name: name.clone(),
                        path: path.display().to_string(),
                        known: SETTINGS
                            .iter()
                            .map(|s| s.name)
                            .collect::<Vec<_>>()
                            .join(", "),
                    }
                })?;
                let source = format!("{} in {}", spec.name, path.display());
                raw.insert(spec.name, Raw { value, source });
            }
        }
        for spec in SETTINGS {
            let var = env_name(spec.name);
            if let Some(value) = env.get(&var) {
                raw.insert(
                    spec.name,
                    Raw {
                        value: value.clone(),
                        source: var,
                    },
                );
            }
        }
        let flags = [
            ("database_url", &overrides.database_url, "--database-url"),
            ("bind", &overrides.bind, "--bind"),
            ("roles", &overrides.roles, "--roles"),
        ];
        for (name, value, flag) in flags {
            if let Some(v) = value {
                raw.insert(
                    name,
                    Raw {
                        value: v.clone(),
                        source: flag.to_owned(),
                    },
                );
            }
        }
        let mut settings = Self::parse(&raw)?;
        let warn = &raw["endpoint_warn_after"];
        if settings.endpoint_warn_after >= settings.endpoint_disable_after
            && warn.source == DEFAULT_SOURCE
        {
            // Not chosen, and a short disable window: warn halfway through it (a deployment
            // with endpoint_disable_after of a day or less still starts as before).
            settings.endpoint_warn_after = settings.endpoint_disable_after / 2;
        }
        if settings.endpoint_warn_after >= settings.endpoint_disable_after {
            return Err(ConfigError::Invalid {
                setting: "endpoint_warn_after",
                value: warn.value.clone(),
                source_name: warn.source.clone(),
                reason: format!(
                    "must be less than endpoint_disable_after ({}, from {}): the warning comes before the disable",
                    format_duration(settings.endpoint_disable_after),
                    raw["endpoint_disable_after"].source
                ),
            });
        }
        settings.sources = sources;
        settings.egress_grants = egress_grants;
        Ok(settings)
    }

    fn parse(raw: &BTreeMap<&'static str, Raw>) -> Result<Settings, ConfigError> {
        let get = |name: &'static str| &raw[name];
        Ok(Settings {
            database_url: field("database_url", get("database_url"), |v| {
                store::Backend::of_url(v)
                    .map(|_| SecretString::from(v.to_owned()))
                    .map_err(|_| "expected sqlite://PATH or postgres://USER@HOST/DB".to_owned())
            })?,
            bind: field("bind", get("bind"), |v| {
                v.parse::<SocketAddr>()
                    .map_err(|_| "expected IP:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080".to_owned())
            })?,
            max_deliver_ahead: field("max_deliver_ahead", get("max_deliver_ahead"), |v| {
                duration_between(
                    v,
                    Duration::from_secs(60),
                    Duration::from_secs(365 * 86_400),
                )
            })?,
            payload_retention: field("payload_retention", get("payload_retention"), |v| {
                duration_between(v, SECOND, TEN_YEARS)
            })?,
            metadata_retention: field("metadata_retention", get("metadata_retention"), |v| {
                let d = duration_between(v, SECOND, TEN_YEARS)?;
                let payload =
                    duration_between(raw["payload_retention"].value.trim(), SECOND, TEN_YEARS)?;
                if d < payload {
                    return Err(format!(
                        "shorter than payload_retention ({}): a payload cannot outlive its message",
                        format_duration(payload)
                    ));
                }
                Ok(d)
            })?,
            max_retention: field("max_retention", get("max_retention"), |v| {
                duration_between(v, Duration::from_secs(86_400), TEN_YEARS)
            })?,
            prune_interval: field("prune_interval", get("prune_interval"), |v| {
                duration_between(v, SECOND, Duration::from_secs(86_400))
            })?,
            max_payload_bytes: field("max_payload_bytes", get("max_payload_bytes"), |v| {
                match v.parse::<usize>() {
                    Ok(n) if (1024..=64 * 1024 * 1024).contains(&n) => Ok(n),
                    _ => Err("expected a number of bytes from 1024 to 67108864".to_owned()),
                }
            })?,
            endpoint_allow_networks: field(
                "endpoint_allow_networks",
                get("endpoint_allow_networks"),
                |v| AllowList::parse(v).map_err(|e| e.to_string()),
            )?,
            endpoint_https_only: field(
                "endpoint_https_only",
                get("endpoint_https_only"),
                parse_bool,
            )?,
            signature_headers: field("signature_headers", get("signature_headers"), |v| {
                v.parse()
                    .map_err(|_| "expected both, webhook or svix".to_owned())
            })?,
            status_preset: field("status_preset", get("status_preset"), |v| {
                v.parse()
                    .map_err(|_| "expected default or retry-all-but-410".to_owned())
            })?,
            roles: field("roles", get("roles"), Roles::parse)?,
            delivery_lease: field("delivery_lease", get("delivery_lease"), |v| {
                duration_between(v, Duration::from_secs(1), Duration::from_secs(600))
            })?,
            inbound_max_held: field("inbound_max_held", get("inbound_max_held"), |v| {
                number_between(v, 1, 1_000_000)
            })?,
            inbound_replay_window: field(
                "inbound_replay_window",
                get("inbound_replay_window"),
                |v| duration_between(v, Duration::from_secs(60), Duration::from_secs(30 * 86_400)),
            )?,
            delivery_max_in_flight: field(
                "delivery_max_in_flight",
                get("delivery_max_in_flight"),
                |v| number_between(v, 1, 100_000).map(|n| n as usize),
            )?,
            delivery_batch_size: field("delivery_batch_size", get("delivery_batch_size"), |v| {
                number_between(v, 1, 10_000)
            })?,
            delivery_poll_interval: field(
                "delivery_poll_interval",
                get("delivery_poll_interval"),
                |v| duration_between(v, Duration::from_millis(10), Duration::from_secs(60)),
            )?,
            public_url: field("public_url", get("public_url"), |v| {
                if v.is_empty() {
                    return Ok(String::new());
                }
                match v.split_once("://") {
                    Some(("http" | "https", rest)) if !rest.is_empty() => {
                        Ok(v.trim_end_matches('/').to_owned())
                    }
                    _ => Err("expected http(s)://HOST[:PORT][/PATH]".to_owned()),
                }
            })?,
            smtp_url: field("smtp_url", get("smtp_url"), |v| {
                if v.is_empty() {
                    return Ok(None);
                }
                scheduler::email::Mailer::from_url(v, "hookd@localhost")
                    .map(|_| Some(SecretString::from(v.to_owned())))
                    .map_err(|e| e.to_string())
            })?,
            smtp_from: field("smtp_from", get("smtp_from"), |v| {
                domain::email::EmailAddress::parse(v)
                    .map(|a| a.to_string())
                    .map_err(|e| e.to_string())
            })?,
            endpoint_disable_after: field(
                "endpoint_disable_after",
                get("endpoint_disable_after"),
                |v| duration_between(v, Duration::from_secs(1), Duration::from_secs(365 * 86_400)),
            )?,
            endpoint_warn_after: field("endpoint_warn_after", get("endpoint_warn_after"), |v| {
                duration_between(v, Duration::from_secs(1), Duration::from_secs(365 * 86_400))
            })?,
            health_sweep_interval: field(
                "health_sweep_interval",
                get("health_sweep_interval"),
                |v| duration_between(v, Duration::from_millis(100), Duration::from_secs(86_400)),
            )?,
            tenant_ingest_rate: field("tenant_ingest_rate", get("tenant_ingest_rate"), |v| {
                number_between(v, 1, 10_000_000).map(|n| n as u32)
            })?,
            tenant_ingest_burst: field("tenant_ingest_burst", get("tenant_ingest_burst"), |v| {
                number_between(v, 1, 10_000_000).map(|n| n as u32)
            })?,
            breaker_failures: field("breaker_failures", get("breaker_failures"), |v| {
                number_between(v, 1, 1000).map(|n| n as u32)
            })?,
            breaker_failure_ratio: field(
                "breaker_failure_ratio",
                get("breaker_failure_ratio"),
                |v| match v.parse::<f64>() {
                    Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
                    _ => Err("expected a number above 0 and at most 1".to_owned()),
                },
            )?,
            breaker_open_for: field("breaker_open_for", get("breaker_open_for"), |v| {
                duration_between(v, Duration::from_millis(100), Duration::from_secs(86_400))
            })?,
            db_max_connections: field(
                "db_max_connections",
                get("db_max_connections"),
                |v| match v.parse::<u32>() {
                    Ok(n) if (1..=1000).contains(&n) => Ok(n),
                    _ => Err("expected a whole number from 1 to 1000".to_owned()),
                },
            )?,
            storage_min_free: field("storage_min_free", get("storage_min_free"), parse_bytes)?,
            shutdown_timeout: field("shutdown_timeout", get("shutdown_timeout"), |v| {
                parse_duration(v).map_err(|e| e.to_string())
            })?,
            log_format: field("log_format", get("log_format"), |v| match v {
                "text" => Ok(LogFormat::Text),
                "json" => Ok(LogFormat::Json),
                _ => Err("expected text or json".to_owned()),
            })?,
            log_level: field("log_level", get("log_level"), |v| {
                tracing_subscriber::EnvFilter::try_new(v)
                    .map(|_| v.to_owned())
                    .map_err(|e| format!("not a log filter: {e}"))
            })?,
            metrics_tenant_label: field(
                "metrics_tenant_label",
                get("metrics_tenant_label"),
                parse_bool,
            )?,
            otlp_endpoint: field("otlp_endpoint", get("otlp_endpoint"), |v| {
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
            })?,
            password_hash_concurrency: field(
                "password_hash_concurrency",
                get("password_hash_concurrency"),
                |v| number_between(v, 1, 64).map(|n| n as usize),
            )?,
            login_attempts_per_minute: field(
                "login_attempts_per_minute",
                get("login_attempts_per_minute"),
                |v| number_between(v, 1, 10_000).map(|n| n as u32),
            )?,
            signups_per_hour: field("signups_per_hour", get("signups_per_hour"), |v| {
                number_between(v, 1, 10_000).map(|n| n as u32)
            })?,
            trusted_proxies: field("trusted_proxies", get("trusted_proxies"), |v| {
                AllowList::parse(v).map_err(|e| e.to_string())
            })?,
            http_body_timeout: field("http_body_timeout", get("http_body_timeout"), |v| {
                duration_between(v, Duration::from_millis(100), Duration::from_secs(600))
            })?,
            http_max_connections: field(
                "http_max_connections",
                get("http_max_connections"),
                |v| number_between(v, 16, 1_000_000).map(|n| n as usize),
            )?,
            metrics_bind: field("metrics_bind", get("metrics_bind"), |v| {
                if v.is_empty() {
                    return Ok(None);
                }
                v.parse::<SocketAddr>()
                    .map(Some)
                    .map_err(|_| "expected IP:PORT, e.g. 10.0.0.5:9100".to_owned())
            })?,
            delivery_proxy: field("delivery_proxy", get("delivery_proxy"), |v| {
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
            })?,
            secret_keys: secret_keys(get("secret_keys"), get("secret_keys_file"))?,
            metrics_token: field("metrics_token", get("metrics_token"), |v| {
                if v.is_empty() {
                    Ok(None)
                } else if v.len() < 16 || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    Err("expected at least 16 characters without spaces".to_owned())
                } else {
                    Ok(Some(SecretString::from(v.to_owned())))
                }
            })?,
            sources: Vec::new(),
            egress_grants: None,
        })
    }

    /// The circuit breaker every endpoint has (the dispatcher's, described on endpoint pages).
    pub fn breaker(&self) -> domain::breaker::BreakerConfig {
        domain::breaker::BreakerConfig {
            consecutive_failures: self.breaker_failures,
            failure_ratio: self.breaker_failure_ratio,
            open_for: self.breaker_open_for,
            ..Default::default()
        }
    }

    /// The operator's retention defaults.
    pub fn retention(&self) -> domain::retention::Retention {
        domain::retention::Retention {
            payload: self.payload_retention,
            metadata: self.metadata_retention,
        }
    }

    /// Where people reach hookd: `public_url`, or the bind address.
    pub fn public_url(&self) -> String {
        if self.public_url.is_empty() {
            format!("http://{}", self.bind)
        } else {
            self.public_url.clone()
        }
    }

    /// The effective settings as `name = value` lines, secrets redacted (`hookd config`).
    pub fn describe(&self) -> String {
        use secrecy::ExposeSecret;
        let fmt = match self.log_format {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        };
        [
            (
                "database_url",
                store::redact_url(self.database_url.expose_secret()),
            ),
            ("bind", self.bind.to_string()),
            ("max_payload_bytes", self.max_payload_bytes.to_string()),
            ("max_deliver_ahead", format_duration(self.max_deliver_ahead)),
            ("payload_retention", format_duration(self.payload_retention)),
            (
                "metadata_retention",
                format_duration(self.metadata_retention),
            ),
            ("max_retention", format_duration(self.max_retention)),
            ("prune_interval", format_duration(self.prune_interval)),
            (
                "endpoint_allow_networks",
                self.endpoint_allow_networks.to_string(),
            ),
            ("endpoint_https_only", self.endpoint_https_only.to_string()),
            ("signature_headers", self.signature_headers.to_string()),
            ("status_preset", self.status_preset.to_string()),
            ("roles", self.roles.to_string()),
            ("delivery_lease", format_duration(self.delivery_lease)),
            ("inbound_max_held", self.inbound_max_held.to_string()),
            (
                "inbound_replay_window",
                format_duration(self.inbound_replay_window),
            ),
            (
                "delivery_max_in_flight",
                self.delivery_max_in_flight.to_string(),
            ),
            ("delivery_batch_size", self.delivery_batch_size.to_string()),
            (
                "delivery_poll_interval",
                format_duration(self.delivery_poll_interval),
            ),
            ("public_url", self.public_url()),
            (
                "smtp_url",
                self.smtp_url
                    .as_ref()
                    .map(|u| store::redact_url(u.expose_secret()))
                    .unwrap_or_default(),
            ),
            ("smtp_from", self.smtp_from.clone()),
            (
                "endpoint_disable_after",
                format_duration(self.endpoint_disable_after),
            ),
            (
                "endpoint_warn_after",
                format_duration(self.endpoint_warn_after),
            ),
            (
                "health_sweep_interval",
                format_duration(self.health_sweep_interval),
            ),
            ("tenant_ingest_rate", self.tenant_ingest_rate.to_string()),
            ("tenant_ingest_burst", self.tenant_ingest_burst.to_string()),
            ("breaker_failures", self.breaker_failures.to_string()),
            (
                "breaker_failure_ratio",
                self.breaker_failure_ratio.to_string(),
            ),
            ("breaker_open_for", format_duration(self.breaker_open_for)),
            ("db_max_connections", self.db_max_connections.to_string()),
            ("storage_min_free", format_bytes(self.storage_min_free)),
            ("shutdown_timeout", format_duration(self.shutdown_timeout)),
            ("log_format", fmt.to_owned()),
            ("log_level", self.log_level.clone()),
            (
                "metrics_tenant_label",
                self.metrics_tenant_label.to_string(),
            ),
            (
                "otlp_endpoint",
                self.otlp_endpoint.clone().unwrap_or_default(),
            ),
            (
                "password_hash_concurrency",
                self.password_hash_concurrency.to_string(),
            ),
            (
                "login_attempts_per_minute",
                self.login_attempts_per_minute.to_string(),
            ),
            ("signups_per_hour", self.signups_per_hour.to_string()),
            ("trusted_proxies", self.trusted_proxies.to_string()),
            ("http_body_timeout", format_duration(self.http_body_timeout)),
            (
                "http_max_connections",
                self.http_max_connections.to_string(),
            ),
            (
                "metrics_bind",
                self.metrics_bind.map(|a| a.to_string()).unwrap_or_default(),
            ),
            (
                "delivery_proxy",
                self.delivery_proxy
                    .as_ref()
                    .map(|u| store::redact_url(u.expose_secret()))
                    .unwrap_or_default(),
            ),
            (
                "secret_keys",
                match &self.secret_keys {
                    Some(keys) => format!(
                        "(set: {}; {} seals)",
                        keys.ids().join(", "),
                        keys.current_id()
                    ),
                    None => String::new(),
                },
            ),
            (
                "metrics_token",
                if self.metrics_token.is_some() {
                    "(set)"
                } else {
                    ""
                }
                .to_owned(),
            ),
        ]
        .iter()
        .map(|(k, v)| format!("{k} = {v:?}\n"))
        .chain(
            self.egress_grants
                .iter()
                .flatten()
                .map(|(t, g)| format!("# egress grant: {} to tenant {t}\n", g.target)),
        )
        .chain(self.sources.iter().map(|d| {
            // As comments (the lines above read back as a file; sources are tables there), and
            // the scheme's name only: its secret is never printed.
            format!(
                "# source: {} (tenant {}, application {}, verification {})\n",
                d.spec.name,
                d.tenant,
                d.spec.app,
                d.spec.settings.scheme.name()
            )
        }))
        .collect()
    }
}

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

fn number_between(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
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
fn parse_bytes(v: &str) -> Result<u64, String> {
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
fn format_bytes(n: u64) -> String {
    let (suffix, unit) = BYTE_UNITS
        .iter()
        .find(|(_, unit)| n.is_multiple_of(*unit) && n >= *unit)
        .copied()
        .unwrap_or(("", 1));
    format!("{}{suffix}", n / unit)
}

fn duration_between(v: &str, lo: Duration, hi: Duration) -> Result<Duration, String> {
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

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected true or false".to_owned()),
    }
}

pub fn env_name(setting: &str) -> String {
    format!("HOOKD_{}", setting.to_ascii_uppercase())
}

const SECOND: Duration = Duration::from_secs(1);
const TEN_YEARS: Duration = Duration::from_secs(3650 * 86_400);

fn field<T>(
    setting: &'static str,
    raw: &Raw,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, ConfigError> {
    parse(raw.value.trim()).map_err(|reason| ConfigError::Invalid {
        setting,
        value: shown(setting, &raw.value),
        source_name: raw.source.clone(),
        reason,
    })
}

/// A setting's value as error messages may show it: URLs without their password, keys and
/// tokens not at all.
fn shown(setting: &str, value: &str) -> String {
    match setting {
        "database_url" | "smtp_url" | "delivery_proxy" => store::redact_url(value),
        "secret_keys" | "metrics_token" => "(hidden)".to_owned(),
        _ => value.to_owned(),
    }
}

/// `secret_keys`, or the keys in the file `secret_keys_file` names; not both.
fn secret_keys(keys: &Raw, file: &Raw) -> Result<Option<domain::seal::Keyring>, ConfigError> {
    let parse = |text: &str| domain::seal::Keyring::parse(text).map_err(|e| e.to_string());
    match (keys.value.trim(), file.value.trim()) {
        ("", "") => Ok(None),
        (_, "") => field("secret_keys", keys, |v| parse(v).map(Some)),
        ("", path) => field("secret_keys_file", file, |_| {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
            parse(&text).map(Some)
        }),
        _ => field("secret_keys_file", file, |_| {
            Err("set either secret_keys or secret_keys_file, not both".to_owned())
        }),
    }
}

/// A file's flat settings (name, value as text), its `[[sources]]` and `[[egress_grants]]`.
type FileSettings = (
    Vec<(String, String)>,
    Vec<DeclaredSource>,
    Vec<(domain::ids::TenantId, domain::egress::Grant)>,
);

/// Reads the file: its flat settings, scalars in their text form so that every layer parses
/// alike, and its `[[sources]]`.
fn read_file(path: &Path) -> Result<FileSettings, ConfigError> {
    let display = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: display.clone(),
        source,
    })?;
    let mut table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Toml {
            path: display.clone(),
            message: e.message().to_owned(),
        })?;
    let sources = match table.remove("sources") {
        Some(v) => declared_sources(v, &display)?,
        None => Vec::new(),
    };
    let grants = match table.remove("egress_grants") {
        Some(v) => declared_grants(v, &display)?,
        None => Vec::new(),
    };
    let values = table
        .into_iter()
        .map(|(k, v)| {
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(ConfigError::Toml {
                        path: display.clone(),
                        message: format!(
                            "{k} must be a string, number or boolean, not {}",
                            other.type_str()
                        ),
                    });
                }
            };
            Ok((k, value))
        })
        .collect::<Result<_, _>>()?;
    Ok((values, sources, grants))
}

/// Most sources one file declares.
const MAX_DECLARED_SOURCES: usize = 1000;

/// `[[sources]]`: each a table of `tenant` and the API body's members, checked as the API
/// checks them; a name twice for one tenant is refused.
fn declared_sources(value: toml::Value, path: &str) -> Result<Vec<DeclaredSource>, ConfigError> {
    let toml::Value::Array(items) = value else {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: "sources must be an array of tables: [[sources]]".to_owned(),
        });
    };
    if items.len() > MAX_DECLARED_SOURCES {
        return Err(ConfigError::Toml {
            path: path.to_owned(),
            message: format!("at most {MAX_DECLARED_SOURCES} sources"),
        });
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let toml::Value::Table(mut t) = item else {
            return Err(ConfigError::Toml {
                path: path.to_owned(),
                message: format!("sources[{i}] must be a table"),
            });
        };
        let origin = match t.get("name").and_then(toml::Value::as_str) {
            Some(name) => format!("sources[{i}] ({name:?}) in {path}"),
            None => format!("sources[{i}] in {path}"),
        };
        let fail = |message: String| ConfigError::Source {
            origin: origin.clone(),
            message,
        };
        let tenant = match t.remove("tenant") {
            Some(toml::Value::String(id)) => id
                .parse::<domain::ids::TenantId>()
                .map_err(|_| fail(format!("tenant {id:?} is not a tenant id (tnt_…)")))?,
            Some(_) => return Err(fail("tenant must be a tenant id (tnt_…)".to_owned())),
            None => {
                return Err(fail(
                    "tenant is missing: the id `hookd tenant create` printed (tnt_…)".to_owned(),
                ));
            }
        };
        let body: api::SourceIn = serde_json::to_value(&t)
            .and_then(serde_json::from_value)
            .map_err(|e| fail(e.to_string()))?;
        let spec = body.spec().map_err(|e| fail(e.to_string()))?;
        if !seen.insert((tenant, spec.name.clone())) {
            return Err(fail(format!(
                "source {:?} is declared twice for tenant {tenant}",
                spec.name
            )));
        }
        out.push(DeclaredSource {
            tenant,
            spec,
            origin,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn file(contents: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), contents).unwrap();
        f
    }

    #[test]
    fn egress_grants_in_the_file_are_read_and_checked() {
        let tenant = domain::ids::TenantId::new();
        let f = file(&format!(
            r#"
[[egress_grants]]
tenant = "{tenant}"
target = "10.20.0.5"
redis_prefix = "acme-"

[[egress_grants]]
tenant = "{tenant}"
target = "Worker.Internal"
"#
        ));
        let s = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap();
        let grants = s.egress_grants.as_ref().unwrap();
        assert_eq!(grants.len(), 2);
        assert_eq!(grants[0].1.namespace.redis_prefix.as_deref(), Some("acme-"));
        assert_eq!(grants[1].1.target.to_string(), "worker.internal");
        assert!(s.describe().contains("# egress grant: 10.20.0.5 to tenant"));
        // No file: the grants the file made are left as they are.
        let none = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert!(none.egress_grants.is_none());

        for (body, says) in [
            (
                format!("tenant = \"{tenant}\"\ntarget = \"10.0.0.0/33\""),
                "0 to 32",
            ),
            (
                format!("tenant = \"{tenant}\"\ntarget = \"a b\""),
                "host name",
            ),
            (
                "tenant = \"nope\"\ntarget = \"10.0.0.1\"".to_owned(),
                "tenant id",
            ),
            (
                format!("tenant = \"{tenant}\"\ntarget = \"10.0.0.1\"\nvhost = \"x\""),
                "unknown field",
            ),
            (
                format!("tenant = \"{tenant}\"\ntarget = \"10.0.0.1\"\nredis_prefix = \"a b\""),
                "redis prefix",
            ),
        ] {
            let f = file(&format!("[[egress_grants]]\n{body}\n"));
            let err = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("egress_grants[0]") && err.contains(says),
                "{body}: {err}"
            );
        }
    }

    #[test]
    fn sources_in_the_file_are_read_and_checked_by_the_apis_rules() {
        let tenant = domain::ids::TenantId::new();
        let f = file(&format!(
            r#"
bind = "127.0.0.1:9000"

[[sources]]
tenant = "{tenant}"
name = "stripe"
appId = "stripe-in"
eventType = "stripe.event"
verification = {{ scheme = "stripe", secret = "whsec_0123456789abcdef" }}
toleranceSecs = 600

[[sources]]
tenant = "{tenant}"
name = "orders"
appId = "orders-in"
eventType = "order.event"
verification = {{ scheme = "none" }}
ordering = {{ keyPointer = "/order_id", sequencePointer = "/version", holdGapSecs = 30 }}
"#
        ));
        let s = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.bind.to_string(), "127.0.0.1:9000");
        assert_eq!(s.sources.len(), 2);
        assert_eq!(s.sources[0].tenant, tenant);
        assert_eq!(s.sources[0].spec.app, "stripe-in");
        assert_eq!(
            s.sources[0].spec.settings.scheme,
            domain::inbound::Scheme::Stripe {
                secret: "whsec_0123456789abcdef".into()
            }
        );
        assert_eq!(s.sources[0].spec.settings.tolerance_secs, Some(600));
        assert_eq!(s.sources[1].spec.settings.ordering.hold_gap_secs, 30);
        assert!(
            s.sources[1]
                .origin
                .starts_with("sources[1] (\"orders\") in ")
        );
        let described = s.describe();
        assert!(described.contains("verification stripe"), "{described}");
        assert!(!described.contains("whsec_0123456789abcdef"), "{described}");
    }

    #[test]
    fn a_bad_source_in_the_file_stops_start_up_naming_it() {
        let tenant = domain::ids::TenantId::new();
        let source = |extra: &str| {
            format!(
                "[[sources]]\ntenant = \"{tenant}\"\nname = \"gh\"\nappId = \"a\"\neventType = \"e\"\n{extra}\n"
            )
        };
        let cases = [
            (
                source(r#"verification = { scheme = "github" }"#),
                vec!["sources[0] (\"gh\")", "verification", "secret"],
            ),
            (
                source(r#"verification = { scheme = "nope" }"#),
                vec!["sources[0] (\"gh\")", "verification", "nope"],
            ),
            (
                source("verification = { scheme = \"none\" }\napp = \"x\""),
                vec!["sources[0] (\"gh\")", "unknown field `app`"],
            ),
            (
                source("verification = { scheme = \"none\" }\nordering = { holdGapSecs = 7200 }"),
                vec!["ordering"],
            ),
            (
                "[[sources]]\nname = \"gh\"\n".to_owned(),
                vec!["sources[0] (\"gh\")", "tenant is missing"],
            ),
            (
                "[[sources]]\ntenant = \"t1\"\n".to_owned(),
                vec!["sources[0]", "not a tenant id"],
            ),
            (
                format!(
                    "{}{}",
                    source(r#"verification = { scheme = "none" }"#),
                    source(r#"verification = { scheme = "none" }"#)
                ),
                vec!["sources[1] (\"gh\")", "declared twice"],
            ),
            ("sources = \"stripe\"".to_owned(), vec!["array of tables"]),
        ];
        // A secret where a list belongs: the message says so without repeating it.
        let f = file(&source(
            r#"verification = { scheme = "standard-webhooks", secrets = "whsec_leak" }"#,
        ));
        let err = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected a sequence"), "{err}");
        assert!(!err.contains("whsec_leak"), "{err}");
        for (text, words) in cases {
            let f = file(&text);
            let err = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default())
                .unwrap_err()
                .to_string();
            for w in words {
                assert!(
                    err.contains(w),
                    "{err:?} should mention {w:?}; file:\n{text}"
                );
            }
        }
    }

    #[test]
    fn sizes_read_with_units_and_print_back_the_same() {
        assert_eq!(parse_bytes("0"), Ok(0));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("64MiB"), Ok(64 << 20));
        assert_eq!(parse_bytes("2 GiB"), Ok(2 << 30));
        assert_eq!(parse_bytes("512KiB"), Ok(512 << 10));
        for bad in ["", "MiB", "-1", "1.5GiB", "64MB", "2048GiB"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
        for n in [0, 1000, 64 << 20, 3 << 30, (1 << 20) + 1] {
            assert_eq!(parse_bytes(&format_bytes(n)), Ok(n), "{n}");
        }
        assert_eq!(format_bytes(64 << 20), "64MiB");
    }

    #[test]
    fn the_early_warning_comes_before_the_disable_or_the_setting_is_refused() {
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.endpoint_warn_after, Duration::from_secs(86_400));
        assert!(s.describe().contains("endpoint_warn_after = \"1d\""));
        let ok = env(&[
            ("HOOKD_ENDPOINT_WARN_AFTER", "1h"),
            ("HOOKD_ENDPOINT_DISABLE_AFTER", "2h"),
        ]);
        let s = Settings::load_from(None, &ok, &Overrides::default()).unwrap();
        assert_eq!(s.endpoint_warn_after, Duration::from_secs(3_600));
        // Not chosen, with a disable window of a day or less: halfway through it.
        let short = env(&[("HOOKD_ENDPOINT_DISABLE_AFTER", "12h")]);
        let s = Settings::load_from(None, &short, &Overrides::default()).unwrap();
        assert_eq!(s.endpoint_warn_after, Duration::from_secs(6 * 3_600));
        for (warn, disable) in [("120h", "120h"), ("2d", "1d"), ("25h", "24h")] {
            let vars = [
                ("HOOKD_ENDPOINT_WARN_AFTER", warn),
                ("HOOKD_ENDPOINT_DISABLE_AFTER", disable),
            ];
            let err = Settings::load_from(None, &env(&vars), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("invalid endpoint_warn_after")
                    && err.contains("(from HOOKD_ENDPOINT_WARN_AFTER)")
                    && err.contains("must be less than endpoint_disable_after")
                    && err.contains("from HOOKD_ENDPOINT_DISABLE_AFTER"),
                "{err}"
            );
        }
    }

    #[test]
    fn defaults_apply_with_nothing_set() {
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.database_url.expose_secret(), "sqlite://data/hookd.db");
        assert_eq!(s.bind.to_string(), "127.0.0.1:8080");
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.shutdown_timeout, Duration::from_secs(30));
        assert_eq!(s.max_payload_bytes, 1024 * 1024);
        assert_eq!(s.storage_min_free, 64 * 1024 * 1024);
        assert!(s.endpoint_allow_networks.is_empty());
        assert!(!s.endpoint_https_only);
    }

    #[test]
    fn tenant_label_and_otlp_endpoint_parse_and_reject_bad_values() {
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert!(!s.metrics_tenant_label);
        assert_eq!(s.otlp_endpoint, None);
        let e = env(&[
            ("HOOKD_METRICS_TENANT_LABEL", "true"),
            ("HOOKD_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
        ]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        assert!(s.metrics_tenant_label);
        assert_eq!(s.otlp_endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert!(
            s.describe()
                .contains("otlp_endpoint = \"http://127.0.0.1:4318\"")
        );
        for (var, bad) in [
            ("HOOKD_OTLP_ENDPOINT", "127.0.0.1:4318"),
            ("HOOKD_OTLP_ENDPOINT", "grpc://collector:4317"),
            ("HOOKD_METRICS_TENANT_LABEL", "maybe"),
        ] {
            let err = Settings::load_from(None, &env(&[(var, bad)]), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&var[6..].to_ascii_lowercase()),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn roles_parse_and_reject_unknown_ones() {
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.roles.to_string(), "api,dispatcher,scheduler");
        let e = env(&[("HOOKD_ROLES", "dispatcher")]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        assert!(s.roles.dispatcher && !s.roles.api && !s.roles.scheduler);
        for bad in ["", "api,web", "workers"] {
            let e = env(&[("HOOKD_ROLES", bad)]);
            let err = Settings::load_from(None, &e, &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains("roles"), "{bad:?}: {err}");
        }
        let e = env(&[("HOOKD_DELIVERY_LEASE", "100ms")]);
        assert!(Settings::load_from(None, &e, &Overrides::default()).is_err());
    }

    #[test]
    fn signature_headers_default_to_both_and_refuse_other_words() {
        use domain::signing::SignatureHeaders;
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.signature_headers, SignatureHeaders::Both);
        let e = env(&[("HOOKD_SIGNATURE_HEADERS", "svix")]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        assert_eq!(s.signature_headers, SignatureHeaders::Svix);
        let e = env(&[("HOOKD_SIGNATURE_HEADERS", "stripe")]);
        let err = Settings::load_from(None, &e, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("signature_headers") && err.contains("stripe"),
            "{err}"
        );
    }

    #[test]
    fn allow_networks_and_https_only_parse() {
        let e = env(&[
            ("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8,::1/128"),
            ("HOOKD_ENDPOINT_HTTPS_ONLY", "true"),
        ]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        assert!(
            s.endpoint_allow_networks
                .contains("127.0.0.1".parse().unwrap())
        );
        assert!(
            !s.endpoint_allow_networks
                .contains("10.0.0.1".parse().unwrap())
        );
        assert!(s.endpoint_https_only);
    }

    #[test]
    fn file_beats_default_env_beats_file_flag_beats_env() {
        let f = file("bind = \"127.0.0.1:9000\"\nlog_format = \"json\"\ndb_max_connections = 4\n");
        let s = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.bind.port(), 9000);
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.db_max_connections, 4);

        let e = env(&[("HOOKD_BIND", "127.0.0.1:9001")]);
        let s = Settings::load_from(Some(f.path()), &e, &Overrides::default()).unwrap();
        assert_eq!(s.bind.port(), 9001);
        assert_eq!(
            s.log_format,
            LogFormat::Json,
            "file value survives where env is silent"
        );

        let o = Overrides {
            bind: Some("127.0.0.1:9002".into()),
            ..Default::default()
        };
        let s = Settings::load_from(Some(f.path()), &e, &o).unwrap();
        assert_eq!(s.bind.port(), 9002);
    }

    #[test]
    fn the_breaker_failure_ratio_is_a_share_above_zero() {
        let s = Settings::load_from(None, &env(&[]), &Overrides::default()).unwrap();
        assert_eq!(s.breaker_failure_ratio, 0.5);
        let e = env(&[("HOOKD_BREAKER_FAILURE_RATIO", "1")]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        assert_eq!(s.breaker_failure_ratio, 1.0);
        for bad in ["0", "1.5", "half"] {
            let e = env(&[("HOOKD_BREAKER_FAILURE_RATIO", bad)]);
            let err = Settings::load_from(None, &e, &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains("breaker_failure_ratio"), "{bad}: {err}");
        }
    }

    #[test]
    fn invalid_values_name_the_setting_and_source() {
        let e = env(&[("HOOKD_BIND", "localhost")]);
        let err = Settings::load_from(None, &e, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("bind") && err.contains("HOOKD_BIND") && err.contains("localhost"),
            "{err}"
        );

        let f = file("shutdown_timeout = \"soon\"\n");
        let err = Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("shutdown_timeout") && err.contains("in "),
            "{err}"
        );

        let e = env(&[("HOOKD_DATABASE_URL", "mysql://root:pw@db/x")]);
        let err = Settings::load_from(None, &e, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("database_url") && !err.contains("pw"),
            "password redacted: {err}"
        );

        let e = env(&[("HOOKD_DB_MAX_CONNECTIONS", "0")]);
        assert!(Settings::load_from(None, &e, &Overrides::default()).is_err());
        let e = env(&[("HOOKD_LOG_FORMAT", "xml")]);
        assert!(Settings::load_from(None, &e, &Overrides::default()).is_err());
        let e = env(&[("HOOKD_ENDPOINT_ALLOW_NETWORKS", "127.0.0.0/8, banana")]);
        let err = Settings::load_from(None, &e, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("endpoint_allow_networks") && err.contains("banana"),
            "{err}"
        );
        let e = env(&[("HOOKD_MAX_PAYLOAD_BYTES", "12")]);
        assert!(Settings::load_from(None, &e, &Overrides::default()).is_err());
        let e = env(&[("HOOKD_ENDPOINT_HTTPS_ONLY", "maybe")]);
        assert!(Settings::load_from(None, &e, &Overrides::default()).is_err());
    }

    #[test]
    fn bad_files_are_reported() {
        let f = file("bind = [1, 2]\n");
        assert!(Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).is_err());
        let f = file("this is not toml");
        let err =
            Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap_err();
        assert!(matches!(err, ConfigError::Toml { .. }), "{err}");
        let f = file("bnid = \"x\"\n");
        let err =
            Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap_err();
        assert!(
            err.to_string().contains("unknown setting \"bnid\""),
            "{err}"
        );
        let missing = Path::new("/nonexistent/hookd.toml");
        let err = Settings::load_from(Some(missing), &env(&[]), &Overrides::default()).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }));
    }

    #[test]
    fn describe_redacts_the_database_password() {
        let e = env(&[("HOOKD_DATABASE_URL", "postgres://u:hunter2@db/hookd")]);
        let s = Settings::load_from(None, &e, &Overrides::default()).unwrap();
        let text = s.describe();
        assert!(
            text.contains("postgres://u:***@db/hookd") && !text.contains("hunter2"),
            "{text}"
        );
    }

    #[test]
    fn describe_shows_every_setting() {
        let e = env(&[(
            "HOOKD_DELIVERY_PROXY",
            "http://user:hunter2@proxy.internal:3128",
        )]);
        let text = Settings::load_from(None, &e, &Overrides::default())
            .unwrap()
            .describe();
        for spec in SETTINGS {
            // `secret_keys_file` is read into `secret_keys`, which is shown.
            if spec.name != "secret_keys_file" {
                assert!(
                    text.lines()
                        .any(|l| l.starts_with(&format!("{} = ", spec.name))),
                    "{} missing from:\n{text}",
                    spec.name
                );
            }
        }
        assert!(
            text.contains("delivery_proxy = \"http://user:***@proxy.internal:3128")
                && !text.contains("hunter2"),
            "{text}"
        );
    }

    const KEY: &str = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";

    #[test]
    fn secret_keys_come_from_the_setting_or_a_file_and_are_never_shown() {
        let load =
            |pairs: &[(&str, &str)]| Settings::load_from(None, &env(pairs), &Overrides::default());
        assert!(load(&[]).unwrap().secret_keys.is_none());
        let old = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let both = format!("{KEY},{old}");
        let s = load(&[("HOOKD_SECRET_KEYS", &both)]).unwrap();
        assert_eq!(s.secret_keys.as_ref().unwrap().ids(), vec!["k2", "k1"]);
        let text = s.describe();
        assert!(text.contains("k2, k1; k2 seals"), "{text}");
        assert!(
            !text.contains("ICEiIy") && !text.contains("AAECAw"),
            "{text}"
        );
        let f = file(&format!("# rotated 2026-11\n{KEY}\n{old}\n"));
        let path = f.path().display().to_string();
        let s = load(&[("HOOKD_SECRET_KEYS_FILE", &path)]).unwrap();
        assert_eq!(s.secret_keys.unwrap().current_id(), "k2");
        // Errors name the setting, never the key.
        let short = "k3:c2hvcnRrZXlzaG9ydGtleQ==";
        let err = load(&[("HOOKD_SECRET_KEYS", short)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("secret_keys") && err.contains("at least 32"),
            "{err}"
        );
        assert!(!err.contains("c2hvcnRr"), "{err}");
        let err = load(&[
            ("HOOKD_SECRET_KEYS", KEY),
            ("HOOKD_SECRET_KEYS_FILE", &path),
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("not both"), "{err}");
        assert!(!err.contains("ICEiIy"), "{err}");
        let err = load(&[("HOOKD_SECRET_KEYS_FILE", "/nonexistent/keys")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot read it"), "{err}");
    }
}
