//! The envelope: fixtures captured from a real kube-apiserver, and every way a body can be wrong;
//! the decisions on what the envelope carries are `tests/decide.rs`'s. The helpers here answer
//! each body as the server reads it and parsed whole, and check the two agree.

use super::*;

use crate::memcached::validate::Rule;
use base64::Engine as _;
use serde_json::{Value as J, json};

/// Reviews `sent`, and checks that parsing it whole (nothing skipped) answers byte for byte the
/// same, and so does reading it where it lies (`answer_in_place`, as the server reads a body
/// that came in one frame): every test of the envelope is also a test of the reader.
fn run(webhook: Webhook, sent: &[u8]) -> Result<(Verdict, J), String> {
    let (verdict, out) = answer(webhook, sent, Read::Skipping);
    let (whole, whole_out) = answer(webhook, sent, Read::Whole);
    let mut sliced_out = Vec::new();
    let sliced = Review::new(webhook)
        .answer_in_place(sent, &mut sliced_out)
        .map_err(|e| e.to_string());
    assert_eq!(
        sliced.as_ref().map(|_| ()),
        verdict.as_ref().map(|_| ()),
        "reading in place changed the outcome"
    );
    assert_eq!(
        String::from_utf8_lossy(&sliced_out),
        String::from_utf8_lossy(&out),
        "reading in place changed the answer"
    );
    assert_eq!(
        verdict.as_ref().map(|_| ()),
        whole.as_ref().map(|_| ()),
        "skipping what no rule reads changed the outcome"
    );
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&whole_out),
        "skipping what no rule reads changed the answer"
    );
    Ok((
        verdict?,
        serde_json::from_slice(&out).expect("responses are valid JSON"),
    ))
}

/// How [`answer`] reads a body: as the server does, or parsed whole with nothing skipped.
#[derive(Clone, Copy)]
enum Read {
    Skipping,
    Whole,
}

fn answer(webhook: Webhook, sent: &[u8], read: Read) -> (Result<Verdict, String>, Vec<u8>) {
    let mut body = sent.to_vec();
    let mut out = Vec::new();
    let review = Review::new(webhook);
    let verdict = match read {
        Read::Skipping => review.answer(&mut body, &mut out),
        Read::Whole => review.answer_whole(&mut body, &mut out),
    };
    (verdict.map_err(|e| e.to_string()), out)
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn patch_of(response: &J) -> J {
    let b64 = response["response"]["patch"].as_str().expect("a patch");
    serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn captured_create_is_defaulted_and_uid_echoed() {
    let body = fixture("mutate-create-kubectl-apply.json");
    let request: J = serde_json::from_slice(&body).unwrap();
    let (verdict, response) = run(Webhook::Mutate, &body).unwrap();
    assert!(verdict.allowed && verdict.patched);
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["kind"], "AdmissionReview");
    assert_eq!(response["response"]["uid"], request["request"]["uid"]);
    assert_eq!(response["response"]["patchType"], "JSONPatch");
    let patch: json_patch::Patch = serde_json::from_value(patch_of(&response)).unwrap();
    let mut object = request["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    // metadata (with its escaped last-applied annotation) is untouched.
    assert_eq!(object["metadata"], request["request"]["object"]["metadata"]);
    assert!(object["spec"]["memcached"]["threads"].is_i64());
}

#[test]
fn captured_update_defaults_the_new_object_and_ignores_the_old() {
    let body = fixture("mutate-update-kubectl-apply.json");
    let (_, response) = run(Webhook::Mutate, &body).unwrap();
    let ops = patch_of(&response);
    assert_eq!(
        ops,
        json!([
            {"op": "add", "path": "/spec/memcached/maxConnections", "value": 1024},
            {"op": "add", "path": "/spec/memcached/maxItemSize", "value": "1m"},
            {"op": "add", "path": "/spec/monitoring/exporterImage", "value": "prom/memcached-exporter:v0.15.4"},
            {"op": "add", "path": "/spec/monitoring/serviceMonitor/interval", "value": "30s"},
            {"op": "add", "path": "/spec/monitoring/serviceMonitor/scrapeTimeout", "value": "10s"},
        ])
    );
}

#[test]
fn v1beta1_is_answered_in_v1beta1() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"b1","kind":{"group":"memcached.c5c3.io","version":"v1beta1","kind":"Memcached"},"operation":"CREATE","object":{"spec":{}}}}"#;
    let (_, response) = run(Webhook::Mutate, body).unwrap();
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(response["response"]["uid"], "b1");
}

fn review_with(operation: &str, object: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u1","kind":{{"group":"memcached.c5c3.io","version":"v1beta1","kind":"Memcached"}},"name":"c","namespace":"ns","operation":"{operation}","object":{object},"oldObject":null,"dryRun":true}}}}"#
    )
    .into_bytes()
}

#[test]
fn delete_and_connect_are_allowed_without_a_patch() {
    for op in ["DELETE", "CONNECT"] {
        let (verdict, response) = run(Webhook::Mutate, &review_with(op, "null")).unwrap();
        assert!(verdict.allowed && !verdict.patched);
        assert!(
            response["response"].get("patch").is_none()
                && response["response"].get("patchType").is_none()
        );
    }
}

