//! The generated admission policies (manifests/components/policies) against the webhooks,
//! through the API server: the defaulting corpus stored alike, the validation corpus judged
//! alike for every exported rule, ratcheting alike on UPDATE, the backstop holding while the
//! webhook is unreachable, and the largest object the policies judge within CEL's cost budget.

/// Each exported rule's own cases.
mod boundaries;
mod corpus;
mod modes;

use serde_json::{Value, json};

use crate::Check;
use crate::env::Env;
use corpus::Case;
use modes::Mode;

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "policies::corpora_are_judged_alike_alone_and_as_backstop",
            run: corpora_are_judged_alike_alone_and_as_backstop,
        },
        Check {
            name: "policies::ratcheting_is_alike_on_update",
            run: ratcheting_is_alike_on_update,
        },
        Check {
            name: "policies::largest_objects_are_judged_within_the_cost_budget",
            run: largest_objects_are_judged_within_the_cost_budget,
        },
    ]
}

/// What the API server answered to one write.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    code: u16,
    /// A denial's text from `Memcached.memcached.c5c3.io "<name>" is invalid:` on (the
    /// webhook's and the policy's prefixes differ), or the whole message of any other refusal.
    text: String,
    /// The stored object's spec, labels and annotations (admitted writes).
    stored: Value,
}

fn answer(code: u16, body: &Value) -> Answer {
    let message = body["message"].as_str().unwrap_or_default();
    let head = "Memcached.memcached.c5c3.io \"";
    let text = match message.find(head) {
        Some(i) => message[i..].to_owned(),
        None => message.to_owned(),
    };
    let stored = if (200..300).contains(&code) {
        json!({"spec": body["spec"], "labels": body["metadata"]["labels"],
               "annotations": body["metadata"]["annotations"]})
    } else {
        Value::Null
    };
    Answer { code, text, stored }
}

/// Creates every case in `namespace` (a fresh one per mode): the answers in order.
fn create_all(env: &Env, namespace: &str, cases: &[Case]) -> Vec<(u16, Value)> {
    env.namespace(namespace);
    cases
        .iter()
        .map(|case| {
            let object = case.object(namespace);
            let version = object["apiVersion"].as_str().unwrap().to_owned();
            let url = format!("/apis/{version}/namespaces/{namespace}/memcacheds");
            env.cluster.request("POST", &url, &object)
        })
        .collect()
}

/// The defaulting and validation corpora, each case once through the webhooks alone, the
/// policies alone, and the policies as a backstop beside webhooks that fail open (Ignore) and
/// cannot be reached.
fn corpora_are_judged_alike_alone_and_as_backstop(env: &Env) {
    let defaulting = corpus::defaulting();
    let mut cases = corpus::defaulting();
    cases.extend(corpus::validation());
    let webhook = Mode::Webhooks.with(env, || create_all(env, "pol-webhook", &cases));
    let policies: Vec<Answer> = Mode::Policies
        .with(env, || create_all(env, "pol-policies", &cases))
        .into_iter()
        .map(answer_of)
        .collect();
    let outage: Vec<Answer> = Mode::BackstopWebhookDown
        .with(env, || create_all(env, "pol-outage", &cases))
        .into_iter()
        .map(answer_of)
        .collect();
    let n = defaulting.len();
    eprintln!(
        "policies: {n} defaulting and {} validation cases",
        cases.len() - n
    );
    stored_alike(&cases[..n], &webhook[..n], &policies[..n]);
    judged_alike(&cases[n..], &webhook[n..], &policies[n..]);
    backstop_alike(&cases, &policies, &outage);
}

/// Every defaulting case is admitted and stored alike: spec, labels and annotations.
fn stored_alike(cases: &[Case], webhook: &[(u16, Value)], policies: &[Answer]) {
    for ((case, (code, body)), p) in cases.iter().zip(webhook).zip(policies) {
        let w = answer(*code, body);
        assert_eq!(w.code, 201, "{}: the webhook refused it: {w:?}", case.about);
        assert_eq!(
            &w, p,
            "{}: stored differently (webhook, then policies)",
            case.about
        );
    }
    assert!(cases.len() >= 20, "the corpus shrank: {}", cases.len());
}

