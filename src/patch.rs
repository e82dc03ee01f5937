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
}

impl<'b> Patch<'b> {
    /// Starts a patch in `buf` (which is cleared).
    pub fn new(buf: &'b mut Vec<u8>) -> Self {
        buf.clear();
        buf.push(b'[');
        Patch { buf, ops: 0 }
    }

    /// `add`: creates a member that does not exist (its parent must).
    pub fn add(&mut self, path: &'static str, value: Value<'_>) {
        self.op("add", path, Some(value));
    }

    /// `replace`: overwrites a member that exists (here: one that is null or a zero value).
    pub fn replace(&mut self, path: &'static str, value: Value<'_>) {
        self.op("replace", path, Some(value));
    }

    /// `remove`: deletes a member that exists.
    pub fn remove(&mut self, path: &'static str) {
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
    fn an_empty_patch_is_none() {
        let mut buf = Vec::new();
        assert!(Patch::new(&mut buf).finish().is_none());
    }
}
