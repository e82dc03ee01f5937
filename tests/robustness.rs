//! Properties over hostile input, in process: any object built from the resource's own field
//! names with values of any JSON type, and any byte-level damage to a captured review, gets an
//! answer (never a panic); every patch the mutating webhook sends applies to the object it was
//! computed for, which the apiserver requires even with `failurePolicy: Ignore`.

use memcached_webhook::admission::{self, Webhook};
use proptest::prelude::*;
use serde_json::{Map, Value as J, json};

use crate::util::{fixture, patch_of};

/// The names the view and the rules look for, so random trees reach their code paths.
const KEYS: &[&str] = &[
    "replicas",
    "image",
    "resources",
    "limits",
    "requests",
    "memory",
    "cpu",
    "memcached",
    "maxMemoryMB",
    "maxConnections",
    "threads",
    "maxItemSize",
    "verbosity",
    "extraArgs",
    "highAvailability",
    "antiAffinityPreset",
    "podDisruptionBudget",
    "enabled",
    "minAvailable",
    "maxUnavailable",
    "gracefulShutdown",
    "preStopDelaySeconds",
    "terminationGracePeriodSeconds",
    "monitoring",
    "exporterImage",
    "exporterResources",
    "serviceMonitor",
    "interval",
    "scrapeTimeout",
    "security",
    "sasl",
    "tls",
    "credentialsSecretRef",
    "certificateSecretRef",
    "name",
    "autoscaling",
    "minReplicas",
    "maxReplicas",
    "metrics",
    "behavior",
    "type",
    "resource",
    "pods",
    "object",
    "external",
    "containerResource",
    "container",
    "metric",
    "selector",
    "describedObject",
    "target",
    "value",
    "averageValue",
    "averageUtilization",
    "scaleUp",
    "scaleDown",
    "stabilizationWindowSeconds",
    "selectPolicy",
    "policies",
    "periodSeconds",
    "tolerance",
];

/// Strings the rules parse: quantities, durations, images, enum values, and junk.
const STRINGS: &[&str] = &[
    "",
    "1",
    "0",
    "-1",
    "1m",
    "1.5m",
    "64Mi",
    "1Gi",
    "1e3",
    "9999999999999999999999Ei",
    "0.05",
    "30s",
    "1h30m",
    "5x",
    "memcached:1.6",
    "registry.example.com:5000/a/b@sha256:0000000000000000000000000000000000000000000000000000000000000000",
    "bad:",
    "UPPER/case",
    "cpu",
    "memory",
    "Resource",
    "Pods",
    "Object",
    "External",
    "ContainerResource",
    "Utilization",
    "AverageValue",
    "Value",
    "Max",
    "Min",
    "Disabled",
    "Percent",
    "soft",
    "hard",
    "50%",
    "-o",
    "slab_chunk_max=1048576",
    "é\u{0}\"\\",
];

fn leaf() -> impl Strategy<Value = J> {
    prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        prop_oneof![
            Just(0i64),
            Just(1),
            Just(-1),
            Just(i64::from(i32::MAX)),
            Just(i64::from(i32::MAX) + 1),
            Just(i64::MIN),
            any::<i64>()
        ]
        .prop_map(|n| json!(n)),
        prop_oneof![Just(0.5f64), Just(-0.0), Just(1e300), Just(4.0)].prop_map(|f| json!(f)),
        proptest::sample::select(STRINGS).prop_map(|s| json!(s)),
    ]
}

pub(crate) fn tree() -> impl Strategy<Value = J> {
    leaf().prop_recursive(6, 96, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(J::Array),
            proptest::collection::vec((proptest::sample::select(KEYS), inner), 0..6).prop_map(
                |members| J::Object(
                    members
                        .into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>()
                )
            ),
        ]
    })
}