/// What the policies must answer, given the webhook's answer: the same, less the violations
/// of the rules they skip (listed by `memcached-webhook policies --list`). `None` for the
/// message: refused, in other words (by the CRD's schema, in no fixed order; or wrongly typed
/// fields, which the mutating webhook names and the policy's JSON Patch stumbles on).
fn expected_from(case: &Case, webhook: &Answer, body: &Value) -> (u16, Option<String>) {
    let message = body["message"].as_str().unwrap_or_default();
    if message.contains("admission webhook \"mutate.") {
        return (webhook.code, None);
    }
    if !message.contains("admission webhook") {
        // Refused by the CRD's schema, or admitted: the schema's errors come in no fixed order.
        let text = (webhook.code == 201).then(String::new);
        return (webhook.code, text);
    }
    let kept: Vec<String> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| !corpus::skipped_field(c["field"].as_str().unwrap_or_default(), case))
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap(),
                c["message"].as_str().unwrap()
            )
        })
        .collect();
    let head = format!("Memcached.memcached.c5c3.io \"{}\" is invalid: ", case.name);
    match kept.as_slice() {
        [] => (201, Some(String::new())),
        [one] => (422, Some(format!("{head}{one}"))),
        many => (422, Some(format!("{head}[{}]", many.join(", ")))),
    }
}

/// Every validation case gets the webhook's verdict and message, less the skipped rules'.
fn judged_alike(cases: &[Case], webhook: &[(u16, Value)], policies: &[Answer]) {
    let (mut alike, mut refused) = (0, 0);
    for ((case, (code, body)), p) in cases.iter().zip(webhook).zip(policies) {
        let w = answer(*code, body);
        match expected_from(case, &w, body) {
            (201, _) => assert_eq!(p.code, 201, "{}: policies {p:?}, webhook {w:?}", case.about),
            (_, None) => {
                assert!(
                    p.code >= 400,
                    "{}: policies admitted {p:?}, webhook {w:?}",
                    case.about
                );
                refused += 1;
            }
            (code, Some(text)) => {
                assert_eq!(
                    (p.code, &p.text),
                    (code, &text),
                    "{}: policies, then expected",
                    case.about
                );
                alike += 1;
            }
        }
    }
    assert!(
        alike >= 25 && refused >= 10,
        "too few refusals compared: {alike} alike, {refused} refused"
    );
}

/// Objects stored with nothing installed (as before any webhook), then updates judged by each
/// mode as dry-runs, so both see the same `oldObject`.
fn ratcheting_is_alike_on_update(env: &Env) {
    let ns = "pol-ratchet";
    let stored = corpus::stored_before();
    let updates = corpus::updates();
    Mode::Nothing.with(env, || {
        env.namespace(ns);
        for (name, spec) in &stored {
            let object = crate::env::memcached(ns, name, spec.clone());
            let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{ns}/memcacheds");
            let (code, body) = env.cluster.request("POST", &url, &object);
            assert_eq!(code, 201, "storing {name}: {body}");
        }
    });
    let run = |env: &Env| -> Vec<Answer> {
        updates
            .iter()
            .map(|(name, change)| {
                let url =
                    format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{ns}/memcacheds/{name}");
                let (_, mut object) = env.cluster.request("GET", &url, &Value::Null);
                change(&mut object);
                let (code, body) =
                    env.cluster
                        .request("PUT", &format!("{url}?dryRun=All"), &object);
                answer(code, &body)
            })
            .collect()
    };
    let webhook = Mode::Webhooks.with(env, || run(env));
    let policies = Mode::Policies.with(env, || run(env));
    for (((name, _), w), p) in updates.iter().zip(&webhook).zip(&policies) {
        assert_eq!(
            w.code, p.code,
            "update of {name}: webhook {w:?}, policies {p:?}"
        );
        assert_eq!(w.text, p.text, "update of {name}");
    }
    let refused = webhook.iter().filter(|a| a.code == 422).count();
    assert!(refused >= 2 && refused < webhook.len(), "{webhook:?}");
}

