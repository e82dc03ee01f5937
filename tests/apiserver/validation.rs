//! Validation through the API server: each rule family alone refuses a CREATE with a 422
//! whose `details.causes` name its field, kubectl prints that field, and warnings reach the
//! client, with an admitted object and along with a denial.

use serde_json::{Value, json};

use crate::Check;
use crate::env::{Env, memcached};

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "validation::each_rule_family_refuses_with_its_field",
            run: each_rule_family_refuses_with_its_field,
        },
        Check {
            name: "validation::warnings_reach_kubectl",
            run: warnings_reach_kubectl,
        },
    ]
}

/// (rule family, spec that breaks only it, the field of its cause).
pub fn families() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "R1 memory limit",
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
            "spec.resources.limits.memory",
        ),
        (
            "R2-R4 PodDisruptionBudget",
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true}}}),
            "spec.highAvailability.podDisruptionBudget",
        ),
        (
            "R5 graceful shutdown",
            json!({"replicas": 2, "highAvailability": {"gracefulShutdown": {
             "enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 20}}}),
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
        ),
        (
            "R6-R7 secret references",
            json!({"security": {"sasl": {"enabled": true}}}),
            "spec.security.sasl.credentialsSecretRef.name",
        ),
        (
            "R9 autoscaling bounds",
            json!({"resources": {"requests": {"cpu": "1"}},
                "autoscaling": {"enabled": true, "minReplicas": 10, "maxReplicas": 5}}),
            "spec.autoscaling.minReplicas",
        ),
        (
            "R10 CPU request for a CPU metric",
            json!({"autoscaling": {"enabled": true, "maxReplicas": 5}}),
            "spec.resources.requests.cpu",
        ),
        (
            "memcached start limits",
            json!({"memcached": {"maxItemSize": "100k"}}),
            "spec.memcached.maxItemSize",
        ),
        (
            "memcached connections",
            json!({"memcached": {"maxConnections": 10}}),
            "spec.memcached.maxConnections",
        ),
        (
            "Prometheus durations",
            json!({"monitoring": {"enabled": true, "serviceMonitor": {"interval": "1.5s"}}}),
            "spec.monitoring.serviceMonitor.interval",
        ),
        (
            "HPA rules",
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true}}),
            "spec.autoscaling.maxReplicas",
        ),
        (
            "image references",
            json!({"image": "memcached:1.6:latest"}),
            "spec.image",
        ),
    ]
}

fn each_rule_family_refuses_with_its_field(env: &Env) {
    let namespace = "validation";
    env.namespace(namespace);
    let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{namespace}/memcacheds");
    for (i, (family, spec, field)) in families().into_iter().enumerate() {
        let object = memcached(namespace, &format!("bad-{i}"), spec);
        let out = env.kubectl(&["create", "-f", "-"], Some(&object.to_string()));
        assert!(!out.ok, "{family}: admitted");
        // kubectl lists details.causes as "* field: message" lines.
        assert!(
            out.stderr.contains(&format!("{field}: ")),
            "{family}: kubectl does not name {field}: {}",
            out.stderr
        );
        let status = raw_status(env, &url, &object);
        assert_eq!(status["code"], 422, "{family}: {status}");
        assert_eq!(status["reason"], "Invalid", "{family}: {status}");
        let causes = status["details"]["causes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let fields: Vec<&Value> = causes.iter().map(|c| &c["field"]).collect();
        assert_eq!(fields, [field], "{family}: causes of {status}");
        assert!(
            status["message"].as_str().unwrap().starts_with(
                "admission webhook \"validate.memcached-webhook.c5c3.io\" denied the request"
            ),
            "{family}: {status}"
        );
        let get = env.kubectl(
            &["get", "-n", namespace, "memcached", &format!("bad-{i}")],
            None,
        );
        assert!(!get.ok, "{family}: the refused object was stored");
    }
}

/// The API server's Status for a dry-run POST of `object`, which it must refuse.
fn raw_status(env: &Env, url: &str, object: &Value) -> Value {
    let (code, status) = env
        .cluster
        .request("POST", &format!("{url}?dryRun=All"), object);
    assert_ne!(code, 201, "raw POST admitted: {status}");
    status
}

fn warnings_reach_kubectl(env: &Env) {
    let namespace = "warnings";
    env.namespace(namespace);
    let threads = "spec.memcached.threads: 65 worker threads";
    let object = memcached(
        namespace,
        "busy",
        json!({"memcached": {"threads": 65, "maxConnections": 4096}}),
    );
    let out = env.ok(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(
        out.warnings().iter().any(|w| w.starts_with(threads)),
        "no threads warning: {out:?}"
    );
    // A denial carries its warnings too.
    let object = memcached(
        namespace,
        "busy-and-bad",
        json!({"memcached": {"threads": 65, "maxConnections": 4096, "maxItemSize": "100k"}}),
    );
    let out = env.kubectl(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(!out.ok, "admitted: {out:?}");
    assert!(
        out.warnings().iter().any(|w| w.starts_with(threads)),
        "no threads warning with the denial: {out:?}"
    );
}
