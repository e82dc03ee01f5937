//! What the validation tests share: an object judged from JSON, its errors and warnings as
//! strings, a table runner, and the object as the mutating webhook leaves it.

use crate::admission;
use crate::json::Val;
use crate::memcached::validate::{Outcome, validate};
use crate::memcached::{READ, defaults};
use crate::patch::Patch;
use serde_json::{Value as J, json};

/// Validates `{metadata: {name: "c"}, spec}` and returns the outcome. Every error any rule's
/// test sees is held to [`compared_as_read`] here.
pub(super) fn outcome_of(object: &J) -> Outcome {
    let mut bytes = serde_json::to_vec(object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = crate::memcached::read(Val::root(&tape)).expect("the view reads the test object");
    let outcome = validate(&mc);
    for e in outcome.errors.iter().filter(|e| !e.names_value()) {
        assert!(
            compared_as_read(&e.field),
            "{e}: ratcheting would compare emptied members"
        );
    }
    outcome
}

/// Whether ratcheting may compare the JSON at `field` in the tape the admission reader wrote,
/// where the members no rule reads are emptied (`admission::skipped`): it must neither hold
/// such members (the object, `metadata` or a section of `memcached::READ`) nor lie in one. For
/// the errors that do not name their value (`FieldError::names_value`), which ratcheting
/// compares so.
pub(super) fn compared_as_read(field: &str) -> bool {
    // Through objects only: nothing below an array's item is skipped.
    let head = field.split('[').next().unwrap_or_default();
    let path: Vec<&str> = ["request", "object"]
        .into_iter()
        .chain(head.split('.').filter(|c| !c.is_empty()))
        .collect();
    let holds = |path: &[&str]| match path {
        ["request", "object"] | ["request", "object", "metadata"] => true,
        ["request", "object", section @ ..] => READ.iter().any(|(s, _)| *s == section),
        _ => false,
    };
    let lies_in = (3..=path.len()).any(|end| admission::skipped(&path[..end]));
    !lies_in && (field.contains('[') || !holds(&path))
}

pub(super) fn outcome(spec: J) -> Outcome {
    outcome_of(&json!({"metadata": {"name": "c"}, "spec": spec}))
}

/// The error strings, in order.
pub(super) fn errors(spec: J) -> Vec<String> {
    outcome(spec)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub(super) fn warnings(spec: J) -> Vec<String> {
    outcome(spec).warnings
}

/// Runs a table of (spec, expected errors) cases.
pub(super) fn table(cases: &[(J, &[&str])]) {
    for (spec, want) in cases {
        assert_eq!(errors(spec.clone()), *want, "spec: {spec}");
    }
}

/// Merges `extra` into a spec with a valid autoscaling section (a CPU request for R10).
pub(super) fn autoscaling(extra: J) -> J {
    let mut spec = json!({
        "resources": {"requests": {"cpu": "100m"}},
        "autoscaling": {"enabled": true, "maxReplicas": 5}
    });
    merge(&mut spec, extra);
    spec
}

pub(super) fn merge(into: &mut J, from: J) {
    match (into, from) {
        (J::Object(a), J::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(J::Null), v);
            }
        }
        (slot, v) => *slot = v,
    }
}

/// The object after the mutating webhook's patch.
pub(super) fn defaulted(object: &J) -> J {
    let mut bytes = serde_json::to_vec(object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = crate::memcached::read(Val::root(&tape)).unwrap();
    let mut buf = Vec::new();
    let mut patch = Patch::new(&mut buf);
    defaults::apply(&mc.spec, &mut patch, &mut Vec::new());
    let ops: J = patch.finish().map_or(json!([]), |p| {
        serde_json::from_slice(&crate::patch::decoded(p)).unwrap()
    });
    let mut patched = object.clone();
    let p: json_patch::Patch = serde_json::from_value(ops).unwrap();
    json_patch::patch(&mut patched, &p).unwrap();
    patched
}

/// Expected texts that the tests of more than one rule assert.
pub(super) const PDB_NEITHER: &str = "spec.highAvailability.podDisruptionBudget: Required value: one of minAvailable or maxUnavailable must be set when PDB is enabled";
pub(super) const CPU: &str = "spec.resources.requests.cpu: Required value: resources.requests.cpu is required when using CPU utilization metrics";
