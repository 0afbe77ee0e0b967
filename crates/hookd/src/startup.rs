//! Building and running a hookd process. `Application::build` binds before returning, so
//! callers (tests included) can bind port 0 and read the real port.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpServer, web};
use dispatcher::{Dispatcher, DispatcherConfig, Metrics};
use secrecy::ExposeSecret;
use store::{ConnectOptions, Store};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::config::Settings;
use crate::metrics::ProcessMetrics;

pub struct Application {
    port: Option<u16>,
    server: Option<Server>,
    /// `/metrics` on its own address (`metrics_bind`), and that address's port.
    metrics_server: Option<(u16, Server)>,
    stop_workers: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    shutdown: Arc<Notify>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot build the HTTP client for deliveries: {0}")]
    Client(#[from] reqwest::Error),
    #[error("{0}")]
    Config(String),
}

/// Makes the configuration file's `[[sources]]` be what it says (see
/// `service::inbound::declare_source`), and says where each one's senders post. One that
/// cannot be (its tenant unknown, its application id unknown) stops the start, naming it.
pub async fn declare_sources(store: &Store, settings: &Settings) -> Result<(), StartError> {
    let public_url = settings.public_url();
    for d in &settings.sources {
        let (source, done) = service::inbound::declare_source(store, d.tenant, &d.spec)
            .await
            .map_err(|e| StartError::Config(format!("{}: {}", d.origin, declared_error(e))))?;
        tracing::info!(
            source = %d.spec.name,
            tenant = %d.tenant,
            id = %source.row.id,
            url = %domain::inbound::source_url(&public_url, &source.row.id),
            "{} source from the configuration file",
            match done {
                service::inbound::Declared::Created => "created",
                service::inbound::Declared::Updated => "updated",
                service::inbound::Declared::Unchanged => "kept",
            }
        );
    }
    Ok(())
}

/// Makes the grants the configuration file made be exactly its `[[egress_grants]]` (with no
/// file, those grants stay as they are), and says once that `endpoint_allow_networks` opens
/// its networks to every tenant when more than one exists.
pub async fn declare_grants(store: &Store, settings: &Settings) -> Result<(), StartError> {
    if let Some(grants) = &settings.egress_grants {
        store
            .system()
            .declare_egress_grants(grants)
            .await
            .map_err(|e| match e {
                store::StoreError::NotFound { .. } => StartError::Config(
                    "egress_grants: a tenant named there does not exist (hookd tenant create \
                     prints the id)"
                        .to_owned(),
                ),
                e => StartError::Store(e),
            })?;
        for (tenant, g) in grants {
            tracing::info!(%tenant, target = %g.target, "egress grant from the configuration file");
        }
    }
    if !settings.endpoint_allow_networks.is_empty() && store.system().count_tenants().await? > 1 {
        tracing::warn!(
            networks = %settings.endpoint_allow_networks,
            "endpoint_allow_networks opens these networks to every tenant and every portal \
             customer; with several tenants, grant networks per tenant instead (hookd tenant \
             allow-network)"
        );
    }
    Ok(())
}

/// A declared source's refusal, for its message: which thing is missing, by its name.
fn declared_error(e: service::ServiceError) -> String {
    match e {
        service::ServiceError::Store(store::StoreError::NotFound { entity }) => match entity {
            "tenant" => "no such tenant (hookd tenant create prints the id)".to_owned(),
            "application" => {
                "no application with that id (give a uid to have it created)".to_owned()
            }
            other => format!("no such {other}"),
        },
        e => e.to_string(),
    }
}

/// SQLite: refuses to start on a database file that cannot be written (a read-only file or
/// file system, an unwritable WAL or WAL-index file), naming the file and the reason, rather
/// than running and failing every write. PostgreSQL starts degraded instead and recovers by
/// itself (a read-only server may be a failover in progress).
async fn refuse_unwritable(
    store: &Store,
    settings: &Settings,
    migrated: Result<(), store::StoreError>,
) -> Result<(), StartError> {
    let written = match migrated {
        Ok(()) if store.backend() == store::Backend::Sqlite => store.probe_write().await,
        other => other,
    };
    match (written, sqlite_file(settings)) {
        (Err(e), Some(file)) if e.storage_fault().is_some() => {
            let fault = e
                .storage_fault()
                .unwrap_or(store::StorageFault::Unavailable);
            Err(unwritable(&file, &format!("{} ({e})", fault.plain())))
        }
        (other, _) => Ok(other?),
    }
}

/// A SQLite database that cannot be opened because its file or directory cannot be written
/// (SQLite then says only "unable to open database file") is said so, naming the file.
fn unopenable(settings: &Settings, e: store::StoreError) -> StartError {
    let (Some(file), store::StoreError::Connect { .. }) = (sqlite_file(settings), &e) else {
        return e.into();
    };
    let file_check = std::fs::OpenOptions::new().write(true).open(&file).err();
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty());
    let dir_check = dir.and_then(|d| {
        let probe = d.join(format!(".hookd-write-check-{}", std::process::id()));
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&probe);
        let _ = std::fs::remove_file(&probe);
        made.err()
    });
    match (file_check, dir_check) {
        (Some(f), _) if f.kind() != std::io::ErrorKind::NotFound => unwritable(
            &file,
            &format!("the file cannot be opened for writing: {f}"),
        ),
        (_, Some(d)) => unwritable(&file, &format!("no file can be made in its directory: {d}")),
        _ => e.into(),
    }
}

