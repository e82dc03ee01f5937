//! memcached-webhook: the kube-apiserver's admission webhooks for `memcached.c5c3.io` Memcached.
//!
//! # Layout
//! - [`config`]: the command line, parsed once into typed fields.
//! - [`json`]: a typed, path-aware view over a simd-json tape (borrowed, no copies).
//! - [`admission`]: AdmissionReview in, AdmissionReview out (the wire contract).
//! - [`patch`]: the RFC 6902 JSON Patch writer.
//! - [`crd`]: the custom resource's names (group, kind, plural), shared by the rules and the watch.
//! - [`memcached`]: the resource's borrowed view, its defaults and its validation.
//! - [`tls`]: loading (and reloading) the serving certificate.
//! - [`logging`]: log lines to stderr off the request path (dropped, never blocking).
//! - [`metrics`]: Prometheus metrics (controller-runtime's names and ours).
//! - [`scrape`]: the metrics port: HTTPS, each scrape's token reviewed by the API server.
//! - [`server`]: listeners, HTTP, routing, health probes and shutdown.
//! - [`dev`]: throwaway certificates for running on a laptop.
//! - [`check`]: the `check` subcommand, the webhooks' verdicts on manifests offline.
//! - [`policies`]: the `policies` subcommand, the rules as in-process admission policies (CEL).
//! - [`yaml`]: YAML as kubectl reads it (go-yaml v2), in for `check` and out for `check` and
//!   `policies`.
//! - [`autoscalers`]: the cluster's HPAs and ScaledObjects, watched, for the conflict rule.

// Allowed only in `admission::skip::scan` (its SIMD scan, and its tests) and
// `admission::skip::read` (the reader compiled for AVX2), each use with its proof.
#![deny(unsafe_code)]
// The documentation is built with --document-private-items (CONTRIBUTING.md): module docs link
// the private files that do each job, which is where a newcomer reads next.
#![allow(rustdoc::private_intra_doc_links)]
// A function does one thing a reader can hold: at most 80 lines (clippy.toml), tests excepted.
#![warn(clippy::too_many_lines)]
#![cfg_attr(test, allow(clippy::too_many_lines))]

pub mod admission;
pub mod autoscalers;
pub mod check;
pub mod config;
pub mod crd;
pub mod dev;
pub mod json;
pub mod logging;
pub mod memcached;
pub mod metrics;
pub mod patch;
pub mod policies;
pub mod scrape;
pub mod server;
#[cfg(test)]
mod test_support;
pub mod tls;
pub mod yaml;
