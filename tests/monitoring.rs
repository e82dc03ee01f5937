//! The monitoring component (manifests/components/monitoring) against the real server: every
//! metric its alerts and dashboard query, and every label value they select, is on `/metrics`
//! of a running server, so a renamed metric or label fails here instead of silencing an alert.

use std::collections::{BTreeMap, BTreeSet};

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, VectorSelector};

use crate::util;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/manifests/components/monitoring"
);
/// The job the Prometheus Operator gives components/servicemonitor's targets: its Service's name.
const JOB: &str = "memcached-webhook-metrics";
/// Series Prometheus makes itself for every target.
const PROMETHEUS_OWN: [&str; 1] = ["up"];
/// Labels Prometheus attaches to a target's series (service discovery), not the server.
const TARGET_LABELS: [&str; 4] = ["job", "namespace", "pod", "instance"];

/// One PromQL expression and where it came from (for messages).
struct Query {
    origin: String,
    expr: String,
    /// Whether it must select the webhook's job (a variable listing the jobs cannot).
    job: bool,
}

fn rule_queries() -> Vec<Query> {
    let text = std::fs::read_to_string(format!("{DIR}/prometheusrule.yaml")).unwrap();
    let rule: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let mut out = Vec::new();
    for group in rule["spec"]["groups"].as_sequence().unwrap() {
        for r in group["rules"].as_sequence().unwrap() {
            let name = r["alert"].as_str().or(r["record"].as_str()).unwrap();
            out.push(Query {
                origin: format!("alert {name}"),
                expr: r["expr"].as_str().unwrap().to_owned(),
                job: true,
            });
        }
    }
    out
}

fn dashboard() -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{DIR}/memcached-webhook-dashboard.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Panel targets (rows included) and the metric inside each `label_values(...)` variable query.
fn dashboard_queries() -> Vec<Query> {
    fn panels(list: &serde_json::Value, out: &mut Vec<Query>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                out.push(Query {
                    origin: format!("panel {:?}", panel["title"]),
                    expr: target["expr"].as_str().unwrap().to_owned(),
                    job: true,
                });
            }
            panels(&panel["panels"], out);
        }
    }
    let dash = dashboard();
    let mut out = Vec::new();
    panels(&dash["panels"], &mut out);
    for var in dash["templating"]["list"].as_array().unwrap() {
        if var["type"] != "query" {
            continue;
        }
        let query = var["query"]["query"].as_str().unwrap();
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.rsplit_once(','))
            .map(|(selector, _)| selector)
            .unwrap_or_else(|| panic!("variable {}: not label_values(...)", var["name"]));
        out.push(Query {
            origin: format!("variable {}", var["name"]),
            expr: inner.to_owned(),
            job: var["name"] != "job",
        });
    }
    out
}

/// Grafana's variables replaced by values PromQL accepts.
fn grafana_to_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$job", JOB)
        .replace("$namespace", ".*")
        .replace("$pod", ".*")
}

