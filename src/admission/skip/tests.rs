use serde_json::Value;
use simd_json::Node;

use super::Stack;
use super::read::{Read, read_portable};
use super::*;

/// simd-json's tape of `text`, owned, with the value of every member [`skipped`] that is an
/// object or an array emptied: what the reader must write.
fn parsed_blanked(text: &str) -> Vec<Node<'static>> {
    let mut bytes = text.as_bytes().to_vec();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mut out = Vec::new();
    blank(&tape.0, 0, Some(&[]), &mut out);
    out
}

/// Copies the value at `at` onto `out`, emptying skipped members below it; `path` is where it
/// stands, `None` inside an array. Returns the index after it.
fn blank(
    nodes: &[Node<'_>],
    at: usize,
    path: Option<&[&str]>,
    out: &mut Vec<Node<'static>>,
) -> usize {
    let owned = |node: &Node<'_>| match *node {
        Node::String(s) => Node::String(String::leak(s.to_string())),
        Node::Object { len, count } => Node::Object { len, count },
        Node::Array { len, count } => Node::Array { len, count },
        Node::Static(s) => Node::Static(s),
    };
    let head = out.len();
    out.push(owned(&nodes[at]));
    let mut next = at + 1;
    match nodes[at] {
        Node::Object { len, .. } => {
            for _ in 0..len {
                let Node::String(key) = nodes[next] else {
                    unreachable!("a key")
                };
                out.push(owned(&nodes[next]));
                let below: Option<Vec<&str>> = path.map(|p| [p, &[key]].concat());
                let skipped = below.as_deref().is_some_and(skipped);
                next = match nodes[next + 1] {
                    Node::Object { count, .. } if skipped => {
                        out.push(Node::Object { len: 0, count: 0 });
                        next + 2 + count
                    }
                    Node::Array { count, .. } if skipped => {
                        out.push(Node::Array { len: 0, count: 0 });
                        next + 2 + count
                    }
                    _ => blank(nodes, next + 1, below.as_deref(), out),
                };
            }
        }
        Node::Array { len, .. } => {
            for _ in 0..len {
                next = blank(nodes, next, None, out);
            }
        }
        _ => return next,
    }
    let count = out.len() - head - 1;
    out[head] = match nodes[at] {
        Node::Object { len, .. } => Node::Object { len, count },
        Node::Array { len, .. } => Node::Array { len, count },
        _ => unreachable!("a container"),
    };
    next
}

/// Reads `text`, and checks the tape is simd-json's of the text with the members [`skipped`]
/// emptied.
fn read_as_simd_json(text: &str) -> Read {
    let mut nodes = Vec::new();
    let read = read(text.as_bytes(), &mut nodes, &mut Stack::default())
        .unwrap_or_else(|| panic!("declined {text}"));
    assert_eq!(nodes, parsed_blanked(text), "{text}");
    let mut portable = Vec::new();
    assert_eq!(
        read_portable(text.as_bytes(), &mut portable, &mut Stack::default()),
        Some(read.clone())
    );
    assert_eq!(portable, nodes, "without AVX2: {text}");
    read
}

#[test]
fn the_tape_is_simd_json_s_of_the_review_with_every_skipped_member_emptied() {
    let text = r#"{"request":{"uid":"u","object":{"metadata":{"name":"a","labels":{"x":"y"},
        "annotations" : {"k":"{\"annotations\":{}}"},"managedFields":[{"f:x":{}}],
        "ownerReferences":[{"uid":"o"}],"finalizers":["f"],"generation":-3},"spec":{"replicas":1,
        "a":[true,false,null,0,[],{}],"é":"ü"},
        "status":{"readyReplicas":1}},
        "oldObject":{"metadata":{"managedFields" : [ {"manager":"k"} ],"name":"a"}},
        "userInfo":{"username":"u","groups":["g"]},"options":{"kind":"CreateOptions"},
        "kind":{"group":"g","kind":"Memcached"},"resource":{"group":"g"},
        "requestKind":{"kind":"k"},"requestResource":{"resource":"r"}}}"#;
    let read = read_as_simd_json(text);
    let range = read.old_object.expect("oldObject skipped");
    assert_eq!(
        &text[range],
        r#"{"metadata":{"managedFields" : [ {"manager":"k"} ],"name":"a"}}"#
    );
}