/// With the webhooks unreachable and failing open, every write is answered as by the
/// policies alone, and none fails.
fn backstop_alike(cases: &[Case], policies: &[Answer], outage: &[Answer]) {
    for ((case, p), o) in cases.iter().zip(policies).zip(outage) {
        // Admitted, or refused by a rule or the schema: never an error of the judge itself.
        assert!(
            o.code == 201 || (400..500).contains(&o.code),
            "{}: failed: {o:?}",
            case.about
        );
        // The CRD schema's own errors come in no fixed order.
        let unordered = |a: &Answer| {
            let list = a
                .text
                .split_once(" is invalid: ")
                .map_or(&*a.text, |(_, l)| l);
            let list = list
                .strip_prefix('[')
                .and_then(|l| l.strip_suffix(']'))
                .unwrap_or(list);
            let mut parts: Vec<String> = list.split(", ").map(str::to_owned).collect();
            parts.sort_unstable();
            (a.code, parts, a.stored.clone())
        };
        assert_eq!(
            unordered(p),
            unordered(o),
            "{}: policies alone, then backstop with the webhook down",
            case.about
        );
    }
}

/// Which exported rule gives up first on CEL's cost budget, and where. The item-size rule reads
/// `extraArgs` whole (joined): 100,000 args (1.5 MB) are judged as the webhook judges them.
/// The HPA metric rule checks each metric: 5,000 are judged alike, 7,000 (0.8 MB) exceed the
/// budget (the policy refuses with "cost limit exceeded") while the webhook admits them.
fn largest_objects_are_judged_within_the_cost_budget(env: &Env) {
    let ns = "pol-cost";
    let args: Vec<String> = (0..100_000).map(|i| format!("--arg-{i:07}")).collect();
    let huge_args = crate::env::memcached(
        ns,
        "huge-args",
        json!({"memcached": {"maxItemSize": "100k", "extraArgs": args}}),
    );
    let memory = json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}});
    let metrics = |n: usize| {
        let spec = json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": vec![memory.clone(); n]}});
        crate::env::memcached(ns, &format!("metrics-{n}"), spec)
    };
    assert!(huge_args.to_string().len() > 3 << 19, "not over 1.5 MiB");
    let url = format!("/apis/memcached.c5c3.io/v1beta1/namespaces/{ns}/memcacheds?dryRun=All");
    let judge = || {
        [&huge_args, &metrics(5_000), &metrics(7_000)]
            .map(|object| answer_of(env.cluster.request("POST", &url, object)))
    };
    let webhook = Mode::Webhooks.with(env, || {
        env.namespace(ns);
        judge()
    });
    let policies = Mode::Policies.with(env, judge);
    assert_eq!(webhook[0].code, 422, "{:?}", webhook[0].text);
    assert!(
        webhook[0]
            .text
            .contains("spec.memcached.maxItemSize: Invalid value: \"100k\""),
        "{}",
        webhook[0].text
    );
    assert_eq!(
        policies[0].text, webhook[0].text,
        "100,000 extraArgs: policies, then webhook"
    );
    assert_eq!(webhook[1].code, 201, "{}", webhook[1].text);
    assert_eq!(policies[1].code, 201, "5,000 metrics: {}", policies[1].text);
    assert_eq!(webhook[2].code, 201, "{}", webhook[2].text);
    assert!(
        policies[2].code != 201
            && policies[2].text.contains("n_hpa_metrics")
            && policies[2].text.contains("cost limit exceeded"),
        "7,000 metrics: the HPA metric rule should give up on the cost budget: {:?}",
        policies[2]
    );
}

fn answer_of((code, body): (u16, Value)) -> Answer {
    answer(code, &body)
}
