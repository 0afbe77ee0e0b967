//! Charts drawn on the server as SVG, from the per-minute attempt statistics: no script, no
//! third-party library, readable at 360 px (the SVG scales to its box).
//!
//! Every number in the markup is formatted here from integers or floats; the only text is
//! fixed labels and times, so nothing a tenant typed ever reaches the SVG.
//!
//! Each bucket has a hit area with a `<title>` (its time and values) that the browser shows on
//! hover without script; static/ui.js also shows it as a tooltip on hover and on focus (the
//! chart takes the keyboard focus; the arrow keys move from bucket to bucket).

use std::fmt::Write;
use std::time::Duration;

use domain::Timestamp;
use store::{StatCounts, StatPoint};

const W: f64 = 720.0;
const H: f64 = 160.0;
/// Room for the y-axis labels on the left and the time labels below.
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 18.0;
const TOP: f64 = 8.0;

/// One chart: its title, a one-line summary of the whole window and the SVG markup.
pub struct Chart {
    pub title: &'static str,
    pub summary: String,
    pub svg: String,
    /// The series shown, for the legend: (label, CSS class).
    pub legend: Vec<(&'static str, &'static str)>,
}

/// The windows a chart can cover. Bucket sizes keep every chart at most 169 buckets (a week
/// of hours; a window not on a bucket edge takes one partial bucket more).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChartRange {
    Hour,
    Day,
    Week,
}

impl ChartRange {
    pub const ALL: [ChartRange; 3] = [ChartRange::Hour, ChartRange::Day, ChartRange::Week];

    /// The `range` parameter's value; anything else (or nothing) is the last 24 hours.
    pub fn parse(value: &str) -> ChartRange {
        ChartRange::ALL
            .into_iter()
            .find(|r| r.as_str() == value)
            .unwrap_or(ChartRange::Day)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChartRange::Hour => "1h",
            ChartRange::Day => "24h",
            ChartRange::Week => "7d",
        }
    }

    /// The switch's button text.
    pub fn short(self) -> &'static str {
        match self {
            ChartRange::Hour => "1 h",
            ChartRange::Day => "24 h",
            ChartRange::Week => "7 d",
        }
    }

    /// The card's heading.
    pub fn label(self) -> &'static str {
        match self {
            ChartRange::Hour => "Last hour",
            ChartRange::Day => "Last 24 hours",
            ChartRange::Week => "Last 7 days",
        }
    }

    pub fn window(self) -> Duration {
        Duration::from_secs(match self {
            ChartRange::Hour => 3_600,
            ChartRange::Day => 24 * 3_600,
            ChartRange::Week => 7 * 24 * 3_600,
        })
    }

    /// Whole minutes, as the per-minute statistics are summed.
    pub fn bucket_minutes(self) -> i64 {
        match self {
            ChartRange::Hour => 1,
            ChartRange::Day => 10,
            ChartRange::Week => 60,
        }
    }

    pub fn bucket_words(self) -> &'static str {
        match self {
            ChartRange::Hour => "1-minute buckets, UTC",
            ChartRange::Day => "10-minute buckets, UTC",
            ChartRange::Week => "1-hour buckets, UTC",
        }
    }

    /// The most buckets a chart of this range draws.
    pub fn max_points(self) -> usize {
        (self.window().as_secs() / 60 / self.bucket_minutes() as u64) as usize + 1
    }
}

