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

/// POSTs the typical review on `client`: its status and `Connection` header.
async fn answer(client: &mut util::Client) -> (u16, Option<String>) {
    let req = hyper::Request::post(MUTATE)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(fixture(
            "mutate-create-kubectl-apply.json",
        ))))
        .unwrap();
    let resp = client.sender.send_request(req).await.expect("answered");
    let connection = resp
        .headers()
        .get(hyper::header::CONNECTION)
        .map(|v| v.to_str().unwrap().to_owned());
    (resp.status().as_u16(), connection)
}

fn closed(text: &str, reason: &str, when: &str) -> f64 {
    let series = format!(
        "memcached_webhook_connections_closed_total{{reason=\"{reason}\",when=\"{when}\"}}"
    );
    text.lines()
        .find_map(|l| l.strip_prefix(&series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} not in the metrics:\n{text}"))
}

#[tokio::test]
async fn from_the_signal_every_answer_says_close_and_ends_its_connection() {
    let mut server = util::start_with(|c| c.shutdown_delay = Duration::from_secs(60)).await;
    let mut client = server.client().await;
    let (status, connection) = answer(&mut client).await;
    assert_eq!(status, 200);
    assert_ne!(
        connection.as_deref(),
        Some("close"),
        "kept alive while serving"
    );

    server.signal_stop();
    util::eventually(Duration::from_secs(5), || async {
        server.probe("/readyz").await.0 == 503
    })
    .await;
    // The next answer on the kept-alive connection says close, and the server closes it after.
    assert_eq!(answer(&mut client).await, (200, Some("close".to_owned())));
    util::eventually(Duration::from_secs(5), || async {
        client.sender.is_closed()
    })
    .await;
    // A connection opened during the delay (endpoints not yet updated) is served and told too.
    let mut late = server.client().await;
    assert_eq!(answer(&mut late).await, (200, Some("close".to_owned())));
    util::eventually(Duration::from_secs(5), || async { late.sender.is_closed() }).await;
    util::eventually(Duration::from_secs(5), || async {
        closed(&server.scrape().await, "shutdown", "after_answer") == 2.0
    })
    .await;
    assert_eq!(closed(&server.scrape().await, "shutdown", "idle"), 0.0);
}

#[tokio::test]
async fn an_idle_keep_alive_outlives_the_listener_until_its_client_closes_it() {
    let mut server = util::start_with(|c| {
        c.shutdown_delay = Duration::ZERO;
        c.shutdown_grace_period = Duration::from_secs(60);
    })
    .await;
    let mut idle = server.client().await;
    let mut other = server.client().await;
    for client in [&mut idle, &mut other] {
        assert_eq!(answer(client).await.0, 200);
    }
    server.signal_stop();
    util::eventually(Duration::from_secs(5), || async {
        tokio::net::TcpStream::connect(server.webhook)
            .await
            .is_err()
    })
    .await;
    // The drain has begun and leaves both idle keep-alives open: closing one now could meet
    // a request its client is writing into it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!idle.sender.is_closed() && !other.sender.is_closed());
    // A last request on one is answered, says close, and the server closes it after.
    assert_eq!(answer(&mut idle).await, (200, Some("close".to_owned())));
    util::eventually(Duration::from_secs(5), || async { idle.sender.is_closed() }).await;
    let text = server.scrape().await;
    assert_eq!(closed(&text, "shutdown", "after_answer"), 1.0);
    // Its client closes the other (its own idle timeout): the server exits, long before the
    // grace period ends.
    drop(other);
    tokio::time::timeout(Duration::from_secs(10), server.join())
        .await
        .expect("the server exits once its clients have closed their connections")
        .unwrap();
}

#[tokio::test]
async fn the_grace_period_ends_an_idle_keep_alive_too() {
    let mut server = util::start_with(|c| {
        c.shutdown_delay = Duration::ZERO;
        c.shutdown_grace_period = Duration::from_millis(300);
    })
    .await;
    let mut idle = server.client().await;
    assert_eq!(answer(&mut idle).await.0, 200);
    server.signal_stop();
    tokio::time::timeout(Duration::from_secs(5), server.join())
        .await
        .expect("drain bounded")
        .unwrap();
}
