//! Routes on the webhook port:
//! - `POST /mutate-memcached-c5c3-io-v1beta1-memcached`: the defaulting webhook.
//! - `POST /validate-memcached-c5c3-io-v1beta1-memcached`: the validating webhook.
//!
//! Routing looks at the path only (the apiserver appends `?timeout=10s`). Anything that is not
//! an answerable AdmissionReview gets a plain-text HTTP error with a one-line reason.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Incoming};
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode, Version};

use super::budget::{self, Budget, Grant, Pool, Refused};
use crate::admission::{self, MUTATE_PATH, VALIDATE_PATH, Webhook};
use crate::config::Config;
use crate::metrics::{BadRequest, Metrics};
use std::sync::Arc;

use crate::autoscalers::Autoscalers;

/// The webhook port's request handler.
#[derive(Debug)]
pub struct App {
    metrics: Arc<Metrics>,
    max_request_bytes: usize,
    /// hyper's HTTP/1 read buffer limit: what a held frame may keep alive besides itself.
    max_header_bytes: usize,
    body_read_timeout: Duration,
    validation_actions: admission::Actions,
    /// `--autoscaler-conflicts=on`: the index the validating webhook looks other autoscalers up in.
    autoscalers: Option<Arc<Autoscalers>>,
    budget: Budget,
}

impl App {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Self {
        App::with_autoscalers(config, metrics, None)
    }

    /// [`App::new`], judging against `autoscalers` when given.
    pub fn with_autoscalers(
        config: &Config,
        metrics: Arc<Metrics>,
        autoscalers: Option<Arc<Autoscalers>>,
    ) -> Self {
        let budget_bytes = usize::try_from(config.max_inflight_body_bytes).unwrap_or(usize::MAX);
        App {
            budget: Budget::new(budget_bytes, metrics.clone()),
            metrics,
            max_request_bytes: config.max_request_bytes,
            max_header_bytes: config.max_header_bytes as usize,
            body_read_timeout: config.body_read_timeout,
            validation_actions: config.validation_actions,
            autoscalers,
        }
    }

