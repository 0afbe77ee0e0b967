//! `GET /metrics`: the Prometheus exposition parses, and its values move as messages are
//! accepted, refused and delivered.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use bench::sink::Behaviour;
use reqwest::Method;
use serde_json::json;

use crate::delivery::{apps_with, endpoint_at, eventually, send, sink};
use testkit::TestApp;

/// Every sample of one scrape, keyed `name{labels}` as written.
pub struct Scrape(HashMap<String, f64>);

impl Scrape {
    pub fn get(&self, key: &str) -> f64 {
        *self
            .0
            .get(key)
            .unwrap_or_else(|| panic!("no sample {key} in /metrics"))
    }
}

/// The body of `GET /metrics`, checked to be the Prometheus text format.
pub async fn scrape_text(app: &TestApp) -> String {
    let resp = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert_eq!(ct, hookd::metrics::CONTENT_TYPE);
    resp.text().await.unwrap()
}

pub async fn scrape(app: &TestApp) -> Scrape {
    let text = scrape_text(app).await;
    let mut samples = HashMap::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not `name{{labels}} value`: {line:?}"));
        let name_end = key.find('{').unwrap_or(key.len());
        let name = &key[..name_end];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "bad metric name in {line:?}"
        );
        if name_end < key.len() {
            assert!(key.ends_with('}'), "unclosed labels in {line:?}");
            let labels = &key[name_end + 1..key.len() - 1];
            for pair in labels.split(',') {
                let (k, v) = pair
                    .split_once('=')
                    .unwrap_or_else(|| panic!("bad label in {line:?}"));
                assert!(!k.is_empty(), "empty label name in {line:?}");
                assert!(
                    v.len() >= 2 && v.starts_with('"') && v.ends_with('"'),
                    "unquoted label value in {line:?}"
                );
            }
        }
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line:?}")),
        };
        assert!(
            samples.insert(key.to_owned(), value).is_none(),
            "duplicate sample {key}"
        );
    }
    Scrape(samples)
}

const SUCCESS_2XX: &str = r#"hookd_attempts_total{outcome="success",class="2xx"}"#;
const ACCEPTED: &str = r#"hookd_ingest_requests_total{result="accepted"}"#;
const RATE_LIMITED: &str = r#"hookd_ingest_requests_total{result="rate_limited"}"#;
const REJECTED: &str = r#"hookd_ingest_requests_total{result="rejected"}"#;
const DELIVERED: &str = "hookd_time_to_deliver_seconds_count";
const PENDING: &str = "hookd_deliveries_pending";
const IN_FLIGHT: &str = "hookd_deliveries_in_flight";

