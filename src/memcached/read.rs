//! The tape reader: builds the [view](super::view) from `request.object` in one pass,
//! type-checking every field a rule uses and collecting every wrongly typed one, so a user sees
//! all the causes at once.

use std::fmt;

use super::view::{
    Autoscaling, GracefulShutdown, HighAvailability, IntOrString, Memcached, MemcachedConfig,
    Monitoring, PodDisruptionBudget, Requested, Resources, SecretFeature, Security, ServiceMonitor,
    Spec,
};
use crate::json::{self, Field, TypeError, Val};

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
    let members = r.or_default(json::object(object, "object"));
    for (key, v) in members {
        match key {
            "metadata" => {
                let members = r.or_default(json::object(v, "metadata"));
                for (key, v) in members {
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
                let limits = r.or_default(json::object(v, "spec.resources.limits"));
                res.limits_memory = limits
                    .filter(|(k, _)| *k == "memory")
                    .last()
                    .map(|(_, v)| v);
                res.requested_memory |= res.limits_memory.is_some();
            }
            "requests" if !v.is_null() => {
                let requests = r.or_default(json::object(v, "spec.resources.requests"));
                for (k, _) in requests {
                    res.requests_cpu |= k == "cpu";
                    res.requested_memory |= k == "memory";
                }
            }
            _ => {}
        }
    }
    Ok(res)
}

fn read_config<'t, 'i>(
    r: &mut Reader,
    v: Val<'t, 'i>,
) -> Result<MemcachedConfig<'t, 'i>, TypeError> {
    let mut c = MemcachedConfig::default();
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
        let members = r.or_default(json::object(v, section));
        for (k, _) in members {
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
            let members = r.or_default(json::object(v, ref_paths[0]));
            for (key, v) in members {
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
mod tests;
