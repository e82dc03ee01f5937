//! Manifests in: files, directories and standard input, each document read as kubectl reads it
//! (a JSON stream when the text starts with `{`, else YAML), `List`s opened into their items.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::Value;

use crate::yaml;
pub use crate::yaml::position::At;
use crate::yaml::position::{self, Positions};

/// Where an object came from, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The path as given (or found under a directory given); `<stdin>` for `-`.
    pub file: String,
    /// 1-based position in a `List`'s items.
    pub item: Option<usize>,
    /// Where the object starts (the document, or the List item): 1-based line and column.
    pub at: At,
}

/// One Kubernetes object read from a manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub origin: Origin,
    /// The object as kubectl would send it.
    pub value: Value,
    /// Where the nodes of its document are (shared by the items of a List).
    pub positions: Rc<Positions>,
    /// The object's own path in its document: `""`, or `items[k]` for a List item.
    pub prefix: String,
}

impl Object {
    /// Where a cause about `field` points (see [`Positions::find`]); the object's start when
    /// the field is not in the input at all.
    pub fn position(&self, field: &str) -> At {
        self.positions
            .find(&self.prefix, field)
            .unwrap_or(self.origin.at)
    }
}

/// Input that cannot be read: the file, and the line and column when the text is at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub file: String,
    /// 1-based line and column.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, column)) => write!(f, "{}:{line}:{column}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// The name `-` is shown as.
pub const STDIN: &str = "<stdin>";

/// The files an argument names: itself, or the `*.yaml`, `*.yml` and `*.json` files under a
/// directory (any case: `full.YAML` too), recursively, in byte order of their names (the same
/// order on every machine). Other files under a directory are added to `ignored`, so the report
/// can name them.
pub fn files(arg: &Path, ignored: &mut Vec<PathBuf>) -> Result<Vec<PathBuf>, Unreadable> {
    let unreadable = |e: io::Error| Unreadable {
        file: arg.display().to_string(),
        at: None,
        message: e.to_string(),
    };
    if fs::metadata(arg).map_err(unreadable)?.is_dir() {
        let mut found = Vec::new();
        walk(arg, &mut found, ignored).map_err(unreadable)?;
        Ok(found)
    } else {
        Ok(vec![arg.to_owned()])
    }
}

/// Whether a file under a directory is read, by its extension (case-insensitive).
pub fn is_manifest(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["yaml", "yml", "json"]
            .iter()
            .any(|m| e.eq_ignore_ascii_case(m))
    })
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>, ignored: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries = fs::read_dir(dir)?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        // Symbolic links to directories are not followed (no loops); links to files are read.
        if entry.file_type()?.is_dir() {
            walk(&path, found, ignored)?;
        } else if !fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            // A dangling link, a socket: nothing a manifest could be in.
        } else if is_manifest(&path) {
            found.push(path);
        } else {
            ignored.push(path);
        }
    }
    Ok(())
}

/// Reads a file's text; it must be UTF-8 (as kubectl requires).
pub fn read(file: &str, bytes: Vec<u8>) -> Result<String, Unreadable> {
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let text = String::from_utf8_lossy(valid);
        Unreadable {
            file: file.to_owned(),
            at: Some(line_column(&text, text.len())),
            message: "not UTF-8 text".to_owned(),
        }
    })
}

/// The objects of one file's text, Lists opened; empty documents are passed over.
pub fn objects(file: &str, text: &str) -> Result<Vec<Object>, Unreadable> {
    let documents = if text.trim_start().starts_with('{') {
        json_documents(file, text)?
    } else {
        yaml::documents(text).map_err(|e| Unreadable {
            file: file.to_owned(),
            at: Some((e.line, e.column)),
            message: e.message,
        })?
    };
    let mut objects = Vec::new();
    for (i, doc) in documents.into_iter().enumerate() {
        let origin = Origin {
            file: file.to_owned(),
            item: None,
            at: (doc.line, doc.column),
        };
        let positions = Rc::new(doc.positions);
        let unreadable = |message: String| Unreadable {
            file: file.to_owned(),
            at: Some((doc.line, doc.column)),
            message: format!("document {}: {message}", i + 1),
        };
        if doc.value.is_null() {
            continue;
        }
        let (api_version, kind) = type_of(&doc.value).map_err(unreadable)?;
        let items = match doc.value.get("items") {
            Some(items) if kind.ends_with("List") => items,
            _ => {
                objects.push(Object {
                    origin,
                    value: doc.value,
                    positions,
                    prefix: String::new(),
                });
                continue;
            }
        };
        let Value::Array(items) = items else {
            return Err(unreadable(format!(
                "items: expected an array of objects in a {kind}"
            )));
        };
        // A typed list from the API (MemcachedList) leaves its items' kind out.
        let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
        for (k, item) in items.iter().enumerate() {
            let mut item = item.clone();
            let Value::Object(fields) = &mut item else {
                return Err(unreadable(format!(
                    "items[{k}]: expected an object, found {}",
                    describe(&item)
                )));
            };
            if let Some(item_kind) = item_kind {
                fields
                    .entry("apiVersion")
                    .or_insert_with(|| api_version.clone().into());
                fields.entry("kind").or_insert_with(|| item_kind.into());
            }
            type_of(&item).map_err(|m| unreadable(format!("items[{k}]: {m}")))?;
            let prefix = format!("items[{k}]");
            let at = positions.find("", &prefix).unwrap_or(origin.at);
            objects.push(Object {
                origin: Origin {
                    item: Some(k + 1),
                    at,
                    ..origin.clone()
                },
                value: item,
                positions: Rc::clone(&positions),
                prefix,
            });
        }
    }
    Ok(objects)
}

