//! The decisions: type errors and rule violations as causes, what `--validation-actions` and
//! ratcheting make of them, a terminating object, and the autoscaler conflicts.

use super::*;

#[test]
fn an_object_that_breaks_its_types_is_refused_with_400_by_mutate_and_422_by_validate() {
    for (webhook, code) in [(Webhook::Mutate, 400), (Webhook::Validate, 422)] {
        for (object, message) in crate::test_support::MISTYPED {
            let (verdict, response) = run(webhook, &review_with("CREATE", object)).unwrap();
            assert_eq!(
                verdict,
                Verdict {
                    operation: Some(Operation::Create),
                    allowed: false,
                    code,
                    patched: false,
                    warnings: 0,
                    violations: Violations::default(),
                }
            );
            let status = &response["response"]["status"];
            assert_eq!(response["response"]["uid"], "u1");
            assert_eq!(status["code"], code);
            let expected = match webhook {
                Webhook::Mutate => message.to_owned(),
                Webhook::Validate => {
                    format!("Memcached.memcached.c5c3.io \"c\" is invalid: {message}")
                }
            };
            assert_eq!(status["message"], expected.as_str());
            let (field, detail) = message.split_once(": ").unwrap();
            assert_eq!(
                status["details"]["causes"],
                serde_json::json!([{"reason": "FieldValueTypeInvalid", "message": detail, "field": field}])
            );
        }
    }
}

#[test]
fn every_type_error_and_every_readable_violation_is_a_cause() {
    // Five wrong types and three rule violations; `maxItemSize` also breaks no rule of its own
    // once unreadable (it reads as absent), so it is named once.
    let object = r#"{"metadata":{"name":"m"},"spec":{"replicas":"three",
        "memcached":{"maxMemoryMB":"64","threads":4.5,"maxItemSize":1},
        "monitoring":{"enabled":"yes","serviceMonitor":{"interval":"10s","scrapeTimeout":"30s"}},
        "security":{"sasl":{"enabled":true}},
        "highAvailability":{"podDisruptionBudget":{"enabled":true,"minAvailable":1,"maxUnavailable":1}}}}"#
        .replace('\n', " ");
    let (_, mutated) = run(Webhook::Mutate, &review_with("CREATE", &object)).unwrap();
    let status = &mutated["response"]["status"];
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with("[spec.replicas: expected an integer, found a string, ")
            && message.ends_with("spec.monitoring.enabled: expected a boolean, found a string]"),
        "{message}"
    );
    assert_eq!(status["details"]["causes"].as_array().unwrap().len(), 5);
    let (verdict, validated) = run(Webhook::Validate, &review_with("CREATE", &object)).unwrap();
    assert_eq!(verdict.code, 422);
    let causes = validated["response"]["status"]["details"]["causes"]
        .as_array()
        .unwrap();
    let fields: Vec<_> = causes
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "spec.replicas",
            "spec.memcached.maxMemoryMB",
            "spec.memcached.threads",
            "spec.memcached.maxItemSize",
            "spec.monitoring.enabled",
            "spec.highAvailability.podDisruptionBudget",
            "spec.security.sasl.credentialsSecretRef.name",
            "spec.monitoring.serviceMonitor.scrapeTimeout",
        ]
    );
    assert_eq!(causes[0]["reason"], "FieldValueTypeInvalid");
    assert_eq!(causes[5]["reason"], "FieldValueInvalid");
    let message = validated["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Memcached.memcached.c5c3.io \"m\" is invalid: [spec.replicas: expected an integer, found a string, "
        ),
        "{message}"
    );
}