#[tokio::test]
async fn metrics_move_as_messages_are_accepted_and_delivered() {
    for app in apps_with(&[]).await {
        let before = scrape(&app).await;
        assert_eq!(before.get("hookd_database_up"), 1.0);
        for gauge in [
            PENDING,
            IN_FLIGHT,
            "hookd_dead_letters",
            "hookd_oldest_due_delivery_age_seconds",
            "hookd_open_breakers",
            "hookd_disabled_endpoints",
            "hookd_email_outbox_pending",
        ] {
            assert_eq!(before.get(gauge), 0.0, "{gauge} on {}", app.backend);
        }
        let sink = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &sink, json!({})).await;
        const N: u64 = 5;
        for n in 0..N {
            send(&app, &a, json!({"n": n})).await;
        }
        eventually(Duration::from_secs(10), "all delivered", || async {
            sink.state.report().unique == N
        })
        .await;
        // The state is written in a batch after the attempt; wait for the queue to drain.
        let deadline = Instant::now() + Duration::from_secs(10);
        let after = loop {
            let now = scrape(&app).await;
            if now.get(PENDING) == 0.0 && now.get(IN_FLIGHT) == 0.0 {
                break now;
            }
            assert!(Instant::now() < deadline, "the queue never drained");
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        let moved = |key: &str| after.get(key) - before.get(key);
        assert_eq!(moved(SUCCESS_2XX), N as f64, "on {}", app.backend);
        assert_eq!(moved(ACCEPTED), N as f64, "on {}", app.backend);
        assert_eq!(moved(DELIVERED), N as f64, "on {}", app.backend);
        assert_eq!(
            moved("hookd_attempt_duration_seconds_count"),
            N as f64,
            "on {}",
            app.backend
        );
        assert_eq!(
            after.get(r#"hookd_time_to_deliver_seconds_bucket{le="+Inf"}"#),
            after.get(DELIVERED)
        );
        assert!(after.get("hookd_time_to_deliver_seconds_sum") > 0.0);
        assert_eq!(moved(RATE_LIMITED), 0.0);
        assert_eq!(moved(REJECTED), 0.0);
        sink.stop().await;
    }
}

/// An attempt counts as in flight from its start, in the gauge and the API, including (on
/// PostgreSQL) one handed to the dispatcher at ingest and so far only journaled (decisions 113
/// and 114).
#[tokio::test]
async fn a_slow_attempt_is_in_flight_from_its_start() {
    for app in apps_with(&[]).await {
        let sink = sink(Behaviour {
            latency_ms: 4000,
            ..Default::default()
        });
        let (a, e) = endpoint_at(&app, &sink, json!({})).await;
        let mut msgs = Vec::new();
        for n in 0..3 {
            msgs.push(send(&app, &a, json!({"n": n})).await);
        }
        // Well before the first lease renewal (a third of the 30 s lease) writes anything out.
        let mut seen = 0.0;
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && seen != 3.0 {
            seen = scrape(&app).await.get(IN_FLIGHT);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(seen, 3.0, "three attempts in flight on {}", app.backend);
        let stats = app.get(&format!("/app/{a}/endpoint/{e}/stats")).await.body;
        assert_eq!(stats["sending"], 3, "{stats} on {}", app.backend);
        let dests = app
            .get(&format!("/app/{a}/msg/{}/endpoint", msgs[0]))
            .await
            .body;
        assert_eq!(
            (&dests["data"][0]["id"], &dests["data"][0]["statusText"]),
            (&json!(e), &json!("sending")),
            "the message's destination on {}: {dests}",
            app.backend
        );
        eventually(Duration::from_secs(15), "the attempts end", || async {
            let now = scrape(&app).await;
            now.get(IN_FLIGHT) == 0.0 && now.get(PENDING) == 0.0
        })
        .await;
        assert_eq!(sink.state.report().unique, 3, "on {}", app.backend);
        sink.stop().await;
    }
}

#[tokio::test]
async fn refused_messages_are_counted_by_result() {
    let env = [
        ("HOOKD_TENANT_INGEST_RATE", "1"),
        ("HOOKD_TENANT_INGEST_BURST", "1"),
    ];
    for app in apps_with(&env).await {
        let (a, _) = app.app_with_endpoint("metrics").await;
        let before = scrape(&app).await;
        // A malformed body is refused before the limit is consulted.
        let bad = app
            .client
            .post(format!("{}/api/v1/app/{a}/msg", app.base))
            .bearer_auth(&app.key)
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        let body = json!({"eventType": "test.event", "payload": {}});
        let first = app
            .call(Method::POST, &format!("/app/{a}/msg"), Some(body.clone()))
            .await;
        assert_eq!(first.status, 202, "{}", first.body);
        let second = app
            .call(Method::POST, &format!("/app/{a}/msg"), Some(body))
            .await;
        assert_eq!(second.status, 429, "{}", second.body);
        let after = scrape(&app).await;
        let moved = |key: &str| after.get(key) - before.get(key);
        assert_eq!(moved(ACCEPTED), 1.0, "on {}", app.backend);
        assert_eq!(moved(RATE_LIMITED), 1.0, "on {}", app.backend);
        assert_eq!(moved(REJECTED), 1.0, "on {}", app.backend);
    }
}

#[tokio::test]
async fn with_the_tenant_label_each_tenant_has_its_own_series() {
    for app in apps_with(&[("HOOKD_METRICS_TENANT_LABEL", "true")]).await {
        let sink = sink(Behaviour::default());
        let (a, _) = endpoint_at(&app, &sink, json!({})).await;
        for n in 0..3 {
            send(&app, &a, json!({"n": n})).await;
        }
        eventually(Duration::from_secs(10), "all delivered", || async {
            sink.state.report().unique == 3
        })
        .await;
        let t = app.tenant.to_string();
        let key = |name: &str, rest: &str| format!("{name}{{tenant=\"{t}\",{rest}}}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let s = loop {
            let s = scrape(&app).await;
            if s.0.get(&key(
                "hookd_attempts_total",
                r#"outcome="success",class="2xx""#,
            )) == Some(&3.0)
            {
                break s;
            }
            assert!(Instant::now() < deadline, "attempts never reached 3");
            tokio::time::sleep(Duration::from_millis(25)).await;
        };
        assert_eq!(
            s.get(&key("hookd_ingest_requests_total", r#"result="accepted""#)),
            3.0
        );
        assert_eq!(
            s.get(&format!(
                "hookd_time_to_deliver_seconds_count{{tenant=\"{t}\"}}"
            )),
            3.0
        );
        // No unlabelled series of a per-tenant metric is left beside the labelled ones.
        for k in s.0.keys() {
            if k.starts_with("hookd_attempts_total")
                || k.starts_with("hookd_ingest_requests_total")
                || k.starts_with("hookd_time_to_deliver_seconds")
            {
                assert!(k.contains("tenant=\""), "{k} on {}", app.backend);
            }
        }
        sink.stop().await;
    }
}

/// Each sample of an exposition as `TYPE name{label="value",…}`: labels sorted, `tenant`
/// values replaced by `T` and `le` bounds written as numbers (`1` and `1.0` are one bound),
/// each sample's type read from its family's `# TYPE` line.
fn series_list(text: &str) -> BTreeSet<String> {
    let mut types: HashMap<&str, &str> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            types.insert(name, kind);
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = line.rsplit_once(' ').expect("name value").0;
        let (name, labels) = match key.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (key, ""),
        };
        let kind = ["", "_total", "_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| types.get(name.strip_suffix(suffix)?))
            .unwrap_or_else(|| panic!("{name} has no # TYPE line"));
        let mut pairs: Vec<String> = labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').expect("label=value");
                match k {
                    "tenant" => "tenant=\"T\"".to_owned(),
                    "le" if v != "\"+Inf\"" => {
                        let bound: f64 = v.trim_matches('"').parse().expect("le bound");
                        format!("le=\"{bound}\"")
                    }
                    _ => pair.to_owned(),
                }
            })
            .collect();
        pairs.sort();
        out.insert(match pairs.is_empty() {
            true => format!("{kind} {name}"),
            false => format!("{kind} {name}{{{}}}", pairs.join(",")),
        });
    }
    out
}

/// The series dashboards and alerts rely on, as the server wrote them before the exposition
/// moved to a library; none may disappear or change name, type, labels or label values.
const SERIES: &str = include_str!("metrics_series.txt");

/// The README's table of metrics: each `name{labels}` with its type.
fn documented_series() -> BTreeSet<String> {
    let readme = include_str!("../../../../README.md");
    let section = readme
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a Metrics section");
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells.get(1)?.strip_prefix("`hookd_")?.strip_suffix('`')?;
            let (name, labels) = name.split_once('{').unwrap_or((name, ""));
            let mut labels: Vec<&str> = labels
                .trim_end_matches('}')
                .split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            labels.sort();
            Some(match labels.is_empty() {
                true => format!("{} hookd_{name}", cells[2]),
                false => format!("{} hookd_{name}{{{}}}", cells[2], labels.join(",")),
            })
        })
        .collect()
}

