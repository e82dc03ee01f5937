//! The oracle: for a few hundred `spec.memcached` settings (the boundaries of memcached 1.6's
//! fatal checks and seeded random ones), the webhook admits the spec if and only if the
//! real memcached, started with the flags the operator renders, stays up and answers `version`.
//!
//! memcached runs as in a pod: two listeners (`-l 127.0.0.1,127.0.0.2`, like 0.0.0.0 and ::),
//! UDP off, `-u nobody` because the test may run as root. "Stays up" means still running after
//! 300 ms and answering `version` on both listeners (one client at a time, each closed before the
//! next, as a readiness probe would).
//!
//! Open files: memcached raises its limit to `-c` and exits when the hard limit is lower. A pod
//! typically has 1048576 (or 524288, where the webhook warns); a test machine may have less and,
//! without CAP_SYS_RESOURCE, cannot raise it even as root. Cases with `-c` above this process's
//! hard limit are therefore environment-dependent: they are counted, not compared.
//!
//! Generated values stay where the webhook mirrors the binary. Its deliberate policy
//! differences (negative -m, sizes memcached misreads or wraps, non-numeric slab_chunk_max) are
//! covered by the unit tests instead.
//!
//! Needs the `memcached` binary (Debian package `memcached`). Without it the test says SKIPPED on
//! the terminal and passes, unless `MEMCACHED_ORACLE=require` or `CI=true` is set (`.ci/run` sets
//! both and installs the package): there a missing binary fails the test.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long a started memcached must stay up before it is probed.
const SETTLE: Duration = Duration::from_millis(300);
/// The hard limit for one case, start to kill.
const CASE_TIMEOUT: Duration = Duration::from_secs(5);
const PARALLEL: usize = 8;

/// One `spec.memcached`, as the CR holds it (`None` = unset, memcached's default).
#[derive(Clone, Debug)]
struct Case {
    max_memory_mb: Option<i64>,
    max_connections: Option<i64>,
    threads: Option<i64>,
    max_item_size: Option<String>,
    verbosity: Option<i64>,
    extra_args: Vec<String>,
}

impl Case {
    fn new(m: i64, c: i64, t: i64, item: &str) -> Case {
        Case {
            max_memory_mb: Some(m),
            max_connections: Some(c),
            threads: Some(t),
            max_item_size: Some(item.to_owned()),
            verbosity: None,
            extra_args: Vec::new(),
        }
    }

    fn with_args(mut self, args: &[&str]) -> Case {
        self.extra_args = args.iter().map(|a| a.to_string()).collect();
        self
    }

    fn spec(&self) -> Value {
        let mut config = serde_json::Map::new();
        let mut put = |key: &str, v: Option<Value>| {
            if let Some(v) = v {
                config.insert(key.to_owned(), v);
            }
        };
        put("maxMemoryMB", self.max_memory_mb.map(Value::from));
        put("maxConnections", self.max_connections.map(Value::from));
        put("threads", self.threads.map(Value::from));
        put("maxItemSize", self.max_item_size.clone().map(Value::from));
        put("verbosity", self.verbosity.map(Value::from));
        if !self.extra_args.is_empty() {
            put("extraArgs", Some(json!(self.extra_args)));
        }
        json!({"memcached": config})
    }

    /// The flags the operator renders: a field that is unset (or 0, which the defaulter
    /// replaces) is left off, so memcached uses its own default, which equals ours.
    fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut int = |flag: &str, v: Option<i64>| {
            if let Some(v) = v.filter(|&v| v != 0) {
                flags.push(flag.to_owned());
                flags.push(v.to_string());
            }
        };
        int("-m", self.max_memory_mb);
        int("-c", self.max_connections);
        int("-t", self.threads);
        if let Some(item) = self.max_item_size.as_ref().filter(|s| !s.is_empty()) {
            flags.push("-I".to_owned());
            flags.push(item.clone());
        }
        if let Some(v) = self.verbosity.filter(|&v| v > 0) {
            flags.push(format!("-{}", "v".repeat(v as usize)));
        }
        flags.extend(self.extra_args.iter().cloned());
        flags
    }
}

/// The webhook's verdict on `spec`, through the library's own reader and validator.
fn admits(spec: &Value) -> bool {
    let object = json!({"metadata": {"name": "oracle"}, "spec": spec});
    let mut bytes = serde_json::to_vec(&object).unwrap();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = memcached_webhook::memcached::read(memcached_webhook::json::Val::root(&tape))
        .expect("generated specs are well-typed");
    memcached_webhook::memcached::validate::validate(&mc)
        .errors
        .is_empty()
}

