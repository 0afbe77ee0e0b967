//! Test databases for every crate's tests: a fresh SQLite file, or a fresh PostgreSQL
//! database (created from `HOOKD_TEST_POSTGRES_URL`, migrated, dropped when the test ends).

use std::future::Future;

use domain::ids::JobId;

use crate::{ConnectOptions, Store};

/// The variable that switches the PostgreSQL half of the suite on.
pub const POSTGRES_ENV: &str = "HOOKD_TEST_POSTGRES_URL";

pub fn postgres_url() -> Option<String> {
    std::env::var(POSTGRES_ENV).ok().filter(|s| !s.is_empty())
}

/// The keys test databases seal secrets under; servers tests start on them get them as
/// `HOOKD_SECRET_KEYS` ([`SERVER_ENV`]).
pub const TEST_KEYS: &str = "test:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

pub fn keys() -> domain::seal::Keyring {
    domain::seal::Keyring::parse(TEST_KEYS).expect("valid test keys")
}

/// The setting a hookd started on a test database needs to open what tests sealed.
pub const SERVER_ENV: (&str, &str) = ("HOOKD_SECRET_KEYS", TEST_KEYS);

/// A migrated, empty database that disappears with this value.
pub struct TestDb {
    pub store: Store,
    pub url: String,
    pub backend_name: &'static str,
    _dir: Option<tempfile::TempDir>,
    drop_pg: Option<(String, String)>,
}

impl TestDb {
    pub async fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}/hookd.db", dir.path().display());
        let store = Store::connect(&url, &with_keys(ConnectOptions::default()))
            .await
            .expect("open sqlite");
        store.migrate().await.expect("migrate sqlite");
        TestDb {
            store,
            url,
            backend_name: "sqlite",
            _dir: Some(dir),
            drop_pg: None,
        }
    }

    pub async fn postgres(admin_url: &str) -> TestDb {
        let name = format!(
            "hookd_test_{}",
            JobId::new().to_string()[4..].to_lowercase()
        );
        let admin = Store::connect(admin_url, &small_pool())
            .await
            .expect("connect to HOOKD_TEST_POSTGRES_URL");
        use sea_orm::ConnectionTrait;
        admin
            .connection()
            .execute_unprepared(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create test database");
        admin.close().await.ok();
        let url = with_database(admin_url, &name);
        let store = Store::connect(&url, &small_pool())
            .await
            .expect("connect to test database");
        store.migrate().await.expect("migrate postgres");
        TestDb {
            store,
            url,
            backend_name: "postgres",
            _dir: None,
            drop_pg: Some((admin_url.to_owned(), name)),
        }
    }

    /// Every backend this run covers: SQLite always, PostgreSQL when configured.
    pub async fn all() -> Vec<TestDb> {
        let mut dbs = vec![TestDb::sqlite().await];
        if let Some(url) = postgres_url() {
            dbs.push(TestDb::postgres(&url).await);
        }
        dbs
    }
}

fn small_pool() -> ConnectOptions {
    with_keys(ConnectOptions {
        max_connections: 4,
        ..ConnectOptions::default()
    })
}

/// `opts` sealing under [`TEST_KEYS`].
pub fn with_keys(opts: ConnectOptions) -> ConnectOptions {
    ConnectOptions {
        keys: Some(keys()),
        ..opts
    }
}

/// Runs `test` once per backend, naming the backend if it panics.
pub async fn each_backend<F, Fut>(test: F)
where
    F: Fn(Store) -> Fut,
    Fut: Future<Output = ()>,
{
    for db in TestDb::all().await {
        let name = db.backend_name;
        eprintln!("--- on {name}");
        test(db.store.clone()).await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin_url, name)) = self.drop_pg.take() else {
            return;
        };
        // Drop runs outside any runtime we may block, so use a thread with its own.
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                use sea_orm::ConnectionTrait;
                if let Ok(admin) = Store::connect(&admin_url, &small_pool()).await {
                    let sql = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                    let _ = admin.connection().execute_unprepared(&sql).await;
                    let _ = admin.close().await;
                }
            });
        });
        let _ = handle.join();
    }
}

