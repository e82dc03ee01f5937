//! The reference's validation tests (every table, boundary and aggregation case of
//! `api/v1beta1/memcached_validation_webhook_test.go` in C5C3/memcached-operator v0.4.0, commit
//! 645e461), and a table for every new rule and warning, asserting the field path, message and
//! order.

use super::*;
use crate::memcached::defaults;
use crate::patch::Patch;
use serde_json::{Value as J, json};

/// Validates `{metadata: {name: "c"}, spec}` and returns the outcome.
fn outcome_of(object: &J) -> Outcome {
    let mut bytes = serde_json::to_vec(object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = crate::memcached::read(Val::root(&tape)).expect("the view reads the test object");
    validate(&mc)
}

fn outcome(spec: J) -> Outcome {
    outcome_of(&json!({"metadata": {"name": "c"}, "spec": spec}))
}

/// The error strings, in order.
fn errors(spec: J) -> Vec<String> {
    outcome(spec)
        .errors
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn warnings(spec: J) -> Vec<String> {
    outcome(spec).warnings
}

/// Runs a table of (spec, expected errors) cases.
fn table(cases: &[(J, &[&str])]) {
    for (spec, want) in cases {
        assert_eq!(errors(spec.clone()), *want, "spec: {spec}");
    }
}

/// Merges `extra` into a spec with a valid autoscaling section (a CPU request for R10).
fn autoscaling(extra: J) -> J {
    let mut spec = json!({
        "resources": {"requests": {"cpu": "100m"}},
        "autoscaling": {"enabled": true, "maxReplicas": 5}
    });
    merge(&mut spec, extra);
    spec
}

fn merge(into: &mut J, from: J) {
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
fn defaulted(object: &J) -> J {
    let mut bytes = serde_json::to_vec(object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = crate::memcached::read(Val::root(&tape)).unwrap();
    let mut buf = Vec::new();
    let mut patch = Patch::new(&mut buf);
    defaults::apply(&mc.spec, &mut patch, &mut Vec::new());
    let ops: J = patch
        .finish()
        .map_or(json!([]), |p| serde_json::from_slice(p).unwrap());
    let mut patched = object.clone();
    let p: json_patch::Patch = serde_json::from_value(ops).unwrap();
    json_patch::patch(&mut patched, &p).unwrap();
    patched
}

// === the error shape ===

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
fn go_quote_matches_strconv_quote() {
    assert_eq!(go_quote("64Mi"), r#""64Mi""#);
    assert_eq!(go_quote(""), r#""""#);
    assert_eq!(
        go_quote("a\"b\\c\n\t\u{1}\u{7f}é"),
        r#""a\"b\\c\n\t\x01\x7fé""#
    );
}

// === the reference's tests ===

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
const PDB_NEITHER: &str = "spec.highAvailability.podDisruptionBudget: Required value: one of minAvailable or maxUnavailable must be set when PDB is enabled";

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

const CPU: &str = "spec.resources.requests.cpu: Required value: resources.requests.cpu is required when using CPU utilization metrics";

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

const MEMORY: &str = "spec.resources.requests.memory: not set, but the HPA scales on memory utilization; unless a LimitRange gives the container a default request, the HPA cannot compute it and does not scale (set requests.memory, or limits.memory, which the apiserver copies)";

#[test]
fn a_memory_utilization_hpa_without_a_memory_request_is_warned_about() {
    let memory =
        |target: J| json!({"type": "Resource", "resource": {"name": "memory", "target": target}});
    let utilization = memory(json!({"type": "Utilization", "averageUtilization": 70}));
    let cpu = json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}});
    let spec = |resources: J, metrics: J| {
        json!({"resources": resources,
               "autoscaling": {"enabled": true, "maxReplicas": 5, "metrics": metrics}})
    };
    let cases: &[(J, &[&str], &[&str])] = &[
        (
            spec(json!({"requests": {"cpu": "1"}}), json!([utilization])),
            &[],
            &[MEMORY],
        ),
        (spec(json!(null), json!([utilization])), &[], &[MEMORY]),
        (
            spec(
                json!({"requests": {"memory": "128Mi"}}),
                json!([utilization]),
            ),
            &[],
            &[],
        ),
        // The apiserver copies a limit into the absent request.
        (
            spec(json!({"limits": {"memory": "128Mi"}}), json!([utilization])),
            &[],
            &[],
        ),
        // An AverageValue target needs no request.
        (
            spec(
                json!({}),
                json!([memory(
                    json!({"type": "AverageValue", "averageValue": "100Mi"})
                )]),
            ),
            &[],
            &[],
        ),
        // Both metrics, no requests: R10 denies for CPU, memory is a warning.
        (
            spec(json!({}), json!([cpu, utilization])),
            &[CPU],
            &[MEMORY],
        ),
        // The injected default metric is CPU only.
        (spec(json!({"requests": {"cpu": "1"}}), json!([])), &[], &[]),
        (
            json!({"autoscaling": {"enabled": false, "metrics": [utilization]}}),
            &[],
            &[],
        ),
    ];
    for (spec, errors, warnings) in cases {
        let o = outcome(spec.clone());
        let got: Vec<String> = o.errors.iter().map(ToString::to_string).collect();
        assert_eq!(got, *errors, "{spec}");
        assert_eq!(o.warnings, *warnings, "{spec}");
    }
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

// === new rules: memcached starts ===

const ITEM: &str = "spec.memcached.maxItemSize: Invalid value: ";

fn mc(config: J) -> J {
    json!({"memcached": config})
}

#[test]
fn item_size_table() {
    let size = |s: &str| mc(json!({"maxItemSize": s}));
    let sized = |mb: i64, s: &str| mc(json!({"maxMemoryMB": mb, "maxItemSize": s}));
    let grammar = "memcached reads a size as whole digits with an optional k or m suffix and misreads anything else; write e.g. 512k, 1m or 2m";
    table(&[
        (size("512k"), &[]),
        (size("1m"), &[]),
        (size("1024k"), &[]),
        (size("1048576"), &[]),
        (size("1536k"), &[]),
        (size("2m"), &[]),
        (size("32m"), &[]),
        (size("1M"), &[]),
        (size("01m"), &[]),
        (size(""), &[]), // defaulted to 1m
        (
            size("1k"),
            &[&format!(
                "{ITEM}\"1k\": memcached refuses an item size below its slab chunk size (512k); use 512k or a larger multiple of it"
            )],
        ),
        (
            size("1024"),
            &[&format!(
                "{ITEM}\"1024\": memcached refuses an item size below its slab chunk size (512k); use 512k or a larger multiple of it"
            )],
        ),
        (
            size("768k"),
            &[&format!(
                "{ITEM}\"768k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
            )],
        ),
        (
            size("1000k"),
            &[&format!(
                "{ITEM}\"1000k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
            )],
        ),
        (
            size("40m"),
            &[&format!(
                "{ITEM}\"40m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"
            )],
        ),
        (sized(2048, "1024m"), &[]),
        (
            sized(4096, "1025m"),
            &[&format!(
                "{ITEM}\"1025m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
            )],
        ),
        // memcached's 32-bit arithmetic reads 4097m as 1m; the webhook does not wrap.
        (
            sized(65536, "4097m"),
            &[&format!(
                "{ITEM}\"4097m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
            )],
        ),
        (
            sized(1, "1m"),
            &[&format!(
                "{ITEM}\"1m\": memcached refuses an item size above half of maxMemoryMB (512k for 1)"
            )],
        ),
        (sized(1, "512k"), &[]),
        (sized(2, "1m"), &[]),
        (
            sized(3, "2m"),
            &[&format!(
                "{ITEM}\"2m\": memcached refuses an item size above half of maxMemoryMB (1536k for 3)"
            )],
        ),
        // Several problems with one value are all reported.
        (
            sized(1, "1000k"),
            &[
                &format!(
                    "{ITEM}\"1000k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
                ),
                &format!(
                    "{ITEM}\"1000k\": memcached refuses an item size above half of maxMemoryMB (512k for 1)"
                ),
            ],
        ),
        (size("1.5m"), &[&format!("{ITEM}\"1.5m\": {grammar}")]),
        (size("1g"), &[&format!("{ITEM}\"1g\": {grammar}")]),
        (size("1mb"), &[&format!("{ITEM}\"1mb\": {grammar}")]),
        (size(" 1m"), &[&format!("{ITEM}\" 1m\": {grammar}")]),
        (size("+1m"), &[&format!("{ITEM}\"+1m\": {grammar}")]),
        (size("k"), &[&format!("{ITEM}\"k\": {grammar}")]),
        (
            size("99999999999999999999999m"),
            &[
                &format!(
                    "{ITEM}\"99999999999999999999999m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
                ),
                &format!(
                    "{ITEM}\"99999999999999999999999m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"
                ),
            ],
        ),
    ]);
}

#[test]
fn slab_chunk_max_from_extra_args_moves_the_granularity() {
    let with = |size: &str, args: J| mc(json!({"maxItemSize": size, "extraArgs": args}));
    let bad_chunk = |i: usize, arg: &str| {
        format!(
            "spec.memcached.extraArgs[{i}]: Invalid value: \"{arg}\": memcached refuses a slab_chunk_max (in bytes) that does not evenly divide its 1048576-byte slab page; use a power of two up to 1048576, e.g. slab_chunk_max=16384"
        )
    };
    table(&[
        (with("32k", json!(["-o", "slab_chunk_max=16384"])), &[]),
        (with("16k", json!(["-o", "slab_chunk_max=16384"])), &[]),
        (with("48k", json!(["-oslab_chunk_max=16384"])), &[]),
        (with("48k", json!(["--extended=slab_chunk_max=16384"])), &[]),
        (
            with(
                "48k",
                json!(["--extended", "no_lru_crawler,slab_chunk_max=16384"]),
            ),
            &[],
        ),
        (with("1k", json!(["-o", "slab_chunk_max=1024"])), &[]),
        (with("1k", json!(["-o", "slab_chunk_max=16"])), &[]),
        (with("1m", json!(["-o", "slab_chunk_max=1048576"])), &[]),
        (
            with("40k", json!(["-o", "slab_chunk_max=16384"])),
            &[&format!(
                "{ITEM}\"40k\": memcached refuses an item size that is not a multiple of slab_chunk_max (16384 bytes, from extraArgs); use 32k or 48k"
            )],
        ),
        (
            with("8k", json!(["-o", "slab_chunk_max=16384"])),
            &[&format!(
                "{ITEM}\"8k\": memcached refuses an item size below slab_chunk_max (16384 bytes, from extraArgs); use 16k or a larger multiple of it"
            )],
        ),
        (
            with("1023", json!(["-o", "slab_chunk_max=1"])),
            &[&format!(
                "{ITEM}\"1023\": memcached refuses an item size below 1k; use 1k or more"
            )],
        ),
        // The last slab_chunk_max wins, as in memcached.
        (
            with(
                "48k",
                json!(["-o", "slab_chunk_max=32768", "-o", "slab_chunk_max=16384"]),
            ),
            &[],
        ),
        (
            with(
                "48k",
                json!(["-o", "slab_chunk_max=16384", "-o", "slab_chunk_max=32768"]),
            ),
            &[&format!(
                "{ITEM}\"48k\": memcached refuses an item size that is not a multiple of slab_chunk_max (32768 bytes, from extraArgs); use 32k or 64k"
            )],
        ),
        // A chunk that does not divide the page (or is no number) is reported on its argument.
        (
            with("1m", json!(["-o", "slab_chunk_max=3"])),
            &[&bad_chunk(1, "slab_chunk_max=3")],
        ),
        (
            with("1m", json!(["-oslab_chunk_max=16k"])),
            &[&bad_chunk(0, "-oslab_chunk_max=16k")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max=2097152"])),
            &[&bad_chunk(1, "slab_chunk_max=2097152")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max=0"])),
            &[&bad_chunk(1, "slab_chunk_max=0")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max"])),
            &[&bad_chunk(1, "slab_chunk_max")],
        ),
        // Other arguments are not read.
        (
            with(
                "1m",
                json!(["-vv", "--lock-memory", "-o", "no_lru_crawler"]),
            ),
            &[],
        ),
        (with("1m", json!(["slab_chunk_max=3"])), &[]),
    ]);
}

#[test]
fn connections_and_threads_table() {
    let ct = |c: i64, t: i64| mc(json!({"maxConnections": c, "threads": t}));
    let low = |c: i64, t: i64, need: i64| {
        format!(
            "spec.memcached.maxConnections: Invalid value: {c}: memcached with {t} threads exits or turns every client away below {need} connections (it reserves descriptors for each thread and both listeners); use {need} or more, or fewer threads"
        )
    };
    table(&[
        (ct(1024, 4), &[]),
        (ct(26, 4), &[]),
        (ct(25, 4), &[&low(25, 4, 26)]),
        (ct(14, 1), &[]),
        (ct(13, 1), &[&low(13, 1, 14)]),
        (ct(644, 128), &[]),
        (ct(100, 128), &[&low(100, 128, 644)]),
        (ct(1024, 204), &[]),
        (ct(1024, 205), &[&low(1024, 205, 1029)]),
        (ct(4096, 818), &[]),
        (ct(4096, 819), &[&low(4096, 819, 4099)]),
        (ct(2147483647, 429496728), &[]),
        (
            ct(2147483647, 2147483647),
            &[&low(2147483647, 2147483647, 10737418239)],
        ),
        (
            ct(1024, -1),
            &[
                "spec.memcached.threads: Invalid value: -1: memcached refuses fewer than 1 thread (\"Number of threads must be greater than 0\"); use 1 or more, e.g. 4",
            ],
        ),
        (
            ct(-5, 4),
            &[
                "spec.memcached.maxConnections: Invalid value: -5: memcached refuses fewer than 1 connection (\"Maximum connections must be greater than 0\"); use e.g. 1024",
            ],
        ),
        // Zeros are defaulted (1024, 4).
        (ct(0, 0), &[]),
        (ct(0, 204), &[]),
        (ct(0, 205), &[&low(1024, 205, 1029)]),
    ]);
}

#[test]
fn memory_and_verbosity_table() {
    table(&[
        (mc(json!({"verbosity": 0})), &[]),
        (mc(json!({"verbosity": 2})), &[]),
        (mc(json!({"verbosity": 131070})), &[]),
        (
            mc(json!({"verbosity": -1})),
            &[
                "spec.memcached.verbosity: Invalid value: -1: verbosity is rendered as -v repeated that many times and cannot be negative; use 0, 1 or 2",
            ],
        ),
        (
            mc(json!({"verbosity": 131071})),
            &[
                "spec.memcached.verbosity: Invalid value: 131071: verbosity is rendered as -v repeated that many times, and an argument this long exceeds Linux's 128 KiB limit, so the container cannot start; use 0, 1 or 2",
            ],
        ),
        (
            mc(json!({"maxMemoryMB": -1})),
            &[
                "spec.memcached.maxMemoryMB: Invalid value: -1: memcached would read a negative -m as unlimited memory; use a positive size in MiB, e.g. 64",
            ],
        ),
        (
            mc(json!({"maxMemoryMB": 2147483647, "maxItemSize": "1024m"})),
            &[],
        ),
    ]);
}

// === new rules: images ===

#[test]
fn image_table() {
    table(&[
        (json!({"image": "memcached:1.6"}), &[]),
        (
            json!({"image": "registry.example.com:5000/team/memcached:1.6.28@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}),
            &[],
        ),
        (json!({"image": null}), &[]),
        (
            json!({"image": ""}),
            &["spec.image: Required value: empty image; set one such as memcached:1.6"],
        ),
        (
            json!({"image": " memcached"}),
            &[
                "spec.image: Invalid value: \" memcached\": surrounding whitespace in the image; remove it",
            ],
        ),
        (
            json!({"image": "Memcached:1.6"}),
            &[
                "spec.image: Invalid value: \"Memcached:1.6\": uppercase letters in the repository name \"Memcached\"; repository names must be lowercase",
            ],
        ),
        (
            json!({"monitoring": {"exporterImage": "prom/memcached-exporter:"}}),
            &[
                "spec.monitoring.exporterImage: Invalid value: \"prom/memcached-exporter:\": invalid tag \"\": is empty; write a tag after the \":\" (e.g. memcached:1.6) or drop it",
            ],
        ),
        (json!({"monitoring": {"enabled": true}}), &[]),
        (json!({"monitoring": {"exporterImage": null}}), &[]),
    ]);
}

// === new rules: Prometheus ===

#[test]
fn service_monitor_table() {
    let sm = |v: J| json!({"monitoring": {"enabled": true, "serviceMonitor": v}});
    const I: &str = "spec.monitoring.serviceMonitor.interval: Invalid value: ";
    const T: &str = "spec.monitoring.serviceMonitor.scrapeTimeout: Invalid value: ";
    table(&[
        (sm(json!({})), &[]),
        (sm(json!({"interval": "", "scrapeTimeout": ""})), &[]),
        (sm(json!({"interval": "1m", "scrapeTimeout": "1m"})), &[]),
        (
            sm(json!({"interval": "1h30m", "scrapeTimeout": "90s"})),
            &[],
        ),
        (sm(json!({"interval": "2d", "scrapeTimeout": "0"})), &[]),
        (
            sm(json!({"interval": "30s", "scrapeTimeout": "1m"})),
            &[&format!(
                "{T}\"1m\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (30s); use 30s or less"
            )],
        ),
        // An absent interval is the default 30s.
        (
            sm(json!({"scrapeTimeout": "31s"})),
            &[&format!(
                "{T}\"31s\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (30s); use 30s or less"
            )],
        ),
        // An absent timeout is the default 10s.
        (
            sm(json!({"interval": "5s"})),
            &[&format!(
                "{T}\"10s\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (5s); use 5s or less"
            )],
        ),
        (
            sm(json!({"interval": "1.5s"})),
            &[&format!(
                "{I}\"1.5s\": durations take whole numbers only; use a smaller unit, e.g. 1500ms instead of 1.5s"
            )],
        ),
        (
            sm(json!({"interval": "30", "scrapeTimeout": "500us"})),
            &[
                &format!(
                    "{I}\"30\": \"30\" has no unit; Prometheus durations look like 30s, 1m or 1h30m"
                ),
                &format!(
                    "{T}\"500us\": unknown unit \"us\"; Prometheus accepts y, w, d, h, m, s, ms (1ms is the smallest duration)"
                ),
            ],
        ),
        (sm(json!(null)), &[]),
    ]);
}

// === new rules: the HPA ===

fn hpa(a: J) -> J {
    let mut spec = autoscaling(json!({}));
    merge(&mut spec["autoscaling"], a);
    spec
}

fn metrics(m: J) -> J {
    hpa(json!({"metrics": [m]}))
}

const M0: &str = "spec.autoscaling.metrics[0]";

#[test]
fn hpa_replica_bounds() {
    table(&[
        (hpa(json!({"minReplicas": 1, "maxReplicas": 1})), &[]),
        (
            hpa(json!({"maxReplicas": null})),
            &[
                "spec.autoscaling.maxReplicas: Required value: the HorizontalPodAutoscaler needs maxReplicas (at least 1) when autoscaling is enabled",
            ],
        ),
        (
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true}}),
            &[
                "spec.autoscaling.maxReplicas: Required value: the HorizontalPodAutoscaler needs maxReplicas (at least 1) when autoscaling is enabled",
            ],
        ),
        (
            hpa(json!({"maxReplicas": 0})),
            &["spec.autoscaling.maxReplicas: Invalid value: 0: must be greater than 0"],
        ),
        (
            hpa(json!({"minReplicas": 0})),
            &["spec.autoscaling.minReplicas: Invalid value: 0: must be greater than or equal to 1"],
        ),
        // R9 and the HPA rules together.
        (
            hpa(json!({"minReplicas": 2, "maxReplicas": null})),
            &[
                "spec.autoscaling.minReplicas: Invalid value: 2: minReplicas (2) must not exceed maxReplicas (0)",
                "spec.autoscaling.maxReplicas: Required value: the HorizontalPodAutoscaler needs maxReplicas (at least 1) when autoscaling is enabled",
            ],
        ),
        // Disabled autoscaling renders no HPA.
        (
            json!({"autoscaling": {"enabled": false, "minReplicas": 0, "maxReplicas": 0, "metrics": [{}]}}),
            &[],
        ),
    ]);
}

#[test]
fn hpa_metric_table() {
    let resource = |name: &str, target: J| json!({"type": "Resource", "resource": {"name": name, "target": target}});
    table(&[
        (
            metrics(resource(
                "cpu",
                json!({"type": "Utilization", "averageUtilization": 80}),
            )),
            &[],
        ),
        (
            metrics(resource(
                "memory",
                json!({"type": "AverageValue", "averageValue": "512Mi"}),
            )),
            &[],
        ),
        (
            metrics(resource(
                "cpu",
                json!({"type": "Utilization", "averageUtilization": 0}),
            )),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            ],
        ),
        (
            metrics(resource("cpu", json!({"type": "Value", "value": "1"}))),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageUtilization: Required value: must set either a target raw value or a target utilization",
            ],
        ),
        (
            metrics(resource(
                "cpu",
                json!({"type": "Utilization", "averageUtilization": 50, "averageValue": "1"}),
            )),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageValue: Forbidden: may not set both a target raw value and a target utilization",
            ],
        ),
        (
            metrics(resource(
                "memory",
                json!({"type": "AverageValue", "averageValue": "-1"}),
            )),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageValue: Invalid value: \"-1\": must be positive",
            ],
        ),
        (
            metrics(resource(
                "memory",
                json!({"type": "AverageValue", "averageValue": 0}),
            )),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageValue: Invalid value: \"0\": must be positive",
            ],
        ),
        (
            metrics(resource(
                "",
                json!({"type": "Average", "averageUtilization": 50}),
            )),
            &[
                "spec.autoscaling.metrics[0].resource.name: Required value: must specify a resource name",
                "spec.autoscaling.metrics[0].resource.target.type: Invalid value: \"Average\": must be either Utilization, Value, or AverageValue",
            ],
        ),
        (
            metrics(
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"averageUtilization": 50}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].resource.target.type: Required value: must specify a metric target type",
                "spec.autoscaling.metrics[0].resource.target.type: Invalid value: \"\": must be either Utilization, Value, or AverageValue",
            ],
        ),
        (
            metrics(
                json!({"resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].type: Required value: must specify a metric source type",
                "spec.autoscaling.metrics[0].type: Unsupported value: \"\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            ],
        ),
        (
            metrics(json!({"type": "Foo"})),
            &[
                "spec.autoscaling.metrics[0].type: Unsupported value: \"Foo\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            ],
        ),
        (
            metrics(json!({"type": "Resource"})),
            &[
                "spec.autoscaling.metrics[0].resource: Required value: must populate information for the given metric source",
            ],
        ),
        (
            metrics(json!({"type": "Resource",
                           "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
                           "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}})),
            &[
                "spec.autoscaling.metrics[0].pods: Forbidden: must populate the given metric source only",
            ],
        ),
        (
            metrics(
                json!({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}),
            ),
            &[],
        ),
        (
            metrics(
                json!({"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value", "value": "10"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].pods.metric.name: Invalid value: \"a/b\": may not contain '/'",
                "spec.autoscaling.metrics[0].pods.target.averageValue: Required value: must specify a positive target averageValue",
            ],
        ),
        (
            metrics(
                json!({"type": "Pods", "pods": {"metric": {"name": ".."}, "target": {"type": "AverageValue", "averageValue": "1"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].pods.metric.name: Invalid value: \"..\": may not be '..'",
            ],
        ),
        (
            metrics(
                json!({"type": "Object", "object": {"describedObject": {"kind": "Service"}, "metric": {}, "target": {"type": "Value"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].object.describedObject.name: Required value",
                "spec.autoscaling.metrics[0].object.metric.name: Required value: must specify a metric name",
                "spec.autoscaling.metrics[0].object.target.averageValue: Required value: must set either a target value or averageValue",
            ],
        ),
        (
            metrics(
                json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "5", "averageValue": "1"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].external.target.value: Forbidden: may not set both a target value for metric and a per-pod target",
            ],
        ),
        (
            metrics(
                json!({"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].external.target.averageValue: Required value: must set either a target value for metric or a per-pod target",
            ],
        ),
        (
            metrics(
                json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "memcached", "target": {"type": "Utilization", "averageUtilization": 60}}}),
            ),
            &[],
        ),
        (
            metrics(
                json!({"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Mem_cached", "target": {"type": "Utilization", "averageUtilization": 60}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].containerResource.name: Invalid value: \"gpu\": must be a standard resource for containers",
                "spec.autoscaling.metrics[0].containerResource.container: Invalid value: \"Mem_cached\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        (
            metrics(
                json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].containerResource.container: Required value: must specify a container",
            ],
        ),
    ]);
}

#[test]
fn hpa_type_errors_name_the_exact_path() {
    table(&[
        (
            metrics(
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": "80"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageUtilization: Invalid value: \"80\": must be an integer",
            ],
        ),
        (
            metrics(
                json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 3000000000_i64}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageUtilization: Invalid value: 3000000000: must be a 32-bit integer",
            ],
        ),
        (
            metrics(
                json!({"type": 5, "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].type: Invalid value: 5: must be a string",
                "spec.autoscaling.metrics[0].type: Required value: must specify a metric source type",
                "spec.autoscaling.metrics[0].type: Unsupported value: \"\": supported values: \"ContainerResource\", \"External\", \"Object\", \"Pods\", \"Resource\"",
            ],
        ),
        (
            hpa(json!({"metrics": ["cpu"]})),
            &[&format!("{M0}: Invalid value: \"cpu\": must be an object")],
        ),
        (
            metrics(json!({"type": "Resource", "resource": ["cpu"]})),
            &[
                "spec.autoscaling.metrics[0].resource: Invalid value: [...]: must be an object",
                "spec.autoscaling.metrics[0].resource: Required value: must populate information for the given metric source",
            ],
        ),
        (
            metrics(
                json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1 Gi"}}}),
            ),
            &[
                "spec.autoscaling.metrics[0].resource.target.averageValue: Invalid value: \"1 Gi\": quantity contains whitespace; write it without spaces, e.g. 1Gi",
            ],
        ),
    ]);
}

#[test]
fn hpa_behavior_table() {
    let behavior = |b: J| hpa(json!({"behavior": b}));
    const UP: &str = "spec.autoscaling.behavior.scaleUp";
    table(&[
        (behavior(json!({})), &[]),
        (
            behavior(json!({"scaleDown": {"stabilizationWindowSeconds": 300}})),
            &[],
        ),
        (
            behavior(
                json!({"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                                      "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}}),
            ),
            &[],
        ),
        // Empty or missing policies are defaulted (the operator's Go types drop `[]`).
        (
            behavior(json!({"scaleUp": {"policies": []}, "scaleDown": {"selectPolicy": null}})),
            &[],
        ),
        (
            behavior(json!({"scaleUp": {"stabilizationWindowSeconds": -1}})),
            &[&format!(
                "{UP}.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero"
            )],
        ),
        (behavior(json!({"scaleUp": {"tolerance": "0.05"}})), &[]),
        (
            behavior(json!({"scaleDown": {"tolerance": 0, "selectPolicy": null}})),
            &[],
        ),
        (
            behavior(json!({"scaleUp": {"tolerance": "-10m"}})),
            &[&format!(
                "{UP}.tolerance: Invalid value: \"-10m\": must be greater than or equal to 0"
            )],
        ),
        (
            behavior(json!({"scaleUp": {"tolerance": -0.5}})),
            &[&format!(
                "{UP}.tolerance: Invalid value: \"-500m\": must be greater than or equal to 0"
            )],
        ),
        (
            behavior(json!({"scaleUp": {"tolerance": "5%"}})),
            &[&format!(
                "{UP}.tolerance: Invalid value: \"5%\": unknown unit \"%\"; use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E (powers of 1000), or an exponent such as e6; a tolerance is a fraction, e.g. 0.05 for 5%"
            )],
        ),
        (
            behavior(json!({"scaleDown": {"stabilizationWindowSeconds": 3601}})),
            &[
                "spec.autoscaling.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
            ],
        ),
        (
            behavior(json!({"scaleUp": {"selectPolicy": "Fastest"}})),
            &[&format!(
                "{UP}.selectPolicy: Unsupported value: \"Fastest\": supported values: \"Disabled\", \"Max\", \"Min\""
            )],
        ),
        (
            behavior(json!({"scaleUp": {"selectPolicy": ""}})),
            &[&format!(
                "{UP}.selectPolicy: Unsupported value: \"\": supported values: \"Disabled\", \"Max\", \"Min\""
            )],
        ),
        (
            behavior(
                json!({"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 15},
                                                     {"type": "Foo", "value": 0, "periodSeconds": 1801}]}}),
            ),
            &[
                &format!(
                    "{UP}.policies[1].type: Unsupported value: \"Foo\": supported values: \"Percent\", \"Pods\""
                ),
                &format!("{UP}.policies[1].value: Invalid value: 0: must be greater than zero"),
                &format!(
                    "{UP}.policies[1].periodSeconds: Invalid value: 1801: must be less than or equal to 1800"
                ),
            ],
        ),
        (
            behavior(json!({"scaleUp": {"policies": [{}]}})),
            &[
                &format!(
                    "{UP}.policies[0].type: Unsupported value: \"\": supported values: \"Percent\", \"Pods\""
                ),
                &format!("{UP}.policies[0].value: Invalid value: 0: must be greater than zero"),
                &format!(
                    "{UP}.policies[0].periodSeconds: Invalid value: 0: must be greater than zero"
                ),
            ],
        ),
        (
            behavior(json!({"scaleUp": 5})),
            &[&format!("{UP}: Invalid value: 5: must be an object")],
        ),
    ]);
}

// === warnings ===

const EXPORTER_CPU: &str = "spec.monitoring.exporterResources.requests.cpu: not set, but the HPA scales on cpu utilization, which needs a request on every container of the pod, the exporter sidecar too; unless a LimitRange gives it a default request, the HPA cannot compute it and does not scale";
const EXPORTER_MEMORY: &str = "spec.monitoring.exporterResources.requests.memory: not set, but the HPA scales on memory utilization, which needs a request on every container of the pod, the exporter sidecar too; unless a LimitRange gives it a default request, the HPA cannot compute it and does not scale";

#[test]
fn warning_table() {
    let cases: &[(J, &[&str])] = &[
        (json!({"memcached": {"threads": 64}}), &[]),
        (
            json!({"memcached": {"threads": 65}}),
            &[
                "spec.memcached.threads: 65 worker threads; memcached warns above 64 and recommends at most one per CPU core",
            ],
        ),
        (json!({"replicas": 2, "highAvailability": {}}), &[]),
        (
            json!({"highAvailability": {"antiAffinityPreset": "hard"}}),
            &[
                "spec.highAvailability: set, but spec.replicas is 1; fewer than 2 replicas cannot survive losing a pod",
            ],
        ),
        (
            autoscaling(json!({"highAvailability": {}})),
            &[
                "spec.highAvailability: set, but spec.autoscaling.minReplicas is 1; fewer than 2 replicas cannot survive losing a pod",
            ],
        ),
        (
            autoscaling(json!({"highAvailability": {}, "autoscaling": {"minReplicas": 2}})),
            &[],
        ),
        (
            json!({"resources": {"limits": {"memory": "96Mi"}}}),
            &[
                "spec.resources.limits.memory: 96Mi leaves less than 64Mi above maxMemoryMB (64); connection buffers and threads may get the pod OOM-killed, use at least 128Mi",
            ],
        ),
        (json!({"resources": {"limits": {"memory": "128Mi"}}}), &[]),
        (json!({"memcached": {"maxConnections": 524288}}), &[]),
        (
            json!({"memcached": {"maxConnections": 524289}}),
            &[
                "spec.memcached.maxConnections: 524289 is above 524288, the open-files limit of many container runtimes (e.g. containerd 2); memcached exits there when it cannot raise its limit",
            ],
        ),
        (
            json!({"replicas": 3, "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 3}}}),
            &[
                "spec.highAvailability.podDisruptionBudget.maxUnavailable: 3 lets all 3 replicas be evicted at once, so the budget protects nothing",
            ],
        ),
        (
            json!({"replicas": 3, "highAvailability": {"podDisruptionBudget": {"enabled": true, "maxUnavailable": 2}}}),
            &[],
        ),
        // Utilization is averaged over every container, the exporter sidecar included.
        (
            autoscaling(json!({"monitoring": {"enabled": true}})),
            &[EXPORTER_CPU],
        ),
        (
            autoscaling(
                json!({"monitoring": {"enabled": true, "exporterResources": {"requests": {"cpu": "10m"}}}}),
            ),
            &[],
        ),
        (
            autoscaling(
                json!({"monitoring": {"enabled": true, "exporterResources": {"limits": {"cpu": "50m"}, "requests": null}}}),
            ),
            &[],
        ),
        (autoscaling(json!({"monitoring": {"enabled": false}})), &[]),
        (
            json!({"monitoring": {"enabled": true}, "autoscaling": {"enabled": false}}),
            &[],
        ),
        // An AverageValue target needs no requests at all.
        (
            autoscaling(
                json!({"monitoring": {"enabled": true}, "autoscaling": {"metrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "500m"}}}
                ]}}),
            ),
            &[],
        ),
        (
            autoscaling(json!({
            "resources": {"requests": {"memory": "128Mi"}},
            "monitoring": {"enabled": true, "exporterResources": {"requests": {"cpu": "10m"}}},
            "autoscaling": {"metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}}
            ]}})),
            &[EXPORTER_MEMORY],
        ),
    ];
    for (spec, want) in cases {
        let o = outcome(spec.clone());
        assert!(o.errors.is_empty(), "{spec}: {:?}", o.errors);
        assert_eq!(o.warnings, *want, "spec: {spec}");
    }
    // Below R1's minimum it is an error, not also a warning.
    let o = outcome(json!({"resources": {"limits": {"memory": "64Mi"}}}));
    assert_eq!((o.errors.len(), o.warnings.len()), (1, 0));
    // Warnings come in their documented order, and ride along with errors too.
    let w = warnings(
        json!({"replicas": 1, "highAvailability": {}, "memcached": {"threads": 100, "maxConnections": 600000},
                            "resources": {"limits": {"memory": "100Mi"}}}),
    );
    let fields: Vec<_> = w.iter().map(|w| w.split(':').next().unwrap()).collect();
    assert_eq!(
        fields,
        [
            "spec.memcached.threads",
            "spec.highAvailability",
            "spec.resources.limits.memory",
            "spec.memcached.maxConnections"
        ]
    );
    let o = outcome(json!({"memcached": {"threads": 100, "maxConnections": 100}}));
    assert_eq!((o.errors.len(), o.warnings.len()), (1, 1));
}

// === the same verdict with and without the mutating webhook ===

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

// === ratcheting ===

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
