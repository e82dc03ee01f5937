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
//! autoscaling (replicas, minReplicas, CPU request); then memcached start ([`start`]), images,
//! Prometheus durations, the HPA ([`hpa`]), other autoscalers of the Deployment ([`autoscalers`],
//! only where the cluster is known); warnings last ([`warnings`]).
//!
//! A valid spec allocates nothing here (field paths are rendered only for errors).

mod autoscalers;
pub(crate) mod hpa;
pub(crate) mod start;
mod warnings;

use std::fmt;

use crate::admission::response::Cause;
use crate::json::{self, Field, Kind, Val};
use crate::memcached::quantity::{self, Quantity};
use crate::memcached::{Autoscaling, IntOrString, Memcached, Spec, defaults, duration, image};

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
    /// scales the Memcached's Deployment ([`autoscalers`]). Its own kind so that the metric and
    /// ratcheting can tell it apart.
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
        self.written(true)
    }

    /// The text, with or without the leading `<field>: `.
    fn written(&self, with_field: bool) -> String {
        use fmt::Write as _;
        let value = match &self.kind {
            ErrorKind::Invalid(v) | ErrorKind::NotSupported(v) => v.len(),
            _ => 0,
        };
        let mut text = String::with_capacity(self.field.len() + value + self.detail.len() + 24);
        let _ = if with_field {
            write!(text, "{self}")
        } else {
            write!(text, "{}", Body(self))
        };
        text
    }

    /// The `status.details.causes[]` entry: reason, the error body without the path, the path.
    pub fn cause(&self) -> Cause {
        let reason = match self.kind {
            ErrorKind::Invalid(_) => "FieldValueInvalid",
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::NotSupported(_) => "FieldValueNotSupported",
            ErrorKind::Forbidden | ErrorKind::Autoscaled => "FieldValueForbidden",
        };
        Cause {
            reason,
            message: self.written(false),
            field: self.field.clone(),
        }
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

    fn invalid(field: impl Into<String>, value: String, detail: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            kind: ErrorKind::Invalid(value),
            detail: detail.into(),
        }
    }

    fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
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
    /// container shown by its shape ([`render`]'s `{...}`), nor for R2, which is reported on
    /// the whole PodDisruptionBudget with the reference's `""`.
    fn names_value(&self) -> bool {
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

    fn of(field: &str) -> Rule {
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

/// Ratcheting (as KEP-4008 does for CRD schemas): splits the updated object's `errors` into
/// those the update introduces (first) and those the stored object already had (second).
///
/// An error is already stored when `old` has the same one: same field, same message. Both
/// objects are judged as after defaulting, so an old object stored before the defaulting
/// webhook existed yields the same messages as its defaulted update. Every message that can
/// name the bad value does, so a bad value changed into another bad value is a new error; for
/// the few that cannot ([`FieldError::names_value`]), the JSON at the field must also be
/// unchanged between `old_object` and `object`. An autoscaler conflict is already stored when
/// the stored object had one with the same other autoscaler, whatever else changed: an
/// autoscaler created after the Memcached must never freeze it.
pub fn ratchet(
    errors: Vec<FieldError>,
    old: &[FieldError],
    object: Val<'_, '_>,
    old_object: Val<'_, '_>,
) -> (Vec<FieldError>, Vec<FieldError>) {
    let stored: std::collections::HashSet<&FieldError> = old.iter().collect();
    errors.into_iter().partition(|e| {
        if e.kind == ErrorKind::Autoscaled {
            let kept = old
                .iter()
                .any(|o| o.kind == ErrorKind::Autoscaled && o.detail == e.detail);
            return !kept;
        }
        let kept = stored.contains(e)
            && (e.names_value()
                || match (
                    json::at_path(object, &e.field),
                    json::at_path(old_object, &e.field),
                ) {
                    (None, None) => true,
                    (Some(a), Some(b)) => json::same(a, b),
                    _ => false,
                });
        !kept
    })
}

struct Body<'a>(&'a FieldError);

impl fmt::Display for Body<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.write_body(f)
    }
}

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
            autoscalers::check(mc.name, false, cluster, &mut out);
        }
        return out;
    };
    let settings = Settings::of(spec);
    let errors = &mut out.errors;

    memory_limit(spec, &settings, errors);
    pod_disruption_budget(spec, errors);
    graceful_shutdown(spec, errors);
    secret_refs(spec, errors);
    if let Some(autoscaling) = enabled_autoscaling(spec) {
        autoscaling_reference(spec, autoscaling, errors);
    }

    start::check(&settings, errors);
    images(spec, errors);
    prometheus(spec, errors);
    if let Some(autoscaling) = enabled_autoscaling(spec) {
        hpa::check(autoscaling, errors);
    }
    if let Some(cluster) = cluster {
        let enabled = enabled_autoscaling(spec).is_some();
        autoscalers::check(mc.name, enabled, cluster, &mut out);
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
    fn of(spec: &Spec<'t, 'i>) -> Self {
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

fn enabled_autoscaling<'a, 't, 'i>(spec: &'a Spec<'t, 'i>) -> Option<&'a Autoscaling<'t, 'i>> {
    spec.autoscaling.get().filter(|a| a.enabled)
}

