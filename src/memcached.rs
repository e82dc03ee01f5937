//! The Memcached resource (`memcached.c5c3.io/v1beta1`) as the webhooks see it: a borrowed view
//! of just the fields the defaulting and validation rules read, built in one pass over the tape.
//! Everything else in the object (metadata, status, unknown fields) is skipped, never copied.

pub mod defaults;
pub mod duration;
pub mod image;
pub mod quantity;
pub mod validate;

use crate::json::{self, Field, TypeError, Val};

/// The API group the webhooks serve.
pub const GROUP: &str = "memcached.c5c3.io";
/// The kind the webhooks serve.
pub const KIND: &str = "Memcached";

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
    pub memcached: Field<Config<'t, 'i>>,
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
pub struct Config<'t, 'i> {
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

// === reading the view from the tape ===

/// Reads `request.object`. Every field the rules use is type-checked here, so both webhooks
/// refuse a malformed object the same way.
pub fn read<'t, 'i>(object: Val<'t, 'i>) -> Result<Memcached<'t, 'i>, TypeError> {
    let mut mc = Memcached::default();
    let mut spec = None;
    for (key, v) in json::object(object, "object")? {
        match key {
            "metadata" => {
                for (key, v) in json::object(v, "metadata")? {
                    match key {
                        "name" if !v.is_null() => mc.name = json::string(v, "metadata.name")?,
                        "deletionTimestamp" => mc.terminating = !v.is_null(),
                        _ => {}
                    }
                }
            }
            "spec" => spec = Some(v),
            _ => {}
        }
    }
    // No rule runs on a terminating object, so nothing in its spec can fail it: the update that
    // removes its last finalizer must go through.
    if let (Some(v), false) = (spec, mc.terminating) {
        mc.spec = json::field(v, read_spec)?;
    }
    Ok(mc)
}

fn read_spec<'t, 'i>(v: Val<'t, 'i>) -> Result<Spec<'t, 'i>, TypeError> {
    let mut spec = Spec::default();
    for (key, v) in json::object(v, "spec")? {
        match key {
            "replicas" => spec.replicas = json::field(v, |v| json::int32(v, "spec.replicas"))?,
            "image" => spec.image = json::field(v, |v| json::string(v, "spec.image"))?,
            "resources" => spec.resources = json::field(v, read_resources)?,
            "memcached" => spec.memcached = json::field(v, read_config)?,
            "highAvailability" => spec.high_availability = json::field(v, read_high_availability)?,
            "monitoring" => spec.monitoring = json::field(v, read_monitoring)?,
            "security" => spec.security = json::field(v, read_security)?,
            "autoscaling" => spec.autoscaling = json::field(v, read_autoscaling)?,
            _ => {}
        }
    }
    Ok(spec)
}

fn read_resources<'t, 'i>(v: Val<'t, 'i>) -> Result<Resources<'t, 'i>, TypeError> {
    let mut r = Resources::default();
    for (key, v) in json::object(v, "spec.resources")? {
        match key {
            "limits" if !v.is_null() => {
                r.limits_memory = json::object(v, "spec.resources.limits")?
                    .filter(|(k, _)| *k == "memory")
                    .last()
                    .map(|(_, v)| v);
                r.requested_memory |= r.limits_memory.is_some();
            }
            "requests" if !v.is_null() => {
                for (k, _) in json::object(v, "spec.resources.requests")? {
                    r.requests_cpu |= k == "cpu";
                    r.requested_memory |= k == "memory";
                }
            }
            _ => {}
        }
    }
    Ok(r)
}

fn read_config<'t, 'i>(v: Val<'t, 'i>) -> Result<Config<'t, 'i>, TypeError> {
    let mut c = Config::default();
    for (key, v) in json::object(v, "spec.memcached")? {
        match key {
            "maxMemoryMB" => {
                c.max_memory_mb = json::field(v, |v| json::int32(v, "spec.memcached.maxMemoryMB"))?
            }
            "maxConnections" => {
                c.max_connections =
                    json::field(v, |v| json::int32(v, "spec.memcached.maxConnections"))?;
            }
            "threads" => c.threads = json::field(v, |v| json::int32(v, "spec.memcached.threads"))?,
            "maxItemSize" => {
                c.max_item_size = json::field(v, |v| json::string(v, "spec.memcached.maxItemSize"))?
            }
            "verbosity" => {
                c.verbosity = json::field(v, |v| json::int32(v, "spec.memcached.verbosity"))?
            }
            "extraArgs" if !v.is_null() => {
                let args = json::array(v, "spec.memcached.extraArgs")?;
                for arg in args.items().into_iter().flatten() {
                    json::string(arg, "spec.memcached.extraArgs[]")?;
                }
                c.extra_args = Some(args);
            }
            _ => {}
        }
    }
    Ok(c)
}

fn int_or_string<'i>(v: Val<'_, 'i>, field: &'static str) -> Result<IntOrString<'i>, TypeError> {
    match v.as_str() {
        Some(s) => Ok(IntOrString::String(s)),
        None => json::int32(v, field)
            .map(IntOrString::Int)
            .map_err(|e| TypeError {
                expected: "an integer or a string",
                ..e
            }),
    }
}

