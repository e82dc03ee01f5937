use super::*;

/// The canonical form and format, or the error.
fn show(s: &str) -> String {
    parse(s).map_or_else(|e| format!("{e:?}"), |q| format!("{q} {:?}", q.format()))
}

#[test]
fn parses_and_prints_canonically() {
    #[rustfmt::skip]
    let cases = [
        ("0", "0 DecimalSI"), ("0Mi", "0 BinarySI"), ("-0.0", "0 DecimalSI"),
        ("96Mi", "96Mi BinarySI"), ("1024Mi", "1Gi BinarySI"), ("1.5Gi", "1536Mi BinarySI"),
        ("0.5Mi", "512Ki BinarySI"), ("1.5Ki", "1536 BinarySI"), ("1025", "1025 DecimalSI"),
        ("100663295", "100663295 DecimalSI"), ("100M", "100M DecimalSI"), ("1000M", "1G DecimalSI"),
        ("1.5", "1500m DecimalSI"), ("1.250M", "1250k DecimalSI"), ("50k", "50k DecimalSI"),
        ("129e6", "129e6 DecimalExponent"), ("1E-3", "1e-3 DecimalExponent"),
        ("1.3E+6", "1300e3 DecimalExponent"), ("1e3", "1e3 DecimalExponent"),
        (".001Ki", "1024m BinarySI"), (".000000000001Ki", "2n DecimalSI"),
        ("0.9n", "1n DecimalSI"), ("-0.9n", "-1n DecimalSI"), ("3.001n", "4n DecimalSI"),
        ("0.5e-9", "1e-9 DecimalExponent"), ("1.1E-9", "2e-9 DecimalExponent"),
        ("0.00000012345", "124n DecimalSI"), ("100.035Ki", "102435840m BinarySI"),
        ("5.", "5 DecimalSI"), (".5", "500m DecimalSI"), ("1.G", "1G DecimalSI"),
        ("+1Ki", "1Ki BinarySI"), ("-1.5Gi", "-1536Mi BinarySI"), ("7Ei", "7Ei BinarySI"),
        ("1E", "1E DecimalSI"), ("12E", "12E DecimalSI"), ("1000E", "1e21 DecimalSI"),
        ("10000000000000000000", "10E DecimalSI"), ("8Ei", "9223372036854775807 BinarySI"),
        ("-9223372036854775807Ki", "-9223372036854775807 BinarySI"),
        ("99999999999999999999999999999999Pi", "9223372036854775807 BinarySI"),
        ("0e2147483647", "0 DecimalExponent"), ("1e-2147483647", "1e-9 DecimalExponent"),
    ];
    for (input, want) in cases {
        assert_eq!(show(input), want, "{input}");
        let canonical = want.split(' ').next().unwrap_or_default();
        assert_eq!(
            parse(canonical),
            parse(input),
            "{canonical} reads back as {input}"
        );
    }
}

