//! The body reader's tests: each plan's path, and that every way a read ends returns its budget.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::metrics::Metrics;
use crate::server::budget::Budget;

/// A request body played from a script; `Stall` never resolves (a client gone quiet); after
/// `Last` the body says it has ended, and polling it again panics.
enum Step {
    Data(usize),
    Last(Bytes),
    Ended,
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
            Some(Step::Last(data)) => {
                self.0.push_front(Step::Ended);
                Poll::Ready(Some(Ok(hyper::body::Frame::data(data))))
            }
            Some(Step::Ended) => panic!("polled past its end"),
            Some(Step::Fail) => Poll::Ready(Some(Err(std::io::Error::other("reset")))),
            Some(Step::Stall) => {
                self.0.push_front(Step::Stall);
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0.front(), Some(Step::Ended))
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

#[test]
fn only_a_declared_small_body_over_http1_has_its_frames_held() {
    let small = Some(budget::SMALL as u64);
    let held = Plan {
        pool: Pool::Small,
        pin: Some(PIN),
    };
    assert_eq!(Plan::new(small, Version::HTTP_11, PIN), held);
    assert_eq!(Plan::new(small, Version::HTTP_10, PIN), held);
    assert_eq!(
        Plan::new(small, Version::HTTP_2, PIN),
        Plan {
            pool: Pool::Small,
            pin: None
        }
    );
    for declared in [Some(budget::SMALL as u64 + 1), None] {
        for version in [Version::HTTP_11, Version::HTTP_2] {
            let plan = Plan::new(declared, version, PIN);
            assert_eq!(
                plan,
                Plan {
                    pool: Pool::Large,
                    pin: None
                },
                "{declared:?} {version:?}"
            );
        }
    }
}

/// Frames held as [`read_body`] holds them, from `sizes`.
fn frames(sizes: &[usize]) -> Received {
    let mut frames = Frames::default();
    for &n in sizes {
        frames.push(Bytes::from(vec![b' '; n]));
        frames.len += n;
    }
    Received::Frames(frames)
}

#[tokio::test]
async fn a_body_in_one_frame_is_read_where_it_lies() {
    let (budget, metrics) = setup();
    let mut grant = budget.grant(Pool::Small);
    let received = frames(&[5000]);
    let Received::Frames(held) = &received else {
        unreachable!()
    };
    let lies_at = held.first.as_ptr();
    let ready = Ready::take(received, &mut grant, soon()).await;
    let Ok(Ready::InPlace(body)) = ready else {
        panic!("{ready:?}")
    };
    assert_eq!((body.as_ptr(), body.len()), (lies_at, 5000), "not copied");
    // Charged as if copied: a declining reader copies it.
    assert!(grant.bytes() >= 5000 + simd_json::INPUT_PADDING);
    drop((body, grant));
    all_returned(&budget, &metrics).await;
}

#[tokio::test]
async fn a_body_that_ends_with_its_first_frame_is_not_polled_for_its_end() {
    let (budget, metrics) = setup();
    let mut grant = budget.grant(Pool::Small);
    let data = Bytes::from(vec![b' '; 5000]);
    let lies_at = data.as_ptr();
    let script = Script([Step::Last(data)].into_iter().collect());
    let result = read_body(script, Some(PIN), &mut grant, 5000, soon()).await;
    let Ok(Received::Frames(frames)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(
        (frames.count, frames.len, frames.first.as_ptr()),
        (1, 5000, lies_at)
    );
    assert!(grant.bytes() >= 5000 + PIN, "{}", grant.bytes());
    drop((frames, grant));
    all_returned(&budget, &metrics).await;
}

#[tokio::test]
async fn a_body_in_several_frames_is_copied_once_to_its_exact_size() {
    let (budget, metrics) = setup();
    let mut grant = budget.grant(Pool::Small);
    let ready = Ready::take(frames(&[3000, 4000, 5]), &mut grant, soon()).await;
    let Ok(Ready::Copied(body)) = ready else {
        panic!("{ready:?}")
    };
    assert_eq!(body.len(), 7005);
    assert_eq!(body.capacity(), 7005 + simd_json::INPUT_PADDING);
    assert!(grant.bytes() >= body.capacity());
    drop(grant);
    all_returned(&budget, &metrics).await;
}

#[tokio::test]
async fn a_buffered_body_is_charged_a_whole_parse_only_when_large() {
    let (budget, metrics) = setup();
    let mut grant = budget.grant(Pool::Small);
    let ready = Ready::take(Received::Buffer(vec![b'1'; 1000]), &mut grant, soon()).await;
    assert!(matches!(ready, Ok(Ready::Copied(_))), "{ready:?}");
    assert_eq!(grant.bytes(), 0, "a small buffer was charged as it grew");
    drop(grant);
    let mut grant = budget.grant(Pool::Large);
    let body = b"[0,".repeat(20_000);
    let cost = body.capacity() + budget::parse_cost(&body);
    let ready = Ready::take(Received::Buffer(body), &mut grant, soon()).await;
    assert!(matches!(ready, Ok(Ready::Large(_))), "{ready:?}");
    assert!(grant.bytes() >= cost, "the parse's memory is held");
    drop(grant);
    all_returned(&budget, &metrics).await;
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
    let (result, held) = read(&budget, Pool::Large, [Step::Data(500_000), Step::Fail], MIB).await;
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
    // The request's future owns its grant, as `App::answer` (answer.rs) does; the connection ending
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
