//! `hookd bench` as a function: a small run accounts for every message and reports figures.

use std::time::Duration;

use bench::{BenchOptions, Server, run, scenarios};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_bench_delivers_every_message_and_reports_positive_figures() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        messages: 200,
        concurrency: 8,
        drain_timeout: Duration::from_secs(30),
        loopback: Duration::from_millis(300),
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let l = &report.ledger;
    assert_eq!(l.accepted, 200, "{}", report.table());
    assert_eq!(l.expected, 200);
    assert_eq!(l.delivered, 200, "{}", report.table());
    assert_eq!(l.missing, 0);
    assert_eq!(l.unexpected, 0);
    assert_eq!(l.bad_signatures, 0);
    assert!(l.rejected.is_empty(), "{:?}", l.rejected);
    for (name, v) in [
        ("ingest/s", report.ingest_per_sec),
        ("ingest p50", report.ingest_latency.p50_ms),
        ("ingest p99", report.ingest_latency.p99_ms),
        ("deliveries/s", report.deliveries_per_sec),
        ("ttd p50", report.time_to_deliver.p50_ms),
        ("ttd p99", report.time_to_deliver.p99_ms),
        ("peak RSS", report.peak_rss_mb),
        ("cpu", report.cpu_secs),
        ("loopback/s", report.loopback_per_sec),
        ("ratio", report.ratio_to_loopback),
    ] {
        assert!(v > 0.0 && v.is_finite(), "{name} = {v}\n{}", report.table());
    }
    assert!(report.time_to_deliver.p50_ms <= report.time_to_deliver.p99_ms);
}

/// The inbound path (issue 21): every signed event sent to a source is acknowledged with its
/// message id and forwarded once, re-signed by hookd, to the sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbound_bench_accounts_for_every_event_sent_to_a_source() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        messages: 200,
        concurrency: 8,
        drain_timeout: Duration::from_secs(30),
        loopback: Duration::ZERO,
        inbound: true,
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let l = &report.ledger;
    assert_eq!((l.accepted, l.delivered), (200, 200), "{}", report.table());
    assert_eq!((l.missing, l.duplicates, l.unexpected), (0, 0, 0));
    assert_eq!(l.bad_signatures, 0);
    assert!(l.rejected.is_empty(), "{:?}", l.rejected);
    assert!(report.mode.contains("inbound"), "{}", report.mode);
    assert!(report.ingest_latency.p99_ms > 0.0 && report.ingest_per_sec > 0.0);
}

/// Ordered inbound events (issue 21): spread over 3 keys and sent 8 at a time, so some may
/// arrive ahead of a gap and be held (answered without a message id); every one is still
/// accounted for, delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_inbound_bench_accounts_for_held_events_too() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        messages: 300,
        concurrency: 8,
        drain_timeout: Duration::from_secs(60),
        loopback: Duration::ZERO,
        inbound: true,
        inbound_keys: Some(3),
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let l = &report.ledger;
    assert_eq!((l.accepted, l.delivered), (300, 300), "{}", report.table());
    assert_eq!((l.missing, l.duplicates, l.unexpected), (0, 0, 0));
    assert!(
        report.table().contains("held ahead of a gap") || l.held == 0,
        "{}",
        report.table()
    );
    assert!(
        report.mode.contains("ordered over 3 key(s)"),
        "{}",
        report.mode
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_drains_from_a_child_server_whose_own_resources_are_reported() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        server: Server::Child(env!("CARGO_BIN_EXE_hookd").into()),
        backlog: true,
        messages: 300,
        endpoints: 2,
        drain_timeout: Duration::from_secs(60),
        loopback: Duration::ZERO,
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let l = &report.ledger;
    assert_eq!((l.accepted, l.expected), (300, 600), "{}", report.table());
    assert_eq!(
        (l.delivered, l.missing, l.unexpected),
        (600, 0, 0),
        "{}",
        report.table()
    );
    assert_eq!(report.server, "child process");
    assert!(report.deliveries_per_sec > 0.0, "{}", report.table());
    // The child's own figures: a running hookd holds some memory and spent some CPU.
    assert!(report.peak_rss_mb > 5.0, "{}", report.table());
    assert!(report.cpu_secs > 0.0, "{}", report.table());
    assert!(report.table().contains("preloaded"), "{}", report.table());
}

