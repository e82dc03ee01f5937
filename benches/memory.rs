//! Memory of the release binary under the floods of issue 12, from its /proc/<pid>/status
//! (VmRSS now, VmHWM the peak), each case on a fresh process:
//! - idle: started, one typical review answered;
//! - silent: 1,024 TLS connections each declare a 7,000,000-byte body and send nothing;
//! - flood: 64 TLS connections each send a 7,000,000-byte review over 8 s, while a typical
//!   review is posted every 50 ms on another connection (every answer must be 200);
//! - one large body alone: what parsing costs per body byte (k), for a review whose bulk is an
//!   annotation, and for dense numbers `[0,0,...]` (refused before parsing: 413).
//!
//! ```text
//! cargo bench --bench memory                               # exits 1 if a bound is missed
//! MEMORY_BINARY=path/to/other/build cargo bench --bench memory   # e.g. an older build
//! MEMORY_ARGS="--max-inflight-body-bytes=33554432" cargo bench --bench memory
//! MALLOC_MMAP_THRESHOLD_=131072 cargo bench --bench memory  # as the Deployment runs it (the
//!                                                          # environment reaches the server)
//! ```
//!
//! Not a test: it takes about a minute and its figures depend on the allocator and the machine.

// The fixtures and the near-limit review builder; the fixture table serves the other benches.
#[allow(dead_code)]
mod common;
#[path = "common/spawned.rs"]
mod spawned;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use spawned::Spawned;
use tokio::io::AsyncWriteExt;

const MIB: f64 = 1024.0 * 1024.0;
const FLOOD_CONNECTIONS: usize = 64;
const FLOOD_BODY: usize = 7_000_000;
const FLOOD_SECONDS: u64 = 8;
const SILENT_CONNECTIONS: usize = 1024;
/// Issue 12's bound for the flood's peak RSS.
const FLOOD_PEAK_LIMIT: f64 = 96.0;
/// "Within a few MiB of idle" for the silent connections.
const SILENT_LIMIT: f64 = 8.0;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB
}

struct Setup {
    binary: String,
    args: Vec<String>,
    typical: Vec<u8>,
}

