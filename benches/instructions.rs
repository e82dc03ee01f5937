//! Instructions per review, counted by callgrind (gungraun), on the entry the server takes for
//! a body that came in one frame, `Review::answer_in_place` (read where it lies in the
//! connection's read buffer; `server/body.rs`'s `Plan`): the in-process hot path on the captured CREATE, the UPDATE, the 100 KB review and a validation denial, and an
//! admitted validation with and without `--autoscaler-conflicts` (an index of 10,000 HPAs, none
//! aimed at the object's Deployment: the lookup's cost). Counts do not depend on machine load,
//! so this bench gates CI where a timing could not.
//!
//! ```text
//! cargo install gungraun-runner --version 0.20.0 --locked   # once; same version as the lib
//! cargo bench --locked --bench instructions
//! ```
//!
//! Each bench has an absolute ceiling on `Ir` (instructions executed): the count measured when
//! the ceiling was set, plus 10 %. A fresh clone has no saved baseline to compare against, so
//! a relative limit would pass on every first run; an absolute one fails there. The run fails
//! (non-zero exit) when a count passes its ceiling. Counts depend a little on the CPU
//! (simd-json picks AVX2 or SSE4.2 at run time); the ceilings were measured with AVX2 on
//! x86_64. When a change makes the path cheaper, lower the ceiling with it, so the 10 %
//! stays 10 %.
//!
//! Each measured call is the thread's second: the setup runs one review first, as a server
//! worker that has served a request before, so the parser's reused buffers are warm and the
//! count is the steady state, not the first request's allocations.

use std::hint::black_box;

use gungraun::{
    Callgrind, EventKind, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main,
};
use memcached_webhook::admission::{BadReview, Review, Verdict, Webhook};
use memcached_webhook::autoscalers::{Autoscalers, Controller, Kind, Object, Sync};

/// `Ir` ceilings: the count on 2026-12-07 (x86_64, AVX2) plus 10 %, rounded up to 50, measured
/// on the server's entry for a body in one frame (`Review::answer_in_place`): typical CREATE
/// 12,105, the 5.6 KB `kubectl apply` CREATE 21,500, UPDATE 15,705 (mutate) and 15,051
/// (validate), 100 KB 94,706, denial 39,738, admitted validation 12,429 and 12,777 through the
/// autoscaler index. History in docs/performance.md.
const CREATE_IR: u64 = 13_350;
const APPLY_CREATE_IR: u64 = 23_650;
const UPDATE_IR: u64 = 17_300;
const VALIDATE_UPDATE_IR: u64 = 16_600;
const LARGE_IR: u64 = 104_200;
const DENIAL_IR: u64 = 43_750;
const ADMIT_IR: u64 = 13_700;
const ADMIT_INDEXED_IR: u64 = 14_100;

/// What a measured call gets: the review's inputs, the request body, and a fresh response buffer
/// of the server's size (`Webhook::answer_capacity`).
struct Request {
    webhook: Webhook,
    autoscalers: Option<&'static Autoscalers>,
    body: Vec<u8>,
    out: Vec<u8>,
}

impl Request {
    /// The review as the server sets it up: violations denied, the index when given.
    fn review(&self) -> Review<'static> {
        Review {
            autoscalers: self.autoscalers,
            ..Review::new(self.webhook)
        }
    }

    /// The server's call for a body of at most `budget::SMALL` bytes that came in one frame
    /// (HTTP/1; a review of a few KB does): read where it lies in the read buffer.
    fn answer_in_place(&mut self) -> Result<Verdict, BadReview> {
        self.review()
            .answer_in_place(black_box(&self.body), &mut self.out)
    }
}

