//! The committed policies are what `memcached-webhook policies` writes today: a changed default,
//! limit or message in the server's code fails here until the component is regenerated.

use std::process::Command;

const COMMITTED: &str = "manifests/components/policies/policies.yaml";

#[test]
fn committed_policies_are_what_the_subcommand_writes() {
    let out = Command::new(env!("CARGO_BIN_EXE_memcached-webhook"))
        .arg("policies")
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{out:?}");
    let written = String::from_utf8(out.stdout).expect("UTF-8 YAML");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(COMMITTED);
    let committed = std::fs::read_to_string(&path).expect("the component's policies.yaml");
    assert!(
        written == committed,
        "{COMMITTED} is out of date; regenerate it with\n  cargo run -- policies > {COMMITTED}"
    );
}

#[test]
fn list_names_every_exported_and_skipped_rule_with_a_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_memcached-webhook"))
        .args(["policies", "--list"])
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let (exported, skipped) = text
        .split_once("Validation, skipped")
        .expect("both sections");
    for rule in ["r1_memory_limit", "r10_cpu_request", "memcached_item_size"] {
        assert!(exported.contains(rule), "{rule} not exported:\n{text}");
    }
    let entries = skipped.matches("\n  ").count() - skipped.matches("\n    reason: ").count();
    assert!(entries > 0, "{text}");
    assert_eq!(
        entries,
        skipped.matches("\n    reason: ").count(),
        "every skipped rule has a reason:\n{text}"
    );
}
