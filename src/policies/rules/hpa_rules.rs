//! The HorizontalPodAutoscaler's metric and behavior rules ([`hpa`]) as CEL: each metric and
//! scaling policy by its index (`transformList`), with the apiserver's messages under our paths.

use super::{Rule, lit, quantity_text};
use crate::memcached::validate::hpa;

/// `"a", "b"` as the apiserver lists supported values.
fn supported(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    quoted.join(", ")
}

fn list(values: &[&str]) -> String {
    let items: Vec<String> = values.iter().map(|v| lit(v)).collect();
    format!("[{}]", items.join(", "))
}

/// `(cond ? [path + text] : [])` where `path` and `text` are CEL strings.
fn when(cond: &str, path: &str, text: &str) -> String {
    format!("({cond} ? [{path} + {text}] : [])")
}

/// A name checked as a path segment: not `.` or `..`, no `/` or `%`.
fn path_segment(v: &str, path: &str) -> String {
    let invalid = format!("\": Invalid value: \\\"\" + {v} + \"\\\": \"");
    format!(
        "({v} == \".\" || {v} == \"..\" ? [{path} + {invalid} + \"may not be '\" + {v} + \"'\"] :\n\
         \x20({v}.contains(\"/\") ? [{path} + {invalid} + \"may not contain '/'\"] : []) +\n\
         \x20({v}.contains(\"%\") ? [{path} + {invalid} + \"may not contain '%'\"] : []))"
    )
}

/// `metric.name` of an object, external or pods source `s` at `sp`.
fn metric_identifier(s: &str, sp: &str) -> String {
    let name = format!("{s}.?metric.?name.orValue(\"\")");
    let path = format!("{sp} + \".metric.name\"");
    format!(
        "({name} == \"\" ? [{path} + \": Required value: must specify a metric name\"] : {})",
        path_segment(&name, &path)
    )
}

/// The target of source `s` at `sp`: type, positive quantities, utilization.
fn target(s: &str, sp: &str) -> String {
    let t = format!("{s}.?target");
    let ty = format!("{t}.?type.orValue(\"\")");
    let tp = format!("{sp} + \".target\"");
    let positive = |key: &str| {
        let q = format!("{t}.value().{key}");
        when(
            &format!(
                "{t}.?{key}.hasValue() && quantity(string({q})).compareTo(quantity(\"0\")) <= 0"
            ),
            &format!("{tp} + \".{key}\""),
            &format!(
                "\": Invalid value: \\\"\" + {} + \"\\\": must be positive\"",
                quantity_text(&q)
            ),
        )
    };
    [
        when(&format!("{ty} == \"\""), &tp, "\".type: Required value: must specify a metric target type\""),
        when(
            &format!("!({ty} in [\"Utilization\", \"Value\", \"AverageValue\"])"),
            &tp,
            &format!("\".type: Invalid value: \\\"\" + {ty} + \"\\\": must be either Utilization, Value, or AverageValue\""),
        ),
        positive("value"),
        positive("averageValue"),
        when(
            &format!("{t}.?averageUtilization.orValue(1) < 1"),
            &tp,
            &format!("\".averageUtilization: Invalid value: \" + string({t}.value().averageUtilization) + \": must be greater than 0\""),
        ),
    ]
    .join(" + ")
}

/// The checks of the first populated source, `member` at `sp`.
fn source(member: &str, m: &str, sp: &str) -> String {
    let s = format!("{m}.{member}");
    let set = |key: &str| format!("{s}.?target.?{key}.hasValue()");
    let (value, average) = (set("value"), set("averageValue"));
    // Object, external and pods metrics name their metric, then check their target.
    let identified = || format!("{} + {}", metric_identifier(&s, sp), target(&s, sp));
    match member {
        "object" => {
            let described = |key: &str| {
                let v = format!("{s}.?describedObject.?{key}.orValue(\"\")");
                let path = format!("{sp} + \".describedObject.{key}\"");
                format!(
                    "({v} == \"\" ? [{path} + \": Required value\"] : {})",
                    path_segment(&v, &path)
                )
            };
            let detail = "must set either a target value or averageValue";
            format!(
                "{} + {} + {} + (!{value} && !{average} ? {} : [])",
                described("kind"),
                described("name"),
                identified(),
                required(sp, "averageValue", detail)
            )
        }
        "external" => format!(
            "{} + (!{value} && !{average} ? {} : []) + ({value} && {average} ? {} : [])",
            identified(),
            required(
                sp,
                "averageValue",
                "must set either a target value for metric or a per-pod target"
            ),
            forbidden(
                sp,
                "value",
                "may not set both a target value for metric and a per-pod target"
            )
        ),
        "pods" => format!(
            "{} + (!{average} ? {} : [])",
            identified(),
            required(
                sp,
                "averageValue",
                "must specify a positive target averageValue"
            )
        ),
        _ => resource_source(member, &s, sp, &set("averageUtilization"), &average),
    }
}

