//! What every check gets: a control plane with the CRD and the shipped webhook configurations
//! installed, pointed at one running server, and helpers for Memcached objects.

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};

use crate::cluster::{Cluster, Output};
use crate::webhook::{self, Webhook};

pub struct Env {
    /// Dropped after the server (fields drop in order): the API server never calls a stopped
    /// webhook while it shuts down, not that it would matter.
    pub webhook: Mutex<Webhook>,
    pub cluster: Cluster,
}

impl Env {
    /// Starts the control plane and the server (default flags) and installs the CRD and the
    /// shipped webhook configurations.
    pub fn start(assets: &Path) -> Result<Env, String> {
        let cluster = Cluster::start(assets)?;
        let webhook = Webhook::start(&[]);
        let install = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            webhook::install_crd(&cluster);
            webhook::install_webhooks(&cluster, webhook.configurations());
        }));
        if let Err(panic) = install {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            return Err(format!(
                "installing the CRD and webhooks failed: {why}\n--- kube-apiserver log ---\n{}\n--- server log ---\n{}",
                cluster.log_tail("kube-apiserver"),
                webhook.log_tail()
            ));
        }
        Ok(Env {
            webhook: Mutex::new(webhook),
            cluster,
        })
    }

    /// The server every check starts with (a failed check may have poisoned the lock: the
    /// server is still fine).
    pub fn webhook(&self) -> MutexGuard<'_, Webhook> {
        self.webhook.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn webhook_log(&self) -> String {
        self.webhook().log_tail()
    }

    /// Puts the shipped configurations back, pointed at the shared server, and waits until
    /// the API server uses them. Checks that change them call it when done, also on panic
    /// (see [`Restore`]).
    pub fn restore_webhooks(&self) {
        let configurations = self.webhook().configurations();
        webhook::install_webhooks(&self.cluster, configurations);
    }

    /// Deletes the shipped configurations (either may be gone already): checks that install
    /// other judges put them back with [`Env::restore_webhooks`].
    pub fn remove_webhooks(&self) {
        for (kind, name) in [
            ("mutatingwebhookconfiguration", webhook::MWC),
            ("validatingwebhookconfiguration", webhook::VWC),
        ] {
            self.ok(&["delete", "--ignore-not-found", kind, name], None);
        }
    }

    /// kubectl against the cluster.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.cluster.kubectl(args, stdin)
    }

    #[track_caller]
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.cluster.ok(args, stdin)
    }

    /// `kubectl patch` of Memcached `namespace/name`, with a `--type` of `merge` or `json`.
    pub fn patch(&self, namespace: &str, name: &str, kind: &str, patch: &str) -> Output {
        let kind = format!("--type={kind}");
        let args = [
            "patch",
            "-n",
            namespace,
            "memcached",
            name,
            &kind,
            "-p",
            patch,
        ];
        self.kubectl(&args, None)
    }

    /// Creates namespace `name` for a check.
    pub fn namespace(&self, name: &str) {
        self.cluster.namespace(name);
    }

    /// The stored object, as v1beta1.
    #[track_caller]
    pub fn get(&self, namespace: &str, name: &str) -> Value {
        self.ok(
            &[
                "get",
                "-n",
                namespace,
                "memcacheds.v1beta1.memcached.c5c3.io",
                name,
                "-o",
                "json",
            ],
            None,
        )
        .json()
    }
}

impl Env {
    /// The API server's audit event (policy: Metadata) of `verb` on the Memcached
    /// `namespace`/`name` once its response is complete. The log backend writes it as the
    /// request ends; polled for 10 s.
    #[track_caller]
    pub fn audit_event(&self, verb: &str, namespace: &str, name: &str) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(&self.cluster.audit_log).unwrap_or_default();
            let found = log
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|e| {
                    e["verb"] == verb
                        && e["stage"] == "ResponseComplete"
                        && e["objectRef"]["resource"] == "memcacheds"
                        && e["objectRef"]["namespace"] == namespace
                        && e["objectRef"]["name"] == name
                });
            if let Some(event) = found {
                return event;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no audit event for the {verb} of {namespace}/{name} in {}",
                self.cluster.audit_log.display()
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
}

/// A Memcached named `name` in `namespace` with `spec`, v1beta1.
pub fn memcached(namespace: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "memcached.c5c3.io/v1beta1",
        "kind": "Memcached",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// Restores the shipped webhook configurations when dropped, also while a check unwinds.
pub struct Restore<'a>(pub &'a Env);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        // A second panic while the check unwinds would abort the whole suite.
        let env = self.0;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.restore_webhooks()))
            .is_err()
        {
            eprintln!(
                "restoring the shipped webhook configurations failed; later checks may fail too"
            );
        }
    }
}

/// Deletes the cluster-scoped object `kind`/`name` when dropped, also while a check unwinds.
pub struct DeleteOnDrop<'a>(pub &'a Env, pub &'static str, pub &'static str);

impl Drop for DeleteOnDrop<'_> {
    fn drop(&mut self) {
        let Self(env, kind, name) = *self;
        let _ = env.kubectl(&["delete", "--ignore-not-found", kind, name], None);
    }
}
