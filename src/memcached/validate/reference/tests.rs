//! The reference's validation tests: every table, boundary and aggregation case of
//! `api/v1beta1/memcached_validation_webhook_test.go` in C5C3/memcached-operator v0.4.0, commit
//! 645e461, asserting the field path, message and order.

use crate::memcached::validate::test_support::*;
use serde_json::{Value as J, json};

const MEM: &str = "spec.resources.limits.memory: Invalid value: ";

#[test]
fn memory_limit_table() {
    let limit = |mb: i64, memory: J| json!({"memcached": {"maxMemoryMB": mb}, "resources": {"limits": {"memory": memory}}});
    let at_least_96 = "memory limit must be at least 96Mi: maxMemoryMB=64 (64Mi) + 32Mi overhead";
    table(&[
        (limit(64, json!("96Mi")), &[]),
        (limit(64, json!("128Mi")), &[]),
        (
            limit(64, json!("95Mi")),
            &[&format!("{MEM}\"95Mi\": {at_least_96}")],
        ),
        (
            limit(64, json!("64Mi")),
            &[&format!("{MEM}\"64Mi\": {at_least_96}")],
        ),
        // 96Mi - 1 byte, as a string and as a JSON number.
        (
            limit(64, json!("100663295")),
            &[&format!("{MEM}\"100663295\": {at_least_96}")],
        ),
        (
            limit(64, json!(100663295)),
            &[&format!("{MEM}\"100663295\": {at_least_96}")],
        ),
        (limit(64, json!(100663296)), &[]),
        // Decimal suffixes, exponents and fractions compare exactly.
        (
            limit(64, json!("100M")),
            &[&format!("{MEM}\"100M\": {at_least_96}")],
        ),
        (limit(64, json!("101M")), &[]),
        (
            limit(64, json!("1e8")),
            &[&format!("{MEM}\"100e6\": {at_least_96}")],
        ),
        (limit(64, json!("0.1Gi")), &[]),
        (
            limit(64, json!("0.09Gi")),
            &[&format!("{MEM}\"96636764160m\": {at_least_96}")],
        ),
        // 992 + 32 = 1024Mi prints as 1Gi.
        (limit(992, json!("1Gi")), &[]),
        (
            limit(992, json!("1023Mi")),
            &[&format!(
                "{MEM}\"1023Mi\": memory limit must be at least 1Gi: maxMemoryMB=992 (992Mi) + 32Mi overhead"
            )],
        ),
        // CPU-only limits and an empty limits map are skipped.
        (
            json!({"memcached": {"maxMemoryMB": 64}, "resources": {"limits": {"cpu": "1"}}}),
            &[],
        ),
        (
            json!({"memcached": {"maxMemoryMB": 64}, "resources": {"limits": {}}}),
            &[],
        ),
        // The reference skips a nil `spec.memcached`; after defaulting it is maxMemoryMB 64.
        (
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
            &[&format!("{MEM}\"64Mi\": {at_least_96}")],
        ),
        // maxMemoryMB 0 is defaulted to 64 too.
        (
            limit(0, json!("64Mi")),
            &[&format!("{MEM}\"64Mi\": {at_least_96}")],
        ),
        // Not a quantity: reported at the field (the reference could not even decode it).
        (
            limit(64, json!("64 Mi")),
            &[&format!(
                "{MEM}\"64 Mi\": quantity contains whitespace; write it without spaces, e.g. 1Gi"
            )],
        ),
        (
            limit(64, json!(true)),
            &[&format!(
                "{MEM}true: must be a quantity: a string such as 128Mi, or a number"
            )],
        ),
    ]);
}

const PDB_BOTH: &str = "spec.highAvailability.podDisruptionBudget: Invalid value: \"minAvailable=1, maxUnavailable=1\": minAvailable and maxUnavailable are mutually exclusive, specify only one";

fn pdb(replicas: J, pdb: J) -> J {
    let mut spec = json!({"highAvailability": {"podDisruptionBudget": pdb}});
    if !replicas.is_null() {
        spec["replicas"] = replicas;
    }
    spec
}

