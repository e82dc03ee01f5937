//! `spec.autoscaling.behavior`: the scale-up and scale-down rules, as `validateBehavior` checks
//! them after `SetDefaults`.

use super::path::Path;
use super::{
    Checker, MAX_PERIOD_SECONDS, MAX_STABILIZATION_WINDOW_SECONDS, POLICY_TYPES, SELECT_POLICIES,
};
use crate::json::Val;
use crate::memcached::validate::{BadValue, ErrorKind, go_quote, read_quantity};

impl Checker<'_> {
    /// `validateScalingRules` after `SetDefaults`: nil `selectPolicy` and `policies` are filled
    /// in, and so is an empty `policies` list (the operator's Go types drop it: `omitempty`).
    pub(super) fn scaling_rules(&mut self, rules: Val<'_, '_>, path: &Path<'_>) {
        let rules = Some(rules);
        if let Some(w) = self.int32(rules, "stabilizationWindowSeconds", path) {
            let p = path.child("stabilizationWindowSeconds");
            if w < 0 {
                self.push(
                    &p,
                    ErrorKind::Invalid(w.to_string()),
                    "must be greater than or equal to zero",
                );
            }
            if w > MAX_STABILIZATION_WINDOW_SECONDS {
                let detail =
                    format!("must be less than or equal to {MAX_STABILIZATION_WINDOW_SECONDS}");
                self.push(&p, ErrorKind::Invalid(w.to_string()), detail);
            }
        }
        if let Some(v) = rules
            .and_then(|r| r.get("tolerance"))
            .filter(|v| !v.is_null())
        {
            let p = path.child("tolerance");
            match read_quantity(v) {
                Ok(q) if q.value < crate::memcached::quantity::Quantity::from_json_i64(0) => self
                    .push(
                        &p,
                        ErrorKind::Invalid(go_quote(&q.go_string())),
                        "must be greater than or equal to 0",
                    ),
                Ok(_) => {}
                Err(BadValue { value, detail }) => self.push(
                    &p,
                    ErrorKind::Invalid(value),
                    format!("{detail}; a tolerance is a fraction, e.g. 0.05 for 5%"),
                ),
            }
        }
        if rules
            .and_then(|r| r.get("selectPolicy"))
            .is_some_and(|v| !v.is_null())
        {
            let policy = self.string(rules, "selectPolicy", path);
            if !SELECT_POLICIES.contains(&policy) {
                self.not_supported(&path.child("selectPolicy"), policy, &SELECT_POLICIES);
            }
        }
        let policies_path = path.child("policies");
        let Some(policies) = rules
            .and_then(|r| r.get("policies"))
            .filter(|v| !v.is_null())
        else {
            return;
        };
        let Some(items) = policies.items() else {
            return self.type_error(policies, &policies_path, "an array");
        };
        for (j, policy) in items.enumerate() {
            let p = policies_path.index(j);
            let policy = if policy.is_null() {
                None
            } else {
                self.object(Some(policy), &p)
            };
            self.scaling_policy(policy, &p);
        }
    }

    /// `validateScalingPolicy` (a null policy decodes as the zero policy).
    fn scaling_policy(&mut self, policy: Option<Val<'_, '_>>, path: &Path<'_>) {
        let ty = self.string(policy, "type", path);
        if !POLICY_TYPES.contains(&ty) {
            self.not_supported(&path.child("type"), ty, &POLICY_TYPES);
        }
        let value = self.int32(policy, "value", path).unwrap_or(0);
        if value <= 0 {
            self.push(
                &path.child("value"),
                ErrorKind::Invalid(value.to_string()),
                "must be greater than zero",
            );
        }
        let period = self.int32(policy, "periodSeconds", path).unwrap_or(0);
        let p = path.child("periodSeconds");
        if period <= 0 {
            self.push(
                &p,
                ErrorKind::Invalid(period.to_string()),
                "must be greater than zero",
            );
        }
        if period > MAX_PERIOD_SECONDS {
            let detail = format!("must be less than or equal to {MAX_PERIOD_SECONDS}");
            self.push(&p, ErrorKind::Invalid(period.to_string()), detail);
        }
    }
}
