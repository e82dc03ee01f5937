//! `--validation-actions=Warn,Audit` through the API server: a violating write is admitted,
//! kubectl prints the violation, and the API server's audit log carries the webhook's
//! `validation_failure` annotation for that object.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Check;
use crate::env::{Env, Restore, memcached};
use crate::webhook::{self, Webhook};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "actions::warn_audit_admits_warns_and_audits",
        run: warn_audit_admits_warns_and_audits,
    }]
}

const NS: &str = "actions";
const VIOLATION: &str = "spec.memcached.maxItemSize: Invalid value: \"100k\"";
const ANNOTATION: &str = "validate.memcached-webhook.c5c3.io/validation_failure";

fn warn_audit_admits_warns_and_audits(env: &Env) {
    env.namespace(NS);
    let warn = Webhook::start(&["--validation-actions=Warn,Audit"]);
    let _restore = Restore(env);
    env.ok(
        &["apply", "-f", "-"],
        Some(&webhook::list(warn.configurations())),
    );
    webhook::wait_for(&env.cluster, "the Warn,Audit server judges", |out| {
        out.ok && out.warnings().iter().any(|w| w.starts_with(VIOLATION))
    });

    let object = memcached(NS, "warned", json!({"memcached": {"maxItemSize": "100k"}}));
    let out = env.kubectl(&["create", "-f", "-"], Some(&object.to_string()));
    assert!(out.ok, "refused under Warn,Audit: {out:?}");
    assert!(
        out.warnings().iter().any(|w| w.starts_with(VIOLATION)),
        "no warning: {out:?}"
    );
    assert_eq!(
        env.get(NS, "warned")["spec"]["memcached"]["maxItemSize"],
        "100k"
    );

    let event = audit_event(env, "warned");
    let failures: Value = serde_json::from_str(
        event["annotations"][ANNOTATION]
            .as_str()
            .unwrap_or_else(|| panic!("no {ANNOTATION} in {event}")),
    )
    .unwrap();
    assert_eq!(
        failures[0]["field"], "spec.memcached.maxItemSize",
        "{failures}"
    );
    assert!(
        failures[0]["message"].as_str().unwrap().contains("100k"),
        "{failures}"
    );
}

/// The audit event of the CREATE of `name` in [`NS`] once the response is complete (the log
/// backend writes it as the request ends; polled for 10 s).
fn audit_event(env: &Env, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(&env.cluster.audit_log).unwrap_or_default();
        let found = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| {
                e["verb"] == "create"
                    && e["stage"] == "ResponseComplete"
                    && e["objectRef"]["resource"] == "memcacheds"
                    && e["objectRef"]["namespace"] == NS
                    && e["objectRef"]["name"] == name
            });
        if let Some(event) = found {
            return event;
        }
        assert!(
            Instant::now() < deadline,
            "no audit event for the create of {NS}/{name} in {}",
            env.cluster.audit_log.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