/// The four overview charts over `points` (oldest first, equal buckets).
pub fn overview_charts(points: &[StatPoint], bucket_minutes: i64) -> Vec<Chart> {
    let mut total = StatCounts::default();
    for p in points {
        total.add(&p.counts);
    }
    let per_min = |n: i64| n as f64 / bucket_minutes.max(1) as f64;
    let stacks: Vec<[f64; 3]> = points
        .iter()
        .map(|p| {
            [
                per_min(p.counts.succeeded),
                per_min(p.counts.retried),
                per_min(p.counts.dead),
            ]
        })
        .collect();
    let attempts = total.attempts();
    let rate = |c: &StatCounts| {
        (c.attempts() > 0).then(|| 100.0 * c.succeeded as f64 / c.attempts() as f64)
    };
    let quantile = |c: &StatCounts, q| c.latency_quantile_ms(q).map(|v| v as f64);
    let p50: Vec<Option<f64>> = points.iter().map(|p| quantile(&p.counts, 0.5)).collect();
    let p95: Vec<Option<f64>> = points.iter().map(|p| quantile(&p.counts, 0.95)).collect();
    let dead: Vec<[f64; 3]> = points
        .iter()
        .map(|p| [0.0, 0.0, p.counts.dead as f64])
        .collect();
    let times: Vec<Timestamp> = points.iter().map(|p| p.start).collect();
    let show_ms = |v: Option<i64>| v.map_or("over 10 s".to_owned(), |v| format!("≤ {v} ms"));
    let span = |p: &StatPoint| bucket_span(p.start, bucket_minutes);
    let tips = Tips {
        deliveries: points
            .iter()
            .map(|p| {
                let c = &p.counts;
                format!(
                    "{}: {} delivered, {} to retry, {} dead",
                    span(p),
                    group(c.succeeded),
                    group(c.retried),
                    group(c.dead)
                )
            })
            .collect(),
        rate: points
            .iter()
            .map(|p| match rate(&p.counts) {
                Some(r) => format!(
                    "{}: {r:.1} % of {} succeeded",
                    span(p),
                    plural(p.counts.attempts(), "attempt")
                ),
                None => format!("{}: no attempts", span(p)),
            })
            .collect(),
        latency: points
            .iter()
            .map(|p| match p.counts.attempts() {
                0 => format!("{}: no attempts", span(p)),
                _ => format!(
                    "{}: p50 {} · p95 {}",
                    span(p),
                    show_ms(p.counts.latency_quantile_ms(0.5)),
                    show_ms(p.counts.latency_quantile_ms(0.95))
                ),
            })
            .collect(),
        dead: points
            .iter()
            .map(|p| format!("{}: {} dead", span(p), group(p.counts.dead)))
            .collect(),
    };
    vec![
        Chart {
            title: "Deliveries per minute",
            summary: format!(
                "{} attempt{}: {} delivered, {} to retry, {} dead",
                group(attempts),
                if attempts == 1 { "" } else { "s" },
                group(total.succeeded),
                group(total.retried),
                group(total.dead)
            ),
            svg: bars(&stacks, &times, &tips.deliveries, "Deliveries per minute"),
            legend: vec![
                ("Delivered", "s-ok"),
                ("Failed, will retry", "s-retry"),
                ("Dead", "s-dead"),
            ],
        },
        Chart {
            title: "Success rate",
            summary: match rate(&total) {
                Some(r) => format!("{r:.1} % of attempts succeeded"),
                None => "No attempts in this window".to_owned(),
            },
            svg: lines(
                &[(
                    points.iter().map(|p| rate(&p.counts)).collect(),
                    "s-ok-line",
                )],
                &times,
                &tips.rate,
                Some(100.0),
                "%",
            ),
            legend: vec![("Succeeded", "s-ok")],
        },
        Chart {
            title: "Attempt latency",
            summary: if attempts == 0 {
                "No attempts in this window".to_owned()
            } else {
                format!(
                    "p50 {} · p95 {}",
                    show_ms(total.latency_quantile_ms(0.5)),
                    show_ms(total.latency_quantile_ms(0.95))
                )
            },
            svg: lines(
                &[(p50, "s-p50-line"), (p95, "s-p95-line")],
                &times,
                &tips.latency,
                None,
                "ms",
            ),
            legend: vec![("p50", "s-p50"), ("p95", "s-p95")],
        },
        Chart {
            title: "Dead letters",
            summary: format!(
                "{} {} failed for good",
                group(total.dead),
                if total.dead == 1 {
                    "delivery"
                } else {
                    "deliveries"
                }
            ),
            svg: bars(&dead, &times, &tips.dead, "Dead letters"),
            legend: vec![("Dead", "s-dead")],
        },
    ]
}

