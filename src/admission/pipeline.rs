//! The review pipeline: blank what no rule reads, parse, verify the blanking, decide, log. Owns
//! the per-thread parser state every request reuses.

use std::cell::RefCell;
use std::time::Instant;

use simd_json::{Buffers, Tape};

use super::decide::{Verdict, decide};
use super::enforcement::Actions;
use super::envelope::{BadReview, Request, ends_open, parse};
use super::{Webhook, managed_fields};
use crate::json::Val;

/// Per-thread parser state, reused by every request the thread serves.
struct Scratch {
    buffers: Buffers,
    tape: Option<Tape<'static>>,
    patch: Vec<u8>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            buffers: Buffers::new(16 * 1024),
            tape: Some(Tape::null()),
            patch: Vec::with_capacity(1024),
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

/// Answers one AdmissionReview. `body` holds exactly the request body; it is padded, and
/// blanked and unescaped in place. `original` appends the body's bytes as they arrived to an
/// empty buffer: it is called only when what [`managed_fields`] blanked must be parsed after all.
/// The answer is written into `out`; `Err` means HTTP 400 with its reason.
pub fn review(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    original: impl FnOnce(&mut Vec<u8>),
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    review_blanking(webhook, actions, body, Some(original), out, started)
}

/// [`review`] parsing the whole body, `managedFields` included: for a body whose bytes as sent
/// are not kept (the server keeps them only for small HTTP/1 bodies), and to compare with.
pub fn review_whole(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    review_blanking(
        webhook,
        actions,
        body,
        None::<fn(&mut Vec<u8>)>,
        out,
        started,
    )
}

/// [`review`], blanking `managedFields` only when `original` can restore the body.
fn review_blanking(
    webhook: Webhook,
    actions: Actions,
    body: &mut Vec<u8>,
    original: Option<impl FnOnce(&mut Vec<u8>)>,
    out: &mut Vec<u8>,
    started: Instant,
) -> Result<Verdict, BadReview> {
    if body.is_empty() {
        return Err(BadReview::Empty);
    }
    let len = body.len();
    let blanked = match original {
        Some(_) => managed_fields::blank(body),
        None => managed_fields::Blanked::default(),
    };
    body.resize(len + simd_json::INPUT_PADDING, b' ');
    SCRATCH.with(|scratch| {
        let mut guard = scratch.borrow_mut();
        let Scratch {
            buffers,
            tape,
            patch,
        } = &mut *guard;
        let mut tape: Tape<'_> = tape.take().unwrap_or_else(Tape::null).reset();
        let base = body.as_ptr() as usize;
        let mut parsed = simd_json::fill_tape_padded(body, len, buffers, &mut tape);
        if !blanked.is_empty()
            && (parsed.is_err() || !managed_fields::verified(&blanked, base, Val::root(&tape)))
            && let Some(original) = original
        {
            // Something was blanked that a rule might read, or the parse failed and its error
            // must be the one the body as sent gets: parse the body as it arrived.
            tape = tape.reset();
            body.clear();
            original(body);
            debug_assert_eq!(body.len(), len, "the body as sent has the length it had");
            body.resize(len + simd_json::INPUT_PADDING, b' ');
            parsed = simd_json::fill_tape_padded(body, len, buffers, &mut tape);
        }
        let result = match parsed {
            Ok(()) => parse(Val::root(&tape)).map(|(version, request)| {
                let verdict = decide(webhook, actions, version, &request, patch, out);
                log(webhook, &request, &verdict, started);
                verdict
            }),
            Err(error) => Err(BadReview::Json {
                error,
                truncated: false,
            }),
        };
        if len < RETAIN_BELOW {
            guard.tape = Some(tape.reset());
        } else {
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
/// CPU than the decision itself (formatting, the queue, waking the writer thread: 8-17 µs
/// against 3-10 µs, `benches/latency.rs` with `LATENCY_LOG=1`), and the apiserver's audit log
/// already records every call; controller-runtime logs them at V(5) too.
fn log(webhook: Webhook, req: &Request<'_, '_>, verdict: &Verdict, started: Instant) {
    macro_rules! line {
        ($level:expr) => {
            tracing::event!(
                $level,
                webhook = webhook.path(),
                uid = req.uid,
                operation = req.operation_raw,
                namespace = req.namespace,
                name = req.name,
                allowed = verdict.allowed,
                code = verdict.code,
                patched = verdict.patched,
                warnings = verdict.warnings,
                elapsed_us = started.elapsed().as_micros() as u64,
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
