//! Each exported rule at and around its limits, and each of its error kinds: the validation
//! corpus's own cases (the rest come from the suite's and the tests' fixtures).

use serde_json::{Value, json};

/// Every case, as (what it is, spec).
pub fn boundaries() -> Vec<(&'static str, Value)> {
    [reference(), memcached_and_durations(), images(), hpa()].concat()
}

/// A spec with autoscaling on (and the CPU request R10 wants), plus `extra` members.
fn autoscaling(extra: Value) -> Value {
    let mut spec = json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true, "maxReplicas": 3}});
    for (k, v) in extra.as_object().unwrap() {
        spec["autoscaling"][k] = v.clone();
    }
    spec
}

/// R1–R10 and the HPA bounds at and around their limits.
fn reference() -> Vec<(&'static str, Value)> {
    vec![
        (
            "R1 at the limit",
            json!({"resources": {"limits": {"memory": "96Mi"}}}),
        ),
        (
            "R1 one byte short",
            json!({"resources": {"limits": {"memory": "100663295"}}}),
        ),
        (
            "R1 in Gi",
            json!({"memcached": {"maxMemoryMB": 992}, "resources": {"limits": {"memory": "1000Mi"}}}),
        ),
        (
            "R1 a number",
            json!({"resources": {"limits": {"memory": 100000000}}}),
        ),
        (
            "R2 both",
            json!({"replicas": 3, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1, "maxUnavailable": "25%"}}}),
        ),
        (
            "R4 equal",
            json!({"replicas": 2, "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 2}}}),
        ),
        (
            "R4 default replicas",
            json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        ),
        (
            "R4 percent",
            json!({"highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": "50%"}}}),
        ),
        (
            "R5 equal",
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "preStopDelaySeconds": 30, "terminationGracePeriodSeconds": 30}}}),
        ),
        (
            "R5 zero",
            json!({"highAvailability": {"gracefulShutdown": {"enabled": true, "terminationGracePeriodSeconds": 0}}}),
        ),
        (
            "R7 TLS",
            json!({"security": {"tls": {"enabled": true, "certificateSecretRef": {"name": ""}}}}),
        ),
        ("R9 equal", autoscaling(json!({"minReplicas": 3}))),
        (
            "R10 memory metric only",
            autoscaling(
                json!({"metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]}),
            ),
        ),
        (
            "R10 without request",
            json!({"autoscaling": {"enabled": true, "maxReplicas": 3, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}}),
        ),
        (
            "HPA no maxReplicas",
            json!({"resources": {"requests": {"cpu": "1"}}, "autoscaling": {"enabled": true}}),
        ),
        (
            "HPA zero bounds",
            autoscaling(json!({"minReplicas": 0, "maxReplicas": 0})),
        ),
    ]
}

/// memcached's start limits and Prometheus durations, each error kind.
fn memcached_and_durations() -> Vec<(&'static str, Value)> {
    vec![
        ("negative memory", json!({"memcached": {"maxMemoryMB": -1}})),
        ("negative threads", json!({"memcached": {"threads": -2}})),
        (
            "negative connections",
            json!({"memcached": {"maxConnections": -1}}),
        ),
        (
            "connections one short",
            json!({"memcached": {"threads": 8, "maxConnections": 43}}),
        ),
        (
            "connections enough",
            json!({"memcached": {"threads": 8, "maxConnections": 44}}),
        ),
        (
            "item size 1.5m",
            json!({"memcached": {"maxItemSize": "1.5m"}}),
        ),
        (
            "item size 1500k",
            json!({"memcached": {"maxItemSize": "1500k"}}),
        ),
        (
            "item size 2048m",
            json!({"memcached": {"maxItemSize": "2048m"}}),
        ),
        (
            "item size huge",
            json!({"memcached": {"maxItemSize": "99999999999999999999m"}}),
        ),
        (
            "item size over half",
            json!({"memcached": {"maxMemoryMB": 1, "maxItemSize": "1m"}}),
        ),
        (
            "item size bytes",
            json!({"memcached": {"maxItemSize": "524288"}}),
        ),
        (
            "item size with slab_chunk_max",
            json!({"memcached": {"maxItemSize": "100k", "extraArgs": ["-o", "slab_chunk_max=16384"]}}),
        ),
        (
            "verbosity negative",
            json!({"memcached": {"verbosity": -1}}),
        ),
        (
            "verbosity huge",
            json!({"memcached": {"verbosity": 131071}}),
        ),
        (
            "durations: both bad",
            json!({"monitoring": {"serviceMonitor": {"interval": "30s1m", "scrapeTimeout": "1h-5m"}}}),
        ),
        (
            "durations: too long, out of order",
            json!({"monitoring": {"serviceMonitor": {"interval": "293y", "scrapeTimeout": "1ms1s"}}}),
        ),
        (
            "durations: no unit, repeated",
            json!({"monitoring": {"serviceMonitor": {"interval": "1m30", "scrapeTimeout": "1s2s"}}}),
        ),
        (
            "durations: sign, whitespace",
            json!({"monitoring": {"serviceMonitor": {"interval": "-1s", "scrapeTimeout": " 30s"}}}),
        ),
        (
            "durations: lowercase, smallest",
            json!({"monitoring": {"serviceMonitor": {"interval": "30S", "scrapeTimeout": "5µs"}}}),
        ),
        (
            "durations: the largest, zero",
            json!({"monitoring": {"serviceMonitor": {"interval": "106751d23h47m16s854ms", "scrapeTimeout": "0"}}}),
        ),
        (
            "durations: just over",
            json!({"monitoring": {"serviceMonitor": {"interval": "106751d23h48m", "scrapeTimeout": "18446744073709551616s"}}}),
        ),
        (
            "durations: no number, fraction",
            json!({"monitoring": {"serviceMonitor": {"interval": "h30m", "scrapeTimeout": ".5s"}}}),
        ),
        (
            "durations: all units",
            json!({"monitoring": {"serviceMonitor": {"interval": "1y1w1d1h1m1s1ms", "scrapeTimeout": "007s"}}}),
        ),
    ]
}

