//! The view: the Memcached fields the defaulting and validation rules read, as borrowed types
//! (`&'i str` into the request body, [`Val`] for the parts a rule walks itself). Built by
//! [`read()`](super::read()); everything else in the object is never copied.

use crate::json::{Field, Val};

/// The sections of the object read member by member (the `match` arms of `read.rs`), by path,
/// with the members read: the admission reader skips any other member's object or array, as it
/// skips `managedFields`. A rule reading a new member adds it here (`read/tests.rs` checks them
/// against the CRD). No rule's error that ratcheting compares by value may name a section
/// itself, whose unread members are emptied (`validate::test_support::compared_as_read` holds
/// every rule's test to that).
pub const READ: [(&[&str], &[&str]); 6] = [
    (
        &["spec"],
        &[
            "replicas",
            "image",
            "resources",
            "memcached",
            "highAvailability",
            "monitoring",
            "security",
            "autoscaling",
        ],
    ),
    (&["spec", "resources"], &["limits", "requests"]),
    (
        &["spec", "highAvailability"],
        &[
            "antiAffinityPreset",
            "podDisruptionBudget",
            "gracefulShutdown",
        ],
    ),
    (
        &["spec", "monitoring"],
        &[
            "enabled",
            "exporterImage",
            "exporterResources",
            "serviceMonitor",
        ],
    ),
    (
        &["spec", "monitoring", "serviceMonitor"],
        &["interval", "scrapeTimeout"],
    ),
    (&["spec", "security"], &["sasl", "tls"]),
];

/// A Memcached object (`request.object`).
#[derive(Debug, Default)]
pub struct Memcached<'t, 'i> {
    /// `metadata.name` (empty on a CREATE that uses `generateName`).
    pub name: &'i str,
    /// Whether `metadata.deletionTimestamp` is set: the object waits only for its finalizers.
    /// Its `spec` is then left unread (absent).
    pub terminating: bool,
    /// `spec`.
    pub spec: Field<Spec<'t, 'i>>,
}

/// `spec` (MemcachedSpec).
#[derive(Debug, Default)]
pub struct Spec<'t, 'i> {
    /// `spec.replicas` (`*int32`).
    pub replicas: Field<i32>,
    /// `spec.image` (`*string`).
    pub image: Field<&'i str>,
    /// `spec.resources` (corev1.ResourceRequirements): only what the rules read.
    pub resources: Field<Resources<'t, 'i>>,
    /// `spec.memcached` (`*MemcachedConfig`).
    pub memcached: Field<MemcachedConfig<'t, 'i>>,
    /// `spec.highAvailability` (`*HighAvailabilitySpec`).
    pub high_availability: Field<HighAvailability<'i>>,
    /// `spec.monitoring` (`*MonitoringSpec`).
    pub monitoring: Field<Monitoring<'i>>,
    /// `spec.security` (`*SecuritySpec`).
    pub security: Field<Security<'i>>,
    /// `spec.autoscaling` (`*AutoscalingSpec`).
    pub autoscaling: Field<Autoscaling<'t, 'i>>,
}

/// `spec.resources`: the two entries the rules look at, as raw quantities.
#[derive(Debug, Default)]
pub struct Resources<'t, 'i> {
    /// `spec.resources.limits.memory` (a Quantity: a string or a JSON number).
    pub limits_memory: Option<Val<'t, 'i>>,
    /// Whether `spec.resources.requests` has a `cpu` key (its value is not read, as in the reference).
    pub requests_cpu: bool,
    /// Whether the container gets a memory request: a `memory` key in `requests`, or in
    /// `limits` (the apiserver copies a limit into an absent request).
    pub requested_memory: bool,
}

/// `spec.monitoring.exporterResources` (corev1.ResourceRequirements): which resources the
/// exporter sidecar gets a request for, from `requests` or (copied by the apiserver) `limits`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Requested {
    pub cpu: bool,
    pub memory: bool,
}

/// `spec.memcached` (MemcachedConfig).
#[derive(Debug, Default)]
pub struct MemcachedConfig<'t, 'i> {
    /// `maxMemoryMB` (`int32`, `-m`).
    pub max_memory_mb: Field<i32>,
    /// `maxConnections` (`int32`, `-c`).
    pub max_connections: Field<i32>,
    /// `threads` (`int32`, `-t`).
    pub threads: Field<i32>,
    /// `maxItemSize` (`string`, `-I`).
    pub max_item_size: Field<&'i str>,
    /// `verbosity` (`int32`, `-v`): never defaulted.
    pub verbosity: Field<i32>,
    /// `extraArgs` (`[]string`): an array whose elements are all strings.
    pub extra_args: Option<Val<'t, 'i>>,
}