fn unwritable(file: &std::path::Path, reason: &str) -> StartError {
    StartError::Config(format!(
        "cannot write the database {}: {reason}. hookd needs the file, its -wal and -shm files \
         and their directory writable: check their owner and permissions, that the file system \
         is mounted read-write, and that it has free space",
        file.display()
    ))
}

/// The SQLite database file the settings name, if they name one.
fn sqlite_file(settings: &Settings) -> Option<std::path::PathBuf> {
    let url = settings.database_url.expose_secret();
    if !matches!(store::Backend::of_url(url), Ok(store::Backend::Sqlite)) {
        return None;
    }
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:")
        .split('?')
        .next()?;
    (!path.is_empty() && path != ":memory:").then(|| path.into())
}

/// Opens the database named in the settings.
pub async fn open_store(settings: &Settings) -> Result<Store, store::StoreError> {
    let opts = ConnectOptions {
        max_connections: settings.db_max_connections,
        keys: settings.secret_keys.clone(),
        min_free: settings.storage_min_free,
        ..ConnectOptions::default()
    };
    Store::connect(settings.database_url.expose_secret(), &opts).await
}

/// How many stored secrets [`seal_at_start`] and `hookd rekey` read per transaction.
pub const RESEAL_BATCH: u64 = 500;

/// Before serving: the keys must be ones every process shares (configured, or the key file of
/// a single machine), what was stored before sealing existed is sealed now, and nothing may be
/// sealed under a key this process was not given, or under a key id whose configured key is
/// another: it would fail every delivery to its endpoint, so hookd refuses to start and names
/// the key instead. A start that is refused writes nothing (no key file, no sealing).
pub async fn seal_at_start(store: &Store) -> Result<(), StartError> {
    if *store.key_source() == store::KeySource::Process {
        return Err(StartError::Config(
            "secret_keys (or secret_keys_file) must be set on PostgreSQL: every hookd \
             process on the database seals and opens secrets with the same keys. Make one \
             with: echo \"k1:$(openssl rand -base64 32)\""
                .to_owned(),
        ));
    }
    // Checked before anything is written.
    let check = store
        .system()
        .reseal(store::Reseal::Check, RESEAL_BATCH)
        .await?;
    if let store::KeySource::File {
        path,
        generated: true,
    } = store.key_source()
    {
        // The key file is missing: values sealed before mean it was lost, and a new key
        // written in its place would only stand in the way of the backup. (The new key may
        // even have the lost one's id: ids are made from the time.)
        let lost: std::collections::BTreeSet<&String> =
            check.unknown_keys.keys().chain(&check.wrong_keys).collect();
        if !lost.is_empty() {
            let ids: Vec<String> = lost.iter().map(|id| format!("{id:?}")).collect();
            return Err(StartError::Config(format!(
                "the key file {} is missing, and stored secrets are sealed under key {}. Put \
                 the key file back from your backup (or set secret_keys) and start again; \
                 nothing was written",
                path.display(),
                ids.join(", ")
            )));
        }
        store.save_key_file()?;
        tracing::warn!(
            key_file = %path.display(),
            "NO secret_keys SET: generated a key to seal endpoint secrets at rest and saved it \
             in the key file. Back it up apart from the database: without it no stored secret \
             can be read. To move it into your settings, set secret_keys to the file's line \
             (or secret_keys_file to its path)."
        );
    }
    if !check.unknown_keys.is_empty() {
        return Err(StartError::Config(unknown_keys_text(&check.unknown_keys)));
    }
    if !check.wrong_keys.is_empty() {
        return Err(StartError::Config(wrong_keys_text(&check.wrong_keys)));
    }
    if check.sealed_plain > 0 {
        let r = store
            .system()
            .reseal(store::Reseal::PlainOnly, RESEAL_BATCH)
            .await?;
        tracing::info!(
            sealed = r.sealed_plain,
            key = store.keyring().current_id(),
            "sealed the secrets stored before sealing at rest"
        );
    }
    Ok(())
}

