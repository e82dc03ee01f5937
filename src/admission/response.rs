//! Writes the AdmissionReview response straight into a byte buffer: no serializer, no
//! intermediate value. Field names and shapes follow `admission/v1` and `metav1.Status`.

use super::ApiVersion;
use crate::json::{TypeError, write_str};
use crate::memcached::validate::{ErrorKind, FieldError};
use crate::patch::{Change, Changes};

/// `response` (AdmissionResponse), without the `uid` (passed separately: it is always echoed).
#[derive(Debug)]
pub struct Response<'a> {
    /// `allowed`.
    pub allowed: bool,
    /// The JSON Patch array, already base64-encoded (`crate::patch` writes it so); written
    /// with `patchType: "JSONPatch"`.
    pub patch: Option<&'a [u8]>,
    /// `warnings`: shown by kubectl as `Warning:` lines.
    pub warnings: &'a [String],
    /// `status`: why a request was not allowed.
    pub status: Option<&'a Status<'a>>,
    /// `auditAnnotations`.
    pub audit: Audit<'a>,
}

/// `auditAnnotations`: the apiserver records each under `<webhook name>/<key>` in its audit
/// log (keys are label-name parts, values strings).
#[derive(Clone, Copy, Debug)]
pub enum Audit<'a> {
    None,
    /// The mutating webhook: `defaulted` and `removed`, the JSON Pointers its patch set or took
    /// out, comma-separated (each key only when it has a path).
    Changes(&'a Changes),
    /// The validating webhook under `--validation-actions` with `Audit`: `validation_failure`,
    /// a JSON list of `{"field", "message"}` (a string holding JSON, as the apiserver's own
    /// ValidatingAdmissionPolicy writes it).
    Failures(&'a [Cause]),
}

impl<'a> Response<'a> {
    pub fn allowed() -> Self {
        Response {
            allowed: true,
            patch: None,
            warnings: &[],
            status: None,
            audit: Audit::None,
        }
    }

    pub fn denied(status: &'a Status<'a>) -> Self {
        Response {
            allowed: false,
            patch: None,
            warnings: &[],
            status: Some(status),
            audit: Audit::None,
        }
    }
}

/// `response.status` (metav1.Status) of a denial.
#[derive(Debug)]
pub struct Status<'a> {
    /// `code`: 400 for a malformed object, 422 for an invalid one.
    pub code: u16,
    /// `reason`: `BadRequest`, `Invalid`.
    pub reason: &'static str,
    /// `message`: what kubectl shows after "denied the request: ".
    pub message: &'a str,
    /// `details`: the object and one cause per field error.
    pub details: Option<Details<'a>>,
}

impl<'a> Status<'a> {
    /// A request whose object breaks the rules of its types.
    pub fn bad_request(message: &'a str) -> Self {
        Status {
            code: 400,
            reason: "BadRequest",
            message,
            details: None,
        }
    }
}

/// `status.details` (metav1.StatusDetails).
#[derive(Debug)]
pub struct Details<'a> {
    pub name: &'a str,
    pub group: &'static str,
    pub kind: &'static str,
    pub causes: &'a [Cause],
}

/// `status.details.causes[]` (metav1.StatusCause).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `reason`: `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: &'static str,
    /// `message`: the error without its field path.
    pub message: String,
    /// `field`: the field path, e.g. `spec.replicas`.
    pub field: String,
}

// === the domain's errors on the wire ===

impl From<&FieldError> for Cause {
    /// A rule's violation as apimachinery lists a `field.Error`: its `field.ErrorType` as the
    /// reason, the error body without the path as the message, the path. The domain's error
    /// stays free of wire types; this is the one place that maps it.
    fn from(e: &FieldError) -> Self {
        let reason = match e.kind {
            ErrorKind::Invalid(_) => "FieldValueInvalid",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::NotSupported(_) => "FieldValueNotSupported",
            ErrorKind::Forbidden | ErrorKind::Autoscaled => "FieldValueForbidden",
        };
        // apimachinery's `ErrorBody()`: the error's text after `<field>: ` (the test holds the
        // two together), pushed into a string sized once: no formatting machinery, as a denial
        // writes one per violation.
        let (head, value) = match &e.kind {
            ErrorKind::Invalid(value) => ("Invalid value: ", value.as_str()),
            ErrorKind::Required => ("Required value", ""),
            ErrorKind::NotSupported(value) => ("Unsupported value: ", value.as_str()),
            ErrorKind::Forbidden | ErrorKind::Autoscaled => ("Forbidden", ""),
        };
        let mut message = String::with_capacity(head.len() + value.len() + e.detail.len() + 2);
        message.push_str(head);
        message.push_str(value);
        if !e.detail.is_empty() {
            message.push_str(": ");
            message.push_str(&e.detail);
        }
        Cause {
            reason,
            message,
            field: e.field.clone(),
        }
    }
}

