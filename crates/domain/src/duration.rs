//! Human durations used by config and the API: `500ms`, `5s`, `10m`, `2h`, `5d`.

use std::fmt;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid duration {input:?}: expected a whole number followed by ms, s, m, h or d (e.g. 500ms, 5s, 2h, 5d)"
)]
pub struct DurationParseError {
    pub input: String,
}

/// Parses `<digits><unit>` with unit one of `ms`, `s`, `m`, `h`, `d`.
pub fn parse_duration(input: &str) -> Result<Duration, DurationParseError> {
    let err = || DurationParseError {
        input: input.to_owned(),
    };
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(err)?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() {
        return Err(err());
    }
    let n: u64 = digits.parse().map_err(|_| err())?;
    let ms_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(err()),
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(err)
}

/// Formats a duration in the largest unit that divides it exactly (`90s`, `2h`, `150ms`).
pub fn format_duration(d: Duration) -> String {
    HumanDuration(d).to_string()
}

/// Display adapter for [`format_duration`].
pub struct HumanDuration(pub Duration);

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        for (unit, size) in [
            ("d", 86_400_000u128),
            ("h", 3_600_000),
            ("m", 60_000),
            ("s", 1_000),
        ] {
            if ms != 0 && ms.is_multiple_of(size) {
                return write!(f, "{}{unit}", ms / size);
            }
        }
        write!(f, "{ms}ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("5d"), Ok(Duration::from_secs(432_000)));
        assert_eq!(parse_duration(" 120h "), Ok(Duration::from_secs(432_000)));
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "",
            "5",
            "s",
            "5x",
            "-5s",
            "1.5s",
            "5 s",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn formats_in_the_largest_exact_unit() {
        assert_eq!(format_duration(Duration::from_secs(432_000)), "5d");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::from_millis(150)), "150ms");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
        for s in ["5d", "90s", "150ms", "2h", "3m"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
