//! One memory budget for every request body in flight. A body takes budget as its bytes
//! arrive (never on a declared Content-Length alone), and a large body also for the parser's
//! working memory, so no set of clients can grow the process past the bound in
//! docs/memory.md. Part of it is kept for bodies of at most 256 KiB: a flood of large
//! bodies cannot keep an everyday review waiting. What a body takes, and when, is
//! `body.rs`'s (`body::Plan`); the budget's metrics are its [`Stats`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio::time::Instant;

use crate::metrics::{Metrics, registered};

/// Bodies that declare at most this many bytes draw on the reserved pool; larger ones (and
/// chunked ones, whose size is unknown) on the rest. The apiserver always sends a
/// Content-Length, and reviews above this are rare.
pub const SMALL: usize = 256 * 1024;

/// The reserved pool is this fraction of the budget: at the default 64 MiB, 8 MiB, room for
/// about 1,600 typical 5 KB reviews at once or 32 of the largest small ones.
const RESERVED_SHARE: usize = 8;

/// Permits are KiB: a semaphore grants at most `u32::MAX` permits per call.
const UNIT: usize = 1024;

/// How long a request waits for budget before it is refused: briefly, so a client is told to
/// come back (503) rather than held while its connection and buffers cost memory too.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// A refusal logs a warning only after this long without one, so a flood logs once.
const QUIET: Duration = Duration::from_secs(60);

/// Which pool a request draws on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    /// Declared bodies of at most [`SMALL`] bytes.
    Small,
    /// Everything else.
    Large,
}

impl Pool {
    /// The pool for a request that declares `content_length` bytes (`None`: chunked).
    pub fn for_declared(content_length: Option<u64>) -> Pool {
        match content_length {
            Some(n) if n <= SMALL as u64 => Pool::Small,
            _ => Pool::Large,
        }
    }
}

/// Why a request got no budget.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The pool stayed used up for [`MAX_WAIT`] (or until the body deadline): HTTP 503.
    Busy,
    /// The request needs more than the whole pool holds, so waiting cannot help: HTTP 413.
    TooBig { needed: usize, pool: usize },
}

/// `--max-inflight-body-bytes`, split into the two pools.
#[derive(Debug)]
pub struct Budget {
    small: Semaphore,
    large: Semaphore,
    small_bytes: usize,
    large_bytes: usize,
    metrics: Arc<Metrics>,
    epoch: std::time::Instant,
    /// Milliseconds since `epoch` of the last refusal, plus one (0: none yet).
    last_refusal: AtomicU64,
}

impl Budget {
    pub fn new(bytes: usize, metrics: Arc<Metrics>) -> Self {
        let units = bytes / UNIT;
        let small_units = units / RESERVED_SHARE;
        let large_units = units - small_units;
        metrics.body_budget.capacity.set(bytes as i64);
        Budget {
            small: Semaphore::new(small_units),
            large: Semaphore::new(large_units),
            small_bytes: small_units * UNIT,
            large_bytes: large_units * UNIT,
            metrics,
            epoch: std::time::Instant::now(),
            last_refusal: AtomicU64::new(0),
        }
    }

    /// An empty grant on `pool`, to grow as the body arrives.
    pub fn grant(&self, pool: Pool) -> Grant<'_> {
        Grant {
            budget: self,
            pool,
            permit: None,
            bytes: 0,
        }
    }

    fn pool(&self, pool: Pool) -> (&Semaphore, usize) {
        match pool {
            Pool::Small => (&self.small, self.small_bytes),
            Pool::Large => (&self.large, self.large_bytes),
        }
    }

    /// Waits for `units` of `pool`, [`MAX_WAIT`] at most and never past `deadline`.
    async fn wait(
        &self,
        pool: Pool,
        units: u32,
        deadline: Instant,
    ) -> Result<SemaphorePermit<'_>, Refused> {
        self.metrics.body_budget.waits.inc();
        let deadline = deadline.min(Instant::now() + MAX_WAIT);
        let (semaphore, _) = self.pool(pool);
        // Dropping the acquire on timeout returns any permits it was partly assigned.
        match tokio::time::timeout_at(deadline, semaphore.acquire_many(units)).await {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) | Err(_) => {
                self.busy(pool);
                Err(Refused::Busy)
            }
        }
    }

    /// Counts a refusal for lack of budget; the first after a quiet spell is logged, with what
    /// to do about it.
    fn busy(&self, pool: Pool) {
        self.metrics.body_budget.refusals.inc();
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        if self.after_quiet(now) {
            tracing::warn!(
                pool = ?pool,
                budget_bytes = self.small_bytes + self.large_bytes,
                "request bodies are being refused (503): the memory budget for bodies in flight \
                 is used up (--max-inflight-body-bytes); logged again after a minute without refusals"
            );
        }
    }

    /// Whether a refusal at `now` (milliseconds since `epoch`, plus one) follows [`QUIET`]
    /// without one. Racing refusals may swap out of order: saturating, so that is "not quiet".
    fn after_quiet(&self, now: u64) -> bool {
        let last = self.last_refusal.swap(now, Ordering::AcqRel);
        last == 0 || now.saturating_sub(last) >= QUIET.as_millis() as u64
    }
}

