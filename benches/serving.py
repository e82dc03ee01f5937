"""What the benches' scripts share (instr-per-request.py, closed-loop.py): the release server and
the floor (benches/floor.rs) started on loopback with one certificate, their addresses read from
their logs, one POST to check an answer, and the rows they measure (a fixture and a webhook)."""

import http.client
import json
import pathlib
import re
import ssl
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PATHS = {
    "mutate": "/mutate-memcached-c5c3-io-v1beta1-memcached",
    "validate": "/validate-memcached-c5c3-io-v1beta1-memcached",
}


def fail(message):
    print(f"{pathlib.Path(sys.argv[0]).stem}: {message}", file=sys.stderr)
    sys.exit(2)


def parse_row(spec):
    """`FIXTURE[:mutate|validate]` -> (fixture path, webhook); relative paths from the repo root."""
    fixture, webhook = spec, "mutate"
    head, sep, tail = spec.rpartition(":")
    if sep and tail in PATHS:
        fixture, webhook = head, tail
    path = pathlib.Path(fixture)
    if not path.is_absolute() and not path.is_file():
        path = ROOT / path
    if not path.is_file():
        fail(f"{fixture}: no such file")
    return path, webhook


def add_server_arguments(parser):
    """--binary (our release server) and --floor (the floor's executable)."""
    parser.add_argument("--binary", type=pathlib.Path,
                        default=ROOT / "target/release/memcached-webhook")
    parser.add_argument("--floor", type=pathlib.Path,
                        help="the floor's executable (default: built with cargo)")


def build_floor():
    """Builds benches/floor.rs in release and returns its executable."""
    print("cargo build --release --locked --bench floor", file=sys.stderr)
    out = subprocess.run(
        ["cargo", "build", "--release", "--locked", "--bench", "floor", "--message-format=json"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        fail("the floor does not build (cargo build --release --locked --bench floor)")
    for line in out.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if (message.get("reason") == "compiler-artifact"
                and message.get("target", {}).get("name") == "floor"
                and message.get("executable")):
            return pathlib.Path(message["executable"])
    fail("cargo built no floor executable")


def ours_command(binary, certs, *extra):
    """Our server in dev mode on kernel-chosen loopback ports, logging JSON; with --dev it writes
    its certificate to `certs` (tls.crt, tls.key), which the floor then serves too."""
    return [binary, "--dev", "--cert-dir", certs,
            "--webhook-bind-address", "127.0.0.1:0", "--health-probe-bind-address", "127.0.0.1:0",
            "--metrics-bind-address", "127.0.0.1:0", "--log-format", "json", *extra]


def floor_command(floor, certs, response):
    return [floor, "--cert", certs / "tls.crt", "--key", certs / "tls.key",
            "--addr", "127.0.0.1:0", "--response", response]


def start(name, command, work, address_of):
    """Starts `command` (its stderr in work/NAME.log); waits until address_of(a stderr line)
    gives its address. Returns the process and the address."""
    log = open(work / f"{name}.log", "w+")
    process = subprocess.Popen(list(map(str, command)), stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            fail(f"{name} exited ({process.returncode}):\n{log.read()}")
        log.seek(0)
        for line in log:
            address = address_of(line)
            if address is not None:
                return process, address
        time.sleep(0.5)
    stop(process)
    fail(f"{name} did not log its address within 120 s")


def webhook_address(line):
    """Our server's JSON log line with the bound `webhook` address."""
    try:
        webhook = json.loads(line).get("webhook")
    except (ValueError, AttributeError):
        return None
    if isinstance(webhook, str) and re.fullmatch(r"127\.0\.0\.1:\d+", webhook):
        return webhook
    return None


def floor_address(line):
    """The floor's `floor: listening on ADDR`."""
    match = re.fullmatch(r"floor: listening on (127\.0\.0\.1:\d+)\s*", line)
    return match.group(1) if match else None


def stop(process):
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def post_once(address, path, fixture):
    """One POST with a plain HTTPS client; returns the body of the answer, which must be a 200."""
    host, port = address.rsplit(":", 1)
    connection = http.client.HTTPSConnection(
        host, int(port), context=ssl._create_unverified_context(), timeout=300)
    try:
        connection.request("POST", path, body=fixture.read_bytes(),
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    if answer.status != 200:
        fail(f"{fixture.name} -> {path}: HTTP {answer.status}:\n{body[:2000]!r}")
    return body
