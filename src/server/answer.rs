//! The answer to a request on a webhook path: its headers checked, its body read ([`body`]
//! decides how), the review answered, and every failure answered with the HTTP error that says
//! what was wrong.

use std::task::Poll;

use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode, Version};

use super::body::{self, BodyError, Plan, Ready};
use super::budget::{Grant, Refused};
use super::route::{App, Body, error};
use crate::admission::{self, BadReview, Verdict, Webhook};
use crate::metrics::BadRequest;

mod buffer;

pub(super) use buffer::Answer;

/// What a caught panic leaves of a review.
type Reviewed = std::thread::Result<Result<Verdict, BadReview>>;

impl App {
    /// The head of a request on a webhook's path checked, and what answering it needs taken
    /// from it; else the answer that refuses it (boxed: rare, and in place it would make
    /// every request's future larger).
    pub(super) fn head(&self, req: Request<Incoming>) -> Result<Head, Box<Response<Body>>> {
        let (length, content_type) = fields(req.headers());
        let declared = length.and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let Some(refusal) = self.refuse(req.method(), content_type, declared) {
            return Err(Box::new(refusal));
        }
        Ok(Head {
            version: req.version(),
            declared,
            body: req.into_body(),
        })
    }

    /// Answers a request sent to `webhook`'s path, which arrived at `started`.
    pub(super) async fn answer(
        &self,
        webhook: Webhook,
        head: Head,
        started: std::time::Instant,
    ) -> Response<Body> {
        let Head {
            body,
            declared,
            version,
        } = head;
        // From the request's arrival, read a moment ago: one clock read fewer a request.
        let deadline = tokio::time::Instant::from_std(started) + self.body_read_timeout;
        let plan = Plan::new(declared, version, self.max_header_bytes);
        let mut grant = self.budget.grant(plan.pool);
        let limit = declared.map_or(self.max_request_bytes, |n| n as usize);
        let mut body = match self.receive(body, plan, &mut grant, limit, deadline).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        let mut out = buffer::take(webhook.answer_capacity());
        let review = admission::Review {
            webhook,
            actions: self.validation_actions,
            autoscalers: self.autoscalers.as_deref(),
            started,
        };
        // No panic is expected; if one happens it costs this request (500), not the process.
        let reviewed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            body.answer(&review, &mut out)
        }));
        self.respond(webhook, reviewed, out)
    }

    /// The answer to a request whose method, media type or declared length (`declared`) the
    /// webhooks do not accept, saying which; `None` for one they do.
    fn refuse(
        &self,
        method: &Method,
        content_type: Option<&HeaderValue>,
        declared: Option<u64>,
    ) -> Option<Response<Body>> {
        let bad = |reason| self.metrics.bad_request(reason);
        if method != Method::POST {
            bad(BadRequest::Method);
            let mut response = error(
                StatusCode::METHOD_NOT_ALLOWED,
                "the webhooks accept POST only\n",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return Some(response);
        }
        if !is_json(content_type) {
            bad(BadRequest::ContentType);
            return Some(error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Content-Type must be application/json\n",
            ));
        }
        if declared.is_some_and(|n| n > self.max_request_bytes as u64) {
            bad(BadRequest::TooLarge);
            return Some(self.too_large());
        }
        None
    }

    /// Reads the body by `plan` before `deadline` and takes what parsing it needs from `grant`;
    /// else the answer that says why it could not.
    async fn receive(
        &self,
        body: Incoming,
        plan: Plan,
        grant: &mut Grant<'_>,
        limit: usize,
        deadline: tokio::time::Instant,
    ) -> Result<Ready, Response<Body>> {
        let bad = |reason| self.metrics.bad_request(reason);
        let received = {
            let read = body::read_body(body, plan.pin, grant, limit, deadline);
            let mut read = std::pin::pin!(read);
            // A review of a few KB has come whole with its head: its first poll reads it, and
            // the timer is armed only for a body still on its way (it costs a timer entry, the
            // runtime's handle and a move of the read into it on every request). Boxed: in
            // place, the timer would make every request's future larger, and it is moved whole.
            match std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await {
                Poll::Ready(read) => Ok(read),
                Poll::Pending => Box::pin(tokio::time::timeout_at(deadline, read)).await,
            }
        };
        let received = match received {
            Err(_) => {
                bad(BadRequest::Timeout);
                return Err(error(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time\n",
                ));
            }
            Ok(Err(BodyError::TooLarge)) => {
                bad(BadRequest::TooLarge);
                return Err(self.too_large());
            }
            Ok(Err(BodyError::Read(e))) => {
                bad(BadRequest::Unreadable);
                tracing::debug!(error = %e, "reading the request body failed");
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    "the request body could not be read\n",
                ));
            }
            Ok(Err(BodyError::Budget(refused))) => return Err(self.refused(refused)),
            Ok(Ok(received)) => received,
        };
        Ready::take(received, grant, deadline)
            .await
            .map_err(|refused| self.refused(refused))
    }

    /// The HTTP response to a review: the AdmissionReview written into `out`, or the error.
    fn respond(&self, webhook: Webhook, reviewed: Reviewed, out: Vec<u8>) -> Response<Body> {
        match reviewed {
            Ok(Ok(verdict)) => {
                self.metrics.webhook(webhook).admission(&verdict);
                let mut response = Response::new(Full::new(Answer::from(out)));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                response
            }
            Ok(Err(reason)) => {
                self.metrics.bad_request(BadRequest::NotAdmissionReview);
                tracing::info!(webhook = webhook.path(), reason = %reason, "rejected a body that is not an AdmissionReview");
                error(StatusCode::BAD_REQUEST, &format!("{reason}\n"))
            }
            Err(_) => {
                self.metrics.bad_request(BadRequest::Panic);
                tracing::error!(
                    webhook = webhook.path(),
                    "the admission handler panicked; answered 500"
                );
                error(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        }
    }

    /// 503 while the budget is used up (the apiserver retries), 413 when it never could hold it.
    fn refused(&self, refused: Refused) -> Response<Body> {
        match refused {
            Refused::Busy => {
                let mut response = error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server's memory for request bodies is in use by other requests \
                     (--max-inflight-body-bytes); retry shortly\n",
                );
                response
                    .headers_mut()
                    .insert(RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            Refused::TooBig { needed, pool } => {
                self.metrics.bad_request(BadRequest::TooLarge);
                error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!(
                        "reading and parsing this body needs {needed} bytes of memory, more than the \
                         {pool} bytes --max-inflight-body-bytes allows for bodies over 256 KiB\n"
                    ),
                )
            }
        }
    }

    fn too_large(&self) -> Response<Body> {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is larger than {} bytes (--max-request-bytes)\n",
                self.max_request_bytes
            ),
        )
    }
}

