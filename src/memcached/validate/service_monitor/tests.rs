//! The ServiceMonitor's durations.

use crate::memcached::validate::test_support::*;
use serde_json::{Value as J, json};

#[test]
fn service_monitor_table() {
    let sm = |v: J| json!({"monitoring": {"enabled": true, "serviceMonitor": v}});
    const I: &str = "spec.monitoring.serviceMonitor.interval: Invalid value: ";
    const T: &str = "spec.monitoring.serviceMonitor.scrapeTimeout: Invalid value: ";
    table(&[
        (sm(json!({})), &[]),
        (sm(json!({"interval": "", "scrapeTimeout": ""})), &[]),
        (sm(json!({"interval": "1m", "scrapeTimeout": "1m"})), &[]),
        (
            sm(json!({"interval": "1h30m", "scrapeTimeout": "90s"})),
            &[],
        ),
        (sm(json!({"interval": "2d", "scrapeTimeout": "0"})), &[]),
        (
            sm(json!({"interval": "30s", "scrapeTimeout": "1m"})),
            &[&format!(
                "{T}\"1m\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (30s); use 30s or less"
            )],
        ),
        // An absent interval is the default 30s.
        (
            sm(json!({"scrapeTimeout": "31s"})),
            &[&format!(
                "{T}\"31s\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (30s); use 30s or less"
            )],
        ),
        // An absent timeout is the default 10s.
        (
            sm(json!({"interval": "5s"})),
            &[&format!(
                "{T}\"10s\": Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (5s); use 5s or less"
            )],
        ),
        (
            sm(json!({"interval": "1.5s"})),
            &[&format!(
                "{I}\"1.5s\": durations take whole numbers only; use a smaller unit, e.g. 1500ms instead of 1.5s"
            )],
        ),
        (
            sm(json!({"interval": "30", "scrapeTimeout": "500us"})),
            &[
                &format!(
                    "{I}\"30\": \"30\" has no unit; Prometheus durations look like 30s, 1m or 1h30m"
                ),
                &format!(
                    "{T}\"500us\": unknown unit \"us\"; Prometheus accepts y, w, d, h, m, s, ms (1ms is the smallest duration)"
                ),
            ],
        ),
        (sm(json!(null)), &[]),
    ]);
}

/// `check` returns early on the default interval and timeout without parsing them: that is
/// sound only while they are valid Prometheus durations and the timeout is no longer than the
/// interval.
#[test]
fn the_defaults_pass_the_rules_they_skip() {
    let (interval, timeout) = super::DEFAULTS;
    let interval = crate::memcached::duration::parse(interval).expect("the default interval");
    let timeout = crate::memcached::duration::parse(timeout).expect("the default timeout");
    assert!(timeout <= interval, "{timeout:?} > {interval:?}");
}
