//! Keeps what no rule reads away from the parser. A `kubectl apply` review is mostly
//! `managedFields`, the `last-applied-configuration` annotation (a second, escaped copy of the
//! object) and, on UPDATE, the whole `oldObject`; no rule reads any of them.
//!
//! [`read()`] reads a review onto simd-json's tape in one pass, and meets the members no rule
//! reads by their path as it goes: at each object of [`KEPT`], a member it does not list, and
//! `request.oldObject` ([`OLD_OBJECT`]). Where such a member holds an object or an array, its
//! value's end is found with one SIMD scan of its bytes ([`scan`]) and the tape gets an empty
//! `{}` or `[]` for it. What is no longer checked is the skipped bytes' grammar: they are
//! skipped only when their strings, brackets and braces balance and they are UTF-8, and the
//! apiserver never sends anything else (it decoded the object itself before asking us).

mod read;
mod scan;

pub use read::read;

use std::sync::LazyLock;

/// The objects of a review whose members are read by name only, by path from the root, and the
/// names read there: what `admission::envelope` and `memcached::read` read, and nothing else.
/// Any other member of these objects that holds an object or an array is skipped (so
/// `managedFields`, `annotations` with `last-applied-configuration`, `userInfo`, `status`,
/// `tolerations`, ... cost only the scan for their end). A member listed here is read whole
/// unless a path below it is listed too; the subtrees the rules keep as a value
/// (`spec.autoscaling.metrics`, `spec.resources.limits`, ...) lie below listed names. A rule
/// that reads a new member must list it here: the fixture tests answer every fixture both ways
/// and fail on a member the rules read but this list skips.
pub const KEPT: [(&[&str], &[&str]); 8] = [
    (&[], &["apiVersion", "kind", "request"]),
    (
        &["request"],
        &[
            "uid",
            "kind",
            "subResource",
            "name",
            "namespace",
            "operation",
            "object",
            "oldObject",
        ],
    ),
    (&["request", "object"], &["metadata", "spec"]),
    (
        &["request", "object", "metadata"],
        &["name", "deletionTimestamp"],
    ),
    (
        &["request", "object", "spec"],
        &[
            "replicas",
            "image",
            "resources",
            "memcached",
            "highAvailability",
            "monitoring",
            "security",
            "autoscaling",
        ],
    ),
    (
        &["request", "object", "spec", "highAvailability"],
        &[
            "antiAffinityPreset",
            "podDisruptionBudget",
            "gracefulShutdown",
        ],
    ),
    (
        &["request", "object", "spec", "monitoring"],
        &[
            "enabled",
            "exporterImage",
            "exporterResources",
            "serviceMonitor",
        ],
    ),
    (
        &["request", "object", "spec", "monitoring", "serviceMonitor"],
        &["interval", "scrapeTimeout"],
    ),
];

/// `request.oldObject` is skipped too, though the envelope reads it: only to ratchet a violation
/// of the new object, and then it is parsed on its own from its bytes as sent
/// (`Read::old_object` in [`read()`]).
pub const OLD_OBJECT: [&str; 2] = ["request", "oldObject"];

/// Whether the member at `path` (from the root of the review) is skipped when it holds an object
/// or an array: the reader's rule, for its tests and the fuzz oracle to empty the same members.
pub fn skipped(path: &[&str]) -> bool {
    path == OLD_OBJECT
        || path.split_last().is_some_and(|(name, parent)| {
            KEPT.iter()
                .any(|(at, names)| *at == parent && !names.contains(name))
        })
}

/// One step of the paths in [`KEPT`] and [`OLD_OBJECT`], from the member they reach so far.
#[derive(Clone)]
struct Step {
    name: &'static str,
    /// `request.oldObject`: skipped, its bytes kept.
    old_object: bool,
    /// Where paths that go on continue, in [`STEPS`].
    next: Option<usize>,
}

/// The steps on from one member of the paths in [`KEPT`].
struct Steps {
    steps: Vec<Step>,
    /// Bit `n` set when a step's name is `n` bytes long: most keys of these objects are no
    /// step, and their length alone says so.
    lengths: u64,
    /// An object of [`KEPT`]: a member that is no step is skipped.
    closed: bool,
}

impl Steps {
    fn find(&self, key: &str) -> Option<&Step> {
        if key.len() >= 64 || self.lengths >> key.len() & 1 == 0 {
            return None;
        }
        self.steps.iter().find(|step| step.name == key)
    }
}

/// The tree of steps while it is built: each node's steps, and whether it is closed.
#[derive(Default)]
struct Tree {
    nodes: Vec<(Vec<Step>, bool)>,
}

impl Tree {
    /// The index of `name` among the steps of `node`, added if new.
    fn step(&mut self, node: usize, name: &'static str) -> usize {
        let steps = &mut self.nodes[node].0;
        steps
            .iter()
            .position(|step| step.name == name)
            .unwrap_or_else(|| {
                steps.push(Step {
                    name,
                    old_object: false,
                    next: None,
                });
                steps.len() - 1
            })
    }

    /// The node `path` reaches from the root, with the steps on the way added.
    fn node(&mut self, path: &[&'static str]) -> usize {
        let mut node = 0;
        for &name in path {
            let at = self.step(node, name);
            node = match self.nodes[node].0[at].next {
                Some(next) => next,
                None => {
                    self.nodes.push((Vec::new(), false));
                    let next = self.nodes.len() - 1;
                    self.nodes[node].0[at].next = Some(next);
                    next
                }
            };
        }
        node
    }
}

/// [`KEPT`] and [`OLD_OBJECT`] as a tree: the steps from the root, then from each member on the
/// way, so the reader follows the shared first steps (`request`, `object`, `spec`) once.
static STEPS: LazyLock<Vec<Steps>> = LazyLock::new(|| {
    let mut tree = Tree {
        nodes: vec![(Vec::new(), false)],
    };
    for (path, names) in KEPT {
        let node = tree.node(path);
        tree.nodes[node].1 = true;
        for name in names {
            tree.step(node, name);
        }
    }
    let request = tree.node(&OLD_OBJECT[..1]);
    let at = tree.step(request, OLD_OBJECT[1]);
    tree.nodes[request].0[at].old_object = true;
    tree.nodes
        .into_iter()
        .map(|(steps, closed)| Steps {
            lengths: steps
                .iter()
                .fold(0, |lengths, step| lengths | 1u64 << step.name.len().min(63)),
            steps,
            closed,
        })
        .collect()
});

#[cfg(test)]
mod tests;
