//! A global allocator that forwards every call to [`System`] and, while switched on, counts:
//! the calls and bytes requested (what a request costs, `benches/admission.rs`) and the bytes
//! live (what a structure holds, `tests/index_memory.rs`). Installed by including this file
//! (`#[path]`), each target in a process of its own; the including `mod` item allows
//! `unsafe_code` for this file alone, which the SAFETY comment below proves sound.
//!
//! Off by default, so that timings pay one relaxed load per allocation, not three atomic adds
//! (which would cost an allocation-heavy baseline more than the code it is compared with).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

/// Forwards every call to [`System`] and, while [`start`]ed, counts it.
pub struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicU64 = AtomicU64::new(0);
static REQUESTED: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts from here on. Only the differences between two readings taken while counting mean
/// anything: memory allocated before is freed uncounted.
pub fn start() {
    ON.store(true, Relaxed);
}

/// Stops counting; the readings keep their values.
pub fn stop() {
    ON.store(false, Relaxed);
}

/// Sets the calls and the bytes requested back to zero.
pub fn reset() {
    CALLS.store(0, Relaxed);
    REQUESTED.store(0, Relaxed);
}

/// Allocations (`alloc`, `alloc_zeroed`, `realloc`) counted since [`reset`].
pub fn calls() -> u64 {
    CALLS.load(Relaxed)
}

/// Bytes those allocations asked for.
pub fn requested() -> u64 {
    REQUESTED.load(Relaxed)
}

/// Bytes allocated and not yet freed while counting.
pub fn live() -> i64 {
    LIVE.load(Relaxed)
}

/// An allocation of `new` bytes that replaces one of `old` (0 for a fresh one).
fn allocated(new: usize, old: usize) {
    if ON.load(Relaxed) {
        CALLS.fetch_add(1, Relaxed);
        REQUESTED.fetch_add(new as u64, Relaxed);
        LIVE.fetch_add(new as i64 - old as i64, Relaxed);
    }
}

fn freed(size: usize) {
    if ON.load(Relaxed) {
        LIVE.fetch_sub(size as i64, Relaxed);
    }
}

// SAFETY: every method passes its arguments unchanged to the same method of `System` (which
// implements `GlobalAlloc` correctly) and returns its result unchanged, so each of the
// trait's contracts (layout, alignment, ownership of the pointer) is exactly System's. The
// only extra work is `allocated` and `freed`: atomic loads and adds on statics, which neither
// allocate (no re-entrancy) nor unwind.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size(), 0);
        // SAFETY: the caller upholds `alloc`'s contract, which is forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        allocated(layout.size(), 0);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        freed(layout.size());
        // SAFETY: `ptr` came from System (every allocation above is System's) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        allocated(new_size, layout.size());
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
