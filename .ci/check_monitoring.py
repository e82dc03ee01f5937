#!/usr/bin/env python3
"""Monitoring checks: manifests/components/monitoring's alerts and dashboard.

- promtool: the PrometheusRule's rules pass `promtool check rules`, and alerts.test.yaml passes
  `promtool test rules` (the spec is extracted into rules.yaml next to a copy of the test file);
- every alert has a severity (critical or warning), a summary, a description and a runbook_url
  that points at its own heading in docs/runbooks.md; every runbook heading is an alert; every
  alert is fired by at least one test case and kept quiet by another;
- the dashboard JSON parses, its panel ids are unique (rows' panels included), and every panel
  and query takes its data source from the `datasource` variable, never a hard-coded UID.

That every metric and label value used exists on a running server's /metrics is checked by
tests/monitoring.rs (cargo test). Run `.ci/check-monitoring`, which installs promtool and PyYAML
when missing; `python3 .ci/check_monitoring.py` works from any directory once they are there.
One PASS or FAIL line per check; the exit status is 1 if any failed.
"""

from __future__ import annotations

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import yaml
except ImportError:
    sys.exit("check_monitoring.py: PyYAML is missing: run .ci/check-monitoring, which installs python3-yaml")

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMPONENT = ROOT / "manifests/components/monitoring"
RULE = COMPONENT / "prometheusrule.yaml"
TESTS = COMPONENT / "alerts.test.yaml"
DASHBOARD = COMPONENT / "memcached-webhook-dashboard.json"
RUNBOOKS = ROOT / "docs/runbooks.md"
RUNBOOK_BASE = "https://github.com/c5c3/memcached-webhook/blob/main/docs/runbooks.md#"
SEVERITIES = {"critical", "warning"}
DATASOURCE_VARIABLE = {"${datasource}", "$datasource"}
results = []


def report(ok, name, detail=""):
    results.append(ok)
    print(("PASS  " if ok else "FAIL  ") + name + ("" if ok or not detail else f": {detail}"))