#[test]
fn a_rule_about_a_wrongly_typed_field_does_not_repeat_its_type_error() {
    // Autoscaling needs maxReplicas; an unreadable one is named once, for its type.
    let object = r#"{"spec":{"resources":{"requests":{"cpu":"1"}},"autoscaling":{"enabled":true,"maxReplicas":"4"}}}"#;
    let (_, validated) = run(Webhook::Validate, &review_with("CREATE", object)).unwrap();
    let causes = &validated["response"]["status"]["details"]["causes"];
    assert_eq!(
        causes,
        &serde_json::json!([{"reason": "FieldValueTypeInvalid",
            "message": "expected an integer, found a string", "field": "spec.autoscaling.maxReplicas"}])
    );
}

#[test]
fn the_verdict_counts_violations_by_enforcement_and_rule() {
    // The fixture's four violations: R1, R8, R9, R10.
    let body = fixture("invalid-spec.json");
    let count = |actions: &str| {
        let mut body = body.clone();
        let mut out = Vec::new();
        let review = Review {
            actions: Actions::parse(actions).unwrap(),
            ..Review::new(Webhook::Validate)
        };
        let verdict = review.answer(&mut body, &mut out);
        let verdict = verdict.unwrap();
        let counts: Vec<_> = verdict
            .violations
            .iter()
            .map(|(e, r, n)| (e.label(), r.label(), n))
            .collect();
        (verdict.allowed, verdict.warnings, counts)
    };
    let rules = ["memory_limit", "replicas", "cpu_request", "autoscaling"];
    let expect = |action: &'static str| {
        let mut v: Vec<_> = rules.iter().map(|&r| (action, r, 1)).collect();
        v.sort_by_key(|&(_, r, _)| Rule::ALL.iter().position(|x| x.label() == r));
        v
    };
    assert_eq!(count("Deny"), (false, 0, expect("deny")));
    assert_eq!(count("Warn"), (true, 4, expect("warn")));
    let (allowed, warnings, counts) = count("Warn,Audit");
    assert!(allowed);
    assert_eq!(warnings, 4);
    assert_eq!(counts, [expect("warn"), expect("audit")].concat());

    // A valid object counts nothing.
    let valid = fixture("validate-create-kubectl-create.json");
    let (verdict, _) = run(Webhook::Validate, &valid).unwrap();
    assert!(verdict.allowed && verdict.violations.is_empty());
}

