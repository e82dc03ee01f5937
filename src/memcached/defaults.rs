//! The defaulting rules of C5C3/memcached-operator v0.4.0 (`api/v1beta1/memcached_webhook.go`
//! and its "Defaulting Webhook" reference page), written as JSON Patch operations
//! for exactly the members that are missing. User values are never overwritten; optional
//! sections (`monitoring`, `highAvailability`, `autoscaling`) are never created.

use crate::json::Field;
use crate::memcached::{MemcachedConfig, Monitoring, Spec};
use crate::patch::{Op, Patch, Remove, op, remove};

pub const REPLICAS: i64 = 1;
pub const IMAGE: &str = "memcached:1.6";
pub const MAX_MEMORY_MB: i64 = 64;
pub const MAX_CONNECTIONS: i64 = 1024;
pub const THREADS: i64 = 4;
pub const MAX_ITEM_SIZE: &str = "1m";
pub const EXPORTER_IMAGE: &str = "prom/memcached-exporter:v0.15.4";
pub const SERVICE_MONITOR_INTERVAL: &str = "30s";
pub const SERVICE_MONITOR_SCRAPE_TIMEOUT: &str = "10s";
pub const ANTI_AFFINITY_PRESET: &str = "soft";
pub const CPU_UTILIZATION: i64 = 80;
pub const SCALE_DOWN_STABILIZATION_SECONDS: i64 = 300;

/// `spec.memcached` as the webhook creates it. Like the Go original (`omitempty`), it leaves
/// `verbosity: 0` to the CRD's structural default.
pub const MEMCACHED_JSON: &str =
    r#"{"maxMemoryMB":64,"maxConnections":1024,"threads":4,"maxItemSize":"1m"}"#;

/// `spec` as the webhook creates it when the object has none.
pub const SPEC_JSON: &str = r#"{"replicas":1,"image":"memcached:1.6","memcached":{"maxMemoryMB":64,"maxConnections":1024,"threads":4,"maxItemSize":"1m"}}"#;

/// `spec.autoscaling.metrics` when autoscaling is enabled without metrics: 80 % average CPU.
pub const METRICS_JSON: &str = r#"[{"type":"Resource","resource":{"name":"cpu","target":{"type":"Utilization","averageUtilization":80}}}]"#;

/// `spec.autoscaling.behavior` when autoscaling is enabled without one: a 300 s scale-down
/// stabilization window, so a brief lull does not shrink the cache into a stampede.
pub const BEHAVIOR_JSON: &str = r#"{"scaleDown":{"stabilizationWindowSeconds":300}}"#;

// Every operation the rules write, its text and base64 built at compile time (`crate::patch`).
static SPEC: Op = op!("/spec", raw SPEC_JSON);
static SET_REPLICAS: Op = op!("/spec/replicas", int REPLICAS);
static REMOVE_REPLICAS: Remove = remove!("/spec/replicas");
static SET_IMAGE: Op = op!("/spec/image", str IMAGE);
static SET_MEMCACHED: Op = op!("/spec/memcached", raw MEMCACHED_JSON);
static SET_MAX_MEMORY_MB: Op = op!("/spec/memcached/maxMemoryMB", int MAX_MEMORY_MB);
static SET_MAX_CONNECTIONS: Op = op!("/spec/memcached/maxConnections", int MAX_CONNECTIONS);
static SET_THREADS: Op = op!("/spec/memcached/threads", int THREADS);
static SET_MAX_ITEM_SIZE: Op = op!("/spec/memcached/maxItemSize", str MAX_ITEM_SIZE);
static SET_EXPORTER_IMAGE: Op = op!("/spec/monitoring/exporterImage", str EXPORTER_IMAGE);
static SET_INTERVAL: Op = op!(
    "/spec/monitoring/serviceMonitor/interval",
    str SERVICE_MONITOR_INTERVAL
);
static SET_SCRAPE_TIMEOUT: Op = op!(
    "/spec/monitoring/serviceMonitor/scrapeTimeout",
    str SERVICE_MONITOR_SCRAPE_TIMEOUT
);
static SET_ANTI_AFFINITY_PRESET: Op = op!(
    "/spec/highAvailability/antiAffinityPreset",
    str ANTI_AFFINITY_PRESET
);
static SET_METRICS: Op = op!("/spec/autoscaling/metrics", raw METRICS_JSON);
static SET_BEHAVIOR: Op = op!("/spec/autoscaling/behavior", raw BEHAVIOR_JSON);