    pub async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let webhook = match req.uri().path() {
            MUTATE_PATH => Webhook::Mutate,
            VALIDATE_PATH => Webhook::Validate,
            _ => {
                self.metrics.bad_request(BadRequest::NotFound);
                return text(
                    StatusCode::NOT_FOUND,
                    "no such path; the webhooks are served at /mutate-memcached-c5c3-io-v1beta1-memcached and /validate-memcached-c5c3-io-v1beta1-memcached\n",
                );
            }
        };
        let metrics = self.metrics.webhook(webhook);
        metrics.in_flight.inc();
        // Decrements even when the client goes away mid-request and this future is dropped.
        let _in_flight = InFlight(&metrics.in_flight);
        let response = self.answer(webhook, req, started).await;
        metrics.latency.observe(started.elapsed().as_secs_f64());
        metrics.request(response.status().as_u16());
        response
    }

    async fn answer(
        &self,
        webhook: Webhook,
        req: Request<Incoming>,
        started: Instant,
    ) -> Response<Full<Bytes>> {
        let bad = |reason| self.metrics.bad_request(reason);
        if req.method() != Method::POST {
            bad(BadRequest::Method);
            let mut response = text(
                StatusCode::METHOD_NOT_ALLOWED,
                "the webhooks accept POST only\n",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        if !is_json(req.headers().get(CONTENT_TYPE)) {
            bad(BadRequest::ContentType);
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/json\n",
            );
        }
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_request_bytes as u64) {
            bad(BadRequest::TooLarge);
            return self.too_large();
        }
        let deadline = tokio::time::Instant::now() + self.body_read_timeout;
        let mut grant = self.budget.grant(Pool::for_declared(declared));
        let limit = declared.map_or(self.max_request_bytes, |n| n as usize);
        // Only a small body over HTTP/1 keeps its frames ([`Received`]).
        let pin = (grant.pool() == Pool::Small && req.version() < Version::HTTP_2)
            .then_some(self.max_header_bytes);
        let read = read_body(req.into_body(), pin, &mut grant, limit, deadline);
        let received = match tokio::time::timeout_at(deadline, read).await {
            Err(_) => {
                bad(BadRequest::Timeout);
                return text(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time\n",
                );
            }
            Ok(Err(BodyError::TooLarge)) => {
                bad(BadRequest::TooLarge);
                return self.too_large();
            }
            Ok(Err(BodyError::Read(e))) => {
                bad(BadRequest::Unreadable);
                tracing::debug!(error = %e, "reading the request body failed");
                return text(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                );
            }
            Ok(Err(BodyError::Budget(refused))) => return self.refused(refused),
            Ok(Ok(received)) => received,
        };
        // Room for a patched answer (a 5.6 KB `kubectl apply` CREATE's is 1.2 KB with its base64
        // patch and audit annotations), so it is written without reallocating.
        let mut out = Vec::with_capacity(2048);
        let review = admission::Review {
            webhook,
            actions: self.validation_actions,
            autoscalers: self.autoscalers.as_deref(),
            started,
        };
        // No panic is expected; if one happens it costs this request (500), not the process.
        let reviewed = match received {
            Received::Frames(frames) => {
                // A copy of exactly the body and the parser's padding, charged whether or not
                // it is made: a body in one frame (a review of a few KB comes in one) is read
                // where it lies, and copied only if simd-json must parse it whole.
                let padded = frames.len + simd_json::INPUT_PADDING;
                let held = grant.bytes();
                if let Err(refused) = grant.grow_to(held + padded, deadline).await {
                    return self.refused(refused);
                }
                if let [body] = frames.held() {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        review.answer_in_place(body, &mut out)
                    }))
                } else {
                    // The frames go with the copy.
                    let mut body = Vec::with_capacity(padded);
                    frames.copy_into(&mut body);
                    drop(frames);
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        review.answer(&mut body, &mut out)
                    }))
                }
            }
            Received::Buffer(mut body) => {
                // A large body's parse takes several times its size (`budget::parse_cost`):
                // held from here until the answer is written, when the parser's buffers are
                // freed. It is parsed whole, as that cost assumes.
                let large = grant.pool() == Pool::Large;
                if large {
                    let needed = body.capacity() + budget::parse_cost(&body);
                    if let Err(refused) = grant.grow_to(needed, deadline).await {
                        return self.refused(refused);
                    }
                }
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    if large {
                        review.answer_whole(&mut body, &mut out)
                    } else {
                        review.answer(&mut body, &mut out)
                    }
                }))
            }
        };
        match reviewed {
            Ok(Ok(verdict)) => {
                self.metrics.webhook(webhook).admission(&verdict);
                let mut response = Response::new(Full::new(Bytes::from(out)));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }
            Ok(Err(reason)) => {
                bad(BadRequest::NotAdmissionReview);
                tracing::info!(webhook = webhook.path(), reason = %reason, "rejected a body that is not an AdmissionReview");
                text(StatusCode::BAD_REQUEST, &format!("{reason}\n"))
            }
            Err(_) => {
                bad(BadRequest::Panic);
                tracing::error!(
                    webhook = webhook.path(),
                    "the admission handler panicked; answered 500"
                );
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    /// 503 while the budget is used up (the apiserver retries), 413 when it never could hold it.
    fn refused(&self, refused: Refused) -> Response<Full<Bytes>> {
        match refused {
            Refused::Busy => {
                let mut response = text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server's memory for request bodies is in use by other requests \
                     (--max-inflight-body-bytes); retry shortly\n",
                );
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            Refused::TooBig { needed, pool } => {
                self.metrics.bad_request(BadRequest::TooLarge);
                text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "reading and parsing this body needs {needed} bytes of memory, more than the \
                         {pool} bytes --max-inflight-body-bytes allows for bodies over 256 KiB\n"
                    ),
                )
            }
        }
    }

    fn too_large(&self) -> Response<Full<Bytes>> {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than {} bytes (--max-request-bytes)\n",
                self.max_request_bytes
            ),
        )
    }
}

