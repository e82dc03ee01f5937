//! The server under test as users run it: the binary cargo built, on a certificate directory laid
//! out as the kubelet projects a Secret (`..data` symlink to a timestamped directory), and the
//! shipped CRD and webhook configurations installed with only `clientConfig` pointed at it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::{Cluster, dying_with_us};
use crate::pki::Ca;

pub const BINARY: &str = env!("CARGO_BIN_EXE_memcached-webhook");
pub const MUTATE: &str = "/mutate-memcached-c5c3-io-v1beta1-memcached";
pub const VALIDATE: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";
pub const MWC: &str = "memcached-webhook-mutating";
pub const VWC: &str = "memcached-webhook-validating";

/// A file of the repository, by its path from the crate root.
pub fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// Every document of a YAML stream, as JSON values.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// A `v1` List holding `items`: one `kubectl apply -f -` for several objects.
pub fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

/// One running server process.
pub struct Webhook {
    /// Shared by the pods of a roll (`roll.rs`): one `caBundle` for all of them.
    pub ca: Arc<Ca>,
    pub addr: SocketAddr,
    pub metrics: SocketAddr,
    pub certs: tempfile::TempDir,
    child: Child,
    /// The server's last log lines, for failure messages.
    log: Arc<Mutex<Vec<String>>>,
    rotations: u32,
}

impl Webhook {
    /// Starts the binary with `args` on a fresh CA and serving certificate.
    pub fn start(args: &[&str]) -> Webhook {
        let ca = Arc::new(Ca::new("memcached-webhook test CA"));
        Webhook::start_as(Path::new(BINARY), ca, args)
    }

    /// Starts `binary` with `args` on a serving certificate from `ca`.
    pub fn start_as(binary: &Path, ca: Arc<Ca>, args: &[&str]) -> Webhook {
        let certs = tempfile::Builder::new()
            .prefix("webhook-certs-")
            .tempdir()
            .unwrap();
        project(certs.path(), &ca, 0);
        let mut child = dying_with_us(binary)
            .arg(format!("--cert-dir={}", certs.path().display()))
            // Metrics in plain text for the checks; metrics.rs turns --metrics-secure on again.
            .args(memcached_webhook::dev::LOOPBACK_ARGS)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let (mut addr, mut metrics) = (None, None);
        while addr.is_none() || metrics.is_none() {
            let Some(Ok(line)) = lines.next() else {
                let status = child.wait();
                panic!("the server exited ({status:?}) before it logged its addresses");
            };
            let Ok(log) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let field = |key: &str| -> Option<SocketAddr> {
                let text = log[key].as_str().or(log["fields"][key].as_str())?;
                let text = text
                    .strip_prefix("Some(")
                    .map_or(text, |t| t.trim_end_matches(')'));
                text.parse().ok()
            };
            addr = addr.or(field("webhook"));
            metrics = metrics.or(field("metrics"));
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        // Keep draining stderr so a full pipe never blocks the server.
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let mut log = sink.lock().unwrap();
                if log.len() >= 200 {
                    log.remove(0);
                }
                log.push(line);
            }
        });
        Webhook {
            ca,
            addr: addr.unwrap(),
            metrics: metrics.unwrap(),
            certs,
            child,
            log,
            rotations: 0,
        }
    }

    /// The server's last 20 log lines.
    pub fn log_tail(&self) -> String {
        let log = self.log.lock().unwrap();
        log[log.len().saturating_sub(20)..].join("\n")
    }

    /// `clientConfig` for `path` on this server, as the apiserver will call it.
    pub fn client_config(&self, path: &str) -> Value {
        json!({
            "url": format!("https://{}{path}", self.addr),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&self.ca.pem),
        })
    }

    /// The shipped MutatingWebhookConfiguration and ValidatingWebhookConfiguration, with each
    /// webhook's `clientConfig` (and nothing else) pointed at this server.
    pub fn configurations(&self) -> Vec<Value> {
        let mut docs = yaml_documents(&repo_file("manifests/base/webhooks.yaml"));
        for doc in &mut docs {
            for hook in doc["webhooks"].as_array_mut().unwrap() {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .expect("a shipped webhook names its service path")
                    .to_owned();
                hook["clientConfig"] = self.client_config(&path);
            }
        }
        docs
    }

    /// The rotation the kubelet does when the Secret changes: new files in a new timestamped
    /// directory, then `..data` swapped to it in one rename. The CA stays.
    pub fn rotate(&mut self) -> String {
        self.rotations += 1;
        project(self.certs.path(), &self.ca, self.rotations)
    }

    /// A TLS client session to this server as `localhost`, trusting only its test CA (the
    /// webhook port, and the metrics port with `--metrics-secure`).
    pub fn tls_session(&self) -> rustls::ClientConnection {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(self.ca.pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        rustls::ClientConnection::new(
            Arc::new(config),
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
        )
        .unwrap()
    }

    /// The leaf certificate the server presents to a new connection now, PEM-less DER.
    pub fn served_certificate(&self) -> Vec<u8> {
        let mut conn = self.tls_session();
        let mut tcp = TcpStream::connect(self.addr).unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).unwrap();
        }
        conn.peer_certificates().unwrap()[0].to_vec()
    }

    /// This server's `/metrics` text.
    pub fn scrape(&self) -> String {
        let mut tcp = TcpStream::connect(self.metrics).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            tcp,
            "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut text = String::new();
        tcp.read_to_string(&mut text).unwrap();
        text
    }

    /// The sum of a counter family's samples whose line has every one of `labels`.
    pub fn counter(&self, name: &str, labels: &[&str]) -> u64 {
        let prefix = format!("{name}{{");
        self.scrape()
            .lines()
            .filter(|l| l.starts_with(&prefix) && labels.iter().all(|label| l.contains(label)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Requests answered 200 on `path` so far (controller_runtime_webhook_requests_total).
    pub fn calls(&self, path: &str) -> u64 {
        self.counter(
            "controller_runtime_webhook_requests_total",
            &[&format!("webhook=\"{path}\""), "code=\"200\""],
        )
    }
}

impl Webhook {
    /// Sends `signal` (SIGTERM: the kubelet's "pod deleted"; SIGKILL: a crash).
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, signal);
    }

    /// The exit status once the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a new serving certificate from `ca` into `dir` as the kubelet's atomic writer does and
/// returns its PEM: `..<stamp>/{tls.crt,tls.key,ca.crt}`, `..data -> ..<stamp>` by rename, and
/// the visible names as symlinks through `..data`.
fn project(dir: &Path, ca: &Ca, generation: u32) -> String {
    let pair = ca.server("memcached-webhook");
    let stamp = format!("..2026_12_04_00_00_00.{generation:09}");
    let target = dir.join(&stamp);
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("tls.crt"), &pair.cert).unwrap();
    std::fs::write(target.join("tls.key"), &pair.key).unwrap();
    std::fs::write(target.join("ca.crt"), &ca.pem).unwrap();
    let old = std::fs::read_link(dir.join("..data")).ok();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(&stamp, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key", "ca.crt"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(PathBuf::from("..data").join(name), &link).unwrap();
        }
    }
    if let Some(old) = old {
        std::fs::remove_dir_all(dir.join(old)).unwrap();
    }
    pair.cert
}

