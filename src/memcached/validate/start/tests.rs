//! Will memcached start: item size, slab chunk size, connections, threads, memory, verbosity.

use crate::memcached::validate::test_support::*;
use serde_json::{Value as J, json};

const ITEM: &str = "spec.memcached.maxItemSize: Invalid value: ";

fn mc(config: J) -> J {
    json!({"memcached": config})
}

#[test]
fn item_size_table() {
    let size = |s: &str| mc(json!({"maxItemSize": s}));
    let sized = |mb: i64, s: &str| mc(json!({"maxMemoryMB": mb, "maxItemSize": s}));
    let grammar = "memcached reads a size as whole digits with an optional k or m suffix and misreads anything else; write e.g. 512k, 1m or 2m";
    table(&[
        (size("512k"), &[]),
        (size("1m"), &[]),
        (size("1024k"), &[]),
        (size("1048576"), &[]),
        (size("1536k"), &[]),
        (size("2m"), &[]),
        (size("32m"), &[]),
        (size("1M"), &[]),
        (size("01m"), &[]),
        (size(""), &[]), // defaulted to 1m
        (
            size("1k"),
            &[&format!(
                "{ITEM}\"1k\": memcached refuses an item size below its slab chunk size (512k); use 512k or a larger multiple of it"
            )],
        ),
        (
            size("1024"),
            &[&format!(
                "{ITEM}\"1024\": memcached refuses an item size below its slab chunk size (512k); use 512k or a larger multiple of it"
            )],
        ),
        (
            size("768k"),
            &[&format!(
                "{ITEM}\"768k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
            )],
        ),
        (
            size("1000k"),
            &[&format!(
                "{ITEM}\"1000k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
            )],
        ),
        (
            size("40m"),
            &[&format!(
                "{ITEM}\"40m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"
            )],
        ),
        (sized(2048, "1024m"), &[]),
        (
            sized(4096, "1025m"),
            &[&format!(
                "{ITEM}\"1025m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
            )],
        ),
        // memcached's 32-bit arithmetic reads 4097m as 1m; the webhook does not wrap.
        (
            sized(65536, "4097m"),
            &[&format!(
                "{ITEM}\"4097m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
            )],
        ),
        (
            sized(1, "1m"),
            &[&format!(
                "{ITEM}\"1m\": memcached refuses an item size above half of maxMemoryMB (512k for 1)"
            )],
        ),
        (sized(1, "512k"), &[]),
        (sized(2, "1m"), &[]),
        (
            sized(3, "2m"),
            &[&format!(
                "{ITEM}\"2m\": memcached refuses an item size above half of maxMemoryMB (1536k for 3)"
            )],
        ),
        // Several problems with one value are all reported.
        (
            sized(1, "1000k"),
            &[
                &format!(
                    "{ITEM}\"1000k\": memcached refuses an item size that is not a multiple of its slab chunk size (512k); use 512k or 1m"
                ),
                &format!(
                    "{ITEM}\"1000k\": memcached refuses an item size above half of maxMemoryMB (512k for 1)"
                ),
            ],
        ),
        (size("1.5m"), &[&format!("{ITEM}\"1.5m\": {grammar}")]),
        (size("1g"), &[&format!("{ITEM}\"1g\": {grammar}")]),
        (size("1mb"), &[&format!("{ITEM}\"1mb\": {grammar}")]),
        (size(" 1m"), &[&format!("{ITEM}\" 1m\": {grammar}")]),
        (size("+1m"), &[&format!("{ITEM}\"+1m\": {grammar}")]),
        (size("k"), &[&format!("{ITEM}\"k\": {grammar}")]),
        (
            size("99999999999999999999999m"),
            &[
                &format!(
                    "{ITEM}\"99999999999999999999999m\": memcached refuses an item size above 1024m (a gigabyte); use 1024m or less"
                ),
                &format!(
                    "{ITEM}\"99999999999999999999999m\": memcached refuses an item size above half of maxMemoryMB (32m for 64)"
                ),
            ],
        ),
    ]);
}

