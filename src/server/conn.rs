//! One webhook connection: the TLS handshake under a deadline, then HTTP with two more
//! deadlines hyper cannot tell apart on its own: a short one for a request's headers (from its
//! first byte: slowloris) and a long one for an idle keep-alive (longer than the apiserver's
//! 90 s pool, so the client always closes first).

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::TlsAcceptor;

use super::route::App;
use crate::config::Config;

/// The per-connection deadlines.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub handshake: Duration,
    pub headers: Duration,
    pub idle: Duration,
    /// How often the watchdog looks: a quarter of the shortest deadline, within [10 ms, 1 s].
    pub tick: Duration,
}

impl From<&Config> for Limits {
    fn from(c: &Config) -> Self {
        let tick = (c.header_read_timeout.min(c.idle_timeout) / 4)
            .clamp(Duration::from_millis(10), Duration::from_secs(1));
        Limits {
            handshake: c.tls_handshake_timeout,
            headers: c.header_read_timeout,
            idle: c.idle_timeout,
            tick,
        }
    }
}

/// What every connection task shares.
pub(crate) struct Shared {
    pub acceptor: TlsAcceptor,
    pub builder: Arc<auto::Builder<TokioExecutor>>,
    pub app: Arc<App>,
    pub limits: Arc<Limits>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl Shared {
    /// Serves one accepted TCP connection to its end, or until a deadline cuts it off.
    pub async fn run(&self, tcp: tokio::net::TcpStream, peer: SocketAddr, watcher: Watcher) {
        let tls = match tokio::time::timeout(self.limits.handshake, self.acceptor.accept(tcp)).await
        {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                self.metrics.handshake_failures.inc();
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                self.metrics.handshake_timeouts.inc();
                return;
            }
        };
        self.metrics.connections_open.inc();
        let _open = Open(&self.metrics.connections_open);
        // HTTP/2 clients send frames (pings, window updates) between requests: only HTTP/1 bytes
        // on an idle connection mean a request has started.
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let activity = Arc::new(Activity::new(!h2));
        let io = TokioIo::new(Tracked {
            inner: tls,
            activity: activity.clone(),
        });
        let app = self.app.clone();
        let in_service = activity.clone();
        let service = service_fn(move |req| {
            let app = app.clone();
            let busy = in_service.begin();
            async move {
                let response = app.handle(req).await;
                drop(busy);
                Ok::<_, Infallible>(response)
            }
        });
        let conn = watcher.watch(self.builder.serve_connection(io, service));
        let mut conn = std::pin::pin!(conn);
        loop {
            tokio::select! {
                result = &mut conn => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = tokio::time::sleep(self.limits.tick) => {
                    if let Some(why) = activity.expired(&self.limits) {
                        tracing::debug!(%peer, why, "closing connection");
                        return;
                    }
                }
            }
        }
    }
}

/// What the connection is doing, updated by the I/O wrapper and the service.
#[derive(Debug)]
struct Activity {
    epoch: Instant,
    track_headers: bool,
    /// Requests being served.
    in_flight: AtomicUsize,
    /// Bytes of a new request have arrived since the connection last went idle.
    reading: AtomicBool,
    /// Milliseconds since `epoch` when the current phase (idle or reading) began.
    since: AtomicU64,
}

impl Activity {
    /// A new connection starts idle, not on the header deadline: Go's http.Transport (the
    /// apiserver's client) parks a freshly dialed connection unused when another became free
    /// first, and closing it early would race the client's reuse of it.
    fn new(track_headers: bool) -> Self {
        Activity {
            epoch: Instant::now(),
            track_headers,
            in_flight: AtomicUsize::new(0),
            reading: AtomicBool::new(false),
            since: AtomicU64::new(0),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn on_read(&self) {
        if self.track_headers
            && self.in_flight.load(Ordering::Acquire) == 0
            && !self.reading.swap(true, Ordering::AcqRel)
        {
            self.since.store(self.now(), Ordering::Release);
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.reading.store(false, Ordering::Release);
        Busy(self.clone())
    }

    /// Why the connection should be closed now, if it should.
    fn expired(&self, limits: &Limits) -> Option<&'static str> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let elapsed = Duration::from_millis(
            self.now()
                .saturating_sub(self.since.load(Ordering::Acquire)),
        );
        if self.reading.load(Ordering::Acquire) {
            (elapsed >= limits.headers).then_some("request headers not received in time")
        } else {
            (elapsed >= limits.idle).then_some("idle keep-alive timeout")
        }
    }
}

/// Marks a request in service; dropping it starts the idle clock.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.since.store(self.0.now(), Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The TLS stream, reporting reads to [`Activity`].
struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.on_read();
        }
        result
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Decrements the open-connections gauge however the connection ends.
struct Open<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}
