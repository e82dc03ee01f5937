//! A Service as kube-proxy makes one, on loopback: each new TCP connection goes to one endpoint
//! of the ready set (round robin, as IPVS does) and stays on it until either side closes; an
//! endpoint that leaves the set keeps its established connections (conntrack) and gets no new
//! ones. A connection that finds no endpoint, or one that refuses it, is closed at once: what
//! the client of a DNAT to a dead pod sees. A pod's reset (RST) reaches the client as one, as
//! through a DNAT; its end (FIN) as an end. A pod sees the client's own address, as a DNAT
//! keeps it (the balancer dials from it: any 127.0.0.0/8 address is this host's).
//!
//! Two front ports share the endpoints: `addr` for the API server, whose connections are
//! watched (`Watch`: which of them a pod closed first, and whether a request was written into
//! one after that close), and `flood_addr` for the flood, so that the two are told apart.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

pub struct Balancer {
    pub addr: SocketAddr,
    pub flood_addr: SocketAddr,
    endpoints: Arc<Mutex<Vec<SocketAddr>>>,
    pub watch: Arc<Watch>,
    accepting: Vec<JoinHandle<()>>,
}

/// What the API server's connections met: each one a pod closed while the API server had it,
/// as the balancer saw it.
#[derive(Default)]
pub struct Watch {
    pub closed_by_pod: Mutex<Vec<Closed>>,
    /// When a dial of the API server's found no pod, or its pod refused it.
    pub no_pod: Mutex<Vec<Instant>>,
}

/// An API server connection its pod closed first (its FIN, or a reset, reached the balancer
/// before the API server's).
#[derive(Clone)]
pub struct Closed {
    pub at: Instant,
    /// From its dial to the pod's close.
    pub age: Duration,
    /// Reads from the API server, and from the pod, before the close: a TLS 1.3 handshake is
    /// two from the client (ClientHello, Finished) and one or two from the server.
    pub client_reads: u32,
    pub server_reads: u32,
    /// Since the API server's last bytes before the close.
    pub quiet: Duration,
    /// The API server's bytes before the close, and those of its last read.
    pub client_bytes: u64,
    pub last_read: u64,
    /// The pod reset it (RST) rather than ended it (FIN).
    pub reset: bool,
    /// Bytes the API server wrote after the close: a request that met it.
    pub written_after: u64,
}

impl Closed {
    /// No request ever went through it: at most the handshake.
    pub fn never_used(&self) -> bool {
        self.client_reads <= 2
    }

    /// Its client wrote more than a TLS close_notify alert (24 bytes with TLS 1.3's AEADs,
    /// at most 31 with TLS 1.2's) after the close: a request.
    pub fn met_a_request(&self) -> bool {
        self.written_after > 31
    }
}

impl Watch {
    /// Per phase (named, from when it began): the API server's connections its pod closed, how
    /// many of them had never carried a request, and each one written into after its close
    /// (a request that met the close).
    pub fn by_phase(&self, phases: &[(String, Instant)]) -> String {
        let closed = self.closed_by_pod.lock().unwrap().clone();
        let mut lines = vec!["API server connections a pod closed first:".to_owned()];
        for (i, (name, from)) in phases.iter().enumerate() {
            let to = phases.get(i + 1).map(|(_, at)| *at);
            let here: Vec<&Closed> = closed
                .iter()
                .filter(|c| c.at >= *from && to.is_none_or(|to| c.at < to))
                .collect();
            let never = here.iter().filter(|c| c.never_used()).count();
            let met: Vec<String> = here
                .iter()
                .filter(|c| c.met_a_request())
                .map(|c| c.to_string())
                .collect();
            let handshakes = here.iter().filter(|c| c.server_reads == 0).count();
            lines.push(format!(
                "  {name}: {} closed ({never} never used, {handshakes} before the server's \
                 handshake flight), {} written into after the close {met:?}",
                here.len(),
                met.len()
            ));
        }
        lines.join("\n")
    }

    /// What the balancer saw while each failed write (its start and end) was on its way: the
    /// pods' closes of the API server's connections and its dials that found no pod.
    pub fn around(&self, failed: &[(Instant, Instant)]) -> String {
        let closed = self.closed_by_pod.lock().unwrap().clone();
        let no_pod = self.no_pod.lock().unwrap().clone();
        let mut lines = vec![format!(
            "failed writes: {}; dials that found no pod: {}",
            failed.len(),
            no_pod.len()
        )];
        for (start, end) in failed {
            let during = |at: &Instant| at >= start && at <= end;
            let closes: Vec<String> = closed
                .iter()
                .filter(|c| during(&c.at))
                .map(|c| format!("{c} ({:?} into the write)", c.at - *start))
                .collect();
            let refused = no_pod.iter().filter(|at| during(at)).count();
            lines.push(format!(
                "  a write of {:?}: {refused} dials found no pod; closes {closes:?}",
                *end - *start
            ));
        }
        lines.join("\n")
    }
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{} reads in ({} bytes, last {}), {} out, {:?} old, quiet {:?}, {} bytes after",
            if self.reset { "reset: " } else { "" },
            self.client_reads,
            self.client_bytes,
            self.last_read,
            self.server_reads,
            self.age,
            self.quiet,
            self.written_after
        )
    }
}