fn read_high_availability<'i>(v: Val<'_, 'i>) -> Result<HighAvailability<'i>, TypeError> {
    let mut ha = HighAvailability::default();
    for (key, v) in json::object(v, "spec.highAvailability")? {
        match key {
            "antiAffinityPreset" => {
                ha.anti_affinity_preset = json::field(v, |v| {
                    json::string(v, "spec.highAvailability.antiAffinityPreset")
                })?;
            }
            "podDisruptionBudget" => {
                ha.pod_disruption_budget = json::field(v, |v| {
                    let mut pdb = PodDisruptionBudget::default();
                    for (key, v) in json::object(v, "spec.highAvailability.podDisruptionBudget")? {
                        match key {
                            "enabled" => {
                                pdb.enabled = json::flag(
                                    v,
                                    "spec.highAvailability.podDisruptionBudget.enabled",
                                )?
                            }
                            "minAvailable" => {
                                pdb.min_available = json::field(v, |v| {
                                    int_or_string(
                                        v,
                                        "spec.highAvailability.podDisruptionBudget.minAvailable",
                                    )
                                })?;
                            }
                            "maxUnavailable" => {
                                pdb.max_unavailable = json::field(v, |v| {
                                    int_or_string(
                                        v,
                                        "spec.highAvailability.podDisruptionBudget.maxUnavailable",
                                    )
                                })?;
                            }
                            _ => {}
                        }
                    }
                    Ok(pdb)
                })?;
            }
            "gracefulShutdown" => {
                ha.graceful_shutdown = json::field(v, |v| {
                    let mut gs = GracefulShutdown::default();
                    for (key, v) in json::object(v, "spec.highAvailability.gracefulShutdown")? {
                        match key {
                            "enabled" => {
                                gs.enabled =
                                    json::flag(v, "spec.highAvailability.gracefulShutdown.enabled")?
                            }
                            "preStopDelaySeconds" => {
                                gs.pre_stop_delay_seconds = json::field(v, |v| {
                                    json::int32(
                                        v,
                                        "spec.highAvailability.gracefulShutdown.preStopDelaySeconds",
                                    )
                                })?;
                            }
                            "terminationGracePeriodSeconds" => {
                                gs.termination_grace_period_seconds = json::field(v, |v| {
                                    json::int64(
                                        v,
                                        "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
                                    )
                                })?;
                            }
                            _ => {}
                        }
                    }
                    Ok(gs)
                })?;
            }
            _ => {}
        }
    }
    Ok(ha)
}

fn read_exporter_requested(v: Val<'_, '_>) -> Result<Requested, TypeError> {
    let mut r = Requested::default();
    for (key, v) in json::object(v, "spec.monitoring.exporterResources")? {
        let section = match key {
            "requests" => "spec.monitoring.exporterResources.requests",
            "limits" => "spec.monitoring.exporterResources.limits",
            _ => continue,
        };
        if v.is_null() {
            continue;
        }
        for (k, _) in json::object(v, section)? {
            r.cpu |= k == "cpu";
            r.memory |= k == "memory";
        }
    }
    Ok(r)
}

fn read_monitoring<'i>(v: Val<'_, 'i>) -> Result<Monitoring<'i>, TypeError> {
    let mut m = Monitoring::default();
    for (key, v) in json::object(v, "spec.monitoring")? {
        match key {
            "enabled" => m.enabled = json::flag(v, "spec.monitoring.enabled")?,
            "exporterImage" => {
                m.exporter_image =
                    json::field(v, |v| json::string(v, "spec.monitoring.exporterImage"))?
            }
            "exporterResources" if !v.is_null() => {
                m.exporter_requested = read_exporter_requested(v)?;
            }
            "serviceMonitor" => {
                m.service_monitor = json::field(v, |v| {
                    let mut sm = ServiceMonitor::default();
                    for (key, v) in json::object(v, "spec.monitoring.serviceMonitor")? {
                        match key {
                            "interval" => {
                                sm.interval = json::field(v, |v| {
                                    json::string(v, "spec.monitoring.serviceMonitor.interval")
                                })?;
                            }
                            "scrapeTimeout" => {
                                sm.scrape_timeout = json::field(v, |v| {
                                    json::string(v, "spec.monitoring.serviceMonitor.scrapeTimeout")
                                })?;
                            }
                            _ => {}
                        }
                    }
                    Ok(sm)
                })?;
            }
            _ => {}
        }
    }
    Ok(m)
}

fn read_security<'i>(v: Val<'_, 'i>) -> Result<Security<'i>, TypeError> {
    let mut s = Security::default();
    for (key, v) in json::object(v, "spec.security")? {
        match key {
            "sasl" => {
                s.sasl = json::field(v, |v| {
                    secret_feature(
                        v,
                        ["spec.security.sasl", "spec.security.sasl.enabled"],
                        "credentialsSecretRef",
                        [
                            "spec.security.sasl.credentialsSecretRef",
                            "spec.security.sasl.credentialsSecretRef.name",
                        ],
                    )
                })?;
            }
            "tls" => {
                s.tls = json::field(v, |v| {
                    secret_feature(
                        v,
                        ["spec.security.tls", "spec.security.tls.enabled"],
                        "certificateSecretRef",
                        [
                            "spec.security.tls.certificateSecretRef",
                            "spec.security.tls.certificateSecretRef.name",
                        ],
                    )
                })?;
            }
            _ => {}
        }
    }
    Ok(s)
}

