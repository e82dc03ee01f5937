//! The process's own figures (`process_*`, as every Prometheus client library exports them, and
//! the log lines dropped), read from /proc at each scrape.

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::registered;

/// The figures read at each scrape, and what was last read of the running totals.
#[derive(Debug, Default)]
pub(super) struct Process {
    cpu_seconds: Counter<f64, AtomicU64>,
    cpu_seen: std::sync::Mutex<f64>,
    resident_bytes: Gauge,
    open_fds: Gauge,
    log_lines_dropped: Counter,
    log_dropped_seen: std::sync::Mutex<u64>,
}

impl Process {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let log_lines_dropped = registered(
            registry,
            "memcached_webhook_log_lines_dropped",
            "Log lines dropped because stderr could not keep up (never blocks a request)",
        );
        // Set once: the registry keeps the handle.
        let start_time: Gauge<f64, AtomicU64> = registered(
            registry,
            "process_start_time_seconds",
            "Start time of the process (Unix seconds)",
        );
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        start_time.set(start);
        let cpu = "User and system CPU time spent";
        let resident = "Resident memory size";
        Process {
            cpu_seconds: registered(registry, "process_cpu_seconds", cpu),
            resident_bytes: registered(registry, "process_resident_memory_bytes", resident),
            open_fds: registered(registry, "process_open_fds", "Open file descriptors"),
            log_lines_dropped,
            ..Process::default()
        }
    }

    /// Reads CPU time, resident memory and open descriptors from /proc (Linux; zero elsewhere).
    pub(super) fn refresh(&self) {
        let ticks = 100.0; // USER_HZ, 100 on every Linux architecture we ship.
        if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
            // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let cpu = |i: usize| {
                fields
                    .get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            let total = (cpu(11) + cpu(12)) / ticks;
            let mut seen = self.cpu_seen.lock().unwrap_or_else(|e| e.into_inner());
            if total > *seen {
                self.cpu_seconds.inc_by(total - *seen);
                *seen = total;
            }
        }
        if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
            let pages: i64 = statm
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            self.resident_bytes.set(pages * 4096);
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            self.open_fds.set(fds.count() as i64);
        }
        let dropped = crate::logging::dropped_lines();
        let mut seen = self
            .log_dropped_seen
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if dropped > *seen {
            self.log_lines_dropped.inc_by(dropped - *seen);
            *seen = dropped;
        }
    }
}
