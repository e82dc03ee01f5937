//! Container image references as the kubelet and containerd parse them (distribution/reference
//! `ParseNormalizedNamed`, go-digest). The apiserver lets a malformed image through and the pod
//! then waits forever in `InvalidImageName`, so the webhook refuses it with the reason instead.

use std::fmt;

/// distribution/reference's limit; older releases count the domain too, so the check applies it
/// to the normalized name (`memcached` counts as `docker.io/library/memcached`).
pub(crate) const MAX_NAME: usize = 255;
pub(crate) const MAX_TAG: usize = 128;

/// Why a string is not an image reference the kubelet can pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    Empty,
    SurroundingWhitespace,
    /// A bare 64-hex string, which the parsers read as an image ID.
    HexName,
    MissingName,
    /// A leading, trailing or doubled `/`.
    EmptyComponent,
    /// The repository path (everything after a registry host) has capitals.
    Uppercase(String),
    InvalidRegistry(String),
    InvalidComponent(String),
    /// The normalized name's length.
    TooLong(usize),
    InvalidTag {
        tag: String,
        problem: String,
    },
    InvalidDigest {
        digest: String,
        problem: String,
    },
}

/// Checks `s` against the reference grammar plus the rules the parsers add on top: a lowercase
/// repository path, the length limit and a digest go-digest accepts.
pub fn check(s: &str) -> Result<(), ImageError> {
    use ImageError as E;
    if s.is_empty() {
        return Err(E::Empty);
    }
    if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) {
        return Err(E::SurroundingWhitespace);
    }
    if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(E::HexName);
    }
    if let Some(checked) = one_component(s) {
        return checked;
    }
    full_grammar(s)
}

/// The common reference `name[:tag]` (`memcached:1.6.28`), no host and no digest, checked in
/// one pass over its bytes: what [`full_grammar`] concludes for it, for about half the
/// instructions (the whole check of `memcached:1.6.28` 533 instead of about 980). `None` for
/// any other, or when the name is not a valid path component (then [`full_grammar`] finds the
/// error).
fn one_component(s: &str) -> Option<Result<(), ImageError>> {
    let mut colon = None;
    for (at, &b) in s.as_bytes().iter().enumerate() {
        match b {
            b'/' | b'@' => return None,
            b':' if colon.is_none() => colon = Some(at),
            _ => {}
        }
    }
    let (name, tag) = match colon {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    if !is_path_component(name.as_bytes()) {
        return None;
    }
    // Normalized as `docker.io/library/<name>`.
    let normalized = "docker.io/library/".len() + name.len();
    if normalized > MAX_NAME {
        return Some(Err(ImageError::TooLong(normalized)));
    }
    Some(check_tag(tag))
}

/// [`check`] past its first three tests: the reference grammar in full.
fn full_grammar(s: &str) -> Result<(), ImageError> {
    use ImageError as E;
    let (rest, digest) = split_once(s, b'@').map_or((s, None), |(r, d)| (r, Some(d)));
    // A tag follows the first ':' after the last '/'; any earlier ':' belongs to a registry port.
    let slash = rest.bytes().rposition(|b| b == b'/').map_or(0, |i| i + 1);
    let (name, tag) = match rest
        .get(slash..)
        .and_then(|tail| tail.bytes().position(|b| b == b':'))
    {
        Some(i) => (
            rest.get(..slash + i).unwrap_or(rest),
            rest.get(slash + i + 1..),
        ),
        None => (rest, None),
    };
    if name.is_empty() {
        return Err(E::MissingName);
    }
    if components(name).any(<[u8]>::is_empty) {
        return Err(E::EmptyComponent);
    }

    // The kubelet's split: a first component with '.' or ':', `localhost`, or capitals is a host.
    let host = split_once(name, b'/').filter(|(first, _)| {
        first.bytes().any(|b| b == b'.' || b == b':') || *first == "localhost" || has_upper(first)
    });
    let path = host.map_or(name, |(_, path)| path);
    if has_upper(path) {
        return Err(E::Uppercase(path.to_owned()));
    }
    // The grammar itself only needs one reading to match: with a host, or all path components.
    let with_host = split_once(name, b'/')
        .is_some_and(|(first, path)| is_domain(first) && components(path).all(is_path_component));
    if !with_host && !components(name).all(is_path_component) {
        return Err(match host {
            Some((first, _)) if !is_domain(first) => E::InvalidRegistry(first.to_owned()),
            _ => {
                let mut components = path.split('/').filter(|c| !is_path_component(c.as_bytes()));
                E::InvalidComponent(components.next().unwrap_or(path).to_owned())
            }
        });
    }
    let (domain, path) = match host {
        Some(("index.docker.io", _)) | None => ("docker.io", host.map_or(name, |(_, p)| p)),
        Some(split) => split,
    };
    let library = if domain == "docker.io" && !path.bytes().any(|b| b == b'/') {
        "library/".len()
    } else {
        0
    };
    let normalized = domain.len() + 1 + library + path.len();
    if normalized > MAX_NAME {
        return Err(E::TooLong(normalized));
    }

    check_tag(tag)?;
    if let Some(problem) = digest.and_then(digest_problem) {
        return Err(E::InvalidDigest {
            digest: digest.unwrap_or_default().to_owned(),
            problem,
        });
    }
    Ok(())
}

/// `(component ("." component)* | "[" ipv6 "]") (":" port)?`, components alphanumeric with
/// inner dashes; capitals are fine in a host.
fn is_domain(d: &str) -> bool {
    let is_port = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = d.strip_prefix('[') {
        let Some((ip, after)) = rest.split_once(']') else {
            return false;
        };
        let ipv6 = !ip.is_empty() && ip.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
        return ipv6 && (after.is_empty() || after.strip_prefix(':').is_some_and(is_port));
    }
    let (host, port) = split_once(d, b':').map_or((d, None), |(h, p)| (h, Some(p)));
    let component = |c: &[u8]| {
        let edge = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
        edge(c.first())
            && edge(c.last())
            && c.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-')
    };
    port.is_none_or(is_port) && host.as_bytes().split(|&b| b == b'.').all(component)
}

/// `[a-z0-9]+ (([._]|__|[-]+) [a-z0-9]+)*`, in one pass over the bytes: each run between two
/// letters or digits must be a separator. (`str::split` on letters and digits took a step of
/// its iterator for every character: 110 instructions more on `memcached:1.6.28`.)
fn is_path_component(bytes: &[u8]) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !(bytes.first().is_some_and(alnum) && bytes.last().is_some_and(alnum)) {
        return false;
    }
    let mut at = 0;
    while at < bytes.len() {
        if alnum(&bytes[at]) {
            at += 1;
            continue;
        }
        let start = at;
        while !alnum(&bytes[at]) {
            at += 1; // the last byte is a letter or a digit
        }
        let run = &bytes[start..at];
        if !(matches!(run, b"." | b"_" | b"__") || run.iter().all(|&b| b == b'-')) {
            return false;
        }
    }
    true
}

