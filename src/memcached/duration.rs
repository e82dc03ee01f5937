//! Prometheus durations (`model.ParseDuration` in prometheus/common), the syntax of a
//! ServiceMonitor's `interval` and `scrapeTimeout`. A value Prometheus refuses makes the operator
//! drop the whole ServiceMonitor later, so the webhook refuses it up front and says why.

use std::fmt;
use std::time::Duration;

/// The units, largest first, in milliseconds (a year is 365 days, a week 7).
pub(crate) const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];
/// Prometheus keeps a duration as Go `time.Duration` nanoseconds, so about 292 years at most.
pub(crate) const MAX_NANOS: u128 = i64::MAX as u128;

/// Why a string is not a Prometheus duration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DurationError {
    Empty,
    Whitespace,
    Signed,
    Fraction,
    /// A number without a unit, e.g. the `30` of `1m30`.
    NoUnit(String),
    /// A unit without a number, e.g. `s` or `h30m`.
    NoNumber(String),
    UnknownUnit(String),
    /// `unit` written after the smaller `after`.
    OutOfOrder {
        unit: String,
        after: String,
    },
    Repeated(String),
    OutOfRange,
}

/// Parses `s` as current prometheus/common does: `0`, or whole numbers with units from `y` down
/// to `ms`, each at most once and largest first (`1h30m`, `90s`, `1m60s`).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    use DurationError as E;
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err(E::Empty);
    }
    if s.contains(char::is_whitespace) {
        return Err(E::Whitespace);
    }
    if s.starts_with(['+', '-']) {
        return Err(E::Signed);
    }
    let (mut rest, mut next, mut millis) = (s, 0, 0u128);
    while !rest.is_empty() {
        let (digits, after) = split(rest, |c| c.is_ascii_digit());
        let (unit, after) = split(after, |c| !c.is_ascii_digit());
        if unit.starts_with('.') || (digits.is_empty() && rest.starts_with('.')) {
            return Err(E::Fraction);
        }
        if digits.is_empty() {
            return Err(E::NoNumber(
                split(rest, |c| !c.is_ascii_digit()).0.to_owned(),
            ));
        }
        if unit.is_empty() {
            return Err(E::NoUnit(digits.to_owned()));
        }
        let Some(index) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(E::UnknownUnit(unit.to_owned()));
        };
        if index < next {
            let previous = UNITS.get(next.saturating_sub(1)).map_or("", |(u, _)| *u);
            return Err(if index + 1 == next {
                E::Repeated(unit.to_owned())
            } else {
                E::OutOfOrder {
                    unit: unit.to_owned(),
                    after: previous.to_owned(),
                }
            });
        }
        let value = digits.bytes().try_fold(0u64, |v, d| {
            v.checked_mul(10)?
                .checked_add(u64::from(d.saturating_sub(b'0')))
        });
        let scale = UNITS.get(index).map_or(1, |(_, ms)| *ms);
        millis += u128::from(value.ok_or(E::OutOfRange)?) * u128::from(scale);
        if millis * 1_000_000 > MAX_NANOS {
            return Err(E::OutOfRange);
        }
        (rest, next) = (after, index + 1);
    }
    u64::try_from(millis)
        .map(Duration::from_millis)
        .map_err(|_| E::OutOfRange)
}

/// Splits `s` after its leading characters that satisfy `keep`.
fn split(s: &str, keep: impl Fn(char) -> bool) -> (&str, &str) {
    let end = s.find(|c| !keep(c)).unwrap_or(s.len());
    s.split_at_checked(end).unwrap_or((s, ""))
}

// === impl DurationError ===

pub(crate) const SHAPE: &str = "Prometheus durations look like 30s, 1m or 1h30m";
pub(crate) const ORDER: &str = "y, w, d, h, m, s, ms";

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty duration; {SHAPE}"),
            Self::Whitespace => write!(f, "duration contains whitespace; {SHAPE}, without spaces"),
            Self::Signed => write!(f, "durations take no sign; {SHAPE}"),
            Self::Fraction => f.write_str(
                "durations take whole numbers only; use a smaller unit, e.g. 1500ms instead of 1.5s",
            ),
            Self::NoUnit(n) => write!(f, "\"{n}\" has no unit; {SHAPE}"),
            Self::NoNumber(u) => write!(f, "unit \"{u}\" has no number before it; {SHAPE}"),
            Self::UnknownUnit(u) => {
                write!(f, "unknown unit \"{u}\"; Prometheus accepts {ORDER}")?;
                match u.as_str() {
                    "us" | "µs" | "μs" | "ns" => f.write_str(" (1ms is the smallest duration)"),
                    _ if UNITS.iter().any(|(unit, _)| unit.eq_ignore_ascii_case(u)) => {
                        f.write_str(" (units are lowercase)")
                    }
                    _ => Ok(()),
                }
            }
            Self::OutOfOrder { unit, after } => write!(
                f,
                "unit \"{unit}\" comes after \"{after}\"; write units from largest to smallest \
                 ({ORDER}), e.g. 1m30s"
            ),
            Self::Repeated(u) => {
                write!(f, "unit \"{u}\" appears twice; each unit may appear once, e.g. 1m30s")
            }
            Self::OutOfRange => f.write_str("duration is too long; Prometheus allows at most 292 years"),
        }
    }
}

