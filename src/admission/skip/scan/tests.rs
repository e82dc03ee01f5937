use proptest::prelude::*;

use super::*;

/// Every classifier this CPU can run, by name: its string masks and its brackets.
#[allow(unsafe_code)]
fn every_classify(block: &[u8; 64]) -> Vec<(&'static str, Masks, Brackets)> {
    let mut all = vec![("bytes", classify_bytes(block), brackets_bytes(block))];
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        all.push(("sse2", unsafe { classify_sse2(block) }, unsafe {
            brackets_sse2(block)
        }));
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            all.push(("avx2", unsafe { classify_avx2(block) }, unsafe {
                brackets_avx2(block)
            }));
        }
    }
    all
}

/// Every scan this CPU can run, by name.
#[allow(unsafe_code)]
fn every_scan(body: &[u8], open: usize) -> Vec<(&'static str, Option<usize>)> {
    let mut all = vec![
        (
            "bytes",
            scan(body, open, classify_bytes, brackets_bytes, prefix_xor),
        ),
        ("dispatched", value_end(body, open)),
    ];
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        all.push(("sse2", unsafe { value_end_sse2(body, open) }));
        if avx2() {
            // SAFETY: the CPU has AVX2, POPCNT and PCLMULQDQ, checked just above.
            all.push(("avx2", unsafe { value_end_avx2(body, open) }));
        }
    }
    all
}

/// The scan a byte at a time: the reference for [`value_end`]. A backslash escapes the next
/// byte wherever it stands (as in simd-json's first stage; valid JSON has them only in strings).
fn value_end_bytewise(body: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0u32, false, false);
    for (i, &b) in body.iter().enumerate().skip(open) {
        if escaped {
            escaped = false;
            continue;
        }
        if b == b'\\' {
            escaped = true;
            continue;
        }
        if in_string {
            in_string = b != b'"';
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return std::str::from_utf8(&body[open..i]).is_ok().then_some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Text made mostly of the bytes the scan cares about, so strings, escapes and brackets fall on
/// every position of a 64-byte block, and across blocks.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => Just(b'"'),
        3 => Just(b'\\'),
        3 => Just(b'['),
        3 => Just(b']'),
        2 => Just(b'{'),
        2 => Just(b'}'),
        6 => Just(b'a'),
        1 => Just(0xc3),
        1 => Just(0xa9),
        1 => any::<u8>(),
    ];
    proptest::collection::vec(byte, 0..300)
}

/// Which bytes of a block follow an unescaped backslash, one backslash at a time: what the
/// branch-free [`escaped`] must equal.
fn escaped_one_by_one(backslashes: u64, carry: &mut bool) -> u64 {
    let last = 63;
    let mut escaped = u64::from(*carry);
    *carry = false;
    for bit in 0..=last {
        if backslashes >> bit & 1 == 1 && escaped >> bit & 1 == 0 {
            if bit == last {
                *carry = true;
            } else {
                escaped |= 1 << (bit + 1);
            }
        }
    }
    escaped
}

/// What [`Strings::read`] must answer, a byte at a time: the string from the quote at `open`
/// (not looked at) to the next quote, unless a backslash or a control character comes first or it is not UTF-8.
fn string_bytewise(text: &[u8], open: usize) -> Option<(&str, usize)> {
    let mut end = open + 1;
    loop {
        match *text.get(end)? {
            b'"' => return Some((std::str::from_utf8(&text[open + 1..end]).ok()?, end + 1)),
            b'\\' | 0..0x20 => return None,
            _ => end += 1,
        }
    }
}