/// An empty, unmigrated database `name` on the PostgreSQL server at `admin` (dropped first if an
/// earlier run left one), for tests of what a migration or an upgrade does. Returns a store on
/// the server's admin database, to drop `name` afterwards, and the new database's URL.
pub async fn empty_postgres_database(admin: &str, name: &str) -> (crate::Store, String) {
    use sea_orm::ConnectionTrait;
    let admin_store = crate::Store::connect(admin, &Default::default())
        .await
        .expect("the admin database");
    for sql in [
        format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        admin_store
            .connection()
            .execute_unprepared(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    (admin_store, with_database(admin, name))
}

/// `postgres://u@h:5432/postgres?x=y` with the database name replaced.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    format!("{}/{db}{query}", &base[..authority_end])
}

/// A typed id that tests can name: `named::<EndpointId>("ep_a")` is always the same id, and
/// different names give different ids. The prefix is the name's up to its first `_`.
pub fn named<T: std::str::FromStr>(name: &str) -> T
where
    T::Err: std::fmt::Debug,
{
    let prefix = &name[..name.find('_').map_or(0, |i| i + 1)];
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // Digits are Crockford base32 characters too: 26 of them are a valid id body.
    format!("{prefix}{hash:026}")
        .parse()
        .expect("a name with the id's prefix")
}

/// An enabled endpoint row with every optional setting unset, for tests that need a model
/// without a database; set the fields a test is about on the result.
pub fn endpoint_model(id: &str, url: &str) -> crate::entities::endpoint::Model {
    crate::entities::endpoint::Model {
        id: named(id),
        tenant_id: named("tnt_1"),
        app_id: named("app_1"),
        uid: None,
        url: url.into(),
        description: String::new(),
        version: 1,
        filter_types: None,
        channels: None,
        headers: "{}".into(),
        metadata: "{}".into(),
        disabled: false,
        disabled_reason: None,
        disabled_at: None,
        throttle_rate: None,
        max_concurrency: None,
        timeout_ms: None,
        retry_policy: None,
        status_overrides: None,
        signature_headers: None,
        auth: None,
        mtls: None,
        failing_since: None,
        last_success_at: None,
        warned_failing_since: None,
        breaker_state: domain::breaker::BreakerPhase::Closed,
        breaker_until: None,
        created_at: 0,
        updated_at: 0,
        send_traceparent: false,
    }
}

/// A message row (`msg_1` of `app_1`, event type `test.event`, payload `{}`), for tests that
/// need a model without a database.
pub fn message_model() -> crate::entities::message::Model {
    crate::entities::message::Model {
        id: named("msg_1"),
        tenant_id: named("tnt_1"),
        app_id: named("app_1"),
        event_type: "test.event".into(),
        event_id: None,
        payload: b"{}".to_vec(),
        channels: None,
        tags: None,
        ordering_key: None,
        created_at: 0,
        deliver_at: None,
        trace_parent: None,
    }
}

/// A pending first delivery of [`message_model`] to [`endpoint_model`]`("ep_1", …)`.
pub fn delivery_model() -> crate::entities::delivery::Model {
    crate::entities::delivery::Model {
        id: named("dlv_1"),
        tenant_id: named("tnt_1"),
        endpoint_id: named("ep_1"),
        msg_id: named("msg_1"),
        state: domain::delivery::DeliveryState::Pending,
        attempt_count: 0,
        attempts_at_arm: 0,
        next_trigger: domain::delivery::AttemptTrigger::Scheduled,
        next_attempt_at: 0,
        lease_owner: None,
        lease_expires_at: None,
        give_up_at: i64::MAX,
        ordering_key: None,
        seq: None,
        last_status: None,
        last_error: None,
        last_attempt_at: None,
        created_at: 0,
        updated_at: 0,
    }
}

/// A real storage fault, for the tests of the error mappings: a write to a SQLite file opened
/// read-only (SQLITE_READONLY from the driver, not a made-up error).
pub fn read_only_error() -> crate::StoreError {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("read-only.db");
    rusqlite::Connection::open(&path)
        .and_then(|c| c.execute_batch("CREATE TABLE t (x INTEGER)"))
        .expect("make a database");
    let ro =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open read-only");
    ro.execute("INSERT INTO t VALUES (1)", [])
        .expect_err("a read-only connection refuses writes")
        .into()
}