/// A child server's database is visible to the bench: it reports what each message cost on
/// disk (the figure BENCHMARKS.md states at 100,000 messages).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_server_reports_what_each_message_costs_on_disk() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        server: Server::Child(env!("CARGO_BIN_EXE_hookd").into()),
        messages: 2_000,
        drain_timeout: Duration::from_secs(60),
        loopback: Duration::ZERO,
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let table = report.table();
    assert_eq!(report.ledger.delivered, 2_000, "{table}");
    // A message, its delivery and its attempt take some hundreds of bytes, not nothing and
    // not tens of kilobytes.
    let b = report.stored_bytes_per_message;
    assert!((100.0..20_000.0).contains(&b), "{b} B/msg: {table}");
    assert!(table.contains("stored per message"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_load_can_be_pointed_at_a_running_server_by_url_and_key() {
    let db = store::testing::TestDb::sqlite().await;
    let server = testkit::TestApp::start(db, &[("HOOKD_ROLES", "all")]).await;
    let report = run(&BenchOptions {
        server: Server::Remote {
            url: server.base.clone(),
            api_key: server.key.clone(),
        },
        messages: 100,
        concurrency: 4,
        drain_timeout: Duration::from_secs(30),
        loopback: Duration::ZERO,
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let l = &report.ledger;
    assert_eq!(
        (l.accepted, l.delivered, l.missing),
        (100, 100, 0),
        "{}",
        report.table()
    );
    assert_eq!(report.server, server.base);
    // Nothing is known of a remote server's process.
    assert_eq!((report.peak_rss_mb, report.cpu_secs), (0.0, 0.0));
}

#[test]
fn the_suite_covers_every_scenario_of_the_issue() {
    let base = BenchOptions::new(hookd::in_process::server());
    let all = scenarios(&base, 1_000_000);
    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
    assert_eq!(all.len(), 8, "{names:?}");
    assert!(all.iter().any(|s| s.opts.endpoints == 4));
    assert!(all.iter().any(|s| s.opts.payload_bytes == 2048));
    assert!(all.iter().any(|s| s.opts.payload_bytes == 65536));
    assert!(all.iter().any(|s| s.opts.fail_rate == 0.3));
    assert!(all.iter().any(|s| s.opts.rate == Some(1000.0)));
    assert!(
        all.iter()
            .any(|s| s.opts.backlog && s.opts.messages == 1_000_000)
    );
    // Every row says how to run it alone.
    for s in &all {
        assert!(!s.flags.is_empty(), "{}", s.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_suite_runs_in_one_call_and_accounts_for_every_delivery() {
    testkit::init_test_log();
    let base = BenchOptions {
        messages: 40,
        concurrency: 4,
        drain_timeout: Duration::from_secs(60),
        loopback: Duration::ZERO,
        ..BenchOptions::new(hookd::in_process::server())
    };
    let rows = bench::run_suite(&base, 100, |_, _| {}).await;
    assert_eq!(rows.len(), 8);
    let table = bench::suite_table(&rows);
    for (sc, r) in &rows {
        let r = r.as_ref().unwrap_or_else(|e| panic!("{}: {e}", sc.name));
        let l = &r.ledger;
        assert!(l.expected > 0, "{}\n{table}", sc.name);
        assert_eq!(l.delivered, l.expected, "{}\n{table}", sc.name);
        assert_eq!(l.unexpected + l.bad_signatures, 0, "{}\n{table}", sc.name);
        assert!(table.contains(sc.name));
    }
}

/// A soak samples the database as it runs and cuts latencies into windows; with a short
/// retention the server prunes while it runs, and the report shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_reports_each_windows_latency_database_size_and_pruning() {
    testkit::init_test_log();
    let report = run(&BenchOptions {
        server: Server::Child(env!("CARGO_BIN_EXE_hookd").into()),
        messages: 400,
        rate: Some(50.0),
        drain_timeout: Duration::from_secs(30),
        loopback: Duration::ZERO,
        soak: Some(bench::Soak {
            window: Duration::from_secs(2),
            retention: Some(Duration::from_secs(2)),
        }),
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let table = report.table();
    assert_eq!(report.ledger.delivered, 400, "{table}");
    assert_eq!(report.soak.len(), 4, "8 s in 2 s windows: {table}");
    assert_eq!(
        report.soak.iter().map(|w| w.accepted).sum::<u64>(),
        400,
        "{table}"
    );
    for w in &report.soak {
        assert!(w.database_bytes > 0, "{table}");
        assert!(w.ingest_p99_ms > 0.0 && w.ttd_p99_ms > 0.0, "{table}");
    }
    assert!(
        report.soak.last().unwrap().pruned_messages > 0,
        "messages older than 2 s were pruned while the load ran: {table}"
    );
    assert!(table.contains("pruned msgs"), "{table}");
}

/// `--dispatchers N`: one API process and N dispatcher-only processes on one PostgreSQL take
/// the load together, every delivery accounted for (the scale-out row of BENCHMARKS.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bench_runs_a_scaled_out_deployment_of_dispatcher_processes() {
    let Some(admin) = store::testing::postgres_url() else {
        eprintln!("SKIPPED bench --dispatchers: HOOKD_TEST_POSTGRES_URL is not set");
        return;
    };
    let db = store::testing::TestDb::postgres(&admin).await;
    let report = run(&BenchOptions {
        server: Server::Child(env!("CARGO_BIN_EXE_hookd").into()),
        database_url: Some(db.url.clone()),
        messages: 100,
        endpoints: 8,
        drain_timeout: Duration::from_secs(60),
        loopback: Duration::ZERO,
        dispatchers: 2,
        ..BenchOptions::new(hookd::in_process::server())
    })
    .await
    .expect("bench runs");
    let table = report.table();
    assert_eq!(report.ledger.delivered, 800, "{table}");
    assert_eq!(report.ledger.missing, 0, "{table}");
    assert!(
        report.server.contains("2 dispatcher"),
        "the report names the layout: {table}"
    );
    assert!(report.deliveries_per_sec > 0.0, "{table}");
}
