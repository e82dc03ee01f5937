//! Keeps what no rule reads away from the parser. A `kubectl apply` review is mostly
//! `managedFields`, the `last-applied-configuration` annotation (a second, escaped copy of the
//! object) and, on UPDATE, the whole `oldObject`; no rule reads any of them.
//!
//! [`compact`] finds each member of [`SKIPPED`] by its key, finds where its value ends with one
//! SIMD scan of the value's bytes ([`scan`]), and copies the review without it: the value becomes
//! `{}` or `[]`, so simd-json neither indexes nor parses it. After the parse, [`Skipped::verified`]
//! checks that every removed value was the member at its path and nowhere else, else the
//! pipeline parses the body whole. What the parser no longer checks is the removed bytes' grammar:
//! they are removed only when their strings, brackets and braces balance and they are UTF-8, and
//! the apiserver never sends anything else (it decoded the object itself before asking us).

mod scan;

use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};

use crate::json::Val;

/// The members no rule reads, by path from the root of the review. `oldObject` is read only to
/// ratchet a violation of the new object: then it is parsed on its own from its bytes as sent
/// ([`Skipped::old_object`]). Only the object's own `metadata.annotations` and `labels`, never
/// `spec.service.annotations` or the like: a key at another path fails the verification.
pub const SKIPPED: [&[&str]; 9] = [
    &["request", "oldObject"],
    &["request", "userInfo"],
    &["request", "options"],
    &["request", "object", "status"],
    &["request", "object", "metadata", "managedFields"],
    &["request", "object", "metadata", "annotations"],
    &["request", "object", "metadata", "labels"],
    &["request", "object", "metadata", "ownerReferences"],
    &["request", "object", "metadata", "finalizers"],
];

const _: () = assert!(
    MAX < 64,
    "one bit of `seen` per removed member, and the mask of all"
);

/// The index of `request.oldObject` in [`SKIPPED`].
const OLD_OBJECT: usize = 0;

/// At most this many members are removed (a review holds each once); further keys are left
/// to the parser.
const MAX: usize = 2 * SKIPPED.len();

