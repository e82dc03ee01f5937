//! The in-process hot path, bytes in to bytes out: `admission::Review` as the server calls it
//! (read the review onto a reused tape, skipping what no rule reads, read the borrowed view,
//! decide, write the patch and the response) for
//! every fixture and both webhooks, next to the conventional serde_json approach:
//! `serde_json::Value`, defaults applied to a clone, `json_patch::diff`, a `Value` response
//! with the base64 patch, `serde_json::to_vec`.
//!
//! ```text
//! cargo bench --bench admission                                  # full criterion run
//! cargo bench --bench admission -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench admission -- typical-create                # one fixture
//! ```
//!
//! After criterion, two tables: allocations per request (a counting global allocator), and
//! an indicative ours/baseline ratio from a quick best-of-N wall-clock loop.
//!
//! Honesty rules: each of our iterations takes the path the server takes (`server/body.rs`'s `Plan`): a
//! body of at most `budget::SMALL` bytes that came in one frame (a review of a few KB does) is
//! read where it lies (`Review::answer_in_place`), a larger one is copied into a buffer sized
//! like the server's (body length + simd-json padding) and answered from it (`answer`); the
//! response buffer is allocated as the server allocates it. All of it is timed (`parse-only`
//! shows what a whole parse costs: a copy plus simd-json's tape). The baseline parses straight
//! from the shared fixture slice, as `serde_json::from_slice` on collected `Bytes` would.

mod common;

// The counting allocator needs `unsafe impl GlobalAlloc`; Cargo.toml's `[lints]` table denies
// `unsafe_code` for every target, so it is allowed for that file alone (its SAFETY comment).
#[allow(dead_code, unsafe_code)]
#[path = "common/counting.rs"]
mod counting;

use std::hint::black_box;
use std::time::{Duration, Instant};

use base64::Engine as _;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use memcached_webhook::admission::{self, Webhook};
use memcached_webhook::server::budget;
use serde_json::Value;

use common::Fixture;

/// (allocations, bytes requested) per call of `f`, averaged over `iters` calls. Criterion is
/// single-threaded here (no rayon without its default features), so nothing else counts.
fn allocations_per_call(iters: u64, mut f: impl FnMut()) -> (f64, f64) {
    counting::reset();
    counting::start();
    for _ in 0..iters {
        f();
    }
    counting::stop();
    let n = iters as f64;
    (
        counting::calls() as f64 / n,
        counting::requested() as f64 / n,
    )
}

// === the two implementations ===

/// Ours, as `server/body.rs` reads a body over HTTP/1: read where it lies when it declares
/// at most `budget::SMALL` bytes (a body in one frame), else copied into a buffer of the
/// server's size (length + padding) and answered from it; a fresh response buffer of the
/// server's size (`Webhook::answer_capacity`).
fn ours(webhook: Webhook, fixture: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(webhook.answer_capacity());
    let review = admission::Review::new(webhook);
    let verdict = if fixture.len() <= budget::SMALL {
        review.answer_in_place(fixture, &mut out)
    } else {
        review.answer(&mut copied(fixture), &mut out)
    };
    verdict.expect("every fixture is an answerable AdmissionReview");
    out
}

/// The fixture in a buffer sized as the server sizes one (length + padding, so the padding
/// does not reallocate).
fn copied(fixture: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(fixture.len() + simd_json::INPUT_PADDING);
    body.extend_from_slice(fixture);
    body
}

/// A whole parse alone: the copy and simd-json's tape, with the parser state reused as the
/// pipeline reuses it (per thread), to read how much a whole parse would cost `ours`.
struct Parser {
    buffers: simd_json::Buffers,
    tape: Option<simd_json::Tape<'static>>,
}

impl Parser {
    fn new() -> Self {
        Parser {
            buffers: simd_json::Buffers::new(16 * 1024),
            tape: Some(simd_json::Tape::null()),
        }
    }

    /// Returns the number of tape nodes.
    fn parse(&mut self, fixture: &[u8]) -> usize {
        let mut body = copied(fixture);
        let len = body.len();
        body.resize(len + simd_json::INPUT_PADDING, b' ');
        let mut tape = self
            .tape
            .take()
            .unwrap_or_else(simd_json::Tape::null)
            .reset();
        simd_json::fill_tape_padded(&mut body, len, &mut self.buffers, &mut tape)
            .expect("the fixture is JSON");
        let nodes = tape.0.len();
        self.tape = Some(tape.reset());
        nodes
    }
}

