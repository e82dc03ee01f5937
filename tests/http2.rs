//! HTTP/2 clients that break the rules, written frame by frame: a well-behaved client library
//! would never open too many streams or flood resets, so it could not show the server's limits.

use std::time::Duration;

use memcached_webhook::admission::{Review, Webhook};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::util::{self, MUTATE, fixture};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const CANCEL: u32 = 0x8;
const REFUSED_STREAM: u32 = 0x7;
const ENHANCE_YOUR_CALM: u32 = 0xb;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    fn error_code(&self) -> u32 {
        let at = if self.kind == GOAWAY { 4 } else { 0 };
        u32::from_be_bytes(self.payload[at..at + 4].try_into().unwrap())
    }

    /// A GOAWAY's last stream id (the highest the server may have processed).
    fn last_stream(&self) -> u32 {
        u32::from_be_bytes(self.payload[..4].try_into().unwrap()) & 0x7fff_ffff
    }

    /// A GOAWAY's debug data: h2 names the limit that was hit.
    fn debug_data(&self) -> String {
        String::from_utf8_lossy(&self.payload[8..]).into_owned()
    }

    /// The value of one parameter of a SETTINGS frame.
    fn setting(&self, id: u16) -> Option<u32> {
        self.payload.chunks_exact(6).find_map(|entry| {
            (u16::from_be_bytes([entry[0], entry[1]]) == id)
                .then(|| u32::from_be_bytes(entry[2..6].try_into().unwrap()))
        })
    }
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// An HPACK header block: indexed `:method`, `:scheme: https`, then `:path`, `:authority` and
/// (for a POST) `content-type` as literals without indexing (RFC 7541 6.2.2) naming static
/// table entries, so the server's dynamic table never changes.
fn request_headers(post: bool, path: &str) -> Vec<u8> {
    let mut block = vec![if post { 0x83 } else { 0x82 }, 0x87];
    let mut literal = |name: &[u8], value: &str| {
        assert!(value.len() < 127);
        block.extend(name);
        block.push(value.len() as u8);
        block.extend(value.as_bytes());
    };
    literal(&[4], path);
    literal(&[1], "localhost");
    if post {
        // Index 31 does not fit the 4-bit prefix: 15, then 31 - 15.
        literal(&[0x0f, 31 - 15], "application/json");
    }
    block
}

/// A header with a name outside the static table, as a literal without indexing (new name).
fn literal_header(name: &[u8], value: &[u8]) -> Vec<u8> {
    assert!(name.len() < 127 && value.len() < 127);
    let mut out = vec![0x00, name.len() as u8];
    out.extend(name);
    out.push(value.len() as u8);
    out.extend(value);
    out
}

struct Conn {
    io: tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// Connects with ALPN h2, sends the preface and empty SETTINGS, and returns the server's SETTINGS.
    async fn open(server: &util::TestServer) -> (Conn, Frame) {
        let io = server.tls(&[b"h2"]).await.unwrap();
        assert_eq!(io.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let mut conn = Conn {
            io,
            buf: Vec::new(),
        };
        let mut hello = PREFACE.to_vec();
        hello.extend(frame(SETTINGS, 0, 0, &[]));
        conn.send(&hello).await;
        let settings = conn.next().await.expect("the server sends SETTINGS first");
        assert_eq!((settings.kind, settings.flags), (SETTINGS, 0));
        conn.send(&frame(SETTINGS, ACK, 0, &[])).await;
        (conn, settings)
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
        self.io.flush().await.unwrap();
    }

    /// The next frame, or None once the server has closed the connection.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let head: Vec<u8> = self.buf.drain(..9 + len).collect();
                    return Some(Frame {
                        kind: head[3],
                        flags: head[4],
                        stream: u32::from_be_bytes(head[5..9].try_into().unwrap()) & 0x7fff_ffff,
                        payload: head[9..].to_vec(),
                    });
                }
            }
            let mut chunk = [0u8; 16384];
            let read = tokio::time::timeout(Duration::from_secs(5), self.io.read(&mut chunk))
                .await
                .expect("the server neither answered nor closed within 5 s");
            match read {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Writes a burst the server may cut off halfway: a failed write is part of being cut off.
    async fn flood(&mut self, bytes: &[u8]) {
        let _ = self.io.write_all(bytes).await;
        let _ = self.io.flush().await;
    }

    /// Expects `GOAWAY ENHANCE_YOUR_CALM` and then the connection closed; returns the GOAWAY.
    async fn calmed_down(&mut self) -> Frame {
        let goaway = self
            .until(|f| f.kind == GOAWAY)
            .await
            .expect("the connection gets GOAWAY");
        assert_eq!(goaway.error_code(), ENHANCE_YOUR_CALM, "{goaway:?}");
        assert!(self.until(|_| false).await.is_none(), "and is then closed");
        goaway
    }

    /// The answer's body on `stream`, which must come before any reset or GOAWAY.
    async fn body(&mut self, stream: u32) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let f = self
                .until(|f| f.kind == DATA || f.kind == RST_STREAM || f.kind == GOAWAY)
                .await
                .expect("an answer");
            assert_eq!((f.kind, f.stream), (DATA, stream), "{f:?}");
            body.extend(&f.payload);
            if f.flags & END_STREAM != 0 {
                return body;
            }
        }
    }

    /// Frames until one matches, skipping the rest (window updates, pings, settings acks).
    async fn until(&mut self, wanted: impl Fn(&Frame) -> bool) -> Option<Frame> {
        while let Some(f) = self.next().await {
            if wanted(&f) {
                return Some(f);
            }
        }
        None
    }
}

