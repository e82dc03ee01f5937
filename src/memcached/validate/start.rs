//! Will memcached start? The fatal checks of memcached 1.6 (`memcached.c`'s option loop and
//! post-parse checks, tags 1.6.0 to 1.6.45, confirmed against Debian's 1.6.18 binary) on the flags the operator renders from `spec.memcached`, for a pod with two listening sockets
//! (0.0.0.0 and ::) and UDP off. Sizes are computed in u64/i64, never wrapping as C does.
//!
//! Deliberate policy beyond the binary (it would start, but not as the user meant): a negative
//! `maxMemoryMB` (memcached reads it as unlimited), a `maxItemSize` outside `^[0-9]+[kKmM]?$`
//! (memcached silently misreads `1.5m`, `1km`, ` 1m`) or one whose C arithmetic wraps (`4097m`
//! is read as 1m), and a `slab_chunk_max` that is not plain digits or not positive.

use super::{FieldError, Settings, go_quote};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;
/// `-I` may not exceed a gigabyte.
pub(crate) const MAX_ITEM: u64 = 1024 * MIB;
/// `-I` may not be below 1k.
pub(crate) const MIN_ITEM: u64 = KIB;
/// memcached's slab page; `slab_chunk_max` must divide it.
const SLAB_PAGE: u64 = MIB;
/// The default `slab_chunk_max` (half a page) since 1.5.0.
pub(crate) const DEFAULT_CHUNK: u64 = 512 * KIB;
/// Listening sockets in a pod (0.0.0.0 and ::), each holding a descriptor.
pub(crate) const LISTENERS: i64 = 2;
/// Linux's MAX_ARG_STRLEN (128 KiB) fits `-` and at most 131070 `v`s.
pub(crate) const MAX_VERBOSITY: i32 = 131_070;

// The fixed texts, shared with the policies' CEL (`crate::policies`).
pub(crate) const NEGATIVE_MEMORY: &str =
    "memcached would read a negative -m as unlimited memory; use a positive size in MiB, e.g. 64";
pub(crate) const NO_THREADS: &str = "memcached refuses fewer than 1 thread (\"Number of threads must be greater than 0\"); \
     use 1 or more, e.g. 4";
pub(crate) const NO_CONNECTIONS: &str = "memcached refuses fewer than 1 connection (\"Maximum connections must be greater than 0\"); \
     use e.g. 1024";
pub(crate) const SIZE_SYNTAX: &str = "memcached reads a size as whole digits with an optional k or m suffix and misreads \
     anything else; write e.g. 512k, 1m or 2m";
pub(crate) const ITEM_ABOVE_GIGABYTE: &str =
    "memcached refuses an item size above 1024m (a gigabyte); use 1024m or less";
pub(crate) const NEGATIVE_VERBOSITY: &str =
    "verbosity is rendered as -v repeated that many times and cannot be negative; use 0, 1 or 2";
pub(crate) const HUGE_VERBOSITY: &str = "verbosity is rendered as -v repeated that many times, and an argument this long exceeds \
     Linux's 128 KiB limit, so the container cannot start; use 0, 1 or 2";

const MAX_MEMORY_MB: &str = "spec.memcached.maxMemoryMB";
const MAX_CONNECTIONS: &str = "spec.memcached.maxConnections";
const THREADS: &str = "spec.memcached.threads";
const MAX_ITEM_SIZE: &str = "spec.memcached.maxItemSize";
const VERBOSITY: &str = "spec.memcached.verbosity";

/// Reports every flag value memcached would exit on (or, see the module docs, misread).
pub(super) fn check(s: &Settings<'_, '_>, errors: &mut Vec<FieldError>) {
    if s.max_memory_mb < 0 {
        errors.push(FieldError::invalid(
            MAX_MEMORY_MB,
            s.max_memory_mb.to_string(),
            NEGATIVE_MEMORY,
        ));
    }
    connections(s, errors);
    item_size(s, errors);
    verbosity(s.verbosity, errors);
}

/// `-c` and `-t`: both positive, and enough connections for what memcached reserves at startup.
fn connections(s: &Settings<'_, '_>, errors: &mut Vec<FieldError>) {
    let (c, t) = (s.max_connections, s.threads);
    if t < 1 {
        errors.push(FieldError::invalid(THREADS, t.to_string(), NO_THREADS));
    }
    if c < 1 {
        errors.push(FieldError::invalid(
            MAX_CONNECTIONS,
            c.to_string(),
            NO_CONNECTIONS,
        ));
    }
    if t < 1 || c < 1 {
        return;
    }
    let need = min_connections(t);
    if i64::from(c) < need {
        errors.push(FieldError::invalid(
            MAX_CONNECTIONS,
            c.to_string(),
            format!(
                "memcached with {t} threads exits or turns every client away below {need} \
                 connections (it reserves descriptors for each thread and both listeners); use \
                 {need} or more, or fewer threads"
            ),
        ));
    }
}

/// The smallest `-c` that starts and serves with `t` threads and two listeners: libevent's
/// descriptors (4 per thread, 6 base, the listeners, 2 to accept a client) and memcached's own
/// end-of-startup check (5 reserved per thread plus the listeners).
pub(crate) fn min_connections(t: i32) -> i64 {
    let t = i64::from(t);
    (4 * t + 8 + LISTENERS).max(5 * t + LISTENERS + 2)
}