#[test]
fn a_terminating_object_is_admitted_whatever_its_spec() {
    let object = r#"{"metadata":{"name":"c","finalizers":[],"deletionTimestamp":"2026-12-02T11:00:00Z"},"spec":{"replicas":"3","memcached":{"maxItemSize":"100k"}}}"#;
    for webhook in [Webhook::Mutate, Webhook::Validate] {
        let (verdict, response) = run(webhook, &review_with("UPDATE", object)).unwrap();
        assert!(
            verdict.allowed && !verdict.patched,
            "{webhook:?}: {response}"
        );
        assert_eq!(verdict.warnings, 0);
    }
    // Without the timestamp (or with it null) the same spec is refused for its types.
    let alive = object.replace(r#""2026-12-02T11:00:00Z""#, "null");
    let (verdict, _) = run(Webhook::Mutate, &review_with("UPDATE", &alive)).unwrap();
    assert_eq!(verdict.code, 400);
}

/// An UPDATE review of `object` with `old` as the stored object.
fn with_old(object: &str, old: &str) -> Vec<u8> {
    let body = String::from_utf8(review_with("UPDATE", object)).unwrap();
    body.replace(r#""oldObject":null"#, &format!(r#""oldObject":{old}"#))
        .into_bytes()
}

#[test]
fn an_unreadable_old_object_is_judged_without_it_and_logged() {
    let object = r#"{"metadata":{"name":"c"},"spec":{"memcached":{"maxItemSize":"100k"}}}"#;
    let old =
        r#"{"metadata":{"name":"c"},"spec":{"replicas":"3","memcached":{"maxItemSize":"100k"}}}"#;
    let body = with_old(object, old);
    let lines = info_lines(Webhook::Validate, &body);
    let mut lines = lines.lines();
    let why = lines.next().unwrap_or_default();
    assert!(
        why.contains("oldObject cannot be read")
            && why.contains("spec.replicas: expected an integer"),
        "{why}"
    );
    assert!(
        lines.next().is_some_and(|l| l.contains("code=422")),
        "denied as if alone"
    );
    // A readable one ratchets: allowed, nothing at info.
    let body = with_old(object, object);
    assert_eq!(info_lines(Webhook::Validate, &body), "");
}

/// `--autoscaler-conflicts`: a CREATE is refused naming the other autoscaler (violations metric
/// under its own rule); an UPDATE of an object that already had the conflict is admitted with the
/// ratcheting warning; the mutating webhook never looks; an untrusted index admits with a
/// warning.
#[test]
fn autoscaler_conflicts_go_through_actions_and_ratcheting() {
    use crate::admission::enforcement::RATCHETED;
    use crate::autoscalers::{Autoscalers, Controller, Kind, Object, Sync};
    let index = Autoscalers::default();
    let review_with = |index: &Autoscalers, webhook, body: &J| {
        let sent = serde_json::to_vec(body).unwrap();
        let mut body = sent.clone();
        let mut out = Vec::new();
        let review = Review {
            autoscalers: Some(index),
            ..Review::new(webhook)
        };
        let verdict = review.answer(&mut body, &mut out).unwrap();
        (verdict, serde_json::from_slice::<J>(&out).unwrap())
    };
    let object = json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
        "metadata": {"name": "cache", "namespace": "ns"}, "spec": {"replicas": 2}});
    let request = |operation: &str| {
        let mut request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "memcached.c5c3.io", "version": "v1beta1",
                "kind": "Memcached"}, "name": "cache", "namespace": "ns",
                "operation": operation, "object": object}});
        if operation == "UPDATE" {
            let mut old = object.clone();
            old["spec"]["replicas"] = json!(1);
            request["request"]["oldObject"] = old;
        }
        request
    };

    // Not listed yet: admitted, with the warning.
    let (verdict, answer) = review_with(&index, Webhook::Validate, &request("CREATE"));
    assert!(verdict.allowed);
    let warning = answer["response"]["warnings"][0].as_str().unwrap();
    assert!(warning.contains("could not be checked"), "{answer}");
    assert_eq!(index.stats.unchecked.get(), 1);

    for kind in Kind::ALL {
        index.list_started(kind);
        index.listed(
            kind,
            &Object {
                namespace: "ns".into(),
                name: "other".into(),
                deployment: Some("cache".into()),
                controller: Controller::None,
            },
        );
        index.list_done(kind);
    }
    let (verdict, answer) = review_with(&index, Webhook::Validate, &request("CREATE"));
    assert!(!verdict.allowed);
    assert_eq!(answer["response"]["status"]["code"], 422);
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("HorizontalPodAutoscaler 'other'")
            && message.contains("ScaledObject 'other'"),
        "{message}"
    );
    let denied: Vec<_> = verdict.violations.iter().collect();
    assert_eq!(
        denied,
        [(Enforcement::Deny, Rule::AutoscalerConflict, 2)],
        "{denied:?}"
    );

    let (verdict, answer) = review_with(&index, Webhook::Validate, &request("UPDATE"));
    assert!(verdict.allowed, "{answer}");
    let warnings = answer["response"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 2, "{answer}");
    assert!(
        warnings[0].as_str().unwrap().ends_with(RATCHETED),
        "{answer}"
    );

    let (verdict, _) = review_with(&index, Webhook::Mutate, &request("CREATE"));
    assert!(verdict.allowed);
    index.set_sync(Kind::Hpa, Sync::Unavailable("connection refused".into()));
    let (verdict, answer) = review_with(&index, Webhook::Validate, &request("CREATE"));
    assert!(verdict.allowed, "{answer}");
    assert_eq!(index.stats.unchecked.get(), 2);
}
