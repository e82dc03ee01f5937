//! Keeps what no rule reads away from the parser. A `kubectl apply` review is mostly
//! `managedFields`, the `last-applied-configuration` annotation (a second, escaped copy of the
//! object) and, on UPDATE, the whole `oldObject`; no rule reads any of them.
//!
//! [`read()`] reads a review onto simd-json's tape in one pass, and meets each member of
//! [`SKIPPED`] by its path as it goes: its value's end is found with one SIMD scan of its bytes
//! ([`scan`]) and the tape gets an empty `{}` or `[]` for it. What is no longer checked is the
//! skipped bytes' grammar: they are skipped only when their strings, brackets and braces balance
//! and they are UTF-8, and the apiserver never sends anything else (it decoded the object itself
//! before asking us).

mod read;
mod scan;

pub use read::read;

use std::sync::LazyLock;

/// The members no rule reads, by path from the root of the review. `oldObject` is read only to
/// ratchet a violation of the new object: then it is parsed on its own from its bytes as sent
/// (`Read::old_object` in [`read()`]). Only the object's own `metadata.annotations` and `labels`, never
/// `spec.service.annotations` or the like: the same name at another path is read as usual.
pub const SKIPPED: [&[&str]; 12] = [
    &["request", "oldObject"],
    &["request", "userInfo"],
    &["request", "options"],
    &["request", "resource"],
    &["request", "requestKind"],
    &["request", "requestResource"],
    &["request", "object", "status"],
    &["request", "object", "metadata", "managedFields"],
    &["request", "object", "metadata", "annotations"],
    &["request", "object", "metadata", "labels"],
    &["request", "object", "metadata", "ownerReferences"],
    &["request", "object", "metadata", "finalizers"],
];

/// The index of `request.oldObject` in [`SKIPPED`].
const OLD_OBJECT: usize = 0;

/// One step of the paths in [`SKIPPED`], from the member they reach so far.
struct Step {
    name: &'static str,
    /// The index in [`SKIPPED`] of the path that ends here.
    last: Option<usize>,
    /// Where paths that go on continue, in [`STEPS`].
    next: Option<usize>,
}

/// The steps on from one member of the paths in [`SKIPPED`].
struct Steps {
    steps: Vec<Step>,
    /// Bit `n` set when a step's name is `n` bytes long: most keys of these objects are no
    /// step, and their length alone says so.
    lengths: u64,
}

impl Steps {
    fn find(&self, key: &str) -> Option<&Step> {
        if key.len() >= 64 || self.lengths >> key.len() & 1 == 0 {
            return None;
        }
        self.steps.iter().find(|step| step.name == key)
    }
}

/// [`SKIPPED`] as a tree: the steps from the root, then from each member on the way, so the
/// reader follows the shared first steps (`request`, `object`, `metadata`) once.
static STEPS: LazyLock<Vec<Steps>> = LazyLock::new(|| {
    let mut nodes: Vec<Vec<Step>> = vec![Vec::new()];
    for (index, path) in SKIPPED.iter().enumerate() {
        let mut node = 0;
        for (depth, &name) in path.iter().enumerate() {
            let at = match nodes[node].iter().position(|step| step.name == name) {
                Some(at) => at,
                None => {
                    nodes[node].push(Step {
                        name,
                        last: None,
                        next: None,
                    });
                    nodes[node].len() - 1
                }
            };
            if depth + 1 == path.len() {
                nodes[node][at].last = Some(index);
            } else {
                let next = match nodes[node][at].next {
                    Some(next) => next,
                    None => {
                        nodes.push(Vec::new());
                        nodes[node][at].next = Some(nodes.len() - 1);
                        nodes.len() - 1
                    }
                };
                node = next;
            }
        }
    }
    nodes
        .into_iter()
        .map(|steps| Steps {
            lengths: steps
                .iter()
                .fold(0, |lengths, step| lengths | 1u64 << step.name.len().min(63)),
            steps,
        })
        .collect()
});

const _: () = {
    let mut i = 0;
    while i < SKIPPED.len() {
        let mut j = 0;
        while j < SKIPPED[i].len() {
            assert!(
                SKIPPED[i][j].len() < 64,
                "a step's length is a bit of `Steps::lengths`"
            );
            j += 1;
        }
        i += 1;
    }
};

#[cfg(test)]
mod tests;
