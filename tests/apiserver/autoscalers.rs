//! `--autoscaler-conflicts=on` against the real API server: the server watches HPAs and
//! ScaledObjects with the shipped RBAC (a service account's token, through a TCP relay the check
//! can cut), and a Memcached whose Deployment another autoscaler scales is refused, naming it.

use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Check;
use crate::cluster::Output;
use crate::env::{Env, Restore, memcached};
use crate::webhook::{self, Webhook, repo_file};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "autoscalers::another_autoscaler_is_refused_and_an_outage_never_blocks",
        run: another_autoscaler_is_refused_and_an_outage_never_blocks,
    }]
}

const NS: &str = "autoscalers";
const UNCHECKED: &str = "could not be checked";

fn another_autoscaler_is_refused_and_an_outage_never_blocks(env: &Env) {
    env.namespace(NS);
    let relay = Relay::start(env.cluster.port);
    let kubeconfig = service_account_kubeconfig(env, relay.port);
    // KEDA is not installed yet: discovery must see it when it appears.
    let server = Webhook::start(&[
        "--autoscaler-conflicts=on",
        &format!("--kubeconfig={}", kubeconfig.display()),
        "--autoscaler-discovery-interval=1s",
    ]);
    let _restore = Restore(env);
    let _keda = RemoveKeda(env);
    env.ok(
        &["apply", "-f", "-"],
        Some(&webhook::list(server.configurations())),
    );
    webhook::wait_for(&env.cluster, "the autoscaler-aware server judges", |out| {
        !out.ok && out.stderr.contains("maxItemSize")
    });
    wait_until("both kinds are synced", Duration::from_secs(30), || {
        let metrics = server.scrape();
        ["horizontalpodautoscaler", "scaledobject"]
            .iter()
            .all(|kind| {
                metrics.contains(&format!(
                    "memcached_webhook_autoscaler_watch_synced{{kind=\"{kind}\"}} 1"
                ))
            })
    });

    // A foreign HPA aimed at Deployment `cache`: refused, naming it.
    env.ok(&["apply", "-f", "-"], Some(&hpa("foreign", "cache", None)));
    let out = create_until(env, "cache", json!({}), 5, |out| !out.ok);
    assert!(
        out.stderr
            .contains("spec.replicas: Forbidden: the workload 'cache'")
            && out.stderr.contains("HorizontalPodAutoscaler 'foreign'"),
        "{out:?}"
    );

    // The operator's own HPA (controlled by the Memcached of its name), and one it adopts.
    let owner = json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
        "name": "owned", "uid": "6f1c3a8e-0000-4000-8000-000000000001", "controller": true});
    env.ok(
        &["apply", "-f", "-"],
        Some(&hpa("owned", "owned", Some(owner))),
    );
    env.ok(
        &["apply", "-f", "-"],
        Some(&hpa("adopted", "adopted", None)),
    );
    // A foreign one beside them shows the watch has seen all three.
    env.ok(
        &["apply", "-f", "-"],
        Some(&hpa("beside-scaler", "beside", None)),
    );
    create_until(env, "beside", json!({}), 5, |out| !out.ok);
    let autoscaling = json!({"autoscaling": {"enabled": true, "maxReplicas": 3},
        "resources": {"requests": {"cpu": "100m"}}});
    for name in ["owned", "adopted"] {
        let out = create(env, name, autoscaling.clone());
        assert!(
            out.ok,
            "the operator's own HPA {name} taken for another: {out:?}"
        );
        assert!(!out.stderr.contains(UNCHECKED), "{out:?}");
    }

    // Deleting the foreign HPA admits `cache` within a second or two (the watch).
    env.ok(&["delete", "-n", NS, "hpa", "foreign"], None);
    let deleted = Instant::now();
    let out = create_until(env, "cache", json!({}), 5, |out| out.ok);
    eprintln!(
        "autoscalers: admitted {:?} after the foreign HPA's deletion",
        deleted.elapsed()
    );
    assert!(!out.stderr.contains(UNCHECKED), "{out:?}");

    // KEDA's CRD installed later, then a ScaledObject aimed at `keda-target` (kind defaulted).
    env.ok(&["apply", "-f", "-"], Some(&keda_crd().to_string()));
    env.ok(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/scaledobjects.keda.sh",
        ],
        None,
    );
    let scaled_object = json!({"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
        "metadata": {"name": "queue-scaler", "namespace": NS},
        "spec": {"scaleTargetRef": {"name": "keda-target"}}});
    env.ok(&["apply", "-f", "-"], Some(&scaled_object.to_string()));
    let out = create_until(env, "keda-target", json!({}), 20, |out| !out.ok);
    assert!(
        out.stderr.contains("ScaledObject 'queue-scaler'"),
        "{out:?}"
    );

    // The API server stops answering the watch: admitted, with the warning.
    env.ok(
        &["apply", "-f", "-"],
        Some(&hpa("foreign-2", "outage", None)),
    );
    let out = create_until(env, "outage", json!({}), 5, |out| !out.ok);
    assert!(
        out.stderr.contains("HorizontalPodAutoscaler 'foreign-2'"),
        "{out:?}"
    );
    relay.cut();
    let out = create_until(env, "outage", json!({}), 20, |out| out.ok);
    assert!(
        out.warnings().iter().any(|w| w.contains(UNCHECKED)),
        "no warning that the rule was skipped: {out:?}"
    );
    let metrics = server.scrape();
    let unchecked = metrics
        .lines()
        .find_map(|l| l.strip_prefix("memcached_webhook_autoscaler_conflicts_unchecked_total "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(unchecked >= Some(1), "not counted: {metrics}");
}

/// A dry-run CREATE of Memcached `name` in [`NS`].
fn create(env: &Env, name: &str, spec: Value) -> Output {
    let object = memcached(NS, name, spec);
    env.kubectl(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&object.to_string()),
    )
}

