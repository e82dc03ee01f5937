//! `memcached-webhook check` as a user runs it: the fixtures in `tests/fixtures/check/` through
//! the binary (reports, exit statuses), and a few hundred generated specs judged by the running
//! server (mutate, apply the patch, validate) and by `check`, which must agree on every verdict,
//! field path, warning and patched object.

use std::io::Write as _;
use std::process::{Command, Stdio};

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::util::{self, Client, MUTATE, patch_of};

const VALIDATE: &str = "/validate-memcached-c5c3-io-v1beta1-memcached";

/// What one run printed and how it exited.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `memcached-webhook check ARGS` in the crate's directory (so fixture paths print short).
fn check(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_memcached-webhook"))
        .arg("check")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn fixture(name: &str) -> String {
    format!("tests/fixtures/check/{name}")
}

/// The objects of a JSON stream (`-o json`).
fn json_stream(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("not a JSON stream ({e}):\n{text}"))
}

/// The documents of a YAML stream (`-o yaml`), read by another YAML library than check's own.
fn yaml_stream(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{e}:\n{text}")))
        .collect()
}

#[test]
fn a_stream_reports_each_denial_and_warning_by_document() {
    let run = check(&[&fixture("stream.yaml")], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(
        run.stdout,
        "tests/fixtures/check/stream.yaml:12:1: denied team-a/bad\n\
         tests/fixtures/check/stream.yaml:20:18: spec.autoscaling.minReplicas: Invalid value: 5: minReplicas (5) must not exceed maxReplicas (2)\n\
         tests/fixtures/check/stream.yaml:35:1: warned team-b/scaled\n\
         tests/fixtures/check/stream.yaml:41:13: Warning: spec.replicas: removed the value 3 because spec.autoscaling.enabled is true \
         (the HorizontalPodAutoscaler sets the replica count)\n\
         judged 3, denied 1, warned 1, other kinds 1\n"
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn warnings_fail_the_run_only_with_warnings_as_errors() {
    let scaled = "apiVersion: memcached.c5c3.io/v1beta1\nkind: Memcached\nmetadata: {name: s}\n\
                  spec: {replicas: 3, autoscaling: {enabled: true, minReplicas: 2, maxReplicas: 5}, \
                  resources: {requests: {cpu: 100m}}}\n";
    let run = check(&["-"], scaled.as_bytes());
    let out = &run.stdout;
    assert_eq!(run.code, 0, "{out}");
    let first = "<stdin>:1:1: warned s\n<stdin>:4:18: Warning: spec.replicas: removed";
    assert!(out.starts_with(first), "{out}");
    assert!(
        out.ends_with("judged 1, denied 0, warned 1, other kinds 0\n"),
        "{out}"
    );
    let run = check(&["--warnings-as-errors", "-"], scaled.as_bytes());
    assert_eq!(run.code, 1, "{}", run.stdout);
}

#[test]
fn a_list_from_kubectl_get_is_judged_item_by_item_from_stdin() {
    // The README's audit: `kubectl get memcacheds -A -o yaml | memcached-webhook check -`.
    let list = std::fs::read(format!(
        "{}/{}",
        env!("CARGO_MANIFEST_DIR"),
        fixture("list.yaml")
    ))
    .unwrap();
    let run = check(&["-o", "json", "-"], &list);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr,
        "<stdin>:26:3: denied web/legacy\n\
         <stdin>:37:7: spec.security.sasl.credentialsSecretRef.name: Required value: credentialsSecretRef.name is required when SASL is enabled\n\
         judged 2, denied 1, warned 0, other kinds 0\n"
    );
    // Only the admitted one is printed, without what the apiserver sets itself.
    let printed = json_stream(&run.stdout);
    assert_eq!(printed.len(), 1, "{}", run.stdout);
    assert_eq!(
        printed[0],
        json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
               "metadata": {"name": "sessions", "namespace": "web"},
               "spec": {"replicas": 2, "image": "memcached:1.6",
                        "memcached": {"maxMemoryMB": 64, "maxConnections": 1024, "threads": 4,
                                      "maxItemSize": "1m"}}})
    );
}

