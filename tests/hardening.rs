use std::time::{Duration, Instant};

use hyper::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::util::{self, MUTATE, fixture};

/// Short bounds so that the tests never sleep long.
fn short(c: &mut memcached_webhook::config::Config) {
    c.tls_handshake_timeout = Duration::from_millis(300);
    c.header_read_timeout = Duration::from_millis(300);
    c.body_read_timeout = Duration::from_millis(300);
    c.idle_timeout = Duration::from_millis(600);
}

/// Reads until the peer closes (or errors); returns what arrived and how long it took.
async fn until_closed(stream: &mut (impl AsyncReadExt + Unpin)) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return (seen, started.elapsed()),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server kept the connection open for 5 s"),
        }
    }
}

#[tokio::test]
async fn plain_http_and_garbage_on_the_tls_port_are_dropped() {
    let server = util::start_with(short).await;
    for junk in [
        &b"POST / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"\x00\x01garbage\xff",
    ] {
        let mut tcp = TcpStream::connect(server.webhook).await.unwrap();
        tcp.write_all(junk).await.unwrap();
        let (_, took) = until_closed(&mut tcp).await;
        assert!(took < Duration::from_secs(2));
    }
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_handshake_that_never_finishes_is_cut_off() {
    let server = util::start_with(short).await;
    let mut silent = TcpStream::connect(server.webhook).await.unwrap();
    util::still_serving(&server).await;
    let (_, took) = until_closed(&mut silent).await;
    assert!(
        took >= Duration::from_millis(200),
        "closed before the deadline: {took:?}"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn slow_headers_are_cut_off_while_others_are_served() {
    let server = util::start_with(short).await;
    let mut slow = server.tls(&[b"http/1.1"]).await.unwrap();
    slow.write_all(b"POST /mutate-memcached-c5c3-io-v1beta1-memcached HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let cut = tokio::spawn(async move {
        // One more header byte a while later must not reset the deadline.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let _ = slow.write_all(b"X").await;
        until_closed(&mut slow).await
    });
    util::still_serving(&server).await;
    let (answer, took) = cut.await.unwrap();
    assert!(answer.is_empty(), "no response to an unfinished request");
    assert!(took < Duration::from_secs(2), "{took:?}");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_slow_body_gets_408() {
    let server = util::start_with(short).await;
    let mut slow = server.tls(&[b"http/1.1"]).await.unwrap();
    slow.write_all(b"POST /mutate-memcached-c5c3-io-v1beta1-memcached HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\"").await.unwrap();
    util::still_serving(&server).await;
    let (answer, _) = until_closed(&mut slow).await;
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed_after_the_idle_timeout() {
    let server = util::start_with(short).await;
    let mut tls = server.tls(&[b"http/1.1"]).await.unwrap();
    let body = fixture("mutate-create-kubectl-apply.json");
    let head = format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(&body).await.unwrap();
    let (answer, took) = until_closed(&mut tls).await;
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
    assert!(
        took >= Duration::from_millis(400),
        "idle connection closed too early: {took:?}"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn oversized_headers_are_refused() {
    let server = util::start_with(|c| c.max_header_bytes = 8192).await;
    let mut tls = server.tls(&[b"http/1.1"]).await.unwrap();
    let big = format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    let _ = tls.write_all(big.as_bytes()).await;
    let (answer, _) = until_closed(&mut tls).await;
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 431"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_connection_beyond_the_cap_takes_the_longest_idle_one_s_slot() {
    let server = util::start_with(|c| c.max_connections = 2).await;
    let mut a = server.client().await;
    let mut b = server.client().await;
    for client in [&mut a, &mut b] {
        let (status, _) = client
            .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    // b answered last: a has been idle longest and is closed (between requests) for a third.
    let (status, _) = b
        .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
        .await;
    assert_eq!(status, StatusCode::OK);
    util::still_serving(&server).await;
    util::eventually(Duration::from_secs(5), || async { a.sender.is_closed() }).await;
    let (status, _) = b
        .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
        .await;
    assert_eq!(status, StatusCode::OK, "the other keep-alive is kept");
    server.stop().await.unwrap();
}

#[tokio::test]
async fn hundreds_of_idle_connections_are_dropped_and_others_are_served() {
    let server = util::start_with(short).await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(server.webhook).await.unwrap());
    }
    util::still_serving(&server).await;
    // Every idle connection is closed once its handshake deadline passes.
    for mut tcp in idle {
        let (_, took) = until_closed(&mut tcp).await;
        assert!(took < Duration::from_secs(3));
    }
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}
