//! The reader on hand-written objects: type errors named by path, the rest still read.

use super::*;
use crate::memcached::READ;

fn read_json(json: &str) -> Result<String, String> {
    let mut bytes = json.as_bytes().to_vec();
    let tape = simd_json::to_tape(&mut bytes).expect("test JSON is valid");
    read(Val::root(&tape))
        .map(|m| format!("{m:?}"))
        .map_err(|e| e.to_string())
}

#[test]
fn type_errors_name_the_field_path() {
    let more = [
        (
            r#"{"spec":5}"#,
            "spec: expected an object, found an integer",
        ),
        (
            r#"{"spec":{"image":7}}"#,
            "spec.image: expected a string, found an integer",
        ),
        (
            r#"{"spec":{"memcached":{"threads":4.5}}}"#,
            "spec.memcached.threads: expected an integer, found a number with a fraction or exponent",
        ),
        (
            r#"{"spec":{"memcached":{"extraArgs":["-o",1]}}}"#,
            "spec.memcached.extraArgs[]: expected a string, found an integer",
        ),
        (
            r#"{"spec":{"autoscaling":{"metrics":{}}}}"#,
            "spec.autoscaling.metrics: expected an array, found an object",
        ),
        (
            r#"{"spec":{"highAvailability":{"podDisruptionBudget":{"minAvailable":true}}}}"#,
            "spec.highAvailability.podDisruptionBudget.minAvailable: expected an integer or a string, found a boolean",
        ),
        (
            r#"{"metadata":{"name":1}}"#,
            "metadata.name: expected a string, found an integer",
        ),
        (
            r#"{"spec":{"monitoring":{"exporterResources":{"limits":[]}}}}"#,
            "spec.monitoring.exporterResources.limits: expected an object, found an array",
        ),
        (
            r#"{"spec":{"resources":{"requests":"1"}}}"#,
            "spec.resources.requests: expected an object, found a string",
        ),
        (r#"[]"#, "object: expected an object, found an array"),
    ];
    for (json, expected) in crate::test_support::MISTYPED.into_iter().chain(more) {
        assert_eq!(read_json(json), Err(expected.to_owned()), "{json}");
    }
}

#[test]
fn every_wrongly_typed_field_is_named_and_the_rest_still_read() {
    let mut bytes = br#"{"metadata":{"name":"m"},"spec":{"replicas":"three",
        "memcached":{"maxMemoryMB":"64","threads":4.5,"maxItemSize":1,"extraArgs":[1,2],
                     "maxConnections":10},
        "monitoring":{"enabled":"yes"},"image":"memcached:1.6",
        "highAvailability":{"podDisruptionBudget":{"minAvailable":true,"maxUnavailable":1}}}}"#
        .to_vec();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let e = read(Val::root(&tape)).unwrap_err();
    let fields: Vec<_> = e.errors.iter().map(|e| e.field.as_ref()).collect();
    // In the order the reader meets them.
    assert_eq!(
        fields.join(" "),
        "spec.replicas spec.memcached.maxMemoryMB spec.memcached.threads \
         spec.memcached.maxItemSize spec.memcached.extraArgs[] spec.monitoring.enabled \
         spec.highAvailability.podDisruptionBudget.minAvailable"
    );
    assert!(e.to_string().starts_with(
        "[spec.replicas: expected an integer, found a string, spec.memcached.maxMemoryMB: "
    ));
    // What could be read was read; what could not reads as absent.
    assert_eq!(e.partial.name, "m");
    let spec = e.partial.spec.get().unwrap();
    assert_eq!(spec.image, Field::Set("memcached:1.6"));
    assert_eq!(spec.replicas, Field::Absent);
    let config = spec.memcached.get().unwrap();
    assert_eq!(config.max_connections, Field::Set(10));
    assert!(config.extra_args.is_none());
    let ha = spec.high_availability.get().unwrap();
    let pdb = ha.pod_disruption_budget.get().unwrap();
    assert_eq!(pdb.max_unavailable, Field::Set(IntOrString::Int(1)));
    assert!(e.covers("spec.replicas"));
    assert!(e.covers("spec.memcached.extraArgs[0]"));
    assert!(!e.covers("spec.replicasX"));
    assert!(!e.covers("spec.memcached"));
}

#[test]
fn nulls_and_absences_are_told_apart() {
    let mut bytes =
        br#"{"spec":{"replicas":null,"memcached":{"threads":0},"monitoring":null}}"#.to_vec();
    let tape = simd_json::to_tape(&mut bytes).unwrap();
    let mc = read(Val::root(&tape)).unwrap();
    let spec = mc.spec.get().unwrap();
    assert_eq!(spec.replicas, Field::Null);
    assert_eq!(spec.image, Field::Absent);
    assert_eq!(spec.memcached.get().unwrap().threads, Field::Set(0));
    assert!(matches!(spec.monitoring, Field::Null));
}

/// `{"spec": {...section: {member: value}}}`, or the section empty when `member` is `None`.
fn in_section(section: &[&str], member: Option<(&str, serde_json::Value)>) -> String {
    let mut value =
        serde_json::Value::Object(member.into_iter().map(|(k, v)| (k.into(), v)).collect());
    for key in section.iter().rev() {
        value = serde_json::json!({ *key: value });
    }
    value.to_string()
}

/// [`READ`] against the reader and the CRD, in every version the CRD serves: each member it
/// names is read (a wrongly typed value is refused), and every other member the CRD has in that
/// section, or one it does not have, is read by nothing (the view is the same without it).
/// That is what lets the admission reader skip them.
#[test]
fn read_names_exactly_the_members_the_view_reads() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/manifests/components/crd/memcached.c5c3.io_memcacheds.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let crd: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
    let versions = crd["spec"]["versions"].as_array().expect("spec.versions");
    assert!(!versions.is_empty());
    // Wrongly typed for every member read: none is an array of arrays.
    let odd = || serde_json::json!([[{"a": 1}]]);
    for version in versions {
        for (section, names) in READ {
            let mut schema = &version["schema"]["openAPIV3Schema"];
            for key in section {
                schema = &schema["properties"][key];
            }
            let members = schema["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("the CRD has no section {section:?}"));
            let empty = read_json(&in_section(section, None));
            for name in names {
                assert!(
                    members.contains_key(*name),
                    "{section:?}.{name} is not in the CRD"
                );
                let read = read_json(&in_section(section, Some((name, odd()))));
                assert!(read.is_err(), "{section:?}.{name} is not read: {read:?}");
            }
            let unread = members
                .keys()
                .map(String::as_str)
                .filter(|m| !names.contains(m));
            for member in unread.chain(["notInTheCrd"]) {
                let read = read_json(&in_section(section, Some((member, odd()))));
                assert_eq!(read, empty, "{section:?}.{member} is read but not in READ");
            }
        }
    }
}
