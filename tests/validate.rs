//! POST /validate end to end over TLS: denied with every cause, allowed, allowed with warnings,
//! and the same verdict whether or not the mutating webhook ran first.

use hyper::StatusCode;
use serde_json::{Value, json};

use crate::util::{self, Client, MUTATE, fixture, patch_of};

const VALIDATE: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";

/// An AdmissionReview for `object` with `operation`.
fn review(operation: &str, object: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "6f1c2a9e-0000-4000-8000-000000000001",
            "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
            "resource": {"group": "memcached.c5c3.io", "version": "v1beta1", "resource": "memcacheds"},
            "name": object["metadata"]["name"],
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "test"},
            "object": object,
            // A valid stored object, so no violation of `object` is ratcheted (see ratchet.rs).
            "oldObject": if operation == "UPDATE" {
                memcached(object["metadata"]["name"].as_str().unwrap_or_default(), json!({}))
            } else {
                Value::Null
            },
        }
    }))
    .unwrap()
}

fn memcached(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// POSTs to /validate and returns the AdmissionReview's `response`.
async fn validate(client: &mut Client, body: Vec<u8>) -> Value {
    let (status, bytes) = client.post(VALIDATE, body).await;
    assert_eq!(status, StatusCode::OK);
    let review = util::json(&bytes);
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

#[tokio::test]
async fn the_invalid_fixture_is_denied_with_every_cause() {
    let server = util::start().await;
    let mut client = server.client().await;
    let response = validate(&mut client, fixture("invalid-spec.json")).await;
    assert_eq!(response["uid"], "0d3c6a52-8f1e-4c59-9a55-3b1f0c2e7d41");
    assert_eq!(response["allowed"], false);
    let status = &response["status"];
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["code"], 422);
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "Memcached.memcached.c5c3.io \"invalid-cache\" is invalid: [\
         spec.resources.limits.memory: Invalid value: \"64Mi\": memory limit must be at least 96Mi: maxMemoryMB=64 (64Mi) + 32Mi overhead, \
         spec.replicas: Invalid value: 3: spec.replicas and spec.autoscaling.enabled are mutually exclusive, \
         spec.autoscaling.minReplicas: Invalid value: 10: minReplicas (10) must not exceed maxReplicas (5), \
         spec.resources.requests.cpu: Required value: resources.requests.cpu is required when using CPU utilization metrics]"
    );
    assert_eq!(
        status["details"],
        json!({
            "name": "invalid-cache",
            "group": "memcached.c5c3.io",
            "kind": "Memcached",
            "causes": [
                {"reason": "FieldValueInvalid", "field": "spec.resources.limits.memory",
                 "message": "Invalid value: \"64Mi\": memory limit must be at least 96Mi: maxMemoryMB=64 (64Mi) + 32Mi overhead"},
                {"reason": "FieldValueInvalid", "field": "spec.replicas",
                 "message": "Invalid value: 3: spec.replicas and spec.autoscaling.enabled are mutually exclusive"},
                {"reason": "FieldValueInvalid", "field": "spec.autoscaling.minReplicas",
                 "message": "Invalid value: 10: minReplicas (10) must not exceed maxReplicas (5)"},
                {"reason": "FieldValueRequired", "field": "spec.resources.requests.cpu",
                 "message": "Required value: resources.requests.cpu is required when using CPU utilization metrics"},
            ]
        })
    );
    assert!(response.get("warnings").is_none());
    server.stop().await.unwrap();
}

