use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use memcached_webhook::config::Config;
use memcached_webhook::server::{self, Listeners};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub const MUTATE: &str = "/mutate-memcached-c5c3-io-v1beta1-memcached";

/// A server running in this process on 127.0.0.1 ports chosen by the kernel.
pub struct TestServer {
    pub webhook: SocketAddr,
    pub health: SocketAddr,
    pub metrics: Option<SocketAddr>,
    pub ca_pem: String,
    /// The certificate directory (tls.crt, tls.key), removed when the server is dropped.
    pub _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), server::Error>>,
}

pub async fn start() -> TestServer {
    start_with(|_| {}).await
}

pub async fn start_with(configure: impl FnOnce(&mut Config)) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, cert_pem, key_pem) = memcached_webhook::dev::generate().unwrap();
    std::fs::write(dir.path().join("tls.crt"), cert_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), key_pem).unwrap();
    let server = start_in(dir, ca_pem, configure).await;
    server.ready().await;
    server
}

/// Starts a server on certificates in `dir` (which may hold none yet), trusting `ca_pem`.
pub async fn start_in(
    dir: tempfile::TempDir,
    ca_pem: String,
    configure: impl FnOnce(&mut Config),
) -> TestServer {
    let mut config = Config::defaults();
    config.cert_dir = dir.path().into();
    config.webhook_bind_address = "127.0.0.1:0".parse().unwrap();
    config.health_probe_bind_address = "127.0.0.1:0".parse().unwrap();
    config.metrics_bind_address = Some("127.0.0.1:0".parse().unwrap());
    // Plain HTTP, scraped without a token; tests/metrics.rs turns it on to test it.
    config.metrics_secure = Some(false);
    // The shutdown leaves an idle keep-alive to its client until the grace period ends (the
    // close policy); a test's client may outlive its server's task, so the test would wait the
    // default 30 s at its end. tests/shutdown.rs sets its own.
    config.shutdown_grace_period = Duration::from_secs(1);
    configure(&mut config);
    let listeners = Listeners::bind(&config).await.unwrap();
    let (webhook, health, metrics) = (
        listeners.webhook_addr(),
        listeners.health_addr(),
        listeners.metrics_addr(),
    );
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(server::run(config, listeners, async {
        let _ = stopped.await;
    }));
    let server = TestServer {
        webhook,
        health,
        metrics,
        ca_pem,
        _dir: dir,
        stop: Some(stop),
        task,
    };
    // Alive (not necessarily ready: there may be no certificate yet).
    eventually(Duration::from_secs(5), || async {
        server.probe("/healthz").await.0 == 200
    })
    .await;
    server
}

impl TestServer {
    /// Signals shutdown (as SIGTERM would) and waits for `run` to return.
    pub async fn stop(mut self) -> Result<(), server::Error> {
        self.signal_stop();
        self.task.await.unwrap()
    }

    pub fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    pub async fn join(self) -> Result<(), server::Error> {
        self.task.await.unwrap()
    }

    /// GET on the plain-HTTP probe port: (status, body).
    pub async fn probe(&self, path: &str) -> (u16, String) {
        get(self.health, path).await
    }

    /// Waits until `/readyz` answers 200.
    pub async fn ready(&self) {
        eventually(Duration::from_secs(5), || async {
            self.probe("/readyz").await.0 == 200
        })
        .await;
    }

    /// The metrics port's text.
    pub async fn scrape(&self) -> String {
        let (status, text) = get(self.metrics.expect("metrics on"), "/metrics").await;
        assert_eq!(status, 200);
        text
    }
}

impl TestServer {
    /// A TLS connection to the webhook port offering `alpn`.
    pub async fn tls(&self, alpn: &[&[u8]]) -> std::io::Result<TlsStream<TcpStream>> {
        self.tls_as(alpn, None, None).await
    }

