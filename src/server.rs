//! Listeners, connections and shutdown: the webhook port (TLS, HTTP/1.1 and optionally HTTP/2)
//! and the plain-HTTP health port. Every wait on a client has a deadline and every input a cap
//! (see [`conn`]); accepting never waits for a slot (see [`eviction`] for who gives way); SIGTERM
//! turns readiness off, makes every answer say `Connection: close`, stops accepting and
//! drains within a bound, leaving idle keep-alives to their clients (see [`close`]).

mod answer;
mod body;
pub mod budget;
mod close;
mod conn;
mod eviction;
pub mod health;
pub mod route;
mod slots;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket};
use tokio_rustls::TlsAcceptor;

use crate::autoscalers::{Autoscalers, watch};
use crate::config::Config;
use crate::tls::{self, Resolver};

/// The accept queue asked for: the kernel caps it at `net.core.somaxconn` (4096 by default),
/// as Go's `net.Listen` does; tokio's `bind` asks for 1024, which a connection flood fills
/// (the kernel then drops new SYNs, and a client waits a second or more to retry).
const BACKLOG: u32 = 65_535;

/// The bound sockets, so callers (and tests, with port 0) learn the addresses before serving.
#[derive(Debug)]
pub struct Listeners {
    pub webhook: TcpListener,
    pub health: TcpListener,
    /// `None` with `--metrics-bind-address=0`.
    pub metrics: Option<TcpListener>,
}

impl Listeners {
    pub async fn bind(config: &Config) -> Result<Self, Error> {
        let bind = |addr: SocketAddr, flag: &'static str| async move {
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()
            } else {
                TcpSocket::new_v6()
            };
            socket
                .and_then(|socket| {
                    socket.set_reuseaddr(true)?;
                    socket.bind(addr)?;
                    socket.listen(BACKLOG)
                })
                .map_err(|source| Error::Bind { flag, addr, source })
        };
        Ok(Listeners {
            webhook: bind(config.webhook_bind_address, "--webhook-bind-address").await?,
            health: bind(
                config.health_probe_bind_address,
                "--health-probe-bind-address",
            )
            .await?,
            metrics: match config.metrics_bind_address {
                Some(addr) => Some(bind(addr, "--metrics-bind-address").await?),
                None => None,
            },
        })
    }

    pub fn webhook_addr(&self) -> SocketAddr {
        self.webhook
            .local_addr()
            .expect("a bound TCP listener has an address")
    }

    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn health_addr(&self) -> SocketAddr {
        self.health
            .local_addr()
            .expect("a bound TCP listener has an address")
    }
}

