use hyper::StatusCode;

use crate::util::{self, MUTATE, fixture};

/// The value of the sample `name{labels}` in an exposition, or 0 when absent.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .split(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn counts_follow_a_known_sequence_of_requests() {
    let server = util::start().await;
    let mut client = server.client().await;
    for _ in 0..3 {
        assert_eq!(
            client
                .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
                .await
                .0,
            StatusCode::OK
        );
    }
    let validate = "/validate-memcached-c5c3-io-v1beta1-memcached";
    assert_eq!(
        client
            .post(validate, fixture("validate-create-kubectl-create.json"))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        client.post(MUTATE, b"{".to_vec()).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        client.post("/nope", b"{}".to_vec()).await.0,
        StatusCode::NOT_FOUND
    );
    // A replicas-with-autoscaling object draws a warning from the defaulter.
    let mut review = util::json(&fixture("mutate-create-kubectl-apply.json"));
    review["request"]["object"]["spec"] =
        serde_json::json!({"replicas": 2, "autoscaling": {"enabled": true}});
    assert_eq!(
        client
            .post(MUTATE, serde_json::to_vec(&review).unwrap())
            .await
            .0,
        StatusCode::OK
    );
    // A failed handshake: plain HTTP on the TLS port.
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(server.webhook)
            .await
            .unwrap();
        tcp.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let _ = tcp.read(&mut [0u8; 64]).await;
    }

    let text = server.scrape().await;
    let m = format!("webhook=\"{MUTATE}\"");
    let v = format!("webhook=\"{validate}\"");
    assert_eq!(
        sample(
            &text,
            &format!("controller_runtime_webhook_requests_total{{{m},code=\"200\"}}")
        ),
        4.0,
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &format!("controller_runtime_webhook_requests_total{{{m},code=\"400\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("controller_runtime_webhook_requests_total{{{v},code=\"200\"}}")
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("controller_runtime_webhook_latency_seconds_count{{{m}}}")
        ),
        5.0
    );
    assert_eq!(
        sample(
            &text,
            &format!("controller_runtime_webhook_requests_in_flight{{{m}}}")
        ),
        0.0
    );
    assert_eq!(
        sample(
            &text,
            &format!(
                "memcached_webhook_admissions_total{{{m},operation=\"CREATE\",verdict=\"allowed\"}}"
            )
        ),
        4.0
    );
    assert_eq!(
        sample(&text, &format!("memcached_webhook_warnings_total{{{m}}}")),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "memcached_webhook_bad_requests_total{reason=\"not_admission_review\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &text,
            "memcached_webhook_bad_requests_total{reason=\"not_found\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(&text, "memcached_webhook_connections_open"),
        1.0,
        "the keep-alive client"
    );
    assert_eq!(
        sample(
            &text,
            "memcached_webhook_certificate_reloads_total{result=\"success\"}"
        ),
        1.0
    );
    assert!(
        sample(
            &text,
            "memcached_webhook_certificate_expiry_timestamp_seconds"
        ) > 1.7e9
    );
    util::eventually(std::time::Duration::from_secs(3), || async {
        sample(
            &server.scrape().await,
            "memcached_webhook_tls_handshake_failures_total{reason=\"error\"}",
        ) == 1.0
    })
    .await;
    assert!(sample(&text, "process_resident_memory_bytes") > 0.0);
    assert_eq!(
        sample(&text, "memcached_webhook_log_lines_dropped_total"),
        0.0
    );
    server.stop().await.unwrap();
}

/// `GET /metrics` over HTTPS on the metrics port, verified against `ca_pem`, with `token` as
/// the bearer token: (status, `WWW-Authenticate`, body).
pub async fn scrape_tls(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    token: Option<&str>,
) -> (StatusCode, Option<String>, String) {
    use http_body_util::BodyExt;
    let tls = util::connect(addr, ca_pem, &[b"http/1.1"], None, None)
        .await
        .expect("the metrics port speaks TLS with the serving certificate");
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get("/metrics").header("host", "localhost");
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let req = req
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = sender.send_request(req).await.expect("an answer");
    let status = resp.status();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        challenge,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// A server with `--metrics-secure` whose kubeconfig names an API server on a closed loopback
/// port (the kubeconfig's directory lives as long as the second value).
async fn secure_server() -> (util::TestServer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = unreachable_kubeconfig(dir.path());
    let server = util::start_with(|c| {
        c.metrics_secure = Some(true);
        c.kubeconfig = Some(kubeconfig);
    })
    .await;
    (server, dir)
}

/// A kubeconfig naming an API server on a closed loopback port.
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("unreachable.kubeconfig");
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\n\
         clusters: [{name: gone, cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}}]\n\
         users: [{name: scraper, user: {token: \"not-used\"}}]\n\
         contexts: [{name: gone, context: {cluster: gone, user: scraper}}]\n\
         current-context: gone\n",
    )
    .unwrap();
    path
}

/// `--metrics-secure` without an API server to ask: HTTPS only, 401 without a token, 503 with
/// the reason with one, and the webhook and readiness unaffected. The real reviews are checked
/// in the real-apiserver suite (tests/apiserver/metrics.rs).
#[tokio::test]
async fn the_secure_port_wants_tls_and_a_token_and_never_touches_the_webhook() {
    let (server, _kubeconfig) = secure_server().await;
    let addr = server.metrics.expect("metrics on");

    // Plain HTTP gets no metrics.
    let (status, body) = util::get(addr, "/metrics").await;
    assert_ne!(status, 200, "{body}");
    assert!(!body.contains("controller_runtime_webhook"), "{body}");

    let (status, challenge, body) = scrape_tls(addr, &server.ca_pem, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(challenge.as_deref(), Some("Bearer"));
    assert!(body.contains("needs a bearer token"), "{body}");

    let (status, _, body) = scrape_tls(addr, &server.ca_pem, Some("some-token")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        body.contains("cannot check the scrape's token") && body.contains("TokenReview"),
        "{body}"
    );

    // Readiness and admissions do not depend on it.
    assert_eq!(server.probe("/readyz").await.0, 200);
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

/// The metrics port serves whatever certificate the webhook port serves: a rotation reaches
/// both through the one resolver, with no gap.
#[tokio::test]
async fn a_certificate_rotation_reaches_the_metrics_port() {
    let (server, _kubeconfig) = secure_server().await;
    let addr = server.metrics.expect("metrics on");
    assert_eq!(
        scrape_tls(addr, &server.ca_pem, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    // A new CA and certificate, written in place (key first: a straddled read is retried).
    let (ca2, cert2, key2) = memcached_webhook::dev::generate().unwrap();
    std::fs::write(server._dir.path().join("tls.key"), key2).unwrap();
    std::fs::write(server._dir.path().join("tls.crt"), cert2).unwrap();
    util::eventually(std::time::Duration::from_secs(10), || async {
        util::connect(addr, &ca2, &[b"http/1.1"], None, None)
            .await
            .is_ok()
    })
    .await;
    assert_eq!(
        scrape_tls(addr, &ca2, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    util::still_serving_at(server.webhook, &ca2).await;
    server.stop().await.unwrap();
}
