//! Where each node of a manifest is: field paths as causes spell them (`spec.memcached.threads`,
//! `spec.autoscaling.metrics[0].type`) mapped to 1-based line and column, so a finding points
//! at its field. Filled from the YAML parser's marks, or by [`json`] for JSON input.

use std::collections::HashMap;

/// A 1-based line and column (in characters).
pub type At = (usize, usize);

/// The positions of one document's nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Positions {
    nodes: HashMap<String, Node>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Node {
    /// The member's key; `None` for the root and array elements.
    key: Option<At>,
    value: At,
    /// An object or array: its key names it better than its first member does.
    container: bool,
}

impl Positions {
    /// Records the node at `path` (the first record wins: a duplicate key is reported where
    /// kubectl's decoder first met it).
    pub fn record(&mut self, path: &str, key: Option<At>, value: At, container: bool) {
        if !self.nodes.contains_key(path) {
            let node = Node {
                key,
                value,
                container,
            };
            self.nodes.insert(path.to_owned(), node);
        }
    }

    /// Where a cause about `field` points, for the object at `prefix` (`""`, or `items[3]` in a
    /// List): the field's value (its key, for an object or array); where it is missing (a required field, a default the webhook
    /// added), the key of the nearest parent that exists; else the object itself.
    pub fn find(&self, prefix: &str, field: &str) -> Option<At> {
        let field = field.strip_suffix("[]").unwrap_or(field);
        let mut path = join(prefix, field);
        if let Some(node) = self.nodes.get(&path) {
            return Some(match node.key {
                Some(key) if node.container => key,
                _ => node.value,
            });
        }
        while let Some(cut) = path.rfind(['.', '[']) {
            path.truncate(cut);
            if path.len() < prefix.len() {
                break;
            }
            if let Some(node) = self.nodes.get(&path) {
                return Some(node.key.unwrap_or(node.value));
            }
        }
        self.nodes.get(prefix).map(|n| n.value)
    }
}

/// The path of member `key` under `parent`.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else if key.is_empty() {
        parent.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The positions of a JSON value that starts at `text[start..]`, whose first byte is at `at`.
/// The text has been parsed already, so this only walks it; it stops quietly at anything
/// unexpected (positions are then missing, and findings point at a parent).
pub fn json(text: &str, start: usize, at: At) -> Positions {
    let mut scan = Scan {
        text,
        i: start,
        line: at.0,
        column: at.1,
        path: String::new(),
        out: Positions::default(),
    };
    scan.value(None, 0);
    scan.out
}

/// serde_json nests at most 128 levels; deeper is never reached, but stay bounded anyway.
const MAX_DEPTH: usize = 256;

struct Scan<'a> {
    text: &'a str,
    i: usize,
    line: usize,
    column: usize,
    path: String,
    out: Positions,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.i).copied()
    }

    fn bump(&mut self) {
        match self.peek() {
            Some(b'\n') => {
                self.line += 1;
                self.column = 1;
            }
            // A UTF-8 continuation byte is part of the character already counted.
            Some(b) if b & 0xC0 != 0x80 => self.column += 1,
            _ => {}
        }
        self.i += 1;
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.bump();
        }
    }

    fn at(&self) -> At {
        (self.line, self.column)
    }

    /// Walks one value at the current path; `false` when the text ends or surprises.
    fn value(&mut self, key: Option<At>, depth: usize) -> bool {
        self.space();
        let container = matches!(self.peek(), Some(b'{' | b'['));
        self.out.record(&self.path, key, self.at(), container);
        match self.peek() {
            Some(b'{') if depth < MAX_DEPTH => self.object(depth),
            Some(b'[') if depth < MAX_DEPTH => self.array(depth),
            Some(b'"') => self.string().is_some(),
            Some(_) => {
                while matches!(self.peek(), Some(b) if !b",]} \t\n\r".contains(&b)) {
                    self.bump();
                }
                true
            }
            None => false,
        }
    }

    fn object(&mut self, depth: usize) -> bool {
        let base = self.path.len();
        self.bump();
        loop {
            self.space();
            match self.peek() {
                Some(b'}') => {
                    self.bump();
                    return true;
                }
                Some(b',') => self.bump(),
                Some(b'"') => {
                    let key_at = self.at();
                    let Some(key) = self.string() else {
                        return false;
                    };
                    self.space();
                    if self.peek() != Some(b':') {
                        return false;
                    }
                    self.bump();
                    self.path.truncate(base);
                    if base > 0 {
                        self.path.push('.');
                    }
                    self.path.push_str(&key);
                    let ok = self.value(Some(key_at), depth + 1);
                    self.path.truncate(base);
                    if !ok {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        let base = self.path.len();
        self.bump();
        let mut index = 0usize;
        loop {
            self.space();
            match self.peek() {
                Some(b']') => {
                    self.bump();
                    return true;
                }
                Some(b',') => self.bump(),
                Some(_) => {
                    self.path.truncate(base);
                    self.path.push_str(&format!("[{index}]"));
                    index += 1;
                    let ok = self.value(None, depth + 1);
                    self.path.truncate(base);
                    if !ok {
                        return false;
                    }
                }
                None => return false,
            }
        }
    }

    /// A string literal, unescaped (only keys need it).
    fn string(&mut self) -> Option<String> {
        let start = self.i;
        self.bump();
        let mut escaped = false;
        loop {
            let b = self.peek()?;
            self.bump();
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => break,
                _ => {}
            }
        }
        let literal = &self.text[start..self.i];
        if literal.contains('\\') {
            serde_json::from_str(literal).ok()
        } else {
            Some(literal[1..literal.len() - 1].to_owned())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_and_keys_are_found_and_missing_fields_point_at_their_parent() {
        let text = "\n  {\"spec\": {\"replicas\": \"three\",\n    \"m\\u0061x\": [1, {\"t\": true}]},\n \"é\": 1}";
        let p = json(text, 0, (1, 1));
        assert_eq!(p.find("", "spec.replicas"), Some((2, 25)));
        assert_eq!(p.find("", "spec.max[1].t"), Some((3, 27)));
        assert_eq!(p.find("", "spec.max[]"), Some((3, 5)), "an array: its key");
        // Missing: the key of the nearest parent that exists.
        assert_eq!(p.find("", "spec.max[1].u"), Some((3, 21)));
        assert_eq!(p.find("", "spec.image"), Some((2, 4)));
        assert_eq!(p.find("", "status.x"), Some((2, 3)));
        assert_eq!(p.find("", "é"), Some((4, 7)));
    }

    #[test]
    fn a_list_item_prefix_keeps_the_search_inside_the_item() {
        let text = r#"{"items": [{"spec": {}}, {"spec": {"a": 1}}]}"#;
        let p = json(text, 0, (1, 1));
        assert_eq!(p.find("items[1]", "spec.a"), Some((1, 41)));
        assert_eq!(p.find("items[0]", "spec.a"), Some((1, 13)));
        assert_eq!(p.find("items[0]", "metadata.name"), Some((1, 12)));
    }
}
