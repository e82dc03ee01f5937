//! YAML to JSON the way kubectl converts a manifest before sending it (sigs.k8s.io/yaml on
//! go-yaml v2): plain scalars resolve by YAML 1.1 rules (`yes` and `on` are booleans, `0755` is
//! octal), quoted ones stay strings; anchors, aliases and `<<` merge keys are expanded. Also the
//! way back: objects printed as YAML that reads back the same under those rules.
//!
//! YAML in is `yaml/read.rs` (the `check` subcommand's manifests), YAML out `yaml/write.rs`
//! (`check --output yaml` and the `policies` manifests); both ask `yaml/scalar.rs` what a scalar
//! means. Where each node stood in the text is `yaml/position.rs` (filled by the reader, and by
//! `check` for JSON input), so a finding points at its field.

pub mod position;
mod read;
mod scalar;
mod write;

pub use read::{Document, Error, documents};
pub use scalar::{Scalar, go_float, resolve_plain};
pub use write::write;
