//! R1–R10, the reference operator's rules, as CEL.

use super::{Rule, invalid, lit, mebibytes, quantity_text, quoted, when};
use crate::memcached::validate;

/// The enabled check and the two members of `highAvailability.podDisruptionBudget`.
fn pdb() -> (String, String, String) {
    let pdb = "$o.?spec.?highAvailability.?podDisruptionBudget";
    (
        format!("{pdb}.?enabled.orValue(false)"),
        format!("{pdb}.?minAvailable"),
        format!("{pdb}.?maxUnavailable"),
    )
}

/// `gracefulShutdown`, and its two durations with the CRD's defaults.
fn graceful_shutdown() -> (&'static str, String, String) {
    let gs = "$o.?spec.?highAvailability.?gracefulShutdown";
    (
        gs,
        format!(
            "{gs}.?preStopDelaySeconds.orValue({})",
            validate::PRE_STOP_DELAY_SECONDS
        ),
        format!(
            "{gs}.?terminationGracePeriodSeconds.orValue({})",
            validate::TERMINATION_GRACE_PERIOD_SECONDS
        ),
    )
}

pub(super) fn reference() -> Vec<Rule> {
    vec![
        r1_memory_limit(),
        r2_pdb_exclusive(),
        r3_pdb_required(),
        r4_pdb_min_available(),
        r5_graceful_shutdown(),
        secret("r6_sasl_secret", "sasl", "credentialsSecretRef", "SASL"),
        secret("r7_tls_secret", "tls", "certificateSecretRef", "TLS"),
        r8_replicas(),
        r9_min_replicas(),
        r10_cpu_request(),
    ]
}

fn r1_memory_limit() -> Rule {
    let limit = "$o.spec.resources.limits.memory";
    let required = format!("($.mb + {})", validate::OVERHEAD_MIB);
    Rule {
        name: "r1_memory_limit",
        covers: "R1: spec.resources.limits.memory holds maxMemoryMB + 32Mi",
        cel: when(
            &format!(
                "$o.?spec.?resources.?limits.?memory.hasValue() &&\n\
                 quantity(string({limit})).compareTo(quantity(string({required}) + \"Mi\")) < 0"
            ),
            &invalid(
                "spec.resources.limits.memory",
                &quoted(&quantity_text(limit)),
                &format!(
                    "\"memory limit must be at least \" + {} + \": maxMemoryMB=\" + string($.mb) + \" (\" + string($.mb) + \"Mi) + {}Mi overhead\"",
                    mebibytes(&required),
                    validate::OVERHEAD_MIB
                ),
            ),
        ),
        same_field: None,
    }
}

fn r2_pdb_exclusive() -> Rule {
    let (pdb_on, min, max) = pdb();
    Rule {
        name: "r2_pdb_exclusive",
        covers: "R2: a PodDisruptionBudget sets minAvailable or maxUnavailable, not both",
        cel: when(
            &format!("{pdb_on} && {min}.hasValue() && {max}.hasValue()"),
            &invalid(
                validate::PDB,
                &quoted(&format!(
                    "\"minAvailable=\" + string({min}.value()) + \", maxUnavailable=\" + string({max}.value())"
                )),
                &lit("minAvailable and maxUnavailable are mutually exclusive, specify only one"),
            ),
        ),
        same_field: None,
    }
}

fn r3_pdb_required() -> Rule {
    let (pdb_on, min, max) = pdb();
    Rule {
        name: "r3_pdb_required",
        covers: "R3: an enabled PodDisruptionBudget sets minAvailable or maxUnavailable",
        cel: when(
            &format!("{pdb_on} && !{min}.hasValue() && !{max}.hasValue()"),
            &lit(&format!(
                "{}: Required value: one of minAvailable or maxUnavailable must be set when PDB is enabled",
                validate::PDB
            )),
        ),
        same_field: Some("?spec.?highAvailability.?podDisruptionBudget"),
    }
}

