//! The Helm chart (charts/memcached-webhook) installed into the real API server by Helm v4's
//! engine, and the README's hand-over for Helm users from the operator's chart. Helm runs
//! through `.ci/helm-engine` (the Helm SDK as a shared library, PyPI helm-python-sdk) with the
//! Python `$HELM_PYTHON` names; `.ci/check-chart` sets it. Without it these checks are left out
//! and a line says so. cert-manager is faked: its two CRDs are served and nothing acts on them.
//! The chart's configurations call the suite's server by `webhookConfigurations.url` with its CA
//! as `caBundle`: the suite has no Service routing (an API server resolving a Service would dial
//! its ClusterIP) and no cainjector. Everything else is the chart as users install it.

use serde_json::{Value, json};

use crate::Check;
use crate::env::{DeleteOnDrop, Env, Restore};
use crate::handover::{self, Calls, NS};
use crate::webhook::{self, MUTATE, MWC, VALIDATE, VWC, Webhook};

pub fn checks() -> Vec<Check> {
    if std::env::var_os("HELM_PYTHON").is_none_or(|p| p.is_empty()) {
        eprintln!(
            "helm:: checks SKIPPED: HELM_PYTHON not set (.ci/check-chart sets it to a Python with \
             helm-python-sdk and runs them)"
        );
        return Vec::new();
    }
    vec![
        Check {
            name: "helm::chart_installs_and_its_configurations_judge_writes",
            run: chart_installs_and_its_configurations_judge_writes,
        },
        Check {
            name: "helm::hand_over_from_the_operator_chart_without_gap_or_overlap",
            run: hand_over_from_the_operator_chart_without_gap_or_overlap,
        },
    ]
}

const RELEASE: &str = "memcached-webhook";
const RELEASE_NS: &str = "memcached-webhook-system";
const OPERATOR: &str = "memcached-operator";
const OPERATOR_NS: &str = "memcached-operator-system";
const OPERATOR_MWC: &str = "memcached-operator-mutating";
const OPERATOR_VWC: &str = "memcached-operator-validating";

/// `.ci/helm-engine` against the suite's cluster: the release summary it prints.
#[track_caller]
fn helm(env: &Env, args: &[&str]) -> Value {
    let python = std::env::var_os("HELM_PYTHON").expect("HELM_PYTHON");
    let out = std::process::Command::new(python)
        .arg(repo_path(".ci/helm-engine"))
        .arg(&env.cluster.kubeconfig)
        .args(args)
        .output()
        .expect("running .ci/helm-engine");
    assert!(
        out.status.success(),
        "helm {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("helm-engine prints the release as JSON")
}

/// A path of the repository, by its path from the crate root.
fn repo_path(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    full.display().to_string()
}

fn chart() -> String {
    repo_path("charts/memcached-webhook")
}

/// The cert-manager kinds the chart creates, served and never acted on.
fn fake_cert_manager(env: &Env) {
    let crds = webhook::repo_file("tests/fixtures/apiserver/fake-cert-manager-crds.yaml");
    env.ok(&["apply", "-f", "-"], Some(&crds));
    for crd in ["certificates.cert-manager.io", "issuers.cert-manager.io"] {
        env.ok(
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{crd}"),
            ],
            None,
        );
    }
}

/// Deletes what other checks left under the chart's names (autoscalers.rs applies the shipped
/// RBAC and ServiceAccount): Helm refuses to take over objects another tool created.
fn clean_slate(env: &Env) {
    env.ok(
        &[
            "delete",
            "--ignore-not-found",
            "clusterrole,clusterrolebinding",
            "memcached-webhook-autoscalers",
        ],
        None,
    );
    env.ok(
        &[
            "delete",
            "--ignore-not-found",
            "-n",
            RELEASE_NS,
            "serviceaccount",
            "memcached-webhook",
        ],
        None,
    );
}

/// Values that point the chart's configurations at the suite's server and its CA: the suite
/// has no Service routing (an API server resolving the Service would dial its ClusterIP) and no
/// cainjector.
fn at_the_test_server(env: &Env, mut values: Value) -> String {
    let ours = env.webhook();
    let ca = ours.client_config(MUTATE)["caBundle"].clone();
    values["webhookConfigurations"]["url"] = json!(format!("https://{}", ours.addr));
    values["webhookConfigurations"]["caBundle"] = ca;
    values.to_string()
}

