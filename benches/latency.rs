//! End-to-end latency over loopback TLS, driven the way the kube-apiserver drives a webhook:
//! HTTP/1.1 keep-alive, a pool of connections, one request in flight per connection (a closed
//! loop), `POST /mutate-...?timeout=10s` with Content-Length. Every latency goes into an HDR
//! histogram (µs). The real server (`server::run`, started as `tests/util.rs` does) is measured
//! next to a *floor*: a bare hyper + rustls server with the same TLS settings
//! (`tls::server_config`, `tls::provider()`) that reads the body and answers a constant 200
//! JSON body. Floor and ours alternate in rounds, so drift on the shared machine hits both.
//!
//! ```text
//! cargo bench --bench latency                    # defaults below; exits 1 past the ratio
//! LATENCY_SMOKE=1 cargo bench --bench latency    # CI: tiny counts, no gate, a few seconds
//! ```
//!
//! Environment:
//! - `LATENCY_REQUESTS` (20000): measured requests per case for fixtures up to 64 KB; the
//!   100 KB fixture gets a tenth, the 1.5 MB one and fresh handshakes a fiftieth.
//! - `LATENCY_CONNECTIONS` (cores - 1, at least 1): connections, each with one request in
//!   flight. Keep it below the core count for the latency gate (client, server and floor share
//!   this machine); raise it (e.g. 8) for CPU figures without a wake-up per request.
//! - `LATENCY_ROUNDS` (4): floor/ours alternations per case.
//! - `LATENCY_MAX_RATIO` (3.0): the gate, see [`DEFAULT_MAX_RATIO`].
//! - `LATENCY_SMOKE=1`: 200 requests per case, one round, no gate.
//! - `LATENCY_FLOOR_NODELAY=0`: leave Nagle on in the floor (it sets `TCP_NODELAY` by default,
//!   as our server, `src/server.rs`, and Go's servers and clients do), to see what Nagle costs.
//! - `LATENCY_RATE` (unset): an open loop instead of the closed one: the connections send this
//!   many requests a second in all, each on its own fixed schedule, and a latency counts from
//!   when its request was due if the previous answer kept it waiting (no coordinated omission).
//!   Over HTTP/2 the loops then share one connection, as the apiserver's calls do. Issue 36's
//!   bar: p99 at 2,000 a second. Give each connection 2 ms or more between requests
//!   (`LATENCY_CONNECTIONS` >= rate / 500): tokio's timer wakes up to 1 ms late.
//! - `LATENCY_ONLY` (unset): only the fixtures whose name contains it, each through the
//!   defaulting webhook over HTTP/1.1 and HTTP/2 (e.g. `apply-5k`, fixture b).
//! - `LATENCY_PIN=1`: the server runtime's threads on CPU 0 and the clients' on CPU 1, as the
//!   issue's measurements pinned server and load tool (needs two CPUs).
//! - `LATENCY_LOG=1`: install the production log subscriber (text, info) writing to
//!   /dev/null through its queue, as the binary does by default (allowed admissions log at
//!   debug, so this shows what the disabled line costs; with
//!   `LATENCY_LOG_LEVEL=info,memcached_webhook::admission=debug` each admission logs its line).
//!
//! Servers and clients run on two tokio runtimes of 2 workers each, so the server threads'
//! CPU time is the server's alone: the second table is server CPU per request, the figure the
//! project brief's bar (18 µs per admission; a constant-answering hyper + rustls server 11 µs)
//! is stated in. It is reported, not gated (CPU time also moves with the machine's load). A
//! third table gives each case's ratios round by round: the median of the rounds and their
//! range, for req/s and for CPU per request (issue 36 states its closed-loop bar so).

mod common;
#[path = "common/floor.rs"]
mod floor;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use memcached_webhook::admission::{self, MUTATE_PATH, VALIDATE_PATH, Webhook};
use memcached_webhook::config::{Config, LogFormat};
use memcached_webhook::server::{self, Listeners};
use memcached_webhook::tls;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Our p99 may be at most this multiple of the floor's p99 (same case, same run).
///
/// Why 3.0: the floor already pays TCP, TLS, HTTP and reading the body, so what is left is
/// our handler (2-8 µs for the fixtures up to 4 KB, ~0.1 ms for 100 KB, against floor p99s of
/// ~100-400 µs) and the server around it (deadlines, connection tracking, hyper-util's auto
/// builder). On this shared 2-core machine p99 moves several-fold with load at the same code;
/// a same-run ratio with alternating rounds cancels most of that but not all: measured ratios
/// sit at 0.9-1.6, so 3.0 leaves room for scheduler noise and still fails on the regressions
/// that matter (a blocking call or a lock on the runtime, a copy or a handshake per request, an
/// O(n^2) parse, a Nagle stall), which show up as 5-50x.
const DEFAULT_MAX_RATIO: f64 = 3.0;