impl From<&TypeError> for Cause {
    /// A wrongly typed field, as apimachinery's `field.TypeInvalid`.
    fn from(e: &TypeError) -> Self {
        Cause {
            reason: "FieldValueTypeInvalid",
            message: format!("expected {}, found {}", e.expected, e.found),
            field: e.field.to_string(),
        }
    }
}

/// The response's start up to the uid's value, by version.
const HEAD_V1: &[u8] =
    b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";
const HEAD_V1BETA1: &[u8] = b"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";

/// Writes the whole AdmissionReview response into `out` (appending).
pub fn write(out: &mut Vec<u8>, version: ApiVersion, uid: &str, response: &Response<'_>) {
    // The constant runs are written one copy each (a call to `memcpy` apiece).
    out.extend_from_slice(match version {
        ApiVersion::V1 => HEAD_V1,
        ApiVersion::V1Beta1 => HEAD_V1BETA1,
    });
    write_str(out, uid);
    out.extend_from_slice(match (response.allowed, response.patch.is_some()) {
        (true, true) => b",\"allowed\":true,\"patchType\":\"JSONPatch\",\"patch\":\"",
        (true, false) => b",\"allowed\":true",
        (false, true) => b",\"allowed\":false,\"patchType\":\"JSONPatch\",\"patch\":\"",
        (false, false) => b",\"allowed\":false",
    });
    if let Some(patch) = response.patch {
        out.extend_from_slice(patch);
        out.push(b'"');
    }
    if !response.warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":[");
        for (i, w) in response.warnings.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_str(out, w);
        }
        out.push(b']');
    }
    if let Some(status) = response.status {
        write_status(out, status);
    }
    write_audit(out, response.audit);
    out.extend_from_slice(b"}}");
}

fn write_audit(out: &mut Vec<u8>, audit: Audit<'_>) {
    match audit {
        Audit::None => {}
        Audit::Changes(changes) => {
            let mut first = true;
            // The keys, each written with what comes before it in one constant.
            enum Key {
                Defaulted,
                Removed,
            }
            for (key, change) in [
                (Key::Defaulted, Change::Defaulted),
                (Key::Removed, Change::Removed),
            ] {
                if !changes.any(change) {
                    continue;
                }
                out.extend_from_slice(match (first, key) {
                    (true, Key::Defaulted) => b",\"auditAnnotations\":{\"defaulted\":\"",
                    (true, Key::Removed) => b",\"auditAnnotations\":{\"removed\":\"",
                    (false, Key::Defaulted) => b",\"defaulted\":\"",
                    (false, Key::Removed) => b",\"removed\":\"",
                });
                first = false;
                changes.write_paths(change, out);
                out.push(b'"');
            }
            if !first {
                out.push(b'}');
            }
        }
        Audit::Failures(failures) if !failures.is_empty() => {
            let mut list = Vec::with_capacity(64 * failures.len());
            list.push(b'[');
            for (i, f) in failures.iter().enumerate() {
                if i > 0 {
                    list.push(b',');
                }
                list.extend_from_slice(b"{\"field\":");
                write_str(&mut list, &f.field);
                list.extend_from_slice(b",\"message\":");
                write_str(&mut list, &f.message);
                list.push(b'}');
            }
            list.push(b']');
            // Built from `str`s and ASCII, so always UTF-8.
            let list = String::from_utf8_lossy(&list);
            out.extend_from_slice(b",\"auditAnnotations\":{\"validation_failure\":");
            write_str(out, &list);
            out.push(b'}');
        }
        Audit::Failures(_) => {}
    }
}

