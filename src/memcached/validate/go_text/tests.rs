//! Go's `%q`, as `strconv.Quote` writes it.

use super::go_quote;

#[test]
fn go_quote_matches_strconv_quote() {
    assert_eq!(go_quote("64Mi"), r#""64Mi""#);
    assert_eq!(go_quote(""), r#""""#);
    assert_eq!(
        go_quote("a\"b\\c\n\t\u{1}\u{7f}é"),
        r#""a\"b\\c\n\t\x01\x7fé""#
    );
}