#[test]
fn slab_chunk_max_from_extra_args_moves_the_granularity() {
    let with = |size: &str, args: J| mc(json!({"maxItemSize": size, "extraArgs": args}));
    let bad_chunk = |i: usize, arg: &str| {
        format!(
            "spec.memcached.extraArgs[{i}]: Invalid value: \"{arg}\": memcached refuses a slab_chunk_max (in bytes) that does not evenly divide its 1048576-byte slab page; use a power of two up to 1048576, e.g. slab_chunk_max=16384"
        )
    };
    table(&[
        (with("32k", json!(["-o", "slab_chunk_max=16384"])), &[]),
        (with("16k", json!(["-o", "slab_chunk_max=16384"])), &[]),
        (with("48k", json!(["-oslab_chunk_max=16384"])), &[]),
        (with("48k", json!(["--extended=slab_chunk_max=16384"])), &[]),
        (
            with(
                "48k",
                json!(["--extended", "no_lru_crawler,slab_chunk_max=16384"]),
            ),
            &[],
        ),
        (with("1k", json!(["-o", "slab_chunk_max=1024"])), &[]),
        (with("1k", json!(["-o", "slab_chunk_max=16"])), &[]),
        (with("1m", json!(["-o", "slab_chunk_max=1048576"])), &[]),
        (
            with("40k", json!(["-o", "slab_chunk_max=16384"])),
            &[&format!(
                "{ITEM}\"40k\": memcached refuses an item size that is not a multiple of slab_chunk_max (16384 bytes, from extraArgs); use 32k or 48k"
            )],
        ),
        (
            with("8k", json!(["-o", "slab_chunk_max=16384"])),
            &[&format!(
                "{ITEM}\"8k\": memcached refuses an item size below slab_chunk_max (16384 bytes, from extraArgs); use 16k or a larger multiple of it"
            )],
        ),
        (
            with("1023", json!(["-o", "slab_chunk_max=1"])),
            &[&format!(
                "{ITEM}\"1023\": memcached refuses an item size below 1k; use 1k or more"
            )],
        ),
        // The last slab_chunk_max wins, as in memcached.
        (
            with(
                "48k",
                json!(["-o", "slab_chunk_max=32768", "-o", "slab_chunk_max=16384"]),
            ),
            &[],
        ),
        (
            with(
                "48k",
                json!(["-o", "slab_chunk_max=16384", "-o", "slab_chunk_max=32768"]),
            ),
            &[&format!(
                "{ITEM}\"48k\": memcached refuses an item size that is not a multiple of slab_chunk_max (32768 bytes, from extraArgs); use 32k or 64k"
            )],
        ),
        // A chunk that does not divide the page (or is no number) is reported on its argument.
        (
            with("1m", json!(["-o", "slab_chunk_max=3"])),
            &[&bad_chunk(1, "slab_chunk_max=3")],
        ),
        (
            with("1m", json!(["-oslab_chunk_max=16k"])),
            &[&bad_chunk(0, "-oslab_chunk_max=16k")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max=2097152"])),
            &[&bad_chunk(1, "slab_chunk_max=2097152")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max=0"])),
            &[&bad_chunk(1, "slab_chunk_max=0")],
        ),
        (
            with("1m", json!(["-o", "slab_chunk_max"])),
            &[&bad_chunk(1, "slab_chunk_max")],
        ),
        // Other arguments are not read.
        (
            with(
                "1m",
                json!(["-vv", "--lock-memory", "-o", "no_lru_crawler"]),
            ),
            &[],
        ),
        (with("1m", json!(["slab_chunk_max=3"])), &[]),
    ]);
}

#[test]
fn connections_and_threads_table() {
    let ct = |c: i64, t: i64| mc(json!({"maxConnections": c, "threads": t}));
    let low = |c: i64, t: i64, need: i64| {
        format!(
            "spec.memcached.maxConnections: Invalid value: {c}: memcached with {t} threads exits or turns every client away below {need} connections (it reserves descriptors for each thread and both listeners); use {need} or more, or fewer threads"
        )
    };
    table(&[
        (ct(1024, 4), &[]),
        (ct(26, 4), &[]),
        (ct(25, 4), &[&low(25, 4, 26)]),
        (ct(14, 1), &[]),
        (ct(13, 1), &[&low(13, 1, 14)]),
        (ct(644, 128), &[]),
        (ct(100, 128), &[&low(100, 128, 644)]),
        (ct(1024, 204), &[]),
        (ct(1024, 205), &[&low(1024, 205, 1029)]),
        (ct(4096, 818), &[]),
        (ct(4096, 819), &[&low(4096, 819, 4099)]),
        (ct(2147483647, 429496728), &[]),
        (
            ct(2147483647, 2147483647),
            &[&low(2147483647, 2147483647, 10737418239)],
        ),
        (
            ct(1024, -1),
            &[
                "spec.memcached.threads: Invalid value: -1: memcached refuses fewer than 1 thread (\"Number of threads must be greater than 0\"); use 1 or more, e.g. 4",
            ],
        ),
        (
            ct(-5, 4),
            &[
                "spec.memcached.maxConnections: Invalid value: -5: memcached refuses fewer than 1 connection (\"Maximum connections must be greater than 0\"); use e.g. 1024",
            ],
        ),
        // Zeros are defaulted (1024, 4).
        (ct(0, 0), &[]),
        (ct(0, 204), &[]),
        (ct(0, 205), &[&low(1024, 205, 1029)]),
    ]);
}

#[test]
fn memory_and_verbosity_table() {
    table(&[
        (mc(json!({"verbosity": 0})), &[]),
        (mc(json!({"verbosity": 2})), &[]),
        (mc(json!({"verbosity": 131070})), &[]),
        (
            mc(json!({"verbosity": -1})),
            &[
                "spec.memcached.verbosity: Invalid value: -1: verbosity is rendered as -v repeated that many times and cannot be negative; use 0, 1 or 2",
            ],
        ),
        (
            mc(json!({"verbosity": 131071})),
            &[
                "spec.memcached.verbosity: Invalid value: 131071: verbosity is rendered as -v repeated that many times, and an argument this long exceeds Linux's 128 KiB limit, so the container cannot start; use 0, 1 or 2",
            ],
        ),
        (
            mc(json!({"maxMemoryMB": -1})),
            &[
                "spec.memcached.maxMemoryMB: Invalid value: -1: memcached would read a negative -m as unlimited memory; use a positive size in MiB, e.g. 64",
            ],
        ),
        (
            mc(json!({"maxMemoryMB": 2147483647, "maxItemSize": "1024m"})),
            &[],
        ),
    ]);
}
