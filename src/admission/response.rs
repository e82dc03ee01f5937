//! Writes the AdmissionReview response straight into a byte buffer: no serializer, no
//! intermediate value. Field names and shapes follow `admission/v1` and `metav1.Status`.

use base64::Engine as _;

use super::ApiVersion;
use crate::json::write_str;

/// `response` (AdmissionResponse), without the `uid` (passed separately: it is always echoed).
#[derive(Debug)]
pub struct Response<'a> {
    /// `allowed`.
    pub allowed: bool,
    /// The JSON Patch array; written base64-encoded with `patchType: "JSONPatch"`.
    pub patch: Option<&'a [u8]>,
    /// `warnings`: shown by kubectl as `Warning:` lines.
    pub warnings: &'a [String],
    /// `status`: why a request was not allowed.
    pub status: Option<&'a Status<'a>>,
}

impl<'a> Response<'a> {
    pub fn allowed() -> Self {
        Response {
            allowed: true,
            patch: None,
            warnings: &[],
            status: None,
        }
    }

    pub fn denied(status: &'a Status<'a>) -> Self {
        Response {
            allowed: false,
            patch: None,
            warnings: &[],
            status: Some(status),
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

/// Writes the whole AdmissionReview response into `out` (appending).
pub fn write(out: &mut Vec<u8>, version: ApiVersion, uid: &str, response: &Response<'_>) {
    out.extend_from_slice(b"{\"apiVersion\":\"");
    out.extend_from_slice(version.as_str().as_bytes());
    out.extend_from_slice(b"\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    write_str(out, uid);
    out.extend_from_slice(if response.allowed {
        b",\"allowed\":true"
    } else {
        b",\"allowed\":false"
    });
    if let Some(patch) = response.patch {
        out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
        let engine = &base64::engine::general_purpose::STANDARD;
        let start = out.len();
        let encoded =
            base64::encoded_len(patch.len(), true).expect("a request-sized patch fits in usize");
        out.resize(start + encoded, 0);
        let written = engine
            .encode_slice(patch, &mut out[start..])
            .expect("the slice was sized by encoded_len");
        out.truncate(start + written);
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
    out.extend_from_slice(b"}}");
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
            patch: Some(b"[]"),
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
