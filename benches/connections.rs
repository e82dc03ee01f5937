//! Availability under connection floods (issue 25), on the release binary: for each kind of
//! hostile connection and each count, a fresh server, the flood opened and then held for 20 s
//! while a well-behaved client opens a fresh TLS connection per review, one every 100 ms.
//! Reports reviews answered / sent, p50/p99 of connect-to-answer (next to a run with no flood)
//! and the server's peak RSS (VmHWM).
//!
//! The flood kinds:
//! - silent: TCP connections that never send a byte;
//! - idle: a TLS handshake and one review each, then an idle keep-alive;
//! - slow-head: a TLS handshake, then a request head at one byte every 2 s;
//! - stalled-hello (not in the issue's table): the first bytes of a ClientHello, then nothing
//!   (the cheapest way to start a handshake; it takes no slot until the ClientHello is whole).
//!
//! A hostile connection the server closes is opened again after `CONNS_RECONNECT_MS`
//! (default 1000), as an attacker holding that many sockets would. The flood shares the
//! well-behaved client's address (127.0.0.1), the harder case for the server's eviction order,
//! which spares the connections of an address holding fewer; `CONNS_FLOOD_FROM=127.0.0.2`
//! floods from another, as a pod's flood reaches a pod that the API server calls.
//!
//! The flood runs on threads of its own at a lower CPU priority (nice 10, `CONNS_FLOOD_NICE`):
//! an attacker's handshakes run on its own machine, not on the webhook's cores, and on a
//! two-core machine the flood's client-side TLS (a certificate check per reconnection) would
//! otherwise starve the server and the well-behaved client, and the bench would measure
//! itself. The table shows what the flood still achieved (its reconnections) and the server's
//! own CPU time over the hold, so a starved flood is seen, not hidden.
//!
//! ```text
//! cargo bench --bench connections                      # exits 1 if a target is missed
//! CONNS_COUNTS=1000 CONNS_KINDS=idle CONNS_HOLD=10 cargo bench --bench connections
//! CONNS_BINARY=path/to/other/build cargo bench --bench connections
//! CONNS_ARGS="--max-connections=1024" cargo bench --bench connections
//! ```
//!
//! Not a test: it takes about three minutes, opens up to 10,000 sockets (it raises its own
//! open-files limit; the server raises its own) and its figures depend on the machine.

// The fixtures; most of the module serves the other benches.
#[allow(dead_code)]
mod common;
// `alive` serves the memory bench: here the server is shared by the flood's tasks.
#[allow(dead_code)]
#[path = "common/spawned.rs"]
mod spawned;

use std::net::IpAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use spawned::Spawned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const MIB: f64 = 1024.0 * 1024.0;
/// The issue's targets.
const P99_LIMIT: Duration = Duration::from_millis(100);
const RSS_LIMIT_MIB: f64 = 96.0;
/// A review not answered within this counts as unanswered (the apiserver's default timeout).
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
const REVIEW_EVERY: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    None,
    Silent,
    Idle,
    SlowHead,
    StalledHello,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::None => "no flood",
            Kind::Silent => "silent",
            Kind::Idle => "idle",
            Kind::SlowHead => "slow-head",
            Kind::StalledHello => "stalled-hello",
        }
    }
}

struct Setup {
    binary: String,
    args: Vec<String>,
    typical: &'static [u8],
    hold: Duration,
    reconnect: Duration,
    /// The flood's address; the well-behaved client's is 127.0.0.1.
    flood_from: Option<IpAddr>,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--list") {
        return ExitCode::SUCCESS; // `cargo test --benches` asks harness-less targets this.
    }
    let fd_limit = raise_fd_limit();
    let (setup, counts, kinds) = settings();
    let needed = counts.iter().max().copied().unwrap_or(0) as u64 + 256;
    let flood_nice: i32 = env_or("CONNS_FLOOD_NICE", "10")
        .parse()
        .expect("CONNS_FLOOD_NICE: a nice value");
    println!(
        "binary: {} {}; hold {:?}, reconnect after {:?}; flood at nice {flood_nice}, from {}; open-files limit {fd_limit}",
        setup.binary,
        setup.args.join(" "),
        setup.hold,
        setup.reconnect,
        setup
            .flood_from
            .map_or("the client's address".to_owned(), |a| a.to_string()),
    );
    if fd_limit < needed {
        println!("the open-files limit ({fd_limit}) is below {needed}: raise the hard limit");
        return ExitCode::FAILURE;
    }
    let flood = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("flood")
        .on_thread_start(move || {
            // Per thread on Linux: `None` is the calling thread.
            if let Err(e) = rustix::process::setpriority_process(None, flood_nice) {
                eprintln!("cannot lower the flood's priority: {e}");
            }
        })
        .enable_all()
        .build()
        .expect("the flood's runtime");
    println!(
        "| flood | connections | answered | p50 | p99 | peak RSS | server CPU | evictions idle / incomplete / pre-handshake | hostile reconnects |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut ok = run(&setup, flood.handle(), Kind::None, 0).await;
    for &kind in &kinds {
        for &count in &counts {
            ok &= run(&setup, flood.handle(), kind, count).await;
        }
    }
    // A runtime may not be dropped inside another's task.
    flood.shutdown_background();
    if ok {
        ExitCode::SUCCESS
    } else {
        println!(
            "FAILED: a target above was missed (100 % answered, p99 <= 100 ms, peak RSS <= 96 MiB)"
        );
        ExitCode::FAILURE
    }
}

