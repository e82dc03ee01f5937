//! YAML out, the one writer: objects printed as YAML that go-yaml v2 reads back to the same JSON.
//! It writes the `check` report's defaulted objects and the committed `policies` manifests, so
//! its output is meant to read like hand-written YAML: block style, strings plain where the
//! YAML 1.1 rules read them back as the same string, text with line breaks (the policies' CEL)
//! as `|-` blocks that diff line by line.

use serde_json::{Map, Value};

use super::scalar::{Scalar, resolve_plain};

/// Writes `value` as a YAML document that go-yaml v2 reads back to the same JSON: a string is
/// written plain only when the YAML 1.1 rules read it back as that same string.
pub fn write(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) if !map.is_empty() => write_map(out, map, 0),
        Value::Array(items) if !items.is_empty() => write_seq(out, items, 0),
        scalar => {
            write_scalar(out, scalar, None);
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
            write_scalar(out, scalar, Some(indent + 2));
            out.push('\n');
        }
    }
}

/// A scalar; a string with line breaks as a `|-` block with its lines at `block_indent`, when
/// there is one (a value under a key or a dash) and the block keeps the text exactly.
fn write_scalar(out: &mut String, value: &Value, block_indent: Option<usize>) {
    match value {
        Value::String(s) if let Some(indent) = block_indent.filter(|_| is_block(s)) => {
            out.push_str("|-");
            for line in s.split('\n') {
                out.push('\n');
                if !line.is_empty() {
                    out.extend(std::iter::repeat_n(' ', indent));
                    out.push_str(line);
                }
            }
        }
        Value::String(s) => write_string(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
        other => out.push_str(&other.to_string()),
    }
}

/// A `|-` block keeps the text exactly when it has a line break, the first line does not start
/// with a blank or a line break (the indentation is read from it), no line ends in a blank, there
/// is no final line break (`-` strips it), and every character is printable and no line break
/// YAML 1.1 counts besides `\n` (NEL, LS, PS).
fn is_block(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && !s.ends_with('\n')
        && s.split('\n').all(|l| !l.ends_with(' '))
        && s.chars().all(|c| {
            c == '\n'
                || !(c.is_control()
                    || matches!(
                        c,
                        '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                    ))
        })
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
mod tests {
    use serde_json::{Value, json};

    use super::write;
    use crate::yaml::documents;

    /// `text` read back: one document's value.
    fn one(text: &str) -> Value {
        let mut docs = documents(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        assert_eq!(docs.len(), 1, "{text:?}");
        docs.remove(0).value
    }

    #[test]
    fn written_yaml_reads_back_the_same() {
        let tricky = [
            "yes",
            "no",
            "on",
            "Off",
            "y",
            "N",
            "~",
            "null",
            "",
            " ",
            "0755",
            "0x1F",
            "0b101",
            "1_000",
            "1e3",
            ".5",
            "1.0",
            "08",
            "-",
            "-x",
            "a: b",
            "a #b",
            "#c",
            "&x",
            "*x",
            "!t",
            "[1]",
            "{}",
            "'q'",
            "\"d\"",
            "multi\nline",
            "a\n#b",
            "a\n  b",
            "- a\nb",
            "a\n\nb",
            "a: b\nc: d",
            "x\n---\ny",
            "x\n...\ny",
            "é\nü",
            "\u{a0}a\nb",
            "a\n\u{2028}b",
            "a\r\nb",
            "|\n>",
            "tab\t",
            "é",
            "\u{0}",
            "2001-12-14",
            "<<",
            "?",
            "|",
            ">",
            "%x",
            "@x",
            "`x",
            "1m",
            "memcached:1.6",
            "app.kubernetes.io/name",
        ];
        let mut object = serde_json::Map::new();
        for (i, s) in tricky.iter().enumerate() {
            object.insert(s.to_string(), json!(s));
            object.insert(format!("k{i}"), json!([s, {s.to_string(): s}]));
        }
        object.insert(
            "numbers".into(),
            json!([
                0,
                -1,
                1.5,
                1e300,
                -2.5e-7,
                u64::MAX,
                i64::MIN,
                true,
                false,
                null
            ]),
        );
        object.insert(
            "empty".into(),
            json!({"map": {}, "list": [], "nested": [[], [{}], [[1, 2]]]}),
        );
        let object = Value::Object(object);
        let mut text = String::new();
        write(&mut text, &object);
        assert_eq!(one(&text), object, "written:\n{text}");
        // Plain where plain is safe, so the output reads like hand-written YAML.
        assert!(
            text.contains("app.kubernetes.io/name: app.kubernetes.io/name\n"),
            "{text}"
        );
        assert!(text.contains("\"yes\": \"yes\"\n"), "{text}");
    }

    /// The policies' manifests: block style, CEL with line breaks as `|-` blocks.
    #[test]
    fn writes_block_style_and_reads_back_the_same() {
        let value = json!({
            "apiVersion": "v1",
            "list": [{"a": 1, "b": "two words"}, "on", 3, [], {}, "x\ny"],
            "cel": "a &&\n  b",
            "empty": {},
            "null": null,
            "quoted key": true,
            "not a block": ["a\n", " a\nb", "a \nb", "a\u{85}\nb", "a\tb\nc"],
        });
        let mut text = String::new();
        write(&mut text, &value);
        assert_eq!(
            text,
            "apiVersion: v1\ncel: |-\n  a &&\n    b\nempty: {}\nlist:\n  - a: 1\n    b: \"two words\"\n  - \"on\"\n  - 3\n  - []\n  - {}\n  - |-\n    x\n    y\n\"not a block\":\n  - \"a\\n\"\n  - \" a\\nb\"\n  - \"a \\nb\"\n  - \"a\u{85}\\nb\"\n  - \"a\\tb\\nc\"\n\"null\": null\n\"quoted key\": true\n"
        );
        assert_eq!(one(&text), value, "written:\n{text}");
    }

    /// Found by the `check` fuzz target: a key past YAML's 1024-character limit for implicit keys
    /// was written as `key: value`, which no YAML parser reads back.
    #[test]
    fn a_long_key_is_written_so_that_it_reads_back() {
        for len in [1020, 1021, 1022, 1023, 1024, 1025, 3000] {
            for key in ["k".repeat(len), format!("a b{}", "\u{1b}".repeat(len))] {
                let object = json!({
                    "kind": "A",
                    "metadata": {key.as_str(): 1, "name": "x"},
                    "items": [{key.as_str(): {"nested": [key.as_str()]}, "other": 2}],
                });
                let mut text = String::new();
                write(&mut text, &object);
                assert_eq!(
                    one(&text),
                    object,
                    "key of {len} characters, written:\n{text}"
                );
            }
        }
    }
}
