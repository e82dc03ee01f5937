//! The reference operator's rules, R1 to R10, in its order: the memory limit, the
//! PodDisruptionBudget, graceful shutdown, secret references and autoscaling.

use super::{FieldError, Settings, effective_replicas, go_quote, int_or_string, read_quantity};
use crate::json::{Field, Kind, Val};
use crate::memcached::quantity::Quantity;
use crate::memcached::{Autoscaling, IntOrString, Spec};

// === R1: the memory limit ===

pub(crate) const OVERHEAD_MIB: i64 = 32;

/// R1: `limits.memory` must hold `maxMemoryMB` plus 32Mi, compared exactly as `Quantity.Cmp`.
/// The reference skips it when `spec.memcached` is nil; after defaulting it never is, so it runs
/// whenever a memory limit is set, against the effective `maxMemoryMB`.
pub(super) fn memory_limit(
    spec: &Spec<'_, '_>,
    settings: &Settings<'_, '_>,
    errors: &mut Vec<FieldError>,
) {
    let Some(limit) = spec.resources.get().and_then(|r| r.limits_memory) else {
        return;
    };
    const FIELD: &str = "spec.resources.limits.memory";
    let limit = match read_quantity(limit) {
        Ok(q) => q,
        Err(e) => return errors.push(e.at(FIELD)),
    };
    let mb = settings.max_memory_mb;
    let required = Quantity::mebibytes(i64::from(mb) + OVERHEAD_MIB);
    if limit.value < required {
        errors.push(FieldError::invalid(
            FIELD,
            go_quote(&limit.go_string()),
            format!(
                "memory limit must be at least {required}: maxMemoryMB={mb} ({mb}Mi) + 32Mi overhead"
            ),
        ));
    }
}

// === R2–R4: the PodDisruptionBudget ===

pub(crate) const PDB: &str = "spec.highAvailability.podDisruptionBudget";

/// R2–R4, only for an enabled PDB. R4 compares an integer `minAvailable` with the replicas the
/// Deployment will get: the defaulter's 1 when `spec.replicas` is unset and autoscaling is off.
pub(super) fn pod_disruption_budget(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    let Some(pdb) = spec
        .high_availability
        .get()
        .and_then(|ha| ha.pod_disruption_budget.get())
        .filter(|pdb| pdb.enabled)
    else {
        return;
    };
    match (pdb.min_available.get(), pdb.max_unavailable.get()) {
        // The Go reference reports the value `""`; what is set tells the user what to remove.
        (Some(min), Some(max)) => errors.push(FieldError::invalid(
            PDB,
            go_quote(&format!(
                "minAvailable={}, maxUnavailable={}",
                int_or_string(min),
                int_or_string(max)
            )),
            "minAvailable and maxUnavailable are mutually exclusive, specify only one",
        )),
        (None, None) => errors.push(FieldError::required(
            PDB,
            "one of minAvailable or maxUnavailable must be set when PDB is enabled",
        )),
        (Some(IntOrString::Int(min)), None) => {
            if let Some(replicas) = effective_replicas(spec)
                && *min >= replicas
            {
                errors.push(FieldError::invalid(
                    "spec.highAvailability.podDisruptionBudget.minAvailable",
                    min.to_string(),
                    format!("minAvailable ({min}) must be less than replicas ({replicas})"),
                ));
            }
        }
        _ => {}
    }
}

// === R5: graceful shutdown ===

/// The CRD defaults of `preStopDelaySeconds` and `terminationGracePeriodSeconds`. The apiserver
/// applies them (to absent and null members) before any webhook sees the object, so an absent
/// value means these; an explicit 0 stays 0 (and fails R5, as in the Go unit tests).
pub(crate) const PRE_STOP_DELAY_SECONDS: i32 = 10;
pub(crate) const TERMINATION_GRACE_PERIOD_SECONDS: i64 = 30;

