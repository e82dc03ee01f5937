//! "One workload, one autoscaler" for HorizontalPodAutoscalers, as a ValidatingAdmissionPolicy
//! whose params are the namespace's HPAs (`paramKind`): the webhook's matching, adoption,
//! message and ratcheting ([`crate::memcached::validate`]'s autoscalers rule). ScaledObjects
//! without their HPA stay with the webhook (their CRD may not exist).

use serde_json::{Value, json};

use crate::autoscalers::Kind;
use crate::memcached::{GROUP, KIND};

/// The policy's name (its binding has the same).
pub const NAME: &str = "memcached-webhook-autoscalers";

/// The policy and its binding.
pub fn documents(
    metadata: &dyn Fn(&str) -> Value,
    constraints: Value,
    conditions: Value,
) -> [Value; 2] {
    let controller = "variables.controller";
    let variables = json!([
        {"name": "controller", "expression":
            "params.metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false))"},
        {"name": "controller_kind", "expression": format!(
            "{controller}.size() == 0 ? \"none\" :\n\
             {controller}[0].apiVersion.startsWith(\"{GROUP}/\") && {controller}[0].kind == \"{KIND}\" ? \"memcached\" :\n\
             {controller}[0].apiVersion.startsWith(\"keda.sh/\") && {controller}[0].kind == \"ScaledObject\" ? \"scaledobject\" : \"other\"")},
        {"name": "targets", "expression":
            "params.spec.scaleTargetRef.kind == \"Deployment\" &&\n\
             params.spec.scaleTargetRef.?apiVersion.orValue(\"\").startsWith(\"apps/\") &&\n\
             params.spec.scaleTargetRef.name == object.metadata.name"},
        {"name": "own", "expression": format!(
            "params.metadata.name == object.metadata.name && (variables.controller_kind == \"none\" ||\n\
             (variables.controller_kind == \"memcached\" && {controller}[0].name == object.metadata.name))")},
        {"name": "enabled", "expression": "object.spec.?autoscaling.?enabled.orValue(false)"},
        // Ratcheting: the stored object had the same conflict (same field: the same `enabled`).
        {"name": "stored", "expression":
            "request.operation == \"UPDATE\" && oldObject != null &&\n\
             oldObject.spec.?autoscaling.?enabled.orValue(false) == variables.enabled"},
    ]);
    let other = format!(
        "(variables.controller_kind == \"scaledobject\" ? \"{} '\" + {controller}[0].name : \"{} '\" + params.metadata.name)",
        Kind::ScaledObject.name(),
        Kind::Hpa.name()
    );
    let message = format!(
        "\"{KIND}.{GROUP} \\\"\" + object.metadata.name + \"\\\" is invalid: \" +\n\
         (variables.enabled ? \"spec.autoscaling.enabled\" : \"spec.replicas\") +\n\
         \": Forbidden: the workload '\" + object.metadata.name + \"' of type 'apps/v1.Deployment' is already managed by the \" +\n\
         {other} + \"'; a workload must never be scaled by two autoscalers\" +\n\
         (variables.enabled ? \" (with spec.autoscaling.enabled the operator adds its own)\" : \" (the operator keeps setting spec.replicas against it)\")"
    );
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": metadata(NAME),
            "spec": {
                "failurePolicy": "Fail",
                "paramKind": {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler"},
                "matchConstraints": constraints,
                "matchConditions": conditions,
                "variables": variables,
                "validations": [{
                    "expression": "!variables.targets || variables.own || variables.stored",
                    "messageExpression": message,
                    "reason": "Invalid",
                }],
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": metadata(NAME),
            "spec": {
                "policyName": NAME,
                "validationActions": ["Deny"],
                // Each HPA of the Memcached's namespace is a param; none: nothing to judge.
                "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
            },
        }),
    ]
}
