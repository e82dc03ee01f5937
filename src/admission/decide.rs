//! The decision on a parsed request: defaulting (a patch) or validation (a verdict, ratcheted
//! against `oldObject`, then enforced), written as the AdmissionReview response.

use super::Webhook;
use super::enforcement::{Actions, Enforcement, Violations};
use super::envelope::{ApiVersion, Operation, Request};
use super::pipeline::Review;
use super::response::{self, Audit, Cause, Response, Status};
use crate::json::Val;
use crate::memcached::validate::FieldError;
use crate::memcached::{self, defaults, validate};
use crate::patch::Patch;

/// What a [`Review`] decided, for the log line and the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict {
    /// `request.operation` (`None` when unknown).
    pub operation: Option<Operation>,
    pub allowed: bool,
    /// `response.status.code` (200 when allowed).
    pub code: u16,
    pub patched: bool,
    pub warnings: usize,
    /// The validation violations found, by what was done with them (all zero when valid).
    pub violations: Violations,
}

/// Decides on a parsed request and writes the response.
pub(super) fn decide(
    review: &Review<'_>,
    version: ApiVersion,
    req: &Request<'_, '_>,
    patch_buf: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Verdict {
    let allow = |out: &mut Vec<u8>| {
        response::write(out, version, req.uid, &Response::allowed());
        Verdict {
            operation: req.operation,
            allowed: true,
            code: 200,
            patched: false,
            warnings: 0,
            violations: Violations::default(),
        }
    };
    let bad = |out: &mut Vec<u8>, message: &str| {
        let status = Status::bad_request(message);
        response::write(out, version, req.uid, &Response::denied(&status));
        Verdict {
            operation: req.operation,
            allowed: false,
            code: status.code,
            patched: false,
            warnings: 0,
            violations: Violations::default(),
        }
    };

    let Some(operation) = req.operation else {
        let message = format!(
            "request.operation: expected one of CREATE, UPDATE, DELETE, CONNECT, found {:?}",
            req.operation_raw
        );
        return bad(out, &message);
    };
    match operation {
        Operation::Delete | Operation::Connect => return allow(out),
        Operation::Create | Operation::Update => {}
    }
    // Status and scale updates carry the whole object but may not change its spec.
    if !req.sub_resource.is_empty() {
        return allow(out);
    }
    if req.group != memcached::GROUP || req.kind != memcached::KIND {
        let message = format!(
            "this webhook admits {}/{} objects only, but the request is for {:?} in group {:?}; \
             check the webhook configuration's rules",
            memcached::GROUP,
            memcached::KIND,
            req.kind,
            req.group
        );
        return bad(out, &message);
    }
    let Some(object) = req.object else {
        return bad(out, "request.object is missing on a CREATE or UPDATE");
    };
    let cluster = review.autoscalers.map(|autoscalers| validate::Cluster {
        namespace: req.namespace,
        autoscalers,
    });
    let mc = match memcached::read(object) {
        Ok(mc) => mc,
        Err(malformed) => {
            return refuse_malformed(
                review.webhook,
                cluster,
                version,
                req,
                object,
                malformed,
                out,
            );
        }
    };
    // Deletion is never blocked: the update that removes the last finalizer must go through,
    // and defaulting a terminating object would only give it a way to fail.
    if mc.terminating {
        return allow(out);
    }

    match review.webhook {
        Webhook::Mutate => {
            let mut warnings = Vec::new();
            let mut patch = Patch::new(patch_buf);
            defaults::apply(&mc.spec, &mut patch, &mut warnings);
            let changes = patch.changes();
            let patch = patch.finish();
            let answer = Response {
                patch,
                warnings: &warnings,
                audit: Audit::Changes(&changes),
                ..Response::allowed()
            };
            admitted(version, req, &answer, Violations::default(), out)
        }
        Webhook::Validate => {
            let outcome = validate::validate_in(&mc, cluster);
            if outcome.unchecked
                && let Some(autoscalers) = review.autoscalers
            {
                autoscalers.stats.unchecked.inc();
            }
            if outcome.errors.is_empty() {
                let answer = Response {
                    warnings: &outcome.warnings,
                    ..Response::allowed()
                };
                return admitted(version, req, &answer, Violations::default(), out);
            }
            let judged = Judged {
                cluster,
                version,
                req,
                object,
                name: mc.name,
            };
            judge(&judged, review.actions, outcome, out)
        }
    }
}

/// The answer to an object with wrongly typed fields, each one a cause. The defaulting webhook
/// cannot patch what it cannot read: 400, every cause in its message. The validating webhook
/// answers 422 with every type error and every rule violation of what it could read, as the
/// apiserver lists every cause it gets. Off the hot path.
#[cold]
fn refuse_malformed(
    webhook: Webhook,
    cluster: Option<validate::Cluster<'_>>,
    version: ApiVersion,
    req: &Request<'_, '_>,
    object: Val<'_, '_>,
    malformed: Box<memcached::Malformed<'_, '_>>,
    out: &mut Vec<u8>,
) -> Verdict {
    let mut causes: Vec<Cause> = malformed.errors.iter().map(Cause::from).collect();
    let mut violations = Violations::default();
    let (code, reason, message) = match webhook {
        Webhook::Mutate => (400, "BadRequest", malformed.to_string()),
        Webhook::Validate => {
            let outcome = validate::validate_in(&malformed.partial, cluster);
            if outcome.unchecked
                && let Some(cluster) = cluster
            {
                cluster.autoscalers.stats.unchecked.inc();
            }
            let errors: Vec<FieldError> = outcome
                .errors
                .into_iter()
                .filter(|e| !malformed.covers(&e.field))
                .collect();
            let errors = if errors.is_empty() {
                errors
            } else {
                ratcheted(cluster, req, errors, object).0
            };
            for e in &errors {
                violations.add(Enforcement::Deny, e.rule());
            }
            causes.extend(errors.iter().map(Cause::from));
            let name = name_of(malformed.partial.name, req);
            let texts = malformed
                .errors
                .iter()
                .map(ToString::to_string)
                .chain(errors.iter().map(FieldError::message));
            (422, "Invalid", invalid_message(name, texts))
        }
    };
    let details = response::Details {
        name: name_of(malformed.partial.name, req),
        group: memcached::GROUP,
        kind: memcached::KIND,
        causes: &causes,
    };
    let status = Status {
        code,
        reason,
        message: &message,
        details: Some(details),
    };
    response::write(out, version, req.uid, &Response::denied(&status));
    Verdict {
        operation: req.operation,
        allowed: false,
        code,
        patched: false,
        warnings: 0,
        violations,
    }
}

/// The object's name for a denial: `metadata.name`, else the request's.
fn name_of<'a>(name: &'a str, req: &Request<'a, '_>) -> &'a str {
    if name.is_empty() { req.name } else { name }
}

