//! The ServiceMonitor: Prometheus durations the operator can hand to Prometheus.

use super::{FieldError, go_quote, non_empty_or};
use crate::memcached::{Spec, defaults, duration};

/// The ServiceMonitor's `interval` and `scrapeTimeout` must be Prometheus durations, and the
/// timeout no longer than the interval (the operator drops the whole ServiceMonitor otherwise).
/// Empty values mean the defaults (30s, 10s). Checked whenever `serviceMonitor` is set.
pub(super) fn check(spec: &Spec<'_, '_>, errors: &mut Vec<FieldError>) {
    let Some(sm) = spec.monitoring.get().and_then(|m| m.service_monitor.get()) else {
        return;
    };
    let interval = non_empty_or(sm.interval, defaults::SERVICE_MONITOR_INTERVAL);
    let timeout = non_empty_or(sm.scrape_timeout, defaults::SERVICE_MONITOR_SCRAPE_TIMEOUT);
    // The defaults are valid together (a test says so), and most ServiceMonitors keep them:
    // parsing the two durations cost 500 instructions a validation.
    if (interval, timeout) == DEFAULTS {
        return;
    }
    const INTERVAL: &str = "spec.monitoring.serviceMonitor.interval";
    const TIMEOUT: &str = "spec.monitoring.serviceMonitor.scrapeTimeout";
    let mut parse = |field: &'static str, s: &str| {
        duration::parse(s)
            .map_err(|e| errors.push(FieldError::invalid(field, go_quote(s), e.to_string())))
            .ok()
    };
    let (i, t) = (parse(INTERVAL, interval), parse(TIMEOUT, timeout));
    if let (Some(i), Some(t)) = (i, t)
        && t > i
    {
        errors.push(FieldError::invalid(
            TIMEOUT,
            go_quote(timeout),
            format!(
                "Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval \
                 ({interval}); use {interval} or less"
            ),
        ));
    }
}

/// The interval and the timeout a ServiceMonitor gets when it sets neither.
const DEFAULTS: (&str, &str) = (
    defaults::SERVICE_MONITOR_INTERVAL,
    defaults::SERVICE_MONITOR_SCRAPE_TIMEOUT,
);

#[cfg(test)]
mod tests;
