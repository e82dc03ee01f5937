//! The review pipeline: read the review skipping what no rule reads (or parse it whole when the
//! reader declines), decide, log. [`Review`] holds a request's inputs and is the one way in.
//! Owns the per-thread parser state every request reuses.

use std::cell::RefCell;
use std::time::Instant;

use simd_json::{Buffers, Tape};

use super::decide::{Verdict, decide};
use super::enforcement::Actions;
use super::envelope::{BadReview, Request, ends_open, parse};
use super::{Webhook, skip};
use crate::autoscalers::Autoscalers;
use crate::json::Val;

/// Per-thread parser state, reused by every request the thread serves.
struct Scratch {
    buffers: Buffers,
    tape: Option<Tape<'static>>,
    patch: Vec<u8>,
    stack: skip::Stack,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            buffers: Buffers::new(16 * 1024),
            tape: Some(Tape::null()),
            patch: Vec::with_capacity(1024),
            stack: skip::Stack::default(),
        }
    }
}

/// Bodies above this leave no buffers behind: a few multi-megabyte reviews (an object near
/// etcd's 1.5 MB limit, twice for UPDATE) must not pin megabytes on every worker thread for
/// good, while the common few-KB review keeps reusing warm buffers.
pub(super) const RETAIN_BELOW: usize = 256 * 1024;

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::new());
}

/// One review's inputs besides its body: which webhook it was sent to, what a violation does,
/// the cluster's other autoscalers, and when the request arrived (for the log line). The three
/// ways to answer it differ only in how the body is held: [`answer`](Self::answer) (a buffer of
/// our own), [`answer_in_place`](Self::answer_in_place) (bytes that lie elsewhere, such as the
/// server's read buffer) and [`answer_whole`](Self::answer_whole) (parsed whole, skipping
/// nothing).
#[derive(Clone, Copy, Debug)]
pub struct Review<'a> {
    pub webhook: Webhook,
    /// `--validation-actions`.
    pub actions: Actions,
    /// The validating webhook also judges against the cluster's other autoscalers
    /// (`--autoscaler-conflicts=on`).
    pub autoscalers: Option<&'a Autoscalers>,
    /// When the request arrived: the log line's `elapsed_us` counts from here.
    pub started: Instant,
}

