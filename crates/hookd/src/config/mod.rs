//! Settings: defaults < TOML file (`--config`) < `HOOKD_*` environment < command-line flags,
//! layered by figment (`layers`). Each setting is declared once, in the `settings!` list
//! below: its name (the file key; the variable is `HOOKD_` + upper case), type, default, how
//! it may be shown, what it means, how its text is read and how it is printed. That list
//! makes the struct, the defaults, the README table's rows (checked by a test) and `hookd
//! config`. Every value, whatever its layer, goes through the same parser, and an invalid one
//! stops start-up with a message naming the setting and where it came from.

mod declared;
mod layers;
mod values;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use domain::duration::format_duration;
use domain::endpoint_url::AllowList;
use secrecy::SecretString;

pub use declared::DeclaredSource;
pub use layers::Origin;
pub use values::Roles;

use layers::Layers;
use values::*;

/// One setting as the README's configuration table and `hookd config` list it.
pub struct SettingSpec {
    /// The file key; the environment variable is [`env_name`] of it.
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    /// How its value may appear in messages.
    pub shown: Shown,
}

/// How a setting's value may appear in error messages.
#[derive(Debug, Clone, Copy)]
pub enum Shown {
    Plain,
    /// A URL that may hold a password: shown without it.
    Url,
    /// A key or token: never shown.
    Hidden,
}

impl Shown {
    fn redact(self, value: &str) -> String {
        match self {
            Shown::Plain => value.to_owned(),
            Shown::Url => store::redact_url(value),
            Shown::Hidden => "(hidden)".to_owned(),
        }
    }
}

/// The declaration: `name: Type = "default", Shown, "meaning", parser, printer;` — the parser
/// takes the trimmed text (from any layer), the printer gives what `hookd config` shows.
macro_rules! settings {
    ($($name:ident: $ty:ty = $default:literal, $shown:ident, $help:literal, $parse:expr, $show:expr;)*) => {
        pub const SETTINGS: &[SettingSpec] = &[
            $(SettingSpec {
                name: stringify!($name),
                default: $default,
                help: $help,
                shown: Shown::$shown,
            },)*
        ];

        #[derive(Debug, Clone)]
        pub struct Settings {
            $(pub $name: $ty,)*
            /// The file's `[[sources]]`: made or brought in line with it at every start.
            pub sources: Vec<DeclaredSource>,
            /// The file's `[[egress_grants]]`, when a file was given: at every start the grants
            /// the file made become exactly these (see `store::System::declare_egress_grants`).
            pub egress_grants: Option<Vec<(domain::ids::TenantId, domain::egress::Grant)>>,
            /// Where each setting's value came from.
            pub origins: BTreeMap<&'static str, Origin>,
        }

        impl Settings {
            /// Every declared setting parsed from the layers, with its origin.
            fn parse(layers: &Layers) -> Result<Settings, ConfigError> {
                let mut origins = BTreeMap::new();
                $(
                    let ($name, origin) =
                        layers.field::<$ty>(stringify!($name), Shown::$shown, $parse)?;
                    origins.insert(stringify!($name), origin);
                )*
                Ok(Settings {
                    $($name,)*
                    sources: Vec::new(),
                    egress_grants: None,
                    origins,
                })
            }

            /// Each setting's name and value as `hookd config` prints it.
            fn shown(&self) -> Vec<(&'static str, String)> {
                vec![$((stringify!($name), show_with::<$ty>($show, &self.$name)),)*]
            }
        }
    };
}

/// Applies a printer to a value of the declared type (it pins the printer's type).
fn show_with<T>(show: impl Fn(&T) -> String, value: &T) -> String {
    show(value)
}

