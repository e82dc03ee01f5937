//! AdmissionReview in, AdmissionReview out: the wire contract with the kube-apiserver.
//!
//! The response echoes the request's `apiVersion` (`admission.k8s.io/v1` or `v1beta1`) with
//! kind `AdmissionReview` and `response.uid` = `request.uid`; a patch is the standard base64 of
//! an RFC 6902 array and always comes with `patchType: "JSONPatch"`. A denial is HTTP 200 with
//! `allowed: false`; only a body that is not an AdmissionReview at all gets an HTTP error.

mod managed_fields;
pub mod response;

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::time::Instant;

use simd_json::{Buffers, Tape};

use crate::json::{self, TypeError, Val};
use crate::memcached::validate::{FieldError, Rule};
use crate::memcached::{self, defaults, validate};
use crate::patch::Patch;
use response::{Audit, Cause, Response, Status};

/// Which webhook a request was sent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Webhook {
    /// The defaulting (mutating) webhook.
    Mutate,
    /// The validating webhook.
    Validate,
}

impl Webhook {
    /// The conventional Kubebuilder path the webhook configuration points at.
    pub const fn path(self) -> &'static str {
        match self {
            Webhook::Mutate => MUTATE_PATH,
            Webhook::Validate => VALIDATE_PATH,
        }
    }
}

/// The mutating webhook's path (the apiserver appends `?timeout=10s`).
pub const MUTATE_PATH: &str = "/mutate-memcached-c5c3-io-v1beta1-memcached";
/// The validating webhook's path.
pub const VALIDATE_PATH: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";

/// `apiVersion` of the AdmissionReview, answered in kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiVersion {
    V1,
    V1Beta1,
}

impl ApiVersion {
    pub const fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1 => "admission.k8s.io/v1",
            ApiVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// `request.operation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// `request` (AdmissionRequest): the fields the webhooks use.
#[derive(Debug)]
pub struct Request<'t, 'i> {
    /// `uid`: tracks the round trip between the kube-apiserver and the webhook; echoed back.
    pub uid: &'i str,
    /// `kind.group` of the object being admitted.
    pub group: &'i str,
    /// `kind.kind` of the object being admitted.
    pub kind: &'i str,
    /// `subResource` ("" for the main resource).
    pub sub_resource: &'i str,
    /// `name` (may be empty on CREATE with `generateName`).
    pub name: &'i str,
    /// `namespace`.
    pub namespace: &'i str,
    /// `operation`; `None` when the value is not one Kubernetes defines.
    pub operation: Option<Operation>,
    /// The raw `operation` value, for the log and the error message.
    pub operation_raw: &'i str,
    /// `object`: absent or null on DELETE.
    pub object: Option<Val<'t, 'i>>,
    /// `oldObject`: the stored object on UPDATE. Only located here (the tape holds it anyway);
    /// it is read and judged only when `object` has a violation, for ratcheting.
    pub old_object: Option<Val<'t, 'i>>,
}

/// Why a body is not an AdmissionReview this server can answer (HTTP 400).
#[derive(Debug)]
pub enum BadReview {
    /// The body is empty.
    Empty,
    /// The body is not JSON (or too deeply nested for it); `truncated` when it stops mid-value.
    Json {
        error: simd_json::Error,
        truncated: bool,
    },
    /// A required member is missing or has the wrong type.
    Shape(TypeError),
    /// `apiVersion`/`kind` name something other than an AdmissionReview we speak.
    NotAdmissionReview { api_version: String, kind: String },
}

impl fmt::Display for BadReview {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BadReview::Empty => {
                f.write_str("the request body is empty; expected an AdmissionReview")
            }
            BadReview::Json { error, truncated } => {
                use simd_json::ErrorType as T;
                let what = match error.error() {
                    T::InvalidUtf8 => "it is not valid UTF-8",
                    T::DepthLimitExceeded => "it nests deeper than 1024 levels",
                    _ if *truncated => "it ends in the middle of a value (truncated)",
                    _ => "it is not valid JSON",
                };
                write!(
                    f,
                    "the request body is not an AdmissionReview: {what} (near byte {})",
                    error.index()
                )
            }
            BadReview::Shape(e) => write!(f, "the request body is not an AdmissionReview: {e}"),
            BadReview::NotAdmissionReview { api_version, kind } => write!(
                f,
                "expected apiVersion admission.k8s.io/v1 or admission.k8s.io/v1beta1 and kind AdmissionReview, \
                 found apiVersion {api_version:?} and kind {kind:?}"
            ),
        }
    }
}

impl std::error::Error for BadReview {}