/// `TYPE name{label names}` of each metric in a series list (histogram suffixes and `le`
/// folded into the metric, `tenant` left out).
fn metrics_of(list: &BTreeSet<String>) -> BTreeSet<String> {
    list.iter()
        .map(|line| {
            let (kind, key) = line.split_once(' ').unwrap();
            let (name, labels) = key.split_once('{').unwrap_or((key, ""));
            let name = if kind == "histogram" {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(name)
            } else {
                name
            };
            let names: Vec<&str> = labels
                .trim_end_matches('}')
                .split(',')
                .filter_map(|p| p.split_once('=').map(|(k, _)| k))
                .filter(|k| *k != "le" && *k != "tenant")
                .collect();
            if names.is_empty() {
                format!("{kind} {name}")
            } else {
                format!("{kind} {name}{{{}}}", names.join(","))
            }
        })
        .collect()
}

/// Attempts counted with `outcome` and `class`, over every tenant's series.
fn attempts(s: &Scrape, outcome: &str, class: &str) -> f64 {
    let (o, c) = (
        format!("outcome=\"{outcome}\""),
        format!("class=\"{class}\""),
    );
    s.0.iter()
        .filter(|(k, _)| k.starts_with("hookd_attempts_total{") && k.contains(&o) && k.contains(&c))
        .map(|(_, v)| v)
        .sum()
}