/// Short texts of the bytes that end or stop a string, letters, and the bytes of multi-byte
/// characters (valid or not), around 32-byte boundaries.
fn strings() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        8 => Just(b'a'),
        2 => Just(b'"'),
        1 => Just(b'\\'),
        1 => Just(b'\n'),
        1 => Just(0xc3u8),
        1 => Just(0xa9u8),
        1 => Just(0xffu8),
    ];
    (proptest::collection::vec(byte, 0..90)).prop_map(|mut text| {
        text.insert(0, b'"');
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn the_branch_free_escapes_are_the_one_by_one_ones(
        // Runs of backslashes are what matter: bias towards them.
        runs in proptest::collection::vec((0u32..64, 1u32..12), 0..8),
        noise in any::<u64>(),
        carry in any::<bool>(),
    ) {
        let mut backslashes = noise & noise.rotate_left(7);
        for (start, len) in runs {
            for bit in start..(start + len).min(64) {
                backslashes |= 1 << bit;
            }
        }
        let (mut fast, mut slow) = (carry, carry);
        prop_assert_eq!(
            escaped(backslashes, &mut fast),
            escaped_one_by_one(backslashes, &mut slow),
            "{:064b} carry {}", backslashes, carry
        );
        prop_assert_eq!(fast, slow);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_carry_less_prefix_is_the_shifted_one(x in any::<u64>()) {
        if avx2() {
            // SAFETY: the CPU has PCLMULQDQ, checked just above.
            #[allow(unsafe_code)]
            let clmul = unsafe { prefix_xor_clmul(x) };
            prop_assert_eq!(clmul, prefix_xor(x));
            let by_bit = (0..64).fold((0u64, 0u64), |(acc, bit), i| {
                let bit = bit ^ (x >> i & 1);
                (acc | bit << i, bit)
            });
            prop_assert_eq!(clmul, by_bit.0);
        }
    }

    #[test]
    fn the_vector_masks_are_the_bytewise_ones(block in proptest::array::uniform32(any::<u8>()),
                                              other in proptest::array::uniform32(any::<u8>())) {
        let mut whole = [0u8; 64];
        whole[..32].copy_from_slice(&block);
        whole[32..].copy_from_slice(&other);
        // `non_ascii` says only whether a byte is not ASCII; which bits is each classifier's.
        let either = |masks: Masks| Masks { non_ascii: u64::from(masks.non_ascii != 0), ..masks };
        for (name, masks, brackets) in every_classify(&whole) {
            prop_assert_eq!(either(masks), either(classify_bytes(&whole)), "{}", name);
            prop_assert_eq!(brackets, brackets_bytes(&whole), "{}", name);
        }
    }

    #[test]
    fn every_string_reader_reads_as_the_bytewise_one(text in strings(), open in 0usize..4) {
        let open = open.min(text.len().saturating_sub(1));
        let expected = string_bytewise(&text, open);
        prop_assert_eq!(Strings::Bytes.read(&text, open), expected, "bytes");
        prop_assert_eq!(Strings::detect().read(&text, open), expected, "detected");
    }

    #[test]
    fn the_scan_finds_the_bytewise_end(tail in jsonish(), lead in 0usize..70) {
        let mut body = vec![b' '; lead];
        body.push(b'[');
        body.extend_from_slice(&tail);
        let expected = value_end_bytewise(&body, lead);
        for (name, end) in every_scan(&body, lead) {
            prop_assert_eq!(end, expected, "{}", name);
        }
    }
}

#[test]
fn escapes_and_brackets_in_strings_do_not_end_the_value() {
    let ending_last = [
        r#"[]"#,
        r#"["]"]"#,
        r#"["\"]"]"#,
        r#"["\\"]"#,
        r#"["\\\"]"]"#,
        r#"[[],[[]]]"#,
        r#"[{"k:{\"name\":\"[x\"}":{}}]"#,
        r#"{"a":{"b":"}"},"c":[{}]}"#,
    ];
    for text in ending_last {
        let end = Some(text.len() - 1);
        assert_eq!(value_end(text.as_bytes(), 0), end, "{text}");
    }
    for text in [r#"["#, r#"["]"#, r#"["\"]"#, r#"[[]"#] {
        assert_eq!(value_end(text.as_bytes(), 0), None, "{text}");
    }
}

#[test]
fn an_escape_split_across_blocks_is_followed() {
    // The backslash is the 64th byte of the first block; the quote it escapes opens the second.
    for pad in 55..70 {
        let text = format!("[\"{}\\\"]\"]", "a".repeat(pad));
        let expected = value_end_bytewise(text.as_bytes(), 0);
        assert_eq!(expected, Some(text.len() - 1), "{text}");
        for (name, end) in every_scan(text.as_bytes(), 0) {
            assert_eq!(end, expected, "{name}: {text}");
        }
    }
}

#[test]
fn brackets_in_blocks_wholly_inside_a_string_do_not_count() {
    // A string as long as the `last-applied` annotation fills whole blocks, whose brackets the
    // scan does not classify; it must still count those of the blocks it ends in and after,
    // wherever the string starts and ends in them.
    let inside = r#"{\"spec\":[{\"a\":\"]}\"}],"#.repeat(12);
    for lead in 0..66 {
        for after in ["]", r#"],[{"x":"]"}]]"#] {
            let text = format!("[{}\"{inside}\"{after}", " ".repeat(lead));
            let expected = value_end_bytewise(text.as_bytes(), 0);
            assert!(expected.is_some(), "{text}");
            for (name, end) in every_scan(text.as_bytes(), 0) {
                assert_eq!(end, expected, "{name}: lead {lead}, after {after}");
            }
        }
    }
}

#[test]
fn a_string_reads_alike_on_either_side_of_the_32_byte_load() {
    // The AVX2 reader loads 32 bytes after the opening quote, and takes another way for a
    // string that does not end in them or a text that ends first: every length around that,
    // with what follows the closing quote inside the load (not ASCII, a backslash, a control
    // character) or the text's end right after it.
    for len in 0..70 {
        for body in ["a", "é"] {
            for tail in ["", "é", "\\", "\n", "\"", &"x".repeat(40)] {
                let text = format!("\"{}\"{tail}", body.repeat(len));
                let expected = string_bytewise(text.as_bytes(), 0);
                assert!(expected.is_some(), "{text:?}");
                assert_eq!(
                    Strings::detect().read(text.as_bytes(), 0),
                    expected,
                    "{text:?}"
                );
            }
            let open = format!("\"{}", body.repeat(len));
            assert_eq!(Strings::detect().read(open.as_bytes(), 0), None, "{open:?}");
        }
    }
}
