//! The command line, parsed once into typed fields (controller-runtime's flag names where
//! they exist). Nothing below `main` reads flags or the environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::admission::Actions;

/// Kubernetes admission webhooks for memcached.c5c3.io Memcached: defaulting and validation.
#[derive(Clone, Debug, Parser)]
#[command(
    version,
    about,
    max_term_width = 100,
    args_conflicts_with_subcommands = true
)]
pub struct Config {
    /// Without a subcommand the binary serves the webhooks.
    #[command(subcommand)]
    pub command: Option<Command>,

    /// TLS listener for both webhooks.
    #[arg(long, default_value = "0.0.0.0:9443", value_name = "ADDR")]
    pub webhook_bind_address: SocketAddr,

    /// Directory holding the serving certificate and key (a mounted Secret: watch the directory).
    #[arg(
        long,
        default_value = "/tmp/k8s-webhook-server/serving-certs",
        value_name = "DIR"
    )]
    pub cert_dir: PathBuf,

    /// File in --cert-dir with the PEM certificate chain, leaf first; every certificate is served.
    #[arg(long, default_value = "tls.crt", value_name = "FILE")]
    pub cert_name: String,

    /// File in --cert-dir with the PEM private key (PKCS#8, PKCS#1 RSA or SEC1 EC).
    #[arg(long, default_value = "tls.key", value_name = "FILE")]
    pub key_name: String,

    /// PEM CA bundle: when set, clients must present a certificate it signed (reloaded on change).
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,

    /// Lowest TLS version accepted.
    #[arg(long, value_enum, default_value_t = TlsVersion::V1_2)]
    pub tls_min_version: TlsVersion,

    /// How often the certificate files are re-read besides the file watch (catches lost events).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub cert_check_interval: Duration,

    /// Plain-HTTP listener for GET /healthz (alive) and GET /readyz (certificate loaded, serving).
    #[arg(long, default_value = "0.0.0.0:8081", value_name = "ADDR")]
    pub health_probe_bind_address: SocketAddr,

    /// Listener for GET /metrics (HTTPS with --metrics-secure, else plain HTTP); "0" turns it off.
    #[arg(long, default_value = "0.0.0.0:8080", value_name = "ADDR", value_parser = parse_optional_addr)]
    pub metrics_bind_address: MaybeAddr,

    /// Serve /metrics over HTTPS with the serving certificate, only to a bearer token the API
    /// server authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview: bind
    /// the metrics-reader ClusterRole). Default true, false with --dev; =false: plain HTTP to all.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", overrides_with = "metrics_secure")]
    pub metrics_secure: Option<bool>,

    /// Offer HTTP/2 (ALPN h2) besides HTTP/1.1. The kube-apiserver speaks HTTP/1.1 to webhooks.
    #[arg(long)]
    pub enable_http2: bool,

    /// Log line format on stderr.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter: a level (error, warn, info, debug, trace) or tracing directives. One line per
    /// admission: a denied one at info, an admitted one at debug.
    #[arg(long, default_value = "info", value_name = "FILTER")]
    pub log_level: String,

    /// Upper bound on the drain after SIGTERM: in-flight requests get this long to finish.
    #[arg(long, default_value = "30s", value_parser = parse_duration, value_name = "DURATION")]
    pub shutdown_grace_period: Duration,

    /// After SIGTERM, keep accepting this long while /readyz already answers 503, so Service
    /// endpoints drop the pod before its listener closes.
    #[arg(long, default_value = "0s", value_parser = parse_duration, value_name = "DURATION")]
    pub shutdown_delay: Duration,

    /// Deadline for a client to complete the TLS handshake.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub tls_handshake_timeout: Duration,

    /// Deadline for a request's headers, from its first byte (slow clients are cut off).
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub header_read_timeout: Duration,

    /// Deadline for a request's body, from the end of its headers.
    #[arg(long, default_value = "10s", value_parser = parse_duration, value_name = "DURATION")]
    pub body_read_timeout: Duration,

    /// How long an idle keep-alive connection stays open; longer than the apiserver's 90 s pool,
    /// so the client closes first and never reuses a connection the server is closing.
    #[arg(long, default_value = "120s", value_parser = parse_duration, value_name = "DURATION")]
    pub idle_timeout: Duration,

    /// Largest request head (request line and headers) in bytes; larger ones get 431.
    #[arg(long, default_value_t = 64 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(8192..))]
    pub max_header_bytes: u32,

    /// Largest request body in bytes (413 above it, without reading it): the apiserver sends at
    /// most 3 MiB objects, and a review holds an object and its old version.
    #[arg(long, default_value_t = 7 * 1024 * 1024, value_name = "BYTES")]
    pub max_request_bytes: usize,

    /// Memory for request bodies in flight, shared by every connection: a body takes it as its
    /// bytes arrive, one over 256 KiB also for the parser's working memory; an eighth is kept
    /// for bodies of at most 256 KiB. Used up: a request waits up to 1 s, then gets 503. The
    /// default fits the Deployment's 128Mi limit (docs/memory.md).
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(4 * 1024 * 1024..=1 << 40))]
    pub max_inflight_body_bytes: u64,

    /// Connections past their TLS handshake's first bytes at most (a slot each: TLS and HTTP
    /// buffers, about 22 KiB when idle). A newcomer that finds them all taken closes the one
    /// least worth keeping: a flood's first (unused since its handshake, or a head slow to
    /// arrive), then a keep-alive that answered one request, then a newcomer (before any
    /// keep-alive when newcomers hold half the slots), then a reused keep-alive, longest idle
    /// first; of connections not yet reused, the address holding the most goes first. A
    /// request in service is never cut (docs/availability.md). From half the slots taken, the
    /// header deadline shrinks.
    #[arg(long, default_value_t = 256, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Accepted connections that have not sent a byte yet (or wait for a slot) at most: each
    /// holds only its socket and a small task. Past it the oldest is closed; accepting never
    /// stops. Default: what the open-files limit (raised to its hard limit at startup) leaves
    /// after --max-connections and 64, at most 8192.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_pre_handshake_connections: Option<u32>,

    /// With --enable-http2: concurrent streams per connection (0 would refuse every request).
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub http2_max_concurrent_streams: u32,

    /// What a validation violation does, as a ValidatingAdmissionPolicyBinding's
    /// validationActions: Deny, Warn or Audit, or Deny,Audit or Warn,Audit (Deny,Warn is refused).
    #[arg(long, default_value = "Deny", value_name = "ACTIONS", value_parser = Actions::parse)]
    pub validation_actions: Actions,

    /// Refuse a Memcached whose Deployment another HPA or KEDA ScaledObject already scales:
    /// watches them cluster-wide (RBAC: get, list, watch). Off: no API server access for it.
    #[arg(long, value_enum, default_value_t = Switch::Off, value_name = "on|off")]
    pub autoscaler_conflicts: Switch,

    /// With --autoscaler-conflicts: how often discovery is asked whether the cluster serves
    /// KEDA's ScaledObjects (keda.sh/v1alpha1) while it does not, so a later KEDA install is seen.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    pub autoscaler_discovery_interval: Duration,

    /// Kubeconfig for --autoscaler-conflicts and --metrics-secure outside a cluster (else
    /// KUBECONFIG, ~/.kube/config, then the pod's service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Development mode: write a throwaway CA and serving certificate for localhost under
    /// --cert-dir (default certs/dev) if none is there, and narrow wildcard binds to 127.0.0.1.
    #[arg(long)]
    pub dev: bool,
}