#[test]
fn every_fixture_is_read_as_simd_json_reads_it_blanked() {
    let (mut read, mut total) = (0, 0);
    for dir in ["tests/fixtures", "benches/fixtures"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "json")
                || serde_json::from_str::<Value>(&text).is_err()
            {
                continue;
            }
            total += 1;
            if super::read(text.as_bytes(), &mut Vec::new(), &mut Stack::default()).is_some() {
                read_as_simd_json(&text);
                read += 1;
            }
        }
    }
    // None holds anything the reader declines outside what it skips: each would be parsed
    // whole, at twice the cost.
    assert!(total >= 10, "the fixtures are missing");
    assert_eq!(read, total, "fixtures declined");
}

#[test]
fn a_skipped_name_at_another_path_is_read() {
    let text = r#"{"request":{"object":{"metadata":{"annotations":{"a":"b"}},
        "spec":{"service":{"annotations":{"c":"d"}},"x":"\"labels\":{}","m":{"labels":{"e":"f"}},
        "managedFields":[1],"status":{"a":1}}},"x":{"y":{"labels":{"a":"b"}}}},
        "oldObject":{"a":1}}"#;
    let mut nodes = Vec::new();
    // (The escaped quotes in "x" make the reader decline; without them it reads every one.)
    assert!(read(text.as_bytes(), &mut nodes, &mut Stack::default()).is_none());
    let text = text.replace(r#""\"labels\":{}""#, r#""labels""#);
    let read = read_as_simd_json(&text);
    assert_eq!(
        read.old_object, None,
        "oldObject at the root is not skipped"
    );
}

#[test]
fn members_holding_no_object_or_array_are_read() {
    for text in [
        r#"{"request":{"object":{"metadata":{"managedFields":null,"labels":"x"}}}}"#,
        r#"{"request":{"oldObject":"x","object":{}}}"#,
        r#"{"request":{"oldObject":null,"userInfo":1}}"#,
    ] {
        assert_eq!(read_as_simd_json(text).old_object, None, "{text}");
    }
}

