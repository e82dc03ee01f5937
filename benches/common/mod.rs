//! What both benches post: the AdmissionReview fixtures of `tests/fixtures/`, plus one
//! near the size limit that is generated at startup (1.5 MB is too big to keep in git).

/// One request body and what it stands for.
pub struct Fixture {
    /// A short name for tables (`typical-create`, `large-100k`, ...).
    pub name: &'static str,
    /// The AdmissionReview bytes, as the kube-apiserver sends them.
    pub body: Vec<u8>,
    /// Whether the defaulting webhook must answer with a patch (checked before measuring).
    pub patched: bool,
}

/// The fixture every "typical" number refers to: a `kubectl apply` CREATE.
pub const TYPICAL: &str = "typical-create";

/// Target size of the generated near-limit review: just under etcd's 1.5 MiB request limit,
/// the largest object the kube-apiserver stores.
pub const NEAR_LIMIT_BYTES: usize = 1536 * 1024 - 4096;

/// (table name, file in tests/fixtures/ or from the repository's root, patch expected from the
/// defaulting webhook).
const FILES: [(&str, &str, bool); 7] = [
    ("minimal-1k", "minimal-empty-spec.json", true),
    (TYPICAL, "mutate-create-kubectl-apply.json", true),
    ("typical-update", "mutate-update-kubectl-apply.json", true),
    ("fully-specified", "fully-specified.json", false),
    ("autoscaling", "autoscaling-enabled.json", true),
    // Fixture b of issue 36's measures (and `instr-per-request.py`'s first row): the 5.6 KB
    // `kubectl apply` CREATE the closed-loop bar is stated on.
    ("apply-5k", "benches/fixtures/b-kubectl-apply.json", true),
    ("large-100k", "large-annotations.json", true),
];

pub fn read(file: &str) -> Vec<u8> {
    let root = env!("CARGO_MANIFEST_DIR");
    let path = if file.contains('/') {
        format!("{root}/{file}")
    } else {
        format!("{root}/tests/fixtures/{file}")
    };
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Every fixture, smallest first, ending with the generated near-limit one.
pub fn all() -> Vec<Fixture> {
    let mut fixtures: Vec<Fixture> = FILES
        .iter()
        .map(|&(name, file, patched)| Fixture {
            name,
            body: read(file),
            patched,
        })
        .collect();
    let typical = &fixtures[1].body;
    let near_limit = near_limit(typical, NEAR_LIMIT_BYTES);
    fixtures.push(Fixture {
        name: "near-limit-1.5m",
        body: near_limit,
        patched: true,
    });
    fixtures
}

/// The typical review with one more annotation on the object, padded until the body is
/// `target` bytes: copies of the `last-applied-configuration` value (JSON text, so it carries
/// the escapes a real large annotation does). Built on the bytes, so the envelope keeps the
/// apiserver's member order.
pub fn near_limit(typical: &[u8], target: usize) -> Vec<u8> {
    let text = std::str::from_utf8(typical).expect("the fixture is UTF-8");
    let key = "\"kubectl.kubernetes.io/last-applied-configuration\":\"";
    let start = text
        .find(key)
        .expect("the typical fixture is a kubectl apply")
        + key.len();
    // The raw (still escaped) string: up to the first quote that no backslash escapes.
    let bytes = text.as_bytes();
    let mut end = start;
    while bytes[end] != b'"' {
        end += if bytes[end] == b'\\' { 2 } else { 1 };
    }
    let chunk = &text[start..end];
    let anchor = "\"metadata\":{\"annotations\":{";
    let at = text.find(anchor).expect("the object has annotations") + anchor.len();
    let head = "\"bench.c5c3.io/padding\":\"";
    let overhead = typical.len() + head.len() + 2;
    let copies = target.saturating_sub(overhead) / chunk.len();
    let mut out = Vec::with_capacity(target);
    out.extend_from_slice(&typical[..at]);
    out.extend_from_slice(head.as_bytes());
    for _ in 0..copies {
        out.extend_from_slice(chunk.as_bytes());
    }
    // Fill the last few bytes with plain text to land on the target exactly.
    let fill = target.saturating_sub(overhead + copies * chunk.len());
    out.extend(std::iter::repeat_n(b'x', fill));
    out.extend_from_slice(b"\",");
    out.extend_from_slice(&typical[at..]);
    let check: serde_json::Value = serde_json::from_slice(&out).expect("the padded review is JSON");
    assert!(
        check["request"]["object"]["metadata"]["annotations"]["bench.c5c3.io/padding"].is_string(),
        "the padding went into the object's annotations"
    );
    out
}
