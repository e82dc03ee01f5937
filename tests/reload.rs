use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hyper::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, pem::PemObject};

use crate::util::{self, MUTATE, TestServer, eventually, fixture};

/// A test CA that signs serving certificates for localhost, each with a new key.
struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new() -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_pem = params.self_signed(&key).unwrap().pem();
        Pki {
            ca_pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// (chain PEM, key PEM)
    fn leaf(&self) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// Lays out a Secret volume as the kubelet's AtomicWriter does and swaps it the same way.
struct SecretVolume {
    dir: PathBuf,
    generation: usize,
}

impl SecretVolume {
    fn new(dir: &Path, cert: &str, key: &str) -> Self {
        let mut volume = SecretVolume {
            dir: dir.into(),
            generation: 0,
        };
        volume.update(&[
            ("tls.crt", cert.as_bytes()),
            ("tls.key", key.as_bytes()),
            ("ca.crt", b"ca"),
        ]);
        for name in ["tls.crt", "tls.key", "ca.crt"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
        volume
    }

    /// New timestamped directory, `..data_tmp` symlink, rename over `..data`, remove the old one.
    fn update(&mut self, files: &[(&str, &[u8])]) {
        self.generation += 1;
        let new = format!("..2026_12_02_10_00_00.{}", self.generation);
        std::fs::create_dir(self.dir.join(&new)).unwrap();
        for (name, bytes) in files {
            std::fs::write(self.dir.join(&new).join(name), bytes).unwrap();
        }
        std::os::unix::fs::symlink(&new, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        if self.generation > 1 {
            // Already gone when a test removed the volume.
            let _ = std::fs::remove_dir_all(
                self.dir
                    .join(format!("..2026_12_02_10_00_00.{}", self.generation - 1)),
            );
        }
    }

    fn rotate(&mut self, cert: &str, key: &str) {
        self.update(&[
            ("tls.crt", cert.as_bytes()),
            ("tls.key", key.as_bytes()),
            ("ca.crt", b"ca"),
        ]);
    }
}

/// The leaf certificate a fresh handshake is served.
async fn served(server: &TestServer) -> Option<Vec<u8>> {
    let tls = server.tls(&[b"http/1.1"]).await.ok()?;
    Some(tls.get_ref().1.peer_certificates()?.first()?.to_vec())
}

async fn start_without_certificates(
    pki: &Pki,
    configure: impl FnOnce(&mut memcached_webhook::config::Config),
) -> (TestServer, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let server = util::start_in(dir, pki.ca_pem.clone(), configure).await;
    (server, path)
}

/// The file watch, not the periodic check, must pick changes up: the check is an hour apart.
fn watch_only(c: &mut memcached_webhook::config::Config) {
    c.cert_check_interval = Duration::from_secs(3600);
}

#[tokio::test]
async fn a_kubelet_symlink_swap_is_served_at_once_and_open_connections_keep_working() {
    let pki = Pki::new();
    let (cert1, key1) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    let mut volume = SecretVolume::new(dir.path(), &cert1, &key1);
    let server = util::start_in(dir, pki.ca_pem.clone(), watch_only).await;
    server.ready().await;
    assert_eq!(served(&server).await, Some(der(&cert1)));
    let mut before = server.client().await;

    let (cert2, key2) = pki.leaf();
    volume.rotate(&cert2, &key2);
    eventually(Duration::from_secs(2), || async {
        served(&server).await == Some(der(&cert2))
    })
    .await;

    let (status, _) = before
        .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a connection opened before the swap still works"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn rotations_under_load_lose_no_request() {
    let pki = Pki::new();
    let (cert, key) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    let mut volume = SecretVolume::new(dir.path(), &cert, &key);
    let server = Arc::new(util::start_in(dir, pki.ca_pem.clone(), watch_only).await);
    server.ready().await;

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut clients = Vec::new();
    for worker in 0..3 {
        let (server, stop, ok, failed) = (server.clone(), stop.clone(), ok.clone(), failed.clone());
        clients.push(tokio::spawn(async move {
            let body = fixture("mutate-create-kubectl-apply.json");
            let mut requests = 0usize;
            while !stop.load(Ordering::Relaxed) {
                // Worker 0 keeps one connection; the others reconnect often, handshaking anew.
                let Ok(tls) = server.tls(&[b"http/1.1"]).await else {
                    failed.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let (mut sender, conn) =
                    hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                        .await
                        .unwrap();
                tokio::spawn(conn);
                loop {
                    let mut client = util::Client { sender };
                    let (status, _) = client.post(MUTATE, body.clone()).await;
                    if status == StatusCode::OK {
                        ok.fetch_add(1, Ordering::Relaxed)
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed)
                    };
                    sender = client.sender;
                    requests += 1;
                    if stop.load(Ordering::Relaxed) || (worker > 0 && requests.is_multiple_of(5)) {
                        break;
                    }
                }
            }
        }));
    }
    for _ in 0..8 {
        let (cert, key) = pki.leaf();
        volume.rotate(&cert, &key);
        eventually(Duration::from_secs(2), || async {
            served(&server).await == Some(der(&cert))
        })
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "failed requests during rotation"
    );
    assert!(
        ok.load(Ordering::Relaxed) > 50,
        "the load was too light to mean anything"
    );
}

#[tokio::test]
async fn bad_rotations_keep_the_old_certificate_and_a_later_good_one_is_taken() {
    let pki = Pki::new();
    let (cert1, key1) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let mut volume = SecretVolume::new(&path, &cert1, &key1);
    let server = util::start_in(dir, pki.ca_pem.clone(), |c| {
        c.cert_check_interval = Duration::from_millis(100)
    })
    .await;
    server.ready().await;

    let (other_cert, _) = pki.leaf();
    let truncated = &cert1[..cert1.len() / 2];
    let bad: [(&str, &[u8], &[u8]); 4] = [
        (
            "garbage PEM",
            b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
            key1.as_bytes(),
        ),
        (
            "truncated certificate",
            truncated.as_bytes(),
            key1.as_bytes(),
        ),
        (
            "key of another certificate",
            other_cert.as_bytes(),
            key1.as_bytes(),
        ),
        ("empty files", b"", b""),
    ];
    for (what, cert, key) in bad {
        volume.update(&[("tls.crt", cert), ("tls.key", key)]);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(served(&server).await, Some(der(&cert1)), "after {what}");
        assert_eq!(
            server.probe("/readyz").await.0,
            200,
            "still ready after {what}"
        );
    }
    // The whole volume disappears.
    std::fs::remove_dir_all(path.join("..data").canonicalize().unwrap()).unwrap();
    std::fs::remove_file(path.join("..data")).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        served(&server).await,
        Some(der(&cert1)),
        "after the directory was removed"
    );

    let (cert2, key2) = pki.leaf();
    volume.rotate(&cert2, &key2);
    eventually(Duration::from_secs(2), || async {
        served(&server).await == Some(der(&cert2))
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn plain_writes_copies_and_renames_are_picked_up_too() {
    let pki = Pki::new();
    let (cert1, key1) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    std::fs::write(path.join("tls.crt"), &cert1).unwrap();
    std::fs::write(path.join("tls.key"), &key1).unwrap();
    let server = util::start_in(dir, pki.ca_pem.clone(), watch_only).await;
    server.ready().await;

    // In-place writes (key first, then certificate: a straddled read in between).
    let (cert2, key2) = pki.leaf();
    std::fs::write(path.join("tls.key"), &key2).unwrap();
    std::fs::write(path.join("tls.crt"), &cert2).unwrap();
    eventually(Duration::from_secs(2), || async {
        served(&server).await == Some(der(&cert2))
    })
    .await;

    // `mv` of files written elsewhere in the directory.
    let (cert3, key3) = pki.leaf();
    std::fs::write(path.join("new.crt"), &cert3).unwrap();
    std::fs::write(path.join("new.key"), &key3).unwrap();
    std::fs::rename(path.join("new.key"), path.join("tls.key")).unwrap();
    std::fs::rename(path.join("new.crt"), path.join("tls.crt")).unwrap();
    eventually(Duration::from_secs(2), || async {
        served(&server).await == Some(der(&cert3))
    })
    .await;

    // Deleted, then re-created.
    let (cert4, key4) = pki.leaf();
    std::fs::remove_file(path.join("tls.crt")).unwrap();
    std::fs::remove_file(path.join("tls.key")).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        served(&server).await,
        Some(der(&cert3)),
        "old certificate served while the files are gone"
    );
    std::fs::write(path.join("tls.key"), &key4).unwrap();
    std::fs::write(path.join("tls.crt"), &cert4).unwrap();
    eventually(Duration::from_secs(2), || async {
        served(&server).await == Some(der(&cert4))
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn without_a_certificate_the_server_waits_not_ready_then_serves() {
    let pki = Pki::new();
    let (server, dir) = start_without_certificates(&pki, |c| {
        c.cert_dir = c.cert_dir.join("not-there-yet");
        c.cert_check_interval = Duration::from_millis(100);
    })
    .await;
    let (status, text) = server.probe("/readyz").await;
    assert_eq!(
        (status, text.trim()),
        (503, "not ready: no valid serving certificate loaded yet")
    );
    assert_eq!(server.probe("/healthz").await.0, 200);
    assert!(
        served(&server).await.is_none(),
        "no handshake succeeds without a certificate"
    );

    let certs = dir.join("not-there-yet");
    std::fs::create_dir(&certs).unwrap();
    let (cert, key) = pki.leaf();
    std::fs::write(certs.join("tls.key"), &key).unwrap();
    std::fs::write(certs.join("tls.crt"), &cert).unwrap();
    eventually(Duration::from_secs(3), || async {
        server.probe("/readyz").await.0 == 200
    })
    .await;
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_expired_certificate_is_refused() {
    let pki = Pki::new();
    let (cert1, key1) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let mut volume = SecretVolume::new(&path, &cert1, &key1);
    let server = util::start_in(dir, pki.ca_pem.clone(), watch_only).await;
    server.ready().await;

    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let expired = params.signed_by(&key, &pki.issuer).unwrap();
    volume.rotate(&expired.pem(), &key.serialize_pem());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(served(&server).await, Some(der(&cert1)));
    server.stop().await.unwrap();
}

#[tokio::test]
async fn client_certificates_are_required_with_a_client_ca() {
    let pki = Pki::new();
    let clients = Pki::new();
    let (cert, key) = pki.leaf();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), &key).unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &clients.ca_pem).unwrap();
    let server = util::start_in(dir, pki.ca_pem.clone(), |c| {
        c.client_ca_file = Some(ca_file)
    })
    .await;
    server.ready().await;

    assert!(
        !answers(&server, None).await,
        "a client without a certificate is refused"
    );
    assert!(
        !answers(&server, Some(Pki::new().leaf())).await,
        "a certificate from another CA is refused"
    );
    assert!(
        answers(&server, Some(clients.leaf())).await,
        "a certificate from the client CA is accepted"
    );
    server.stop().await.unwrap();
}

/// Whether a request on a fresh connection with `client_cert` gets an HTTP answer. TLS 1.3
/// reports a refused client certificate after the handshake, so this reads a response.
async fn answers(server: &TestServer, client_cert: Option<(String, String)>) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut tls) = server.tls_as(&[b"http/1.1"], client_cert, None).await else {
        return false;
    };
    if tls
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 8];
    tls.read_exact(&mut buf).await.is_ok() && &buf == b"HTTP/1.1"
}

#[tokio::test]
async fn tls_min_version_1_3_refuses_tls_1_2_clients() {
    let server =
        util::start_with(|c| c.tls_min_version = memcached_webhook::config::TlsVersion::V1_3).await;
    assert!(
        server
            .tls_as(&[b"http/1.1"], None, Some(&[&rustls::version::TLS12]))
            .await
            .is_err()
    );
    assert!(
        server
            .tls_as(&[b"http/1.1"], None, Some(&[&rustls::version::TLS13]))
            .await
            .is_ok()
    );
    server.stop().await.unwrap();

    let server = util::start().await;
    assert!(
        server
            .tls_as(&[b"http/1.1"], None, Some(&[&rustls::version::TLS12]))
            .await
            .is_ok(),
        "1.2 is accepted by default"
    );
    server.stop().await.unwrap();
}