struct Settings {
    requests: usize,
    connections: usize,
    rounds: usize,
    max_ratio: f64,
    smoke: bool,
    log: bool,
    /// `LATENCY_RATE`: requests a second in all, open loop; `None` is the closed loop.
    rate: Option<f64>,
    /// `LATENCY_ONLY`: the fixtures whose name contains it, each over HTTP/1.1 and HTTP/2.
    only: Option<String>,
    /// `LATENCY_PIN=1`: the server runtime's threads on CPU 0, the clients' on CPU 1.
    pin: bool,
}

impl Settings {
    fn from_env() -> Self {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            let value = std::env::var(name).ok()?;
            match value.parse() {
                Ok(v) => Some(v),
                Err(_) => panic!("{name}={value:?} is not a valid value"),
            }
        }
        let flag = |name: &str| std::env::var(name).is_ok_and(|v| v == "1" || v == "true");
        let smoke = flag("LATENCY_SMOKE");
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Settings {
            requests: var("LATENCY_REQUESTS").unwrap_or(if smoke { 200 } else { 20_000 }),
            connections: var("LATENCY_CONNECTIONS").unwrap_or((cores - 1).max(1)),
            rounds: var("LATENCY_ROUNDS").unwrap_or(if smoke { 1 } else { 4 }),
            max_ratio: var("LATENCY_MAX_RATIO").unwrap_or(DEFAULT_MAX_RATIO),
            smoke,
            log: flag("LATENCY_LOG"),
            rate: var("LATENCY_RATE"),
            only: std::env::var("LATENCY_ONLY").ok(),
            pin: flag("LATENCY_PIN"),
        }
    }
}

fn main() -> ExitCode {
    // `cargo test --benches` runs bench binaries too; measuring is for `cargo bench` only.
    if !std::env::args().any(|a| a == "--bench") {
        println!("latency: not run without --bench (use cargo bench --bench latency)");
        return ExitCode::SUCCESS;
    }
    let settings = Settings::from_env();
    let _log = settings.log.then(|| {
        let dev_null = std::fs::File::create("/dev/null").expect("/dev/null opens");
        let level = std::env::var("LATENCY_LOG_LEVEL").unwrap_or_else(|_| "info".into());
        memcached_webhook::logging::init(LogFormat::Text, &level, dev_null)
            .expect("the log subscriber installs")
    });
    // Servers and clients on runtimes of their own, so that the server threads' CPU time is
    // the server's alone (see [`server_threads_cpu`]).
    let servers = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(SERVER_THREADS)
        .on_thread_start(pin_to(settings.pin.then_some(0)))
        .enable_all()
        .build()
        .expect("the server runtime starts");
    let clients = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-client")
        .on_thread_start(pin_to(settings.pin.then_some(1)))
        .enable_all()
        .build()
        .expect("the client runtime starts");
    let code = clients.block_on(run(settings, servers.handle().clone()));
    servers.shutdown_background();
    code
}

/// A runtime's thread start hook that keeps the thread on `cpu` (none: anywhere), so that
/// servers and clients do not take each other's core, as the issue's measurements pinned them.
fn pin_to(cpu: Option<usize>) -> impl Fn() + Send + Sync + 'static {
    move || {
        if let Some(cpu) = cpu {
            let mut set = rustix::thread::CpuSet::new();
            set.set(cpu);
            rustix::thread::sched_setaffinity(None, &set).expect("the thread can be pinned");
        }
    }
}

/// The name of every server thread (tokio workers and blocking pool).
const SERVER_THREADS: &str = "bench-server";

