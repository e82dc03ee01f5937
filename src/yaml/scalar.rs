//! What a scalar means under go-yaml v2's YAML 1.1 rules, and the JSON kubectl sends for it:
//! read by [`read`](super::read) for every scalar of a manifest, and by [`write`](mod@super::write)
//! to tell whether a string may be written plain.

use saphyr_parser::{ScalarStyle, Tag};
use serde_json::{Number, Value};

/// What go-yaml v2 resolves a scalar to, before sigs.k8s.io/yaml turns it into JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    /// The `<<` merge key.
    Merge,
}

/// The core-schema tags go-yaml v2 resolves; any other tag leaves the text a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoreTag {
    None,
    Str,
    Bool,
    Int,
    Float,
    Null,
    Timestamp,
    Binary,
    Merge,
    Other,
}

fn core_tag(tag: Option<&Tag>) -> CoreTag {
    let Some(tag) = tag else {
        return CoreTag::None;
    };
    if !tag.is_yaml_core_schema() {
        return CoreTag::Other;
    }
    match tag.suffix.as_str() {
        "str" => CoreTag::Str,
        "bool" => CoreTag::Bool,
        "int" => CoreTag::Int,
        "float" => CoreTag::Float,
        "null" => CoreTag::Null,
        "timestamp" => CoreTag::Timestamp,
        "binary" => CoreTag::Binary,
        "merge" => CoreTag::Merge,
        _ => CoreTag::Other,
    }
}

/// go-yaml v2's `resolve` for an untagged plain scalar.
pub fn resolve_plain(text: &str) -> Scalar {
    match text {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Scalar::Bool(true);
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Scalar::Bool(false);
        }
        "" | "~" | "null" | "Null" | "NULL" => return Scalar::Null,
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        "<<" => return Scalar::Merge,
        _ => {}
    }
    match text.as_bytes()[0] {
        b'.' => {
            if let Some(f) = go_parse_float(text) {
                return Scalar::Float(f);
            }
        }
        b'+' | b'-' | b'0'..=b'9' => {
            // A timestamp (`2001-12-14`) needs no case: go-yaml v2 keeps it as its text when
            // decoding into interface{}, and it is no number either.
            let plain = text.replace('_', "");
            if let Some(n) = go_parse_int(&plain) {
                return n;
            }
            if let Some(f) = go_parse_float(&plain) {
                return Scalar::Float(f);
            }
        }
        _ => {}
    }
    Scalar::Str(text.to_owned())
}

