//! The whole admission path from request-body bytes, through both webhooks, as the server runs
//! it. The raw bytes must never panic and, when answered, get a JSON AdmissionReview back; the
//! skipping of what no rule reads must not change an answer (see `answer`). When the bytes are also
//! JSON to serde_json, they are re-encoded (no duplicate keys, so both parsers
//! agree on every member) and the answer must echo the uid, and a patch must apply with the
//! independent `json-patch` crate, touch only `/spec`, and leave nothing for a second mutation.

#![no_main]

use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use memcached_webhook::admission::{self, Actions, BadReview, Review, Webhook};
use serde_json::Value;

const WARN_AUDIT: Actions = Actions {
    deny: false,
    warn: true,
    audit: true,
};

fuzz_target!(|data: &[u8]| {
    for (webhook, actions) in [
        (Webhook::Mutate, Actions::DENY),
        (Webhook::Validate, Actions::DENY),
        (Webhook::Validate, WARN_AUDIT),
    ] {
        if let Some(out) = answer(webhook, actions, data) {
            let answer: Value = serde_json::from_slice(&out).expect("the answer is JSON");
            assert!(answer["response"]["uid"].is_string(), "no uid: {answer}");
            assert!(answer["response"]["allowed"].is_boolean(), "{answer}");
        }
    }
    let Ok(review) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let body = serde_json::to_vec(&review).expect("a Value encodes");
    let uid = review["request"]["uid"].as_str();
    for (webhook, actions) in [
        (Webhook::Validate, Actions::DENY),
        (Webhook::Validate, WARN_AUDIT),
    ] {
        if let Some(out) = answer(webhook, actions, &body) {
            echoes(&out, uid);
        }
    }
    let Some(out) = answer(Webhook::Mutate, Actions::DENY, &body) else {
        return;
    };
    let response = echoes(&out, uid);
    let Some(patch) = response["patch"].as_str() else {
        return;
    };
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    assert_eq!(
        response["allowed"], true,
        "a denial carries a patch: {response}"
    );
    let patch = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .expect("the patch is base64");
    let ops: Value = serde_json::from_slice(&patch).expect("the patch is JSON");
    for op in ops.as_array().expect("the patch is an array") {
        let path = op["path"].as_str().expect("every operation has a path");
        assert!(
            path == "/spec" || path.starts_with("/spec/"),
            "the patch touches {path} outside spec: {ops}"
        );
    }
    let ops: json_patch::Patch = serde_json::from_value(ops).expect("a JSON Patch document");
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &ops).unwrap_or_else(|e| {
        panic!("the patch does not apply to request.object: {e}\nobject: {object}\npatch: {ops:?}")
    });
    let mut again = review.clone();
    again["request"]["object"] = object;
    let body = serde_json::to_vec(&again).expect("a Value encodes");
    let out = answer(Webhook::Mutate, Actions::DENY, &body)
        .expect("the patched object is still a review");
    let response = echoes(&out, uid);
    assert_eq!(
        response["allowed"], true,
        "the patched object is refused: {response}"
    );
    assert!(
        response.get("patch").is_none(),
        "mutating the patched object patches again: {response}"
    );
});