/// CPU time used so far by each server thread and the log writer thread, by thread id: the
/// kernel's `se.sum_exec_runtime` (ns precision) where /proc shows it, else utime + stime
/// (10 ms ticks: meaningful only over long runs).
fn server_threads_cpu() -> std::collections::HashMap<String, Duration> {
    let mut threads = std::collections::HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return threads;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !(comm.starts_with(SERVER_THREADS) || comm.starts_with("log-writer")) {
            continue;
        }
        let sched = std::fs::read_to_string(path.join("sched")).unwrap_or_default();
        let precise = sched.lines().find_map(|l| {
            let ms = l.strip_prefix("se.sum_exec_runtime")?;
            ms.trim_start_matches([' ', ':']).trim().parse::<f64>().ok()
        });
        let used = match precise {
            Some(ms) => Duration::from_secs_f64(ms / 1e3),
            None => {
                let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
                let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
                let ticks: u64 = rest
                    .split_whitespace()
                    .skip(11)
                    .take(2)
                    .filter_map(|t| t.parse::<u64>().ok())
                    .sum();
                Duration::from_millis(ticks * 10)
            }
        };
        threads.insert(task.file_name().to_string_lossy().into_owned(), used);
    }
    threads
}

/// Server CPU used since `before`, thread by thread: a thread that started since counts whole,
/// one that exited since (an idle blocking-pool thread) counts nothing rather than minus its life.
fn server_cpu_since(before: &std::collections::HashMap<String, Duration>) -> Duration {
    server_threads_cpu()
        .into_iter()
        .map(|(tid, now)| now.saturating_sub(before.get(&tid).copied().unwrap_or_default()))
        .sum()
}

// === servers ===

/// Certificates for `localhost` in a temporary directory, as tests/util.rs makes them.
struct Certs {
    dir: tempfile::TempDir,
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn certs() -> Certs {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (ca_pem, cert_pem, key_pem) = memcached_webhook::dev::generate().expect("dev certificates");
    std::fs::write(dir.path().join("tls.crt"), &cert_pem).expect("write tls.crt");
    std::fs::write(dir.path().join("tls.key"), &key_pem).expect("write tls.key");
    Certs {
        dir,
        ca_pem,
        cert_pem,
        key_pem,
    }
}

/// The real server, in this process.
struct Ours {
    webhook: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), server::Error>>,
}

async fn start_ours(cert_dir: std::path::PathBuf, http2: bool) -> Ours {
    let mut config = Config::defaults();
    config.cert_dir = cert_dir;
    config.webhook_bind_address = "127.0.0.1:0".parse().expect("an address");
    config.health_probe_bind_address = "127.0.0.1:0".parse().expect("an address");
    config.metrics_bind_address = None;
    config.enable_http2 = http2;
    config.shutdown_grace_period = Duration::from_secs(2);
    let listeners = Listeners::bind(&config).await.expect("loopback ports bind");
    let (webhook, health) = (listeners.webhook_addr(), listeners.health_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server::run(config, listeners, async {
        let _ = stopped.await;
    }));
    let deadline = Instant::now() + Duration::from_secs(10);
    while probe(health, "/readyz").await != Some(StatusCode::OK) {
        assert!(Instant::now() < deadline, "the server is not ready in 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ours {
        webhook,
        stop,
        task,
    }
}

impl Ours {
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task
            .await
            .expect("the server task does not panic")
            .expect("the server shuts down cleanly");
    }
}

/// GET on the plain-HTTP health port.
async fn probe(addr: SocketAddr, path: &str) -> Option<StatusCode> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .ok()?;
    tokio::spawn(conn);
    let req = Request::get(path)
        .header(HOST, "localhost")
        .body(Full::new(Bytes::new()))
        .ok()?;
    Some(sender.send_request(req).await.ok()?.status())
}

/// The floor (`common/floor.rs`) with our TLS settings, answering `answer`; HTTP/2 offered by
/// ALPN when `http2`.
async fn start_floor(cert_pem: String, key_pem: String, http2: bool, answer: Bytes) -> SocketAddr {
    let nodelay = std::env::var("LATENCY_FLOOR_NODELAY").map_or(true, |v| v != "0");
    let provider = tls::provider();
    let key = tls::from_pem(cert_pem.as_bytes(), key_pem.as_bytes(), &provider)
        .expect("the dev certificate loads");
    let resolver = Arc::new(tls::Resolver::default());
    resolver.store(Arc::new(key));
    let config =
        tls::server_config(provider, resolver, None, http2, false).expect("the TLS config builds");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port binds");
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    tokio::spawn(floor::serve(listener, acceptor, answer, nodelay));
    addr
}

