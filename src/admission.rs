//! AdmissionReview in, AdmissionReview out: the wire contract with the kube-apiserver.
//!
//! The response echoes the request's `apiVersion` (`admission.k8s.io/v1` or `v1beta1`) with
//! kind `AdmissionReview` and `response.uid` = `request.uid`; a patch is the standard base64 of
//! an RFC 6902 array and always comes with `patchType: "JSONPatch"`. A denial is HTTP 200 with
//! `allowed: false`; only a body that is not an AdmissionReview at all gets an HTTP error.
//!
//! The review runs as a `pipeline` (read it, skipping what no rule reads, decide, log) over
//! the `envelope`, with `decide` for the webhooks' answers and `enforcement` for what a
//! violation does.

mod decide;
mod enforcement;
mod envelope;
mod pipeline;
pub mod response;
mod skip;

pub use decide::Verdict;
pub use enforcement::{Actions, Enforcement, Violations};
pub use envelope::{ApiVersion, BadReview, Operation, Request, parse};
pub use pipeline::Review;
#[cfg(test)]
use pipeline::{RETAIN_BELOW, retained};
pub use skip::{SKIPPED, skipped};

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

    /// Room for an answer, so that the usual one is written without reallocating: a patched
    /// answer runs to 1.2 KB (a 5.6 KB `kubectl apply` CREATE's, with its base64 patch), an
    /// admitted validation to about 250 bytes; a denial's longer answer (1.5 KB for four
    /// causes) grows it once. The server keeps a worker thread's last answer buffer for its
    /// next answer, so this is what a thread's first answer allocates.
    pub const fn answer_capacity(self) -> usize {
        match self {
            Webhook::Mutate => 2048,
            Webhook::Validate => 1024,
        }
    }
}

/// The mutating webhook's path (the apiserver appends `?timeout=10s`).
pub const MUTATE_PATH: &str = "/mutate-memcached-c5c3-io-v1beta1-memcached";
/// The validating webhook's path.
pub const VALIDATE_PATH: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";

#[cfg(test)]
mod tests;
