use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::util::{self, MUTATE, fixture};

#[tokio::test]
async fn a_request_in_flight_finishes_and_new_connections_are_refused() {
    let mut server = util::start().await;
    let body = fixture("mutate-create-kubectl-apply.json");
    let mut tls = server.tls(&[b"http/1.1"]).await.unwrap();
    let head = format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body[..100]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    server.signal_stop();
    util::eventually(Duration::from_secs(5), || async {
        let (status, text) = server.probe("/readyz").await;
        status == 503 && text.contains("shutting down") || status == 0
    })
    .await;
    util::eventually(Duration::from_secs(5), || async {
        tokio::net::TcpStream::connect(server.webhook)
            .await
            .is_err()
    })
    .await;

    // The rest of the body arrives after the signal: the request is still answered.
    tls.write_all(&body[100..]).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer))
        .await
        .unwrap()
        .ok();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"allowed\":true"));
    tokio::time::timeout(Duration::from_secs(5), server.join())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_drain_is_bounded_by_the_grace_period() {
    let mut server =
        util::start_with(|c| c.shutdown_grace_period = Duration::from_millis(200)).await;
    let mut tls = server.tls(&[b"http/1.1"]).await.unwrap();
    tls.write_all(format!("POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n").as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.signal_stop();
    // The body never completes; run() still returns soon after the grace period.
    tokio::time::timeout(Duration::from_secs(3), server.join())
        .await
        .expect("drain bounded")
        .unwrap();
}
