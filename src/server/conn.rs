//! One webhook connection, in two stages. Until its first bytes arrive it holds only its
//! socket and a small task (no slot, no TLS or HTTP state); then it takes a slot (`slots`),
//! handshakes under a deadline, and serves HTTP with two more deadlines hyper cannot tell apart
//! on its own: a short one for a request's headers (from its first byte: slowloris) and a long
//! one for an idle keep-alive (longer than the apiserver's 90 s pool, so the client always
//! closes first). They shrink as slots fill (`eviction::factor`), except a used keep-alive's.
//! When and how it closes a connection it did not have to is `close`'s policy.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::{Duration, Instant};

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::close::{self, Reason, When};
use super::eviction;
use super::route::App;
use super::slots::{Conn, Slots, Ticket};
use crate::config::Config;
use tracked::Tracked;

mod tracked;

/// How long an evicted connection between requests gets to close gracefully (an HTTP/2
/// GOAWAY waits for the client's ping answer) before it is dropped.
const EVICTION_GRACE: Duration = Duration::from_secs(1);

/// The per-connection deadlines, as configured (before scaling).
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
    pub slots: Arc<Slots>,
    /// Its `shutting_down`: from then on every answer says `Connection: close`.
    pub state: Arc<super::State>,
    /// Set before the drain is sent or its sender dropped (`server::Drain`): until then a
    /// connection's wait for the drain need not be polled (`gated`).
    pub drain_begun: std::sync::atomic::AtomicBool,
}

impl Shared {
    /// Serves one accepted TCP connection to its end, or until a deadline, an eviction or the
    /// drain cuts it off. This stage is kept small (its future is what every pre-handshake
    /// connection costs): the TLS and HTTP stage is boxed and allocated only once the client's
    /// first TLS record has arrived whole.
    pub async fn run(
        self: Arc<Self>,
        tcp: TcpStream,
        peer: SocketAddr,
        (ticket, factor): (Ticket, f64),
        drain: watch::Receiver<bool>,
    ) {
        // Not cut by the drain: a client whose dial the listener accepted just before it closed
        // gets its handshake and an answer that says close.
        let deadline =
            tokio::time::Instant::now() + eviction::scaled(self.limits.handshake, factor);
        let conn = ticket.0.clone();
        let slot = tokio::select! {
            slot = async {
                client_hello(&tcp).await.ok()?;
                self.slots.take(&ticket).await
            } => slot,
            () = tokio::time::sleep_until(deadline) => {
                tracing::debug!(%peer, "no TLS handshake before the deadline");
                self.metrics.handshake_timeouts.inc();
                None
            }
            () = conn.evict.notified() => {
                tracing::debug!(%peer, "closed before its handshake to make room");
                None
            }
        };
        if slot.is_none() {
            return;
        }
        Box::pin(self.serve(tcp, peer, ticket, drain)).await;
    }

    /// The TLS handshake and HTTP, holding a slot.
    async fn serve(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        ticket: Ticket,
        mut drain: watch::Receiver<bool>,
    ) {
        let conn = ticket.0.clone();
        let Some(tls) = self.handshake(tcp, peer, &conn).await else {
            return;
        };
        conn.handshake_done();
        self.metrics.connections_open.inc();
        let _open = Open(&self.metrics.connections_open);
        // HTTP/2 clients send frames (pings, window updates) between requests: only HTTP/1 bytes
        // on an idle connection mean a request has started.
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = Tracked::new(tls, (!h2).then(|| conn.clone()));
        let reset = io.reset.clone();
        let io = TokioIo::new(io);
        let (app, state) = (self.app.clone(), self.state.clone());
        let in_service = conn.clone();
        let service = service_fn(move |req| {
            let (app, state, conn) = (app.clone(), state.clone(), in_service.clone());
            let busy = conn.begin();
            let call = app.call(req);
            async move {
                let mut response = app.handle(call).await;
                // Decided as the answer leaves: a review in service when shutdown begins says it.
                let shutting_down = state
                    .shutting_down
                    .load(std::sync::atomic::Ordering::Acquire);
                if !h2 && close::says_close(shutting_down, conn.asked()) {
                    response.headers_mut().insert(
                        hyper::header::CONNECTION,
                        hyper::header::HeaderValue::from_static("close"),
                    );
                    conn.say_close();
                }
                drop(busy);
                Ok::<_, Infallible>(response)
            }
        });
        let http = self.builder.serve_connection(io, service);
        let mut http = std::pin::pin!(http);
        let (mut draining, mut evicted) = (false, None::<Instant>);
        let (reason, when) = loop {
            let tick = tokio::time::Instant::now() + self.limits.tick;
            let step = tokio::select! {
                // hyper first: bytes that arrived are read (a head begun) before an eviction
                // looks at what the connection is doing.
                biased;
                result = http.as_mut() => break ended(&conn, peer, result),
                () = gated(tokio::time::sleep_until(tick), || {
                    tokio::time::Instant::now() >= tick
                }) => self.on_tick(&conn, evicted),
                () = gated(conn.evict.notified(), || conn.evicting() || conn.asked()),
                    if evicted.is_none() => on_evict(&conn, h2),
                _ = gated(drain.wait_for(|d| *d), || self.drain_begun.load(Ordering::Acquire)),
                    if !draining => {
                    draining = true;
                    on_drain(h2)
                }
            };
            match step {
                Step::Go => {}
                Step::Close(reason, when) => break (reason, when),
                Step::Graceful => {
                    http.as_mut().graceful_shutdown();
                    conn.say_close();
                    if conn.evicting() {
                        evicted = Some(Instant::now());
                    }
                }
                Step::AfterAnswer => {
                    conn.close_after_answer();
                    evicted = Some(Instant::now());
                }
            }
        };
        // Before `http`, and the socket in it, is dropped at the end of this function.
        reset.store(close::resets(reason, when, h2), Ordering::Release);
        tracing::debug!(%peer, ?reason, ?when, "connection closed");
        self.metrics.connections.closed[reason as usize][when as usize].inc();
    }

