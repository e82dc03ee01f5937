//! Defaulting through the API server: every way a client creates a Memcached, updates that
//! clear a defaulted field, v1alpha1 writes (matchPolicy: Equivalent) and server-side dry-run.
//! The stored spec is compared whole, so a missing default and an extra change both fail.

use serde_json::{Value, json};

use crate::Check;
use crate::env::{Env, memcached};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "defaulting::create_with_kubectl_apply",
        run: create_with_kubectl_apply,
    }]
}

/// An empty spec: what the CRD's schema defaults cannot add (it defaults inside objects that
/// exist), the webhook must: replicas, and the whole memcached section.
fn empty_spec_defaulted() -> Value {
    json!({
        "replicas": 1,
        "image": "memcached:1.6",
        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0},
    })
}

fn create_with_kubectl_apply(env: &Env) {
    env.namespace("default-apply");
    let object = memcached("default-apply", "empty", json!({}));
    env.ok(&["apply", "-f", "-"], Some(&object.to_string()));
    let stored = env.get("default-apply", "empty");
    assert_eq!(stored["spec"], empty_spec_defaulted());
}