/// The conventional Rust webhook: a `serde_json::Value` DOM, defaults applied to a clone of
/// the object, `json_patch::diff` to find the patch, a `Value` response serialised with
/// `serde_json::to_vec`. Same rules as `memcached::defaults`, written the way one would
/// write them against a DOM. Its validating webhook parses and allows, checking no rule: a
/// lower bound for any DOM-based validator (ours runs `memcached::validate`).
mod baseline {
    use super::*;
    use memcached_webhook::memcached::defaults as d;
    use serde_json::json;

    pub fn review(webhook: Webhook, body: &[u8]) -> Vec<u8> {
        let review: Value = serde_json::from_slice(body).expect("the fixture is JSON");
        let request = &review["request"];
        let api_version = review["apiVersion"]
            .as_str()
            .unwrap_or("admission.k8s.io/v1");
        let mut response = json!({ "uid": request["uid"], "allowed": true });
        let operation = request["operation"].as_str().unwrap_or_default();
        let object = &request["object"];
        if webhook == Webhook::Mutate
            && matches!(operation, "CREATE" | "UPDATE")
            && request["kind"]["group"] == "memcached.c5c3.io"
            && request["kind"]["kind"] == "Memcached"
            && object.is_object()
        {
            let mut defaulted = object.clone();
            let warnings = apply_defaults(&mut defaulted);
            let patch = json_patch::diff(object, &defaulted);
            if !patch.0.is_empty() {
                let patch = serde_json::to_vec(&patch).expect("a patch serialises");
                response["patchType"] = json!("JSONPatch");
                response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch));
            }
            if !warnings.is_empty() {
                response["warnings"] = json!(warnings);
            }
        }
        let answer = json!({
            "apiVersion": api_version,
            "kind": "AdmissionReview",
            "response": response,
        });
        serde_json::to_vec(&answer).expect("a Value serialises")
    }

    /// Go's "unset": absent or null.
    fn unset(v: Option<&Value>) -> bool {
        v.is_none_or(Value::is_null)
    }

    /// Go's zero value of a string field: absent, null or "".
    fn empty_str(v: Option<&Value>) -> bool {
        v.and_then(Value::as_str).is_none_or(str::is_empty)
    }

    /// The reference operator's defaulting rules, on a DOM.
    pub fn apply_defaults(object: &mut Value) -> Vec<String> {
        let mut warnings = Vec::new();
        let Some(object) = object.as_object_mut() else {
            return warnings;
        };
        let spec = object.entry("spec").or_insert_with(|| json!({}));
        if spec.is_null() {
            *spec = json!({});
        }
        let Some(spec) = spec.as_object_mut() else {
            return warnings;
        };
        let autoscaling = spec.get("autoscaling").filter(|a| a.is_object()).cloned();
        let autoscaling_enabled = autoscaling
            .as_ref()
            .and_then(|a| a.get("enabled"))
            .and_then(Value::as_bool)
            .unwrap_or(false);

        if autoscaling_enabled {
            if let Some(replicas) = spec.get("replicas").filter(|r| !r.is_null()).cloned() {
                spec.remove("replicas");
                warnings.push(format!(
                    "spec.replicas: removed the value {replicas} because spec.autoscaling.enabled is true"
                ));
            }
        } else if unset(spec.get("replicas")) {
            spec.insert("replicas".into(), json!(d::REPLICAS));
        }
        if unset(spec.get("image")) {
            spec.insert("image".into(), json!(d::IMAGE));
        }

        memcached_defaults(spec);
        monitoring_defaults(spec);
        if let Some(ha) = spec
            .get_mut("highAvailability")
            .and_then(Value::as_object_mut)
            && unset(ha.get("antiAffinityPreset"))
        {
            ha.insert("antiAffinityPreset".into(), json!(d::ANTI_AFFINITY_PRESET));
        }

        if autoscaling_enabled
            && let Some(a) = spec.get_mut("autoscaling").and_then(Value::as_object_mut)
        {
            autoscaling_defaults(a);
        }
        warnings
    }

    fn memcached_defaults(spec: &mut serde_json::Map<String, Value>) {
        let memcached = spec.entry("memcached").or_insert_with(|| json!({}));
        if memcached.is_null() {
            *memcached = json!({});
        }
        if let Some(m) = memcached.as_object_mut() {
            for (key, default) in [
                ("maxMemoryMB", d::MAX_MEMORY_MB),
                ("maxConnections", d::MAX_CONNECTIONS),
                ("threads", d::THREADS),
            ] {
                if m.get(key).and_then(Value::as_i64).is_none_or(|v| v == 0) {
                    m.insert(key.into(), json!(default));
                }
            }
            if empty_str(m.get("maxItemSize")) {
                m.insert("maxItemSize".into(), json!(d::MAX_ITEM_SIZE));
            }
        }
    }

    fn monitoring_defaults(spec: &mut serde_json::Map<String, Value>) {
        if let Some(monitoring) = spec.get_mut("monitoring").and_then(Value::as_object_mut) {
            if unset(monitoring.get("exporterImage")) {
                monitoring.insert("exporterImage".into(), json!(d::EXPORTER_IMAGE));
            }
            if let Some(sm) = monitoring
                .get_mut("serviceMonitor")
                .and_then(Value::as_object_mut)
            {
                if empty_str(sm.get("interval")) {
                    sm.insert("interval".into(), json!(d::SERVICE_MONITOR_INTERVAL));
                }
                if empty_str(sm.get("scrapeTimeout")) {
                    sm.insert(
                        "scrapeTimeout".into(),
                        json!(d::SERVICE_MONITOR_SCRAPE_TIMEOUT),
                    );
                }
            }
        }
    }

    fn autoscaling_defaults(a: &mut serde_json::Map<String, Value>) {
        let no_metrics = a
            .get("metrics")
            .is_none_or(|m| m.is_null() || m.as_array().is_some_and(Vec::is_empty));
        if no_metrics {
            a.insert(
                "metrics".into(),
                json!([{
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": d::CPU_UTILIZATION},
                    },
                }]),
            );
        }
        if unset(a.get("behavior")) {
            a.insert(
                "behavior".into(),
                json!({"scaleDown": {"stabilizationWindowSeconds": d::SCALE_DOWN_STABILIZATION_SECONDS}}),
            );
        }
    }
}