/// Each skipped member's last key in quotes: the opening quote excludes keys that merely end in
/// the name, the closing one keys that merely start with it. Teddy (SIMD, the `packed` searcher)
/// where the CPU has it: an automaton keyed on the first byte stops at every `"` of the review,
/// which cost more than the parse it saves (36,000 instructions on the 5.6 KB review).
enum Keys {
    Packed(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

static KEYS: LazyLock<Keys> = LazyLock::new(|| {
    let quoted = SKIPPED.map(|path| format!("\"{}\"", path[path.len() - 1]));
    let packed = aho_corasick::packed::Config::new()
        .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
        .builder()
        .extend(&quoted)
        .build();
    match packed {
        Some(searcher) => Keys::Packed(searcher),
        None => Keys::Automaton(
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(quoted)
                .expect("a handful of short literal keys build"),
        ),
    }
});

/// The next key from `from`: its index in [`SKIPPED`], where its opening quote is and where
/// it ends.
fn next_key(text: &[u8], from: usize) -> Option<(usize, usize, usize)> {
    let found = match &*KEYS {
        Keys::Packed(searcher) => {
            searcher.find_in(text, aho_corasick::Span::from(from..text.len()))
        }
        Keys::Automaton(automaton) => automaton.find(Input::new(text).span(from..text.len())),
    }?;
    Some((found.pattern().as_usize(), found.start(), found.end()))
}

/// One removed member.
#[derive(Clone, Copy, Debug, Default)]
struct Removed {
    /// Its index in [`SKIPPED`].
    path: usize,
    /// The offset of its key's first letter in the compacted text.
    key: usize,
    /// Its value's bytes in the text as sent, brackets included.
    value: (usize, usize),
}

/// What [`compact`] removed.
#[derive(Debug, Default)]
pub struct Skipped {
    removed: [Removed; MAX],
    len: usize,
}

impl Skipped {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn removed(&self) -> &[Removed] {
        &self.removed[..self.len]
    }

    /// The bytes of `request.oldObject` in the text as sent, when it was removed.
    pub fn old_object(&self) -> Option<Range<usize>> {
        self.removed()
            .iter()
            .find(|r| r.path == OLD_OBJECT)
            .map(|r| r.value.0..r.value.1 + 1)
    }

    /// Whether every removed value was the member at its path in `review` (parsed from the
    /// compacted text whose first byte is at address `base`), now empty: then no rule read
    /// what was removed. Keys borrow the text, so a key's address names its offset.
    pub fn verified(&self, base: usize, review: Val<'_, '_>) -> bool {
        let mut seen = 0;
        self.mark(review, 0, base, &mut seen);
        seen == (1 << self.len) - 1
            && self
                .removed()
                .iter()
                .all(|r| r.path != OLD_OBJECT || last_old_object(review, base) == Some(r.key))
    }

    /// Walks `v`, at `node` of [`STEPS`], down every path of [`SKIPPED`] at once, setting bit
    /// `i` of `seen` when removed member `i` is at its path, now empty.
    fn mark(&self, v: Val<'_, '_>, node: usize, base: usize, seen: &mut u64) {
        let Some(entries) = v.entries() else {
            return;
        };
        let steps = &STEPS[node];
        for (key, value) in entries {
            let Some(step) = steps.iter().find(|step| step.name == key) else {
                continue;
            };
            if let Some(path) = step.last {
                let offset = (key.as_ptr() as usize).wrapping_sub(base);
                for (i, r) in self.removed().iter().enumerate() {
                    if r.path == path && r.key == offset && is_empty(value) {
                        *seen |= 1 << i;
                    }
                }
            }
            if let Some(next) = step.next {
                self.mark(value, next, base, seen);
            }
        }
    }
}

/// One step of the paths in [`SKIPPED`], from the member they reach so far.
struct Step {
    name: &'static str,
    /// The index in [`SKIPPED`] of the path that ends here.
    last: Option<usize>,
    /// Where paths that go on continue, in [`STEPS`].
    next: Option<usize>,
}

/// [`SKIPPED`] as a tree: the steps from the root, then from each member on the way, so the
/// verification walks the shared first steps (`request`, `object`, `metadata`) once.
static STEPS: LazyLock<Vec<Vec<Step>>> = LazyLock::new(|| {
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
});

/// The key offset of the `oldObject` the envelope reads: with duplicate keys, the last one that
/// is not null. Its removed bytes are what ratcheting parses, so it must be that one.
fn last_old_object(review: Val<'_, '_>, base: usize) -> Option<usize> {
    let mut last = None;
    for (key, request) in review.entries().into_iter().flatten() {
        if key != "request" {
            continue;
        }
        last = None;
        for (key, v) in request.entries().into_iter().flatten() {
            if key == "oldObject" && !v.is_null() {
                last = Some((key.as_ptr() as usize).wrapping_sub(base));
            }
        }
    }
    last
}

fn is_empty(v: Val<'_, '_>) -> bool {
    v.items().is_some_and(|mut items| items.next().is_none())
        || v.entries()
            .is_some_and(|mut entries| entries.next().is_none())
}

/// Copies `text` into `out` (cleared first) without the values of the members of [`SKIPPED`]
/// it finds, each replaced by its empty brackets. Leaves `out` empty when it found none.
pub fn compact(text: &[u8], out: &mut Vec<u8>) -> Skipped {
    out.clear();
    let mut skipped = Skipped::default();
    let mut copied = 0;
    let mut from = 0;
    let mut walk = scan::Walk::default();
    while skipped.len < MAX {
        let Some((path, quote, end)) = next_key(text, from) else {
            break;
        };
        from = end;
        // Only a key at its path's depth, outside any string: the same name deeper down
        // (`spec.service.annotations`) stays, rather than fail the verification.
        walk.advance(text, quote);
        if walk.in_string || walk.depth != SKIPPED[path].len() as i64 {
            continue;
        }
        let Some(open) = value_after_colon(text, from) else {
            continue;
        };
        let Some(close) = scan::value_end(text, open) else {
            // The text ends inside it, or it is not UTF-8: the parser reports that.
            break;
        };
        walk.advance(text, open);
        walk.jump(close);
        let key = out.len() + (quote + 1 - copied);
        out.extend_from_slice(&text[copied..=open]);
        copied = close;
        skipped.removed[skipped.len] = Removed {
            path,
            key,
            value: (open, close),
        };
        skipped.len += 1;
        from = close + 1;
    }
    if skipped.is_empty() {
        return skipped;
    }
    out.extend_from_slice(&text[copied..]);
    skipped
}

/// The offset of the `[` or `{` when `at` starts `: [` or `: {` (JSON whitespace allowed around
/// the colon).
fn value_after_colon(text: &[u8], mut at: usize) -> Option<usize> {
    let skip = |at: &mut usize| {
        while text
            .get(*at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            *at += 1;
        }
    };
    skip(&mut at);
    if text.get(at) != Some(&b':') {
        return None;
    }
    at += 1;
    skip(&mut at);
    matches!(text.get(at), Some(b'[' | b'{')).then_some(at)
}

#[cfg(test)]
mod tests;
