#!/usr/bin/env python3
"""Closed loop, the way issue 36 measures it: the release server next to the floor, each pinned
to CPU 0, loaded by h2load pinned to CPU 1.

The release server (target/release/memcached-webhook --dev) and the floor (benches/floor.rs: a
bare hyper 1 + tokio-rustls server answering the captured response) run side by side, each
pinned to CPU 0 with taskset; h2load, pinned to CPU 1, keeps 16 HTTP/1.1 keep-alive connections
busy with one request in flight each (or, with --http2, one HTTP/2 connection with 16 streams),
posting one review for --seconds after a warm-up. Rounds alternate the floor and ours, so drift
on a shared machine hits both. Each round reports both servers' req/s and server CPU per request
(the kernel's per-thread sum_exec_runtime of the server process, ns precision), and the ratios
ours / floor; the summary gives the median of the rounds and their range.

With --perf DIR, the last round also samples both servers with `perf record -e cpu-clock` (no
hardware counters needed) and prints where each one's CPU goes, in µs per request, function by
function, ours next to the floor's (symbols need CARGO_PROFILE_RELEASE_STRIP=false at the build).

    cargo build --release --locked
    python3 benches/closed-loop.py                               # fixture b, 5 rounds of 5 s
    python3 benches/closed-loop.py --http2
    python3 benches/closed-loop.py --perf /tmp/perf tests/fixtures/mutate-update-kubectl-apply.json
    python3 benches/closed-loop.py --rate 2000 --perf /tmp/perf     # CPU at a fixed rate, and where

Needs h2load (Debian: nghttp2-client), taskset (util-linux), two CPUs, and perf for --perf.
The floor is built as instr-per-request.py builds it (see there).
"""

import argparse
import pathlib
import re
import shutil
import statistics
import subprocess
import tempfile
import time

from serving import (PATHS, add_server_arguments, build_floor, fail, floor_address,
                     floor_command, ours_command, parse_row, post_once, start, stop,
                     webhook_address)

SERVER_CPU, LOAD_CPU = "0", "1"


def server_cpu(pid):
    """CPU time (s) the process's threads have used so far: the sum of their sum_exec_runtime."""
    total = 0
    for stat in pathlib.Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended in between
    return total / 1e9


def sleeps(pid):
    """How many times the process's threads have blocked so far (voluntary context switches):
    each one was woken up again, so per request it counts wake-ups."""
    total = 0
    for status in pathlib.Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue  # a thread that ended in between
        match = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", text, re.M)
        total += int(match.group(1)) if match else 0
    return total


def load(url, fixture, args):
    """Runs h2load on LOAD_CPU for --seconds; returns how many requests it had answered 2xx."""
    shape = ["-c", "1", "-m", str(args.connections)] if args.http2 else \
        ["--h1", "-c", str(args.connections), "-m", "1"]
    if args.rate:
        clients = 1 if args.http2 else args.connections
        shape += ["--rps", f"{args.rate / clients:g}"]
    out = subprocess.run(
        ["taskset", "-c", LOAD_CPU, "h2load", *shape, "-D", str(args.seconds),
         "-d", str(fixture), "-H", "Content-Type: application/json", url],
        capture_output=True, text=True, timeout=args.seconds + 120)
    done = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed",
                     out.stdout)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", out.stdout)
    if out.returncode != 0 or not done or not codes:
        fail(f"h2load failed:\n{out.stdout}{out.stderr}")
    if int(done.group(2)) or int(codes.group(3)) or int(codes.group(4)):
        fail(f"h2load: some answers were not 2xx:\n{out.stdout}")
    if int(codes.group(1)) == 0:
        fail(f"h2load: no answer in {args.seconds} s:\n{out.stdout}")
    return int(codes.group(1))


def measure(server, fixture, args, perf_to=None):
    """(req/s, server CPU µs per request, wake-ups per request) of one server for one round."""
    recorder = None
    if perf_to is not None:
        recorder = subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999",
             "-p", str(server["process"].pid), "-o", str(perf_to)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    # Both counted over h2load's whole run: its connections' handshakes (one each) included.
    pid = server["process"].pid
    cpu_before, sleeps_before = server_cpu(pid), sleeps(pid)
    answered = load(server["url"], fixture, args)
    cpu, slept = server_cpu(pid) - cpu_before, sleeps(pid) - sleeps_before
    if recorder is not None:
        recorder.send_signal(2)  # SIGINT: perf writes its file and exits
        recorder.wait(timeout=120)
    return answered / args.seconds, cpu * 1e6 / answered, slept / answered


def perf_table(path, cpu_per_request, top):
    """{symbol: µs per request} for the `top` symbols of a perf profile (self time), and the
    kernel's share in all, in µs per request."""
    out = subprocess.run(
        ["perf", "report", "-i", str(path), "--no-children", "--sort", "symbol", "--stdio",
         "-g", "none"],
        capture_output=True, text=True)
    shares, kernel = {}, 0.0
    for line in out.stdout.splitlines():
        # Without hardware counters perf still prints an IPC column: "-  -".
        match = re.match(r"\s*([\d.]+)%\s+\[([.k])\]\s+(.+?)(?:\s+-\s+-)?\s*$", line)
        if match:
            micros = float(match.group(1)) / 100 * cpu_per_request
            shares[match.group(3)] = micros
            kernel += micros if match.group(2) == "k" else 0.0
    return dict(sorted(shares.items(), key=lambda kv: -kv[1])[:top]), kernel


