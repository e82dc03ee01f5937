//! A typed reader over a simd-json tape: the AdmissionReview is parsed once into a tape whose
//! strings borrow the (unescaped in place) request body, and every view type reads its fields
//! from here. Type mismatches become [`TypeError`]s that name the field path.

use std::borrow::Cow;
use std::fmt;

use simd_json::{Node, StaticNode, Tape};

/// One JSON value on the tape: its head node followed by all of its nested nodes.
#[derive(Clone, Copy, Debug)]
pub struct Val<'t, 'i> {
    nodes: &'t [Node<'i>],
}

/// The JSON type of a value, as error messages name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Integer,
    Float,
    String,
    Array,
    Object,
}

impl Kind {
    /// The type with its article, for "expected X, found Y" messages.
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool => "a boolean",
            Kind::Integer => "an integer",
            Kind::Float => "a number with a fraction or exponent",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// A value whose JSON type or range is not what the schema says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeError {
    /// The field path, e.g. `spec.memcached.threads`.
    pub field: Cow<'static, str>,
    /// What the schema wants, e.g. "an integer".
    pub expected: &'static str,
    /// What the request holds, e.g. "a string", or the out-of-range number.
    pub found: Cow<'static, str>,
}

impl fmt::Display for TypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: expected {}, found {}",
            self.field, self.expected, self.found
        )
    }
}

impl std::error::Error for TypeError {}

/// A member as the webhooks distinguish it: Go's pointer fields default when absent *or* null.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Field<T> {
    #[default]
    Absent,
    Null,
    Set(T),
}

impl<T> Field<T> {
    /// The value, if one is set (absent and null both read as "not set", as in Go).
    pub fn get(&self) -> Option<&T> {
        match self {
            Field::Set(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the member exists in the JSON object (a JSON patch must `replace`, not `add`, it).
    pub fn exists(&self) -> bool {
        !matches!(self, Field::Absent)
    }
}

// === impl Val ===

impl<'t, 'i> Val<'t, 'i> {
    /// The document's root value.
    pub fn root(tape: &'t Tape<'i>) -> Self {
        Val { nodes: &tape.0 }
    }

    pub fn kind(&self) -> Kind {
        match self.nodes.first() {
            Some(Node::String(_)) => Kind::String,
            Some(Node::Object { .. }) => Kind::Object,
            Some(Node::Array { .. }) => Kind::Array,
            Some(Node::Static(StaticNode::Bool(_))) => Kind::Bool,
            Some(Node::Static(StaticNode::I64(_) | StaticNode::U64(_))) => Kind::Integer,
            Some(Node::Static(StaticNode::F64(_))) => Kind::Float,
            Some(Node::Static(StaticNode::Null)) | None => Kind::Null,
        }
    }

    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    pub fn as_str(&self) -> Option<&'i str> {
        match self.nodes.first() {
            Some(Node::String(s)) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.nodes.first() {
            Some(Node::Static(StaticNode::Bool(b))) => Some(*b),
            _ => None,
        }
    }

    /// An integer as i128, so callers can range-check without overflow.
    pub fn as_integer(&self) -> Option<i128> {
        match self.nodes.first() {
            Some(Node::Static(StaticNode::I64(n))) => Some(i128::from(*n)),
            Some(Node::Static(StaticNode::U64(n))) => Some(i128::from(*n)),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self.nodes.first() {
            Some(Node::Static(StaticNode::F64(n))) => Some(*n),
            _ => None,
        }
    }

    /// The members of an object, in document order (callers let the last duplicate win, as Go does).
    pub fn entries(&self) -> Option<Entries<'t, 'i>> {
        match self.nodes.first() {
            Some(Node::Object { len, .. }) => Some(Entries {
                rest: self.nodes.get(1..).unwrap_or_default(),
                left: *len,
            }),
            _ => None,
        }
    }

    /// The elements of an array.
    pub fn items(&self) -> Option<Items<'t, 'i>> {
        match self.nodes.first() {
            Some(Node::Array { len, .. }) => Some(Items {
                rest: self.nodes.get(1..).unwrap_or_default(),
                left: *len,
            }),
            _ => None,
        }
    }

    /// The number of elements of an array or members of an object.
    pub fn len(&self) -> usize {
        match self.nodes.first() {
            Some(Node::Array { len, .. } | Node::Object { len, .. }) => *len,
            _ => 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The last member named `key` of an object (linear: objects on the hot path are small).
    pub fn get(&self, key: &str) -> Option<Val<'t, 'i>> {
        self.entries()?
            .filter(|(k, _)| *k == key)
            .last()
            .map(|(_, v)| v)
    }

    /// Splits this value off the front of `nodes`, returning it and what follows.
    fn split(nodes: &'t [Node<'i>]) -> Option<(Val<'t, 'i>, &'t [Node<'i>])> {
        let width = match nodes.first()? {
            Node::Object { count, .. } | Node::Array { count, .. } => count.checked_add(1)?,
            _ => 1,
        };
        let (head, rest) = nodes.split_at_checked(width)?;
        Some((Val { nodes: head }, rest))
    }
}

/// Iterator over an object's `(key, value)` members.
pub struct Entries<'t, 'i> {
    rest: &'t [Node<'i>],
    left: usize,
}

/// No members: what a wrongly typed object reads as, once its type error is recorded.
impl Default for Entries<'_, '_> {
    fn default() -> Self {
        Entries { rest: &[], left: 0 }
    }
}

impl<'t, 'i> Iterator for Entries<'t, 'i> {
    type Item = (&'i str, Val<'t, 'i>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (Node::String(key), after_key) = self.rest.split_first()? else {
            return None;
        };
        let (value, rest) = Val::split(after_key)?;
        self.rest = rest;
        Some((key, value))
    }
}

/// Iterator over an array's elements.
pub struct Items<'t, 'i> {
    rest: &'t [Node<'i>],
    left: usize,
}

impl<'t, 'i> Iterator for Items<'t, 'i> {
    type Item = Val<'t, 'i>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (value, rest) = Val::split(self.rest)?;
        self.rest = rest;
        Some(value)
    }
}

