//! The real-apiserver suite: etcd and kube-apiserver from `$KUBEBUILDER_ASSETS` (envtest's
//! convention), the shipped CRD and webhook configurations, the server binary, and checks that
//! go through the API server the way users' writes do (kubectl, server-side apply, raw POSTs).
//!
//! Each check is its own trial (libtest-mimic). They share one control plane and run one at a
//! time, since some swap the cluster-wide webhook configurations. Without `KUBEBUILDER_ASSETS`
//! every trial is listed as ignored and a banner says why; with it set and `CI=true`, a control
//! plane that does not start fails every trial.
//!
//! To add checks: a module with `pub fn checks() -> Vec<Check>`, listed in [`all_checks`]. A check
//! works in its own namespace and restores any webhook configuration it changes
//! ([`env::Env::restore_webhooks`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use libtest_mimic::{Arguments, Failed, Trial};

/// etcd, kube-apiserver, kubeconfig and kubectl.
mod cluster;
/// The control plane with the webhook installed: what every check gets.
mod env;
/// Throwaway CAs and certificates.
mod pki;
/// The server process, its kubelet-style certificate directory, the shipped manifests.
mod webhook;

/// --validation-actions=Warn,Audit: warnings and the audit annotation.
mod actions;
/// --autoscaler-conflicts=on: another HPA or ScaledObject of the Deployment; an outage never blocks.
mod autoscalers;
/// CREATE, UPDATE, dry-run and v1alpha1 writes come back defaulted as the README's table says.
mod defaulting;
/// The README's hand-over from the operator's configurations: never a gap, never two judges.
mod handover;
/// The Helm chart installed by Helm's engine, and the hand-over from the operator's chart.
mod helm;
/// Ratcheting on objects stored before the validating webhook; terminating objects.
mod lifecycle;
/// --metrics-secure: 401, 403 and 200 by the shipped RBAC, over HTTPS; 503 when cut off.
mod metrics;
/// failurePolicy: Fail with the server down.
mod outage;
/// The generated admission policies judge as the webhooks do, alone and as a backstop.
mod policies;
/// reinvocationPolicy: IfNeeded with a later mutating webhook.
mod reinvocation;
/// Rolling updates behind a kube-proxy-like balancer while writes go on (docs/availability.md).
mod roll;
/// Certificate rotation (the kubelet's ..data swap) while writes go on.
mod rotation;
/// Every rule family refuses through the API server; warnings reach kubectl.
mod validation;

pub use env::Env;

/// One named check against the shared [`Env`]; a panic is its failure.
pub struct Check {
    pub name: &'static str,
    pub run: fn(&Env),
}

fn all_checks() -> Vec<Check> {
    [
        defaulting::checks(),
        validation::checks(),
        lifecycle::checks(),
        reinvocation::checks(),
        rotation::checks(),
        actions::checks(),
        handover::checks(),
        outage::checks(),
        policies::checks(),
        autoscalers::checks(),
        helm::checks(),
        metrics::checks(),
        roll::checks(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

const SKIPPED: &str = "real-apiserver suite SKIPPED: KUBEBUILDER_ASSETS not set; see CONTRIBUTING \
     (export KUBEBUILDER_ASSETS to a directory with kube-apiserver and etcd, e.g. from setup-envtest)";

fn main() {
    let mut args = Arguments::from_args();
    // One at a time: checks swap cluster-wide webhook configurations.
    args.test_threads.get_or_insert(1);
    let checks = all_checks();
    let selected = checks.iter().any(|c| selected(&args, c.name));
    let assets = std::env::var_os("KUBEBUILDER_ASSETS").filter(|a| !a.is_empty());
    let ci = std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");

    let env: Result<Arc<Env>, String> = match &assets {
        None => Err(SKIPPED.to_owned()),
        Some(_) if args.list || !selected => Err("not started".to_owned()),
        Some(assets) => Env::start(std::path::Path::new(assets)).map(Arc::new),
    };
    // Some(banner): every trial is listed as ignored, and the banner says why.
    let banner = match &env {
        Ok(_) => None,
        Err(_) if assets.is_none() => Some(SKIPPED.to_owned()),
        Err(_) if args.list || !selected => None,
        Err(why) if ci => {
            eprintln!(
                "real-apiserver suite: the control plane did not start (CI=true, so every check fails):\n{why}"
            );
            None
        }
        Err(why) => Some(format!(
            "real-apiserver suite SKIPPED: the control plane did not start (set CI=true to fail instead):\n{why}"
        )),
    };
    if let Some(banner) = &banner {
        eprintln!("\n{banner}\n");
    }

    let trials = checks
        .into_iter()
        .map(|check| {
            let env = env.clone();
            Trial::test(check.name, move || {
                let env = env.map_err(Failed::from)?;
                std::panic::catch_unwind(AssertUnwindSafe(|| (check.run)(&env))).map_err(|panic| {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "panicked".to_owned());
                    Failed::from(format!(
                        "{message}\n--- server log tail ---\n{}",
                        env.webhook_log()
                    ))
                })
            })
            .with_ignored_flag(banner.is_some())
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // Stops the server, the API server and etcd (by PID) before the process exits.
    drop(env);
    if let Some(banner) = &banner {
        eprintln!("{banner}");
    }
    conclusion.exit();
}

/// Whether libtest's name filter selects `name` (substring, or exact with `--exact`).
fn selected(args: &Arguments, name: &str) -> bool {
    let matches = |f: &str| {
        if args.exact {
            name == f
        } else {
            name.contains(f)
        }
    };
    args.filter.as_deref().is_none_or(matches) && !args.skip.iter().any(|s| matches(s))
}