/// Names the configured keys that open nothing sealed under their id.
pub fn wrong_keys_text(wrong: &std::collections::BTreeSet<String>) -> String {
    let ids: Vec<String> = wrong.iter().map(|id| format!("{id:?}")).collect();
    format!(
        "stored secrets sealed under key id {} do not open with the key configured under that \
         id: two different keys were given the same id. Give back the key that sealed them \
         under that id (a new key needs an id of its own) and start again",
        ids.join(", ")
    )
}

/// Names the keys values are sealed under that this process was not given.
pub fn unknown_keys_text(unknown: &std::collections::BTreeMap<String, u64>) -> String {
    let list: Vec<String> = unknown
        .iter()
        .map(|(id, n)| format!("{n} under key {id:?}"))
        .collect();
    format!(
        "stored secrets are sealed under keys not in secret_keys ({}); add those keys (after \
         the first, which seals) and start again",
        list.join(", ")
    )
}

/// Runs every request (API, dashboard, metrics) in the `request` span naming its method and
/// path; what the request resolves (tenant, application, endpoint, message) is noted on it
/// as it becomes known (`service::trace`), so every line logged while serving the request
/// says whose it was.
async fn in_span(
    req: actix_web::dev::ServiceRequest,
    next: actix_web::middleware::Next<impl actix_web::body::MessageBody + 'static>,
) -> Result<actix_web::dev::ServiceResponse<impl actix_web::body::MessageBody>, actix_web::Error> {
    use tracing::Instrument;
    let span = service::trace::request_span(req.method().as_str(), req.path());
    next.call(req).instrument(span).await
}

/// Asks a running [`Application`] to stop as SIGTERM would.
#[derive(Clone)]
pub struct StopHandle(Arc<Notify>);

impl StopHandle {
    pub fn stop(&self) {
        self.0.notify_one();
    }
}