/// Why the server could not start.
#[derive(Debug)]
pub enum Error {
    Bind {
        flag: &'static str,
        addr: SocketAddr,
        source: io::Error,
    },
    Tls(rustls::Error),
    ClientCa(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Bind { flag, addr, source } => {
                write!(f, "cannot listen on {addr} ({flag}): {source}")
            }
            Error::Tls(e) => write!(f, "invalid TLS settings: {e}"),
            Error::ClientCa(e) => write!(f, "--client-ca-file: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// What readiness depends on, shared by the listeners and the health port.
#[derive(Debug, Default)]
pub struct State {
    /// Set once the webhook listener accepts connections.
    pub serving: AtomicBool,
    /// Set on SIGTERM: readiness fails at once.
    pub shutting_down: AtomicBool,
    /// The serving certificate.
    pub resolver: Arc<Resolver>,
    /// Everything `/metrics` shows.
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl State {
    /// `None` when ready, else why not.
    pub fn not_ready(&self) -> Option<&'static str> {
        if self.shutting_down.load(Ordering::Acquire) {
            Some("shutting down")
        } else if !self.resolver.has_certificate() {
            Some("no valid serving certificate loaded yet")
        } else if !self.serving.load(Ordering::Acquire) {
            Some("the webhook listener is not accepting yet")
        } else {
            None
        }
    }
}

/// Starts the certificate reloader, then [`serve`]s: what the binary runs. Without a valid
/// certificate the server still starts, not ready, and begins serving when one appears.
pub async fn run(
    config: Config,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let state = Arc::new(State::default());
    let reloader = reloader(&config, &state)?;
    let client_verifier = reloader
        .client_ca
        .as_ref()
        .map(|(_, verifier)| verifier.clone());
    let reloader = tokio::spawn(reloader.run());
    let result = serve(config, listeners, state, client_verifier, shutdown).await;
    reloader.abort();
    result
}

fn reloader(config: &Config, state: &State) -> Result<tls::reload::Reloader, Error> {
    let provider = tls::provider();
    let client_ca = match &config.client_ca_file {
        None => None,
        Some(path) => {
            // A bad CA bundle at startup is a configuration error; later bad writes are refused.
            let pem = std::fs::read(path)
                .map_err(|e| Error::ClientCa(format!("cannot read {}: {e}", path.display())))?;
            let verifier = tls::client_verifier_from_pem(&pem, provider.clone())
                .map_err(|e| Error::ClientCa(format!("{}: {e}", path.display())))?;
            Some((path.clone(), Arc::new(tls::ClientVerifier::new(verifier))))
        }
    };
    Ok(tls::reload::Reloader {
        cert_path: config.cert_path(),
        key_path: config.key_path(),
        client_ca,
        provider,
        resolver: state.resolver.clone(),
        interval: config.cert_check_interval,
        stats: state.metrics.certificates.clone(),
    })
}

/// Serves until `shutdown` resolves, then drains in-flight requests (bounded by
/// `--shutdown-grace-period`) and returns.
pub async fn serve(
    config: Config,
    listeners: Listeners,
    state: Arc<State>,
    client_verifier: Option<Arc<tls::ClientVerifier>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), Error> {
    let tls13_only = config.tls_min_version == crate::config::TlsVersion::V1_3;
    let tls = tls::server_config(
        tls::provider(),
        state.resolver.clone(),
        client_verifier,
        config.enable_http2,
        tls13_only,
    )
    .map_err(Error::Tls)?;
    let (autoscalers, watch) = watch_autoscalers(&config, &state);
    let fd_limit = raise_fd_limit();
    let pre_handshake_max = config.max_pre_handshake_connections.map_or_else(
        || eviction::pre_handshake_ceiling(fd_limit, config.max_connections),
        |n| n as usize,
    );
    let shared = Arc::new(conn::Shared {
        acceptor: TlsAcceptor::from(Arc::new(tls)),
        builder: Arc::new(http_builder(&config)),
        app: Arc::new(route::App::with_autoscalers(
            &config,
            state.metrics.clone(),
            autoscalers,
        )),
        limits: Arc::new(conn::Limits::from(&config)),
        metrics: state.metrics.clone(),
        slots: slots::Slots::new(
            config.max_connections,
            pre_handshake_max,
            state.metrics.clone(),
        ),
        state: state.clone(),
        drain_begun: AtomicBool::new(false),
    });
    // Every connection task watches this; the drain waits until all of them are gone.
    let (drain, drained) = tokio::sync::watch::channel(false);
    let drain = Drain {
        sender: drain,
        shared: shared.clone(),
    };

    let health = tokio::spawn(health::serve(listeners.health, state.clone()));
    let metrics = listeners
        .metrics
        .map(|listener| tokio::spawn(crate::scrape::serve(listener, state.clone(), &config)));
    state.serving.store(true, Ordering::Release);
    tracing::info!(
        webhook = %listeners.webhook.local_addr().map_err(|source| Error::Bind { flag: "--webhook-bind-address", addr: config.webhook_bind_address, source })?,
        http2 = config.enable_http2,
        max_connections = config.max_connections,
        pre_handshake_max,
        fd_limit,
        "serving admission webhooks"
    );

    // Readiness fails as soon as the signal arrives, and every answer from then on says
    // `Connection: close` (the client retires each connection after its answer); accepting
    // goes on for --shutdown-delay so that Service endpoints drop this pod before its listener
    // closes.
    let stop = async {
        shutdown.await;
        state.shutting_down.store(true, Ordering::Release);
        tracing::info!(delay = ?config.shutdown_delay, "shutdown requested; /readyz now fails and every answer says Connection: close");
        tokio::time::sleep(config.shutdown_delay).await;
    };
    accept_until(stop, &listeners.webhook, &shared, &drained).await;
    drop(listeners.webhook);
    drop(drained);
    drain_connections(&config, &state, drain).await;
    health.abort();
    if let Some(watch) = watch {
        watch.abort();
    }
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    Ok(())
}

/// With `--autoscaler-conflicts=on`, the index of the cluster's other autoscalers and the task
/// that watches them; never waited for: readiness and serving do not depend on the API server
/// (README).
fn watch_autoscalers(
    config: &Config,
    state: &State,
) -> (
    Option<Arc<Autoscalers>>,
    Option<tokio::task::JoinHandle<()>>,
) {
    match config.autoscaler_conflicts {
        crate::config::Switch::Off => (None, None),
        crate::config::Switch::On => {
            let index = Arc::new(Autoscalers::new(state.metrics.autoscalers.clone()));
            let credentials = match &config.kubeconfig {
                Some(path) => watch::Credentials::Kubeconfig(path.clone()),
                None => watch::Credentials::Infer,
            };
            let task = tokio::spawn(watch::run(
                index.clone(),
                credentials,
                config.autoscaler_discovery_interval,
            ));
            (Some(index), Some(task))
        }
    }
}

/// Accepts webhook connections, each into its own task, until `stop` resolves.
async fn accept_until(
    stop: impl Future<Output = ()>,
    listener: &TcpListener,
    shared: &Arc<conn::Shared>,
    drained: &tokio::sync::watch::Receiver<bool>,
) {
    let mut stop = std::pin::pin!(stop);
    let mut last_warning = None::<std::time::Instant>;
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: make room by closing the oldest connection that has
                    // not sent a byte, and back off briefly instead of spinning.
                    if last_warning.is_none_or(|at| at.elapsed() >= std::time::Duration::from_secs(10)) {
                        tracing::warn!(error = %e, "accept failed (logged at most every 10 s)");
                        last_warning = Some(std::time::Instant::now());
                    }
                    shared.slots.shed_oldest_pending();
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // As Go's net package does on every connection: with Nagle on, a small write sent while
        // an earlier one is unacknowledged waits for the client's delayed ACK (up to ~40 ms on
        // Linux), which an answer leaving in more than one write would pay
        // (`LATENCY_FLOOR_NODELAY=0` in benches/latency.rs shows it on the floor).
        let _ = tcp.set_nodelay(true);
        let ticket = shared.slots.accepted(peer.ip());
        tokio::spawn(shared.clone().run(tcp, peer, ticket, drained.clone()));
    }
}

/// The drain's sender: [`conn::Shared::drain_begun`] is set before it sends, or is dropped
/// however [`serve`] ends.
struct Drain {
    sender: tokio::sync::watch::Sender<bool>,
    shared: Arc<conn::Shared>,
}

impl Drain {
    fn send(&self) {
        self.shared.drain_begun.store(true, Ordering::Release);
        let _ = self.sender.send(true);
    }
}

impl Drop for Drain {
    fn drop(&mut self) {
        // Before the sender, a field, is dropped.
        self.shared.drain_begun.store(true, Ordering::Release);
    }
}

/// Tells every connection to close after its next answer and waits for them, at most
/// `--shutdown-grace-period`; `drain`'s receivers are the connections still open.
async fn drain_connections(config: &Config, state: &State, drain: Drain) {
    let open = drain.sender.receiver_count();
    let by_state = |i: usize| state.metrics.connections.by_state[i].get();
    tracing::info!(
        open,
        idle = by_state(2),
        grace = ?config.shutdown_grace_period,
        "listener closed; draining: each connection closes after its next answer, an idle one \
         when its client closes it (HTTP/2: GOAWAY)"
    );
    drain.send();
    if tokio::time::timeout(config.shutdown_grace_period, drain.sender.closed())
        .await
        .is_err()
    {
        tracing::warn!(
            open = drain.sender.receiver_count(),
            idle = by_state(2),
            active = by_state(3),
            "grace period over; closing the remaining connections (a client reusing an idle one \
             just now may see EOF: docs/availability.md)"
        );
    } else {
        tracing::info!("every connection closed; exiting");
    }
}

fn http_builder(config: &Config) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if !config.enable_http2 {
        builder = builder.http1_only();
    }
    builder
        .http1()
        .timer(TokioTimer::new())
        // Our own deadline (conn.rs) bounds header reads; hyper's would also end idle keep-alives.
        .header_read_timeout(None)
        .max_buf_size(config.max_header_bytes as usize)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(config.http2_max_concurrent_streams)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(1024)
        .max_header_list_size(config.max_header_bytes)
        .keep_alive_interval(Some(std::time::Duration::from_secs(30)))
        .keep_alive_timeout(std::time::Duration::from_secs(10));
    builder
}

/// Raises the soft open-files limit to the hard one (as Go's runtime does at startup) and
/// returns the soft limit in force: every accepted connection is a descriptor.
fn raise_fd_limit() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let current = limit.current.unwrap_or(u64::MAX);
    if let Some(maximum) = limit.maximum
        && maximum > current
        && setrlimit(
            Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(maximum),
                maximum: Some(maximum),
            },
        )
        .is_ok()
    {
        return maximum;
    }
    current
}
