//! The validation rules: the reference operator's R1 to R10, plus what makes "admitted" mean
//! "it runs" (memcached starts, the apiserver accepts the HPA, Prometheus scrapes, images pull).
//! Every violation is reported, in a stable order; warnings flag specs that run but look wrong.
//!
//! The object is judged as it will be after defaulting, so the verdict does not depend on whether
//! the mutating webhook ran first: an absent value counts as the value the defaulter (or, for
//! `gracefulShutdown`, the CRD) puts there. The one exception is R8, which looks at
//! `spec.replicas` as sent, because it exists to catch objects that bypassed the defaulter.
//!
//! Order: R1 memory limit, R2–R4 PDB, R5 graceful shutdown, R6–R7 secrets (SASL, TLS), R8–R10
//! autoscaling (replicas, minReplicas, CPU request) ([`reference`](mod@reference)); then
//! memcached start ([`start`]), images ([`images`]), Prometheus durations ([`service_monitor`]),
//! the HPA ([`hpa`]), other autoscalers of the Deployment ([`one_autoscaler`], only where the
//! cluster is known); warnings last ([`warnings`]). A violation is a [`FieldError`] ([`error`]),
//! its value written as Go writes it ([`go_text`]); an update counts only what it introduces
//! ([`ratchet`](mod@ratchet)).
//!
//! A valid spec allocates nothing here (field paths are rendered only for errors).

mod error;
mod go_text;
pub(crate) mod hpa;
mod images;
mod one_autoscaler;
mod ratchet;
mod reference;
mod service_monitor;
pub(crate) mod start;
mod warnings;

pub use error::{ErrorKind, FieldError, Rule};
pub(crate) use go_text::{BadValue, go_quote, int_or_string, read_quantity, render};
pub use ratchet::ratchet;
pub(crate) use reference::{
    OVERHEAD_MIB, PDB, PRE_STOP_DELAY_SECONDS, TERMINATION_GRACE_PERIOD_SECONDS, uses_utilization,
};

use crate::json::{Field, Val};
use crate::memcached::{Autoscaling, Memcached, Spec, defaults};

/// What validation found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
    /// The autoscaler-conflict rule should have run but could not (a warning says why).
    pub unchecked: bool,
}

/// What the rules that read the cluster look at: the review's namespace and the index.
#[derive(Clone, Copy, Debug)]
pub struct Cluster<'a> {
    /// `request.namespace`.
    pub namespace: &'a str,
    pub autoscalers: &'a crate::autoscalers::Autoscalers,
}

/// Judges `mc` as it will be after defaulting, by the rules that need no cluster (the `check`
/// subcommand, the mutating webhook's tests).
pub fn validate(mc: &Memcached<'_, '_>) -> Outcome {
    validate_in(mc, None)
}

/// Judges `mc` as it will be after defaulting; with a `cluster`, also against the other
/// autoscalers of its Deployment.
pub fn validate_in(mc: &Memcached<'_, '_>, cluster: Option<Cluster<'_>>) -> Outcome {
    let mut out = Outcome::default();
    // An absent or null spec becomes the defaulter's `SPEC_JSON`, which every other rule admits.
    let Some(spec) = mc.spec.get() else {
        if let Some(cluster) = cluster {
            one_autoscaler::check(mc.name, false, cluster, &mut out);
        }
        return out;
    };
    let settings = Settings::of(spec);
    let errors = &mut out.errors;

    reference::memory_limit(spec, &settings, errors);
    reference::pod_disruption_budget(spec, errors);
    reference::graceful_shutdown(spec, errors);
    reference::secret_refs(spec, errors);
    if let Some(autoscaling) = enabled_autoscaling(spec) {
        reference::autoscaling_reference(spec, autoscaling, errors);
    }

    start::check(&settings, errors);
    images::check(spec, errors);
    service_monitor::check(spec, errors);
    if let Some(autoscaling) = enabled_autoscaling(spec) {
        hpa::check(autoscaling, errors);
    }
    if let Some(cluster) = cluster {
        let enabled = enabled_autoscaling(spec).is_some();
        one_autoscaler::check(mc.name, enabled, cluster, &mut out);
    }

    warnings::collect(spec, &settings, &mut out.warnings);
    out
}

/// `spec.memcached` as the operator renders it: Go's defaulter replaces absent, null and zero
/// values (`0`, `""`) with the defaults, and creates the section when it is missing.
pub(crate) struct Settings<'t, 'i> {
    pub max_memory_mb: i32,
    pub max_connections: i32,
    pub threads: i32,
    pub max_item_size: &'i str,
    /// Never defaulted: absent is the Go zero value, 0.
    pub verbosity: i32,
    pub extra_args: Option<Val<'t, 'i>>,
}

impl<'t, 'i> Settings<'t, 'i> {
    pub(crate) fn of(spec: &Spec<'t, 'i>) -> Self {
        let int = |field: Field<i32>, default: i64| match field {
            Field::Set(v) if v != 0 => v,
            _ => default as i32, // the defaults are small constants
        };
        match spec.memcached.get() {
            Some(c) => Settings {
                max_memory_mb: int(c.max_memory_mb, defaults::MAX_MEMORY_MB),
                max_connections: int(c.max_connections, defaults::MAX_CONNECTIONS),
                threads: int(c.threads, defaults::THREADS),
                max_item_size: non_empty_or(c.max_item_size, defaults::MAX_ITEM_SIZE),
                verbosity: c.verbosity.get().copied().unwrap_or(0),
                extra_args: c.extra_args,
            },
            None => Settings {
                max_memory_mb: defaults::MAX_MEMORY_MB as i32,
                max_connections: defaults::MAX_CONNECTIONS as i32,
                threads: defaults::THREADS as i32,
                max_item_size: defaults::MAX_ITEM_SIZE,
                verbosity: 0,
                extra_args: None,
            },
        }
    }
}

pub(crate) fn enabled_autoscaling<'a, 't, 'i>(
    spec: &'a Spec<'t, 'i>,
) -> Option<&'a Autoscaling<'t, 'i>> {
    spec.autoscaling.get().filter(|a| a.enabled)
}

/// `spec.replicas` after defaulting, for the rules that read it (R4, warnings): the defaulter sets
/// 1 when it is unset and autoscaling is off; with autoscaling on, the value as sent (R8 rejects
/// it anyway) or none.
pub(crate) fn effective_replicas(spec: &Spec<'_, '_>) -> Option<i32> {
    match spec.replicas {
        Field::Set(n) => Some(n),
        _ if spec.autoscaling_enabled() => None,
        _ => Some(defaults::REPLICAS as i32),
    }
}

/// A Go `string` field after defaulting: absent, null and `""` read as the default.
pub(crate) fn non_empty_or<'a>(field: Field<&'a str>, default: &'a str) -> &'a str {
    match field {
        Field::Set(s) if !s.is_empty() => s,
        _ => default,
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
