//! When the server closes a webhook connection it did not have to, and how: the close policy,
//! as plain functions over what a connection is doing. `conn` applies it; `slots` and `eviction`
//! pick which connection gives way under pressure.
//!
//! HTTP/1.1 can announce a close only in an answer (`Connection: close`): a client reads that
//! answer before it could reuse the connection, so such a close never meets a request. A close
//! of an idle connection can: the client's pool may hand the connection to a request in the
//! instant the FIN is on its way, and Go's transport (the kube-apiserver's) does not retry a
//! POST it has written (docs/availability.md). So the server closes after an answer whenever
//! it can, and leaves idle keep-alives to their client's own idle timeout (90 s in Go), except
//! at the shutdown's hard deadline and when an eviction finds nothing else to close; an idle
//! HTTP/1 connection it does close is reset, not ended ([`resets`]).

/// Who or what ended a connection past its TLS handshake: the `reason` label of
/// `memcached_webhook_connections_closed_total`, in [`crate::metrics::CLOSE_REASONS`] order
/// (declaration order is the index, which a test checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// The server is shutting down.
    Shutdown,
    /// `--idle-timeout` passed between requests.
    IdleTimeout,
    /// `--header-read-timeout` passed while a request head arrived.
    HeaderTimeout,
    /// Closed to make room for a new connection (`eviction`).
    Eviction,
    /// The client closed it.
    Client,
    /// An I/O or protocol error.
    Error,
}

/// Where the connection stood when it closed: the `when` label, in
/// [`crate::metrics::CLOSE_WHEN`] order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// Right after an answer that said so (`Connection: close`, or HTTP/2 GOAWAY): the client
    /// cannot have started another request on it.
    AfterAnswer,
    /// Between requests (or before the first): a client may have been reusing it just then.
    Idle,
    /// A request head or body was arriving, or in service.
    MidRequest,
}

/// What a connection is doing when it ends, as `conn` sees it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// Its latest answer carried `Connection: close` (or GOAWAY was sent on HTTP/2).
    pub said_close: bool,
    /// Between requests; otherwise a request is arriving or in service.
    pub idle: bool,
}

/// How a connection that hyper ended on its own is counted: after an answer that said close,
/// it was the server's decision (`decided`: shutdown or eviction); otherwise its client closed
/// it (`Ok`) or it failed.
pub(crate) fn ended(ok: bool, decided: Reason, seen: Seen) -> (Reason, When) {
    let when = if seen.idle {
        When::Idle
    } else {
        When::MidRequest
    };
    match (ok, seen.said_close) {
        (true, true) => (decided, When::AfterAnswer),
        (true, false) => (Reason::Client, when),
        (false, _) => (Reason::Error, when),
    }
}

/// Whether the next answer on a connection says `Connection: close`: always once shutdown has
/// begun (`/readyz` 503), and on a connection asked to go after its answer (eviction of a
/// connection with a request in service).
pub(crate) fn says_close(shutting_down: bool, asked: bool) -> bool {
    shutting_down || asked
}

/// What the drain (the listener closed, after `--shutdown-delay`) does to an open connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drain {
    /// HTTP/2: GOAWAY, which the client reads before it opens another stream.
    GoAway,
    /// HTTP/1.1: nothing more. Its answers already say close; an idle one stays open until its
    /// client closes it (its idle timeout) or sends a last request, or the grace period ends.
    Wait,
}

pub(crate) fn on_drain(h2: bool) -> Drain {
    if h2 { Drain::GoAway } else { Drain::Wait }
}

