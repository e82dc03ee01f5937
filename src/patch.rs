//! The RFC 6902 JSON Patch writer: operations go straight into a byte buffer as the defaulting
//! rules decide them, so no object is re-serialised and nothing is diffed.
//!
//! Every operation the rules write is a constant (its path, and a value from
//! `memcached::defaults`), so its text is built at compile time ([`op!`], [`remove!`]), and
//! with it its base64 in each of the three phases a stream of operations can reach it in (the
//! bytes carried over from what came before, 0 to 2). The patch is written as the answer
//! carries it, base64, a copy per operation: no encoder runs per request.
//!
//! Paths are the compile-time constants of the defaulting rules (`/spec/memcached/threads`):
//! none holds a `~` or `/` inside a segment, so no RFC 6901 escaping is needed.

pub mod text;

pub(crate) use text::Text;

/// An `add` or `replace` on one path, as [`op!`] builds it.
#[derive(Debug)]
pub struct Op {
    pub(crate) path: &'static str,
    pub(crate) add: Text,
    pub(crate) replace: Text,
}

/// A `remove` of one path, as [`remove!`] builds it.
#[derive(Debug)]
pub struct Remove {
    pub(crate) path: &'static str,
    pub(crate) text: Text,
}

/// An [`Op`] setting the path `$path` (a string literal or constant) to a value: `str C` (a
/// string constant, written quoted; one that would need an escape fails the build), `int C` (a
/// non-negative integer constant) or `raw C` (a constant holding JSON text, tested to be valid).
macro_rules! op {
    ($path:expr, $kind:ident $value:expr) => {
        $crate::patch::Op {
            path: $path,
            add: $crate::patch::op!(@text "add", $path, $kind $value),
            replace: $crate::patch::op!(@text "replace", $path, $kind $value),
        }
    };
    (@text $op:literal, $path:expr, str $value:expr) => {
        $crate::patch::op!(@parts $op, $path, b"\"", $crate::patch::text::plain($value), b"\"")
    };
    (@text $op:literal, $path:expr, int $value:expr) => {
        $crate::patch::op!(@parts $op, $path,
            &$crate::patch::text::int::<{ $crate::patch::text::digits($value) }>($value))
    };
    (@text $op:literal, $path:expr, raw $value:expr) => {
        $crate::patch::op!(@parts $op, $path, $value.as_bytes())
    };
    (@parts $op:literal, $path:expr, $($value:expr),+) => {
        $crate::patch::text::text!(
            concat!("{\"op\":\"", $op, "\",\"path\":\"").as_bytes(),
            $crate::patch::text::plain($path),
            b"\",\"value\":",
            $($value),+,
            b"}",
        )
    };
}
pub(crate) use op;

/// A [`Remove`] of the path `$path`.
macro_rules! remove {
    ($path:expr) => {
        $crate::patch::Remove {
            path: $path,
            text: $crate::patch::text::text!(
                b"{\"op\":\"remove\",\"path\":\"",
                $crate::patch::text::plain($path),
                b"\"}",
            ),
        }
    };
}
pub(crate) use remove;

/// Appends operations to a buffer, base64-encoded as they come, and closes the array on
/// [`Patch::finish`].
#[derive(Debug)]
pub struct Patch<'b> {
    buf: &'b mut Vec<u8>,
    ops: usize,
    /// The bytes not yet encoded: fewer than a group of three.
    carry: [u8; 3],
    carried: usize,
    changes: Changes,
}

/// What an operation did to the object, for the mutating webhook's audit annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// `add` or `replace`: the webhook put a default there.
    Defaulted,
    /// `remove`: the webhook took a user's value out.
    Removed,
}

