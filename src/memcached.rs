//! The Memcached resource (`memcached.c5c3.io/v1beta1`) as the webhooks see it: a borrowed view
//! of just the fields the defaulting and validation rules read, built in one pass over the tape.
//! Everything else in the object (metadata, status, unknown fields) is skipped, never copied.

pub mod defaults;
pub mod duration;
pub mod image;
pub mod quantity;
pub mod validate;

use std::fmt;

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

/// An object some of whose fields have the wrong JSON type: every such field, in document
/// order, and the view of the rest (each wrongly typed field read as absent), so the validator
/// can still judge what is readable and a user sees every cause at once.
#[derive(Debug)]
pub struct Malformed<'t, 'i> {
    pub errors: Vec<TypeError>,
    pub partial: Memcached<'t, 'i>,
}

impl fmt::Display for Malformed<'_, '_> {
    /// One error as it is; several as apimachinery aggregates them: `[e1, e2]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.errors.as_slice() {
            return write!(f, "{one}");
        }
        f.write_str("[")?;
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{e}")?;
        }
        f.write_str("]")
    }
}

impl Malformed<'_, '_> {
    /// Whether `field` (a rule's field path) lies at or under a wrongly typed field: the view
    /// read that field as absent, so a rule about it would only repeat the type error.
    pub fn covers(&self, field: &str) -> bool {
        self.errors.iter().any(|e| {
            let at = e.field.strip_suffix("[]").unwrap_or(&e.field);
            field
                .strip_prefix(at)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        })
    }
}

/// Collects type errors while the view is read, so one wrongly typed field does not hide the
/// next. The list stays unallocated while every field reads.
#[derive(Default)]
struct Reader {
    errors: Vec<TypeError>,
}

impl Reader {
    /// Reads a member into a [`Field`]: JSON null is [`Field::Null`]; a value of the wrong type
    /// is recorded and read as [`Field::Absent`].
    fn field<'t, 'i, T>(
        &mut self,
        v: Val<'t, 'i>,
        read: impl FnOnce(&mut Self, Val<'t, 'i>) -> Result<T, TypeError>,
    ) -> Field<T> {
        if v.is_null() {
            return Field::Null;
        }
        match read(self, v) {
            Ok(t) => Field::Set(t),
            Err(e) => {
                self.errors.push(e);
                Field::Absent
            }
        }
    }

    /// A value that reads as its default when it has the wrong type.
    fn or_default<T: Default>(&mut self, read: Result<T, TypeError>) -> T {
        read.unwrap_or_else(|e| {
            self.errors.push(e);
            T::default()
        })
    }
}

/// Reads `request.object`. Every field the rules use is type-checked here, so both webhooks
/// refuse a malformed object the same way; every wrongly typed field is named, not just the
/// first.
pub fn read<'t, 'i>(object: Val<'t, 'i>) -> Result<Memcached<'t, 'i>, Box<Malformed<'t, 'i>>> {
    let mut r = Reader::default();
    let mc = read_object(&mut r, object);
    if r.errors.is_empty() {
        Ok(mc)
    } else {
        Err(Box::new(Malformed {
            errors: r.errors,
            partial: mc,
        }))
    }
}