/// What one request holds of the budget. Dropping it gives everything back, however the
/// request ends: answered, failed, timed out, or dropped with its connection.
#[derive(Debug)]
pub struct Grant<'a> {
    budget: &'a Budget,
    pool: Pool,
    permit: Option<SemaphorePermit<'a>>,
    bytes: usize,
}

impl Grant<'_> {
    pub fn pool(&self) -> Pool {
        self.pool
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Grows the grant to at least `bytes`, waiting [`MAX_WAIT`] at most and never past
    /// `deadline` (the body's).
    pub async fn grow_to(&mut self, bytes: usize, deadline: Instant) -> Result<(), Refused> {
        if bytes <= self.bytes {
            return Ok(());
        }
        let (semaphore, capacity) = self.budget.pool(self.pool);
        if bytes > capacity {
            // Bad input rather than load: answered 413, counted, not logged as a flood.
            self.budget.metrics.body_budget.refusals.inc();
            return Err(Refused::TooBig {
                needed: bytes,
                pool: capacity,
            });
        }
        let units = (bytes - self.bytes).div_ceil(UNIT);
        // `capacity` fits the semaphore, so `units` fits a u32 once it is at most that.
        let units = u32::try_from(units).expect("at most the pool's permits");
        let permit = match semaphore.try_acquire_many(units) {
            Ok(permit) => permit,
            // Boxed: its timer and queue entry in place would make every request's future
            // larger, and that future is moved whole (docs/performance.md); waiting is rare.
            Err(_) => Box::pin(self.budget.wait(self.pool, units, deadline)).await?,
        };
        let added = units as usize * UNIT;
        self.budget.metrics.body_budget.in_use.inc_by(added as i64);
        self.bytes += added;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        Ok(())
    }
}

impl Drop for Grant<'_> {
    fn drop(&mut self) {
        // The permit returns itself to the semaphore when it drops, right after this.
        self.budget
            .metrics
            .body_budget
            .in_use
            .dec_by(self.bytes as i64);
    }
}

/// An upper bound on what simd-json 0.19's `fill_tape_padded` allocates to parse `body`,
/// besides the body itself: its string buffer (length + padding), its structural indexes
/// (4 B each, in a Vec that starts at length / 8 and doubles) and the tape, reserved up front
/// with one 24-byte node per structural index. A body of `[0,0,...]` costs about 34 times its
/// length, a review whose bulk is an annotation about 1.5 times.
///
/// The indexes are counted as simd-json's first stage finds them: every `{ } [ ] , :` and
/// every opening quote outside strings, and every start of a run of other non-whitespace bytes
/// (numbers, literals, junk), whether or not the whole is valid JSON (the tape is reserved
/// before the second stage finds an error). One pass, a few milliseconds for 7 MB; only bodies
/// over 256 KiB pay it.
pub fn parse_cost(body: &[u8]) -> usize {
    let (mut structurals, mut in_string, mut escaped, mut in_scalar) =
        (0usize, false, false, false);
    for &b in body {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                structurals += 1;
                in_string = true;
                in_scalar = false;
            }
            b'{' | b'}' | b'[' | b']' | b',' | b':' => {
                structurals += 1;
                in_scalar = false;
            }
            b' ' | b'\t' | b'\n' | b'\r' => in_scalar = false,
            _ => {
                structurals += usize::from(!in_scalar);
                in_scalar = true;
            }
        }
    }
    // simd-json appends a few sentinel indexes, and its index Vec may round up by a chunk.
    let structurals = structurals + 64;
    let indexes = (body.len() / 8).max(2 * structurals) * 4;
    let tape = structurals * std::mem::size_of::<simd_json::Node<'static>>();
    body.len() + simd_json::INPUT_PADDING + indexes + tape
}

