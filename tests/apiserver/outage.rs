//! failurePolicy: Fail as shipped: with the server unreachable, a write is refused with the
//! webhook's name, never admitted unjudged.

use serde_json::json;

use crate::Check;
use crate::env::{Env, Restore, memcached};
use crate::webhook::{self, Webhook};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "outage::unreachable_server_refuses_writes",
        run: unreachable_server_refuses_writes,
    }]
}

const NS: &str = "outage";

fn unreachable_server_refuses_writes(env: &Env) {
    env.namespace(NS);
    let _restore = Restore(env);
    // The shipped configurations, pointed at a server that has stopped (its port is closed).
    let gone = Webhook::start(&[]);
    let configurations = gone.configurations();
    drop(gone);
    env.ok(&["apply", "-f", "-"], Some(&webhook::list(configurations)));
    webhook::wait_for(
        &env.cluster,
        "the API server calls the stopped server",
        |out| !out.ok && out.stderr.contains("failed calling webhook"),
    );
    let object = memcached(NS, "unjudged", json!({}));
    let out = env.kubectl(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(
        !out.ok,
        "admitted while the webhook was unreachable: {out:?}"
    );
    assert!(
        out.stderr
            .contains("failed calling webhook \"mutate.memcached-webhook.c5c3.io\""),
        "{out:?}"
    );
    let get = env.kubectl(&["get", "-n", NS, "memcached", "unjudged"], None);
    assert!(!get.ok, "stored while the webhook was unreachable");
}
