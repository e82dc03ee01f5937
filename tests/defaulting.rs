//! Property: for random Memcached objects (every field absent, null, zero or set; random
//! unknown fields and metadata), the webhook's patch, applied by an independent RFC 6902
//! implementation, gives exactly what the spec's rules give, and a second pass patches nothing.

use memcached_webhook::admission::{self, Webhook};
use proptest::prelude::*;
use serde_json::{Map, Value as J, json};

use crate::util::patch_of;

/// The reference operator's defaulting rules (C5C3/memcached-operator v0.4.0), written independently over a JSON value.
fn reference(object: &mut J) {
    let unset = |v: Option<&J>| v.is_none_or(J::is_null);
    let root = object.as_object_mut().unwrap();
    if unset(root.get("spec")) {
        root.insert("spec".into(), json!({}));
    }
    let spec = root.get_mut("spec").unwrap().as_object_mut().unwrap();
    let autoscaling = spec
        .get("autoscaling")
        .and_then(J::as_object)
        .is_some_and(|a| a.get("enabled") == Some(&J::Bool(true)));
    if autoscaling {
        if !unset(spec.get("replicas")) {
            spec.remove("replicas");
        }
    } else if unset(spec.get("replicas")) {
        spec.insert("replicas".into(), json!(1));
    }
    if unset(spec.get("image")) {
        spec.insert("image".into(), json!("memcached:1.6"));
    }
    if unset(spec.get("memcached")) {
        spec.insert("memcached".into(), json!({}));
    }
    let mc = spec.get_mut("memcached").unwrap().as_object_mut().unwrap();
    for (k, d) in [
        ("maxMemoryMB", 64),
        ("maxConnections", 1024),
        ("threads", 4),
    ] {
        if unset(mc.get(k)) || mc.get(k) == Some(&json!(0)) {
            mc.insert(k.into(), json!(d));
        }
    }
    let empty = |v: Option<&J>| unset(v) || v == Some(&json!(""));
    if empty(mc.get("maxItemSize")) {
        mc.insert("maxItemSize".into(), json!("1m"));
    }
    if let Some(m) = spec.get_mut("monitoring").and_then(J::as_object_mut) {
        if unset(m.get("exporterImage")) {
            m.insert(
                "exporterImage".into(),
                json!("prom/memcached-exporter:v0.15.4"),
            );
        }
        if let Some(sm) = m.get_mut("serviceMonitor").and_then(J::as_object_mut) {
            for (k, d) in [("interval", "30s"), ("scrapeTimeout", "10s")] {
                if empty(sm.get(k)) {
                    sm.insert(k.into(), json!(d));
                }
            }
        }
    }
    if let Some(ha) = spec.get_mut("highAvailability").and_then(J::as_object_mut)
        && unset(ha.get("antiAffinityPreset"))
    {
        ha.insert("antiAffinityPreset".into(), json!("soft"));
    }
    if autoscaling {
        let a = spec
            .get_mut("autoscaling")
            .unwrap()
            .as_object_mut()
            .unwrap();
        if unset(a.get("metrics")) || a.get("metrics") == Some(&json!([])) {
            a.insert("metrics".into(), json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]));
        }
        if unset(a.get("behavior")) {
            a.insert(
                "behavior".into(),
                json!({"scaleDown": {"stabilizationWindowSeconds": 300}}),
            );
        }
    }
}

/// Absent (None), null, the zero value, or a generated value.
fn member(zero: J, set: impl Strategy<Value = J> + 'static) -> BoxedStrategy<Option<J>> {
    prop_oneof![
        Just(None),
        Just(Some(J::Null)),
        Just(Some(zero)),
        set.prop_map(Some)
    ]
    .boxed()
}

/// Arbitrary JSON for unknown fields: nested, with keys that need escaping in a JSON pointer.
fn any_json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-z~/\"\\\\é]{0,8}".prop_map(J::String)
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Array),
            prop::collection::btree_map("[a-z~/.]{1,6}", inner, 0..4)
                .prop_map(|m| J::Object(m.into_iter().collect())),
        ]
    })
}

