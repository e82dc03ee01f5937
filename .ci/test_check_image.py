#!/usr/bin/env python3
"""Unit tests for .ci/check-image: the .dockerignore matcher on the cases where Docker's rules
surprise, the Dockerfile reader, and the verdicts on cargo's output and on a review's answer.

Run: `python3 .ci/test_check_image.py` (standard library only, no root needed).
"""

import base64
import importlib.machinery
import importlib.util
import json
import sys
import tempfile
import unittest
from pathlib import Path

_PATH = str(Path(__file__).resolve().parent / "check-image")
_LOADER = importlib.machinery.SourceFileLoader("check_image", _PATH)
_SPEC = importlib.util.spec_from_loader("check_image", _LOADER)
ci = importlib.util.module_from_spec(_SPEC)
sys.modules["check_image"] = ci  # dataclasses look their module up there
_LOADER.exec_module(ci)


def excluded(ignore_file: str, path: str) -> bool:
    return ci.Matcher(ci.read_ignore_file(ignore_file)).excluded(path)


class ReadIgnoreFile(unittest.TestCase):
    def test_comments_blank_lines_and_whitespace(self):
        text = "\ufeff# comment\n\n  target  \n #not-a-comment\n! src \n"
        self.assertEqual(ci.read_ignore_file(text), ["target", "#not-a-comment", "!src"])

    def test_leading_slash_and_dot_are_cleaned(self):
        text = "/target\n./docs/\n!/src/../src/x\n//a//b/\n/\n"
        self.assertEqual(ci.read_ignore_file(text), ["target", "docs", "!src/x", "a/b", "/"])


class Matching(unittest.TestCase):
    def test_the_projects_rules(self):
        rules = "*\n!Cargo.toml\n!Cargo.lock\n!src\n"
        self.assertFalse(excluded(rules, "Cargo.toml"))
        self.assertFalse(excluded(rules, "src"))
        self.assertFalse(excluded(rules, "src/server/conn.rs"), "a rule on a dir covers its tree")
        self.assertTrue(excluded(rules, "benches/latency.rs"))
        self.assertTrue(excluded(rules, "README.md"))
        self.assertTrue(excluded(rules, "target/release/memcached-webhook"))

    def test_last_matching_rule_wins(self):
        self.assertTrue(excluded("*\n!src\nsrc\n", "src/main.rs"))
        self.assertFalse(excluded("src\n!src\n", "src/main.rs"))
        self.assertTrue(excluded("*\n!src\nsrc/secret\n", "src/secret/key.pem"))
        self.assertFalse(excluded("*\n!src\nsrc/secret\n", "src/lib.rs"))

    def test_star_does_not_cross_a_slash(self):
        self.assertTrue(excluded("*.md\n", "README.md"))
        self.assertFalse(excluded("*.md\n", "docs/guide.md"))
        self.assertTrue(excluded("*/*.md\n", "docs/guide.md"))
        self.assertFalse(excluded("?.rs\n", "ab.rs"))
        self.assertTrue(excluded("?.rs\n", "a.rs"))

    def test_double_star(self):
        self.assertTrue(excluded("**/*.rs\n", "a.rs"))
        self.assertTrue(excluded("**/*.rs\n", "x/y/a.rs"))
        self.assertTrue(excluded("**/target\n", "target"), "**/name matches name at the top")
        self.assertTrue(excluded("**/target\n", "a/b/target/x"))
        self.assertTrue(excluded("src/**\n", "src/a/b"))
        self.assertTrue(excluded("src/**/*.rs\n", "src/main.rs"), "** matches zero dirs")
        self.assertTrue(excluded("src/**/*.rs\n", "src/a/b/main.rs"))
        self.assertFalse(excluded("src/**/*.rs\n", "srcx/main.rs"))
        self.assertTrue(excluded("**\n", "anything/at/all"))
        self.assertTrue(excluded("a/**/b\n", "a/x/y/b"))

    def test_regex_characters_are_literal(self):
        self.assertTrue(excluded("a+b.txt\n", "a+b.txt"))
        self.assertFalse(excluded("a+b.txt\n", "aab.txt"))
        self.assertFalse(excluded("a.txt\n", "abtxt"))
        self.assertTrue(excluded("(x)|{y}$\n", "(x)|{y}$"))

    def test_classes_and_escapes(self):
        self.assertTrue(excluded("[a-c].rs\n", "b.rs"))
        self.assertFalse(excluded("[a-c].rs\n", "d.rs"))
        self.assertTrue(excluded("[^a].rs\n", "b.rs"))
        self.assertFalse(excluded("[^a].rs\n", "a.rs"))
        self.assertTrue(excluded("\\*.rs\n", "*.rs"))
        self.assertFalse(excluded("\\*.rs\n", "a.rs"))

    def test_bad_patterns_are_errors(self):
        for bad in ("!", "[", "[a", "a\\", "[]", "[z-a]", "[-a]"):
            with self.subTest(pattern=bad), self.assertRaises(ValueError):
                ci.Matcher([bad])

    def test_negation_reaches_into_an_excluded_directory(self):
        matcher = ci.Matcher(ci.read_ignore_file("target\n!target/keep\n"))
        self.assertFalse(matcher.excluded("target/keep"))
        self.assertTrue(matcher.excluded("target/other"))
        self.assertTrue(matcher.may_include_below("target"))
        self.assertFalse(matcher.may_include_below("docs"))
        self.assertTrue(ci.Matcher(["*", "!**/*.rs"]).may_include_below("deep"))
        self.assertTrue(ci.Matcher(["*", "!*/keep"]).may_include_below("any"))
        self.assertFalse(ci.Matcher(["*", "!src"]).may_include_below("target"))