    /// [`TestServer::tls`] with a client certificate and a TLS version choice.
    pub async fn tls_as(
        &self,
        alpn: &[&[u8]],
        client_cert: Option<(String, String)>,
        versions: Option<&[&'static rustls::SupportedProtocolVersion]>,
    ) -> std::io::Result<TlsStream<TcpStream>> {
        connect(self.webhook, &self.ca_pem, alpn, client_cert, versions).await
    }

    /// An HTTP/1.1 keep-alive client over TLS.
    pub async fn client(&self) -> Client {
        client_over(self.tls(&[b"http/1.1"]).await.unwrap()).await
    }
}

/// A well-behaved client is answered: a new HTTP/1.1 connection posts the typical review.
pub async fn still_serving(server: &TestServer) {
    still_serving_at(server.webhook, &server.ca_pem).await;
}

/// [`still_serving`] for a server at `addr` whose certificate `ca_pem` signed.
pub async fn still_serving_at(addr: SocketAddr, ca_pem: &str) {
    let tls = connect(addr, ca_pem, &[b"http/1.1"], None, None)
        .await
        .unwrap();
    let mut client = client_over(tls).await;
    let (status, _) = client
        .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// A TLS connection to a webhook port at `addr` whose certificate `ca_pem` signed.
pub async fn connect(
    addr: SocketAddr,
    ca_pem: &str,
    alpn: &[&[u8]],
    client_cert: Option<(String, String)>,
    versions: Option<&[&'static rustls::SupportedProtocolVersion]>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let config = tls_config(ca_pem, alpn, client_cert, versions);
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// What [`connect`] connects with: trusting only `ca_pem`, offering `alpn`.
pub fn tls_config(
    ca_pem: &str,
    alpn: &[&[u8]],
    client_cert: Option<(String, String)>,
    versions: Option<&[&'static rustls::SupportedProtocolVersion]>,
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(memcached_webhook::tls::provider())
        .with_protocol_versions(versions.unwrap_or(rustls::DEFAULT_VERSIONS))
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .map(Result::unwrap)
                .collect();
            let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

/// An HTTP/1.1 keep-alive client over a TLS connection.
pub async fn client_over(tls: TlsStream<TcpStream>) -> Client {
    let (sender, conn) = http1::handshake(TokioIo::new(tls)).await.unwrap();
    tokio::spawn(conn);
    Client { sender }
}

pub struct Client {
    pub sender: http1::SendRequest<Full<Bytes>>,
}

impl Client {
    /// POSTs `body` as JSON; returns (status, body).
    pub async fn post(&mut self, path: &str, body: impl Into<Bytes>) -> (StatusCode, Bytes) {
        let req = Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.into()))
            .unwrap();
        self.send(req).await
    }

    pub async fn send(&mut self, req: Request<Full<Bytes>>) -> (StatusCode, Bytes) {
        let resp = self
            .sender
            .send_request(req)
            .await
            .expect("the server answers");
        let status = resp.status();
        (status, resp.into_body().collect().await.unwrap().to_bytes())
    }
}

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

pub fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// The decoded JSON Patch of an AdmissionReview response.
pub fn patch_of(response: &serde_json::Value) -> serde_json::Value {
    use base64::Engine as _;
    let b64 = response["response"]["patch"].as_str().expect("a patch");
    json(
        &base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap(),
    )
}

/// Polls `check` until it holds, failing the test after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A request body sent chunked (no Content-Length), one frame per element.
pub struct Chunks(pub std::vec::IntoIter<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.next().map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

/// A plain-HTTP GET: (status, body); status 0 when nothing answers.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    {
        let Ok(tcp) = TcpStream::connect(addr).await else {
            return (0, String::new());
        };
        let (mut sender, conn) = http1::handshake(TokioIo::new(tcp)).await.unwrap();
        tokio::spawn(conn);
        let req = Request::get(path)
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let Ok(resp) = sender.send_request(req).await else {
            return (0, String::new());
        };
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }
}
