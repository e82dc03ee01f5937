//! Ratcheting: only the violations an update introduces count.

use crate::memcached::validate::test_support::*;
use crate::memcached::validate::*;
use serde_json::{Value as J, json};

/// Ratchets `new` (defaulted, as the validating webhook receives it) against the stored `old`
/// (as given: defaulted or not): (errors the update introduces, errors already stored).
fn ratchet_of(old: &J, new: &J) -> (Vec<String>, Vec<String>) {
    let new = defaulted(new);
    let (mut old_bytes, mut new_bytes) = (
        serde_json::to_vec(old).unwrap(),
        serde_json::to_vec(&new).unwrap(),
    );
    let old_tape = simd_json::to_tape(&mut old_bytes).unwrap();
    let new_tape = simd_json::to_tape(&mut new_bytes).unwrap();
    let (old_root, new_root) = (Val::root(&old_tape), Val::root(&new_tape));
    let old_errors = validate(&crate::memcached::read(old_root).unwrap()).errors;
    let errors = validate(&crate::memcached::read(new_root).unwrap()).errors;
    let (added, stored) = ratchet(errors, &old_errors, new_root, old_root);
    let strings = |v: Vec<FieldError>| v.iter().map(ToString::to_string).collect();
    (strings(added), strings(stored))
}

/// Both shapes of a stored object: as written before any defaulting webhook, and defaulted.
fn stored(spec: J) -> [J; 2] {
    let object = json!({"metadata": {"name": "c"}, "spec": spec});
    [defaulted(&object), object]
}

fn updated(spec: J) -> J {
    json!({"metadata": {"name": "c", "labels": {"team": "a"}}, "spec": spec})
}

#[test]
fn a_violation_already_stored_does_not_count_again() {
    let spec = json!({"memcached": {"maxItemSize": "100k"}});
    for old in stored(spec.clone()) {
        let (added, kept) = ratchet_of(&old, &updated(spec.clone()));
        assert!(added.is_empty(), "{old}: {added:?}");
        assert_eq!(kept.len(), 1, "{old}");
        assert!(
            kept[0].starts_with("spec.memcached.maxItemSize: Invalid value: \"100k\""),
            "{kept:?}"
        );
    }
}

#[test]
fn another_bad_value_is_a_new_violation() {
    for old in stored(json!({"memcached": {"maxItemSize": "100k"}})) {
        let (added, kept) = ratchet_of(
            &old,
            &updated(json!({"memcached": {"maxItemSize": "200k"}})),
        );
        assert_eq!(added.len(), 1, "{old}");
        assert!(added[0].contains("\"200k\""), "{added:?}");
        assert!(kept.is_empty(), "{kept:?}");
    }
}

#[test]
fn only_the_new_violation_is_new() {
    for old in stored(json!({"memcached": {"maxItemSize": "100k"}})) {
        let new = updated(json!({"memcached": {"maxItemSize": "100k"}, "image": "bad:"}));
        let (added, kept) = ratchet_of(&old, &new);
        assert_eq!(added.len(), 1, "{added:?}");
        assert!(
            added[0].starts_with("spec.image: Invalid value: \"bad:\""),
            "{added:?}"
        );
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert!(
            kept[0].starts_with("spec.memcached.maxItemSize"),
            "{kept:?}"
        );
    }
}

#[test]
fn a_violation_on_a_default_ratchets_in_both_shapes() {
    // maxItemSize is absent (or Go's zero ""): judged as the default 1m, which is above half of
    // a 1 MiB maxMemoryMB. The defaulted update has "1m" written out: the same violation.
    for spec in [
        json!({"memcached": {"maxMemoryMB": 1}}),
        json!({"memcached": {"maxMemoryMB": 1, "maxItemSize": ""}}),
    ] {
        for old in stored(spec.clone()) {
            let (added, kept) = ratchet_of(&old, &updated(spec.clone()));
            assert!(added.is_empty(), "{old}: {added:?}");
            assert_eq!(kept.len(), 1, "{old}: {kept:?}");
        }
    }
}

#[test]
fn messages_without_the_value_compare_the_value() {
    // R2 names the PodDisruptionBudget, not its values: changing one while both stay set is new.
    let both = |min| {
        json!({"replicas": 3, "highAvailability": {"podDisruptionBudget":
            {"enabled": true, "minAvailable": min, "maxUnavailable": 1}}})
    };
    for old in stored(both(1)) {
        assert_eq!(ratchet_of(&old, &updated(both(1))).1.len(), 1, "{old}");
        let (added, kept) = ratchet_of(&old, &updated(both(2)));
        assert_eq!((added.len(), kept.len()), (1, 0), "{old}");
    }
    // Forbidden names no value either: a changed forbidden member is a new violation.
    let forbidden = |qps| {
        autoscaling(json!({"autoscaling": {"metrics": [{"type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
            "pods": {"metric": {"name": qps}, "target": {"type": "AverageValue", "averageValue": "10"}}}]}}))
    };
    for old in stored(forbidden("qps")) {
        let (added, kept) = ratchet_of(&old, &updated(forbidden("qps")));
        assert_eq!((added.len(), kept.len()), (0, 1), "{old}: {added:?}");
        let (added, kept) = ratchet_of(&old, &updated(forbidden("rps")));
        assert_eq!((added.len(), kept.len()), (1, 0), "{old}: {kept:?}");
    }
    // A container where a string belongs is shown by its shape: its content is compared.
    let typed = |a| autoscaling(json!({"autoscaling": {"metrics": [{"type": {"a": a}}]}}));
    let shape = |errors: &[String]| {
        let typed = "spec.autoscaling.metrics[0].type: Invalid value: {...}";
        errors.iter().filter(|e| e.starts_with(typed)).count()
    };
    for old in stored(typed(1)) {
        let (added, kept) = ratchet_of(&old, &updated(typed(1)));
        assert_eq!((shape(&added), shape(&kept)), (0, 1), "{old}: {kept:?}");
        let (added, kept) = ratchet_of(&old, &updated(typed(2)));
        assert_eq!((shape(&added), shape(&kept)), (1, 0), "{old}: {added:?}");
    }
    // Required: still absent is still the same violation.
    let no_cpu = json!({"autoscaling": {"enabled": true, "maxReplicas": 3}});
    let more = json!({"autoscaling": {"enabled": true, "maxReplicas": 4}});
    for old in stored(no_cpu) {
        let (added, kept) = ratchet_of(&old, &updated(more.clone()));
        assert_eq!(added, Vec::<String>::new(), "{old}");
        assert_eq!(kept, [CPU], "{old}");
    }
}

#[test]
fn a_fix_leaves_nothing() {
    for old in stored(json!({"memcached": {"maxItemSize": "100k"}})) {
        let (added, kept) = ratchet_of(
            &old,
            &updated(json!({"memcached": {"maxItemSize": "512k"}})),
        );
        assert!(added.is_empty() && kept.is_empty(), "{added:?} {kept:?}");
    }
}
