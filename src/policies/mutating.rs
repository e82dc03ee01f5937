//! The MutatingAdmissionPolicy: the defaulting rules of [`crate::memcached::defaults`] as CEL
//! JSON Patches, built from the same constants and JSON values the webhook writes, one mutation
//! per rule, each reading the object as the previous ones left it.

use serde_json::{Value, json};

use crate::memcached::defaults as d;

/// The policy's mutations, in the webhook's order.
pub fn mutations() -> Vec<Value> {
    let [spec, replicas, image] = spec_replicas_image();
    let memcached = memcached();
    let [monitoring, high_availability] = monitoring_high_availability();
    let autoscaling = autoscaling();
    [
        spec,
        replicas,
        image,
        memcached,
        monitoring,
        high_availability,
        autoscaling,
    ]
    .into_iter()
    .map(|expression| {
        json!({
            "patchType": "JSONPatch",
            "jsonPatch": {"expression": expression},
        })
    })
    .collect()
}

/// `spec` itself, `spec.replicas` (removed with autoscaling), `spec.image`.
fn spec_replicas_image() -> [String; 3] {
    let spec = format!(
        "{} ? [] : [{}]",
        has("spec"),
        add("/spec", "Object.spec{}".to_owned())
    );
    let replicas = format!(
        "object.spec.?autoscaling.?enabled.orValue(false)\n\
         ? ({} ? [JSONPatch{{op: \"remove\", path: \"/spec/replicas\"}}] : [])\n\
         : ({} ? [] : [{}])",
        has("spec.replicas"),
        has("spec.replicas"),
        add("/spec/replicas", int(d::REPLICAS))
    );
    let image = format!(
        "{} ? [] : [{}]",
        has("spec.image"),
        add("/spec/image", string(d::IMAGE))
    );
    [spec, replicas, image]
}

/// `spec.memcached`: created whole, or its zero and empty members defaulted.
fn memcached() -> String {
    let config = [
        ("maxMemoryMB", int(d::MAX_MEMORY_MB), true),
        ("maxConnections", int(d::MAX_CONNECTIONS), true),
        ("threads", int(d::THREADS), true),
        ("maxItemSize", string(d::MAX_ITEM_SIZE), false),
    ];
    let fields: Vec<String> = config
        .iter()
        .map(|(name, value, is_int)| {
            let path = format!("spec.memcached.?{name}");
            let unset = if *is_int {
                unset_int(&path)
            } else {
                unset_string(&path)
            };
            let op = add(&format!("/spec/memcached/{name}"), value.clone());
            format!("({unset} ? [{op}] : [])")
        })
        .collect();
    let memcached = format!(
        "!{} ? [{}]\n: {}",
        has("spec.memcached"),
        add(
            "/spec/memcached",
            constructor("Object.spec.memcached", &parse(d::MEMCACHED_JSON))
        ),
        fields.join("\n  + ")
    );
    memcached
}

/// `spec.monitoring`'s exporter image and ServiceMonitor durations, the anti-affinity preset.
fn monitoring_high_availability() -> [String; 2] {
    let monitoring = format!(
        "!{} ? [] :\n\
         ({} ? [] : [{}])\n\
         + (!{} ? [] :\n\
         \x20 ({} ? [{}] : [])\n\
         \x20 + ({} ? [{}] : []))",
        has("spec.monitoring"),
        has("spec.monitoring.exporterImage"),
        add("/spec/monitoring/exporterImage", string(d::EXPORTER_IMAGE)),
        has("spec.monitoring.serviceMonitor"),
        unset_string("spec.monitoring.serviceMonitor.?interval"),
        add(
            "/spec/monitoring/serviceMonitor/interval",
            string(d::SERVICE_MONITOR_INTERVAL)
        ),
        unset_string("spec.monitoring.serviceMonitor.?scrapeTimeout"),
        add(
            "/spec/monitoring/serviceMonitor/scrapeTimeout",
            string(d::SERVICE_MONITOR_SCRAPE_TIMEOUT)
        ),
    );
    let high_availability = format!(
        "{} && !{} ? [{}] : []",
        has("spec.highAvailability"),
        has("spec.highAvailability.antiAffinityPreset"),
        add(
            "/spec/highAvailability/antiAffinityPreset",
            string(d::ANTI_AFFINITY_PRESET)
        )
    );
    [monitoring, high_availability]
}