fn h2(c: &mut memcached_webhook::config::Config) {
    c.enable_http2 = true;
    c.http2_max_concurrent_streams = 2;
}

#[tokio::test]
async fn streams_beyond_the_limit_are_refused_and_open_ones_finish() {
    let server = util::start_with(h2).await;
    let (mut conn, settings) = Conn::open(&server).await;
    assert_eq!(settings.setting(SETTINGS_MAX_CONCURRENT_STREAMS), Some(2));

    // Two requests whose bodies have not come yet hold both streams; a third is refused.
    let mut burst = Vec::new();
    for stream in [1, 3, 5] {
        burst.extend(frame(
            HEADERS,
            END_HEADERS,
            stream,
            &request_headers(true, MUTATE),
        ));
    }
    conn.send(&burst).await;
    let refused = conn
        .until(|f| f.kind == RST_STREAM || f.kind == GOAWAY)
        .await
        .expect("the server answers the third stream");
    assert_eq!(
        (refused.kind, refused.stream),
        (RST_STREAM, 5),
        "{refused:?}"
    );
    assert_eq!(refused.error_code(), REFUSED_STREAM);

    // The two streams within the limit are still served.
    let body = fixture("mutate-create-kubectl-apply.json");
    for stream in [1, 3] {
        conn.send(&frame(DATA, END_STREAM, stream, &body)).await;
        let answer = conn
            .until(|f| f.kind == DATA || f.kind == RST_STREAM || f.kind == GOAWAY)
            .await
            .expect("an answer");
        assert_eq!((answer.kind, answer.stream), (DATA, stream), "{answer:?}");
        let text = String::from_utf8_lossy(&answer.payload);
        assert!(text.contains(r#""allowed":true"#), "{text}");
    }
    drop(conn);
    server.stop().await.unwrap();
}

/// A body in a thousand tiny DATA frames (over HTTP/2 the server copies it as it comes rather
/// than hold its frames, see `server/body.rs`'s `Plan`) is answered exactly as a whole parse answers it.
#[tokio::test]
async fn a_body_in_many_tiny_frames_gets_the_whole_parse_answer() {
    let server = util::start_with(h2).await;
    let (mut conn, _) = Conn::open(&server).await;
    let body = fixture("mutate-create-kubectl-apply.json");
    let mut expected = Vec::new();
    Review::new(Webhook::Mutate)
        .answer_whole(&mut body.clone(), &mut expected)
        .unwrap();
    let mut request = frame(HEADERS, END_HEADERS, 1, &request_headers(true, MUTATE));
    let (last, rest) = body.split_last().unwrap();
    for byte in rest.chunks(2) {
        request.extend(frame(DATA, 0, 1, byte));
    }
    request.extend(frame(DATA, END_STREAM, 1, std::slice::from_ref(last)));
    conn.send(&request).await;
    let answer = conn.body(1).await;
    assert_eq!(
        String::from_utf8_lossy(&answer),
        String::from_utf8_lossy(&expected)
    );
    drop(conn);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_rapid_reset_flood_is_cut_off_while_others_are_served() {
    let server = util::start_with(h2).await;
    let (mut calm, _) = Conn::open(&server).await;
    let (mut flood, _) = Conn::open(&server).await;
    // CVE-2023-44487: open and cancel streams as fast as possible, never more than the limit
    // open at once. Each pair is one write the server sees together.
    let mut burst = Vec::new();
    for i in 0..500u32 {
        let stream = 2 * i + 1;
        burst.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            stream,
            &request_headers(false, "/healthz"),
        ));
        burst.extend(frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes()));
    }
    flood.flood(&burst).await;
    let goaway = flood.calmed_down().await;
    // The 21st cancelled stream (ids 1, 3, ..., 41) is one more than the 20 allowed pending.
    assert_eq!(
        (goaway.last_stream(), goaway.debug_data().as_str()),
        (41, "too_many_resets")
    );

    // A connection opened before the flood, and a new HTTP/1.1 one, are answered.
    let mut request = frame(HEADERS, END_HEADERS, 1, &request_headers(true, MUTATE));
    request.extend(frame(
        DATA,
        END_STREAM,
        1,
        &fixture("mutate-create-kubectl-apply.json"),
    ));
    calm.send(&request).await;
    let answer = calm
        .until(|f| f.kind == DATA || f.kind == GOAWAY)
        .await
        .expect("an answer");
    assert_eq!((answer.kind, answer.stream), (DATA, 1), "{answer:?}");
    util::still_serving(&server).await;
    drop(calm);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_client_that_makes_the_server_reset_streams_is_cut_off() {
    let server = util::start_with(h2).await;
    let (mut flood, _) = Conn::open(&server).await;
    // CVE-2025-8671 ("MadeYouReset"): each request is malformed (a connection-specific header,
    // RFC 9113 8.2.2), so the server resets the stream itself; the cap on such resets ends the
    // connection before the work behind them piles up.
    let mut malformed = request_headers(false, "/healthz");
    malformed.extend(literal_header(b"connection", b"close"));
    let malformed_streams = |ids: std::ops::Range<u32>| {
        let mut burst = Vec::new();
        for i in ids {
            burst.extend(frame(
                HEADERS,
                END_HEADERS | END_STREAM,
                2 * i + 1,
                &malformed,
            ));
        }
        burst
    };
    // 1024 are tolerated: a PING after them is still answered.
    let mut burst = malformed_streams(0..1024);
    burst.extend(frame(PING, 0, 0, b"tolerate"));
    flood.send(&burst).await;
    let pong = flood
        .until(|f| f.kind == PING || f.kind == GOAWAY)
        .await
        .expect("the server answers the PING");
    assert_eq!((pong.kind, pong.flags), (PING, ACK), "{pong:?}");
    assert_eq!(pong.payload, b"tolerate");
    // The 1025th ends the connection.
    flood.flood(&malformed_streams(1024..1025)).await;
    assert_eq!(
        flood.calmed_down().await.debug_data(),
        "too_many_internal_resets"
    );
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

#[tokio::test]
async fn an_endless_header_block_is_cut_off() {
    let server = util::start_with(h2).await;
    let (mut flood, _) = Conn::open(&server).await;
    // CVE-2024-27316 class: HEADERS without END_HEADERS, then CONTINUATION frames forever,
    // each adding a header the server has to buffer until the block ends.
    let header = literal_header(b"x-pad", &[b'a'; 100]);
    let mut burst = frame(HEADERS, 0, 1, &request_headers(false, "/healthz"));
    for _ in 0..5_000 {
        burst.extend(frame(CONTINUATION, 0, 1, &header));
    }
    flood.flood(&burst).await;
    assert_eq!(
        flood.calmed_down().await.debug_data(),
        "too_many_continuations"
    );
    util::still_serving(&server).await;
    server.stop().await.unwrap();
}

/// A small body is answered alike over HTTP/2 and HTTP/1.1, what no rule reads skipped on both:
/// a review whose `managedFields` is not JSON (which the kube-apiserver never sends) is refused
/// by a whole parse, and answered by both protocols' skip (README, "What is not parsed").
#[tokio::test]
async fn a_small_body_skips_alike_over_http2_and_http1() {
    let server = util::start_with(h2).await;
    let sent = String::from_utf8(fixture("mutate-update-kubectl-apply.json")).unwrap();
    let body = sent
        .replacen(r#""managedFields":[{"#, r#""managedFields":[tru,{"#, 1)
        .into_bytes();
    assert_ne!(body.len(), sent.len());
    let whole = Review::new(Webhook::Mutate).answer_whole(&mut body.clone(), &mut Vec::new());
    assert!(whole.is_err(), "a whole parse refuses it");

    let (status, over_http1) = server.client().await.post(MUTATE, body.clone()).await;
    assert_eq!(status, hyper::StatusCode::OK);

    let (mut conn, _) = Conn::open(&server).await;
    let mut headers = request_headers(true, MUTATE);
    // content-length (static table index 28, past the 4-bit prefix): a declared small body.
    let length = body.len().to_string();
    headers.extend([0x0f, 28 - 15, length.len() as u8]);
    headers.extend(length.as_bytes());
    let mut request = frame(HEADERS, END_HEADERS, 1, &headers);
    request.extend(frame(DATA, END_STREAM, 1, &body));
    conn.send(&request).await;
    let over_http2 = conn.body(1).await;
    assert_eq!(
        String::from_utf8_lossy(&over_http2),
        String::from_utf8_lossy(&over_http1)
    );
    assert!(
        over_http2.starts_with(b"{")
            && String::from_utf8_lossy(&over_http2).contains(r#""allowed":true"#)
    );
    drop(conn);
    server.stop().await.unwrap();
}
