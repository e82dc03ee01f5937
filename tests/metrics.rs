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