/// Whether the server resets a connection it closes (RST, `SO_LINGER` 0) rather than ending it
/// (FIN): HTTP/1 between requests, closed by an eviction or an idle deadline. A FIN can meet a
/// request its client takes the connection for before its HTTP client has read the FIN (Go's
/// read loop, late on a busy API server); the write succeeds and the answer is `EOF`. After a
/// reset the kernel fails the write before a byte is sent, and Go's transport retries a
/// request on a pooled connection that failed so (`nothingWrittenError`; its body can be
/// replayed). What remains is a request written before the reset arrived: its time on the
/// wire. Never after an answer (a reset discards what is unsent) nor mid-request; HTTP/2 gets
/// GOAWAY or is closed as before.
pub(crate) fn resets(reason: Reason, when: When, h2: bool) -> bool {
    !h2 && when == When::Idle && matches!(reason, Reason::Eviction | Reason::IdleTimeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(said_close: bool, idle: bool) -> Seen {
        Seen { said_close, idle }
    }

    #[test]
    fn an_answer_that_said_close_is_the_server_s_race_free_close() {
        for decided in [Reason::Shutdown, Reason::Eviction] {
            let seen = seen(true, true);
            assert_eq!(ended(true, decided, seen), (decided, When::AfterAnswer));
        }
    }

    #[test]
    fn otherwise_the_client_closed_it_or_it_failed() {
        let (idle, mid) = (seen(false, true), seen(false, false));
        // (ended cleanly, the server's decision, what it saw) -> as counted
        let cases = [
            ((true, Reason::Eviction, idle), (Reason::Client, When::Idle)),
            // Shutdown had begun, but no answer said close yet: the client closed its idle one.
            ((true, Reason::Shutdown, idle), (Reason::Client, When::Idle)),
            (
                (true, Reason::Shutdown, mid),
                (Reason::Client, When::MidRequest),
            ),
            (
                (false, Reason::Shutdown, mid),
                (Reason::Error, When::MidRequest),
            ),
            ((false, Reason::Eviction, idle), (Reason::Error, When::Idle)),
        ];
        for ((ok, decided, seen), counted) in cases {
            assert_eq!(
                ended(ok, decided, seen),
                counted,
                "{ok} {decided:?} {seen:?}"
            );
        }
    }

    #[test]
    fn from_shutdown_every_answer_says_close() {
        assert!(says_close(true, false));
        assert!(says_close(false, true));
        assert!(!says_close(false, false), "keep-alive while serving");
    }

    #[test]
    fn the_drain_sends_goaway_to_http2_and_waits_for_http1_clients() {
        assert_eq!(on_drain(true), Drain::GoAway);
        assert_eq!(on_drain(false), Drain::Wait);
    }

    #[test]
    fn an_idle_http1_connection_the_server_closes_is_reset() {
        let idle = When::Idle;
        assert!(resets(Reason::Eviction, idle, false));
        assert!(resets(Reason::IdleTimeout, idle, false));
        assert!(!resets(Reason::Eviction, idle, true), "HTTP/2");
        // Not what could discard an answer or cut a request, nor what the server did not decide.
        assert!(!resets(Reason::Eviction, When::AfterAnswer, false));
        assert!(!resets(Reason::Shutdown, When::AfterAnswer, false));
        assert!(!resets(Reason::HeaderTimeout, When::MidRequest, false));
        assert!(!resets(Reason::Eviction, When::MidRequest, false));
        assert!(!resets(Reason::Client, idle, false));
        assert!(!resets(Reason::Error, idle, false));
    }

    #[test]
    fn reasons_and_whens_index_the_metric_s_labels() {
        let reasons = crate::metrics::CLOSE_REASONS;
        assert_eq!(reasons[Reason::Shutdown as usize], "shutdown");
        assert_eq!(reasons[Reason::IdleTimeout as usize], "idle_timeout");
        assert_eq!(reasons[Reason::HeaderTimeout as usize], "header_timeout");
        assert_eq!(reasons[Reason::Eviction as usize], "eviction");
        assert_eq!(reasons[Reason::Client as usize], "client");
        assert_eq!(reasons[Reason::Error as usize], "error");
        let when = crate::metrics::CLOSE_WHEN;
        assert_eq!(when[When::AfterAnswer as usize], "after_answer");
        assert_eq!(when[When::Idle as usize], "idle");
        assert_eq!(when[When::MidRequest as usize], "mid_request");
    }
}
