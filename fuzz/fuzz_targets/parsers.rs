//! The spec's value parsers on any text: Kubernetes quantities, Prometheus durations and image
//! references. None may panic, and each refusal must say something. The input is read twice: as
//! text (two values, split at the first newline), and as choices that build values in a small
//! grammar whose meaning a few lines here compute independently:
//! - a quantity prints canonically, reads back to the same value, and the canonical text is a
//!   fixed point; two quantities compare as their exact values in nano-units do;
//! - a duration printed largest unit first reads back to itself; `<n><unit>` is n units;
//! - an image reference the plain grammar (`name[:tag][@sha256:hex]`) admits is accepted, and
//!   dropping an accepted reference's tag or digest leaves it accepted.

#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use memcached_webhook::memcached::{duration, image, quantity};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (a, b) = text.split_once('\n').unwrap_or((&text, ""));
    for s in [a, b] {
        quantity_round_trip(s);
        duration_round_trip(s);
        image_parts(s);
    }
    let (qa, qb) = (
        parse_quantity_pair(a, b),
        (plain_quantity(data), plain_quantity(&rev(data))),
    );
    for (x, y) in [qa, qb].into_iter().filter_map(|(x, y)| x.zip(y)) {
        let (px, py) = (
            quantity::parse(&x.0).unwrap(),
            quantity::parse(&y.0).unwrap(),
        );
        assert_eq!(px.cmp(&py), x.1.cmp(&y.1), "{:?} vs {:?}", x.0, y.0);
    }
    if let Some((s, millis)) = plain_duration(data) {
        // Prometheus keeps nanoseconds in an i64: about 292 years at most.
        let expected = match u64::try_from(i64::MAX).ok().map(|max| max / 1_000_000) {
            Some(max) if millis <= max => Ok(Duration::from_millis(millis)),
            _ => Err(duration::DurationError::OutOfRange),
        };
        assert_eq!(duration::parse(&s), expected, "{s:?}");
    }
    if let Some(s) = plain_image(data) {
        assert_eq!(image::check(&s), Ok(()), "{s:?}");
        image_parts(&s);
    }
});

fn rev(data: &[u8]) -> Vec<u8> {
    data.iter().rev().copied().collect()
}

fn quantity_round_trip(s: &str) {
    let q = match quantity::parse(s) {
        Ok(q) => q,
        Err(e) => return assert!(!e.to_string().is_empty()),
    };
    let canonical = q.to_string();
    match quantity::parse(&canonical) {
        Ok(back) => {
            assert_eq!(
                back, q,
                "{s:?} printed as {canonical:?} reads back differently"
            );
            assert_eq!(
                back.to_string(),
                canonical,
                "{s:?}: canonical form not a fixed point"
            );
        }
        // Go's own quirk: its canonical form of a 19-digit mantissa above i64::MAX is refused
        // by its own parser's int64 fast path.
        Err(quantity::QuantityError::Int64Overflow) => {
            let digits = canonical.trim_start_matches('-');
            let mantissa = digits.split('e').next().unwrap_or(digits);
            let mantissa = mantissa.trim_end_matches(|c: char| !c.is_ascii_digit());
            assert_eq!(
                mantissa.len(),
                19,
                "{s:?} printed as {canonical:?} is refused"
            );
        }
        Err(e) => panic!("{s:?} printed as {canonical:?} is refused: {e}"),
    }
}

/// A quantity in `-?d{1,12}(.d{1,6})?` with a suffix of up to giga, and its exact nano-units
/// (capped as Go caps binary ones).
type Plain = (String, i128);

fn parse_quantity_pair(a: &str, b: &str) -> (Option<Plain>, Option<Plain>) {
    (plain_quantity_text(a), plain_quantity_text(b))
}

fn plain_quantity_text(s: &str) -> Option<Plain> {
    let (negative, rest) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
    let int_len = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let (int, rest) = rest.split_at(int_len);
    let (frac, suffix) = match rest.strip_prefix('.') {
        Some(r) => r.split_at(r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len())),
        None => ("", rest),
    };
    if !(1..=12).contains(&int.len())
        || frac.len() > 6
        || (rest.starts_with('.') && frac.is_empty())
    {
        return None;
    }
    let (multiplier, binary): (i128, bool) = match suffix {
        "" => (1, false),
        "k" => (1_000, false),
        "M" => (1_000_000, false),
        "G" => (1_000_000_000, false),
        "Ki" => (1 << 10, true),
        "Mi" => (1 << 20, true),
        "Gi" => (1 << 30, true),
        _ => return None,
    };
    let mut nanos: i128 = int.parse::<i128>().ok()? * 1_000_000_000;
    let frac_nanos = format!("{frac:0<9}").parse::<i128>().ok()?;
    nanos = (nanos + frac_nanos) * multiplier;
    // Go caps a BinarySI quantity at 2^63-1 units.
    let cap = i128::from(i64::MAX) * 1_000_000_000;
    if binary && nanos > cap {
        nanos = cap;
    }
    Some((s.to_owned(), if negative { -nanos } else { nanos }))
}

