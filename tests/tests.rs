//! The integration tests: one binary (one link step), each module starting the real server on
//! ephemeral loopback ports and talking TLS to it.

/// Starting servers, TLS clients and fixtures.
mod util;

/// `memcached-webhook check` on fixtures, and its agreement with the running server.
mod check;
/// The binary itself: flags, --help, --version, startup errors.
mod cli;
/// More connections than --max-connections, held in each hostile way: a well-behaved client is
/// answered meanwhile, and a review in service is never cut to make room.
mod connections;
/// The defaulting property test against an independent reference.
mod defaulting;
/// Misbehaving clients are cut off on time while others are served.
mod hardening;
/// The house rules that stay true by test: no source file over its line limit.
mod house;
/// HTTP/2 stream limits and the rapid-reset cap, frame by frame.
mod http2;
/// The manifests agree with the binary.
mod manifests;
/// Verdicts checked against the real memcached binary.
mod memcached_oracle;
/// The body budget holds under a flood of large bodies (the real binary, RSS from /proc).
mod memory;
/// /metrics after a known sequence of requests.
mod metrics;
/// The monitoring component's alerts and dashboard query only what the server serves.
mod monitoring;
/// POST /mutate end to end, and every malformed request.
mod mutate;
/// The committed admission policies are what `memcached-webhook policies` writes.
mod policies;
/// Ratcheting on UPDATE, deletion never blocked, --validation-actions, audit annotations.
mod ratchet;
/// Certificate hot reload, client certificates, TLS versions.
mod reload;
/// Hostile objects and damaged reviews, in process: always an answer, every patch applies.
mod robustness;
/// SIGTERM-style shutdown with a request in flight.
mod shutdown;
/// POST /validate end to end: allowed, denied with causes, warnings.
mod validate;