/// `spec.highAvailability` (HighAvailabilitySpec).
#[derive(Debug, Default)]
pub struct HighAvailability<'i> {
    /// `antiAffinityPreset` (`*AntiAffinityPreset`, `soft` | `hard`).
    pub anti_affinity_preset: Field<&'i str>,
    /// `podDisruptionBudget` (`*PDBSpec`).
    pub pod_disruption_budget: Field<PodDisruptionBudget<'i>>,
    /// `gracefulShutdown` (`*GracefulShutdownSpec`).
    pub graceful_shutdown: Field<GracefulShutdown>,
}

/// An `intstr.IntOrString`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrString<'i> {
    Int(i32),
    String(&'i str),
}

/// `spec.highAvailability.podDisruptionBudget` (PDBSpec).
#[derive(Debug, Default)]
pub struct PodDisruptionBudget<'i> {
    pub enabled: bool,
    pub min_available: Field<IntOrString<'i>>,
    pub max_unavailable: Field<IntOrString<'i>>,
}

/// `spec.highAvailability.gracefulShutdown` (GracefulShutdownSpec).
#[derive(Debug, Default)]
pub struct GracefulShutdown {
    pub enabled: bool,
    /// `preStopDelaySeconds` (`int32`, CRD default 10).
    pub pre_stop_delay_seconds: Field<i32>,
    /// `terminationGracePeriodSeconds` (`int64`, CRD default 30).
    pub termination_grace_period_seconds: Field<i64>,
}

/// `spec.monitoring` (MonitoringSpec).
#[derive(Debug, Default)]
pub struct Monitoring<'i> {
    pub enabled: bool,
    /// `exporterImage` (`*string`).
    pub exporter_image: Field<&'i str>,
    /// `exporterResources`: only which requests the exporter container will have.
    pub exporter_requested: Requested,
    /// `serviceMonitor` (`*ServiceMonitorSpec`).
    pub service_monitor: Field<ServiceMonitor<'i>>,
}

/// `spec.monitoring.serviceMonitor` (ServiceMonitorSpec).
#[derive(Debug, Default)]
pub struct ServiceMonitor<'i> {
    /// `interval` (`string`, a Prometheus duration).
    pub interval: Field<&'i str>,
    /// `scrapeTimeout` (`string`, a Prometheus duration).
    pub scrape_timeout: Field<&'i str>,
}

/// `spec.security` (SecuritySpec).
#[derive(Debug, Default)]
pub struct Security<'i> {
    /// `sasl`: `enabled` and `credentialsSecretRef.name`.
    pub sasl: Field<SecretFeature<'i>>,
    /// `tls`: `enabled` and `certificateSecretRef.name`.
    pub tls: Field<SecretFeature<'i>>,
}

/// A feature switched on with `enabled` that needs a Secret (`sasl`, `tls`).
#[derive(Debug, Default)]
pub struct SecretFeature<'i> {
    pub enabled: bool,
    /// The referenced Secret's `name` ("" when absent, as Go reads it).
    pub secret_name: &'i str,
}

/// `spec.autoscaling` (AutoscalingSpec).
#[derive(Debug, Default)]
pub struct Autoscaling<'t, 'i> {
    pub enabled: bool,
    /// `minReplicas` (`*int32`).
    pub min_replicas: Field<i32>,
    /// `maxReplicas` (`int32`).
    pub max_replicas: Field<i32>,
    /// `metrics` (`[]autoscalingv2.MetricSpec`): an array, read by the validator.
    pub metrics: Field<Val<'t, 'i>>,
    /// `behavior` (`*autoscalingv2.HorizontalPodAutoscalerBehavior`): an object, read by the validator.
    pub behavior: Field<Val<'t, 'i>>,
}

impl Spec<'_, '_> {
    /// `spec.autoscaling.enabled`, which switches replicas off and metrics/behavior defaults on.
    pub fn autoscaling_enabled(&self) -> bool {
        self.autoscaling.get().is_some_and(|a| a.enabled)
    }
}
