//! Fixtures shared by the unit tests of more than one module, so that each is written once.

/// Objects with one wrongly typed field, and the error that names it: the reader's tests expect
/// it from `memcached::read`, admission's tests as the cause of a 400 (mutate) or 422 (validate).
pub const MISTYPED: [(&str, &str); 3] = [
    (
        r#"{"spec":{"replicas":"3"}}"#,
        "spec.replicas: expected an integer, found a string",
    ),
    (
        r#"{"spec":{"autoscaling":{"enabled":"yes"}}}"#,
        "spec.autoscaling.enabled: expected a boolean, found a string",
    ),
    (
        r#"{"spec":{"memcached":[1]}}"#,
        "spec.memcached: expected an object, found an array",
    ),
];
