//! The serving certificate as the reload path reads it: a PEM chain and a PEM key (the input,
//! split at its first NUL byte) through `tls::from_pem`, then the leaf's validity dates. Neither
//! may panic, every refusal must say what is wrong, and the pair is accepted exactly when rustls
//! itself accepts the same chain and key for a server.

#![no_main]

use std::path::Path;
use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use memcached_webhook::tls;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;

static PROVIDER: LazyLock<Arc<CryptoProvider>> = LazyLock::new(tls::provider);

/// A key that signs, to put any leaf the fuzzer writes in front of the date check (which reads
/// the leaf only, and never checks it against the key).
const KEY: &[u8] = include_bytes!("../seeds/tls-key.pem");

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (cert_pem, key_pem) = (&data[..split], data.get(split + 1..).unwrap_or_default());
    let provider = &**PROVIDER;

    let ours = tls::from_pem(cert_pem, key_pem, provider);
    if let Err(e) = &ours {
        assert!(!e.to_string().is_empty(), "a refusal without a reason");
    }
    let chain = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>();
    let key = PrivateKeyDer::from_pem_slice(key_pem);
    match (chain, key) {
        (Ok(chain), Ok(key)) if !chain.is_empty() => {
            let chain_for_dates = chain.clone();
            let theirs = rustls::ServerConfig::builder_with_provider(PROVIDER.clone())
                .with_safe_default_protocol_versions()
                .expect("ring supports the default versions")
                .with_no_client_auth()
                .with_single_cert(chain, key);
            assert_eq!(
                ours.is_ok(),
                theirs.is_ok(),
                "we say {:?}, rustls says {:?}",
                ours.as_ref().err().map(ToString::to_string),
                theirs.as_ref().err()
            );
            dates(chain_for_dates);
        }
        _ => assert!(
            ours.is_err(),
            "accepted a chain or key that does not parse as PEM"
        ),
    }
    if let Ok(certified) = ours {
        let _ = tls::reload::check_dates(&certified, Path::new("tls.crt"));
    }
});

/// The date check on any leaf: an answer, never a panic, and a refusal that names the file.
fn dates(chain: Vec<CertificateDer<'static>>) {
    static SIGNER: LazyLock<Arc<dyn rustls::sign::SigningKey>> = LazyLock::new(|| {
        let key = PrivateKeyDer::from_pem_slice(KEY).expect("the seed key parses");
        PROVIDER
            .key_provider
            .load_private_key(key)
            .expect("ring loads the seed key")
    });
    let certified = CertifiedKey::new(chain, SIGNER.clone());
    if let Err(e) = tls::reload::check_dates(&certified, Path::new("tls.crt")) {
        assert!(e.to_string().contains("tls.crt"), "{e}");
    }
}