/// `spec.replicas` after defaulting, for the rules that read it (R4, warnings): the defaulter sets
/// 1 when it is unset and autoscaling is off; with autoscaling on, the value as sent (R8 rejects
/// it anyway) or none.
fn effective_replicas(spec: &Spec<'_, '_>) -> Option<i32> {
    match spec.replicas {
        Field::Set(n) => Some(n),
        _ if spec.autoscaling_enabled() => None,
        _ => Some(defaults::REPLICAS as i32),
    }
}

// === R1: the memory limit ===

pub(crate) const OVERHEAD_MIB: i64 = 32;

/// R1: `limits.memory` must hold `maxMemoryMB` plus 32Mi, compared exactly as `Quantity.Cmp`.
/// The reference skips it when `spec.memcached` is nil; after defaulting it never is, so it runs
/// whenever a memory limit is set, against the effective `maxMemoryMB`.
fn memory_limit(spec: &Spec<'_, '_>, settings: &Settings<'_, '_>, errors: &mut Vec<FieldError>) {
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

/// A quantity read from JSON, with the text it was written as (for Go's `String()`).
#[derive(Clone, Copy)]
pub(crate) struct ReadQuantity<'i> {
    pub value: Quantity,
    text: Option<&'i str>,
}

impl ReadQuantity<'_> {
    /// `Quantity.String()`: the input text when Go's parser kept it, else the canonical form.
    pub fn go_string(&self) -> String {
        match self.text {
            Some(text) => self.value.go_string(text).into_owned(),
            None => self.value.to_string(),
        }
    }
}

/// A value that is not the type a rule reads: the rendered value and what was expected.
pub(crate) struct BadValue {
    value: String,
    detail: String,
}

impl BadValue {
    fn at(self, field: impl Into<String>) -> FieldError {
        FieldError::invalid(field, self.value, self.detail)
    }
}

/// Reads a Quantity as Go's `UnmarshalJSON` does: a string, a JSON number, or null (zero).
pub(crate) fn read_quantity<'i>(v: Val<'_, 'i>) -> Result<ReadQuantity<'i>, BadValue> {
    let bad = |detail: String| BadValue {
        value: render(v),
        detail,
    };
    let parsed = match v.kind() {
        Kind::Null => Ok(Quantity::from_json_i64(0)),
        Kind::String => {
            let text = v.as_str().unwrap_or_default();
            return quantity::parse(text)
                .map(|value| ReadQuantity {
                    value,
                    text: Some(text),
                })
                .map_err(|e| bad(e.to_string()));
        }
        Kind::Integer => match v.as_integer().map(i64::try_from) {
            Some(Ok(n)) => Ok(Quantity::from_json_i64(n)),
            _ => u64::try_from(v.as_integer().unwrap_or(0))
                .map_err(|_| quantity::QuantityError::TooLarge)
                .and_then(Quantity::from_json_u64),
        },
        Kind::Float => Quantity::from_json_f64(v.as_f64().unwrap_or(f64::NAN)),
        _ => {
            return Err(bad(
                "must be a quantity: a string such as 128Mi, or a number".to_owned(),
            ));
        }
    };
    parsed
        .map(|value| ReadQuantity { value, text: None })
        .map_err(|e| bad(e.to_string()))
}

