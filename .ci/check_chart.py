#!/usr/bin/env python3
"""Chart checks: charts/memcached-webhook with Helm v4's own engine (PyPI helm-python-sdk, the
Helm SDK as a shared library: the same chart loader, renderer, linter and schema validator as
the helm binary).

- the chart is what charts/generate.py writes from manifests/ (not stale);
- `helm lint --strict` finds nothing, with the defaults and with every option on;
- values.schema.json refuses typos and wrongly typed values, in lint, render and install alike;
- the default render is `kubectl kustomize manifests/` object for object (less the Namespace,
  which Helm cannot own: its release lives there); with the CRD and the monitoring pieces on,
  it is the kustomize install with those components (the CRD gains helm.sh/resource-policy:
  keep, nothing else differs);
- each value changes the render as values.yaml says (template tests);
- every rendered object validates against the Kubernetes schemas as check-deploy validates the
  kustomize install (its code, imported), and its agreement checks hold for changed values.

Run `.ci/check-chart` (it installs the packages, then runs this file and the real-apiserver
install). unittest's summary line closes the output; the exit status is 1 if a test failed.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest
from typing import ClassVar

try:
    import helm_python as helm
    import yaml
except ImportError as e:
    sys.exit(f"check_chart.py: {e.name} is missing: run .ci/check-chart, which installs it")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import check_deploy  # the kustomize builds, the schemas and the agreement checks

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "memcached-webhook"
NS = "memcached-webhook-system"
EVERYTHING = {"crds": {"install": True}, "monitoring": {
    "serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}, "dashboard": {"enabled": True}}}
KEEP = "helm.sh/resource-policy"


def render(values=None, namespace=NS) -> list[dict]:
    """The chart's objects for `values`, rendered as `helm template` renders them."""
    with helm.Chart.load(CHART) as chart:
        out = chart.render(values, name="memcached-webhook", namespace=namespace, is_install=True)
    return [d for path, text in sorted(out.items()) if path.endswith(".yaml")
            for d in yaml.safe_load_all(text) if d]


def by_id(objs) -> dict[tuple, dict]:
    return {check_deploy.key(o): o for o in objs}