/// Images, each error kind.
fn images() -> Vec<(&'static str, Value)> {
    vec![
        (
            "image: registry with port, and bad tag on the exporter",
            json!({"image": "registry.example.com:5000/team/memcached:1.6", "monitoring": {"exporterImage": "prom/memcached-exporter:-x"}}),
        ),
        ("image: whitespace", json!({"image": " memcached"})),
        (
            "image: short digest",
            json!({"image": "memcached@sha256:abc"}),
        ),
        (
            "image: unknown digest algorithm",
            json!({"image": "memcached@md5:abc"}),
        ),
        (
            "image: uppercase path after a host",
            json!({"image": "localhost/Team/x"}),
        ),
        ("image: bad registry", json!({"image": "exa_mple.com:x/y"})),
        ("image: bad component", json!({"image": "team/-memcached"})),
        ("image: empty tag", json!({"image": "memcached:"})),
        (
            "image: hex ID",
            json!({"image": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}),
        ),
        ("image: leading slash", json!({"image": "/memcached"})),
        ("image: no name", json!({"image": "@sha256:x"})),
        (
            "image: ipv6 registry",
            json!({"image": "[::1]:5000/memcached:1"}),
        ),
        (
            "image: uppercase hex",
            json!({"image": "memcached@sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"}),
        ),
        (
            "image: too long",
            json!({"image": format!("memcached/{}", "a".repeat(240))}),
        ),
        (
            "image: long tag",
            json!({"image": format!("memcached:{}", "a".repeat(129))}),
        ),
    ]
}

/// The HPA's metric and behavior rules, each error kind, and several rules at once.
fn hpa() -> Vec<(&'static str, Value)> {
    vec![
        (
            "HPA: pods metric",
            autoscaling(
                json!({"metrics": [{"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value"}}}]}),
            ),
        ),
        (
            "HPA: object metric",
            autoscaling(
                json!({"metrics": [{"type": "Object", "object": {"describedObject": {"kind": "", "name": ".."}, "metric": {"name": "x%"}, "target": {"type": "Value", "value": "0"}}}]}),
            ),
        ),
        (
            "HPA: external metric",
            autoscaling(
                json!({"metrics": [{"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "value": 1, "averageValue": "-1"}}}]}),
            ),
        ),
        (
            "HPA: container resource",
            autoscaling(
                json!({"metrics": [{"type": "ContainerResource", "containerResource": {"name": "gpu", "container": "Bad_Name", "target": {"type": "Utilization", "averageUtilization": 0, "averageValue": "1"}}}]}),
            ),
        ),
        (
            "HPA: two sources",
            autoscaling(
                json!({"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Bogus"}}, "pods": {"metric": {"name": "m"}, "target": {"type": "AverageValue", "averageValue": "1"}}}]}),
            ),
        ),
        (
            "HPA: unknown type, missing source",
            autoscaling(
                json!({"metrics": [{"type": "Magic"}, {"type": "Resource"}, {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 50}}}]}),
            ),
        ),
        (
            "HPA: behavior",
            autoscaling(
                json!({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 4000, "selectPolicy": "Random", "tolerance": "-1", "policies": [{"type": "Percent", "value": 0, "periodSeconds": 2000}, {"type": "Bogus", "value": 1, "periodSeconds": 0}]}, "scaleDown": {"stabilizationWindowSeconds": -1}}}),
            ),
        ),
        (
            "HPA: valid behavior",
            autoscaling(
                json!({"behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [{"type": "Pods", "value": 4, "periodSeconds": 60}]}}}),
            ),
        ),
        ("image: empty", json!({"image": ""})),
        (
            "bad image (skipped rule)",
            json!({"image": "Memcached:1.6"}),
        ),
        (
            "bad duration (skipped rule)",
            json!({"monitoring": {"enabled": true, "serviceMonitor": {"interval": "1d", "scrapeTimeout": "2d"}}}),
        ),
        (
            "bad metric (skipped rule) beside R9",
            autoscaling(json!({"minReplicas": 5, "metrics": [{"type": "Pods"}]})),
        ),
        (
            "many at once",
            json!({"replicas": 1, "memcached": {"maxMemoryMB": 16, "maxItemSize": "16m", "threads": 30, "maxConnections": 100},
            "resources": {"limits": {"memory": "32Mi"}}, "security": {"sasl": {"enabled": true}, "tls": {"enabled": true}},
            "highAvailability": {"podDisruptionBudget": {"enabled": true, "minAvailable": 1}}}),
        ),
    ]
}
