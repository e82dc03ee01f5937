//! Every table row and example of the reference operator's "Defaulting Webhook" page
//! (C5C3/memcached-operator v0.4.0, `api/v1beta1/memcached_webhook.go`), and the edge cases.

use super::*;
use crate::json::Val;
use serde_json::{Value as J, json};

/// Runs the defaulter on `object` and returns (the patched object, the ops, the warnings).
fn default(object: &J) -> (J, J, Vec<String>) {
    let mut bytes = serde_json::to_vec(object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = crate::memcached::read(Val::root(&tape)).unwrap();
    let mut buf = Vec::new();
    let mut patch = Patch::new(&mut buf);
    let mut warnings = Vec::new();
    apply(&mc.spec, &mut patch, &mut warnings);
    let ops: J = patch.finish().map_or(json!([]), |p| {
        serde_json::from_slice(&crate::patch::decoded(p)).unwrap()
    });
    let mut patched = object.clone();
    let p: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
    json_patch::patch(&mut patched, &p).expect("the patch applies");
    (patched, ops, warnings)
}

fn spec_after(spec: J) -> J {
    let (patched, _, _) = default(
        &json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached", "spec": spec}),
    );
    patched["spec"].clone()
}

const CORE: fn() -> J =
    || json!({"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m"});

#[test]
fn constants_agree_with_the_json_fragments() {
    let memcached: J = serde_json::from_str(MEMCACHED_JSON).unwrap();
    assert_eq!(
        memcached,
        json!({"maxMemoryMB": MAX_MEMORY_MB, "maxConnections": MAX_CONNECTIONS, "threads": THREADS, "maxItemSize": MAX_ITEM_SIZE})
    );
    let spec: J = serde_json::from_str(SPEC_JSON).unwrap();
    assert_eq!(
        spec,
        json!({"replicas": REPLICAS, "image": IMAGE, "memcached": memcached})
    );
    let metrics: J = serde_json::from_str(METRICS_JSON).unwrap();
    assert_eq!(
        metrics[0]["resource"]["target"]["averageUtilization"],
        json!(CPU_UTILIZATION)
    );
    let behavior: J = serde_json::from_str(BEHAVIOR_JSON).unwrap();
    assert_eq!(
        behavior["scaleDown"]["stabilizationWindowSeconds"],
        json!(SCALE_DOWN_STABILIZATION_SECONDS)
    );
}

#[test]
fn example_minimal_cr_empty_spec() {
    assert_eq!(
        spec_after(json!({})),
        json!({"replicas": 1, "image": "memcached:1.6", "memcached": CORE()})
    );
}

#[test]
fn example_partially_specified_keeps_user_values() {
    let after = spec_after(
        json!({"replicas": 3, "image": "memcached:1.6.28", "memcached": {"maxMemoryMB": 256}}),
    );
    assert_eq!(
        after,
        json!({"replicas": 3, "image": "memcached:1.6.28",
               "memcached": {"maxMemoryMB": 256, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m"}})
    );
}

#[test]
fn example_monitoring_enabled() {
    let after = spec_after(json!({"monitoring": {"serviceMonitor": {}}}));
    assert_eq!(
        after,
        json!({"replicas": 1, "image": "memcached:1.6", "memcached": CORE(),
               "monitoring": {"exporterImage": "prom/memcached-exporter:v0.15.4",
                              "serviceMonitor": {"interval": "30s", "scrapeTimeout": "10s"}}})
    );
}

#[test]
fn example_high_availability_enabled() {
    let after = spec_after(json!({"replicas": 3, "highAvailability": {}}));
    assert_eq!(
        after,
        json!({"replicas": 3, "image": "memcached:1.6", "memcached": CORE(),
               "highAvailability": {"antiAffinityPreset": "soft"}})
    );
}

#[test]
fn example_autoscaling_enabled() {
    let after =
        spec_after(json!({"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 10}}));
    assert_eq!(
        after,
        json!({"image": "memcached:1.6", "memcached": CORE(),
               "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 10,
                   "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 80}}}],
                   "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}}}})
    );
}

#[test]
fn example_fully_specified_gets_no_patch() {
    let object = json!({"spec": {
        "replicas": 5, "image": "memcached:1.6.28",
        "memcached": {"maxMemoryMB": 512, "maxConnections": 2048, "threads": 8, "maxItemSize": "2m", "verbosity": 1},
        "monitoring": {"exporterImage": "prom/memcached-exporter:v0.14.0",
                       "serviceMonitor": {"interval": "15s", "scrapeTimeout": "5s"}},
        "highAvailability": {"antiAffinityPreset": "hard"}}});
    let (patched, ops, warnings) = default(&object);
    assert_eq!(ops, json!([]));
    assert_eq!(patched, object);
    assert!(warnings.is_empty());
}

#[test]
fn absent_spec_is_created_in_one_operation() {
    let (_, ops, _) = default(&json!({"metadata": {"name": "x"}}));
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec", "value": serde_json::from_str::<J>(SPEC_JSON).unwrap()}])
    );
    let (_, ops, _) = default(&json!({"spec": null}));
    assert_eq!(ops[0]["op"], "replace");
    assert_eq!(ops.as_array().unwrap().len(), 1);
}

#[test]
fn absent_memcached_is_added_as_a_whole_object() {
    let (_, ops, _) = default(&json!({"spec": {"replicas": 1, "image": "m"}}));
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec/memcached", "value": CORE()}])
    );
}

#[test]
fn zero_values_and_nulls_default_with_replace() {
    let (patched, ops, _) = default(&json!({"spec": {"replicas": null, "image": null,
        "memcached": {"maxMemoryMB": 0, "maxConnections": null, "threads": 0, "maxItemSize": "", "verbosity": 0}}}));
    assert_eq!(
        patched["spec"],
        json!({"replicas": 1, "image": "memcached:1.6",
        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0}})
    );
    assert!(
        ops.as_array()
            .unwrap()
            .iter()
            .all(|op| op["op"] == "replace"),
        "{ops}"
    );
}

#[test]
fn user_zero_replicas_and_empty_image_stay() {
    let after = spec_after(json!({"replicas": 0, "image": "", "memcached": CORE()}));
    assert_eq!(
        after,
        json!({"replicas": 0, "image": "", "memcached": CORE()})
    );
}

#[test]
fn verbosity_is_never_touched() {
    assert_eq!(
        spec_after(json!({"memcached": {"verbosity": 2}}))["memcached"]["verbosity"],
        json!(2)
    );
    assert!(
        spec_after(json!({"memcached": {}}))["memcached"]
            .get("verbosity")
            .is_none()
    );
}

#[test]
fn optional_sections_are_never_created() {
    let after =
        spec_after(json!({"monitoring": null, "highAvailability": null, "autoscaling": null}));
    assert_eq!(after["monitoring"], J::Null);
    assert_eq!(after["highAvailability"], J::Null);
    assert_eq!(after["autoscaling"], J::Null);
    let after = spec_after(json!({}));
    for section in [
        "monitoring",
        "highAvailability",
        "autoscaling",
        "security",
        "service",
    ] {
        assert!(after.get(section).is_none(), "{section} was created");
    }
}

#[test]
fn monitoring_without_service_monitor_only_gets_the_exporter_image() {
    let after = spec_after(json!({"monitoring": {"enabled": false}}));
    assert_eq!(
        after["monitoring"],
        json!({"enabled": false, "exporterImage": EXPORTER_IMAGE})
    );
}

#[test]
fn service_monitor_partial_and_null_fields() {
    let after = spec_after(
        json!({"monitoring": {"exporterImage": "e", "serviceMonitor": {"interval": "", "scrapeTimeout": "5s", "additionalLabels": {"a": "b"}}}}),
    );
    assert_eq!(
        after["monitoring"]["serviceMonitor"],
        json!({"interval": "30s", "scrapeTimeout": "5s", "additionalLabels": {"a": "b"}})
    );
    let after = spec_after(json!({"monitoring": {"serviceMonitor": null}}));
    assert_eq!(after["monitoring"]["serviceMonitor"], J::Null);
}

#[test]
fn ha_with_pdb_still_defaults_the_preset_and_keeps_hard() {
    let after = spec_after(
        json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
    );
    assert_eq!(after["highAvailability"]["antiAffinityPreset"], "soft");
    assert_eq!(
        after["highAvailability"]["podDisruptionBudget"],
        json!({"enabled": true, "minAvailable": 1})
    );
    assert_eq!(
        spec_after(json!({"highAvailability": {"antiAffinityPreset": "hard"}}))["highAvailability"]
            ["antiAffinityPreset"],
        "hard"
    );
}

#[test]
fn autoscaling_clears_user_replicas_with_a_warning() {
    let (patched, ops, warnings) =
        default(&json!({"spec": {"replicas": 3, "autoscaling": {"enabled": true}}}));
    assert!(patched["spec"].get("replicas").is_none());
    assert_eq!(ops[0], json!({"op": "remove", "path": "/spec/replicas"}));
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("spec.replicas: removed the value 3"),
        "{}",
        warnings[0]
    );
    // replicas: 0 is a user value too.
    let (patched, _, warnings) =
        default(&json!({"spec": {"replicas": 0, "autoscaling": {"enabled": true}}}));
    assert!(patched["spec"].get("replicas").is_none());
    assert_eq!(warnings.len(), 1);
}

#[test]
fn autoscaling_keeps_user_metrics_and_behavior() {
    let metrics = json!([{"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}}]);
    let behavior = json!({"scaleUp": {"stabilizationWindowSeconds": 0}});
    let after = spec_after(
        json!({"autoscaling": {"enabled": true, "metrics": metrics, "behavior": behavior}}),
    );
    assert_eq!(after["autoscaling"]["metrics"], metrics);
    assert_eq!(after["autoscaling"]["behavior"], behavior);
}

#[test]
fn autoscaling_empty_or_null_metrics_are_defaulted() {
    for metrics in [json!([]), J::Null] {
        let after = spec_after(
            json!({"autoscaling": {"enabled": true, "metrics": metrics, "behavior": null}}),
        );
        assert_eq!(
            after["autoscaling"]["metrics"],
            serde_json::from_str::<J>(METRICS_JSON).unwrap()
        );
        assert_eq!(
            after["autoscaling"]["behavior"],
            serde_json::from_str::<J>(BEHAVIOR_JSON).unwrap()
        );
    }
}

#[test]
fn autoscaling_disabled_injects_nothing_and_keeps_replicas_defaulting() {
    let after = spec_after(json!({"autoscaling": {"enabled": false}}));
    assert_eq!(after["autoscaling"], json!({"enabled": false}));
    assert_eq!(after["replicas"], json!(1));
}

#[test]
fn extra_args_and_unknown_fields_survive() {
    let object = json!({"spec": {"memcached": {"extraArgs": ["-o", "modern"], "futureField": {"x": [1, 2]}},
                                  "service": {"annotations": {"a/b": "c~d"}}, "unknown": null}, "status": {"readyReplicas": 1}});
    let (patched, _, _) = default(&object);
    assert_eq!(
        patched["spec"]["memcached"]["extraArgs"],
        json!(["-o", "modern"])
    );
    assert_eq!(
        patched["spec"]["memcached"]["futureField"],
        json!({"x": [1, 2]})
    );
    assert_eq!(patched["spec"]["service"], object["spec"]["service"]);
    assert_eq!(patched["spec"]["unknown"], J::Null);
    assert_eq!(patched["status"], object["status"]);
}

#[test]
fn defaulting_is_idempotent_on_the_examples() {
    for spec in [
        json!({}),
        json!({"monitoring": {"serviceMonitor": {}}}),
        json!({"highAvailability": {}}),
        json!({"replicas": 4, "autoscaling": {"enabled": true}}),
        json!(null),
    ] {
        let (once, _, _) = default(&json!({"spec": spec}));
        let (twice, ops, warnings) = default(&once);
        assert_eq!(ops, json!([]), "second pass on {once}");
        assert_eq!(twice, once);
        assert!(warnings.is_empty());
    }
}
