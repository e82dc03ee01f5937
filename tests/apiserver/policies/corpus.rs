//! The cases both judges get: the suite's and the integration tests' fixtures (AdmissionReview
//! objects in tests/fixtures, the `check` manifests, the defaulting and validation checks'
//! objects), plus the inputs the issue measured by hand and each exported rule's boundaries.

use serde_json::{Value, json};

use crate::webhook::{repo_file, yaml_documents};

/// One object to write.
pub struct Case {
    /// The object's name, also what assertion messages call it.
    pub name: String,
    /// What it is, for the failure message.
    pub about: String,
    /// `apiVersion`, `kind`, `metadata` (no namespace) and `spec` as sent.
    pub object: Value,
}

impl Case {
    pub fn object(&self, namespace: &str) -> Value {
        let mut object = self.object.clone();
        object["metadata"]["name"] = json!(self.name);
        object["metadata"]["namespace"] = json!(namespace);
        object
    }
}

fn cases(prefix: &str, objects: Vec<(String, Value)>) -> Vec<Case> {
    objects
        .into_iter()
        .enumerate()
        .map(|(i, (about, object))| Case {
            name: format!("{prefix}-{i}"),
            about,
            object,
        })
        .collect()
}

/// A v1beta1 Memcached with `spec` (`Value::Null`: no spec at all).
fn with_spec(spec: Value) -> Value {
    let mut object = json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                            "metadata": {}});
    if !spec.is_null() {
        object["spec"] = spec;
    }
    object
}

/// `request.object` of the AdmissionReview fixtures, with only what a client sends in metadata.
fn review_objects() -> Vec<(String, Value)> {
    [
        "minimal-empty-spec.json",
        "fully-specified.json",
        "autoscaling-enabled.json",
        "large-annotations.json",
        "mutate-create-kubectl-apply.json",
        "validate-create-kubectl-create.json",
        "invalid-spec.json",
    ]
    .into_iter()
    .map(|file| {
        let review: Value = serde_json::from_str(&repo_file(&format!("tests/fixtures/{file}")))
            .expect("a fixture is JSON");
        let mut object = review["request"]["object"].clone();
        let metadata = &object["metadata"];
        object["metadata"] =
            json!({"labels": metadata["labels"], "annotations": metadata["annotations"]});
        for key in ["labels", "annotations"] {
            if object["metadata"][key].is_null() {
                object["metadata"].as_object_mut().unwrap().remove(key);
            }
        }
        (format!("tests/fixtures/{file}"), object)
    })
    .collect()
}

/// Every input the defaulting checks, the fixtures and the hand-made policy used.
pub fn defaulting() -> Vec<Case> {
    let mut objects: Vec<(String, Value)> = review_objects()
        .into_iter()
        .filter(|(about, _)| !about.contains("invalid"))
        .collect();
    let specs = [
        ("no spec", Value::Null),
        ("empty spec", json!({})),
        ("defaulting::rich_spec", crate::defaulting::rich_spec()),
        (
            "zeros",
            json!({"replicas": 0, "memcached": {"maxMemoryMB": 0, "maxConnections": 0, "threads": 0, "maxItemSize": "", "verbosity": 0}}),
        ),
        (
            "nulls",
            json!({"replicas": null, "image": null, "memcached": {"maxMemoryMB": null, "maxItemSize": null}}),
        ),
        ("memcached null", json!({"memcached": null})),
        (
            "replicas with autoscaling",
            json!({"replicas": 5, "resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "maxReplicas": 6}}),
        ),
        (
            "autoscaling off",
            json!({"autoscaling": {"enabled": false}}),
        ),
        (
            "metrics given",
            json!({"resources": {"requests": {"cpu": "1", "memory": "128Mi"}}, "autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}}], "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}}}}),
        ),
        (
            "metrics empty",
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": []}}),
        ),
        ("monitoring empty", json!({"monitoring": {}})),
        (
            "serviceMonitor empty strings",
            json!({"monitoring": {"enabled": true, "exporterImage": "prom/memcached-exporter:v0.15.3", "serviceMonitor": {"interval": "", "scrapeTimeout": ""}}}),
        ),
        ("highAvailability empty", json!({"highAvailability": {}})),
        (
            "spec example: partial",
            json!({"replicas": 3, "image": "memcached:1.6.28", "memcached": {"maxMemoryMB": 256}}),
        ),
        (
            "spec example: HA",
            json!({"replicas": 3, "highAvailability": {"antiAffinityPreset": "hard", "podDisruptionBudget": {"enabled": true, "minAvailable": 2}}}),
        ),
        (
            "everything set",
            json!({"replicas": 2, "image": "memcached:1.6.30", "memcached": {"maxMemoryMB": 128, "maxConnections": 2048, "threads": 8, "maxItemSize": "2m", "verbosity": 1}}),
        ),
    ];
    objects.extend(
        specs
            .into_iter()
            .map(|(about, spec)| (about.to_owned(), with_spec(spec))),
    );
    let mut alpha = with_spec(json!({"memcached": {"threads": 0}}));
    alpha["apiVersion"] = json!("memcached.c5c3.io/v1alpha1");
    objects.push(("v1alpha1".to_owned(), alpha));
    cases("d", objects)
}