/// The paths a patch touched, kept as the operations are written: the paths are `&'static`
/// constants, so recording one is a copy into a fixed array, never an allocation (this runs on
/// every CREATE).
#[derive(Clone, Copy, Debug)]
pub struct Changes {
    ops: [(Change, &'static str); Changes::MAX],
    len: usize,
}

impl Changes {
    /// More than the defaulting rules can write in one patch (12 at most: every default of a
    /// spec with monitoring, a service monitor, high availability and autoscaling).
    pub const MAX: usize = 16;

    fn push(&mut self, change: Change, path: &'static str) {
        debug_assert!(
            self.len < Changes::MAX,
            "more patch operations than Changes::MAX"
        );
        if let Some(slot) = self.ops.get_mut(self.len) {
            *slot = (change, path);
            self.len += 1;
        }
    }

    /// Whether any operation did `change`.
    pub fn any(&self, change: Change) -> bool {
        self.ops[..self.len].iter().any(|&(c, _)| c == change)
    }

    /// The paths `change` touched, in patch order, as the patch writes them (JSON Pointers,
    /// `/spec/memcached/threads`) joined by commas: the value of the `defaulted` and `removed`
    /// audit annotations. The paths are constants without `~`, quotes or backslashes (see the
    /// module docs), so nothing needs escaping.
    pub fn write_paths(&self, change: Change, out: &mut Vec<u8>) {
        let mut first = true;
        for &(c, path) in &self.ops[..self.len] {
            if c != change {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(path.as_bytes());
        }
    }
}

impl<'b> Patch<'b> {
    /// Starts a patch in `buf` (which is cleared).
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        buf.clear();
        Patch {
            buf,
            ops: 0,
            carry: [b'[', 0, 0],
            carried: 1,
            changes: Changes {
                ops: [(Change::Defaulted, ""); Changes::MAX],
                len: 0,
            },
        }
    }

    /// `add`: creates a member that does not exist (its parent must).
    pub fn add(&mut self, op: &'static Op) {
        self.changes.push(Change::Defaulted, op.path);
        self.op(&op.add);
    }

    /// `replace`: overwrites a member that exists (here: one that is null or a zero value).
    pub fn replace(&mut self, op: &'static Op) {
        self.changes.push(Change::Defaulted, op.path);
        self.op(&op.replace);
    }

    /// `remove`: deletes a member that exists.
    pub fn remove(&mut self, op: &'static Remove) {
        self.changes.push(Change::Removed, op.path);
        self.op(&op.text);
    }

    /// `add` when the member is absent, `replace` when it exists.
    pub fn set(&mut self, exists: bool, op: &'static Op) {
        if exists {
            self.replace(op)
        } else {
            self.add(op)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// The paths written so far; take them before [`Patch::finish`].
    pub fn changes(&self) -> Changes {
        self.changes
    }

    /// Closes the array; `None` when there is nothing to patch. The bytes are the patch's
    /// standard base64 (RFC 4648, padded), as `response.patch` carries it.
    pub fn finish(mut self) -> Option<&'b [u8]> {
        if self.ops == 0 {
            return None;
        }
        self.byte(b']');
        let n = self.carried;
        if n > 0 {
            // The last group: its bytes, zero bits after them, `=` for each byte missing.
            let mut group = self.carry;
            group[n..].fill(0);
            let mut chars = text::group_chars(group);
            chars[n + 1..].fill(b'=');
            self.buf.extend_from_slice(&chars);
        }
        Some(self.buf)
    }

    /// Appends one byte to the stream.
    #[inline]
    fn byte(&mut self, b: u8) {
        self.carry[self.carried] = b;
        self.carried += 1;
        if self.carried == 3 {
            self.buf.extend_from_slice(&text::group_chars(self.carry));
            self.carried = 0;
        }
    }

    /// Appends an operation's text: the bytes that complete the carried group, then the
    /// text's base64 for that phase, computed at compile time; what is left over is carried.
    fn op(&mut self, text: &Text) {
        if self.ops > 0 {
            self.byte(b',');
        }
        self.ops += 1;
        let [a, b] = text.first;
        let phase = match self.carried {
            0 => 0,
            1 => {
                let group = [self.carry[0], a, b];
                self.buf.extend_from_slice(&text::group_chars(group));
                1
            }
            _ => {
                let group = [self.carry[0], self.carry[1], a];
                self.buf.extend_from_slice(&text::group_chars(group));
                2
            }
        };
        self.buf.extend_from_slice(text.base64[phase]);
        let [y, z] = text.last;
        self.carried = text.rest[phase];
        self.carry = match self.carried {
            1 => [z, 0, 0],
            _ => [y, z, 0],
        };
    }
}

/// The JSON of a [`Patch::finish`]ed patch, for tests that read it.
#[cfg(test)]
pub(crate) fn decoded(base64: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .expect("a patch is standard base64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    static REPLICAS: Op = op!("/spec/replicas", int 10);
    static IMAGE: Op = op!("/spec/image", str "memcached:1.6");
    static MEMCACHED: Op = op!("/spec/memcached", raw r#"{"threads":4}"#);
    static GONE: Remove = remove!("/spec/x");
    static SHORT: Op = op!("/a", int 0);

    fn json(patch: Option<&[u8]>) -> serde_json::Value {
        serde_json::from_slice(&decoded(patch.expect("a patch"))).expect("a JSON patch")
    }

    #[test]
    fn writes_a_valid_rfc6902_array_in_base64() {
        let mut buf = b"stale".to_vec();
        let mut p = Patch::new(&mut buf);
        p.add(&REPLICAS);
        p.replace(&IMAGE);
        p.remove(&GONE);
        p.add(&MEMCACHED);
        assert_eq!(
            json(p.finish()),
            serde_json::json!([
                {"op": "add", "path": "/spec/replicas", "value": 10},
                {"op": "replace", "path": "/spec/image", "value": "memcached:1.6"},
                {"op": "remove", "path": "/spec/x"},
                {"op": "add", "path": "/spec/memcached", "value": {"threads": 4}},
            ])
        );
    }

    /// Every sequence of up to four operations (so every text in every phase, and every
    /// length of the last group) is the standard base64 of the JSON it stands for.
    #[test]
    fn every_phase_encodes_as_standard_base64() {
        enum Any {
            Add(&'static Op),
            Replace(&'static Op),
            Remove(&'static Remove),
        }
        let all = [
            Any::Add(&REPLICAS),
            Any::Replace(&IMAGE),
            Any::Add(&MEMCACHED),
            Any::Remove(&GONE),
            Any::Add(&SHORT),
            Any::Replace(&SHORT),
        ];
        let mut sequences: Vec<Vec<&Any>> = vec![vec![]];
        for _ in 0..4 {
            let longer: Vec<Vec<&Any>> = sequences
                .iter()
                .filter(|s| s.len() == sequences.last().map_or(0, Vec::len))
                .flat_map(|s| {
                    all.iter().map(move |op| {
                        let mut s = s.clone();
                        s.push(op);
                        s
                    })
                })
                .collect();
            sequences.extend(longer);
        }
        for sequence in &sequences[1..] {
            let mut buf = Vec::new();
            let mut p = Patch::new(&mut buf);
            let mut json = b"[".to_vec();
            for (i, op) in sequence.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                let text = match op {
                    Any::Add(op) => {
                        p.add(op);
                        &op.add
                    }
                    Any::Replace(op) => {
                        p.replace(op);
                        &op.replace
                    }
                    Any::Remove(op) => {
                        p.remove(op);
                        &op.text
                    }
                };
                json.extend_from_slice(text.json);
            }
            json.push(b']');
            let expected = base64::engine::general_purpose::STANDARD.encode(&json);
            let written = p.finish().expect("a patch");
            assert_eq!(std::str::from_utf8(written).unwrap(), expected);
            serde_json::from_slice::<serde_json::Value>(&json).expect("valid JSON");
        }
    }

    #[test]
    fn the_texts_are_built_from_the_constants() {
        assert_eq!(
            REPLICAS.replace.json,
            br#"{"op":"replace","path":"/spec/replicas","value":10}"#
        );
        assert_eq!(SHORT.add.json, br#"{"op":"add","path":"/a","value":0}"#);
        assert_eq!(GONE.text.json, br#"{"op":"remove","path":"/spec/x"}"#);
        for n in [0, 7, 10, 99, 100, 1024, i64::MAX] {
            assert_eq!(text::digits(n), n.to_string().len(), "{n}");
        }
    }

    #[test]
    fn changes_list_the_paths_by_what_was_done() {
        static THREADS: Op = op!("/spec/memcached/threads", int 4);
        let mut buf = Vec::new();
        let mut p = Patch::new(&mut buf);
        p.add(&REPLICAS);
        p.remove(&GONE);
        p.replace(&THREADS);
        let changes = p.changes();
        let paths = |change| {
            let mut out = Vec::new();
            changes.write_paths(change, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            paths(Change::Defaulted),
            "/spec/replicas,/spec/memcached/threads"
        );
        assert_eq!(paths(Change::Removed), "/spec/x");
        assert!(changes.any(Change::Removed));
        let mut buf = Vec::new();
        let empty = Patch::new(&mut buf).changes();
        assert!(!empty.any(Change::Defaulted) && !empty.any(Change::Removed));
    }

    #[test]
    fn an_empty_patch_is_none() {
        let mut buf = Vec::new();
        assert!(Patch::new(&mut buf).finish().is_none());
    }
}
