//! YAML to JSON the way kubectl converts a manifest before sending it (sigs.k8s.io/yaml on
//! go-yaml v2): plain scalars resolve by YAML 1.1 rules (`yes` and `on` are booleans, `0755` is
//! octal), quoted ones stay strings; anchors, aliases and `<<` merge keys are expanded. Also the
//! way back: objects printed as YAML that reads back the same under those rules.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};
use serde_json::{Map, Number, Value};

use super::position::{At, Positions};

/// Deeper nesting is refused: the server's JSON parser stops at 1024 levels too.
const MAX_DEPTH: usize = 1000;
/// Alias expansion may not grow a stream past this many nodes (a "billion laughs" stream would
/// otherwise take all memory; go-yaml v2 refuses excessive aliasing too).
const MAX_NODES: usize = 10_000_000;

/// A document of a stream, converted.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based line where the document's content starts.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    pub value: Value,
    /// Where each node is, by field path.
    pub positions: Positions,
}

/// Why a stream could not be converted, with the 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn at(span: &Span, message: impl Into<String>) -> Self {
        Error {
            line: span.start.line(),
            column: span.start.col() + 1,
            message: message.into(),
        }
    }
}

impl From<ScanError> for Error {
    fn from(e: ScanError) -> Self {
        Error {
            line: e.marker().line(),
            column: e.marker().col() + 1,
            message: format!("not valid YAML: {}", e.info()),
        }
    }
}

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
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<Scalar, String> {
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
fn to_json(scalar: Scalar) -> Result<Value, String> {
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
fn key_string(scalar: Scalar) -> Result<String, String> {
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
fn key_of_value(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Null => Err("unsupported map key: null".to_owned()),
        _ => Err("a mapping key must be a scalar, not a mapping or a sequence".to_owned()),
    }
}

enum Frame {
    Seq {
        items: Vec<Value>,
        anchor: usize,
        /// The length of the path string naming this node (see [`Walk`]).
        base: usize,
    },
    Map {
        map: Map<String, Value>,
        anchor: usize,
        /// The key read, waiting for its value; `None` for a `<<` merge key.
        key: Option<Option<String>>,
        /// Where the pending key is.
        key_at: Option<At>,
        base: usize,
    },
}

/// The field path of the node being read, for [`Positions`]. Nodes inside a merge key's value
/// are not recorded (their place in the result is only known once merged).
struct Walk {
    path: String,
    /// The stack depth below which nodes are inside a merge key's value.
    merging: Option<usize>,
}

impl Walk {
    /// Sets the path to the next child of the innermost container and records it; returns the
    /// child's base (its path's length).
    fn enter(
        &mut self,
        stack: &[Frame],
        positions: &mut Positions,
        at: At,
        container: bool,
    ) -> usize {
        use std::fmt::Write as _;
        if self.merging.is_some_and(|depth| stack.len() > depth) {
            return self.path.len();
        }
        self.merging = None;
        let key_at = match stack.last() {
            None => {
                self.path.clear();
                None
            }
            Some(Frame::Seq { items, base, .. }) => {
                self.path.truncate(*base);
                let _ = write!(self.path, "[{}]", items.len());
                None
            }
            Some(Frame::Map {
                key, key_at, base, ..
            }) => {
                self.path.truncate(*base);
                let Some(Some(name)) = key else {
                    self.merging = Some(stack.len());
                    return self.path.len();
                };
                if *base > 0 {
                    self.path.push('.');
                }
                self.path.push_str(name);
                *key_at
            }
        };
        positions.record(&self.path, key_at, at, container);
        self.path.len()
    }
}

/// A span's start as a 1-based line and column.
fn start_of(span: &Span) -> At {
    (span.start.line(), span.start.col() + 1)
}

/// Converts every document of a YAML stream.
pub fn documents(text: &str) -> Result<Vec<Document>, Error> {
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut nodes = 0usize;
    let mut start: Option<Span> = None;
    let mut positions = Positions::default();
    let mut walk = Walk {
        path: String::new(),
        merging: None,
    };
    while let Some(event) = parser.next_event() {
        let (event, span) = event?;
        let value = match event {
            Event::DocumentStart(_) => {
                anchors.clear();
                start = None;
                positions = Positions::default();
                continue;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::at(
                        &span,
                        format!("nested deeper than {MAX_DEPTH} levels"),
                    ));
                }
                start.get_or_insert(span);
                nodes += 1;
                let base = walk.enter(&stack, &mut positions, start_of(&span), true);
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq {
                        items: Vec::new(),
                        anchor,
                        base,
                    }
                } else {
                    Frame::Map {
                        map: Map::new(),
                        anchor,
                        key: None,
                        key_at: None,
                        base,
                    }
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match stack.pop() {
                    Some(Frame::Seq { items, anchor, .. }) => (Value::Array(items), anchor),
                    Some(Frame::Map { map, anchor, .. }) => (Value::Object(map), anchor),
                    None => continue,
                };
                if anchor != 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
            Event::Alias(id) => {
                start.get_or_insert(span);
                let Some(value) = anchors.get(&id) else {
                    return Err(Error::at(
                        &span,
                        "an alias refers to an anchor that encloses it or is not defined",
                    ));
                };
                nodes = nodes.saturating_add(count(value));
                if nodes > MAX_NODES {
                    return Err(Error::at(
                        &span,
                        format!("aliases expand to more than {MAX_NODES} nodes"),
                    ));
                }
                // An alias in key position is the key itself.
                if let Some(Frame::Map {
                    key: key @ None,
                    key_at,
                    ..
                }) = stack.last_mut()
                {
                    *key = Some(Some(key_of_value(value).map_err(|m| Error::at(&span, m))?));
                    *key_at = Some(start_of(&span));
                    continue;
                }
                walk.enter(&stack, &mut positions, start_of(&span), false);
                value.clone()
            }
            Event::Scalar(text, style, anchor, tag) => {
                start.get_or_insert(span);
                nodes += 1;
                let scalar =
                    resolve(&text, style, tag.as_deref()).map_err(|m| Error::at(&span, m))?;
                if let Some(Frame::Map {
                    key: key @ None,
                    key_at,
                    ..
                }) = stack.last_mut()
                {
                    *key_at = Some(start_of(&span));
                    let is_merge = scalar == Scalar::Merge;
                    let name = key_string(scalar).map_err(|m| Error::at(&span, m))?;
                    if anchor != 0 {
                        anchors.insert(anchor, Value::String(name.clone()));
                    }
                    *key = Some((!is_merge).then_some(name));
                    continue;
                }
                let value = to_json(scalar).map_err(|m| Error::at(&span, m))?;
                walk.enter(&stack, &mut positions, start_of(&span), false);
                if anchor != 0 {
                    anchors.insert(anchor, value.clone());
                }
                value
            }
        };
        match stack.last_mut() {
            None => {
                let at = start.take().unwrap_or(span);
                docs.push(Document {
                    line: at.start.line(),
                    column: at.start.col() + 1,
                    value,
                    positions: std::mem::take(&mut positions),
                });
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, .. }) => match key.take() {
                Some(Some(name)) => {
                    map.insert(name, value);
                }
                Some(None) => merge(map, value).map_err(|m| Error::at(&span, m))?,
                None => {
                    return Err(Error::at(
                        &span,
                        "a mapping key must be a scalar, not a mapping or a sequence",
                    ));
                }
            },
        }
    }
    Ok(docs)
}