/// After one delivery succeeds, one succeeds after a retry and one fails for good, `/metrics`
/// serves exactly the series in `list` (named `file`), and the README documents each metric.
async fn serves_exactly(app: &TestApp, list: &str, file: &str) {
    let ok = sink(Behaviour::default());
    let flaky = sink(Behaviour {
        fail_first: 1,
        ..Default::default()
    });
    let broken = sink(Behaviour {
        fail_rate: 1.0,
        fail_status: 400,
        ..Default::default()
    });
    let fast = json!({"retryPolicy": {"delays": ["10ms"]}});
    for s in [&ok, &flaky, &broken] {
        let (a, _) = endpoint_at(app, s, fast.clone()).await;
        send(app, &a, json!({"n": 1})).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape_text(app).await;
        let s = scrape(app).await;
        if attempts(&s, "success", "2xx") == 2.0
            && attempts(&s, "failed", "4xx") == 1.0
            && attempts(&s, "retry", "5xx") == 1.0
        {
            break text;
        }
        assert!(Instant::now() < deadline, "attempts never counted:\n{text}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    let served = series_list(&text);
    let expected: BTreeSet<String> = list.lines().map(str::to_owned).collect();
    let missing: Vec<_> = expected.difference(&served).collect();
    let new: Vec<_> = served.difference(&expected).collect();
    assert!(
        missing.is_empty() && new.is_empty(),
        "on {}: missing {missing:#?}\nnot in {file} {new:#?}",
        app.backend
    );
    let documented = documented_series();
    let metrics = metrics_of(&served);
    let undocumented: Vec<_> = metrics.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&metrics).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "README's Metrics table: missing {undocumented:#?}\nnot served {stale:#?}"
    );
    for s in [ok, flaky, broken] {
        s.stop().await;
    }
}

#[tokio::test]
async fn every_series_keeps_its_name_type_and_labels_and_is_documented() {
    for app in apps_with(&[]).await {
        serves_exactly(&app, SERIES, "metrics_series.txt").await;
    }
}

/// As [`SERIES`], with `metrics_tenant_label = true` and one tenant.
const SERIES_BY_TENANT: &str = include_str!("metrics_series_by_tenant.txt");

#[tokio::test]
async fn with_the_tenant_label_every_series_keeps_its_name_type_and_labels() {
    for app in apps_with(&[("HOOKD_METRICS_TENANT_LABEL", "true")]).await {
        serves_exactly(&app, SERIES_BY_TENANT, "metrics_series_by_tenant.txt").await;
    }
}
