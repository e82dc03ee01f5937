use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, StatusCode};
use serde_json::json;

use crate::util::{self, MUTATE, fixture, patch_of};

#[tokio::test]
async fn captured_reviews_are_defaulted_over_one_keep_alive_connection() {
    let server = util::start().await;
    let mut client = server.client().await;
    for name in [
        "mutate-create-kubectl-apply.json",
        "mutate-update-kubectl-apply.json",
        "validate-create-kubectl-create.json",
    ] {
        let body = fixture(name);
        let request = util::json(&body);
        let (status, bytes) = client.post(&format!("{MUTATE}?timeout=10s"), body).await;
        assert_eq!(status, StatusCode::OK, "{name}");
        let response = util::json(&bytes);
        assert_eq!(response["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(response["kind"], "AdmissionReview");
        assert_eq!(
            response["response"]["uid"], request["request"]["uid"],
            "{name}"
        );
        assert_eq!(response["response"]["allowed"], true);
        let patch: json_patch::Patch = serde_json::from_value(patch_of(&response)).unwrap();
        let mut object = request["request"]["object"].clone();
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(
            object["metadata"], request["request"]["object"]["metadata"],
            "{name}: metadata untouched"
        );
        for field in ["maxMemoryMB", "maxConnections", "threads", "maxItemSize"] {
            assert!(
                object["spec"]["memcached"].get(field).is_some(),
                "{name}: {field} defaulted"
            );
        }
    }
    server.stop().await.unwrap();
}

#[tokio::test]
async fn http2_is_served_with_the_flag_only() {
    let server = util::start_with(|c| c.enable_http2 = true).await;
    let tls = server.tls(&[b"h2", b"http/1.1"]).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = Request::post(format!("https://localhost{MUTATE}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(fixture(
            "mutate-create-kubectl-apply.json",
        ))))
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.version(), hyper::Version::HTTP_2);
    assert_eq!(resp.status(), StatusCode::OK);
    server.stop().await.unwrap();

    // Without the flag, ALPN offers http/1.1 only.
    let server = util::start().await;
    let tls = server.tls(&[b"h2", b"http/1.1"]).await.unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert!(
        server.tls(&[b"h2"]).await.is_err(),
        "an h2-only client is refused"
    );
    server.stop().await.unwrap();
}

#[tokio::test]
async fn malformed_requests_get_a_specific_http_error() {
    let server = util::start_with(|c| c.max_request_bytes = 64 * 1024).await;
    let mut client = server.client().await;
    let review = fixture("mutate-create-kubectl-apply.json");

    let (status, body) = client.post("/mutate", review.clone()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(String::from_utf8_lossy(&body).contains(MUTATE));

    let get = Request::get(MUTATE)
        .header("host", "x")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, _) = client.send(get).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    let yaml = Request::post(MUTATE)
        .header("host", "x")
        .header("content-type", "application/yaml")
        .body(Full::new(Bytes::from(review.clone())))
        .unwrap();
    let (status, _) = client.send(yaml).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    for (body, needle) in [
        (&b""[..], "empty"),
        (b"{\"kind\":", "truncated"),
        (
            b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{}}",
            "request.uid",
        ),
        (b"\xff\xfe", "UTF-8"),
    ] {
        let (status, text) = client.post(MUTATE, body.to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let text = String::from_utf8_lossy(&text);
        assert!(
            text.contains(needle) && text.trim_end().lines().count() == 1,
            "{text}"
        );
    }

    let deep = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","x":{}{}}}}}"#,
        "[".repeat(3000),
        "]".repeat(3000)
    );
    let (status, text) = client.post(MUTATE, deep).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&text).contains("1024 levels"));

    // A wrongly typed object is answered in the review (HTTP 200, allowed: false, code 400).
    let mut bad = util::json(&review);
    bad["request"]["object"]["spec"]["replicas"] = json!("3");
    let (status, body) = client.post(MUTATE, serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let response = util::json(&body);
    assert_eq!(response["response"]["allowed"], false);
    assert_eq!(response["response"]["status"]["code"], 400);
    assert_eq!(
        response["response"]["status"]["message"],
        "spec.replicas: expected an integer, found a string"
    );

    // The connection is still good after all of that.
    let (status, _) = client.post(MUTATE, review).await;
    assert_eq!(status, StatusCode::OK);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn oversized_bodies_get_413_without_being_read() {
    let server = util::start_with(|c| c.max_request_bytes = 64 * 1024).await;
    // Declared too large: answered before a byte of the body is sent.
    let mut client = server.client().await;
    let req = Request::post(MUTATE)
        .header("host", "x")
        .header("content-type", "application/json")
        .header("content-length", "10000000")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let (status, _) = client.send(req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // Not declared (chunked) and too large: cut off at the limit.
    let stream = util::Chunks(
        vec![
            Bytes::from(vec![b' '; 40 * 1024]),
            Bytes::from(vec![b' '; 40 * 1024]),
        ]
        .into_iter(),
    );
    let req = Request::post(MUTATE)
        .header("host", "x")
        .header("content-type", "application/json")
        .body(stream)
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(
        server.tls(&[b"http/1.1"]).await.unwrap(),
    ))
    .await
    .unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    server.stop().await.unwrap();
}