#[test]
fn unknown_operation_wrong_kind_and_missing_object_are_denied_with_a_reason() {
    let (_, r) = run(Webhook::Mutate, &review_with("PATCH", "{}")).unwrap();
    assert!(
        r["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("request.operation")
    );
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{}}}"#;
    let (v, r) = run(Webhook::Mutate, body).unwrap();
    assert!(!v.allowed);
    assert!(
        r["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("\"Pod\"")
    );
    let (_, r) = run(Webhook::Mutate, &review_with("CREATE", "null")).unwrap();
    assert_eq!(
        r["response"]["status"]["message"],
        "request.object is missing on a CREATE or UPDATE"
    );
}

#[test]
fn subresource_requests_are_allowed_untouched() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"memcached.c5c3.io","version":"v1beta1","kind":"Memcached"},"subResource":"status","operation":"UPDATE","object":{"spec":{}}}}"#;
    let (v, _) = run(Webhook::Mutate, body).unwrap();
    assert!(v.allowed && !v.patched);
}

#[test]
fn bodies_that_are_not_admission_reviews_are_rejected_with_a_reason() {
    let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let cases: [(&[u8], &str); 10] = [
        (b"", "empty"),
        (b"{\"apiVersion\":", "truncated"),
        (b"not json", "not valid JSON"),
        (b"{\"a\":\"\xff\"}", "UTF-8"),
        (deep.as_bytes(), "1024 levels"),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            "request: expected a value",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
            "request.uid",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":5}}"#,
            "request.uid: expected a string",
        ),
        (
            br#"{"apiVersion":"v1","kind":"Pod"}"#,
            "found apiVersion \"v1\" and kind \"Pod\"",
        ),
        (b"[1,2]", "expected an object"),
    ];
    for (body, needle) in cases {
        let err = run(Webhook::Mutate, body).unwrap_err();
        assert!(
            err.contains(needle),
            "{:?}: {err}",
            String::from_utf8_lossy(&body[..body.len().min(40)])
        );
        assert!(!err.contains('\n'));
    }
}

#[test]
fn a_huge_review_leaves_no_big_buffers_behind() {
    let small = fixture("mutate-create-kubectl-apply.json");
    run(Webhook::Mutate, &small).unwrap();
    let warm = retained();
    // A 1 MB annotation, and many small fields: a long tape.
    let mut request: J = serde_json::from_slice(&small).unwrap();
    let labels: serde_json::Map<String, J> =
        (0..20_000).map(|i| (format!("k{i}"), json!("v"))).collect();
    request["request"]["object"]["metadata"]["labels"] = J::Object(labels);
    request["request"]["object"]["metadata"]["annotations"]["big"] = json!("x".repeat(1 << 20));
    let huge = serde_json::to_vec(&request).unwrap();
    assert!(huge.len() > RETAIN_BELOW);
    let (verdict, _) = run(Webhook::Mutate, &huge).unwrap();
    assert!(verdict.allowed);
    let after = retained();
    assert!(after.0 <= warm.0.max(1024), "tape kept {} nodes", after.0);
    assert!(after.1 <= warm.1.max(1024), "patch kept {} bytes", after.1);
    assert!(
        after.2 <= warm.2,
        "parser kept {} structural indexes",
        after.2
    );
    // And a small review right after still works on the fresh buffers.
    run(Webhook::Mutate, &small).unwrap();
    assert_eq!(retained(), warm);
}

/// The log lines `body` produces at info level, as the binary logs by default.
fn info_lines(webhook: Webhook, body: &[u8]) -> String {
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    // While a scoped dispatcher is the only one registered, tracing-core may cache a callsite's
    // interest from another thread's (empty) default (tokio-rs/tracing#3611); a second live
    // dispatcher keeps it on the general path.
    let _second = tracing::Dispatch::new(tracing_subscriber::registry());
    tracing::subscriber::with_default(subscriber, || answer(webhook, body, Read::Skipping).0)
        .unwrap();
    String::from_utf8(captured.0.lock().unwrap().clone()).unwrap()
}

#[test]
fn denials_are_logged_at_info_and_allowed_admissions_are_not() {
    let allowed = info_lines(
        Webhook::Mutate,
        &fixture("mutate-create-kubectl-apply.json"),
    );
    assert_eq!(allowed, "", "an allowed admission logs at debug only");
    let denied = info_lines(Webhook::Validate, &fixture("invalid-spec.json"));
    assert_eq!(denied.lines().count(), 1, "{denied}");
    assert!(
        denied.contains("admission")
            && denied.contains("allowed=false")
            && denied.contains("code=422"),
        "{denied}"
    );
}

#[test]
fn a_review_of_another_kind_logs_no_empty_name_or_namespace() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{}}}"#;
    let line = info_lines(Webhook::Mutate, body);
    assert!(
        line.contains("uid=\"u\"") && line.contains("allowed=false"),
        "{line}"
    );
    assert!(
        !line.contains("name=") && !line.contains("namespace="),
        "{line}"
    );
    let named = info_lines(Webhook::Validate, &fixture("invalid-spec.json"));
    assert!(
        named.contains(" name=") && named.contains("namespace="),
        "{named}"
    );
}

mod decide;