// === typed readers: each names the field it reads in its error ===

fn mismatch(
    field: impl Into<Cow<'static, str>>,
    expected: &'static str,
    v: Val<'_, '_>,
) -> TypeError {
    TypeError {
        field: field.into(),
        expected,
        found: Cow::Borrowed(v.kind().describe()),
    }
}

/// Reads a member into a [`Field`], mapping JSON null to [`Field::Null`].
pub fn field<'t, 'i, T>(
    v: Val<'t, 'i>,
    read: impl FnOnce(Val<'t, 'i>) -> Result<T, TypeError>,
) -> Result<Field<T>, TypeError> {
    if v.is_null() {
        Ok(Field::Null)
    } else {
        read(v).map(Field::Set)
    }
}

pub fn string<'i>(v: Val<'_, 'i>, field: &'static str) -> Result<&'i str, TypeError> {
    v.as_str().ok_or_else(|| mismatch(field, "a string", v))
}

pub fn boolean(v: Val<'_, '_>, field: &'static str) -> Result<bool, TypeError> {
    v.as_bool().ok_or_else(|| mismatch(field, "a boolean", v))
}

/// A boolean that Go reads as `false` when absent or null.
pub fn flag(v: Val<'_, '_>, field: &'static str) -> Result<bool, TypeError> {
    if v.is_null() {
        Ok(false)
    } else {
        boolean(v, field)
    }
}

pub fn int32(v: Val<'_, '_>, field: &'static str) -> Result<i32, TypeError> {
    let n = v
        .as_integer()
        .ok_or_else(|| mismatch(field, "an integer", v))?;
    i32::try_from(n).map_err(|_| TypeError {
        field: Cow::Borrowed(field),
        expected: "a 32-bit integer",
        found: Cow::Owned(n.to_string()),
    })
}

pub fn int64(v: Val<'_, '_>, field: &'static str) -> Result<i64, TypeError> {
    let n = v
        .as_integer()
        .ok_or_else(|| mismatch(field, "an integer", v))?;
    i64::try_from(n).map_err(|_| TypeError {
        field: Cow::Borrowed(field),
        expected: "a 64-bit integer",
        found: Cow::Owned(n.to_string()),
    })
}

/// An object's members; null reads as an empty object (Go leaves the struct nil).
pub fn object<'t, 'i>(v: Val<'t, 'i>, field: &'static str) -> Result<Entries<'t, 'i>, TypeError> {
    v.entries().ok_or_else(|| mismatch(field, "an object", v))
}

/// Checks that a value is an array without reading it (its elements are read where used).
pub fn array<'t, 'i>(v: Val<'t, 'i>, field: &'static str) -> Result<Val<'t, 'i>, TypeError> {
    if v.kind() == Kind::Array {
        Ok(v)
    } else {
        Err(mismatch(field, "an array", v))
    }
}

/// Checks that a value is an object without reading it.
pub fn any_object<'t, 'i>(v: Val<'t, 'i>, field: &'static str) -> Result<Val<'t, 'i>, TypeError> {
    if v.kind() == Kind::Object {
        Ok(v)
    } else {
        Err(mismatch(field, "an object", v))
    }
}

/// The value at a field path as field errors spell it (`spec.autoscaling.metrics[0].type`);
/// `None` when any step is missing, null or of another type. Ratcheting compares the stored
/// and the updated object here for errors whose message does not name the value.
pub fn at_path<'t, 'i>(root: Val<'t, 'i>, path: &str) -> Option<Val<'t, 'i>> {
    let mut v = root;
    for segment in path.split('.') {
        let mut parts = segment.split('[');
        v = v.get(parts.next()?)?;
        for index in parts {
            let i: usize = index.strip_suffix(']')?.parse().ok()?;
            v = v.items()?.nth(i)?;
        }
    }
    Some(v).filter(|v| !v.is_null())
}

/// JSON equality: objects compare as maps (member order does not matter), numbers by value.
pub fn same(a: Val<'_, '_>, b: Val<'_, '_>) -> bool {
    match (a.kind(), b.kind()) {
        (Kind::Object, Kind::Object) => {
            a.len() == b.len()
                && a.entries()
                    .into_iter()
                    .flatten()
                    .all(|(k, x)| b.get(k).is_some_and(|y| same(x, y)))
        }
        (Kind::Array, Kind::Array) => {
            a.len() == b.len()
                && a.items()
                    .into_iter()
                    .flatten()
                    .zip(b.items().into_iter().flatten())
                    .all(|(x, y)| same(x, y))
        }
        (Kind::String, Kind::String) => a.as_str() == b.as_str(),
        (Kind::Integer, Kind::Integer) => a.as_integer() == b.as_integer(),
        (Kind::Float, Kind::Float) => a.as_f64() == b.as_f64(),
        (Kind::Bool, Kind::Bool) => a.as_bool() == b.as_bool(),
        (x, y) => x == y,
    }
}

/// Writes `s` as a JSON string literal (quotes included), escaping what RFC 8259 requires.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Nearly every string written (the uid, images, durations, field paths) needs no escape:
    // one branch-free pass, which the compiler vectorises, then one copy: a few times cheaper
    // than byte by byte (docs/performance.md, "Measured choices in the code").
    if !bytes.iter().fold(false, |any, &b| any | needs_escape(b)) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// What RFC 8259 says a string must escape: the quote, the backslash and control characters.
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

#[cfg(test)]
mod tests;