struct InFlight<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[derive(Debug)]
enum BodyError {
    TooLarge,
    Read(Box<dyn std::error::Error + Send + Sync>),
    Budget(Refused),
}

/// A small body is held as at most this many frames (the apiserver's few-KB reviews come in
/// one; over TLS a frame is at most a 16 KiB record, so a 100 KB review comes in seven or so);
/// a body in more is copied as it comes from there on.
const MAX_FRAMES: usize = 8;

/// The request body as it arrived over HTTP/1: hyper's frames, which are slices of the
/// connection's read buffer, so holding them copies nothing, but keeps alive the buffer
/// allocation each one lies in. hyper allocates a new one while an old one is held, so each
/// held frame is charged the most such an allocation holds besides the frame: hyper's read
/// buffer limit, `--max-header-bytes` (64 KiB).
#[derive(Debug, Default)]
struct Frames {
    held: [Bytes; MAX_FRAMES],
    count: usize,
    len: usize,
}

impl Frames {
    fn held(&self) -> &[Bytes] {
        &self.held[..self.count]
    }

    /// Appends the body to `out`.
    fn copy_into(&self, out: &mut Vec<u8>) {
        for data in self.held() {
            out.extend_from_slice(data);
        }
    }
}

/// A body as it arrived.
// The frames' variant is larger (eight `Bytes`), but this lives in one request's future, and
// boxing it would allocate on every request.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Received {
    /// A small body over HTTP/1 (at most 256 KiB, in at most [`MAX_FRAMES`] frames): read where
    /// it lies when it came in one frame, else copied once when complete, into a buffer of
    /// exactly its size and the parser's padding. Copying frames into one growing buffer instead copied a 100 KB review ~1.6 times over
    /// (65,000 instructions of `realloc` per request over TLS, 5 %).
    Frames(Frames),
    /// Any other body, copied as it comes into a buffer that doubles (so at most twice what has
    /// arrived, never past the limit and the parser's padding), taken from the budget before it
    /// grows. Its frames are not held: over HTTP/2 a stream's frames pin the connection's
    /// shared read buffer wherever they lie, and a large body's grant must grow in steps as
    /// bytes arrive, never by a copy's worth at once, or large bodies waiting for budget would
    /// each hold their frames and all wait for more.
    Buffer(Vec<u8>),
}

impl Received {
    fn len(&self) -> usize {
        match self {
            Received::Frames(frames) => frames.len,
            Received::Buffer(buffer) => buffer.len(),
        }
    }
}

/// Reads the body, stopping as soon as it would pass `limit` (the declared Content-Length, or
/// `--max-request-bytes`). `pin` is what each held frame is charged besides its bytes, `None`
/// for a body whose frames are not to be held ([`Received`]).
async fn read_body<B>(
    mut body: B,
    pin: Option<usize>,
    grant: &mut Grant<'_>,
    limit: usize,
    deadline: tokio::time::Instant,
) -> Result<Received, BodyError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let padding = simd_json::INPUT_PADDING;
    let mut received = match pin {
        Some(_) => Received::Frames(Frames::default()),
        None => Received::Buffer(Vec::new()),
    };
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| BodyError::Read(e.into()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let needed = received.len() + data.len();
        if needed > limit {
            return Err(BodyError::TooLarge);
        }
        if let Received::Frames(frames) = &mut received {
            if frames.count < MAX_FRAMES {
                let pinned = (frames.count + 1) * pin.unwrap_or_default();
                grant
                    .grow_to(needed + pinned, deadline)
                    .await
                    .map_err(BodyError::Budget)?;
                frames.held[frames.count] = data;
                frames.count += 1;
                frames.len = needed;
                continue;
            }
            // One frame too many: from here on the body is copied as it comes.
            let mut out = Vec::new();
            frames.copy_into(&mut out);
            received = Received::Buffer(out);
        }
        let Received::Buffer(out) = &mut received else {
            unreachable!("frames were either held or turned into a buffer above")
        };
        if needed + padding > out.capacity() {
            let capacity = (2 * out.capacity()).max(16 * 1024).clamp(needed, limit) + padding;
            grant
                .grow_to(capacity, deadline)
                .await
                .map_err(BodyError::Budget)?;
            out.reserve_exact(capacity - out.len());
        }
        out.extend_from_slice(&data);
    }
    Ok(received)
}