def spread(values):
    values = sorted(values)
    return f"{statistics.median(values):.2f}x ({values[0]:.2f}-{values[-1]:.2f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("row", nargs="?", default="benches/fixtures/b-kubectl-apply.json:mutate",
                        metavar="FIXTURE[:mutate|validate]")
    add_server_arguments(parser)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="measured seconds per round")
    parser.add_argument("--connections", type=int, default=16,
                        help="HTTP/1.1 connections, or HTTP/2 streams on one connection")
    parser.add_argument("--http2", action="store_true")
    parser.add_argument("--rate", type=int, metavar="N",
                        help="send N requests a second in all (h2load --rps) instead of a closed "
                             "loop: CPU per request and profiles at a fixed rate (for its "
                             "latencies use the latency bench's LATENCY_RATE)")
    parser.add_argument("--perf", type=pathlib.Path, metavar="DIR",
                        help="profile the last round with perf into DIR and print where the CPU goes")
    args = parser.parse_args()
    for tool in ("h2load", "taskset", *(("perf",) if args.perf else ())):
        if shutil.which(tool) is None:
            fail(f"{tool} not found (Debian: nghttp2-client, util-linux, linux-perf)")
    if not args.binary.is_file():
        fail(f"{args.binary} not found: cargo build --release --locked")
    fixture, webhook = parse_row(args.row)
    path = PATHS[webhook]
    pin = ["taskset", "-c", SERVER_CPU]
    with tempfile.TemporaryDirectory(prefix="closed-loop-") as tmp:
        work = pathlib.Path(tmp)
        # The floor's build links target/release/memcached-webhook again (instr-per-request.py).
        binary = pathlib.Path(shutil.copy2(args.binary, work))
        floor = args.floor or build_floor()
        certs = work / "certs"
        extra = ["--enable-http2"] if args.http2 else []
        process, address = start("ours", pin + ours_command(binary, certs, *extra), work,
                                 webhook_address)
        servers = {"ours": {"process": process, "url": f"https://{address}{path}"}}
        try:
            response = work / "response.json"
            response.write_bytes(post_once(address, path, fixture))
            process, address = start("floor", pin + floor_command(floor, certs, response), work,
                                     floor_address)
            servers["floor"] = {"process": process, "url": f"https://{address}{path}"}
            if post_once(address, path, fixture) != response.read_bytes():
                fail("the floor did not answer the captured response")
            rounds(args, fixture, webhook, servers)
        finally:
            for server in servers.values():
                stop(server["process"])


def rounds(args, fixture, webhook, servers):
    """Measures the rounds and prints them with their summary (and the profiles, with --perf)."""
    shape = f"1 HTTP/2 connection x {args.connections} streams" if args.http2 else \
        f"{args.connections} HTTP/1.1 connections"
    if args.rate:
        shape += f", {args.rate} requests a second in all"
    print(f"{'fixed rate' if args.rate else 'closed loop'}: {fixture.name} ({fixture.stat().st_size:,} B) {webhook}, {shape}, "
          f"{args.rounds} rounds of {args.seconds} s, servers on CPU {SERVER_CPU}, "
          f"h2load on CPU {LOAD_CPU}\n")
    print("| round | floor req/s | ours req/s | ratio | floor CPU µs/req | ours CPU µs/req | ratio "
          "| wake-ups/req floor | ours |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios, cpu = [], {}
    if args.perf:
        args.perf.mkdir(parents=True, exist_ok=True)
    for number in range(1, args.rounds + 1):
        last = args.perf is not None and number == args.rounds
        result = {name: measure(servers[name], fixture, args,
                                args.perf / f"{name}.data" if last else None)
                  for name in ("floor", "ours")}
        (floor_rate, floor_cpu, floor_woken), (ours_rate, ours_cpu, ours_woken) = \
            result["floor"], result["ours"]
        ratios.append((ours_rate / floor_rate, ours_cpu / floor_cpu))
        cpu = {"floor": floor_cpu, "ours": ours_cpu}
        print(f"| {number} | {floor_rate:,.0f} | {ours_rate:,.0f} | {ratios[-1][0]:.2f}x "
              f"| {floor_cpu:.1f} | {ours_cpu:.1f} | {ratios[-1][1]:.2f}x "
              f"| {floor_woken:.2f} | {ours_woken:.2f} |", flush=True)
    print(f"\nours / floor over {len(ratios)} rounds, median (range): "
          f"req/s {spread([r for r, _ in ratios])}, "
          f"CPU per request {spread([c for _, c in ratios])}")
    if args.perf:
        print_profiles(args, cpu)


def print_profiles(args, cpu):
    profiles = {name: perf_table(args.perf / f"{name}.data", cpu[name], 40)
                for name in ("floor", "ours")}
    tables = {name: table for name, (table, _) in profiles.items()}
    print("\nWhere the server's CPU goes in the last round (perf cpu-clock samples, self time), "
          "µs per request:\n")
    print("| function | floor | ours |")
    print("| --- | ---: | ---: |")
    names = sorted(set(tables["floor"]) | set(tables["ours"]),
                   key=lambda n: -max(tables["floor"].get(n, 0), tables["ours"].get(n, 0)))
    for name in names:
        floor, ours = tables["floor"].get(name), tables["ours"].get(name)
        show = lambda v: "" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"| `{name[:90]}` | {show(floor)} | {show(ours)} |")
    kernel = {name: kernel for name, (_, kernel) in profiles.items()}
    print(f"| all in the kernel | {kernel['floor']:.1f} | {kernel['ours']:.1f} |")
    print(f"| **all** | **{cpu['floor']:.1f}** | **{cpu['ours']:.1f}** |")


if __name__ == "__main__":
    main()
