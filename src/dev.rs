//! `--dev`: a throwaway CA and a serving certificate for `localhost`, `127.0.0.1` and `::1`,
//! written once under the certificate directory so that `curl --cacert certs/dev/ca.crt` works
//! against a server on a laptop. Never for a cluster: the CA key is thrown away.

use std::io;
use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};

/// Every listener on an ephemeral loopback port, metrics in plain text (scraped without a
/// token), logs as JSON lines: how the benches and the real-apiserver suite start the binary,
/// reading the bound ports from its log. Flags given after these win.
pub const LOOPBACK_ARGS: [&str; 9] = [
    "--webhook-bind-address",
    "127.0.0.1:0",
    "--health-probe-bind-address",
    "127.0.0.1:0",
    "--metrics-bind-address",
    "127.0.0.1:0",
    "--metrics-secure=false",
    "--log-format",
    "json",
];

/// Writes `ca.crt`, `cert_name` and `key_name` into `dir` unless the certificate and key exist.
pub fn ensure_certificates(dir: &Path, cert_name: &str, key_name: &str) -> io::Result<bool> {
    let (cert_path, key_path) = (dir.join(cert_name), dir.join(key_name));
    if cert_path.exists() && key_path.exists() {
        return Ok(false);
    }
    let (ca_pem, cert_pem, key_pem) = generate().map_err(io::Error::other)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("ca.crt"), ca_pem)?;
    std::fs::write(&cert_path, cert_pem)?;
    write_private(&key_path, key_pem.as_bytes())?;
    Ok(true)
}

/// (CA certificate, serving chain, serving key) as PEM.
pub fn generate() -> Result<(String, String, String), rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "memcached-webhook dev CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);

    let key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(vec!["localhost".to_owned()])?;
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    leaf.subject_alt_names
        .push(SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()));
    let cert = leaf.signed_by(&key, &issuer)?;
    Ok((ca_cert.pem(), cert.pem(), key.serialize_pem()))
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?
        .write_all(bytes)
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    std::fs::write(path, bytes)
}
