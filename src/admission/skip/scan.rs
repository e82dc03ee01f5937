//! Where a JSON value that opens with `[` or `{` ends, scanned 64 bytes at a time on bit masks as
//! simd-json's first stage does: skipping pays only while this scan costs far less than parsing
//! the value would.

mod classify;

use classify::{Brackets, Masks};
#[cfg(target_arch = "x86_64")]
use classify::{brackets_avx2, brackets_sse2, classify_avx2, classify_sse2};
#[cfg(any(test, not(target_arch = "x86_64")))]
use classify::{brackets_bytes, classify_bytes};

/// The offset of the `]` or `}` that closes the value opened at `open`, with brackets and braces
/// inside strings (and escaped quotes) not counted; `None` if the text ends first, or if the value
/// holds bytes that are not UTF-8 (the parser then reports them). Brackets and braces count alike:
/// a mismatched pair is malformed JSON, which only the whole parse would see. The scan costs a
/// fifth of parsing the value (docs/performance.md, "Measured choices in the code").
pub(super) fn value_end(body: &[u8], open: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if avx2() {
            // SAFETY: the CPU has AVX2, POPCNT, PCLMULQDQ and BMI1, checked just above.
            #[allow(unsafe_code)]
            return unsafe { value_end_avx2(body, open) };
        }
        // SAFETY: SSE2 is part of the x86_64 baseline: every x86_64 CPU has it.
        #[allow(unsafe_code)]
        unsafe {
            value_end_sse2(body, open)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    scan(body, open, classify_bytes, brackets_bytes, prefix_xor)
}

/// Whether the CPU runs the AVX2 scan and walk. They count bits too: without POPCNT (not in the
/// x86_64 baseline) `count_ones` is a dozen shifts and masks, twice a block; and the inside of
/// strings is one carry-less multiplication ([`prefix_xor_clmul`]), not six shifts and XORs;
/// BMI1's `andn` takes one bit mask from another in one instruction, not two. Every CPU with
/// AVX2 has all three.
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
        && std::is_x86_feature_detected!("popcnt")
        && std::is_x86_feature_detected!("pclmulqdq")
        && std::is_x86_feature_detected!("bmi1")
}

/// The scan compiled for AVX2: 32 bytes a compare, about half the instructions a byte of the
/// SSE2 scan (docs/performance.md).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,popcnt,pclmulqdq,bmi1")]
#[inline]
fn value_end_avx2(body: &[u8], open: usize) -> Option<usize> {
    scan(
        body,
        open,
        |block| classify_avx2(block),
        |block| brackets_avx2(block),
        |x| prefix_xor_clmul(x),
    )
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn value_end_sse2(body: &[u8], open: usize) -> Option<usize> {
    scan(
        body,
        open,
        |block| classify_sse2(block),
        |block| brackets_sse2(block),
        prefix_xor,
    )
}

/// [`value_end`] with the given ways of classifying a block. Its brackets are classified only
/// when some byte of it lies outside strings: a long string's blocks (the `last-applied`
/// annotation's 2 KB) skip that half of the work.
#[inline(always)]
fn scan(
    body: &[u8],
    open: usize,
    classify: impl Fn(&[u8; 64]) -> Masks,
    brackets: impl Fn(&[u8; 64]) -> Brackets,
    prefix: impl Fn(u64) -> u64,
) -> Option<usize> {
    let mut depth = 0u32;
    let mut in_string = 0u64;
    let mut escape_carry = false;
    // Any bit: a byte of the value so far is not ASCII (checked at its end, not per block).
    let mut non_ascii = 0u64;
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
        non_ascii |= masks.non_ascii;
        // Most blocks hold no backslash and follow none: nothing in them is escaped.
        let escaped = if masks.backslash == 0 && !escape_carry {
            0
        } else {
            escaped(masks.backslash, &mut escape_carry)
        };
        let quotes = masks.quote & !escaped;
        // Bits from each opening quote up to its closing one: the inside of strings.
        let inside = prefix(quotes) ^ in_string;
        in_string = ((inside as i64) >> 63) as u64;
        at += 64;
        if inside == u64::MAX {
            // The whole block lies in a string: no bracket in it counts.
            continue;
        }
        // (An escaped bracket outside a string is not JSON; it counts for nothing, as in the
        // parser's first stage.)
        let counted = !(inside | escaped);
        let Brackets {
            open: opens,
            close: closes,
        } = brackets(block);
        let (opens, closes) = (opens & counted, closes & counted);
        let (n_opens, n_closes) = (opens.count_ones(), closes.count_ones());
        if n_closes < depth {
            depth = depth + n_opens - n_closes;
            continue;
        }
        // The value may close in this block: walk its brackets in order.
        let mut brackets = opens | closes;
        while brackets != 0 {
            let bit = brackets.trailing_zeros();
            brackets &= brackets - 1;
            if opens >> bit & 1 == 1 {
                depth += 1;
            } else {
                depth -= 1;
                if depth == 0 {
                    let close = at - 64 + bit as usize;
                    let utf8 = non_ascii == 0 || std::str::from_utf8(&body[open..close]).is_ok();
                    return utf8.then_some(close);
                }
            }
        }
    }
    None
}