/// Go's `strings.ToLower(s) != s`. An ASCII string (every image the fixtures hold) has a
/// capital exactly where an ASCII letter is one.
fn has_upper(s: &str) -> bool {
    if s.is_ascii() {
        return s.bytes().any(|b| b.is_ascii_uppercase());
    }
    s.chars().any(|c| c.to_lowercase().ne(std::iter::once(c)))
}

// The searches below look for ASCII bytes, which never occur inside a multi-byte UTF-8
// sequence, so a byte's index is a character boundary, as `str::find` would give it. Written as
// byte loops they are inlined: the `char` pattern's searcher is a call into `memchr` for every
// search, and `str::split` decodes every character; both dear on strings of a few bytes (an
// image is checked on every validation; docs/performance.md).

/// The components of a path: its bytes between `/`s.
fn components(s: &str) -> impl Iterator<Item = &[u8]> {
    s.as_bytes().split(|&b| b == b'/')
}

/// `s.split_once(b as char)` for an ASCII byte.
fn split_once(s: &str, b: u8) -> Option<(&str, &str)> {
    let i = s.bytes().position(|x| x == b)?;
    Some((s.get(..i)?, s.get(i + 1..)?))
}

/// A reference's tag, when it has one.
fn check_tag(tag: Option<&str>) -> Result<(), ImageError> {
    match tag.and_then(tag_problem) {
        Some(problem) => Err(ImageError::InvalidTag {
            tag: tag.unwrap_or_default().to_owned(),
            problem,
        }),
        None => Ok(()),
    }
}

/// `[\w][\w.-]{0,127}` with ASCII `\w`.
fn tag_problem(tag: &str) -> Option<String> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    Some(match tag.as_bytes().first() {
        None => "is empty; write a tag after the \":\" (e.g. memcached:1.6) or drop it".into(),
        _ if tag.len() > MAX_TAG => format!("is {} characters long; at most {MAX_TAG}", tag.len()),
        Some(&first) if !word(first) => "must start with a letter, a digit or \"_\"".into(),
        _ if !tag.bytes().all(|b| word(b) || b == b'.' || b == b'-') => {
            "may contain only letters, digits, \"_\", \".\" and \"-\"".into()
        }
        _ => return None,
    })
}

