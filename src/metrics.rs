//! Prometheus metrics, served as text on `--metrics-bind-address` (`GET /metrics`). The names
//! `controller_runtime_webhook_*` match controller-runtime's, so existing dashboards keep
//! working. Label handles are resolved once here; a request costs a few atomic adds.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::{encode_eof, encode_registry};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

use crate::admission::{Enforcement, Operation, Verdict, Webhook};
use crate::memcached::validate::Rule;

mod process;

/// A series' labels; the modules that register their own metrics use it too.
pub(crate) type Labels = Vec<(&'static str, &'static str)>;

/// Latency buckets from 10 µs to 10 s: an answer normally takes tens of microseconds.
const LATENCY_BUCKETS: [f64; 16] = [
    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.5, 1.0,
    10.0,
];

/// HTTP status codes the webhook port answers with, resolved up front.
const CODES: [(u16, &str); 10] = [
    (200, "200"),
    (400, "400"),
    (404, "404"),
    (405, "405"),
    (408, "408"),
    (413, "413"),
    (415, "415"),
    (431, "431"),
    (500, "500"),
    (503, "503"),
];

/// Why a request was answered with an HTTP error instead of an AdmissionReview.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadRequest {
    NotFound,
    Method,
    ContentType,
    TooLarge,
    Timeout,
    Unreadable,
    NotAdmissionReview,
    Panic,
}

impl BadRequest {
    const ALL: [BadRequest; 8] = [
        BadRequest::NotFound,
        BadRequest::Method,
        BadRequest::ContentType,
        BadRequest::TooLarge,
        BadRequest::Timeout,
        BadRequest::Unreadable,
        BadRequest::NotAdmissionReview,
        BadRequest::Panic,
    ];

    fn label(self) -> &'static str {
        match self {
            BadRequest::NotFound => "not_found",
            BadRequest::Method => "method_not_allowed",
            BadRequest::ContentType => "unsupported_media_type",
            BadRequest::TooLarge => "too_large",
            BadRequest::Timeout => "body_timeout",
            BadRequest::Unreadable => "body_unreadable",
            BadRequest::NotAdmissionReview => "not_admission_review",
            BadRequest::Panic => "panic",
        }
    }
}

/// Per-webhook handles.
#[derive(Debug)]
pub struct WebhookMetrics {
    pub latency: Histogram,
    pub in_flight: Gauge,
    requests: Vec<(u16, Counter)>,
    requests_other: Counter,
    /// Indexed by [`operation_index`] * 2 + denied.
    admissions: Vec<Counter>,
    pub warnings: Counter,
    /// Indexed by enforcement * rules + rule; shared by both webhooks (only validation counts).
    violations: Vec<Counter>,
}

impl WebhookMetrics {
    pub fn request(&self, code: u16) {
        match self.requests.iter().find(|(c, _)| *c == code) {
            Some((_, counter)) => counter.inc(),
            None => self.requests_other.inc(),
        };
    }

    pub fn admission(&self, verdict: &Verdict) {
        let i = operation_index(verdict.operation) * 2 + usize::from(!verdict.allowed);
        self.admissions[i].inc();
        if verdict.warnings > 0 {
            self.warnings.inc_by(verdict.warnings as u64);
        }
        if !verdict.violations.is_empty() {
            for (enforcement, rule, n) in verdict.violations.iter() {
                let i = enforcement as usize * Rule::ALL.len() + rule.index();
                self.violations[i].inc_by(u64::from(n));
            }
        }
    }
}

fn operation_index(operation: Option<Operation>) -> usize {
    match operation {
        Some(Operation::Create) => 0,
        Some(Operation::Update) => 1,
        Some(Operation::Delete) => 2,
        Some(Operation::Connect) => 3,
        None => 4,
    }
}

/// Every metric the process exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub mutate: WebhookMetrics,
    pub validate: WebhookMetrics,
    bad_requests: Vec<Counter>,
    pub handshake_failures: Counter,
    pub handshake_timeouts: Counter,
    pub connections_open: Gauge,
    /// 1 while `/readyz` answers 200, else 0: set from the server's state at each scrape, so an
    /// alert can count ready pods with this server's metrics alone.
    pub ready: Gauge,
    /// Webhook connections by state, evictions, time over the eviction threshold (`server::slots`).
    pub connections: Connections,
    /// Certificate reloads by result, and the served leaf's notAfter (Unix seconds: alert
    /// before it passes); the reloader updates them.
    pub certificates: crate::tls::reload::Stats,
    /// The budget for request bodies in flight (`server::budget`).
    pub body_budget: crate::server::budget::Stats,
    /// The autoscaler index and its watch (`--autoscaler-conflicts`; zero when off).
    pub autoscalers: crate::autoscalers::Stats,
    process: process::Process,
}