// === the client: the kube-apiserver's side ===

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// HTTP/1.1 over connections opened (and handshaken) before measuring.
    KeepAlive,
    /// A new TCP connection and full TLS handshake (no resumption, like Go's default client)
    /// for every request: what a webhook sees when the apiserver's pool is cold.
    FreshHandshake,
    /// HTTP/2 over connections opened before measuring (`--enable-http2`).
    Http2,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::KeepAlive => "h1 keep-alive",
            Mode::FreshHandshake => "h1 new TLS conn",
            Mode::Http2 => "h2 keep-alive",
        }
    }
}

fn client_config(ca_pem: &str, mode: Mode) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.expect("the CA PEM parses"))
            .expect("the CA is usable");
    }
    let mut config = rustls::ClientConfig::builder_with_provider(tls::provider())
        .with_safe_default_protocol_versions()
        .expect("the provider supports the default versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = match mode {
        Mode::Http2 => vec![b"h2".to_vec()],
        _ => vec![b"http/1.1".to_vec()],
    };
    if mode == Mode::FreshHandshake {
        config.resumption = rustls::client::Resumption::disabled();
    }
    Arc::new(config)
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    async fn open(addr: SocketAddr, tls: &Arc<rustls::ClientConfig>, mode: Mode) -> Self {
        let tcp = TcpStream::connect(addr).await.expect("connect");
        // Go's net package sets TCP_NODELAY on every connection; so does the apiserver.
        tcp.set_nodelay(true).expect("TCP_NODELAY");
        let stream = TlsConnector::from(tls.clone())
            .connect(ServerName::try_from("localhost").expect("a DNS name"), tcp)
            .await
            .expect("the TLS handshake succeeds");
        let io = TokioIo::new(stream);
        if mode == Mode::Http2 {
            let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .expect("the HTTP/2 handshake succeeds");
            tokio::spawn(conn);
            Sender::H2(sender)
        } else {
            let (sender, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .expect("the HTTP/1.1 handshake succeeds");
            tokio::spawn(conn);
            Sender::H1(sender)
        }
    }

    /// Another handle on the same HTTP/2 connection (HTTP/1.1 has one request at a time).
    fn share(&self) -> Option<Sender> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
        }
    }

    /// Sends `n` unmeasured requests; returns how many were not answered 200.
    async fn warm_up(&mut self, path: &str, body: &Bytes, n: usize) -> usize {
        let mut errors = 0;
        for _ in 0..n {
            self.ready().await;
            if !matches!(self.post(path, body).await, Ok((StatusCode::OK, _))) {
                errors += 1;
            }
        }
        errors
    }

    async fn ready(&mut self) {
        let ready = match self {
            Sender::H1(s) => s.ready().await,
            Sender::H2(s) => s.ready().await,
        };
        ready.expect("the connection stays usable");
    }

    /// POSTs `body` as the apiserver does; returns the status and the whole answer.
    async fn post(&mut self, path: &str, body: &Bytes) -> Result<(StatusCode, Bytes), String> {
        let h2 = matches!(self, Sender::H2(_));
        let uri = if h2 {
            format!("https://localhost{path}?timeout=10s")
        } else {
            format!("{path}?timeout=10s")
        };
        let mut req = Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, */*")
            .header(USER_AGENT, "kube-apiserver-admission")
            .header(CONTENT_LENGTH, body.len())
            .body(Full::new(body.clone()))
            .map_err(|e| e.to_string())?;
        if !h2 {
            req.headers_mut()
                .insert(HOST, HeaderValue::from_static("localhost"));
        }
        let response = match self {
            Sender::H1(s) => s.send_request(req).await,
            Sender::H2(s) => s.send_request(req).await,
        }
        .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, bytes))
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// One measured run: `requests` requests over `connections` closed loops.
struct Run {
    latencies: Histogram<u64>,
    elapsed: Duration,
    errors: usize,
    /// CPU time the server's threads used while the measured requests ran.
    server_cpu: Duration,
}

impl Run {
    fn empty() -> Self {
        Run {
            latencies: histogram(),
            elapsed: Duration::ZERO,
            errors: 0,
            server_cpu: Duration::ZERO,
        }
    }

    fn merge(&mut self, other: Run) {
        self.latencies
            .add(&other.latencies)
            .expect("histograms share their bounds");
        self.elapsed += other.elapsed;
        self.errors += other.errors;
        self.server_cpu += other.server_cpu;
    }

    /// Server CPU per answered request, in µs.
    fn cpu_per_request(&self) -> f64 {
        self.server_cpu.as_secs_f64() * 1e6 / self.latencies.len().max(1) as f64
    }

    fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// How one run loads a server: `requests` over `connections`, in a closed loop (each connection
/// sends its next request when the last is answered) or, with `rate`, open: each connection
/// sends on a fixed schedule (`rate` requests a second in all), whatever the answers do.
#[derive(Clone, Copy)]
struct Load {
    requests: usize,
    connections: usize,
    rate: Option<f64>,
}

/// Drives `addr` by `load`. Connections are opened and warmed up (unmeasured) first, then all
/// loops start together; with [`Mode::FreshHandshake`] each request opens its own. At a fixed
/// rate over HTTP/2 the loops share one connection, as the apiserver multiplexes its calls.
async fn drive(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    mode: Mode,
    (path, body): (&'static str, Bytes),
    load: Load,
) -> Run {
    let Load {
        requests,
        connections,
        rate,
    } = load;
    let next = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(tokio::sync::Barrier::new(connections + 1));
    let warmup = (requests / connections / 20).clamp(5, 200);
    let shared = match (mode, rate) {
        (Mode::Http2, Some(_)) => Some(Sender::open(addr, &tls, mode).await),
        _ => None,
    };
    // Open loop: connection `j` sends at `begin + j * gap / connections + i * gap`.
    let gap = rate.map(|rate| Duration::from_secs_f64(connections as f64 / rate));
    let begin = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut tasks = Vec::with_capacity(connections);
    for j in 0..connections {
        let (next, start, tls, body) = (next.clone(), start.clone(), tls.clone(), body.clone());
        let begin = begin.clone();
        let shared = shared.as_ref().and_then(Sender::share);
        tasks.push(tokio::spawn(async move {
            let mut sender = match shared {
                Some(sender) => sender,
                None => Sender::open(addr, &tls, mode).await,
            };
            let mut errors = sender.warm_up(path, &body, warmup).await;
            start.wait().await;
            let mut latencies = histogram();
            let mut due = gap.map(|gap| {
                *begin.get_or_init(Instant::now) + gap.mul_f64(j as f64 / connections as f64)
            });
            // When the connection's last answer came (none yet before its first request).
            let mut answered = None::<Instant>;
            while next.fetch_add(1, Ordering::Relaxed) < requests {
                let started;
                let answer = if mode == Mode::FreshHandshake {
                    started = Instant::now();
                    let mut fresh = Sender::open(addr, &tls, mode).await;
                    fresh.post(path, &body).await
                } else {
                    if let Some(due) = due {
                        tokio::time::sleep_until(due.into()).await;
                    }
                    sender.ready().await;
                    started = match due {
                        // The last answer came after this request was due: the wait it caused
                        // counts (no coordinated omission). A late timer's does not: that is
                        // the bench's, not the server's.
                        Some(due) if answered.is_some_and(|at| at > due) => due,
                        _ => Instant::now(),
                    };
                    sender.post(path, &body).await
                };
                let now = Instant::now();
                answered = Some(now);
                let micros = now.duration_since(started).as_micros();
                match answer {
                    Ok((StatusCode::OK, _)) => {
                        latencies.saturating_record(u64::try_from(micros).unwrap_or(u64::MAX));
                    }
                    _ => errors += 1,
                }
                due = due.zip(gap).map(|(due, gap)| due + gap);
            }
            (latencies, errors)
        }));
    }
    start.wait().await;
    collect(tasks).await
}

/// The measured requests of `tasks`, started a moment ago, with the server CPU they used.
async fn collect(tasks: Vec<tokio::task::JoinHandle<(Histogram<u64>, usize)>>) -> Run {
    let started = Instant::now();
    let cpu_before = server_threads_cpu();
    let mut run = Run::empty();
    for task in tasks {
        let (latencies, errors) = task.await.expect("a client task does not panic");
        run.latencies
            .add(&latencies)
            .expect("histograms share their bounds");
        run.errors += errors;
    }
    run.elapsed = started.elapsed();
    run.server_cpu = server_cpu_since(&cpu_before);
    run
}

// === the cases ===

struct Case {
    mode: Mode,
    fixture: &'static str,
    webhook: Webhook,
    body: Bytes,
    requests: usize,
    /// Whether the ratio gate applies (see [`gated`]).
    gated: bool,
}

/// Every case is gated but the 1.5 MB one: parsing 1.5 MB is ~2 ms of real work the floor
/// does not do (its p50 is already ~2x the floor's), so its ratio measures the parser, which
/// `benches/admission.rs` covers, rather than the server around it; reported, not gated.
fn gated(bytes: usize) -> bool {
    bytes <= 1024 * 1024
}

struct Measured {
    case: Case,
    ours: Run,
    floor: Run,
    /// Each round's ours / floor.
    rounds: Vec<Ratios>,
}

/// One round's ours / floor.
struct Ratios {
    throughput: f64,
    /// Server CPU per request.
    cpu: f64,
    p99: f64,
}

fn requests_for(base: usize, bytes: usize, mode: Mode) -> usize {
    let scaled = if bytes > 1024 * 1024 {
        base / 50
    } else if bytes > 64 * 1024 {
        base / 10
    } else {
        base
    };
    let scaled = if mode == Mode::FreshHandshake {
        scaled / 50
    } else {
        scaled
    };
    scaled.max(20)
}

/// Checks, before measuring, that the server answers `case` as the fixture expects.
async fn preflight(addr: SocketAddr, tls: &Arc<rustls::ClientConfig>, case: &Case, patched: bool) {
    let path = case.webhook.path();
    let mut sender = Sender::open(addr, tls, case.mode).await;
    let (status, bytes) = sender
        .post(path, &case.body)
        .await
        .expect("the server answers");
    assert_eq!(status, StatusCode::OK, "{} {path}", case.fixture);
    let answer: serde_json::Value = serde_json::from_slice(&bytes).expect("a JSON answer");
    assert_eq!(
        answer["response"]["allowed"], true,
        "{} {path}",
        case.fixture
    );
    let expect_patch = patched && case.webhook == Webhook::Mutate;
    assert_eq!(
        answer["response"].get("patch").is_some(),
        expect_patch,
        "{} {path}: patch",
        case.fixture
    );
}

/// The four servers under test: ours and the floor, each over HTTP/1.1 and HTTP/2.
struct Servers {
    ours_h1: Ours,
    ours_h2: Ours,
    floor_h1: SocketAddr,
    floor_h2: SocketAddr,
}

/// Starts the servers on the server runtime, so that everything they spawn runs there too.
/// The floor answers what we answer for the typical review, so both send the same bytes.
async fn start_servers(
    servers: &tokio::runtime::Handle,
    certs: &Certs,
    typical: &common::Fixture,
) -> Servers {
    let mut answer = Vec::new();
    let mut body = typical.body.clone();
    admission::Review::new(Webhook::Mutate)
        .answer(&mut body, &mut answer)
        .expect("the typical fixture is answerable");
    let answer = Bytes::from(answer);
    let dir = certs.dir.path().to_path_buf();
    let (cert, key) = (certs.cert_pem.clone(), certs.key_pem.clone());
    let started = "a server starts";
    let ours_h1 = servers.spawn(start_ours(dir.clone(), false));
    let ours_h2 = servers.spawn(start_ours(dir, true));
    let floor_h1 = servers.spawn(start_floor(
        cert.clone(),
        key.clone(),
        false,
        answer.clone(),
    ));
    let floor_h2 = servers.spawn(start_floor(cert, key, true, answer));
    Servers {
        ours_h1: ours_h1.await.expect(started),
        ours_h2: ours_h2.await.expect(started),
        floor_h1: floor_h1.await.expect(started),
        floor_h2: floor_h2.await.expect(started),
    }
}

fn print_header(settings: &Settings) {
    if let Some(rate) = settings.rate
        && (settings.connections as f64) / rate < 0.002
    {
        // A request late by the timer (tokio's resolution is 1 ms) can then keep the next one
        // waiting, and that wait counts as the server's.
        eprintln!(
            "latency: WARNING: each connection sends more often than every 2 ms; raise \
             LATENCY_CONNECTIONS to at least {:.0} for latencies the timer does not inflate",
            (rate * 0.002).ceil()
        );
    }
    println!(
        "latency: {} connection(s), {}, {} round(s) alternating floor and ours, servers and \
         clients on runtimes of 2 workers each{}, {} cores, logging {}{}",
        settings.connections,
        settings
            .rate
            .map_or("closed loop".to_string(), |rate| format!(
                "open loop at {rate} requests a second (from when each was due)"
            )),
        settings.rounds,
        if settings.pin {
            " (servers pinned to CPU 0, clients to CPU 1)"
        } else {
            ""
        },
        std::thread::available_parallelism().map_or(0, usize::from),
        if settings.log {
            "on (to /dev/null)"
        } else {
            "off"
        },
        if settings.smoke {
            ", SMOKE (no gate)"
        } else {
            ""
        },
    );
}

/// One case, in rounds that alternate the floor and ours so that both meet the same noise.
async fn measure(
    settings: &Settings,
    servers: &Servers,
    certs: &Certs,
    (fixture, mode, webhook): (&common::Fixture, Mode, Webhook),
) -> Measured {
    let case = Case {
        mode,
        fixture: fixture.name,
        webhook,
        body: Bytes::from(fixture.body.clone()),
        requests: requests_for(settings.requests, fixture.body.len(), mode),
        gated: gated(fixture.body.len()),
    };
    let (ours_addr, floor_addr) = match mode {
        Mode::Http2 => (servers.ours_h2.webhook, servers.floor_h2),
        _ => (servers.ours_h1.webhook, servers.floor_h1),
    };
    let tls = client_config(&certs.ca_pem, mode);
    preflight(ours_addr, &tls, &case, fixture.patched).await;
    let (mut ours, mut floor) = (Run::empty(), Run::empty());
    let mut ratios = Vec::new();
    let rounds = settings.rounds.max(1);
    let per_round = case.requests.div_ceil(rounds);
    let load = Load {
        requests: per_round,
        connections: settings.connections,
        rate: settings.rate,
    };
    let path = webhook.path();
    for _ in 0..rounds {
        let body = case.body.clone();
        let floor_round = drive(floor_addr, tls.clone(), mode, (path, body.clone()), load).await;
        let ours_round = drive(ours_addr, tls.clone(), mode, (path, body), load).await;
        let p99 = |run: &Run| run.latencies.value_at_quantile(0.99).max(1) as f64;
        ratios.push(Ratios {
            throughput: ours_round.throughput() / floor_round.throughput().max(1e-9),
            cpu: ours_round.cpu_per_request() / floor_round.cpu_per_request().max(1e-9),
            p99: p99(&ours_round) / p99(&floor_round),
        });
        floor.merge(floor_round);
        ours.merge(ours_round);
    }
    eprintln!(
        "  measured {:<16} {:<16} {:<8} ({} + {} requests)",
        mode.label(),
        case.fixture,
        webhook_name(webhook),
        floor.latencies.len(),
        ours.latencies.len()
    );
    Measured {
        case,
        ours,
        floor,
        rounds: ratios,
    }
}

async fn run(settings: Settings, servers: tokio::runtime::Handle) -> ExitCode {
    let begun = Instant::now();
    assert_eq!(MUTATE_PATH, Webhook::Mutate.path());
    assert_eq!(VALIDATE_PATH, Webhook::Validate.path());
    let certs = certs();
    let fixtures = common::all();
    let typical = fixtures
        .iter()
        .find(|f| f.name == common::TYPICAL)
        .expect("the typical fixture");
    let started = start_servers(&servers, &certs, typical).await;

    let cases: Vec<_> = match &settings.only {
        Some(only) => fixtures
            .iter()
            .filter(|f| f.name.contains(only.as_str()))
            .flat_map(|f| [Mode::KeepAlive, Mode::Http2].map(|mode| (f, mode, Webhook::Mutate)))
            .collect(),
        None => {
            let mut cases: Vec<_> = fixtures
                .iter()
                .map(|f| (f, Mode::KeepAlive, Webhook::Mutate))
                .collect();
            cases.push((typical, Mode::KeepAlive, Webhook::Validate));
            cases.push((typical, Mode::FreshHandshake, Webhook::Mutate));
            cases.push((typical, Mode::Http2, Webhook::Mutate));
            cases
        }
    };
    if cases.is_empty() {
        eprintln!("latency: LATENCY_ONLY={:?} names no fixture", settings.only);
        return ExitCode::FAILURE;
    }

    print_header(&settings);
    let mut results = Vec::new();
    for case in cases {
        results.push(measure(&settings, &started, &certs, case).await);
    }
    started.ours_h1.stop().await;
    started.ours_h2.stop().await;

    report(&settings, &results);
    println!(
        "\nlatency: finished in {:.1} s",
        begun.elapsed().as_secs_f64()
    );
    verdict(&settings, &results)
}

/// Fails on any request that did not get 200 and, outside a smoke run, on a gated p99 over its
/// allowed ratio to the floor's.
fn verdict(settings: &Settings, results: &[Measured]) -> ExitCode {
    let errors: usize = results.iter().map(|m| m.ours.errors + m.floor.errors).sum();
    if errors > 0 {
        println!("latency: FAIL: {errors} request(s) did not get 200");
        return ExitCode::FAILURE;
    }
    if settings.smoke {
        println!("latency: smoke run, ratio gate skipped");
        return ExitCode::SUCCESS;
    }
    let over: Vec<&Measured> = results
        .iter()
        .filter(|m| m.case.gated && ratio(m) > settings.max_ratio)
        .collect();
    if over.is_empty() {
        println!(
            "latency: OK, every gated p99 is within {:.1}x of its floor's",
            settings.max_ratio
        );
        return ExitCode::SUCCESS;
    }
    for m in over {
        println!(
            "latency: FAIL: {} {} {}: p99 {} µs is {:.2}x the floor's {} µs (max {:.1}x, LATENCY_MAX_RATIO)",
            m.case.mode.label(),
            m.case.fixture,
            webhook_name(m.case.webhook),
            m.ours.latencies.value_at_quantile(0.99),
            ratio(m),
            m.floor.latencies.value_at_quantile(0.99),
            settings.max_ratio
        );
    }
    ExitCode::FAILURE
}

fn webhook_name(webhook: Webhook) -> &'static str {
    match webhook {
        Webhook::Mutate => "mutate",
        Webhook::Validate => "validate",
    }
}

fn ratio(m: &Measured) -> f64 {
    m.ours.latencies.value_at_quantile(0.99) as f64
        / m.floor.latencies.value_at_quantile(0.99).max(1) as f64
}

fn report(settings: &Settings, results: &[Measured]) {
    println!(
        "\n| case | fixture | bytes | server | n | p50 µs | p90 µs | p99 µs | p99.9 µs | max µs | req/s | p99 / floor |"
    );
    println!("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in results {
        for (server, run) in [("floor", &m.floor), ("ours", &m.ours)] {
            let h = &run.latencies;
            let verdict = if server == "floor" {
                String::new()
            } else {
                let r = ratio(m);
                let mark = if settings.smoke {
                    ""
                } else if !m.case.gated {
                    " (not gated)"
                } else if r > settings.max_ratio {
                    " FAIL"
                } else {
                    " ok"
                };
                format!("{r:.2}x{mark}")
            };
            println!(
                "| {} | {} {} | {} | {server} | {} | {} | {} | {} | {} | {} | {:.0} | {verdict} |",
                m.case.mode.label(),
                m.case.fixture,
                webhook_name(m.case.webhook),
                m.case.body.len(),
                h.len(),
                h.value_at_quantile(0.50),
                h.value_at_quantile(0.90),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
                run.throughput(),
            );
        }
    }
    println!(
        "\nServer CPU per request (the server runtime's threads and the log writer, kernel \
         sum_exec_runtime; the floor does TLS, HTTP and reads the body, ours also decides):\n"
    );
    println!("| case | fixture | floor µs | ours µs | ours - floor µs | ours / floor |");
    println!("|---|---|---:|---:|---:|---:|");
    for m in results {
        let (floor, ours) = (m.floor.cpu_per_request(), m.ours.cpu_per_request());
        println!(
            "| {} | {} {} | {floor:.1} | {ours:.1} | {:.1} | {:.2}x |",
            m.case.mode.label(),
            m.case.fixture,
            webhook_name(m.case.webhook),
            ours - floor,
            ours / floor.max(1e-9),
        );
    }
    println!(
        "\nRound by round (each round runs the floor, then ours; the same-round ratio cancels \
         most of the machine's drift): ours / floor, the median of the rounds and their range.\n"
    );
    println!(
        "| case | fixture | rounds | req/s: median (min-max) | CPU per request: median (min-max) | p99: median (min-max) |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for m in results {
        let spread = |pick: fn(&Ratios) -> f64| {
            let mut values: Vec<f64> = m.rounds.iter().map(pick).collect();
            values.sort_by(f64::total_cmp);
            let median = match values.len() {
                0 => f64::NAN,
                n if n % 2 == 1 => values[n / 2],
                n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
            };
            let (min, max) = (values.first(), values.last());
            format!(
                "{median:.2}x ({:.2}-{:.2})",
                min.copied().unwrap_or(f64::NAN),
                max.copied().unwrap_or(f64::NAN)
            )
        };
        println!(
            "| {} | {} {} | {} | {} | {} | {} |",
            m.case.mode.label(),
            m.case.fixture,
            webhook_name(m.case.webhook),
            m.rounds.len(),
            spread(|r| r.throughput),
            spread(|r| r.cpu),
            spread(|r| r.p99),
        );
    }
}