/// go-digest: a registered algorithm and exactly its length of lowercase hex.
fn digest_problem(digest: &str) -> Option<String> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Some("must be <algorithm>:<hex>, e.g. sha256: and 64 hex characters".into());
    };
    let want = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => {
            return Some(format!(
                "unsupported algorithm \"{algorithm}\"; use sha256 (or sha384, sha512)"
            ));
        }
    };
    let found = hex.chars().count();
    if found != want {
        return Some(format!(
            "{algorithm} needs exactly {want} hex characters, found {found}"
        ));
    }
    let lower_hex = hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    (!lower_hex).then(|| "the hex part may contain only 0-9 and lowercase a-f".into())
}

// === impl ImageError ===

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("empty image; set one such as memcached:1.6"),
            Self::SurroundingWhitespace => {
                f.write_str("surrounding whitespace in the image; remove it")
            }
            Self::HexName => f.write_str(
                "a bare 64-character hex string is an image ID, not a repository; \
                 write e.g. memcached@sha256:<hex>",
            ),
            Self::MissingName => f.write_str("no repository name before the tag or digest"),
            Self::EmptyComponent => f.write_str(
                "empty component in the repository name (a leading, trailing or double \"/\")",
            ),
            Self::Uppercase(path) => write!(
                f,
                "uppercase letters in the repository name \"{path}\"; repository names must be lowercase"
            ),
            Self::InvalidRegistry(host) => write!(
                f,
                "invalid registry host \"{host}\"; use letters, digits, dots and dashes, an optional \
                 :port, or [ipv6]"
            ),
            Self::InvalidComponent(c) => write!(
                f,
                "invalid repository name component \"{c}\"; use lowercase letters and digits, \
                 separated by \".\", \"_\", \"__\" or dashes"
            ),
            Self::TooLong(n) => {
                write!(
                    f,
                    "repository name is {n} characters once normalized; at most {MAX_NAME}"
                )
            }
            Self::InvalidTag { tag, problem } => write!(f, "invalid tag \"{tag}\": {problem}"),
            Self::InvalidDigest { digest, problem } => {
                write!(f, "invalid digest \"{digest}\": {problem}")
            }
        }
    }
}