fn write_status(out: &mut Vec<u8>, status: &Status<'_>) {
    out.extend_from_slice(b",\"status\":{\"metadata\":{},\"status\":\"Failure\",\"message\":");
    write_str(out, status.message);
    out.extend_from_slice(b",\"reason\":");
    write_str(out, status.reason);
    if let Some(details) = &status.details {
        out.extend_from_slice(b",\"details\":{\"name\":");
        write_str(out, details.name);
        out.extend_from_slice(b",\"group\":");
        write_str(out, details.group);
        out.extend_from_slice(b",\"kind\":");
        write_str(out, details.kind);
        out.extend_from_slice(b",\"causes\":[");
        for (i, cause) in details.causes.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"reason\":");
            write_str(out, cause.reason);
            out.extend_from_slice(b",\"message\":");
            write_str(out, &cause.message);
            out.extend_from_slice(b",\"field\":");
            write_str(out, &cause.field);
            out.push(b'}');
        }
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b",\"code\":");
    out.extend_from_slice(itoa::Buffer::new().format(status.code).as_bytes());
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn written(response: &Response<'_>) -> Value {
        let mut out = Vec::new();
        write(&mut out, ApiVersion::V1Beta1, "u-\"1\"", response);
        serde_json::from_slice(&out).expect("the writer emits valid JSON")
    }

    #[test]
    fn allowed_with_patch_and_warnings() {
        let warnings = vec!["w1".to_owned(), "w\"2".to_owned()];
        let v = written(&Response {
            patch: Some(b"W10="),
            warnings: &warnings,
            ..Response::allowed()
        });
        assert_eq!(
            v,
            json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                   "response": {"uid": "u-\"1\"", "allowed": true, "patchType": "JSONPatch", "patch": "W10=",
                                "warnings": ["w1", "w\"2"]}})
        );
    }

    #[test]
    fn the_head_names_the_version() {
        for version in [ApiVersion::V1, ApiVersion::V1Beta1] {
            let mut out = Vec::new();
            write(&mut out, version, "u", &Response::allowed());
            let expected = format!(
                r#"{{"apiVersion":"{}","kind":"AdmissionReview","response":{{"uid":"u","allowed":true}}}}"#,
                version.as_str()
            );
            assert_eq!(String::from_utf8(out).unwrap(), expected);
        }
    }

    #[test]
    fn audit_annotations_hold_strings() {
        static IMAGE: crate::patch::Op = crate::patch::op!("/spec/image", str "x");
        static REPLICAS: crate::patch::Remove = crate::patch::remove!("/spec/replicas");
        static MEMCACHED: crate::patch::Op = crate::patch::op!("/spec/memcached", raw "{}");
        let mut buf = Vec::new();
        let mut patch = crate::patch::Patch::new(&mut buf);
        patch.add(&IMAGE);
        patch.remove(&REPLICAS);
        patch.add(&MEMCACHED);
        let changes = patch.changes();
        let v = written(&Response {
            audit: Audit::Changes(&changes),
            ..Response::allowed()
        });
        assert_eq!(
            v["response"]["auditAnnotations"],
            json!({"defaulted": "/spec/image,/spec/memcached", "removed": "/spec/replicas"})
        );

        let failures = [Cause {
            reason: "FieldValueInvalid",
            message: "Invalid value: \"a\\\"b\": \u{1}".into(),
            field: "spec.image".into(),
        }];
        let v = written(&Response {
            audit: Audit::Failures(&failures),
            ..Response::allowed()
        });
        let text = v["response"]["auditAnnotations"]["validation_failure"]
            .as_str()
            .expect("a string value");
        let list: Value = serde_json::from_str(text).expect("the value is a JSON list");
        assert_eq!(
            list,
            json!([{"field": "spec.image", "message": "Invalid value: \"a\\\"b\": \u{1}"}])
        );

        let mut buf = Vec::new();
        let none = crate::patch::Patch::new(&mut buf).changes();
        for audit in [Audit::Changes(&none), Audit::Failures(&[]), Audit::None] {
            let v = written(&Response {
                audit,
                ..Response::allowed()
            });
            assert!(v["response"].get("auditAnnotations").is_none(), "{v}");
        }
    }

    #[test]
    fn a_field_error_becomes_the_cause_apimachinery_lists() {
        let cases = [
            (
                ErrorKind::Invalid("\"64Mi\"".into()),
                "FieldValueInvalid",
                "Invalid value: \"64Mi\": d",
            ),
            (
                ErrorKind::Required,
                "FieldValueRequired",
                "Required value: d",
            ),
            (
                ErrorKind::NotSupported("\"X\"".into()),
                "FieldValueNotSupported",
                "Unsupported value: \"X\": d",
            ),
            (ErrorKind::Forbidden, "FieldValueForbidden", "Forbidden: d"),
            (ErrorKind::Autoscaled, "FieldValueForbidden", "Forbidden: d"),
        ];
        for (kind, reason, message) in cases {
            let e = FieldError {
                field: "spec.a[0].b".into(),
                kind,
                detail: "d".into(),
            };
            let cause = Cause::from(&e);
            assert_eq!(
                (cause.reason, cause.message.as_str(), cause.field.as_str()),
                (reason, message, "spec.a[0].b")
            );
            // The cause's message is the domain's text after `<field>: `, with or without a
            // detail.
            for detail in ["", "d"] {
                let e = FieldError {
                    detail: detail.into(),
                    ..e.clone()
                };
                let cause = Cause::from(&e);
                assert_eq!(format!("{}: {}", cause.field, cause.message), e.to_string());
            }
        }
    }

    #[test]
    fn denied_with_causes() {
        let causes = [Cause {
            reason: "FieldValueRequired",
            message: "m".into(),
            field: "spec.x".into(),
        }];
        let status = Status {
            code: 422,
            reason: "Invalid",
            message: "bad",
            details: Some(Details {
                name: "n",
                group: "g",
                kind: "K",
                causes: &causes,
            }),
        };
        let v = written(&Response::denied(&status));
        assert_eq!(
            v["response"],
            json!({"uid": "u-\"1\"", "allowed": false,
                   "status": {"metadata": {}, "status": "Failure", "message": "bad", "reason": "Invalid", "code": 422,
                              "details": {"name": "n", "group": "g", "kind": "K",
                                          "causes": [{"reason": "FieldValueRequired", "message": "m", "field": "spec.x"}]}}})
        );
    }
}
