//! What the autoscaler index costs: the heap held by 10,000 HPAs must stay within 8 MiB (the
//! issue's bound). Measured by a counting allocator, so this test has a process of its own.

// The counting allocator needs `unsafe impl GlobalAlloc`; Cargo.toml's `[lints]` table denies
// `unsafe_code` for every target, so this target allows it for itself. Sound: see the SAFETY
// comment on the impl; nothing else here is unsafe.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use memcached_webhook::autoscalers::{Autoscalers, Controller, Kind, Lookup, Object};

/// Forwards every call to [`System`] and keeps the bytes currently allocated.
struct Live;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every method passes its arguments unchanged to the same method of `System` (which
// implements `GlobalAlloc` correctly) and returns its result unchanged, so each of the trait's
// contracts is exactly System's. The only extra work is an atomic add on a static, which
// neither allocates nor unwinds.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Relaxed);
        // SAFETY: the caller upholds `alloc`'s contract, forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as i64, Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Relaxed);
        // SAFETY: `ptr` came from System with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Relaxed);
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// 10,000 HPAs over 100 namespaces, names of 20 characters (longer than most), half of them
/// with a Memcached controller: the heap the index holds once they are in, then a re-list of
/// the same objects (the new copy is built beside the old one and swapped in).
#[test]
fn ten_thousand_hpas_fit_in_eight_mib() {
    let objects: Vec<Object> = (0..10_000)
        .map(|i| {
            let deployment = format!("deployment-{i:09}");
            Object {
                namespace: format!("namespace-{:010}", i % 100),
                name: format!("autoscaler-{i:09}"),
                controller: if i % 2 == 0 {
                    Controller::Memcached(deployment.as_str().into())
                } else {
                    Controller::None
                },
                deployment: Some(deployment),
            }
        })
        .collect();

    let before = LIVE.load(Relaxed);
    let index = Autoscalers::default();
    index.list_started(Kind::Hpa);
    for o in &objects {
        index.listed(Kind::Hpa, o);
    }
    index.list_done(Kind::Hpa);
    let held = LIVE.load(Relaxed) - before;
    assert_eq!(index.len(Kind::Hpa), 10_000);
    eprintln!(
        "10,000 HPAs in the index: {held} bytes ({:.2} MiB, {} bytes each)",
        held as f64 / f64::from(1 << 20),
        held / 10_000
    );
    assert!(held > 10_000 * 64, "the allocator sees the index: {held}");
    assert!(held <= 8 << 20, "{held} bytes for 10,000 HPAs");

    // A lookup allocates nothing when nothing conflicts.
    index.set_sync(
        Kind::ScaledObject,
        memcached_webhook::autoscalers::Sync::NotServed,
    );
    let before = LIVE.load(Relaxed);
    assert_eq!(
        index.lookup("namespace-0000000001", "nothing-aims-here"),
        Lookup::Checked(Vec::new())
    );
    assert_eq!(LIVE.load(Relaxed), before);

    // While a re-list fills, both copies are held: at most twice the bound.
    index.list_started(Kind::Hpa);
    for o in &objects {
        index.listed(Kind::Hpa, o);
    }
    let peak = LIVE.load(Relaxed) - before;
    index.list_done(Kind::Hpa);
    let after = LIVE.load(Relaxed) - before;
    eprintln!("during a re-list: {peak} bytes; after: {after} bytes");
    assert!(peak <= 2 * (8 << 20), "{peak}");
    assert!(
        after.abs() <= held / 10,
        "the old copy is freed: {after} of {held}"
    );
}