/// [`helm`] for this chart's release, which must call the test server by URL: a configuration
/// naming the Service would make the API server dial the Service's ClusterIP, an address
/// outside this machine's loopback. Such configurations are deleted before anything is written.
#[track_caller]
fn chart_release(env: &Env, args: &[&str]) -> Value {
    let release = helm(env, args);
    let manifest = release["manifest"].as_str().unwrap_or_default();
    let by_service = webhook::yaml_documents(manifest).iter().any(|o| {
        o["webhooks"].as_array().is_some_and(|hooks| {
            hooks
                .iter()
                .any(|h| !h["clientConfig"]["service"].is_null())
        })
    });
    if by_service {
        env.remove_webhooks();
        panic!("helm {args:?} installed configurations that call the Service, not the test server");
    }
    release
}

/// Uninstalls a release when dropped, also while a check unwinds.
struct Uninstall<'a>(&'a Env, &'static str, &'static str);

impl Drop for Uninstall<'_> {
    fn drop(&mut self) {
        let Self(env, release, namespace) = *self;
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            helm(env, &["uninstall", release, namespace]);
        }))
        .is_err()
        {
            eprintln!("uninstalling the Helm release {release} failed; later checks may fail too");
        }
    }
}

/// `kind/name` of every object in a release's manifest.
fn manifest_objects(release: &Value) -> Vec<(String, String, Option<String>)> {
    let text = release["manifest"].as_str().expect("a release manifest");
    webhook::yaml_documents(text)
        .iter()
        .map(|o| {
            let meta = &o["metadata"];
            (
                o["kind"].as_str().unwrap().to_owned(),
                meta["name"].as_str().unwrap().to_owned(),
                meta["namespace"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// `helm install` of the chart with its defaults (but the URL): every object of the release is
/// stored and Helm's, its configurations refuse an invalid write and default a valid one, and
/// `helm uninstall` takes them away.
fn chart_installs_and_its_configurations_judge_writes(env: &Env) {
    fake_cert_manager(env);
    clean_slate(env);
    // The chart's configurations have the shipped ones' names: Helm refuses to adopt them.
    let _restore = Restore(env);
    env.ok(&["delete", "mutatingwebhookconfiguration", MWC], None);
    env.ok(&["delete", "validatingwebhookconfiguration", VWC], None);
    let _uninstall = Uninstall(env, RELEASE, RELEASE_NS);
    let values = at_the_test_server(env, json!({}));
    let release = chart_release(env, &["install", RELEASE, RELEASE_NS, &chart(), &values]);
    assert_eq!(release["status"], "deployed", "{release}");

    let objects = manifest_objects(&release);
    for kind in [
        "Deployment",
        "Service",
        "Certificate",
        "Issuer",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ClusterRole",
    ] {
        assert!(
            objects.iter().any(|(k, _, _)| k == kind),
            "no {kind} in the release: {objects:?}"
        );
    }
    for (kind, name, namespace) in &objects {
        let mut args = vec!["get", kind.as_str(), name.as_str(), "-o", "json"];
        if let Some(ns) = namespace {
            args.extend(["-n", ns.as_str()]);
        }
        let stored = env.ok(&args, None).json();
        assert_eq!(
            stored["metadata"]["annotations"]["meta.helm.sh/release-name"], RELEASE,
            "{kind} {name} is not Helm's"
        );
    }
    let mwc = env
        .ok(
            &["get", "mutatingwebhookconfiguration", MWC, "-o", "json"],
            None,
        )
        .json();
    assert_eq!(
        mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        format!("{RELEASE_NS}/memcached-webhook-serving")
    );

    webhook::wait_for(
        &env.cluster,
        "the chart's configurations are called",
        |out| {
            !out.ok
                && out
                    .stderr
                    .contains("spec.memcached.maxItemSize: Invalid value: \"100k\"")
        },
    );
    let valid = crate::env::memcached("default", "helm-valid", json!({}));
    let created = env
        .ok(
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            Some(&valid.to_string()),
        )
        .json();
    assert_eq!(created["spec"]["replicas"], 1, "not defaulted: {created}");
    helm(env, &["uninstall", RELEASE, RELEASE_NS]);
    let gone = env.kubectl(&["get", "mutatingwebhookconfiguration", MWC], None);
    assert!(!gone.ok, "helm uninstall left {MWC}");
}

/// The README's Helm hand-over: our chart's server first (no configurations), the swap patches
/// on the operator chart's configurations, our configurations by `helm upgrade --reuse-values`,
/// then the operator's chart upgraded with `webhook.enabled=false`, which deletes its (swapped)
/// configurations. Each step is checked as handover.rs checks the kustomize one.
fn hand_over_from_the_operator_chart_without_gap_or_overlap(env: &Env) {
    fake_cert_manager(env);
    clean_slate(env);
    let _ = env.kubectl(&["create", "namespace", NS], None);
    let operator = Webhook::start(&[]);
    let _restore = Restore(env);
    env.ok(&["delete", "mutatingwebhookconfiguration", MWC], None);
    env.ok(&["delete", "validatingwebhookconfiguration", VWC], None);
    let _operator_release = Uninstall(env, OPERATOR, OPERATOR_NS);
    let _release = Uninstall(env, RELEASE, RELEASE_NS);
    let _mwc = DeleteOnDrop(env, "mutatingwebhookconfiguration", OPERATOR_MWC);
    let _vwc = DeleteOnDrop(env, "validatingwebhookconfiguration", OPERATOR_VWC);

    let stand_in = repo_path("tests/fixtures/apiserver/operator-chart");
    let url = format!("https://{}", operator.addr);
    let ca = operator.client_config(MUTATE)["caBundle"].clone();
    let values = json!({"webhook": {"url": url, "caBundle": ca}});
    helm(
        env,
        &[
            "install",
            OPERATOR,
            OPERATOR_NS,
            &stand_in,
            &values.to_string(),
        ],
    );
    let step = |name: &str, expected: Calls| handover::step(env, &operator, name, expected);
    step("helm-before", [0, 0, 1, 1]);

    // 1. Our server, without its configurations.
    let off = at_the_test_server(env, json!({"webhookConfigurations": {"enabled": false}}));
    let release = chart_release(env, &["install", RELEASE, RELEASE_NS, &chart(), &off]);
    let kinds: Vec<String> = manifest_objects(&release)
        .into_iter()
        .map(|(k, _, _)| k)
        .collect();
    assert!(kinds.iter().any(|k| k == "Deployment"), "{kinds:?}");
    assert!(
        !kinds.iter().any(|k| k.ends_with("WebhookConfiguration")),
        "{kinds:?}"
    );
    step("helm-server-alone", [0, 0, 1, 1]);

    // 2. The README's swap, on the configurations the operator's chart names <fullname>-*.
    handover::swap(
        env,
        "mutatingwebhookconfiguration",
        OPERATOR_MWC,
        "mutate.memcached-webhook.c5c3.io",
        MUTATE,
    );
    step("helm-mutating-swapped", [1, 0, 0, 1]);
    handover::swap(
        env,
        "validatingwebhookconfiguration",
        OPERATOR_VWC,
        "validate.memcached-webhook.c5c3.io",
        VALIDATE,
    );
    step("helm-both-swapped", [1, 1, 0, 0]);

    // 3. Our configurations (cainjector's moment before they work is not played here: the
    // URL and CA came with the values in step 1, kept by --reuse-values).
    let on = json!({"webhookConfigurations": {"enabled": true}});
    chart_release(
        env,
        &["upgrade", RELEASE, RELEASE_NS, &chart(), &on.to_string()],
    );
    step("helm-both-configurations", [2, 2, 0, 0]);

    // 4. The operator's webhook off: its chart drops its (swapped) configurations itself.
    let disabled = json!({"webhook": {"enabled": false}});
    helm(
        env,
        &[
            "upgrade",
            OPERATOR,
            OPERATOR_NS,
            &stand_in,
            &disabled.to_string(),
        ],
    );
    step("helm-after", [1, 1, 0, 0]);
    for (kind, name) in [
        ("mutatingwebhookconfiguration", OPERATOR_MWC),
        ("validatingwebhookconfiguration", OPERATOR_VWC),
    ] {
        assert!(
            !env.kubectl(&["get", kind, name], None).ok,
            "{name} is still there"
        );
    }
    let args = env
        .ok(
            &[
                "get",
                "configmap",
                "-n",
                OPERATOR_NS,
                "memcached-operator-manager-args",
                "-o",
                "json",
            ],
            None,
        )
        .json();
    assert_eq!(args["data"]["args"], "--enable-webhooks=false");
}