impl std::error::Error for ImageError {}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn accepts_what_the_kubelet_pulls() {
        let long = |n| "a".repeat(n);
        #[rustfmt::skip]
        let cases = [
            "memcached", "memcached:1.6", "memcached:1.6.28", "prom/memcached-exporter:v0.15.4",
            &format!("registry.example.com:5000/team/memcached:1.6@sha256:{HEX}"),
            &format!("memcached@sha256:{HEX}"), &format!("{HEX}:v1"), "localhost/memcached",
            "localhost", "localhost:5000", "localhost:5000/x", "[::1]:5000/x", "[fe80::1]/team/x",
            "127.0.0.1:5000/x", "Registry.Example.COM/memcached", "Team/memcached", "a/b/c/d",
            "a__b", "a_b.c-d--e", "my_registry.com/x", "docker.io/library/memcached",
            "memcached:Latest_1.6-rc.1", "memcached:_x", &format!("memcached:{}", long(128)),
            &long(237), &format!("docker.io/{}", long(237)), &format!("quay.io/{}", long(247)),
            &format!("x@sha512:{HEX}{HEX}"),
        ];
        for image in cases {
            assert_eq!(check(image), Ok(()), "{image}");
        }
    }

    #[test]
    fn refuses_what_the_kubelet_refuses() {
        use ImageError::*;
        let (s, long) = (|v: &str| v.to_owned(), |n| "a".repeat(n));
        let tag = |t: &str, p: &str| InvalidTag {
            tag: s(t),
            problem: s(p),
        };
        let digest = |d: &str, p: &str| InvalidDigest {
            digest: d.to_owned(),
            problem: p.to_owned(),
        };
        let start = "must start with a letter, a digit or \"_\"";
        #[rustfmt::skip]
        let cases = [
            (s(""), Empty), (s(" memcached"), SurroundingWhitespace), (s("memcached "), SurroundingWhitespace),
            (s("memcached\n"), SurroundingWhitespace), (s(HEX), HexName), (s(":1.6"), MissingName),
            (s("@sha256:x"), MissingName), (s("/memcached"), EmptyComponent), (s("a//b"), EmptyComponent),
            (s("team/"), EmptyComponent), (s("Memcached:1.6"), Uppercase(s("Memcached"))),
            (s("team/Memcached"), Uppercase(s("team/Memcached"))),
            (s("registry.io/Team/x"), Uppercase(s("Team/x"))), (s("a___b/x"), InvalidComponent(s("a___b"))),
            (s("-repo/x"), InvalidComponent(s("-repo"))), (s("x/y-"), InvalidComponent(s("y-"))),
            (s("mem cached"), InvalidComponent(s("mem cached"))), (s("memcäched"), InvalidComponent(s("memcäched"))),
            (s("[::1]"), InvalidComponent(s("["))), (s("reg.io:port/x"), InvalidRegistry(s("reg.io:port"))),
            (s("-reg.io/x"), InvalidRegistry(s("-reg.io"))), (s("[::g]:5000/x"), InvalidRegistry(s("[::g]:5000"))),
            (long(238), TooLong(256)), (format!("quay.io/{}", long(248)), TooLong(256)),
            (s("memcached:"), tag("", "is empty; write a tag after the \":\" (e.g. memcached:1.6) or drop it")),
            (s("memcached:-1"), tag("-1", start)), (s("memcached:.1"), tag(".1", start)),
            (s("memcached:1.6:x"), tag("1.6:x", "may contain only letters, digits, \"_\", \".\" and \"-\"")),
            (format!("memcached:{}", long(129)), tag(&long(129), "is 129 characters long; at most 128")),
            (s("memcached@"), digest("", "must be <algorithm>:<hex>, e.g. sha256: and 64 hex characters")),
            (s("memcached@sha256:abc"), digest("sha256:abc", "sha256 needs exactly 64 hex characters, found 3")),
            (format!("memcached@md5:{HEX}"), digest(&format!("md5:{HEX}"), "unsupported algorithm \"md5\"; use sha256 (or sha384, sha512)")),
            (format!("memcached@sha256:{}", HEX.to_uppercase()), digest(&format!("sha256:{}", HEX.to_uppercase()), "the hex part may contain only 0-9 and lowercase a-f")),
            (format!("x@sha256:{HEX}@sha256:{HEX}"), digest(&format!("sha256:{HEX}@sha256:{HEX}"), "sha256 needs exactly 64 hex characters, found 136")),
        ];
        for (image, want) in cases {
            assert_eq!(check(&image), Err(want), "{image}");
        }
    }

    /// The grammar read as it is written: the runs between letters and digits, by `str::split`.
    fn path_component_by_split(c: &str) -> bool {
        let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        c.as_bytes().first().is_some_and(alnum)
            && c.as_bytes().last().is_some_and(alnum)
            && c.split(|ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit())
                .all(|sep| matches!(sep, "" | "." | "_" | "__") || sep.bytes().all(|b| b == b'-'))
    }

    proptest::proptest! {
        /// The one-pass check of `name[:tag]` concludes what the full grammar does, wherever
        /// it concludes.
        #[test]
        fn one_component_agrees_with_the_full_grammar(
            s in "[a-cA-C0-9._é:/@-]{1,12}|[a-z]{250,260}(:[a-z0-9._-]{0,3})?"
        ) {
            if let Some(checked) = one_component(&s) {
                proptest::prop_assert_eq!(checked, full_grammar(&s), "{:?}", s);
            }
        }

        #[test]
        fn a_path_component_is_read_as_the_grammar_reads_it(c in "[a-c0-9._A/é-]{0,12}") {
            let (read, by_split) = (is_path_component(c.as_bytes()), path_component_by_split(&c));
            proptest::prop_assert_eq!(read, by_split, "{:?}", c);
        }
    }

    #[test]
    fn messages_name_the_problem() {
        let message = |s: &str| check(s).map_err(|e| e.to_string());
        #[rustfmt::skip]
        let cases = [
            ("", "empty image; set one such as memcached:1.6"),
            (" memcached", "surrounding whitespace in the image; remove it"),
            ("Memcached:1.6", "uppercase letters in the repository name \"Memcached\"; repository names must be lowercase"),
            ("memcached:-1", "invalid tag \"-1\": must start with a letter, a digit or \"_\""),
            ("memcached@sha256:abc", "invalid digest \"sha256:abc\": sha256 needs exactly 64 hex characters, found 3"),
        ];
        for (image, want) in cases {
            assert_eq!(message(image), Err(want.to_owned()), "{image}");
        }
    }
}
