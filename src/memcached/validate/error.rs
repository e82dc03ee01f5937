//! The error model: one [`FieldError`] per violation, shaped like apimachinery's `field.Error`,
//! and the [`Rule`] it counts under in the violations metric.

use std::fmt;

use super::PDB;

/// One field error, shaped like apimachinery's `field.Error`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldError {
    /// The field path, e.g. `spec.autoscaling.minReplicas`.
    pub field: String,
    pub kind: ErrorKind,
    /// The detail, e.g. `minReplicas (10) must not exceed maxReplicas (5)`.
    pub detail: String,
}

/// `field.ErrorType`, with the bad value rendered as Go renders it (`%q` for strings, bare ints).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `Invalid value: <value>`; `value` is already rendered (`"64Mi"`, `3`, `""`).
    Invalid(String),
    /// `Required value`.
    Required,
    /// `Unsupported value: <value>` (the detail lists the supported values), as the apiserver
    /// reports an unknown HPA metric type or policy.
    NotSupported(String),
    /// `Forbidden`, as the apiserver reports a second HPA metric source.
    Forbidden,
    /// `Forbidden` too, for the one rule that reads the cluster: another autoscaler already
    /// scales the Memcached's Deployment ([`super::one_autoscaler`]). Its own kind so that the
    /// metric and ratcheting can tell it apart.
    Autoscaled,
}

impl fmt::Display for FieldError {
    /// apimachinery's `Error()`: `<field>: <body>`, the detail appended only when non-empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.field)?;
        self.write_body(f)
    }
}

impl FieldError {
    /// [`FieldError`]'s text in a string sized for it: `to_string` grows one from empty, five or
    /// six reallocations per message, which were a sixth of a denial's instructions.
    pub fn message(&self) -> String {
        use fmt::Write as _;
        let value = match &self.kind {
            ErrorKind::Invalid(v) | ErrorKind::NotSupported(v) => v.len(),
            _ => 0,
        };
        let mut text = String::with_capacity(self.field.len() + value + self.detail.len() + 24);
        let _ = write!(text, "{self}");
        text
    }

    /// apimachinery's `ErrorBody()`.
    fn write_body(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Invalid(value) => write!(f, "Invalid value: {value}")?,
            ErrorKind::Required => f.write_str("Required value")?,
            ErrorKind::NotSupported(value) => write!(f, "Unsupported value: {value}")?,
            ErrorKind::Forbidden | ErrorKind::Autoscaled => f.write_str("Forbidden")?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }

    pub(super) fn invalid(
        field: impl Into<String>,
        value: String,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Invalid(value),
            detail: detail.into(),
        }
    }

    pub(super) fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Required,
            detail: detail.into(),
        }
    }
}

impl FieldError {
    /// Whether the message shows the value at [`FieldError::field`], so that any other value
    /// there gives another message. Not so for `Required` and `Forbidden` (no value), for a
    /// container shown by its shape ([`super::render`]'s `{...}`), nor for R2, which is reported
    /// on the whole PodDisruptionBudget with the reference's `""`.
    pub(super) fn names_value(&self) -> bool {
        match &self.kind {
            ErrorKind::Invalid(v) | ErrorKind::NotSupported(v) => v != "{...}" && v != "[...]",
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::Autoscaled => false,
        }
    }

    /// The check this error comes from, for the violations metric.
    pub fn rule(&self) -> Rule {
        match self.kind {
            ErrorKind::Autoscaled => Rule::AutoscalerConflict,
            _ => Rule::of(&self.field),
        }
    }
}

/// The checks, as the `rule` label of the violations metric names them: a short, fixed set
/// (never a field path, whose list indexes would make the label set unbounded). Derived from
/// the field an error is on, which each check owns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// R1: `spec.resources.limits.memory` holds `maxMemoryMB` + 32Mi.
    MemoryLimit,
    /// R2–R4: `spec.highAvailability.podDisruptionBudget`.
    PodDisruptionBudget,
    /// R5: `spec.highAvailability.gracefulShutdown`.
    GracefulShutdown,
    /// R6–R7: `spec.security` secret references.
    SecretRef,
    /// R8: `spec.replicas` with autoscaling on.
    Replicas,
    /// R10: `spec.resources.requests.cpu` for CPU utilization.
    CpuRequest,
    /// R9 and the HorizontalPodAutoscaler rules: `spec.autoscaling`.
    Autoscaling,
    /// Will memcached start: `spec.memcached`.
    MemcachedFlags,
    /// `spec.image`, `spec.monitoring.exporterImage`.
    Image,
    /// `spec.monitoring.serviceMonitor` durations.
    ServiceMonitor,
    /// Another autoscaler already scales the Deployment (`--autoscaler-conflicts`).
    AutoscalerConflict,
    /// A field no check above owns (a new check that was not given a rule yet).
    Other,
}

impl Rule {
    pub const ALL: [Rule; 12] = [
        Rule::MemoryLimit,
        Rule::PodDisruptionBudget,
        Rule::GracefulShutdown,
        Rule::SecretRef,
        Rule::Replicas,
        Rule::CpuRequest,
        Rule::Autoscaling,
        Rule::MemcachedFlags,
        Rule::Image,
        Rule::ServiceMonitor,
        Rule::AutoscalerConflict,
        Rule::Other,
    ];

    pub(super) fn of(field: &str) -> Rule {
        let under = |prefix: &str| {
            field
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        match field {
            "spec.resources.limits.memory" => Rule::MemoryLimit,
            "spec.replicas" => Rule::Replicas,
            "spec.resources.requests.cpu" => Rule::CpuRequest,
            "spec.image" | "spec.monitoring.exporterImage" => Rule::Image,
            _ if under(PDB) => Rule::PodDisruptionBudget,
            _ if under("spec.highAvailability.gracefulShutdown") => Rule::GracefulShutdown,
            _ if under("spec.security") => Rule::SecretRef,
            _ if under("spec.autoscaling") => Rule::Autoscaling,
            _ if under("spec.memcached") => Rule::MemcachedFlags,
            _ if under("spec.monitoring.serviceMonitor") => Rule::ServiceMonitor,
            _ => Rule::Other,
        }
    }

    /// The label value.
    pub const fn label(self) -> &'static str {
        match self {
            Rule::MemoryLimit => "memory_limit",
            Rule::PodDisruptionBudget => "pod_disruption_budget",
            Rule::GracefulShutdown => "graceful_shutdown",
            Rule::SecretRef => "secret_ref",
            Rule::Replicas => "replicas",
            Rule::CpuRequest => "cpu_request",
            Rule::Autoscaling => "autoscaling",
            Rule::MemcachedFlags => "memcached_flags",
            Rule::Image => "image",
            Rule::ServiceMonitor => "service_monitor",
            Rule::AutoscalerConflict => "autoscaler_conflict",
            Rule::Other => "other",
        }
    }

    /// The position in [`Rule::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests;
