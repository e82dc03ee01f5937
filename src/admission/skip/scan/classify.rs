//! How the scan sees a 64-byte block: one bit per byte for each kind of byte it looks at, with
//! AVX2, with SSE2, and a byte at a time (for other CPUs, and as the reference the tests hold
//! the vector versions to).

/// One bit per byte of a 64-byte block, for each kind of byte that tells strings apart.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Masks {
    pub(super) quote: u64,
    pub(super) backslash: u64,
    /// Not zero when a byte of the block is not ASCII (which bits is the classifier's).
    pub(super) non_ascii: u64,
}

/// One bit per byte of a 64-byte block for its opening and its closing brackets and braces.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Brackets {
    pub(super) open: u64,
    pub(super) close: u64,
}

/// A block's two halves in AVX2 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn halves_avx2(block: &[u8; 64]) -> (std::arch::x86_64::__m256i, std::arch::x86_64::__m256i) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256};
    let [lo, hi] = block.as_chunks::<32>().0 else {
        unreachable!("64 bytes are two halves of 32")
    };
    // SAFETY: each half is a reference to 32 readable bytes, and `loadu` reads 32 bytes with
    // no alignment requirement.
    #[allow(unsafe_code)]
    unsafe {
        (
            _mm256_loadu_si256(lo.as_ptr().cast::<__m256i>()),
            _mm256_loadu_si256(hi.as_ptr().cast::<__m256i>()),
        )
    }
}

/// The bits of the bytes of both halves that equal `byte`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn bits_avx2(lo: std::arch::x86_64::__m256i, hi: std::arch::x86_64::__m256i, byte: u8) -> u64 {
    use std::arch::x86_64::{_mm256_cmpeq_epi8, _mm256_movemask_epi8, _mm256_set1_epi8};
    let wanted = _mm256_set1_epi8(byte as i8);
    let lo = _mm256_movemask_epi8(_mm256_cmpeq_epi8(lo, wanted)) as u32;
    let hi = _mm256_movemask_epi8(_mm256_cmpeq_epi8(hi, wanted)) as u32;
    u64::from(lo) | (u64::from(hi) << 32)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn classify_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{_mm256_movemask_epi8, _mm256_or_si256};
    let (lo, hi) = halves_avx2(block);
    Masks {
        quote: bits_avx2(lo, hi, b'"'),
        backslash: bits_avx2(lo, hi, b'\\'),
        // Only whether any byte is: one mask of both halves.
        non_ascii: u64::from(_mm256_movemask_epi8(_mm256_or_si256(lo, hi)) as u32),
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn brackets_avx2(block: &[u8; 64]) -> Brackets {
    use std::arch::x86_64::{_mm256_or_si256, _mm256_set1_epi8};
    let (lo, hi) = halves_avx2(block);
    // `[` and `{`, `]` and `}` differ only in bit 0x20: one compare finds both of a pair.
    let case = _mm256_set1_epi8(0x20);
    let (lo, hi) = (_mm256_or_si256(lo, case), _mm256_or_si256(hi, case));
    Brackets {
        open: bits_avx2(lo, hi, b'{'),
        close: bits_avx2(lo, hi, b'}'),
    }
}

/// A block's four 16-byte quarters in SSE2 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn quarters_sse2(block: &[u8; 64]) -> [std::arch::x86_64::__m128i; 4] {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    let [a, b, c, d] = block.as_chunks::<16>().0 else {
        unreachable!("64 bytes are four quarters of 16")
    };
    // SAFETY: each quarter is a reference to 16 readable bytes, and `loadu` reads 16 bytes with
    // no alignment requirement.
    #[allow(unsafe_code)]
    [a, b, c, d].map(|quarter| unsafe { _mm_loadu_si128(quarter.as_ptr().cast::<__m128i>()) })
}

/// The bits of the bytes of the quarters that equal one of `bytes`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
fn bits_sse2(quarters: &[std::arch::x86_64::__m128i; 4], bytes: &[u8]) -> u64 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128,
    };
    let mut bits = 0;
    for (i, &v) in quarters.iter().enumerate() {
        let mut hits = _mm_setzero_si128();
        for &byte in bytes {
            hits = _mm_or_si128(hits, _mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8)));
        }
        bits |= u64::from(_mm_movemask_epi8(hits) as u16) << (16 * i);
    }
    bits
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
pub(super) fn classify_sse2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::_mm_movemask_epi8;
    let quarters = quarters_sse2(block);
    let mut non_ascii = 0;
    for (i, &v) in quarters.iter().enumerate() {
        non_ascii |= u64::from(_mm_movemask_epi8(v) as u16) << (16 * i);
    }
    Masks {
        quote: bits_sse2(&quarters, b"\""),
        backslash: bits_sse2(&quarters, b"\\"),
        non_ascii,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[inline]
pub(super) fn brackets_sse2(block: &[u8; 64]) -> Brackets {
    let quarters = quarters_sse2(block);
    Brackets {
        open: bits_sse2(&quarters, b"[{"),
        close: bits_sse2(&quarters, b"]}"),
    }
}

/// The same masks a byte at a time: for other architectures, and to test the vector version.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn classify_bytes(block: &[u8; 64]) -> Masks {
    let mut masks = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match b {
            b'"' => masks.quote |= bit,
            b'\\' => masks.backslash |= bit,
            0x80.. => masks.non_ascii |= bit,
            _ => {}
        }
    }
    masks
}

/// [`Brackets`] a byte at a time, as [`classify_bytes`].
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn brackets_bytes(block: &[u8; 64]) -> Brackets {
    let mut brackets = Brackets::default();
    for (i, &b) in block.iter().enumerate() {
        let bit = 1u64 << i;
        match b {
            b'[' | b'{' => brackets.open |= bit,
            b']' | b'}' => brackets.close |= bit,
            _ => {}
        }
    }
    brackets
}