/// `-I`: within [max(1k, chunk), 1 GiB], a multiple of the slab chunk, and at most half of `-m`.
fn item_size(s: &Settings<'_, '_>, errors: &mut Vec<FieldError>) {
    let text = s.max_item_size;
    let Some(bytes) = parse_size(text) else {
        errors.push(FieldError::invalid(
            MAX_ITEM_SIZE,
            go_quote(text),
            SIZE_SYNTAX,
        ));
        return;
    };
    let bad = |detail: String| FieldError::invalid(MAX_ITEM_SIZE, go_quote(text), detail);
    let chunk = slab_chunk(s, errors);
    let chunk_bytes = chunk.map_or(DEFAULT_CHUNK, |(bytes, _)| bytes);
    let chunk_name = || match chunk {
        None => format!("its slab chunk size ({})", human(DEFAULT_CHUNK)),
        Some((bytes, _)) => format!("slab_chunk_max ({bytes} bytes, from extraArgs)"),
    };

    if bytes < MIN_ITEM.max(chunk_bytes) {
        errors.push(bad(if chunk_bytes <= MIN_ITEM {
            "memcached refuses an item size below 1k; use 1k or more".to_owned()
        } else {
            format!(
                "memcached refuses an item size below {}; use {} or a larger multiple of it",
                chunk_name(),
                human(chunk_bytes)
            )
        }));
    } else if bytes > MAX_ITEM {
        errors.push(bad(ITEM_ABOVE_GIGABYTE.to_owned()));
    } else if !bytes.is_multiple_of(chunk_bytes) {
        let below = bytes / chunk_bytes * chunk_bytes;
        errors.push(bad(format!(
            "memcached refuses an item size that is not a multiple of {}; use {} or {}",
            chunk_name(),
            human(below),
            human(below + chunk_bytes)
        )));
    }

    let mb = s.max_memory_mb;
    if let Ok(m) = u64::try_from(mb) {
        let half = m * MIB / 2;
        if bytes > half {
            errors.push(bad(format!(
                "memcached refuses an item size above half of maxMemoryMB ({} for {mb})",
                human(half)
            )));
        }
    }
}

/// `maxItemSize` in bytes under `^[0-9]+[kKmM]?$`, saturating instead of wrapping (so anything
/// huge is "above a gigabyte"); `None` for any other text.
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], KIB),
        b'm' | b'M' => (&s[..s.len() - 1], MIB),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = digits.bytes().fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some(n.saturating_mul(unit))
}

/// A byte count as memcached's `-I` would take it: `32m`, `1536k`, or plain bytes.
pub(crate) fn human(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}m", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{}k", bytes / KIB)
    } else {
        bytes.to_string()
    }
}

/// The `slab_chunk_max` (in bytes, as memcached 1.6 reads it despite its help text) that
/// `extraArgs` sets, with the index of the argument; the last one wins, as in memcached.
/// Recognised forms: `-o a=b,c`, `-oa=b`, `--extended=a=b`, `--extended a=b`. A value that does
/// not divide the 1 MiB slab page (or is not a positive number) is reported here and ignored.
fn slab_chunk(s: &Settings<'_, '_>, errors: &mut Vec<FieldError>) -> Option<(u64, usize)> {
    let args = s.extra_args?.items()?;
    let mut found: Option<(Option<&str>, usize)> = None;
    let mut expect_value = false;
    for (i, arg) in args.enumerate() {
        let arg = arg.as_str().unwrap_or_default();
        let subopts = if expect_value {
            expect_value = false;
            Some(arg)
        } else if arg == "-o" || arg == "--extended" {
            expect_value = true;
            None
        } else {
            arg.strip_prefix("--extended=")
                .or_else(|| arg.strip_prefix("-o"))
        };
        for sub in subopts.into_iter().flat_map(|s| s.split(',')) {
            // getsubopt: the name is everything before the first '='.
            let (name, value) = sub
                .split_once('=')
                .map_or((sub, None), |(n, v)| (n, Some(v)));
            if name == "slab_chunk_max" {
                found = Some((value, i));
            }
        }
    }
    let (value, i) = found?;
    let bytes = value
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .map(|v| v.parse::<u64>().unwrap_or(u64::MAX));
    match bytes {
        Some(b) if b > 0 && b <= SLAB_PAGE && SLAB_PAGE.is_multiple_of(b) => Some((b, i)),
        _ => {
            let arg = args_nth(s, i);
            errors.push(FieldError::invalid(
                format!("spec.memcached.extraArgs[{i}]"),
                go_quote(arg),
                "memcached refuses a slab_chunk_max (in bytes) that does not evenly divide its \
                 1048576-byte slab page; use a power of two up to 1048576, e.g. slab_chunk_max=16384",
            ));
            None
        }
    }
}

fn args_nth<'i>(s: &Settings<'_, 'i>, i: usize) -> &'i str {
    s.extra_args
        .and_then(|a| a.items())
        .and_then(|mut items| items.nth(i))
        .and_then(|v| v.as_str())
        .unwrap_or_default()
}

/// `-v` repeated: none for 0; a negative count cannot be written, and a huge one cannot be exec'd.
fn verbosity(v: i32, errors: &mut Vec<FieldError>) {
    let detail = if v < 0 {
        NEGATIVE_VERBOSITY
    } else if v > MAX_VERBOSITY {
        HUGE_VERBOSITY
    } else {
        return;
    };
    errors.push(FieldError::invalid(VERBOSITY, v.to_string(), detail));
}

#[cfg(test)]
mod tests;
