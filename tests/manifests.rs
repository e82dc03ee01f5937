//! Drift: everything the binary and the manifests share (ports, paths, webhook names, cert file
//! names, the Secret, labels, CRD defaults) must agree with the binary's own constants, and the
//! default install must leave the operator's CRD alone. `.ci/check-deploy` builds the same
//! kustomizations with kubectl and validates them against the Kubernetes schemas.

use std::collections::BTreeMap;

use clap::Parser;
use memcached_webhook::admission::{MUTATE_PATH, VALIDATE_PATH};
use memcached_webhook::config::Config;
use memcached_webhook::memcached::defaults;
use serde_yaml_ng::Value;

fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{}/manifests/{file}", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

/// The documents a kustomization directory under `manifests/` includes: its `resources` and
/// `components`, files or directories, followed recursively (what `kubectl kustomize` starts
/// from, before its transformers).
fn kustomization_docs(dir: &str) -> Vec<Value> {
    let kustomization = &docs(&format!("{dir}/kustomization.yaml"))[0];
    let mut out = Vec::new();
    for key in ["resources", "components"] {
        for entry in kustomization[key].as_sequence().into_iter().flatten() {
            let path = format!("{dir}/{}", s(entry));
            let full = format!("{}/manifests/{path}", env!("CARGO_MANIFEST_DIR"));
            if std::path::Path::new(&full).is_dir() {
                out.extend(kustomization_docs(&path));
            } else {
                out.extend(docs(&path));
            }
        }
    }
    out
}

fn kinds(docs: &[Value]) -> Vec<&str> {
    let mut kinds: Vec<&str> = docs.iter().map(|d| s(&d["kind"])).collect();
    kinds.sort_unstable();
    kinds
}

fn kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// The Deployment's container args, parsed by the binary's own flag parser.
fn deployed_config() -> (Config, Value) {
    let deployment = kind(&docs("base/deployment.yaml"), "Deployment").clone();
    let container = deployment["spec"]["template"]["spec"]["containers"][0].clone();
    let args: Vec<String> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| s(a).to_owned())
        .collect();
    let config =
        Config::try_parse_from(std::iter::once("memcached-webhook".to_owned()).chain(args))
            .expect("the binary accepts the Deployment's args");
    (config, deployment)
}

#[test]
fn the_default_install_is_the_webhook_alone_and_with_crd_adds_the_crd() {
    let webhook = kustomization_docs(".");
    let webhook_kinds = kinds(&webhook);
    assert!(
        !webhook_kinds.contains(&"CustomResourceDefinition"),
        "manifests/ must not install the operator's CRD: {webhook_kinds:?}"
    );
    for needed in [
        "Namespace",
        "ServiceAccount",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Issuer",
        "Certificate",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(
            webhook_kinds.contains(&needed),
            "manifests/ lacks a {needed}"
        );
    }

    let with_crd = kustomization_docs("with-crd");
    let crds: Vec<&Value> = with_crd
        .iter()
        .filter(|d| d["kind"] == "CustomResourceDefinition")
        .collect();
    assert_eq!(crds.len(), 1, "manifests/with-crd/ has one CRD");
    assert_eq!(
        s(&crds[0]["metadata"]["name"]),
        "memcacheds.memcached.c5c3.io"
    );
    let mut rest: Vec<&Value> = with_crd
        .iter()
        .filter(|d| d["kind"] != "CustomResourceDefinition")
        .collect();
    let mut alone: Vec<&Value> = webhook.iter().collect();
    let key = |d: &&Value| serde_yaml_ng::to_string(d).unwrap();
    rest.sort_by_key(key);
    alone.sort_by_key(key);
    assert_eq!(
        rest, alone,
        "with-crd is the webhook plus the CRD, nothing else"
    );
}

/// The hand-over from the operator installs the server first with `kubectl apply -k manifests/
/// -l '!memcached-webhook.c5c3.io/configuration'`: the label must select exactly the two webhook
/// configurations, or that step would register this webhook early (two webhooks judging) or
/// leave part of the server out.
#[test]
fn only_the_webhook_configurations_carry_the_hand_over_label() {
    let label = "memcached-webhook.c5c3.io/configuration";
    let docs = kustomization_docs(".");
    let mut labelled: Vec<&str> = docs
        .iter()
        .filter(|d| !d["metadata"]["labels"][label].is_null())
        .map(|d| s(&d["kind"]))
        .collect();
    labelled.sort_unstable();
    assert_eq!(
        labelled,
        [
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration"
        ],
        "objects labelled {label}"
    );
}

