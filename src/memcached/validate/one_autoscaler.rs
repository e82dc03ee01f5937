//! One workload, one autoscaler (KEDA's first admission rule): the Memcached's Deployment
//! `<ns>/<name>` must not be scaled by another HorizontalPodAutoscaler or a KEDA ScaledObject.
//! The operator's own HPA (`<name>`, controlled by this Memcached, or with no controller: the
//! operator adopts it) is not another; KEDA's HPA counts as its ScaledObject, once.
//!
//! Reads only the in-memory index ([`crate::autoscalers`]): no API call on the request path.
//! When the index cannot be trusted (not listed yet, API unreachable or forbidden), the rule is
//! skipped with a warning: it never becomes a new way to block writes.

use super::{Cluster, ErrorKind, FieldError, Outcome};
use crate::autoscalers::{Controller, Found, Kind, Lookup};

/// Appends one error per other autoscaler of Deployment `name`, on `spec.autoscaling.enabled`
/// when the Memcached's own HPA is on (two HPAs), else on `spec.replicas` (the operator's
/// replicas against the HPA).
pub(super) fn check(name: &str, autoscaling: bool, cluster: Cluster<'_>, out: &mut Outcome) {
    // A name the apiserver has not generated yet cannot be anyone's target.
    if name.is_empty() {
        return;
    }
    let found = match cluster.autoscalers.lookup(cluster.namespace, name) {
        Lookup::Checked(found) => found,
        Lookup::Unchecked(why) => {
            out.unchecked = true;
            out.warnings.push(format!(
                "whether another autoscaler already scales Deployment {name:?} could not be \
                 checked ({why}); admitted without that check"
            ));
            return;
        }
    };
    let field = if autoscaling {
        "spec.autoscaling.enabled"
    } else {
        "spec.replicas"
    };
    let mut others: Vec<(Kind, &str)> = others(name, &found).collect();
    others.sort_unstable();
    others.dedup();
    for (kind, other_name) in others {
        out.errors.push(FieldError {
            field: field.to_owned(),
            kind: ErrorKind::Autoscaled,
            detail: format!(
                "the workload '{name}' of type 'apps/v1.Deployment' is already managed by the \
                 {} '{other_name}'; a workload must never be scaled by two autoscalers{}",
                kind.name(),
                if autoscaling {
                    " (with spec.autoscaling.enabled the operator adds its own)"
                } else {
                    " (the operator keeps setting spec.replicas against it)"
                },
            ),
        });
    }
}

/// The other autoscalers among those aimed at Deployment `name`, as (kind, name): KEDA's HPAs
/// as their ScaledObject.
fn others<'a>(name: &'a str, found: &'a [Found]) -> impl Iterator<Item = (Kind, &'a str)> + 'a {
    found
        .iter()
        .filter_map(move |f| match (&f.kind, &f.controller) {
            (Kind::Hpa, Controller::None | Controller::Memcached(_))
                if f.name == name && owned_by(name, &f.controller) =>
            {
                None
            }
            (Kind::Hpa, Controller::ScaledObject(so)) => Some((Kind::ScaledObject, &**so)),
            (kind, _) => Some((*kind, f.name.as_str())),
        })
}

