//! The command line: `serve`, `migrate`, `prune`, `rekey`, `tenant create`, `config`, `sink`,
//! `bench`.

use std::error::Error;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use domain::email::EmailAddress;
use secrecy::ExposeSecret;
use serde_json::json;

use crate::config::{Overrides, Settings};
use crate::startup::{Application, open_store};

pub type BoxError = Box<dyn Error + Send + Sync>;

#[derive(Debug, Parser)]
#[command(
    name = "hookd",
    version,
    about = "Webhook delivery platform: signed, retried, ordered, observable."
)]
pub struct Cli {
    /// A TOML file of settings (see the README's configuration table).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Default, Clone)]
pub struct DbArgs {
    /// Overrides HOOKD_DATABASE_URL and the config file.
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (API on HOOKD_BIND; SQLite database created on first start).
    Serve {
        #[command(flatten)]
        db: DbArgs,
        /// Overrides HOOKD_BIND, e.g. 0.0.0.0:8080.
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
        /// Overrides HOOKD_ROLES: any of api, receive, dispatcher, scheduler (comma-separated).
        #[arg(long, value_name = "ROLES")]
        roles: Option<String>,
    },
    /// Run the receiving side alone: `POST /in/{source}` (sources are made with the API of a
    /// `serve` process on the same database), the dispatcher that forwards what arrives and the
    /// scheduler that prunes; no tenant API, no dashboard. `serve --roles receive,dispatcher,scheduler`.
    Receive {
        #[command(flatten)]
        db: DbArgs,
        /// Overrides HOOKD_BIND, e.g. 0.0.0.0:8080.
        #[arg(long, value_name = "ADDR")]
        bind: Option<String>,
    },
    /// Create or upgrade the database schema, then exit. Safe to run repeatedly.
    Migrate {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Remove what retention says has expired (payloads, then old messages with their
    /// deliveries and attempts; idempotency records, sessions), once, and report it. The
    /// scheduler does the same every prune_interval.
    Prune {
        #[command(flatten)]
        db: DbArgs,
        /// Count what would be removed by retention; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Seal every stored secret under the first of secret_keys: values stored before sealing
    /// and values sealed under an older key. Runs beside a live hookd, in short batches. Then
    /// the older key can be dropped from secret_keys.
    Rekey {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Manage tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Print the effective settings (secrets redacted) and exit.
    Config,
    /// Run a webhook receiver that verifies, dedups, checks order and injects failures.
    Sink(SinkArgs),
    /// Benchmark: the sink and hookd on a fresh database (or a running server), an exact
    /// delivery ledger. See BENCHMARKS.md.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Database to run hookd on (default: a fresh SQLite file in a temporary directory). With
    /// --suite, a PostgreSQL URL names the server: each scenario gets a new database on it.
    #[arg(long, value_name = "URL")]
    pub database_url: Option<String>,
    /// Load a running Svix-compatible server at this base URL instead of starting hookd (it
    /// must be able to reach 127.0.0.1, where the bench's receiver listens).
    #[arg(long, value_name = "URL", requires = "api_key", conflicts_with_all = ["database_url", "backlog", "in_process"])]
    pub url: Option<String>,
    /// The API key (Bearer token) for --url.
    #[arg(long, value_name = "KEY", requires = "url")]
    pub api_key: Option<String>,
    /// Run hookd inside the bench process instead of as a child `hookd serve` (resources then
    /// include the sink and the load generator).
    #[arg(long)]
    pub in_process: bool,
    /// Write --messages straight to the database before hookd starts, then time the drain.
    #[arg(long)]
    pub backlog: bool,
    /// Run every scenario (1 endpoint, fan-out, 2 KB, 64 KB, 30 % failures, steady 1,000/s,
    /// backlogs) one after another and print a Markdown table.
    #[arg(long, conflicts_with_all = ["backlog", "endpoints", "payload_bytes", "rate", "fail_rate"])]
    pub suite: bool,
    /// With --suite: the size of the large backlog scenario.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    pub suite_backlog: u64,
    /// Messages to submit.
    #[arg(long, default_value_t = 20_000)]
    pub messages: u64,
    /// Endpoints (all at the sink) each message fans out to.
    #[arg(long, default_value_t = 1)]
    pub endpoints: u32,
    /// Size of each message's JSON payload.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Ingest requests in flight at once (closed loop).
    #[arg(long, default_value_t = 32, conflicts_with = "rate")]
    pub concurrency: usize,
    /// Messages per second at fixed intervals (open loop) instead of a concurrency.
    #[arg(long, value_name = "MSGS_PER_SEC")]
    pub rate: Option<f64>,
    /// Share of deliveries the sink fails with a 500 (0 to below 1).
    #[arg(long, default_value_t = 0.0)]
    pub fail_rate: f64,
    /// Seconds to wait for the last acknowledgements.
    #[arg(long, default_value_t = 120)]
    pub drain_timeout: u64,
    /// A soak: send at --rate for this many seconds (instead of --messages), reading the
    /// database's size and cutting latencies into windows as it goes.
    #[arg(long, value_name = "SECS", requires = "rate", conflicts_with_all = ["suite", "backlog", "url"])]
    pub soak_secs: Option<u64>,
    /// With --soak-secs: each window's length.
    #[arg(
        long,
        default_value_t = 60,
        value_name = "SECS",
        requires = "soak_secs"
    )]
    pub soak_window_secs: u64,
    /// With --soak-secs: run hookd keeping messages this many seconds (payloads half of it),
    /// pruning every 5 s. Without it, nothing expires during the run (the baseline).
    #[arg(long, value_name = "SECS", requires = "soak_secs")]
    pub retention_secs: Option<u64>,
    /// Seconds of the sink-alone loopback flood (0: skip).
    #[arg(long, default_value_t = 3)]
    pub loopback_secs: u64,
    /// Run one process with the API and scheduler and this many dispatcher-only processes
    /// (scale-out; needs a PostgreSQL --database-url). 0: one process with every role.
    #[arg(long, default_value_t = 0, value_name = "N", conflicts_with_all = ["url", "in_process"])]
    pub dispatchers: u32,
    /// Send the messages as webhooks to an inbound source (`POST /in/{source}`, each signed
    /// per Standard Webhooks with its own id) instead of the API: the receiving side's ack
    /// latency ("ingest") and events/s, forwarded to the sink.
    #[arg(long, conflicts_with_all = ["backlog", "url"])]
    pub inbound: bool,
    /// With --inbound: the events carry hookd's ordering headers over N keys (event n: key
    /// n mod N, sequence n div N + 1), forwarded in sequence per key.
    #[arg(long, value_name = "N", requires = "inbound")]
    pub inbound_keys: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SinkArgs {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:9000", value_name = "ADDR")]
    pub bind: std::net::SocketAddr,
    /// A signing secret (whsec_…) to verify with; repeat for several. None: no verification.
    #[arg(long = "secret", value_name = "SECRET")]
    pub secrets: Vec<String>,
    /// Share of requests to fail (0 to 1).
    #[arg(long, default_value_t = 0.0)]
    pub fail_rate: f64,
    /// Status code of injected failures.
    #[arg(long, default_value_t = 500)]
    pub fail_status: u16,
    /// Delay before every answer.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Share of requests never answered.
    #[arg(long, default_value_t = 0.0)]
    pub timeout_rate: f64,
    /// Retry-After value sent with injected failures (seconds or an HTTP date).
    #[arg(long, value_name = "SECS")]
    pub retry_after: Option<String>,
    /// Write the JSON report here every second and on exit.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant and print its id and a new API key (shown once; only a hash is kept).
    Create {
        #[arg(long)]
        name: String,
        /// Where hookd sends notifications (e.g. an endpoint was disabled).
        #[arg(long)]
        email: String,
        /// Print {"tenant_id": …, "api_key": …} instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Let a tenant's endpoints reach a private network or host (a broker, an internal
    /// worker). Made again with other options, it changes that grant's namespace.
    AllowNetwork {
        /// The tenant's id (tnt_…).
        tenant: String,
        /// A CIDR network (10.0.0.0/8), an IP address, or a host name (rabbitmq.internal).
        target: String,
        #[command(flatten)]
        namespace: NamespaceArgs,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Take back a network or host granted with allow-network.
    DenyNetwork {
        tenant: String,
        target: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List what a tenant was granted.
    Grants {
        tenant: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// Where on a shared broker the tenant must keep: set these when several tenants are granted
/// the same broker.
#[derive(Debug, Args, Default)]
pub struct NamespaceArgs {
    /// Every Redis stream of the tenant starts with this (give its Redis user `~PREFIX*`).
    #[arg(long, value_name = "PREFIX")]
    pub redis_prefix: Option<String>,
    /// The only RabbitMQ vhost the tenant publishes into.
    #[arg(long, value_name = "VHOST")]
    pub amqp_vhost: Option<String>,
    /// Every NATS subject of the tenant starts with this (e.g. `tenant-a.`).
    #[arg(long, value_name = "PREFIX")]
    pub nats_prefix: Option<String>,
}

pub fn run(cli: Cli) -> Result<(), BoxError> {
    if let Command::Sink(args) = cli.command {
        return runtime()?.block_on(run_sink(args));
    }
    if let Command::Bench(args) = cli.command {
        return runtime()?.block_on(run_bench(args));
    }
    let overrides = match &cli.command {
        Command::Serve { db, bind, roles } => Overrides {
            database_url: db.database_url.clone(),
            bind: bind.clone(),
            roles: roles.clone(),
        },
        Command::Receive { db, bind } => Overrides {
            database_url: db.database_url.clone(),
            bind: bind.clone(),
            roles: Some("receive,dispatcher,scheduler".to_owned()),
        },
        Command::Migrate { db }
        | Command::Prune { db, .. }
        | Command::Rekey { db }
        | Command::Tenant {
            command:
                TenantCommand::Create { db, .. }
                | TenantCommand::AllowNetwork { db, .. }
                | TenantCommand::DenyNetwork { db, .. }
                | TenantCommand::Grants { db, .. },
        } => Overrides {
            database_url: db.database_url.clone(),
            ..Overrides::default()
        },
        Command::Config | Command::Sink(_) | Command::Bench(_) => Overrides::default(),
    };
    let settings = Settings::load(cli.config.as_deref(), &overrides)?;
    let _otlp = crate::telemetry::init(&settings);
    match cli.command {
        Command::Serve { .. } | Command::Receive { .. } => {
            serve_runtime()?.block_on(serve(settings))
        }
        Command::Migrate { .. } => runtime()?.block_on(migrate(settings)),
        Command::Prune { dry_run, .. } => runtime()?.block_on(prune(settings, dry_run)),
        Command::Rekey { .. } => runtime()?.block_on(rekey(settings)),
        Command::Tenant {
            command: TenantCommand::Create {
                name, email, json, ..
            },
        } => runtime()?.block_on(create_tenant(settings, name, email, json)),
        Command::Tenant { command } => runtime()?.block_on(grants(settings, command)),
        Command::Config => {
            print!("{}", settings.describe());
            Ok(())
        }
        Command::Sink(_) | Command::Bench(_) => Ok(()),
    }
}

async fn run_bench(args: BenchArgs) -> Result<(), BoxError> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .with_writer(std::io::stderr)
        .try_init();
    use bench::Server;
    let server = match (args.url, args.api_key) {
        (Some(url), Some(api_key)) => Server::Remote { url, api_key },
        _ if args.in_process => crate::in_process::server(),
        _ => Server::Child(std::env::current_exe()?),
    };
    let opts = bench::BenchOptions {
        server,
        backlog: args.backlog,
        database_url: args.database_url,
        messages: args.messages,
        endpoints: args.endpoints,
        payload_bytes: args.payload_bytes,
        concurrency: args.concurrency,
        rate: args.rate,
        fail_rate: args.fail_rate,
        drain_timeout: std::time::Duration::from_secs(args.drain_timeout),
        loopback: std::time::Duration::from_secs(args.loopback_secs),
        soak: args.soak_secs.map(|_| bench::Soak {
            window: std::time::Duration::from_secs(args.soak_window_secs.max(1)),
            retention: args.retention_secs.map(std::time::Duration::from_secs),
        }),
        dispatchers: args.dispatchers,
        inbound: args.inbound,
        inbound_keys: args.inbound_keys,
    };
    let mut opts = opts;
    if let (Some(secs), Some(rate)) = (args.soak_secs, args.rate) {
        opts.messages = ((secs as f64) * rate).ceil().max(1.0) as u64;
    }
    if args.suite {
        let rows = bench::run_suite(&opts, args.suite_backlog, |sc, r| match r {
            Ok(r) if !args.json => {
                eprint!("== {} (hookd bench {})\n{}", sc.name, sc.flags, r.table())
            }
            Ok(_) => {}
            Err(e) => eprintln!("== {} (hookd bench {}) failed: {e}", sc.name, sc.flags),
        })
        .await;
        if args.json {
            let all: Vec<_> = rows
                .iter()
                .map(|(sc, r)| {
                    serde_json::json!({
                        "scenario": sc.name,
                        "flags": sc.flags,
                        "report": r.as_ref().ok(),
                        "error": r.as_ref().err(),
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            print!("{}", bench::suite_table(&rows));
        }
        if rows.iter().any(|(_, r)| r.is_err()) {
            return Err("some scenarios failed".into());
        }
        return Ok(());
    }
    let report = bench::run(&opts).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

async fn run_sink(args: SinkArgs) -> Result<(), BoxError> {
    use bench::sink::{Behaviour, Sink, SinkConfig, write_report};
    for (name, rate) in [
        ("--fail-rate", args.fail_rate),
        ("--timeout-rate", args.timeout_rate),
    ] {
        if !(0.0..=1.0).contains(&rate) {
            return Err(format!("invalid {name} {rate}: expected a number from 0 to 1").into());
        }
    }
    if !(100..=599).contains(&args.fail_status) {
        return Err(format!(
            "invalid --fail-status {}: expected 100 to 599",
            args.fail_status
        )
        .into());
    }
    let secrets = args
        .secrets
        .iter()
        .map(|s| {
            domain::signing::SigningSecret::parse(s).map_err(|e| format!("invalid --secret: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sink = Sink::start(SinkConfig {
        bind: args.bind,
        secrets,
        behaviour: Behaviour {
            fail_rate: args.fail_rate,
            fail_status: args.fail_status,
            latency_ms: args.latency_ms,
            timeout_rate: args.timeout_rate,
            retry_after: args.retry_after,
            fail_first: 0,
            abort_message: false,
            disable_endpoint: false,
        },
        report: args.report.clone(),
        record: false,
    })
    .map_err(|e| format!("cannot listen on {}: {e}", args.bind))?;
    eprintln!(
        "hookd sink listening on http://{}:{} (report: GET /_sink/report)",
        args.bind.ip(),
        sink.port
    );
    let state = sink.state.clone();
    let report_path = args.report.clone();
    let writer = tokio::spawn(async move {
        let Some(path) = report_path else { return };
        loop {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            let _ = write_report(&path, &state.report());
        }
    });
    wait_for_signal().await;
    writer.abort();
    let report = sink.state.report();
    if let Some(path) = &args.report {
        write_report(path, &report).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    eprintln!("{}", serde_json::to_string(&report)?);
    sink.stop().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Serving uses every core: the API's workers and the dispatcher share one runtime.
fn serve_runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn runtime() -> Result<tokio::runtime::Runtime, BoxError> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

async fn serve(settings: Settings) -> Result<(), BoxError> {
    if matches!(
        store::Backend::of_url(settings.database_url.expose_secret()),
        Ok(store::Backend::Sqlite)
    ) {
        crate::signals::mend_sigbus()?;
    }
    let app = Application::build(&settings).await?;
    let database = store::redact_url(settings.database_url.expose_secret());
    match app.port() {
        Some(port) => tracing::info!(
            roles = %settings.roles,
            %database,
            "hookd listening on http://{}:{}",
            settings.bind.ip(),
            port
        ),
        None => tracing::info!(roles = %settings.roles, %database, "hookd running (no API role)"),
    }
    app.run_until_stopped().await?;
    tracing::info!("hookd stopped");
    Ok(())
}

async fn migrate(settings: Settings) -> Result<(), BoxError> {
    let store = open_store(&settings).await?;
    let pending = store.pending_migrations().await?;
    store.migrate().await?;
    if pending.is_empty() {
        println!("database schema is up to date; nothing to do");
    } else {
        println!(
            "applied {} migration(s): {}",
            pending.len(),
            pending.join(", ")
        );
    }
    store.close().await?;
    Ok(())
}

async fn rekey(settings: Settings) -> Result<(), BoxError> {
    let store = open_store(&settings).await?;
    // Without the servers' keys (none set, or a key file not made yet) it would seal under a
    // key nobody keeps.
    if matches!(
        store.key_source(),
        store::KeySource::Process
            | store::KeySource::File {
                generated: true,
                ..
            }
    ) {
        return Err(
            "hookd rekey needs the servers' secret_keys (or secret_keys_file, or the \
             key file hookd.key beside the database)"
                .into(),
        );
    }
    let current = store.keyring().current_id().to_owned();
    let r = store
        .system()
        .reseal(store::Reseal::All, crate::startup::RESEAL_BATCH)
        .await?;
    store.close().await?;
    println!(
        "read {} stored secrets: {} re-sealed from an older key and {} sealed for the first time under key {:?}; {} were already under it",
        r.seen,
        r.rekeyed,
        r.sealed_plain,
        current,
        r.seen - r.rekeyed - r.sealed_plain - r.unknown_keys.values().sum::<u64>(),
    );
    if !r.unknown_keys.is_empty() {
        return Err(crate::startup::unknown_keys_text(&r.unknown_keys).into());
    }
    Ok(())
}

async fn prune(settings: Settings, dry_run: bool) -> Result<(), BoxError> {
    let store = open_store(&settings).await?;
    let pending = store.pending_migrations().await?;
    if !pending.is_empty() {
        return Err(format!(
            "the database schema is behind this hookd ({} pending); run `hookd migrate` first",
            pending.join(", ")
        )
        .into());
    }
    // Passes until nothing more is due (each is bounded; see `store::Pruned::more`).
    let mut total = scheduler::PruneReport::default();
    loop {
        let r = scheduler::prune(&store, settings.retention(), dry_run).await?;
        let (t, p) = (&mut total.retention, r.retention);
        t.messages += p.messages;
        t.deliveries += p.deliveries;
        t.attempts += p.attempts;
        t.payloads += p.payloads;
        t.kept_live = p.kept_live;
        total.stats += r.stats;
        total.swept.idempotency_keys += r.swept.idempotency_keys;
        total.swept.sessions += r.swept.sessions;
        total.swept.pending_signups += r.swept.pending_signups;
        total.swept.events += r.swept.events;
        total.swept.emails += r.swept.emails;
        total.swept.jobs += r.swept.jobs;
        total.swept.inbound_keys += r.swept.inbound_keys;
        total.swept.portal_tokens += r.swept.portal_tokens;
        total.refusals += r.refusals;
        // A dry pass changes nothing, so another would count the same rows again.
        if !p.more || dry_run {
            break;
        }
    }
    let p = total.retention;
    let verb = if dry_run { "would remove" } else { "removed" };
    println!(
        "{verb}: {} messages with {} deliveries and {} attempts; {verb} the payloads of {} more \
         messages",
        p.messages, p.deliveries, p.attempts, p.payloads
    );
    println!(
        "kept: {} messages past a horizon with a delivery still live (pending, sending, paused, \
         or failed holding its ordering key)",
        p.kept_live
    );
    if dry_run {
        if p.more {
            println!("(at least: a pass stops at its batch limit, and more is due after it)");
        }
        println!(
            "dry run: nothing changed; expired idempotency records, sessions, statistics, \
             events, emails and jobs are not counted"
        );
    } else {
        println!(
            "removed: {} idempotency records, {} sessions, {} sign-ups, {} statistics rows, \
             {} operational events, {} emails, {} background jobs, {} idle inbound ordering keys, \
             {} expired or revoked portal tokens, {} refused inbound requests",
            total.swept.idempotency_keys,
            total.swept.sessions,
            total.swept.pending_signups,
            total.stats,
            total.swept.events,
            total.swept.emails,
            total.swept.jobs,
            total.swept.inbound_keys,
            total.swept.portal_tokens,
            total.refusals
        );
        if store.system().reclaim_space().await? == store::Reclaim::Vacuumed {
            println!(
                "vacuumed: PostgreSQL's autovacuum is off, so hookd made the space of removed \
                 rows reusable itself (turn autovacuum on to let the server do it)"
            );
        }
    }
    store.close().await?;
    Ok(())
}

async fn create_tenant(
    settings: Settings,
    name: String,
    email: String,
    as_json: bool,
) -> Result<(), BoxError> {
    let name = name.trim().to_owned();
    if name.is_empty() || name.chars().count() > 200 {
        return Err("invalid --name: expected 1 to 200 characters".into());
    }
    let email = EmailAddress::parse(&email).map_err(|e| format!("invalid --email: {e}"))?;
    let store = open_store(&settings).await?;
    store.migrate().await?;
    let tenant = store
        .create_tenant(store::NewTenant {
            name,
            notification_email: email.to_string(),
            ingest_rate: None,
            ingest_burst: None,
        })
        .await?;
    let tenant_id = tenant.id;
    let (_, api_key) = store.create_api_key(tenant_id, "default").await?;
    if as_json {
        println!("{}", json!({ "tenant_id": tenant.id, "api_key": api_key }));
    } else {
        println!("tenant created: {}", tenant.id);
        println!("API key (shown only now; store it safely): {api_key}");
    }
    store.close().await?;
    Ok(())
}

/// `hookd tenant allow-network | deny-network | grants`.
async fn grants(settings: Settings, command: TenantCommand) -> Result<(), BoxError> {
    use domain::egress::{Grant, GrantTarget};
    let tenant_of = |t: &str| {
        domain::ids::TenantId::parse(t.trim()).map_err(|e| format!("invalid tenant id: {e}"))
    };
    let target_of = |t: &str| GrantTarget::parse(t).map_err(|e| e.to_string());
    let store = open_store(&settings).await?;
    store.migrate().await?;
    let done: Result<(), BoxError> = async {
        match command {
            TenantCommand::AllowNetwork {
                tenant,
                target,
                namespace: ns,
                ..
            } => {
                let tenant = tenant_of(&tenant)?;
                let grant = Grant::parse(
                    &target,
                    ns.redis_prefix.as_deref(),
                    ns.amqp_vhost.as_deref(),
                    ns.nats_prefix.as_deref(),
                )?;
                store
                    .grant_egress(tenant, &grant, store::GrantOrigin::Cli)
                    .await
                    .map_err(|e| match e {
                        store::StoreError::NotFound { .. } => format!("no tenant {tenant}"),
                        e => e.to_string(),
                    })?;
                println!(
                    "granted {} to {tenant}{}",
                    grant.target,
                    describe_namespace(&grant.namespace)
                );
            }
            TenantCommand::DenyNetwork { tenant, target, .. } => {
                let (tenant, target) = (tenant_of(&tenant)?, target_of(&target)?);
                if !store.revoke_egress(tenant, &target).await? {
                    return Err(format!("{target} was not granted to {tenant}").into());
                }
                println!("revoked {target} from {tenant}");
            }
            TenantCommand::Grants { tenant, .. } => {
                let tenant = tenant_of(&tenant)?;
                store
                    .get_tenant(tenant)
                    .await
                    .map_err(|_| format!("no tenant {tenant}"))?;
                let listed = store.list_egress_grants(tenant).await?;
                if listed.is_empty() {
                    println!(
                        "{tenant} reaches public addresses only (and endpoint_allow_networks)"
                    );
                }
                for (g, origin) in listed {
                    let from = match origin {
                        store::GrantOrigin::Cli => "command line",
                        store::GrantOrigin::Config => "configuration file",
                    };
                    println!("{}{}  [{from}]", g.target, describe_namespace(&g.namespace));
                }
            }
            TenantCommand::Create { .. } => {}
        }
        Ok(())
    }
    .await;
    store.close().await?;
    done
}

fn describe_namespace(ns: &domain::egress::Namespace) -> String {
    let mut parts = Vec::new();
    if let Some(p) = &ns.redis_prefix {
        parts.push(format!("Redis streams {p}*"));
    }
    if let Some(v) = &ns.amqp_vhost {
        parts.push(format!("RabbitMQ vhost {v}"));
    }
    if let Some(p) = &ns.nats_prefix {
        parts.push(format!("NATS subjects {p}*"));
    }
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join(", ")),
    }
}

/// `outer: inner: innermost` on one line.
pub fn error_chain(e: &(dyn Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}
