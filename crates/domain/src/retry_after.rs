//! The `Retry-After` response header (RFC 9110 §10.2.3): delta-seconds or an HTTP-date.

use std::time::Duration;

use crate::time::Timestamp;

/// Longer hints are clamped to this. No receiver means "a year from now", and the clamp keeps
/// every value representable as i64 milliseconds wherever it is stored or added to a time.
pub const RETRY_AFTER_CEILING: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long the receiver asked us to wait, relative to `now`.
///
/// Accepts delta-seconds (`120`) or an HTTP-date (IMF-fixdate, plus the two obsolete forms
/// RFC 9110 obliges recipients to read). A date in the past means "now" (zero). Anything else —
/// negative or fractional numbers, garbage — is ignored (`None`): a malformed hint must not
/// change the schedule.
pub fn parse_retry_after(value: &str, now: Timestamp) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        // All digits: only overflow can fail, and an overflowing number is simply "very long".
        let secs = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(RETRY_AFTER_CEILING));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        Timestamp::from_system_time(date)
            .since(now)
            .min(RETRY_AFTER_CEILING),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // 2021-02-25T15:02:10Z, a Thursday.
    const NOW: Timestamp = Timestamp::from_secs(1_614_265_330);

    #[test]
    fn delta_seconds() {
        let cases = [("0", 0), ("5", 5), ("120", 120), ("  30 ", 30), ("007", 7)];
        for (input, secs) in cases {
            assert_eq!(
                parse_retry_after(input, NOW),
                Some(Duration::from_secs(secs)),
                "{input:?}"
            );
        }
    }

    #[test]
    fn http_date_relative_to_now() {
        assert_eq!(
            parse_retry_after("Thu, 25 Feb 2021 15:04:10 GMT", NOW),
            Some(Duration::from_secs(120))
        );
        // The obsolete RFC 850 and asctime forms name the same instant.
        assert_eq!(
            parse_retry_after("Thursday, 25-Feb-21 15:04:10 GMT", NOW),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Thu Feb 25 15:04:10 2021", NOW),
            Some(Duration::from_secs(120))
        );
    }

    #[test]
    fn past_date_means_now() {
        assert_eq!(
            parse_retry_after("Thu, 25 Feb 2021 15:00:00 GMT", NOW),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", NOW),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn garbage_is_ignored() {
        for bad in [
            "",
            "   ",
            "-5",
            "+5",
            "1.5",
            "5s",
            "soon",
            "0x10",
            "1 2",
            "Thu, 32 Feb 2021 15:04:10 GMT",
            "25 Feb 2021",
        ] {
            assert_eq!(parse_retry_after(bad, NOW), None, "{bad:?}");
        }
    }

    #[test]
    fn absurd_values_saturate() {
        assert_eq!(
            parse_retry_after("99999999999999999999999999", NOW),
            Some(RETRY_AFTER_CEILING)
        );
        assert_eq!(
            parse_retry_after(&u64::MAX.to_string(), NOW),
            Some(RETRY_AFTER_CEILING)
        );
        assert_eq!(
            parse_retry_after("Fri, 31 Dec 9999 23:59:59 GMT", NOW),
            Some(RETRY_AFTER_CEILING)
        );
        assert_eq!(
            parse_retry_after("31536000", NOW),
            Some(Duration::from_secs(31_536_000))
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_never_exceeds_ceiling(s in "\\PC{0,40}", now in any::<i64>()) {
            if let Some(d) = parse_retry_after(&s, Timestamp::from_millis(now)) {
                prop_assert!(d <= RETRY_AFTER_CEILING);
            }
        }

        #[test]
        fn any_integer_round_trips(secs in 0u64..=31_536_000) {
            prop_assert_eq!(
                parse_retry_after(&secs.to_string(), NOW),
                Some(Duration::from_secs(secs))
            );
        }
    }
}