// === checks before measuring: both implementations answer the same ===

/// The object after applying the response's patch (or unchanged without one), and warnings.
fn outcome(review: &[u8], response: &[u8]) -> (Value, usize, bool) {
    let review: Value = serde_json::from_slice(review).expect("the fixture is JSON");
    let response: Value = serde_json::from_slice(response).expect("the answer is JSON");
    let r = &response["response"];
    assert_eq!(r["uid"], review["request"]["uid"], "uid echoed");
    assert_eq!(r["allowed"], true, "allowed");
    let mut object = review["request"]["object"].clone();
    let patched = r.get("patch").is_some();
    if let Some(b64) = r["patch"].as_str() {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("the patch is base64");
        let patch: json_patch::Patch =
            serde_json::from_slice(&bytes).expect("the patch is a JSON Patch");
        json_patch::patch(&mut object, &patch).expect("the patch applies");
    }
    let warnings = r["warnings"].as_array().map_or(0, Vec::len);
    (object, warnings, patched)
}

fn check(fixture: &Fixture) {
    for webhook in [Webhook::Mutate, Webhook::Validate] {
        let (ours_object, ours_warnings, ours_patched) =
            outcome(&fixture.body, &ours(webhook, &fixture.body));
        let (base_object, base_warnings, base_patched) =
            outcome(&fixture.body, &baseline::review(webhook, &fixture.body));
        let name = fixture.name;
        assert_eq!(
            ours_object, base_object,
            "{name} {webhook:?}: ours and the baseline default alike"
        );
        assert_eq!(ours_warnings, base_warnings, "{name} {webhook:?}: warnings");
        let expected = webhook == Webhook::Mutate && fixture.patched;
        assert_eq!(ours_patched, expected, "{name} {webhook:?}: ours patches");
        assert_eq!(
            base_patched, expected,
            "{name} {webhook:?}: baseline patches"
        );
    }
}

// === criterion ===

fn webhook_name(webhook: Webhook) -> &'static str {
    match webhook {
        Webhook::Mutate => "mutate",
        Webhook::Validate => "validate",
    }
}

fn benches(c: &mut Criterion) {
    // No subscriber is installed, so the global max level stays OFF and the per-request
    // `tracing::info!` in admission::log returns after one relaxed load, its fields
    // (`started.elapsed()` included) unevaluated.
    assert_eq!(
        tracing::level_filters::LevelFilter::current(),
        tracing::level_filters::LevelFilter::OFF,
        "benches measure the hot path without logging"
    );
    for fixture in common::all() {
        check(&fixture);
        let body = fixture.body.as_slice();
        let large = body.len() > 64 * 1024;
        let mut group = c.benchmark_group(format!("admission/{}", fixture.name));
        group.throughput(Throughput::Bytes(body.len() as u64));
        if large {
            group.sample_size(30);
        }
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            let w = webhook_name(webhook);
            group.bench_with_input(BenchmarkId::new("ours", w), body, |b, body| {
                b.iter(|| ours(webhook, black_box(body)));
            });
            group.bench_with_input(BenchmarkId::new("baseline", w), body, |b, body| {
                b.iter(|| baseline::review(webhook, black_box(body)));
            });
        }
        group.bench_with_input(BenchmarkId::new("parse-only", "tape"), body, |b, body| {
            let mut parser = Parser::new();
            b.iter(|| parser.parse(black_box(body)));
        });
        group.finish();
    }
    metrics(c);
}