/// `--max-inflight-body-bytes`: how much is held, and how often requests waited or were refused;
/// handles into the process's metrics (see [`crate::metrics`]).
#[derive(Debug, Default)]
pub struct Stats {
    pub capacity: Gauge,
    pub in_use: Gauge,
    pub waits: Counter,
    pub refusals: Counter,
}

impl Stats {
    /// `memcached_webhook_body_budget_*`.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        Stats {
            capacity: registered(
                registry,
                "memcached_webhook_body_budget_bytes",
                "The memory budget for request bodies in flight (--max-inflight-body-bytes)",
            ),
            in_use: registered(
                registry,
                "memcached_webhook_body_budget_in_use_bytes",
                "Bytes of the body budget held by requests (bodies, and the parser for large ones)",
            ),
            waits: registered(
                registry,
                "memcached_webhook_body_budget_waits",
                "Requests that waited for body budget",
            ),
            refusals: registered(
                registry,
                "memcached_webhook_body_budget_refusals",
                "Requests refused for lack of body budget (503, or 413 when larger than the budget)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(bytes: usize) -> (Budget, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        (Budget::new(bytes, metrics.clone()), metrics)
    }

    fn later(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    /// Everything is back: both pools full and the gauge at zero.
    fn all_returned(budget: &Budget, metrics: &Metrics) {
        assert_eq!(budget.small.available_permits() * UNIT, budget.small_bytes);
        assert_eq!(budget.large.available_permits() * UNIT, budget.large_bytes);
        assert_eq!(metrics.body_budget.in_use.get(), 0);
    }

    #[test]
    fn a_refusal_is_logged_only_after_a_quiet_minute() {
        let (budget, _) = budget(8 * 1024 * 1024);
        let quiet = QUIET.as_millis() as u64;
        assert!(budget.after_quiet(1), "the first refusal");
        assert!(!budget.after_quiet(500));
        assert!(!budget.after_quiet(500 + quiet - 1), "refusals went on");
        assert!(!budget.after_quiet(400), "a racing, older refusal");
        assert!(
            budget.after_quiet(400 + quiet),
            "a minute after the last one"
        );
    }

    #[test]
    fn pools_split_the_budget() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        assert_eq!(budget.small_bytes, 1024 * 1024);
        assert_eq!(budget.large_bytes, 7 * 1024 * 1024);
        assert_eq!(metrics.body_budget.capacity.get(), 8 * 1024 * 1024);
        assert_eq!(Pool::for_declared(Some(SMALL as u64)), Pool::Small);
        assert_eq!(Pool::for_declared(Some(SMALL as u64 + 1)), Pool::Large);
        assert_eq!(Pool::for_declared(None), Pool::Large);
    }

