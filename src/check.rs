//! `memcached-webhook check`: the webhooks' verdicts on manifests, offline, for CI and GitOps.
//! Each Memcached is put to [`crate::admission::Review`], the pipeline the server answers with:
//! the mutating webhook's patch is applied, then the validating webhook judges the result. There
//! is no cluster here, so the autoscaler-conflict rule (`--autoscaler-conflicts`) is not checked.
//!
//! Reading the inputs is `check/input.rs` (positions from `yaml/position.rs`), judging one object
//! `check/judge.rs`, and writing what was found `check/report.rs`; this file runs them in turn.

pub mod input;
mod judge;
mod report;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde_json::Value;

use input::{Object, STDIN, Unreadable};
pub use judge::{Judgement, Violation, is_memcached, judge, strip_server_fields};
pub use report::{Finding, Severity, Summary};
use report::{Judged, Written, write_all};

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