#[test]
fn pdb_table() {
    let min_3_of_3 = "spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: 3: minAvailable (3) must be less than replicas (3)";
    table(&[
        (
            pdb(
                json!(3),
                json!({"enabled": false, "minAvailable": 1, "maxUnavailable": 1}),
            ),
            &[],
        ),
        (pdb(json!(3), json!({"enabled": false})), &[]),
        (
            pdb(
                json!(3),
                json!({"enabled": true, "minAvailable": 1, "maxUnavailable": 1}),
            ),
            &[PDB_BOTH],
        ),
        // Both set: only R2 (R4 needs maxUnavailable unset).
        (
            pdb(
                json!(3),
                json!({"enabled": true, "minAvailable": 5, "maxUnavailable": "25%"}),
            ),
            &[
                "spec.highAvailability.podDisruptionBudget: Invalid value: \"minAvailable=5, maxUnavailable=25%\": minAvailable and maxUnavailable are mutually exclusive, specify only one",
            ],
        ),
        (pdb(json!(3), json!({"enabled": true})), &[PDB_NEITHER]),
        (
            pdb(
                json!(3),
                json!({"enabled": true, "minAvailable": null, "maxUnavailable": null}),
            ),
            &[PDB_NEITHER],
        ),
        (
            pdb(json!(3), json!({"enabled": true, "minAvailable": 2})),
            &[],
        ),
        (
            pdb(json!(3), json!({"enabled": true, "minAvailable": 3})),
            &[min_3_of_3],
        ),
        (
            pdb(json!(3), json!({"enabled": true, "minAvailable": 4})),
            &[
                "spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: 4: minAvailable (4) must be less than replicas (3)",
            ],
        ),
        (
            pdb(json!(1), json!({"enabled": true, "minAvailable": 0})),
            &[],
        ),
        // A percentage skips R4.
        (
            pdb(json!(1), json!({"enabled": true, "minAvailable": "50%"})),
            &[],
        ),
        (
            pdb(json!(3), json!({"enabled": true, "maxUnavailable": 1})),
            &[],
        ),
        (
            pdb(json!(3), json!({"enabled": true, "maxUnavailable": "25%"})),
            &[],
        ),
        // Unset replicas become 1 after defaulting, so R4 applies to them.
        (
            pdb(J::Null, json!({"enabled": true, "minAvailable": 1})),
            &[
                "spec.highAvailability.podDisruptionBudget.minAvailable: Invalid value: 1: minAvailable (1) must be less than replicas (1)",
            ],
        ),
        // With autoscaling there are no replicas to compare with: R4 is skipped.
        (
            autoscaling(
                json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
            ),
            &[],
        ),
    ]);
}

#[test]
fn secret_ref_table() {
    const SASL: &str = "spec.security.sasl.credentialsSecretRef.name: Required value: credentialsSecretRef.name is required when SASL is enabled";
    const TLS: &str = "spec.security.tls.certificateSecretRef.name: Required value: certificateSecretRef.name is required when TLS is enabled";
    let security = |s: J| json!({"security": s});
    table(&[
        (security(json!({"sasl": {"enabled": true}})), &[SASL]),
        (
            security(json!({"sasl": {"enabled": true, "credentialsSecretRef": {"name": ""}}})),
            &[SASL],
        ),
        (
            security(json!({"sasl": {"enabled": true, "credentialsSecretRef": {}}})),
            &[SASL],
        ),
        (
            security(json!({"sasl": {"enabled": true, "credentialsSecretRef": {"name": "s"}}})),
            &[],
        ),
        (security(json!({"sasl": {"enabled": false}})), &[]),
        (security(json!({"tls": {"enabled": true}})), &[TLS]),
        (
            security(json!({"tls": {"enabled": true, "certificateSecretRef": {"name": ""}}})),
            &[TLS],
        ),
        (
            security(json!({"tls": {"enabled": true, "certificateSecretRef": {"name": "t"}}})),
            &[],
        ),
        (security(json!({"tls": {"enabled": false}})), &[]),
        (
            security(json!({"sasl": {"enabled": true}, "tls": {"enabled": true}})),
            &[SASL, TLS],
        ),
        (security(json!({"sasl": null, "tls": null})), &[]),
        (security(json!(null)), &[]),
    ]);
}