impl Application {
    /// Connects, migrates, binds (with the api role) and starts the workers of the other roles.
    pub async fn build(settings: &Settings) -> Result<Application, StartError> {
        let store = match open_store(settings).await {
            Ok(store) => store,
            Err(e) => return Err(unopenable(settings, e)),
        };
        let migrated = store.migrate().await;
        refuse_unwritable(&store, settings, migrated).await?;
        seal_at_start(&store).await?;
        declare_sources(&store, settings).await?;
        declare_grants(&store, settings).await?;
        let new_work = Arc::new(Notify::new());
        let node = domain::ids::NodeId::new().to_string();
        let (stop_workers, stop_rx) = watch::channel(false);
        let mut workers = Vec::new();
        let metrics = ProcessMetrics {
            delivery: Arc::new(Metrics::new(settings.metrics_tenant_label)),
            ingest: Arc::new(api::IngestCounts::new(settings.metrics_tenant_label)),
            inbound: Default::default(),
            receiving: Default::default(),
        };
        if settings.roles.scheduler {
            let mailer = match &settings.smtp_url {
                Some(url) => Some(
                    scheduler::email::Mailer::from_url(url.expose_secret(), &settings.smtp_from)
                        .map_err(|e| StartError::Config(format!("invalid smtp_url: {e}")))?,
                ),
                None => None,
            };
            let cfg = scheduler::SchedulerConfig {
                node_id: node.clone(),
                database_url: settings.database_url.expose_secret().to_owned(),
                disable_after: settings.endpoint_disable_after,
                warn_after: settings.endpoint_warn_after,
                sweep_every: settings.health_sweep_interval,
                public_url: settings.public_url(),
                mailer,
                retention: settings.retention(),
                prune_every: settings.prune_interval,
            };
            workers.push(tokio::spawn(scheduler::run(
                cfg,
                store.clone(),
                new_work.clone(),
                stop_rx.clone(),
            )));
        }
        if settings.roles.dispatcher {
            let mut cfg =
                DispatcherConfig::new(node.clone(), settings.endpoint_allow_networks.clone());
            cfg.lease = settings.delivery_lease;
            cfg.max_in_flight = settings.delivery_max_in_flight;
            cfg.batch_size = settings.delivery_batch_size;
            cfg.poll_interval = settings.delivery_poll_interval;
            cfg.breaker = settings.breaker();
            cfg.public_url = settings.public_url();
            cfg.https_only = settings.endpoint_https_only;
            cfg.signature_headers = settings.signature_headers;
            cfg.status_preset = settings.status_preset;
            cfg.proxy = settings
                .delivery_proxy
                .as_ref()
                .map(|p| p.expose_secret().to_owned());
            let dispatcher = Dispatcher::new(store.clone(), cfg, new_work.clone())?
                .with_metrics(metrics.delivery.clone());
            workers.push(tokio::spawn(dispatcher.run(stop_rx.clone())));
        }
        let limits = Arc::new(service::limits::IngestLimits::new(
            settings.tenant_ingest_rate,
            settings.tenant_ingest_burst,
        ));
        workers.push(tokio::spawn(heartbeat(
            store.clone(),
            node.clone(),
            settings.roles.to_string(),
            limits.clone(),
            stop_rx.clone(),
        )));
        let metrics_server = match settings.metrics_bind {
            Some(addr) => Some(metrics_server(
                settings,
                addr,
                store.clone(),
                metrics.clone(),
            )?),
            None => None,
        };
        // The one service configuration of this process: the API's, the receiving edge's and
        // the held-event forwarder's.
        let service_cfg = service_config(
            settings,
            new_work.clone(),
            limits.clone(),
            metrics.receiving.clone(),
        );
        if settings.roles.api || settings.roles.receive {
            workers.push(tokio::spawn(held_forwarder(
                store.clone(),
                service_cfg.clone(),
                stop_rx.clone(),
            )));
        }
        let (port, server) = if settings.roles.api || settings.roles.receive {
            let (port, server) = http_server(settings, store, service_cfg, metrics)?;
            (Some(port), Some(server))
        } else {
            (None, None)
        };
        Ok(Application {
            port,
            server,
            metrics_server,
            stop_workers,
            workers,
            shutdown: Arc::new(Notify::new()),
        })
    }

