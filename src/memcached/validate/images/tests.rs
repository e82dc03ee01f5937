//! Image references the kubelet can pull.

use crate::memcached::validate::test_support::*;
use serde_json::json;

#[test]
fn image_table() {
    table(&[
        (json!({"image": "memcached:1.6"}), &[]),
        (
            json!({"image": "registry.example.com:5000/team/memcached:1.6.28@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}),
            &[],
        ),
        (json!({"image": null}), &[]),
        (
            json!({"image": ""}),
            &["spec.image: Required value: empty image; set one such as memcached:1.6"],
        ),
        (
            json!({"image": " memcached"}),
            &[
                "spec.image: Invalid value: \" memcached\": surrounding whitespace in the image; remove it",
            ],
        ),
        (
            json!({"image": "Memcached:1.6"}),
            &[
                "spec.image: Invalid value: \"Memcached:1.6\": uppercase letters in the repository name \"Memcached\"; repository names must be lowercase",
            ],
        ),
        (
            json!({"monitoring": {"exporterImage": "prom/memcached-exporter:"}}),
            &[
                "spec.monitoring.exporterImage: Invalid value: \"prom/memcached-exporter:\": invalid tag \"\": is empty; write a tag after the \":\" (e.g. memcached:1.6) or drop it",
            ],
        ),
        (json!({"monitoring": {"enabled": true}}), &[]),
        (json!({"monitoring": {"exporterImage": null}}), &[]),
    ]);
}
