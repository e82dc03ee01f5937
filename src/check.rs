//! `memcached-webhook check`: the webhooks' verdicts on manifests, offline, for CI and GitOps.
//! Each Memcached is put to [`admission::review`], the function the server answers with: the
//! mutating webhook's patch is applied, then the validating webhook judges the result. There is
//! no cluster here, so the autoscaler-conflict rule (`--autoscaler-conflicts`) is not checked.

pub mod input;
pub mod yaml;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use base64::Engine as _;
use clap::ValueEnum;
use serde_json::{Value, json};

use crate::admission::{self, Actions, Webhook};
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

/// Exit status: every object admitted (and no warning, with `--warnings-as-errors`).
pub const ADMITTED: u8 = 0;
/// Exit status: an object was denied (or warned, with `--warnings-as-errors`).
pub const DENIED: u8 = 1;
/// Exit status: an input could not be read (or the command line is wrong: clap exits 2 too).
pub const UNREADABLE: u8 = 2;

/// What the two webhooks made of one object.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub allowed: bool,
    /// The object after the mutating webhook's patch.
    pub object: Value,
    /// Each reason for a denial: `field: message`.
    pub violations: Vec<String>,
    /// Both webhooks' warnings, mutating first.
    pub warnings: Vec<String>,
}

/// Judges one Memcached as the apiserver would on CREATE: mutate, apply the patch, validate.
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
            judgement.violations.push(message);
            return judgement;
        }
    };
    if !read_answer(&response, &mut judgement) {
        return judgement;
    }
    if let Some(patch) = response["patch"].as_str()
        && let Err(e) = apply(&mut judgement.object, patch)
    {
        judgement.violations.push(format!(
            "the mutating webhook's patch does not apply, so the apiserver would refuse it: {e}"
        ));
        return judgement;
    }
    match call(Webhook::Validate, &judgement.object) {
        Ok(response) => judgement.allowed = read_answer(&response, &mut judgement),
        Err(message) => judgement.violations.push(message),
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
    // Deny: `check` answers what would be refused, whatever a cluster's --validation-actions.
    // Should the server need the body as sent again, serialising the same value gives it.
    let original = |body: &mut Vec<u8>| {
        serde_json::to_writer(body, &review).expect("it was serialised once already");
    };
    admission::review(
        webhook,
        Actions::DENY,
        &mut body,
        original,
        &mut out,
        Instant::now(),
    )
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
                let field = cause["field"].as_str().unwrap_or("");
                let message = cause["message"].as_str().unwrap_or("");
                judgement.violations.push(format!("{field}: {message}"));
            }
        }
        // A malformed object (400): its message starts with the field.
        _ => judgement
            .violations
            .push(status["message"].as_str().unwrap_or("denied").to_owned()),
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
    pub skipped: usize,
    pub unreadable: usize,
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
    let mut report = Vec::new();
    let mut errors = Vec::new();
    for arg in &args.inputs {
        let files = if arg.as_os_str() == "-" {
            Ok(vec![arg.clone()])
        } else {
            input::files(arg)
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
                            &mut report,
                            &mut printed,
                        );
                    }
                }
                Err(e) => errors.push(e),
            }
        }
    }
    summary.unreadable = errors.len();
    let written = write_all(args, stdout, stderr, &report, &printed, &errors, summary);
    if let Err(e) = written {
        let _ = writeln!(
            stderr,
            "memcached-webhook check: cannot write the report: {e}"
        );
        return UNREADABLE;
    }
    if summary.unreadable > 0 {
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

/// Judges one object (or counts it skipped) and writes its report lines.
fn judge_into(
    mut object: Object,
    keep: bool,
    summary: &mut Summary,
    report: &mut Vec<u8>,
    printed: &mut Vec<Value>,
) {
    use std::fmt::Write as _;
    strip_server_fields(&mut object.value);
    if !is_memcached(&object.value) {
        summary.skipped += 1;
        if keep {
            printed.push(object.value);
        }
        return;
    }
    summary.judged += 1;
    let judgement = judge(&object.value);
    let mut lines = String::new();
    let name = display_name(&judgement.object);
    if !judgement.allowed {
        summary.denied += 1;
        let _ = writeln!(lines, "denied {} {name}", object.origin);
        for violation in &judgement.violations {
            let _ = writeln!(lines, "  {violation}");
        }
    } else if !judgement.warnings.is_empty() {
        let _ = writeln!(lines, "warned {} {name}", object.origin);
    }
    if !judgement.warnings.is_empty() {
        summary.warned += 1;
    }
    for warning in &judgement.warnings {
        let _ = writeln!(lines, "Warning: {warning}");
    }
    report.extend_from_slice(lines.as_bytes());
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

fn write_all(
    args: &Args,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    report: &[u8],
    printed: &[Value],
    errors: &[Unreadable],
    summary: Summary,
) -> io::Result<()> {
    for e in errors {
        writeln!(stderr, "memcached-webhook check: {e}")?;
    }
    let report_to: &mut dyn Write = if args.output.is_some() {
        &mut *stderr
    } else {
        &mut *stdout
    };
    report_to.write_all(report)?;
    write!(
        report_to,
        "judged {}, denied {}, warned {}, skipped {}",
        summary.judged, summary.denied, summary.warned, summary.skipped
    )?;
    if summary.unreadable > 0 {
        write!(report_to, ", unreadable {}", summary.unreadable)?;
    }
    writeln!(report_to)?;
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

#[cfg(test)]
mod tests;