    /// The bound port, when this process runs the API.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The port `/metrics` is served on when `metrics_bind` is set.
    pub fn metrics_port(&self) -> Option<u16> {
        self.metrics_server.as_ref().map(|(p, _)| *p)
    }

    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.shutdown.clone())
    }

    /// Runs until SIGINT, SIGTERM or [`StopHandle::stop`]; then stops accepting connections
    /// and claiming work, lets in-flight requests and attempts finish (up to the shutdown
    /// timeout), gives back unstarted claims, and returns.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let handle: Option<ServerHandle> = self.server.as_ref().map(|s| s.handle());
        let metrics_handle = self.metrics_server.as_ref().map(|(_, s)| s.handle());
        if let Some((_, s)) = self.metrics_server {
            tokio::spawn(s);
        }
        let mut server_task = self.server.map(tokio::spawn);
        let server_ended = async {
            match server_task.as_mut() {
                Some(t) => {
                    let _ = t.await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = shutdown_signal() => tracing::info!("signal received; shutting down"),
            _ = self.shutdown.notified() => tracing::info!("stop requested; shutting down"),
            _ = server_ended => tracing::warn!("HTTP server ended"),
        }
        let _ = self.stop_workers.send(true);
        if let Some(h) = handle {
            h.stop(true).await;
        }
        if let Some(h) = metrics_handle {
            h.stop(true).await;
        }
        for w in self.workers {
            let _ = w.await;
        }
        Ok(())
    }
}

