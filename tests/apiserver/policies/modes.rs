//! What judges a write: the shipped webhooks, the generated policies alone, nothing, or the
//! policies as a backstop beside webhooks that fail open and cannot be reached. Each mode is
//! waited for until the API server uses it, and the shipped state is put back afterwards.

use serde_json::{Value, json};

use crate::env::{Env, Restore};
use crate::webhook::{self, Webhook};

const POLICIES: &str = "manifests/components/policies/policies.yaml";

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Webhooks,
    Policies,
    Nothing,
    BackstopWebhookDown,
}

impl Mode {
    /// Runs `f` with this mode in place, then restores the shipped webhooks without policies
    /// (also when `f` panics).
    pub fn with<T>(self, env: &Env, f: impl FnOnce() -> T) -> T {
        let _restore = Restore(env);
        let _policies = RemovePolicies(env);
        match self {
            Mode::Webhooks => remove_policies(env),
            Mode::Policies => {
                env.remove_webhooks();
                env.ok(&["apply", "-f", "-"], Some(&webhook::repo_file(POLICIES)));
            }
            Mode::Nothing => {
                env.remove_webhooks();
                remove_policies(env);
            }
            Mode::BackstopWebhookDown => {
                env.ok(&["apply", "-f", "-"], Some(&webhook::repo_file(POLICIES)));
                // The shipped configurations with failurePolicy: Ignore, pointed at a server
                // that has stopped (its port is closed).
                let gone = Webhook::start(&[]);
                let mut configurations = gone.configurations();
                drop(gone);
                for configuration in &mut configurations {
                    for hook in configuration["webhooks"]
                        .as_array_mut()
                        .into_iter()
                        .flatten()
                    {
                        hook["failurePolicy"] = json!("Ignore");
                    }
                }
                env.ok(&["apply", "-f", "-"], Some(&webhook::list(configurations)));
            }
        }
        self.wait(env);
        f()
    }

    /// Polls until the API server judges as this mode says (its informers lag a write).
    fn wait(self, env: &Env) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let calls = env.webhook().calls(webhook::MUTATE);
            let (bad, autoscaled) = (
                probe(env, json!({"memcached": {"maxItemSize": "100k"}})),
                probe(env, autoscaled()),
            );
            let webhook_called = env.webhook().calls(webhook::MUTATE) > calls;
            let by_policy = bad
                .stderr
                .contains("ValidatingAdmissionPolicy 'memcached-webhook-rules'");
            // kubectl prints the webhook's denial from its causes, without the webhook's name.
            let by_webhook = !bad.ok && !by_policy;
            // The mutating webhook warns when it removes replicas; the policy removes them first.
            let warned = autoscaled
                .stderr
                .contains("spec.replicas: removed the value");
            let defaulted = autoscaled.ok && autoscaled.json()["spec"].get("replicas").is_none();
            let ready = match self {
                Mode::Webhooks => by_webhook && warned,
                Mode::Policies => by_policy && !webhook_called && defaulted && !warned,
                Mode::Nothing => bad.ok && !webhook_called && !defaulted,
                Mode::BackstopWebhookDown => by_policy && !webhook_called && defaulted,
            };
            if ready {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for mode {self:?}: {bad:?} {autoscaled:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

fn autoscaled() -> Value {
    json!({"replicas": 3, "resources": {"requests": {"cpu": "1"}},
           "autoscaling": {"enabled": true, "maxReplicas": 4}})
}

fn probe(env: &Env, spec: Value) -> crate::cluster::Output {
    let object = crate::env::memcached("default", "mode-probe", spec);
    env.kubectl(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&object.to_string()),
    )
}

fn remove_policies(env: &Env) {
    env.ok(
        &["delete", "--ignore-not-found", "-f", "-"],
        Some(&webhook::repo_file(POLICIES)),
    );
}

/// Removes the policies when dropped, before [`Restore`] puts the webhooks back.
struct RemovePolicies<'a>(&'a Env);

impl Drop for RemovePolicies<'_> {
    fn drop(&mut self) {
        let env = self.0;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| remove_policies(env))).is_err()
        {
            eprintln!("removing the policies failed; later checks may fail too");
        }
    }
}