/// Writes the defaulting operations for `spec` into `patch`, and a warning for any user value
/// it had to remove.
pub fn apply(spec: &Field<Spec<'_, '_>>, patch: &mut Patch<'_>, warnings: &mut Vec<String>) {
    let Field::Set(spec) = spec else {
        patch.set(spec.exists(), &SPEC);
        return;
    };

    if spec.autoscaling_enabled() {
        if let Field::Set(replicas) = spec.replicas {
            patch.remove(&REMOVE_REPLICAS);
            warnings.push(format!(
                "spec.replicas: removed the value {replicas} because spec.autoscaling.enabled is true \
                 (the HorizontalPodAutoscaler sets the replica count)"
            ));
        }
    } else if spec.replicas.get().is_none() {
        patch.set(spec.replicas.exists(), &SET_REPLICAS);
    }

    if spec.image.get().is_none() {
        patch.set(spec.image.exists(), &SET_IMAGE);
    }

    match &spec.memcached {
        Field::Set(config) => apply_config(config, patch),
        other => patch.set(other.exists(), &SET_MEMCACHED),
    }

    if let Field::Set(monitoring) = &spec.monitoring {
        apply_monitoring(monitoring, patch);
    }
    if let Field::Set(ha) = &spec.high_availability {
        let preset = &ha.anti_affinity_preset;
        default(
            patch,
            preset,
            preset.get().is_none(),
            &SET_ANTI_AFFINITY_PRESET,
        );
    }
    if let Field::Set(autoscaling) = &spec.autoscaling
        && autoscaling.enabled
    {
        let metrics = &autoscaling.metrics;
        let unset = metrics.get().is_none_or(|m| m.is_empty());
        default(patch, metrics, unset, &SET_METRICS);
        let behavior = &autoscaling.behavior;
        default(patch, behavior, behavior.get().is_none(), &SET_BEHAVIOR);
    }
}

/// `spec.monitoring`'s exporter image and ServiceMonitor timings.
fn apply_monitoring(monitoring: &Monitoring<'_>, patch: &mut Patch<'_>) {
    let image = &monitoring.exporter_image;
    default(patch, image, image.get().is_none(), &SET_EXPORTER_IMAGE);
    if let Field::Set(sm) = &monitoring.service_monitor {
        let interval = is_empty(sm.interval);
        default(patch, &sm.interval, interval, &SET_INTERVAL);
        let timeout = is_empty(sm.scrape_timeout);
        default(patch, &sm.scrape_timeout, timeout, &SET_SCRAPE_TIMEOUT);
    }
}

/// Writes `op` when the field is `unset` (by the field's own rule): a `replace` when the member
/// is there (null or a zero value), an `add` when it is absent.
fn default<T>(patch: &mut Patch<'_>, field: &Field<T>, unset: bool, op: &'static Op) {
    if unset {
        patch.set(field.exists(), op);
    }
}

/// Go value fields default on their zero value as well as when absent or null.
fn apply_config(config: &MemcachedConfig<'_, '_>, patch: &mut Patch<'_>) {
    let ints = [
        (config.max_memory_mb, &SET_MAX_MEMORY_MB),
        (config.max_connections, &SET_MAX_CONNECTIONS),
        (config.threads, &SET_THREADS),
    ];
    for (field, op) in ints {
        if field.get().is_none_or(|&v| v == 0) {
            patch.set(field.exists(), op);
        }
    }
    let size = config.max_item_size;
    default(patch, &size, is_empty(size), &SET_MAX_ITEM_SIZE);
}

/// A Go `string` field is unset when absent, null or `""`.
fn is_empty(field: Field<&str>) -> bool {
    field.get().is_none_or(|s| s.is_empty())
}

#[cfg(test)]
mod tests;