// === the cases ===

/// A small deterministic generator (SplitMix64), so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The boundaries of memcached 1.6's fatal checks (`src/memcached/validate/start.rs`), each with a neighbour on the other side.
fn edge_cases() -> Vec<Case> {
    let mut cases = vec![
        Case::new(64, 1024, 4, "1m"),
        Case {
            max_memory_mb: None,
            max_connections: None,
            threads: None,
            max_item_size: None,
            verbosity: None,
            extra_args: Vec::new(),
        },
    ];
    // Item sizes with the default 512 KiB slab chunk.
    for item in [
        "1k", "2k", "1024", "768k", "1000k", "511k", "512k", "513k", "1m", "1024k", "1048576",
        "1536k", "2m", "3m", "32m", "33m", "1M", "512K", "01m", "0512k", "0k", "0m", "0",
    ] {
        cases.push(Case::new(64, 1024, 4, item));
    }
    // Half of -m.
    for (m, item) in [
        (1, "512k"),
        (1, "1m"),
        (2, "1m"),
        (2, "1536k"),
        (3, "1536k"),
        (3, "2m"),
        (64, "32m"),
        (64, "40m"),
        (65, "32m"),
        (65, "33m"),
        (2048, "1024m"),
        (2047, "1024m"),
        (4096, "1024m"),
        (4096, "1025m"),
        (4096, "1048576k"),
        (4096, "1049088k"),
        (65536, "2047m"),
        (65536, "2048m"),
        (65536, "4096m"),
        (16, "8m"),
        (16, "9m"),
    ] {
        cases.push(Case::new(m, 1024, 4, item));
    }
    // Connections against threads (L = 2): c >= max(4t + 10, 5t + 4).
    for (c, t) in [
        (14, 1),
        (13, 1),
        (18, 2),
        (17, 2),
        (26, 4),
        (25, 4),
        (24, 4),
        (34, 6),
        (33, 6),
        (44, 8),
        (43, 8),
        (84, 16),
        (83, 16),
        (324, 64),
        (323, 64),
        (644, 128),
        (643, 128),
        (1024, 204),
        (1024, 205),
        (4096, 818),
        (4096, 819),
        (1, 1),
        (1, 4),
        (-1, 4),
        (1024, -1),
        (1024, 65),
    ] {
        cases.push(Case::new(64, c, t, "1m"));
    }
    // Verbosity.
    // (A negative verbosity cannot be rendered at all; the unit tests cover its denial.)
    for v in [1, 2, 3, 10] {
        let mut case = Case::new(64, 1024, 4, "1m");
        case.verbosity = Some(v);
        cases.push(case);
    }
    // slab_chunk_max (bytes) from extraArgs.
    for (item, args) in [
        ("32k", &["-o", "slab_chunk_max=16384"][..]),
        ("16k", &["-o", "slab_chunk_max=16384"]),
        ("8k", &["-o", "slab_chunk_max=16384"]),
        ("40k", &["-o", "slab_chunk_max=16384"]),
        ("48k", &["-oslab_chunk_max=16384"]),
        ("48k", &["--extended=slab_chunk_max=16384"]),
        ("1k", &["-o", "slab_chunk_max=1024"]),
        ("1k", &["-o", "slab_chunk_max=512"]),
        ("1023", &["-o", "slab_chunk_max=1"]),
        ("1024", &["-o", "slab_chunk_max=1"]),
        ("1m", &["-o", "slab_chunk_max=3"]),
        ("1m", &["-o", "slab_chunk_max=1048576"]),
        ("2m", &["-o", "slab_chunk_max=2097152"]),
        (
            "48k",
            &["-o", "slab_chunk_max=32768", "-o", "slab_chunk_max=16384"],
        ),
        (
            "48k",
            &["-o", "slab_chunk_max=16384", "-o", "slab_chunk_max=32768"],
        ),
        ("48k", &["-o", "no_lru_crawler,slab_chunk_max=16384"]),
    ] {
        cases.push(Case::new(64, 1024, 4, item).with_args(args));
    }
    cases
}

