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
        super::boundaries::boundaries()
            .into_iter()
            .map(|(about, spec)| (about.to_owned(), with_spec(spec))),
    );
    cases("v", objects)
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