/// A target field the source must set, at `sp`.
fn required(sp: &str, key: &str, detail: &str) -> String {
    format!("[{sp} + \".target.{key}: Required value: {detail}\"]")
}

/// A target field the source may not set, at `sp`.
fn forbidden(sp: &str, key: &str, detail: &str) -> String {
    format!("[{sp} + \".target.{key}: Forbidden: {detail}\"]")
}

/// The checks of a `resource` or `containerResource` source `s` at `sp`: its resource name (and
/// container), then its target.
fn resource_source(member: &str, s: &str, sp: &str, utilization: &str, average: &str) -> String {
    let name = format!("{s}.?name.orValue(\"\")");
    let container_checks = if member == "containerResource" {
        let container = format!("{s}.?container.orValue(\"\")");
        let standard = list(&hpa::STANDARD_CONTAINER_RESOURCES);
        format!(
            " + ({name} != \"\" && !({name}.contains(\"/\") || {name} in {standard} || {name}.startsWith(\"hugepages-\")) ? [{sp} + \".name: Invalid value: \\\"\" + {name} + \"\\\": must be a standard resource for containers\"] : [])\n\
             + ({container} == \"\" ? [{sp} + \".container: Required value: must specify a container\"] :\n\
             \x20 ({container}.size() > 63 ? [{sp} + \".container: Invalid value: \\\"\" + {container} + \"\\\": must be no more than 63 characters\"] : []) +\n\
             \x20 (!{container}.matches(\"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$\") ? [{sp} + \".container: Invalid value: \\\"\" + {container} + \"\\\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')\"] : []))"
        )
    } else {
        String::new()
    };
    format!(
        "({name} == \"\" ? [{sp} + \".name: Required value: must specify a resource name\"] : []){container_checks}\n\
         + {} + (!{utilization} && !{average} ? {} : []) + ({utilization} && {average} ? {} : [])",
        target(s, sp),
        required(
            sp,
            "averageUtilization",
            "must set either a target raw value or a target utilization"
        ),
        forbidden(
            sp,
            "averageValue",
            "may not set both a target raw value and a target utilization"
        )
    )
}

/// Every error of metric `m` at index `i`, in the apiserver's order.
fn metric() -> String {
    let (m, p) = ("m", "(\"spec.autoscaling.metrics[\" + string(i) + \"]\")");
    let ty = format!("{m}.?type.orValue(\"\")");
    let expected: String = hpa::SOURCES
        .iter()
        .map(|(member, ty_name)| format!("{ty} == \"{ty_name}\" ? \"{member}\" : "))
        .collect::<String>()
        + "\"\"";
    let first_source: String = hpa::SOURCES
        .iter()
        .map(|(member, _)| {
            format!(
                "{m}.?{member}.hasValue() ? ({}) :\n",
                source(member, m, &format!("{p} + \".{member}\""))
            )
        })
        .collect::<String>()
        + "[]";
    let present: Vec<String> = hpa::SOURCES
        .iter()
        .map(|(member, _)| format!("{m}.?{member}.hasValue()"))
        .collect();
    let missing: String = hpa::SOURCES
        .iter()
        .map(|(member, ty_name)| format!("({ty} == \"{ty_name}\" && !{m}.?{member}.hasValue() ? [{p} + \".{member}: Required value: must populate information for the given metric source\"] : [])"))
        .collect::<Vec<_>>()
        .join(" + ");
    let forbidden: String = hpa::SOURCES
        .iter()
        .map(|(member, ty_name)| format!("({m}.?{member}.hasValue() && {ty} != \"{ty_name}\" ? [{p} + \".{member}: Forbidden: must populate the given metric source only\"] : [])"))
        .collect::<Vec<_>>()
        .join(" + ");
    format!(
        "({ty} == \"\" ? [{p} + \".type: Required value: must specify a metric source type\"] : [])\n\
         + (({expected}) == \"\" ? [{p} + \".type: Unsupported value: \\\"\" + {ty} + \"\\\": supported values: {}\"] : [])\n\
         + ({first_source})\n\
         + {missing}\n\
         + ([{}].filter(x, x).size() > 1 ? {forbidden} : [])",
        supported(&hpa::METRIC_TYPES).replace('"', "\\\""),
        present.join(", ")
    )
}