/// Seeded random settings around the interesting regions.
fn random_cases(n: usize) -> Vec<Case> {
    let mut rng = Rng(0x6d65_6d63_6163_6865);
    let mut cases = Vec::with_capacity(n);
    for _ in 0..n {
        let m = match rng.below(4) {
            0 => 1 + rng.below(8) as i64,
            1 => *rng.pick(&[16, 32, 64, 128, 256, 1024, 2048, 4096]),
            2 => 1 + rng.below(65536) as i64,
            _ => 1 + rng.below(200) as i64,
        };
        let t = match rng.below(4) {
            0 => 1 + rng.below(8) as i64,
            1 => 1 + rng.below(128) as i64,
            2 => 1 + rng.below(300) as i64,
            _ => *rng.pick(&[1, 2, 4, 8, 16, 64, 128]),
        };
        let need = (4 * t + 10).max(5 * t + 4);
        let c = match rng.below(4) {
            0 => need + rng.below(3) as i64 - 2, // around the boundary
            1 => 1 + rng.below(2048) as i64,
            2 => *rng.pick(&[1024, 2048, 4096, 65536]),
            _ => need + rng.below(100) as i64,
        };
        let item = match rng.below(5) {
            0 => format!("{}k", 512 * (1 + rng.below(8))),
            1 => format!("{}m", 1 + rng.below(64)),
            2 => format!("{}k", 1 + rng.below(4096)),
            3 => format!(
                "{}m",
                *rng.pick(&[1, 2, 4, 8, 16, 32, 64, 128, 512, 1024, 1025])
            ),
            _ => format!(
                "{}",
                524288 * (1 + rng.below(4)) + *rng.pick(&[0, 0, 1, 1024])
            ),
        };
        let mut case = Case::new(m, c, t, &item);
        if rng.below(6) == 0 {
            let chunk = 1u64 << rng.below(21);
            let chunk = if rng.below(5) == 0 { chunk * 3 } else { chunk };
            case.max_item_size = Some(format!(
                "{}k",
                *rng.pick(&[1, 2, 16, 32, 48, 64, 512, 1024])
            ));
            case.extra_args = vec!["-o".into(), format!("slab_chunk_max={chunk}")];
        }
        cases.push(case);
    }
    cases
}

// === running memcached ===

/// A started memcached, killed and reaped when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port that was free a moment ago on both loopback addresses we bind.
fn free_port() -> u16 {
    loop {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = a.local_addr().unwrap().port();
        if TcpListener::bind(("127.0.0.2", port)).is_ok() {
            return port;
        }
    }
}

enum Run {
    Up,
    Down(String),
    /// The port was taken between choosing and binding: try again.
    PortRace,
}

/// Whether memcached with `flags` stays up for [`SETTLE`] and answers `version` on both listeners.
fn run(flags: &[String]) -> Run {
    let port = free_port();
    let child = memcached_command()
        .args(["-u", "nobody", "-l", "127.0.0.1,127.0.0.2", "-U", "0"])
        .arg("-p")
        .arg(port.to_string())
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("memcached starts");
    let mut process = Process(child);
    let started = Instant::now();
    std::thread::sleep(SETTLE);
    let down = |process: &mut Process| {
        let mut stderr = String::new();
        if let Some(mut e) = process.0.stderr.take() {
            let _ = process.0.kill();
            let _ = process.0.wait();
            let _ = e.read_to_string(&mut stderr);
        }
        if stderr.contains("Address already in use") {
            Run::PortRace
        } else {
            Run::Down(stderr.lines().take(2).collect::<Vec<_>>().join(" | "))
        }
    };
    if process.0.try_wait().ok().flatten().is_some() {
        return down(&mut process);
    }
    for host in ["127.0.0.1", "127.0.0.2"] {
        let addr: SocketAddr = format!("{host}:{port}").parse().unwrap();
        let left = CASE_TIMEOUT.saturating_sub(started.elapsed());
        if !answers_version(addr, left.min(Duration::from_secs(2))) {
            return down(&mut process);
        }
    }
    if process.0.try_wait().ok().flatten().is_some() {
        return down(&mut process);
    }
    Run::Up
}

/// [`run`] with port races retried: whether memcached stays up with `flags`.
fn stays_up_alone(flags: &[String]) -> bool {
    loop {
        match run(flags) {
            Run::PortRace => continue,
            Run::Up => return true,
            Run::Down(_) => return false,
        }
    }
}

/// `memcached`, started with no descriptors but stdio, as in a container. A test harness may
/// inherit stray descriptors without close-on-exec (memcached would inherit them too, and each one
/// shifts its descriptor arithmetic by one); bash closes those before exec-ing memcached.
fn memcached_command() -> Command {
    let stray = inherited_fds();
    if stray.is_empty() {
        return Command::new("memcached");
    }
    let closes: String = stray.iter().map(|fd| format!(" {fd}>&-")).collect();
    let mut command = Command::new("bash");
    command
        .arg("-c")
        .arg(format!("exec{closes}; exec memcached \"$@\""))
        .arg("memcached");
    command
}

