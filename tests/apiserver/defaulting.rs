//! Defaulting through the API server: every way a client creates a Memcached, updates that
//! clear a defaulted field, v1alpha1 writes (matchPolicy: Equivalent) and server-side dry-run.
//! The stored spec is compared whole, so a missing default and an extra change both fail.
//!
//! The CRD's schema has defaults of its own, applied inside objects that exist; the inputs are
//! chosen so that each expected value below is one only the webhook can supply (replicas, a
//! whole section, a zero or empty value replaced, the autoscaling metric and behavior).

use serde_json::{Value, json};

use crate::Check;
use crate::env::{Env, memcached};

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "defaulting::create_with_kubectl_apply",
            run: create_with_kubectl_apply,
        },
        Check {
            name: "defaulting::create_with_kubectl_create",
            run: create_with_kubectl_create,
        },
        Check {
            name: "defaulting::create_with_server_side_apply",
            run: create_with_server_side_apply,
        },
        Check {
            name: "defaulting::create_with_raw_post",
            run: create_with_raw_post,
        },
        Check {
            name: "defaulting::update_that_clears_defaults_gets_them_back",
            run: update_that_clears_defaults_gets_them_back,
        },
        Check {
            name: "defaulting::v1alpha1_write_is_defaulted",
            run: v1alpha1_write_is_defaulted,
        },
        Check {
            name: "defaulting::server_dry_run_is_defaulted_and_stores_nothing",
            run: server_dry_run_is_defaulted_and_stores_nothing,
        },
    ]
}

/// An empty spec: replicas and the whole memcached section come from the webhook.
fn empty_spec_defaulted() -> Value {
    json!({
        "replicas": 1,
        "image": "memcached:1.6",
        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0},
    })
}

/// A spec with zero and empty values, sections the defaults fill in, and autoscaling on.
pub fn rich_spec() -> Value {
    json!({
        "replicas": 3,
        "memcached": {"maxMemoryMB": 0, "threads": 0, "maxItemSize": ""},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "128Mi"}},
        "monitoring": {"enabled": true,
                       "serviceMonitor": {"interval": ""}},
        "highAvailability": {},
        "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 6},
    })
}

/// [`rich_spec`] as the README's table says it is stored: replicas removed (autoscaling is
/// on), zeros and empty strings defaulted, the CPU metric and scale-down behavior added.
fn rich_spec_defaulted() -> Value {
    json!({
        "image": "memcached:1.6",
        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "128Mi"}},
        "monitoring": {"enabled": true, "exporterImage": "prom/memcached-exporter:v0.15.4",
                       "serviceMonitor": {"interval": "30s", "scrapeTimeout": "10s"}},
        "highAvailability": {"antiAffinityPreset": "soft"},
        "autoscaling": {
            "enabled": true, "minReplicas": 2, "maxReplicas": 6,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                         "target": {"type": "Utilization", "averageUtilization": 80}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    })
}

/// The two objects each create path sends, with labels and annotations that must survive.
fn objects(namespace: &str) -> [(Value, Value); 2] {
    let with_metadata = |name: &str, spec: Value| {
        let mut object = memcached(namespace, name, spec);
        object["metadata"]["labels"] = json!({"team": "cache"});
        object["metadata"]["annotations"] = json!({"example.com/note": "kept"});
        object
    };
    [
        (with_metadata("empty", json!({})), empty_spec_defaulted()),
        (with_metadata("rich", rich_spec()), rich_spec_defaulted()),
    ]
}

