//! The README's hand-over from the operator's webhooks (README, "Handing admission over from
//! the operator"), on the operator's v0.4.0 configurations: each step is accepted by the API
//! server, and at every step each write is judged by one implementation only, never by
//! neither. A second server process stands in for the operator's webhook server; the calls
//! each server answers are counted from its metrics around every write.

use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{Value, json};

use crate::Check;
use crate::env::{DeleteOnDrop, Env, memcached};
use crate::webhook::{self, MUTATE, VALIDATE, Webhook};

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "handover::readme_patches_hand_over_without_gap_or_overlap",
            run: readme_patches_hand_over_without_gap_or_overlap,
        },
        Check {
            name: "handover::configuration_without_annotations_needs_the_readme_variant",
            run: configuration_without_annotations_needs_the_readme_variant,
        },
    ]
}

pub(crate) const NS: &str = "handover";
const MWC: &str = "memcached-operator-mutating-webhook-configuration";
const VWC: &str = "memcached-operator-validating-webhook-configuration";

/// Calls one write caused: [ours mutate, ours validate, operator mutate, operator validate].
pub(crate) type Calls = [u64; 4];

fn calls(env: &Env, operator: &Webhook) -> Calls {
    let ours = env.webhook();
    [
        ours.calls(MUTATE),
        ours.calls(VALIDATE),
        operator.calls(MUTATE),
        operator.calls(VALIDATE),
    ]
}

fn delta(env: &Env, operator: &Webhook, write: impl FnOnce()) -> Calls {
    let before = calls(env, operator);
    write();
    let after = calls(env, operator);
    std::array::from_fn(|i| after[i] - before[i])
}

/// Waits until a dry-run probe is judged as `expected` says (the API server's configuration
/// informers lag a write), then checks that a real write is judged so and stored defaulted.
#[track_caller]
pub(crate) fn step(env: &Env, operator: &Webhook, name: &str, expected: Calls) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let probe = delta(env, operator, || {
            webhook::probe(&env.cluster);
        });
        if probe == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: writes are judged {probe:?}, expected {expected:?} \
             ([ours mutate, ours validate, operator's mutate, operator's validate])"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let object = memcached(NS, name, json!({}));
    let write = delta(env, operator, || {
        env.ok(&["create", "-f", "-"], Some(&object.to_string()));
    });
    assert_eq!(write, expected, "{name}: calls of a create");
    assert_eq!(
        env.get(NS, name)["spec"]["replicas"],
        1,
        "{name}: not defaulted"
    );
    let bad = memcached(
        NS,
        &format!("{name}-bad"),
        json!({"memcached": {"maxItemSize": "100k"}}),
    );
    let out = env.kubectl(&["create", "-f", "-"], Some(&bad.to_string()));
    assert!(!out.ok, "{name}: an invalid object was admitted");
}

/// The operator's configurations, pointed at `server`.
fn operator_configurations(server: &Webhook) -> Vec<Value> {
    let text = webhook::repo_file("tests/fixtures/apiserver/operator-v0.4.0-webhooks.yaml");
    let mut docs = webhook::yaml_documents(&text);
    for doc in &mut docs {
        let hook = &mut doc["webhooks"][0];
        let path = hook["clientConfig"]["service"]["path"]
            .as_str()
            .unwrap()
            .to_owned();
        hook["clientConfig"] = server.client_config(&path);
    }
    docs
}

/// The README's `swap` patch for this server.
fn swap_patch(env: &Env, name: &str, path: &str) -> Value {
    let client_config = {
        let ours = env.webhook();
        json!({
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&ours.ca.pem),
            "url": format!("https://{}{path}", ours.addr),
        })
    };
    json!([
        {"op": "add", "path": "/metadata/annotations/cert-manager.io~1inject-ca-from",
         "value": "memcached-webhook-system/memcached-webhook-serving"},
        {"op": "replace", "path": "/webhooks/0/name", "value": name},
        {"op": "replace", "path": "/webhooks/0/clientConfig", "value": client_config},
    ])
}

/// The README's `swap`: one JSON patch per configuration that renames the webhook, points it
/// at this server with this server's CA, and changes the cainjector annotation. The only
/// difference: `clientConfig` is a URL here instead of the Service.
pub(crate) fn swap(env: &Env, kind: &str, configuration: &str, name: &str, path: &str) {
    let patch = swap_patch(env, name, path);
    env.ok(
        &[
            "patch",
            kind,
            configuration,
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
        None,
    );
}

/// Deletes the operator's configurations and puts the shipped ones back, also on panic.
struct Cleanup<'a>(&'a Env);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let env = self.0;
        drop(DeleteOnDrop(env, "mutatingwebhookconfiguration", MWC));
        drop(DeleteOnDrop(env, "validatingwebhookconfiguration", VWC));
        drop(crate::env::Restore(env));
    }
}