#[test]
fn graceful_shutdown_table() {
    let gs = |g: J| json!({"highAvailability": {"gracefulShutdown": g}});
    let grace = |g: i64, p: i64| {
        format!(
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: {g}: terminationGracePeriodSeconds ({g}) must exceed preStopDelaySeconds ({p})"
        )
    };
    table(&[
        (
            gs(
                json!({"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 30}),
            ),
            &[],
        ),
        (
            gs(
                json!({"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 11}),
            ),
            &[],
        ),
        (
            gs(
                json!({"enabled": true, "preStopDelaySeconds": 10, "terminationGracePeriodSeconds": 10}),
            ),
            &[&grace(10, 10)],
        ),
        (
            gs(
                json!({"enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 10}),
            ),
            &[&grace(10, 30)],
        ),
        (
            gs(
                json!({"enabled": false, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 10}),
            ),
            &[],
        ),
        // Absent values are the CRD defaults 10 and 30 (the apiserver fills them in first).
        (gs(json!({"enabled": true})), &[]),
        (
            gs(json!({"enabled": true, "preStopDelaySeconds": 30})),
            &[&grace(30, 30)],
        ),
        (
            gs(json!({"enabled": true, "terminationGracePeriodSeconds": 10})),
            &[&grace(10, 10)],
        ),
        // Explicit zeros stay zeros, as in the Go unit tests: 0 <= 0.
        (
            gs(
                json!({"enabled": true, "preStopDelaySeconds": 0, "terminationGracePeriodSeconds": 0}),
            ),
            &[&grace(0, 0)],
        ),
    ]);
}

#[test]
fn autoscaling_replicas_are_mutually_exclusive() {
    let mutex = |n: i64| {
        format!(
            "spec.replicas: Invalid value: {n}: spec.replicas and spec.autoscaling.enabled are mutually exclusive"
        )
    };
    table(&[
        (autoscaling(json!({"replicas": 3})), &[&mutex(3)]),
        (autoscaling(json!({"replicas": 0})), &[&mutex(0)]),
        (autoscaling(json!({})), &[]),
        (autoscaling(json!({"replicas": null})), &[]),
        (
            json!({"replicas": 3, "autoscaling": {"enabled": false}}),
            &[],
        ),
    ]);
}

#[test]
fn autoscaling_min_not_above_max() {
    let min_max = |min: i64, max: i64| {
        format!(
            "spec.autoscaling.minReplicas: Invalid value: {min}: minReplicas ({min}) must not exceed maxReplicas ({max})"
        )
    };
    let scaling = |a: J| autoscaling(json!({"autoscaling": a}));
    table(&[
        (
            scaling(json!({"minReplicas": 10, "maxReplicas": 5})),
            &[&min_max(10, 5)],
        ),
        (
            scaling(json!({"minReplicas": 5, "maxReplicas": 3})),
            &[&min_max(5, 3)],
        ),
        (scaling(json!({"minReplicas": 5, "maxReplicas": 5})), &[]),
        (scaling(json!({"minReplicas": 3, "maxReplicas": 5})), &[]),
        (scaling(json!({"minReplicas": null})), &[]),
        (
            json!({"autoscaling": {"enabled": false, "minReplicas": 10, "maxReplicas": 5}}),
            &[],
        ),
    ]);
}

#[test]
fn autoscaling_cpu_utilization_needs_a_cpu_request() {
    let metric = |name: &str, target: J| json!([{"type": "Resource", "resource": {"name": name, "target": target}}]);
    let cpu_util = metric(
        "cpu",
        json!({"type": "Utilization", "averageUtilization": 70}),
    );
    let with = |requests: J, metrics: J| {
        json!({"resources": {"requests": requests},
               "autoscaling": {"enabled": true, "maxReplicas": 5, "metrics": metrics}})
    };
    let without = |metrics: J| json!({"autoscaling": {"enabled": true, "maxReplicas": 5, "metrics": metrics}});
    table(&[
        (without(cpu_util.clone()), &[CPU]),
        (with(json!({"cpu": "250m"}), cpu_util.clone()), &[]),
        // The value is not checked, only the key.
        (with(json!({"cpu": "0"}), cpu_util.clone()), &[]),
        (with(json!({"memory": "64Mi"}), cpu_util.clone()), &[CPU]),
        (
            without(metric(
                "cpu",
                json!({"type": "AverageValue", "averageValue": "500m"}),
            )),
            &[],
        ),
        // A memory utilization metric needs no CPU request (its memory request: below).
        (
            with(
                json!({"memory": "64Mi"}),
                metric(
                    "memory",
                    json!({"type": "Utilization", "averageUtilization": 70}),
                ),
            ),
            &[],
        ),
        (
            json!({"autoscaling": {"enabled": false, "metrics": cpu_util}}),
            &[],
        ),
        // No metrics (absent, null, []): the defaulter injects the CPU utilization metric.
        (
            json!({"autoscaling": {"enabled": true, "maxReplicas": 5}}),
            &[CPU],
        ),
        (without(json!(null)), &[CPU]),
        (without(json!([])), &[CPU]),
        (with(json!({"cpu": "1"}), json!([])), &[]),
    ]);
}
