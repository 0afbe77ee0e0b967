//! Times as every page shows them, and the local time of the browser's forms.
//!
//! A [`When`] renders as `<time datetime="…Z" class="rel" title="…">2024-05-01 12:00:00 UTC</time>`:
//! exact UTC without script; static/ui.js turns the text into "3 min ago" or "in 25 s" (kept
//! current) and the title into the browser's local time with UTC beside it. The forms that
//! take a time (the message log's range, recover's "Since") read and show it at a [`TzOffset`]
//! the browser sends (`tz`), or UTC without one.

use std::fmt;

use domain::Timestamp;
use domain::time::rfc3339;

/// A moment on a page (see the module's text). Its markup holds only digits and fixed text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct When(Timestamp);

impl When {
    pub fn at_ms(ms: i64) -> When {
        When(Timestamp::from_millis(ms))
    }

    /// `2024-05-01 12:00:00 UTC`.
    pub fn utc_text(&self) -> String {
        let s = rfc3339::format(self.0);
        // "2024-05-01T12:00:00.123Z"
        format!("{} {} UTC", &s[..10], &s[11..19])
    }
}

impl fmt::Display for When {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.utc_text();
        write!(
            f,
            r#"<time class="rel" datetime="{}" title="{text}">{text}</time>"#,
            rfc3339::format(self.0)
        )
    }
}

/// Its markup is built above from a timestamp alone: nothing to escape.
impl askama::filters::HtmlSafe for When {}

/// Minutes east of UTC of the browser that filled a form (`-new Date().getTimezoneOffset()`);
/// zero (UTC) when the page had no script to say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TzOffset(i32);

/// The widest offsets in use are UTC−12 and UTC+14.
const MAX_OFFSET_MINUTES: i32 = 14 * 60;
const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 24 * 3_600_000;

impl TzOffset {
    pub const UTC: TzOffset = TzOffset(0);

    /// `""` is UTC; anything but a whole number of minutes within UTC−14 to UTC+14 is `None`.
    pub fn parse(text: &str) -> Option<TzOffset> {
        match text.trim() {
            "" => Some(TzOffset::UTC),
            t => t
                .parse::<i32>()
                .ok()
                .filter(|m| m.abs() <= MAX_OFFSET_MINUTES)
                .map(TzOffset),
        }
    }

    pub fn minutes(self) -> i32 {
        self.0
    }

    fn ms(self) -> i64 {
        i64::from(self.0) * MINUTE_MS
    }

    /// How a form's label names the zone its times are in: "UTC", or "your time, UTC−04:00"
    /// (static/ui.js words it the same when it converts a page's fields).
    pub fn label(self) -> String {
        if self.0 == 0 {
            return "UTC".to_owned();
        }
        let sign = if self.0 < 0 { '−' } else { '+' };
        let m = self.0.abs();
        format!("your time, UTC{sign}{:02}:{:02}", m / 60, m % 60)
    }

    /// The value of a `datetime-local` input showing `t` at this offset (minutes).
    pub fn datetime_local(self, t: Timestamp) -> String {
        rfc3339::format(Timestamp::from_millis(t.as_millis() + self.ms()))[..16].to_owned()
    }

    /// Reads a `datetime-local` value (`2024-05-01T12:00`, seconds optional) as a time at this
    /// offset. Full RFC 3339 text with its own offset is read as it says.
    pub fn parse_datetime_local(self, s: &str) -> Option<Timestamp> {
        let s = s.trim();
        let has_offset = s.ends_with('Z')
            || s.ends_with('z')
            || s.get(19..).is_some_and(|t| t.contains(['+', '-']));
        let full = match s.len() {
            16 => format!("{s}:00Z"),
            _ if has_offset => return rfc3339::parse(s).ok(),
            _ => format!("{s}Z"),
        };
        let wall = rfc3339::parse(&full).ok()?;
        Some(Timestamp::from_millis(wall.as_millis() - self.ms()))
    }