#[tokio::test]
async fn one_error_is_not_bracketed_and_new_rules_use_the_same_shape() {
    let server = util::start().await;
    let mut client = server.client().await;
    let object = memcached(
        "big-items",
        json!({"memcached": {"maxMemoryMB": 64, "maxItemSize": "40m"}}),
    );
    let response = validate(&mut client, review("UPDATE", &object)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "Memcached.memcached.c5c3.io \"big-items\" is invalid: spec.memcached.maxItemSize: Invalid value: \"40m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"
    );
    assert_eq!(
        response["status"]["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec.memcached.maxItemSize",
                "message": "Invalid value: \"40m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"}])
    );

    // The other examples, all at once, in the documented order.
    let object = memcached(
        "many",
        json!({
            "memcached": {"threads": 128, "maxConnections": 100, "maxItemSize": "1k"},
            "monitoring": {"serviceMonitor": {"interval": "30s", "scrapeTimeout": "1m"}},
            "resources": {"requests": {"cpu": "1"}},
            "autoscaling": {"enabled": true, "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}}}]}
        }),
    );
    let response = validate(&mut client, review("CREATE", &object)).await;
    let fields: Vec<_> = response["status"]["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.memcached.maxConnections",
            "spec.memcached.maxItemSize",
            "spec.monitoring.serviceMonitor.scrapeTimeout",
            "spec.autoscaling.maxReplicas",
            "spec.autoscaling.metrics[0].resource.target.averageUtilization",
        ]
    );
    // Warnings ride along with a denial.
    assert_eq!(
        response["warnings"][0],
        "spec.memcached.threads: 128 worker threads; memcached warns above 64 and recommends at most one per CPU core"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn valid_objects_are_allowed_with_or_without_warnings() {
    let server = util::start().await;
    let mut client = server.client().await;

    let response = validate(
        &mut client,
        review("CREATE", &memcached("plain", json!({}))),
    )
    .await;
    assert_eq!(response["allowed"], true);
    assert!(response["status"].is_null() || response["status"]["code"] == 200);
    assert!(response.get("warnings").is_none());

    // The captured kubectl create: highAvailability with one replica runs, but is a warning.
    let response = validate(&mut client, fixture("validate-create-kubectl-create.json")).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"],
        json!([
            "spec.highAvailability: set, but spec.replicas is 1; fewer than 2 replicas cannot survive losing a pod"
        ])
    );

    let object = memcached(
        "tight",
        json!({"replicas": 2, "resources": {"limits": {"memory": "96Mi"}}}),
    );
    let response = validate(&mut client, review("UPDATE", &object)).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(response["warnings"].as_array().unwrap().len(), 1);
    assert!(
        response["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("spec.resources.limits.memory: 96Mi")
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn delete_and_connect_are_allowed_and_bad_input_has_the_causes_mutate_gives() {
    let server = util::start().await;
    let mut client = server.client().await;
    let invalid = memcached("gone", json!({"memcached": {"maxItemSize": "1k"}}));
    for operation in ["DELETE", "CONNECT"] {
        let response = validate(&mut client, review(operation, &invalid)).await;
        assert_eq!(response["allowed"], true, "{operation}");
    }
    let malformed = review("CREATE", &memcached("typo", json!({"replicas": "3"})));
    let response = validate(&mut client, malformed.clone()).await;
    let (_, bytes) = client.post(MUTATE, malformed).await;
    let mutated = util::json(&bytes)["response"].clone();
    assert_eq!(response["allowed"], false);
    // The defaulting webhook cannot patch it (400); the validating one lists it as a cause (422).
    assert_eq!(mutated["status"]["code"], 400);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(
        response["status"]["details"]["causes"],
        mutated["status"]["details"]["causes"]
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn the_verdict_is_the_same_on_a_defaulted_object() {
    let server = util::start().await;
    let mut client = server.client().await;
    let specs = [
        json!({}),
        json!({"memcached": {"maxItemSize": "40m"}}),
        json!({"resources": {"limits": {"memory": "64Mi"}}}),
        json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        json!({"monitoring": {"serviceMonitor": {"interval": "5s"}}}),
        json!({"autoscaling": {"enabled": true, "maxReplicas": 4}}),
        json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "maxReplicas": 4}}),
        json!({"highAvailability": {}, "memcached": {"threads": 100}}),
    ];
    for spec in specs {
        let object = memcached("same", spec);
        let plain = validate(&mut client, review("CREATE", &object)).await;

        let (_, bytes) = client.post(MUTATE, review("CREATE", &object)).await;
        let mutated = util::json(&bytes);
        let mut defaulted = object.clone();
        if mutated["response"].get("patch").is_some() {
            let patch: json_patch::Patch = serde_json::from_value(patch_of(&mutated)).unwrap();
            json_patch::patch(&mut defaulted, &patch).unwrap();
        }
        let after = validate(&mut client, review("CREATE", &defaulted)).await;
        assert_eq!(plain["allowed"], after["allowed"], "{object}");
        assert_eq!(plain["status"], after["status"], "{object}");
        assert_eq!(plain["warnings"], after["warnings"], "{object}");
    }
    server.stop().await.unwrap();
}