/// What answering a request on a webhook's path needs of it, its head checked ([`App::head`]).
#[derive(Debug)]
pub(super) struct Head {
    body: Incoming,
    /// The Content-Length, if any.
    declared: Option<u64>,
    version: Version,
}

/// The first `Content-Length` and `Content-Type` values, as `HeaderMap::get` finds them, in one
/// pass over the head's few fields rather than two hashed look-ups.
fn fields(headers: &HeaderMap) -> (Option<&HeaderValue>, Option<&HeaderValue>) {
    let (mut length, mut content_type) = (None, None);
    for (name, value) in headers {
        if *name == CONTENT_LENGTH {
            length = length.or(Some(value));
        } else if *name == CONTENT_TYPE {
            content_type = content_type.or(Some(value));
        }
    }
    (length, content_type)
}

/// `application/json`, with or without parameters such as `; charset=utf-8`.
fn is_json(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value else {
        return false;
    };
    // What the kube-apiserver sends, without a parameter: no search for one.
    if value.as_bytes() == b"application/json" {
        return true;
    }
    let Ok(value) = value.to_str() else {
        return false;
    };
    let media_type = value.split(';').next().unwrap_or_default().trim();
    media_type.eq_ignore_ascii_case("application/json")
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

    #[test]
    fn fields_are_the_first_values_as_get_finds_them() {
        let mut headers = HeaderMap::new();
        assert_eq!(fields(&headers), (None, None));
        headers.insert("x-other", HeaderValue::from_static("1"));
        headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static("12"));
        headers.append(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.append(CONTENT_LENGTH, HeaderValue::from_static("13"));
        let found = fields(&headers);
        assert_eq!(
            found,
            (headers.get(CONTENT_LENGTH), headers.get(CONTENT_TYPE))
        );
        assert_eq!(found.0.unwrap(), "12");
    }
}