/// The bench's settings from its environment variables (the module's doc lists them).
fn settings() -> (Setup, Vec<usize>, Vec<Kind>) {
    let setup = Setup {
        binary: env_or("CONNS_BINARY", env!("CARGO_BIN_EXE_memcached-webhook")),
        args: env_or("CONNS_ARGS", "")
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        typical: common::read("mutate-create-kubectl-apply.json").leak(),
        hold: Duration::from_secs(
            env_or("CONNS_HOLD", "20")
                .parse()
                .expect("CONNS_HOLD: seconds"),
        ),
        reconnect: Duration::from_millis(
            env_or("CONNS_RECONNECT_MS", "1000")
                .parse()
                .expect("CONNS_RECONNECT_MS: milliseconds"),
        ),
        flood_from: std::env::var("CONNS_FLOOD_FROM")
            .ok()
            .map(|a| a.parse().expect("CONNS_FLOOD_FROM: an IP address")),
    };
    let counts: Vec<usize> = env_or("CONNS_COUNTS", "1000,10000")
        .split(',')
        .map(|n| n.trim().parse().expect("CONNS_COUNTS: numbers"))
        .collect();
    let kinds: Vec<Kind> = env_or("CONNS_KINDS", "silent,idle,slow-head,stalled-hello")
        .split(',')
        .map(|k| match k.trim() {
            "silent" => Kind::Silent,
            "idle" => Kind::Idle,
            "slow-head" => Kind::SlowHead,
            "stalled-hello" => Kind::StalledHello,
            other => panic!("CONNS_KINDS: unknown kind {other:?}"),
        })
        .collect();
    (setup, counts, kinds)
}

/// Raises this process's soft open-files limit to the hard one; returns the limit in force.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if let Some(max) = limit.maximum {
        let raised = Rlimit {
            current: Some(max),
            maximum: Some(max),
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return max;
        }
    }
    limit.current.unwrap_or(u64::MAX)
}

/// One row: a fresh server, the flood opened, then held while the client reviews.
async fn run(setup: &Setup, on: &tokio::runtime::Handle, kind: Kind, count: usize) -> bool {
    let args: Vec<&str> = setup.args.iter().map(String::as_str).collect();
    let server = Arc::new(Spawned::start(&setup.binary, &args, &[]).await);
    let stop = Arc::new(AtomicBool::new(false));
    let reconnects = Arc::new(AtomicUsize::new(0));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..count {
        let hostile = Hostile {
            server: server.clone(),
            kind,
            typical: setup.typical,
            stop: stop.clone(),
            reconnect: setup.reconnect,
            from: setup.flood_from,
            reconnects: reconnects.clone(),
            opened: opened.clone(),
        };
        flood.spawn_on(hostile.hold(), on);
    }
    // Let the flood open (bounded): every hostile connection has done its first step.
    let ramp = Instant::now();
    while opened.load(Ordering::Relaxed) < count && ramp.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ramped = opened.load(Ordering::Relaxed);
    reconnects.store(0, Ordering::Relaxed);
    let cpu = |text: &str| spawned::metric(text, "process_cpu_seconds_total").unwrap_or(f64::NAN);
    let (cpu_before, held_from) = (cpu(&server.scrape().await), Instant::now());

    // The well-behaved client on a thread and runtime of its own: the flood's tasks must not
    // delay it in this process, only (if the server lets them) in the server.
    let client = {
        let (server, typical, hold) = (server.clone(), setup.typical, setup.hold);
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(reviews(server, typical, hold))
        })
    };
    let (answered, mut latencies) = tokio::task::spawn_blocking(move || client.join())
        .await
        .expect("the client thread")
        .expect("the client thread");
    let peak = server.status_bytes("VmHWM:") as f64 / MIB;
    let text = server.scrape().await;
    let server_cpu = (cpu(&text) - cpu_before) / held_from.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    flood.abort_all();
    // Until every task is gone: each holds the server, killed when the last one lets go.
    while flood.join_next().await.is_some() {}
    let figure = |series: &str| spawned::metric(&text, series).unwrap_or(f64::NAN);
    let evictions = |reason: &str| {
        figure(&format!(
            "memcached_webhook_connection_evictions_total{{reason=\"{reason}\"}}"
        ))
    };
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    let (p50, p99) = (at(0.50), at(0.99));
    let sent = latencies.len();
    println!(
        "| {} | {} | {answered} / {sent} | {:.1} ms | {:.1} ms | {peak:.1} MiB | {:.0} % | {} / {} / {} | {} |",
        kind.name(),
        if kind == Kind::None {
            "-".to_owned()
        } else {
            format!("{count} ({ramped} opened)")
        },
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        server_cpu * 100.0,
        evictions("idle"),
        evictions("incomplete"),
        evictions("pre_handshake"),
        reconnects.load(Ordering::Relaxed),
    );
    answered == sent && p99 <= P99_LIMIT && peak <= RSS_LIMIT_MIB
}

