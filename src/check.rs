//! `memcached-webhook check`: the webhooks' verdicts on manifests, offline, for CI and GitOps.
//! Each Memcached is put to [`admission::Review`], the pipeline the server answers with: the
//! mutating webhook's patch is applied, then the validating webhook judges the result. There is
//! no cluster here, so the autoscaler-conflict rule (`--autoscaler-conflicts`) is not checked.

pub mod input;
pub mod position;
pub mod yaml;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use clap::ValueEnum;
use serde_json::{Value, json};

use crate::admission::{self, Webhook};
use crate::memcached;
use input::{Object, STDIN, Unreadable};

/// `memcached-webhook check`.
#[derive(Clone, Debug, clap::Args)]
pub struct Args {
    /// Print the objects as the mutating webhook leaves them (denied ones left out, other kinds
    /// unchanged, server-set fields removed); the report then goes to stderr.
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    pub output: Option<Output>,

    /// Exit 1 when any object draws a warning, as when one is denied.
    #[arg(long)]
    pub warnings_as_errors: bool,

    /// The report's format: `text` (`file:line:col: field: message`, as compilers write, for
    /// editors and CI problem matchers) or `json` (one document with every finding's file,
    /// line, column, field, message and severity, for CI annotations).
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    pub report: Report,

    /// Exit 0 when the inputs hold no Kubernetes object at all (by default that is exit 2: a
    /// CI gate pointed at the wrong directory must not pass).
    #[arg(long)]
    pub allow_empty: bool,

    /// Manifests: files, directories (searched recursively for *.yaml, *.yml and *.json), or -
    /// for standard input.
    #[arg(value_name = "FILE|DIR|-", required = true)]
    pub inputs: Vec<PathBuf>,
}

/// `--output`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One YAML document per object.
    Yaml,
    /// One JSON object per object, one after another (a JSON stream).
    Json,
}

/// `--report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Report {
    Text,
    Json,
}

/// Exit status: every object admitted (and no warning, with `--warnings-as-errors`).
pub const ADMITTED: u8 = 0;
/// Exit status: an object was denied (or warned, with `--warnings-as-errors`).
pub const DENIED: u8 = 1;
/// Exit status: an input could not be read, or held no object at all (or the command line is
/// wrong: clap exits 2 too).
pub const UNREADABLE: u8 = 2;

/// What the two webhooks made of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub allowed: bool,
    /// The object after the mutating webhook's patch.
    pub object: Value,
    /// Each reason for a denial.
    pub violations: Vec<Violation>,
    /// Both webhooks' warnings, mutating first.
    pub warnings: Vec<String>,
}

/// One reason for a denial: a cause of the webhook's status, or its message when it names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The field path (`spec.replicas`); empty when the denial names no field.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    /// `field: message`, as apimachinery prints a field error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl Violation {
    fn message(message: String) -> Self {
        Violation {
            field: String::new(),
            message,
        }
    }
}

/// Judges one Memcached as the apiserver would on CREATE: mutate, apply the patch, validate.
/// An object the mutating webhook cannot read (a wrongly typed field) is also put to the
/// validating webhook as it is, whose answer names every wrongly typed field and every rule
/// the rest breaks: the whole list at once, where the apiserver would stop at the first webhook.
pub fn judge(object: &Value) -> Judgement {
    let mut judgement = Judgement {
        allowed: false,
        object: object.clone(),
        violations: Vec::new(),
        warnings: Vec::new(),
    };
    let response = match call(Webhook::Mutate, object) {
        Ok(response) => response,
        Err(message) => {
            judgement.violations.push(Violation::message(message));
            return judgement;
        }
    };
    if !read_answer(&response, &mut judgement) {
        let causes = response["status"]["details"]["causes"].as_array();
        if response["status"]["code"] == 400
            && causes.is_some_and(|c| !c.is_empty())
            && let Ok(validated) = call(Webhook::Validate, object)
            && validated["status"]["code"] == 422
        {
            judgement.violations.clear();
            read_answer(&validated, &mut judgement);
        }
        return judgement;
    }
    if let Some(patch) = response["patch"].as_str()
        && let Err(e) = apply(&mut judgement.object, patch)
    {
        judgement.violations.push(Violation::message(format!(
            "the mutating webhook's patch does not apply, so the apiserver would refuse it: {e}"
        )));
        return judgement;
    }
    match call(Webhook::Validate, &judgement.object) {
        Ok(response) => judgement.allowed = read_answer(&response, &mut judgement),
        Err(message) => judgement.violations.push(Violation::message(message)),
    }
    judgement
}