/// Splits `errors` into the new ones and those `oldObject` already had (ratcheting, on UPDATE);
/// all are new when `oldObject` cannot be read. The stored object is parsed only here, when a
/// violation needs it.
fn ratcheted(
    cluster: Option<validate::Cluster<'_>>,
    req: &Request<'_, '_>,
    errors: Vec<FieldError>,
    object: Val<'_, '_>,
) -> (Vec<FieldError>, Vec<FieldError>) {
    if req.operation != Some(Operation::Update) {
        return (errors, Vec::new());
    }
    let (mut text, tape);
    let old_object = match req.old_object_text {
        Some(old) => {
            text = old.to_vec();
            text.resize(old.len() + simd_json::INPUT_PADDING, b' ');
            let mut parsed = simd_json::Tape::null();
            let mut buffers = simd_json::Buffers::new(old.len());
            match simd_json::fill_tape_padded(&mut text, old.len(), &mut buffers, &mut parsed) {
                Ok(()) => {
                    tape = parsed;
                    Some(Val::root(&tape))
                }
                Err(e) => {
                    judged_alone(req, "is not JSON", &e);
                    None
                }
            }
        }
        None => req.old_object,
    };
    let Some(old) = old_object else {
        return (errors, Vec::new());
    };
    match memcached::read(old) {
        Ok(old_mc) => {
            let old_errors = validate::validate_in(&old_mc, cluster).errors;
            validate::ratchet(errors, &old_errors, object, old)
        }
        Err(e) => {
            judged_alone(req, "cannot be read", &e);
            (errors, Vec::new())
        }
    }
}

/// Logs that `oldObject` could not be judged (`why`), so the update is judged without it.
fn judged_alone(req: &Request<'_, '_>, why: &str, error: &dyn std::fmt::Display) {
    tracing::info!(
        uid = req.uid,
        namespace = req.namespace,
        name = req.name,
        error = %error,
        "oldObject {why}, so no violation is ratcheted: the update is judged alone"
    );
}