impl From<TypeError> for BadReview {
    fn from(e: TypeError) -> Self {
        BadReview::Shape(e)
    }
}

/// Reads the envelope: `apiVersion`, `kind` and the `request` fields.
pub fn parse<'t, 'i>(root: Val<'t, 'i>) -> Result<(ApiVersion, Request<'t, 'i>), BadReview> {
    let (mut api_version, mut kind, mut request) = ("", "", None);
    for (key, v) in json::object(root, "(root)")? {
        match key {
            "apiVersion" => api_version = json::string(v, "apiVersion")?,
            "kind" => kind = json::string(v, "kind")?,
            "request" => request = Some(v),
            _ => {}
        }
    }
    let version = match (api_version, kind) {
        ("admission.k8s.io/v1", "AdmissionReview") => ApiVersion::V1,
        ("admission.k8s.io/v1beta1", "AdmissionReview") => ApiVersion::V1Beta1,
        _ => {
            return Err(BadReview::NotAdmissionReview {
                api_version: api_version.into(),
                kind: kind.into(),
            });
        }
    };
    let missing = |field| TypeError {
        field: Cow::Borrowed(field),
        expected: "a value",
        found: Cow::Borrowed("none"),
    };
    let request = request
        .filter(|r| !r.is_null())
        .ok_or_else(|| missing("request"))?;
    let mut req = Request {
        uid: "",
        group: "",
        kind: "",
        sub_resource: "",
        name: "",
        namespace: "",
        operation: None,
        operation_raw: "",
        object: None,
        old_object: None,
    };
    for (key, v) in json::object(request, "request")? {
        match key {
            "uid" => req.uid = json::string(v, "request.uid")?,
            "kind" => {
                for (key, v) in json::object(v, "request.kind")? {
                    match key {
                        "group" => req.group = json::string(v, "request.kind.group")?,
                        "kind" => req.kind = json::string(v, "request.kind.kind")?,
                        _ => {}
                    }
                }
            }
            "subResource" if !v.is_null() => {
                req.sub_resource = json::string(v, "request.subResource")?
            }
            "name" if !v.is_null() => req.name = json::string(v, "request.name")?,
            "namespace" if !v.is_null() => req.namespace = json::string(v, "request.namespace")?,
            "operation" => req.operation_raw = json::string(v, "request.operation")?,
            "object" if !v.is_null() => req.object = Some(v),
            "oldObject" if !v.is_null() => req.old_object = Some(v),
            _ => {}
        }
    }
    if req.uid.is_empty() {
        return Err(missing("request.uid").into());
    }
    req.operation = match req.operation_raw {
        "CREATE" => Some(Operation::Create),
        "UPDATE" => Some(Operation::Update),
        "DELETE" => Some(Operation::Delete),
        "CONNECT" => Some(Operation::Connect),
        _ => None,
    };
    Ok((version, req))
}

/// What [`review`] decided, for the log line and the metrics.
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

/// Violation counts by enforcement and rule, carried in the [`Verdict`] to the metrics: a fixed
/// array, so a valid request (all zero) pays nothing to build it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    counts: [[u32; Rule::ALL.len()]; Enforcement::ALL.len()],
    /// The sum of `counts`, so a valid request's metrics check one number.
    total: u32,
}

impl Violations {
    fn add(&mut self, enforcement: Enforcement, rule: Rule) {
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

/// Per-thread parser state, reused by every request the thread serves.
struct Scratch {
    buffers: Buffers,
    tape: Option<Tape<'static>>,
    patch: Vec<u8>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            buffers: Buffers::new(16 * 1024),
            tape: Some(Tape::null()),
            patch: Vec::with_capacity(1024),
        }
    }
}

/// Bodies above this leave no buffers behind: a few multi-megabyte reviews (an object near
/// etcd's 1.5 MB limit, twice for UPDATE) must not pin megabytes on every worker thread for
/// good, while the common few-KB review keeps reusing warm buffers.
const RETAIN_BELOW: usize = 256 * 1024;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// Answers one AdmissionReview. `body` holds exactly the request body; it is padded, and
/// blanked and unescaped in place. `original` appends the body's bytes as they arrived to an
/// empty buffer: it is called only when what [`managed_fields`] blanked must be parsed after all.
/// The answer is written into `out`; `Err` means HTTP 400 with its reason.
pub fn review(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    original: impl FnOnce(&mut Vec<u8>),
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    review_blanking(webhook, actions, body, Some(original), out, started)
}

/// [`review`] parsing the whole body, `managedFields` included: for a body whose bytes as sent
/// are not kept (the server keeps them only for small HTTP/1 bodies), and to compare with.
pub fn review_whole(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    review_blanking(
        webhook,
        actions,
        body,
        None::<fn(&mut Vec<u8>)>,
        out,
        started,
    )
}

