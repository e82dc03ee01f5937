//! Certificate hot reload. The kubelet updates a Secret volume by writing a new `..<timestamp>`
//! directory and renaming a `..data` symlink over the old one, so `tls.crt` itself is never
//! written: we watch the *directory* (non-recursively) with notify, debounce bursts, and also
//! re-check on a timer, which catches lost events and re-arms a lost watch.
//!
//! A reload reads the chain and the key, checks that they parse, match and are in date, and only
//! then swaps them in. Anything else keeps the old certificate serving and logs why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use tokio::sync::Notify;

use super::{ClientVerifier, LoadError, Resolver, from_pem};

/// A quiet period that must pass after the last event before reading: a kubelet update is a
/// burst of creates, renames and a delete.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How long to wait before re-reading a pair that did not match (read across a swap).
const STRADDLE_RETRY: Duration = Duration::from_millis(50);

/// Where the files are and what to swap them into.
pub struct Reloader {
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    /// `--client-ca-file`, with the verifier it feeds.
    pub client_ca: Option<(PathBuf, Arc<ClientVerifier>)>,
    pub provider: Arc<CryptoProvider>,
    pub resolver: Arc<Resolver>,
    /// `--cert-check-interval`: the periodic re-check.
    pub interval: Duration,
    pub stats: Stats,
}

/// Reload outcomes: handles into the process's metrics (see [`crate::metrics`]).
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub reloads_ok: Counter,
    pub reloads_failed: Counter,
    /// The served leaf's notAfter, in seconds since the Unix epoch (0 before the first load).
    pub not_after: Gauge,
}

/// What was loaded last: the raw bytes, so an unchanged file is not parsed again.
#[derive(Default)]
struct Seen {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Vec<u8>,
}

impl Reloader {
    /// One read: loads what is on disk now if it changed. Used at startup and by [`Reloader::run`].
    fn check(&self, seen: &mut Seen) {
        if let Err(e) = self.check_pair(seen) {
            self.stats.reloads_failed.inc();
            if self.resolver.has_certificate() {
                tracing::error!(error = %e, "certificate reload refused; still serving the previous certificate");
            } else {
                tracing::warn!(error = %e, "no valid serving certificate yet; not ready");
            }
        }
        if let Some((path, verifier)) = &self.client_ca {
            match std::fs::read(path) {
                Ok(pem) if pem == seen.client_ca => {}
                Ok(pem) => match super::client_verifier_from_pem(&pem, self.provider.clone()) {
                    Ok(v) => {
                        verifier.store(v);
                        seen.client_ca = pem;
                        tracing::info!(path = %path.display(), "loaded client CA bundle");
                    }
                    Err(e) => {
                        tracing::error!(path = %path.display(), error = %e, "client CA reload refused; keeping the previous one")
                    }
                },
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot read the client CA bundle")
                }
            }
        }
    }

    fn check_pair(&self, seen: &mut Seen) -> Result<(), LoadError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| LoadError::Read {
                path: path.into(),
                source,
            })
        };
        let mut attempt = 0;
        loop {
            let (cert, key) = (read(&self.cert_path)?, read(&self.key_path)?);
            if cert == seen.cert && key == seen.key {
                return Ok(());
            }
            match from_pem(&cert, &key, &self.provider)
                .map_err(|e| e.at(&self.cert_path, &self.key_path))
            {
                Ok(certified) => {
                    let not_after = check_dates(&certified, &self.cert_path)?;
                    self.resolver.store(Arc::new(certified));
                    self.stats.reloads_ok.inc();
                    self.stats
                        .not_after
                        .set(i64::try_from(not_after).unwrap_or(i64::MAX));
                    tracing::info!(path = %self.cert_path.display(), not_after, "serving certificate loaded");
                    (seen.cert, seen.key) = (cert, key);
                    return Ok(());
                }
                // New certificate, old key (or the reverse): the files were read across a swap.
                Err(LoadError::Pair { .. }) if attempt < 3 => {
                    attempt += 1;
                    std::thread::sleep(STRADDLE_RETRY);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Loads what is there now, then watches until the task is dropped.
    pub async fn run(self) {
        let mut seen = Seen::default();
        let me = Arc::new(self);
        me.check_blocking(&mut seen).await;
        let changed = Arc::new(Notify::new());
        let mut watcher = None;
        let mut ticker = tokio::time::interval(me.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if watcher.is_none() {
                watcher = me.arm(changed.clone());
                if watcher.is_some() {
                    // Catch up on anything that happened before the watch existed.
                    me.check_blocking(&mut seen).await;
                }
            }
            tokio::select! {
                () = changed.notified() => {
                    // Debounce: wait until events stop for a moment.
                    while tokio::time::timeout(DEBOUNCE, changed.notified()).await.is_ok() {}
                }
                _ = ticker.tick() => {}
            }
            me.check_blocking(&mut seen).await;
        }
    }

    /// File reads and parsing happen off the async workers.
    async fn check_blocking(self: &Arc<Self>, seen: &mut Seen) {
        let me = self.clone();
        let mut owned = std::mem::take(seen);
        *seen = tokio::task::spawn_blocking(move || {
            me.check(&mut owned);
            owned
        })
        .await
        .unwrap_or_default();
    }

    /// Starts a non-recursive watch on every directory that holds a watched file.
    fn arm(&self, changed: Arc<Notify>) -> Option<RecommendedWatcher> {
        let notify = changed.clone();
        let handler = move |event: notify::Result<notify::Event>| match event {
            // Our own reads open files inside the timestamped directory, but a read of the
            // directory itself shows up as an access: never a change.
            Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
            _ => notify.notify_one(),
        };
        let mut watcher = match notify::recommended_watcher(handler) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot create a file watcher; relying on the periodic check");
                return None;
            }
        };
        let mut dirs: Vec<&Path> = vec![parent(&self.cert_path), parent(&self.key_path)];
        if let Some((ca, _)) = &self.client_ca {
            dirs.push(parent(ca));
        }
        dirs.dedup();
        for dir in dirs {
            if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the certificate directory yet; retrying on the periodic check");
                return None;
            }
        }
        tracing::debug!("watching the certificate directory");
        Some(watcher)
    }
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Refuses a leaf that is expired or not yet valid; returns its notAfter (Unix seconds).
fn check_dates(certified: &CertifiedKey, cert_path: &Path) -> Result<u64, LoadError> {
    let problem = |problem: String| LoadError::Certificate {
        path: cert_path.into(),
        problem,
    };
    let leaf = certified
        .end_entity_cert()
        .map_err(|e| problem(format!("no leaf certificate: {e}")))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| problem(format!("unreadable leaf certificate: {e}")))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let validity = parsed.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    if now >= not_after {
        return Err(problem(format!(
            "the certificate expired at {}",
            validity.not_after
        )));
    }
    if now < not_before {
        return Err(problem(format!(
            "the certificate is not valid before {}",
            validity.not_before
        )));
    }
    Ok(u64::try_from(not_after).unwrap_or(0))
}