#[test]
fn a_directory_is_searched_recursively_in_name_order() {
    let run = check(&["-o", "json", &fixture("tree")], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    // notes.txt is not a manifest name: never read (it is not YAML either), but named.
    assert!(
        run.stderr.starts_with(
            "memcached-webhook check: ignored tests/fixtures/check/tree/notes.txt: not a .yaml, .yml or .json file\n\
             tests/fixtures/check/tree/sub/b.yml:1:1: denied b\n\
             tests/fixtures/check/tree/sub/b.yml:6:3: Warning: spec.highAvailability: set, but spec.replicas is 1; \
             fewer than 2 replicas cannot survive losing a pod\n\
             tests/fixtures/check/tree/sub/b.yml:10:38: spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: 30:"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .ends_with("judged 3, denied 1, warned 1, other kinds 0, ignored files 1\n")
    );
    let names: Vec<_> = json_stream(&run.stdout)
        .iter()
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn a_json_stream_is_read_like_yaml_and_whole_floats_are_integers() {
    let run = check(&["-o", "json", &fixture("stream.json")], b"");
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.starts_with(
            "tests/fixtures/check/stream.json:4:1: denied team-c/pdb\n\
             tests/fixtures/check/stream.json:6:11: Warning: spec.highAvailability: set, but spec.replicas is 1; \
             fewer than 2 replicas cannot survive losing a pod\n\
             tests/fixtures/check/stream.json:6:32: spec.highAvailability.podDisruptionBudget: \
             Invalid value: \"minAvailable=1, maxUnavailable=1\": minAvailable and maxUnavailable are mutually exclusive"
        ),
        "{}",
        run.stderr
    );
    let printed = json_stream(&run.stdout);
    assert_eq!(printed.len(), 1);
    // `2.0` reaches the webhook as 2, as the apiserver forwards it.
    assert_eq!(printed[0]["spec"]["replicas"], json!(2));
    assert_eq!(printed[0]["spec"]["memcached"]["maxItemSize"], "2m");
}

#[test]
fn malformed_yaml_exits_2_naming_file_line_and_column_and_the_rest_is_judged() {
    let run = check(&[&fixture("malformed.yaml"), &fixture("tree/a.yaml")], b"");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.starts_with(
            "memcached-webhook check: tests/fixtures/check/malformed.yaml:6:5: not valid YAML: "
        ),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stdout,
        "judged 1, denied 0, warned 0, other kinds 0, unreadable 1\n"
    );
}

#[test]
fn a_wrongly_typed_field_is_a_denial_naming_it() {
    let run = check(&[&fixture("wrong-types.yaml")], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    let violations: Vec<_> = run
        .stdout
        .lines()
        .filter(|l| !l.contains(": denied ") && !l.starts_with("judged "))
        .collect();
    assert_eq!(
        violations,
        [
            "tests/fixtures/check/wrong-types.yaml:7:13: spec.replicas: expected an integer, found a string",
            // Plain 0755 is octal 493 to kubectl, so not the string the field wants.
            "tests/fixtures/check/wrong-types.yaml:15:18: spec.memcached.maxItemSize: expected a string, found an integer",
            "tests/fixtures/check/wrong-types.yaml:21:1: spec: expected an object, found an array",
        ]
    );
    assert!(
        run.stdout
            .ends_with("judged 3, denied 3, warned 0, other kinds 0\n")
    );
}

/// The findings about `team-a/everything` in a text report: (line, column, `field: message`).
fn everything(report: &str, file: &str) -> Vec<(usize, usize, String)> {
    report
        .lines()
        .filter_map(|l| l.strip_prefix(file)?.strip_prefix(':'))
        .filter(|l| !l.ends_with(" denied team-a/everything"))
        .map(|l| {
            let mut parts = l.splitn(3, ':');
            let line = parts.next().unwrap().parse().unwrap();
            let column = parts.next().unwrap().parse().unwrap();
            (line, column, parts.next().unwrap().trim_start().to_owned())
        })
        .collect()
}

/// The five wrongly typed fields and three broken rules of the `typed-and-invalid` fixtures.
const EIGHT: [&str; 8] = [
    "spec.memcached.maxItemSize: expected a string, found an integer",
    "spec.memcached.maxMemoryMB: expected an integer, found a string",
    "spec.memcached.threads: expected an integer, found a number with a fraction or exponent",
    "spec.monitoring: expected an object, found a boolean",
    "spec.replicas: expected an integer, found a string",
    "spec.highAvailability.podDisruptionBudget: Invalid value: \"minAvailable=1, maxUnavailable=1\": \
     minAvailable and maxUnavailable are mutually exclusive, specify only one",
    "spec.highAvailability.gracefulShutdown.terminationGracePeriodSeconds: Invalid value: 30: \
     terminationGracePeriodSeconds (30) must exceed preStopDelaySeconds (40)",
    "spec.security.sasl.credentialsSecretRef.name: Required value: \
     credentialsSecretRef.name is required when SASL is enabled",
];

#[test]
fn five_wrong_types_and_three_violations_are_reported_at_once_each_where_it_is() {
    // (fixture, the eight positions in EIGHT's order): a value's position, a mapping's key, and
    // for the missing credentialsSecretRef the key of its nearest parent (`sasl`).
    let cases: [(&str, [(usize, usize); 8]); 3] = [
        (
            "typed-and-invalid.yaml",
            [
                (13, 18),
                (11, 18),
                (12, 14),
                (9, 15),
                (8, 13),
                (15, 5),
                (22, 38),
                (24, 5),
            ],
        ),
        (
            "typed-and-invalid.json",
            [
                (8, 71),
                (8, 34),
                (8, 51),
                (7, 19),
                (6, 17),
                (10, 7),
                (14, 42),
                (17, 18),
            ],
        ),
        (
            "typed-and-invalid-list.yaml",
            [
                (30, 20),
                (28, 20),
                (29, 16),
                (26, 17),
                (25, 15),
                (32, 7),
                (39, 40),
                (41, 7),
            ],
        ),
    ];
    for (name, positions) in cases {
        let file = fixture(name);
        let run = check(&[&file], b"");
        assert_eq!(run.code, 1, "{name}: {}", run.stderr);
        let mut expected: Vec<_> = positions
            .iter()
            .zip(EIGHT)
            .map(|(&(l, c), m)| (l, c, m.to_owned()))
            .collect();
        // Printed by line and column, not in the order the rules run.
        expected.sort_by_key(|&(l, c, _)| (l, c));
        assert_eq!(everything(&run.stdout, &file), expected, "{name}");

        // The same findings as JSON, for CI annotations.
        let run = check(&["--report", "json", &file], b"");
        assert_eq!(run.code, 1, "{name}");
        let report: Value = serde_json::from_str(&run.stdout).unwrap();
        let findings = report["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 8, "{name}: {report}");
        for (finding, (line, column, text)) in findings.iter().zip(&expected) {
            assert_eq!(finding["file"], file.as_str());
            assert_eq!(
                (&finding["line"], &finding["column"]),
                (&json!(line), &json!(column))
            );
            assert_eq!(
                format!(
                    "{}: {}",
                    finding["field"].as_str().unwrap(),
                    finding["message"].as_str().unwrap()
                ),
                *text
            );
            assert_eq!(finding["severity"], "error");
            assert_eq!(finding["object"], "team-a/everything");
        }
        assert_eq!(report["summary"]["denied"], 1, "{name}");
    }
}

#[test]
fn nothing_found_is_an_error_unless_allowed() {
    let empty = tempfile::tempdir().unwrap();
    let dir = empty.path().to_str().unwrap();
    for (args, stdin) in [
        (&[dir][..], &b""[..]),
        (&["-"][..], &b""[..]),
        (&["-"][..], &b"---\n# only a comment\n"[..]),
    ] {
        let run = check(args, stdin);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        let nothing = "no Kubernetes object found in the inputs (pass --allow-empty";
        assert!(run.stderr.contains(nothing), "{}", run.stderr);
        assert_eq!(run.stdout, "judged 0, denied 0, warned 0, other kinds 0\n");
        let allowed: Vec<&str> = [&["--allow-empty"][..], args].concat();
        let run = check(&allowed, stdin);
        assert_eq!(run.code, 0, "{allowed:?}: {}", run.stderr);
        assert_eq!(run.stderr, "");
    }
}

#[test]
fn extensions_match_in_any_case_and_other_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read(format!(
        "{}/{}",
        env!("CARGO_MANIFEST_DIR"),
        fixture("typed-and-invalid.yaml")
    ))
    .unwrap();
    std::fs::write(dir.path().join("full.YAML"), &source).unwrap();
    std::fs::write(dir.path().join("README.md"), "# not a manifest\n").unwrap();
    let run = check(&[dir.path().to_str().unwrap()], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout
            .ends_with("judged 1, denied 1, warned 0, other kinds 0, ignored files 1\n"),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.stderr,
        format!(
            "memcached-webhook check: ignored {}: not a .yaml, .yml or .json file\n",
            dir.path().join("README.md").display()
        )
    );
}

#[test]
fn a_json_syntax_error_gives_its_position_once() {
    let run = check(&["-"], b"{\"kind\": \"Memcached\",\n \"spec\" 1}");
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "memcached-webhook check: <stdin>:2:9: not valid JSON: expected `:`\n"
    );
}

#[test]
fn other_kinds_are_passed_over_and_counted() {
    let run = check(&[&fixture("not-memcached.yaml")], b"");
    assert_eq!(run.code, 0);
    assert_eq!(run.stdout, "judged 0, denied 0, warned 0, other kinds 3\n");
}

#[test]
fn the_samples_are_admitted_except_the_refused_one() {
    let run = check(&["manifests/samples"], b"");
    // refused.yaml is refused on purpose (the README's Verify and hand-over apply it), for the
    // reason its comment gives; every other sample is admitted.
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(", denied 1, "), "{}", run.stdout);
    assert!(!run.stdout.starts_with("judged 0,"), "{}", run.stdout);
    assert!(
        run.stdout.contains(
            "manifests/samples/refused.yaml:10:1: denied default/refused-cache\n\
             manifests/samples/refused.yaml:17:18: spec.memcached.maxItemSize: Invalid value: \
             \"100k\": memcached refuses an item size below its slab chunk size (512k)"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn usage_errors_and_missing_files_exit_2() {
    let cases: [(&[&str], &str); 3] = [
        (&[], "<FILE|DIR|->"),
        (&["-o", "xml", "x.yaml"], "--output"),
        (&["--no-such-flag", "x.yaml"], "--no-such-flag"),
    ];
    for (args, named) in cases {
        let run = check(args, b"");
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(named), "{}", run.stderr);
    }
    let run = check(&[&fixture("no-such-file.yaml")], b"");
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("tests/fixtures/check/no-such-file.yaml: No such file"),
        "{}",
        run.stderr
    );
    // Server flags and `check` do not mix (the server's flags are unchanged otherwise).
    let out = Command::new(env!("CARGO_BIN_EXE_memcached-webhook"))
        .args(["--dev", "check", "x.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The server's verdict on one object: (allowed, violations, warnings, patched object), with
/// violations as `check` prints them (`field: message` per cause, else the status message).
async fn served(client: &mut Client, object: &Value) -> (bool, Vec<String>, Vec<String>, Value) {
    let review = |object: &Value| {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "memcached.c5c3.io", "version": "v1beta1", "kind": "Memcached"},
                        "resource": {"group": "memcached.c5c3.io", "version": "v1beta1", "resource": "memcacheds"},
                        "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
                        "operation": "CREATE", "object": object, "oldObject": null}}))
        .unwrap()
    };
    let mut warnings = Vec::new();
    let mut object = object.clone();
    for path in [MUTATE, VALIDATE] {
        let (_, body) = client.post(path, review(&object)).await;
        let answer = util::json(&body);
        let response = &answer["response"];
        for w in response["warnings"].as_array().into_iter().flatten() {
            warnings.push(w.as_str().unwrap().to_owned());
        }
        if response["allowed"] == false {
            let mut status = &response["status"];
            // An object the defaulting webhook cannot read: `check` lists what the validating
            // webhook says of it as sent (every type error and violation), so ask it too.
            let validated;
            if path == MUTATE && status["code"] == 400 && status["details"]["causes"].is_array() {
                let (_, body) = client.post(VALIDATE, review(&object)).await;
                validated = util::json(&body);
                assert_eq!(validated["response"]["status"]["code"], 422, "{validated}");
                status = &validated["response"]["status"];
            }
            let violations = match status["details"]["causes"].as_array() {
                Some(causes) if !causes.is_empty() => causes
                    .iter()
                    .map(|c| {
                        format!(
                            "{}: {}",
                            c["field"].as_str().unwrap(),
                            c["message"].as_str().unwrap()
                        )
                    })
                    .collect(),
                _ => vec![status["message"].as_str().unwrap().to_owned()],
            };
            return (false, violations, warnings, object);
        }
        if response.get("patch").is_some() {
            let patch: json_patch::Patch = serde_json::from_value(patch_of(&answer)).unwrap();
            json_patch::patch(&mut object, &patch).unwrap();
        }
    }
    (true, Vec::new(), warnings, object)
}