/// The warning for a violation the stored object already had.
pub(super) const RATCHETED: &str = " (already stored; allowed until this field changes)";

/// The object [`judge`] answers for, and the request it came in.
struct Judged<'r, 't, 'i> {
    cluster: Option<validate::Cluster<'r>>,
    version: ApiVersion,
    req: &'r Request<'t, 'i>,
    object: Val<'t, 'i>,
    /// `metadata.name` as the view read it.
    name: &'r str,
}

/// The answer to an object with violations: ratcheting against `oldObject` on UPDATE, then
/// `actions`. Off the hot path: a valid object never gets here. An `oldObject` the pipeline
/// skipped is parsed here, on its own from its bytes, as only ratcheting reads it.
#[cold]
fn judge(
    judged: &Judged<'_, '_, '_>,
    actions: Actions,
    outcome: validate::Outcome,
    out: &mut Vec<u8>,
) -> Verdict {
    let &Judged {
        cluster,
        version,
        req,
        object,
        name,
    } = judged;
    let validate::Outcome {
        errors,
        warnings: advice,
        unchecked: _,
    } = outcome;
    let (errors, stored) = ratcheted(cluster, req, errors, object);

    let mut violations = Violations::default();
    let mut warnings = Vec::with_capacity(stored.len() + errors.len() + advice.len());
    for e in &stored {
        violations.add(Enforcement::Ratcheted, e.rule());
        warnings.push(format!("{e}{RATCHETED}"));
    }
    for e in &errors {
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
        for e in errors.iter().chain(&stored) {
            violations.add(Enforcement::Audit, e.rule());
        }
        failures.extend(errors.iter().map(Cause::from));
        failures.extend(stored.iter().map(|e| {
            let mut cause = Cause::from(e);
            cause.message.push_str(RATCHETED);
            cause
        }));
    }
    let audit = Audit::Failures(&failures);

    if errors.is_empty() || !actions.deny {
        let answer = Response {
            warnings: &warnings,
            audit,
            ..Response::allowed()
        };
        return admitted(version, req, &answer, violations, out);
    }
    let name = name_of(name, req);
    let message = invalid_message(name, errors.iter().map(FieldError::message));
    let causes: Vec<Cause> = errors.iter().map(Cause::from).collect();
    let details = response::Details {
        name,
        group: memcached::GROUP,
        kind: memcached::KIND,
        causes: &causes,
    };
    let status = Status {
        code: 422,
        reason: "Invalid",
        message: &message,
        details: Some(details),
    };
    let answer = Response {
        warnings: &warnings,
        audit,
        ..Response::denied(&status)
    };
    response::write(out, version, req.uid, &answer);
    Verdict {
        operation: req.operation,
        allowed: false,
        code: 422,
        patched: false,
        warnings: warnings.len(),
        violations,
    }
}

/// Writes an allowing `answer` and its verdict.
fn admitted(
    version: ApiVersion,
    req: &Request<'_, '_>,
    answer: &Response<'_>,
    violations: Violations,
    out: &mut Vec<u8>,
) -> Verdict {
    response::write(out, version, req.uid, answer);
    Verdict {
        operation: req.operation,
        allowed: true,
        code: 200,
        patched: answer.patch.is_some(),
        warnings: answer.warnings.len(),
        violations,
    }
}

/// apimachinery's `NewInvalid` message: `Memcached.memcached.c5c3.io "<name>" is invalid: <e>` with
/// one error, or `[e1, e2]` (duplicates removed) with several.
fn invalid_message(name: &str, errors: impl Iterator<Item = String>) -> String {
    use std::fmt::Write as _;
    let mut seen: Vec<String> = Vec::new();
    for text in errors {
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    // Sized once, as `FieldError::message` is: the texts, their separators, the head.
    let texts: usize = seen.iter().map(|text| text.len() + 2).sum();
    let mut message = String::with_capacity(texts + name.len() + 64);
    let _ = write!(
        message,
        "{}.{} {name:?} is invalid: ",
        memcached::KIND,
        memcached::GROUP
    );
    if let [one] = seen.as_slice() {
        message.push_str(one);
    } else {
        message.push('[');
        for (i, text) in seen.iter().enumerate() {
            if i > 0 {
                message.push_str(", ");
            }
            message.push_str(text);
        }
        message.push(']');
    }
    message
}