/// Descriptors above stdio that a child would inherit (no O_CLOEXEC), from /proc/self/fdinfo.
fn inherited_fds() -> Vec<u32> {
    const O_CLOEXEC: u32 = 0o2_000_000;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut fds: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .filter(|fd| {
            let info =
                std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok());
            flags.is_some_and(|f| f & O_CLOEXEC == 0)
        })
        .collect();
    fds.sort_unstable();
    fds
}

fn answers_version(addr: SocketAddr, timeout: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(timeout));
    let _ = s.set_write_timeout(Some(timeout));
    if s.write_all(b"version\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while !got.ends_with(b"\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    if !got.starts_with(b"VERSION ") {
        return false;
    }
    // Wait for memcached to close its end, so the next probe does not need a second descriptor.
    let _ = s.shutdown(std::net::Shutdown::Write);
    while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    true
}

/// This process's hard RLIMIT_NOFILE (memcached inherits it), from /proc/self/limits.
fn nofile_hard_limit() -> Option<i64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let hard = line.split_whitespace().nth(4)?;
    Some(if hard == "unlimited" {
        i64::MAX
    } else {
        hard.parse().ok()?
    })
}

/// Why a missing memcached must fail the run: `MEMCACHED_ORACLE=require`, or CI (`CI=true`).
fn memcached_required() -> Option<&'static str> {
    let set = |name: &str, values: &[&str]| {
        std::env::var(name).is_ok_and(|v| values.contains(&v.to_ascii_lowercase().as_str()))
    };
    if set("MEMCACHED_ORACLE", &["require"]) {
        Some("MEMCACHED_ORACLE=require")
    } else if set("CI", &["true", "1"]) {
        Some("CI=true")
    } else {
        None
    }
}

fn memcached_available() -> bool {
    Command::new("memcached")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn webhook_admits_exactly_what_memcached_starts() {
    if !memcached_available() {
        if let Some(why) = memcached_required() {
            panic!("{why} but no memcached binary is on PATH; apt-get install memcached");
        }
        // Straight to the process's stderr: libtest captures eprintln! of a passing test.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: memcached_oracle::webhook_admits_exactly_what_memcached_starts: no memcached \
             binary on PATH (apt-get install memcached; MEMCACHED_ORACLE=require makes this fail)"
        );
        return;
    }
    let mut cases = edge_cases();
    cases.extend(random_cases(260));
    let nofile = nofile_hard_limit().unwrap_or(i64::MAX);
    let (cases, env_dependent): (Vec<Case>, Vec<Case>) = cases
        .into_iter()
        .partition(|c| c.max_connections.unwrap_or(1024) <= nofile);
    let total = cases.len();
    let next = AtomicUsize::new(0);
    let mismatches = Mutex::new(Vec::new());
    let (mut up, mut down) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let started = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                while let Some(case) = cases.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let spec = case.spec();
                    let admitted = admits(&spec);
                    let flags = case.flags();
                    let outcome = loop {
                        match run(&flags) {
                            Run::PortRace => continue,
                            other => break other,
                        }
                    };
                    let (stays_up, why) = match outcome {
                        Run::Up => (true, String::new()),
                        Run::Down(why) => (false, why),
                        Run::PortRace => unreachable!(),
                    };
                    if stays_up { &up } else { &down }.fetch_add(1, Ordering::Relaxed);
                    if admitted != stays_up {
                        let message = format!(
                            "webhook {} but memcached {} ({why}): flags {flags:?}, spec {spec}",
                            if admitted { "admits" } else { "denies" },
                            if stays_up { "stays up" } else { "exits" },
                        );
                        mismatches.lock().unwrap().push((flags, admitted, message));
                    }
                }
            });
        }
    });
    // A boundary case (hundreds of threads) can fail to start while the other tests load the
    // machine; a disagreement counts only if it repeats when the case runs alone, twice.
    let mismatches: Vec<String> = mismatches
        .into_inner()
        .unwrap()
        .into_iter()
        .filter(|(flags, admitted, _)| (0..2).all(|_| stays_up_alone(flags) != *admitted))
        .map(|(_, _, message)| message)
        .collect();
    eprintln!(
        "oracle: {total} cases ({} up, {} down) in {:?}; {} more need an open-files limit above \
         this machine's {nofile} and were not compared",
        up.get_mut(),
        down.get_mut(),
        started.elapsed(),
        env_dependent.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} of {total} verdicts differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