/// What the apiserver forwards for a number: Go prints a whole float64 without a fraction, and
/// reads it back as an integer (`4.0` and `-0.0` reach a webhook as `4` and `0`).
fn as_forwarded(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n
                .as_f64()
                .filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.2e18)
            {
                *value = json!(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(as_forwarded),
        Value::Object(map) => map.values_mut().for_each(as_forwarded),
        _ => {}
    }
}

/// One object's lines in a report: (allowed, violations, warnings).
type Reported = (bool, Vec<String>, Vec<String>);

/// Reads `check`'s report back: for each `denied`/`warned` header, the lines under it, keyed
/// by the object's `namespace/name`.
fn parse_report(report: &str) -> std::collections::HashMap<String, Reported> {
    let mut objects = std::collections::HashMap::new();
    let mut current: Option<String> = None;
    for line in report.lines() {
        // Every line but the summary starts with its position: `file:line:col: `.
        let line = match line.splitn(4, ':').collect::<Vec<_>>()[..] {
            [_, l, c, rest] if l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok() => {
                rest.strip_prefix(' ').unwrap()
            }
            _ => line,
        };
        if let Some(rest) = line
            .strip_prefix("denied ")
            .or(line.strip_prefix("warned "))
        {
            let name = rest.rsplit(' ').next().unwrap().to_owned();
            let allowed = line.starts_with("warned ");
            objects.insert(name.clone(), (allowed, Vec::new(), Vec::new()));
            current = Some(name);
        } else if let Some(warning) = line.strip_prefix("Warning: ") {
            let entry: &mut Reported = objects.get_mut(current.as_ref().unwrap()).unwrap();
            entry.2.push(warning.to_owned());
        } else if line.starts_with("judged ") {
        } else {
            let entry: &mut Reported = objects.get_mut(current.as_ref().unwrap()).unwrap();
            entry.1.push(line.to_owned());
        }
    }
    objects
}