#[test]
fn only_the_old_object_the_envelope_reads_is_skipped() {
    // The envelope reads the last `oldObject` that is not null, of the last `request`.
    for (text, old) in [
        (
            r#"{"request":{"oldObject":{"a":1},"oldObject":null}}"#,
            Some(r#"{"a":1}"#),
        ),
        (r#"{"request":{"oldObject":[1]}}"#, Some("[1]")),
        (
            r#"{"request":{"oldObject":"x","oldObject":{"b":2}}}"#,
            Some(r#"{"b":2}"#),
        ),
    ] {
        let read = read_as_simd_json(text);
        assert_eq!(read.old_object.map(|r| &text[r]), old, "{text}");
    }
    for text in [
        r#"{"request":{"oldObject":{"a":1},"oldObject":{"b":2}}}"#,
        r#"{"request":{"oldObject":{"a":1},"oldObject":"x"}}"#,
        r#"{"request":{"oldObject":{"a":1}},"request":{"uid":"u"}}"#,
    ] {
        assert!(
            read(text.as_bytes(), &mut Vec::new(), &mut Stack::default()).is_none(),
            "{text}"
        );
    }
}

#[test]
fn what_the_reader_does_not_read_exactly_is_declined() {
    for text in [
        r#"{"a":"\n"}"#,
        r#"{"a\u0041":1}"#,
        "{\"a\":\"\t\"}",
        r#"{"a":1.5}"#,
        r#"{"a":1e3}"#,
        r#"{"a":-0}"#,
        r#"{"a":1234567890123456789}"#,
        r#"{"a":01}"#,
        r#"{"a":tru}"#,
        r#"{"a":truex}"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"{"a":1]"#,
        r#"[1}"#,
        r#"{"a":1} x"#,
        r#"{"a":1"#,
        r#"{"a":"b"#,
        "",
        "{\"a\":\"\u{7f}\u{0}\"}",
        r#"{"request":{"oldObject":{"a":["#,
    ] {
        assert!(
            read(text.as_bytes(), &mut Vec::new(), &mut Stack::default()).is_none(),
            "{text:?}"
        );
        assert!(
            read_portable(text.as_bytes(), &mut Vec::new(), &mut Stack::default()).is_none(),
            "{text:?}"
        );
    }
    assert!(read(b"{\"a\":\"\xff\"}", &mut Vec::new(), &mut Stack::default()).is_none());
    assert!(
        read(
            b"{\"request\":{\"oldObject\":{\"a\":\"\xff\"}}}",
            &mut Vec::new(),
            &mut Stack::default()
        )
        .is_none()
    );
    let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
    assert!(read(deep.as_bytes(), &mut Vec::new(), &mut Stack::default()).is_none());
    let fine = format!("{}{}", "[".repeat(64), "]".repeat(64));
    read_as_simd_json(&fine);
}

#[test]
fn scalars_and_whitespace_read_as_simd_json_reads_them() {
    for text in [
        " { \"a\" : [ 1 , -2 , 0 , 999999999999999999 , -999999999999999999 ] } \n",
        "\t[\r\n]",
        "\"x\"",
        "17",
        "null",
        r#"{"é":"ü","a":"b"}"#,
        r#"{"a":{"b":{"c":[[],[{}],{"d":true}]}}}"#,
    ] {
        read_as_simd_json(text);
    }
}

#[test]
fn the_steps_built_at_compile_time_follow_every_skipped_path_and_read_section() {
    for (index, path) in SKIPPED.iter().enumerate() {
        let mut node = 0;
        for (depth, name) in path.iter().enumerate() {
            let step = STEPS[node]
                .find(name)
                .unwrap_or_else(|| panic!("{path:?}: no step {name}"));
            assert_eq!(step.name, *name);
            if depth + 1 == path.len() {
                assert_eq!(step.last, Some(index), "{path:?}");
            } else {
                node = usize::from(step.next.expect("the path goes on"));
            }
        }
    }
    let walk = |path: &[&str]| {
        path.iter().fold(0, |node, name| {
            let step = STEPS[node]
                .find(name)
                .unwrap_or_else(|| panic!("{path:?}: no step {name}"));
            usize::from(step.next.expect("the path goes on"))
        })
    };
    let object = walk(&OBJECT);
    for (section, names) in crate::memcached::READ {
        let node = section.iter().fold(object, |node, name| {
            usize::from(
                STEPS[node]
                    .find(name)
                    .and_then(|s| s.next)
                    .expect("a step on"),
            )
        });
        assert!(STEPS[node].only_steps, "{section:?}");
        assert_eq!(STEPS[node].len, names.len(), "{section:?}");
        for name in names {
            let step = STEPS[node]
                .find(name)
                .unwrap_or_else(|| panic!("{section:?}: no {name}"));
            assert_eq!(step.last, None, "{section:?}.{name} is read");
        }
    }
    assert!(!STEPS[object].only_steps && !STEPS[0].only_steps);
    let long = "k".repeat(70);
    for steps in &STEPS {
        for key in [
            "",
            "spe",
            "uid",
            "requestkind",
            "oldObjec",
            "oldObjectt",
            // A step's slot (its length and last byte), another name.
            "rasource",
            "oldXbject",
            "sta_us",
            "requestRes0urce",
            "ownerRef3rences",
            "opti0ns",
            "reqXest",
            &long,
        ] {
            assert!(steps.find(key).is_none(), "{key}");
        }
    }
}

#[test]
fn the_tape_stays_within_what_the_budget_charges_a_whole_parse() {
    // The server charges a large body `parse_cost` (simd-json's tape, a node for each structural
    // character, and its buffers) and then reads it with this reader (`server/body.rs`): its
    // tape, grown by doubling, must fit in that. Dense small values are the worst case.
    let mut texts: Vec<String> = vec![
        format!("[{}0]", "0,".repeat(70_000)),
        format!("[{}[]]", "{},".repeat(40_000)),
        format!(
            "{{{}\"z\":1}}",
            (0..30_000)
                .map(|i| format!("\"{i}\":\"\","))
                .collect::<String>()
        ),
        format!("{}{}", "[".repeat(64), "]".repeat(64)),
    ];
    for dir in ["tests/fixtures", "benches/fixtures"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                texts.push(std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    for text in &texts {
        let mut nodes = Vec::new();
        if read(text.as_bytes(), &mut nodes, &mut Stack::default()).is_none() {
            continue;
        }
        let tape = nodes.capacity() * std::mem::size_of::<Node<'_>>();
        let charged = crate::server::budget::parse_cost(text.as_bytes());
        assert!(
            tape <= charged,
            "a tape of {tape} bytes, {charged} charged, for {} bytes",
            text.len()
        );
    }
}
