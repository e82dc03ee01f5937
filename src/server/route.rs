//! Routes on the webhook port:
//! - `POST /mutate-memcached-c5c3-io-v1beta1-memcached`: the defaulting webhook.
//! - `POST /validate-memcached-c5c3-io-v1beta1-memcached`: the validating webhook.
//!
//! Routing looks at the path only (the apiserver appends `?timeout=10s`). Anything that is not
//! an answerable AdmissionReview gets a plain-text HTTP error with a one-line reason.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use crate::admission::{self, MUTATE_PATH, VALIDATE_PATH, Webhook};
use crate::config::Config;
use crate::metrics::{BadRequest, Metrics};
use std::sync::Arc;

/// The webhook port's request handler.
#[derive(Debug)]
pub struct App {
    metrics: Arc<Metrics>,
    max_request_bytes: usize,
    body_read_timeout: Duration,
    validation_actions: admission::Actions,
}

impl App {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Self {
        App {
            metrics,
            max_request_bytes: config.max_request_bytes,
            body_read_timeout: config.body_read_timeout,
            validation_actions: config.validation_actions,
        }
    }

    pub async fn handle(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let started = Instant::now();
        let webhook = match req.uri().path() {
            MUTATE_PATH => Webhook::Mutate,
            VALIDATE_PATH => Webhook::Validate,
            _ => {
                self.metrics.bad_request(BadRequest::NotFound);
                return text(
                    StatusCode::NOT_FOUND,
                    "no such path; the webhooks are served at /mutate-memcached-c5c3-io-v1beta1-memcached and /validate-memcached-c5c3-io-v1beta1-memcached\n",
                );
            }
        };
        let metrics = self.metrics.webhook(webhook);
        metrics.in_flight.inc();
        // Decrements even when the client goes away mid-request and this future is dropped.
        let _in_flight = InFlight(&metrics.in_flight);
        let response = self.answer(webhook, req, started).await;
        metrics.latency.observe(started.elapsed().as_secs_f64());
        metrics.request(response.status().as_u16());
        response
    }

    async fn answer(
        &self,
        webhook: Webhook,
        req: Request<Incoming>,
        started: Instant,
    ) -> Response<Full<Bytes>> {
        let bad = |reason| self.metrics.bad_request(reason);
        if req.method() != Method::POST {
            bad(BadRequest::Method);
            let mut response = text(
                StatusCode::METHOD_NOT_ALLOWED,
                "the webhooks accept POST only\n",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        if !is_json(req.headers().get(CONTENT_TYPE)) {
            bad(BadRequest::ContentType);
            return text(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/json\n",
            );
        }
        let declared = req
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.max_request_bytes as u64) {
            bad(BadRequest::TooLarge);
            return self.too_large();
        }
        // One allocation, sized for the body and the parser's padding.
        let capacity = declared.map_or(16 * 1024, |n| n as usize) + simd_json::INPUT_PADDING;
        let mut body = Vec::with_capacity(capacity);
        match tokio::time::timeout(
            self.body_read_timeout,
            read_body(req.into_body(), &mut body, self.max_request_bytes),
        )
        .await
        {
            Err(_) => {
                bad(BadRequest::Timeout);
                return text(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time\n",
                );
            }
            Ok(Err(BodyError::TooLarge)) => {
                bad(BadRequest::TooLarge);
                return self.too_large();
            }
            Ok(Err(BodyError::Read(e))) => {
                bad(BadRequest::Unreadable);
                tracing::debug!(error = %e, "reading the request body failed");
                return text(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                );
            }
            Ok(Ok(())) => {}
        }
        // Room for a response with a typical patch, so it is written without reallocating.
        let mut out = Vec::with_capacity(1024);
        // No panic is expected; if one happens it costs this request (500), not the process.
        let reviewed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            admission::review(
                webhook,
                self.validation_actions,
                &mut body,
                &mut out,
                started,
            )
        }));
        match reviewed {
            Ok(Ok(verdict)) => {
                self.metrics.webhook(webhook).admission(&verdict);
                let mut response = Response::new(Full::new(Bytes::from(out)));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }
            Ok(Err(reason)) => {
                bad(BadRequest::NotAdmissionReview);
                tracing::info!(webhook = webhook.path(), reason = %reason, "rejected a body that is not an AdmissionReview");
                text(StatusCode::BAD_REQUEST, &format!("{reason}\n"))
            }
            Err(_) => {
                bad(BadRequest::Panic);
                tracing::error!(
                    webhook = webhook.path(),
                    "the admission handler panicked; answered 500"
                );
                text(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    fn too_large(&self) -> Response<Full<Bytes>> {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than {} bytes (--max-request-bytes)\n",
                self.max_request_bytes
            ),
        )
    }
}

struct InFlight<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

enum BodyError {
    TooLarge,
    Read(hyper::Error),
}

/// Appends the body's frames to `out`, stopping as soon as it would pass `limit`.
async fn read_body(mut body: Incoming, out: &mut Vec<u8>, limit: usize) -> Result<(), BodyError> {
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(BodyError::Read)?;
        if let Ok(data) = frame.into_data() {
            if out.len() + data.len() > limit {
                return Err(BodyError::TooLarge);
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(())
}

/// `application/json`, with or without parameters such as `; charset=utf-8`.
fn is_json(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let media_type = value.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case("application/json")
}

/// A plain-text response; the body is one line saying what was wrong.
pub fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(message.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types() {
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/json-patch+json", false),
            ("text/plain", false),
        ] {
            assert_eq!(
                is_json(Some(&HeaderValue::from_static(value))),
                ok,
                "{value}"
            );
        }
        assert!(!is_json(None));
    }
}