/// What each bucket's tooltip says, per chart.
struct Tips {
    deliveries: Vec<String>,
    rate: Vec<String>,
    latency: Vec<String>,
    dead: Vec<String>,
}

/// "2024-05-01 12:00–12:10 UTC": a bucket's start and end.
fn bucket_span(start: Timestamp, bucket_minutes: i64) -> String {
    let end = Timestamp::from_millis(start.as_millis() + bucket_minutes * 60_000);
    let day = domain::time::rfc3339::format(start);
    format!("{} {}–{} UTC", &day[..10], hh_mm(start), hh_mm(end))
}

fn plural(n: i64, what: &str) -> String {
    format!("{} {what}{}", group(n), if n == 1 { "" } else { "s" })
}

/// 12345 as "12,345".
pub fn group(n: i64) -> String {
    let s = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A "nice" axis maximum at or above `v`: 1, 2 or 5 times a power of ten.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|m| *m >= v)
        .unwrap_or(10.0 * p)
}

fn axis_label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{}k", trim(v / 1000.0))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

/// The chart takes the keyboard focus (one stop, not one per bucket): static/ui.js then shows
/// the buckets' values one by one with the arrow keys.
fn open_svg(out: &mut String, label: &str) {
    let _ = write!(
        out,
        r#"<svg viewBox="0 0 {W} {H}" class="chart" role="img" aria-label="{label}" tabindex="0" preserveAspectRatio="none">"#
    );
}

/// One hit area per bucket, over the whole plot's height, holding the bucket's values as its
/// `<title>` (times and numbers only: nothing to escape).
fn hit_areas(out: &mut String, tips: &[String]) {
    let plot_h = H - TOP - BOTTOM;
    let step = (W - LEFT) / tips.len().max(1) as f64;
    for (i, tip) in tips.iter().enumerate() {
        let x = LEFT + step * i as f64;
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{TOP}" width="{step:.2}" height="{plot_h}" class="hit"><title>{tip}</title></rect>"#
        );
    }
}

/// The frame: horizontal grid lines with labels at 0, half and max, and time labels.
fn frame(out: &mut String, max: f64, unit: &str, times: &[Timestamp]) {
    let plot_h = H - TOP - BOTTOM;
    for f in [0.0, 0.5, 1.0] {
        let y = TOP + plot_h * (1.0 - f);
        let _ = write!(
            out,
            r#"<line x1="{LEFT}" x2="{W}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{x:.1}" y="{ty:.1}" class="axis" text-anchor="end">{l}{u}</text>"#,
            x = LEFT - 4.0,
            ty = y + 4.0,
            l = axis_label(max * f),
            u = if f == 0.0 { "" } else { unit_suffix(unit) },
        );
    }
    // Time labels: start, middle and end of the window, as UTC hours.
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        let mid = times[times.len() / 2];
        for (t, anchor, x) in [
            (first, "start", LEFT),
            (&mid, "middle", LEFT + (W - LEFT) / 2.0),
            (last, "end", W),
        ] {
            let _ = write!(
                out,
                r#"<text x="{x:.1}" y="{y:.1}" class="axis" text-anchor="{anchor}">{}</text>"#,
                time_label(*t, times),
                y = H - 4.0,
            );
        }
    }
}

fn unit_suffix(unit: &str) -> &str {
    match unit {
        "%" => "%",
        "ms" => " ms",
        _ => "",
    }
}

/// The time labels under a chart: hours and minutes, and the day when the window is a week.
fn time_label(t: Timestamp, times: &[Timestamp]) -> String {
    let spans_days = match (times.first(), times.last()) {
        (Some(a), Some(b)) => b.as_millis() - a.as_millis() > 2 * 24 * 3_600_000,
        _ => false,
    };
    if spans_days {
        let day = domain::time::rfc3339::format(t);
        format!("{} {}", &day[5..10], hh_mm(t))
    } else {
        hh_mm(t)
    }
}

