use super::*;

/// Compacts `text`, parses the result and verifies it: (anything removed, verified, compacted).
fn verify(text: &str) -> (bool, bool, String) {
    let mut out = Vec::new();
    let skipped = compact(text.as_bytes(), &mut out);
    if skipped.is_empty() {
        return (false, false, text.to_owned());
    }
    let compacted = String::from_utf8(out.clone()).unwrap();
    let len = out.len();
    out.resize(len + simd_json::INPUT_PADDING, b' ');
    let base = out.as_ptr() as usize;
    let mut buffers = simd_json::Buffers::new(len);
    let mut tape = simd_json::Tape::null();
    simd_json::fill_tape_padded(&mut out, len, &mut buffers, &mut tape).unwrap();
    let ok = skipped.verified(base, Val::root(&tape));
    (true, ok, compacted)
}

#[test]
fn every_skipped_member_is_removed_and_verified() {
    let text = r#"{"request":{"uid":"u","object":{"metadata":{"name":"a","labels":{"x":"y"},
        "annotations" : {"k":"{\"annotations\":{}}"},"managedFields":[{"f:x":{}}],
        "ownerReferences":[{"uid":"o"}],"finalizers":["f"]},"spec":{"replicas":1},
        "status":{"readyReplicas":1}},
        "oldObject":{"metadata":{"managedFields" : [ {"manager":"k"} ],"name":"a"}},
        "userInfo":{"username":"u","groups":["g"]},"options":{"kind":"CreateOptions"}}}"#;
    let (removed, ok, after) = verify(text);
    assert!(removed && ok, "{after}");
    let parsed: serde_json::Value = serde_json::from_str(&after).unwrap();
    let metadata = &parsed["request"]["object"]["metadata"];
    for key in [
        "labels",
        "annotations",
        "managedFields",
        "ownerReferences",
        "finalizers",
    ] {
        assert!(
            metadata[key].as_object().is_some_and(|o| o.is_empty())
                || metadata[key].as_array().is_some_and(|a| a.is_empty()),
            "{key}: {after}"
        );
    }
    assert_eq!(metadata["name"], "a");
    assert_eq!(parsed["request"]["object"]["spec"]["replicas"], 1);
    assert_eq!(parsed["request"]["object"]["status"], serde_json::json!({}));
    assert_eq!(parsed["request"]["oldObject"], serde_json::json!({}));
    assert_eq!(parsed["request"]["userInfo"], serde_json::json!({}));
    assert_eq!(parsed["request"]["options"], serde_json::json!({}));
    assert_eq!(parsed["request"]["uid"], "u");
}

#[test]
fn the_old_object_keeps_its_bytes_as_sent() {
    let text = r#"{"request":{"oldObject" : {"spec":{"a":[1,"]"]}},"object":{}}}"#;
    let mut out = Vec::new();
    let skipped = compact(text.as_bytes(), &mut out);
    let range = skipped.old_object().expect("oldObject removed");
    assert_eq!(&text[range], r#"{"spec":{"a":[1,"]"]}}"#);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"request":{"oldObject" : {},"object":{}}}"#
    );
}

#[test]
fn a_skipped_key_deeper_down_is_left_alone() {
    let text = r#"{"request":{"object":{"metadata":{"annotations":{"a":"b"}},
        "spec":{"service":{"annotations":{"c":"d"}},"x":"\"labels\":{}","m":{"labels":{"e":"f"}}}}}}"#;
    let (removed, ok, after) = verify(text);
    assert!(removed && ok, "{after}");
    let parsed: serde_json::Value = serde_json::from_str(&after).unwrap();
    let spec = &parsed["request"]["object"]["spec"];
    assert_eq!(spec["service"]["annotations"]["c"], "d", "{after}");
    assert_eq!(spec["m"]["labels"]["e"], "f", "{after}");
}

#[test]
fn a_skipped_key_anywhere_else_fails_verification() {
    for text in [
        r#"{"request":{"object":{"spec":{"managedFields":[1]}}}}"#,
        r#"{"request":{"object":{"metadata":{}},"requestKind":{"x":{"managedFields":[1]}}}}"#,
        r#"{"request":{"object":{"metadata":{"labels":{}}},"x":{"y":{"labels":{"a":"b"}}}}}"#,
        r#"{"request":{"spec":{"status":{"a":1}}}}"#,
        r#"{"request":{"oldObject":{"a":1},"oldObject":{"b":2}}}"#,
        r#"{"request":{"oldObject":{"a":1},"oldObject":"x"}}"#,
    ] {
        let (removed, ok, after) = verify(text);
        assert!(removed && !ok, "{text} -> {after}");
    }
}

#[test]
fn keys_that_only_end_in_the_name_or_hold_no_container_are_left_alone() {
    for text in [
        r#"{"request":{"object":{"metadata":{"x\"managedFields":[1]}}}}"#,
        r#"{"request":{"object":{"metadata":{"notmanagedFields":[1]}}}}"#,
        r#"{"request":{"object":{"metadata":{"labelsx":{"a":"b"}}}}}"#,
        r#"{"request":{"object":{"metadata":{"managedFields":null}}}}"#,
        r#"{"request":{"object":{"metadata":{"a":"\"managedFields\":[1]"}}}}"#,
        r#"{"request":{"oldObject":"x","object":{}}}"#,
    ] {
        let (removed, _, after) = verify(text);
        assert!(!removed, "{text} -> {after}");
    }
}

#[test]
fn a_value_that_never_closes_or_is_not_utf8_is_left_to_the_parser() {
    let mut out = Vec::new();
    assert!(compact(br#"{"request":{"oldObject":{"a":["#, &mut out).is_empty());
    assert!(compact(b"{\"request\":{\"oldObject\":{\"a\":\"\xff\"}}}", &mut out).is_empty());
    assert!(
        !compact(
            "{\"request\":{\"oldObject\":{\"a\":\"é\"}}}".as_bytes(),
            &mut out
        )
        .is_empty()
    );
}
