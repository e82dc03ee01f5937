//! Enforcement: what a violation does (`--validation-actions`), and the counts of what was done
//! with each, by rule, for the metrics.

use super::response::Cause;
use crate::memcached::validate::{FieldError, Rule};

/// `--validation-actions`: what a violation does, as `validationActions` of a Kubernetes
/// ValidatingAdmissionPolicyBinding. `Warn` and `Audit` let a cluster operator see what `Deny`
/// would refuse before turning it on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Actions {
    /// Refuse the request (422) when it introduces a violation.
    pub deny: bool,
    /// Admit it and return every violation as a warning.
    pub warn: bool,
    /// Record the violations in the apiserver's audit log (`validation_failure`).
    pub audit: bool,
}

impl Actions {
    /// The default: today's behaviour.
    pub const DENY: Actions = Actions {
        deny: true,
        warn: false,
        audit: false,
    };

    /// Parses `Deny`, `Warn`, `Audit` or a comma-separated set of them (spelled as in the
    /// Kubernetes API). Deny with Warn is refused, as the apiserver refuses it in a binding:
    /// a denial already shows every violation.
    pub fn parse(s: &str) -> Result<Actions, String> {
        let mut actions = Actions {
            deny: false,
            warn: false,
            audit: false,
        };
        for action in s.split(',') {
            let slot = match action.trim() {
                "Deny" => &mut actions.deny,
                "Warn" => &mut actions.warn,
                "Audit" => &mut actions.audit,
                other => {
                    return Err(format!(
                        "unknown validation action {other:?}; use Deny, Warn or Audit \
                         (case-sensitive), or Deny,Audit or Warn,Audit"
                    ));
                }
            };
            if std::mem::replace(slot, true) {
                return Err(format!("{:?} is listed twice", action.trim()));
            }
        }
        if actions.deny && actions.warn {
            return Err(
                "Deny and Warn may not be combined (a denial already returns every \
                        violation); use Deny,Audit, or Warn,Audit while rolling out"
                    .to_owned(),
            );
        }
        Ok(actions)
    }
}

/// What was done with a violation, the `action` label of the violations metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// It refused the request (`Deny`).
    Deny,
    /// It came back as a warning (`Warn`).
    Warn,
    /// It went into the audit annotation (`Audit`).
    Audit,
    /// The stored object had it already: admitted with a warning whatever the actions are.
    Ratcheted,
}

impl Enforcement {
    pub const ALL: [Enforcement; 4] = [
        Enforcement::Deny,
        Enforcement::Warn,
        Enforcement::Audit,
        Enforcement::Ratcheted,
    ];

    pub const fn label(self) -> &'static str {
        match self {
            Enforcement::Deny => "deny",
            Enforcement::Warn => "warn",
            Enforcement::Audit => "audit",
            Enforcement::Ratcheted => "ratcheted",
        }
    }
}

/// Violation counts by enforcement and rule, carried in the [`Verdict`](super::Verdict) to the metrics: a fixed
/// array, so a valid request (all zero) pays nothing to build it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    counts: [[u32; Rule::ALL.len()]; Enforcement::ALL.len()],
    /// The sum of `counts`, so a valid request's metrics check one number.
    total: u32,
}

impl Violations {
    pub(super) fn add(&mut self, enforcement: Enforcement, rule: Rule) {
        let n = &mut self.counts[enforcement as usize][rule.index()];
        *n = n.saturating_add(1);
        self.total = self.total.saturating_add(1);
    }

    /// The non-zero counts.
    pub fn iter(&self) -> impl Iterator<Item = (Enforcement, Rule, u32)> + '_ {
        Enforcement::ALL.into_iter().flat_map(move |e| {
            Rule::ALL
                .into_iter()
                .map(move |r| (e, r, self.counts[e as usize][r.index()]))
                .filter(|&(_, _, n)| n > 0)
        })
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

/// The warning for a violation the stored object already had.
pub(super) const RATCHETED: &str = " (already stored; allowed until this field changes)";

/// What `--validation-actions` make of a review's violations.
pub(super) struct Enforced {
    pub violations: Violations,
    /// The warnings to return: ratcheted violations, warned ones, then validation's advice.
    pub warnings: Vec<String>,
    /// The audit annotation's causes (`Audit`), ratcheted ones marked.
    pub failures: Vec<Cause>,
}

/// Applies `actions` to the new violations (`errors`), and ratcheting's warning to those the
/// stored object already had (`stored`).
pub(super) fn enforce(
    actions: Actions,
    errors: &[FieldError],
    stored: &[FieldError],
    advice: Vec<String>,
) -> Enforced {
    let mut violations = Violations::default();
    let mut warnings = Vec::with_capacity(stored.len() + errors.len() + advice.len());
    for e in stored {
        violations.add(Enforcement::Ratcheted, e.rule());
        warnings.push(format!("{e}{RATCHETED}"));
    }
    for e in errors {
        if actions.deny {
            violations.add(Enforcement::Deny, e.rule());
        }
        if actions.warn {
            violations.add(Enforcement::Warn, e.rule());
            warnings.push(e.message());
        }
    }
    warnings.extend(advice);
    let mut failures = Vec::new();
    if actions.audit {
        for e in errors.iter().chain(stored) {
            violations.add(Enforcement::Audit, e.rule());
        }
        failures.extend(errors.iter().map(Cause::from));
        failures.extend(stored.iter().map(|e| {
            let mut cause = Cause::from(e);
            cause.message.push_str(RATCHETED);
            cause
        }));
    }
    Enforced {
        violations,
        warnings,
        failures,
    }
}
