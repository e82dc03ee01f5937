#!/usr/bin/env python3
"""Latency of a Memcached write with nothing, the generated admission policies, or the webhooks.

Measures the README's table (docs/policies.md): N dry-run creates (default 400) per mode through
a running kube-apiserver, over one kept-alive HTTPS connection, and prints the median and p90.
Not part of CI (timings on a shared machine are not assertions). Usage, with a kube-apiserver
on loopback (envtest's binaries from $KUBEBUILDER_ASSETS, as CONTRIBUTING.md's real-apiserver
suite starts them) or any test cluster that has the CRD installed:

    .ci/policies_latency.py --kubeconfig KC --binary target/debug/memcached-webhook
"""

import argparse
import base64
import http.client
import json
import pathlib
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
POLICIES = ROOT / "manifests/components/policies/policies.yaml"
WEBHOOKS = ROOT / "manifests/base/webhooks.yaml"


def kubectl(kc, *args, stdin=None, check=True):
    out = subprocess.run(["kubectl", "--kubeconfig", kc, *args], input=stdin, text=True,
                         capture_output=True)
    if check and out.returncode != 0:
        sys.exit(f"kubectl {' '.join(args)}: {out.stderr}")
    return out


def kubeconfig(kc):
    """(server, ca, cert, key) from a kubeconfig with file references (start.sh's)."""
    config = json.loads(kubectl(kc, "config", "view", "--raw", "-o", "json").stdout)
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    return cluster["server"], cluster["certificate-authority"], user["client-certificate"], user["client-key"]


def start_webhook(binary, workdir):
    port = 29443
    proc = subprocess.Popen([binary, "--dev", "--cert-dir", str(workdir),
                             "--webhook-bind-address", f"127.0.0.1:{port}",
                             "--health-probe-bind-address", "127.0.0.1:29081",
                             "--metrics-bind-address", "0", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            with urllib.request.urlopen("http://127.0.0.1:29081/readyz", timeout=1) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("the webhook did not become ready")


def webhook_configurations(kc, port, ca_file):
    text = kubectl(kc, "create", "--dry-run=client", "-o", "json", "-f", str(WEBHOOKS)).stdout
    decoder, items, at = json.JSONDecoder(), [], 0
    while True:  # kubectl prints one JSON document per object
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            break
        item, at = decoder.raw_decode(text, at)
        items.append(item)
    bundle = base64.b64encode(pathlib.Path(ca_file).read_bytes()).decode()
    for item in items:
        item["metadata"].get("annotations", {}).pop("cert-manager.io/inject-ca-from", None)
        for hook in item["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})


def set_mode(kc, mode, configurations):
    kubectl(kc, "delete", "--ignore-not-found", "-f", str(POLICIES))
    kubectl(kc, "delete", "--ignore-not-found", "mutatingwebhookconfiguration", "memcached-webhook-mutating")
    kubectl(kc, "delete", "--ignore-not-found", "validatingwebhookconfiguration", "memcached-webhook-validating")
    if mode == "policies":
        kubectl(kc, "apply", "-f", str(POLICIES))
    elif mode == "webhooks":
        kubectl(kc, "apply", "-f", "-", stdin=configurations)
    time.sleep(5)  # the API server's informers pick the change up


def measure(server, ca, cert, key, count, mode):
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(cert, key)
    host, port = server.removeprefix("https://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), context=context)
    body = json.dumps({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                       "metadata": {"name": "latency", "namespace": "default"}, "spec": {}})
    path = "/apis/memcached.c5c3.io/v1beta1/namespaces/default/memcacheds?dryRun=All"
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    times = []
    for i in range(count + 50):
        start = time.perf_counter()
        conn.request("POST", path, body, headers)
        response = conn.getresponse()
        answer = json.loads(response.read())
        elapsed = time.perf_counter() - start
        if response.status != 201:
            sys.exit(f"{mode}: HTTP {response.status}: {answer.get('message')}")
        defaulted = answer["spec"].get("replicas") == 1
        if defaulted != (mode != "nothing"):
            sys.exit(f"{mode}: the write was {'' if defaulted else 'not '}defaulted")
        if i >= 50:  # the first 50 warm the connection and the API server's caches
            times.append(elapsed * 1000)
    conn.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--binary", default=str(ROOT / "target/debug/memcached-webhook"))
    parser.add_argument("--count", type=int, default=400)
    args = parser.parse_args()
    server, ca, cert, key = kubeconfig(args.kubeconfig)
    with tempfile.TemporaryDirectory() as workdir:
        proc, port = start_webhook(args.binary, pathlib.Path(workdir))
        try:
            configurations = webhook_configurations(args.kubeconfig, port, pathlib.Path(workdir) / "ca.crt")
            print(f"| installed | median (ms) | p90 (ms) |  ({args.count} dry-run creates each)")
            print("| --- | --- | --- |")
            for mode in ["nothing", "policies", "webhooks"]:
                set_mode(args.kubeconfig, mode, configurations)
                median, p90 = measure(server, ca, cert, key, args.count, mode)
                print(f"| {mode} | {median:.2f} | {p90:.2f} |", flush=True)
        finally:
            set_mode(args.kubeconfig, "nothing", None)
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
