//! The RFC 6902 JSON Patch writer: operations go straight into a byte buffer as the defaulting
//! rules decide them, so no object is re-serialised and nothing is diffed.
//!
//! Paths are the compile-time constants of the defaulting rules (`/spec/memcached/threads`):
//! none holds a `~` or `/` inside a segment, so no RFC 6901 escaping is needed.

use crate::json;

/// A JSON value to write into an operation.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// An integer.
    Int(i64),
    /// A string, escaped on the way out.
    Str(&'a str),
    /// JSON text written as is (a constant of this crate, tested to be valid JSON).
    Raw(&'static str),
}

/// Appends operations to a buffer and closes the array on [`Patch::finish`].
#[derive(Debug)]
pub struct Patch<'b> {
    buf: &'b mut Vec<u8>,
    ops: usize,
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
        buf.push(b'[');
        Patch {
            buf,
            ops: 0,
            changes: Changes {
                ops: [(Change::Defaulted, ""); Changes::MAX],
                len: 0,
            },
        }
    }

    /// `add`: creates a member that does not exist (its parent must).
    pub fn add(&mut self, path: &'static str, value: Value<'_>) {
        self.changes.push(Change::Defaulted, path);
        self.op("add", path, Some(value));
    }

    /// `replace`: overwrites a member that exists (here: one that is null or a zero value).
    pub fn replace(&mut self, path: &'static str, value: Value<'_>) {
        self.changes.push(Change::Defaulted, path);
        self.op("replace", path, Some(value));
    }

    /// `remove`: deletes a member that exists.
    pub fn remove(&mut self, path: &'static str) {
        self.changes.push(Change::Removed, path);
        self.op("remove", path, None);
    }

    /// `add` when the member is absent, `replace` when it exists.
    pub fn set(&mut self, exists: bool, path: &'static str, value: Value<'_>) {
        if exists {
            self.replace(path, value)
        } else {
            self.add(path, value)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// The paths written so far; take them before [`Patch::finish`].
    pub fn changes(&self) -> Changes {
        self.changes
    }

    /// Closes the array; `None` when there is nothing to patch.
    pub fn finish(self) -> Option<&'b [u8]> {
        if self.ops == 0 {
            return None;
        }
        self.buf.push(b']');
        Some(self.buf)
    }

    fn op(&mut self, op: &str, path: &str, value: Option<Value<'_>>) {
        if self.ops > 0 {
            self.buf.push(b',');
        }
        self.ops += 1;
        self.buf.extend_from_slice(b"{\"op\":\"");
        self.buf.extend_from_slice(op.as_bytes());
        self.buf.extend_from_slice(b"\",\"path\":\"");
        self.buf.extend_from_slice(path.as_bytes());
        self.buf.push(b'"');
        if let Some(value) = value {
            self.buf.extend_from_slice(b",\"value\":");
            match value {
                Value::Int(n) => self
                    .buf
                    .extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
                Value::Str(s) => json::write_str(self.buf, s),
                Value::Raw(raw) => self.buf.extend_from_slice(raw.as_bytes()),
            }
        }
        self.buf.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_valid_rfc6902_array() {
        let mut buf = b"stale".to_vec();
        let mut p = Patch::new(&mut buf);
        p.add("/spec/replicas", Value::Int(1));
        p.replace("/spec/image", Value::Str("memcached:\"1.6\""));
        p.remove("/spec/x");
        p.add("/spec/memcached", Value::Raw(r#"{"threads":4}"#));
        let out = p.finish().unwrap();
        let parsed: serde_json::Value = serde_json::from_slice(out).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!([
                {"op": "add", "path": "/spec/replicas", "value": 1},
                {"op": "replace", "path": "/spec/image", "value": "memcached:\"1.6\""},
                {"op": "remove", "path": "/spec/x"},
                {"op": "add", "path": "/spec/memcached", "value": {"threads": 4}},
            ])
        );
    }

    #[test]
    fn changes_list_the_paths_by_what_was_done() {
        let mut buf = Vec::new();
        let mut p = Patch::new(&mut buf);
        p.add("/spec/replicas", Value::Int(1));
        p.remove("/spec/x");
        p.replace("/spec/memcached/threads", Value::Int(4));
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
