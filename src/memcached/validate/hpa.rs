//! Will the apiserver accept the HorizontalPodAutoscaler the operator renders from
//! `spec.autoscaling`? The autoscaling/v2 rules of kubernetes/kubernetes
//! `pkg/apis/autoscaling/validation`, with the apiserver's messages under our field paths, applied
//! after the same defaults (the CR's and the HPA's own `SetDefaults`).
//!
//! `metrics` and `behavior` are raw JSON here: a member of the wrong JSON type (which would fail
//! the operator's Go decoding) is reported as an invalid value at its exact path. Deliberate
//! differences from the apiserver: an unknown metric type is reported once (Go repeats it), extra
//! metric sources are listed in a fixed order (Go iterates a set), a Quantity is quoted in its
//! canonical form (Go prints the struct), `maxReplicas < minReplicas` is left to R9 (same
//! condition, the reference's message), and `tolerance` is checked even where the apiserver
//! drops it (its `HPAConfigurableTolerance` gate off, before 1.34): a negative one means nothing.

mod behavior;
mod path;

use super::{BadValue, ErrorKind, FieldError, go_quote, read_quantity, render};
use crate::json::{Field, Kind, Val};
use crate::memcached::Autoscaling;
use path::Path;

pub(crate) const METRIC_TYPES: [&str; 5] = [
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];
/// The metric source members, in the order the apiserver checks them, with their type.
pub(crate) const SOURCES: [(&str, &str); 5] = [
    ("object", "Object"),
    ("external", "External"),
    ("pods", "Pods"),
    ("resource", "Resource"),
    ("containerResource", "ContainerResource"),
];
pub(crate) const SELECT_POLICIES: [&str; 3] = ["Disabled", "Max", "Min"];
pub(crate) const POLICY_TYPES: [&str; 2] = ["Percent", "Pods"];
pub(crate) const MAX_STABILIZATION_WINDOW_SECONDS: i128 = 3600;
pub(crate) const MAX_PERIOD_SECONDS: i128 = 1800;
pub(crate) const STANDARD_CONTAINER_RESOURCES: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// Checks the HPA the operator renders from an enabled `spec.autoscaling`.
pub(super) fn check(a: &Autoscaling<'_, '_>, errors: &mut Vec<FieldError>) {
    let mut c = Checker { errors };
    replica_bounds(a, &mut c);
    // Absent, null or empty metrics become the defaulter's CPU metric, which is valid.
    if let Some(metrics) = a.metrics.get().and_then(|m| m.items()) {
        let path = Path::root("spec.autoscaling.metrics");
        for (i, metric) in metrics.enumerate() {
            c.metric(metric, &path.index(i));
        }
    }
    // Absent or null behavior becomes the defaulter's (valid) scale-down window.
    if let Field::Set(behavior) = a.behavior {
        let path = Path::root("spec.autoscaling.behavior");
        for name in ["scaleUp", "scaleDown"] {
            let rules_path = path.child(name);
            if let Some(rules) = c.object(behavior.get(name), &rules_path) {
                c.scaling_rules(rules, &rules_path);
            }
        }
    }
}

/// `maxReplicas` is required and at least 1; `minReplicas` (HPA default 1) at least 1, since the
/// HPAScaleToZero gate is alpha and off.
fn replica_bounds(a: &Autoscaling<'_, '_>, c: &mut Checker<'_>) {
    match a.max_replicas {
        Field::Set(max) if max < 1 => c.errors.push(FieldError::invalid(
            "spec.autoscaling.maxReplicas",
            max.to_string(),
            "must be greater than 0",
        )),
        Field::Set(_) => {}
        _ => c.errors.push(FieldError::required(
            "spec.autoscaling.maxReplicas",
            "the HorizontalPodAutoscaler needs maxReplicas (at least 1) when autoscaling is enabled",
        )),
    }
    if let Field::Set(min) = a.min_replicas
        && min < 1
    {
        c.errors.push(FieldError::invalid(
            "spec.autoscaling.minReplicas",
            min.to_string(),
            "must be greater than or equal to 1",
        ));
    }
}