/// What the binary does instead of serving.
#[derive(Clone, Debug, Subcommand)]
pub enum Command {
    /// Judge manifests offline as the webhooks would (exit 0: all admitted, 1: any denied,
    /// 2: unreadable input). With no cluster, the rule that reads it (another autoscaler of the
    /// Deployment, --autoscaler-conflicts) is not checked.
    Check(crate::check::Args),
    /// Write the defaulting and validation rules as a MutatingAdmissionPolicy and a
    /// ValidatingAdmissionPolicy with their bindings (the apiserver runs them in-process, no
    /// webhook needed); each rule is listed as exported or skipped with the reason.
    Policies(crate::policies::Args),
}

/// An address or nothing; an alias so clap takes the whole `Option` from the value parser.
pub type MaybeAddr = Option<SocketAddr>;

/// `--tls-min-version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TlsVersion {
    #[value(name = "1.2")]
    V1_2,
    #[value(name = "1.3")]
    V1_3,
}

/// An on/off flag value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// The defaults, for tests and benches that start the server in-process.
    pub fn defaults() -> Self {
        Config::parse_from(["memcached-webhook"])
    }

    pub fn cert_path(&self) -> PathBuf {
        self.cert_dir.join(&self.cert_name)
    }

    pub fn key_path(&self) -> PathBuf {
        self.cert_dir.join(&self.key_name)
    }

    /// `--metrics-secure`: on unless turned off, or left unset with `--dev`.
    pub fn metrics_secure(&self) -> bool {
        self.metrics_secure.unwrap_or(!self.dev)
    }

    /// Applies `--dev`: certificates under certs/dev and loopback instead of wildcard addresses.
    pub fn apply_dev_mode(&mut self) {
        if !self.dev {
            return;
        }
        if self.cert_dir == Config::defaults().cert_dir {
            self.cert_dir = PathBuf::from("certs/dev");
        }
        let loopback = |addr: &mut SocketAddr| {
            if addr.ip().is_unspecified() {
                addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
        };
        loopback(&mut self.webhook_bind_address);
        loopback(&mut self.health_probe_bind_address);
        if let Some(addr) = &mut self.metrics_bind_address {
            loopback(addr);
        }
    }
}

fn parse_optional_addr(s: &str) -> Result<Option<SocketAddr>, String> {
    if s == "0" {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|e| format!("{e}; expected HOST:PORT such as 0.0.0.0:8080, or 0 to disable"))
}