/// Announces this process every few seconds and counts the live API processes, among which
/// tenants' ingest limits are split.
async fn heartbeat(
    store: Store,
    node: String,
    roles: String,
    limits: Arc<service::limits::IngestLimits>,
    mut stop: watch::Receiver<bool>,
) {
    const EVERY: Duration = Duration::from_secs(5);
    let started = domain::Timestamp::now();
    let node_id = domain::ids::NodeId::parse(&node).ok();
    let hostname = std::env::var("HOSTNAME").unwrap_or_default();
    loop {
        let now = domain::Timestamp::now();
        if let Some(id) = node_id
            && let Err(e) = store
                .system()
                .heartbeat(id, &roles, &hostname, started, now)
                .await
        {
            store.warn_unless_fault(&e, "heartbeat failed");
        }
        let since = domain::Timestamp::from_millis(now.as_millis() - 3 * EVERY.as_millis() as i64);
        if let Ok(nodes) = store.system().live_nodes(since).await {
            let api_nodes = nodes
                .iter()
                // Both take messages in, under the tenant's one ingest limit.
                .filter(|n| n.roles.split(',').any(|r| r == "api" || r == "receive"))
                .count();
            limits.set_live_nodes(api_nodes.max(1) as u32);
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// Threads serving HTTP (the connection limit is divided among them): `http_workers` when set,
/// otherwise every core in a process that does not deliver and half of them (at least one) in
/// one that does, whose dispatcher runtime uses every core too. On 2 cores, one HTTP thread
/// beside the dispatcher delivered 21,000–22,000 messages/s in the wrk harness where two took
/// in more than the dispatcher could send and ended at 15,000–16,600 (decisions 121).
fn http_workers(setting: usize, cores: usize, delivers_here: bool) -> usize {
    match setting {
        0 if delivers_here => (cores / 2).max(1),
        0 => cores.max(1),
        n => n,
    }
}

fn service_config(
    settings: &Settings,
    new_work: Arc<Notify>,
    ingest_limits: Arc<service::limits::IngestLimits>,
    inbound_counts: Arc<service::inbound::Counts>,
) -> service::Config {
    service::Config {
        max_payload_bytes: settings.max_payload_bytes,
        max_deliver_ahead: settings.max_deliver_ahead,
        allow_networks: settings.endpoint_allow_networks.clone(),
        https_only: settings.endpoint_https_only,
        status_preset: settings.status_preset,
        breaker: settings.breaker(),
        retention: settings.retention(),
        max_retention: settings.max_retention,
        new_work,
        ingest_limits,
        inbound_counts,
        max_held_per_source: settings.inbound_max_held,
        inbound_replay_window: settings.inbound_replay_window,
        disable_after: settings.endpoint_disable_after,
        warn_after: settings.endpoint_warn_after,
    }
}

/// Forwards held inbound events whose turn came while no request was there to forward them
/// (a gap's hold time passed; a process died holding a key), writes the sources' counts and
/// counts what each source holds (for `inbound_max_held`), every second. Runs beside every
/// process that receives; each key is forwarded under its lease, so they never interleave.
async fn held_forwarder(store: Store, cfg: service::Config, mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        if let Err(e) = service::inbound::forward_held(&store, &cfg).await {
            tracing::warn!(error = %e, "forwarding held inbound events");
        }
        if let Err(e) = service::inbound::write_counts(&store, &cfg).await {
            tracing::warn!(error = %e, "writing inbound sources' counts");
        }
        if let Err(e) = service::inbound::count_held(&store, &cfg).await {
            tracing::warn!(error = %e, "counting inbound sources' held events");
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stop.changed() => {}
        }
    }
    if let Err(e) = service::inbound::write_counts(&store, &cfg).await {
        tracing::warn!(error = %e, "writing inbound sources' counts");
    }
}

fn http_server(
    settings: &Settings,
    store: Store,
    service_config: service::Config,
    metrics: ProcessMetrics,
) -> Result<(u16, Server), StartError> {
    let (listener, port, bind_err) = listen(settings.bind)?;
    let data = web::Data::new(store);
    let service_data = web::Data::new(service_config.clone());
    let api_config = api::ApiConfig {
        service: service_config,
        ingest_counts: metrics.ingest.clone(),
        inbound_counts: metrics.inbound.clone(),
        unwritten_replies: Default::default(),
        public_url: settings.public_url(),
    };
    // `/metrics` is served here unless it has an address of its own; on the receiving edge,
    // which faces senders on the internet, only behind a token.
    let metrics_here = settings.metrics_bind.is_none();
    let metrics_on_edge = metrics_here && settings.metrics_token.is_some();
    if !settings.roles.api && metrics_here && !metrics_on_edge {
        tracing::info!(
            "/metrics is not served on the receiving edge's address without metrics_token; \
             set metrics_bind (a private address) or metrics_token to scrape it"
        );
    }
    let metrics = web::Data::new(metrics);
    let metrics_access = web::Data::new(MetricsAccess(settings.metrics_token.clone()));
    let api_data = web::Data::new(api_config.clone());
    let auth_limits = web::Data::new(dashboard::AuthLimits::new(dashboard::AuthLimitConfig {
        hash_concurrency: settings.password_hash_concurrency,
        logins_per_minute: settings.login_attempts_per_minute,
        signups_per_hour: settings.signups_per_hour,
        trusted_proxies: settings.trusted_proxies.clone(),
    }));
    // With SMTP, sign-up proves the address by a mailed link, and so answers the same
    // whether or not the address already has an account.
    let signup = web::Data::new(dashboard::SignupConfig {
        confirm_by_email: settings.smtp_url.is_some(),
        public_url: settings.public_url(),
    });
    let body_timeout = web::Data::new(crate::http_limits::BodyTimeout(settings.http_body_timeout));
    let roles = settings.roles;
    let workers = http_workers(
        settings.http_workers,
        std::thread::available_parallelism().map_or(2, |n| n.get()),
        roles.dispatcher,
    );
    let server = HttpServer::new(move || {
        let app = App::new()
            .wrap(actix_web::middleware::from_fn(api::note_storage_faults))
            .wrap(actix_web::middleware::from_fn(
                crate::http_limits::body_deadline,
            ))
            // Outermost: the span covers every other middleware and the handler.
            .wrap(actix_web::middleware::from_fn(in_span))
            .app_data(body_timeout.clone())
            .app_data(data.clone())
            .app_data(api_data.clone())
            .app_data(service_data.clone())
            .app_data(auth_limits.clone())
            .app_data(signup.clone());
        if !roles.api {
            // The receiving edge: inbound webhooks and health, nothing else.
            let app = app.configure(|c| api::configure_receiving(c, &api_config));
            return if metrics_on_edge {
                app.app_data(metrics.clone())
                    .app_data(metrics_access.clone())
                    .route("/metrics", web::get().to(serve_metrics))
            } else {
                app
            };
        }
        let app = app.configure(|c| api::configure(c, &api_config));
        // Before the dashboard, whose default service answers every other path.
        let app = if metrics_here {
            app.app_data(metrics.clone())
                .app_data(metrics_access.clone())
                .route("/metrics", web::get().to(serve_metrics))
        } else {
            app
        };
        app.configure(dashboard::configure)
    })
    .workers(workers)
    .max_connections(settings.http_max_connections.div_ceil(workers))
    // Signals are handled in run_until_stopped, so the workers stop together with the server.
    .disable_signals()
    .shutdown_timeout(settings.shutdown_timeout.as_secs())
    .listen(listener)
    .map_err(bind_err)?
    .run();
    Ok((port, server))
}

/// Binds `addr`; returns the listener, its port and how to report a failure to serve on it.
#[allow(clippy::type_complexity)]
fn listen(
    addr: std::net::SocketAddr,
) -> Result<(TcpListener, u16, impl Fn(std::io::Error) -> StartError), StartError> {
    let bind_err = move |source| StartError::Bind {
        addr: addr.to_string(),
        source,
    };
    let listener = TcpListener::bind(addr).map_err(bind_err)?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    Ok((listener, port, bind_err))
}

/// `/metrics` alone on `metrics_bind` (e.g. a private interface), in any role.
fn metrics_server(
    settings: &Settings,
    addr: std::net::SocketAddr,
    store: Store,
    metrics: ProcessMetrics,
) -> Result<(u16, Server), StartError> {
    let (listener, port, bind_err) = listen(addr)?;
    let store = web::Data::new(store);
    let metrics = web::Data::new(metrics);
    let access = web::Data::new(MetricsAccess(settings.metrics_token.clone()));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(store.clone())
            .app_data(metrics.clone())
            .app_data(access.clone())
            .route("/metrics", web::get().to(serve_metrics))
    })
    .workers(1)
    .max_connections(64)
    .disable_signals()
    .shutdown_timeout(settings.shutdown_timeout.as_secs())
    .listen(listener)
    .map_err(bind_err)?
    .run();
    Ok((port, server))
}