/// The answer's bytes, or `None` when the body is refused with HTTP 400 (its reason non-empty).
/// Answered as the server does (what no rule reads skipped, where that pays) and by a whole parse
/// of the body as sent. When the whole parse reads the body, the answers must be the same byte
/// for byte: what was skipped is then well-formed, and no rule may read it. When it does not,
/// only the skip can explain a difference, so the server's answer must be the whole parse of the
/// body [`blanked`] by the same paths, except where the whole parse finds the body is not JSON:
/// skipping hides a fault that lies only inside a skipped value (which the apiserver never
/// sends), so that body may get an answer, or another reason. (The blanked body is re-encoded by
/// serde_json, which respells numbers such as `222222222222222222222`: compared only when the
/// skip changed something, it is not asked to agree where nothing was skipped.)
fn answer(webhook: Webhook, actions: Actions, sent: &[u8]) -> Option<Vec<u8>> {
    let review = Review {
        actions,
        ..Review::new(webhook)
    };
    let (mut body, mut out) = (sent.to_vec(), Vec::new());
    let served = review.answer(&mut body, &mut out);
    // The server reads a body that came in one frame where it lies: the same answer.
    let mut sliced_out = Vec::new();
    let sliced = review.answer_in_place(sent, &mut sliced_out);
    assert_eq!(
        sliced.as_ref().map(|_| &sliced_out).map_err(|e| e.to_string()),
        served.as_ref().map(|_| &out).map_err(|e| e.to_string()),
        "reading in place changed the answer"
    );
    let (mut body, mut as_sent_out) = (sent.to_vec(), Vec::new());
    let as_sent = review.answer_whole(&mut body, &mut as_sent_out);
    match (&served, &as_sent) {
        (Ok(_), Ok(_)) => {
            assert_eq!(
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&as_sent_out),
                "skipping changed the answer to a review that parses whole"
            );
            return Some(out);
        }
        (Err(served), Err(whole)) if served.to_string() == whole.to_string() => {
            assert!(!served.to_string().is_empty(), "a 400 without a reason");
            return None;
        }
        _ => {}
    }
    let (mut body, mut whole_out) = (blanked(sent).unwrap_or_else(|| sent.to_vec()), Vec::new());
    let whole = review.answer_whole(&mut body, &mut whole_out);
    match (served, whole) {
        (Ok(_), Ok(_)) => assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&whole_out),
            "skipping changed the answer"
        ),
        (Err(served), Err(whole)) => {
            assert!(!served.to_string().is_empty(), "a 400 without a reason");
            if !matches!(whole, BadReview::Json { .. }) {
                assert_eq!(served.to_string(), whole.to_string());
            }
            return None;
        }
        (Ok(_), Err(whole)) => assert!(
            matches!(whole, BadReview::Json { .. }),
            "skipping answered a review refused for {whole}"
        ),
        (Err(served), Ok(_)) => panic!("skipping refused an answerable review: {served}"),
    }
    Some(out)
}

/// The oracle for what the pipeline skips: `sent` with every member `admission::skipped` at its
/// path emptied (`{}` or `[]`), as the whole parse must see it to answer as the server does, or
/// `None` when serde_json does not read `sent` as JSON. `oldObject` is left whole: the server
/// parses it from its bytes when ratcheting reads it, so the answer must be the whole parse's.
fn blanked(sent: &[u8]) -> Option<Vec<u8>> {
    let mut review: Value = serde_json::from_slice(sent).ok()?;
    blank(&mut review, &mut Vec::new());
    Some(serde_json::to_vec(&review).expect("a Value encodes"))
}

/// Empties the members below `value`, at `path`, that the reader skips, but `oldObject`. Only
/// through objects: inside an array the reader skips nothing.
fn blank(value: &mut Value, path: &mut Vec<String>) {
    let Value::Object(members) = value else {
        return;
    };
    for (key, member) in members.iter_mut() {
        path.push(key.clone());
        let at: Vec<&str> = path.iter().map(String::as_str).collect();
        if at == ["request", "oldObject"] || !admission::skipped(&at) {
            blank(member, path);
        } else {
            match member {
                Value::Object(members) => members.clear(),
                Value::Array(items) => items.clear(),
                _ => {}
            }
        }
        path.pop();
    }
}

/// The answer's `response`, having checked that it echoes `uid`.
fn echoes(out: &[u8], uid: Option<&str>) -> Value {
    let mut answer: Value = serde_json::from_slice(out).expect("the answer is JSON");
    let response = answer["response"].take();
    assert_eq!(response["uid"].as_str(), uid, "uid not echoed: {response}");
    response
}