/// The stored object has `expected` as its spec and the labels and annotations it was sent
/// with (kubectl's own last-applied annotation aside).
#[track_caller]
fn assert_stored(env: &Env, sent: &Value, expected: &Value) {
    let (namespace, name) = (
        sent["metadata"]["namespace"].as_str().unwrap(),
        sent["metadata"]["name"].as_str().unwrap(),
    );
    let stored = env.get(namespace, name);
    assert_eq!(
        &stored["spec"], expected,
        "stored spec of {namespace}/{name}"
    );
    assert_eq!(stored["metadata"]["labels"], sent["metadata"]["labels"]);
    let mut annotations = stored["metadata"]["annotations"].clone();
    if let Some(map) = annotations.as_object_mut() {
        map.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    assert_eq!(annotations, sent["metadata"]["annotations"]);
}

fn create_each(env: &Env, namespace: &str, args: &[&str]) {
    env.namespace(namespace);
    for (object, expected) in objects(namespace) {
        env.ok(args, Some(&object.to_string()));
        assert_stored(env, &object, &expected);
    }
}

fn create_with_kubectl_apply(env: &Env) {
    create_each(env, "default-apply", &["apply", "-f", "-"]);
}

fn create_with_kubectl_create(env: &Env) {
    create_each(env, "default-create", &["create", "-f", "-"]);
    // The patch's audit annotations reach the API server's audit log (README, "What the
    // mutating webhook records").
    let event = env.audit_event("create", "default-create", "rich");
    let annotations = &event["annotations"];
    assert_eq!(
        annotations["mutate.memcached-webhook.c5c3.io/removed"], "/spec/replicas",
        "{event}"
    );
    // The CRD's schema defaults run first (image, maxConnections, exporterImage,
    // scrapeTimeout, antiAffinityPreset are set before any webhook sees the object), so
    // these are exactly the fields only the webhook defaulted.
    assert_eq!(
        annotations["mutate.memcached-webhook.c5c3.io/defaulted"],
        "/spec/memcached/maxMemoryMB,/spec/memcached/threads,/spec/memcached/maxItemSize,\
         /spec/monitoring/serviceMonitor/interval,/spec/autoscaling/metrics,/spec/autoscaling/behavior",
        "{event}"
    );
}

fn create_with_server_side_apply(env: &Env) {
    create_each(
        env,
        "default-ssa",
        &["apply", "--server-side", "--field-manager=test", "-f", "-"],
    );
}

/// A POST of the object as JSON to the collection, as client libraries send it.
fn create_with_raw_post(env: &Env) {
    let namespace = "default-raw";
    env.namespace(namespace);
    let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{namespace}/memcacheds");
    for (object, expected) in objects(namespace) {
        let created = env
            .ok(
                &["create", "--raw", &url, "-f", "-"],
                Some(&object.to_string()),
            )
            .json();
        assert_eq!(created["spec"], expected, "the POST's answer");
        assert_stored(env, &object, &expected);
    }
}

fn update_that_clears_defaults_gets_them_back(env: &Env) {
    let namespace = "default-update";
    env.namespace(namespace);
    let [(empty, expected), _] = objects(namespace);
    env.ok(&["create", "-f", "-"], Some(&empty.to_string()));
    // The CRD's schema cannot bring back a removed section or replicas: only the webhook can.
    let clear = r#"[{"op": "remove", "path": "/spec/memcached"}, {"op": "remove", "path": "/spec/replicas"}]"#;
    let out = env.patch(namespace, "empty", "json", clear);
    assert!(out.ok, "{out:?}");
    assert_stored(env, &empty, &expected);
    // A merge patch that nulls a member, and a zero (the webhook's rule, not the schema's).
    let zero =
        r#"{"spec": {"replicas": null, "memcached": {"maxMemoryMB": 0, "maxItemSize": null}}}"#;
    let out = env.patch(namespace, "empty", "merge", zero);
    assert!(out.ok, "{out:?}");
    assert_stored(env, &empty, &expected);
}

/// matchPolicy: Equivalent: the webhooks registered for v1beta1 see a v1alpha1 write too.
fn v1alpha1_write_is_defaulted(env: &Env) {
    let namespace = "default-v1alpha1";
    env.namespace(namespace);
    let mut object = memcached(namespace, "legacy", json!({"memcached": {"threads": 0}}));
    object["apiVersion"] = json!("memcached.c5c3.io/v1alpha1");
    env.ok(&["create", "-f", "-"], Some(&object.to_string()));
    let stored = env.get(namespace, "legacy");
    assert_eq!(stored["spec"], empty_spec_defaulted());
}

fn server_dry_run_is_defaulted_and_stores_nothing(env: &Env) {
    let namespace = "default-dry-run";
    env.namespace(namespace);
    for (object, expected) in objects(namespace) {
        let name = object["metadata"]["name"].as_str().unwrap();
        for verb in [&["create"][..], &["apply"], &["apply", "--server-side"]] {
            let args: Vec<&str> = verb
                .iter()
                .copied()
                .chain(["--dry-run=server", "-o", "json", "-f", "-"])
                .collect();
            let answer = env.ok(&args, Some(&object.to_string())).json();
            assert_eq!(answer["spec"], expected, "{verb:?} --dry-run=server answer");
            let get = env.kubectl(&["get", "-n", namespace, "memcached", name], None);
            assert!(
                !get.ok && get.stderr.contains("NotFound"),
                "{verb:?} --dry-run=server stored {name}: {get:?}"
            );
        }
    }
}