/// Reads `{enabled, <ref>: {name}}`; `paths` and `ref_paths` are the field paths for errors.
fn secret_feature<'i>(
    v: Val<'_, 'i>,
    paths: [&'static str; 2],
    ref_key: &str,
    ref_paths: [&'static str; 2],
) -> Result<SecretFeature<'i>, TypeError> {
    let mut f = SecretFeature::default();
    for (key, v) in json::object(v, paths[0])? {
        if key == "enabled" {
            f.enabled = json::flag(v, paths[1])?;
        } else if key == ref_key && !v.is_null() {
            for (key, v) in json::object(v, ref_paths[0])? {
                if key == "name" && !v.is_null() {
                    f.secret_name = json::string(v, ref_paths[1])?;
                }
            }
        }
    }
    Ok(f)
}

fn read_autoscaling<'t, 'i>(v: Val<'t, 'i>) -> Result<Autoscaling<'t, 'i>, TypeError> {
    let mut a = Autoscaling::default();
    for (key, v) in json::object(v, "spec.autoscaling")? {
        match key {
            "enabled" => a.enabled = json::flag(v, "spec.autoscaling.enabled")?,
            "minReplicas" => {
                a.min_replicas = json::field(v, |v| json::int32(v, "spec.autoscaling.minReplicas"))?
            }
            "maxReplicas" => {
                a.max_replicas = json::field(v, |v| json::int32(v, "spec.autoscaling.maxReplicas"))?
            }
            "metrics" => {
                a.metrics = json::field(v, |v| json::array(v, "spec.autoscaling.metrics"))?
            }
            "behavior" => {
                a.behavior = json::field(v, |v| json::any_object(v, "spec.autoscaling.behavior"))?
            }
            _ => {}
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_json(json: &str) -> Result<String, String> {
        let mut bytes = json.as_bytes().to_vec();
        let tape = simd_json::to_tape(&mut bytes).expect("test JSON is valid");
        read(Val::root(&tape))
            .map(|m| format!("{m:?}"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn type_errors_name_the_field_path() {
        let cases = [
            (
                r#"{"spec":{"replicas":"3"}}"#,
                "spec.replicas: expected an integer, found a string",
            ),
            (
                r#"{"spec":{"autoscaling":{"enabled":"yes"}}}"#,
                "spec.autoscaling.enabled: expected a boolean, found a string",
            ),
            (
                r#"{"spec":{"memcached":[1]}}"#,
                "spec.memcached: expected an object, found an array",
            ),
            (
                r#"{"spec":5}"#,
                "spec: expected an object, found an integer",
            ),
            (
                r#"{"spec":{"image":7}}"#,
                "spec.image: expected a string, found an integer",
            ),
            (
                r#"{"spec":{"memcached":{"threads":4.5}}}"#,
                "spec.memcached.threads: expected an integer, found a number with a fraction or exponent",
            ),
            (
                r#"{"spec":{"memcached":{"extraArgs":["-o",1]}}}"#,
                "spec.memcached.extraArgs[]: expected a string, found an integer",
            ),
            (
                r#"{"spec":{"autoscaling":{"metrics":{}}}}"#,
                "spec.autoscaling.metrics: expected an array, found an object",
            ),
            (
                r#"{"spec":{"highAvailability":{"podDisruptionBudget":{"minAvailable":true}}}}"#,
                "spec.highAvailability.podDisruptionBudget.minAvailable: expected an integer or a string, found a boolean",
            ),
            (
                r#"{"metadata":{"name":1}}"#,
                "metadata.name: expected a string, found an integer",
            ),
            (
                r#"{"spec":{"monitoring":{"exporterResources":{"limits":[]}}}}"#,
                "spec.monitoring.exporterResources.limits: expected an object, found an array",
            ),
            (
                r#"{"spec":{"resources":{"requests":"1"}}}"#,
                "spec.resources.requests: expected an object, found a string",
            ),
            (r#"[]"#, "object: expected an object, found an array"),
        ];
        for (json, expected) in cases {
            assert_eq!(read_json(json), Err(expected.to_owned()), "{json}");
        }
    }

    #[test]
    fn nulls_and_absences_are_told_apart() {
        let mut bytes =
            br#"{"spec":{"replicas":null,"memcached":{"threads":0},"monitoring":null}}"#.to_vec();
        let tape = simd_json::to_tape(&mut bytes).unwrap();
        let mc = read(Val::root(&tape)).unwrap();
        let spec = mc.spec.get().unwrap();
        assert_eq!(spec.replicas, Field::Null);
        assert_eq!(spec.image, Field::Absent);
        assert_eq!(spec.memcached.get().unwrap().threads, Field::Set(0));
        assert!(matches!(spec.monitoring, Field::Null));
    }
}
