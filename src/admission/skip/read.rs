//! Reads a review into simd-json's tape in one pass over the bytes as sent, with the members it
//! skips ([`skipped`](super::skipped)) emptied as it meets them: simdjson's On-Demand idea, which
//! simd-json's API does not offer. It reads only what it can read exactly as simd-json would,
//! and declines the rest.
//!
//! The tape it writes is node for node the one simd-json writes for the review with those
//! members emptied (the tests and the `admission` fuzz target compare them). It declines (`None`,
//! and the pipeline parses the body whole with simd-json) whatever it does not read exactly so:
//! a string with an escape or a control character, a number with a fraction, an exponent, `-0`
//! or more than 18 digits, nesting deeper than [`MAX_DEPTH`], any text that is not JSON, and an
//! `oldObject` skipped where the envelope would read another one. Those are rare in what the
//! kube-apiserver sends outside the skipped members (the escapes of the `last-applied`
//! annotation lie inside one), and each costs only the whole parse it falls back to.

use std::ops::Range;

use simd_json::{Node, StaticNode};

use super::scan::Strings;
use super::{OLD_OBJECT, STEPS};

/// Deeper than this, the reader declines: a Memcached review nests about ten levels.
const MAX_DEPTH: usize = 64;

/// What the reader read besides the tape: where the skipped `request.oldObject` lies in the text
/// as sent, brackets included, when it skipped one (ratcheting parses it from there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Read {
    pub old_object: Option<Range<usize>>,
}

/// The objects and arrays open around the value being read, kept by the caller between reviews
/// (a worker thread's scratch): every review writes a level before it reads it, and setting up
/// a fresh one cost more instructions than reading a small review's tape (docs/performance.md).
pub struct Stack([Open; MAX_DEPTH]);

impl Default for Stack {
    fn default() -> Self {
        Stack([Open::default(); MAX_DEPTH])
    }
}

/// An open object or array.
#[derive(Clone, Copy, Default)]
struct Open {
    /// Where its head node is on the tape.
    node: usize,
    /// Members (object) or items (array) so far.
    len: usize,
    object: bool,
    /// Where it stands in [`STEPS`] when it is on the way down a path of
    /// [`SKIPPED`](super::SKIPPED).
    step: Option<u8>,
}

/// Which `oldObject` the envelope reads (the last one that is not null, in the last `request`
/// at the root) and the one skipped: they must be the same one.
struct OldObject {
    /// Where `request` stands in [`STEPS`].
    request: Option<u8>,
    /// The last skipped one's bytes, brackets included.
    range: Option<Range<usize>>,
    skipped: usize,
    /// Whether the one the envelope reads so far is the last skipped one.
    read_is_skipped: bool,
}

impl OldObject {
    #[inline(always)]
    fn new() -> Self {
        OldObject {
            request: STEPS[0].find("request").and_then(|step| step.next),
            range: None,
            skipped: 0,
            read_is_skipped: false,
        }
    }

    /// What the document read says of `oldObject` at its end; `None` when the envelope would
    /// read an `oldObject` other than the one skipped.
    #[inline(always)]
    fn finish(self) -> Option<Read> {
        match (self.skipped, self.read_is_skipped) {
            (0, _) => Some(Read { old_object: None }),
            (1, true) => Some(Read {
                old_object: self.range,
            }),
            _ => None,
        }
    }
}