type Member = Option<(&'static str, J)>;

/// `key` present (about half the time) with a value from `value`, or once in 25 of any type.
fn member(key: &'static str, value: impl Strategy<Value = J> + 'static) -> BoxedStrategy<Member> {
    prop_oneof![
        12 => Just(None),
        12 => value.prop_map(move |v| Some((key, v))),
        1 => leaf().prop_map(move |v| Some((key, v))),
    ]
    .boxed()
}

fn object(members: Vec<BoxedStrategy<Member>>) -> BoxedStrategy<J> {
    members
        .prop_map(|ms| {
            J::Object(
                ms.into_iter()
                    .flatten()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect(),
            )
        })
        .boxed()
}

fn int() -> BoxedStrategy<J> {
    // In int32 range: out-of-range numbers come from `leaf()`, with the other ill-typed values.
    const INTS: &[i64] = &[0, 1, 2, 3, 5, 10, 30, 64, 100, 1024, 1801, 3601, -1];
    proptest::sample::select(INTS)
        .prop_map(|n| json!(n))
        .boxed()
}

fn string() -> BoxedStrategy<J> {
    proptest::sample::select(STRINGS)
        .prop_map(|s| json!(s))
        .boxed()
}

/// Mostly `true`: the rules behind `enabled` are the ones worth reaching.
fn flag() -> BoxedStrategy<J> {
    prop_oneof![3 => Just(J::Bool(true)), 1 => Just(J::Bool(false))].boxed()
}

fn int_or_string() -> BoxedStrategy<J> {
    prop_oneof![int(), string()].boxed()
}

fn requirements() -> BoxedStrategy<J> {
    let amounts = || {
        object(vec![
            member("cpu", int_or_string()),
            member("memory", int_or_string()),
        ])
    };
    object(vec![
        member("limits", amounts()),
        member("requests", amounts()),
    ])
}

fn metric() -> BoxedStrategy<J> {
    let target = object(vec![
        member("type", string()),
        member("averageUtilization", int()),
        member("averageValue", int_or_string()),
        member("value", int_or_string()),
    ]);
    let source = object(vec![
        member("name", string()),
        member("container", string()),
        member("target", target),
    ]);
    object(vec![
        member("type", string()),
        member("resource", source.clone()),
        member("containerResource", source.clone()),
        member("pods", source.clone()),
        member("object", source.clone()),
        member("external", source),
    ])
}

fn scaling_rules() -> BoxedStrategy<J> {
    let policy = object(vec![
        member("type", string()),
        member("value", int()),
        member("periodSeconds", int()),
    ]);
    object(vec![
        member("stabilizationWindowSeconds", int()),
        member("selectPolicy", string()),
        member(
            "policies",
            proptest::collection::vec(policy, 0..3).prop_map(J::Array),
        ),
        member("tolerance", int_or_string()),
    ])
}

/// Specs shaped like the CRD, each member sometimes of the wrong type: these reach the rules.
pub(crate) fn typed() -> BoxedStrategy<J> {
    let secret = || {
        object(vec![
            member("enabled", flag()),
            member(
                "credentialsSecretRef",
                object(vec![member("name", string())]),
            ),
            member(
                "certificateSecretRef",
                object(vec![member("name", string())]),
            ),
        ])
    };
    object(vec![
        member("replicas", int()),
        member("image", string()),
        member("resources", requirements()),
        member(
            "memcached",
            object(vec![
                member("maxMemoryMB", int()),
                member("maxConnections", int()),
                member("threads", int()),
                member("maxItemSize", string()),
                member("verbosity", int()),
                member(
                    "extraArgs",
                    proptest::collection::vec(string(), 0..4).prop_map(J::Array),
                ),
            ]),
        ),
        member(
            "highAvailability",
            object(vec![
                member("antiAffinityPreset", string()),
                member(
                    "podDisruptionBudget",
                    object(vec![
                        member("enabled", flag()),
                        member("minAvailable", int_or_string()),
                        member("maxUnavailable", int_or_string()),
                    ]),
                ),
                member(
                    "gracefulShutdown",
                    object(vec![
                        member("enabled", flag()),
                        member("preStopDelaySeconds", int()),
                        member("terminationGracePeriodSeconds", int()),
                    ]),
                ),
            ]),
        ),
        member(
            "monitoring",
            object(vec![
                member("enabled", flag()),
                member("exporterImage", string()),
                member("exporterResources", requirements()),
                member(
                    "serviceMonitor",
                    object(vec![
                        member("interval", string()),
                        member("scrapeTimeout", string()),
                    ]),
                ),
            ]),
        ),
        member(
            "security",
            object(vec![member("sasl", secret()), member("tls", secret())]),
        ),
        member(
            "autoscaling",
            object(vec![
                member("enabled", flag()),
                member("minReplicas", int()),
                member("maxReplicas", int()),
                member(
                    "metrics",
                    proptest::collection::vec(metric(), 0..3).prop_map(J::Array),
                ),
                member(
                    "behavior",
                    object(vec![
                        member("scaleUp", scaling_rules()),
                        member("scaleDown", scaling_rules()),
                    ]),
                ),
            ]),
        ),
    ])
}

fn review_of(object: &J) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
                    "operation": "CREATE", "object": object}}))
    .unwrap()
}

