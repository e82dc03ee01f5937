#!/usr/bin/env python3
"""Instructions per admission request: the release server next to the floor, over loopback TLS.

For each row (a review and the webhook it goes to) it starts target/release/memcached-webhook
under valgrind's callgrind (instruction counts do not depend on what else the machine is doing),
posts the review once to capture the answer (it must be HTTP 200), warms up with 200 requests,
then sends two batches of the same review on one HTTP/1.1 keep-alive connection each with h2load
(as the kube-apiserver sends them): N/5 requests, then N. The figure is
(Ir(N) - Ir(N/5)) / (N - N/5): the marginal cost of a request, with the TLS handshake and the
connection's setup cancelled out. Counts cover the whole process (TLS, HTTP, JSON, the allocator,
metrics, logging), not the kernel; valgrind runs one thread at a time.

Then it measures the floor (benches/floor.rs) the same way: a bare hyper 1 + tokio-rustls (ring)
server with the same certificate and ALPN that reads the body and answers the captured response,
precomputed. The ratio ours/floor is what the webhook costs above the least any HTTPS server on
this stack must do. The default rows: benches/fixtures/b-kubectl-apply.json (5.6 KB CREATE) and
benches/fixtures/e-big-100k.json (100 KB) through mutate, tests/fixtures/mutate-update-kubectl-apply.json
(3.5 KB UPDATE) through mutate and through validate. From a clone:

    cargo build --release --locked
    python3 benches/instr-per-request.py                  # the four rows, 2000 requests
    python3 benches/instr-per-request.py --requests 500   # quicker, a few minutes
    python3 benches/instr-per-request.py --max-ratio 3    # exits 1 if a row is above 3x the floor
    python3 benches/instr-per-request.py tests/fixtures/large-annotations.json:mutate
    python3 benches/instr-per-request.py --keep /tmp/prof  # also keeps each row's profiles

The floor is built with `cargo build --release --locked --bench floor` (or given with --floor);
that build links target/release/memcached-webhook again with the dev-dependencies' features, so the
script measures a copy of --binary taken before it (`cargo build --release --locked` restores it).
Needs valgrind (callgrind_control) and h2load (Debian: valgrind nghttp2-client).
"""

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile

from serving import (PATHS, add_server_arguments, build_floor, fail, floor_address,
                     floor_command, ours_command, parse_row, post_once, start, stop,
                     webhook_address)

DEFAULT_ROWS = [
    "benches/fixtures/b-kubectl-apply.json:mutate",
    "benches/fixtures/e-big-100k.json:mutate",
    "tests/fixtures/mutate-update-kubectl-apply.json:mutate",
    "tests/fixtures/mutate-update-kubectl-apply.json:validate",
]
WARM_UP = 200
# h2load's protocol: HTTP/1.1 keep-alive, or with --http2 (main) HTTP/2 as ALPN offers it.
PROTOCOL = ["--h1"]


def callgrind(work, name, command):
    """`command` under callgrind, its profile in work/cg-NAME.out."""
    return ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={work}/cg-{name}.out",
            *command]


def send(url, fixture, n):
    """Posts `fixture` n times on one keep-alive connection, one at a time; every answer must be
    2xx."""
    out = subprocess.run(
        ["h2load", *PROTOCOL, "-n", str(n), "-c", "1", "-d", str(fixture),
         "-H", "Content-Type: application/json", url],
        capture_output=True, text=True, timeout=1800)
    if f"{n} succeeded" not in out.stdout or "status codes: " + str(n) + " 2xx" not in out.stdout:
        fail(f"h2load: not {n} successful answers:\n{out.stdout}{out.stderr}")


