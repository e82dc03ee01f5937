//! The binary: parse flags, set up logging, serve until SIGTERM/SIGINT (or, with `check`,
//! judge manifests and exit).

#![forbid(unsafe_code)]
#![warn(clippy::too_many_lines)]

use clap::Parser;
use memcached_webhook::config::{Command, Config};
use memcached_webhook::server::{self, Listeners};
use memcached_webhook::{check, policies};
use memcached_webhook::{dev, logging};
use std::io::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut config = Config::parse();
    if let Some(Command::Check(args)) = &config.command {
        let code = check::run(
            args,
            &mut std::io::stdin().lock(),
            &mut std::io::BufWriter::new(std::io::stdout().lock()),
            &mut std::io::stderr().lock(),
        );
        return ExitCode::from(code);
    }
    if let Some(Command::Policies(args)) = &config.command {
        let mut out = std::io::stdout().lock();
        return match policies::run(args, &mut out).and_then(|()| out.flush()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("memcached-webhook policies: cannot write the policies: {e}");
                ExitCode::FAILURE
            }
        };
    }
    config.apply_dev_mode();
    // Held to the end of main: dropping it gives the queued log lines about a second to be written.
    let _log = match logging::init(config.log_format, &config.log_level, std::io::stderr()) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("memcached-webhook: {e}");
            return ExitCode::from(64);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("memcached-webhook: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            tracing::error!("{message}");
            eprintln!("memcached-webhook: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: Config) -> Result<(), String> {
    if config.dev {
        let created =
            dev::ensure_certificates(&config.cert_dir, &config.cert_name, &config.key_name)
                .map_err(|e| {
                    format!(
                        "--dev: cannot write certificates under {}: {e}",
                        config.cert_dir.display()
                    )
                })?;
        let ca = config.cert_dir.join("ca.crt");
        tracing::info!(created, ca = %ca.display(), "development certificates (curl --cacert {})", ca.display());
    }
    let listeners = Listeners::bind(&config).await.map_err(|e| e.to_string())?;
    tracing::info!(health = %listeners.health_addr(), "probes on /healthz and /readyz");
    match listeners.metrics_addr() {
        Some(addr) if config.metrics_secure() => tracing::info!(
            metrics = %addr,
            "metrics on /metrics (HTTPS; a bearer token allowed to get /metrics by RBAC)"
        ),
        Some(addr) => tracing::info!(
            metrics = %addr,
            "metrics on /metrics (plain HTTP, to anyone)"
        ),
        None => tracing::info!("metrics off (--metrics-bind-address=0)"),
    }
    server::run(config, listeners, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}

/// Resolves on SIGTERM (what the kubelet sends) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).expect("installing a SIGTERM handler succeeds at startup");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
