use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::util::{self, MUTATE, TestServer, fixture};

/// Slots under test: every flood below holds twice as many connections or more.
const SLOTS: u32 = 8;
/// Connections without a byte sent (or a slot) at most.
const PRE_HANDSHAKE: u32 = 16;
/// "Answered at all": generous, so a loaded machine does not fail the test.
const ANSWERED_WITHIN: Duration = Duration::from_secs(20);

/// Deadlines far longer than the test: only evictions can make room.
async fn start() -> TestServer {
    util::start_with(|c| {
        c.max_connections = SLOTS;
        c.max_pre_handshake_connections = Some(PRE_HANDSHAKE);
        c.tls_handshake_timeout = Duration::from_secs(60);
        c.header_read_timeout = Duration::from_secs(60);
        c.body_read_timeout = Duration::from_secs(60);
        c.idle_timeout = Duration::from_secs(300);
    })
    .await
}

/// A fresh TLS connection posts the typical review and is answered 200.
async fn well_behaved_is_answered(server: &TestServer) {
    tokio::time::timeout(ANSWERED_WITHIN, util::still_serving(server))
        .await
        .expect("a well-behaved client is answered while the flood holds its connections");
}

/// A sample's value from the metrics text: `name` with its labels, as exposed.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} not in the metrics:\n{text}"))
}

/// A well-behaved client is answered, and by then at least `least` connections were closed to
/// make room for the `reason` label; returns the metrics text.
async fn answered_after_evictions(server: &TestServer, reason: &str, least: u32) -> String {
    well_behaved_is_answered(server).await;
    let text = server.scrape().await;
    let series = format!("memcached_webhook_connection_evictions_total{{reason=\"{reason}\"}}");
    let evicted = sample(&text, &series);
    assert!(evicted >= f64::from(least), "{series}: {evicted}");
    text
}

