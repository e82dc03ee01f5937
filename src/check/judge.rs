//! One Memcached through both webhooks, as the apiserver would put it on CREATE: an
//! AdmissionReview to the mutating webhook, its patch applied, the result to the validating
//! webhook; the verdict as a [`Judgement`].

use base64::Engine as _;
use serde_json::{Value, json};

use crate::admission::{self, Webhook};
use crate::crd;

/// What the two webhooks made of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub allowed: bool,
    /// The object after the mutating webhook's patch.
    pub object: Value,
    /// Each reason for a denial.
    pub violations: Vec<Violation>,
    /// Both webhooks' warnings, mutating first.
    pub warnings: Vec<String>,
}

/// One reason for a denial: a cause of the webhook's status, or its message when it names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The field path (`spec.replicas`); empty when the denial names no field.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    /// `field: message`, as apimachinery prints a field error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl Violation {
    fn message(message: String) -> Self {
        Violation {
            field: String::new(),
            message,
        }
    }
}

/// Judges one Memcached as the apiserver would on CREATE: mutate, apply the patch, validate.
/// An object the mutating webhook cannot read (a wrongly typed field) is also put to the
/// validating webhook as it is, whose answer names every wrongly typed field and every rule
/// the rest breaks: the whole list at once, where the apiserver would stop at the first webhook.
pub fn judge(object: &Value) -> Judgement {
    let mut judgement = Judgement {
        allowed: false,
        object: object.clone(),
        violations: Vec::new(),
        warnings: Vec::new(),
    };
    let response = match call(Webhook::Mutate, object) {
        Ok(response) => response,
        Err(message) => {
            judgement.violations.push(Violation::message(message));
            return judgement;
        }
    };
    if !read_answer(&response, &mut judgement) {
        let causes = response["status"]["details"]["causes"].as_array();
        if response["status"]["code"] == 400
            && causes.is_some_and(|c| !c.is_empty())
            && let Ok(validated) = call(Webhook::Validate, object)
            && validated["status"]["code"] == 422
        {
            judgement.violations.clear();
            read_answer(&validated, &mut judgement);
        }
        return judgement;
    }
    if let Some(patch) = response["patch"].as_str()
        && let Err(e) = apply(&mut judgement.object, patch)
    {
        judgement.violations.push(Violation::message(format!(
            "the mutating webhook's patch does not apply, so the apiserver would refuse it: {e}"
        )));
        return judgement;
    }
    match call(Webhook::Validate, &judgement.object) {
        Ok(response) => judgement.allowed = read_answer(&response, &mut judgement),
        Err(message) => judgement.violations.push(Violation::message(message)),
    }
    judgement
}

/// One AdmissionReview through the server's own code; the answer's `response`.
fn call(webhook: Webhook, object: &Value) -> Result<Value, String> {
    let (group, version) = api_version(object)
        .split_once('/')
        .unwrap_or(("", "v1beta1"));
    let metadata = &object["metadata"];
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "memcached-webhook-check",
            "kind": {"group": group, "version": version, "kind": crd::KIND},
            "resource": {"group": group, "version": version, "resource": "memcacheds"},
            "name": metadata["name"].as_str().unwrap_or(""),
            "namespace": metadata["namespace"].as_str().unwrap_or(""),
            "operation": "CREATE",
            "object": object,
            "oldObject": null,
        },
    });
    let mut body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    // `Review::new` denies: `check` answers what would be refused, whatever a cluster's
    // --validation-actions.
    admission::Review::new(webhook)
        .answer(&mut body, &mut out)
        .map_err(|e| format!("the webhook cannot read the object: {e}"))?;
    let mut answer: Value = serde_json::from_slice(&out)
        .map_err(|e| format!("the webhook's answer is not JSON: {e}"))?;
    Ok(answer["response"].take())
}

/// Collects a response's warnings and violations; whether it allowed the object.
fn read_answer(response: &Value, judgement: &mut Judgement) -> bool {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect()
    };
    judgement.warnings.extend(strings(&response["warnings"]));
    if response["allowed"] == true {
        return true;
    }
    let status = &response["status"];
    let causes = status["details"]["causes"].as_array();
    match causes {
        Some(causes) if !causes.is_empty() => {
            for cause in causes {
                judgement.violations.push(Violation {
                    field: cause["field"].as_str().unwrap_or("").to_owned(),
                    message: cause["message"].as_str().unwrap_or("").to_owned(),
                });
            }
        }
        _ => judgement.violations.push(Violation::message(
            status["message"].as_str().unwrap_or("denied").to_owned(),
        )),
    }
    false
}

/// Applies the base64 JSON Patch of an AdmissionResponse.
fn apply(object: &mut Value, patch: &str) -> Result<(), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| format!("the patch is not base64: {e}"))?;
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a JSON Patch: {e}"))?;
    json_patch::patch(object, &patch).map_err(|e| e.to_string())
}

fn api_version(object: &Value) -> &str {
    object["apiVersion"].as_str().unwrap_or("")
}

/// Whether the webhooks judge this object: kind Memcached in the memcached.c5c3.io group, any
/// version (the webhook configuration's rules name the group and resource).
pub fn is_memcached(object: &Value) -> bool {
    object["kind"] == crd::KIND
        && api_version(object).split_once('/').map(|(g, _)| g) == Some(crd::GROUP)
}

/// Fields the apiserver sets itself: dropped before judging (on CREATE it resets them, and a
/// CRD with a status subresource ignores `status`) and from printed objects.
pub fn strip_server_fields(object: &mut Value) {
    let Value::Object(fields) = object else {
        return;
    };
    fields.remove("status");
    if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
        for name in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            metadata.remove(name);
        }
    }
}

#[cfg(test)]
mod tests;
