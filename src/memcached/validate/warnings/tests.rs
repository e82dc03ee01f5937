//! The warnings: specs that run but are probably a mistake.

use crate::memcached::validate::test_support::*;
use serde_json::{Value as J, json};

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