fn readme_patches_hand_over_without_gap_or_overlap(env: &Env) {
    env.namespace(NS);
    let operator = Webhook::start(&[]);
    let _cleanup = Cleanup(env);

    // Before: only the operator's configurations, calling the operator's server.
    env.ok(
        &["delete", "mutatingwebhookconfiguration", webhook::MWC],
        None,
    );
    env.ok(
        &["delete", "validatingwebhookconfiguration", webhook::VWC],
        None,
    );
    env.ok(
        &["apply", "-f", "-"],
        Some(&webhook::list(operator_configurations(&operator))),
    );
    step(env, &operator, "before", [0, 0, 1, 1]);

    // Step 2 of the README: each configuration pointed at this server in one update.
    swap(
        env,
        "mutatingwebhookconfiguration",
        MWC,
        "mutate.memcached-webhook.c5c3.io",
        MUTATE,
    );
    step(env, &operator, "mutating-swapped", [1, 0, 0, 1]);
    swap(
        env,
        "validatingwebhookconfiguration",
        VWC,
        "validate.memcached-webhook.c5c3.io",
        VALIDATE,
    );
    step(env, &operator, "both-swapped", [1, 1, 0, 0]);
    let swapped = env
        .ok(
            &["get", "mutatingwebhookconfiguration", MWC, "-o", "json"],
            None,
        )
        .json();
    assert_eq!(
        swapped["webhooks"][0]["name"],
        "mutate.memcached-webhook.c5c3.io"
    );
    assert_eq!(
        swapped["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "memcached-webhook-system/memcached-webhook-serving"
    );

    // Step 3: this webhook's own configurations, then the operator's deleted. In between,
    // both configurations call this server: the same code twice (the README says so), the
    // second defaulting call finds nothing to do.
    env.ok(
        &["apply", "-f", "-"],
        Some(&webhook::list(env.webhook().configurations())),
    );
    step(env, &operator, "both-configurations", [2, 2, 0, 0]);
    env.ok(&["delete", "mutatingwebhookconfiguration", MWC], None);
    env.ok(&["delete", "validatingwebhookconfiguration", VWC], None);
    step(env, &operator, "after", [1, 1, 0, 0]);
}

/// A Helm install with `certmanager.enabled=false` renders the configurations without
/// annotations: the README's patch is refused there (its first operation adds a member to a
/// map that does not exist), and the README's variant, which adds the map first, is accepted.
fn configuration_without_annotations_needs_the_readme_variant(env: &Env) {
    const HELM: &str = "memcached-operator-mutating";
    let operator = Webhook::start(&[]);
    let mut configuration = operator_configurations(&operator).remove(0);
    configuration["metadata"] = json!({"name": HELM});
    // Only objects with this label: the shipped configurations judge everything else.
    configuration["webhooks"][0]["objectSelector"] =
        json!({"matchLabels": {"test.example.com/helm": "true"}});
    let _delete = DeleteOnDrop(env, "mutatingwebhookconfiguration", HELM);
    // create, not apply: apply would add its last-applied annotation.
    env.ok(&["create", "-f", "-"], Some(&configuration.to_string()));

    let patch = swap_patch(env, "mutate.memcached-webhook.c5c3.io", MUTATE);
    let refused = env.kubectl(
        &[
            "patch",
            "mutatingwebhookconfiguration",
            HELM,
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
        None,
    );
    assert!(
        !refused.ok,
        "the README's patch applied to a configuration without annotations"
    );

    let mut variant = patch.as_array().unwrap().clone();
    variant[0] = json!({"op": "add", "path": "/metadata/annotations", "value": {
        "cert-manager.io/inject-ca-from": "memcached-webhook-system/memcached-webhook-serving"}});
    env.ok(
        &[
            "patch",
            "mutatingwebhookconfiguration",
            HELM,
            "--type=json",
            "-p",
            &Value::Array(variant).to_string(),
        ],
        None,
    );
    let patched = env
        .ok(
            &["get", "mutatingwebhookconfiguration", HELM, "-o", "json"],
            None,
        )
        .json();
    assert_eq!(
        patched["webhooks"][0]["name"],
        "mutate.memcached-webhook.c5c3.io"
    );
    assert_eq!(
        patched["webhooks"][0]["clientConfig"]["url"],
        format!("https://{}{MUTATE}", env.webhook().addr)
    );
    assert_eq!(
        patched["metadata"]["annotations"],
        json!({"cert-manager.io/inject-ca-from": "memcached-webhook-system/memcached-webhook-serving"})
    );
}
