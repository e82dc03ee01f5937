//! Compile-time building blocks of a patch operation's text: the JSON, concatenated from the
//! defaulting rules' constants, and its standard base64 in each of the three phases a stream of
//! operations can reach it in. Everything here runs in `const` items (the [`op`](super::op)
//! macro's), so a wrong constant fails the build, not a request.

/// The standard base64 alphabet (RFC 4648, section 4).
pub(super) const ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The total length of `parts`.
pub const fn total(parts: &[&[u8]]) -> usize {
    let (mut n, mut i) = (0, 0);
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// `parts` joined; `N` is their [`total`] length.
pub const fn concat<const N: usize>(parts: &[&[u8]]) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut k, mut i) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N, "the parts do not fill the text");
    out
}

/// A string constant's bytes, refused (at compile time) if a JSON string would have to escape
/// any of them: the texts quote them as they are.
pub const fn plain(s: &str) -> &[u8] {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        assert!(
            b >= 0x20 && b != b'"' && b != b'\\',
            "a patch constant needs an escape"
        );
        i += 1;
    }
    bytes
}

/// How many decimal digits a non-negative integer constant has.
pub const fn digits(n: i64) -> usize {
    assert!(n >= 0, "the defaults are non-negative");
    let (mut n, mut d) = (n, 1);
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// A non-negative integer constant in decimal; `N` is its [`digits`].
pub const fn int<const N: usize>(n: i64) -> [u8; N] {
    assert!(N == digits(n), "N is not the number of digits");
    let mut out = [0u8; N];
    let (mut n, mut i) = (n, N);
    while i > 0 {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
    }
    out
}

/// The bytes of a text that complete a group when `phase` bytes (0 to 2) are carried in.
pub const fn skip(phase: usize) -> usize {
    (3 - phase) % 3
}

/// The length of [`encode`]'s output for a text of `len` bytes in `phase`.
pub const fn encoded_len(len: usize, phase: usize) -> usize {
    assert!(len >= 2, "a text is longer than a group's carry");
    (len - skip(phase)) / 3 * 4
}

/// The base64 of `text`'s whole groups once its first [`skip`]`(phase)` bytes have completed
/// the carried group; `N` is its [`encoded_len`]. The bytes after the last whole group are the
/// next carry.
pub const fn encode<const N: usize>(text: &[u8], phase: usize) -> [u8; N] {
    assert!(
        N == encoded_len(text.len(), phase),
        "N is not the encoded length"
    );
    let mut out = [0u8; N];
    let (mut i, mut k) = (skip(phase), 0);
    while k < N {
        let group = [text[i], text[i + 1], text[i + 2]];
        let chars = group_chars(group);
        out[k] = chars[0];
        out[k + 1] = chars[1];
        out[k + 2] = chars[2];
        out[k + 3] = chars[3];
        i += 3;
        k += 4;
    }
    out
}

/// The four base64 characters of three bytes.
pub(super) const fn group_chars(group: [u8; 3]) -> [u8; 4] {
    let n = ((group[0] as u32) << 16) | ((group[1] as u32) << 8) | group[2] as u32;
    [
        ALPHABET[(n >> 18) as usize & 63],
        ALPHABET[(n >> 12) as usize & 63],
        ALPHABET[(n >> 6) as usize & 63],
        ALPHABET[n as usize & 63],
    ]
}

/// One operation's JSON text and its base64 in each phase, built at compile time by
/// [`text!`](crate::patch::text).
///
/// A phase is the number of bytes (0 to 2) carried in from what came before: the text's first
/// [`skip`]`(phase)` bytes complete that group, its base64 for the phase follows, and its last
/// `rest[phase]` bytes are carried on. The few bytes at either end are kept apart so that the
/// writer moves them without a slice (and without a call to `memcpy` for one or two bytes).
#[derive(Debug)]
pub struct Text {
    /// The JSON, for the tests (the writer needs only its ends).
    #[cfg(test)]
    pub(crate) json: &'static [u8],
    /// By phase.
    pub(crate) base64: [&'static [u8]; 3],
    /// The text's first two bytes.
    pub(crate) first: [u8; 2],
    /// The text's last two bytes.
    pub(crate) last: [u8; 2],
    /// By phase: how many of the last bytes are carried on (0 to 2).
    pub(crate) rest: [usize; 3],
}

/// [`Text::rest`] of a text of `len` bytes.
pub const fn rest(len: usize) -> [usize; 3] {
    [
        (len - skip(0)) % 3,
        (len - skip(1)) % 3,
        (len - skip(2)) % 3,
    ]
}

/// A [`Text`] from byte-string parts, evaluated at compile time.
macro_rules! text {
    ($($part:expr),+ $(,)?) => {{
        use $crate::patch::text as t;
        const PARTS: &[&[u8]] = &[$($part),+];
        const LEN: usize = t::total(PARTS);
        const JSON: [u8; LEN] = t::concat(PARTS);
        const B0: [u8; t::encoded_len(LEN, 0)] = t::encode(&JSON, 0);
        const B1: [u8; t::encoded_len(LEN, 1)] = t::encode(&JSON, 1);
        const B2: [u8; t::encoded_len(LEN, 2)] = t::encode(&JSON, 2);
        t::Text {
            #[cfg(test)]
            json: &JSON,
            base64: [&B0, &B1, &B2],
            first: [JSON[0], JSON[1]],
            last: [JSON[LEN - 2], JSON[LEN - 1]],
            rest: t::rest(LEN),
        }
    }};
}

pub(crate) use text;
