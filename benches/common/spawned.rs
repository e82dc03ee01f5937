//! The real binary as a child process on ephemeral loopback ports, for measurements that need
//! its own /proc figures (peak RSS): shared by `benches/memory.rs` and `tests/memory.rs`.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub const MUTATE: &str = "/mutate-memcached-c5c3-io-v1beta1-memcached";

/// A running server; killed when dropped.
pub struct Spawned {
    child: Child,
    pub webhook: SocketAddr,
    pub health: SocketAddr,
    /// `None` for builds that do not log it.
    pub metrics: Option<SocketAddr>,
    pub tls: TlsConnector,
    _dir: tempfile::TempDir,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Spawned {
    /// Starts `binary` with fresh development certificates, `args` and `env` (besides this
    /// process's environment), learns its addresses from its JSON startup log lines, and waits
    /// until /readyz answers 200.
    pub async fn start(binary: &str, args: &[&str], env: &[(&str, &str)]) -> Spawned {
        let dir = tempfile::tempdir().unwrap();
        let (ca_pem, cert, key) = memcached_webhook::dev::generate().unwrap();
        std::fs::write(dir.path().join("tls.crt"), cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), key).unwrap();
        let mut child = Command::new(binary)
            .args(["--cert-dir", dir.path().to_str().unwrap()])
            .args(memcached_webhook::dev::LOOPBACK_ARGS)
            .args(args)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        let (mut webhook, mut health, mut metrics) = (None, None, None);
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        while webhook.is_none() {
            let line = lines
                .next()
                .expect("the server logs its addresses before serving")
                .unwrap();
            let Ok(log) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            // Display fields are strings; the optional metrics address is Debug: `Some(addr)`.
            let addr = |key: &str| {
                let text = log[key].as_str()?;
                let text = text
                    .strip_prefix("Some(")
                    .map_or(text, |t| t.trim_end_matches(')'));
                text.parse::<SocketAddr>().ok()
            };
            webhook = webhook.or(addr("webhook"));
            health = health.or(addr("health"));
            metrics = metrics.or(addr("metrics"));
        }
        // Keep draining stderr so a full pipe never blocks the server's log writer.
        std::thread::spawn(move || lines.for_each(drop));
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut config =
            rustls::ClientConfig::builder_with_provider(memcached_webhook::tls::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let server = Spawned {
            child,
            webhook: webhook.unwrap(),
            health: health.expect("the health address is logged before serving"),
            metrics,
            tls: TlsConnector::from(Arc::new(config)),
            _dir: dir,
        };
        for _ in 0..500 {
            if get(server.health, "/readyz").await.0 == 200 {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("{binary} did not become ready in 10 s");
    }

    /// A field of /proc/<pid>/status in bytes (VmRSS: now; VmHWM: the peak so far).
    pub fn status_bytes(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server is running");
        let kib: u64 = status
            .lines()
            .find_map(|l| {
                l.strip_prefix(field)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/status"));
        kib * 1024
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub async fn connect(&self) -> std::io::Result<TlsStream<TcpStream>> {
        self.connect_from(None).await
    }

    /// A TCP connection to the webhook port from the address `from` (any 127.0.0.0/8 address
    /// is this host's), or from the kernel's choice.
    pub async fn tcp(&self, from: Option<IpAddr>) -> std::io::Result<TcpStream> {
        let Some(from) = from else {
            return TcpStream::connect(self.webhook).await;
        };
        let socket = match from {
            IpAddr::V4(_) => TcpSocket::new_v4()?,
            IpAddr::V6(_) => TcpSocket::new_v6()?,
        };
        socket.bind(SocketAddr::new(from, 0))?;
        socket.connect(self.webhook).await
    }

    /// [`Spawned::connect`] from the address `from`.
    pub async fn connect_from(
        &self,
        from: Option<IpAddr>,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = self.tcp(from).await?;
        let _ = tcp.set_nodelay(true);
        self.tls
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
    }

    /// The metrics text, or "" when the address is unknown.
    pub async fn scrape(&self) -> String {
        match self.metrics {
            Some(addr) => get(addr, "/metrics").await.1,
            None => String::new(),
        }
    }
}

/// The head of a `POST` to the mutating webhook declaring `length` body bytes.
pub fn head(length: usize) -> String {
    format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// Sends a whole request over `tls`, `body` in 64 KiB writes with `pause` after each, and
/// returns the response's status code: 0 when the connection ended without one (cut off
/// after a refusal, or never connected).
pub async fn post(tls: std::io::Result<TlsStream<TcpStream>>, body: &[u8], pause: Duration) -> u16 {
    let Ok(mut tls) = tls else {
        return 0;
    };
    if tls.write_all(head(body.len()).as_bytes()).await.is_err() {
        return 0;
    }
    for chunk in body.chunks(64 * 1024) {
        // Flushed each time: tokio-rustls may keep written bytes in its buffer until then.
        if tls.write_all(chunk).await.is_err() || tls.flush().await.is_err() {
            break;
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    status_code(&answer)
}

/// The code in an HTTP/1.1 status line, 0 when there is none.
pub fn status_code(response: &[u8]) -> u16 {
    response
        .strip_prefix(b"HTTP/1.1 ")
        .and_then(|rest| std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok())
        .unwrap_or(0)
}

/// A plain-HTTP GET: (status, body); status 0 when nothing answers.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut tcp) = TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let mut response = Vec::new();
    if tcp.write_all(request.as_bytes()).await.is_err()
        || tcp.read_to_end(&mut response).await.is_err()
    {
        return (0, String::new());
    }
    let text = String::from_utf8_lossy(&response);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status_code(&response), body.to_owned())
}

/// A sample's value from the text exposition (the first line named exactly `name`), if any.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}