/// A `<<` merge: a mapping, or a sequence of mappings where earlier ones win; keys merged in
/// overwrite keys written before the `<<` (go-yaml v2 order).
fn merge(map: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    const WANT: &str = "map merge requires a mapping or a sequence of mappings as its value";
    match value {
        Value::Object(source) => map.extend(source),
        Value::Array(sources) => {
            for source in sources.into_iter().rev() {
                let Value::Object(source) = source else {
                    return Err(WANT.to_owned());
                };
                map.extend(source);
            }
        }
        _ => return Err(WANT.to_owned()),
    }
    Ok(())
}

/// Nodes in a value, counted iteratively (a deep value must not exhaust the stack).
fn count(value: &Value) -> usize {
    let mut n = 0usize;
    let mut todo = vec![value];
    while let Some(v) = todo.pop() {
        n += 1;
        match v {
            Value::Array(items) => todo.extend(items),
            Value::Object(map) => todo.extend(map.values()),
            _ => {}
        }
    }
    n
}

/// Writes `value` as a YAML document that go-yaml v2 reads back to the same JSON: a string is
/// written plain only when the YAML 1.1 rules read it back as that same string.
pub fn write(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) if !map.is_empty() => write_map(out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(out, items, 0),
        scalar => {
            write_scalar(out, scalar);
            out.push('\n');
        }
    }
}

/// YAML lets an implicit key (`key: value`) span at most 1024 characters; go-yaml and saphyr
/// refuse a longer one, so it is written as an explicit key (`? key` then `: value`).
const MAX_IMPLICIT_KEY: usize = 1024;

fn write_map(out: &mut String, map: &Map<String, Value>, indent: usize) {
    let mut key_text = String::new();
    for (key, value) in map {
        key_text.clear();
        write_string(&mut key_text, key);
        out.extend(std::iter::repeat_n(' ', indent));
        if key_text.chars().count() < MAX_IMPLICIT_KEY {
            out.push_str(&key_text);
        } else {
            out.push_str("? ");
            out.push_str(&key_text);
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', indent));
        }
        out.push(':');
        write_nested(out, value, indent);
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for value in items {
        out.extend(std::iter::repeat_n(' ', indent));
        out.push('-');
        match value {
            // A mapping starts on the dash's line, its other keys aligned under the first.
            Value::Object(map) if !map.is_empty() => {
                out.push(' ');
                let mut nested = String::new();
                write_map(&mut nested, map, indent + 2);
                out.push_str(&nested[indent + 2..]);
            }
            _ => write_nested(out, value, indent),
        }
    }
}

/// The value after `key:` or `-`: on the same line for a scalar, indented below for the rest.
fn write_nested(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_map(out, map, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent + 2);
        }
        scalar => {
            out.push(' ');
            write_scalar(out, scalar);
            out.push('\n');
        }
    }
}

fn write_scalar(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => write_string(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        other => out.push_str(&other.to_string()),
    }
}

/// Plain when safe, else a JSON string (a JSON string is a valid YAML double-quoted scalar).
fn write_string(out: &mut String, s: &str) {
    let safe_chars = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'/' | b'_' | b'-'));
    let safe_start = s
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'/' || b == b'_');
    if safe_chars && safe_start && resolve_plain(s) == Scalar::Str(s.to_owned()) {
        out.push_str(s);
    } else {
        out.push_str(&Value::String(s.to_owned()).to_string());
    }
}

#[cfg(test)]
mod tests;
