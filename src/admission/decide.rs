//! The decision on a parsed request: defaulting (a patch) or validation (a verdict, ratcheted
//! against `oldObject`, then enforced), written as the AdmissionReview response.

use super::Webhook;
use super::enforcement::{Actions, Enforced, Enforcement, Violations, enforce};
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
    let object = match judged_object(req) {
        Ok(object) => object,
        Err(Unjudged::Allowed) => return allowed(version, req, out),
        Err(Unjudged::Bad(message)) => return bad_request(version, req, &message, out),
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
        return allowed(version, req, out);
    }
    match review.webhook {
        Webhook::Mutate => defaulted(version, req, &mc, patch_buf, out),
        Webhook::Validate => {
            let outcome = validate::validate_in(&mc, cluster);
            count_unchecked(&outcome, cluster);
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

/// The defaulting webhook's answer: the patch that fills in what `mc`'s spec leaves out.
fn defaulted(
    version: ApiVersion,
    req: &Request<'_, '_>,
    mc: &memcached::Memcached<'_, '_>,
    patch_buf: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> Verdict {
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

/// Why a request's object is not judged.
enum Unjudged {
    /// DELETE, CONNECT or a subresource: allowed untouched.
    Allowed,
    /// Not a request the webhooks can judge: 400 with this message.
    Bad(String),
}

/// The object of a request the webhooks judge: a CREATE or UPDATE of a Memcached's main
/// resource.
fn judged_object<'t, 'i>(req: &Request<'t, 'i>) -> Result<Val<'t, 'i>, Unjudged> {
    let Some(operation) = req.operation else {
        return Err(Unjudged::Bad(format!(
            "request.operation: expected one of CREATE, UPDATE, DELETE, CONNECT, found {:?}",
            req.operation_raw
        )));
    };
    // Status and scale updates carry the whole object but may not change its spec.
    if matches!(operation, Operation::Delete | Operation::Connect) || !req.sub_resource.is_empty() {
        return Err(Unjudged::Allowed);
    }
    if req.group != memcached::GROUP || req.kind != memcached::KIND {
        return Err(Unjudged::Bad(format!(
            "this webhook admits {}/{} objects only, but the request is for {:?} in group {:?}; \
             check the webhook configuration's rules",
            memcached::GROUP,
            memcached::KIND,
            req.kind,
            req.group
        )));
    }
    req.object
        .ok_or_else(|| Unjudged::Bad("request.object is missing on a CREATE or UPDATE".to_owned()))
}

/// Writes a 400 denial saying `message`, and its verdict.
fn bad_request(
    version: ApiVersion,
    req: &Request<'_, '_>,
    message: &str,
    out: &mut Vec<u8>,
) -> Verdict {
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
}

/// Counts a validation whose autoscaler-conflict rule could not run (its warning says why).
fn count_unchecked(outcome: &validate::Outcome, cluster: Option<validate::Cluster<'_>>) {
    if outcome.unchecked
        && let Some(cluster) = cluster
    {
        cluster.autoscalers.stats.unchecked.inc();
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
            count_unchecked(&outcome, cluster);
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
    let Enforced {
        violations,
        warnings,
        failures,
    } = enforce(actions, &errors, &stored, advice);
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

/// Writes a plain allowing answer (no patch, no warning) and its verdict.
fn allowed(version: ApiVersion, req: &Request<'_, '_>, out: &mut Vec<u8>) -> Verdict {
    admitted(
        version,
        req,
        &Response::allowed(),
        Violations::default(),
        out,
    )
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
