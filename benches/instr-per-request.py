#!/usr/bin/env python3
"""Instructions the release server executes per admission request, over loopback TLS.

Runs target/release/memcached-webhook under valgrind's callgrind (instruction counts do not depend
on what else the machine is doing), warms it up, then sends two batches of the same review on one
HTTP/1.1 keep-alive connection each with h2load (as the kube-apiserver sends them): N/5 requests,
then N. The figure is (Ir(big) - Ir(small)) / (N - N/5): the marginal cost of a request, with the
TLS handshake and the connection's setup cancelled out. Counts cover the whole process (TLS, HTTP,
JSON, the allocator, metrics, logging), not the kernel; valgrind runs one thread at a time.

    cargo build --release --locked
    python3 benches/instr-per-request.py tests/fixtures/mutate-create-kubectl-apply.json \
        tests/fixtures/large-annotations.json

Needs valgrind (callgrind_control) and h2load (Debian: nghttp2-client).
"""

import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

MUTATE = "/mutate-memcached-c5c3-io-v1beta1-memcached"
ROOT = pathlib.Path(__file__).resolve().parent.parent


def fail(message):
    print(f"instr-per-request: {message}", file=sys.stderr)
    sys.exit(2)


def start(binary, work):
    """Starts the server under callgrind on ephemeral loopback ports; returns (process, address)."""
    log = open(work / "server.log", "w+")
    process = subprocess.Popen(
        ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={work}/cg.out",
         str(binary), "--dev", "--cert-dir", str(work / "certs"),
         "--webhook-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
         "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            fail(f"the server exited ({process.returncode}):\n{log.read()}")
        log.seek(0)
        for line in log:
            try:
                webhook = json.loads(line).get("webhook")
            except ValueError:
                continue
            if isinstance(webhook, str) and re.fullmatch(r"127\.0\.0\.1:\d+", webhook):
                return process, webhook
        time.sleep(0.5)
    process.kill()
    fail("the server did not log its webhook address within 120 s")


def send(url, fixture, n):
    """Posts `fixture` n times on one keep-alive HTTP/1.1 connection; every answer must be 2xx."""
    out = subprocess.run(
        ["h2load", "--h1", "-n", str(n), "-c", "1", "-d", str(fixture),
         "-H", "Content-Type: application/json", url],
        capture_output=True, text=True, timeout=1800)
    if f"{n} succeeded" not in out.stdout or "status codes: " + str(n) + " 2xx" not in out.stdout:
        fail(f"h2load: not {n} successful answers:\n{out.stdout}{out.stderr}")


def batch(pid, work, url, fixture, n):
    """Ir executed while n requests were served (callgrind zeroed before, dumped after)."""
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    send(url, fixture, n)
    for dump in work.glob("cg.out.*"):
        dump.unlink()
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    total = 0
    for dump in work.glob("cg.out.*"):
        for line in dump.read_text().splitlines():
            if line.startswith("summary:"):
                total += int(line.split()[1])
    if total == 0:
        fail("callgrind wrote no summary")
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("fixtures", nargs="+", type=pathlib.Path)
    parser.add_argument("--binary", type=pathlib.Path,
                        default=ROOT / "target/release/memcached-webhook")
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control", "h2load"):
        if shutil.which(tool) is None:
            fail(f"{tool} not found (apt-get install valgrind nghttp2-client)")
    if not args.binary.is_file():
        fail(f"{args.binary} not found: cargo build --release --locked")
    small = args.requests // 5
    if small < 1:
        fail("--requests must be at least 5")
    for fixture in args.fixtures:
        if not fixture.is_file():
            fail(f"{fixture}: no such file")
        with tempfile.TemporaryDirectory(prefix="instr-") as tmp:
            work = pathlib.Path(tmp)
            process, address = start(args.binary, work)
            try:
                url = f"https://{address}{MUTATE}"
                send(url, fixture, 200)
                a = batch(process.pid, work, url, fixture, small)
                b = batch(process.pid, work, url, fixture, args.requests)
            finally:
                process.terminate()
                process.wait(timeout=60)
            per_request = (b - a) / (args.requests - small)
            print(f"{fixture.name}: {per_request:,.0f} instructions per request "
                  f"({fixture.stat().st_size:,} bytes, HTTP/1.1 keep-alive, {args.requests} requests)")


if __name__ == "__main__":
    main()
