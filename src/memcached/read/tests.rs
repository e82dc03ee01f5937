//! The reader on hand-written objects: type errors named by path, the rest still read.

use super::*;

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
