//! Kubernetes resource quantities (`resource.Quantity` in k8s.io/apimachinery), parsed and printed
//! the way the apiserver and the Go reference webhook do, so the memory-limit rule (R1) compares
//! exact values and quotes them in the same canonical form, never through a float.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

/// apimachinery keeps nothing finer than 1n (finer values round away from zero), so every value
/// is a whole number of nanounits. An i128 of them reaches about 1.7e29 units.
const NANO: i128 = 1_000_000_000;
/// Go's parser silently caps a BinarySI quantity at 2^63-1 units.
const BINARY_CAP: u128 = i64::MAX as u128 * NANO as u128;
const BINARY_SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
/// The suffixes for 10^-9, 10^-6, … 10^18.
const DECIMAL_SUFFIXES: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];

/// How a quantity was written, which decides how it is printed back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Powers of 1024: `Ki` … `Ei`.
    BinarySI,
    /// Powers of 1000, or no suffix: `n u m k M G T P E`.
    DecimalSI,
    /// An exponent: `e3`, `E-2`.
    DecimalExponent,
}

/// An exact quantity. Equality and order are by value only (`1Gi == 1024Mi == 1073741824`).
#[derive(Clone, Copy, Debug)]
pub struct Quantity {
    nanos: i128,
    format: Format,
    /// Go reuses the input text as `String()` when it already looks canonical. Its test is
    /// looser than canonical (`+1Ki`, `05M`, `1.500k` survive), see [`Quantity::go_string`].
    verbatim: bool,
}

/// Why a value is not a Kubernetes quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantityError {
    Empty,
    Whitespace,
    NoDigits,
    ExtraPoint,
    MisplacedSign,
    UnknownSuffix(String),
    BadExponent(String),
    ExponentOutOfRange(String),
    TooLarge,
    /// Go's fast path reads up to 19 digits as an int64 and fails on overflow instead of falling
    /// back, so `9223372036854775808` is refused while `10000000000000000000` is not.
    Int64Overflow,
    NotFinite,
}

/// Parses `s` exactly as `resource.ParseQuantity` does, within what the CRD schema's Quantity
/// pattern admits (Go alone also reads `Mi` or `.` as zero; the apiserver refuses those first).
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    use QuantityError as E;
    if s.is_empty() {
        return Err(E::Empty);
    }
    if s.contains(char::is_whitespace) {
        return Err(E::Whitespace);
    }
    if s == "0" {
        return Ok(Quantity {
            verbatim: true,
            ..Quantity::new(0, Format::DecimalSI)
        });
    }
    let (negative, unsigned) = signed(s);
    let (int, after) = split_digits(unsigned);
    let (frac, suffix) = after.strip_prefix('.').map_or(("", after), split_digits);
    if int.is_empty() && frac.is_empty() {
        return Err(E::NoDigits);
    }
    if suffix.starts_with('.') {
        return Err(E::ExtraPoint);
    }
    if suffix.starts_with(['+', '-']) {
        return Err(E::MisplacedSign);
    }
    let (exp10, exp2, mut format) = interpret(suffix)?;

    // Go's int64 fast path decides two quirks: its overflow error and the reused input text.
    let int = int.trim_start_matches('0');
    let num_len = int.len().max(1) as i64; // Go reads an empty integer part as "0"
    let frac_len = frac.len() as i64; // a str holds at most isize::MAX bytes
    let scale = exp10.saturating_sub(frac_len);
    let verbatim = if format == Format::BinarySI {
        let fast = frac.is_empty() && 14 - num_len - 3 * i64::from(exp2 / 10) >= 0;
        let value = int.parse::<i64>().unwrap_or(0);
        fast && value.checked_mul(1 << exp2).is_some() && value & 7 != 0
    } else if num_len + frac_len <= 19 && scale >= -9 {
        if number(int.bytes().chain(frac.bytes())).is_none_or(|v| v > i64::MAX as u128) {
            return Err(E::Int64Overflow);
        }
        let all_zero = frac.bytes().all(|d| d == b'0');
        let zeros = trailing_zeros(frac) + if all_zero { trailing_zeros(int) } else { 0 };
        scale % 3 == 0 && zeros < 3 && !int.is_empty()
    } else {
        false
    };

    let magnitude = match magnitude(int, frac, exp10, exp2) {
        Some(m) if format != Format::BinarySI || m <= BINARY_CAP => m,
        _ if format == Format::BinarySI => BINARY_CAP,
        _ => return Err(E::TooLarge),
    };
    let magnitude = i128::try_from(magnitude).map_err(|_| E::TooLarge)?;
    if format == Format::BinarySI && magnitude > 0 && magnitude < NANO {
        format = Format::DecimalSI; // as Go does for 0 < |v| < 1
    }
    let nanos = if negative { -magnitude } else { magnitude };
    Ok(Quantity {
        verbatim,
        ..Quantity::new(nanos, format)
    })
}

