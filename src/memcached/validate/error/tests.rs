//! The error model's tests: the text apimachinery writes, and one metric label per rule.

use crate::memcached::validate::test_support::*;
use crate::memcached::validate::*;
use serde_json::json;

#[test]
fn errors_render_like_apimachinery() {
    let cases = [
        (
            FieldError::invalid("spec.a", "\"x\"".into(), "bad"),
            "spec.a: Invalid value: \"x\": bad",
        ),
        (
            FieldError::required("spec.b", "needed"),
            "spec.b: Required value: needed",
        ),
        (FieldError::required("spec.c", ""), "spec.c: Required value"),
        (
            FieldError {
                field: "spec.d".into(),
                kind: ErrorKind::NotSupported("\"Foo\"".into()),
                detail: "supported values: \"A\", \"B\"".into(),
            },
            "spec.d: Unsupported value: \"Foo\": supported values: \"A\", \"B\"",
        ),
        (
            FieldError {
                field: "spec.e".into(),
                kind: ErrorKind::Forbidden,
                detail: "no".into(),
            },
            "spec.e: Forbidden: no",
        ),
    ];
    // The wire cause is `admission::response`'s (its tests hold the reasons).
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
        assert_eq!(e.message(), text);
    }
}

#[test]
fn every_rule_has_a_label_of_its_own() {
    let cases = [
        (
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
            Rule::MemoryLimit,
        ),
        (
            json!({"highAvailability": {"podDisruptionBudget": {"enabled": true}}}),
            Rule::PodDisruptionBudget,
        ),
        (
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "terminationGracePeriodSeconds": 1}}}),
            Rule::GracefulShutdown,
        ),
        (
            json!({"security": {"sasl": {"enabled": true}}}),
            Rule::SecretRef,
        ),
        (autoscaling(json!({"replicas": 2})), Rule::Replicas),
        (
            json!({"autoscaling": {"enabled": true, "maxReplicas": 3}}),
            Rule::CpuRequest,
        ),
        (
            autoscaling(json!({"autoscaling": {"minReplicas": 9}})),
            Rule::Autoscaling,
        ),
        (
            autoscaling(json!({"autoscaling": {"metrics": [{"type": "X"}]}})),
            Rule::Autoscaling,
        ),
        (json!({"memcached": {"threads": -1}}), Rule::MemcachedFlags),
        (
            json!({"monitoring": {"exporterImage": "bad:"}}),
            Rule::Image,
        ),
        (
            json!({"monitoring": {"serviceMonitor": {"interval": "5x"}}}),
            Rule::ServiceMonitor,
        ),
    ];
    for (spec, rule) in cases {
        let errors = outcome(spec.clone()).errors;
        assert!(!errors.is_empty(), "{spec}");
        for e in errors {
            assert_eq!(e.rule(), rule, "{e}");
        }
    }
    let labels: std::collections::HashSet<_> = Rule::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(labels.len(), Rule::ALL.len());
    assert!(Rule::ALL.iter().enumerate().all(|(i, r)| r.index() == i));
    assert_eq!(Rule::of("spec.memcachedX"), Rule::Other);
}