fn r4_pdb_min_available() -> Rule {
    let (pdb_on, min, max) = pdb();
    Rule {
        name: "r4_pdb_min_available",
        covers: "R4: an integer minAvailable is below the replicas",
        cel: when(
            &format!(
                "{pdb_on} && {min}.hasValue() && !{max}.hasValue() && type({min}.value()) == int &&\n\
                 $.replicas_known && {min}.value() >= $.replicas"
            ),
            &invalid(
                &format!("{}.minAvailable", validate::PDB),
                &format!("string({min}.value())"),
                &format!(
                    "\"minAvailable (\" + string({min}.value()) + \") must be less than replicas (\" + string($.replicas) + \")\""
                ),
            ),
        ),
        same_field: None,
    }
}

fn r5_graceful_shutdown() -> Rule {
    let (gs, pre, grace) = graceful_shutdown();
    Rule {
        name: "r5_graceful_shutdown",
        covers: "R5: terminationGracePeriodSeconds exceeds preStopDelaySeconds",
        cel: when(
            &format!("{gs}.?enabled.orValue(false) && {grace} <= {pre}"),
            &invalid(
                "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds",
                &format!("string({grace})"),
                &format!(
                    "\"terminationGracePeriodSeconds (\" + string({grace}) + \") must exceed preStopDelaySeconds (\" + string({pre}) + \")\""
                ),
            ),
        ),
        same_field: None,
    }
}

fn r8_replicas() -> Rule {
    Rule {
        name: "r8_replicas",
        covers: "R8: spec.replicas is not set with autoscaling",
        cel: when(
            "$.autoscaling && $o.spec.?replicas.hasValue()",
            &invalid(
                "spec.replicas",
                "string($o.spec.replicas)",
                &lit("spec.replicas and spec.autoscaling.enabled are mutually exclusive"),
            ),
        ),
        same_field: None,
    }
}

fn r9_min_replicas() -> Rule {
    Rule {
        name: "r9_min_replicas",
        covers: "R9: minReplicas does not exceed maxReplicas",
        cel: when(
            "$.autoscaling && $o.spec.autoscaling.?minReplicas.hasValue() &&\n\
             $o.spec.autoscaling.minReplicas > $o.spec.autoscaling.?maxReplicas.orValue(0)",
            &invalid(
                "spec.autoscaling.minReplicas",
                "string($o.spec.autoscaling.minReplicas)",
                "\"minReplicas (\" + string($o.spec.autoscaling.minReplicas) + \") must not exceed maxReplicas (\" + string($o.spec.autoscaling.?maxReplicas.orValue(0)) + \")\"",
            ),
        ),
        same_field: None,
    }
}

fn r10_cpu_request() -> Rule {
    Rule {
        name: "r10_cpu_request",
        covers: "R10: a CPU utilization metric (or the default one) has resources.requests.cpu",
        cel: when(
            "$.autoscaling && !$o.?spec.?resources.?requests.?cpu.hasValue() &&\n\
             ($o.spec.autoscaling.?metrics.orValue([]).size() == 0 ||\n\
             \x20$o.spec.autoscaling.metrics.exists(m, m.?type.orValue(\"\") == \"Resource\" &&\n\
             \x20  m.?resource.?name.orValue(\"\") == \"cpu\" && m.?resource.?target.?type.orValue(\"\") == \"Utilization\"))",
            &lit(
                "spec.resources.requests.cpu: Required value: resources.requests.cpu is required when using CPU utilization metrics",
            ),
        ),
        same_field: Some("?spec.?resources.?requests.?cpu"),
    }
}

/// R6 and R7: an enabled SASL or TLS section names its Secret.
fn secret(name: &'static str, section: &str, reference: &str, what: &str) -> Rule {
    let field = format!("spec.security.{section}.{reference}.name");
    Rule {
        name,
        covers: if section == "sasl" {
            "R6: SASL names its credentials Secret"
        } else {
            "R7: TLS names its certificate Secret"
        },
        cel: when(
            &format!(
                "$o.?spec.?security.?{section}.?enabled.orValue(false) &&\n\
                 $o.?spec.?security.?{section}.?{reference}.?name.orValue(\"\") == \"\""
            ),
            &lit(&format!(
                "{field}: Required value: {reference}.name is required when {what} is enabled"
            )),
        ),
        same_field: if section == "sasl" {
            Some("?spec.?security.?sasl.?credentialsSecretRef.?name")
        } else {
            Some("?spec.?security.?tls.?certificateSecretRef.?name")
        },
    }
}