fn object_of(members: Vec<(&'static str, Option<J>)>, unknown: Option<(String, J)>) -> J {
    let mut map: Map<String, J> = members
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
        .collect();
    if let Some((k, v)) = unknown {
        map.entry(format!("x-{k}")).or_insert(v);
    }
    J::Object(map)
}

fn unknown() -> impl Strategy<Value = Option<(String, J)>> {
    prop::option::of(("[a-z~/]{1,6}", any_json()))
}

/// A section: absent, null, or an object (never a zero value: sections are pointers).
fn section(object: impl Strategy<Value = J> + 'static) -> BoxedStrategy<Option<J>> {
    prop_oneof![1 => Just(None), 1 => Just(Some(J::Null)), 3 => object.prop_map(Some)].boxed()
}

fn memcached_object() -> impl Strategy<Value = J> {
    let s = |z: J, v: BoxedStrategy<J>| member(z, v);
    (
        s(json!(0), (1..65536i32).prop_map(|n| json!(n)).boxed()),
        s(json!(0), (1..65536i32).prop_map(|n| json!(n)).boxed()),
        s(json!(0), (1..128i32).prop_map(|n| json!(n)).boxed()),
        s(json!(""), "[0-9]{1,3}[km]".prop_map(J::String).boxed()),
        s(json!(0), (0..3i32).prop_map(|n| json!(n)).boxed()),
        unknown(),
    )
        .prop_map(|(m, c, t, i, v, u)| {
            object_of(
                vec![
                    ("maxMemoryMB", m),
                    ("maxConnections", c),
                    ("threads", t),
                    ("maxItemSize", i),
                    ("verbosity", v),
                ],
                u,
            )
        })
}

fn monitoring_object() -> impl Strategy<Value = J> {
    let sm = (
        member(json!(""), "[0-9]{1,2}s".prop_map(J::String)),
        member(json!(""), "[0-9]{1,2}s".prop_map(J::String)),
        unknown(),
    )
        .prop_map(|(i, t, u)| object_of(vec![("interval", i), ("scrapeTimeout", t)], u));
    (
        member(json!(false), any::<bool>().prop_map(J::Bool)),
        member(json!(""), "[a-z/:.0-9]{1,12}".prop_map(J::String)),
        section(sm),
        unknown(),
    )
        .prop_map(|(e, img, sm, u)| {
            object_of(
                vec![
                    ("enabled", e),
                    ("exporterImage", img),
                    ("serviceMonitor", sm),
                ],
                u,
            )
        })
}

fn autoscaling_object() -> impl Strategy<Value = J> {
    let metric = Just(
        json!({"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}}),
    );
    (
        member(json!(false), Just(json!(true))),
        member(json!(0), (1..10i32).prop_map(|n| json!(n))),
        member(json!(0), (1..20i32).prop_map(|n| json!(n))),
        member(
            json!([]),
            prop::collection::vec(metric, 1..3).prop_map(J::Array),
        ),
        member(
            json!({}),
            Just(json!({"scaleUp": {"stabilizationWindowSeconds": 0}})),
        ),
    )
        .prop_map(|(e, min, max, m, b)| {
            object_of(
                vec![
                    ("enabled", e),
                    ("minReplicas", min),
                    ("maxReplicas", max),
                    ("metrics", m),
                    ("behavior", b),
                ],
                None,
            )
        })
}

fn memcached() -> impl Strategy<Value = J> {
    let ha = (
        member(
            json!(""),
            prop_oneof![Just(json!("soft")), Just(json!("hard"))],
        ),
        unknown(),
    )
        .prop_map(|(p, u)| object_of(vec![("antiAffinityPreset", p)], u));
    let spec = (
        member(json!(0), (1..64i32).prop_map(|n| json!(n))),
        member(json!(""), "[a-z:.0-9]{1,12}".prop_map(J::String)),
        section(memcached_object()),
        section(monitoring_object()),
        section(ha),
        section(autoscaling_object()),
        unknown(),
    )
        .prop_map(|(r, i, mc, mon, ha, a, u)| {
            object_of(
                vec![
                    ("replicas", r),
                    ("image", i),
                    ("memcached", mc),
                    ("monitoring", mon),
                    ("highAvailability", ha),
                    ("autoscaling", a),
                ],
                u,
            )
        });
    (section(spec), "[a-z\"\\\\{}é\n]{0,20}", unknown()).prop_map(|(spec, annotation, u)| {
        let metadata = json!({"name": "c", "namespace": "ns", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": annotation}});
        object_of(vec![("apiVersion", Some(json!("memcached.c5c3.io/v1beta1"))), ("kind", Some(json!("Memcached"))), ("metadata", Some(metadata)), ("spec", spec)], u)
    })
}

/// The webhook's patch for `object`, or None when it has nothing to change.
fn mutate(object: &J) -> Option<J> {
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
        "operation": "UPDATE", "object": object, "oldObject": object}});
    let mut body = serde_json::to_vec(&review).unwrap();
    let mut out = Vec::new();
    let verdict = admission::Review::new(Webhook::Mutate)
        .answer(&mut body, &mut out)
        .unwrap();
    assert!(verdict.allowed);
    let response: J = serde_json::from_slice(&out).unwrap();
    response["response"]
        .get("patch")
        .map(|_| patch_of(&response))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn the_patch_gives_the_reference_result_and_defaulting_is_idempotent(object in memcached()) {
        let mut expected = object.clone();
        reference(&mut expected);
        let mut patched = object.clone();
        if let Some(ops) = mutate(&object) {
            let patch: json_patch::Patch = serde_json::from_value(ops.clone()).unwrap();
            json_patch::patch(&mut patched, &patch).map_err(|e| TestCaseError::fail(format!("{e}: {ops}")))?;
        }
        prop_assert_eq!(&patched, &expected);
        prop_assert_eq!(mutate(&patched), None, "a second pass patched {}", patched);
    }
}