    /// The TLS handshake, under its deadline; `None` when it failed, timed out or the
    /// connection was told to go meanwhile. The deadline does not shrink under pressure: a
    /// handshake in a slot has sent its whole ClientHello, and what it waits for then is mostly
    /// this server's CPU, scarcest under a flood; a client that stalls it is evicted when a
    /// newcomer needs the slot (`eviction`). A shrunk deadline cut the API server's own dials
    /// on a starved server, and a request waiting on such a dial fails (docs/availability.md).
    async fn handshake(
        &self,
        tcp: TcpStream,
        peer: SocketAddr,
        conn: &Conn,
    ) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
        let timeout = self.limits.handshake;
        let tls = tokio::select! {
            // The handshake first: a client whose last handshake bytes have arrived has finished
            // on its side and may have sent its request with them (Go does), so a connection told
            // to go as they arrive completes its handshake and is answered (`on_evict`), not cut.
            // The eviction's notification is not lost: a dropped `Notified` passes it on.
            biased;
            tls = tokio::time::timeout(timeout, self.acceptor.accept(tcp)) => tls,
            () = conn.evict.notified() => {
                tracing::debug!(%peer, "closed in its handshake to make room");
                return None;
            }
        };
        match tls {
            Ok(Ok(tls)) => Some(tls),
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                self.metrics.handshake_failures.inc();
                None
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                self.metrics.handshake_timeouts.inc();
                None
            }
        }
    }

    /// The deadlines: an evicted connection that has not closed in time, the header and idle
    /// ones.
    fn on_tick(&self, conn: &Conn, evicted: Option<Instant>) -> Step {
        // Not once its answer said close: hyper closes it right after writing that answer.
        let seen = conn.seen();
        if evicted.is_some_and(|at| at.elapsed() >= EVICTION_GRACE)
            && !conn.in_service()
            && !seen.said_close
        {
            return Step::Close(Reason::Eviction, idle_or_mid(conn));
        }
        match conn.expired(self.limits.headers, self.limits.idle, self.slots.factor()) {
            Some(why) => Step::Close(why, idle_or_mid(conn)),
            None => Step::Go,
        }
    }
}

/// What the connection's task does next.
enum Step {
    Go,
    /// hyper's graceful close: HTTP/1 closes once the answer in service is out (and says so),
    /// HTTP/2 sends GOAWAY.
    Graceful,
    /// HTTP/1 with a head arriving: its answer says close; cut if it is not in service within
    /// [`EVICTION_GRACE`] (hyper's graceful close would cut the head).
    AfterAnswer,
    Close(Reason, When),
}

