#!/usr/bin/env python3
"""Generates memcached.c5c3.io_memcacheds.yaml, the Memcached CRD.

The Memcached fields (types, minimum/maximum, enum, pattern, default) are written out below,
following the reference operator's Go markers (C5C3/memcached-operator api/v1beta1). The
embedded Kubernetes types (ResourceRequirements, PodSecurityContext, SecurityContext,
TopologySpreadConstraint, the autoscaling/v2 MetricSpec and HorizontalPodAutoscalerBehavior,
networking/v1 NetworkPolicyPeer, LocalObjectReference) are not typed in by hand: they are
converted from the Kubernetes OpenAPI definitions shipped in the PyPI package
`kubernetes-validate` (KUBE_VERSION below, the k8s.io/api minor the reference builds against)
into structural schemas, the way controller-gen does it:

  * `$ref`s are inlined; `["T", "null"]` types become `T`;
  * resource.Quantity becomes int-or-string with the Quantity pattern, intstr.IntOrString
    becomes int-or-string, meta/v1 Time a `date-time` string;
  * `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`, `x-kubernetes-map-type` and
    `required` are kept; extensions a CRD may not carry (`x-kubernetes-unions`) are dropped;
  * descriptions of embedded types are cut to their first sentence to keep the CRD (two
    versions) well under the 256 KiB that `kubectl apply` may store in its
    last-applied-configuration annotation.

Usage (from the repository root; .ci/check-deploy runs the --check form):

    python3 manifests/components/crd/generate.py            # rewrite the YAML
    python3 manifests/components/crd/generate.py --check    # fail if the committed YAML differs
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import sys

import yaml

KUBE_VERSION = "1.35.0"
OUT = pathlib.Path(__file__).with_name("memcached.c5c3.io_memcacheds.yaml")

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?"
    r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
KEPT_EXTENSIONS = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type")


# === Kubernetes definitions ===


def load_definitions() -> dict:
    try:
        import kubernetes_validate
    except ImportError:
        sys.exit("generate.py: needs the PyPI package kubernetes-validate (pip install kubernetes-validate)")
    root = pathlib.Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = root / f"v{KUBE_VERSION}-local" / "_definitions.json"
    if not path.exists():
        sys.exit(f"generate.py: {path} is missing: this kubernetes-validate has no Kubernetes {KUBE_VERSION}")
    return json.loads(path.read_text())["$defs"]


ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.")


def first_sentence(text: str) -> str:
    """The text up to the first full stop outside parentheses that is not an abbreviation."""
    text = " ".join(text.split())
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif (ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " ")
              and not text[: i + 1].endswith(ABBREVIATIONS)):
            return text[: i + 1]
    return text


class Converter:
    """Turns Kubernetes OpenAPI definitions into structural CRD schemas."""

    def __init__(self, defs: dict):
        self.defs = defs

    def ref(self, name: str, description: str | None = None) -> dict:
        out = self.convert({"$ref": "#/$defs/" + name}, ())
        if description is not None:
            out = {"description": description, **{k: v for k, v in out.items() if k != "description"}}
        return out

    def convert(self, node: dict, stack: tuple) -> dict:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            if name in stack:
                raise SystemExit(f"generate.py: recursive type {name} cannot be a structural schema")
            special = self.special(name)
            target = special if special is not None else self.convert(self.defs[name], stack + (name,))
            out = copy.deepcopy(target)
            if "description" in node:
                out["description"] = first_sentence(node["description"])
            return out
        out: dict = {}
        if "description" in node:
            out["description"] = first_sentence(node["description"])
        t = node.get("type")
        if isinstance(t, list):
            t = [x for x in t if x != "null"]
            t = t[0] if len(t) == 1 else t
        if t is not None:
            if isinstance(t, list):
                raise SystemExit(f"generate.py: union type {t} has no structural form")
            out["type"] = t
        for key in ("format", "enum", "pattern", "minimum", "maximum", "minLength", "maxLength",
                    "minItems", "maxItems", "required", *KEPT_EXTENSIONS):
            if key in node:
                out[key] = copy.deepcopy(node[key])
        if "properties" in node:
            out["properties"] = {k: self.convert(v, stack) for k, v in node["properties"].items()}
            out.setdefault("type", "object")
        ap = node.get("additionalProperties")
        if isinstance(ap, dict):
            out["additionalProperties"] = self.convert(ap, stack)
            out.setdefault("type", "object")
        if "items" in node:
            out["items"] = self.convert(node["items"], stack)
            out.setdefault("type", "array")
        if "oneOf" in node:
            raise SystemExit(f"generate.py: oneOf in {stack[-1] if stack else node} has no structural form")
        return out

    @staticmethod
    def special(name: str) -> dict | None:
        if name == "io.k8s.apimachinery.pkg.api.resource.Quantity":
            return {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
                    "x-kubernetes-int-or-string": True}
        if name == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
            return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        if name == "io.k8s.apimachinery.pkg.apis.meta.v1.Time":
            return {"type": "string", "format": "date-time"}
        return None


# === schema helpers for our own fields ===


def int32(description: str, **kw) -> dict:
    return {"description": description, "type": "integer", "format": "int32", **kw}


def int64(description: str, **kw) -> dict:
    return {"description": description, "type": "integer", "format": "int64", **kw}


def string(description: str, **kw) -> dict:
    return {"description": description, "type": "string", **kw}


def boolean(description: str) -> dict:
    return {"description": description, "type": "boolean"}


def obj(description: str, properties: dict, **kw) -> dict:
    return {"description": description, "type": "object", "properties": properties, **kw}


def string_map(description: str) -> dict:
    return {"description": description, "type": "object", "additionalProperties": {"type": "string"}}


def int_or_string(description: str) -> dict:
    return {"description": description, "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True}


def secret_ref(k: Converter, description: str) -> dict:
    # The reference's Go field is a non-pointer corev1.LocalObjectReference, whose `name`
    # carries `+default=""`; controller-gen writes that default and so do we.
    ref = k.ref("io.k8s.api.core.v1.LocalObjectReference", description)
    ref["properties"]["name"]["default"] = ""
    return ref


def memcached_schema(k: Converter) -> dict:
    core = k.ref
    spec = obj(
        "MemcachedSpec defines the desired state of Memcached.",
        {
            "replicas": int32(
                "Number of memcached pods. Mutually exclusive with autoscaling.enabled. No schema "
                "default on purpose: the defaulting webhook sets 1 only when autoscaling is off.",
                minimum=0, maximum=64),
            "image": string("Container image for memcached.", default="memcached:1.6"),
            "resources": core("io.k8s.api.core.v1.ResourceRequirements",
                              "Compute resources of the memcached container. A memory limit must "
                              "be at least memcached.maxMemoryMB + 32Mi."),
            "memcached": obj(
                "memcached server settings; the defaulting webhook creates this section when it is absent.",
                {
                    "maxMemoryMB": int32("Item memory in megabytes (-m).", minimum=16, maximum=65536, default=64),
                    "maxConnections": int32("Maximum simultaneous connections (-c).", minimum=1, maximum=65536,
                                            default=1024),
                    "threads": int32("Worker threads (-t).", minimum=1, maximum=128, default=4),
                    "maxItemSize": string("Largest item size (-I), a number with a k or m suffix.",
                                          pattern="^[0-9]+(k|m)$", default="1m"),
                    "verbosity": int32("Log verbosity: 0 quiet, 1 -v, 2 -vv.", minimum=0, maximum=2, default=0),
                    "extraArgs": {"description": "Extra command-line arguments passed to memcached as they are.",
                                  "type": "array", "items": {"type": "string"}},
                },
            ),
            "highAvailability": obj(
                "Scheduling and disruption settings.",
                {
                    "antiAffinityPreset": string("Pod anti-affinity across nodes: soft (preferred) or hard "
                                                 "(required).", enum=["soft", "hard"], default="soft"),
                    "topologySpreadConstraints": {
                        "description": "Topology spread constraints added to the memcached pods.",
                        "type": "array",
                        "items": core("io.k8s.api.core.v1.TopologySpreadConstraint"),
                    },
                    "podDisruptionBudget": obj(
                        "PodDisruptionBudget for the memcached pods; exactly one of minAvailable and "
                        "maxUnavailable when enabled.",
                        {
                            "enabled": boolean("Create a PodDisruptionBudget."),
                            "minAvailable": int_or_string("Pods that must stay available (number or percentage)."),
                            "maxUnavailable": int_or_string("Pods that may be unavailable (number or percentage)."),
                        },
                    ),
                    "gracefulShutdown": obj(
                        "A preStop delay so clients drop the pod before memcached stops.",
                        {
                            "enabled": boolean("Add the preStop delay."),
                            "preStopDelaySeconds": int32("Seconds the preStop hook waits.", minimum=1, maximum=300,
                                                         default=10),
                            "terminationGracePeriodSeconds": int64(
                                "Pod termination grace period; must exceed preStopDelaySeconds.",
                                minimum=1, maximum=600, default=30),
                        },
                    ),
                },
            ),
            "monitoring": obj(
                "Prometheus exporter sidecar and ServiceMonitor.",
                {
                    "enabled": boolean("Run the memcached exporter sidecar."),
                    "exporterImage": string("Exporter container image.", default="prom/memcached-exporter:v0.15.4"),
                    "exporterResources": core("io.k8s.api.core.v1.ResourceRequirements",
                                              "Compute resources of the exporter container."),
                    "serviceMonitor": obj(
                        "Prometheus Operator ServiceMonitor for the exporter.",
                        {
                            "additionalLabels": string_map("Extra labels on the ServiceMonitor."),
                            "interval": string("Scrape interval.", default="30s"),
                            "scrapeTimeout": string("Scrape timeout.", default="10s"),
                        },
                    ),
                },
            ),
            "security": obj(
                "Pod and container security, SASL, TLS and network policy.",
                {
                    "podSecurityContext": core("io.k8s.api.core.v1.PodSecurityContext",
                                               "Security context of the memcached pods."),
                    "containerSecurityContext": core("io.k8s.api.core.v1.SecurityContext",
                                                     "Security context of the memcached container."),
                    "sasl": obj(
                        "SASL authentication.",
                        {
                            "enabled": boolean("Require SASL authentication."),
                            "credentialsSecretRef": secret_ref(
                                k, "Secret with the key password-file; required when enabled."),
                        },
                    ),
                    "tls": obj(
                        "TLS for client connections.",
                        {
                            "enabled": boolean("Serve TLS."),
                            "certificateSecretRef": secret_ref(
                                k, "Secret with tls.crt, tls.key and optionally ca.crt; required when enabled."),
                            "enableClientCert": boolean("Require client certificates (mTLS)."),
                        },
                    ),
                    "networkPolicy": obj(
                        "NetworkPolicy for the memcached pods.",
                        {
                            "enabled": boolean("Create a NetworkPolicy."),
                            "allowedSources": {
                                "description": "Peers allowed to connect; empty allows all sources.",
                                "type": "array",
                                "items": core("io.k8s.api.networking.v1.NetworkPolicyPeer"),
                            },
                        },
                    ),
                },
            ),
            "autoscaling": obj(
                "HorizontalPodAutoscaler for the memcached Deployment.",
                {
                    "enabled": boolean("Create a HorizontalPodAutoscaler; spec.replicas must then be unset."),
                    "minReplicas": int32("Lower replica bound.", minimum=1),
                    "maxReplicas": int32("Upper replica bound.", minimum=1),
                    "metrics": {
                        "description": "HPA metrics; the defaulting webhook adds 80% average CPU utilization "
                                       "when empty.",
                        "type": "array",
                        "items": core("io.k8s.api.autoscaling.v2.MetricSpec"),
                    },
                    "behavior": core("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior",
                                     "HPA scaling behavior; the defaulting webhook sets a 300 s scale-down "
                                     "stabilization window when unset."),
                },
            ),
            "service": obj("Settings of the memcached Service.",
                           {"annotations": string_map("Annotations on the Service.")}),
        },
    )
    condition = {
        "description": "Condition contains details for one aspect of the current state of this API Resource.",
        "type": "object",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "message": {"type": "string", "maxLength": 32768},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                       "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "type": {"type": "string", "maxLength": 316,
                     "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
        },
    }
    status = obj(
        "MemcachedStatus defines the observed state of Memcached.",
        {
            "conditions": {"description": "Available, Progressing, Degraded and Ready.", "type": "array",
                           "items": condition, "x-kubernetes-list-type": "map",
                           "x-kubernetes-list-map-keys": ["type"]},
            "readyReplicas": int32("Ready memcached pods."),
            "observedGeneration": int64("The generation the status describes."),
            "serverList": {"description": "host:port of every ready server.", "type": "array",
                           "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
        },
    )
    return {
        "description": "Memcached is a memcached deployment managed by the memcached operator.",
        "type": "object",
        "properties": {
            "apiVersion": {"description": "The versioned schema of this representation of an object.",
                           "type": "string"},
            "kind": {"description": "The REST resource this object represents.", "type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def crd(schema: dict) -> dict:
    columns = [
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas",
         "description": "Desired memcached pods"},
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas",
         "description": "Ready memcached pods"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]

    def version(name: str, storage: bool, deprecated: bool) -> dict:
        v = {
            "name": name,
            "served": True,
            "storage": storage,
            "schema": {"openAPIV3Schema": copy.deepcopy(schema)},
            "subresources": {"status": {}},
            "additionalPrinterColumns": copy.deepcopy(columns),
        }
        if deprecated:
            v["deprecated"] = True
            v["deprecationWarning"] = ("memcached.c5c3.io/v1alpha1 Memcached is deprecated; "
                                       "use memcached.c5c3.io/v1beta1")
        return v

    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": "memcacheds.memcached.c5c3.io",
            "labels": {"app.kubernetes.io/name": "memcached-webhook", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": "memcached.c5c3.io",
            "names": {"kind": "Memcached", "listKind": "MemcachedList", "plural": "memcacheds",
                      "singular": "memcached"},
            "scope": "Namespaced",
            # v1alpha1 and v1beta1 have the same schema: the API server converts by rewriting
            # apiVersion only, and webhooks registered for v1beta1 see v1alpha1 writes too
            # (matchPolicy: Equivalent).
            "conversion": {"strategy": "None"},
            "versions": [version("v1beta1", True, False), version("v1alpha1", False, True)],
        },
    }


class Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


Dumper.add_representer(str, _str)


def render() -> str:
    doc = crd(memcached_schema(Converter(load_definitions())))
    body = yaml.dump(doc, Dumper=Dumper, sort_keys=True, width=100, default_flow_style=False)
    return (
        "# Generated by manifests/components/crd/generate.py from its field table and the Kubernetes "
        f"{KUBE_VERSION} OpenAPI\n"
        "# definitions (PyPI kubernetes-validate). Do not edit by hand: edit generate.py and rerun it.\n"
        "---\n" + body
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed YAML is not current")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is not what generate.py produces: run python3 manifests/components/crd/generate.py",
                  file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