def find(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found[0] if len(found) == 1 else None


def container(objs) -> dict:
    return find(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


class Kustomize:
    """The kustomize installs, built once."""
    _cache: ClassVar[dict[str, list[dict]]] = {}

    @classmethod
    def get(cls, which: str) -> list[dict]:
        if which not in cls._cache:
            with tempfile.TemporaryDirectory() as tmp:
                cls._cache["base"] = check_deploy.kustomize(ROOT / "manifests", "manifests/")
                cls._cache["everything"] = check_deploy.overlay(tmp, "everything", """\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [{manifests}/with-crd]
components: [{manifests}/components/servicemonitor, {manifests}/components/monitoring]
""")
        return copy.deepcopy(cls._cache[which])


class Generated(unittest.TestCase):
    def test_the_chart_is_what_generate_py_writes(self):
        run = subprocess.run([sys.executable, str(ROOT / "charts/generate.py"), "--check"],
                             capture_output=True, text=True, check=False)
        self.assertEqual(run.returncode, 0, run.stderr)


class Ruff(unittest.TestCase):
    def test_the_chart_s_python_is_clean(self):
        files = ["charts/generate.py", ".ci/check_chart.py", ".ci/helm-engine"]
        status, out = check_deploy.run([check_deploy.tool("ruff"), "check", "--no-cache", *files])
        self.assertEqual(status, 0, out)


class Lint(unittest.TestCase):
    def lint(self, values):
        report = helm.lint(CHART, values, strict=True, namespace=NS)
        # Severity 1 is INFO (`icon is recommended`); --strict fails on 2 (WARNING) and above.
        return [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]

    def test_strict_lint_is_clean_with_defaults_and_with_every_option(self):
        self.assertEqual(self.lint(None), [])
        self.assertEqual(self.lint({**EVERYTHING, "certManager": {"issuer": {"name": "corp", "kind": "ClusterIssuer"}},
                                    "autoscalerConflicts": False, "validationActions": "Warn,Audit",
                                    "webhookConfigurations": {"enabled": False}}), [])

    def test_strict_lint_fails_wrong_values(self):
        problems = self.lint({"replicas": "two"})
        self.assertTrue(any("replicas" in str(p) for p in problems), problems)


class Schema(unittest.TestCase):
    REFUSED: ClassVar[dict] = {
        "a misspelt key": ({"replica": 3}, "replica"),
        "a misspelt nested key": ({"image": {"tagg": "1.0"}}, "tagg"),
        "a misspelt toggle": ({"monitoring": {"serviceMonitor": {"enable": True}}}, "enable"),
        "a number as a string": ({"replicas": "3"}, "replicas"),
        "on instead of true": ({"autoscalerConflicts": "on"}, "autoscalerConflicts"),
        "Deny with Warn": ({"validationActions": "Deny,Warn"}, "validationActions"),
        "a duration without a unit": ({"shutdown": {"delay": "5"}}, "delay"),
        "a digest that is not sha256": ({"image": {"digest": "latest"}}, "digest"),
        "an issuer kind cert-manager lacks": ({"certManager": {"issuer": {"kind": "Issuers"}}}, "kind"),
        "a flag without --": ({"extraArgs": ["log-level=debug"]}, "extraArgs"),
        "a plain-HTTP webhook URL": ({"webhookConfigurations": {"url": "http://127.0.0.1:9443"}}, "url"),
    }

    def test_wrong_values_are_errors_naming_the_key(self):
        with helm.Chart.load(CHART) as chart:
            for what, (values, key) in self.REFUSED.items():
                with self.subTest(what):
                    with self.assertRaises(helm.HelmValuesError) as refused:
                        chart.validate_schema(values)
                    self.assertIn(key, str(refused.exception))
                    with self.assertRaises(helm.HelmValuesError):
                        chart.render(values, name="memcached-webhook", namespace=NS)

    def test_the_defaults_and_every_option_pass(self):
        with helm.Chart.load(CHART) as chart:
            chart.validate_schema(None)
            chart.validate_schema({**EVERYTHING, "image": {"digest": "sha256:" + "0" * 64},
                                   "validationActions": "Warn,Audit", "extraArgs": ["--log-level=debug"]})


class SameAsKustomize(unittest.TestCase):
    def assertSameObjects(self, chart, kustomize):
        chart, kustomize = by_id(chart), by_id(kustomize)
        self.assertEqual(sorted(chart, key=str), sorted(kustomize, key=str), "different objects")
        for ident, obj in kustomize.items():
            self.assertEqual(chart[ident], obj, f"{ident} differs from the kustomize install")

    def test_the_default_render_is_the_kustomize_install_less_its_namespace(self):
        base = Kustomize.get("base")
        self.assertEqual([o["kind"] for o in base if o["kind"] == "Namespace"], ["Namespace"])
        objs = render()
        self.assertSameObjects(objs, [o for o in base if o["kind"] != "Namespace"])
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            self.assertEqual(find(objs, kind), find(base, kind))

    def test_with_crd_and_monitoring_it_is_the_kustomize_install_with_those_components(self):
        objs = render(EVERYTHING)
        crd = find(objs, "CustomResourceDefinition")
        self.assertEqual(crd["metadata"]["annotations"].pop(KEEP), "keep")
        if not crd["metadata"]["annotations"]:
            del crd["metadata"]["annotations"]
        self.assertSameObjects(objs, [o for o in Kustomize.get("everything") if o["kind"] != "Namespace"])


class Values(unittest.TestCase):
    """What each value changes in the render."""

    def test_image_tag_digest_pull_policy_and_secrets(self):
        self.assertEqual(container(render())["image"], "ghcr.io/c5c3/memcached-webhook:"
                         + helm.Chart.load(CHART).metadata["appVersion"])
        digest = "sha256:" + "ab" * 32
        objs = render({"image": {"repository": "registry.example.com/mw", "tag": "9.9.9", "digest": digest,
                                 "pullPolicy": "Always"}, "imagePullSecrets": [{"name": "regcred"}]})
        self.assertEqual(container(objs)["image"], f"registry.example.com/mw:9.9.9@{digest}")
        self.assertEqual(container(objs)["imagePullPolicy"], "Always")
        self.assertEqual(find(objs, "Deployment")["spec"]["template"]["spec"]["imagePullSecrets"], [{"name": "regcred"}])

    def test_replicas_resources_and_placement(self):
        placement = {"nodeSelector": {"kubernetes.io/os": "linux"},
                     "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
                     "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                         "nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "node-role", "operator": "In", "values": ["infra"]}]}]}}},
                     "priorityClassName": "system-cluster-critical"}
        resources = {"requests": {"cpu": "50m", "memory": "48Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}}
        objs = render({"replicas": 3, "resources": resources, **placement})
        pod = find(objs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(find(objs, "Deployment")["spec"]["replicas"], 3)
        self.assertEqual(pod["containers"][0]["resources"], resources)
        for key, value in placement.items():
            self.assertEqual(pod[key], value, key)
        default = find(render(), "Deployment")["spec"]["template"]["spec"]
        self.assertFalse({"nodeSelector", "tolerations", "affinity", "priorityClassName", "imagePullSecrets"} & set(default))

    def test_validation_actions_and_extra_args(self):
        args = container(render({"validationActions": "Warn,Audit", "extraArgs": ["--log-level=debug"]}))["args"]
        self.assertEqual(args[-2:], ["--validation-actions=Warn,Audit", "--log-level=debug"])
        self.assertFalse([a for a in container(render())["args"] if a.startswith("--validation-actions")])

    def test_shutdown_timings(self):
        objs = render({"shutdown": {"delay": "7s", "gracePeriod": "20s", "terminationGracePeriodSeconds": 45}})
        args = container(objs)["args"]
        self.assertIn("--shutdown-delay=7s", args)
        self.assertIn("--shutdown-grace-period=20s", args)
        self.assertEqual(find(objs, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 45)

    def test_autoscaler_conflicts_and_metrics_secure_off_take_every_api_access_away(self):
        on, off = render(), render({"autoscalerConflicts": False, "metricsSecure": False})
        self.assertIn("--autoscaler-conflicts=on", container(on)["args"])
        self.assertIn("--autoscaler-conflicts=off", container(off)["args"])
        for name in ("memcached-webhook-autoscalers", "memcached-webhook-metrics-auth"):
            self.assertIsNotNone(find(on, "ClusterRole", name))
            self.assertIsNone(find(off, "ClusterRole", name))
            self.assertIsNone(find(off, "ClusterRoleBinding", name))
        pod = find(off, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual([v["name"] for v in pod["volumes"]], ["serving-certs"])
        self.assertEqual([m["name"] for m in pod["containers"][0]["volumeMounts"]], ["serving-certs"])
        self.assertEqual(find(off, "NetworkPolicy")["spec"]["egress"], [])

    def test_either_api_reader_alone_keeps_the_token_and_the_egress(self):
        for values in ({"autoscalerConflicts": False}, {"metricsSecure": False}):
            with self.subTest(values=values):
                objs = render(values)
                pod = find(objs, "Deployment")["spec"]["template"]["spec"]
                self.assertIn("kube-api-access", [v["name"] for v in pod["volumes"]])
                self.assertTrue(find(objs, "NetworkPolicy")["spec"]["egress"])

    def test_metrics_secure_off_scrapes_plain_http_without_a_token(self):
        on = render(EVERYTHING)
        off = render({**EVERYTHING, "metricsSecure": False})
        self.assertIn("--metrics-secure", container(on)["args"])
        self.assertIn("--metrics-secure=false", container(off)["args"])
        for kind, name in (("ClusterRole", "memcached-webhook-metrics-auth"),
                           ("ClusterRole", "memcached-webhook-metrics-reader"),
                           ("ClusterRoleBinding", "memcached-webhook-metrics-reader")):
            self.assertIsNotNone(find(on, kind, name))
            self.assertIsNone(find(off, kind, name))
        (secure,) = find(on, "ServiceMonitor")["spec"]["endpoints"]
        (plain,) = find(off, "ServiceMonitor")["spec"]["endpoints"]
        self.assertEqual((secure["scheme"], plain["scheme"]), ("https", "http"))
        self.assertIn("tlsConfig", secure)
        self.assertIn("bearerTokenFile", secure)
        self.assertFalse({"tlsConfig", "bearerTokenFile"} & set(plain))
        annotations = find(off, "Deployment")["spec"]["template"]["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scheme"], "http")

    def test_webhook_configurations_off_installs_the_server_alone(self):
        objs = render({"webhookConfigurations": {"enabled": False}})
        kinds = {o["kind"] for o in objs}
        self.assertFalse(kinds & {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"})
        self.assertEqual(len(objs), len(render()) - 2)

    def test_a_url_replaces_the_service_in_both_webhooks(self):
        objs = render({"webhookConfigurations": {"url": "https://127.0.0.1:9443/", "caBundle": "Q0E="}})
        for kind, path in (("MutatingWebhookConfiguration", "/mutate-memcached-c5c3-io-v1beta1-memcached"),
                           ("ValidatingWebhookConfiguration", "/validate-memcached-c5c3-io-v1beta1-memcached")):
            self.assertEqual(find(objs, kind)["webhooks"][0]["clientConfig"],
                             {"url": f"https://127.0.0.1:9443{path}", "caBundle": "Q0E="})
        without_ca = render({"webhookConfigurations": {"url": "https://webhook.example.com"}})
        self.assertEqual(find(without_ca, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"],
                         {"url": "https://webhook.example.com/mutate-memcached-c5c3-io-v1beta1-memcached"})

    def test_an_existing_issuer_replaces_the_chart_s_own_chain(self):
        objs = render({"certManager": {"issuer": {"name": "corp-ca", "kind": "ClusterIssuer"}}})
        self.assertEqual([o["metadata"]["name"] for o in objs if o["apiVersion"].startswith("cert-manager.io/")],
                         ["memcached-webhook-serving"])
        self.assertEqual(find(objs, "Certificate")["spec"]["issuerRef"],
                         {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "corp-ca"})
        self.assertEqual(len([o for o in render() if o["apiVersion"].startswith("cert-manager.io/")]), 4)

    def test_each_monitoring_piece_and_the_crd_alone(self):
        pieces = {"serviceMonitor": {"ServiceMonitor", "Service", "ClusterRoleBinding"}, "prometheusRule": {"PrometheusRule"},
                  "dashboard": {"ConfigMap"}}
        default = {check_deploy.key(o) for o in render()}
        for piece, kinds in pieces.items():
            with self.subTest(piece):
                added = [o for o in render({"monitoring": {piece: {"enabled": True}}})
                         if check_deploy.key(o) not in default]
                self.assertEqual({o["kind"] for o in added}, kinds)
        added = [o for o in render({"crds": {"install": True}}) if check_deploy.key(o) not in default]
        self.assertEqual([o["metadata"]["name"] for o in added], ["memcacheds.memcached.c5c3.io"])

    def test_another_release_namespace_moves_everything_that_names_it(self):
        objs = render(EVERYTHING, namespace="webhooks")
        text = json.dumps(objs)
        self.assertNotIn(NS, text)
        self.assertTrue(all(o["metadata"].get("namespace", "webhooks") == "webhooks" for o in objs))
        self.assertIn("memcached-webhook.webhooks.svc", find(objs, "Certificate", "memcached-webhook-serving")["spec"]["dnsNames"])
        mwc = find(objs, "MutatingWebhookConfiguration")
        self.assertEqual(mwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "webhooks/memcached-webhook-serving")
        self.assertEqual(mwc["webhooks"][0]["clientConfig"]["service"]["namespace"], "webhooks")
        self.assertEqual(find(objs, "ClusterRoleBinding", "memcached-webhook-autoscalers")["subjects"][0]["namespace"],
                         "webhooks")

    def test_notes_say_how_to_verify(self):
        with helm.Chart.load(CHART) as chart:
            notes = chart.render(None, name="memcached-webhook", namespace=NS)["memcached-webhook/templates/NOTES.txt"]
            self.assertIn(f"kubectl -n {NS} rollout status deploy/memcached-webhook", notes)
            self.assertIn("--dry-run=server", notes)
            off = chart.render({"webhookConfigurations": {"enabled": False}}, name="memcached-webhook", namespace=NS)
            self.assertIn("Handing admission over", off["memcached-webhook/templates/NOTES.txt"])


class KubernetesSchemas(unittest.TestCase):
    VARIANTS: ClassVar[list] = [None, EVERYTHING, {"autoscalerConflicts": False, "validationActions": "Warn,Audit",
                                                   "webhookConfigurations": {"url": "https://127.0.0.1:9443",
                                                                             "caBundle": "Q0E="}},
                {"certManager": {"issuer": {"name": "corp-ca", "kind": "ClusterIssuer"}}, "replicas": 3,
                 "nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}], "priorityClassName": "high",
                 "imagePullSecrets": [{"name": "regcred"}], "image": {"digest": "sha256:" + "0" * 64}},
                {**EVERYTHING, "metricsSecure": False, "autoscalerConflicts": False}]

    def checked(self, check, *args):
        before = len(check_deploy.results)
        check(*args)
        return check_deploy.results[before:]

    def test_every_rendered_object_validates_as_check_deploy_validates_the_kustomize_install(self):
        for values in self.VARIANTS:
            with self.subTest(values=values):
                results = self.checked(check_deploy.check_schemas, render(values))
                self.assertTrue(results and all(results), "see the FAIL lines above")

    def test_check_deploy_s_agreements_hold_for_changed_values(self):
        namespace = [o for o in Kustomize.get("base") if o["kind"] == "Namespace"]
        for values in self.VARIANTS[1:] + [{"shutdown": {"delay": "10s", "gracePeriod": "25s",
                                                         "terminationGracePeriodSeconds": 40}}]:
            with self.subTest(values=values):
                w = check_deploy.webhook_view(render(values) + namespace)
                self.assertIsNotNone(w)
                for agreement in (check_deploy.agree_pods, check_deploy.agree_api_access,
                                  check_deploy.agree_network_policy, check_deploy.agree_pod_security):
                    results = self.checked(agreement, w)
                    self.assertTrue(all(results), f"{agreement.__name__}: see the FAIL line above")


if __name__ == "__main__":
    os.chdir(ROOT)
    helm.disable_logging()
    unittest.main(verbosity=2)