/// [`review`], blanking `managedFields` only when `original` can restore the body.
fn review_blanking(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    original: Option<impl FnOnce(&mut Vec<u8>)>,
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    if body.is_empty() {
        return Err(BadReview::Empty);
    }
    let len = body.len();
    let blanked = match original {
        Some(_) => managed_fields::blank(body),
        None => managed_fields::Blanked::default(),
    };
    body.resize(len + simd_json::INPUT_PADDING, b' ');
    SCRATCH.with(|scratch| {
        let mut guard = scratch.borrow_mut();
        let Scratch {
            buffers,
            tape,
            patch,
        } = &mut *guard;
        let mut tape: Tape<'_> = tape.take().unwrap_or_else(Tape::null).reset();
        let base = body.as_ptr() as usize;
        let mut parsed = simd_json::fill_tape_padded(body, len, buffers, &mut tape);
        if !blanked.is_empty()
            && (parsed.is_err() || !managed_fields::verified(&blanked, base, Val::root(&tape)))
            && let Some(original) = original
        {
            // Something was blanked that a rule might read, or the parse failed and its error
            // must be the one the body as sent gets: parse the body as it arrived.
            tape = tape.reset();
            body.clear();
            original(body);
            debug_assert_eq!(body.len(), len, "the body as sent has the length it had");
            body.resize(len + simd_json::INPUT_PADDING, b' ');
            parsed = simd_json::fill_tape_padded(body, len, buffers, &mut tape);
        }
        let result = match parsed {
            Ok(()) => parse(Val::root(&tape)).map(|(version, request)| {
                let verdict = decide(webhook, actions, version, &request, patch, out);
                log(webhook, &request, &verdict, started);
                verdict
            }),
            Err(error) => Err(BadReview::Json {
                error,
                truncated: false,
            }),
        };
        if len < RETAIN_BELOW {
            guard.tape = Some(tape.reset());
        } else {
            *guard = Scratch::new();
        }
        result.map_err(|bad| match bad {
            BadReview::Json { error, .. } => BadReview::Json {
                error,
                truncated: ends_open(&body[..len]),
            },
            other => other,
        })
    })
}

/// What this thread's scratch holds on to between requests: tape nodes, patch bytes, and the
/// structural indexes the last parse left (simd-json shows their length, not its capacity).
#[cfg(test)]
fn retained() -> (usize, usize, usize) {
    SCRATCH.with(|s| {
        let s = s.borrow();
        (
            s.tape.as_ref().map_or(0, |t| t.0.capacity()),
            s.patch.capacity(),
            s.buffers.structural_indexes().len(),
        )
    })
}

/// Whether JSON text stops inside a string or an unclosed object/array: simd-json reports a
/// plain syntax error there, and "truncated" tells the sender more. Only runs on the error path.
fn ends_open(text: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        match (in_string, b) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'{' | b'[') => depth += 1,
            (false, b'}' | b']') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    in_string || depth > 0
}