/// Reads `text` (a whole JSON document) onto `nodes` (cleared first), with `stack` for the open
/// objects and arrays (what it held before does not matter). `None`: declined, see the module's
/// documentation; `nodes` then holds anything.
pub fn read<'i>(text: &'i [u8], nodes: &mut Vec<Node<'i>>, stack: &mut Stack) -> Option<Read> {
    match Strings::detect() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Strings::Avx2` is made only where the CPU has AVX2 ([`Strings::detect`]).
        #[allow(unsafe_code)]
        Strings::Avx2 => unsafe { read_avx2(text, nodes, stack) },
        strings => read_with(strings, text, nodes, stack),
    }
}

/// [`read`] compiled for AVX2, so that each string's scan is inlined into it: a call per string
/// cost more than the scan.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn read_avx2<'i>(text: &'i [u8], nodes: &mut Vec<Node<'i>>, stack: &mut Stack) -> Option<Read> {
    read_with(Strings::Avx2, text, nodes, stack)
}

/// [`read`] without AVX2, as on other CPUs: for the tests to compare.
#[cfg(test)]
pub(super) fn read_portable<'i>(
    text: &'i [u8],
    nodes: &mut Vec<Node<'i>>,
    stack: &mut Stack,
) -> Option<Read> {
    read_with(Strings::Bytes, text, nodes, stack)
}

#[inline(always)]
fn read_with<'i>(
    strings: Strings,
    text: &'i [u8],
    nodes: &mut Vec<Node<'i>>,
    Stack(stack): &mut Stack,
) -> Option<Read> {
    nodes.clear();
    let mut old = OldObject::new();
    let (mut depth, mut at) = (0, 0);
    // The step of the value about to be read: the root is where every path starts.
    let mut step = Some(0);
    'value: loop {
        match *text.get(at)? {
            b'{' => {
                open(stack, &mut depth, nodes, true, step)?;
                at = whitespace(text, at + 1);
                if text.get(at) == Some(&b'}') {
                    at += 1;
                    close(stack, &mut depth, nodes);
                } else {
                    let value;
                    (at, value) = member(strings, text, at, &stack[..depth], &mut old, nodes)?;
                    if let Some(next) = value {
                        step = next;
                        continue 'value;
                    }
                }
            }
            b'[' => {
                open(stack, &mut depth, nodes, false, None)?;
                at = whitespace(text, at + 1);
                if text.get(at) == Some(&b']') {
                    at += 1;
                    close(stack, &mut depth, nodes);
                } else {
                    step = None;
                    continue 'value;
                }
            }
            b'"' => {
                let (s, end) = strings.read(text, at)?;
                nodes.push(Node::String(s));
                at = end;
            }
            b't' => at = literal(text, at, b"true", StaticNode::Bool(true), nodes)?,
            b'f' => at = literal(text, at, b"false", StaticNode::Bool(false), nodes)?,
            b'n' => at = literal(text, at, b"null", StaticNode::Null, nodes)?,
            b'-' | b'0'..=b'9' => at = number(text, at, nodes)?,
            // Whitespace is looked for only where a byte is not what is expected there.
            b' ' | b'\t' | b'\n' | b'\r' => {
                at = whitespace(text, at + 1);
                continue 'value;
            }
            _ => return None,
        }
        // After a value: a comma and the next one, or the end of its object or array.
        loop {
            if depth == 0 {
                return document_end(text, at, old);
            }
            let open = &mut stack[depth - 1];
            match *text.get(at)? {
                b',' => {
                    open.len += 1;
                    at += 1;
                    if !open.object {
                        step = None;
                        continue 'value;
                    }
                    let value;
                    (at, value) = member(strings, text, at, &stack[..depth], &mut old, nodes)?;
                    let Some(next) = value else { continue };
                    step = next;
                    continue 'value;
                }
                b'}' if open.object => open.len += 1,
                b']' if !open.object => open.len += 1,
                b' ' | b'\t' | b'\n' | b'\r' => {
                    at = whitespace(text, at + 1);
                    continue;
                }
                _ => return None,
            }
            at += 1;
            close(stack, &mut depth, nodes);
        }
    }
}

/// The end of the document: nothing but whitespace may follow its value.
#[inline(always)]
fn document_end(text: &[u8], at: usize, old: OldObject) -> Option<Read> {
    if whitespace(text, at) == text.len() {
        old.finish()
    } else {
        None
    }
}

/// Reads a member of the innermost open object (`stack`'s last) from its key's opening quote at
/// `at`, and pushes the key. When the member is [`skipped`](super::skipped) and holds an
/// object or an array, it skips the value (pushing an empty one) and returns the offset after it
/// and `None`; else where the value starts and `Some` of its step in [`STEPS`]. (Not a small
/// enum for the two: that cost more a review, docs/performance.md.)
#[allow(clippy::type_complexity)]
#[inline(always)]
fn member<'i>(
    strings: Strings,
    text: &'i [u8],
    at: usize,
    stack: &[Open],
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> Option<(usize, Option<Option<u8>>)> {
    let at = expect(text, at, b'"')?;
    let (key, end) = strings.read(text, at)?;
    nodes.push(Node::String(key));
    // The value's first byte is read next, whitespace or not.
    let at = expect(text, end, b':')? + 1;
    let open = stack[stack.len() - 1];
    // A `match`, not `and_then`: its closure was called, not inlined.
    let found = match open.step {
        Some(node) => STEPS[usize::from(node)].find(key),
        None => None,
    };
    let Some(found) = found else {
        if let Some(node) = open.step
            && STEPS[usize::from(node)].only_steps
        {
            return unread(strings, text, at, old, nodes);
        }
        return Some((at, Some(None)));
    };
    // The envelope's `oldObject`: each `request` at the root starts over, and one that is not
    // null replaces the one before. Both are steps: the root's only one, and the path that
    // ends at `oldObject` (whose step the open object has only inside a `request` at the root).
    let at = whitespace(text, at);
    if open.step == Some(0) && found.next == old.request {
        old.read_is_skipped = false;
    }
    match found.last {
        Some(path) if matches!(text.get(at), Some(b'{' | b'[')) => Some((
            skip(strings, text, at, path == OLD_OBJECT, old, nodes)?,
            None,
        )),
        Some(OLD_OBJECT) => {
            if !text[at..].starts_with(b"null") {
                old.read_is_skipped = false;
            }
            Some((at, Some(found.next)))
        }
        _ => Some((at, Some(found.next))),
    }
}

/// A member of a section of [`memcached::READ`](crate::memcached::READ) that the section does not
/// name, its value at `at` or after whitespace: no rule reads it, so an object or an array is
/// skipped as [`member`] skips one of [`SKIPPED`](super::SKIPPED). Out of line, as [`skip`].
#[cold]
#[inline(never)]
#[allow(clippy::type_complexity)]
fn unread<'i>(
    strings: Strings,
    text: &'i [u8],
    at: usize,
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> Option<(usize, Option<Option<u8>>)> {
    let at = whitespace(text, at);
    if matches!(text.get(at), Some(b'{' | b'[')) {
        Some((skip(strings, text, at, false, old, nodes)?, None))
    } else {
        Some((at, Some(None)))
    }
}

/// Skips the object or array that starts at `at`, pushing an empty one, and returns the offset
/// after it. The work is out of line ([`skip_avx2`], compiled for AVX2 as the reader is, or
/// [`skip_portable`]): a few members a review take this way, and inlined it cost the reader's
/// loop registers on every other member.
#[inline(always)]
fn skip<'i>(
    strings: Strings,
    text: &'i [u8],
    at: usize,
    old_object: bool,
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> Option<usize> {
    match strings {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Strings::Avx2` is made only where the CPU has AVX2, POPCNT, PCLMULQDQ and
        // BMI1 ([`Strings::detect`]), all that `skip_avx2` is compiled for.
        #[allow(unsafe_code)]
        Strings::Avx2 => unsafe { skip_avx2(text, at, old_object, old, nodes) },
        strings => skip_portable(strings, text, at, old_object, old, nodes),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,pclmulqdq,bmi1")]
