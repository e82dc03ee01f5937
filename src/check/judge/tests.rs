use serde_json::json;

use super::*;

fn memcached(spec: Value) -> Value {
    json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
           "metadata": {"name": "c", "namespace": "ns"}, "spec": spec})
}

#[test]
fn an_admitted_object_comes_back_defaulted() {
    let judgement = judge(&memcached(json!({})));
    assert!(judgement.allowed, "{judgement:?}");
    assert!(judgement.violations.is_empty());
    assert_eq!(
        judgement.object["spec"]["replicas"], 1,
        "{}",
        judgement.object
    );
}

#[test]
fn a_denial_lists_each_field() {
    let judgement = judge(&memcached(
        json!({"autoscaling": {"enabled": true, "minReplicas": 5, "maxReplicas": 2}}),
    ));
    assert!(!judgement.allowed);
    assert!(
        judgement
            .violations
            .iter()
            .any(|v| v.field.starts_with("spec.autoscaling.")),
        "{judgement:?}"
    );
}

#[test]
fn a_wrongly_typed_field_is_a_denial_naming_it() {
    let judgement = judge(&memcached(json!({"replicas": "three"})));
    assert!(!judgement.allowed);
    assert_eq!(judgement.violations.len(), 1);
    assert_eq!(
        judgement.violations[0].field, "spec.replicas",
        "{judgement:?}"
    );
}

#[test]
fn every_wrongly_typed_field_and_every_violation_is_listed() {
    let judgement = judge(&memcached(json!({"replicas": "three", "image": 7,
        "security": {"sasl": {"enabled": true}}})));
    assert!(!judgement.allowed);
    let fields: Vec<_> = judgement
        .violations
        .iter()
        .map(|v| v.field.as_str())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.image",
            "spec.replicas",
            "spec.security.sasl.credentialsSecretRef.name"
        ]
    );
}

#[test]
fn only_memcacheds_of_the_group_are_judged() {
    assert!(is_memcached(&memcached(json!({}))));
    assert!(is_memcached(
        &json!({"apiVersion": "memcached.c5c3.io/v1alpha9", "kind": "Memcached"})
    ));
    assert!(!is_memcached(
        &json!({"apiVersion": "cache.example.com/v1", "kind": "Memcached"})
    ));
    assert!(!is_memcached(
        &json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "MemcachedList"})
    ));
}

#[test]
fn server_set_fields_are_dropped() {
    let mut object = json!({"kind": "Memcached", "status": {"readyReplicas": 1},
        "metadata": {"name": "c", "uid": "u", "resourceVersion": "7", "generation": 2,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": [],
                     "labels": {"a": "b"}}});
    strip_server_fields(&mut object);
    assert_eq!(
        object,
        json!({"kind": "Memcached", "metadata": {"name": "c", "labels": {"a": "b"}}})
    );
}
