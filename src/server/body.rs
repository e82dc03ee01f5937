//! The request body: how it is read against the memory budget and how the review parses it.
//! [`Plan`] is the one place that decides; [`read_body`] reads by it and [`Ready`] hands the
//! complete body to the review.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::Version;
use hyper::body::Body;

use super::budget::{self, Grant, Pool, Refused};
use crate::admission::{BadReview, Review, Verdict};

/// How a body is read and parsed, decided by its declared length and the protocol before it is
/// read, and by the frames it came in once it has arrived:
///
/// | Content-Length | protocol | arrived in | held as | parsed by |
/// |---|---|---|---|---|
/// | at most 256 KiB | HTTP/1 | one frame | the frame | `Review::answer_in_place`, where it lies |
/// | at most 256 KiB | HTTP/1 | 2 to [`MAX_FRAMES`] frames | the frames | `Review::answer`, on one copy of exactly its size |
/// | at most 256 KiB | HTTP/1 | more frames | a growing buffer | `Review::answer` |
/// | at most 256 KiB | HTTP/2 | any | a growing buffer | `Review::answer` |
/// | over 256 KiB, or none (chunked) | any | any | a growing buffer | `Review::answer`, the memory of a whole parse taken from the budget first |
///
/// A declared small body draws on the budget's reserved pool ([`Pool::for_declared`]), any
/// other on the rest. Frames are held only over HTTP/1: over HTTP/2 a stream's frames pin the
/// connection's shared read buffer wherever they lie. A large body is charged what parsing it
/// whole costs ([`budget::parse_cost`]) before it is read: that covers the reader's tape (the
/// whole parse's nodes with the skipped members emptied, in a vector that at most doubles past
/// them, where the whole parse reserves a node for each of the text's structural characters,
/// at least two a node) and the whole parse the pipeline falls back to when the reader
/// declines, which runs after the reader's tape is freed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// The budget's pool the body draws on.
    pub pool: Pool,
    /// What each held frame is charged besides its bytes (hyper's read buffer limit,
    /// `--max-header-bytes`: [`Frames`]); `None` when its frames are not held.
    pub pin: Option<usize>,
}

impl Plan {
    /// The plan for a body declaring `declared` bytes (`None`: chunked) over `version`, on a
    /// connection whose read buffer holds at most `max_header_bytes`.
    pub fn new(declared: Option<u64>, version: Version, max_header_bytes: usize) -> Plan {
        let pool = Pool::for_declared(declared);
        let pin = (pool == Pool::Small && version < Version::HTTP_2).then_some(max_header_bytes);
        Plan { pool, pin }
    }
}

/// A complete body, held as [`Plan`]'s last column parses it.
#[derive(Debug)]
pub(super) enum Ready {
    /// The body's one frame, a slice of the connection's read buffer: read where it lies.
    InPlace(Bytes),
    /// A buffer of exactly the body and the parser's padding, read skipping what no rule reads.
    Copied(Vec<u8>),
    /// A large body, its whole parse's memory taken from the budget.
    Large(Vec<u8>),
}

impl Ready {
    /// Takes from `grant` what parsing `received` needs besides what it holds, then holds the
    /// body as it is to be parsed. A small body is charged a copy of itself and the parser's
    /// padding, whether or not the copy is made (it is made only for a body in several frames,
    /// or when the reader declines one in a single frame); a large one what its parse holds
    /// until the answer is written.
    pub async fn take(
        received: Received,
        grant: &mut Grant<'_>,
        deadline: tokio::time::Instant,
    ) -> Result<Ready, Refused> {
        match received {
            Received::Frames(mut frames) => {
                let padded = frames.len + simd_json::INPUT_PADDING;
                grant.grow_to(grant.bytes() + padded, deadline).await?;
                if frames.count == 1 {
                    return Ok(Ready::InPlace(std::mem::take(&mut frames.first)));
                }
                // The frames go with the copy.
                let mut body = Vec::with_capacity(padded);
                frames.copy_into(&mut body);
                Ok(Ready::Copied(body))
            }
            Received::Buffer(body) if grant.pool() == Pool::Large => {
                let needed = body.capacity() + budget::parse_cost(&body);
                grant.grow_to(needed, deadline).await?;
                Ok(Ready::Large(body))
            }
            Received::Buffer(body) => Ok(Ready::Copied(body)),
        }
    }

    /// Answers the review in `self`, writing the answer into `out`.
    pub fn answer(&mut self, review: &Review<'_>, out: &mut Vec<u8>) -> Result<Verdict, BadReview> {
        match self {
            Ready::InPlace(body) => review.answer_in_place(body, out),
            Ready::Copied(body) | Ready::Large(body) => review.answer(body, out),
        }
    }
}

/// Why a body could not be read.
#[derive(Debug)]
pub(super) enum BodyError {
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
///
/// The first frame is held in place and the others in a vector allocated at the second: a
/// few-KB review comes in one frame, and this is moved from future to future as the body is
/// read and handed over, so it is kept small (eight `Bytes` in place were copied on each move,
/// with a `memcpy` call each: docs/performance.md).
#[derive(Debug, Default)]
pub(super) struct Frames {
    first: Bytes,
    more: Vec<Bytes>,
    count: usize,
    len: usize,
}

impl Frames {
    /// Holds `data`, the next frame.
    fn push(&mut self, data: Bytes) {
        if self.count == 0 {
            self.first = data;
        } else {
            if self.more.is_empty() {
                self.more.reserve_exact(MAX_FRAMES - 1);
            }
            self.more.push(data);
        }
        self.count += 1;
    }

    fn held(&self) -> impl Iterator<Item = &Bytes> {
        std::iter::once(&self.first)
            .take(self.count.min(1))
            .chain(&self.more)
    }

    /// Appends the body to `out`.
    fn copy_into(&self, out: &mut Vec<u8>) {
        for data in self.held() {
            out.extend_from_slice(data);
        }
    }
}

/// A body as it arrived.
#[derive(Debug)]
pub(super) enum Received {
    /// A small body over HTTP/1 (at most 256 KiB, in at most [`MAX_FRAMES`] frames), held
    /// until [`Ready::take`] copies it once, into a buffer of exactly its size and the
    /// parser's padding, or reads its one frame where it lies: copying frames into one growing
    /// buffer instead copies a body more than once over (docs/performance.md).
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
/// `--max-request-bytes`). `pin` is [`Plan::pin`]: what each held frame is charged besides its
/// bytes, `None` for a body whose frames are not to be held ([`Received`]). It stops at the
/// frame after which the body says it has ended (hyper knows it by the declared length),
/// without polling for the end: a review that came whole with its head is read in one poll.
pub(super) async fn read_body<B>(
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
                frames.push(data);
                frames.len = needed;
                if body.is_end_stream() {
                    break;
                }
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
        if body.is_end_stream() {
            break;
        }
    }
    Ok(received)
}

#[cfg(test)]
mod tests;
