//! Prometheus durations (`serviceMonitor.interval` and `scrapeTimeout`) as CEL: the parse of
//! [`duration::parse`] unrolled over its tokens (a valid duration has at most seven, one per
//! unit, so the first error is always among the first eight), with its messages.

use super::{Rule, lit, quoted};
use crate::memcached::{defaults as d, duration};

/// At most one token per unit, plus the one that breaks the order.
const TOKENS: usize = duration::UNITS.len() + 1;

/// The settings for one duration (`interval` or `timeout`): its text after defaulting, its
/// tokens (a run of digits and the run of non-digits after it), its first error ("" if none)
/// and its length in milliseconds.
pub(super) fn settings() -> Vec<(String, String)> {
    let sm = "$o.?spec.?monitoring.?serviceMonitor";
    let text = |member: &str, default: &str| {
        format!(
            "{sm}.?{member}.orValue(\"\") == \"\" ? {} : {sm}.value().{member}",
            lit(default)
        )
    };
    let mut settings = vec![
        ("sm".to_owned(), format!("{sm}.hasValue()")),
        (
            "interval".to_owned(),
            text("interval", d::SERVICE_MONITOR_INTERVAL),
        ),
        (
            "timeout".to_owned(),
            text("scrapeTimeout", d::SERVICE_MONITOR_SCRAPE_TIMEOUT),
        ),
    ];
    for name in ["interval", "timeout"] {
        let t = format!("$.{name}");
        let var = |suffix: &str| format!("{name}_{suffix}");
        settings.push((
            var("tokens"),
            format!("{t}.findAll(\"[0-9]+[^0-9]*|[^0-9]+\")"),
        ));
        settings.push((
            var("digits"),
            format!("{t}_tokens.map(k, k.find(\"^[0-9]*\"))"),
        ));
        settings.push((
            var("units"),
            format!("{t}_tokens.map(k, k.substring(k.find(\"^[0-9]*\").size()))"),
        ));
        settings.push((
            var("index"),
            format!("{t}_units.map(u, {}.indexOf(u))", units()),
        ));
        let each: Vec<String> = (0..TOKENS).map(|i| value_ms(&t, i)).collect();
        settings.push((var("values"), format!("[\n{}\n]", each.join(",\n"))));
        settings.push((var("errors"), errors_of(&t)));
        settings.push((
            var("error"),
            format!("{t}_errors.size() > 0 ? {t}_errors[0] : \"\""),
        ));
        settings.push((
            var("ms"),
            format!("{t} == \"0\" ? 0 : {}", total_ms(&t, TOKENS - 1)),
        ));
    }
    settings
}

const MAX_MS: u128 = duration::MAX_NANOS / 1_000_000;

fn units() -> String {
    let names: Vec<String> = duration::UNITS.iter().map(|(u, _)| lit(u)).collect();
    format!("[{}]", names.join(", "))
}

fn scales() -> String {
    let scales: Vec<String> = duration::UNITS
        .iter()
        .map(|(_, ms)| ms.to_string())
        .collect();
    format!("[{}]", scales.join(", "))
}

// `t` below is a duration's variable (`$.interval`): its tokens, their digits, units and unit
// indexes are the variables `t_tokens`, `t_digits`, `t_units` and `t_index`.

fn digits(t: &str, i: usize) -> String {
    format!("{t}_digits[{i}]")
}

fn unit(t: &str, i: usize) -> String {
    format!("{t}_units[{i}]")
}

fn index(t: &str, i: usize) -> String {
    format!("{t}_index[{i}]")
}

/// Token `i`'s milliseconds; past the limit (`MAX_MS + 1`) when its number is; 0 when the
/// token is not valid (an error before it is reported then).
fn value_ms(t: &str, i: usize) -> String {
    let significant = format!("{}.find(\"[1-9][0-9]*\")", digits(t, i));
    let scale = format!("{}[{}]", scales(), index(t, i));
    format!(
        "({t}_tokens.size() <= {i} || {} < 0 || {significant} == \"\" ? 0 :\n\
         \x20{significant}.size() > 13 || int({significant}) > {MAX_MS} / {scale} ? {} :\n\
         \x20int({significant}) * {scale})",
        index(t, i),
        MAX_MS + 1
    )
}