// === R2–R4: the PodDisruptionBudget ===

pub(crate) const PDB: &str = "spec.highAvailability.podDisruptionBudget";

/// R2–R4, only for an enabled PDB. R4 compares an integer `minAvailable` with the replicas the
/// Deployment will get: the defaulter's 1 when `spec.replicas` is unset and autoscaling is off.
fn pod_disruption_budget(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
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
fn graceful_shutdown(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
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

fn secret_refs(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
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
fn autoscaling_reference(
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

// === images ===

/// `spec.image` and `spec.monitoring.exporterImage` must be references the kubelet can pull.
/// Absent or null means the default image. The exporter image is checked whenever it is set, even
/// with monitoring disabled, so that switching monitoring on later cannot be the first failure.
fn images(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    if let Field::Set(img) = spec.image {
        check_image("spec.image", img, errors);
    }
    if let Some(Field::Set(img)) = spec.monitoring.get().map(|m| m.exporter_image) {
        check_image("spec.monitoring.exporterImage", img, errors);
    }
}

fn check_image(field: &'static str, img: &str, errors: &mut Vec<FieldError>) {
    match image::check(img) {
        Ok(()) => {}
        Err(e @ image::ImageError::Empty) => {
            errors.push(FieldError::required(field, e.to_string()))
        }
        Err(e) => errors.push(FieldError::invalid(field, go_quote(img), e.to_string())),
    }
}

// === Prometheus ===

/// The ServiceMonitor's `interval` and `scrapeTimeout` must be Prometheus durations, and the
/// timeout no longer than the interval (the operator drops the whole ServiceMonitor otherwise).
/// Empty values mean the defaults (30s, 10s). Checked whenever `serviceMonitor` is set.
fn prometheus(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    let Some(sm) = spec.monitoring.get().and_then(|m| m.service_monitor.get()) else {
        return;
    };
    let interval = non_empty_or(sm.interval, defaults::SERVICE_MONITOR_INTERVAL);
    let timeout = non_empty_or(sm.scrape_timeout, defaults::SERVICE_MONITOR_SCRAPE_TIMEOUT);
    const INTERVAL: &str = "spec.monitoring.serviceMonitor.interval";
    const TIMEOUT: &str = "spec.monitoring.serviceMonitor.scrapeTimeout";
    let mut parse = |field: &'static str, s: &str| {
        duration::parse(s)
            .map_err(|e| errors.push(FieldError::invalid(field, go_quote(s), e.to_string())))
            .ok()
    };
    let (i, t) = (parse(INTERVAL, interval), parse(TIMEOUT, timeout));
    if let (Some(i), Some(t)) = (i, t)
        && t > i
    {
        errors.push(FieldError::invalid(
            TIMEOUT,
            go_quote(timeout),
            format!(
                "Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval \
                 ({interval}); use {interval} or less"
            ),
        ));
    }
}

/// A Go `string` field after defaulting: absent, null and `""` read as the default.
fn non_empty_or<'a>(field: Field<&'a str>, default: &'a str) -> &'a str {
    match field {
        Field::Set(s) if !s.is_empty() => s,
        _ => default,
    }
}

// === rendering ===

/// Go's `%q` (strconv.Quote) for the strings this webhook quotes.
/// An `intstr.IntOrString` as its text (`1`, `25%`).
fn int_or_string(v: &IntOrString<'_>) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => (*s).to_owned(),
    }
}

pub(crate) fn go_quote(s: &str) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON value as a field error shows it: strings quoted, numbers and booleans bare, `null`,
/// and containers by their shape (Go would print its decoded type).
pub(crate) fn render(v: Val<'_, '_>) -> String {
    match v.kind() {
        Kind::String => go_quote(v.as_str().unwrap_or_default()),
        Kind::Integer => v.as_integer().unwrap_or_default().to_string(),
        Kind::Float => v.as_f64().unwrap_or_default().to_string(),
        Kind::Bool => v.as_bool().unwrap_or_default().to_string(),
        Kind::Null => "null".to_owned(),
        Kind::Array => "[...]".to_owned(),
        Kind::Object => "{...}".to_owned(),
    }
}

#[cfg(test)]
mod tests;
