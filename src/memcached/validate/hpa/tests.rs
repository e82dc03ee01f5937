//! The HorizontalPodAutoscaler the operator renders, judged as the apiserver judges it.

use crate::memcached::validate::test_support::*;
use serde_json::{Value as J, json};

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