/// Connections on the webhook port by what they are doing, and what made room for new ones.
#[derive(Debug, Default)]
pub struct Connections {
    /// Indexed by state: pre_handshake, handshaking, idle, active.
    pub by_state: [Gauge; 4],
    /// Indexed by reason: idle, incomplete, pre_handshake, busy.
    pub evictions: [Counter; 4],
    /// Seconds during which a new connection found no free slot (or the pre-handshake ceiling).
    pub pressure_seconds: Counter<f64, AtomicU64>,
    /// Connections past their handshake that ended, by [`CLOSE_REASONS`] and [`CLOSE_WHEN`].
    pub closed: [[Counter; 3]; 6],
}

/// The `state` labels of `memcached_webhook_connections`, in [`Connections::by_state`] order.
pub const CONNECTION_STATES: [&str; 4] = ["pre_handshake", "handshaking", "idle", "active"];
/// The `reason` labels of `memcached_webhook_connection_evictions_total`, in order.
pub const EVICTION_REASONS: [&str; 4] = ["idle", "incomplete", "pre_handshake", "busy"];
/// The `reason` labels of `memcached_webhook_connections_closed_total` (`server::close`).
pub const CLOSE_REASONS: [&str; 6] = [
    "shutdown",
    "idle_timeout",
    "header_timeout",
    "eviction",
    "client",
    "error",
];
/// Its `when` labels: only an `idle` close by the server can meet a request being written.
pub const CLOSE_WHEN: [&str; 3] = ["after_answer", "idle", "mid_request"];

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric, each registered by the function (or the module, for the certificate reloader,
    /// the body budget, the autoscaler watch and the process's figures) that owns its handles;
    /// the text lists them in this order.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let (mutate, validate) = WebhookMetrics::register(&mut registry);
        let bad_requests = BadRequest::register(&mut registry);
        let (handshake_failures, handshake_timeouts) = register_handshakes(&mut registry);
        let connections_open = Gauge::default();
        registry.register(
            "memcached_webhook_connections_open",
            "Open connections on the webhook port",
            connections_open.clone(),
        );
        let ready = Gauge::default();
        registry.register(
            "memcached_webhook_ready",
            "1 while /readyz answers 200 (a certificate loaded, the webhook port accepting, no shutdown begun), else 0",
            ready.clone(),
        );
        Metrics {
            mutate,
            validate,
            bad_requests,
            handshake_failures,
            handshake_timeouts,
            connections_open,
            ready,
            connections: Connections::register(&mut registry),
            certificates: crate::tls::reload::Stats::register(&mut registry),
            body_budget: crate::server::budget::Stats::register(&mut registry),
            autoscalers: crate::autoscalers::Stats::register(&mut registry),
            process: process::Process::register(&mut registry),
            registry,
        }
    }

    pub fn webhook(&self, webhook: Webhook) -> &WebhookMetrics {
        match webhook {
            Webhook::Mutate => &self.mutate,
            Webhook::Validate => &self.validate,
        }
    }

    pub fn bad_request(&self, reason: BadRequest) {
        if let Some(i) = BadRequest::ALL.iter().position(|r| *r == reason) {
            self.bad_requests[i].inc();
        }
    }

    /// The text exposition (OpenMetrics), with the process figures read now.
    pub fn render(&self) -> String {
        self.process.refresh();
        let mut out = String::with_capacity(8 * 1024);
        encode_registry(&mut out, &self.registry).expect("writing to a String cannot fail");
        encode_eof(&mut out).expect("writing to a String cannot fail");
        out
    }
}

/// A new metric registered as `name`, for the handle its owner keeps.
pub(crate) fn registered<M: Metric + Clone + Default>(
    registry: &mut Registry,
    name: &str,
    help: &str,
) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

/// `memcached_webhook_connections_closed_total{reason, when}`, every series created up front.
fn register_closed(registry: &mut Registry) -> [[Counter; 3]; 6] {
    let family = Family::<Labels, Counter>::default();
    let closed = CLOSE_REASONS.map(|reason| {
        CLOSE_WHEN.map(|when| {
            family
                .get_or_create(&vec![("reason", reason), ("when", when)])
                .clone()
        })
    });
    registry.register(
        "memcached_webhook_connections_closed",
        "Webhook connections past their TLS handshake that ended, by reason (shutdown, \
         idle_timeout, header_timeout, eviction, client, error) and when: after_answer (the \
         answer said Connection: close, or HTTP/2 GOAWAY), idle (between requests: a server close \
         here may meet a request the client is writing), mid_request",
        family,
    );
    closed
}