/// Every vector selector in `expr` (the ones inside range selectors too).
fn selectors(expr: &Expr, out: &mut Vec<VectorSelector>) {
    match expr {
        Expr::Aggregate(a) => {
            selectors(&a.expr, out);
            if let Some(p) = &a.param {
                selectors(p, out);
            }
        }
        Expr::Unary(u) => selectors(&u.expr, out),
        Expr::Binary(b) => {
            selectors(&b.lhs, out);
            selectors(&b.rhs, out);
        }
        Expr::Paren(p) => selectors(&p.expr, out),
        Expr::Subquery(s) => selectors(&s.expr, out),
        Expr::VectorSelector(vs) => out.push(vs.clone()),
        Expr::MatrixSelector(m) => out.push(m.vs.clone()),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The exposition as series name -> label name -> values seen.
type Exposition = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn exposition(text: &str) -> Exposition {
    let mut out = Exposition::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let labels = out.entry(line[..end].to_owned()).or_default();
        if let Some(body) = line[end..]
            .strip_prefix('{')
            .and_then(|rest| rest.split_once('}'))
            .map(|(body, _)| body)
        {
            // Label values here never hold `,` or `"` (paths, codes, words).
            for pair in body.split(',') {
                let (name, value) = pair.split_once('=').unwrap();
                labels
                    .entry(name.to_owned())
                    .or_default()
                    .insert(value.trim_matches('"').to_owned());
            }
        }
    }
    out
}

/// What is wrong with one selector against the exposition, if anything.
fn check_selector(vs: &VectorSelector, served: &Exposition, job: bool) -> Option<String> {
    let name = vs.name.as_deref().or_else(|| {
        vs.matchers
            .matchers
            .iter()
            .find(|m| m.name == "__name__")
            .map(|m| m.value.as_str())
    })?;
    let selects_job = vs
        .matchers
        .matchers
        .iter()
        .any(|m| m.name == "job" && matches!(m.op, MatchOp::Equal) && m.value == JOB);
    if job && !selects_job {
        return Some(format!("{name}: does not select job=\"{JOB}\""));
    }
    if PROMETHEUS_OWN.contains(&name) {
        return None;
    }
    let Some(labels) = served.get(name) else {
        return Some(format!("{name}: not served on /metrics"));
    };
    for m in &vs.matchers.matchers {
        if m.name == "__name__" || TARGET_LABELS.contains(&m.name.as_str()) {
            continue;
        }
        let Some(values) = labels.get(&m.name) else {
            return Some(format!("{name}: has no label {}", m.name));
        };
        let matched = match &m.op {
            MatchOp::Equal => values.contains(&m.value),
            MatchOp::NotEqual => values.iter().any(|v| *v != m.value),
            MatchOp::Re(re) => values.iter().any(|v| re.is_match(v)),
            MatchOp::NotRe(re) => values.iter().any(|v| !re.is_match(v)),
        };
        if !matched {
            return Some(format!(
                "{name}: no series matches {}{}{:?} (served: {values:?})",
                m.name, m.op, m.value
            ));
        }
    }
    None
}

#[tokio::test]
async fn every_metric_the_alerts_and_dashboard_use_is_served() {
    let server = util::start().await;
    let served = exposition(&server.scrape().await);
    server.stop().await.unwrap();

    let queries: Vec<Query> = rule_queries()
        .into_iter()
        .chain(dashboard_queries())
        .collect();
    assert!(queries.len() > 30, "only {} queries found", queries.len());
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for q in &queries {
        let expr = match parser::parse(&grafana_to_promql(&q.expr)) {
            Ok(expr) => expr,
            Err(e) => {
                problems.push(format!("{}: does not parse: {e}", q.origin));
                continue;
            }
        };
        let mut found = Vec::new();
        selectors(&expr, &mut found);
        if found.is_empty() {
            problems.push(format!("{}: selects no metric", q.origin));
        }
        for vs in &found {
            used.extend(vs.name.clone());
            if let Some(p) = check_selector(vs, &served, q.job) {
                problems.push(format!("{}: {p}", q.origin));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The checks above are only as good as the parse: the names an operator would look for
    // first must be among the ones collected.
    for name in [
        "memcached_webhook_ready",
        "controller_runtime_webhook_latency_seconds_bucket",
        "memcached_webhook_certificate_expiry_timestamp_seconds",
        "memcached_webhook_connection_evictions_total",
        "up",
    ] {
        assert!(used.contains(name), "{name} not collected: {used:?}");
    }
}

/// The latency alerts' thresholds are bucket boundaries of the served histogram, so the p99
/// crosses them exactly rather than by interpolation inside a bucket (prometheusrule.yaml says
/// why each value was chosen).
#[tokio::test]
async fn latency_thresholds_are_bucket_boundaries() {
    let server = util::start().await;
    let served = exposition(&server.scrape().await);
    server.stop().await.unwrap();
    let buckets: Vec<f64> = served["controller_runtime_webhook_latency_seconds_bucket"]["le"]
        .iter()
        .filter_map(|le| le.parse().ok())
        .collect();
    let thresholds: Vec<f64> = rule_queries()
        .iter()
        .filter(|q| q.expr.contains("histogram_quantile"))
        .map(|q| match parser::parse(&q.expr).unwrap() {
            Expr::Binary(b) => match *b.rhs {
                Expr::NumberLiteral(n) => n.val,
                other => panic!("{}: compared with {other}, not a number", q.origin),
            },
            other => panic!("{}: not a comparison: {other}", q.origin),
        })
        .collect();
    assert_eq!(
        thresholds.len(),
        2,
        "the warning and the critical latency alert"
    );
    for t in thresholds {
        assert!(
            buckets.contains(&t),
            "{t} s is not one of the buckets {buckets:?}"
        );
    }
}

/// The checker itself catches what it is there for: a renamed metric, a label value the server
/// never sends, a selector without the job.
#[test]
fn the_check_rejects_renames_and_unknown_label_values() {
    let served = exposition(
        "memcached_webhook_bad_requests_total{reason=\"panic\"} 0\nmemcached_webhook_ready 1\n",
    );
    let check = |q: &str| {
        let mut found = Vec::new();
        selectors(&parser::parse(q).unwrap(), &mut found);
        found
            .iter()
            .find_map(|vs| check_selector(vs, &served, true))
            .unwrap_or_default()
    };
    let ok = format!(
        "rate(memcached_webhook_bad_requests_total{{job=\"{JOB}\", reason=\"panic\"}}[5m])"
    );
    assert_eq!(check(&ok), "");
    assert!(check(&ok.replace("bad_requests", "bad_request")).contains("not served"));
    assert!(check(&ok.replace("\"panic\"", "\"crash\"")).contains("no series matches"));
    assert!(check(&ok.replace("reason=", "cause=")).contains("has no label cause"));
    assert!(check("memcached_webhook_ready == 0").contains("does not select job"));
    assert_eq!(check(&format!("up{{job=\"{JOB}\"}} == 0")), "");
}

#[tokio::test]
async fn ready_follows_readyz() {
    // No certificate yet: alive, not ready, and the gauge says so.
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, cert_pem, key_pem) = memcached_webhook::dev::generate().unwrap();
    let certs = dir.path().to_owned();
    let server = util::start_in(dir, ca_pem, |c| {
        c.cert_check_interval = std::time::Duration::from_millis(100)
    })
    .await;
    assert_eq!(server.probe("/readyz").await.0, 503);
    let ready =
        || async { crate::metrics::sample(&server.scrape().await, "memcached_webhook_ready") };
    assert_eq!(ready().await, 0.0);
    std::fs::write(certs.join("tls.crt"), cert_pem).unwrap();
    std::fs::write(certs.join("tls.key"), key_pem).unwrap();
    server.ready().await;
    assert_eq!(ready().await, 1.0);
    server.stop().await.unwrap();
}