/// How to find where a string ends: chosen once per review, so no string pays a feature check
/// (and the AVX2 scan can be inlined into the reader compiled for AVX2).
#[derive(Clone, Copy, Debug)]
pub(super) enum Strings {
    /// Only made where the CPU has AVX2, POPCNT, PCLMULQDQ and BMI1 ([`Strings::detect`]).
    #[cfg(target_arch = "x86_64")]
    Avx2,
    Bytes,
}

impl Strings {
    /// [`Strings::Avx2`] where the CPU runs the AVX2 scan and walk ([`avx2`]: every CPU with
    /// AVX2 has POPCNT, PCLMULQDQ and BMI1 too).
    pub(super) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            return Strings::Avx2;
        }
        Strings::Bytes
    }

    /// [`value_end`], with the CPU's features as detected once for the review: the AVX2 scan
    /// called straight from the reader compiled for AVX2, not through a detection per skipped
    /// value (docs/performance.md).
    #[inline(always)]
    pub(super) fn value_end(self, body: &[u8], open: usize) -> Option<usize> {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Strings::Avx2` is made only where the CPU has AVX2, POPCNT, PCLMULQDQ and BMI1
            // ([`Strings::detect`]), all that `value_end_avx2` is compiled for.
            #[allow(unsafe_code)]
            Strings::Avx2 => unsafe { value_end_avx2(body, open) },
            Strings::Bytes => value_end(body, open),
        }
    }

    /// The string whose opening quote is at `open`, and the offset after its closing quote.
    /// `None` at a backslash or a control character before the closing quote (the reader
    /// declines escapes), at bytes that are not UTF-8, or when the text ends first.
    #[inline(always)]
    pub(super) fn read(self, text: &[u8], open: usize) -> Option<(&str, usize)> {
        match self {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Strings::Avx2` is made only where the CPU has AVX2 ([`Strings::detect`]).
            #[allow(unsafe_code)]
            Strings::Avx2 => unsafe { string_avx2(text, open) },
            Strings::Bytes => {
                let start = open + 1;
                let len = text
                    .get(start..)?
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
                let end = start + len;
                (text[end] == b'"')
                    .then(|| std::str::from_utf8(&text[start..end]).ok())
                    .flatten()
                    .map(|s| (s, end + 1))
            }
        }
    }
}

/// [`Strings::read`] with AVX2, for a string that ends within the 32 bytes after its opening
/// quote (nearly every key and value of a review): one load, three masks, and the string is
/// ASCII when no byte before its end has its high bit set. Longer strings, and those near the
/// text's end, take [`string_avx2_long`]. Inlined into the reader compiled for AVX2: called, it
/// cost about twice as much (saving and restoring registers). Keeping the long case out of
/// line leaves this one few live values (docs/performance.md).
///
/// # Safety
/// Only where the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn string_avx2(text: &[u8], open: usize) -> Option<(&str, usize)> {
    let start = open + 1;
    // (Not `get(start..start + 32)`: that checks `start + 32` for overflow too.)
    let Some(chunk) = text.get(start..).and_then(<[u8]>::first_chunk::<32>) else {
        // SAFETY: the CPU has AVX2 (this function's contract).
        return unsafe { string_avx2_long(text, open) };
    };
    // SAFETY: the CPU has AVX2 (this function's contract); `chunk` holds 32 bytes.
    let (quotes, stops, high) = unsafe { masks_avx2(chunk) };
    if stops == 0 {
        // SAFETY: as above.
        return unsafe { string_avx2_long(text, open) };
    }
    let first = stops.trailing_zeros();
    // The first stop must be the closing quote: a backslash or a control character is declined.
    if quotes & stops & stops.wrapping_neg() == 0 {
        return None;
    }
    let end = start + first as usize;
    let bytes = &chunk[..first as usize];
    // The bytes before the quote: `(stops - 1) & !stops` masks exactly them.
    let s = if high & (stops - 1) & !stops == 0 {
        // SAFETY: every byte of `bytes` is below 0x80 (their high bits are clear), and ASCII
        // is UTF-8.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    } else {
        std::str::from_utf8(bytes).ok()?
    };
    Some((s, end + 1))
}

