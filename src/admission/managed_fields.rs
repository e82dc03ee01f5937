//! Keeps `metadata.managedFields` away from the parser. It is a quarter of a `kubectl apply`
//! review and its densest part (a string and a node per field it tracks), and no rule reads it.
//! Before parsing, each such array is blanked to `[` spaces `]`, so simd-json finds nothing in
//! it; after parsing, every blanked array must turn out to be the member of
//! `request.object.metadata` or `request.oldObject.metadata`, else the review is parsed again
//! from its original bytes (see [`verified`]).
//!
//! Blanking keeps every other byte where it was, so parse errors elsewhere keep their offsets.
//! What the parser no longer checks inside a blanked array is its grammar (and its limits, such as
//! `1e400` or nesting past 1,024 levels): the blank is made only when the array's strings and
//! brackets balance and its bytes are UTF-8, and the apiserver never sends anything else there
//! (it decoded the object itself before asking us).

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::json::Val;

/// `"managedFields"`: the opening quote excludes keys that merely end in the name.
const KEY: &[u8] = b"\"managedFields\"";

/// At most this many arrays are blanked (a review holds two: the object's and the old object's);
/// any further ones are left to the parser.
const MAX: usize = 4;

static FINDER: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(KEY));

/// Where arrays were blanked: the offset of the first letter of each one's key.
#[derive(Debug, Default)]
pub struct Blanked {
    keys: [usize; MAX],
    len: usize,
}

impl Blanked {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn keys(&self) -> &[usize] {
        &self.keys[..self.len]
    }
}

/// Blanks the interior of every `"managedFields": [...]` array in `body` (the JSON text, without
/// the parser's padding).
pub fn blank(body: &mut [u8]) -> Blanked {
    let mut blanked = Blanked::default();
    let mut from = 0;
    while blanked.len < MAX {
        let Some(found) = FINDER.find(&body[from..]) else {
            break;
        };
        let quote = from + found;
        from = quote + KEY.len();
        // After a backslash the quote may be escaped, inside some other string.
        if quote > 0 && body[quote - 1] == b'\\' {
            continue;
        }
        let Some(open) = array_after_colon(body, from) else {
            continue;
        };
        let Some(close) = array_end(body, open) else {
            // The text ends inside it: the parser reports that.
            break;
        };
        blanked.keys[blanked.len] = quote + 1;
        blanked.len += 1;
        body[open + 1..close].fill(b' ');
        from = close + 1;
    }
    blanked
}