class Context(unittest.TestCase):
    def test_walks_excluded_directories_only_when_a_rule_reaches_in(self):
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp, "src"), Path(tmp, "ctx")
            for rel in ("Cargo.toml", "src/main.rs", "target/keep", "target/drop", "docs/a.md"):
                (source / rel).parent.mkdir(parents=True, exist_ok=True)
                (source / rel).write_text(rel)
            (source / ".dockerignore").write_text("*\n!Cargo.toml\n!src\n!target/keep\n")
            target.mkdir()
            entries = ci.build_context(source, "Dockerfile", target)
            self.assertEqual(entries, ["Cargo.toml", "src", "src/main.rs", "target/keep"])
            self.assertEqual((target / "target/keep").read_text(), "target/keep")
            self.assertFalse((target / "docs").exists())

    def test_a_dockerfile_specific_ignore_file_wins(self):
        with tempfile.TemporaryDirectory() as tmp:
            source, target = Path(tmp, "src"), Path(tmp, "ctx")
            source.mkdir()
            target.mkdir()
            (source / "a").write_text("a")
            (source / "b").write_text("b")
            (source / ".dockerignore").write_text("a\n")
            (source / "Dockerfile.x.dockerignore").write_text("b\n")
            self.assertEqual(ci.build_context(source, "Dockerfile.x", target),
                             [".dockerignore", "Dockerfile.x.dockerignore", "a"])


class Dockerfile(unittest.TestCase):
    def test_continuations_comments_args_and_stages(self):
        text = (
            "# syntax=docker/dockerfile:1\n"
            "ARG BASE=docker.io/library/rust:1.95-bookworm\n"
            "FROM ${BASE} AS build\n"
            "RUN a \\\n"
            "# dropped comment\n"
            "\n"
            "    && b\n"
            "FROM gcr.io/distroless/cc-debian12:nonroot\n"
            "COPY --from=build /x /x\n"
            'ENTRYPOINT ["/x"]\n'
        )
        args, stages = ci.parse_dockerfile(text)
        self.assertEqual(args, {"BASE": "docker.io/library/rust:1.95-bookworm"})
        self.assertEqual([(s.name, s.image) for s in stages],
                         [("build", "docker.io/library/rust:1.95-bookworm"),
                          ("1", "gcr.io/distroless/cc-debian12:nonroot")])
        run = stages[0].instructions[0]
        self.assertEqual((run.line, run.name, " ".join(run.args.split())), (4, "RUN", "a && b"))
        self.assertEqual(stages[1].instructions[0].flags, {"from": "build"})

    def test_what_is_not_emulated_fails(self):
        for text, reason in (
            ("FROM a\nENV X=1\n", "ENV: instruction not emulated"),
            ("FROM a\nCOPY --chown=1 a b\n", "flag --chown not emulated"),
            ("FROM a\nRUN --mount=type=cache,target=/x true\n", "flag --mount not emulated"),
            ("FROM ${NOPE}\n", "$NOPE is not a declared ARG"),
            ("ARG A=1\nFROM ${A:-x}\n", "not emulated"),
            ("RUN true\n", "before the first FROM"),
        ):
            with self.subTest(text=text), self.assertRaises(ci.Failure) as caught:
                ci.parse_dockerfile(text)
            self.assertIn(reason, str(caught.exception))


class CopySemantics(unittest.TestCase):
    def copy(self, args: str, files: dict, workdir: str = "/src") -> Path:
        tmp = Path(tempfile.mkdtemp())
        self.addCleanup(__import__("shutil").rmtree, tmp)
        context, root = tmp / "ctx", tmp / "root"
        for rel, text in files.items():
            (context / rel).parent.mkdir(parents=True, exist_ok=True)
            (context / rel).write_text(text)
        root.mkdir()
        ci.copy_sources(ci.Instruction(7, "COPY", args), context, root, workdir)
        return root

    def test_files_into_a_directory_and_a_directorys_contents(self):
        root = self.copy("Cargo.toml Cargo.lock ./", {"Cargo.toml": "t", "Cargo.lock": "l"})
        self.assertEqual((root / "src/Cargo.lock").read_text(), "l")
        root = self.copy("src ./src", {"src/main.rs": "m"})
        self.assertEqual((root / "src/src/main.rs").read_text(), "m")

    def test_missing_source_and_bad_destination_fail(self):
        with self.assertRaisesRegex(ci.Failure, "src not found in the context"):
            self.copy("src ./src", {"Cargo.toml": "t"})
        with self.assertRaisesRegex(ci.Failure, "must end in /"):
            self.copy("a b dir", {"a": "a", "b": "b"})


