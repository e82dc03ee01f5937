//! Objects that predate the validating webhook: ratcheting on a real stored object, and the
//! finalizer of a terminating object with a bad spec.

use serde_json::json;

use crate::Check;
use crate::env::{Env, Restore, memcached};
use crate::webhook::{self, VWC};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "lifecycle::objects_stored_without_the_validating_webhook",
        run: objects_stored_without_the_validating_webhook,
    }]
}

const NS: &str = "lifecycle";
const STORED: &str = "spec.memcached.maxItemSize: Invalid value: \"100k\"";

/// Stores two objects with `maxItemSize: 100k` (memcached refuses it) while the validating
/// configuration is deleted, puts it back, then: ratcheting admits labels, annotations and
/// unrelated changes with a warning and refuses a new bad value; a terminating object's
/// finalizer comes off without any rule running.
fn objects_stored_without_the_validating_webhook(env: &Env) {
    env.namespace(NS);
    {
        let _restore = Restore(env);
        env.ok(&["delete", "validatingwebhookconfiguration", VWC], None);
        webhook::wait_for(&env.cluster, "the validating webhook is gone", |out| out.ok);
        let legacy = memcached(NS, "legacy", json!({"memcached": {"maxItemSize": "100k"}}));
        let mut doomed = memcached(NS, "doomed", json!({"memcached": {"maxItemSize": "100k"}}));
        doomed["metadata"]["finalizers"] = json!(["example.com/hold"]);
        env.ok(&["create", "-f", "-"], Some(&legacy.to_string()));
        env.ok(&["create", "-f", "-"], Some(&doomed.to_string()));
    }
    ratcheting(env);
    terminating(env);
}

fn ratcheting(env: &Env) {
    let already = |out: &crate::cluster::Output, what: &str| {
        assert!(out.ok, "{what} refused: {out:?}");
        assert!(
            out.warnings().iter().any(|w| w.starts_with(STORED)
                && w.ends_with("(already stored; allowed until this field changes)")),
            "{what}: no ratcheting warning: {out:?}"
        );
    };
    already(
        &env.kubectl(
            &["label", "-n", NS, "memcached", "legacy", "team=cache"],
            None,
        ),
        "label",
    );
    already(
        &env.kubectl(
            &[
                "annotate",
                "-n",
                NS,
                "memcached",
                "legacy",
                "example.com/owner=me",
            ],
            None,
        ),
        "annotate",
    );
    already(
        &env.patch(NS, "legacy", "merge", r#"{"spec": {"replicas": 2}}"#),
        "an unrelated spec change",
    );
    let stored = env.get(NS, "legacy");
    assert_eq!(stored["spec"]["replicas"], 2);
    assert_eq!(stored["metadata"]["labels"]["team"], "cache");

    let out = env.patch(
        NS,
        "legacy",
        "merge",
        r#"{"spec": {"memcached": {"maxItemSize": "200k"}}}"#,
    );
    assert!(!out.ok, "a new bad value was admitted: {out:?}");
    assert!(
        out.stderr
            .contains("spec.memcached.maxItemSize: Invalid value: \"200k\""),
        "{out:?}"
    );
    assert_eq!(
        env.get(NS, "legacy")["spec"]["memcached"]["maxItemSize"],
        "100k"
    );
}

fn terminating(env: &Env) {
    env.ok(
        &["delete", "-n", NS, "memcached", "doomed", "--wait=false"],
        None,
    );
    let object = env.get(NS, "doomed");
    assert!(
        object["metadata"]["deletionTimestamp"].is_string(),
        "{object}"
    );
    let out = env.patch(
        NS,
        "doomed",
        "json",
        r#"[{"op": "remove", "path": "/metadata/finalizers"}]"#,
    );
    assert!(
        out.ok,
        "the finalizer of a terminating object could not be removed: {out:?}"
    );
    // No rule ran: not even the ratcheting warning a live object gets.
    assert!(
        out.warnings().is_empty(),
        "a terminating object was judged: {out:?}"
    );
    let gone = env.kubectl(&["get", "-n", NS, "memcached", "doomed"], None);
    assert!(!gone.ok && gone.stderr.contains("NotFound"), "{gone:?}");
}
