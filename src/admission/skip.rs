//! Keeps what no rule reads away from the parser. A `kubectl apply` review is mostly
//! `managedFields`, the `last-applied-configuration` annotation (a second, escaped copy of the
//! object) and, on UPDATE, the whole `oldObject`; no rule reads any of them. Nor does a rule
//! read `spec.service` or `spec.security.podSecurityContext`: in the sections of the spec the
//! view reads member by member ([`memcached::READ`]), every other member is skipped too.
//!
//! [`read()`] reads a review onto simd-json's tape in one pass, and meets each member it skips
//! ([`skipped`]) by its path as it goes: its value's end is found with one SIMD scan of its bytes
//! ([`scan`]) and the tape gets an empty `{}` or `[]` for it. What is no longer checked is the
//! skipped bytes' grammar: they are skipped only when their strings, brackets and braces balance
//! and they are UTF-8, and the apiserver never sends anything else (it decoded the object itself
//! before asking us).

mod read;
mod scan;

use crate::memcached;

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

/// Whether the reader skips the member at `path` (from the root of the review, through objects
/// only) when it holds an object or an array: a member of [`SKIPPED`], or of a section of
/// [`memcached::READ`] that the section does not name. For the tests and the fuzz oracle,
/// which empty the same members to compare.
pub fn skipped(path: &[&str]) -> bool {
    let unread = || {
        let (name, section) = path.strip_prefix(&OBJECT[..])?.split_last()?;
        let (_, names) = memcached::READ.iter().find(|(s, _)| *s == section)?;
        Some(!names.contains(name))
    };
    SKIPPED.contains(&path) || unread() == Some(true)
}

/// The index of `request.oldObject` in [`SKIPPED`].
const OLD_OBJECT: usize = 0;

/// Where the sections of [`memcached::READ`] are, from the root of the review.
const OBJECT: [&str; 2] = ["request", "object"];

/// At most this many steps go on from one member of the paths in [`SKIPPED`] and
/// [`memcached::READ`], and at most this many members are on the way ([`steps`] fails to
/// compile past them).
const MAX_STEPS: usize = 8;
const MAX_NODES: usize = 12;

/// One step of the paths in [`SKIPPED`] and [`memcached::READ`], from the member they reach
/// so far.
#[derive(Clone, Copy)]
struct Step {
    name: &'static str,
    /// The index in [`SKIPPED`] of the path that ends here.
    last: Option<usize>,
    /// Where paths that go on continue, in [`STEPS`].
    next: Option<u8>,
}

/// The steps on from one member of the paths in [`SKIPPED`] and [`memcached::READ`].
#[derive(Clone, Copy)]
struct Steps {
    steps: [Step; MAX_STEPS],
    len: usize,
    /// By [`slot`] of a key: 1 + the index in `steps` of the one step that may be named so, or
    /// 0 when none is. Most keys of these objects are no step and their slot alone says so; a
    /// key whose slot holds a step is compared with that one name only, inline.
    slots: [u8; 64],
    /// A section of [`memcached::READ`]: its steps are the members read, and a member that is
    /// no step is skipped when it holds an object or an array.
    only_steps: bool,
}

/// Where a key goes in [`Steps::slots`]: its length and its last byte, which tell the names of
/// one member's steps apart (checked at compile time, in [`steps`]).
#[inline(always)]
const fn slot(key: &[u8]) -> usize {
    let last = match key.last() {
        Some(&last) => last as usize,
        None => 0,
    };
    last.wrapping_sub(key.len()) & 63
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

/// [`SKIPPED`] and [`memcached::READ`] as a tree: the steps from the root, then from each
/// member on the way, so the reader follows the shared first steps (`request`, `object`,
/// `metadata`, `spec`) once. Built at compile time.
static STEPS: [Steps; MAX_NODES] = steps();

/// The nodes of [`STEPS`] being built, and how many are used.
struct Tree {
    nodes: [Steps; MAX_NODES],
    used: usize,
}

impl Tree {
    /// The index in `node`'s steps of the one named `name`, added when it is new.
    const fn step(&mut self, node: usize, name: &'static str) -> usize {
        let steps = &mut self.nodes[node];
        let mut at = 0;
        while at < steps.len && !same(steps.steps[at].name, name) {
            at += 1;
        }
        if at == steps.len {
            assert!(at < MAX_STEPS, "more steps from one member than MAX_STEPS");
            steps.steps[at] = Step {
                name,
                last: None,
                next: None,
            };
            let key_slot = slot(name.as_bytes());
            assert!(
                steps.slots[key_slot] == 0,
                "two steps from one member share a slot: change `slot`"
            );
            steps.slots[key_slot] = at as u8 + 1;
            steps.len += 1;
        }
        at
    }

    /// The node the step `at` of `node` leads to, added when it is new.
    const fn next(&mut self, node: usize, at: usize) -> usize {
        match self.nodes[node].steps[at].next {
            Some(next) => next as usize,
            None => {
                assert!(
                    self.used < MAX_NODES,
                    "more members on the way than MAX_NODES"
                );
                self.nodes[node].steps[at].next = Some(self.used as u8);
                self.used += 1;
                self.used - 1
            }
        }
    }

    /// The node `path` leads to from `node`, its steps added on the way.
    const fn walk(&mut self, mut node: usize, path: &[&'static str]) -> usize {
        let mut depth = 0;
        while depth < path.len() {
            let at = self.step(node, path[depth]);
            node = self.next(node, at);
            depth += 1;
        }
        node
    }
}

const fn steps() -> [Steps; MAX_NODES] {
    const NONE: Step = Step {
        name: "",
        last: None,
        next: None,
    };
    let mut tree = Tree {
        nodes: [Steps {
            steps: [NONE; MAX_STEPS],
            len: 0,
            slots: [0; 64],
            only_steps: false,
        }; MAX_NODES],
        used: 1,
    };
    let mut index = 0;
    while index < SKIPPED.len() {
        let path = SKIPPED[index];
        let (&name, on_the_way) = path.split_last().expect("a path of SKIPPED is empty");
        let node = tree.walk(0, on_the_way);
        let at = tree.step(node, name);
        tree.nodes[node].steps[at].last = Some(index);
        index += 1;
    }
    let object = tree.walk(0, &OBJECT);
    index = 0;
    while index < memcached::READ.len() {
        let (section, names) = memcached::READ[index];
        let node = tree.walk(object, section);
        tree.nodes[node].only_steps = true;
        let mut name = 0;
        while name < names.len() {
            let at = tree.step(node, names[name]);
            assert!(
                tree.nodes[node].steps[at].last.is_none(),
                "a member both skipped and read"
            );
            name += 1;
        }
        index += 1;
    }
    tree.nodes
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