/// A fresh TLS connection and a typical review every 100 ms for `hold`: how many were
/// answered 200, and each one's time from connect to answer.
async fn reviews(
    server: Arc<Spawned>,
    typical: &'static [u8],
    hold: Duration,
) -> (usize, Vec<Duration>) {
    let mut reviews = tokio::task::JoinSet::new();
    let mut tick = tokio::time::interval(REVIEW_EVERY);
    let started = Instant::now();
    while started.elapsed() < hold {
        tick.tick().await;
        let server = server.clone();
        reviews.spawn(async move {
            let began = Instant::now();
            let answered = tokio::time::timeout(REVIEW_TIMEOUT, async {
                spawned::post(server.connect().await, typical, Duration::ZERO).await
            })
            .await;
            (answered == Ok(200), began.elapsed())
        });
    }
    let mut latencies = Vec::new();
    let mut answered = 0;
    while let Some(done) = reviews.join_next().await {
        let (ok, took) = done.expect("a review task");
        answered += usize::from(ok);
        latencies.push(took);
    }
    (answered, latencies)
}

/// One hostile connection, reopened whenever the server closes it, until `stop`.
struct Hostile {
    server: Arc<Spawned>,
    kind: Kind,
    typical: &'static [u8],
    stop: Arc<AtomicBool>,
    reconnect: Duration,
    from: Option<IpAddr>,
    reconnects: Arc<AtomicUsize>,
    opened: Arc<AtomicUsize>,
}

impl Hostile {
    async fn hold(self) {
        let mut first = true;
        while !self.stop.load(Ordering::Relaxed) {
            self.once(&mut first).await;
            self.reconnects.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(self.reconnect).await;
        }
    }

    /// Opens the connection, does its kind's thing, returns when the server closed it.
    async fn once(&self, first: &mut bool) {
        let mut opened = || {
            if std::mem::take(first) {
                self.opened.fetch_add(1, Ordering::Relaxed);
            }
        };
        match self.kind {
            Kind::None => {}
            Kind::Silent => {
                let Ok(mut tcp) = self.server.tcp(self.from).await else {
                    opened();
                    return;
                };
                opened();
                let _ = tcp.read(&mut [0u8; 1]).await;
            }
            Kind::StalledHello => {
                let Ok(mut tcp) = self.server.tcp(self.from).await else {
                    opened();
                    return;
                };
                opened();
                // A handshake record header announcing 512 bytes, and 4 of them.
                let _ = tcp.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc").await;
                let _ = tcp.read(&mut [0u8; 1]).await;
            }
            Kind::Idle => {
                let Ok(mut tls) = self.server.connect_from(self.from).await else {
                    opened();
                    return;
                };
                let mut request = spawned::head(self.typical.len()).into_bytes();
                request.extend_from_slice(self.typical);
                let _ = tls.write_all(&request).await;
                let _ = tls.flush().await;
                let mut buf = vec![0u8; 4096];
                // The answer, then nothing until the server closes the connection.
                opened();
                while matches!(tls.read(&mut buf).await, Ok(n) if n > 0) {}
            }
            Kind::SlowHead => {
                let Ok(mut tls) = self.server.connect_from(self.from).await else {
                    opened();
                    return;
                };
                opened();
                let head = spawned::head(self.typical.len()).into_bytes();
                let mut buf = [0u8; 1024];
                for byte in head.chunks(1) {
                    if tls.write_all(byte).await.is_err() || tls.flush().await.is_err() {
                        return;
                    }
                    tokio::select! {
                        read = tls.read(&mut buf) => if !matches!(read, Ok(n) if n > 0) { return },
                        () = tokio::time::sleep(Duration::from_secs(2)) => {}
                    }
                }
                // A full head at this pace takes minutes: hold on until the server closes.
                while matches!(tls.read(&mut buf).await, Ok(n) if n > 0) {}
            }
        }
    }
}
