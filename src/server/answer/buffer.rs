//! The buffer an answer is written into, handed back to its worker thread once hyper has
//! written it, so the next answer on that thread reuses it: a defaulting answer's 2 KiB is too
//! big for glibc's per-thread cache, and a fresh one cost a `malloc` and a `free` from the
//! arena, about 450 instructions a request (docs/performance.md).

use std::cell::Cell;

use bytes::Buf;

/// A buffer bigger than this is freed, not kept: a rare long answer (many causes of a denial)
/// does not stay pinned on every worker thread.
const KEEP_AT_MOST: usize = 16 * 1024;

thread_local! {
    /// This thread's spare buffer: empty (no allocation) until an answer is dropped here.
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// An empty buffer with room for `capacity` bytes at least: this thread's spare when it has
/// one.
pub(in crate::server) fn take(capacity: usize) -> Vec<u8> {
    let mut buffer = SPARE.try_with(Cell::take).unwrap_or_default();
    buffer.clear();
    buffer.reserve(capacity);
    buffer
}

/// An answer's bytes as hyper sends them (a [`Buf`]); when dropped, written or not, the buffer
/// becomes its thread's spare.
#[derive(Debug)]
pub(in crate::server) struct Answer {
    bytes: Vec<u8>,
    /// How many bytes hyper has taken.
    sent: usize,
}

impl From<Vec<u8>> for Answer {
    fn from(bytes: Vec<u8>) -> Self {
        Answer { bytes, sent: 0 }
    }
}

impl Buf for Answer {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.sent
    }

    fn chunk(&self) -> &[u8] {
        &self.bytes[self.sent..]
    }

    fn advance(&mut self, n: usize) {
        assert!(n <= self.remaining(), "advanced past the answer's end");
        self.sent += n;
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        if bytes.capacity() <= KEEP_AT_MOST {
            // After the thread's locals are gone (the thread is ending), it is freed.
            let _ = SPARE.try_with(|spare| spare.set(bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each test runs on a thread of its own, whose spare starts empty.
    fn on_a_new_thread(test: impl FnOnce() + Send + 'static) {
        std::thread::spawn(test).join().unwrap();
    }

    #[test]
    fn an_answer_dropped_is_the_next_buffer_taken_on_its_thread() {
        on_a_new_thread(|| {
            let mut first = take(2048);
            assert!(first.capacity() >= 2048);
            first.extend_from_slice(b"{\"kind\":\"AdmissionReview\"}");
            let at = first.as_ptr();
            drop(Answer::from(first));
            let second = take(1024);
            assert_eq!(second.as_ptr(), at, "the spare was not reused");
            assert!(second.is_empty(), "the spare kept the last answer's bytes");
            assert!(second.capacity() >= 2048);
            // Taken, the spare is gone: another answer at the same time gets its own.
            let third = take(1024);
            assert_ne!(third.as_ptr(), at);
        });
    }

    #[test]
    fn a_long_answer_is_freed_not_kept() {
        on_a_new_thread(|| {
            let mut long = take(KEEP_AT_MOST + 1);
            long.push(b'x');
            drop(Answer::from(long));
            assert_eq!(take(0).capacity(), 0, "a buffer over KEEP_AT_MOST was kept");
        });
    }

    #[test]
    fn a_spare_smaller_than_asked_grows() {
        on_a_new_thread(|| {
            drop(Answer::from(Vec::with_capacity(16)));
            assert!(take(4096).capacity() >= 4096);
        });
    }

    #[test]
    fn hyper_reads_the_answer_in_chunks() {
        let mut answer = Answer::from(b"hello, apiserver".to_vec());
        assert_eq!(answer.remaining(), 16);
        answer.advance(7);
        assert_eq!(answer.chunk(), b"apiserver");
        answer.advance(9);
        assert_eq!(answer.remaining(), 0);
        assert!(answer.chunk().is_empty());
    }
}