#[test]
fn refuses_what_kubernetes_refuses() {
    #[rustfmt::skip]
    let cases = [
        ("", "Empty"), (" 1Gi", "Whitespace"), ("1Gi ", "Whitespace"), ("1 Gi", "Whitespace"),
        ("Mi", "NoDigits"), (".", "NoDigits"), ("-", "NoDigits"), ("+.Ki", "NoDigits"),
        ("aoeu", "NoDigits"), ("--1", "NoDigits"), ("1.5.2", "ExtraPoint"), ("1.1.M", "ExtraPoint"),
        ("1+1.0M", "MisplacedSign"), ("1mi", r#"UnknownSuffix("mi")"#),
        ("0.1mi", r#"UnknownSuffix("mi")"#), ("1KB", r#"UnknownSuffix("KB")"#),
        ("1K", r#"UnknownSuffix("K")"#), ("1EB", r#"UnknownSuffix("EB")"#),
        ("1i", r#"UnknownSuffix("i")"#), ("1Mi3", r#"UnknownSuffix("Mi3")"#),
        ("1µ", r#"UnknownSuffix("µ")"#), ("1e", r#"BadExponent("e")"#),
        ("-3.01e-", r#"BadExponent("e-")"#), ("1e1.5", r#"BadExponent("e1.5")"#),
        ("1e3Mi", r#"BadExponent("e3Mi")"#), ("1e4294967297", r#"ExponentOutOfRange("e4294967297")"#),
        ("1e-2147483648", r#"ExponentOutOfRange("e-2147483648")"#),
        ("1e30", "TooLarge"), ("1e2147483647", "TooLarge"),
        ("9223372036854775808", "Int64Overflow"), ("9223372036.854775808", "Int64Overflow"),
    ];
    for (input, want) in cases {
        assert_eq!(show(input), want, "{input}");
    }
    #[rustfmt::skip]
    let messages = [
        ("1mi", r#"unknown unit "mi" (did you mean "Mi"?); use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E (powers of 1000), or an exponent such as e6"#),
        ("1KB", r#"unknown unit "KB" (did you mean "k" or "Ki"?); use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E (powers of 1000), or an exponent such as e6"#),
        ("1GiB", r#"unknown unit "GiB" (did you mean "Gi"?); use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E (powers of 1000), or an exponent such as e6"#),
        ("1x", r#"unknown unit "x"; use Ki, Mi, Gi, Ti, Pi or Ei (powers of 1024), n, u, m, k, M, G, T, P or E (powers of 1000), or an exponent such as e6"#),
        ("1.5.2", "quantity has more than one decimal point; write e.g. 1.5Gi"),
        ("1e1.5", r#"exponent "e1.5" must be a whole number, e.g. e6 or e-3"#),
    ];
    for (input, want) in messages {
        assert_eq!(
            parse(input).map_err(|e| e.to_string()),
            Err(want.to_owned())
        );
    }
}

#[test]
fn compares_exact_values() {
    let q = |s| parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
    let mib96 = Quantity::mebibytes(96);
    assert!(q("96Mi") > q("95Mi") && q("100663295") < mib96 && q("100663296") == mib96);
    assert!(q("100663296.000000001") > mib96 && q("1.073741824e9") == q("1Gi"));
    assert!(q("1Gi") == q("1024Mi") && q("1Gi") == q("1073741824"));
    assert!(q("10000T") > q("100Gi") && q("100m") > q("50m"));
    assert!(q("-1") < q("0") && q("-1Ki") < q("-1k"));
    assert!(q("0.5n") == q("1n") && q("1e-30") == q("1n"));
}

#[test]
fn quotes_values_as_go_string_does() {
    #[rustfmt::skip]
    let cases = [
        ("+1Ki", "+1Ki"), ("01Ki", "01Ki"), ("1.Mi", "1.Mi"), ("05M", "05M"), ("1.500k", "1.500k"),
        ("1E3", "1E3"), ("1e+3", "1e+3"), ("64Mi", "64Mi"), ("1024Mi", "1Gi"), ("1000", "1k"),
        ("1.5", "1500m"), ("0.5", "500m"), ("1.5k", "1500"), ("1.250M", "1.250M"), ("0", "0"),
    ];
    for (input, want) in cases {
        let quoted = parse(input).map(|q| q.go_string(input).into_owned());
        assert_eq!(quoted.as_deref(), Ok(want), "{input}");
    }
}

#[test]
fn adds_and_builds_like_go() {
    let (mib, zero, one) = (Quantity::mebibytes, parse("0"), parse("1"));
    let huge = parse("1e29").ok();
    #[rustfmt::skip]
    let cases = [
        (mib(64).checked_add(mib(32)), "96Mi"), (mib(992).checked_add(mib(32)), "1Gi"),
        (zero.ok().and_then(|z| z.checked_add(mib(1))), "1Mi"), // zero takes the other's format
        (one.ok().and_then(|o| o.checked_add(mib(1))), "1048577"),
        (Some(mib(1 << 50)), "1180591620717411303424"), // 2^70: past Ei, as newer Go prints it
        (Some(mib(-(1 << 40))), "-1Ei"), (Some(mib(i64::MIN)), "-9671406556917033397649408"),
        (Some(Quantity::from_int(1 << 30, Format::BinarySI)), "1Gi"),
        (huge.and_then(|h| h.checked_add(h)).and_then(|h| h.checked_add(h)), "None"),
    ];
    for (got, want) in cases {
        assert_eq!(got.map_or("None".into(), |q| q.to_string()), want);
    }
}

#[test]
fn reads_json_numbers_as_go_does() {
    let show = |q: Result<Quantity, QuantityError>| {
        q.map_or_else(|e| format!("{e:?}"), |q| format!("{q} {:?}", q.format()))
    };
    #[rustfmt::skip]
    let cases = [
        (Ok(Quantity::from_json_i64(1 << 30)), "1073741824 DecimalSI"),
        (Ok(Quantity::from_json_i64(-5000)), "-5k DecimalSI"),
        (Quantity::from_json_u64(1 << 63), "Int64Overflow"),
        (Quantity::from_json_u64(u64::MAX), "18446744073709551615 DecimalSI"),
        (Quantity::from_json_f64(1_073_741_824.0), "1073741824 DecimalSI"),
        (Quantity::from_json_f64(1.5), "1500m DecimalSI"),
        (Quantity::from_json_f64(1e21), "1e21 DecimalExponent"),
        (Quantity::from_json_f64(1.5e-7), "150e-9 DecimalExponent"),
        (Quantity::from_json_f64(-0.0), "0 DecimalSI"),
        (Quantity::from_json_f64(f64::NAN), "NotFinite"),
    ];
    for (got, want) in cases {
        assert_eq!(show(got), want);
    }
    assert_eq!(parse("1Gi").ok(), Some(Quantity::from_json_i64(1 << 30)));
}