/// The errors of `behavior.<name>` (scaleUp or scaleDown).
fn scaling_rules(name: &str) -> String {
    let r = format!("$o.spec.autoscaling.behavior.?{name}");
    let bp = format!("spec.autoscaling.behavior.{name}");
    let window = format!("{r}.?stabilizationWindowSeconds");
    let invalid = |key: &str, value: &str, detail: &str| {
        format!("[\"{bp}.{key}: Invalid value: \" + {value} + \": {detail}\"]")
    };
    let tolerance = format!("{r}.value().tolerance");
    let pp = format!("\"{bp}.policies[\" + string(j) + \"]\"");
    let policy = format!(
        "(!(p.?type.orValue(\"\") in {types}) ? [{pp} + \".type: Unsupported value: \\\"\" + p.?type.orValue(\"\") + \"\\\": supported values: {types_text}\"] : [])\n\
         + (p.?value.orValue(0) <= 0 ? [{pp} + \".value: Invalid value: \" + string(p.?value.orValue(0)) + \": must be greater than zero\"] : [])\n\
         + (p.?periodSeconds.orValue(0) <= 0 ? [{pp} + \".periodSeconds: Invalid value: \" + string(p.?periodSeconds.orValue(0)) + \": must be greater than zero\"] : [])\n\
         + (p.?periodSeconds.orValue(0) > {max_period} ? [{pp} + \".periodSeconds: Invalid value: \" + string(p.?periodSeconds.orValue(0)) + \": must be less than or equal to {max_period}\"] : [])",
        types = list(&hpa::POLICY_TYPES),
        types_text = supported(&hpa::POLICY_TYPES).replace('"', "\\\""),
        max_period = hpa::MAX_PERIOD_SECONDS,
    );
    format!(
        "(!{r}.hasValue() ? [] :\n\
         \x20({window}.orValue(0) < 0 ? {} : [])\n\
         \x20+ ({window}.orValue(0) > {max_window} ? {} : [])\n\
         \x20+ ({r}.?tolerance.hasValue() && quantity(string({tolerance})).compareTo(quantity(\"0\")) < 0 ? {} : [])\n\
         \x20+ ({r}.?selectPolicy.hasValue() && !({r}.value().selectPolicy in {select}) ? [\"{bp}.selectPolicy: Unsupported value: \\\"\" + {r}.value().selectPolicy + \"\\\": supported values: {select_text}\"] : [])\n\
         \x20+ {r}.?policies.orValue([]).transformList(j, p, {policy}).flatten())",
        invalid(
            "stabilizationWindowSeconds",
            &format!("string({window}.value())"),
            "must be greater than or equal to zero"
        ),
        invalid(
            "stabilizationWindowSeconds",
            &format!("string({window}.value())"),
            &format!(
                "must be less than or equal to {}",
                hpa::MAX_STABILIZATION_WINDOW_SECONDS
            )
        ),
        invalid(
            "tolerance",
            &format!("\"\\\"\" + {} + \"\\\"\"", quantity_text(&tolerance)),
            "must be greater than or equal to 0"
        ),
        max_window = hpa::MAX_STABILIZATION_WINDOW_SECONDS,
        select = list(&hpa::SELECT_POLICIES),
        select_text = supported(&hpa::SELECT_POLICIES).replace('"', "\\\""),
    )
}

pub(super) fn rules() -> [Rule; 2] {
    [
        Rule {
            name: "hpa_metrics",
            covers: "HPA: every spec.autoscaling.metrics entry valid by autoscaling/v2's rules",
            cel: format!(
                "!$.autoscaling ? [] : $o.spec.autoscaling.?metrics.orValue([]).transformList(i, m,\n{}).flatten()",
                metric()
            ),
            same_field: None,
        },
        Rule {
            name: "hpa_behavior",
            covers: "HPA: spec.autoscaling.behavior valid by autoscaling/v2's rules",
            cel: format!(
                "!$.autoscaling || !$o.spec.autoscaling.?behavior.hasValue() ? [] :\n{}\n+ {}",
                scaling_rules("scaleUp"),
                scaling_rules("scaleDown")
            ),
            same_field: None,
        },
    ]
}