/// Decides on a parsed request and writes the response.
fn decide(
    webhook: Webhook,
    actions: Actions,
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
    let mc = match memcached::read(object) {
        Ok(mc) => mc,
        Err(malformed) => {
            return refuse_malformed(webhook, version, req, object, malformed, out);
        }
    };
    // Deletion is never blocked: the update that removes the last finalizer must go through,
    // and defaulting a terminating object would only give it a way to fail.
    if mc.terminating {
        return allow(out);
    }

    match webhook {
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
            let outcome = validate::validate(&mc);
            if outcome.errors.is_empty() {
                let answer = Response {
                    warnings: &outcome.warnings,
                    ..Response::allowed()
                };
                return admitted(version, req, &answer, Violations::default(), out);
            }
            judge(actions, version, req, object, mc.name, outcome, out)
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
    version: ApiVersion,
    req: &Request<'_, '_>,
    object: Val<'_, '_>,
    malformed: Box<memcached::Malformed<'_, '_>>,
    out: &mut Vec<u8>,
) -> Verdict {
    let mut causes: Vec<Cause> = malformed.errors.iter().map(type_cause).collect();
    let mut violations = Violations::default();
    let (code, reason, message) = match webhook {
        Webhook::Mutate => (400, "BadRequest", malformed.to_string()),
        Webhook::Validate => {
            let outcome = validate::validate(&malformed.partial);
            let errors: Vec<FieldError> = outcome
                .errors
                .into_iter()
                .filter(|e| !malformed.covers(&e.field))
                .collect();
            let errors = match (req.operation, req.old_object) {
                (Some(Operation::Update), Some(old)) if !errors.is_empty() => {
                    ratcheted(req, errors, object, old).0
                }
                _ => errors,
            };
            for e in &errors {
                violations.add(Enforcement::Deny, e.rule());
            }
            causes.extend(errors.iter().map(FieldError::cause));
            let name = name_of(malformed.partial.name, req);
            let texts = malformed
                .errors
                .iter()
                .map(ToString::to_string)
                .chain(errors.iter().map(ToString::to_string));
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

/// `status.details.causes[]` of a wrongly typed field, as apimachinery's `field.TypeInvalid`.
fn type_cause(e: &json::TypeError) -> Cause {
    Cause {
        reason: "FieldValueTypeInvalid",
        message: format!("expected {}, found {}", e.expected, e.found),
        field: e.field.to_string(),
    }
}

/// The object's name for a denial: `metadata.name`, else the request's.
fn name_of<'a>(name: &'a str, req: &Request<'a, '_>) -> &'a str {
    if name.is_empty() { req.name } else { name }
}

/// Splits `errors` into the new ones and those `oldObject` already had (ratcheting); all are new
/// when `oldObject` cannot be read.
fn ratcheted(
    req: &Request<'_, '_>,
    errors: Vec<FieldError>,
    object: Val<'_, '_>,
    old: Val<'_, '_>,
) -> (Vec<FieldError>, Vec<FieldError>) {
    match memcached::read(old) {
        Ok(old_mc) => {
            let old_errors = validate::validate(&old_mc).errors;
            validate::ratchet(errors, &old_errors, object, old)
        }
        Err(e) => {
            tracing::info!(
                uid = req.uid,
                namespace = req.namespace,
                name = req.name,
                error = %e,
                "oldObject cannot be read, so no violation is ratcheted: the update is judged alone"
            );
            (errors, Vec::new())
        }
    }
}

/// The warning for a violation the stored object already had.
const RATCHETED: &str = " (already stored; allowed until this field changes)";

/// The answer to an object with violations: ratcheting against `oldObject` on UPDATE, then
/// `actions`. Off the hot path: a valid object never gets here.
#[cold]
fn judge(
    actions: Actions,
    version: ApiVersion,
    req: &Request<'_, '_>,
    object: Val<'_, '_>,
    name: &str,
    outcome: validate::Outcome,
    out: &mut Vec<u8>,
) -> Verdict {
    let validate::Outcome {
        errors,
        warnings: advice,
    } = outcome;
    let (errors, stored) = match (req.operation, req.old_object) {
        (Some(Operation::Update), Some(old)) => ratcheted(req, errors, object, old),
        _ => (errors, Vec::new()),
    };

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
            warnings.push(e.to_string());
        }
    }
    warnings.extend(advice);
    let mut failures = Vec::new();
    if actions.audit {
        for e in errors.iter().chain(&stored) {
            violations.add(Enforcement::Audit, e.rule());
        }
        failures.extend(errors.iter().map(FieldError::cause));
        failures.extend(stored.iter().map(|e| {
            let mut cause = e.cause();
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
    let message = invalid_message(name, errors.iter().map(ToString::to_string));
    let causes: Vec<Cause> = errors.iter().map(FieldError::cause).collect();
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
    let mut message = format!(
        "{}.{} {name:?} is invalid: ",
        memcached::KIND,
        memcached::GROUP
    );
    let mut seen: Vec<String> = Vec::new();
    for text in errors {
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    if let [one] = seen.as_slice() {
        message.push_str(one);
    } else {
        let _ = write!(message, "[{}]", seen.join(", "));
    }
    message
}

/// One line per admission: denials at info, allowed admissions at debug. A line costs more
/// CPU than the decision itself (formatting, the queue, waking the writer thread: 8-17 µs
/// against 3-10 µs, `benches/latency.rs` with `LATENCY_LOG=1`), and the apiserver's audit log
/// already records every call; controller-runtime logs them at V(5) too.
fn log(webhook: Webhook, req: &Request<'_, '_>, verdict: &Verdict, started: Instant) {
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                webhook = webhook.path(),
                uid = req.uid,
                operation = req.operation_raw,
                namespace = req.namespace,
                name = req.name,
                allowed = verdict.allowed,
                code = verdict.code,
                patched = verdict.patched,
                warnings = verdict.warnings,
                elapsed_us = started.elapsed().as_micros() as u64,
                "admission"
            )
        };
    }
    if verdict.allowed {
        line!(tracing::Level::DEBUG);
    } else {
        line!(tracing::Level::INFO);
    }
}

#[cfg(test)]
mod tests;
