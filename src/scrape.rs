//! The metrics port. With `--metrics-secure` (the default): HTTPS with the webhook's serving
//! certificate (the same resolver, so a rotation has no gap), and `GET /metrics` only for a
//! bearer token the API server says may `get` it ([`auth`]). Without: plain HTTP, for local runs.
//! Readiness and the webhook port never depend on anything here.

pub mod auth;
pub mod cache;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::autoscalers::watch::Credentials;
use crate::config::{Config, TlsVersion};
use crate::server::State;
use crate::server::health;
use crate::server::route::text;
use crate::tls;

/// Connections at most on the metrics port: a few scrapers keep one each. More are closed on
/// accept, so a flood costs neither memory nor handshakes.
const MAX_CONNECTIONS: usize = 64;
/// Deadline for a request's headers, also between requests: longer than a 30 s scrape interval
/// so that a scraper's keep-alive connection survives from one scrape to the next.
const HEADER_TIMEOUT: Duration = Duration::from_secs(65);
/// Largest request head: a scrape's is a few hundred bytes and a bearer token a few KiB.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// Serves the metrics port until the task is aborted: HTTPS with every scrape authorized when
/// `--metrics-secure` is on, else plain HTTP.
pub fn serve(
    listener: TcpListener,
    state: Arc<State>,
    config: &Config,
) -> impl Future<Output = ()> + Send + 'static {
    let secure = config.metrics_secure().then(|| Secure::new(config, &state));
    async move {
        match secure {
            None => health::serve_metrics(listener, state).await,
            Some(Ok(secure)) => secure.serve(listener, state).await,
            Some(Err(e)) => {
                tracing::error!(error = %e, "cannot serve metrics over TLS; the metrics port is closed")
            }
        }
    }
}

/// What the HTTPS metrics port needs.
struct Secure {
    acceptor: TlsAcceptor,
    auth: Arc<auth::Auth>,
    handshake_timeout: Duration,
}

impl Secure {
    fn new(config: &Config, state: &State) -> Result<Self, rustls::Error> {
        // Scrapers speak HTTP/1.1 and present no client certificate: the token is the credential.
        let tls13_only = config.tls_min_version == TlsVersion::V1_3;
        let tls = tls::server_config(
            tls::provider(),
            state.resolver.clone(),
            None,
            false,
            tls13_only,
        )?;
        let credentials = match &config.kubeconfig {
            Some(path) => Credentials::Kubeconfig(path.clone()),
            None => Credentials::Infer,
        };
        Ok(Secure {
            acceptor: TlsAcceptor::from(Arc::new(tls)),
            auth: Arc::new(auth::Auth::new(credentials)),
            handshake_timeout: config.tls_handshake_timeout,
        })
    }

    async fn serve(self, listener: TcpListener, state: Arc<State>) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let this = Arc::new(self);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::debug!(
                    "metrics port: {MAX_CONNECTIONS} connections open; closing a new one"
                );
                continue;
            };
            let (this, state) = (this.clone(), state.clone());
            tokio::spawn(async move {
                let _slot = slot;
                let accept = this.acceptor.accept(tcp);
                let Ok(Ok(tls)) = tokio::time::timeout(this.handshake_timeout, accept).await else {
                    return;
                };
                let service = service_fn(|req: Request<hyper::body::Incoming>| {
                    let (this, state) = (this.clone(), state.clone());
                    async move { Ok::<_, Infallible>(this.answer(&req, &state).await) }
                });
                let _ = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .max_buf_size(MAX_HEAD_BYTES)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    }

    async fn answer<B>(&self, req: &Request<B>, state: &State) -> Response<Full<Bytes>> {
        if req.uri().path() != auth::PATH {
            return text(StatusCode::NOT_FOUND, "metrics are at GET /metrics\n");
        }
        if req.method() != Method::GET {
            return text(
                StatusCode::METHOD_NOT_ALLOWED,
                "metrics are at GET /metrics\n",
            );
        }
        match self.auth.check(req.headers()).await {
            Ok(()) => health::metrics(state),
            Err(refusal) => {
                match refusal.status() {
                    503 => tracing::warn!(%refusal, "metrics scrape refused"),
                    _ => tracing::debug!(%refusal, "metrics scrape refused"),
                }
                let status =
                    StatusCode::from_u16(refusal.status()).expect("refusals are 401, 403 or 503");
                let mut response = text(status, &format!("{refusal}\n"));
                if status == StatusCode::UNAUTHORIZED {
                    response
                        .headers_mut()
                        .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                }
                response
            }
        }
    }
}