/// Whether an HPA named like the Memcached is the operator's: controlled by the Memcached of
/// that name, or by nothing (the operator adopts it).
fn owned_by(name: &str, controller: &Controller) -> bool {
    match controller {
        Controller::None => true,
        Controller::Memcached(owner) => &**owner == name,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscalers::{Autoscalers, Object, Sync};
    use crate::json::Val;
    use crate::memcached::validate::{Rule, ratchet, validate_in};
    use serde_json::{Value as J, json};

    /// An index listing `objects` (kind, namespace, name, target Deployment, controller).
    fn index(objects: &[(Kind, &str, &str, &str, Controller)]) -> Autoscalers {
        let index = Autoscalers::default();
        for kind in Kind::ALL {
            index.list_started(kind);
            for (k, namespace, name, deployment, controller) in objects {
                if *k == kind {
                    index.listed(
                        kind,
                        &Object {
                            namespace: namespace.to_string(),
                            name: name.to_string(),
                            deployment: Some(deployment.to_string()),
                            controller: controller.clone(),
                        },
                    );
                }
            }
            index.list_done(kind);
        }
        index
    }

    fn judge(index: &Autoscalers, namespace: &str, object: &J) -> Outcome {
        let mut bytes = serde_json::to_vec(object).unwrap();
        let tape = simd_json::to_tape(&mut bytes).unwrap();
        let mc = crate::memcached::read(Val::root(&tape)).unwrap();
        validate_in(
            &mc,
            Some(Cluster {
                namespace,
                autoscalers: index,
            }),
        )
    }

    fn memcached(name: &str, spec: J) -> J {
        json!({"metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    fn errors(index: &Autoscalers, object: &J) -> Vec<String> {
        judge(index, "ns", object)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// A valid spec with the operator's HPA on.
    const AUTOSCALING: fn() -> J = || {
        json!({"autoscaling": {"enabled": true, "maxReplicas": 3},
               "resources": {"requests": {"cpu": "100m"}}})
    };

    #[test]
    fn a_foreign_hpa_is_named_on_spec_replicas_or_autoscaling_enabled() {
        let index = index(&[(Kind::Hpa, "ns", "foreign", "cache", Controller::None)]);
        assert_eq!(
            errors(&index, &memcached("cache", json!({"replicas": 2}))),
            [
                "spec.replicas: Forbidden: the workload 'cache' of type 'apps/v1.Deployment' is \
              already managed by the HorizontalPodAutoscaler 'foreign'; a workload must never be \
              scaled by two autoscalers (the operator keeps setting spec.replicas against it)"
            ]
        );
        let with_hpa = errors(&index, &memcached("cache", AUTOSCALING()));
        assert_eq!(with_hpa.len(), 1, "{with_hpa:?}");
        assert!(
            with_hpa[0].starts_with(
                "spec.autoscaling.enabled: Forbidden: the workload 'cache' of type \
                 'apps/v1.Deployment' is already managed by the HorizontalPodAutoscaler 'foreign'"
            ),
            "{with_hpa:?}"
        );
        // No spec at all: the defaulter's replicas.
        let bare = judge(&index, "ns", &json!({"metadata": {"name": "cache"}}));
        assert_eq!(bare.errors[0].field, "spec.replicas");
        assert_eq!(bare.errors[0].rule(), Rule::AutoscalerConflict);
        assert_eq!(bare.errors[0].kind, ErrorKind::Autoscaled);
    }

    #[test]
    fn the_operator_s_own_hpa_is_not_another() {
        let own = Controller::Memcached("cache".into());
        for controller in [own.clone(), Controller::None] {
            let index = index(&[(Kind::Hpa, "ns", "cache", "cache", controller.clone())]);
            for spec in [AUTOSCALING(), json!({})] {
                assert!(
                    errors(&index, &memcached("cache", spec)).is_empty(),
                    "{controller:?}"
                );
            }
        }
        // Named otherwise, or controlled by someone else: another autoscaler.
        for (name, controller) in [
            ("cache-extra", own.clone()),
            ("cache", Controller::Memcached("other".into())),
            ("cache", Controller::Other),
        ] {
            let index = index(&[(Kind::Hpa, "ns", name, "cache", controller.clone())]);
            let errors = errors(&index, &memcached("cache", AUTOSCALING()));
            assert_eq!(errors.len(), 1, "{name} {controller:?}");
            assert!(
                errors[0].contains(&format!("HorizontalPodAutoscaler '{name}'")),
                "{errors:?}"
            );
        }
    }

    #[test]
    fn keda_s_hpa_counts_as_its_scaled_object_once() {
        let index = index(&[
            (
                Kind::Hpa,
                "ns",
                "keda-hpa-so",
                "cache",
                Controller::ScaledObject("so".into()),
            ),
            (Kind::ScaledObject, "ns", "so", "cache", Controller::None),
        ]);
        let errors = errors(&index, &memcached("cache", json!({})));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("is already managed by the ScaledObject 'so'"),
            "{errors:?}"
        );
    }

    #[test]
    fn every_other_autoscaler_is_named_in_a_stable_order() {
        let index = index(&[
            (Kind::ScaledObject, "ns", "a-so", "cache", Controller::None),
            (Kind::Hpa, "ns", "z", "cache", Controller::Other),
            (Kind::Hpa, "ns", "b", "cache", Controller::None),
        ]);
        let named: Vec<String> = errors(&index, &memcached("cache", json!({})))
            .iter()
            .map(|e| e.split('\'').nth(5).unwrap().to_owned())
            .collect();
        assert_eq!(named, ["b", "z", "a-so"]);
    }

    #[test]
    fn other_namespaces_and_deployments_never_match() {
        let index = index(&[
            (Kind::Hpa, "other-ns", "h", "cache", Controller::None),
            (
                Kind::ScaledObject,
                "other-ns",
                "so",
                "cache",
                Controller::None,
            ),
            (Kind::Hpa, "ns", "h", "cache-2", Controller::None),
        ]);
        assert!(errors(&index, &memcached("cache", json!({}))).is_empty());
        // generateName on CREATE: no name yet, nothing to look up.
        assert!(errors(&index, &json!({"metadata": {"generateName": "cache-"}})).is_empty());
    }

    #[test]
    fn an_unknown_cluster_admits_with_a_warning() {
        let index = Autoscalers::default();
        let outcome = judge(&index, "ns", &memcached("cache", json!({})));
        assert!(outcome.errors.is_empty());
        assert!(outcome.unchecked);
        assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
        assert!(
            outcome.warnings[0].starts_with(
                "whether another autoscaler already scales Deployment \"cache\" could not be \
                 checked (the HorizontalPodAutoscalers of the cluster are not listed yet)"
            ),
            "{:?}",
            outcome.warnings
        );
        index.list_started(Kind::Hpa);
        index.list_done(Kind::Hpa);
        index.set_sync(
            Kind::ScaledObject,
            Sync::Unavailable("connection refused".into()),
        );
        let outcome = judge(&index, "ns", &memcached("cache", json!({})));
        assert!(outcome.warnings[0].contains("connection refused"));
        // Without a cluster (the `check` subcommand), no rule and no warning.
        let mut bytes = serde_json::to_vec(&memcached("cache", json!({}))).unwrap();
        let tape = simd_json::to_tape(&mut bytes).unwrap();
        let mc = crate::memcached::read(Val::root(&tape)).unwrap();
        let alone = validate_in(&mc, None);
        assert!(alone.warnings.is_empty() && !alone.unchecked);
    }

    /// Ratcheting: the conflict the stored object already had is kept (a warning), whatever
    /// else the update changes; a conflict the update introduces is not.
    #[test]
    fn a_stored_conflict_is_ratcheted() {
        let index = index(&[(Kind::Hpa, "ns", "foreign", "cache", Controller::None)]);
        let errs = |object: &J| judge(&index, "ns", object).errors;
        let ratcheted = |old: &J, new: &J| {
            let mut a = serde_json::to_vec(new).unwrap();
            let mut b = serde_json::to_vec(old).unwrap();
            let ta = simd_json::to_tape(&mut a).unwrap();
            let tb = simd_json::to_tape(&mut b).unwrap();
            ratchet(errs(new), &errs(old), Val::root(&ta), Val::root(&tb))
        };
        let old = memcached("cache", json!({"replicas": 1}));
        let scaled = memcached("cache", json!({"replicas": 5, "image": "memcached:1.6.39"}));
        let (new, stored) = ratcheted(&old, &scaled);
        assert!(new.is_empty(), "{new:?}");
        assert_eq!(stored.len(), 1);
        // Switching autoscaling on while a foreign HPA is there is a new conflict (two HPAs).
        let (new, stored) = ratcheted(&old, &memcached("cache", AUTOSCALING()));
        assert_eq!(new.len(), 1);
        assert!(stored.is_empty());
    }
}