fn hh_mm(t: Timestamp) -> String {
    let mins = t.as_millis().div_euclid(60_000).rem_euclid(24 * 60);
    format!("{:02}:{:02}", mins / 60, mins % 60)
}

/// Stacked bars: each point is (bottom, middle, top) values.
fn bars(points: &[[f64; 3]], times: &[Timestamp], tips: &[String], label: &str) -> String {
    let max = nice_max(
        points
            .iter()
            .map(|p| p.iter().sum::<f64>())
            .fold(0.0, f64::max),
    );
    let mut out = String::new();
    open_svg(&mut out, label);
    frame(&mut out, max, "", times);
    let plot_h = H - TOP - BOTTOM;
    let step = (W - LEFT) / points.len().max(1) as f64;
    let width = (step * 0.8).max(0.5);
    for (i, p) in points.iter().enumerate() {
        let x = LEFT + step * i as f64 + (step - width) / 2.0;
        let mut base = 0.0;
        for (v, class) in p.iter().zip(["s-ok", "s-retry", "s-dead"]) {
            if *v <= 0.0 {
                continue;
            }
            let y = TOP + plot_h * (1.0 - (base + v) / max);
            let h = plot_h * v / max;
            let _ = write!(
                out,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{width:.1}" height="{h:.1}" class="{class}"/>"#
            );
            base += v;
        }
    }
    hit_areas(&mut out, tips);
    out.push_str("</svg>");
    out
}