def github_anchor(heading):
    """The anchor GitHub gives a markdown heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def alerts(rule):
    return [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]


def check_promtool(rule, promtool):
    with tempfile.TemporaryDirectory() as tmp:
        rules = pathlib.Path(tmp) / "rules.yaml"
        rules.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
        shutil.copy(TESTS, pathlib.Path(tmp) / "alerts.test.yaml")
        for args, name in (
            (["check", "rules", str(rules)], "promtool check rules: the PrometheusRule's spec"),
            (["test", "rules", str(pathlib.Path(tmp) / "alerts.test.yaml")],
             f"promtool test rules: {TESTS.relative_to(ROOT)}"),
        ):
            r = subprocess.run([promtool, *args], check=False, capture_output=True, text=True)
            report(r.returncode == 0, name, (r.stdout + r.stderr).strip())


def check_annotations(rule):
    anchors = {github_anchor(line[3:]) for line in RUNBOOKS.read_text().splitlines() if line.startswith("## ")}
    problems = []
    names = []
    for a in alerts(rule):
        name = a["alert"]
        names.append(name)
        ann, labels = a.get("annotations", {}), a.get("labels", {})
        if labels.get("severity") not in SEVERITIES:
            problems.append(f"{name}: severity {labels.get('severity')!r} not one of {sorted(SEVERITIES)}")
        for key in ("summary", "description"):
            if not str(ann.get(key, "")).strip():
                problems.append(f"{name}: no {key}")
        if "$labels" not in ann.get("description", "") and "$value" not in ann.get("description", ""):
            problems.append(f"{name}: the description names neither a label nor the value")
        url = ann.get("runbook_url", "")
        if url != RUNBOOK_BASE + name.lower():
            problems.append(f"{name}: runbook_url {url!r} is not {RUNBOOK_BASE + name.lower()}")
        elif name.lower() not in anchors:
            problems.append(f"{name}: docs/runbooks.md has no heading '## {name}'")
    if len(set(names)) != len(names):
        problems.append(f"alert names repeat: {sorted(n for n in names if names.count(n) > 1)}")
    orphans = sorted(anchors - {n.lower() for n in names})
    if orphans:
        problems.append(f"docs/runbooks.md has sections for no alert: {orphans}")
    report(not problems, f"alerts: all {len(names)} have severity, summary, description and a runbook section",
           "; ".join(problems))
    return names


def check_test_coverage(names):
    """promtool compares exp_alerts exactly, so a case that fires an alert for one series also
    proves that the other series of its group (written to stay quiet) did not fire it."""
    tests = yaml.safe_load(TESTS.read_text())
    fired = {case["alertname"] for group in tests["tests"] for case in group.get("alert_rule_test", [])
             if case.get("exp_alerts")}
    missing = [n for n in names if n not in fired]
    report(not missing, "alerts.test.yaml: every alert has a case that fires it", f"never fired: {missing}")


def walk_panels(panels):
    for p in panels:
        yield p
        yield from walk_panels(p.get("panels", []))


def datasource_ok(ds):
    """A panel's or query's data source: the variable, as a string or as {type, uid}."""
    if ds is None:
        return True  # inherits the panel's
    if isinstance(ds, str):
        return ds in DATASOURCE_VARIABLE
    return ds.get("uid") in DATASOURCE_VARIABLE


def check_dashboard():
    try:
        dash = json.loads(DASHBOARD.read_text())
    except json.JSONDecodeError as e:
        report(False, f"dashboard: {DASHBOARD.relative_to(ROOT)} parses", str(e))
        return
    report(True, f"dashboard: {DASHBOARD.relative_to(ROOT)} parses")
    panels = list(walk_panels(dash.get("panels", [])))
    ids = [p.get("id") for p in panels]
    dupes = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    report(panels and None not in ids and not dupes, f"dashboard: {len(panels)} panels, unique ids",
           f"missing ids: {ids.count(None)}, repeated: {dupes}")

    problems = []
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds_var = variables.get("datasource")
    if not ds_var or ds_var.get("type") != "datasource" or ds_var.get("query") != "prometheus":
        problems.append("no templating variable 'datasource' of type datasource (query prometheus)")
    elif ds_var.get("current", {}).get("value") not in (None, "", "default"):
        problems.append(f"the datasource variable's current value is a fixed UID: {ds_var['current']}")
    if "__inputs" in dash:
        problems.append("__inputs: an export 'for sharing externally' that binds a data source")
    for p in panels:
        if p.get("type") == "row":
            continue
        if not datasource_ok(p.get("datasource")) or p.get("datasource") is None:
            problems.append(f"panel {p.get('title')!r}: datasource {p.get('datasource')!r}")
        for t in p.get("targets", []):
            if not datasource_ok(t.get("datasource")):
                problems.append(f"panel {p.get('title')!r} query {t.get('refId')}: datasource {t.get('datasource')!r}")
    for name, v in variables.items():
        if v.get("type") == "query" and not datasource_ok(v.get("datasource")):
            problems.append(f"variable {name}: datasource {v.get('datasource')!r}")
    report(not problems, "dashboard: every panel, query and variable uses the datasource variable, no fixed UID",
           "; ".join(problems))


def main():
    promtool = shutil.which("promtool")
    rule = yaml.safe_load(RULE.read_text())
    if promtool is None:
        report(False, "promtool", "not on PATH (Debian package prometheus): run .ci/check-monitoring")
    else:
        check_promtool(rule, promtool)
    names = check_annotations(rule)
    check_test_coverage(names)
    check_dashboard()
    failed = results.count(False)
    print()
    print(f"check-monitoring: {failed} of {len(results)} checks FAILED" if failed
          else f"check-monitoring: OK, all {len(results)} checks")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
