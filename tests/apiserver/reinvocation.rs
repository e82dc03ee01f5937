//! `reinvocationPolicy: IfNeeded` as shipped: a mutating webhook called after ours that removes
//! `spec.memcached` makes the API server call ours again, and the stored object has its
//! defaults. The later webhook is a small one in this test, selected by a label so it touches
//! only this check's object.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

use crate::Check;
use crate::env::{Env, memcached};
use crate::pki::Ca;
use crate::webhook::MUTATE;

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "reinvocation::a_later_mutation_is_defaulted_again",
        run: a_later_mutation_is_defaulted_again,
    }]
}

const NS: &str = "reinvocation";
const CLEARER: &str = "zz-test-clears-spec-memcached";

/// Serves a mutating webhook on 127.0.0.1 that removes `spec.memcached` when it is there;
/// returns its port, its CA and the count of reviews it answered. Threads end with the test
/// process.
fn serve_clearer() -> (u16, String, Arc<AtomicU64>) {
    let calls = Arc::new(AtomicU64::new(0));
    let counter = calls.clone();
    let ca = Ca::new("clearer test CA");
    let pair = ca.server("clearer");
    let chain = CertificateDer::pem_slice_iter(pair.cert.as_bytes())
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_slice(pair.key.as_bytes()).unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming().map_while(Result::ok) {
            let (config, calls) = (config.clone(), counter.clone());
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let _ = answer_reviews(rustls::StreamOwned::new(conn, tcp), &calls);
            });
        }
    });
    (port, ca.pem, calls)
}

/// HTTP/1.1 keep-alive: each POST's AdmissionReview answered until the client closes.
fn answer_reviews(stream: impl Read + Write, calls: &AtomicU64) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body)?;
        let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        calls.fetch_add(1, Ordering::SeqCst);
        let request = &review["request"];
        let mut response = json!({"uid": request["uid"], "allowed": true});
        if !request["object"]["spec"]["memcached"].is_null() {
            let patch = json!([{"op": "remove", "path": "/spec/memcached"}]).to_string();
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(patch));
        }
        let answer = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response,
        })
        .to_string();
        let out = stream.get_mut();
        write!(
            out,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
            answer.len()
        )?;
        out.flush()?;
    }
}

/// Removes the test's mutating configuration when dropped, also on panic.
struct Remove<'a>(&'a Env);

impl Drop for Remove<'_> {
    fn drop(&mut self) {
        let _ = self.0.kubectl(
            &[
                "delete",
                "--ignore-not-found",
                "mutatingwebhookconfiguration",
                CLEARER,
            ],
            None,
        );
    }
}

fn a_later_mutation_is_defaulted_again(env: &Env) {
    env.namespace(NS);
    let (port, ca, clearer_calls) = serve_clearer();
    let _remove = Remove(env);
    // Named after ours, so the API server calls it second (configurations go by name).
    let configuration = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CLEARER},
        "webhooks": [{
            "name": "clear.test.example.com",
            "clientConfig": {
                "url": format!("https://127.0.0.1:{port}/clear"),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
            },
            "rules": [{"apiGroups": ["memcached.c5c3.io"], "apiVersions": ["v1beta1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["memcacheds"]}],
            "objectSelector": {"matchLabels": {"test.example.com/clear": "true"}},
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
        }],
    });
    env.ok(&["apply", "-f", "-"], Some(&configuration.to_string()));

    let mut object = memcached(NS, "cleared", json!({}));
    object["metadata"]["labels"] = json!({"test.example.com/clear": "true"});
    // The API server picks up a new configuration within a moment: dry-runs until it calls
    // the clearer.
    let deadline = Instant::now() + Duration::from_secs(30);
    while clearer_calls.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the API server never called the test's webhook"
        );
        env.ok(
            &["create", "--dry-run=server", "-f", "-"],
            Some(&object.to_string()),
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let ours_before = env.webhook().calls(MUTATE);
    let clearer_before = clearer_calls.load(Ordering::SeqCst);
    env.ok(&["create", "-f", "-"], Some(&object.to_string()));
    assert_eq!(
        clearer_calls.load(Ordering::SeqCst) - clearer_before,
        1,
        "the clearer's calls"
    );
    assert_eq!(
        env.webhook().calls(MUTATE) - ours_before,
        2,
        "ours is called, then called again after the clearer removed spec.memcached"
    );
    let stored = env.get(NS, "cleared");
    assert_eq!(
        stored["spec"]["memcached"],
        json!({"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4, "maxItemSize": "1m", "verbosity": 0}),
        "the stored object lost its defaults: {stored}"
    );
}
