//! What runs against the pods during a roll: dry-run Memcached creates through the API server
//! at a steady rate (both webhooks run for each), tallied by the phase they started in, and a
//! flood of idle TLS connections that makes the pods evict.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use tokio::io::AsyncReadExt;
use tokio::sync::Semaphore;

use crate::env::memcached;

/// Writes and failed writes of one phase, and the first few errors.
#[derive(Default, Debug, Clone)]
pub struct Tally {
    pub writes: u64,
    pub failed: u64,
    pub errors: Vec<String>,
    /// When each failed write started and ended (for the balancer's [`super::balancer::Watch`]).
    pub failed_during: Vec<(Instant, Instant)>,
}

/// The writers' shared state: the phase a write starting now belongs to, and the tallies.
pub struct Writes {
    pub phase: AtomicUsize,
    pub stop: AtomicBool,
    pub tallies: Mutex<Vec<Tally>>,
}

impl Writes {
    pub fn new() -> Arc<Writes> {
        Arc::new(Writes {
            phase: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            tallies: Mutex::new(Vec::new()),
        })
    }

    fn record(&self, phase: usize, started: Instant, outcome: Result<(), String>) {
        let mut tallies = self.tallies.lock().unwrap();
        if tallies.len() <= phase {
            tallies.resize(phase + 1, Tally::default());
        }
        let tally = &mut tallies[phase];
        tally.writes += 1;
        if let Err(e) = outcome {
            tally.failed += 1;
            tally.failed_during.push((started, Instant::now()));
            if tally.errors.len() < 5 {
                // The API server's cause, without kube's rendering of the Status around it.
                let cause = e.find("failed calling").map_or(e.as_str(), |at| &e[at..]);
                tally.errors.push(cause.chars().take(200).collect());
            }
        }
    }
}

/// A client of the API server from the admin kubeconfig, without kube's own retries (of 429,
/// 503, 504): a failed write is counted as the user would see it.
pub async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// Creates a Memcached with `dryRun=All` in `namespace` `rate` times a second (64 at most in
/// flight) until `writes.stop`.
pub async fn write(client: kube::Client, namespace: &str, rate: u32, writes: Arc<Writes>) {
    let gvk = GroupVersionKind::gvk("memcached.c5c3.io", "v1beta1", "Memcached");
    let api: Api<DynamicObject> =
        Api::namespaced_with(client, namespace, &ApiResource::from_gvk(&gvk));
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let in_flight = Arc::new(Semaphore::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    let mut n = 0u64;
    while !writes.stop.load(Ordering::Acquire) {
        tick.tick().await;
        let permit = in_flight.clone().acquire_owned().await.unwrap();
        let object: DynamicObject = serde_json::from_value(memcached(
            namespace,
            &format!("w-{n}"),
            serde_json::json!({"replicas": 2}),
        ))
        .unwrap();
        n += 1;
        let (api, params, writes) = (api.clone(), params.clone(), writes.clone());
        tasks.spawn(async move {
            let (phase, started) = (writes.phase.load(Ordering::Acquire), Instant::now());
            let outcome = api.create(&params, &object).await;
            writes.record(phase, started, outcome.map(drop).map_err(|e| e.to_string()));
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
}

/// `connections` TLS connections to `addr` from the address `from` that complete their
/// handshake and send nothing, each opened again when the server closes it, for `hold`.
/// Returns how many the server closed.
pub async fn flood(
    (from, addr): (IpAddr, SocketAddr),
    ca_pem: &str,
    connections: usize,
    hold: Duration,
) -> u64 {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let until = Instant::now() + hold;
    let closed = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections {
        let (connector, closed) = (connector.clone(), closed.clone());
        tasks.spawn(async move {
            while Instant::now() < until {
                let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
                let tls = match super::balancer::dial(from, addr).await {
                    Ok(tcp) => connector.connect(name, tcp).await,
                    Err(e) => Err(e),
                };
                if let Ok(mut tls) = tls {
                    let left = until.saturating_duration_since(Instant::now());
                    let mut byte = [0u8; 1];
                    if tokio::time::timeout(left, tls.read(&mut byte))
                        .await
                        .is_ok()
                    {
                        closed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    closed.load(Ordering::Relaxed)
}
