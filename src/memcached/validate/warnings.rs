//! Specs that run but are probably a mistake: answered with admission warnings (kubectl prints
//! them), never denials. Each names its field first. Order: threads, highAvailability, memory
//! limit, maxConnections, PDB maxUnavailable, requests a utilization HPA needs (memcached's memory, the exporter's).

use super::{OVERHEAD_MIB, Settings, effective_replicas, read_quantity};
use crate::json::Field;
use crate::memcached::IntOrString;
use crate::memcached::Spec;
use crate::memcached::quantity::Quantity;

/// memcached prints "Setting a high number of workerthreads is not recommended" above this.
const MAX_RECOMMENDED_THREADS: i32 = 64;
/// The reference's troubleshooting advice: leave 64Mi above `maxMemoryMB`, not just 32Mi.
const ADVISED_HEADROOM_MIB: i64 = 64;
/// containerd 2.x (systemd's default 1024:524288) caps open files here; memcached raises its
/// limit to `-c` and exits when it cannot.
const COMMON_NOFILE_LIMIT: i32 = 524_288;

pub(super) fn collect(spec: &Spec<'_, '_>, s: &Settings<'_, '_>, warnings: &mut Vec<String>) {
    if s.threads > MAX_RECOMMENDED_THREADS {
        warnings.push(format!(
            "spec.memcached.threads: {} worker threads; memcached warns above {MAX_RECOMMENDED_THREADS} \
             and recommends at most one per CPU core",
            s.threads
        ));
    }
    high_availability(spec, warnings);
    memory_headroom(spec, s, warnings);
    if s.max_connections > COMMON_NOFILE_LIMIT {
        warnings.push(format!(
            "spec.memcached.maxConnections: {} is above {COMMON_NOFILE_LIMIT}, the open-files limit of \
             many container runtimes (e.g. containerd 2); memcached exits there when it cannot raise its limit",
            s.max_connections
        ));
    }
    pdb_allows_total_eviction(spec, warnings);
    utilization_requests(spec, warnings);
}

/// The HPA sums a `Resource` metric's requests over every container of the pod and gives up
/// ("missing request") if one has none: memcached's memory request (CPU is R10's, a denial in the
/// reference) and the exporter sidecar's requests. Warnings, not denials: a LimitRange in the
/// namespace may supply the request, which the webhook cannot see, and stored objects must stay
/// updatable.
fn utilization_requests(spec: &Spec<'_, '_>, warnings: &mut Vec<String>) {
    let Some(autoscaling) = spec.autoscaling.get().filter(|a| a.enabled) else {
        return;
    };
    let memcached_memory = spec.resources.get().is_some_and(|r| r.requested_memory);
    if !memcached_memory && super::uses_utilization(autoscaling, "memory") {
        warnings.push(
            "spec.resources.requests.memory: not set, but the HPA scales on memory utilization; \
             unless a LimitRange gives the container a default request, the HPA cannot compute it \
             and does not scale (set requests.memory, or limits.memory, which the apiserver copies)"
                .to_owned(),
        );
    }
    let Some(monitoring) = spec.monitoring.get().filter(|m| m.enabled) else {
        return;
    };
    let requested = monitoring.exporter_requested;
    for (resource, has) in [("cpu", requested.cpu), ("memory", requested.memory)] {
        if !has && super::uses_utilization(autoscaling, resource) {
            warnings.push(format!(
                "spec.monitoring.exporterResources.requests.{resource}: not set, but the HPA scales on \
                 {resource} utilization, which needs a request on every container of the pod, the \
                 exporter sidecar too; unless a LimitRange gives it a default request, the HPA \
                 cannot compute it and does not scale"
            ));
        }
    }
}

/// The fewest replicas the workload may run: `spec.replicas` after defaulting, or with
/// autoscaling the HPA's `minReplicas` (default 1).
fn fewest_replicas(spec: &Spec<'_, '_>) -> Option<i32> {
    match spec.autoscaling.get().filter(|a| a.enabled) {
        Some(a) => Some(a.min_replicas.get().copied().unwrap_or(1)),
        None => effective_replicas(spec),
    }
}

fn high_availability(spec: &Spec<'_, '_>, warnings: &mut Vec<String>) {
    if spec.high_availability.get().is_none() {
        return;
    }
    let Some(n) = fewest_replicas(spec).filter(|&n| n < 2) else {
        return;
    };
    let source = if spec.autoscaling_enabled() {
        "spec.autoscaling.minReplicas"
    } else {
        "spec.replicas"
    };
    warnings.push(format!(
        "spec.highAvailability: set, but {source} is {n}; fewer than 2 replicas cannot survive losing a pod"
    ));
}

/// A limit that passes R1 (maxMemoryMB + 32Mi) but not the advised + 64Mi.
fn memory_headroom(spec: &Spec<'_, '_>, s: &Settings<'_, '_>, warnings: &mut Vec<String>) {
    let Some(Ok(limit)) = spec
        .resources
        .get()
        .and_then(|r| r.limits_memory)
        .map(read_quantity)
    else {
        return;
    };
    let mb = i64::from(s.max_memory_mb);
    let minimum = Quantity::mebibytes(mb + OVERHEAD_MIB);
    let advised = Quantity::mebibytes(mb + ADVISED_HEADROOM_MIB);
    if limit.value >= minimum && limit.value < advised {
        warnings.push(format!(
            "spec.resources.limits.memory: {} leaves less than {ADVISED_HEADROOM_MIB}Mi above maxMemoryMB \
             ({mb}); connection buffers and threads may get the pod OOM-killed, use at least {advised}",
            limit.go_string()
        ));
    }
}

/// An enabled PDB whose integer `maxUnavailable` is at least the replica count protects nothing.
fn pdb_allows_total_eviction(spec: &Spec<'_, '_>, warnings: &mut Vec<String>) {
    let Some(pdb) = spec
        .high_availability
        .get()
        .and_then(|ha| ha.pod_disruption_budget.get())
        .filter(|p| p.enabled && p.min_available.get().is_none())
    else {
        return;
    };
    let (Field::Set(IntOrString::Int(max)), Some(replicas)) =
        (pdb.max_unavailable, fewest_replicas(spec))
    else {
        return;
    };
    if max >= replicas && replicas > 0 {
        warnings.push(format!(
            "spec.highAvailability.podDisruptionBudget.maxUnavailable: {max} lets all {replicas} \
             replicas be evicted at once, so the budget protects nothing"
        ));
    }
}

#[cfg(test)]
mod tests;