impl Balancer {
    /// Listens on two ephemeral loopback ports, with no endpoint yet.
    pub fn start(runtime: &Handle) -> Balancer {
        let endpoints = Arc::new(Mutex::new(Vec::<SocketAddr>::new()));
        let watch = Arc::new(Watch::default());
        let next = Arc::new(AtomicUsize::new(0));
        let mut accepting = Vec::new();
        let mut listen = |watched: Option<Arc<Watch>>| {
            let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
            let addr = listener.local_addr().unwrap();
            let (set, next) = (endpoints.clone(), next.clone());
            accepting.push(runtime.spawn(async move {
                loop {
                    let Ok((client, peer)) = listener.accept().await else {
                        continue;
                    };
                    let endpoint = {
                        let set = set.lock().unwrap();
                        (!set.is_empty())
                            .then(|| set[next.fetch_add(1, Ordering::Relaxed) % set.len()])
                    };
                    let route = (peer.ip(), endpoint);
                    tokio::spawn(forward(client, route, watched.clone()));
                }
            }));
            addr
        };
        let addr = listen(Some(watch.clone()));
        let flood_addr = listen(None);
        Balancer {
            addr,
            flood_addr,
            endpoints,
            watch,
            accepting,
        }
    }

    /// The endpoint turned ready: new connections may go to it.
    pub fn add(&self, endpoint: SocketAddr) {
        self.endpoints.lock().unwrap().push(endpoint);
    }

    /// The endpoint left the set: no new connections; established ones stay.
    pub fn remove(&self, endpoint: SocketAddr) {
        self.endpoints.lock().unwrap().retain(|e| *e != endpoint);
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        for task in &self.accepting {
            task.abort();
        }
    }
}

/// Relays one connection from its client's address to its endpoint (`route`), each side's end
/// (FIN) passed on to the other; a watched one is relayed by [`watched`].
async fn forward(
    mut client: TcpStream,
    route: (IpAddr, Option<SocketAddr>),
    watch: Option<Arc<Watch>>,
) {
    let backend = match route {
        (from, Some(endpoint)) => dial(from, endpoint).await.ok(),
        (_, None) => None,
    };
    let Some(mut backend) = backend else {
        if let Some(watch) = watch {
            watch.no_pod.lock().unwrap().push(Instant::now());
        }
        return;
    };
    let _ = (client.set_nodelay(true), backend.set_nodelay(true));
    match watch {
        Some(watch) => watched(client, backend, &watch).await,
        None => {
            if tokio::io::copy_bidirectional(&mut client, &mut backend)
                .await
                .is_err()
            {
                let _ = client.set_zero_linger();
            }
        }
    }
}

/// A connection to `to` from the address `from`.
pub async fn dial(from: IpAddr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = match from {
        IpAddr::V4(_) => TcpSocket::new_v4()?,
        IpAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.bind(SocketAddr::new(from, 0))?;
    socket.connect(to).await
}

/// What a watched connection's two directions share.
struct Seen {
    dialed: Instant,
    client_reads: u32,
    server_reads: u32,
    last_client: Instant,
    client_bytes: u64,
    last_read: u64,
    /// Set when the pod's side ended first.
    closed: Option<Closed>,
    client_ended: bool,
}

/// Relays as [`forward`] does, noting when the pod's side ends first and what the client
/// writes after that.
async fn watched(client: TcpStream, backend: TcpStream, watch: &Watch) {
    let now = Instant::now();
    let seen = Mutex::new(Seen {
        dialed: now,
        client_reads: 0,
        server_reads: 0,
        last_client: now,
        client_bytes: 0,
        last_read: 0,
        closed: None,
        client_ended: false,
    });
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut backend_rx, mut backend_tx) = backend.into_split();
    let reset = tokio::sync::Notify::new();
    let upstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = tokio::select! {
                n = client_rx.read(&mut buf) => n.unwrap_or(0),
                // The pod reset it: so is the client's side, once this half is dropped too.
                () = reset.notified() => return,
            };
            if !from_client(&seen, n) {
                break;
            }
            // Once the pod is gone, keep reading: what the client still writes is counted.
            let _ = backend_tx.write_all(&buf[..n]).await;
        }
        let _ = backend_tx.shutdown().await;
    };
    let downstream = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let read = backend_rx.read(&mut buf).await;
            if read
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset)
            {
                // Passed on as a reset, as a DNAT passes the pod's RST: no FIN first.
                from_pod(&seen, 0, true);
                let _ = client_tx.as_ref().set_zero_linger();
                client_tx.forget();
                reset.notify_one();
                return;
            }
            let n = read.unwrap_or(0);
            if !from_pod(&seen, n, false) || client_tx.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = client_tx.shutdown().await;
    };
    tokio::join!(upstream, downstream);
    if let Some(closed) = seen.into_inner().unwrap().closed {
        watch.closed_by_pod.lock().unwrap().push(closed);
    }
}

/// `n` bytes (0: the end) from the client; false at the end.
fn from_client(seen: &Mutex<Seen>, n: usize) -> bool {
    let mut s = seen.lock().unwrap();
    if n == 0 {
        s.client_ended = true;
        return false;
    }
    match &mut s.closed {
        Some(closed) => closed.written_after += n as u64,
        None => {
            s.client_reads += 1;
            s.last_client = Instant::now();
            s.client_bytes += n as u64;
            s.last_read = n as u64;
        }
    }
    true
}

/// `n` bytes (0: the end) from the pod; false at the end, noted as the pod's close when the
/// client had not ended first.
fn from_pod(seen: &Mutex<Seen>, n: usize, reset: bool) -> bool {
    let mut s = seen.lock().unwrap();
    if n > 0 {
        s.server_reads += 1;
        return true;
    }
    if !s.client_ended {
        let at = Instant::now();
        s.closed = Some(Closed {
            at,
            age: at - s.dialed,
            client_reads: s.client_reads,
            server_reads: s.server_reads,
            quiet: at - s.last_client,
            client_bytes: s.client_bytes,
            last_read: s.last_read,
            reset,
            written_after: 0,
        });
    }
    false
}
