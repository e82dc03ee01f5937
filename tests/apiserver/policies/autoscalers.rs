//! The autoscaler policy (paramKind HPA) against the conflict-aware webhook
//! (`--autoscaler-conflicts=on`): the same HPAs in one namespace, the same writes, the same
//! verdicts and messages, ratcheting on UPDATE included.

use serde_json::{Value, json};

use super::{Answer, answer_of};
use crate::env::{Env, memcached};
use crate::webhook::{self, Webhook};

use super::modes::Mode;

const NS: &str = "pol-autoscalers";

/// An HPA `name` aimed at Deployment `target`, with a controller if given.
fn hpa(name: &str, target: &str, controller: Option<(&str, &str, &str)>) -> Value {
    let mut hpa = json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "minReplicas": 1, "maxReplicas": 3},
    });
    if let Some((api_version, kind, owner)) = controller {
        hpa["metadata"]["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind,
            "name": owner, "uid": "6f1c3a8e-0000-4000-8000-000000000003", "controller": true}]);
    }
    hpa
}

/// (name, spec) of each dry-run CREATE.
fn writes() -> Vec<(&'static str, Value)> {
    let enabled = json!({"resources": {"requests": {"cpu": "1"}},
                         "autoscaling": {"enabled": true, "maxReplicas": 3}});
    vec![
        ("cache", json!({})),
        ("cache", enabled.clone()),
        ("adopted", json!({})),
        ("owned", enabled),
        ("kedaed", json!({})),
        ("stranger", json!({})),
        ("free", json!({})),
    ]
}

/// The answers, once the first write (`cache`, in conflict) is refused by `judge` (the
/// API server's informers lag a configuration change), and every refusal names it.
fn create_all(env: &Env, judge: &str) -> Vec<Answer> {
    let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{NS}/memcacheds?dryRun=All");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let raw: Vec<(u16, Value)> = writes()
            .into_iter()
            .map(|(name, spec)| {
                env.cluster
                    .request("POST", &url, &memcached(NS, name, spec))
            })
            .collect();
        let by_judge = |(code, body): &(u16, Value)| {
            *code != 422 || body["message"].as_str().is_some_and(|m| m.contains(judge))
        };
        if raw[0].0 == 422 && raw.iter().all(by_judge) {
            return raw.into_iter().map(answer_of).collect();
        }
        if std::time::Instant::now() >= deadline {
            let state = env.kubectl(&["get", "mutatingadmissionpolicy,mutatingadmissionpolicybinding,validatingadmissionpolicy,validatingadmissionpolicybinding,mutatingwebhookconfiguration,validatingwebhookconfiguration", "-o", "name"], None);
            let probe = env.kubectl(
                &[
                    "create",
                    "--dry-run=server",
                    "-o",
                    "jsonpath={.spec}",
                    "-f",
                    "-",
                ],
                Some(&memcached(NS, "cache", json!({})).to_string()),
            );
            let probe2 = env.kubectl(
                &[
                    "create",
                    "--dry-run=server",
                    "-o",
                    "jsonpath={.spec}",
                    "-f",
                    "-",
                ],
                Some(&memcached("default", "cache", json!({})).to_string()),
            );
            panic!(
                "{judge} never judged: {:?}\n{state:?}\n{probe:?}\n{probe2:?}",
                raw[0].0
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// UPDATEs of `stored` (created with nothing installed, so it has its conflict): a label
/// (the conflict was already there), and turning autoscaling on (a new one, on another field).
fn update_all(env: &Env) -> Vec<Answer> {
    let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{NS}/memcacheds/stored");
    let (_, stored) = env.cluster.request("GET", &url, &Value::Null);
    let mut labeled = stored.clone();
    labeled["metadata"]["labels"] = json!({"team": "cache"});
    let mut enabled = stored;
    enabled["spec"]["resources"] = json!({"requests": {"cpu": "1"}});
    enabled["spec"]["autoscaling"] = json!({"enabled": true, "maxReplicas": 3});
    [labeled, enabled]
        .iter()
        .map(|object| {
            answer_of(
                env.cluster
                    .request("PUT", &format!("{url}?dryRun=All"), object),
            )
        })
        .collect()
}

pub fn autoscaler_conflicts_are_judged_alike(env: &Env) {
    env.namespace(NS);
    let hpas = [
        hpa("foreign", "cache", None),
        hpa("adopted", "adopted", None),
        hpa(
            "owned",
            "owned",
            Some(("memcached.c5c3.io/v1beta1", "Memcached", "owned")),
        ),
        hpa(
            "keda-hpa-so",
            "kedaed",
            Some(("keda.sh/v1alpha1", "ScaledObject", "so")),
        ),
        hpa(
            "stranger",
            "stranger",
            Some(("apps/v1", "Deployment", "someone")),
        ),
        hpa("on-stored", "stored", None),
    ];
    env.ok(&["apply", "-f", "-"], Some(&webhook::list(hpas.to_vec())));
    Mode::Nothing.with(env, || {
        let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{NS}/memcacheds");
        let (code, body) = env
            .cluster
            .request("POST", &url, &memcached(NS, "stored", json!({})));
        assert_eq!(code, 201, "{body}");
    });
    let kubeconfig = crate::autoscalers::service_account_kubeconfig(env, env.cluster.port);
    let server = Webhook::start(&[
        "--autoscaler-conflicts=on",
        &format!("--kubeconfig={}", kubeconfig.display()),
    ]);
    let webhook = Mode::Webhooks.with(env, || {
        env.ok(
            &["apply", "-f", "-"],
            Some(&webhook::list(server.configurations())),
        );
        // Once the conflict-aware server has listed the HPAs and the API server calls it.
        let judge = "admission webhook \"validate.memcached-webhook.c5c3.io\"";
        (create_all(env, judge), update_all(env))
    });
    let policies = Mode::Policies.with(env, || {
        let judge = "ValidatingAdmissionPolicy 'memcached-webhook-autoscalers'";
        (create_all(env, judge), update_all(env))
    });
    for (((name, spec), w), p) in writes().iter().zip(&webhook.0).zip(&policies.0) {
        assert_eq!(
            (w.code, &w.text),
            (p.code, &p.text),
            "{name} {spec}: webhook, then policies"
        );
    }
    for (i, (w, p)) in webhook.1.iter().zip(&policies.1).enumerate() {
        assert_eq!(
            (w.code, &w.text),
            (p.code, &p.text),
            "update {i}: webhook, then policies"
        );
    }
    let refused = webhook.0.iter().filter(|a| a.code == 422).count();
    assert_eq!(refused, 4, "cache twice, kedaed, stranger: {:?}", webhook.0);
    assert_eq!(
        (webhook.1[0].code, webhook.1[1].code),
        (200, 422),
        "{:?}",
        webhook.1
    );
}
