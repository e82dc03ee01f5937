//! Rolling updates as a cluster does them, while writes go on: two pods (server processes with
//! the shipped Deployment's arguments) behind a kube-proxy-like balancer, the webhooks
//! registered at the balancer, dry-run creates through the API server, and rolls with maxSurge
//! 1, maxUnavailable 0 (a new pod starts, turns ready and joins the endpoints; then an old one
//! gets SIGTERM and leaves the endpoints about a second later). Not one write fails.
//!
//! HTTP/1.1 only, as the API server speaks to a Service-referenced webhook (the shipped
//! arguments do not offer h2). `ROLL_BENCH=1` runs the longer scenario of docs/availability.md
//! (200 writes/s, 10 rolls, a drain, a flood of idle TLS connections, a crash) and prints its
//! table instead of asserting; `ROLL_RATE` sets the rate, `ROLL_ROLLS` the rolls, `ROLL_FLOODS`
//! the floods, `ROLL_FLOOD_FROM` the flood's address (127.0.0.2, another pod's; the API
//! server's own, 127.0.0.1, is a flood from the API server's node, as a pod sees it where
//! kube-proxy masquerades that node's traffic), `ROLL_BINARY` another server binary.

mod balancer;
mod load;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::Check;
use crate::env::{Env, Restore};
use crate::pki::Ca;
use crate::webhook::{self, Webhook, repo_file, yaml_documents};
use balancer::Balancer;
use load::{Tally, Writes};

pub fn checks() -> Vec<Check> {
    vec![Check {
        name: "roll::rolling_updates_under_writes_fail_no_write",
        run: rolling_updates_under_writes_fail_no_write,
    }]
}

const NS: &str = "roll";
/// How long after its SIGTERM a pod leaves the endpoints (the kubelet, the EndpointSlice
/// controller and kube-proxy in turn).
const ENDPOINT_LAG: Duration = Duration::from_secs(1);
/// From a bench phase's start to its disruption: the writes started before it (milliseconds
/// each) end first, so that a write counts under the disruption it met, not the phase before.
const BOUNDARY: Duration = Duration::from_secs(1);
/// How often terminated pods are looked at: their exit times are this precise.
const TICK: Duration = Duration::from_millis(100);

/// What one run does.
struct Plan {
    rate: u32,
    rolls: u32,
    /// Between a new pod joining the endpoints and the old one's SIGTERM (minReadySeconds).
    settle: Duration,
    /// After the last disruption: longer than --shutdown-delay, so that whatever the old pods
    /// do when it ends meets the writes.
    tail: Duration,
    /// The drain, the flood and the crash too.
    bench: bool,
    floods: u32,
    /// The flood's address: the API server dials from 127.0.0.1.
    flood_from: std::net::IpAddr,
    binary: PathBuf,
}

impl Plan {
    fn from_env() -> Plan {
        let bench = std::env::var("ROLL_BENCH").is_ok_and(|v| v == "1");
        let number = |name: &str| std::env::var(name).ok().and_then(|r| r.parse().ok());
        Plan {
            rate: number("ROLL_RATE").unwrap_or(if bench { 200 } else { 25 }),
            rolls: number("ROLL_ROLLS").unwrap_or(if bench { 10 } else { 2 }),
            floods: number("ROLL_FLOODS").unwrap_or(1),
            flood_from: std::env::var("ROLL_FLOOD_FROM")
                .map_or(Ok([127, 0, 0, 2].into()), |a| a.parse())
                .expect("ROLL_FLOOD_FROM is an IP address"),
            settle: Duration::from_secs(if bench { 5 } else { 1 }),
            tail: Duration::from_secs(7),
            bench,
            binary: std::env::var_os("ROLL_BINARY")
                .map_or_else(|| PathBuf::from(webhook::BINARY), PathBuf::from),
        }
    }
}

