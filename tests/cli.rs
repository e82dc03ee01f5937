use std::process::Command;

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_memcached-webhook"))
}

#[test]
fn help_documents_every_flag_and_version_works() {
    let out = binary().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in [
        "--webhook-bind-address",
        "--cert-dir",
        "--cert-name",
        "--key-name",
        "--health-probe-bind-address",
        "--metrics-bind-address",
        "--metrics-secure",
        "--enable-http2",
        "--log-format",
        "--log-level",
        "--shutdown-grace-period",
        "--max-request-bytes",
        "--validation-actions",
        "--max-inflight-body-bytes",
        "--dev",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    assert!(
        help.contains("check") && help.contains("Judge manifests offline"),
        "--help lacks the check subcommand: {help}"
    );
    let out = binary().arg("--version").output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("memcached-webhook {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_bad_flag_exits_at_once_naming_it() {
    let out = binary()
        .args(["--webhook-bind-address", "not-an-address"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--webhook-bind-address"));
    let out = binary().args(["--no-such-flag"]).output().unwrap();
    assert!(!out.status.success());
    // As the apiserver refuses it in a ValidatingAdmissionPolicyBinding.
    let out = binary()
        .args(["--validation-actions", "Deny,Warn"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--validation-actions")
            && stderr.contains("Deny and Warn may not be combined"),
        "{stderr}"
    );
}

#[test]
fn an_unreadable_client_ca_exits_naming_the_file() {
    // A missing serving certificate is waited for (tests/reload.rs); a bad CA bundle is a
    // configuration error, reported at once.
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("client-ca.crt");
    let out = binary()
        .args([
            "--cert-dir",
            dir.path().to_str().unwrap(),
            "--client-ca-file",
            ca.to_str().unwrap(),
        ])
        .args(memcached_webhook::dev::LOOPBACK_ARGS)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&ca.display().to_string()) && stderr.contains("--client-ca-file"),
        "{stderr}"
    );
}

/// A started binary, killed and reaped when dropped (also when an assertion fails).
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary's log lines, as they arrive on its stderr.
struct Log {
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Log {
    fn of(child: &mut std::process::Child) -> Self {
        use std::io::BufRead;
        let stderr = std::io::BufReader::new(child.stderr.take().expect("stderr is piped"));
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Log {
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads until `count` lines containing `needle` have been logged. The deadline guards
    /// against a hang (a binary that keeps logging something else), it is not a timing: 60 s is
    /// far beyond any wait here.
    fn wait_for(&mut self, needle: &str, count: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while self.count(needle) < count {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(e) => panic!(
                    "{e}: no {count}x {needle:?} in the last lines:\n{}",
                    self.seen[self.seen.len().saturating_sub(20)..].join("\n")
                ),
            }
        }
    }

    fn count(&self, needle: &str) -> usize {
        self.seen.iter().filter(|l| l.contains(needle)).count()
    }

    /// The value of `field=` on the first line containing `needle`.
    fn field(&self, needle: &str, field: &str) -> String {
        let line = self.seen.iter().find(|l| l.contains(needle)).unwrap();
        let value = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{field}=")))
            .unwrap_or_else(|| panic!("no {field}= in {line}"));
        value.to_owned()
    }
}

/// A plain-HTTP GET with std only: the status line.
fn status_line(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

#[test]
fn startup_log_names_the_listeners_a_missing_cert_dir_once_and_the_expiry_as_a_date() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("not-yet");
    let child = binary()
        .args([
            "--cert-dir",
            dir.to_str().unwrap(),
            "--cert-check-interval",
            "20ms",
        ])
        .args(["--log-level", "info,memcached_webhook=debug"])
        .args(["--webhook-bind-address", "127.0.0.1:0"])
        .args(["--health-probe-bind-address", "127.0.0.1:0"])
        .args([
            "--metrics-bind-address",
            "127.0.0.1:0",
            "--metrics-secure=false",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let mut log = Log::of(&mut running.0);

    // Where metrics are served, and it is really there.
    log.wait_for("metrics on /metrics", 1);
    let metrics = log.field("metrics on /metrics", "metrics");
    assert_eq!(status_line(&metrics, "/metrics"), "HTTP/1.1 200 OK");
    let health = log.field("probes on /healthz", "health");
    assert_eq!(
        status_line(&health, "/readyz"),
        "HTTP/1.1 503 Service Unavailable"
    );

    // Several periodic checks of the missing directory: one warning naming it, the rest at debug.
    log.wait_for("certificate still not loadable", 3);
    let missing = "the certificate directory does not exist; not ready, checking again every 20ms";
    assert_eq!(log.count(missing), 1, "{}", log.seen.join("\n"));
    assert_eq!(log.field(missing, "dir"), dir.display().to_string());
    assert_eq!(log.count("No path was found"), 0, "{}", log.seen.join("\n"));
    assert_eq!(log.count(" WARN "), 1, "{}", log.seen.join("\n"));

    // The certificate arrives: its expiry is logged as a date (rcgen's default notAfter).
    let (_, cert, key) = memcached_webhook::dev::generate().unwrap();
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
    std::fs::write(dir.join("tls.crt"), cert).unwrap();
    log.wait_for("serving certificate loaded", 1);
    assert_eq!(
        log.field("serving certificate loaded", "not_after"),
        "4096-01-01T00:00:00Z"
    );
    assert_eq!(status_line(&health, "/readyz"), "HTTP/1.1 200 OK");
}