#[inline(never)]
fn skip_avx2<'i>(
    text: &'i [u8],
    at: usize,
    old_object: bool,
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> Option<usize> {
    let close = Strings::Avx2.value_end(text, at)?;
    Some(skipped(text, at, close, old_object, old, nodes))
}

#[inline(never)]
fn skip_portable<'i>(
    strings: Strings,
    text: &'i [u8],
    at: usize,
    old_object: bool,
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> Option<usize> {
    let close = strings.value_end(text, at)?;
    Some(skipped(text, at, close, old_object, old, nodes))
}

/// The value from `at` to `close` was skipped: its empty node pushed, the `oldObject` noted.
#[inline(always)]
fn skipped<'i>(
    text: &'i [u8],
    at: usize,
    close: usize,
    old_object: bool,
    old: &mut OldObject,
    nodes: &mut Vec<Node<'i>>,
) -> usize {
    nodes.push(if text[at] == b'{' {
        Node::Object { len: 0, count: 0 }
    } else {
        Node::Array { len: 0, count: 0 }
    });
    if old_object {
        old.range = Some(at..close + 1);
        old.skipped += 1;
        old.read_is_skipped = true;
    }
    close + 1
}

/// Opens an object or an array: its head node, to be completed by [`close`]. `None` past
/// [`MAX_DEPTH`].
#[inline(always)]
fn open(
    stack: &mut [Open; MAX_DEPTH],
    depth: &mut usize,
    nodes: &mut Vec<Node<'_>>,
    object: bool,
    step: Option<u8>,
) -> Option<()> {
    *stack.get_mut(*depth)? = Open {
        node: nodes.len(),
        len: 0,
        object,
        step,
    };
    *depth += 1;
    nodes.push(if object {
        Node::Object { len: 0, count: 0 }
    } else {
        Node::Array { len: 0, count: 0 }
    });
    Some(())
}