/// [`create`] until `done` says so, for at most `seconds`.
#[track_caller]
fn create_until(
    env: &Env,
    name: &str,
    spec: Value,
    seconds: u64,
    done: impl Fn(&Output) -> bool,
) -> Output {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        let out = create(env, name, spec.clone());
        if done(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "not within {seconds} s: {out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[track_caller]
fn wait_until(what: &str, within: Duration, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An autoscaling/v2 HPA `name` in [`NS`] aimed at `apps/v1` Deployment `target`.
fn hpa(name: &str, target: &str, controller: Option<Value>) -> String {
    let mut hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1, "maxReplicas": 3,
        },
    });
    if let Some(owner) = controller {
        hpa["metadata"]["ownerReferences"] = json!([owner]);
    }
    hpa.to_string()
}

/// The shipped ServiceAccount's RBAC (manifests/base/rbac.yaml) and a kubeconfig with a token of
/// that account, pointed at `port` (the relay).
fn service_account_kubeconfig(env: &Env, port: u16) -> PathBuf {
    const SYSTEM: &str = "memcached-webhook-system";
    let _ = env.kubectl(&["create", "namespace", SYSTEM], None);
    let account = env.kubectl(
        &[
            "create",
            "serviceaccount",
            "-n",
            SYSTEM,
            "memcached-webhook",
        ],
        None,
    );
    assert!(
        account.ok || account.stderr.contains("AlreadyExists"),
        "{account:?}"
    );
    env.ok(
        &["apply", "-f", "-"],
        Some(&repo_file("manifests/base/rbac.yaml")),
    );
    let token = env.ok(
        &[
            "create",
            "token",
            "-n",
            SYSTEM,
            "memcached-webhook",
            "--duration=1h",
        ],
        None,
    );
    let dir = env.cluster.dir.path();
    let path = dir.join("autoscalers.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters: [{{name: relay, cluster: {{server: \"https://127.0.0.1:{port}\", certificate-authority: \"{ca}\"}}}}]\n\
             users: [{{name: webhook, user: {{token: \"{token}\"}}}}]\n\
             contexts: [{{name: relay, context: {{cluster: relay, user: webhook}}}}]\n\
             current-context: relay\n",
            ca = dir.join("ca.crt").display(),
            token = token.stdout.trim(),
        ),
    )
    .unwrap();
    path
}

/// KEDA's ScaledObject CRD, as far as the check needs it (the real one's names and scope).
fn keda_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "scaledobjects.keda.sh"},
        "spec": {
            "group": "keda.sh", "scope": "Namespaced",
            "names": {"kind": "ScaledObject", "listKind": "ScaledObjectList",
                "plural": "scaledobjects", "singular": "scaledobject", "shortNames": ["so"]},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// Deletes KEDA's CRD when dropped: later checks see the cluster without it.
struct RemoveKeda<'a>(&'a Env);

impl Drop for RemoveKeda<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(
            &[
                "delete",
                "crd",
                "scaledobjects.keda.sh",
                "--ignore-not-found",
            ],
            None,
        );
    }
}

/// A TCP relay to the API server on loopback: [`Relay::cut`] closes every relayed connection
/// and refuses new ones, as an API server that stopped answering would look to the watch.
struct Relay {
    port: u16,
    cut: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let (cut2, streams2) = (cut.clone(), streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if cut2.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let mut kept = streams2.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Write);
                    });
                }
            }
        });
        Relay { port, cut, streams }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}