impl Setup {
    async fn start(&self, extra: &[&str]) -> Spawned {
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        let server = Spawned::start(&self.binary, &args, &[]).await;
        let code = spawned::post(server.connect().await, &self.typical, Duration::ZERO).await;
        assert_eq!(code, 200, "a typical review is answered");
        server
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let setup = Setup {
        binary: std::env::var("MEMORY_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_memcached-webhook").to_owned()),
        args: std::env::var("MEMORY_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        typical: common::read("mutate-create-kubectl-apply.json"),
    };
    if std::env::args().any(|a| a == "--list") {
        return ExitCode::SUCCESS; // `cargo test --benches` asks harness-less targets this.
    }
    println!("binary: {} {}", setup.binary, setup.args.join(" "));
    let mut ok = true;

    let server = setup.start(&[]).await;
    let idle = server.status_bytes("VmRSS:");
    println!("idle                      RSS {:6.1} MiB", mib(idle));
    drop(server);

    ok &= silent(&setup).await;
    ok &= flood(&setup).await;
    let large = common::near_limit(&setup.typical, FLOOD_BODY);
    one_body(&setup, "annotation review 7 MB", &large).await;
    let dense: Vec<u8> = std::iter::once(b'[')
        .chain((0..FLOOD_BODY / 2 - 1).flat_map(|_| *b"0,"))
        .chain(*b"0]")
        .collect();
    one_body(&setup, "[0,0,...] 7 MB", &dense).await;
    if ok {
        ExitCode::SUCCESS
    } else {
        println!("FAILED: a bound above was missed");
        ExitCode::FAILURE
    }
}

/// 1,024 connections declare 7 MB each and send nothing. A request in service is never cut to
/// make room, so once the slots hold such requests the rest wait for a slot after their
/// ClientHello, with no TLS state, costing the process a small task each (a few still in their
/// handshake when a newer one arrived were closed to make room).
async fn silent(setup: &Setup) -> bool {
    let server = Arc::new(setup.start(&["--body-read-timeout", "60s"]).await);
    let idle = server.status_bytes("VmRSS:");
    let sent = Arc::new(AtomicUsize::new(0));
    let mut open = tokio::task::JoinSet::new();
    for _ in 0..SILENT_CONNECTIONS {
        let (server, sent) = (server.clone(), sent.clone());
        open.spawn(async move {
            // A connection still in its handshake may be closed to make room for a newer one.
            let Ok(mut tls) = server.connect().await else {
                return;
            };
            let head = spawned::head(FLOOD_BODY);
            if tls.write_all(head.as_bytes()).await.is_err() || tls.flush().await.is_err() {
                return;
            }
            sent.fetch_add(1, Ordering::Relaxed);
            std::future::pending::<()>().await;
        });
    }
    // Let the server take every connection it will and read every head.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = server.status_bytes("VmRSS:");
    let peak = server.status_bytes("VmHWM:");
    let growth = mib(held.saturating_sub(idle));
    let sent = sent.load(Ordering::Relaxed);
    println!(
        "silent {SILENT_CONNECTIONS} x declared 7 MB   RSS {:6.1} MiB (+{growth:.1} MiB, {:.1} KiB per accepted connection), \
         peak {:.1} MiB; {sent} heads sent, {} connections waiting for a slot or closed in their handshake to make room",
        mib(held),
        growth * 1024.0 / sent.max(1) as f64,
        mib(peak),
        SILENT_CONNECTIONS - sent,
    );
    open.abort_all();
    let ok = growth <= SILENT_LIMIT;
    if !ok {
        println!("  over {SILENT_LIMIT} MiB above idle");
    }
    ok
}

/// 64 connections send 7 MB each over 8 s while a typical review goes out every 50 ms.
async fn flood(setup: &Setup) -> bool {
    let mut server = setup.start(&[]).await;
    let idle = server.status_bytes("VmRSS:");
    let body: &'static [u8] = common::near_limit(&setup.typical, FLOOD_BODY).leak();
    let pause = Duration::from_millis(FLOOD_SECONDS * 1000 / (FLOOD_BODY / (64 * 1024)) as u64);
    let mut reviewer = server.connect().await.expect("connects");
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..FLOOD_CONNECTIONS {
        flood.spawn(spawned::post(server.connect().await, body, pause));
    }
    let (mut reviews, mut failed, mut codes) = (0usize, 0usize, Vec::new());
    while !flood.is_empty() {
        while let Some(done) = flood.try_join_next() {
            codes.push(done.expect("a flood task"));
        }
        if review(&mut reviewer, &setup.typical).await != 200 {
            failed += 1;
            reviewer = server.connect().await.expect("connects");
        }
        reviews += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    let peak = server.status_bytes("VmHWM:");
    let after = server.status_bytes("VmRSS:");
    let alive = server.alive();
    let count = |c: u16| codes.iter().filter(|&&x| x == c).count();
    let text = server.scrape().await;
    let figure = |name: &str| spawned::metric(&text, name).map_or("-".into(), |v| v.to_string());
    println!(
        "flood {FLOOD_CONNECTIONS} x 7 MB over {:.1} s     idle {:.1} MiB, peak RSS {:.1} MiB, after {:.1} MiB; \
         flood answers: {} x 200, {} x 503, {} x 413, {} cut off; reviews: {reviews} sent, {failed} not 200; \
         budget waits {}, refusals {}; alive: {alive}",
        took.as_secs_f64(),
        mib(idle),
        mib(peak),
        mib(after),
        count(200),
        count(503),
        count(413),
        count(0),
        figure("memcached_webhook_body_budget_waits_total"),
        figure("memcached_webhook_body_budget_refusals_total"),
    );
    let ok = mib(peak) <= FLOOD_PEAK_LIMIT && failed == 0 && alive;
    if !ok {
        println!(
            "  peak over {FLOOD_PEAK_LIMIT} MiB, a review not answered 200, or the server died"
        );
    }
    ok
}

/// One review on a keep-alive connection; 0 when the connection failed.
async fn review(
    tls: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    body: &[u8],
) -> u16 {
    use tokio::io::AsyncReadExt;
    let mut request = spawned::head(body.len()).into_bytes();
    request.extend_from_slice(body);
    if tls.write_all(&request).await.is_err() || tls.flush().await.is_err() {
        return 0;
    }
    // The answer is small: read until the headers and the Content-Length body are in.
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:")?.trim().parse().ok())
                .unwrap_or(0);
            if answer.len() >= end + 4 + length {
                return spawned::status_code(&answer);
            }
        }
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => return 0,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
}

/// One large body alone on a fresh server: the peak's growth over idle per body byte.
async fn one_body(setup: &Setup, name: &str, body: &[u8]) {
    let server = setup.start(&[]).await;
    let idle = server.status_bytes("VmHWM:");
    let code = spawned::post(server.connect().await, body, Duration::ZERO).await;
    let peak = server.status_bytes("VmHWM:");
    let k = peak.saturating_sub(idle) as f64 / body.len() as f64;
    println!(
        "one body: {name:<24} answer {code}, peak {:.1} MiB (+{:.1} MiB = {k:.2} x the body)",
        mib(peak),
        mib(peak.saturating_sub(idle)),
    );
}
