#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/ from the test fixtures and a
few hand-picked values. Run it from anywhere; `cargo fuzz cmin` then keeps what adds coverage.
The TLS seeds need `openssl` (a fresh EC key and RSA key with self-signed certificates, a
two-certificate chain and a pair that does not match)."""

import hashlib
import json
import pathlib
import subprocess
import tempfile

FUZZ = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = FUZZ.parent / "tests" / "fixtures"
CORPUS = FUZZ / "corpus"


def put(target: str, data: bytes) -> None:
    out = CORPUS / target
    out.mkdir(parents=True, exist_ok=True)
    (out / hashlib.sha1(data).hexdigest()).write_bytes(data)


def admission() -> None:
    for path in sorted(FIXTURES.glob("*.json")):
        if path.stat().st_size > 16 * 1024:
            continue  # the 100 KB fixture only measures parse time
        data = path.read_bytes()
        put("admission", data)
        review = json.loads(data)
        # The same review as v1beta1, as DELETE, and with an empty object.
        review["apiVersion"] = "admission.k8s.io/v1beta1"
        put("admission", json.dumps(review).encode())
        review["request"]["operation"] = "DELETE"
        put("admission", json.dumps(review).encode())
        review["request"]["operation"] = "UPDATE"
        review["request"]["oldObject"] = review["request"]["object"]
        review["request"]["object"] = {"spec": {}}
        put("admission", json.dumps(review).encode())


def check() -> None:
    for path in sorted((FIXTURES / "check").rglob("*")):
        if path.is_file():
            put("check", path.read_bytes())
    for path in sorted(FIXTURES.glob("*.json")):
        if path.stat().st_size > 16 * 1024:
            continue
        obj = json.loads(path.read_bytes())["request"]["object"]
        put("check", json.dumps(obj, indent=2).encode())


PARSER_VALUES = [
    "64Mi\n1Gi", "1.5Gi\n1536Mi", "500m\n0.5", "1e3\n1k", "-1Ki\n+1Ki", "10E\n8Ei",
    "9223372036854775807\n9223372036854775808", "0.000000001\n1n", "1.000k\n05M",
    "30s\n1m30s", "1h30m\n90m", "1y2w3d4h5m6s7ms\n0", "1.5s\n5m1h",
    "memcached:1.6.28\nprom/memcached-exporter:v0.14.0",
    "registry.example.com:5000/team/memcached@sha256:" + "a" * 64 + "\nlocalhost/memcached",
    "[::1]:5000/memcached:1.6\nMemcached",
]


def parsers() -> None:
    for value in PARSER_VALUES:
        put("parsers", value.encode())


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def tls() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        t = pathlib.Path(tmp)
        pairs = []
        for name, alg in [("ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]),
                          ("rsa", ["-newkey", "rsa:2048"])]:
            openssl("req", "-x509", *alg, "-nodes", "-subj", f"/CN={name}",
                    "-addext", "subjectAltName=DNS:localhost", "-days", "3650",
                    "-keyout", str(t / f"{name}.key"), "-out", str(t / f"{name}.crt"))
            pairs.append(((t / f"{name}.crt").read_bytes(), (t / f"{name}.key").read_bytes()))
        pairs.append((pairs[0][0], pairs[1][1]))  # a key that does not fit
        pairs.append((pairs[0][0] + pairs[1][0], pairs[0][1]))  # a two-certificate chain
        for cert, key in pairs:
            put("tls", cert + b"\0" + key)


if __name__ == "__main__":
    admission()
    check()
    parsers()
    tls()
