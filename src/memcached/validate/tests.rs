//! The entry points' tests: valid objects pass, every violation is reported in the reference's
//! order, and defaulting first changes no verdict.

use crate::memcached::validate::test_support::*;
use serde_json::json;

#[test]
fn valid_minimal_cr() {
    for spec in [json!({}), json!(null)] {
        let o = outcome(spec);
        assert!(o.errors.is_empty() && o.warnings.is_empty(), "{o:?}");
    }
    let o = outcome_of(&json!({"metadata": {"name": "c"}}));
    assert!(o.errors.is_empty() && o.warnings.is_empty());
}

#[test]
fn fully_populated_valid_cr() {
    let o = outcome(json!({
        "replicas": 3,
        "image": "memcached:1.6",
        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m"},
        "resources": {"limits": {"memory": "128Mi"}},
        "highAvailability": {
            "podDisruptionBudget": {"enabled": true, "minAvailable": 2},
            "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30}
        },
        "security": {
            "sasl": {"enabled": true, "credentialsSecretRef": {"name": "sasl"}},
            "tls": {"enabled": true, "certificateSecretRef": {"name": "tls"}}
        }
    }));
    assert!(o.errors.is_empty() && o.warnings.is_empty(), "{o:?}");
}

#[test]
fn every_violation_is_reported_in_the_reference_order() {
    // The fixture `invalid-spec.json`: four violations.
    let got = errors(json!({
        "replicas": 3,
        "memcached": {"maxMemoryMB": 64},
        "resources": {"limits": {"memory": "64Mi"}},
        "autoscaling": {"enabled": true, "minReplicas": 10, "maxReplicas": 5}
    }));
    assert_eq!(
        got,
        [
            "spec.resources.limits.memory: Invalid value: \"64Mi\": memory limit must be at least 96Mi: maxMemoryMB=64 (64Mi) + 32Mi overhead",
            "spec.replicas: Invalid value: 3: spec.replicas and spec.autoscaling.enabled are mutually exclusive",
            "spec.autoscaling.minReplicas: Invalid value: 10: minReplicas (10) must not exceed maxReplicas (5)",
            CPU,
        ]
    );
    // Three at once from different rules, in rule order.
    let got = errors(json!({
        "replicas": 3,
        "highAvailability": {"podDisruptionBudget": {"enabled": true},
                             "gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 10}},
        "security": {"tls": {"enabled": true}}
    }));
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], PDB_NEITHER);
    assert!(
        got[1].starts_with("spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds")
    );
    assert!(got[2].starts_with("spec.security.tls.certificateSecretRef.name"));
}

#[test]
fn defaulting_first_changes_nothing() {
    let specs = [
        json!({}),
        json!({"memcached": {}}),
        json!({"memcached": {"maxMemoryMB": 0, "maxItemSize": "", "threads": 0, "maxConnections": 0}}),
        json!({"memcached": {"maxItemSize": "40m"}}),
        json!({"memcached": {"threads": 128}}),
        json!({"memcached": {"threads": 300}}),
        json!({"resources": {"limits": {"memory": "64Mi"}}}),
        json!({"resources": {"limits": {"memory": "100Mi"}}}),
        json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        json!({"highAvailability": {}}),
        json!({"monitoring": {"serviceMonitor": {"interval": "5s"}}}),
        json!({"monitoring": {"serviceMonitor": {}}}),
        json!({"monitoring": {"exporterImage": "bad:"}}),
        json!({"image": ""}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": []}}),
        autoscaling(json!({})),
        autoscaling(
            json!({"autoscaling": {"minReplicas": 0, "behavior": {"scaleUp": {"selectPolicy": "x"}}}}),
        ),
        json!({"autoscaling": {"enabled": false, "minReplicas": 3}}),
        json!({"highAvailability": {"gracefulShutdown": {"enabled": true}}}),
        json!({"monitoring": {"enabled": true}, "autoscaling": {"enabled": true, "maxReplicas": 3}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}}
        ]}}),
    ];
    for spec in specs {
        let object = json!({"metadata": {"name": "c"}, "spec": spec});
        let before = outcome_of(&object);
        let after = outcome_of(&defaulted(&object));
        assert_eq!(before.errors, after.errors, "{object}");
        assert_eq!(before.warnings, after.warnings, "{object}");
    }
    // R8 is the exception: the defaulter removes the replicas it exists to catch.
    let object = json!({"spec": autoscaling(json!({"replicas": 3}))});
    assert_eq!(outcome_of(&object).errors.len(), 1);
    assert!(outcome_of(&defaulted(&object)).errors.is_empty());
}

#[test]
fn a_typical_valid_object_allocates_no_errors_or_warnings() {
    let o = outcome(json!({
        "replicas": 3, "image": "memcached:1.6.28",
        "memcached": {"maxMemoryMB": 256, "maxConnections": 2048, "threads": 4, "maxItemSize": "2m"},
        "resources": {"limits": {"memory": "512Mi"}, "requests": {"cpu": "250m"}},
        "monitoring": {"enabled": true, "serviceMonitor": {"interval": "30s", "scrapeTimeout": "10s"}},
        "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 2}}
    }));
    assert_eq!(o.errors.capacity(), 0);
    assert_eq!(o.warnings.capacity(), 0);
}

/// The guard every rule's test runs its errors through (`test_support::outcome_of`) refuses
/// the fields ratcheting cannot compare in the reader's tape.
#[test]
fn ratcheting_compares_only_what_the_reader_reads_whole() {
    use super::test_support::compared_as_read;
    for field in [
        "spec.highAvailability.podDisruptionBudget",
        "spec.replicas",
        "spec.memcached.extraArgs[0]",
        "spec.monitoring.serviceMonitor.interval",
    ] {
        assert!(compared_as_read(field), "{field}");
    }
    for field in [
        "",
        "metadata",
        "spec",
        "spec.highAvailability",
        "spec.monitoring.serviceMonitor",
        "spec.highAvailability.topologySpreadConstraints",
        "spec.service.annotations",
        "metadata.labels",
    ] {
        assert!(!compared_as_read(field), "{field}");
    }
}
