//! The serving certificate: loading a PEM chain and key into a rustls `CertifiedKey`, and the
//! resolver that hands the current one to each new handshake. Reloading swaps the key behind
//! the resolver; the `ServerConfig` (and its session cache) is built once.

pub mod reload;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct as Dss, ServerConfig, version};

/// The one crypto provider: ring (builds in a fraction of aws-lc-rs's time on small CI machines).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why a certificate/key pair could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// A file could not be read.
    Read { path: PathBuf, source: io::Error },
    /// The certificate file holds no `CERTIFICATE` block, or a malformed one.
    Certificate { path: PathBuf, problem: String },
    /// The key file holds no usable private key.
    Key { path: PathBuf, problem: String },
    /// The key does not belong to the leaf certificate, or rustls cannot use it.
    Pair {
        cert: PathBuf,
        key: PathBuf,
        source: rustls::Error,
    },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Read { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
            LoadError::Certificate { path, problem } => write!(f, "{}: {problem}", path.display()),
            LoadError::Key { path, problem } => write!(f, "{}: {problem}", path.display()),
            LoadError::Pair { cert, key, source } => write!(
                f,
                "the key in {} does not fit the first certificate in {} ({source})",
                key.display(),
                cert.display()
            ),
        }
    }
}

impl std::error::Error for LoadError {}

/// Reads and checks a certificate chain (leaf first) and its private key.
pub fn load(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, LoadError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.into(),
            source,
        })
    };
    let (cert_pem, key_pem) = (read(cert_path)?, read(key_path)?);
    from_pem(&cert_pem, &key_pem, provider).map_err(|e| e.at(cert_path, key_path))
}

/// [`load`] on bytes already read; paths are filled in by the caller.
pub fn from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, LoadError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, pem::Error>>()
        .map_err(|e| LoadError::Certificate {
            path: PathBuf::new(),
            problem: format!("malformed PEM: {e}"),
        })?;
    if chain.is_empty() {
        let problem = "holds no PEM CERTIFICATE block".to_owned();
        return Err(LoadError::Certificate {
            path: PathBuf::new(),
            problem,
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| LoadError::Key {
        path: PathBuf::new(),
        problem: format!(
            "no private key ({e}); expected a PKCS#8, PKCS#1 RSA or SEC1 EC PEM block"
        ),
    })?;
    CertifiedKey::from_der(chain, key, provider).map_err(|source| LoadError::Pair {
        cert: PathBuf::new(),
        key: PathBuf::new(),
        source,
    })
}

impl LoadError {
    pub(crate) fn at(self, cert_path: &Path, key_path: &Path) -> Self {
        match self {
            LoadError::Certificate { problem, .. } => LoadError::Certificate {
                path: cert_path.into(),
                problem,
            },
            LoadError::Key { problem, .. } => LoadError::Key {
                path: key_path.into(),
                problem,
            },
            LoadError::Pair { source, .. } => LoadError::Pair {
                cert: cert_path.into(),
                key: key_path.into(),
                source,
            },
            read @ LoadError::Read { .. } => read,
        }
    }
}

/// Hands every handshake the certificate most recently stored; none until one is (the
/// handshake then fails, and `/readyz` says why).
#[derive(Debug, Default)]
pub struct Resolver {
    current: ArcSwapOption<CertifiedKey>,
}

// === impl Resolver ===

impl Resolver {
    pub fn store(&self, key: Arc<CertifiedKey>) {
        self.current.store(Some(key));
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        self.current.load_full()
    }

    pub fn has_certificate(&self) -> bool {
        self.current.load().is_some()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

/// Requires and verifies client certificates against a CA bundle that can be swapped while
/// serving (`--client-ca-file`, reloaded like the serving certificate).
#[derive(Debug)]
pub struct ClientVerifier {
    current: arc_swap::ArcSwap<Arc<dyn ClientCertVerifier>>,
}

// === impl ClientVerifier ===

impl ClientVerifier {
    pub fn new(initial: Arc<dyn ClientCertVerifier>) -> Self {
        ClientVerifier {
            current: arc_swap::ArcSwap::from_pointee(initial),
        }
    }

    pub fn store(&self, verifier: Arc<dyn ClientCertVerifier>) {
        self.current.store(Arc::new(verifier));
    }
}

/// A verifier for the CA certificates in `pem`.
pub fn client_verifier_from_pem(
    pem: &[u8],
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(|e| format!("malformed PEM: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("not a usable CA certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("holds no PEM CERTIFICATE block".into());
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())
}

/// What a verifier's signature checks answer (the two below are delegated alike).
type Signature = Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error>;

impl ClientCertVerifier for ClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    // The hints would borrow from a verifier that may be swapped away; an empty list lets the
    // client send its certificate regardless, which is what the kube-apiserver does.
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: rustls::pki_types::UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current
            .load()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(&self, m: &[u8], c: &CertificateDer<'_>, s: &Dss) -> Signature {
        self.current.load().verify_tls12_signature(m, c, s)
    }

    fn verify_tls13_signature(&self, m: &[u8], c: &CertificateDer<'_>, s: &Dss) -> Signature {
        self.current.load().verify_tls13_signature(m, c, s)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.current.load().supported_verify_schemes()
    }
}

/// The server's TLS settings: rustls's safe defaults, TLS 1.2 and 1.3 (or 1.3 only), ALPN
/// `http/1.1` (plus `h2` with `--enable-http2`), certificates from `resolver`, and client
/// certificates required when `client_verifier` is set.
pub fn server_config(
    provider: Arc<CryptoProvider>,
    resolver: Arc<Resolver>,
    client_verifier: Option<Arc<ClientVerifier>>,
    http2: bool,
    tls13_only: bool,
) -> Result<ServerConfig, rustls::Error> {
    let versions: &[&'static rustls::SupportedProtocolVersion] = if tls13_only {
        &[&version::TLS13]
    } else {
        &[&version::TLS13, &version::TLS12]
    };
    let builder = ServerConfig::builder_with_provider(provider).with_protocol_versions(versions)?;
    let builder = match client_verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    // The kube-apiserver's Go client keeps no TLS session cache: tickets would be wasted work
    // (and bytes) on every handshake.
    config.send_tls13_tickets = 0;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (String, String) {
        let ck = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        (ck.cert.pem(), ck.signing_key.serialize_pem())
    }

    #[test]
    fn loads_a_matching_pair_and_refuses_a_mismatch() {
        let p = provider();
        let (cert, key) = pair();
        assert!(from_pem(cert.as_bytes(), key.as_bytes(), &p).is_ok());
        let (_, other_key) = pair();
        let err = from_pem(cert.as_bytes(), other_key.as_bytes(), &p).unwrap_err();
        assert!(matches!(err, LoadError::Pair { .. }), "{err}");
    }

    #[test]
    fn garbage_and_empty_files_are_named_errors() {
        let p = provider();
        let (cert, key) = pair();
        let e = from_pem(b"garbage", key.as_bytes(), &p).unwrap_err();
        assert!(e.to_string().contains("no PEM CERTIFICATE"), "{e}");
        let e = from_pem(cert.as_bytes(), b"", &p).unwrap_err();
        assert!(e.to_string().contains("no private key"), "{e}");
        let truncated = &cert[..cert.len() / 2];
        assert!(from_pem(truncated.as_bytes(), key.as_bytes(), &p).is_err());
    }

    #[test]
    fn missing_files_name_the_path() {
        let e = load(
            Path::new("/nonexistent/tls.crt"),
            Path::new("/nonexistent/tls.key"),
            &provider(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot read /nonexistent/tls.crt"),
            "{e}"
        );
    }
}