fn head(length: usize) -> String {
    format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

/// Reads a response head; its status code, 0 when the connection ended first.
async fn status(tls: &mut TlsStream<TcpStream>) -> u16 {
    let head = response_head(tls).await;
    head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// What arrived up to the end of a response head (empty when the connection ended first).
async fn response_head(tls: &mut TlsStream<TcpStream>) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match tls.read(&mut buf).await {
            Ok(0) | Err(_) => return String::new(),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_send_a_byte_take_no_slot() {
    let server = start().await;
    // Fewer than the pre-handshake ceiling but more than the slots: all held, none in a slot.
    let mut silent = Vec::new();
    for _ in 0..12 {
        silent.push(TcpStream::connect(server.webhook).await.unwrap());
    }
    util::eventually(ANSWERED_WITHIN, || async {
        let text = server.scrape().await;
        sample(
            &text,
            r#"memcached_webhook_connections{state="pre_handshake"}"#,
        ) == 12.0
    })
    .await;
    well_behaved_is_answered(&server).await;
    // Past the ceiling the oldest go; accepting goes on and clients are still answered.
    for _ in 0..3 * PRE_HANDSHAKE {
        silent.push(TcpStream::connect(server.webhook).await.unwrap());
    }
    let text = answered_after_evictions(&server, "pre_handshake", PRE_HANDSHAKE).await;
    let held = sample(
        &text,
        r#"memcached_webhook_connections{state="pre_handshake"}"#,
    );
    assert!(held <= f64::from(PRE_HANDSHAKE), "{held}");
    // The oldest silent connection was closed by the server.
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(ANSWERED_WITHIN, silent[0].read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0) | Err(_))), "{read:?}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alives_give_way_to_a_new_client() {
    let server = start().await;
    let typical = fixture("mutate-create-kubectl-apply.json");
    let mut idle = Vec::new();
    for _ in 0..3 * SLOTS {
        let mut client = tokio::time::timeout(ANSWERED_WITHIN, server.client())
            .await
            .expect("each keep-alive client gets a slot in turn");
        let (code, _) = client.post(MUTATE, typical.clone()).await;
        assert_eq!(code, hyper::StatusCode::OK);
        idle.push(client);
    }
    let text = answered_after_evictions(&server, "idle", 2 * SLOTS).await;
    assert!(
        sample(&text, "memcached_webhook_connection_pressure_seconds_total") >= 0.0,
        "the pressure counter is exposed"
    );
    // The newest keep-alive was not the one evicted: it still answers.
    let (code, _) = idle.last_mut().unwrap().post(MUTATE, typical).await;
    assert_eq!(code, hyper::StatusCode::OK);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_heads_give_way_to_a_new_client() {
    let server = start().await;
    let mut slow = Vec::new();
    for _ in 0..3 * SLOTS {
        let mut tls = tokio::time::timeout(ANSWERED_WITHIN, server.tls(&[b"http/1.1"]))
            .await
            .expect("each slow client gets a slot in turn")
            .unwrap();
        // Part of a head: the rest never comes (the header deadline is a minute away).
        tls.write_all(b"POST /mutate-memcached-c5c3-io-v1beta1-memcached HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        tls.flush().await.unwrap();
        slow.push(tls);
    }
    answered_after_evictions(&server, "incomplete", 2 * SLOTS).await;
    // The oldest was cut without an answer.
    assert_eq!(status(&mut slow[0]).await, 0);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_service_is_never_cut_to_make_room() {
    let server = start().await;
    let typical = fixture("mutate-create-kubectl-apply.json");
    let (first, rest) = typical.split_at(typical.len() / 2);
    // Every slot holds a review whose body is half sent.
    let mut busy = Vec::new();
    for _ in 0..SLOTS {
        let mut tls = server.tls(&[b"http/1.1"]).await.unwrap();
        tls.write_all(head(typical.len()).as_bytes()).await.unwrap();
        tls.write_all(first).await.unwrap();
        tls.flush().await.unwrap();
        busy.push(tls);
    }
    util::eventually(ANSWERED_WITHIN, || async {
        let text = server.scrape().await;
        sample(&text, r#"memcached_webhook_connections{state="active"}"#) == f64::from(SLOTS)
    })
    .await;
    // Newcomers of every kind find no slot they may take: they wait (or are shed).
    let mut newcomers = Vec::new();
    for _ in 0..2 * SLOTS {
        newcomers.push(TcpStream::connect(server.webhook).await.unwrap());
    }
    let waiting = tokio::spawn({
        let (addr, ca) = (server.webhook, server.ca_pem.clone());
        async move { util::still_serving_at(addr, &ca).await }
    });
    // The one that needs a slot asks the longest in service (the first) to close after its
    // answer, to hand its slot over without a race.
    util::eventually(ANSWERED_WITHIN, || async {
        let text = server.scrape().await;
        sample(
            &text,
            r#"memcached_webhook_connection_evictions_total{reason="busy"}"#,
        ) >= 1.0
    })
    .await;
    // The bodies finish: every review is answered, none was cut.
    for tls in &mut busy {
        tls.write_all(rest).await.unwrap();
        tls.flush().await.unwrap();
    }
    // The one asked says so in its answer: the longest in service, which is the first sent
    // unless the tasks began service in another order (eviction's unit tests pin the order).
    let mut said_close = 0;
    for tls in &mut busy {
        let head = response_head(tls).await;
        assert!(
            head.starts_with("HTTP/1.1 200"),
            "a review in service was cut: {head}"
        );
        said_close += usize::from(head.to_ascii_lowercase().contains("connection: close"));
    }
    assert_eq!(
        said_close, 1,
        "one connection was asked to close after its answer"
    );
    tokio::time::timeout(ANSWERED_WITHIN, waiting)
        .await
        .expect("the waiting client is answered once slots free up")
        .unwrap();
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_hello_takes_a_slot_only_once_it_has_arrived_whole() {
    let server = start().await;
    // More stalled ClientHellos than slots (a record header announcing 512 bytes, and 4 of
    // them): none takes a slot or TLS state, and none is closed to make room for another.
    let mut stalled = Vec::new();
    for _ in 0..12 {
        let mut tcp = TcpStream::connect(server.webhook).await.unwrap();
        tcp.write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc")
            .await
            .unwrap();
        stalled.push(tcp);
    }
    let states = |pre: f64| {
        let server = &server;
        move || async move {
            let text = server.scrape().await;
            sample(
                &text,
                r#"memcached_webhook_connections{state="pre_handshake"}"#,
            ) == pre
                && sample(
                    &text,
                    r#"memcached_webhook_connections{state="handshaking"}"#,
                ) == 0.0
        }
    };
    util::eventually(ANSWERED_WITHIN, states(12.0)).await;
    well_behaved_is_answered(&server).await;

    // A real ClientHello that arrives in two parts (a slow network) waits for the second,
    // still without a slot, and is then served.
    let relay = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let upstream = server.webhook;
    let relaying = tokio::spawn(async move {
        let (mut client, _) = relay.accept().await.unwrap();
        let mut hello = vec![0u8; 16 * 1024];
        let n = client.read(&mut hello).await.unwrap();
        let mut to_server = TcpStream::connect(upstream).await.unwrap();
        to_server.write_all(&hello[..3]).await.unwrap();
        released.await.unwrap();
        to_server.write_all(&hello[3..n]).await.unwrap();
        tokio::io::copy_bidirectional(&mut client, &mut to_server)
            .await
            .ok();
    });
    let slow = tokio::spawn({
        let ca = server.ca_pem.clone();
        async move { util::still_serving_at(relay_addr, &ca).await }
    });
    util::eventually(ANSWERED_WITHIN, states(13.0)).await;
    release.send(()).unwrap();
    tokio::time::timeout(ANSWERED_WITHIN, slow)
        .await
        .expect("a ClientHello in two parts is served")
        .unwrap();
    relaying.abort();
    drop(stalled);
    server.stop().await.unwrap();
}

/// A blocking TLS client that pauses `pause` before its handshake's last flight (its Finished,
/// once the server's flight has arrived), then posts the typical review: the status, 0 when
/// the server closed the connection first.
fn slow_handshake_then_review(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    pause: Duration,
) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let config = util::tls_config(ca_pem, &[b"http/1.1"], None, None);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = rustls::ClientConnection::new(std::sync::Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(addr)?;
    tcp.set_read_timeout(Some(ANSWERED_WITHIN))?;
    tls.write_tls(&mut tcp)?; // the ClientHello
    while !tls.wants_write() {
        if tls.read_tls(&mut tcp)? == 0 {
            return Ok(0);
        }
        tls.process_new_packets().map_err(std::io::Error::other)?;
    }
    std::thread::sleep(pause);
    let body = fixture("mutate-create-kubectl-apply.json");
    let mut stream = rustls::Stream::new(&mut tls, &mut tcp);
    let mut sent = head(body.len()).into_bytes();
    sent.extend_from_slice(&body);
    if stream.write_all(&sent).is_err() {
        return Ok(0);
    }
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return Ok(0),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    Ok(String::from_utf8_lossy(&seen[9..12]).parse().unwrap_or(0))
}

/// With every slot taken, a handshake that waits on its client (or, under a flood, on this
/// server's CPU) for longer than a tenth of its deadline still completes: the handshake deadline
/// does not shrink with occupancy (a shrunk one cut the API server's own dials on a starved
/// server, docs/availability.md); pressure is met by eviction instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_handshake_is_not_cut_when_slots_are_full() {
    let server = util::start_with(|c| {
        c.max_connections = SLOTS;
        c.max_pre_handshake_connections = Some(PRE_HANDSHAKE);
        // A tenth of it, what a shrinking deadline would leave, is well under the pause below.
        c.tls_handshake_timeout = Duration::from_secs(20);
        c.header_read_timeout = Duration::from_secs(60);
        c.idle_timeout = Duration::from_secs(300);
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..SLOTS {
        idle.push(server.tls(&[b"http/1.1"]).await.unwrap());
    }
    let (addr, ca) = (server.webhook, server.ca_pem.clone());
    let pause = Duration::from_secs(3);
    let status = tokio::task::spawn_blocking(move || slow_handshake_then_review(addr, &ca, pause))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200, "the slow handshake was cut");
    let text = server.scrape().await;
    let series = r#"memcached_webhook_connection_evictions_total{reason="incomplete"}"#;
    assert!(sample(&text, series) >= 1.0, "it took a full server's slot");
    drop(idle);
    server.stop().await.unwrap();
}

/// An idle HTTP/1 connection evicted to make room is reset, not ended: a request its client
/// writes after the reset has arrived fails before a byte is sent, which Go's transport (the
/// API server's) retries on another connection; after a FIN it would be sent, and lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_idle_connection_is_reset() {
    let server = start().await;
    let mut idle = Vec::new();
    for _ in 0..SLOTS {
        idle.push(server.tls(&[b"http/1.1"]).await.unwrap());
    }
    well_behaved_is_answered(&server).await;
    // The longest idle since its handshake went first.
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(ANSWERED_WITHIN, idle[0].read(&mut byte))
        .await
        .expect("the oldest idle connection was closed to make room");
    let kind = read.map(|n| format!("{n} bytes")).map_err(|e| e.kind());
    assert_eq!(kind, Err(std::io::ErrorKind::ConnectionReset));
    server.stop().await.unwrap();
}

/// A flood from one address gives way to itself: a connection parked unused since its
/// handshake (as the API server's transport parks a spare dial), which alone would be the first
/// to go, stays while another address floods the slots, and carries a review after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_from_another_address_spares_a_parked_connection() {
    let server = start().await;
    let parked = server.tls(&[b"http/1.1"]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let config = std::sync::Arc::new(util::tls_config(&server.ca_pem, &[b"http/1.1"], None, None));
    let mut flood = Vec::new();
    for _ in 0..3 * SLOTS {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let tcp = socket.connect(server.webhook).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio::time::timeout(
            ANSWERED_WITHIN,
            tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp),
        )
        .await
        .expect("each flood connection gets a slot in turn");
        flood.push(tls.unwrap());
    }
    let text = server.scrape().await;
    let series = r#"memcached_webhook_connection_evictions_total{reason="incomplete"}"#;
    assert!(sample(&text, series) >= f64::from(2 * SLOTS), "{text}");
    let mut client = util::client_over(parked).await;
    let (code, _) = client
        .post(MUTATE, fixture("mutate-create-kubectl-apply.json"))
        .await;
    assert_eq!(
        code,
        hyper::StatusCode::OK,
        "the parked connection was kept"
    );
    drop(flood);
    server.stop().await.unwrap();
}