/// The offset of the `[` when `at` starts `: [` (JSON whitespace allowed around the colon).
fn array_after_colon(body: &[u8], mut at: usize) -> Option<usize> {
    let skip = |at: &mut usize| {
        while body
            .get(*at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        {
            *at += 1;
        }
    };
    skip(&mut at);
    if body.get(at) != Some(&b':') {
        return None;
    }
    at += 1;
    skip(&mut at);
    (body.get(at) == Some(&b'[')).then_some(at)
}

/// Whether every blanked array is the `managedFields` member of a `metadata` member of an
/// `object` or `oldObject` member of a `request` member of the root `review`: then no rule could
/// have read what was blanked. `base` is the address of the body the tape was parsed from; its
/// keys borrow that body, so a key's address names the offset it was read from.
pub fn verified(blanked: &Blanked, base: usize, review: Val<'_, '_>) -> bool {
    let mut found = 0;
    for (key, request) in review.entries().into_iter().flatten() {
        if key != "request" {
            continue;
        }
        for (key, object) in request.entries().into_iter().flatten() {
            if key != "object" && key != "oldObject" {
                continue;
            }
            for (key, metadata) in object.entries().into_iter().flatten() {
                if key != "metadata" {
                    continue;
                }
                for (key, fields) in metadata.entries().into_iter().flatten() {
                    let offset = (key.as_ptr() as usize).wrapping_sub(base);
                    if key == "managedFields"
                        && blanked.keys().contains(&offset)
                        && fields
                            .items()
                            .is_some_and(|mut items| items.next().is_none())
                    {
                        found += 1;
                    }
                }
            }
        }
    }
    found == blanked.len
}

/// The offset of the `]` that closes the array opened at `open`, with brackets inside strings
/// (and escaped quotes) not counted; `None` if the text ends first, or if the array holds bytes
/// that are not UTF-8 (the parser then reports them). Works 64 bytes at a time on bit masks, as
/// simd-json's first stage does, because blanking pays only while the scan costs far less than
/// parsing the array would (the 100 KB review's 20 KB array: 104,000 instructions to parse,
/// 22,000 to scan with AVX2).
fn array_end(body: &[u8], open: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            #[allow(unsafe_code)]
            return unsafe { array_end_avx2(body, open) };
        }
        // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
        #[allow(unsafe_code)]
        unsafe {
            array_end_sse2(body, open)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    scan(body, open, classify_bytes)
}

/// The scan compiled for AVX2: 32 bytes a compare, about 1.1 instructions a byte of the array,
/// against 2.1 with SSE2 (callgrind, the 100 KB review's 20 KB array).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn array_end_avx2(body: &[u8], open: usize) -> Option<usize> {
    scan(body, open, |block| classify_avx2(block))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn array_end_sse2(body: &[u8], open: usize) -> Option<usize> {
    scan(body, open, |block| classify_sse2(block))
}

/// [`array_end`] with the given way of classifying a block.
#[inline(always)]
fn scan(body: &[u8], open: usize, classify: impl Fn(&[u8; 64]) -> Masks) -> Option<usize> {
    let mut depth = 0u32;
    let mut in_string = 0u64;
    let mut escape_carry = false;
    let mut ascii = true;
    let mut at = open;
    while at < body.len() {
        let last;
        let block: &[u8; 64] = match body.get(at..at + 64) {
            Some(full) => full.try_into().expect("64 bytes"),
            None => {
                let mut rest = [b' '; 64];
                rest[..body.len() - at].copy_from_slice(&body[at..]);
                last = rest;
                &last
            }
        };
        let masks = classify(block);
        ascii &= masks.non_ascii == 0;
        let escaped = escaped(masks.backslash, &mut escape_carry);
        let quotes = masks.quote & !escaped;
        // Bits from each opening quote up to its closing one: the inside of strings.
        let inside = prefix_xor(quotes) ^ in_string;
        in_string = ((inside as i64) >> 63) as u64;
        // (An escaped bracket outside a string is not JSON; it counts for nothing, as in the
        // parser's first stage.)
        let opens = masks.open & !(inside | escaped);
        let closes = masks.close & !(inside | escaped);
        // Most blocks of managedFields hold no bracket at all (its objects use braces).
        if closes != 0 {
            // The array may close in this block: walk its brackets in order.
            let mut brackets = opens | closes;
            while brackets != 0 {
                let bit = brackets.trailing_zeros();
                brackets &= brackets - 1;
                if opens >> bit & 1 == 1 {
                    depth += 1;
                } else {
                    depth -= 1;
                    if depth == 0 {
                        let close = at + bit as usize;
                        let utf8 = ascii || std::str::from_utf8(&body[open..close]).is_ok();
                        return utf8.then_some(close);
                    }
                }
            }
        } else if opens != 0 {
            depth += opens.count_ones();
        }
        at += 64;
    }
    None
}

/// One bit per byte of a 64-byte block, for each kind of byte the scan looks at.
#[derive(Debug, Default, PartialEq, Eq)]
struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
    non_ascii: u64,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn classify_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let [lo, hi] = block.as_chunks::<32>().0 else {
        unreachable!("64 bytes are two halves of 32")
    };
    // SAFETY: each half is a reference to 32 readable bytes, and `loadu` reads 32 bytes with
    // no alignment requirement.
    #[allow(unsafe_code)]
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_si256(lo.as_ptr().cast::<__m256i>()),
            _mm256_loadu_si256(hi.as_ptr().cast::<__m256i>()),
        )
    };
    let join = |l: i32, h: i32| u64::from(l as u32) | (u64::from(h as u32) << 32);
    let bits = |byte: u8| {
        let wanted = _mm256_set1_epi8(byte as i8);
        join(
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, wanted)),
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, wanted)),
        )
    };
    Masks {
        quote: bits(b'"'),
        backslash: bits(b'\\'),
        open: bits(b'['),
        close: bits(b']'),
        non_ascii: join(_mm256_movemask_epi8(lo), _mm256_movemask_epi8(hi)),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn classify_sse2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut masks = Masks::default();
    for (i, chunk) in block.as_chunks::<16>().0.iter().enumerate() {
        // SAFETY: `chunk` is a reference to 16 readable bytes, and `loadu` reads 16 bytes with
        // no alignment requirement.
        #[allow(unsafe_code)]
        let v = unsafe { _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>()) };
        let bits = |byte: u8| {
            let hits = _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8)));
            u64::from(hits as u16) << (16 * i)
        };
        masks.quote |= bits(b'"');
        masks.backslash |= bits(b'\\');
        masks.open |= bits(b'[');
        masks.close |= bits(b']');
        masks.non_ascii |= u64::from(_mm_movemask_epi8(v) as u16) << (16 * i);
    }
    masks
}

/// The same masks a byte at a time: for other architectures, and to test the vector version.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn classify_bytes(block: &[u8; 64]) -> Masks {
    let mut masks = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match b {
            b'"' => masks.quote |= bit,
            b'\\' => masks.backslash |= bit,
            b'[' => masks.open |= bit,
            b']' => masks.close |= bit,
            0x80.. => masks.non_ascii |= bit,
            _ => {}
        }
    }
    masks
}

/// The bytes that follow an unescaped backslash (so are escaped). `carry`: the previous block
/// ended with one; updated for the next block. Backslashes are rare, so they are walked one by one.
fn escaped(backslashes: u64, carry: &mut bool) -> u64 {
    let mut escaped = u64::from(*carry);
    *carry = false;
    let mut rest = backslashes;
    while rest != 0 {
        let bit = rest.trailing_zeros();
        rest &= rest - 1;
        if escaped >> bit & 1 == 1 {
            continue;
        }
        if bit == 63 {
            *carry = true;
        } else {
            escaped |= 1 << (bit + 1);
        }
    }
    escaped
}

/// Bit i is the XOR of bits 0..=i: between an opening quote's bit and its closing one's.
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

#[cfg(test)]
mod tests;