/// With autoscaling on: the CPU metric and the scale-down behavior.
fn autoscaling() -> String {
    let metrics = list_ops(
        "/spec/autoscaling/metrics",
        "Object.spec.autoscaling.metrics",
        &parse(d::METRICS_JSON),
    );
    let autoscaling = format!(
        "!object.spec.?autoscaling.?enabled.orValue(false) ? [] :\n\
         (object.spec.autoscaling.?metrics.orValue([]).size() == 0 ? [\n  {}\n] : [])\n\
         + ({} ? [] : [{}])",
        metrics.join(",\n  "),
        has("spec.autoscaling.behavior"),
        add(
            "/spec/autoscaling/behavior",
            constructor("Object.spec.autoscaling.behavior", &parse(d::BEHAVIOR_JSON))
        ),
    );
    autoscaling
}

fn has(path: &str) -> String {
    format!("has(object.{path})")
}

fn add(pointer: &str, value: String) -> String {
    format!(r#"JSONPatch{{op: "add", path: "{pointer}", value: {value}}}"#)
}

fn int(n: i64) -> String {
    n.to_string()
}

fn string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

fn unset_int(path: &str) -> String {
    format!("object.{path}.orValue(0) == 0")
}

fn unset_string(path: &str) -> String {
    format!("object.{path}.orValue(\"\") == \"\"")
}

fn parse(json: &str) -> Value {
    serde_json::from_str(json).expect("the defaults' JSON constants are valid JSON")
}

/// A CEL value for `value` at the schema type `type_path` (`Object.spec.memcached`): typed
/// object constructors all the way down, so the apiserver checks them against the CRD's schema.
/// Lists are never nested in a value: see [`list_ops`].
fn constructor(type_path: &str, value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let members: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}: {}", constructor(&format!("{type_path}.{k}"), v)))
                .collect();
            format!("{type_path}{{{}}}", members.join(", "))
        }
        Value::Array(_) => panic!(
            "a list inside a default object panics the apiserver (kubernetes/kubernetes#142181)"
        ),
        scalar => scalar.to_string(),
    }
}

/// A list of objects as `add []` then one `add .../-` per item: a JSONPatch `value` that is a
/// list of `Object{}` values panics the apiserver's handler (kubernetes/kubernetes#142181).
fn list_ops(pointer: &str, type_path: &str, list: &Value) -> Vec<String> {
    let items = list.as_array().map(Vec::as_slice).unwrap_or_default();
    std::iter::once(format!(
        r#"JSONPatch{{op: "add", path: "{pointer}", value: []}}"#
    ))
    .chain(items.iter().map(|item| {
        format!(
            r#"JSONPatch{{op: "add", path: "{pointer}/-", value: {}}}"#,
            constructor(type_path, item)
        )
    }))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_become_typed_constructors_and_lists_are_appended() {
        assert_eq!(
            constructor("Object.spec.memcached", &parse(d::MEMCACHED_JSON)),
            r#"Object.spec.memcached{maxConnections: 1024, maxItemSize: "1m", maxMemoryMB: 64, threads: 4}"#
        );
        let ops = list_ops("/m", "Object.m", &parse(r#"[{"a":{"b":1}},{"a":{"b":2}}]"#));
        assert_eq!(
            ops,
            [
                r#"JSONPatch{op: "add", path: "/m", value: []}"#,
                r#"JSONPatch{op: "add", path: "/m/-", value: Object.m{a: Object.m.a{b: 1}}}"#,
                r#"JSONPatch{op: "add", path: "/m/-", value: Object.m{a: Object.m.a{b: 2}}}"#,
            ]
        );
        assert_eq!(mutations().len(), 7);
    }
}
