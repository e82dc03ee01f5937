use super::*;

fn with_root<R>(json: &str, f: impl FnOnce(Val<'_, '_>) -> R) -> R {
    let mut bytes = json.as_bytes().to_vec();
    let tape = simd_json::to_tape(&mut bytes).expect("test JSON is valid");
    f(Val::root(&tape))
}

#[test]
fn entries_skip_nested_values_and_keep_order() {
    let keys = with_root(
        r#"{"a":{"x":[1,{"y":2}]},"b":[[],[3]],"c":"s","d":null}"#,
        |v| {
            v.entries()
                .unwrap()
                .map(|(k, v)| (k.to_owned(), v.kind()))
                .collect::<Vec<_>>()
        },
    );
    let expected = [
        ("a", Kind::Object),
        ("b", Kind::Array),
        ("c", Kind::String),
        ("d", Kind::Null),
    ];
    assert_eq!(keys.len(), expected.len());
    for ((k, kind), (ek, ekind)) in keys.iter().zip(expected) {
        assert_eq!((k.as_str(), *kind), (ek, ekind));
    }
}

#[test]
fn get_takes_the_last_duplicate_like_go() {
    with_root(r#"{"n":1,"n":2}"#, |v| {
        assert_eq!(v.get("n").unwrap().as_integer(), Some(2))
    });
}

#[test]
fn escaped_strings_are_unescaped_in_place() {
    with_root(r#"{"s":"a\"b\u00e9\n"}"#, |v| {
        assert_eq!(v.get("s").unwrap().as_str(), Some("a\"bé\n"))
    });
}

#[test]
fn int32_names_the_field_and_the_problem() {
    with_root(r#"{"a":"3","b":3000000000,"c":3.5,"d":-2147483648}"#, |v| {
        let e = int32(v.get("a").unwrap(), "spec.replicas").unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.replicas: expected an integer, found a string"
        );
        let e = int32(v.get("b").unwrap(), "spec.replicas").unwrap_err();
        assert_eq!(
            e.to_string(),
            "spec.replicas: expected a 32-bit integer, found 3000000000"
        );
        let e = int32(v.get("c").unwrap(), "x").unwrap_err();
        assert_eq!(e.found, "a number with a fraction or exponent");
        assert_eq!(int32(v.get("d").unwrap(), "x"), Ok(i32::MIN));
    });
}

#[test]
fn items_walk_arrays_of_containers() {
    let n = with_root(r#"[{"a":[1,2]},[],3,"x"]"#, |v| v.items().unwrap().count());
    assert_eq!(n, 4);
}

#[test]
fn write_str_escapes_quotes_backslashes_and_controls() {
    let mut out = Vec::new();
    write_str(&mut out, "a\"b\\c\u{1}\té");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "\"a\\\"b\\\\c\\u0001\\té\""
    );
}

#[test]
fn write_str_matches_serde_json_for_every_ascii_byte_anywhere() {
    // The fast path (nothing to escape) and the escaping path must agree with a reference
    // writer, at every position of a string long enough for the vectorised pass.
    for b in 0u8..0x80 {
        for at in [0, 1, 15, 16, 31, 32, 40] {
            let mut s = "x".repeat(41);
            s.replace_range(at..at + 1, &char::from(b).to_string());
            let mut out = b"prefix".to_vec();
            write_str(&mut out, &s);
            let written = std::str::from_utf8(&out[6..]).unwrap();
            let back: String = serde_json::from_str(written).unwrap();
            assert_eq!(back, s, "byte {b:#x} at {at}");
            let escaped = written.len() > s.len() + 2;
            assert_eq!(escaped, b < 0x20 || b == b'"' || b == b'\\', "byte {b:#x}");
        }
    }
    let mut out = Vec::new();
    write_str(&mut out, "");
    assert_eq!(out, b"\"\"");
}

#[test]
fn at_path_follows_members_and_indexes() {
    let doc = r#"{"spec":{"a":{"m":[{"t":"x"},{"t":"y","n":null}]}}}"#;
    with_root(doc, |v| {
        let t = at_path(v, "spec.a.m[1].t").unwrap();
        assert_eq!(t.as_str(), Some("y"));
        assert!(
            at_path(v, "spec.a.m[1].n").is_none(),
            "null reads as absent"
        );
        assert!(at_path(v, "spec.a.m[2].t").is_none());
        assert!(at_path(v, "spec.a.m[x]").is_none());
        assert!(at_path(v, "spec.b").is_none());
        assert_eq!(at_path(v, "spec.a.m").unwrap().len(), 2);
    });
}

#[test]
fn same_ignores_member_order_but_not_values() {
    let doc = r#"{"a":{"x":1,"y":[1,"s"]},"b":{"y":[1,"s"],"x":1},"c":{"x":1,"y":[1,"t"]},
                  "d":{"x":1},"e":1.0,"f":1,"g":true,"h":null}"#;
    with_root(doc, |v| {
        let g = |k| v.get(k).unwrap();
        assert!(same(g("a"), g("b")));
        assert!(!same(g("a"), g("c")));
        assert!(!same(g("a"), g("d")));
        assert!(!same(g("e"), g("f")), "1.0 and 1 are written differently");
        assert!(same(g("g"), g("g")));
        assert!(!same(g("g"), g("h")));
    });
}
