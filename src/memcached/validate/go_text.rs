//! Values as Go renders them in a field error (`%q`, `intstr`, `Quantity.String()`), and
//! quantities read as Go's `UnmarshalJSON` reads them.

use std::fmt;

use super::FieldError;
use crate::json::{Kind, Val};
use crate::memcached::IntOrString;
use crate::memcached::quantity::{self, Quantity};

/// A quantity read from JSON, with the text it was written as (for Go's `String()`).
#[derive(Clone, Copy)]
pub(crate) struct ReadQuantity<'i> {
    pub value: Quantity,
    text: Option<&'i str>,
}

impl ReadQuantity<'_> {
    /// `Quantity.String()`: the input text when Go's parser kept it, else the canonical form.
    pub fn go_string(&self) -> String {
        match self.text {
            Some(text) => self.value.go_string(text).into_owned(),
            None => self.value.to_string(),
        }
    }
}

/// A value that is not the type a rule reads: the rendered value and what was expected.
pub(crate) struct BadValue {
    pub(super) value: String,
    pub(super) detail: String,
}

impl BadValue {
    pub(super) fn at(self, field: impl Into<String>) -> FieldError {
        FieldError::invalid(field, self.value, self.detail)
    }
}

/// Reads a Quantity as Go's `UnmarshalJSON` does: a string, a JSON number, or null (zero).
pub(crate) fn read_quantity<'i>(v: Val<'_, 'i>) -> Result<ReadQuantity<'i>, BadValue> {
    let bad = |detail: String| BadValue {
        value: render(v),
        detail,
    };
    let parsed = match v.kind() {
        Kind::Null => Ok(Quantity::from_json_i64(0)),
        Kind::String => {
            let text = v.as_str().unwrap_or_default();
            return quantity::parse(text)
                .map(|value| ReadQuantity {
                    value,
                    text: Some(text),
                })
                .map_err(|e| bad(e.to_string()));
        }
        Kind::Integer => match v.as_integer().map(i64::try_from) {
            Some(Ok(n)) => Ok(Quantity::from_json_i64(n)),
            _ => u64::try_from(v.as_integer().unwrap_or(0))
                .map_err(|_| quantity::QuantityError::TooLarge)
                .and_then(Quantity::from_json_u64),
        },
        Kind::Float => Quantity::from_json_f64(v.as_f64().unwrap_or(f64::NAN)),
        _ => {
            return Err(bad(
                "must be a quantity: a string such as 128Mi, or a number".to_owned(),
            ));
        }
    };
    parsed
        .map(|value| ReadQuantity { value, text: None })
        .map_err(|e| bad(e.to_string()))
}

/// An `intstr.IntOrString` as its text (`1`, `25%`).
pub(crate) fn int_or_string(v: &IntOrString<'_>) -> String {
    match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => (*s).to_owned(),
    }
}

/// Go's `%q` (strconv.Quote) for the strings this webhook quotes.
pub(crate) fn go_quote(s: &str) -> String {
    use fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON value as a field error shows it: strings quoted, numbers and booleans bare, `null`,
/// and containers by their shape (Go would print its decoded type).
pub(crate) fn render(v: Val<'_, '_>) -> String {
    match v.kind() {
        Kind::String => go_quote(v.as_str().unwrap_or_default()),
        Kind::Integer => v.as_integer().unwrap_or_default().to_string(),
        Kind::Float => v.as_f64().unwrap_or_default().to_string(),
        Kind::Bool => v.as_bool().unwrap_or_default().to_string(),
        Kind::Null => "null".to_owned(),
        Kind::Array => "[...]".to_owned(),
        Kind::Object => "{...}".to_owned(),
    }
}

#[cfg(test)]
mod tests;