/// What a metric target sets, for the per-source "either/both" rules.
#[derive(Default)]
struct Target {
    value: bool,
    average_value: bool,
    average_utilization: bool,
}

struct Checker<'e> {
    errors: &'e mut Vec<FieldError>,
}

impl Checker<'_> {
    fn push(&mut self, path: &Path<'_>, kind: ErrorKind, detail: impl Into<String>) {
        self.errors.push(FieldError {
            field: path.to_string(),
            kind,
            detail: detail.into(),
        });
    }

    fn required(&mut self, path: &Path<'_>, detail: &str) {
        self.push(path, ErrorKind::Required, detail);
    }

    fn forbidden(&mut self, path: &Path<'_>, detail: &str) {
        self.push(path, ErrorKind::Forbidden, detail);
    }

    fn not_supported(&mut self, path: &Path<'_>, value: &str, supported: &[&str]) {
        let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        let detail = format!("supported values: {}", list.join(", "));
        self.push(path, ErrorKind::NotSupported(go_quote(value)), detail);
    }

    fn type_error(&mut self, v: Val<'_, '_>, path: &Path<'_>, expected: &str) {
        self.push(
            path,
            ErrorKind::Invalid(render(v)),
            format!("must be {expected}"),
        );
    }

    // --- typed readers: absent and null read as Go's nil/zero; a wrong type is reported ---

    fn object<'t, 'i>(&mut self, v: Option<Val<'t, 'i>>, path: &Path<'_>) -> Option<Val<'t, 'i>> {
        let v = v.filter(|v| !v.is_null())?;
        if v.kind() == Kind::Object {
            return Some(v);
        }
        self.type_error(v, path, "an object");
        None
    }

    /// A Go `string` member: absent and null read as "", and so does a wrong type (reported).
    fn string<'i>(
        &mut self,
        obj: Option<Val<'_, 'i>>,
        key: &'static str,
        path: &Path<'_>,
    ) -> &'i str {
        match obj.and_then(|o| o.get(key)).filter(|v| !v.is_null()) {
            None => "",
            Some(v) => v.as_str().unwrap_or_else(|| {
                self.type_error(v, &path.child(key), "a string");
                ""
            }),
        }
    }

    /// An `int32` or `*int32` member: `None` when absent or null, or when of a wrong type (reported).
    fn int32(
        &mut self,
        obj: Option<Val<'_, '_>>,
        key: &'static str,
        path: &Path<'_>,
    ) -> Option<i128> {
        let v = obj.and_then(|o| o.get(key)).filter(|v| !v.is_null())?;
        match v.as_integer() {
            Some(n) if i32::try_from(n).is_ok() => Some(n),
            Some(_) => {
                self.type_error(v, &path.child(key), "a 32-bit integer");
                None
            }
            None => {
                self.type_error(v, &path.child(key), "an integer");
                None
            }
        }
    }

    /// Whether a `*Quantity` member is set; if it is, it must be positive.
    fn positive_quantity(
        &mut self,
        obj: Option<Val<'_, '_>>,
        key: &'static str,
        path: &Path<'_>,
    ) -> bool {
        let Some(v) = obj.and_then(|o| o.get(key)).filter(|v| !v.is_null()) else {
            return false;
        };
        let path = path.child(key);
        match read_quantity(v) {
            Ok(q) if q.value > crate::memcached::quantity::Quantity::from_json_i64(0) => {}
            Ok(q) => self.push(
                &path,
                ErrorKind::Invalid(go_quote(&q.go_string())),
                "must be positive",
            ),
            Err(BadValue { value, detail }) => self.push(&path, ErrorKind::Invalid(value), detail),
        }
        true
    }

    // --- metrics ---

    /// `validateMetricSpec`. A null metric decodes as an empty one.
    fn metric(&mut self, v: Val<'_, '_>, path: &Path<'_>) {
        let m = if v.is_null() {
            None
        } else {
            self.object(Some(v), path)
        };
        if m.is_none() && !v.is_null() {
            return;
        }
        let ty = self.string(m, "type", path);
        let type_path = path.child("type");
        if ty.is_empty() {
            self.required(&type_path, "must specify a metric source type");
        }
        let expected = SOURCES
            .iter()
            .find(|(_, t)| *t == ty)
            .map(|(member, _)| *member);
        if expected.is_none() {
            self.not_supported(&type_path, ty, &METRIC_TYPES);
        }

        let mut present = [false; SOURCES.len()];
        let mut validated = false;
        for (slot, (member, _)) in present.iter_mut().zip(SOURCES) {
            let source_path = path.child(member);
            let Some(source) = self.object(m.and_then(|m| m.get(member)), &source_path) else {
                continue;
            };
            *slot = true;
            if !validated {
                validated = true;
                self.source(member, source, &source_path);
            }
        }
        if let Some(expected) = expected {
            let index = SOURCES.iter().position(|(member, _)| *member == expected);
            if !index.is_some_and(|i| present[i]) {
                self.required(
                    &path.child(expected),
                    "must populate information for the given metric source",
                );
            }
        }
        if present.iter().filter(|p| **p).count() > 1 {
            for (_, (member, _)) in present.iter().zip(SOURCES).filter(|(p, _)| **p) {
                if Some(member) != expected {
                    self.forbidden(
                        &path.child(member),
                        "must populate the given metric source only",
                    );
                }
            }
        }
    }

    fn source(&mut self, member: &str, s: Val<'_, '_>, path: &Path<'_>) {
        let target_path = path.child("target");
        match member {
            "object" => {
                let described = path.child("describedObject");
                let d = self.object(s.get("describedObject"), &described);
                for key in ["kind", "name"] {
                    let value = self.string(d, key, &described);
                    self.reference_name(value, &described.child(key));
                }
                self.metric_identifier(s, path);
                let t = self.target(s, path);
                if !t.value && !t.average_value {
                    self.required(
                        &target_path.child("averageValue"),
                        "must set either a target value or averageValue",
                    );
                }
            }
            "external" => {
                self.metric_identifier(s, path);
                let t = self.target(s, path);
                if !t.value && !t.average_value {
                    self.required(
                        &target_path.child("averageValue"),
                        "must set either a target value for metric or a per-pod target",
                    );
                }
                if t.value && t.average_value {
                    self.forbidden(
                        &target_path.child("value"),
                        "may not set both a target value for metric and a per-pod target",
                    );
                }
            }
            "pods" => {
                self.metric_identifier(s, path);
                let t = self.target(s, path);
                if !t.average_value {
                    self.required(
                        &target_path.child("averageValue"),
                        "must specify a positive target averageValue",
                    );
                }
            }
            _ => self.resource_source(member, s, path),
        }
    }

    /// `resource` and `containerResource`: a resource name (a container's too), and a target
    /// utilization or raw value, not both.
    fn resource_source(&mut self, member: &str, s: Val<'_, '_>, path: &Path<'_>) {
        let target_path = path.child("target");
        let name = self.string(Some(s), "name", path);
        let name_path = path.child("name");
        if name.is_empty() {
            self.required(&name_path, "must specify a resource name");
        } else if member == "containerResource" && !is_container_resource(name) {
            self.push(
                &name_path,
                ErrorKind::Invalid(go_quote(name)),
                "must be a standard resource for containers",
            );
        }
        if member == "containerResource" {
            let container = self.string(Some(s), "container", path);
            let container_path = path.child("container");
            if container.is_empty() {
                self.required(&container_path, "must specify a container");
            } else {
                for problem in dns1123_label(container) {
                    self.push(
                        &container_path,
                        ErrorKind::Invalid(go_quote(container)),
                        problem,
                    );
                }
            }
        }
        let t = self.target(s, path);
        if !t.average_utilization && !t.average_value {
            self.required(
                &target_path.child("averageUtilization"),
                "must set either a target raw value or a target utilization",
            );
        }
        if t.average_utilization && t.average_value {
            self.forbidden(
                &target_path.child("averageValue"),
                "may not set both a target raw value and a target utilization",
            );
        }
    }

    /// `validateMetricIdentifier` on `<source>.metric`.
    fn metric_identifier(&mut self, s: Val<'_, '_>, path: &Path<'_>) {
        let metric_path = path.child("metric");
        let metric = self.object(s.get("metric"), &metric_path);
        let name = self.string(metric, "name", &metric_path);
        let name_path = metric_path.child("name");
        if name.is_empty() {
            self.required(&name_path, "must specify a metric name");
        } else {
            self.path_segment(name, &name_path);
        }
    }

    /// `ValidateCrossVersionObjectReference`'s kind/name: required (no detail), a path segment.
    fn reference_name(&mut self, value: &str, path: &Path<'_>) {
        if value.is_empty() {
            self.required(path, "");
        } else {
            self.path_segment(value, path);
        }
    }

    /// `IsValidPathSegmentName`.
    fn path_segment(&mut self, name: &str, path: &Path<'_>) {
        if name == "." || name == ".." {
            let detail = format!("may not be '{name}'");
            return self.push(path, ErrorKind::Invalid(go_quote(name)), detail);
        }
        for bad in ["/", "%"] {
            if name.contains(bad) {
                self.push(
                    path,
                    ErrorKind::Invalid(go_quote(name)),
                    format!("may not contain '{bad}'"),
                );
            }
        }
    }

    /// `validateMetricTarget` on `<source>.target` (a value struct: absent reads as empty).
    fn target(&mut self, s: Val<'_, '_>, path: &Path<'_>) -> Target {
        let path = path.child("target");
        let t = self.object(s.get("target"), &path);
        let ty = self.string(t, "type", &path);
        let type_path = path.child("type");
        if ty.is_empty() {
            self.required(&type_path, "must specify a metric target type");
        }
        if !matches!(ty, "Utilization" | "Value" | "AverageValue") {
            self.push(
                &type_path,
                ErrorKind::Invalid(go_quote(ty)),
                "must be either Utilization, Value, or AverageValue",
            );
        }
        let value = self.positive_quantity(t, "value", &path);
        let average_value = self.positive_quantity(t, "averageValue", &path);
        let utilization = self.int32(t, "averageUtilization", &path);
        if let Some(u) = utilization.filter(|&u| u < 1) {
            self.push(
                &path.child("averageUtilization"),
                ErrorKind::Invalid(u.to_string()),
                "must be greater than 0",
            );
        }
        // A value of the wrong type still counts as set (the user did set it).
        let set = |key| t.and_then(|t| t.get(key)).is_some_and(|v| !v.is_null());
        Target {
            value,
            average_value,
            average_utilization: set("averageUtilization"),
        }
    }
}

/// `ValidateContainerResourceName` for names without a domain: the standard container resources
/// (`cpu`, `memory`, `ephemeral-storage`, `hugepages-*`). Domain-qualified (extended) names pass.
fn is_container_resource(name: &str) -> bool {
    name.contains('/')
        || STANDARD_CONTAINER_RESOURCES.contains(&name)
        || name.starts_with("hugepages-")
}

/// apimachinery's `IsDNS1123Label` messages.
fn dns1123_label(s: &str) -> Vec<&'static str> {
    let mut problems = Vec::new();
    if s.len() > 63 {
        problems.push("must be no more than 63 characters");
    }
    let ok = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    let valid = bytes.first().is_some_and(ok)
        && bytes.last().is_some_and(ok)
        && bytes.iter().all(|b| ok(b) || *b == b'-');
    if !valid {
        problems.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
             and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', \
             regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        );
    }
    problems
}

#[cfg(test)]
mod tests;