/// The milliseconds of tokens 0 to `last`.
fn total_ms(t: &str, last: usize) -> String {
    let values: Vec<String> = (0..=last).map(|i| format!("{t}_values[{i}]")).collect();
    values.join(" + ")
}

/// [`duration::DurationError`]'s text for the first bad token of `var` (a list of one), or none.
fn errors_of(t: &str) -> String {
    let var = t;
    let shape = duration::SHAPE;
    let order = duration::ORDER;
    let per_token: Vec<String> = (0..TOKENS)
        .map(|i| {
            let before_unit = if i == 0 { String::new() } else { self::unit(t, i - 1) };
            let (digits, unit, token) = (digits(t, i), unit(t, i), format!("{t}_tokens[{i}]"));
            let order_check = if i == 0 {
                String::new()
            } else {
                let (this, before) = (index(t, i), index(t, i - 1));
                format!(
                    "{this} <= {before} ? ({this} == {before}\n\
                     \x20 ? \"unit \\\"\" + {unit} + \"\\\" appears twice; each unit may appear once, e.g. 1m30s\"\n\
                     \x20 : \"unit \\\"\" + {unit} + \"\\\" comes after \\\"\" + {} + \"\\\"; write units from largest to smallest ({order}), e.g. 1m30s\") :\n",
                    before_unit
                )
            };
            format!(
                "{t}_tokens.size() <= {i} ? \"\" :\n\
                 {unit}.startsWith(\".\") || ({digits} == \"\" && {token}.startsWith(\".\")) ? {} :\n\
                 {digits} == \"\" ? \"unit \\\"\" + {token} + \"\\\" has no number before it; {shape}\" :\n\
                 {unit} == \"\" ? \"\\\"\" + {digits} + \"\\\" has no unit; {shape}\" :\n\
                 {} < 0 ? \"unknown unit \\\"\" + {unit} + \"\\\"; Prometheus accepts {order}\" +\n\
                 \x20 ({unit} in [\"us\", \"µs\", \"μs\", \"ns\"] ? \" (1ms is the smallest duration)\" : {unit}.lowerAscii() in {} ? \" (units are lowercase)\" : \"\") :\n\
                 {order_check}\
                 {} > {MAX_MS} ? \"duration is too long; Prometheus allows at most 292 years\" : \"\"",
                lit("durations take whole numbers only; use a smaller unit, e.g. 1500ms instead of 1.5s"),
                index(t, i),
                units(),
                total_ms(t, i),
            )
        })
        .collect();
    let first = per_token
        .iter()
        .map(|e| format!("({e})"))
        .collect::<Vec<_>>()
        .join(",\n");
    format!(
        "{var} == \"0\" ? [] :\n\
         {var}.matches(r\"[\\t\\n\\v\\f\\r \\x{{85}}\\p{{Z}}]\") ? [\"duration contains whitespace; {shape}, without spaces\"] :\n\
         {var}.startsWith(\"+\") || {var}.startsWith(\"-\") ? [\"durations take no sign; {shape}\"] :\n\
         [{first}].filter(e, e != \"\")"
    )
}

/// The rule: both durations valid, the timeout no longer than the interval.
pub(super) fn rule() -> Rule {
    let field = |name: &str| format!("spec.monitoring.serviceMonitor.{name}");
    let message = |name: &str, var: &str, detail: &str| {
        format!(
            "{} + {} + \": \" + {detail}",
            lit(&format!("{}: Invalid value: ", field(name))),
            quoted(var)
        )
    };
    Rule {
        name: "prometheus_durations",
        covers: "Prometheus: serviceMonitor interval and scrapeTimeout are Prometheus durations, scrapeTimeout <= interval",
        cel: format!(
            "!$.sm ? [] :\n\
             ($.interval_error != \"\" ? [{}] : [])\n\
             + ($.timeout_error != \"\" ? [{}] : [])\n\
             + ($.interval_error == \"\" && $.timeout_error == \"\" && $.timeout_ms > $.interval_ms ? [{}] : [])",
            message("interval", "$.interval", "$.interval_error"),
            message("scrapeTimeout", "$.timeout", "$.timeout_error"),
            message(
                "scrapeTimeout",
                "$.timeout",
                "\"Prometheus drops a ServiceMonitor whose scrapeTimeout exceeds its interval (\" + $.interval + \"); use \" + $.interval + \" or less\""
            ),
        ),
        same_field: None,
    }
}