    /// Midnight starting the day that holds `now` at this offset.
    pub fn start_of_day(self, now: Timestamp) -> Timestamp {
        let local = now.as_millis() + self.ms();
        Timestamp::from_millis(local - local.rem_euclid(DAY_MS) - self.ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_exact_utc_text_in_a_time_element_the_script_can_read() {
        let w = When::at_ms(1_614_265_330_123);
        assert_eq!(w.utc_text(), "2021-02-25 15:02:10 UTC");
        assert_eq!(
            w.to_string(),
            r#"<time class="rel" datetime="2021-02-25T15:02:10.123Z" title="2021-02-25 15:02:10 UTC">2021-02-25 15:02:10 UTC</time>"#
        );
    }

    #[test]
    fn a_page_shows_a_time_unescaped_once() {
        #[derive(askama::Template)]
        #[template(source = "<td>{{ when }}</td>", ext = "html")]
        struct Row {
            when: When,
        }
        let html = askama::Template::render(&Row {
            when: When::at_ms(0),
        })
        .unwrap();
        assert!(
            html.starts_with(r#"<td><time class="rel" datetime="1970-01-01T00:00:00"#),
            "{html}"
        );
    }

    #[test]
    fn offsets_are_whole_minutes_within_the_zones_in_use() {
        assert_eq!(TzOffset::parse(""), Some(TzOffset::UTC));
        assert_eq!(TzOffset::parse("-240"), Some(TzOffset(-240)));
        assert_eq!(TzOffset::parse(" 330 "), Some(TzOffset(330)));
        for bad in ["841", "-841", "1.5", "EST", "99999999999"] {
            assert_eq!(TzOffset::parse(bad), None, "{bad:?}");
        }
        assert_eq!(TzOffset::UTC.label(), "UTC");
        assert_eq!(TzOffset(-240).label(), "your time, UTC−04:00");
        assert_eq!(TzOffset(330).label(), "your time, UTC+05:30");
    }

    #[test]
    fn form_times_read_and_show_at_the_browsers_offset() {
        let t = Timestamp::from_millis(1_614_265_320_000); // 2021-02-25T15:02:00Z
        let utc = TzOffset::UTC;
        assert_eq!(utc.datetime_local(t), "2021-02-25T15:02");
        assert_eq!(utc.parse_datetime_local("2021-02-25T15:02"), Some(t));
        assert_eq!(utc.parse_datetime_local(" 2021-02-25T15:02:00 "), Some(t));
        assert_eq!(
            utc.parse_datetime_local("2021-02-25T16:02:00+01:00"),
            Some(t)
        );
        let new_york = TzOffset(-300);
        assert_eq!(new_york.datetime_local(t), "2021-02-25T10:02");
        assert_eq!(new_york.parse_datetime_local("2021-02-25T10:02"), Some(t));
        // Text with its own offset means what it says, whatever the browser's.
        assert_eq!(
            new_york.parse_datetime_local("2021-02-25T15:02:00Z"),
            Some(t)
        );
        for bad in [
            "",
            "yesterday",
            "2021-02-25",
            "2021-02-30T10:00",
            "2021-02-25T25:00",
        ] {
            assert_eq!(new_york.parse_datetime_local(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn today_starts_at_the_browsers_midnight() {
        // 2024-05-01T02:30:00Z: still 30 April in New York (UTC−4), already 1 May in UTC.
        let now = Timestamp::from_millis(1_714_530_600_000);
        let ny = TzOffset(-240);
        assert_eq!(ny.datetime_local(ny.start_of_day(now)), "2024-04-30T00:00");
        assert_eq!(
            TzOffset::UTC.datetime_local(ny.start_of_day(now)),
            "2024-04-30T04:00"
        );
        assert_eq!(
            TzOffset::UTC.datetime_local(TzOffset::UTC.start_of_day(now)),
            "2024-05-01T00:00"
        );
        let tokyo = TzOffset(540);
        assert_eq!(
            tokyo.datetime_local(tokyo.start_of_day(now)),
            "2024-05-01T00:00"
        );
    }
}