settings! {
    database_url: SecretString = "sqlite://data/hookd.db", Url,
        "sqlite://PATH (file and directory are created) or postgres://USER:PASS@HOST/DB",
        database_url, show::url;
    bind: SocketAddr = "127.0.0.1:8080", Plain,
        "address and port the HTTP server listens on",
        socket_addr, show::plain;
    max_payload_bytes: usize = "1048576", Plain,
        "largest message payload accepted, in bytes (1 KiB to 64 MiB); larger ones answer 413",
        |v| whole(v, 1024, 64 * 1024 * 1024), show::plain;
    max_deliver_ahead: Duration = "30d", Plain,
        "how far in the future a message's deliverAt may be (1m to 365d); later answers 422",
        |v| duration_between(v, MINUTE, YEAR), show::duration;
    payload_retention: Duration = "30d", Plain,
        "how long message payloads and attempt response bodies are kept, unless a tenant or application chooses (1s to 3650d); then they read as expunged",
        |v| duration_between(v, SECOND, TEN_YEARS), show::duration;
    metadata_retention: Duration = "90d", Plain,
        "how long messages, their deliveries and attempts are kept, unless a tenant or application chooses (1s to 3650d, at least payload_retention); live deliveries are never removed",
        |v| duration_between(v, SECOND, TEN_YEARS), show::duration;
    max_retention: Duration = "90d", Plain,
        "the longest retention, in whole days, a tenant or application may choose for either kind (1d to 3650d)",
        |v| duration_between(v, DAY, TEN_YEARS), show::duration;
    prune_interval: Duration = "1m", Plain,
        "how often expired payloads and messages are removed (1s to 1d)",
        |v| duration_between(v, SECOND, DAY), show::duration;
    endpoint_allow_networks: AllowList = "", Plain,
        "comma-separated CIDR networks endpoint URLs may point into despite the SSRF guard, e.g. 127.0.0.0/8,10.0.0.0/8",
        allow_list, show::plain;
    endpoint_https_only: bool = "false", Plain,
        "true to refuse http:// endpoint URLs",
        parse_bool, show::plain;
    status_preset: domain::classify::StatusPreset = "default", Plain,
        "how failures are treated unless an endpoint chooses: default (400, 401, 403, 410, 413, 415, 422 end retries at once) or retry-all-but-410 (Svix's rule: everything but 410 is retried)",
        |v| v.parse().map_err(|_| "expected default or retry-all-but-410".to_owned()), show::plain;
    signature_headers: domain::signing::SignatureHeaders = "both", Plain,
        "signature header names deliveries carry unless an endpoint chooses: both (webhook-* and Svix's svix-*), webhook or svix",
        |v| v.parse().map_err(|_| "expected both, webhook or svix".to_owned()), show::plain;
    roles: Roles = "api,dispatcher,scheduler", Plain,
        "what `hookd serve` runs: any of api (REST API, dashboard and inbound sources), receive (only inbound sources, POST /in/{source}), dispatcher (delivery workers), scheduler (background jobs)",
        Roles::parse, show::plain;
    delivery_lease: Duration = "30s", Plain,
        "how long a claimed delivery stays reserved without renewal; after a crash, work returns to the queue within this time (1s-10m)",
        |v| duration_between(v, SECOND, 10 * MINUTE), show::duration;
    inbound_max_held: u64 = "10000", Plain,
        "most events one inbound source holds ahead of gaps in their keys' sequences, per receiving process (1-1000000); past it an event that would be held answers 429 and the sender retries",
        |v| whole(v, 1, 1_000_000), show::plain;
    inbound_replay_window: Duration = "24h", Plain,
        "how long a github source, or an hmac one without timestamp_header or with id_header, knows a request by the digest of its signed bytes, so a copy sent again with a new id header is a duplicate (1m-30d)",
        |v| duration_between(v, MINUTE, 30 * DAY), show::duration;
    delivery_max_in_flight: usize = "1024", Plain,
        "most HTTP requests in flight from one dispatcher process (1-100000)",
        |v| whole(v, 1, 100_000), show::plain;
    delivery_batch_size: u64 = "256", Plain,
        "most deliveries claimed per database round trip (1-10000)",
        |v| whole(v, 1, 10_000), show::plain;
    delivery_poll_interval: Duration = "200ms", Plain,
        "how often a dispatcher looks for due work when not woken (retries coming due, other processes' messages)",
        |v| duration_between(v, 10 * MILLI, MINUTE), show::duration;
    public_url: String = "", Plain,
        "where people reach hookd, for links in emails (default http://BIND)",
        public_url, show::plain;
    smtp_url: Option<SecretString> = "", Url,
        "SMTP server for notifications: smtp://[user:pass@]host[:port] (plain; credentials then travel unencrypted), add ?tls=starttls for STARTTLS, smtps://host for TLS; empty keeps mail in the outbox",
        smtp_url, show::optional_url;
    smtp_from: String = "hookd@localhost.localdomain", Plain,
        "the From address of notification emails",
        email, show::plain;
    endpoint_disable_after: Duration = "120h", Plain,
        "an endpoint failing with no success for this long is disabled and its tenant emailed",
        |v| duration_between(v, SECOND, YEAR), show::duration;
    endpoint_warn_after: Duration = "24h", Plain,
        "an endpoint failing with no success for this long gets one early warning per failure streak (an email and the endpoint.failing operational event); less than endpoint_disable_after",
        |v| duration_between(v, SECOND, YEAR), show::duration;
    health_sweep_interval: Duration = "1m", Plain,
        "how often the scheduler looks for endpoints to disable",
        |v| duration_between(v, 100 * MILLI, DAY), show::duration;
    tenant_ingest_rate: u32 = "5000", Plain,
        "messages per second a tenant may send, across all API processes, unless the tenant has its own limit; over it, 429 with Retry-After",
        |v| whole(v, 1, 10_000_000), show::plain;
    tenant_ingest_burst: u32 = "10000", Plain,
        "how many messages a tenant may send at once above its rate",
        |v| whole(v, 1, 10_000_000), show::plain;
    breaker_failures: u32 = "5", Plain,
        "consecutive failed attempts that open an endpoint's circuit breaker (1-1000); a failure ratio (breaker_failure_ratio) over 60 s with at least 10 attempts opens it too",
        |v| whole(v, 1, 1000), show::plain;
    breaker_failure_ratio: f64 = "0.5", Plain,
        "share of failed attempts over 60 s (with at least 10 attempts) that opens an endpoint's circuit breaker (above 0, at most 1)",
        ratio, show::plain;
    breaker_open_for: Duration = "30s", Plain,
        "how long an open breaker holds an endpoint's deliveries (without counting attempts) before one probe is let through",
        |v| duration_between(v, 100 * MILLI, DAY), show::duration;
    db_max_connections: u32 = "16", Plain,
        "size of the database connection pool (1-1000)",
        |v| whole(v, 1, 1000), show::plain;
    storage_min_free: u64 = "64MiB", Plain,
        "SQLite: new messages answer 503 storage_full while the database's disk has less free space than this (bytes, or KiB/MiB/GiB; 0: never), so deliveries keep the rest",
        parse_bytes, show::bytes;
    shutdown_timeout: Duration = "30s", Plain,
        "on SIGINT/SIGTERM, how long in-flight requests may take to finish",
        duration, show::duration;
    log_format: LogFormat = "text", Plain,
        "text or json (one JSON object per line on stderr)",
        log_format, show::log_format;
    metrics_tenant_label: bool = "false", Plain,
        "true to label /metrics' attempt and ingest series by tenant id (one series set per tenant seen since start; for deployments with few tenants)",
        parse_bool, show::plain;
    otlp_endpoint: Option<String> = "", Plain,
        "an OpenTelemetry collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318: log records passing log_level are also exported to ENDPOINT/v1/logs and traces of requests and delivery attempts to ENDPOINT/v1/traces (OTLP protobuf); empty exports nothing",
        otlp_endpoint, show::optional;
    password_hash_concurrency: usize = "2", Plain,
        "password checks (argon2, 19 MiB each) run at once in this process (1-64); beyond that and a short line, login and sign-up answer 429 with Retry-After",
        |v| whole(v, 1, 64), show::plain;
    login_attempts_per_minute: u32 = "20", Plain,
        "password checks one client address (an IPv6 /64) gets per minute, whatever the email (1-10000); over it a login waits for its turn (429 with Retry-After only past 30 s), so the right password still logs in",
        |v| whole(v, 1, 10_000), show::plain;
    signups_per_hour: u32 = "10", Plain,
        "sign-ups one client address (an IPv6 /64) may make per hour (1-10000); over it, 429 with Retry-After",
        |v| whole(v, 1, 10_000), show::plain;
    trusted_proxies: AllowList = "", Plain,
        "comma-separated CIDR networks of reverse proxies whose X-Forwarded-For is believed for the client address; empty believes no one",
        allow_list, show::plain;
    http_body_timeout: Duration = "10s", Plain,
        "longest time a client may take to send a request body, from the end of its headers (100ms-10m); a slower request is answered 408 and its connection closed",
        |v| duration_between(v, 100 * MILLI, 10 * MINUTE), show::duration;
    http_workers: usize = "0", Plain,
        "threads serving HTTP (0-1024); 0: half the cores (at least one) in a process that also delivers, so that the API leaves the dispatcher room, every core in one that does not",
        |v| whole(v, 0, 1024), show::plain;
    http_max_connections: usize = "10000", Plain,
        "most open HTTP connections the server keeps (16-1000000); further ones wait in the listen backlog",
        |v| whole(v, 16, 1_000_000), show::plain;
    metrics_bind: Option<SocketAddr> = "", Plain,
        "IP:PORT to serve /metrics on instead of the main address (e.g. a private interface); empty serves it on bind, except in a process with the receive role and not the api role (the public edge), which serves it on bind only with metrics_token",
        optional_socket_addr, show::optional;
    metrics_token: Option<SecretString> = "", Hidden,
        "when set, /metrics answers only requests with Authorization: Bearer TOKEN (401 otherwise)",
        metrics_token, show::set;
    delivery_proxy: Option<SecretString> = "", Url,
        "send every delivery through this proxy: http://HOST:PORT, https://HOST:PORT or socks5://HOST:PORT (user:pass@ allowed); it must enforce egress rules itself, as it resolves endpoint names. HTTP_PROXY and the like are never used",
        delivery_proxy, show::optional_url;
    secret_keys: Option<domain::seal::Keyring> = "", Hidden,
        "keys that seal endpoint secrets and header values at rest: `id:base64` (32+ random bytes, e.g. `k1:$(openssl rand -base64 32)`), several separated by commas; the first seals, the others only open (rotation: put the new key first, run `hookd rekey`, then drop the old one). Empty on SQLite: the key file hookd.key beside the database, made on first start. Required on PostgreSQL",
        keyring, show::keyring;
    secret_keys_file: Option<PathBuf> = "", Plain,
        "a file holding secret_keys (one key per line), e.g. a mounted Docker or Kubernetes secret; instead of secret_keys",
        optional_path, show::optional_path;
    log_level: String = "info", Plain,
        "a tracing filter: error, warn, info, debug, or e.g. info,store=debug",
        log_level, show::plain;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
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

/// Overrides from command-line flags (the highest layer).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub database_url: Option<String>,
    pub bind: Option<String>,
    pub roles: Option<String>,
}

