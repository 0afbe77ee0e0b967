//! `hookd bench` as a function: a small run accounts for every message and reports figures.

use std::time::Duration;

use hookd::bench::{BenchOptions, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_bench_delivers_every_message_and_reports_positive_figures() {
    crate::app::init_test_log();
    let report = run(&BenchOptions {
        messages: 200,
        concurrency: 8,
        drain_timeout: Duration::from_secs(30),
        loopback: Duration::from_millis(300),
        ..BenchOptions::default()
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