/// The bearer token `/metrics` requires, if any (`metrics_token`).
struct MetricsAccess(Option<secrecy::SecretString>);

impl MetricsAccess {
    fn allows(&self, req: &actix_web::HttpRequest) -> bool {
        use subtle::ConstantTimeEq;
        let Some(token) = &self.0 else {
            return true;
        };
        let given = req
            .headers()
            .get(actix_web::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        given
            .as_bytes()
            .ct_eq(token.expose_secret().as_bytes())
            .into()
    }
}

/// `GET /metrics` (see [`crate::metrics`]). Counters and histograms are this process's;
/// gauges are read from the database at scrape time, so every node reports the same queue.
async fn serve_metrics(
    req: actix_web::HttpRequest,
    store: web::Data<Store>,
    metrics: web::Data<ProcessMetrics>,
    access: web::Data<MetricsAccess>,
) -> actix_web::HttpResponse {
    if !access.allows(&req) {
        return actix_web::HttpResponse::Unauthorized()
            .insert_header(("WWW-Authenticate", "Bearer"))
            .content_type("text/plain; charset=utf-8")
            .body("/metrics needs Authorization: Bearer <metrics_token>\n");
    }
    // The gauges are read before the counters: an attempt is counted before its result is
    // committed, so a scrape whose queue shows a delivery finished has counted its attempt.
    let gauges = match store.system().queue_gauges(domain::Timestamp::now()).await {
        Ok(g) => Some(g),
        Err(e) => {
            tracing::warn!(error = %e, "metrics: could not read the queue gauges");
            None
        }
    };
    let body = crate::metrics::render(
        &metrics,
        store.operational_counts(),
        store.storage().is_writable(),
        gauges,
    );
    actix_web::HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .body(body)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::http_workers;

    #[test]
    fn http_threads_leave_the_dispatcher_half_the_cores_unless_set() {
        // Beside a dispatcher: half the cores, at least one.
        assert_eq!(http_workers(0, 2, true), 1);
        assert_eq!(http_workers(0, 1, true), 1);
        assert_eq!(http_workers(0, 8, true), 4);
        // An API-only process: every core.
        assert_eq!(http_workers(0, 2, false), 2);
        assert_eq!(http_workers(0, 8, false), 8);
        // The setting wins either way.
        assert_eq!(http_workers(3, 2, true), 3);
        assert_eq!(http_workers(1, 8, false), 1);
    }
}