/// The validation checks' families, the invalid fixtures, the `check` manifests and each
/// exported rule at and around its limit.
pub fn validation() -> Vec<Case> {
    let mut objects: Vec<(String, Value)> = crate::validation::families()
        .into_iter()
        .map(|(family, spec, _)| (family.to_owned(), with_spec(spec)))
        .collect();
    objects.extend(
        review_objects()
            .into_iter()
            .filter(|(about, _)| about.contains("invalid")),
    );
    for file in [
        "typed-and-invalid.yaml",
        "typed-and-invalid-list.yaml",
        "list.yaml",
        "stream.yaml",
        "wrong-types.yaml",
        "tree/a.yaml",
        "tree/sub/b.yml",
    ] {
        for doc in yaml_documents(&repo_file(&format!("tests/fixtures/check/{file}"))) {
            let items = match doc["kind"].as_str() {
                Some("List") => doc["items"].as_array().cloned().unwrap_or_default(),
                _ => vec![doc],
            };
            for mut item in items.into_iter().filter(|i| i["kind"] == "Memcached") {
                item["metadata"] = json!({});
                objects.push((format!("tests/fixtures/check/{file}"), item));
            }
        }
    }
    objects.extend(
        boundaries()
            .into_iter()
            .map(|(about, spec)| (about.to_owned(), with_spec(spec))),
    );
    cases("v", objects)
}

