//! Routes on the webhook port:
//! - `POST /mutate-memcached-c5c3-io-v1beta1-memcached`: the defaulting webhook.
//! - `POST /validate-memcached-c5c3-io-v1beta1-memcached`: the validating webhook.
//!
//! Routing looks at the path only (the apiserver appends `?timeout=10s`); answering a request
//! on either path is `answer.rs`'s, reading its body `body.rs`'s. Anything that is not an
//! answerable AdmissionReview gets a plain-text HTTP error ([`text`]) with a one-line reason.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};

use super::answer::{Answer, Head};
use super::budget::Budget;
use crate::admission::{self, MUTATE_PATH, VALIDATE_PATH, Webhook};
use crate::autoscalers::Autoscalers;
use crate::config::Config;
use crate::metrics::{BadRequest, Metrics};

/// The webhook port's request handler.
#[derive(Debug)]
pub struct App {
    pub(super) metrics: Arc<Metrics>,
    pub(super) max_request_bytes: usize,
    /// hyper's HTTP/1 read buffer limit: what a held frame may keep alive besides itself.
    pub(super) max_header_bytes: usize,
    pub(super) body_read_timeout: Duration,
    pub(super) validation_actions: admission::Actions,
    /// `--autoscaler-conflicts=on`: the index the validating webhook looks other autoscalers up in.
    pub(super) autoscalers: Option<Arc<Autoscalers>>,
    pub(super) budget: Budget,
}

impl App {
    pub fn new(config: &Config, metrics: Arc<Metrics>) -> Self {
        App::with_autoscalers(config, metrics, None)
    }

    /// [`App::new`], judging against `autoscalers` when given.
    pub fn with_autoscalers(
        config: &Config,
        metrics: Arc<Metrics>,
        autoscalers: Option<Arc<Autoscalers>>,
    ) -> Self {
        let budget_bytes = usize::try_from(config.max_inflight_body_bytes).unwrap_or(usize::MAX);
        App {
            budget: Budget::new(budget_bytes, metrics.clone()),
            metrics,
            max_request_bytes: config.max_request_bytes,
            max_header_bytes: config.max_header_bytes as usize,
            body_read_timeout: config.body_read_timeout,
            validation_actions: config.validation_actions,
            autoscalers,
        }
    }

    /// Routes `req` and checks its head, taking from it what answering needs ([`Call`]): done
    /// before the request's future is made, so the whole request (about 260 bytes) is not
    /// moved into it and down its awaits, a copy at each.
    pub(super) fn call(&self, req: Request<Incoming>) -> Call {
        let started = Instant::now();
        let webhook = match req.uri().path() {
            MUTATE_PATH => Webhook::Mutate,
            VALIDATE_PATH => Webhook::Validate,
            _ => return Call::NotFound,
        };
        let head = self.head(req);
        Call::Webhook {
            webhook,
            started,
            head,
        }
    }

    /// Answers a request [`App::call`] routed.
    pub(super) async fn handle(&self, call: Call) -> Response<Body> {
        let Call::Webhook {
            webhook,
            started,
            head,
        } = call
        else {
            self.metrics.bad_request(BadRequest::NotFound);
            return error(
                StatusCode::NOT_FOUND,
                "no such path; the webhooks are served at /mutate-memcached-c5c3-io-v1beta1-memcached and /validate-memcached-c5c3-io-v1beta1-memcached\n",
            );
        };
        let metrics = self.metrics.webhook(webhook);
        metrics.in_flight.inc();
        // Decrements even when the client goes away mid-request and this future is dropped.
        let _in_flight = InFlight(&metrics.in_flight);
        let response = match head {
            Ok(head) => self.answer(webhook, head, started).await,
            Err(refusal) => *refusal,
        };
        metrics.latency.observe(started.elapsed().as_secs_f64());
        metrics.request(response.status().as_u16());
        response
    }
}

/// A request as its head leaves it ([`App::call`]).
pub(super) enum Call {
    /// Not a webhook's path.
    NotFound,
    /// On `webhook`'s path, arrived at `started`: its body and what reading it needs, or the
    /// answer to a head the webhooks do not accept.
    Webhook {
        webhook: Webhook,
        started: Instant,
        head: Result<Head, Box<Response<Body>>>,
    },
}

struct InFlight<'a>(&'a prometheus_client::metrics::gauge::Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// A webhook answer's body: bytes it owns, its buffer kept for the next answer once written
/// ([`Answer`]).
pub(super) type Body = Full<Answer>;

/// A plain-text response; the body is one line saying what was wrong.
pub fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    plain(status, Bytes::copy_from_slice(message.as_bytes()))
}

/// [`text`] on the webhook port.
pub(super) fn error(status: StatusCode, message: &str) -> Response<Body> {
    plain(status, Answer::from(message.as_bytes().to_vec()))
}

fn plain<D: Buf>(status: StatusCode, data: D) -> Response<Full<D>> {
    let mut response = Response::new(Full::new(data));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