#[test]
fn webhook_configurations_match_the_routes_and_the_service() {
    let webhooks = docs("base/webhooks.yaml");
    let service = kind(&docs("base/service.yaml"), "Service").clone();
    for (config_kind, name, operators, path) in [
        (
            "MutatingWebhookConfiguration",
            "mutate.memcached-webhook.c5c3.io",
            "mmemcached-v1beta1.kb.io",
            MUTATE_PATH,
        ),
        (
            "ValidatingWebhookConfiguration",
            "validate.memcached-webhook.c5c3.io",
            "vmemcached-v1beta1.kb.io",
            VALIDATE_PATH,
        ),
    ] {
        let hook = &kind(&webhooks, config_kind)["webhooks"][0];
        // Not the operator's name, so that while both are installed an error names the webhook
        // that gave it; the API server wants a fully qualified name (three or more DNS labels).
        assert_eq!(s(&hook["name"]), name);
        assert_ne!(name, operators);
        let labels: Vec<&str> = name.split('.').collect();
        assert!(labels.len() >= 3, "{name} is not fully qualified");
        assert!(
            labels.iter().all(|l| !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')),
            "{name} is not a DNS subdomain"
        );
        let svc = &hook["clientConfig"]["service"];
        assert_eq!(s(&svc["path"]), path, "{config_kind} path");
        assert_eq!(svc["name"], service["metadata"]["name"]);
        assert_eq!(svc["namespace"], service["metadata"]["namespace"]);
        assert_eq!(svc["port"], service["spec"]["ports"][0]["port"]);
        assert_eq!(s(&hook["failurePolicy"]), "Fail");
        assert_eq!(s(&hook["sideEffects"]), "None");
        assert_eq!(s(&hook["matchPolicy"]), "Equivalent");
        let versions: Vec<&str> = hook["admissionReviewVersions"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(s)
            .collect();
        assert_eq!(
            versions,
            ["v1", "v1beta1"],
            "versions the server answers in"
        );
    }
}

#[test]
fn deployment_ports_probes_and_certificates_match_the_binary() {
    let (config, deployment) = deployed_config();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let port = |name: &str| -> u64 {
        let ports = container["ports"].as_sequence().unwrap();
        ports
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no port {name}"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(
        port("webhook"),
        u64::from(config.webhook_bind_address.port())
    );
    assert_eq!(
        port("health"),
        u64::from(config.health_probe_bind_address.port())
    );
    assert_eq!(
        port("metrics"),
        u64::from(config.metrics_bind_address.expect("metrics on").port())
    );
    assert_eq!(
        config.webhook_bind_address,
        Config::defaults().webhook_bind_address,
        "the manifests use the defaults"
    );

    assert_eq!(
        s(&container["readinessProbe"]["httpGet"]["path"]),
        "/readyz"
    );
    assert_eq!(
        s(&container["livenessProbe"]["httpGet"]["path"]),
        "/healthz"
    );
    assert_eq!(s(&container["readinessProbe"]["httpGet"]["port"]), "health");

    // The Secret is mounted whole (never subPath) at the cert dir, and it is the one cert-manager writes.
    let mount = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| s(&m["mountPath"]) == config.cert_dir.to_str().unwrap())
        .expect("the Secret is mounted at --cert-dir");
    assert!(
        mount.get("subPath").is_none(),
        "subPath mounts never update"
    );
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    let certificates = docs("base/certificates.yaml");
    let serving = certificates
        .iter()
        .filter(|d| d["kind"] == "Certificate")
        .find(|d| d["spec"]["secretName"] == volume["secret"]["secretName"])
        .expect("a Certificate writes the mounted Secret");
    assert_eq!(
        (config.cert_name.as_str(), config.key_name.as_str()),
        ("tls.crt", "tls.key"),
        "cert-manager's key names"
    );

    // The serving certificate names the Service the webhooks call.
    let service = kind(&docs("base/service.yaml"), "Service").clone();
    let dns = format!(
        "{}.{}.svc",
        s(&service["metadata"]["name"]),
        s(&service["metadata"]["namespace"])
    );
    let names: Vec<&str> = serving["spec"]["dnsNames"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert!(names.contains(&dns.as_str()), "{names:?} lacks {dns}");

    // Service targets the webhook port; selectors match the pod labels.
    assert_eq!(
        service["spec"]["ports"][0]["targetPort"].as_u64(),
        Some(port("webhook"))
    );
    let labels = &deployment["spec"]["template"]["metadata"]["labels"];
    for (k, v) in service["spec"]["selector"].as_mapping().unwrap() {
        assert_eq!(&labels[k], v, "Service selector {k:?}");
    }
    // The drain fits in the pod's termination grace period.
    let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .unwrap();
    assert!(
        config.shutdown_delay + config.shutdown_grace_period
            < std::time::Duration::from_secs(grace)
    );
}

/// Every `default` under a schema node, by field path (`spec.memcached.threads`; `[]` for a
/// list's items, `.*` for a map's values).
fn defaults_in(node: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    if let Some(default) = node.get("default") {
        out.insert(path.to_owned(), default.clone());
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_mapping) {
        for (key, sub) in properties {
            let key = s(key);
            let path = if path.is_empty() {
                key.to_owned()
            } else {
                format!("{path}.{key}")
            };
            defaults_in(sub, &path, out);
        }
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_mapping()) {
        defaults_in(values, &format!("{path}.*"), out);
    }
    if let Some(items) = node.get("items") {
        defaults_in(items, &format!("{path}[]"), out);
    }
}

/// The CRD's defaults are exactly the webhook's (the one list of them: `.ci/check_deploy.py`
/// checks only that each validates against its schema), on every version, and none on
/// `spec.replicas`: the webhook defaults it only when autoscaling is off.
#[test]
fn crd_defaults_are_the_webhook_defaults() {
    let crd = kind(
        &docs("components/crd/memcached.c5c3.io_memcacheds.yaml"),
        "CustomResourceDefinition",
    )
    .clone();
    let expected: BTreeMap<String, Value> = [
        ("spec.image", Value::from(defaults::IMAGE)),
        ("spec.memcached.maxMemoryMB", defaults::MAX_MEMORY_MB.into()),
        (
            "spec.memcached.maxConnections",
            defaults::MAX_CONNECTIONS.into(),
        ),
        ("spec.memcached.threads", defaults::THREADS.into()),
        ("spec.memcached.maxItemSize", defaults::MAX_ITEM_SIZE.into()),
        (
            "spec.monitoring.exporterImage",
            defaults::EXPORTER_IMAGE.into(),
        ),
        (
            "spec.monitoring.serviceMonitor.interval",
            defaults::SERVICE_MONITOR_INTERVAL.into(),
        ),
        (
            "spec.monitoring.serviceMonitor.scrapeTimeout",
            defaults::SERVICE_MONITOR_SCRAPE_TIMEOUT.into(),
        ),
        (
            "spec.highAvailability.antiAffinityPreset",
            defaults::ANTI_AFFINITY_PRESET.into(),
        ),
        // The CRD's own, which the webhook leaves to the apiserver: the reference operator's
        // api/v1beta1 markers (validation judges absent grace periods as 10 and 30, as the
        // apiserver fills them in first) and the two LocalObjectReference names it defaults
        // to "".
        ("spec.memcached.verbosity", 0.into()),
        (
            "spec.highAvailability.gracefulShutdown.preStopDelaySeconds",
            10.into(),
        ),
        (
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            30.into(),
        ),
        ("spec.security.sasl.credentialsSecretRef.name", "".into()),
        ("spec.security.tls.certificateSecretRef.name", "".into()),
    ]
    .into_iter()
    .map(|(path, value)| (path.to_owned(), value))
    .collect();
    let versions = crd["spec"]["versions"].as_sequence().unwrap();
    assert_eq!(versions.len(), 2, "v1alpha1 and v1beta1");
    for version in versions {
        let mut found = BTreeMap::new();
        defaults_in(&version["schema"]["openAPIV3Schema"], "", &mut found);
        assert_eq!(found, expected, "{}", s(&version["name"]));
    }
}
