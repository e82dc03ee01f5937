//! YAML in: a manifest stream converted to JSON documents as kubectl converts it, anchors,
//! aliases and `<<` merge keys expanded, each node's position recorded for the report.

use std::collections::HashMap;
use std::fmt;

use saphyr_parser::{Event, Parser, ScanError, Span};
use serde_json::{Map, Value};

use super::position::{At, Positions};
use super::scalar::{Scalar, key_of_value, key_string, resolve, to_json};

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
    let mut reader = Reader {
        docs: Vec::new(),
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        start: None,
        positions: Positions::default(),
        walk: Walk {
            path: String::new(),
            merging: None,
        },
    };
    while let Some(event) = parser.next_event() {
        let (event, span) = event?;
        let value = match event {
            Event::DocumentStart(_) => {
                reader.anchors.clear();
                reader.start = None;
                reader.positions = Positions::default();
                None
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => None,
            Event::SequenceStart(anchor, _) => reader.open(true, anchor, span)?,
            Event::MappingStart(anchor, _) => reader.open(false, anchor, span)?,
            Event::SequenceEnd | Event::MappingEnd => reader.close(),
            Event::Alias(id) => reader.alias(id, span)?,
            Event::Scalar(text, style, anchor, tag) => {
                let scalar =
                    resolve(&text, style, tag.as_deref()).map_err(|m| Error::at(&span, m))?;
                reader.scalar(scalar, anchor, span)?
            }
        };
        if let Some(value) = value {
            reader.place(value, span)?;
        }
    }
    Ok(reader.docs)
}

/// The conversion's state between events: the documents so far, the open containers, the
/// anchors of this document and where its nodes are.
struct Reader {
    docs: Vec<Document>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    /// Nodes read or expanded from aliases, bounded by [`MAX_NODES`].
    nodes: usize,
    /// Where the current document's content starts.
    start: Option<Span>,
    positions: Positions,
    walk: Walk,
}

impl Reader {
    /// A sequence (`seq`) or mapping starts: nothing to place until it ends.
    fn open(&mut self, seq: bool, anchor: usize, span: Span) -> Result<Option<Value>, Error> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(Error::at(
                &span,
                format!("nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.start.get_or_insert(span);
        self.nodes += 1;
        let base = self
            .walk
            .enter(&self.stack, &mut self.positions, start_of(&span), true);
        self.stack.push(if seq {
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
        Ok(None)
    }

    /// A sequence or mapping ends: its value, to place in its parent.
    fn close(&mut self) -> Option<Value> {
        let (value, anchor) = match self.stack.pop()? {
            Frame::Seq { items, anchor, .. } => (Value::Array(items), anchor),
            Frame::Map { map, anchor, .. } => (Value::Object(map), anchor),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        Some(value)
    }

    /// An alias: the anchored value again (or, in key position, the key).
    fn alias(&mut self, id: usize, span: Span) -> Result<Option<Value>, Error> {
        self.start.get_or_insert(span);
        let Some(value) = self.anchors.get(&id) else {
            return Err(Error::at(
                &span,
                "an alias refers to an anchor that encloses it or is not defined",
            ));
        };
        self.nodes = self.nodes.saturating_add(count(value));
        if self.nodes > MAX_NODES {
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
        }) = self.stack.last_mut()
        {
            *key = Some(Some(key_of_value(value).map_err(|m| Error::at(&span, m))?));
            *key_at = Some(start_of(&span));
            return Ok(None);
        }
        let value = value.clone();
        self.walk
            .enter(&self.stack, &mut self.positions, start_of(&span), false);
        Ok(Some(value))
    }

    /// A scalar: a mapping's next key, or a value to place.
    fn scalar(
        &mut self,
        scalar: Scalar,
        anchor: usize,
        span: Span,
    ) -> Result<Option<Value>, Error> {
        self.start.get_or_insert(span);
        self.nodes += 1;
        if let Some(Frame::Map {
            key: key @ None,
            key_at,
            ..
        }) = self.stack.last_mut()
        {
            *key_at = Some(start_of(&span));
            let is_merge = scalar == Scalar::Merge;
            let name = key_string(scalar).map_err(|m| Error::at(&span, m))?;
            if anchor != 0 {
                self.anchors.insert(anchor, Value::String(name.clone()));
            }
            *key = Some((!is_merge).then_some(name));
            return Ok(None);
        }
        let value = to_json(scalar).map_err(|m| Error::at(&span, m))?;
        self.walk
            .enter(&self.stack, &mut self.positions, start_of(&span), false);
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        Ok(Some(value))
    }

    /// Puts a finished value where it belongs: a document of its own at the top, else the open
    /// sequence's next item or the open mapping's value for its key (or a `<<` merge).
    fn place(&mut self, value: Value, span: Span) -> Result<(), Error> {
        match self.stack.last_mut() {
            None => {
                let at = self.start.take().unwrap_or(span);
                self.docs.push(Document {
                    line: at.start.line(),
                    column: at.start.col() + 1,
                    value,
                    positions: std::mem::take(&mut self.positions),
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
        Ok(())
    }
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

#[cfg(test)]
mod tests;