/// A whole number with a unit: `ms`, `s`, `m` or `h` (`500ms`, `10s`, `2m`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (number, unit) = s.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration; use e.g. 500ms, 10s, 2m or 1h"))?;
    let millis = match unit {
        "ms" => Some(n),
        "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("{s:?} has no unit; use e.g. 500ms, 10s, 2m or 1h")),
    };
    millis
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{s:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_controller_runtime() {
        let c = Config::defaults();
        assert_eq!(c.webhook_bind_address, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(
            c.cert_path(),
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs/tls.crt")
        );
        assert_eq!(
            c.key_path(),
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs/tls.key")
        );
        assert_eq!(c.health_probe_bind_address, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(
            c.metrics_bind_address,
            Some("0.0.0.0:8080".parse().unwrap())
        );
        assert!(!c.enable_http2);
        assert_eq!(
            c.autoscaler_conflicts,
            Switch::Off,
            "no API access unless asked"
        );
    }

    #[test]
    fn autoscaler_conflicts_is_on_or_off() {
        let c = Config::try_parse_from(["x", "--autoscaler-conflicts=on", "--kubeconfig", "k"])
            .unwrap();
        assert_eq!(c.autoscaler_conflicts, Switch::On);
        assert_eq!(c.kubeconfig, Some(PathBuf::from("k")));
        let err = Config::try_parse_from(["x", "--autoscaler-conflicts=yes"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--autoscaler-conflicts"), "{err}");
    }

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("ten").is_err());
        assert!(
            parse_duration("99999999999999999h")
                .unwrap_err()
                .contains("too long")
        );
    }

    #[test]
    fn bad_flags_name_the_problem() {
        let err = Config::try_parse_from(["x", "--webhook-bind-address", "nope"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--webhook-bind-address"), "{err}");
        let err = Config::try_parse_from(["x", "--metrics-bind-address", "x"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("0 to disable"), "{err}");
        let err = Config::try_parse_from(["x", "--http2-max-concurrent-streams", "0"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--http2-max-concurrent-streams"), "{err}");
        assert_eq!(
            Config::try_parse_from(["x", "--metrics-bind-address", "0"])
                .unwrap()
                .metrics_bind_address,
            None
        );
    }

    #[test]
    fn validation_actions_are_the_binding_s_sets() {
        let actions = |s: &str| {
            Config::try_parse_from(["x", "--validation-actions", s])
                .map(|c| c.validation_actions)
                .map_err(|e| e.to_string())
        };
        assert_eq!(Config::defaults().validation_actions, Actions::DENY);
        let set = |deny, warn, audit| Actions { deny, warn, audit };
        assert_eq!(actions("Deny"), Ok(set(true, false, false)));
        assert_eq!(actions("Warn"), Ok(set(false, true, false)));
        assert_eq!(actions("Audit"), Ok(set(false, false, true)));
        assert_eq!(actions("Deny,Audit"), Ok(set(true, false, true)));
        assert_eq!(actions("Audit,Warn"), Ok(set(false, true, true)));
        let err = actions("Deny,Warn").unwrap_err();
        assert!(err.contains("Deny and Warn may not be combined"), "{err}");
        let err = actions("deny").unwrap_err();
        assert!(err.contains("unknown validation action \"deny\""), "{err}");
        assert!(actions("Warn,Warn").unwrap_err().contains("listed twice"));
        assert!(
            actions("")
                .unwrap_err()
                .contains("unknown validation action")
        );
    }

    #[test]
    fn metrics_are_secure_unless_turned_off_or_dev() {
        let secure = |args: &[&str]| {
            let mut c = Config::try_parse_from([&["x"], args].concat()).unwrap();
            c.apply_dev_mode();
            c.metrics_secure()
        };
        assert!(secure(&[]), "on by default, as Kubebuilder's scaffold");
        assert!(secure(&["--metrics-secure"]));
        assert!(secure(&["--metrics-secure=true"]));
        assert!(!secure(&["--metrics-secure=false"]));
        assert!(!secure(&["--dev"]), "plain HTTP for local runs");
        assert!(secure(&["--dev", "--metrics-secure"]));
        assert!(!secure(&[
            "--metrics-secure=false",
            "--metrics-secure=false"
        ]));
        assert!(
            secure(&["--metrics-secure=false", "--metrics-secure"]),
            "the last one counts (a test harness's default, then a check's)"
        );
        let err = Config::try_parse_from(["x", "--metrics-secure=yes"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--metrics-secure"), "{err}");
    }

    #[test]
    fn dev_mode_narrows_wildcards_to_loopback() {
        let mut c =
            Config::try_parse_from(["x", "--dev", "--health-probe-bind-address", "127.0.0.2:1"])
                .unwrap();
        c.apply_dev_mode();
        assert_eq!(c.webhook_bind_address, "127.0.0.1:9443".parse().unwrap());
        assert_eq!(c.health_probe_bind_address, "127.0.0.2:1".parse().unwrap());
        assert_eq!(c.cert_dir, PathBuf::from("certs/dev"));
    }
}
