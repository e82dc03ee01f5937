use serde_json::{Value, json};

use super::*;

/// The value of `v:` in a one-line document.
fn value(text: &str) -> Value {
    one(&format!("v: {text}\n"))["v"].clone()
}

fn one(text: &str) -> Value {
    let mut docs = documents(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    assert_eq!(docs.len(), 1, "{text:?}");
    docs.remove(0).value
}

fn error(text: &str) -> Error {
    documents(text).expect_err(text)
}

#[test]
fn quantities_and_words_stay_strings() {
    for text in [
        "1m",
        "64Mi",
        "1:20",
        "memcached:1.6",
        "yesterday",
        "0x",
        "1e",
        "1_m",
        "--",
    ] {
        assert_eq!(value(text), json!(text), "{text}");
    }
}

#[test]
fn yaml_1_1_booleans_and_nulls() {
    for text in [
        "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE",
    ] {
        assert_eq!(value(text), json!(true), "{text}");
    }
    for text in [
        "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE",
    ] {
        assert_eq!(value(text), json!(false), "{text}");
    }
    for text in ["~", "null", "Null", "NULL", ""] {
        assert_eq!(value(text), Value::Null, "{text:?}");
    }
    // Not in go-yaml v2's table: strings.
    for text in ["yES", "oN", "nULL", "TRue"] {
        assert_eq!(value(text), json!(text), "{text}");
    }
}

#[test]
fn quoted_and_block_scalars_are_strings() {
    assert_eq!(value("'yes'"), json!("yes"));
    assert_eq!(value("\"on\""), json!("on"));
    assert_eq!(value("\"0755\""), json!("0755"));
    assert_eq!(value("'1e3'"), json!("1e3"));
    assert_eq!(one("v: |\n  no\n")["v"], json!("no\n"));
    assert_eq!(one("v: >-\n  12\n")["v"], json!("12"));
}

#[test]
fn integers_in_every_base_go_accepts() {
    let cases: &[(&str, Value)] = &[
        ("0755", json!(493)),
        ("-0755", json!(-493)),
        ("0o17", json!(15)),
        ("0x1F", json!(31)),
        ("0X1f", json!(31)),
        ("+0x10", json!(16)),
        ("0b101", json!(5)),
        ("-0b11", json!(-3)),
        ("1_000", json!(1000)),
        ("+12", json!(12)),
        ("0", json!(0)),
        ("-0", json!(0)),
        ("9223372036854775807", json!(i64::MAX)),
        ("-9223372036854775808", json!(i64::MIN)),
        // Past int64: ParseUint.
        ("9223372036854775808", json!(9_223_372_036_854_775_808u64)),
        ("18446744073709551615", json!(u64::MAX)),
    ];
    for (text, want) in cases {
        assert_eq!(&value(text), want, "{text}");
    }
}

#[test]
fn floats_as_go_prints_them_and_the_apiserver_reads_them() {
    // Whole floats reach the webhook as integers: Go prints float64(1000) as "1000".
    assert_eq!(value("1e3"), json!(1000));
    assert_eq!(value("1.0"), json!(1));
    assert_eq!(value("-0.0"), json!(0));
    // Not valid octal, so ParseInt fails; the float rule reads it in decimal.
    assert_eq!(value("08"), json!(8));
    assert_eq!(value("1.5"), json!(1.5));
    assert_eq!(value(".5"), json!(0.5));
    assert_eq!(value("+.5"), json!(0.5));
    assert_eq!(value("5."), json!(5));
    assert_eq!(value("1e-3"), json!(0.001));
    // Past uint64 and past int64 float range.
    assert_eq!(
        value("18446744073709551616"),
        json!(18446744073709551616f64)
    );
    assert_eq!(value("1e300"), json!(1e300));
    // ParseFloat fails out of range: the text stays a string.
    assert_eq!(value("1e400"), json!("1e400"));
    // Not go-yaml's float syntax, though Rust would parse them.
    assert_eq!(value("inf"), json!("inf"));
    assert_eq!(value("1e+"), json!("1e+"));
}

#[test]
fn infinity_and_nan_cannot_become_json() {
    for text in [".inf", "-.Inf", "+.INF", ".nan", ".NaN"] {
        let e = error(&format!("a: 1\nv: {text}\n"));
        assert_eq!((e.line, e.column), (2, 4), "{text}");
        assert!(e.message.contains("unsupported value"), "{e}");
    }
}

#[test]
fn timestamps_stay_strings() {
    for text in [
        "2001-12-14",
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14 21:59:43.10 -5",
    ] {
        assert_eq!(value(text), json!(text), "{text}");
    }
}

#[test]
fn tags_decide_before_the_rules() {
    assert_eq!(value("!!str 123"), json!("123"));
    assert_eq!(value("!!str yes"), json!("yes"));
    assert_eq!(value("!!int \"12\""), json!(12));
    assert_eq!(value("!!bool 'on'"), json!(true));
    assert_eq!(value("!!float 1"), json!(1));
    assert_eq!(value("!!float 2.5"), json!(2.5));
    assert_eq!(value("!!null ''"), Value::Null);
    assert_eq!(value("!!timestamp 2001-12-14"), json!("2001-12-14"));
    assert_eq!(value("!custom 12"), json!("12"));
    assert_eq!(value("!!binary aGVsbG8="), json!("hello"));
    let e = error("v: !!int abc\n");
    assert!(e.message.contains("cannot decode `abc` as a !!int"), "{e}");
    let e = error("v: !!binary '%%%'\n");
    assert!(e.message.contains("base64"), "{e}");
}

#[test]
fn keys_become_strings_as_sigs_k8s_io_yaml_makes_them() {
    assert_eq!(
        one("1: a\nyes: b\n1.5: c\n0x10: d\n'on': e\n"),
        json!({"1": "a", "true": "b", "1.5": "c", "16": "d", "on": "e"})
    );
    assert_eq!(
        one("1e6: a\n0.00001: b\n123456.0: c\n0.1: d\n-2.5e-7: e\n"),
        json!({"1e+06": "a", "1e-05": "b", "123456": "c", "0.1": "d", "-2.5e-07": "e"})
    );
    let e = error("a: 1\n~: b\n");
    assert_eq!((e.line, e.column), (2, 1));
    assert!(e.message.contains("unsupported map key"), "{e}");
    let e = error("? [a]\n: b\n");
    assert!(e.message.contains("must be a scalar"), "{e}");
}

#[test]
fn anchors_aliases_and_merge_keys() {
    let text = "\
base: &base {cpu: 1, memory: 2}
extra: &extra {memory: 3, disk: 4}
list: [*base, *base]
merged:
  <<: *base
  cpu: 9
several:
  <<: [*base, *extra]
after:
  memory: 0
  <<: *base
literal:
  '<<': x
";
    assert_eq!(
        one(text),
        json!({
            "base": {"cpu": 1, "memory": 2},
            "extra": {"memory": 3, "disk": 4},
            "list": [{"cpu": 1, "memory": 2}, {"cpu": 1, "memory": 2}],
            "merged": {"cpu": 9, "memory": 2},
            // Earlier mappings in a merge list win.
            "several": {"cpu": 1, "memory": 2, "disk": 4},
            // go-yaml v2 merges in place: keys merged in overwrite the ones before them.
            "after": {"cpu": 1, "memory": 2},
            "literal": {"<<": "x"},
        })
    );
    let e = error("a: &a [1]\nb:\n  <<: *a\n");
    assert!(e.message.contains("map merge requires"), "{e}");
}

#[test]
fn alias_bombs_and_deep_nesting_are_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            [prev.as_str(); 10].join(", ")
        ));
    }
    let e = error(&text);
    assert!(e.message.contains("aliases expand to more than"), "{e}");
    // Flow nesting stops at the parser's own limit; block nesting at ours.
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    let e = error(&deep);
    assert!(e.message.contains("recursion limit"), "{e}");
    let deep: String = (0..=MAX_DEPTH)
        .map(|i| format!("{}a:\n", " ".repeat(i)))
        .collect();
    let e = error(&deep);
    assert!(
        e.message.contains("nested deeper") || e.message.contains("recursion limit"),
        "{e}"
    );
}

