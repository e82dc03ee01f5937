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

pub use read::{Stack, read};

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
    /// By [`slot`] of a key: 1 + the index in `steps` of the one step that may be named so, or
    /// 0 when none is. Most keys of these objects are no step and their slot alone says so; a
    /// key whose slot holds a step is compared with that one name only, inline.
    slots: [u8; 64],
}

/// Where a key goes in [`Steps::slots`]: its length and its last byte, which tell the names of
/// one member's steps apart (checked at compile time, in [`steps`]).
#[inline(always)]
const fn slot(key: &[u8]) -> usize {
    let last = match key.last() {
        Some(&last) => last as usize,
        None => 0,
    };
    (key.len() ^ last) & 63
}

impl Steps {
    /// The step named `key`: one look-up in [`Steps::slots`] and at most one comparison,
    /// inlined where the reader meets a key.
    #[inline(always)]
    fn find(&self, key: &str) -> Option<&Step> {
        let index = self.slots[slot(key.as_bytes())];
        if index == 0 {
            return None;
        }
        let step = &self.steps[usize::from(index - 1)];
        same_name(step.name.as_bytes(), key.as_bytes()).then_some(step)
    }
}

/// Whether a step's name is `key`, in a few word compares for the names of 4 to 16 bytes that
/// the steps have (a call to `memcmp` cost more than the rest of the look-up).
#[inline(always)]
fn same_name(name: &[u8], key: &[u8]) -> bool {
    let n = name.len();
    if n != key.len() {
        return false;
    }
    let word = |bytes: &[u8], at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let half = |bytes: &[u8], at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    match n {
        8..=16 => word(name, 0) == word(key, 0) && word(name, n - 8) == word(key, n - 8),
        4..8 => half(name, 0) == half(key, 0) && half(name, n - 4) == half(key, n - 4),
        _ => name == key,
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
        slots: [0; 64],
    }; MAX_NODES];
    let mut used = 1;
    let mut index = 0;
    while index < SKIPPED.len() {
        let path = SKIPPED[index];
        let mut node = 0;
        let mut depth = 0;
        while depth < path.len() {
            let name = path[depth];
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
                let key_slot = slot(name.as_bytes());
                assert!(
                    nodes[node].slots[key_slot] == 0,
                    "two steps from one member share a slot: change `slot`"
                );
                nodes[node].slots[key_slot] = at as u8 + 1;
                nodes[node].len += 1;
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