impl std::error::Error for DurationError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_prometheus_durations() {
        let ms = Duration::from_millis;
        #[rustfmt::skip]
        let cases = [
            ("0", ms(0)), ("0s", ms(0)), ("0ms", ms(0)), ("30s", ms(30_000)), ("10s", ms(10_000)),
            ("1m30s", ms(90_000)), ("1m60s", ms(120_000)), ("90s", ms(90_000)), ("1h", ms(3_600_000)),
            ("500ms", ms(500)), ("1h30m", ms(5_400_000)), ("2d", ms(172_800_000)),
            ("1w", ms(604_800_000)), ("1y", ms(31_536_000_000)), ("007s", ms(7_000)),
            ("1y1w1d1h1m1s1ms", ms(31_536_000_000 + 604_800_000 + 86_400_000 + 3_661_001)),
            ("292y", ms(292 * 31_536_000_000)), ("9223372036854ms", ms(9_223_372_036_854)),
            ("106751d23h47m16s854ms", ms(9_223_372_036_854)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn refuses_what_prometheus_refuses() {
        use DurationError::*;
        let (s, unit) = (
            |v: &str| v.to_owned(),
            |u: &str, a: &str| (u.to_owned(), a.to_owned()),
        );
        #[rustfmt::skip]
        let cases = [
            ("", Empty), ("30 s", Whitespace), (" 30s", Whitespace), ("30s\n", Whitespace),
            ("-1s", Signed), ("+1s", Signed), ("1.5s", Fraction), ("1h0.5m", Fraction),
            (".5s", Fraction), ("30", NoUnit(s("30"))), ("1m30", NoUnit(s("30"))),
            ("00", NoUnit(s("00"))), ("s", NoNumber(s("s"))), ("h30m", NoNumber(s("h"))),
            ("500us", UnknownUnit(s("us"))), ("5µs", UnknownUnit(s("µs"))),
            ("5ns", UnknownUnit(s("ns"))), ("30S", UnknownUnit(s("S"))), ("1M", UnknownUnit(s("M"))),
            ("5sec", UnknownUnit(s("sec"))), ("1h-5m", UnknownUnit(s("h-"))),
            ("30s1m", { let (unit, after) = unit("m", "s"); OutOfOrder { unit, after } }),
            ("1ms1s", { let (unit, after) = unit("s", "ms"); OutOfOrder { unit, after } }),
            ("1m1m", Repeated(s("m"))), ("1s2s", Repeated(s("s"))),
            ("293y", OutOfRange), ("9223372036855ms", OutOfRange),
            ("18446744073709551616s", OutOfRange), ("106751d23h48m", OutOfRange),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), Err(want), "{input}");
        }
    }

    #[test]
    fn says_what_to_write_instead() {
        #[rustfmt::skip]
        let cases = [
            ("30", "\"30\" has no unit; Prometheus durations look like 30s, 1m or 1h30m"),
            ("1.5s", "durations take whole numbers only; use a smaller unit, e.g. 1500ms instead of 1.5s"),
            ("500us", "unknown unit \"us\"; Prometheus accepts y, w, d, h, m, s, ms (1ms is the smallest duration)"),
            ("30S", "unknown unit \"S\"; Prometheus accepts y, w, d, h, m, s, ms (units are lowercase)"),
            ("30s1m", "unit \"m\" comes after \"s\"; write units from largest to smallest (y, w, d, h, m, s, ms), e.g. 1m30s"),
            ("1m1m", "unit \"m\" appears twice; each unit may appear once, e.g. 1m30s"),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(input).map_err(|e| e.to_string()),
                Err(want.to_owned())
            );
        }
    }
}