/// `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: an optional sign, then `0x`, `0o`, `0b`, a
/// leading `0` (octal) or decimal digits.
fn go_parse_int(s: &str) -> Option<Scalar> {
    let (sign, body) = match s.as_bytes().first()? {
        b'-' => (Some(true), &s[1..]),
        b'+' => (Some(false), &s[1..]),
        _ => (None, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    match (sign, i64::try_from(magnitude)) {
        (Some(true), _) => {
            let n = i128::try_from(magnitude).ok()?.checked_neg()?;
            i64::try_from(n).ok().map(Scalar::Int)
        }
        (_, Ok(n)) => Some(Scalar::Int(n)),
        // ParseUint takes no sign: `+18446744073709551615` is left to the float rule.
        (Some(false), Err(_)) => None,
        (None, Err(_)) => u64::try_from(magnitude).ok().map(Scalar::Uint),
    }
}

/// `strconv.ParseFloat` on text of go-yaml v2's float syntax; out of range is an error there, so
/// `1e400` stays a string.
fn go_parse_float(s: &str) -> Option<f64> {
    if !go_float_syntax(s) {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn go_float_syntax(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// Resolves a scalar with its style and tag, failing as go-yaml v2 does on a tag it cannot honour.
pub(super) fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Scalar, String> {
    let tag = core_tag(tag);
    let plain = style == ScalarStyle::Plain;
    match tag {
        CoreTag::None if plain => Ok(resolve_plain(text)),
        CoreTag::None | CoreTag::Str | CoreTag::Other | CoreTag::Timestamp => {
            Ok(Scalar::Str(text.to_owned()))
        }
        CoreTag::Binary => {
            use base64::Engine as _;
            let compact: String = text.split_whitespace().collect();
            base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map(|bytes| Scalar::Str(String::from_utf8_lossy(&bytes).into_owned()))
                .map_err(|_| "!!binary value contains invalid base64 data".to_owned())
        }
        CoreTag::Merge => Ok(Scalar::Merge),
        CoreTag::Bool | CoreTag::Int | CoreTag::Float | CoreTag::Null => {
            let resolved = resolve_plain(text);
            match (tag, resolved) {
                (CoreTag::Bool, s @ Scalar::Bool(_))
                | (CoreTag::Int, s @ (Scalar::Int(_) | Scalar::Uint(_)))
                | (CoreTag::Float, s @ Scalar::Float(_))
                | (CoreTag::Null, s @ Scalar::Null) => Ok(s),
                (CoreTag::Float, Scalar::Int(n)) => Ok(Scalar::Float(n as f64)),
                _ => Err(format!(
                    "cannot decode `{text}` as a !!{}",
                    match tag {
                        CoreTag::Bool => "bool",
                        CoreTag::Int => "int",
                        CoreTag::Float => "float",
                        _ => "null",
                    }
                )),
            }
        }
    }
}

/// The JSON value kubectl sends for a scalar: Go's encoding/json refuses NaN and infinities, and
/// a whole float64 is printed without a fraction, which the apiserver then reads as an integer.
pub(super) fn to_json(scalar: Scalar) -> Result<Value, String> {
    Ok(match scalar {
        Scalar::Null => Value::Null,
        Scalar::Bool(b) => Value::Bool(b),
        Scalar::Int(n) => Value::from(n),
        Scalar::Uint(n) => Value::from(n),
        Scalar::Float(f) => go_float(f)?,
        Scalar::Str(s) => Value::String(s),
        Scalar::Merge => Value::String("<<".to_owned()),
    })
}

/// A float64 as it reaches the webhook after Go's encoding/json and the apiserver's decoder.
pub fn go_float(f: f64) -> Result<Value, String> {
    if !f.is_finite() {
        return Err(format!(
            "json: unsupported value: {f} (JSON has no NaN or infinity)"
        ));
    }
    // Whole values in int64 range come back as integers (-0 too: Go prints it "-0").
    if f.fract() == 0.0 && f.abs() < 9.2e18 {
        return Ok(Value::from(f as i64));
    }
    Ok(Number::from_f64(f).map_or(Value::Null, Value::Number))
}

/// sigs.k8s.io/yaml's map key rule: strings, ints, floats and booleans become strings.
pub(super) fn key_string(scalar: Scalar) -> Result<String, String> {
    match scalar {
        Scalar::Str(s) => Ok(s),
        Scalar::Int(n) => Ok(n.to_string()),
        Scalar::Bool(b) => Ok(b.to_string()),
        Scalar::Float(f) if f.is_nan() => Ok(".nan".to_owned()),
        Scalar::Float(f) if f.is_infinite() => {
            Ok(if f > 0.0 { ".inf" } else { "-.inf" }.to_owned())
        }
        Scalar::Float(f) => Ok(go_format_g32(f)),
        Scalar::Uint(n) => Err(format!(
            "unsupported map key {n} (an unsigned 64-bit number)"
        )),
        Scalar::Null => Err("unsupported map key: null".to_owned()),
        Scalar::Merge => Ok("<<".to_owned()),
    }
}

/// `strconv.FormatFloat(f, 'g', -1, 32)`: the shortest float32 digits, with an exponent (at
/// least two digits) below 1e-4 and from 1e6 on.
fn go_format_g32(f: f64) -> String {
    let f = f as f32;
    // Past f32's range (or `.inf`, `.nan`) Go writes these; LowerExp would write `inf`, `NaN`.
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let scientific = format!("{f:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("LowerExp always writes an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("LowerExp writes a decimal exponent");
    if (-4..6).contains(&exponent) {
        f.to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// A key already converted (an alias used as a key).
pub(super) fn key_of_value(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Null => Err("unsupported map key: null".to_owned()),
        _ => Err("a mapping key must be a scalar, not a mapping or a sequence".to_owned()),
    }
}
