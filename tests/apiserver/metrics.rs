//! `--metrics-secure` against the real API server, with the shipped RBAC (manifests/base/rbac.yaml
//! and the servicemonitor component's reader binding): HTTPS on the metrics port, 401 without a
//! token, 403 for an account without the reader role, 200 for one bound to it, each token
//! reviewed once for many scrapes; then the API server cut off (a relay the check cuts, not the
//! shared API server): a new token's scrape is a 503 with the reason, and reviews are answered.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Check;
use crate::autoscalers::{Relay, service_account_kubeconfig};
use crate::env::{DeleteOnDrop, Env, Restore};
use crate::webhook::{self, Webhook, repo_file, yaml_documents};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "metrics::only_tokens_rbac_allows_scrape_and_an_outage_is_a_503",
        run: only_tokens_rbac_allows_scrape_and_an_outage_is_a_503,
    }]
}

const NS: &str = "metrics";
const SERVER_ACCOUNT: &str = "system:serviceaccount:memcached-webhook-system:memcached-webhook";
/// How long the server reuses an allowed decision (src/scrape/cache.rs, ALLOWED_TTL).
const ALLOWED_TTL: Duration = Duration::from_secs(60);

fn only_tokens_rbac_allows_scrape_and_an_outage_is_a_503(env: &Env) {
    let _binding = scrapers(env);
    // The server as deployed: the webhook's account with the shipped RBAC, through a relay.
    let relay = Relay::start(env.cluster.port);
    let kubeconfig = service_account_kubeconfig(env, relay.port);
    // Warn instead of Deny: its verdicts tell it from the suite's shared server.
    let server = Webhook::start(&[
        "--metrics-secure",
        &format!("--kubeconfig={}", kubeconfig.display()),
        "--validation-actions=Warn",
    ]);
    let (prometheus, stranger) = (token(env, "prometheus"), token(env, "stranger"));
    let reviews = |resource: &str| audit_count(env, resource);
    let before = (reviews("tokenreviews"), reviews("subjectaccessreviews"));

    let plain = plain_get(&server);
    assert!(!plain.starts_with("HTTP/1.1 200"), "plain HTTP: {plain}");
    let (status, body) = scrape(&server, None);
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("needs a bearer token"), "{body}");
    let (status, body) = scrape(&server, Some("not-a-token"));
    assert_eq!(status, 401, "{body}");
    let (status, body) = scrape(&server, Some(&stranger));
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("\"system:serviceaccount:metrics:stranger\" may not get /metrics"),
        "{body}"
    );

    // Allowed, and each token reviewed once however often it scrapes.
    let allowed_at = Instant::now();
    for _ in 0..3 {
        let (status, body) = scrape(&server, Some(&prometheus));
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("memcached_webhook_ready 1"), "{body}");
    }
    let (status, _) = scrape(&server, Some(&stranger));
    assert_eq!(status, 403, "a refusal is cached too");
    // A last, new token: its reviews are audited after any the scrapes above made.
    let (status, _) = scrape(&server, Some(&token(env, "stranger")));
    assert_eq!(status, 403);
    // TokenReviews: not-a-token, stranger, prometheus, the new token; SubjectAccessReviews: all
    // but not-a-token.
    let expected = (before.0 + 4, before.1 + 3);
    wait_until("the reviews are in the audit log", || {
        (reviews("tokenreviews"), reviews("subjectaccessreviews")) >= expected
    });
    assert_eq!(
        (reviews("tokenreviews"), reviews("subjectaccessreviews")),
        expected,
        "one review per token, however often it scrapes"
    );

    relay.cut();
    cut_off(env, &server, &prometheus, allowed_at);
}

/// The scrapers: ServiceAccounts `prometheus` (bound to the reader role by the component's
/// binding, its subject patched as the README says) and `stranger`; the binding goes on drop.
fn scrapers(env: &Env) -> DeleteOnDrop<'_> {
    env.namespace(NS);
    for account in ["prometheus", "stranger"] {
        env.ok(&["create", "serviceaccount", "-n", NS, account], None);
    }
    let mut binding = yaml_documents(&repo_file(
        "manifests/components/servicemonitor/metrics-reader-binding.yaml",
    ))
    .remove(0);
    binding["subjects"] =
        json!([{"kind": "ServiceAccount", "name": "prometheus", "namespace": NS}]);
    let guard = DeleteOnDrop(
        env,
        "clusterrolebinding",
        "memcached-webhook-metrics-reader",
    );
    env.ok(&["apply", "-f", "-"], Some(&binding.to_string()));
    guard
}

/// A new token of `account` (TokenRequest API).
fn token(env: &Env, account: &str) -> String {
    let out = env.ok(&["create", "token", "-n", NS, account], None);
    out.stdout.trim().to_owned()
}

/// With the API server cut off: a new token cannot be reviewed (503 with the reason), the cached
/// one still scrapes, and the API server's admission reviews are answered by the same server.
fn cut_off(env: &Env, server: &Webhook, prometheus: &str, allowed_at: Instant) {
    let (status, body) = scrape(server, Some(&token(env, "prometheus")));
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("cannot check the scrape's token with the API server")
            && body.contains("TokenReview"),
        "{body}"
    );
    if allowed_at.elapsed() < ALLOWED_TTL {
        assert_eq!(scrape(server, Some(prometheus)).0, 200, "cached");
    } else {
        eprintln!("metrics: the cached-decision scrape was SKIPPED (over {ALLOWED_TTL:?} elapsed)");
    }
    let _restore = Restore(env);
    env.ok(
        &["apply", "-f", "-"],
        Some(&webhook::list(server.configurations())),
    );
    webhook::wait_for(&env.cluster, "the cut-off server judges", |out| {
        out.ok && out.stderr.contains("maxItemSize")
    });
}

/// Audit events of the server's account creating `resource` (tokenreviews, ...).
fn audit_count(env: &Env, resource: &str) -> usize {
    std::fs::read_to_string(&env.cluster.audit_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "create"
                && e["objectRef"]["resource"] == resource
                && e["user"]["username"] == SERVER_ACCOUNT
        })
        .count()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET /metrics` over HTTPS, the certificate verified against the test CA: (status, body).
fn scrape(server: &Webhook, token: Option<&str>) -> (u16, String) {
    let conn = server.tls_session();
    let tcp = TcpStream::connect(server.metrics).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        tls,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    let _ = tls.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP answer over TLS: {response:?}"));
    (status, response)
}

/// `GET /metrics` in plain HTTP on the metrics port: whatever comes back.
fn plain_get(server: &Webhook) -> String {
    let mut tcp = TcpStream::connect(server.metrics).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = write!(
        tcp,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}