fn boundaries() -> Vec<(&'static str, Value)> {
    let a = |extra: Value| {
        let mut spec = json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "maxReplicas": 3}});
        for (k, v) in extra.as_object().unwrap() {
            spec["autoscaling"][k] = v.clone();
        }
        spec
    };
    vec![
        (
            "R1 at the limit",
            json!({"resources": {"limits": {"memory": "96Mi"}}}),
        ),
        (
            "R1 one byte short",
            json!({"resources": {"limits": {"memory": "100663295"}}}),
        ),
        (
            "R1 in Gi",
            json!({"memcached": {"maxMemoryMB": 992}, "resources": {"limits": {"memory": "1000Mi"}}}),
        ),
        (
            "R1 a number",
            json!({"resources": {"limits": {"memory": 100000000}}}),
        ),
        (
            "R2 both",
            json!({"replicas": 3, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1, "maxUnavailable": "25%"}}}),
        ),
        (
            "R4 equal",
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 2}}}),
        ),
        (
            "R4 default replicas",
            json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        ),
        (
            "R4 percent",
            json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": "50%"}}}),
        ),
        (
            "R5 equal",
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 30}}}),
        ),
        (
            "R5 zero",
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "terminationGracePeriodSeconds": 0}}}),
        ),
        (
            "R7 TLS",
            json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": ""}}}}),
        ),
        ("R9 equal", a(json!({"minReplicas": 3}))),
        (
            "R10 memory metric only",
            a(
                json!({"metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]}),
            ),
        ),
        (
            "R10 without request",
            json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}),
        ),
        (
            "HPA no maxReplicas",
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true}}),
        ),
        (
            "HPA zero bounds",
            a(json!({"minReplicas": 0, "maxReplicas": 0})),
        ),
        ("negative memory", json!({"memcached": {"maxMemoryMB": -1}})),
        ("negative threads", json!({"memcached": {"threads": -2}})),
        (
            "negative connections",
            json!({"memcached": {"maxConnections": -1}}),
        ),
        (
            "connections one short",
            json!({"memcached": {"threads": 8, "maxConnections": 43}}),
        ),
        (
            "connections enough",
            json!({"memcached": {"threads": 8, "maxConnections": 44}}),
        ),
        (
            "item size 1.5m",
            json!({"memcached": {"maxItemSize": "1.5m"}}),
        ),
        (
            "item size 1500k",
            json!({"memcached": {"maxItemSize": "1500k"}}),
        ),
        (
            "item size 2048m",
            json!({"memcached": {"maxItemSize": "2048m"}}),
        ),
        (
            "item size huge",
            json!({"memcached": {"maxItemSize": "99999999999999999999m"}}),
        ),
        (
            "item size over half",
            json!({"memcached": {"maxMemoryMB": 1, "maxItemSize": "1m"}}),
        ),
        (
            "item size bytes",
            json!({"memcached": {"maxItemSize": "524288"}}),
        ),
        (
            "item size with slab_chunk_max",
            json!({"memcached": {"maxItemSize": "100k", "extraArgs": ["-o", "slab_chunk_max=16384"]}}),
        ),
        (
            "verbosity negative",
            json!({"memcached": {"verbosity": -1}}),
        ),
        (
            "verbosity huge",
            json!({"memcached": {"verbosity": 131071}}),
        ),
        (
            "durations: both bad",
            json!({"monitoring": {"serviceMonitor": {"interval": "30s1m", "scrapeTimeout": "1h-5m"}}}),
        ),
        (
            "durations: too long, out of order",
            json!({"monitoring": {"serviceMonitor": {"interval": "293y", "scrapeTimeout": "1ms1s"}}}),
        ),
        (
            "durations: no unit, repeated",
            json!({"monitoring": {"serviceMonitor": {"interval": "1m30", "scrapeTimeout": "1s2s"}}}),
        ),
        (
            "durations: sign, whitespace",
            json!({"monitoring": {"serviceMonitor": {"interval": "-1s", "scrapeTimeout": " 30s"}}}),
        ),
        (
            "durations: lowercase, smallest",
            json!({"monitoring": {"serviceMonitor": {"interval": "30S", "scrapeTimeout": "5µs"}}}),
        ),
        (
            "durations: the largest, zero",
            json!({"monitoring": {"serviceMonitor": {"interval": "106751d23h47m16s854ms", "scrapeTimeout": "0"}}}),
        ),
        (
            "durations: just over",
            json!({"monitoring": {"serviceMonitor": {"interval": "106751d23h48m", "scrapeTimeout": "18446744073709551616s"}}}),
        ),
        (
            "durations: no number, fraction",
            json!({"monitoring": {"serviceMonitor": {"interval": "h30m", "scrapeTimeout": ".5s"}}}),
        ),
        (
            "durations: all units",
            json!({"monitoring": {"serviceMonitor": {"interval": "1y1w1d1h1m1s1ms", "scrapeTimeout": "007s"}}}),
        ),
        (
            "image: registry with port, and bad tag on the exporter",
            json!({"image": "registry.example.com:5000/team/memcached:1.6", "monitoring": {"exporterImage": "prom/memcached-exporter:-x"}}),
        ),
        ("image: whitespace", json!({"image": " memcached"})),
        (
            "image: short digest",
            json!({"image": "memcached@sha256:abc"}),
        ),
        (
            "image: unknown digest algorithm",
            json!({"image": "memcached@md5:abc"}),
        ),
        (
            "image: uppercase path after a host",
            json!({"image": "localhost/Team/x"}),
        ),
        ("image: bad registry", json!({"image": "exa_mple.com:x/y"})),
        ("image: bad component", json!({"image": "team/-memcached"})),
        ("image: empty tag", json!({"image": "memcached:"})),
        (
            "image: hex ID",
            json!({"image": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}),
        ),
        ("image: leading slash", json!({"image": "/memcached"})),
        ("image: no name", json!({"image": "@sha256:x"})),
        (
            "image: ipv6 registry",
            json!({"image": "[::1]:5000/memcached:1"}),
        ),
        (
            "image: uppercase hex",
            json!({"image": "memcached@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"}),
        ),
        (
            "image: too long",
            json!({"image": format!("memcached/{}", "a".repeat(240))}),
        ),
        (
            "image: long tag",
            json!({"image": format!("memcached:{}", "a".repeat(129))}),
        ),
        (
            "HPA: pods metric",
            a(
                json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value"}}}]}),
            ),
        ),
        (
            "HPA: object metric",
            a(
                json!({"metrics": [{"type": "Object", "object": {"describedObject": {"kind": "", "name": ".."}, "metric": {"name": "x%"}, "target": {"type": "Value", "value": "0"}}}]}),
            ),
        ),
        (
            "HPA: external metric",
            a(
                json!({"metrics": [{"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "value": 1, "averageValue": "-1"}}}]}),
            ),
        ),
        (
            "HPA: container resource",
            a(
                json!({"metrics": [{"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Bad_Name", "target": {"type": "Utilization", "averageUtilization": 0, "averageValue": "1"}}}]}),
            ),
        ),
        (
            "HPA: two sources",
            a(
                json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Bogus"}}, "pods": {"metric": {"name": "m"}, "target": {"type": "AverageValue", "averageValue": "1"}}}]}),
            ),
        ),
        (
            "HPA: unknown type, missing source",
            a(
                json!({"metrics": [{"type": "Magic"}, {"type": "Resource"}, {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            ),
        ),
        (
            "HPA: behavior",
            a(
                json!({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Random", "tolerance": "-1", "policies": [{"type": "Percent", "value": 0, "periodSeconds": 2000}, {"type": "Bogus", "value": 1, "periodSeconds": 0}]}, "scaleDown": {"stabilizationWindowSeconds": -1}}}),
            ),
        ),
        (
            "HPA: valid behavior",
            a(
                json!({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]}}}),
            ),
        ),
        ("image: empty", json!({"image": ""})),
        (
            "bad image (skipped rule)",
            json!({"image": "Memcached:1.6"}),
        ),
        (
            "bad duration (skipped rule)",
            json!({"monitoring": {"enabled": true, "serviceMonitor": {"interval": "1d", "scrapeTimeout": "2d"}}}),
        ),
        (
            "bad metric (skipped rule) beside R9",
            a(json!({"minReplicas": 5, "metrics": [{"type": "Pods"}]})),
        ),
        (
            "many at once",
            json!({"replicas": 1, "memcached": {"maxMemoryMB": 16, "maxItemSize": "16m", "threads": 30, "maxConnections": 100},
            "resources": {"limits": {"memory": "32Mi"}}, "security": {"sasl": {"enabled": true}, "tls": {"enabled": true}},
            "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        ),
    ]
}

/// Whether the webhook's violation at `field` comes from a rule the policies skip
/// (`memcached-webhook policies --list`).
pub fn skipped_field(field: &str, case: &Case) -> bool {
    let under = |prefix: &str| {
        field
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
    };
    let slab_chunk = case.object["spec"]["memcached"]["extraArgs"]
        .as_array()
        .is_some_and(|args| {
            args.iter()
                .any(|a| a.as_str().is_some_and(|a| a.contains("slab_chunk_max")))
        });
    under("spec.memcached.extraArgs") || (slab_chunk && field == "spec.memcached.maxItemSize")
}

/// Objects stored before any judge was installed, each with a violation.
pub fn stored_before() -> Vec<(&'static str, Value)> {
    vec![
        ("item", json!({"memcached": {"maxItemSize": "100k"}})),
        ("sasl", json!({"security": {"sasl": {"enabled": true}}})),
        (
            "pdb",
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1, "maxUnavailable": 1}}}),
        ),
        (
            "limit",
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
        ),
    ]
}

type Change = fn(&mut Value);

/// Updates of [`stored_before`]'s objects: some keep the stored violation, some change it.
pub fn updates() -> Vec<(&'static str, Change)> {
    fn label(o: &mut Value) {
        o["metadata"]["labels"] = json!({"team": "cache"});
    }
    vec![
        ("item", label),
        ("item", |o| {
            o["spec"]["memcached"]["maxItemSize"] = json!("200k")
        }),
        ("item", |o| {
            o["spec"]["memcached"]["maxItemSize"] = json!("512k")
        }),
        ("item", |o| {
            o["spec"]["memcached"]["maxConnections"] = json!(10)
        }),
        ("sasl", label),
        ("sasl", |o| {
            o["spec"]["security"]["sasl"]["credentialsSecretRef"] = json!({"name": ""})
        }),
        ("sasl", |o| {
            o["spec"]["security"]["sasl"]["credentialsSecretRef"] = json!({"name": "creds"})
        }),
        ("pdb", label),
        ("pdb", |o| {
            o["spec"]["highAvailability"]["podDisruptionBudget"]["maxUnavailable"] = json!(2)
        }),
        ("limit", label),
        ("limit", |o| {
            o["spec"]["resources"]["limits"]["memory"] = json!("65Mi")
        }),
        ("limit", |o| {
            o["spec"]["memcached"] = json!({"maxMemoryMB": 16})
        }),
    ]
}