/// Closes the innermost open object or array, whose closing bracket was just read.
fn close(stack: &mut [Open; MAX_DEPTH], depth: &mut usize, nodes: &mut [Node<'_>]) {
    *depth -= 1;
    let open = stack[*depth];
    let count = nodes.len() - open.node - 1;
    nodes[open.node] = if open.object {
        Node::Object {
            len: open.len,
            count,
        }
    } else {
        Node::Array {
            len: open.len,
            count,
        }
    };
}

/// Where `byte` is, at `at` or after whitespace; `None` if another byte comes first.
#[inline(always)]
fn expect(text: &[u8], at: usize, byte: u8) -> Option<usize> {
    if text.get(at) == Some(&byte) {
        return Some(at);
    }
    let at = whitespace(text, at);
    (text.get(at) == Some(&byte)).then_some(at)
}

fn whitespace(text: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = text.get(at) {
        at += 1;
    }
    at
}

/// A byte that may follow a literal or a number: what simd-json's parser allows there.
fn ends_scalar(text: &[u8], at: usize) -> bool {
    matches!(
        text.get(at),
        None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
    )
}

fn literal<'i>(
    text: &[u8],
    at: usize,
    word: &[u8],
    value: StaticNode,
    nodes: &mut Vec<Node<'i>>,
) -> Option<usize> {
    let end = at + word.len();
    if text.get(at..end)? != word || !ends_scalar(text, end) {
        return None;
    }
    nodes.push(Node::Static(value));
    Some(end)
}

/// An integer of at most 18 digits, as simd-json reads it: `U64` when positive, `I64` when
/// negative. Anything else is declined.
#[inline(always)]
fn number(text: &[u8], at: usize, nodes: &mut Vec<Node<'_>>) -> Option<usize> {
    let negative = text[at] == b'-';
    let digits = at + usize::from(negative);
    let mut end = digits;
    let mut value: u64 = 0;
    while let Some(&b @ b'0'..=b'9') = text.get(end) {
        value = value * 10 + u64::from(b - b'0');
        end += 1;
        if end - digits > 18 {
            return None;
        }
    }
    let count = end - digits;
    if count == 0 || (text[digits] == b'0' && (count > 1 || negative)) || !ends_scalar(text, end) {
        return None;
    }
    nodes.push(Node::Static(if negative {
        StaticNode::I64(-(value as i64))
    } else {
        StaticNode::U64(value)
    }));
    Some(end)
}
