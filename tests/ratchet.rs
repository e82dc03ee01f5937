//! Ratcheting, deletion and `--validation-actions` end to end: UPDATE reviews shaped like the
//! captured `kubectl apply` UPDATE (`object` already through the mutating webhook, as the
//! apiserver sends it on), with the stored `oldObject` in both shapes it can have on a cluster:
//! defaulted, or as written before the defaulting webhook existed.

use hyper::StatusCode;
use memcached_webhook::admission::Actions;
use serde_json::{Value, json};

use crate::metrics::sample;
use crate::util::{self, Client, MUTATE, fixture, patch_of};

const VALIDATE: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";

/// What every ratcheted warning ends with.
const STORED: &str = " (already stored; allowed until this field changes)";

/// memcached cannot use a 100k item size (not a multiple of its 512k slab chunk).
const ITEM_100K: &str = "spec.memcached.maxItemSize: Invalid value: \"100k\"";

/// The shapes of the stored object.
#[derive(Clone, Copy, Debug)]
enum Stored {
    /// Stored while the defaulting webhook ran: defaulted.
    Defaulted,
    /// Stored before it existed (the operator's webhook admitted it): as written.
    AsWritten,
}

const SHAPES: [Stored; 2] = [Stored::Defaulted, Stored::AsWritten];

/// The captured UPDATE's object with `spec` and extra `metadata` members.
fn object(spec: Value, metadata: Value) -> Value {
    let review = util::json(&fixture("mutate-update-kubectl-apply.json"));
    let mut object = review["request"]["object"].clone();
    object["spec"] = spec;
    if let (Value::Object(into), Value::Object(from)) = (&mut object["metadata"], metadata) {
        into.extend(from);
    }
    object
}

/// The captured UPDATE's envelope around `object` and `old`.
fn review(operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    let mut review = util::json(&fixture("mutate-update-kubectl-apply.json"));
    let request = &mut review["request"];
    request["operation"] = json!(operation);
    request["object"] = object.clone();
    request["oldObject"] = old.cloned().unwrap_or(Value::Null);
    serde_json::to_vec(&review).unwrap()
}

/// `object` after the server's own mutating webhook, as the validating webhook receives it.
async fn defaulted(client: &mut Client, object: &Value) -> Value {
    let (status, bytes) = client.post(MUTATE, review("CREATE", object, None)).await;
    assert_eq!(status, StatusCode::OK);
    let response = util::json(&bytes);
    let mut object = object.clone();
    if response["response"].get("patch").is_some() {
        let patch: json_patch::Patch = serde_json::from_value(patch_of(&response)).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
    }
    object
}

/// The stored object in `shape`.
async fn stored(client: &mut Client, shape: Stored, object: &Value) -> Value {
    match shape {
        Stored::Defaulted => defaulted(client, object).await,
        Stored::AsWritten => object.clone(),
    }
}

/// POSTs to /validate and returns the `response`.
async fn validate(client: &mut Client, body: Vec<u8>) -> Value {
    let (status, bytes) = client.post(VALIDATE, body).await;
    assert_eq!(status, StatusCode::OK);
    util::json(&bytes)["response"].clone()
}

/// Validates an UPDATE from `old` (stored in `shape`) to `new` (defaulted by the server).
async fn update(client: &mut Client, shape: Stored, old: &Value, new: &Value) -> Value {
    let old = stored(client, shape, old).await;
    let new = defaulted(client, new).await;
    validate(client, review("UPDATE", &new, Some(&old))).await
}