/// The suffix as (decimal exponent, binary exponent, format).
fn interpret(suffix: &str) -> Result<(i64, u32, Format), QuantityError> {
    if let Some(i) = DECIMAL_SUFFIXES.iter().position(|d| *d == suffix) {
        return Ok((3 * i as i64 - 9, 0, Format::DecimalSI));
    }
    if let Some(k) = BINARY_SUFFIXES.iter().skip(1).position(|b| *b == suffix) {
        return Ok((0, 10 * (k as u32 + 1), Format::BinarySI));
    }
    let numeric = |rest: &&str| {
        rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_digit() || "+-.".contains(c))
    };
    let Some(exponent) = suffix.strip_prefix(['e', 'E']).filter(numeric) else {
        return Err(QuantityError::UnknownSuffix(suffix.to_owned()));
    };
    let (negative, digits) = signed(exponent);
    if digits.is_empty() || !digits.bytes().all(|d| d.is_ascii_digit()) {
        return Err(QuantityError::BadExponent(suffix.to_owned()));
    }
    // Newer apimachinery refuses an exponent past ±(2^31-1); older releases wrapped it.
    match number(digits.bytes()).and_then(|v| i64::try_from(v).ok()) {
        Some(v) if v <= i64::from(i32::MAX) => {
            Ok((if negative { -v } else { v }, 0, Format::DecimalExponent))
        }
        _ => Err(QuantityError::ExponentOutOfRange(suffix.to_owned())),
    }
}

/// |digits × 10^exp10 × 2^exp2| in nanounits, rounded away from zero; `None` if it overflows.
/// `int` and `frac` are the digits before and after the point.
fn magnitude(int: &str, frac: &str, exp10: i64, exp2: u32) -> Option<u128> {
    let digits = || int.bytes().chain(frac.bytes());
    let count = int.len().saturating_add(frac.len());
    let factor = 1u128 << exp2;
    let shift = exp10.saturating_add(9).saturating_sub(frac.len() as i64);
    if shift >= 0 {
        let mut acc = number(digits())?;
        if acc == 0 {
            return Some(0);
        }
        for _ in 0..shift {
            acc = acc.checked_mul(10)?; // overflows within 39 rounds, however large `shift` is
        }
        return acc.checked_mul(factor);
    }
    // The last `cut` digits lie below 1n: multiply them by the factor digit by digit from the
    // right, so the carry is the whole part and any non-zero digit left behind rounds up.
    let cut = usize::try_from(shift.unsigned_abs()).unwrap_or(usize::MAX);
    let above = count.saturating_sub(cut);
    let whole = number(digits().take(above))?;
    let (mut carry, mut inexact) = (0u128, false);
    for d in digits().rev().take(count - above) {
        let t = u128::from(d.saturating_sub(b'0')) * factor + carry; // carry < factor <= 2^60
        inexact |= !t.is_multiple_of(10);
        carry = t / 10;
    }
    let mut zeros = cut.saturating_sub(count); // implied zeros between the point and the digits
    while zeros > 0 && carry > 0 {
        inexact |= !carry.is_multiple_of(10);
        carry /= 10;
        zeros -= 1;
    }
    let total = whole.checked_mul(factor)?.checked_add(carry)?;
    total.checked_add(u128::from(inexact))
}

/// The value of ASCII decimal digits, or `None` if it overflows.
fn number(mut digits: impl Iterator<Item = u8>) -> Option<u128> {
    digits.try_fold(0u128, |acc, d| {
        acc.checked_mul(10)?
            .checked_add(u128::from(d.saturating_sub(b'0')))
    })
}

fn signed(s: &str) -> (bool, &str) {
    match (s.strip_prefix('-'), s.strip_prefix('+')) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        (None, None) => (false, s),
    }
}

fn split_digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at_checked(n).unwrap_or((s, ""))
}

fn trailing_zeros(s: &str) -> usize {
    s.bytes().rev().take_while(|&d| d == b'0').count()
}

// === impl Quantity ===

impl Quantity {
    const fn new(nanos: i128, format: Format) -> Quantity {
        Quantity {
            nanos,
            format,
            verbatim: false,
        }
    }

    /// `resource.NewQuantity(value, format)`.
    pub const fn from_int(value: i64, format: Format) -> Quantity {
        Quantity::new(value as i128 * NANO, format)
    }

    /// `n` MiB in BinarySI, as the memory rule builds its minimum (2^63 MiB fits easily).
    pub const fn mebibytes(n: i64) -> Quantity {
        Quantity::new(n as i128 * 1_048_576 * NANO, Format::BinarySI)
    }

    /// A JSON integer (`memory: 1073741824`): Go parses its digits, so it is DecimalSI.
    pub const fn from_json_i64(value: i64) -> Quantity {
        Quantity::from_int(value, Format::DecimalSI)
    }

    /// A JSON integer above i64::MAX, with Go's 19-digit quirk ([`QuantityError::Int64Overflow`]).
    pub fn from_json_u64(value: u64) -> Result<Quantity, QuantityError> {
        if value > i64::MAX as u64 && value < 10_000_000_000_000_000_000 {
            return Err(QuantityError::Int64Overflow);
        }
        Ok(Quantity::new(i128::from(value) * NANO, Format::DecimalSI))
    }

