//! A private control plane: etcd and kube-apiserver from `$KUBEBUILDER_ASSETS` on ephemeral
//! loopback ports in a temporary directory, an admin kubeconfig (client certificate in
//! `system:masters`), an audit log at level Metadata, and `kubectl` against it. Both processes
//! are stopped by PID when the [`Cluster`] is dropped, also when a check panicked, and killed by
//! the kernel when the suite is killed ([`dying_with_us`]).

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::pki::Ca;

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub kubeconfig: PathBuf,
    pub audit_log: PathBuf,
    pub port: u16,
    kubectl: PathBuf,
    /// Stopped in this order on drop: the API server first, then its etcd.
    processes: Vec<(&'static str, Child)>,
}

/// What one `kubectl` run gave.
#[derive(Debug)]
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The stdout, parsed (`-o json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("kubectl printed no JSON ({e}): {self:?}"))
    }

    /// The `Warning: ...` lines kubectl printed on stderr.
    pub fn warnings(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter_map(|l| l.strip_prefix("Warning: "))
            .collect()
    }
}

/// A port the kernel just gave out and took back: free unless something takes it in between.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(name: &'static str, program: &Path, args: &[String], dir: &Path) -> Result<Child, String> {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    dying_with_us(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

/// `program`, killed when this process ends however it ends: `Drop` stops it on a normal exit or a
/// panic, but a SIGKILLed test run would leave etcd, kube-apiserver and the server running,
/// holding their ports and data. util-linux's `setpriv --pdeathsig KILL` (where there is one)
/// has the kernel kill it when the thread that started it ends: the suite's main thread, which
/// starts the cluster and runs the checks one at a time, and lives as long as the process.
pub fn dying_with_us(program: &Path) -> Command {
    let setpriv = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("setpriv"))
            .find(|candidate| candidate.is_file())
    });
    match setpriv {
        Some(setpriv) => {
            let mut command = Command::new(setpriv);
            command.args(["--pdeathsig", "KILL", "--"]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

impl Cluster {
    /// Starts etcd and kube-apiserver from `assets` and waits until `/readyz` answers `ok`.
    pub fn start(assets: &Path) -> Result<Cluster, String> {
        let (etcd, apiserver) = (assets.join("etcd"), assets.join("kube-apiserver"));
        for binary in [&etcd, &apiserver] {
            if !binary.is_file() {
                return Err(format!(
                    "{} not found in KUBEBUILDER_ASSETS",
                    binary.display()
                ));
            }
        }
        // envtest puts kubectl beside the binaries; fall back to the one on PATH.
        let kubectl = Some(assets.join("kubectl"))
            .filter(|k| k.is_file())
            .unwrap_or_else(|| PathBuf::from("kubectl"));
        let client = Command::new(&kubectl)
            .args(["version", "--client"])
            .output()
            .map_err(|e| {
                format!("kubectl not in KUBEBUILDER_ASSETS and not runnable from PATH: {e}")
            })?;
        if !client.status.success() {
            return Err(format!("{} version --client failed", kubectl.display()));
        }
        let dir = tempfile::Builder::new()
            .prefix("realapi-")
            .tempdir()
            .map_err(|e| e.to_string())?;
        let d = dir.path();
        let ca = Ca::new("realapi test CA");
        let serving = ca.server("kube-apiserver");
        let admin = ca.client("admin", "system:masters");
        let sa = rcgen::KeyPair::generate().unwrap();
        let (sa_key, sa_pub) = (sa.serialize_pem(), sa.public_key_pem());
        let files = [
            ("ca.crt", &ca.pem),
            ("apiserver.crt", &serving.cert),
            ("apiserver.key", &serving.key),
            ("admin.crt", &admin.cert),
            ("admin.key", &admin.key),
            ("sa.key", &sa_key),
            ("sa.pub", &sa_pub),
        ];
        for (name, content) in files {
            std::fs::write(d.join(name), content).map_err(|e| e.to_string())?;
        }
        std::fs::write(
            d.join("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        )
        .map_err(|e| e.to_string())?;

        let (client, peer, port) = (free_port(), free_port(), free_port());
        let s = |v: &str| v.to_owned();
        let mut cluster = Cluster {
            kubeconfig: d.join("kubeconfig"),
            audit_log: d.join("audit.log"),
            port,
            kubectl,
            processes: Vec::new(),
            dir,
        };
        let d = cluster.dir.path().to_owned();
        let etcd_args = vec![
            s("--name=test"),
            format!("--data-dir={}", d.join("etcd-data").display()),
            s("--unsafe-no-fsync=true"),
            format!("--listen-client-urls=http://127.0.0.1:{client}"),
            format!("--advertise-client-urls=http://127.0.0.1:{client}"),
            format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
            format!("--initial-cluster=test=http://127.0.0.1:{peer}"),
            s("--log-level=warn"),
        ];
        cluster
            .processes
            .push(("etcd", spawn("etcd", &etcd, &etcd_args, &d)?));
        let apiserver_args = vec![
            format!("--etcd-servers=http://127.0.0.1:{client}"),
            s("--bind-address=127.0.0.1"),
            s("--advertise-address=127.0.0.1"),
            // A loopback address cannot be a Service endpoint.
            s("--endpoint-reconciler-type=none"),
            format!("--secure-port={port}"),
            s("--tls-cert-file=apiserver.crt"),
            s("--tls-private-key-file=apiserver.key"),
            s("--client-ca-file=ca.crt"),
            s("--service-account-key-file=sa.pub"),
            s("--service-account-signing-key-file=sa.key"),
            s("--service-account-issuer=https://kubernetes.default.svc"),
            s("--service-cluster-ip-range=10.96.0.0/16"),
            s("--authorization-mode=RBAC"),
            s("--enable-priority-and-fairness=false"),
            s("--profiling=false"),
            s("--audit-policy-file=audit-policy.yaml"),
            s("--audit-log-path=audit.log"),
        ];
        cluster.processes.push((
            "kube-apiserver",
            spawn("kube-apiserver", &apiserver, &apiserver_args, &d)?,
        ));
        std::fs::write(
            &cluster.kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\n\
                 clusters: [{{name: test, cluster: {{server: \"https://127.0.0.1:{port}\", certificate-authority: \"{d}/ca.crt\"}}}}]\n\
                 users: [{{name: admin, user: {{client-certificate: \"{d}/admin.crt\", client-key: \"{d}/admin.key\"}}}}]\n\
                 contexts: [{{name: test, context: {{cluster: test, user: admin}}}}]\n\
                 current-context: test\n",
                d = d.display()
            ),
        )
        .map_err(|e| e.to_string())?;

        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let ready = cluster.kubectl(&["get", "--raw", "/readyz"], None);
            if ready.ok && ready.stdout.trim() == "ok" {
                return Ok(cluster);
            }
            let exited = cluster
                .processes
                .iter_mut()
                .find_map(|(name, child)| Some((*name, child.try_wait().ok()??)));
            if let Some((name, status)) = exited {
                return Err(format!(
                    "{name} exited ({status}) before the API server was ready:\n{}",
                    cluster.log_tail(name)
                ));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver not ready after 90 s (last answer: {ready:?}):\n{}",
                    cluster.log_tail("kube-apiserver")
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last lines of a process's log, for failure messages.
    pub fn log_tail(&self, name: &str) -> String {
        let log = std::fs::read_to_string(self.dir.path().join(format!("{name}.log")))
            .unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// Runs kubectl against this cluster, `stdin` piped in when given.
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new(&self.kubectl)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!(
                "--cache-dir={}",
                self.dir.path().join("kube-cache").display()
            ))
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.kubectl.display()));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            pipe.write_all(input.as_bytes()).unwrap();
        }
        let out = child.wait_with_output().unwrap();
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr)
                .lines()
                // kubectl 1.32 against a 1.36 server: the skew note is noise here.
                .filter(|l| !l.contains("version difference between client"))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    /// [`Cluster::kubectl`] that must succeed.
    #[track_caller]
    pub fn ok(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let out = self.kubectl(args, stdin);
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out
    }

    /// A raw request as the admin, as client libraries send it: (status code, JSON body).
    /// HTTP/1.0, so the answer is not chunked and ends with the connection.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        use std::io::Read;
        let d = self.dir.path();
        let read = |name: &str| std::fs::read(d.join(name)).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&read("ca.crt")) {
            roots.add(cert.unwrap()).unwrap();
        }
        let chain = CertificateDer::pem_slice_iter(&read("admin.crt"))
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_slice(&read("admin.key")).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .unwrap();
        let conn = rustls::ClientConnection::new(
            std::sync::Arc::new(config),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let tcp = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let body = body.to_string();
        write!(
            tls,
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = Vec::new();
        if let Err(e) = tls.read_to_end(&mut answer) {
            assert!(answer.ends_with(b"}"), "reading the answer: {e}");
        }
        let answer = String::from_utf8(answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP answer");
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        (
            code,
            serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
        )
    }

    /// Creates namespace `name` (each check works in its own).
    pub fn namespace(&self, name: &str) {
        self.ok(&["create", "namespace", name], None);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        while let Some((_, mut child)) = self.processes.pop() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