/// For 32 bytes: where the quotes are, where the string stops (a quote, a backslash or a
/// control character), and which bytes have their high bit set.
///
/// # Safety
/// Only where the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
unsafe fn masks_avx2(chunk: &[u8; 32]) -> (u32, u32, u32) {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    // SAFETY: the CPU has AVX2 (this function's contract); `chunk` is 32 readable bytes, and
    // `loadu` reads 32 bytes with no alignment requirement.
    unsafe {
        let v = _mm256_loadu_si256(chunk.as_ptr().cast::<__m256i>());
        let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
        let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
        // Unsigned v <= 0x1f: the control characters a JSON string may not hold as they are.
        let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1f)), v);
        let stops = _mm256_or_si256(_mm256_or_si256(quote, backslash), control);
        (
            _mm256_movemask_epi8(quote) as u32,
            _mm256_movemask_epi8(stops) as u32,
            _mm256_movemask_epi8(v) as u32,
        )
    }
}

/// [`Strings::read`] 32 bytes at a time, for a string longer than 31 bytes or near the text's
/// end: the first quote, backslash or control character, and whether any byte before it is
/// not ASCII.
///
/// # Safety
/// Only where the CPU has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
#[allow(unsafe_code)]
unsafe fn string_avx2_long(text: &[u8], open: usize) -> Option<(&str, usize)> {
    let start = open + 1;
    let mut at = start;
    let mut ascii = true;
    loop {
        let last;
        let chunk: &[u8; 32] = match text.get(at..at + 32) {
            Some(full) => full.try_into().expect("32 bytes"),
            None => {
                // Past the end, quotes: a string that reaches them does not end in the text.
                let mut rest = [b'"'; 32];
                let tail = text.get(at..)?;
                rest[..tail.len()].copy_from_slice(tail);
                last = rest;
                &last
            }
        };
        // SAFETY: the CPU has AVX2 (this function's contract).
        let (_, stops, high) = unsafe { masks_avx2(chunk) };
        if stops == 0 {
            ascii &= high == 0;
            at += 32;
            continue;
        }
        let first = stops.trailing_zeros();
        // The bytes up to the first stop, itself included (a stop is ASCII).
        ascii &= high & (stops ^ (stops - 1)) == 0;
        let end = at + first as usize;
        if end >= text.len() || text[end] != b'"' {
            return None;
        }
        let bytes = &text[start..end];
        let s = if ascii {
            // SAFETY: every byte of `bytes` is below 0x80 (their high bits were all clear
            // above), and ASCII is UTF-8.
            unsafe { std::str::from_utf8_unchecked(bytes) }
        } else {
            std::str::from_utf8(bytes).ok()?
        };
        return Some((s, end + 1));
    }
}

/// The bytes that follow an unescaped backslash (so are escaped). `carry`: the previous block
/// ended with one; updated for the next block. Branch-free, as simdjson's first stage: walking
/// backslashes one by one cost far more on a `kubectl apply` review, whose last-applied
/// annotation escapes every quote (docs/performance.md). A run of backslashes that starts on an even bit
/// escapes the byte after it when its length is odd, which is when it ends on an even bit, and
/// likewise for odd starts; adding each run's start to the run carries past its end, so the
/// carry's position tells the parity.
fn escaped(backslashes: u64, carry: &mut bool) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let previous = u64::from(*carry);
    // A backslash that is itself escaped starts nothing.
    let backslashes = backslashes & !previous;
    let follows = (backslashes << 1) | previous;
    let odd_starts = backslashes & !EVEN & !follows;
    let (even_runs, overflow) = odd_starts.overflowing_add(backslashes);
    *carry = overflow;
    (EVEN ^ (even_runs << 1)) & follows
}

/// [`prefix_xor`] as one carry-less multiplication by all ones: bit i of the product is the XOR
/// of bits 0..=i (simdjson's way).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "pclmulqdq")]
#[inline]
fn prefix_xor_clmul(x: u64) -> u64 {
    use std::arch::x86_64::{
        _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_set1_epi8,
    };
    let product = _mm_clmulepi64_si128(_mm_set_epi64x(0, x as i64), _mm_set1_epi8(-1), 0);
    _mm_cvtsi128_si64(product) as u64
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