/// A JSON stream: one or more values one after another (kubectl accepts several).
fn json_documents(file: &str, text: &str) -> Result<Vec<yaml::Document>, Unreadable> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut documents = Vec::new();
    loop {
        let start = stream.byte_offset();
        let Some(value) = stream.next() else {
            return Ok(documents);
        };
        let value = value.map_err(|e| Unreadable {
            file: file.to_owned(),
            at: Some(json_error_at(text, &e)),
            message: format!("not valid JSON: {}", without_position(&e)),
        })?;
        let skipped = text[start..].len() - text[start..].trim_start().len();
        let (line, column) = line_column(text, start + skipped);
        documents.push(yaml::Document {
            line,
            column,
            value: normalize_numbers(value),
            positions: position::json(text, start + skipped, (line, column)),
        });
    }
}

/// serde_json's message without its trailing ` at line L column C`: the report puts the
/// position in front, once.
fn without_position(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    message
        .strip_suffix(&suffix)
        .map_or_else(|| message.clone(), str::to_owned)
}

/// Where a JSON error is, 1-based. serde_json puts an error on a newline (one inside a string)
/// at column 0 of the next line; the report names the newline's own place instead.
fn json_error_at(text: &str, e: &serde_json::Error) -> (usize, usize) {
    if e.column() > 0 {
        return (e.line(), e.column());
    }
    let newline = text.match_indices('\n').nth(e.line().saturating_sub(2));
    newline.map_or((e.line().max(1), 1), |(i, _)| line_column(text, i))
}

/// Whole floats become integers, as the apiserver decodes `1.0` and forwards it (`1`).
fn normalize_numbers(mut value: Value) -> Value {
    let mut todo = vec![&mut value];
    while let Some(v) = todo.pop() {
        match v {
            Value::Number(n) if n.is_f64() => {
                if let Some(f) = n.as_f64()
                    && let Ok(whole) = yaml::go_float(f)
                {
                    *v = whole;
                }
            }
            Value::Array(items) => todo.extend(items.iter_mut()),
            Value::Object(map) => todo.extend(map.values_mut()),
            _ => {}
        }
    }
    value
}

/// `apiVersion` and `kind`, which every object needs before anything can judge it.
fn type_of(value: &Value) -> Result<(String, String), String> {
    let Value::Object(fields) = value else {
        return Err(format!(
            "expected a Kubernetes object (a mapping with apiVersion and kind), found {}",
            describe(value)
        ));
    };
    let member = |name: &str| match fields.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        None | Some(Value::Null) => Err(format!("{name} is missing")),
        Some(Value::String(_)) => Err(format!("{name} is empty")),
        Some(other) => Err(format!(
            "{name}: expected a string, found {}",
            describe(other)
        )),
    };
    Ok((member("apiVersion")?, member("kind")?))
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before[before.rfind('\n').map_or(0, |i| i + 1)..]
        .chars()
        .count()
        + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_opens_into_its_items_and_a_typed_list_names_their_kind() {
        let text = "apiVersion: memcached.c5c3.io/v1beta1\nkind: MemcachedList\nitems:\n- metadata: {name: a}\n- metadata: {name: b}\n";
        let objects = objects("f.yaml", text).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[1].origin.item, Some(2));
        assert_eq!(objects[1].value["kind"], "Memcached");
        assert_eq!(objects[1].value["apiVersion"], "memcached.c5c3.io/v1beta1");
    }

    #[test]
    fn a_json_stream_has_documents_with_their_lines() {
        let text = "{\"apiVersion\": \"v1\", \"kind\": \"A\", \"n\": 1.0}\n\n  {\"apiVersion\": \"v1\", \"kind\": \"B\"}";
        let objects = objects("f.json", text).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0].value["n"], json!(1));
        assert_eq!(objects[1].origin.at.0, 3);
        let err = objects_err("f.json", "{\"a\": 1,\n  \"b\" 2}");
        assert_eq!(err.at, Some((2, 7)), "{err}");
        assert_eq!(err.message, "not valid JSON: expected `:`", "{err}");
    }

    /// Found by the `check` fuzz target: serde_json reports an error on a newline inside a
    /// string at column 0 of the next line, which is no 1-based position.
    #[test]
    fn a_newline_inside_a_json_string_is_reported_where_it_is() {
        let err = objects_err("f.json", "{\"kind\": \"A\",\n \"b\": \"x\n\"}");
        assert_eq!(err.at, Some((2, 9)), "{err}");
        assert!(err.message.contains("control character"), "{err}");
    }

    #[test]
    fn documents_without_a_type_are_unreadable_at_their_line() {
        let err = objects_err("f.yaml", "apiVersion: v1\nkind: A\n---\n\nfoo: 1\n");
        assert_eq!(
            err.to_string(),
            "f.yaml:5:1: document 2: apiVersion is missing"
        );
        let err = objects_err("f.yaml", "apiVersion: v1\nkind: 3\n");
        assert!(
            err.message
                .contains("kind: expected a string, found a number"),
            "{err}"
        );
        let err = objects_err("f.yaml", "- a\n");
        assert!(err.message.contains("found an array"), "{err}");
    }

    #[test]
    fn non_utf8_text_names_where_it_stops_being_text() {
        let err = read("f.yaml", b"a: 1\nb: \xff\n".to_vec()).unwrap_err();
        assert_eq!(err.at, Some((2, 4)));
    }

    fn objects_err(file: &str, text: &str) -> Unreadable {
        objects(file, text).expect_err("unreadable")
    }
}