#[tokio::test]
async fn check_and_the_running_server_agree_on_generated_specs() {
    const N: usize = 300;
    let mut runner = TestRunner::deterministic();
    let strategy = proptest::prop_oneof![
        1 => crate::robustness::tree().boxed(),
        3 => crate::robustness::typed(),
    ];
    let objects: Vec<Value> = (0..N)
        .map(|i| {
            let spec = strategy.new_tree(&mut runner).unwrap().current();
            json!({"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                   "metadata": {"name": format!("c{i}"), "namespace": "agree"}, "spec": spec})
        })
        .collect();

    let server = util::start().await;
    let mut client = server.client().await;
    let mut expected = Vec::new();
    for object in &objects {
        let mut forwarded = object.clone();
        as_forwarded(&mut forwarded);
        expected.push(served(&mut client, &forwarded).await);
    }

    // Objects with several wrongly typed fields are among them, each field a violation.
    let type_errors = |e: &(bool, Vec<String>, Vec<String>, Value)| {
        e.1.iter().filter(|v| v.contains(": expected ")).count()
    };
    assert!(
        expected.iter().filter(|e| type_errors(e) >= 2).count() >= N / 20,
        "too few objects with several type errors"
    );

    // The same objects as one YAML stream, as a user would keep them.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("generated.yaml");
    let mut text = String::new();
    for object in &objects {
        text.push_str("---\n");
        memcached_webhook::yaml::write(&mut text, object);
    }
    std::fs::write(&path, &text).unwrap();
    let run = check(&["-o", "yaml", path.to_str().unwrap()], b"");
    let denied = expected.iter().filter(|e| !e.0).count();
    assert_eq!(run.code, if denied > 0 { 1 } else { 0 }, "{}", run.stderr);
    // The generator reaches both verdicts, or the comparison proves little.
    assert!(
        denied > N / 10 && denied < N * 9 / 10,
        "{denied} of {N} denied"
    );

    let reported = parse_report(&run.stderr);
    let mut admitted = Vec::new();
    for (i, (allowed, violations, warnings, patched)) in expected.into_iter().enumerate() {
        let name = format!("agree/c{i}");
        let mut got = reported
            .get(&name)
            .cloned()
            .unwrap_or((true, Vec::new(), Vec::new()));
        // check prints by position, the server answers in rule order: compared as sets.
        let (mut violations, mut warnings) = (violations, warnings);
        for list in [&mut got.1, &mut got.2, &mut violations, &mut warnings] {
            list.sort();
        }
        assert_eq!(
            got,
            (allowed, violations, warnings),
            "{name}: check (left) and the server (right) differ on {}",
            objects[i]
        );
        if allowed {
            admitted.push(patched);
        }
    }
    let warned = reported.values().filter(|r| !r.2.is_empty()).count();
    assert!(
        run.stderr.ends_with(&format!(
            "judged {N}, denied {denied}, warned {warned}, other kinds 0\n"
        )),
        "{}",
        run.stderr
    );
    // `-o yaml` prints each admitted object as the server's patch leaves it.
    assert_eq!(yaml_stream(&run.stdout), admitted);
}

#[test]
fn findings_are_printed_by_line_and_column_and_the_summary_names_both_passings_over() {
    let run = check(&[&fixture("order.yaml")], b"");
    assert_eq!(run.code, 1, "{}", run.stderr);
    let positions: Vec<(usize, usize)> = run
        .stdout
        .lines()
        .filter_map(|l| {
            let mut parts = l
                .strip_prefix("tests/fixtures/check/order.yaml:")?
                .split(':');
            Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
        })
        .collect();
    assert_eq!(
        positions,
        [(2, 1), (10, 15), (12, 18), (13, 21), (15, 3), (16, 5)],
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("maxMemoryMB=64 (64Mi) + 32Mi overhead"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .ends_with("judged 1, denied 1, warned 1, other kinds 0\n"),
        "{}",
        run.stdout
    );
}
