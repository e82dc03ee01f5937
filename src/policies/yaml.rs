//! The policies as YAML: a JSON value written in block style, strings double-quoted as JSON
//! (a JSON string is a valid YAML double-quoted scalar) and CEL with line breaks as `|-` blocks,
//! so the committed manifests read like hand-written ones and diff line by line.

use serde_json::Value;

/// `value` (an object) as one YAML document, without the `---` separator.
pub fn document(value: &Value) -> String {
    let mut out = String::new();
    write_members(&mut out, value, 0);
    out
}

fn write_members(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) => {
            for (key, member) in map {
                pad(out, indent);
                out.push_str(&key_text(key));
                out.push(':');
                write_nested(out, member, indent);
            }
        }
        Value::Array(items) => {
            for item in items {
                pad(out, indent);
                out.push('-');
                match item {
                    Value::Object(map) if !map.is_empty() => {
                        // The first member goes on the dash's line, the rest under it.
                        let mut inner = String::new();
                        write_members(&mut inner, item, indent + 2);
                        out.push(' ');
                        out.push_str(inner.trim_start());
                    }
                    _ => write_nested(out, item, indent),
                }
            }
        }
        scalar => {
            pad(out, indent);
            out.push_str(&scalar_text(scalar, indent));
            out.push('\n');
        }
    }
}

/// What follows `key:` or `-`: a scalar on the same line, or a nested block.
fn write_nested(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push('\n');
            write_members(out, value, indent + 2);
        }
        Value::Array(items) if !items.is_empty() => {
            out.push('\n');
            write_members(out, value, indent + 2);
        }
        Value::Object(_) => out.push_str(" {}\n"),
        Value::Array(_) => out.push_str(" []\n"),
        scalar => {
            out.push(' ');
            out.push_str(&scalar_text(scalar, indent + 2));
            out.push('\n');
        }
    }
}

fn scalar_text(value: &Value, indent: usize) -> String {
    match value {
        Value::String(s) if is_block(s) => {
            let mut text = String::from("|-");
            for line in s.lines() {
                text.push('\n');
                if !line.is_empty() {
                    text.push_str(&" ".repeat(indent));
                    text.push_str(line);
                }
            }
            text
        }
        // Plain where YAML reads it back as the same string, quoted otherwise.
        Value::String(s) if is_plain(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A `|-` block keeps the text exactly when no line has trailing blanks, the first line does
/// not start with a blank (the indentation would be read from it) and there is no final newline.
fn is_block(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && !s.ends_with('\n')
        && s.lines().all(|l| !l.ends_with([' ', '\t']))
        && !s.contains(['\r', '\t'])
}

/// Words like `Memcached`, `memcached.c5c3.io`, `v1beta1` or `CREATE` that YAML 1.1 and 1.2
/// both read as strings.
fn is_plain(s: &str) -> bool {
    let reserved = [
        "true", "false", "yes", "no", "on", "off", "null", "y", "n", "~",
    ];
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'/'))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && !reserved.contains(&s.to_ascii_lowercase().as_str())
}

fn key_text(key: &str) -> String {
    if is_plain(key) {
        key.to_owned()
    } else {
        Value::String(key.to_owned()).to_string()
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_block_style_and_reads_back_the_same() {
        let value = json!({
            "apiVersion": "v1",
            "list": [{"a": 1, "b": "two words"}, "on", 3, [], {}],
            "cel": "a &&\n  b",
            "empty": {},
            "null": null,
            "quoted key": true,
        });
        let text = document(&value);
        assert_eq!(
            text,
            "apiVersion: v1\ncel: |-\n  a &&\n    b\nempty: {}\nlist:\n  - a: 1\n    b: \"two words\"\n  - \"on\"\n  - 3\n  - []\n  - {}\n\"null\": null\n\"quoted key\": true\n"
        );
    }
}
