//! The plain-HTTP probe port: `GET /healthz` answers 200 while the process runs; `GET /readyz`
//! answers 200 only while a certificate is loaded, the webhook listener accepts and no
//! shutdown has begun (503 with the reason otherwise). The metrics port is served the same way
//! with `--metrics-secure=false` (`crate::scrape`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::State;
use super::route::text;

/// Serves probes until the task is aborted.
pub async fn serve(listener: TcpListener, state: Arc<State>) {
    plain(listener, move |method, path| answer(&state, method, path)).await
}

/// Serves `GET /metrics` over plain HTTP until the task is aborted (`--metrics-secure=false`).
pub async fn serve_metrics(listener: TcpListener, state: Arc<State>) {
    plain(listener, move |method, path| match (method, path) {
        (&Method::GET, "/metrics") => metrics(&state),
        _ => text(StatusCode::NOT_FOUND, "metrics are at GET /metrics\n"),
    })
    .await
}

/// The metrics text, with `memcached_webhook_ready` set from `state` (also `crate::scrape`'s).
pub(crate) fn metrics(state: &State) -> Answer {
    let metrics = &state.metrics;
    metrics.ready.set(i64::from(state.not_ready().is_none()));
    let mut response = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from(
        metrics.render(),
    )));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    response
}

type Answer = hyper::Response<http_body_util::Full<bytes::Bytes>>;

/// A small plain-HTTP/1.1 server whose every answer comes from `answer(method, path)`.
async fn plain(
    listener: TcpListener,
    answer: impl Fn(&Method, &str) -> Answer + Send + Sync + 'static,
) {
    let answer = Arc::new(answer);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let answer = answer.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let response = answer(req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

fn answer(
    state: &State,
    method: &Method,
    path: &str,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "probes accept GET only\n");
    }
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => match state.not_ready() {
            None => text(StatusCode::OK, "ok\n"),
            Some(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("not ready: {why}\n"),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "the probes are /healthz and /readyz\n",
        ),
    }
}