/// The shipped container's arguments, but for those the harness sets (addresses, certificate
/// directory, log format, and plain-HTTP metrics, which it scrapes for readiness and counters);
/// `--kubeconfig` stands in for the in-cluster credentials.
fn shipped_args(kubeconfig: &std::path::Path) -> Vec<String> {
    let docs = yaml_documents(&repo_file("manifests/base/deployment.yaml"));
    let args = docs[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("the Deployment's container has args");
    let ours = [
        "--webhook-bind-address",
        "--health-probe-bind-address",
        "--metrics-bind-address",
        "--metrics-secure",
        "--cert-dir",
        "--log-format",
    ];
    let mut args: Vec<String> = args
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .filter(|a| !ours.iter().any(|o| a.starts_with(o)))
        .collect();
    assert!(
        !args.iter().any(|a| a.starts_with("--enable-http2")),
        "HTTP/2 would hide what this check is about: {args:?}"
    );
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    args
}

/// How a pod starts: the binary, the CA all serving certificates come from, the arguments.
struct Launch {
    binary: PathBuf,
    ca: Arc<Ca>,
    args: Vec<String>,
}

/// The pods: serving, and terminating ones with when they got their signal.
struct Pods {
    launch: Launch,
    serving: Vec<Webhook>,
    leaving: Vec<(Webhook, Instant)>,
    /// SIGTERM to exit, of each terminated pod that has exited.
    exits: Vec<Duration>,
}

impl Launch {
    /// A new pod, once ready (what `/readyz` says, as `memcached_webhook_ready`).
    fn start(&self) -> Webhook {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let pod = Webhook::start_as(&self.binary, self.ca.clone(), &args);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pod
            .scrape()
            .lines()
            .any(|l| l == "memcached_webhook_ready 1")
        {
            assert!(
                Instant::now() < deadline,
                "a new pod is not ready after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        pod
    }
}

impl Pods {
    fn start(&self) -> Webhook {
        self.launch.start()
    }

    /// Sleeps `span`, looking every 100 ms for terminated pods that have exited.
    fn wait(&mut self, span: Duration) {
        let until = Instant::now() + span;
        while Instant::now() < until {
            self.reap();
            std::thread::sleep(until.saturating_duration_since(Instant::now()).min(TICK));
        }
    }

    /// Terminated pods that have exited since the last look.
    fn reap(&mut self) {
        let exits = &mut self.exits;
        self.leaving.retain_mut(|(pod, at)| match pod.exited() {
            Some(_) => {
                exits.push(at.elapsed());
                false
            }
            None => true,
        });
    }
}

fn rolling_updates_under_writes_fail_no_write(env: &Env) {
    let plan = Plan::from_env();
    env.namespace(NS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let balancer = Balancer::start(runtime.handle());
    let _restore = Restore(env);
    let mut pods = two_pods_behind(env, &plan, &balancer);

    let writes = Writes::new();
    let client = runtime.block_on(load::client(&env.cluster.kubeconfig));
    let writer = runtime.spawn(load::write(client, NS, plan.rate, writes.clone()));
    let mut phases = vec![("steady".to_owned(), Instant::now())];
    let mut phase = |name: String| {
        phases.push((name, Instant::now()));
        writes.phase.store(phases.len() - 1, Ordering::Release);
    };
    pods.wait(Duration::from_secs(2));
    for roll in 1..=plan.rolls {
        phase(format!("roll {roll}"));
        for _ in 0..2 {
            surge(&mut pods, &balancer, plan.settle);
        }
    }
    phase("after the rolls".to_owned());
    pods.wait(plan.tail);
    let flood_closed = plan
        .bench
        .then(|| drain_flood_crash(&mut pods, &balancer, &runtime, &plan, &mut phase));
    writes.stop.store(true, Ordering::Release);
    runtime.block_on(writer).unwrap();
    pods.reap();
    let tallies = writes.tallies.lock().unwrap().clone();
    report(&plan, &phases, &tallies, &pods, flood_closed);
    eprintln!("{}", balancer.watch.by_phase(&phases));
    let failed: Vec<_> = tallies
        .iter()
        .flat_map(|t| t.failed_during.clone())
        .collect();
    eprintln!("{}", balancer.watch.around(&failed));
    let failed: u64 = tallies.iter().map(|t| t.failed).sum();
    let written: u64 = tallies.iter().map(|t| t.writes).sum();
    if !plan.bench {
        let errors: Vec<&String> = tallies.iter().flat_map(|t| &t.errors).collect();
        assert_eq!(
            failed, 0,
            "{failed} of {written} writes failed: {errors:#?}"
        );
        assert!(
            written >= u64::from(plan.rate) * 5,
            "only {written} writes during {} rolls",
            plan.rolls
        );
    }
    // Pods still draining (idle keep-alives the API server has not closed yet) are killed.
    drop(pods);
}

/// Two ready pods, the balancer in front of them, the webhooks registered at the balancer.
fn two_pods_behind(env: &Env, plan: &Plan, balancer: &Balancer) -> Pods {
    let mut pods = Pods {
        launch: Launch {
            binary: plan.binary.clone(),
            ca: Arc::new(Ca::new("roll CA")),
            args: shipped_args(&env.cluster.kubeconfig),
        },
        serving: Vec::new(),
        leaving: Vec::new(),
        exits: Vec::new(),
    };
    for _ in 0..2 {
        let pod = pods.start();
        balancer.add(pod.addr);
        pods.serving.push(pod);
    }
    let (pod, at) = (pods.serving[0].addr.to_string(), balancer.addr.to_string());
    let mut configurations = pods.serving[0].configurations();
    for doc in &mut configurations {
        for hook in doc["webhooks"].as_array_mut().unwrap() {
            let url = hook["clientConfig"]["url"]
                .as_str()
                .unwrap()
                .replace(&pod, &at);
            hook["clientConfig"]["url"] = url.into();
        }
    }
    webhook::install_webhooks(&env.cluster, configurations);
    pods
}

/// The benchmark's other disruptions, each its own phase; the flood's closes and the pods'
/// connection counters after it.
fn drain_flood_crash(
    pods: &mut Pods,
    balancer: &Balancer,
    runtime: &tokio::runtime::Runtime,
    plan: &Plan,
    phase: &mut impl FnMut(String),
) -> (u64, String) {
    phase("drain".to_owned());
    pods.wait(BOUNDARY);
    drain(pods, balancer);
    pods.wait(plan.tail);
    let (mut closed, mut counters) = (0, String::new());
    for flood in 1..=plan.floods {
        phase(format!("flood {flood}"));
        pods.wait(BOUNDARY);
        let ca = pods.launch.ca.pem.clone();
        let route = (plan.flood_from, balancer.flood_addr);
        let hold = Duration::from_secs(15);
        let flood = runtime.spawn(async move { load::flood(route, &ca, 2_000, hold).await });
        pods.wait(hold);
        closed += runtime.block_on(flood).unwrap();
        counters = connection_counters(&pods.serving);
        pods.wait(Duration::from_secs(2));
    }
    phase("crash".to_owned());
    pods.wait(BOUNDARY);
    crash(pods, balancer);
    pods.wait(plan.tail);
    (closed, counters)
}

/// One step of a rolling update: a new pod joins, the oldest serving one goes.
fn surge(pods: &mut Pods, balancer: &Balancer, settle: Duration) {
    let new = pods.start();
    balancer.add(new.addr);
    pods.serving.push(new);
    pods.wait(settle);
    terminate(pods, balancer);
}

/// The oldest serving pod gets SIGTERM and leaves the endpoints a moment later.
fn terminate(pods: &mut Pods, balancer: &Balancer) {
    let old = pods.serving.remove(0);
    old.signal(Signal::TERM);
    let (addr, at) = (old.addr, Instant::now());
    pods.leaving.push((old, at));
    pods.wait(ENDPOINT_LAG);
    balancer.remove(addr);
}

/// A node drain: the pod is evicted (SIGTERM) and its replacement starts at the same time,
/// joining the endpoints once ready; meanwhile one pod serves. (The replacement is started on
/// this thread: a pod dies with the thread that started it, `cluster::dying_with_us`.)
fn drain(pods: &mut Pods, balancer: &Balancer) {
    let old = pods.serving.remove(0);
    old.signal(Signal::TERM);
    let (addr, at) = (old.addr, Instant::now());
    let new = std::thread::scope(|scope| {
        scope.spawn(|| {
            std::thread::sleep(ENDPOINT_LAG);
            balancer.remove(addr);
        });
        pods.start()
    });
    balancer.add(new.addr);
    pods.leaving.push((old, at));
    pods.serving.push(new);
}

/// A crash: SIGKILL; the pod leaves the endpoints a moment later (the kubelet sees the
/// container exit) and a new one takes its place once ready.
fn crash(pods: &mut Pods, balancer: &Balancer) {
    let dead = pods.serving.remove(0);
    dead.signal(Signal::KILL);
    std::thread::sleep(ENDPOINT_LAG);
    balancer.remove(dead.addr);
    let new = pods.start();
    balancer.add(new.addr);
    pods.serving.push(new);
}

fn report(
    plan: &Plan,
    phases: &[(String, Instant)],
    tallies: &[Tally],
    pods: &Pods,
    flood_closed: Option<(u64, String)>,
) {
    eprintln!(
        "roll: {} ({} writes/s), {}",
        plan.binary.display(),
        plan.rate,
        if plan.bench { "bench" } else { "check" }
    );
    eprintln!("| phase | writes | failed | first errors |\n| --- | ---: | ---: | --- |");
    for ((name, _), tally) in phases
        .iter()
        .zip(tallies.iter().chain(std::iter::repeat(&Tally::default())))
    {
        eprintln!(
            "| {name} | {} | {} | {} |",
            tally.writes,
            tally.failed,
            tally.errors.first().map_or("", String::as_str)
        );
    }
    let mut exits = pods.exits.clone();
    exits.sort();
    eprintln!(
        "terminated pods: {} exited (SIGTERM to exit: {:?}), {} still draining",
        exits.len(),
        exits.iter().map(|d| d.as_secs()).collect::<Vec<_>>(),
        pods.leaving.len()
    );
    if let Some((closed, counters)) = flood_closed {
        eprintln!("flood: the pods closed {closed} idle flood connections\n{counters}");
    }
}

/// The serving pods' eviction, close and handshake failure counters, summed, the samples that are not zero.
fn connection_counters(pods: &[Webhook]) -> String {
    let mut sums = std::collections::BTreeMap::<String, f64>::new();
    for pod in pods {
        for line in pod.scrape().lines() {
            let counted = [
                "memcached_webhook_connection_evictions_total",
                "memcached_webhook_connections_closed_total",
                "memcached_webhook_tls_handshake_failures_total",
            ]
            .iter()
            .any(|family| line.starts_with(family));
            if let (true, Some((series, value))) = (counted, line.rsplit_once(' ')) {
                *sums.entry(series.to_owned()).or_default() += value.parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    sums.iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(s, v)| format!("  {s} {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}
