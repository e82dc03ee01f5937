//! The floor for `benches/instr-per-request.py` as a process of its own: the bare hyper 1 +
//! tokio-rustls (ring) HTTPS server of `benches/common/floor.rs`, which reads each request body
//! to its end and answers one fixed, precomputed response, over TLS from certificate files.
//!
//! ```text
//! floor --cert FILE --key FILE --addr 127.0.0.1:0 --response FILE
//! ```
//!
//! It prints `floor: listening on ADDR` on stderr once bound, then serves until killed. TLS 1.3
//! and 1.2 (rustls's safe defaults, as the webhook's default `--tls-min-version`), ALPN `h2` and
//! `http/1.1` (hyper-util's auto builder, hyper's defaults, no timer), no session tickets (as the
//! webhook), TCP_NODELAY, and tokio's multi-thread runtime with one worker per core (as
//! `src/main.rs`). Started without `--cert` (`cargo bench` runs it with `--bench`), it says what
//! it is and exits 0.

#[path = "common/floor.rs"]
mod floor;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

struct Args {
    cert: PathBuf,
    key: PathBuf,
    addr: SocketAddr,
    response: PathBuf,
}

/// `None` without `--cert`: not started by the script.
fn parse_args() -> Result<Option<Args>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.iter().any(|a| a == "--cert") {
        return Ok(None);
    }
    let (mut cert, mut key, mut addr, mut response) = (None, None, None, None);
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} wants a value"))?;
        match flag.as_str() {
            "--cert" => cert = Some(PathBuf::from(value)),
            "--key" => key = Some(PathBuf::from(value)),
            "--response" => response = Some(PathBuf::from(value)),
            "--addr" => {
                addr = Some(
                    value
                        .parse::<SocketAddr>()
                        .map_err(|e| format!("--addr {value}: {e}"))?,
                );
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(Some(Args {
        cert: cert.ok_or("--cert is required")?,
        key: key.ok_or("--key is required")?,
        addr: addr.ok_or("--addr is required")?,
        response: response.ok_or("--response is required")?,
    }))
}

fn tls_config(args: &Args) -> Result<ServerConfig, String> {
    let chain = CertificateDer::pem_file_iter(&args.cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| format!("{}: {e}", args.cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(&args.key)
        .map_err(|e| format!("{}: {e}", args.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map_err(|e| format!("TLS: {e}"))?;
    config.send_tls13_tickets = 0;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

async fn serve(args: Args) -> Result<(), String> {
    let acceptor = TlsAcceptor::from(Arc::new(tls_config(&args)?));
    let response = Bytes::from(
        std::fs::read(&args.response).map_err(|e| format!("{}: {e}", args.response.display()))?,
    );
    let listener = TcpListener::bind(args.addr)
        .await
        .map_err(|e| format!("--addr {}: {e}", args.addr))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("floor: listening on {bound}");
    floor::serve(listener, acceptor, response, true).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!(
                "floor: a reference HTTPS server for benches/instr-per-request.py, not a bench; nothing to run"
            );
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("floor: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("floor: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor: {e}");
            ExitCode::FAILURE
        }
    }
}