/// Installs the CRD from manifests/components/crd/ and waits until it is served.
pub fn install_crd(cluster: &Cluster) {
    let kustomization = yaml_documents(&repo_file("manifests/components/crd/kustomization.yaml"));
    for resource in kustomization[0]["resources"].as_array().unwrap() {
        let path = format!("manifests/components/crd/{}", resource.as_str().unwrap());
        cluster.ok(
            &["apply", "--server-side", "-f", "-"],
            Some(&repo_file(&path)),
        );
    }
    // Polled here: `kubectl wait` fails at once while the CRD has no status.conditions yet.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let established = cluster.kubectl(
            &[
                "get",
                "crd/memcacheds.memcached.c5c3.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Established\")].status}",
            ],
            None,
        );
        if established.stdout.trim() == "True" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the CRD is not Established after 60 s: {established:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Applies `configurations` and waits until the API server calls them: an invalid dry-run
/// CREATE is refused by the validating webhook and a minimal one comes back defaulted.
pub fn install_webhooks(cluster: &Cluster, configurations: Vec<Value>) {
    cluster.ok(&["apply", "-f", "-"], Some(&list(configurations)));
    wait_for(cluster, "the webhooks are called", |out| {
        !out.ok
            && out
                .stderr
                .contains("spec.memcached.maxItemSize: Invalid value: \"100k\"")
    });
}

/// A dry-run CREATE in `default` of a Memcached that the validating webhook refuses
/// (`maxItemSize: 100k`) and the mutating webhook defaults: how a check learns which webhook
/// configurations the API server has picked up (its informers lag a write by a moment).
pub fn probe(cluster: &Cluster) -> crate::cluster::Output {
    let object = json!({
        "apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
        "metadata": {"name": "probe", "namespace": "default"},
        "spec": {"memcached": {"maxItemSize": "100k"}},
    });
    cluster.kubectl(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&object.to_string()),
    )
}

/// Polls [`probe`] until `done` says the API server has caught up (30 s at most).
#[track_caller]
pub fn wait_for(
    cluster: &Cluster,
    what: &str,
    mut done: impl FnMut(&crate::cluster::Output) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = probe(cluster);
        if done(&out) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}; last probe: {out:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
