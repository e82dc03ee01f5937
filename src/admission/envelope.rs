//! The envelope: reads `apiVersion`, `kind` and the `request` fields of an AdmissionReview into
//! borrowed views, and says precisely why a body is not one (HTTP 400).

use std::borrow::Cow;
use std::fmt;

use crate::json::{self, TypeError, Val};

/// `apiVersion` of the AdmissionReview, answered in kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiVersion {
    V1,
    V1Beta1,
}

impl ApiVersion {
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "admission.k8s.io/v1",
            ApiVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// `request.operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `request` (AdmissionRequest): the fields the webhooks use.
#[derive(Debug)]
pub struct Request<'t, 'i> {
    /// `uid`: tracks the round trip between the kube-apiserver and the webhook; echoed back.
    pub uid: &'i str,
    /// `kind.group` of the object being admitted.
    pub group: &'i str,
    /// `kind.kind` of the object being admitted.
    pub kind: &'i str,
    /// `subResource` ("" for the main resource).
    pub sub_resource: &'i str,
    /// `name` (may be empty on CREATE with `generateName`).
    pub name: &'i str,
    /// `namespace`.
    pub namespace: &'i str,
    /// `operation`; `None` when the value is not one Kubernetes defines.
    pub operation: Option<Operation>,
    /// The raw `operation` value, for the log and the error message.
    pub operation_raw: &'i str,
    /// `object`: absent or null on DELETE.
    pub object: Option<Val<'t, 'i>>,
    /// `oldObject`: the stored object on UPDATE. Only located here (the tape holds it anyway);
    /// it is read and judged only when `object` has a violation, for ratcheting.
    pub old_object: Option<Val<'t, 'i>>,
    /// `oldObject`'s bytes as sent, when the pipeline skipped it (then `old_object` is `None`):
    /// parsed on its own only when ratcheting reads it.
    pub old_object_text: Option<&'i [u8]>,
}

/// Why a body is not an AdmissionReview this server can answer (HTTP 400).
#[derive(Debug)]
pub enum BadReview {
    /// The body is empty.
    Empty,
    /// The body is not JSON (or too deeply nested for it); `truncated` when it stops mid-value.
    Json {
        error: simd_json::Error,
        truncated: bool,
    },
    /// A required member is missing or has the wrong type.
    Shape(TypeError),
    /// `apiVersion`/`kind` name something other than an AdmissionReview we speak.
    NotAdmissionReview { api_version: String, kind: String },
}

impl fmt::Display for BadReview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadReview::Empty => {
                f.write_str("the request body is empty; expected an AdmissionReview")
            }
            BadReview::Json { error, truncated } => {
                use simd_json::ErrorType as T;
                let what = match error.error() {
                    T::InvalidUtf8 => "it is not valid UTF-8",
                    T::DepthLimitExceeded => "it nests deeper than 1024 levels",
                    _ if *truncated => "it ends in the middle of a value (truncated)",
                    _ => "it is not valid JSON",
                };
                write!(
                    f,
                    "the request body is not an AdmissionReview: {what} (near byte {})",
                    error.index()
                )
            }
            BadReview::Shape(e) => write!(f, "the request body is not an AdmissionReview: {e}"),
            BadReview::NotAdmissionReview { api_version, kind } => write!(
                f,
                "expected apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1 and kind AdmissionReview, \
                 found apiVersion {api_version:?} and kind {kind:?}"
            ),
        }
    }
}

impl std::error::Error for BadReview {}

impl From<TypeError> for BadReview {
    fn from(e: TypeError) -> Self {
        BadReview::Shape(e)
    }
}

/// Reads the envelope: `apiVersion`, `kind` and the `request` fields.
pub fn parse<'t, 'i>(root: Val<'t, 'i>) -> Result<(ApiVersion, Request<'t, 'i>), BadReview> {
    let (mut api_version, mut kind, mut request) = ("", "", None);
    for (key, v) in json::object(root, "(root)")? {
        match key {
            "apiVersion" => api_version = json::string(v, "apiVersion")?,
            "kind" => kind = json::string(v, "kind")?,
            "request" => request = Some(v),
            _ => {}
        }
    }
    let version = match (api_version, kind) {
        ("admission.k8s.io/v1", "AdmissionReview") => ApiVersion::V1,
        ("admission.k8s.io/v1beta1", "AdmissionReview") => ApiVersion::V1Beta1,
        _ => {
            return Err(BadReview::NotAdmissionReview {
                api_version: api_version.into(),
                kind: kind.into(),
            });
        }
    };
    let missing = |field| TypeError {
        field: Cow::Borrowed(field),
        expected: "a value",
        found: Cow::Borrowed("none"),
    };
    let request = request
        .filter(|r| !r.is_null())
        .ok_or_else(|| missing("request"))?;
    let mut req = Request {
        uid: "",
        group: "",
        kind: "",
        sub_resource: "",
        name: "",
        namespace: "",
        operation: None,
        operation_raw: "",
        object: None,
        old_object: None,
        old_object_text: None,
    };
    for (key, v) in json::object(request, "request")? {
        match key {
            "uid" => req.uid = json::string(v, "request.uid")?,
            "kind" => {
                for (key, v) in json::object(v, "request.kind")? {
                    match key {
                        "group" => req.group = json::string(v, "request.kind.group")?,
                        "kind" => req.kind = json::string(v, "request.kind.kind")?,
                        _ => {}
                    }
                }
            }
            "subResource" if !v.is_null() => {
                req.sub_resource = json::string(v, "request.subResource")?
            }
            "name" if !v.is_null() => req.name = json::string(v, "request.name")?,
            "namespace" if !v.is_null() => req.namespace = json::string(v, "request.namespace")?,
            "operation" => req.operation_raw = json::string(v, "request.operation")?,
            "object" if !v.is_null() => req.object = Some(v),
            "oldObject" if !v.is_null() => req.old_object = Some(v),
            _ => {}
        }
    }
    if req.uid.is_empty() {
        return Err(missing("request.uid").into());
    }
    req.operation = match req.operation_raw {
        "CREATE" => Some(Operation::Create),
        "UPDATE" => Some(Operation::Update),
        "DELETE" => Some(Operation::Delete),
        "CONNECT" => Some(Operation::Connect),
        _ => None,
    };
    Ok((version, req))
}

/// Whether JSON text stops inside a string or an unclosed object/array: simd-json reports a
/// plain syntax error there, and "truncated" tells the sender more. Only runs on the error path.
pub(super) fn ends_open(text: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    in_string || depth > 0
}
