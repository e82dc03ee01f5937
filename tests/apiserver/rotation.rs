//! Certificate rotation as the kubelet does it (a new timestamped directory, `..data` swapped by
//! rename) while writes go through the API server: not one write fails.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;

use crate::Check;
use crate::env::{Env, memcached};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "rotation::data_symlink_swap_under_writes_fails_no_write",
        run: data_symlink_swap_under_writes_fails_no_write,
    }]
}

const NS: &str = "rotation";
const ROTATIONS: usize = 3;

fn data_symlink_swap_under_writes_fails_no_write(env: &Env) {
    env.namespace(NS);
    let handshake_failures = || {
        env.webhook()
            .counter("memcached_webhook_tls_handshake_failures_total", &[])
    };
    let failed_handshakes = handshake_failures();
    let stop = AtomicBool::new(false);
    let (writes, failures) = std::thread::scope(|scope| {
        let writer = scope.spawn(|| {
            let (mut writes, mut failures) = (0, Vec::new());
            while !stop.load(Ordering::Acquire) {
                let object = memcached(NS, &format!("w-{writes}"), json!({"replicas": 2}));
                let out = env.kubectl(&["create", "-f", "-"], Some(&object.to_string()));
                if !out.ok {
                    failures.push(out.stderr);
                }
                writes += 1;
            }
            (writes, failures)
        });
        let rotate = || {
            let mut webhook = env.webhook();
            let pem = webhook.rotate();
            let new = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while webhook.served_certificate() != new.as_ref() {
                assert!(
                    Instant::now() < deadline,
                    "the rotated certificate is not served after 20 s"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for _ in 0..ROTATIONS {
                std::thread::sleep(Duration::from_millis(700));
                rotate();
            }
            std::thread::sleep(Duration::from_millis(700));
        }));
        stop.store(true, Ordering::Release);
        let result = writer.join().unwrap();
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
        result
    });
    assert!(
        failures.is_empty(),
        "{} of {writes} writes failed: {failures:#?}",
        failures.len()
    );
    assert!(
        writes >= 5,
        "only {writes} writes went on during {ROTATIONS} rotations"
    );
    let stored = env
        .ok(&["get", "-n", NS, "memcacheds", "-o", "json"], None)
        .json();
    assert_eq!(stored["items"].as_array().unwrap().len(), writes);
    assert_eq!(
        handshake_failures(),
        failed_handshakes,
        "TLS handshakes failed"
    );
    eprintln!("rotation: {ROTATIONS} rotations, {writes} writes, none failed");
}