fn fixture(file: &str) -> Vec<u8> {
    let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Reads the fixture and answers it once (warming this thread's parser state), checking the
/// answer is the one the bench means to measure: a review that does not reach the path named
/// would make its count meaningless.
fn warmed(webhook: Webhook, file: &str, allowed: bool) -> Request {
    warmed_with(webhook, None, file, allowed)
}

/// 10,000 HPAs over 100 namespaces (the fixture's `default` among them), both kinds synced.
static INDEX: std::sync::LazyLock<Autoscalers> = std::sync::LazyLock::new(|| {
    let index = Autoscalers::default();
    index.list_started(Kind::Hpa);
    for i in 0..10_000 {
        let namespace = if i % 100 == 0 {
            "default".to_owned()
        } else {
            format!("namespace-{}", i % 100)
        };
        index.listed(
            Kind::Hpa,
            &Object {
                namespace,
                name: format!("hpa-{i}"),
                deployment: Some(format!("deployment-{i}")),
                controller: Controller::None,
            },
        );
    }
    index.list_done(Kind::Hpa);
    index.set_sync(Kind::ScaledObject, Sync::NotServed);
    index
});

/// [`warmed`] through the index, checking the rule ran (no "could not be checked" warning).
fn warmed_indexed(webhook: Webhook, file: &str, allowed: bool) -> Request {
    let request = warmed_with(webhook, Some(&INDEX), file, allowed);
    let mut out = Vec::new();
    request
        .review()
        .answer_in_place(&request.body, &mut out)
        .expect("answered once already");
    assert!(
        !String::from_utf8_lossy(&out).contains("could not be checked"),
        "{file}: the index did not answer"
    );
    request
}

fn warmed_with(
    webhook: Webhook,
    autoscalers: Option<&'static Autoscalers>,
    file: &str,
    allowed: bool,
) -> Request {
    let mut request = Request {
        webhook,
        autoscalers,
        body: fixture(file),
        out: Vec::with_capacity(webhook.answer_capacity()),
    };
    let verdict = request
        .answer_in_place()
        .unwrap_or_else(|e| panic!("{file}: not an answerable review: {e}"));
    assert_eq!(verdict.allowed, allowed, "{file}: unexpected verdict");
    if webhook == Webhook::Mutate {
        assert!(
            verdict.patched,
            "{file}: the defaulting webhook must patch it"
        );
    }
    request.out = Vec::with_capacity(webhook.answer_capacity());
    request
}

fn ceiling(ir: u64) -> LibraryBenchmarkConfig {
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(Callgrind::default().hard_limits([(EventKind::Ir, ir)]));
    config
}

#[library_benchmark]
#[bench::typical_create(
    args = (Webhook::Mutate, "tests/fixtures/mutate-create-kubectl-apply.json", true),
    setup = warmed,
    config = ceiling(CREATE_IR)
)]
#[bench::kubectl_apply_create(
    args = (Webhook::Mutate, "benches/fixtures/b-kubectl-apply.json", true),
    setup = warmed,
    config = ceiling(APPLY_CREATE_IR)
)]
#[bench::typical_update(
    args = (Webhook::Mutate, "tests/fixtures/mutate-update-kubectl-apply.json", true),
    setup = warmed,
    config = ceiling(UPDATE_IR)
)]
#[bench::validate_update(
    args = (Webhook::Validate, "tests/fixtures/mutate-update-kubectl-apply.json", true),
    setup = warmed,
    config = ceiling(VALIDATE_UPDATE_IR)
)]
#[bench::large_100k(
    args = (Webhook::Mutate, "tests/fixtures/large-annotations.json", true),
    setup = warmed,
    config = ceiling(LARGE_IR)
)]
#[bench::validate_denial(
    args = (Webhook::Validate, "tests/fixtures/invalid-spec.json", false),
    setup = warmed,
    config = ceiling(DENIAL_IR)
)]
#[bench::validate_admitted(
    args = (Webhook::Validate, "tests/fixtures/validate-create-kubectl-create.json", true),
    setup = warmed,
    config = ceiling(ADMIT_IR)
)]
fn review(mut request: Request) -> Vec<u8> {
    black_box(request.answer_in_place().is_ok());
    request.out
}

#[library_benchmark]
#[bench::validate_admitted(
    args = (Webhook::Validate, "tests/fixtures/validate-create-kubectl-create.json", true),
    setup = warmed_indexed,
    config = ceiling(ADMIT_INDEXED_IR)
)]
fn review_indexed(mut request: Request) -> Vec<u8> {
    black_box(request.answer_in_place().is_ok());
    request.out
}

library_benchmark_group!(name = hot_path, benchmarks = [review, review_indexed]);

main!(library_benchmark_groups = hot_path);