def batch(name, pid, work, url, fixture, n, keep=None):
    """Ir executed while n requests were served (callgrind zeroed before, dumped after); the
    dumps are copied to `keep` (a path prefix) for callgrind_annotate when given."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    send(url, fixture, n)
    for dump in work.glob(f"cg-{name}.out.*"):
        dump.unlink()
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    total = 0
    for index, dump in enumerate(sorted(work.glob(f"cg-{name}.out.*"))):
        if keep is not None:
            shutil.copy2(dump, f"{keep}.{index}.out")
        for line in dump.read_text().splitlines():
            if line.startswith("summary:"):
                total += int(line.split()[1])
    if total == 0:
        fail("callgrind wrote no summary")
    return total


def measure(name, process, address, work, path, fixture, requests, keep=None):
    """Instructions per request of a started server: warm-up, then the two batches (the big
    one's profile kept under the prefix `keep` when given)."""
    url = f"https://{address}{path}"
    send(url, fixture, WARM_UP)
    small = batch(name, process.pid, work, url, fixture, requests // 5)
    big = batch(name, process.pid, work, url, fixture, requests, keep)
    return (big - small) / (requests - requests // 5)


def row(args, floor, work, fixture, webhook):
    """(floor, ours) instructions per request for one fixture through one webhook."""
    path = PATHS[webhook]
    keep = None
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        keep = args.keep / f"{fixture.stem}-{webhook}"
    certs = work / "certs"  # --dev writes tls.crt and tls.key here once; the floor serves them too
    extra = ["--enable-http2"] if args.http2 else []
    process, address = start("ours",
                             callgrind(work, "ours", ours_command(args.binary, certs, *extra)),
                             work, webhook_address)
    try:
        response = work / "response.json"
        response.write_bytes(post_once(address, path, fixture))
        ours = measure("ours", process, address, work, path, fixture, args.requests,
                       keep and f"{keep}-ours")
    finally:
        stop(process)
    process, address = start("floor",
                             callgrind(work, "floor", floor_command(floor, certs, response)),
                             work, floor_address)
    try:
        if post_once(address, path, fixture) != response.read_bytes():
            fail("the floor did not answer the captured response")
        lowest = measure("floor", process, address, work, path, fixture, args.requests,
                         keep and f"{keep}-floor")
    finally:
        stop(process)
    return lowest, ours


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Default rows: " + ", ".join(DEFAULT_ROWS))
    parser.add_argument("rows", nargs="*", metavar="FIXTURE[:mutate|validate]",
                        help="a review and the webhook to post it to (default: mutate)")
    add_server_arguments(parser)
    parser.add_argument("--requests", type=int, default=2000,
                        help="requests in the big batch (default 2000; 500 is quicker)")
    parser.add_argument("--keep", type=pathlib.Path, metavar="DIR",
                        help="keep each big batch's callgrind profile in DIR "
                             "(ROW-ours.N.out, ROW-floor.N.out: callgrind_annotate --inclusive=yes; "
                             "symbols need CARGO_PROFILE_RELEASE_STRIP=false at the build)")
    parser.add_argument("--http2", action="store_true",
                        help="HTTP/2 instead of HTTP/1.1 (ours with --enable-http2)")
    parser.add_argument("--max-ratio", type=float,
                        help="exit 1 if any row costs more than this many times the floor")
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control", "h2load"):
        if shutil.which(tool) is None:
            fail(f"{tool} not found (Debian: apt-get install valgrind nghttp2-client)")
    if not args.binary.is_file():
        fail(f"{args.binary} not found: cargo build --release --locked")
    if args.requests < 5:
        fail("--requests must be at least 5")
    rows = [parse_row(spec) for spec in (args.rows or DEFAULT_ROWS)]
    if args.http2:
        PROTOCOL.clear()

    results = []
    with tempfile.TemporaryDirectory(prefix="instr-") as kept:
        # The bench build links target/release/memcached-webhook again, with the dev-dependencies'
        # features (`cargo build --release --locked` puts the plain one back): measure the binary
        # as it was given.
        args.binary = pathlib.Path(shutil.copy2(args.binary, kept))
        floor = args.floor or build_floor()
        if not floor.is_file():
            fail(f"{floor}: no such file")
        for fixture, webhook in rows:
            label = f"{fixture.name} ({fixture.stat().st_size:,} B) {webhook}"
            print(f"instr-per-request: {label} ...", file=sys.stderr)
            with tempfile.TemporaryDirectory(prefix="instr-") as tmp:
                lowest, ours = row(args, floor, pathlib.Path(tmp), fixture, webhook)
            results.append((label, lowest, ours, ours / lowest))

    protocol = "HTTP/2" if args.http2 else "HTTP/1.1 keep-alive"
    print(f"\nInstructions per request, {protocol} over TLS, {args.requests} requests:\n")
    print("| row | floor | ours | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, lowest, ours, ratio in results:
        print(f"| {label} | {lowest:,.0f} | {ours:,.0f} | {ratio:.2f}× |")
    if args.max_ratio is not None:
        over = [(label, ratio) for label, _, _, ratio in results if ratio > args.max_ratio]
        for label, ratio in over:
            print(f"instr-per-request: {label}: {ratio:.2f}× the floor, above --max-ratio "
                  f"{args.max_ratio:g}", file=sys.stderr)
        if over:
            sys.exit(1)


if __name__ == "__main__":
    main()
