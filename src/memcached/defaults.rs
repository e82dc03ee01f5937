//! The defaulting rules of C5C3/memcached-operator v0.4.0 (`api/v1beta1/memcached_webhook.go`
//! and its "Defaulting Webhook" reference page), written as JSON Patch operations
//! for exactly the members that are missing. User values are never overwritten; optional
//! sections (`monitoring`, `highAvailability`, `autoscaling`) are never created.

use crate::json::Field;
use crate::memcached::{MemcachedConfig, Monitoring, Spec};
use crate::patch::{Patch, Value};

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

/// Writes the defaulting operations for `spec` into `patch`, and a warning for any user value
/// it had to remove.
pub fn apply(spec: &Field<Spec<'_, '_>>, patch: &mut Patch<'_>, warnings: &mut Vec<String>) {
    let Field::Set(spec) = spec else {
        patch.set(spec.exists(), "/spec", Value::Raw(SPEC_JSON));
        return;
    };

    if spec.autoscaling_enabled() {
        if let Field::Set(replicas) = spec.replicas {
            patch.remove("/spec/replicas");
            warnings.push(format!(
                "spec.replicas: removed the value {replicas} because spec.autoscaling.enabled is true \
                 (the HorizontalPodAutoscaler sets the replica count)"
            ));
        }
    } else if spec.replicas.get().is_none() {
        patch.set(
            spec.replicas.exists(),
            "/spec/replicas",
            Value::Int(REPLICAS),
        );
    }

    if spec.image.get().is_none() {
        patch.set(spec.image.exists(), "/spec/image", Value::Str(IMAGE));
    }

    match &spec.memcached {
        Field::Set(config) => apply_config(config, patch),
        other => patch.set(
            other.exists(),
            "/spec/memcached",
            Value::Raw(MEMCACHED_JSON),
        ),
    }

    if let Field::Set(monitoring) = &spec.monitoring {
        apply_monitoring(monitoring, patch);
    }
    if let Field::Set(ha) = &spec.high_availability {
        let preset = &ha.anti_affinity_preset;
        let path = "/spec/highAvailability/antiAffinityPreset";
        let value = Value::Str(ANTI_AFFINITY_PRESET);
        default(patch, preset, preset.get().is_none(), path, value);
    }
    if let Field::Set(autoscaling) = &spec.autoscaling
        && autoscaling.enabled
    {
        let metrics = &autoscaling.metrics;
        let unset = metrics.get().is_none_or(|m| m.is_empty());
        let value = Value::Raw(METRICS_JSON);
        default(patch, metrics, unset, "/spec/autoscaling/metrics", value);
        let behavior = &autoscaling.behavior;
        let value = Value::Raw(BEHAVIOR_JSON);
        let path = "/spec/autoscaling/behavior";
        default(patch, behavior, behavior.get().is_none(), path, value);
    }
}

/// `spec.monitoring`'s exporter image and ServiceMonitor timings.
fn apply_monitoring(monitoring: &Monitoring<'_>, patch: &mut Patch<'_>) {
    let image = &monitoring.exporter_image;
    let value = Value::Str(EXPORTER_IMAGE);
    let path = "/spec/monitoring/exporterImage";
    default(patch, image, image.get().is_none(), path, value);
    if let Field::Set(sm) = &monitoring.service_monitor {
        let path = "/spec/monitoring/serviceMonitor/interval";
        let value = Value::Str(SERVICE_MONITOR_INTERVAL);
        default(patch, &sm.interval, is_empty(sm.interval), path, value);
        let path = "/spec/monitoring/serviceMonitor/scrapeTimeout";
        let value = Value::Str(SERVICE_MONITOR_SCRAPE_TIMEOUT);
        default(
            patch,
            &sm.scrape_timeout,
            is_empty(sm.scrape_timeout),
            path,
            value,
        );
    }
}

/// Sets `path` to `value` when the field is `unset` (by the field's own rule): a `replace` when
/// the member is there (null or a zero value), an `add` when it is absent.
fn default<T>(
    patch: &mut Patch<'_>,
    field: &Field<T>,
    unset: bool,
    path: &'static str,
    value: Value<'_>,
) {
    if unset {
        patch.set(field.exists(), path, value);
    }
}

/// Go value fields default on their zero value as well as when absent or null.
fn apply_config(config: &MemcachedConfig<'_, '_>, patch: &mut Patch<'_>) {
    let ints = [
        (
            config.max_memory_mb,
            "/spec/memcached/maxMemoryMB",
            MAX_MEMORY_MB,
        ),
        (
            config.max_connections,
            "/spec/memcached/maxConnections",
            MAX_CONNECTIONS,
        ),
        (config.threads, "/spec/memcached/threads", THREADS),
    ];
    for (field, path, default) in ints {
        if field.get().is_none_or(|&v| v == 0) {
            patch.set(field.exists(), path, Value::Int(default));
        }
    }
    if is_empty(config.max_item_size) {
        patch.set(
            config.max_item_size.exists(),
            "/spec/memcached/maxItemSize",
            Value::Str(MAX_ITEM_SIZE),
        );
    }
}

/// A Go `string` field is unset when absent, null or `""`.
fn is_empty(field: Field<&str>) -> bool {
    field.get().is_none_or(|s| s.is_empty())
}

#[cfg(test)]
mod tests;