/// Runs one webhook; a well-formed envelope must always get an AdmissionReview back.
fn answer(webhook: Webhook, sent: &[u8]) -> J {
    let mut body = sent.to_vec();
    let mut out = Vec::new();
    admission::Review::new(webhook)
        .answer(&mut body, &mut out)
        .unwrap_or_else(|e| panic!("the envelope is valid, yet: {e}"));
    serde_json::from_slice(&out).expect("the answer is JSON")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn any_spec_is_answered_and_every_patch_applies(spec in prop_oneof![tree(), typed()]) {
        let object = json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                            "metadata": {"name": "c"}, "spec": spec});
        let body = review_of(&object);
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            let response = answer(webhook, &body);
            prop_assert_eq!(&response["response"]["uid"], "u");
            let allowed = response["response"]["allowed"].as_bool().expect("allowed is a bool");
            if !allowed {
                let code = response["response"]["status"]["code"].as_u64();
                prop_assert!(matches!(code, Some(400 | 422)), "{}", response);
                let message = response["response"]["status"]["message"].as_str().unwrap_or("");
                prop_assert!(message.contains("spec"), "the denial names a field: {}", response);
            }
            if response["response"].get("patch").is_some() {
                prop_assert_eq!(webhook, Webhook::Mutate);
                let ops = patch_of(&response);
                let patch: json_patch::Patch = serde_json::from_value(ops.clone())
                    .map_err(|e| TestCaseError::fail(format!("not a JSON Patch ({e}): {ops}")))?;
                let mut patched = object.clone();
                json_patch::patch(&mut patched, &patch)
                    .map_err(|e| TestCaseError::fail(format!("{e}: {ops} on {object}")))?;
                // Defaulting is idempotent: the apiserver may call the webhook again
                // (reinvocationPolicy: IfNeeded) and must then get nothing to change.
                let again = answer(Webhook::Mutate, &review_of(&patched));
                prop_assert_eq!(&again["response"]["allowed"], true, "{}", again);
                prop_assert!(again["response"].get("patch").is_none(), "patched twice: {}", patched);
            }
        }
    }

    #[test]
    fn damaged_reviews_never_panic(
        which in 0..3usize,
        edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..3u8, any::<u8>()), 1..8),
    ) {
        let name = ["mutate-create-kubectl-apply.json", "mutate-update-kubectl-apply.json",
                    "validate-create-kubectl-create.json"][which];
        let pristine = fixture(name);
        let expected = answer(Webhook::Mutate, &pristine);
        let mut body = pristine.clone();
        for (at, kind, byte) in edits {
            let i = at.index(body.len().max(1));
            match kind {
                0 if i < body.len() => body[i] = byte,
                1 => body.insert(i.min(body.len()), byte),
                _ if i < body.len() => {
                    body.remove(i);
                }
                _ => {}
            }
        }
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            let mut input = body.clone();
            let mut out = Vec::new();
            match admission::Review::new(webhook).answer(&mut input, &mut out) {
                Ok(_) => {
                    let response: J = serde_json::from_slice(&out)
                        .map_err(|e| TestCaseError::fail(format!("answer is not JSON: {e}")))?;
                    prop_assert!(response["response"]["allowed"].is_boolean());
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
        // Nothing a failed parse leaves in the thread's reused buffers changes the next answer.
        prop_assert_eq!(answer(Webhook::Mutate, &pristine), expected);
    }
}