/// R5: the grace period must outlast the preStop sleep, or the kubelet kills memcached mid-drain.
pub(super) fn graceful_shutdown(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    let Some(gs) = spec
        .high_availability
        .get()
        .and_then(|ha| ha.graceful_shutdown.get())
        .filter(|gs| gs.enabled)
    else {
        return;
    };
    let pre_stop = gs
        .pre_stop_delay_seconds
        .get()
        .copied()
        .unwrap_or(PRE_STOP_DELAY_SECONDS);
    let grace = gs
        .termination_grace_period_seconds
        .get()
        .copied()
        .unwrap_or(TERMINATION_GRACE_PERIOD_SECONDS);
    if grace <= i64::from(pre_stop) {
        errors.push(FieldError::invalid(
            "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
            grace.to_string(),
            format!(
                "terminationGracePeriodSeconds ({grace}) must exceed preStopDelaySeconds ({pre_stop})"
            ),
        ));
    }
}

// === R6–R7: secret references ===

pub(super) fn secret_refs(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    let Some(security) = spec.security.get() else {
        return;
    };
    if security
        .sasl
        .get()
        .is_some_and(|s| s.enabled && s.secret_name.is_empty())
    {
        errors.push(FieldError::required(
            "spec.security.sasl.credentialsSecretRef.name",
            "credentialsSecretRef.name is required when SASL is enabled",
        ));
    }
    if security
        .tls
        .get()
        .is_some_and(|t| t.enabled && t.secret_name.is_empty())
    {
        errors.push(FieldError::required(
            "spec.security.tls.certificateSecretRef.name",
            "certificateSecretRef.name is required when TLS is enabled",
        ));
    }
}

// === R8–R10: autoscaling ===

/// R8–R10 for an enabled autoscaling section.
pub(super) fn autoscaling_reference(
    spec: &Spec<'_, '_>,
    autoscaling: &Autoscaling<'_, '_>,
    errors: &mut Vec<FieldError>,
) {
    // R8 never assumes the defaulter removed `spec.replicas`: it is there to catch objects that
    // bypassed it.
    if let Field::Set(replicas) = spec.replicas {
        errors.push(FieldError::invalid(
            "spec.replicas",
            replicas.to_string(),
            "spec.replicas and spec.autoscaling.enabled are mutually exclusive",
        ));
    }
    // R9: Go reads an omitted `maxReplicas` as 0.
    let max = autoscaling.max_replicas.get().copied().unwrap_or(0);
    if let Some(&min) = autoscaling.min_replicas.get()
        && min > max
    {
        errors.push(FieldError::invalid(
            "spec.autoscaling.minReplicas",
            min.to_string(),
            format!("minReplicas ({min}) must not exceed maxReplicas ({max})"),
        ));
    }
    // R10: only the key's presence counts, as in the reference.
    let has_cpu_request = spec.resources.get().is_some_and(|r| r.requests_cpu);
    if !has_cpu_request && uses_utilization(autoscaling, "cpu") {
        errors.push(FieldError::required(
            "spec.resources.requests.cpu",
            "resources.requests.cpu is required when using CPU utilization metrics",
        ));
    }
}

/// Whether the HPA will scale on `resource`'s utilization (a `Resource` metric with a
/// `Utilization` target). With no metrics (absent, null or `[]`), the defaulter injects the
/// 80 % CPU utilization metric, so that counts for `cpu`.
pub(crate) fn uses_utilization(autoscaling: &Autoscaling<'_, '_>, resource: &str) -> bool {
    let Some(metrics) = autoscaling.metrics.get().filter(|m| !m.is_empty()) else {
        return resource == "cpu";
    };
    let is = |v: Option<Val<'_, '_>>, s: &str| v.and_then(|v| v.as_str()) == Some(s);
    metrics.items().into_iter().flatten().any(|m| {
        let target = m.get("resource").filter(|r| r.kind() == Kind::Object);
        is(m.get("type"), "Resource")
            && target.is_some_and(|r| {
                is(r.get("name"), resource)
                    && is(r.get("target").and_then(|t| t.get("type")), "Utilization")
            })
    })
}

#[cfg(test)]
mod tests;