/// Line series with gaps where a bucket has no value; `fixed_max` pins the axis (100 %).
fn lines(
    series: &[(Vec<Option<f64>>, &str)],
    times: &[Timestamp],
    tips: &[String],
    fixed_max: Option<f64>,
    unit: &str,
) -> String {
    let max = fixed_max.unwrap_or_else(|| {
        nice_max(
            series
                .iter()
                .flat_map(|(s, _)| s.iter().flatten().copied())
                .fold(0.0, f64::max),
        )
    });
    let mut out = String::new();
    open_svg(
        &mut out,
        match unit {
            "%" => "Success rate",
            _ => "Attempt latency",
        },
    );
    frame(&mut out, max, unit, times);
    let plot_h = H - TOP - BOTTOM;
    for (values, class) in series {
        let step = (W - LEFT) / values.len().max(1) as f64;
        let mut path = String::new();
        let mut pen_down = false;
        for (i, v) in values.iter().enumerate() {
            let Some(v) = v else {
                pen_down = false;
                continue;
            };
            let x = LEFT + step * (i as f64 + 0.5);
            let y = TOP + plot_h * (1.0 - v.min(max) / max);
            let _ = write!(path, "{}{x:.1} {y:.1} ", if pen_down { "L" } else { "M" });
            pen_down = true;
            // A lone point is drawn as a dot, or it would not show.
            let _ = write!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="1.6" class="{}"/>"#,
                class.trim_end_matches("-line")
            );
        }
        if !path.is_empty() {
            let _ = write!(out, r#"<path d="{}" class="{class}"/>"#, path.trim_end());
        }
    }
    hit_areas(&mut out, tips);
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bars, not counting each bucket's hit area.
    fn bars_drawn(svg: &str) -> usize {
        svg.matches("<rect").count() - svg.matches(r#"class="hit""#).count()
    }

    fn point(minute: i64, ok: i64, retry: i64, dead: i64, ms: i64) -> StatPoint {
        let mut c = StatCounts::default();
        for _ in 0..ok {
            c.count(store::Outcome::Succeeded, ms);
        }
        for _ in 0..retry {
            c.count(store::Outcome::Retried, ms);
        }
        for _ in 0..dead {
            c.count(store::Outcome::Dead, ms);
        }
        StatPoint {
            start: Timestamp::from_millis(minute * 60_000),
            counts: c,
        }
    }

    #[test]
    fn summaries_state_the_window_totals() {
        let points = vec![
            point(0, 90, 5, 5, 20),
            point(10, 0, 0, 0, 0),
            point(20, 10, 0, 0, 400),
        ];
        let charts = overview_charts(&points, 10);
        assert_eq!(
            charts[0].summary,
            "110 attempts: 100 delivered, 5 to retry, 5 dead"
        );
        assert_eq!(charts[1].summary, "90.9 % of attempts succeeded");
        assert_eq!(charts[2].summary, "p50 ≤ 25 ms · p95 ≤ 500 ms");
        assert_eq!(charts[3].summary, "5 deliveries failed for good");
        // Bars only where something happened: 3 stacks in the first bucket, 1 in the last.
        assert_eq!(bars_drawn(&charts[0].svg), 4);
        // The empty middle bucket breaks the success-rate line into two pieces.
        assert_eq!(charts[1].svg.matches("<path").count(), 1);
        assert_eq!(charts[1].svg.matches('M').count(), 2);
    }

    #[test]
    fn an_empty_window_says_so_and_still_draws_axes() {
        let points = vec![point(0, 0, 0, 0, 0), point(10, 0, 0, 0, 0)];
        let charts = overview_charts(&points, 10);
        assert_eq!(charts[1].summary, "No attempts in this window");
        assert!(
            charts
                .iter()
                .all(|c| c.svg.starts_with("<svg") && c.svg.ends_with("</svg>"))
        );
        assert_eq!(bars_drawn(&charts[0].svg), 0);
    }

    #[test]
    fn every_range_draws_a_bounded_number_of_buckets() {
        assert_eq!(ChartRange::Hour.max_points(), 61);
        assert_eq!(ChartRange::Day.max_points(), 145);
        assert_eq!(ChartRange::Week.max_points(), 169);
        for r in ChartRange::ALL {
            assert_eq!(ChartRange::parse(r.as_str()), r);
            // The store sums from the bucket edge at or before the window's start.
            let now = 1_714_571_123_456_i64;
            let bucket = r.bucket_minutes() * 60_000;
            let since = now - r.window().as_millis() as i64;
            let first = since.div_euclid(bucket) * bucket;
            let n = ((now - first) as f64 / bucket as f64).ceil() as usize;
            assert!(n <= r.max_points(), "{r:?}: {n}");
        }
        assert_eq!(ChartRange::parse("1y"), ChartRange::Day);
        assert_eq!(ChartRange::parse(""), ChartRange::Day);
    }

    #[test]
    fn each_bucket_holds_its_own_values_on_hover() {
        // A week's hour buckets: what happened at 00:00 and 00:59 is in the first, at 01:00
        // in the second (the store sums whole minutes into buckets).
        let points = vec![point(0, 2, 1, 0, 20), point(60, 0, 0, 1, 20)];
        let charts = overview_charts(&points, 60);
        for c in &charts {
            assert_eq!(c.svg.matches("<title>").count(), 2, "{}", c.title);
            assert_eq!(c.svg.matches(r#"class="hit""#).count(), 2, "{}", c.title);
            assert!(c.svg.contains(r#"tabindex="0""#));
        }
        assert!(charts[0].svg.contains(
            "<title>1970-01-01 00:00–01:00 UTC: 2 delivered, 1 to retry, 0 dead</title>"
        ));
        assert!(charts[0].svg.contains(
            "<title>1970-01-01 01:00–02:00 UTC: 0 delivered, 0 to retry, 1 dead</title>"
        ));
        assert!(
            charts[1].svg.contains(
                "<title>1970-01-01 00:00–01:00 UTC: 66.7 % of 3 attempts succeeded</title>"
            )
        );
        assert!(
            charts[2]
                .svg
                .contains("00:00–01:00 UTC: p50 ≤ 25 ms · p95 ≤ 25 ms")
        );
        assert!(charts[3].svg.contains("01:00–02:00 UTC: 1 dead</title>"));
    }

    #[test]
    fn axis_maxima_are_round_and_numbers_grouped() {
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.0), 10.0);
        assert_eq!(nice_max(130.0), 200.0);
        assert_eq!(nice_max(4500.0), 5000.0);
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group(999), "999");
        assert_eq!(axis_label(2500.0), "2.5k");
    }
}