fn read_object<'t, 'i>(r: &mut Reader, object: Val<'t, 'i>) -> Memcached<'t, 'i> {
    let mut mc = Memcached::default();
    let mut spec = None;
    let members = r.or_default(json::object(object, "object").map(Some));
    for (key, v) in members.into_iter().flatten() {
        match key {
            "metadata" => {
                let members = r.or_default(json::object(v, "metadata").map(Some));
                for (key, v) in members.into_iter().flatten() {
                    match key {
                        "name" if !v.is_null() => {
                            mc.name = r.or_default(json::string(v, "metadata.name"))
                        }
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
        mc.spec = r.field(v, read_spec);
    }
    mc
}

fn read_spec<'t, 'i>(r: &mut Reader, v: Val<'t, 'i>) -> Result<Spec<'t, 'i>, TypeError> {
    let mut spec = Spec::default();
    for (key, v) in json::object(v, "spec")? {
        match key {
            "replicas" => spec.replicas = r.field(v, |_, v| json::int32(v, "spec.replicas")),
            "image" => spec.image = r.field(v, |_, v| json::string(v, "spec.image")),
            "resources" => spec.resources = r.field(v, read_resources),
            "memcached" => spec.memcached = r.field(v, read_config),
            "highAvailability" => spec.high_availability = r.field(v, read_high_availability),
            "monitoring" => spec.monitoring = r.field(v, read_monitoring),
            "security" => spec.security = r.field(v, read_security),
            "autoscaling" => spec.autoscaling = r.field(v, read_autoscaling),
            _ => {}
        }
    }
    Ok(spec)
}

fn read_resources<'t, 'i>(r: &mut Reader, v: Val<'t, 'i>) -> Result<Resources<'t, 'i>, TypeError> {
    let mut res = Resources::default();
    for (key, v) in json::object(v, "spec.resources")? {
        match key {
            "limits" if !v.is_null() => {
                let limits = r.or_default(json::object(v, "spec.resources.limits").map(Some));
                res.limits_memory = limits
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| *k == "memory")
                    .last()
                    .map(|(_, v)| v);
                res.requested_memory |= res.limits_memory.is_some();
            }
            "requests" if !v.is_null() => {
                let requests = r.or_default(json::object(v, "spec.resources.requests").map(Some));
                for (k, _) in requests.into_iter().flatten() {
                    res.requests_cpu |= k == "cpu";
                    res.requested_memory |= k == "memory";
                }
            }
            _ => {}
        }
    }
    Ok(res)
}

fn read_config<'t, 'i>(r: &mut Reader, v: Val<'t, 'i>) -> Result<Config<'t, 'i>, TypeError> {
    let mut c = Config::default();
    for (key, v) in json::object(v, "spec.memcached")? {
        match key {
            "maxMemoryMB" => {
                c.max_memory_mb = r.field(v, |_, v| json::int32(v, "spec.memcached.maxMemoryMB"))
            }
            "maxConnections" => {
                c.max_connections =
                    r.field(v, |_, v| json::int32(v, "spec.memcached.maxConnections"));
            }
            "threads" => c.threads = r.field(v, |_, v| json::int32(v, "spec.memcached.threads")),
            "maxItemSize" => {
                c.max_item_size = r.field(v, |_, v| json::string(v, "spec.memcached.maxItemSize"))
            }
            "verbosity" => {
                c.verbosity = r.field(v, |_, v| json::int32(v, "spec.memcached.verbosity"))
            }
            "extraArgs" if !v.is_null() => {
                let Some(args) = r.or_default(json::array(v, "spec.memcached.extraArgs").map(Some))
                else {
                    continue;
                };
                // One cause for the array, however many of its elements are not strings.
                let wrong = args
                    .items()
                    .into_iter()
                    .flatten()
                    .find_map(|arg| json::string(arg, "spec.memcached.extraArgs[]").err());
                match wrong {
                    Some(e) => r.errors.push(e),
                    None => c.extra_args = Some(args),
                }
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

fn read_pdb<'i>(r: &mut Reader, v: Val<'_, 'i>) -> Result<PodDisruptionBudget<'i>, TypeError> {
    const AT: &str = "spec.highAvailability.podDisruptionBudget";
    let mut pdb = PodDisruptionBudget::default();
    for (key, v) in json::object(v, AT)? {
        match key {
            "enabled" => {
                pdb.enabled = r.or_default(json::flag(
                    v,
                    "spec.highAvailability.podDisruptionBudget.enabled",
                ))
            }
            "minAvailable" => {
                pdb.min_available = r.field(v, |_, v| {
                    int_or_string(v, "spec.highAvailability.podDisruptionBudget.minAvailable")
                });
            }
            "maxUnavailable" => {
                pdb.max_unavailable = r.field(v, |_, v| {
                    int_or_string(
                        v,
                        "spec.highAvailability.podDisruptionBudget.maxUnavailable",
                    )
                });
            }
            _ => {}
        }
    }
    Ok(pdb)
}

fn read_graceful_shutdown(r: &mut Reader, v: Val<'_, '_>) -> Result<GracefulShutdown, TypeError> {
    let mut gs = GracefulShutdown::default();
    for (key, v) in json::object(v, "spec.highAvailability.gracefulShutdown")? {
        match key {
            "enabled" => {
                gs.enabled = r.or_default(json::flag(
                    v,
                    "spec.highAvailability.gracefulShutdown.enabled",
                ))
            }
            "preStopDelaySeconds" => {
                gs.pre_stop_delay_seconds = r.field(v, |_, v| {
                    json::int32(
                        v,
                        "spec.highAvailability.gracefulShutdown.preStopDelaySeconds",
                    )
                });
            }
            "terminationGracePeriodSeconds" => {
                gs.termination_grace_period_seconds = r.field(v, |_, v| {
                    json::int64(
                        v,
                        "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
                    )
                });
            }
            _ => {}
        }
    }
    Ok(gs)
}

fn read_high_availability<'i>(
    r: &mut Reader,
    v: Val<'_, 'i>,
) -> Result<HighAvailability<'i>, TypeError> {
    let mut ha = HighAvailability::default();
    for (key, v) in json::object(v, "spec.highAvailability")? {
        match key {
            "antiAffinityPreset" => {
                ha.anti_affinity_preset = r.field(v, |_, v| {
                    json::string(v, "spec.highAvailability.antiAffinityPreset")
                });
            }
            "podDisruptionBudget" => ha.pod_disruption_budget = r.field(v, read_pdb),
            "gracefulShutdown" => ha.graceful_shutdown = r.field(v, read_graceful_shutdown),
            _ => {}
        }
    }
    Ok(ha)
}

fn read_exporter_requested(r: &mut Reader, v: Val<'_, '_>) -> Result<Requested, TypeError> {
    let mut req = Requested::default();
    for (key, v) in json::object(v, "spec.monitoring.exporterResources")? {
        let section = match key {
            "requests" => "spec.monitoring.exporterResources.requests",
            "limits" => "spec.monitoring.exporterResources.limits",
            _ => continue,
        };
        if v.is_null() {
            continue;
        }
        let members = r.or_default(json::object(v, section).map(Some));
        for (k, _) in members.into_iter().flatten() {
            req.cpu |= k == "cpu";
            req.memory |= k == "memory";
        }
    }
    Ok(req)
}

fn read_service_monitor<'i>(
    r: &mut Reader,
    v: Val<'_, 'i>,
) -> Result<ServiceMonitor<'i>, TypeError> {
    let mut sm = ServiceMonitor::default();
    for (key, v) in json::object(v, "spec.monitoring.serviceMonitor")? {
        match key {
            "interval" => {
                sm.interval = r.field(v, |_, v| {
                    json::string(v, "spec.monitoring.serviceMonitor.interval")
                });
            }
            "scrapeTimeout" => {
                sm.scrape_timeout = r.field(v, |_, v| {
                    json::string(v, "spec.monitoring.serviceMonitor.scrapeTimeout")
                });
            }
            _ => {}
        }
    }
    Ok(sm)
}

fn read_monitoring<'i>(r: &mut Reader, v: Val<'_, 'i>) -> Result<Monitoring<'i>, TypeError> {
    let mut m = Monitoring::default();
    for (key, v) in json::object(v, "spec.monitoring")? {
        match key {
            "enabled" => m.enabled = r.or_default(json::flag(v, "spec.monitoring.enabled")),
            "exporterImage" => {
                m.exporter_image =
                    r.field(v, |_, v| json::string(v, "spec.monitoring.exporterImage"))
            }
            "exporterResources" if !v.is_null() => {
                let read = read_exporter_requested(r, v);
                m.exporter_requested = r.or_default(read);
            }
            "serviceMonitor" => m.service_monitor = r.field(v, read_service_monitor),
            _ => {}
        }
    }
    Ok(m)
}

fn read_security<'i>(r: &mut Reader, v: Val<'_, 'i>) -> Result<Security<'i>, TypeError> {
    let mut s = Security::default();
    for (key, v) in json::object(v, "spec.security")? {
        match key {
            "sasl" => {
                s.sasl = r.field(v, |r, v| {
                    secret_feature(
                        r,
                        v,
                        ["spec.security.sasl", "spec.security.sasl.enabled"],
                        "credentialsSecretRef",
                        [
                            "spec.security.sasl.credentialsSecretRef",
                            "spec.security.sasl.credentialsSecretRef.name",
                        ],
                    )
                });
            }
            "tls" => {
                s.tls = r.field(v, |r, v| {
                    secret_feature(
                        r,
                        v,
                        ["spec.security.tls", "spec.security.tls.enabled"],
                        "certificateSecretRef",
                        [
                            "spec.security.tls.certificateSecretRef",
                            "spec.security.tls.certificateSecretRef.name",
                        ],
                    )
                });
            }
            _ => {}
        }
    }
    Ok(s)
}

/// Reads `{enabled, <ref>: {name}}`; `paths` and `ref_paths` are the field paths for errors.
fn secret_feature<'i>(
    r: &mut Reader,
    v: Val<'_, 'i>,
    paths: [&'static str; 2],
    ref_key: &str,
    ref_paths: [&'static str; 2],
) -> Result<SecretFeature<'i>, TypeError> {
    let mut f = SecretFeature::default();
    for (key, v) in json::object(v, paths[0])? {
        if key == "enabled" {
            f.enabled = r.or_default(json::flag(v, paths[1]));
        } else if key == ref_key && !v.is_null() {
            let members = r.or_default(json::object(v, ref_paths[0]).map(Some));
            for (key, v) in members.into_iter().flatten() {
                if key == "name" && !v.is_null() {
                    f.secret_name = r.or_default(json::string(v, ref_paths[1]));
                }
            }
        }
    }
    Ok(f)
}

fn read_autoscaling<'t, 'i>(
    r: &mut Reader,
    v: Val<'t, 'i>,
) -> Result<Autoscaling<'t, 'i>, TypeError> {
    let mut a = Autoscaling::default();
    for (key, v) in json::object(v, "spec.autoscaling")? {
        match key {
            "enabled" => a.enabled = r.or_default(json::flag(v, "spec.autoscaling.enabled")),
            "minReplicas" => {
                a.min_replicas = r.field(v, |_, v| json::int32(v, "spec.autoscaling.minReplicas"))
            }
            "maxReplicas" => {
                a.max_replicas = r.field(v, |_, v| json::int32(v, "spec.autoscaling.maxReplicas"))
            }
            "metrics" => a.metrics = r.field(v, |_, v| json::array(v, "spec.autoscaling.metrics")),
            "behavior" => {
                a.behavior = r.field(v, |_, v| json::any_object(v, "spec.autoscaling.behavior"))
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
    fn every_wrongly_typed_field_is_named_and_the_rest_still_read() {
        let mut bytes = br#"{"metadata":{"name":"m"},"spec":{"replicas":"three",
            "memcached":{"maxMemoryMB":"64","threads":4.5,"maxItemSize":1,"extraArgs":[1,2],
                         "maxConnections":10},
            "monitoring":{"enabled":"yes"},"image":"memcached:1.6",
            "highAvailability":{"podDisruptionBudget":{"minAvailable":true,"maxUnavailable":1}}}}"#
            .to_vec();
        let tape = simd_json::to_tape(&mut bytes).unwrap();
        let e = read(Val::root(&tape)).unwrap_err();
        let fields: Vec<_> = e.errors.iter().map(|e| e.field.as_ref()).collect();
        assert_eq!(
            fields,
            [
                "spec.replicas",
                "spec.memcached.maxMemoryMB",
                "spec.memcached.threads",
                "spec.memcached.maxItemSize",
                "spec.memcached.extraArgs[]",
                "spec.monitoring.enabled",
                "spec.highAvailability.podDisruptionBudget.minAvailable",
            ]
        );
        assert!(e.to_string().starts_with(
            "[spec.replicas: expected an integer, found a string, spec.memcached.maxMemoryMB: "
        ));
        // What could be read was read; what could not reads as absent.
        assert_eq!(e.partial.name, "m");
        let spec = e.partial.spec.get().unwrap();
        assert_eq!(spec.image, Field::Set("memcached:1.6"));
        assert_eq!(spec.replicas, Field::Absent);
        let config = spec.memcached.get().unwrap();
        assert_eq!(config.max_connections, Field::Set(10));
        assert!(config.extra_args.is_none());
        let ha = spec.high_availability.get().unwrap();
        let pdb = ha.pod_disruption_budget.get().unwrap();
        assert_eq!(pdb.max_unavailable, Field::Set(IntOrString::Int(1)));
        assert!(e.covers("spec.replicas"));
        assert!(e.covers("spec.memcached.extraArgs[0]"));
        assert!(!e.covers("spec.replicasX"));
        assert!(!e.covers("spec.memcached"));
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
