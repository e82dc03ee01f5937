//! The floor: a bare hyper 1 + tokio-rustls server that reads each request body to its end and
//! answers one fixed, precomputed response. No HTTPS webhook on this stack can do less per
//! request, so the benches report ours next to it. Shared by `benches/floor.rs` (the binary
//! `benches/instr-per-request.py` runs) and `benches/latency.rs` (in process), each of which
//! brings its own TLS configuration.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Serves `answer` on every connection `listener` accepts, for as long as the task runs: TLS
/// by `acceptor`, HTTP/1.1 or HTTP/2 as the client speaks (hyper-util's auto builder with
/// hyper's defaults and no timer, as our server builds its own). `nodelay` sets `TCP_NODELAY`,
/// as our server (`src/server.rs`) and Go's servers and clients do.
pub async fn serve(listener: TcpListener, acceptor: TlsAcceptor, answer: Bytes, nodelay: bool) {
    let builder = std::sync::Arc::new(auto::Builder::new(TokioExecutor::new()));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        if nodelay {
            let _ = tcp.set_nodelay(true);
        }
        let (acceptor, builder, answer) = (acceptor.clone(), builder.clone(), answer.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = service_fn(move |request: Request<Incoming>| {
                let answer = answer.clone();
                async move {
                    // Read the whole body, as any server must before answering.
                    let _ = request.into_body().collect().await;
                    let mut response = Response::new(Full::new(answer));
                    response
                        .headers_mut()
                        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    Ok::<_, Infallible>(response)
                }
            });
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}