/// What the server adds around a review per request: the in-flight gauge, the latency
/// histogram, the status and verdict counters (handles resolved at startup). Compare with the
/// `ours` rows above.
fn metrics(c: &mut Criterion) {
    let metrics = memcached_webhook::metrics::Metrics::new();
    let verdict = admission::Verdict {
        operation: Some(admission::Operation::Create),
        allowed: true,
        code: 200,
        patched: true,
        warnings: 0,
        violations: admission::Violations::default(),
    };
    c.bench_function("metrics/per-request", |b| {
        b.iter(|| {
            let m = metrics.webhook(black_box(Webhook::Mutate));
            m.in_flight.inc();
            m.latency.observe(black_box(4.3e-6));
            m.request(black_box(200));
            m.admission(black_box(&verdict));
            m.in_flight.dec();
        });
    });
}

// === the summary tables, printed after criterion ===

/// Whether criterion is measuring (`cargo bench`), not testing (`cargo test --benches`,
/// `--test`) or listing: the same rule as criterion's own argument parsing.
fn benchmarking() -> bool {
    let args: Vec<String> = std::env::args().collect();
    let has = |flag: &str| args.iter().any(|a| a == flag);
    has("--bench")
        && !has("--test")
        && !has("--list")
        && !args.iter().any(|a| a.starts_with("--profile-time"))
}

fn fmt_time(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.2} µs", seconds * 1e6)
    } else {
        format!("{:.3} ms", seconds * 1e3)
    }
}

/// Time per call of `f` over one batch of about `batch` wall time (sized by a first call).
fn per_call(batch: Duration, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    f();
    let one = started.elapsed().as_secs_f64().max(1e-8);
    let calls = ((batch.as_secs_f64() / one) as u64).clamp(1, 1_000_000);
    let started = Instant::now();
    for _ in 0..calls {
        f();
    }
    started.elapsed().as_secs_f64() / calls as f64
}

fn summary() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let fixtures = common::all();
    let full = benchmarking();

    println!(
        "\nAllocations per request (counting global allocator, after one warm-up call per path;"
    );
    println!(
        "ours includes the response buffer the server allocates; a body of at most 256 KiB is read in place):\n"
    );
    println!(
        "| fixture | bytes in | webhook | ours allocs | ours bytes | baseline allocs | baseline bytes |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
    for fixture in &fixtures {
        let body = fixture.body.as_slice();
        let iters = if body.len() > 64 * 1024 { 5 } else { 200 };
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            // Warm up: the thread-local tape and buffers grow to this fixture's size once.
            black_box(ours(webhook, body));
            black_box(baseline::review(webhook, body));
            let (oa, ob) = allocations_per_call(iters, || {
                black_box(ours(webhook, black_box(body)));
            });
            let (ba, bb) = allocations_per_call(iters, || {
                black_box(baseline::review(webhook, black_box(body)));
            });
            println!(
                "| {} | {} | {} | {oa:.1} | {ob:.0} | {ba:.1} | {bb:.0} |",
                fixture.name,
                body.len(),
                webhook_name(webhook)
            );
        }
    }

    if !full {
        println!("\nIndicative ratio: skipped (criterion is testing, not benchmarking)");
        return;
    }
    let (rounds, batch) = (7, Duration::from_millis(30));
    println!(
        "\nIndicative ratio (own loop, not criterion: best of {rounds} wall-clock batches of ~{} ms, \
         ours and baseline interleaved; a noisy shared machine, so read the criterion numbers above):\n",
        batch.as_millis()
    );
    for fixture in &fixtures {
        let body = fixture.body.as_slice();
        for webhook in [Webhook::Mutate, Webhook::Validate] {
            let (mut ours_best, mut base_best) = (f64::MAX, f64::MAX);
            for _ in 0..rounds {
                ours_best = ours_best.min(per_call(batch, || {
                    black_box(ours(webhook, black_box(body)));
                }));
                base_best = base_best.min(per_call(batch, || {
                    black_box(baseline::review(webhook, black_box(body)));
                }));
            }
            println!(
                "indicative: {:<16} {:<8} ours {:>10}  baseline {:>10}  baseline/ours {:>5.1}x",
                fixture.name,
                webhook_name(webhook),
                fmt_time(ours_best),
                fmt_time(base_best),
                base_best / ours_best
            );
        }
    }
}

criterion_group!(admission_benches, benches);
criterion_main!(admission_benches, summary);