/// Builds a plain quantity from bytes (digits, an optional fraction, a suffix).
fn plain_quantity(data: &[u8]) -> Option<Plain> {
    let (&head, rest) = data.split_first()?;
    let int_len = 1 + usize::from(head % 12);
    let frac_len = usize::from(head / 12 % 7);
    let digits: Vec<u8> = rest.iter().map(|b| b'0' + b % 10).collect();
    let int = std::str::from_utf8(digits.get(..int_len)?).ok()?;
    let frac = std::str::from_utf8(digits.get(int_len..int_len + frac_len)?).ok()?;
    let suffix = ["", "k", "M", "G", "Ki", "Mi", "Gi"][usize::from(head) % 7];
    let sign = if rest.first().is_some_and(|b| b & 0x80 != 0) {
        "-"
    } else {
        ""
    };
    let point = if frac.is_empty() { "" } else { "." };
    plain_quantity_text(&format!("{sign}{int}{point}{frac}{suffix}"))
}

/// Prometheus's units in milliseconds, built up from the second here rather than copied, so a
/// wrong size in the parser's own table shows.
const UNITS: [(&str, u64); 7] = {
    const S: u64 = 1000;
    const D: u64 = 24 * 60 * 60 * S;
    [
        ("y", 365 * D),
        ("w", 7 * D),
        ("d", D),
        ("h", D / 24),
        ("m", 60 * S),
        ("s", S),
        ("ms", 1),
    ]
};

fn duration_round_trip(s: &str) {
    let d = match duration::parse(s) {
        Ok(d) => d,
        Err(e) => return assert!(!e.to_string().is_empty()),
    };
    let mut millis = u64::try_from(d.as_millis()).expect("parse caps durations near 292 years");
    let mut printed = String::new();
    for (unit, size) in UNITS {
        if millis >= size {
            printed.push_str(&format!("{}{unit}", millis / size));
            millis %= size;
        }
    }
    if printed.is_empty() {
        printed.push('0');
    }
    assert_eq!(
        duration::parse(&printed),
        Ok(d),
        "{s:?} printed as {printed:?}"
    );
}

/// `<n><unit>` with n below a million, and its milliseconds.
fn plain_duration(data: &[u8]) -> Option<(String, u64)> {
    let (&head, rest) = data.split_first()?;
    let n = rest
        .iter()
        .take(3)
        .fold(0u64, |n, b| n * 100 + u64::from(b % 100))
        % 1_000_000;
    let (unit, size) = UNITS[usize::from(head) % UNITS.len()];
    Some((format!("{n}{unit}"), n * size))
}

/// Accepted references stay accepted without their digest, or without their tag.
fn image_parts(s: &str) {
    if let Err(e) = image::check(s) {
        return assert!(!e.to_string().is_empty());
    }
    // A 64-hex name is an image ID on its own, a name only before a tag or digest.
    let accepted_alone = |t: &str| {
        image::check(t).is_ok()
            || (t.len() == 64 && t.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
    };
    let (rest, digest) = s.split_once('@').map_or((s, None), |(r, d)| (r, Some(d)));
    if digest.is_some() {
        assert!(accepted_alone(rest), "{s:?} accepted, {rest:?} not");
    }
    let slash = rest.rfind('/').map_or(0, |i| i + 1);
    if let Some(colon) = rest[slash..].find(':') {
        let untagged = format!(
            "{}{}",
            &rest[..slash + colon],
            digest.map_or(String::new(), |d| format!("@{d}"))
        );
        assert!(
            accepted_alone(&untagged),
            "{s:?} accepted, {untagged:?} not"
        );
    }
}

/// `name[:tag][@sha256:hex]` from bytes: 1 to 4 lowercase components, a word tag, lowercase hex.
fn plain_image(data: &[u8]) -> Option<String> {
    const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    const WORD: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
    let (&head, rest) = data.split_first()?;
    let pick = |set: &[u8], range: std::ops::Range<usize>| -> String {
        rest.get(range)
            .unwrap_or_default()
            .iter()
            .map(|b| char::from(set[usize::from(*b) % set.len()]))
            .collect()
    };
    let components = 1 + usize::from(head % 4);
    let mut name = Vec::new();
    for i in 0..components {
        name.push(pick(
            LOWER,
            i * 8..i * 8 + 1 + usize::from(rest.get(i).copied()? % 8),
        ));
    }
    if name.iter().any(String::is_empty) {
        return None;
    }
    let mut s = name.join("/");
    if head & 0x10 != 0 {
        let tag = pick(WORD, 32..40);
        let first_ok = tag
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
        s = format!("{s}:{}", if first_ok { tag } else { format!("v{tag}") });
    }
    if head & 0x20 != 0 {
        s = format!("{s}@sha256:{}", pick(b"0123456789abcdef", 40..104));
        if s.len() < 64 + 8 || rest.len() < 104 {
            return None;
        }
    }
    let hex_alone = s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit());
    (!hex_alone).then_some(s)
}