impl WebhookMetrics {
    /// The controller-runtime request metrics and ours, with a handle per webhook, operation,
    /// verdict, status code, action and rule resolved up front.
    fn register(registry: &mut Registry) -> (WebhookMetrics, WebhookMetrics) {
        let requests = Family::<Labels, Counter>::default();
        let latency =
            Family::<Labels, Histogram>::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        let in_flight = Family::<Labels, Gauge>::default();
        let admissions = Family::<Labels, Counter>::default();
        let warnings = Family::<Labels, Counter>::default();
        let violations = Family::<Labels, Counter>::default();
        let violation_handles: Vec<Counter> = Enforcement::ALL
            .iter()
            .flat_map(|e| Rule::ALL.iter().map(move |r| (e.label(), r.label())))
            .map(|(action, rule)| {
                violations
                    .get_or_create(&vec![("action", action), ("rule", rule)])
                    .clone()
            })
            .collect();
        let per_webhook = |webhook: Webhook| {
            let path = webhook.path();
            let mut admission_handles = Vec::new();
            for op in ["CREATE", "UPDATE", "DELETE", "CONNECT", "unknown"] {
                for verdict in ["allowed", "denied"] {
                    let labels = vec![("webhook", path), ("operation", op), ("verdict", verdict)];
                    admission_handles.push(admissions.get_or_create(&labels).clone());
                }
            }
            let code = |label| requests.get_or_create(&vec![("webhook", path), ("code", label)]);
            WebhookMetrics {
                latency: latency.get_or_create(&vec![("webhook", path)]).clone(),
                in_flight: in_flight.get_or_create(&vec![("webhook", path)]).clone(),
                requests: CODES
                    .iter()
                    .map(|&(c, label)| (c, code(label).clone()))
                    .collect(),
                requests_other: code("other").clone(),
                admissions: admission_handles,
                warnings: warnings.get_or_create(&vec![("webhook", path)]).clone(),
                violations: violation_handles.clone(),
            }
        };
        let both = (per_webhook(Webhook::Mutate), per_webhook(Webhook::Validate));
        registry.register(
            "controller_runtime_webhook_requests",
            "HTTP requests by webhook path and status code",
            requests,
        );
        registry.register(
            "controller_runtime_webhook_latency_seconds",
            "Time to answer a webhook request",
            latency,
        );
        registry.register(
            "controller_runtime_webhook_requests_in_flight",
            "Webhook requests being answered",
            in_flight,
        );
        registry.register(
            "memcached_webhook_admissions",
            "Admission decisions by webhook, operation and verdict",
            admissions,
        );
        registry.register(
            "memcached_webhook_warnings",
            "Warnings returned to clients",
            warnings,
        );
        registry.register(
            "memcached_webhook_validation_violations",
            "Validation violations by what was done (deny, warn, audit, ratcheted: already stored) and rule",
            violations,
        );
        both
    }
}

impl BadRequest {
    fn register(registry: &mut Registry) -> Vec<Counter> {
        let bad = Family::<Labels, Counter>::default();
        let handles = BadRequest::ALL
            .iter()
            .map(|r| bad.get_or_create(&vec![("reason", r.label())]).clone())
            .collect();
        registry.register(
            "memcached_webhook_bad_requests",
            "Requests answered with an HTTP error, by reason",
            bad,
        );
        handles
    }
}

/// `memcached_webhook_tls_handshake_failures_total{reason}`: (error, timeout).
fn register_handshakes(registry: &mut Registry) -> (Counter, Counter) {
    let handshakes = Family::<Labels, Counter>::default();
    let failures = handshakes.get_or_create(&vec![("reason", "error")]).clone();
    let timeouts = handshakes
        .get_or_create(&vec![("reason", "timeout")])
        .clone();
    registry.register(
        "memcached_webhook_tls_handshake_failures",
        "TLS handshakes that failed or timed out",
        handshakes,
    );
    (failures, timeouts)
}

impl Connections {
    fn register(registry: &mut Registry) -> Self {
        let states = Family::<Labels, Gauge>::default();
        let evictions = Family::<Labels, Counter>::default();
        let connections = Connections {
            by_state: CONNECTION_STATES.map(|l| states.get_or_create(&vec![("state", l)]).clone()),
            evictions: EVICTION_REASONS
                .map(|l| evictions.get_or_create(&vec![("reason", l)]).clone()),
            pressure_seconds: Counter::default(),
            closed: register_closed(registry),
        };
        registry.register(
            "memcached_webhook_connections",
            "Webhook connections by state: pre_handshake (accepted, no slot and no TLS state yet), \
             handshaking, idle (between requests), active (a request arriving or in service)",
            states,
        );
        registry.register(
            "memcached_webhook_connection_evictions",
            "Connections closed to make room for new ones, by reason: idle (keep-alive between \
             requests), incomplete (no request completed yet), pre_handshake (past its ceiling), \
             busy (every slot in service: asked to close after its answer)",
            evictions,
        );
        registry.register(
            "memcached_webhook_connection_pressure_seconds",
            "Seconds during which new connections found every slot taken or the pre-handshake \
             ceiling reached (connections were being evicted)",
            connections.pressure_seconds.clone(),
        );
        connections
    }
}