pub fn env_name(setting: &str) -> String {
    format!("HOOKD_{}", setting.to_ascii_uppercase())
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
        let flags: Vec<(&'static str, &str)> = [
            ("database_url", &overrides.database_url),
            ("bind", &overrides.bind),
            ("roles", &overrides.roles),
        ]
        .into_iter()
        .filter_map(|(name, v)| Some((name, v.as_deref()?)))
        .collect();
        let layers = Layers::merge(file, env, &flags)?;
        let mut settings = Self::parse(&layers)?;
        if let Some(path) = file {
            let display = path.display().to_string();
            if let Some(v) = layers.table("sources")? {
                settings.sources = declared::declared_sources(v, &display)?;
            }
            settings.egress_grants = Some(match layers.table("egress_grants")? {
                Some(v) => declared::declared_grants(v, &display)?,
                None => Vec::new(),
            });
        }
        settings.check_retention(&layers)?;
        settings.check_warning(&layers)?;
        settings.read_secret_keys_file(&layers)?;
        if settings.public_url.is_empty() {
            settings.public_url = format!("http://{}", settings.bind);
        }
        Ok(settings)
    }

    /// An error about `setting`'s value, naming where it came from.
    fn invalid(&self, layers: &Layers, setting: &'static str, reason: String) -> ConfigError {
        let shown = SETTINGS
            .iter()
            .find(|s| s.name == setting)
            .map_or(Shown::Hidden, |s| s.shown);
        let (text, origin) = layers
            .raw(setting)
            .unwrap_or_else(|_| (String::new(), Origin::Default));
        ConfigError::Invalid {
            setting,
            value: shown.redact(&text),
            source_name: origin.describe(setting),
            reason,
        }
    }

    /// A payload cannot outlive its message.
    fn check_retention(&self, layers: &Layers) -> Result<(), ConfigError> {
        if self.metadata_retention < self.payload_retention {
            return Err(self.invalid(
                layers,
                "metadata_retention",
                format!(
                    "shorter than payload_retention ({}): a payload cannot outlive its message",
                    format_duration(self.payload_retention)
                ),
            ));
        }
        Ok(())
    }

    /// The early warning comes before the disable.
    fn check_warning(&mut self, layers: &Layers) -> Result<(), ConfigError> {
        if self.endpoint_warn_after >= self.endpoint_disable_after
            && self.origins["endpoint_warn_after"] == Origin::Default
        {
            // Not chosen, and a short disable window: warn halfway through it (a deployment
            // with endpoint_disable_after of a day or less still starts as before).
            self.endpoint_warn_after = self.endpoint_disable_after / 2;
        }
        if self.endpoint_warn_after >= self.endpoint_disable_after {
            return Err(self.invalid(
                layers,
                "endpoint_warn_after",
                format!(
                    "must be less than endpoint_disable_after ({}, from {}): the warning comes before the disable",
                    format_duration(self.endpoint_disable_after),
                    self.origins["endpoint_disable_after"].describe("endpoint_disable_after")
                ),
            ));
        }
        Ok(())
    }

    /// `secret_keys`, or the keys in the file `secret_keys_file` names; not both.
    fn read_secret_keys_file(&mut self, layers: &Layers) -> Result<(), ConfigError> {
        let Some(path) = &self.secret_keys_file else {
            return Ok(());
        };
        if self.secret_keys.is_some() {
            let reason = "set either secret_keys or secret_keys_file, not both".to_owned();
            return Err(self.invalid(layers, "secret_keys_file", reason));
        }
        let keys = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|text| domain::seal::Keyring::parse(&text).map_err(|e| e.to_string()));
        match keys {
            Ok(keys) => {
                self.secret_keys = Some(keys);
                // The keys came from where the file's name did.
                let from = self.origins["secret_keys_file"].clone();
                self.origins.insert("secret_keys", from);
                Ok(())
            }
            Err(reason) => Err(self.invalid(layers, "secret_keys_file", reason)),
        }
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
        self.public_url.clone()
    }

    /// The effective settings as `name = value  # where from` lines, secrets redacted
    /// (`hookd config`); the lines read back as a TOML file.
    pub fn describe(&self) -> String {
        self.shown()
            .into_iter()
            .map(|(k, v)| {
                let from = self.origins.get(k).map(Origin::comment).unwrap_or_default();
                format!("{k} = {v:?}  # {from}\n")
            })
            .chain(
                self.egress_grants
                    .iter()
                    .flatten()
                    .map(|(t, g)| format!("# egress grant: {} to tenant {t}\n", g.target)),
            )
            .chain(self.sources.iter().map(|d| {
                // As comments (sources are tables in the file), and the scheme's name only:
                // its secret is never printed.
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
        // A syntax error is reported without the line it is on, which may hold a secret.
        let f = file("metrics_token = \"0123456789abcdef-secret\nbind = 1\n");
        let err =
            Settings::load_from(Some(f.path()), &env(&[]), &Overrides::default()).unwrap_err();
        assert!(matches!(err, ConfigError::Toml { .. }), "{err}");
        assert!(!err.to_string().contains("0123456789abcdef"), "{err}");
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
    fn describe_says_where_each_value_came_from() {
        let f = file("bind = \"127.0.0.1:9000\"\nlog_format = \"json\"\ndb_max_connections = 4\n");
        let e = env(&[
            ("HOOKD_LOG_FORMAT", "text"),
            ("HOOKD_METRICS_TOKEN", "0123456789abcdef-x"),
        ]);
        let o = Overrides {
            roles: Some("api".into()),
            ..Default::default()
        };
        let s = Settings::load_from(Some(f.path()), &e, &o).unwrap();
        let text = s.describe();
        let line = |name: &str| {
            text.lines()
                .find(|l| l.starts_with(&format!("{name} = ")))
                .unwrap_or_else(|| panic!("{name} missing from:\n{text}"))
                .to_owned()
        };
        let path = f.path().display();
        assert_eq!(
            line("bind"),
            format!("bind = \"127.0.0.1:9000\"  # from {path}")
        );
        assert_eq!(
            line("db_max_connections"),
            format!("db_max_connections = \"4\"  # from {path}")
        );
        assert_eq!(
            line("log_format"),
            "log_format = \"text\"  # from HOOKD_LOG_FORMAT"
        );
        assert_eq!(line("roles"), "roles = \"api\"  # from --roles");
        assert_eq!(
            line("smtp_from"),
            "smtp_from = \"hookd@localhost.localdomain\"  # default"
        );
        assert_eq!(
            line("metrics_token"),
            "metrics_token = \"(set)\"  # from HOOKD_METRICS_TOKEN"
        );
        assert!(!text.contains("0123456789abcdef"), "{text}");
        // The lines read back as a file, comments and all.
        let back: toml::Table = text.parse().unwrap();
        assert_eq!(back["bind"].as_str(), Some("127.0.0.1:9000"));
    }

    /// The README's configuration table: each row's file key, variable and default cell.
    fn readme_rows() -> Vec<(String, String, String)> {
        let readme = include_str!("../../../../README.md");
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("README has a Configuration section");
        section
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split(" | ").map(str::trim).collect();
                let name = cells.first()?.strip_prefix("| `")?.strip_suffix('`')?;
                let env = cells.get(1)?.trim_matches('`');
                Some((name.to_owned(), env.to_owned(), cells.get(2)?.to_string()))
            })
            .collect()
    }

    #[test]
    fn the_readme_table_lists_every_setting_with_its_default_and_no_other() {
        let rows = readme_rows();
        for spec in SETTINGS {
            let Some((_, env, default)) = rows.iter().find(|(n, _, _)| n == spec.name) else {
                panic!("README's configuration table has no row for {}", spec.name);
            };
            assert_eq!(*env, env_name(spec.name), "{}", spec.name);
            // An empty default reads `(empty…)`, any other `` `value` ``.
            let same = match spec.default {
                "" => default.starts_with("(empty"),
                d => *default == format!("`{d}`"),
            };
            assert!(
                same,
                "{}: README says {default}, declared {:?}",
                spec.name, spec.default
            );
        }
        for (name, _, _) in &rows {
            assert!(
                SETTINGS.iter().any(|s| s.name == name),
                "README's configuration table has a row for {name}, which is not a setting"
            );
        }
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
        assert!(
            s.describe().contains(
                "secret_keys = \"(set: k2, k1; k2 seals)\"  # from HOOKD_SECRET_KEYS_FILE\n"
            ),
            "{}",
            s.describe()
        );
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
