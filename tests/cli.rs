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
        "--enable-http2",
        "--log-format",
        "--log-level",
        "--shutdown-grace-period",
        "--max-request-bytes",
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
        .args([
            "--webhook-bind-address",
            "127.0.0.1:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&ca.display().to_string()) && stderr.contains("--client-ca-file"),
        "{stderr}"
    );
}