fn warnings(response: &Value) -> Vec<String> {
    response["warnings"]
        .as_array()
        .map(|w| w.iter().map(|w| w.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn causes(response: &Value) -> Vec<(String, String)> {
    response["status"]["details"]["causes"]
        .as_array()
        .expect("a denial with causes")
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap().to_owned();
            (text("field"), text("message"))
        })
        .collect()
}

fn item_size(size: &str) -> Value {
    json!({"memcached": {"maxMemoryMB": 512, "maxItemSize": size}})
}

#[tokio::test]
async fn a_label_only_change_of_a_violating_object_is_admitted_with_the_warning() {
    let server = util::start().await;
    let mut client = server.client().await;
    let old = object(item_size("100k"), json!({}));
    let new = object(
        item_size("100k"),
        json!({"labels": {"argocd.argoproj.io/instance": "caches"}}),
    );
    for shape in SHAPES {
        let response = update(&mut client, shape, &old, &new).await;
        assert_eq!(response["allowed"], true, "{shape:?}: {response}");
        let warnings = warnings(&response);
        // Word for word as docs/admission.md's worked example shows it.
        assert_eq!(
            warnings,
            [format!(
                "{ITEM_100K}: memcached refuses an item size below its slab chunk size (512k); \
                 use 512k or a larger multiple of it{STORED}"
            )],
            "{shape:?}"
        );
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn finalizer_removal_on_a_terminating_violating_object_is_admitted() {
    let server = util::start().await;
    let mut client = server.client().await;
    let terminating = |finalizers: Value| {
        json!({"deletionTimestamp": "2026-12-02T11:00:00Z", "deletionGracePeriodSeconds": 0,
               "finalizers": finalizers})
    };
    // A violation, and a spec the view cannot even read (wrong types).
    for spec in [
        item_size("100k"),
        json!({"replicas": "3", "memcached": [1]}),
    ] {
        let old = object(
            spec.clone(),
            terminating(json!(["memcached.c5c3.io/cleanup"])),
        );
        let new = object(spec.clone(), terminating(json!([])));
        for shape in SHAPES {
            let old = match shape {
                // A spec of the wrong types was never defaulted.
                Stored::Defaulted if spec["replicas"] != "3" => {
                    stored(&mut client, shape, &old).await
                }
                _ => old.clone(),
            };
            let response = validate(&mut client, review("UPDATE", &new, Some(&old))).await;
            assert_eq!(response["allowed"], true, "{shape:?} {spec}: {response}");
            assert!(response.get("status").is_none(), "{response}");
            let (status, bytes) = client
                .post(MUTATE, review("UPDATE", &new, Some(&old)))
                .await;
            assert_eq!(status, StatusCode::OK);
            let mutated = util::json(&bytes)["response"].clone();
            assert_eq!(mutated["allowed"], true, "{spec}: {mutated}");
            assert!(
                mutated.get("patch").is_none(),
                "no patch on a terminating object: {mutated}"
            );
            assert!(mutated.get("auditAnnotations").is_none(), "{mutated}");
        }
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_bad_value_changed_to_another_bad_one_is_denied() {
    let server = util::start().await;
    let mut client = server.client().await;
    let old = object(item_size("100k"), json!({}));
    let new = object(item_size("200k"), json!({}));
    for shape in SHAPES {
        let response = update(&mut client, shape, &old, &new).await;
        assert_eq!(response["allowed"], false, "{shape:?}: {response}");
        assert_eq!(response["status"]["code"], 422);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("spec.memcached.maxItemSize: Invalid value: \"200k\""),
            "{message}"
        );
        let causes = causes(&response);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].0, "spec.memcached.maxItemSize");
        assert!(warnings(&response).is_empty(), "{response}");
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_new_violation_next_to_an_old_one_is_denied_alone() {
    let server = util::start().await;
    let mut client = server.client().await;
    let old = object(item_size("100k"), json!({}));
    let mut spec = item_size("100k");
    spec["image"] = json!("memcached:1.6:latest");
    let new = object(spec, json!({}));
    for shape in SHAPES {
        let response = update(&mut client, shape, &old, &new).await;
        assert_eq!(response["allowed"], false, "{shape:?}: {response}");
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "Memcached.memcached.c5c3.io \"my-cache\" is invalid: spec.image: Invalid value: \"memcached:1.6:latest\""
            ),
            "only the new violation, unbracketed: {message}"
        );
        assert!(!message.contains("maxItemSize"), "{message}");
        let causes = causes(&response);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].0, "spec.image");
        let warnings = warnings(&response);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with(ITEM_100K) && warnings[0].ends_with(STORED));
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_fix_is_admitted_without_a_word() {
    let server = util::start().await;
    let mut client = server.client().await;
    let old = object(item_size("100k"), json!({}));
    let new = object(item_size("512k"), json!({}));
    for shape in SHAPES {
        let response = update(&mut client, shape, &old, &new).await;
        assert_eq!(response["allowed"], true, "{shape:?}: {response}");
        assert!(warnings(&response).is_empty(), "{response}");
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_unreadable_old_object_ratchets_nothing() {
    let server = util::start().await;
    let mut client = server.client().await;
    let mut old = object(item_size("100k"), json!({}));
    old["spec"]["replicas"] = json!("five");
    let new = defaulted(&mut client, &object(item_size("100k"), json!({}))).await;
    let response = validate(&mut client, review("UPDATE", &new, Some(&old))).await;
    assert_eq!(response["allowed"], false, "judged as a CREATE: {response}");
    assert_eq!(causes(&response)[0].0, "spec.memcached.maxItemSize");
    server.stop().await.unwrap();
}

/// One server per action set: an UPDATE that adds a violation (an image) to a stored one.
#[tokio::test]
async fn each_action_set() {
    let old = object(item_size("100k"), json!({}));
    let mut spec = item_size("100k");
    spec["image"] = json!("memcached:1.6:latest");
    let new = object(spec, json!({}));
    let image = "spec.image: Invalid value: \"memcached:1.6:latest\"";

    for (flag, denied, warned, audited) in [
        ("Deny", true, false, false),
        ("Warn", false, true, false),
        ("Audit", false, false, true),
        ("Deny,Audit", true, false, true),
        ("Warn,Audit", false, true, true),
    ] {
        let actions = Actions::parse(flag).unwrap();
        let server = util::start_with(|c| c.validation_actions = actions).await;
        let mut client = server.client().await;
        for shape in SHAPES {
            let response = update(&mut client, shape, &old, &new).await;
            assert_eq!(response["allowed"], !denied, "{flag} {shape:?}: {response}");
            let warnings = warnings(&response);
            // The stored violation is a warning whatever the actions; the new one with Warn.
            assert!(warnings[0].starts_with(ITEM_100K) && warnings[0].ends_with(STORED));
            assert_eq!(
                warnings.iter().any(|w| w.starts_with(image)),
                warned,
                "{flag}: {warnings:?}"
            );
            assert_eq!(
                warnings.len(),
                1 + usize::from(warned),
                "{flag}: {warnings:?}"
            );
            let annotation = &response["auditAnnotations"]["validation_failure"];
            if audited {
                let list: Value = serde_json::from_str(annotation.as_str().unwrap()).unwrap();
                let list = list.as_array().unwrap();
                assert_eq!(list.len(), 2, "{list:?}");
                assert_eq!(list[0]["field"], "spec.image");
                let message = list[0]["message"].as_str().unwrap();
                assert!(message.starts_with("Invalid value: \"memcached:1.6:latest\""));
                assert_eq!(list[1]["field"], "spec.memcached.maxItemSize");
                assert!(list[1]["message"].as_str().unwrap().ends_with(STORED));
            } else {
                assert!(annotation.is_null(), "{flag}: {response}");
            }
        }
        let text = server.scrape().await;
        let count = |action: &str, rule: &str| {
            let series = format!(
                "memcached_webhook_validation_violations_total{{action=\"{action}\",rule=\"{rule}\"}}"
            );
            sample(&text, &series)
        };
        let two = |on: bool| if on { 2.0 } else { 0.0 };
        assert_eq!(count("deny", "image"), two(denied), "{flag}");
        assert_eq!(count("warn", "image"), two(warned), "{flag}");
        assert_eq!(count("audit", "image"), two(audited), "{flag}");
        assert_eq!(count("audit", "memcached_flags"), two(audited), "{flag}");
        assert_eq!(count("ratcheted", "memcached_flags"), 2.0, "{flag}");
        assert_eq!(count("deny", "memcached_flags"), 0.0, "{flag}");
        server.stop().await.unwrap();
    }
}

#[tokio::test]
async fn the_mutating_webhook_says_what_it_defaulted_and_removed() {
    let server = util::start().await;
    let mut client = server.client().await;
    let spec = json!({"replicas": 3, "autoscaling": {"enabled": true, "maxReplicas": 5},
                      "memcached": {"maxMemoryMB": 128}});
    let (status, bytes) = client
        .post(MUTATE, review("CREATE", &object(spec, json!({})), None))
        .await;
    assert_eq!(status, StatusCode::OK);
    let response = util::json(&bytes)["response"].clone();
    assert_eq!(
        response["auditAnnotations"],
        json!({
            "defaulted": "/spec/image,/spec/memcached/maxConnections,/spec/memcached/threads,\
                          /spec/memcached/maxItemSize,/spec/autoscaling/metrics,/spec/autoscaling/behavior",
            "removed": "/spec/replicas",
        })
    );
    // Keys are label-name parts (the apiserver prefixes the webhook's name).
    for key in response["auditAnnotations"].as_object().unwrap().keys() {
        assert!(key.len() <= 63 && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    }
    // Nothing to default: no annotations.
    let full = fixture("fully-specified.json");
    let (_, bytes) = client.post(MUTATE, full).await;
    let response = util::json(&bytes)["response"].clone();
    assert!(response.get("auditAnnotations").is_none(), "{response}");
    server.stop().await.unwrap();
}