    #[tokio::test]
    async fn growing_takes_whole_units_and_dropping_returns_them() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        let mut grant = budget.grant(Pool::Large);
        grant.grow_to(1, later(10)).await.unwrap();
        grant.grow_to(3000, later(10)).await.unwrap();
        assert_eq!(grant.bytes(), 3 * UNIT);
        assert_eq!(metrics.body_budget.in_use.get(), 3 * UNIT as i64);
        // Shrinking requests are no-ops.
        grant.grow_to(10, later(10)).await.unwrap();
        assert_eq!(grant.bytes(), 3 * UNIT);
        drop(grant);
        all_returned(&budget, &metrics);
    }

    #[tokio::test]
    async fn a_request_larger_than_its_pool_is_refused_at_once() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        let mut grant = budget.grant(Pool::Small);
        let err = grant.grow_to(2 * 1024 * 1024, later(10_000)).await;
        assert_eq!(
            err,
            Err(Refused::TooBig {
                needed: 2 * 1024 * 1024,
                pool: 1024 * 1024
            })
        );
        assert_eq!(metrics.body_budget.refusals.get(), 1);
        assert_eq!(metrics.body_budget.waits.get(), 0);
        drop(grant);
        all_returned(&budget, &metrics);
    }

    #[tokio::test]
    async fn a_wait_that_times_out_returns_what_it_was_partly_given() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        let mut hog = budget.grant(Pool::Large);
        hog.grow_to(6 * 1024 * 1024, later(10)).await.unwrap();
        // Needs 2 MiB, 1 MiB is free: tokio assigns it to the waiter, which then times out.
        let mut waiter = budget.grant(Pool::Large);
        waiter.grow_to(UNIT, later(10)).await.unwrap();
        let err = waiter.grow_to(2 * 1024 * 1024 + UNIT, later(30)).await;
        assert_eq!(err, Err(Refused::Busy));
        assert_eq!(waiter.bytes(), UNIT, "a refused growth keeps what was held");
        assert_eq!(metrics.body_budget.waits.get(), 1);
        assert_eq!(metrics.body_budget.refusals.get(), 1);
        assert_eq!(
            budget.large.available_permits(),
            1024 - 1,
            "the partial assignment went back"
        );
        drop((hog, waiter));
        all_returned(&budget, &metrics);
    }

    #[tokio::test]
    async fn the_small_pool_serves_while_the_large_one_is_used_up() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        let mut hog = budget.grant(Pool::Large);
        hog.grow_to(7 * 1024 * 1024, later(10)).await.unwrap();
        let mut small = budget.grant(Pool::Small);
        small.grow_to(SMALL, later(10)).await.unwrap();
        assert_eq!(metrics.body_budget.waits.get(), 0);
        drop((hog, small));
        all_returned(&budget, &metrics);
    }

    #[tokio::test]
    async fn a_waiter_is_served_when_budget_comes_back() {
        let (budget, metrics) = budget(8 * 1024 * 1024);
        let mut hog = budget.grant(Pool::Large);
        hog.grow_to(7 * 1024 * 1024, later(10)).await.unwrap();
        let waiting = async {
            let mut waiter = budget.grant(Pool::Large);
            waiter.grow_to(UNIT, later(60_000)).await.map(|()| waiter)
        };
        let release = async {
            tokio::task::yield_now().await;
            drop(hog);
        };
        let (waiter, ()) = tokio::join!(waiting, release);
        let waiter = waiter.unwrap();
        assert_eq!(waiter.bytes(), UNIT);
        assert_eq!(metrics.body_budget.waits.get(), 1);
        drop(waiter);
        all_returned(&budget, &metrics);
    }

    /// What simd-json really holds after a parse, valid or not: the tape's nodes and the
    /// structural indexes (their length; the Vec's capacity, not visible, is at most twice).
    fn observed(body: &[u8]) -> usize {
        let mut padded = body.to_vec();
        padded.resize(body.len() + simd_json::INPUT_PADDING, b' ');
        let mut buffers = simd_json::Buffers::new(16);
        let mut tape = simd_json::Tape::null();
        let _ = simd_json::fill_tape_padded(&mut padded, body.len(), &mut buffers, &mut tape);
        let node = std::mem::size_of::<simd_json::Node<'static>>();
        body.len() + tape.0.capacity() * node + buffers.structural_indexes().len() * 4 * 2
    }

    #[test]
    fn the_parse_cost_bounds_what_simd_json_holds() {
        let dense: Vec<u8> = std::iter::once(b'[')
            .chain((0..50_000).flat_map(|_| *b"0,"))
            .chain(*b"0]")
            .collect();
        // Structure hidden in a string, with escaped quotes.
        let text = format!("{{\"a\":\"{}\"}}", r#"{\"k\":[1,2],"#.repeat(10_000));
        let nested = [
            "{\"k\":[1,{\"v\":true}],\"n\":".repeat(500),
            "null".into(),
            "}".repeat(500),
        ]
        .concat();
        // Not JSON: scalars separated by spaces, and an unterminated string.
        let spaced = "1 ".repeat(50_000);
        let open = format!("[\"{}", "a,".repeat(50_000));
        for body in [
            &dense[..],
            text.as_bytes(),
            nested.as_bytes(),
            spaced.as_bytes(),
            open.as_bytes(),
        ] {
            let (cost, seen) = (parse_cost(body), observed(body));
            assert!(
                cost >= seen,
                "cost {cost} < observed {seen} for {}",
                String::from_utf8_lossy(&body[..20])
            );
            assert!(
                cost < 3 * seen,
                "cost {cost} is far above observed {seen} for {}",
                String::from_utf8_lossy(&body[..20])
            );
        }
        // Dense numbers cost over 30 times their length: why large parses are counted.
        assert!(parse_cost(&dense) > 30 * dense.len());
        // Structure inside a string costs nothing beyond the length-proportional buffers.
        assert!(parse_cost(text.as_bytes()) < 2 * text.len());
    }
}
