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
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
use prometheus_client::registry::Registry;
use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use tokio::sync::Notify;
use x509_parser::time::ASN1Time;

use super::{ClientVerifier, LoadError, Resolver, from_pem};
use crate::metrics::Labels;

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

impl Stats {
    /// `memcached_webhook_certificate_reloads_total{result}` and the served leaf's expiry.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let reloads = Family::<Labels, Counter>::default();
        let reloads_ok = reloads.get_or_create(&vec![("result", "success")]).clone();
        let reloads_failed = reloads.get_or_create(&vec![("result", "failure")]).clone();
        registry.register(
            "memcached_webhook_certificate_reloads",
            "Serving certificate loads by result",
            reloads,
        );
        let not_after = Gauge::default();
        registry.register(
            "memcached_webhook_certificate_expiry_timestamp_seconds",
            "notAfter of the served certificate (Unix seconds)",
            not_after.clone(),
        );
        Stats {
            reloads_ok,
            reloads_failed,
            not_after,
        }
    }
}

/// What was loaded last: the raw bytes, so an unchanged file is not parsed again.
#[derive(Default)]
struct Seen {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Vec<u8>,
    /// The last failure logged at warn or error: the same one is not repeated every interval.
    failure: Option<String>,
}

impl Reloader {
    /// One read: loads what is on disk now if it changed. Used at startup and by [`Reloader::run`].
    fn check(&self, seen: &mut Seen) {
        match self.check_pair(seen) {
            Ok(()) => seen.failure = None,
            Err(e) => {
                self.stats.reloads_failed.inc();
                let failure = e.to_string();
                if seen.failure.as_ref() == Some(&failure) {
                    tracing::debug!(error = %e, "certificate still not loadable (logged already)");
                } else {
                    self.report(&e);
                    seen.failure = Some(failure);
                }
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

    /// Logs a new load failure once, in the words an operator needs.
    fn report(&self, e: &LoadError) {
        let dir = parent(&self.cert_path);
        if self.resolver.has_certificate() {
            tracing::error!(error = %e, "certificate reload refused; still serving the previous certificate");
        } else if !dir.is_dir() {
            tracing::warn!(
                dir = %dir.display(),
                "the certificate directory does not exist; not ready, checking again every {:?} \
                 (--cert-check-interval) until it holds {} and {}",
                self.interval,
                file_name(&self.cert_path),
                file_name(&self.key_path),
            );
        } else {
            tracing::warn!(error = %e, "no valid serving certificate yet; not ready");
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
                    tracing::info!(path = %self.cert_path.display(), not_after = %rfc3339(not_after), "serving certificate loaded");
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
        let mut watch_warned = false;
        let mut ticker = tokio::time::interval(me.interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if watcher.is_none() {
                watcher = me.arm(changed.clone(), &mut watch_warned);
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

    /// Starts a non-recursive watch on every directory that holds a watched file. A directory
    /// that does not exist yet is the check's to report; any other failure is warned about once
    /// (`warned`) until a watch succeeds.
    fn arm(&self, changed: Arc<Notify>, warned: &mut bool) -> Option<RecommendedWatcher> {
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
            match watcher.watch(dir, RecursiveMode::NonRecursive) {
                Ok(()) => {}
                Err(e) if matches!(e.kind, notify::ErrorKind::PathNotFound) => {
                    tracing::debug!(dir = %dir.display(), "not watching yet: the directory does not exist");
                    return None;
                }
                Err(e) if *warned => {
                    tracing::debug!(dir = %dir.display(), error = %e, "still cannot watch the directory");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the certificate directory; relying on the periodic check");
                    *warned = true;
                    return None;
                }
            }
        }
        *warned = false;
        tracing::debug!("watching the certificate directory");
        Some(watcher)
    }
}

fn file_name(path: &Path) -> std::borrow::Cow<'_, str> {
    path.file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
}

fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Refuses a leaf that is expired or not yet valid; returns its notAfter (Unix seconds). Public
/// so the fuzz target can put any leaf through it.
pub fn check_dates(certified: &CertifiedKey, cert_path: &Path) -> Result<u64, LoadError> {
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
            rfc3339(not_after)
        )));
    }
    if now < not_before {
        return Err(problem(format!(
            "the certificate is not valid before {}",
            rfc3339(not_before)
        )));
    }
    Ok(u64::try_from(not_after).unwrap_or(0))
}

/// Unix seconds as an RFC 3339 UTC date (`2026-12-03T05:34:52Z`): a person reading the log
/// sees when the certificate expires without converting `67090118400`.
fn rfc3339(unix_seconds: impl TryInto<i64>) -> String {
    let Some(t) = unix_seconds
        .try_into()
        .ok()
        .and_then(|s| ASN1Time::from_timestamp(s).ok())
    else {
        return "a date beyond year 9999".to_owned();
    };
    let t = t.to_datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_764_740_092_u64), "2025-12-03T05:34:52Z");
        // rcgen's default notAfter, which --dev certificates carry.
        assert_eq!(rfc3339(67_090_118_400_i64), "4096-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(u64::MAX), "a date beyond year 9999");
    }
}