class Verdicts(unittest.TestCase):
    def verdicts(self, runs):
        lines = []
        report = ci.Report()
        report.ok = lambda m: lines.append("PASS " + m)
        report.fail = lambda m: lines.append("FAIL " + m)
        ci.check_dependency_layer(runs, "memcached-webhook", report)
        return lines

    def test_a_working_cache(self):
        manifests = {"Cargo.toml", "Cargo.lock"}
        runs = [(ci.Instruction(38, "RUN", ""), manifests, ["serde", "memcached-webhook"]),
                (ci.Instruction(50, "RUN", ""), manifests | {"src"}, ["memcached-webhook"])]
        lines = self.verdicts(runs)
        self.assertTrue(all(line.startswith("PASS") for line in lines), lines)
        self.assertIn("compiles 1 dependencies", lines[0])

    def test_dependencies_compiled_with_the_sources_fail(self):
        runs = [(ci.Instruction(38, "RUN", ""), {"Cargo.toml", "Cargo.lock", "src"},
                 ["serde", "tokio", "memcached-webhook"])]
        lines = self.verdicts(runs)
        self.assertTrue(any(line.startswith("FAIL cache: no RUN compiles") for line in lines))
        self.assertTrue(any("compiles 2 crates besides memcached-webhook (serde, tokio)" in line
                            for line in lines), lines)

    def test_a_crate_layer_that_builds_nothing_ships_the_stand_in(self):
        runs = [(ci.Instruction(38, "RUN", ""), {"Cargo.toml", "Cargo.lock"}, ["serde"]),
                (ci.Instruction(50, "RUN", ""), {"Cargo.toml", "Cargo.lock", "src"}, [])]
        self.assertIn("ship the stand-in", self.verdicts(runs)[-1])

    def test_review_answers(self):
        request = {"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u1"}}
        patch = base64.b64encode(b'[{"op":"add","path":"/spec/x","value":1}]').decode()
        good = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": "u1", "allowed": True, "patchType": "JSONPatch",
                             "patch": patch}}
        self.assertEqual(ci.check_review(200, json.dumps(good).encode(), request), "")
        wrong_uid = json.loads(json.dumps(good))
        wrong_uid["response"]["uid"] = "u2"
        self.assertIn("uid", ci.check_review(200, json.dumps(wrong_uid).encode(), request))
        no_patch = json.loads(json.dumps(good))
        del no_patch["response"]["patchType"]
        self.assertIn("patchType", ci.check_review(200, json.dumps(no_patch).encode(), request))
        self.assertIn("HTTP 500", ci.check_review(500, b"boom", request))
        self.assertIn("not an AdmissionReview", ci.check_review(200, b"[]", request))
        self.assertIn("not an AdmissionReview",
                      ci.check_review(200, b'{"response": "yes"}', request))
        bad_patch = json.loads(json.dumps(good))
        bad_patch["response"]["patch"] = "%%%"
        self.assertIn("not base64", ci.check_review(200, json.dumps(bad_patch).encode(), request))


class FirstError(unittest.TestCase):
    def test_cargo_error_with_its_cause(self):
        output = ("   Compiling serde v1.0.0\n"
                  "error: failed to parse manifest at `/src/Cargo.toml`\n\nCaused by:\n"
                  "  can't find `latency2` bench at `benches/latency2.rs`\n")
        self.assertEqual(ci.first_error(output), "error: failed to parse manifest at "
                         "`/src/Cargo.toml` / can't find `latency2` bench at `benches/latency2.rs`")

    def test_last_line_without_an_error_line(self):
        output = "touch: cannot touch 'src/main.rs': No such file or directory\n\n"
        self.assertEqual(ci.first_error(output),
                         "touch: cannot touch 'src/main.rs': No such file or directory")


class LoopbackArgs(unittest.TestCase):
    def test_every_bind_address_moves_to_loopback(self):
        args, ports = ci.loopback_args(["--webhook-bind-address=0.0.0.0:9443",
                                        "--metrics-bind-address=0.0.0.0:8080",
                                        "--cert-name=tls.crt"])
        self.assertEqual(sorted(ports), [8080, 9443])
        self.assertEqual(args[0], f"--webhook-bind-address=127.0.0.1:{ports[9443]}")
        self.assertEqual(args[2], "--cert-name=tls.crt")
        self.assertNotIn(9443, ports.values())


if __name__ == "__main__":
    unittest.main()