    /// A JSON number with a fraction or exponent, as Go re-encodes a float64 (in exponent form
    /// from 1e21 up or below 1e-6) and then parses it. The CRD's `anyOf: integer|string` admits
    /// only whole numbers here, so Go's text and ours agree where it matters.
    pub fn from_json_f64(value: f64) -> Result<Quantity, QuantityError> {
        if !value.is_finite() {
            return Err(QuantityError::NotFinite);
        }
        let abs = value.abs();
        let exponent_form = abs != 0.0 && !(1e-6..1e21).contains(&abs);
        let text = if exponent_form {
            format!("{value:e}")
        } else {
            format!("{value}")
        };
        parse(&text).map(|q| Quantity::new(q.nanos, q.format))
    }

    /// The sum, or `None` on overflow. Like Go's `Add`, a zero left side takes the right's format.
    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        let format = if self.nanos == 0 {
            other.format
        } else {
            self.format
        };
        Some(Quantity::new(self.nanos.checked_add(other.nanos)?, format))
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// What Go's `String()` returns for this quantity parsed from `written`: the text itself when
    /// Go's parser cached it, else the canonical form. Use it to quote a user's value as the
    /// reference webhook does; `written` must be the string [`parse`] was given.
    pub fn go_string<'a>(&self, written: &'a str) -> Cow<'a, str> {
        if self.verbatim {
            Cow::Borrowed(written)
        } else {
            Cow::Owned(self.to_string())
        }
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// `Quantity.String()` (CanonicalizeBytes): no fraction, the largest suffix that loses nothing.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nanos == 0 {
            return f.write_str("0");
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            if self.nanos.unsigned_abs() < 1024 * NANO as u128 || self.nanos % NANO != 0 {
                format = Format::DecimalSI;
            } else {
                let (mut units, mut k) = (self.nanos / NANO, 0);
                while units % 1024 == 0 {
                    units /= 1024;
                    k += 1;
                }
                match BINARY_SUFFIXES.get(k) {
                    Some(suffix) => return write!(f, "{units}{suffix}"),
                    None => format = Format::DecimalExponent, // newer Go, past Ei
                }
            }
        }
        let (mut mantissa, mut exponent) = (self.nanos, -9i32);
        while mantissa % 1000 == 0 {
            mantissa /= 1000;
            exponent += 3;
        }
        // Past E, newer Go falls back to exponent form instead of dropping the magnitude.
        let si = usize::try_from((exponent + 9) / 3)
            .ok()
            .and_then(|i| DECIMAL_SUFFIXES.get(i));
        match si {
            Some(suffix) if format == Format::DecimalSI => write!(f, "{mantissa}{suffix}"),
            _ if exponent == 0 => write!(f, "{mantissa}"),
            _ => write!(f, "{mantissa}e{exponent}"),
        }
    }
}

// === impl QuantityError ===

const UNITS: &str = "use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E \
                     (powers of 1000), or an exponent such as e6";

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fixed = match self {
            Self::Empty => "empty quantity; write a number and a unit, e.g. 128Mi, 1Gi or 500M",
            Self::Whitespace => "quantity contains whitespace; write it without spaces, e.g. 1Gi",
            Self::NoDigits => "quantity has no number; write the number before the unit, e.g. 64Mi",
            Self::ExtraPoint => "quantity has more than one decimal point; write e.g. 1.5Gi",
            Self::MisplacedSign => {
                "a sign may only lead a quantity (e.g. -1), not follow its number"
            }
            Self::TooLarge => {
                "quantity is too large (the webhook reads magnitudes up to about 1e29)"
            }
            Self::Int64Overflow => {
                "Kubernetes refuses a 19-digit number above 9223372036854775807; \
                 write it with a unit, e.g. 10E"
            }
            Self::NotFinite => "quantity is not a finite number",
            Self::UnknownSuffix(s) => {
                return match suggestion(s) {
                    Some(hint) => write!(f, "unknown unit \"{s}\" (did you mean {hint}?); {UNITS}"),
                    None => write!(f, "unknown unit \"{s}\"; {UNITS}"),
                };
            }
            Self::BadExponent(s) => {
                return write!(f, "exponent \"{s}\" must be a whole number, e.g. e6 or e-3");
            }
            Self::ExponentOutOfRange(s) => {
                return write!(f, "exponent \"{s}\" is out of range (at most ±2147483647)");
            }
        };
        f.write_str(fixed)
    }
}

impl std::error::Error for QuantityError {}

/// The suffix someone probably meant by an unknown one (`mi`, `KB`, `MiB`).
fn suggestion(suffix: &str) -> Option<String> {
    let lower = suffix.to_ascii_lowercase();
    let (prefix, binary) = match lower.strip_suffix('b').unwrap_or(&lower).as_bytes() {
        [p] => (char::from(*p), false),
        [p, b'i'] => (char::from(*p), true),
        _ => return None,
    };
    let upper = prefix.to_ascii_uppercase();
    let decimal = if prefix == 'k' { prefix } else { upper };
    match (binary, "kmgtpe".contains(prefix)) {
        (true, true) => Some(format!("\"{upper}i\"")),
        (false, true) => Some(format!("\"{decimal}\" or \"{upper}i\"")),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