impl Review<'_> {
    /// A review as the server answers it by default: violations denied, no autoscaler index,
    /// started now. Tests, benches and `check` set up their calls with it.
    pub fn new(webhook: Webhook) -> Self {
        Review {
            webhook,
            actions: Actions::DENY,
            autoscalers: None,
            started: Instant::now(),
        }
    }

    /// Answers one AdmissionReview. `body` holds exactly the request body. `skip::read` reads
    /// it without what no rule reads; when it declines (an escaped string, a fraction, text
    /// that is not JSON, ...), simd-json parses `body` whole: padded, and unescaped in place.
    /// Either way the answer is the same, except for malformed bytes inside a skipped value
    /// (docs/performance.md). The answer is written into `out`; `Err` means HTTP 400 with its
    /// reason.
    pub fn answer(&self, body: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<Verdict, BadReview> {
        match self.read(body, out) {
            Some(result) => result,
            None => self.answer_whole(body, out),
        }
    }

    /// [`answer`](Self::answer) for a body that lies elsewhere (the server's: a frame of the
    /// connection's read buffer), read where it lies: it is copied only when the reader
    /// declines and simd-json must parse it whole (which writes to it). Saves the copy and its
    /// allocation on every review; the server answers every single-frame body this way.
    pub fn answer_in_place(&self, body: &[u8], out: &mut Vec<u8>) -> Result<Verdict, BadReview> {
        match self.read(body, out) {
            Some(result) => result,
            None => {
                let mut copy = Vec::with_capacity(body.len() + simd_json::INPUT_PADDING);
                copy.extend_from_slice(body);
                self.answer_whole(&mut copy, out)
            }
        }
    }

    /// The answer from the reader's tape; `None` when the reader declines.
    fn read(&self, body: &[u8], out: &mut Vec<u8>) -> Option<Result<Verdict, BadReview>> {
        SCRATCH.with(|scratch| {
            let mut guard = scratch.borrow_mut();
            let Scratch {
                tape, patch, stack, ..
            } = &mut *guard;
            let mut parsed: Tape<'_> = tape.take().unwrap_or_else(Tape::null).reset();
            let answered = skip::read(body, &mut parsed.0, stack).map(|read| {
                let old = read.old_object.map(|range| &body[range]);
                self.answer_tape(&parsed, old, patch, out)
            });
            *tape = Some(parsed.reset());
            if body.len() >= RETAIN_BELOW {
                *guard = Scratch::new();
            }
            answered
        })
    }

    /// [`answer`](Self::answer) parsing the whole body with simd-json, what no rule reads
    /// included: when the reader declines, and to compare with.
    pub fn answer_whole(
        &self,
        body: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Verdict, BadReview> {
        if body.is_empty() {
            return Err(BadReview::Empty);
        }
        let len = body.len();
        SCRATCH.with(|scratch| {
            let mut guard = scratch.borrow_mut();
            let Scratch {
                buffers,
                tape,
                patch,
                ..
            } = &mut *guard;
            body.resize(len + simd_json::INPUT_PADDING, b' ');
            let mut whole: Tape<'_> = tape.take().unwrap_or_else(Tape::null).reset();
            let result = match simd_json::fill_tape_padded(body, len, buffers, &mut whole) {
                Ok(()) => self.answer_tape(&whole, None, patch, out),
                Err(error) => Err(BadReview::Json {
                    error,
                    truncated: false,
                }),
            };
            *tape = Some(whole.reset());
            if len >= RETAIN_BELOW {
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

    /// Reads the envelope from a parsed review, decides and logs. `old` holds the bytes of a
    /// skipped `oldObject`.
    fn answer_tape(
        &self,
        tape: &Tape<'_>,
        old: Option<&[u8]>,
        patch: &mut Vec<u8>,
        out: &mut Vec<u8>,
    ) -> Result<Verdict, BadReview> {
        let (version, mut request) = parse(Val::root(tape))?;
        if old.is_some() {
            request.old_object = None;
            request.old_object_text = old;
        }
        let verdict = decide(self, version, &request, patch, out);
        log(self, &request, &verdict);
        Ok(verdict)
    }
}

/// What this thread's scratch holds on to between requests: tape nodes, patch bytes, and the
/// structural indexes the last parse left (simd-json shows their length, not its capacity).
#[cfg(test)]
pub(super) fn retained() -> (usize, usize, usize) {
    SCRATCH.with(|s| {
        let s = s.borrow();
        (
            s.tape.as_ref().map_or(0, |t| t.0.capacity()),
            s.patch.capacity(),
            s.buffers.structural_indexes().len(),
        )
    })
}

/// One line per admission: denials at info, allowed admissions at debug. A line costs more
/// CPU than the decision itself (formatting, the queue, waking the writer thread;
/// docs/performance.md), and the apiserver's audit log already records every call;
/// controller-runtime logs them at V(5) too.
fn log(review: &Review<'_>, req: &Request<'_, '_>, verdict: &Verdict) {
    // What the review did not say (a review of another kind, a CREATE with generateName, a
    // cluster-scoped object) is left out rather than logged as "".
    fn known(s: &str) -> Option<&str> {
        (!s.is_empty()).then_some(s)
    }
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                webhook = review.webhook.path(),
                uid = req.uid,
                operation = req.operation_raw,
                namespace = known(req.namespace),
                name = known(req.name),
                allowed = verdict.allowed,
                code = verdict.code,
                patched = verdict.patched,
                warnings = verdict.warnings,
                elapsed_us = review.started.elapsed().as_micros() as u64,
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
