//! The report: what each judged object drew (findings with file, line and column) and the
//! summary line, written as text (`file:line:col: field: message`) or as one JSON document,
//! then the objects `--output` prints.

use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use super::input::{At, Unreadable};
use super::{Args, Output, Report};
use crate::yaml;

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
pub(super) struct Judged {
    pub(super) file: String,
    pub(super) at: At,
    pub(super) name: String,
    pub(super) allowed: bool,
    pub(super) findings: Vec<Finding>,
}

/// Everything the report says.
pub(super) struct Written<'a> {
    pub(super) judged: &'a [Judged],
    pub(super) errors: &'a [Unreadable],
    pub(super) ignored_files: &'a [PathBuf],
    /// No object of any kind was found, and `--allow-empty` is not given.
    pub(super) empty: bool,
    pub(super) summary: Summary,
}

const NOTHING_FOUND: &str = "no Kubernetes object found in the inputs \
     (pass --allow-empty if that is expected)";

pub(super) fn write_all(
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