/// One AdmissionReview through the server's own code; the answer's `response`.
fn call(webhook: Webhook, object: &Value) -> Result<Value, String> {
    let (group, version) = api_version(object)
        .split_once('/')
        .unwrap_or(("", "v1beta1"));
    let metadata = &object["metadata"];
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "memcached-webhook-check",
            "kind": {"group": group, "version": version, "kind": memcached::KIND},
            "resource": {"group": group, "version": version, "resource": "memcacheds"},
            "name": metadata["name"].as_str().unwrap_or(""),
            "namespace": metadata["namespace"].as_str().unwrap_or(""),
            "operation": "CREATE",
            "object": object,
            "oldObject": null,
        },
    });
    let mut body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    // `Review::new` denies: `check` answers what would be refused, whatever a cluster's
    // --validation-actions.
    admission::Review::new(webhook)
        .answer(&mut body, &mut out)
        .map_err(|e| format!("the webhook cannot read the object: {e}"))?;
    let mut answer: Value = serde_json::from_slice(&out)
        .map_err(|e| format!("the webhook's answer is not JSON: {e}"))?;
    Ok(answer["response"].take())
}

/// Collects a response's warnings and violations; whether it allowed the object.
fn read_answer(response: &Value, judgement: &mut Judgement) -> bool {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| w.as_str().map(str::to_owned))
            .collect()
    };
    judgement.warnings.extend(strings(&response["warnings"]));
    if response["allowed"] == true {
        return true;
    }
    let status = &response["status"];
    let causes = status["details"]["causes"].as_array();
    match causes {
        Some(causes) if !causes.is_empty() => {
            for cause in causes {
                judgement.violations.push(Violation {
                    field: cause["field"].as_str().unwrap_or("").to_owned(),
                    message: cause["message"].as_str().unwrap_or("").to_owned(),
                });
            }
        }
        _ => judgement.violations.push(Violation::message(
            status["message"].as_str().unwrap_or("denied").to_owned(),
        )),
    }
    false
}

/// Applies the base64 JSON Patch of an AdmissionResponse.
fn apply(object: &mut Value, patch: &str) -> Result<(), String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(patch)
        .map_err(|e| format!("the patch is not base64: {e}"))?;
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| format!("not a JSON Patch: {e}"))?;
    json_patch::patch(object, &patch).map_err(|e| e.to_string())
}

fn api_version(object: &Value) -> &str {
    object["apiVersion"].as_str().unwrap_or("")
}

/// Whether the webhooks judge this object: kind Memcached in the memcached.c5c3.io group, any
/// version (the webhook configuration's rules name the group and resource).
pub fn is_memcached(object: &Value) -> bool {
    object["kind"] == memcached::KIND
        && api_version(object).split_once('/').map(|(g, _)| g) == Some(memcached::GROUP)
}

/// Fields the apiserver sets itself: dropped before judging (on CREATE it resets them, and a
/// CRD with a status subresource ignores `status`) and from printed objects.
pub fn strip_server_fields(object: &mut Value) {
    let Value::Object(fields) = object else {
        return;
    };
    fields.remove("status");
    if let Some(Value::Object(metadata)) = fields.get_mut("metadata") {
        for name in [
            "managedFields",
            "resourceVersion",
            "uid",
            "creationTimestamp",
            "generation",
            "selfLink",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            metadata.remove(name);
        }
    }
}

/// The counts of the summary line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub judged: usize,
    pub denied: usize,
    pub warned: usize,
    /// Objects that are not a `Memcached` of memcached.c5c3.io: passed over, not judged.
    pub other_kinds: usize,
    pub unreadable: usize,
}

/// How much a finding weighs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// A denial's cause, or input that cannot be read.
    Error,
    /// A webhook's warning.
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One line of the report: what is wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    /// 1-based line and column of the field's value (or of the nearest parent that exists);
    /// 0 when the file as a whole is at fault (it cannot be read).
    pub line: usize,
    pub column: usize,
    /// The field path; empty when the finding names no field.
    pub field: String,
    pub message: String,
    pub severity: Severity,
    /// The object, `namespace/name`; empty for input that cannot be read.
    pub object: String,
}

/// What one object got, for the text report's header line.
struct Judged {
    file: String,
    at: input::At,
    name: String,
    allowed: bool,
    findings: Vec<Finding>,
}