/// `inner`, polled at its first poll (which registers the task's waker with it) and after that
/// only once `due` says it may be ready. The connection's task wakes about twice a request,
/// nearly always for hyper, and polling its watchers at every wake cost a few hundred
/// instructions a request (docs/performance.md). Sound only where whatever readies `inner`
/// makes `due` true before it wakes the task: the tick's deadline passed (tokio's timer fires
/// at or after it), the connection told or asked to go (`slots` sets the flag, then notifies),
/// the drain sent or its sender dropped (`Shared::drain_begun` is set first).
async fn gated<F: Future>(inner: F, mut due: impl FnMut() -> bool) -> F::Output {
    let mut inner = std::pin::pin!(inner);
    let mut first = true;
    std::future::poll_fn(move |cx| {
        if std::mem::take(&mut first) || due() {
            inner.as_mut().poll(cx)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// hyper ended the connection: who closed it, and when (`close::ended`).
fn ended<E: std::fmt::Display>(
    conn: &Conn,
    peer: SocketAddr,
    result: Result<(), E>,
) -> (Reason, When) {
    if let Err(e) = &result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
    let decided = if conn.evicting() || conn.asked() {
        Reason::Eviction
    } else {
        Reason::Shutdown
    };
    close::ended(result.is_ok(), decided, conn.seen())
}

/// The listener closed (`close::on_drain`).
fn on_drain(h2: bool) -> Step {
    match close::on_drain(h2) {
        close::Drain::GoAway => Step::Graceful,
        close::Drain::Wait => Step::Go,
    }
}

fn idle_or_mid(conn: &Conn) -> When {
    if conn.seen().idle {
        When::Idle
    } else {
        When::MidRequest
    }
}

/// Told to go, or asked to close after its answer (`slots`).
fn on_evict(conn: &Conn, h2: bool) -> Step {
    if !conn.evicting() {
        // Asked: HTTP/1 answers say so (the service); HTTP/2 gets GOAWAY.
        return if h2 { Step::Graceful } else { Step::Go };
    }
    // A request head arriving is most likely its client's next request: answered, then closed.
    if !h2 && conn.reading_with_room_to_linger() {
        return Step::AfterAnswer;
    }
    // HTTP/1 between requests is simply closed (`eviction` picks a used keep-alive only after
    // every connection idle since its handshake: `close` on the window that leaves).
    if !conn.worth_keeping() || (!h2 && !conn.in_service()) {
        return Step::Close(Reason::Eviction, idle_or_mid(conn));
    }
    Step::Graceful
}

/// The TLS record header: content type, version, length.
const RECORD_HEADER: usize = 5;
/// A handshake record, the ClientHello's.
const HANDSHAKE: u8 = 0x16;
/// The longest TLS plaintext record (RFC 8446, 5.1): a longer one is refused by rustls at once.
const MAX_RECORD: usize = 1 << 14;

/// Waits, without a buffer or TLS state, until the client's first TLS record (its ClientHello)
/// has arrived whole in the socket, or its bytes show it never will (not a handshake record, a
/// length no record has, the end): then rustls takes over and answers or fails at once. A real
/// client sends its ClientHello in one go; a client that sends part of one and stalls (the
/// cheapest way to hold a TLS slot) so never takes a slot, and is closed by the handshake
/// deadline or the pre-handshake ceiling.
async fn client_hello(tcp: &TcpStream) -> io::Result<()> {
    loop {
        // Not a bare `readable()`, which may wake without data (tokio says so): `try_io` checks,
        // and clears the readiness when there is not enough yet.
        if tcp.ready(Interest::READABLE).await?.is_read_closed() {
            return Ok(());
        }
        match tcp.try_io(Interest::READABLE, || first_record_arrived(tcp)) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            done => return done,
        }
    }
}

/// `Ok` when the first record is all in the socket's receive queue (or never will be: see
/// [`client_hello`]), `WouldBlock` while more of it is due. Peeks, never reads.
fn first_record_arrived(tcp: &TcpStream) -> io::Result<()> {
    use rustix::net::{RecvFlags, recv};
    let mut header = [0u8; RECORD_HEADER];
    let (seen, _) = recv(tcp, &mut header, RecvFlags::PEEK | RecvFlags::DONTWAIT)?;
    if seen == 0 || header[0] != HANDSHAKE {
        return Ok(()); // the end, or not TLS: rustls says so
    }
    if seen < RECORD_HEADER {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let length = usize::from(u16::from_be_bytes([header[3], header[4]]));
    if length > MAX_RECORD {
        return Ok(());
    }
    let queued = rustix::io::ioctl_fionread(tcp)?;
    if queued >= (RECORD_HEADER + length) as u64 {
        Ok(())
    } else {
        Err(io::ErrorKind::WouldBlock.into())
    }
}

/// Decrements the open-connections gauge however the connection ends.
struct Open<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A loopback pair: what the client writes is in the server side's receive queue.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    /// Writes `bytes`, waits for them to be queued, and asks whether the first record arrived.
    async fn after(client: &mut TcpStream, server: &TcpStream, bytes: &[u8]) -> bool {
        client.write_all(bytes).await.unwrap();
        client.flush().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), client_hello(server))
            .await
            .is_ok()
    }

    /// Still waiting for more after 200 ms.
    async fn waiting(server: &TcpStream) -> bool {
        tokio::time::timeout(Duration::from_millis(200), client_hello(server))
            .await
            .is_err()
    }

    #[tokio::test]
    async fn a_handshake_record_is_waited_for_until_whole() {
        let (mut client, server) = pair().await;
        assert!(waiting(&server).await, "nothing sent yet");
        client.write_all(b"\x16\x03").await.unwrap();
        assert!(waiting(&server).await, "part of a header");
        // A header announcing 4 bytes, and 2 of them.
        client.write_all(b"\x01\x00\x04\x01\x00").await.unwrap();
        assert!(waiting(&server).await, "2 of 4 bytes");
        assert!(after(&mut client, &server, b"\x00\x00").await, "all 4");
    }

    #[tokio::test]
    async fn what_is_not_a_client_hello_goes_to_rustls_at_once() {
        let (mut client, server) = pair().await;
        assert!(after(&mut client, &server, b"GET / HTTP/1.1\r\n").await);
        let (mut client, server) = pair().await;
        // A length no record has.
        assert!(after(&mut client, &server, b"\x16\x03\x01\xff\xff").await);
        let (mut client, server) = pair().await;
        // Part of a record, then the end.
        client.write_all(b"\x16\x03\x01\x02\x00\x01").await.unwrap();
        drop(client.shutdown().await);
        assert!(
            tokio::time::timeout(Duration::from_secs(5), client_hello(&server))
                .await
                .is_ok()
        );
    }
}