/// `application/json`, with or without parameters such as `; charset=utf-8`.
fn is_json(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let media_type = value.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case("application/json")
}

/// A plain-text response; the body is one line saying what was wrong.
pub fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(message.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/json-patch+json", false),
            ("text/plain", false),
        ] {
            assert_eq!(
                is_json(Some(&HeaderValue::from_static(value))),
                ok,
                "{value}"
            );
        }
        assert!(!is_json(None));
    }

    /// A request body played from a script; `Stall` never resolves (a client gone quiet).
    enum Step {
        Data(usize),
        Fail,
        Stall,
    }

    struct Script(std::collections::VecDeque<Step>);

    impl Body for Script {
        type Data = Bytes;
        type Error = std::io::Error;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            use std::task::Poll;
            match self.0.pop_front() {
                None => Poll::Ready(None),
                Some(Step::Data(n)) => {
                    Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from(vec![
                        b' ';
                        n
                    ])))))
                }
                Some(Step::Fail) => Poll::Ready(Some(Err(std::io::Error::other("reset")))),
                Some(Step::Stall) => {
                    self.0.push_front(Step::Stall);
                    Poll::Pending
                }
            }
        }
    }

    const MIB: usize = 1024 * 1024;

    fn setup() -> (Budget, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        (Budget::new(8 * MIB, metrics.clone()), metrics)
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(50)
    }

    /// Nothing is held, and the whole large pool (7 MiB of 8) can be taken again.
    async fn all_returned(budget: &Budget, metrics: &Metrics) {
        assert_eq!(metrics.body_budget.in_use.get(), 0);
        let mut all = budget.grant(Pool::Large);
        all.grow_to(7 * MIB, tokio::time::Instant::now())
            .await
            .expect("the whole pool is free");
    }

    /// What a held frame is charged besides its bytes in these tests.
    const PIN: usize = 4 * 1024;

    async fn read(
        budget: &Budget,
        pool: Pool,
        steps: impl IntoIterator<Item = Step>,
        limit: usize,
    ) -> (Result<Received, BodyError>, usize) {
        let mut grant = budget.grant(pool);
        let script = Script(steps.into_iter().collect());
        let pin = (pool == Pool::Small).then_some(PIN);
        let result = read_body(script, pin, &mut grant, limit, soon()).await;
        (result, grant.bytes())
    }

    #[tokio::test]
    async fn a_small_body_is_held_frame_by_frame_and_returned() {
        let (budget, metrics) = setup();
        let steps = [Step::Data(100_000), Step::Data(150_000), Step::Data(7)];
        let (result, held) = read(&budget, Pool::Small, steps, 250_007).await;
        let Ok(Received::Frames(frames)) = result else {
            panic!("{result:?}")
        };
        assert_eq!((frames.len, frames.count), (250_007, 3));
        // The bytes, and what each held frame may keep alive of hyper's buffer.
        let charged = 250_007 + 3 * PIN;
        assert!((charged..charged + 1024).contains(&held), "{held}");
        let mut body = Vec::new();
        frames.copy_into(&mut body);
        assert_eq!(body.len(), 250_007);
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_small_body_in_many_frames_is_copied_as_it_comes() {
        let (budget, metrics) = setup();
        let steps = (0..MAX_FRAMES + 3).map(|_| Step::Data(1000));
        let n = 1000 * (MAX_FRAMES + 3);
        let (result, held) = read(&budget, Pool::Small, steps, n).await;
        let Ok(Received::Buffer(body)) = result else {
            panic!("{result:?}")
        };
        assert_eq!(body.len(), n);
        assert!(body.iter().all(|&b| b == b' '));
        assert!(held >= body.capacity(), "{held}");
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_large_body_grows_one_buffer_to_its_length_and_padding() {
        let (budget, metrics) = setup();
        let steps = [Step::Data(100_000), Step::Data(200_000), Step::Data(7)];
        let (result, held) = read(&budget, Pool::Large, steps, 300_007).await;
        let Ok(Received::Buffer(body)) = result else {
            panic!("{result:?}")
        };
        assert_eq!(body.len(), 300_007);
        // Exactly the declared length and the parser's padding: no copy before parsing.
        assert_eq!(body.capacity(), 300_007 + simd_json::INPUT_PADDING);
        assert!(held >= body.capacity() && held < body.capacity() + 1024);
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn memory_is_taken_as_bytes_arrive_not_as_declared() {
        let (budget, metrics) = setup();
        let mut grant = budget.grant(Pool::Large);
        let script = Script([Step::Data(1000), Step::Stall].into_iter().collect());
        // Declares 7 MB and sends 1000 bytes, then nothing.
        let read = read_body(script, None, &mut grant, 7_000_000, soon());
        assert!(
            tokio::time::timeout(Duration::from_millis(20), read)
                .await
                .is_err()
        );
        assert!(grant.bytes() <= 17 * 1024, "{}", grant.bytes());
        let mut small = budget.grant(Pool::Small);
        let script = Script([Step::Data(1000), Step::Stall].into_iter().collect());
        let read = read_body(script, Some(PIN), &mut small, 200_000, soon());
        assert!(
            tokio::time::timeout(Duration::from_millis(20), read)
                .await
                .is_err()
        );
        assert_eq!(small.bytes(), 1024 + PIN);
        drop(small);
        drop(grant);
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_failed_body_returns_its_budget() {
        let (budget, metrics) = setup();
        let (result, held) =
            read(&budget, Pool::Large, [Step::Data(500_000), Step::Fail], MIB).await;
        assert!(matches!(result, Err(BodyError::Read(_))), "{result:?}");
        assert!(held >= 500_000);
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_body_over_the_limit_returns_its_budget() {
        let (budget, metrics) = setup();
        for pool in [Pool::Small, Pool::Large] {
            let steps = [Step::Data(60_000), Step::Data(60_000)];
            let (result, held) = read(&budget, pool, steps, 100_000).await;
            assert!(matches!(result, Err(BodyError::TooLarge)), "{result:?}");
            assert!(
                held < 100_000 + PIN,
                "{pool:?}: stopped before taking the frame past the limit: {held}"
            );
        }
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_client_gone_mid_body_returns_its_budget() {
        let (budget, metrics) = setup();
        // The request's future owns its grant, as `App::answer` does; the connection ending
        // (or the body deadline) drops that future mid-read.
        let request = async {
            let mut grant = budget.grant(Pool::Large);
            let script = Script([Step::Data(300_000), Step::Stall].into_iter().collect());
            read_body(script, None, &mut grant, MIB, soon()).await
        };
        let mut request = Box::pin(request);
        tokio::select! {
            _ = &mut request => panic!("a stalled body finished"),
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
        }
        assert!(metrics.body_budget.in_use.get() >= 300_000);
        drop(request);
        all_returned(&budget, &metrics).await;
    }

    #[tokio::test]
    async fn a_body_that_waits_too_long_for_budget_is_refused_and_returns_its_budget() {
        let (budget, metrics) = setup();
        let mut hog = budget.grant(Pool::Large);
        hog.grow_to(6 * MIB, soon()).await.unwrap();
        let (result, held) = read(
            &budget,
            Pool::Large,
            [Step::Data(500_000), Step::Data(800_000)],
            2 * MIB,
        )
        .await;
        assert!(
            matches!(result, Err(BodyError::Budget(Refused::Busy))),
            "{result:?}"
        );
        assert!(held >= 500_000, "the first chunk fitted");
        assert_eq!(metrics.body_budget.refusals.get(), 1);
        drop(hog);
        all_returned(&budget, &metrics).await;
    }
}