#[test]
fn documents_of_a_stream_with_their_lines() {
    let docs = documents("a: 1\n---\n# comment\nb: 2\n---\n---\n- 3\n").unwrap();
    let lines: Vec<_> = docs.iter().map(|d| (d.line, d.value.clone())).collect();
    assert_eq!(lines[0], (1, json!({"a": 1})));
    assert_eq!(lines[1], (4, json!({"b": 2})));
    assert_eq!(
        lines[2].1,
        Value::Null,
        "an empty document is null: {lines:?}"
    );
    assert_eq!(lines[3], (7, json!([3])));
}

#[test]
fn malformed_yaml_names_line_and_column() {
    let e = error("a: 1\nb: [1, 2\nc: 3\n");
    assert!(e.line >= 2, "{e}");
    assert!(e.message.starts_with("not valid YAML"), "{e}");
    let e = error("a:\n  b: 1\n c: 2\n");
    assert_eq!(e.line, 3, "{e}");
}

/// Found by the `check` fuzz target: a float key beyond float32's range panicked while being
/// named the way go-yaml names it (`strconv.FormatFloat(f, 'g', -1, 32)`).
#[test]
fn a_float_key_outside_float32_is_named_as_go_names_it() {
    let big = "444444444444444444444444444444444444444444444.3";
    let text = format!("{big}: a\n-{big}: b\n");
    assert_eq!(one(&text), json!({"+Inf": "a", "-Inf": "b"}));
}

#[test]
fn positions_name_each_node_and_merged_ones_point_at_their_parent() {
    let text = "# c\nbase: &b\n  threads: 4\nspec:\n  <<: *b\n  replicas: three\n  args: [a, 'b']\n---\nx: {k: 1}\n";
    let docs = documents(text).unwrap();
    let p = &docs[0].positions;
    assert_eq!(p.find("", "spec.replicas"), Some((6, 13)));
    assert_eq!(p.find("", "spec.args[1]"), Some((7, 13)));
    assert_eq!(p.find("", "spec.args"), Some((7, 3)), "a sequence: its key");
    // Merged from the anchor: not where the merge put it, so the parent's key.
    assert_eq!(p.find("", "spec.threads"), Some((4, 1)));
    assert_eq!(p.find("", "base.threads"), Some((3, 12)));
    assert_eq!(p.find("", "nothing.here"), Some((2, 1)), "the document");
    assert_eq!(
        docs[1].positions.find("", "x.k"),
        Some((9, 8)),
        "{:?}",
        docs[1].positions
    );
}
