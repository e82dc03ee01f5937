//! What the autoscaler index costs: the heap held by 10,000 HPAs must stay within 8 MiB (the
//! issue's bound). Measured by a counting allocator, so this test has a process of its own.

// The counting allocator needs `unsafe impl GlobalAlloc`; Cargo.toml's `[lints]` table denies
// `unsafe_code` for every target, so it is allowed for that file alone (its SAFETY comment).
#[allow(dead_code, unsafe_code)]
#[path = "../benches/common/counting.rs"]
mod counting;

use memcached_webhook::autoscalers::{Autoscalers, Controller, Kind, Lookup, Object};

/// 10,000 HPAs over 100 namespaces, names of 20 characters (longer than most), half of them
/// with a Memcached controller: the heap the index holds once they are in, then a re-list of
/// the same objects (the new copy is built beside the old one and swapped in).
#[test]
fn ten_thousand_hpas_fit_in_eight_mib() {
    counting::start();
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

    let before = counting::live();
    let index = Autoscalers::default();
    index.list_started(Kind::Hpa);
    for o in &objects {
        index.listed(Kind::Hpa, o);
    }
    index.list_done(Kind::Hpa);
    let held = counting::live() - before;
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
    let before = counting::live();
    assert_eq!(
        index.lookup("namespace-0000000001", "nothing-aims-here"),
        Lookup::Checked(Vec::new())
    );
    assert_eq!(counting::live(), before);

    // While a re-list fills, both copies are held: at most twice the bound.
    index.list_started(Kind::Hpa);
    for o in &objects {
        index.listed(Kind::Hpa, o);
    }
    let peak = counting::live() - before;
    index.list_done(Kind::Hpa);
    let after = counting::live() - before;
    eprintln!("during a re-list: {peak} bytes; after: {after} bytes");
    assert!(peak <= 2 * (8 << 20), "{peak}");
    assert!(
        after.abs() <= held / 10,
        "the old copy is freed: {after} of {held}"
    );
}