/// Runs the subcommand; returns the exit status.
pub fn run(
    args: &Args,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8 {
    let mut printed = Vec::new();
    let mut summary = Summary::default();
    let mut judged = Vec::new();
    let mut errors = Vec::new();
    let mut ignored_files = Vec::new();
    for arg in &args.inputs {
        let files = if arg.as_os_str() == "-" {
            Ok(vec![arg.clone()])
        } else {
            input::files(arg, &mut ignored_files)
        };
        let files = match files {
            Ok(files) => files,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        for file in files {
            let objects = read_file(&file, stdin).and_then(|(name, bytes)| {
                input::read(&name, bytes).and_then(|text| input::objects(&name, &text))
            });
            match objects {
                Ok(objects) => {
                    for object in objects {
                        judge_into(
                            object,
                            args.output.is_some(),
                            &mut summary,
                            &mut judged,
                            &mut printed,
                        );
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    }
    summary.unreadable = errors.len();
    let empty = summary.judged + summary.other_kinds + summary.unreadable == 0;
    let report = Written {
        judged: &judged,
        errors: &errors,
        ignored_files: &ignored_files,
        empty: empty && !args.allow_empty,
        summary,
    };
    let written = write_all(args, stdout, stderr, &report, &printed);
    if let Err(e) = written {
        let _ = writeln!(
            stderr,
            "memcached-webhook check: cannot write the report: {e}"
        );
        return UNREADABLE;
    }
    if summary.unreadable > 0 || report.empty {
        UNREADABLE
    } else if summary.denied > 0 || (args.warnings_as_errors && summary.warned > 0) {
        DENIED
    } else {
        ADMITTED
    }
}

fn read_file(file: &Path, stdin: &mut dyn Read) -> Result<(String, Vec<u8>), Unreadable> {
    let (name, bytes) = if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        (
            STDIN.to_owned(),
            stdin.read_to_end(&mut bytes).map(|_| bytes),
        )
    } else {
        (file.display().to_string(), std::fs::read(file))
    };
    match bytes {
        Ok(bytes) => Ok((name, bytes)),
        Err(e) => Err(Unreadable {
            file: name,
            at: None,
            message: e.to_string(),
        }),
    }
}

/// Judges one object (or counts it as another kind) and keeps what the report says of it.
fn judge_into(
    mut object: Object,
    keep: bool,
    summary: &mut Summary,
    judged: &mut Vec<Judged>,
    printed: &mut Vec<Value>,
) {
    strip_server_fields(&mut object.value);
    if !is_memcached(&object.value) {
        summary.other_kinds += 1;
        if keep {
            printed.push(object.value);
        }
        return;
    }
    summary.judged += 1;
    let judgement = judge(&object.value);
    let name = display_name(&judgement.object);
    let finding = |field: &str, message: &str, severity| {
        let (line, column) = object.position(field);
        Finding {
            file: object.origin.file.clone(),
            line,
            column,
            field: field.to_owned(),
            message: message.to_owned(),
            severity,
            object: name.clone(),
        }
    };
    let mut findings = Vec::new();
    if !judgement.allowed {
        summary.denied += 1;
        for v in &judgement.violations {
            findings.push(finding(&v.field, &v.message, Severity::Error));
        }
    }
    if !judgement.warnings.is_empty() {
        summary.warned += 1;
    }
    for warning in &judgement.warnings {
        // Most warnings start with the field they are about, as field errors do.
        let (field, message) = warning
            .split_once(": ")
            .filter(|(f, _)| f.starts_with("spec.") && !f.contains(' '))
            .unwrap_or(("", warning));
        findings.push(finding(field, message, Severity::Warning));
    }
    // In the order a reader meets them (rules run in their own order).
    findings.sort_by_key(|f| (f.line, f.column));
    if !findings.is_empty() {
        judged.push(Judged {
            file: object.origin.file.clone(),
            at: object.origin.at,
            name,
            allowed: judgement.allowed,
            findings,
        });
    }
    if keep && judgement.allowed {
        printed.push(judgement.object);
    }
}

/// `namespace/name`, or `name` without a namespace (kubectl would use its context's), or
/// `generateName*`.
fn display_name(object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = match (metadata["name"].as_str(), metadata["generateName"].as_str()) {
        (Some(name), _) if !name.is_empty() => name.to_owned(),
        (_, Some(prefix)) => format!("{prefix}*"),
        _ => "(no name)".to_owned(),
    };
    match metadata["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name,
    }
}

/// Everything the report says.
struct Written<'a> {
    judged: &'a [Judged],
    errors: &'a [Unreadable],
    ignored_files: &'a [PathBuf],
    /// No object of any kind was found, and `--allow-empty` is not given.
    empty: bool,
    summary: Summary,
}

const NOTHING_FOUND: &str = "no Kubernetes object found in the inputs \
     (pass --allow-empty if that is expected)";

fn write_all(
    args: &Args,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    report: &Written<'_>,
    printed: &[Value],
) -> io::Result<()> {
    for file in report.ignored_files {
        writeln!(
            stderr,
            "memcached-webhook check: ignored {}: not a .yaml, .yml or .json file",
            file.display()
        )?;
    }
    if args.report == Report::Text {
        // Input that cannot be read goes to stderr, in the same `file:line:col:` form.
        for e in report.errors {
            writeln!(stderr, "memcached-webhook check: {e}")?;
        }
        if report.empty {
            writeln!(stderr, "memcached-webhook check: {NOTHING_FOUND}")?;
        }
    }
    let report_to: &mut dyn Write = if args.output.is_some() {
        &mut *stderr
    } else {
        &mut *stdout
    };
    match args.report {
        Report::Text => write_text(report_to, report)?,
        Report::Json => write_json(report_to, report)?,
    }
    report_to.flush()?;
    for object in printed {
        match args.output {
            Some(Output::Yaml) => {
                let mut text = String::from("---\n");
                yaml::write(&mut text, object);
                stdout.write_all(text.as_bytes())?;
            }
            Some(Output::Json) => {
                serde_json::to_writer_pretty(&mut *stdout, object)?;
                stdout.write_all(b"\n")?;
            }
            None => {}
        }
    }
    stdout.flush()
}

/// One line per finding, `file:line:col: field: message`, under a line naming the object.
fn write_text(out: &mut dyn Write, report: &Written<'_>) -> io::Result<()> {
    for object in report.judged {
        let (line, column) = object.at;
        let verdict = if object.allowed { "warned" } else { "denied" };
        writeln!(
            out,
            "{}:{line}:{column}: {verdict} {}",
            object.file, object.name
        )?;
        for f in &object.findings {
            write!(out, "{}:{}:{}: ", f.file, f.line, f.column)?;
            match f.severity {
                Severity::Warning if f.field.is_empty() => writeln!(out, "Warning: {}", f.message)?,
                Severity::Warning => writeln!(out, "Warning: {}: {}", f.field, f.message)?,
                Severity::Error if f.field.is_empty() => writeln!(out, "{}", f.message)?,
                Severity::Error => writeln!(out, "{}: {}", f.field, f.message)?,
            }
        }
    }
    let s = report.summary;
    // Two kinds of passing over, named apart: objects of other kinds (read, not judged) and
    // files in a directory that are not manifests (not read; each named on stderr).
    write!(
        out,
        "judged {}, denied {}, warned {}, other kinds {}",
        s.judged, s.denied, s.warned, s.other_kinds
    )?;
    if !report.ignored_files.is_empty() {
        write!(out, ", ignored files {}", report.ignored_files.len())?;
    }
    if s.unreadable > 0 {
        write!(out, ", unreadable {}", s.unreadable)?;
    }
    writeln!(out)
}

/// One JSON document: every finding (unreadable input included) and the summary.
fn write_json(out: &mut dyn Write, report: &Written<'_>) -> io::Result<()> {
    let mut findings: Vec<Value> = report
        .errors
        .iter()
        .map(|e| {
            let (line, column) = e.at.unwrap_or((0, 0));
            json!({"file": e.file, "line": line, "column": column, "field": "",
                   "message": e.message, "severity": Severity::Error.as_str(), "object": ""})
        })
        .collect();
    if report.empty {
        findings.push(json!({"file": "", "line": 0, "column": 0, "field": "",
            "message": NOTHING_FOUND, "severity": Severity::Error.as_str(), "object": ""}));
    }
    for f in report.judged.iter().flat_map(|o| &o.findings) {
        findings.push(json!({"file": f.file, "line": f.line, "column": f.column,
            "field": f.field, "message": f.message, "severity": f.severity.as_str(),
            "object": f.object}));
    }
    let s = report.summary;
    let ignored_files: Vec<String> = report
        .ignored_files
        .iter()
        .map(|f| f.display().to_string())
        .collect();
    let document = json!({
        "findings": findings,
        "summary": {"judged": s.judged, "denied": s.denied, "warned": s.warned,
                    "otherKinds": s.other_kinds, "unreadable": s.unreadable,
                    "ignoredFiles": ignored_files},
    });
    serde_json::to_writer_pretty(&mut *out, &document)?;
    writeln!(out)
}

#[cfg(test)]
mod tests;
