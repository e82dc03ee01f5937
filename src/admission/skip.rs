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

/// At most this many steps go on from one member of the paths in [`SKIPPED`], and at most this
/// many members are on the way ([`steps`] fails to compile past them).
const MAX_STEPS: usize = 8;
const MAX_NODES: usize = 8;

/// One step of the paths in [`SKIPPED`], from the member they reach so far.
#[derive(Clone, Copy)]
struct Step {
    name: &'static str,
    /// The index in [`SKIPPED`] of the path that ends here.
    last: Option<usize>,
    /// Where paths that go on continue, in [`STEPS`].
    next: Option<u8>,
}

/// The steps on from one member of the paths in [`SKIPPED`].
#[derive(Clone, Copy)]
struct Steps {
    steps: [Step; MAX_STEPS],
    len: usize,
    /// Bit `n` set when a step's name is `n` bytes long: most keys of these objects are no
    /// step, and their length alone says so.
    lengths: u64,
}

impl Steps {
    /// The step named `key`: its length checked where the reader meets it, the names only for
    /// a key of a length some step has.
    #[inline(always)]
    fn find(&self, key: &str) -> Option<&Step> {
        if key.len() >= 64 || self.lengths >> key.len() & 1 == 0 {
            return None;
        }
        self.named(key)
    }

    #[inline(never)]
    fn named(&self, key: &str) -> Option<&Step> {
        self.steps[..self.len].iter().find(|step| step.name == key)
    }
}

/// [`SKIPPED`] as a tree: the steps from the root, then from each member on the way, so the
/// reader follows the shared first steps (`request`, `object`, `metadata`) once. Built at
/// compile time.
static STEPS: [Steps; MAX_NODES] = steps();

const fn steps() -> [Steps; MAX_NODES] {
    const NONE: Step = Step {
        name: "",
        last: None,
        next: None,
    };
    let mut nodes = [Steps {
        steps: [NONE; MAX_STEPS],
        len: 0,
        lengths: 0,
    }; MAX_NODES];
    let mut used = 1;
    let mut index = 0;
    while index < SKIPPED.len() {
        let path = SKIPPED[index];
        let mut node = 0;
        let mut depth = 0;
        while depth < path.len() {
            let name = path[depth];
            assert!(
                name.len() < 64,
                "a step's length is a bit of `Steps::lengths`"
            );
            let mut at = 0;
            while at < nodes[node].len && !same(nodes[node].steps[at].name, name) {
                at += 1;
            }
            if at == nodes[node].len {
                assert!(at < MAX_STEPS, "more steps from one member than MAX_STEPS");
                nodes[node].steps[at] = Step {
                    name,
                    last: None,
                    next: None,
                };
                nodes[node].len += 1;
                nodes[node].lengths |= 1 << name.len();
            }
            if depth + 1 == path.len() {
                nodes[node].steps[at].last = Some(index);
            } else {
                node = match nodes[node].steps[at].next {
                    Some(next) => next as usize,
                    None => {
                        assert!(used < MAX_NODES, "more members on the way than MAX_NODES");
                        nodes[node].steps[at].next = Some(used as u8);
                        used += 1;
                        used - 1
                    }
                };
            }
            depth += 1;
        }
        index += 1;
    }
    nodes
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests;
