//! Images (`spec.image`, `spec.monitoring.exporterImage`) as CEL: [`image::check`] step by step
//! (the digest and tag split, the kubelet's registry split, the reference grammar as regexes,
//! the normalized length, go-digest's algorithms), with its messages.

use super::{Rule, lit};
use crate::memcached::image;

/// Rust's `char::is_whitespace` as an RE2 class.
pub(super) const WHITESPACE: &str = r"[\t\n\v\f\r \x{85}\p{Z}]";
const DOMAIN: &str = r"^(\[[0-9a-fA-F:]+\](:[0-9]+)?|[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?)$";
const COMPONENT: &str = r"^[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*$";

/// A CEL raw string literal (the regexes hold backslashes).
fn raw(s: &str) -> String {
    format!("r\"{s}\"")
}

/// The variables of one image, `p` its prefix (`image` or `exporter`), `set` and `text` CEL for
/// whether it is set and its value.
fn settings_of(p: &str, set: String, text: String) -> Vec<(String, String)> {
    let v = |name: &str| format!("$.{p}_{name}");
    let [
        s,
        rest,
        slash,
        tail,
        tagged,
        name,
        first,
        host,
        path,
        domain,
    ] = [
        "s", "rest", "slash", "tail", "tagged", "name", "first", "host", "path", "domain",
    ]
    .map(v);
    let steps = [
        ("set", set),
        ("s", text),
        (
            "rest",
            format!("{s}.contains(\"@\") ? {s}.substring(0, {s}.indexOf(\"@\")) : {s}"),
        ),
        (
            "digest",
            format!("{s}.contains(\"@\") ? {s}.substring({s}.indexOf(\"@\") + 1) : \"\""),
        ),
        ("slash", format!("{rest}.lastIndexOf(\"/\") + 1")),
        ("tail", format!("{rest}.substring({slash})")),
        ("tagged", format!("{tail}.contains(\":\")")),
        (
            "name",
            format!("{tagged} ? {rest}.substring(0, {slash} + {tail}.indexOf(\":\")) : {rest}"),
        ),
        (
            "tag",
            format!("{tagged} ? {tail}.substring({tail}.indexOf(\":\") + 1) : \"\""),
        ),
        ("first", format!("{name}.split(\"/\")[0]")),
        (
            "host",
            format!(
                "{name}.contains(\"/\") && ({first}.contains(\".\") || {first}.contains(\":\") || {first} == \"localhost\" || {first}.lowerAscii() != {first})"
            ),
        ),
        (
            "path",
            format!("{host} ? {name}.substring({first}.size() + 1) : {name}"),
        ),
        ("grammar", grammar(&v)),
        (
            "domain",
            format!("!{host} || {first} == \"index.docker.io\" ? \"docker.io\" : {first}"),
        ),
        (
            "normalized",
            format!(
                "{domain}.size() + 1 + ({domain} == \"docker.io\" && !{path}.contains(\"/\") ? 8 : 0) + {path}.size()"
            ),
        ),
        ("detail", detail(p)),
    ];
    steps
        .into_iter()
        .map(|(name, cel)| (format!("{p}_{name}"), cel))
        .collect()
}

/// The reference grammar: a registry host and path components, or path components alone.
fn grammar(v: &dyn Fn(&str) -> String) -> String {
    let (name, first) = (v("name"), v("first"));
    let components =
        |list: &str| format!("{list}.split(\"/\").all(c, c.matches({}))", raw(COMPONENT));
    let path = format!("{name}.substring({first}.size() + 1)");
    format!(
        "({name}.contains(\"/\") && {first}.matches({}) && {}) || {}",
        raw(DOMAIN),
        components(&path),
        components(&name)
    )
}

/// [`image::ImageError`]'s text for the first problem, or "" (`Empty` is reported apart).
fn detail(p: &str) -> String {
    let v = |name: &str| format!("$.{p}_{name}");
    let (s, name, path, first, tag, digest) = (
        v("s"),
        v("name"),
        v("path"),
        v("first"),
        v("tag"),
        v("digest"),
    );
    let algorithm = format!("{digest}.split(\":\")[0]");
    let hex = format!("{digest}.substring({digest}.indexOf(\":\") + 1)");
    let want = format!("({algorithm} == \"sha256\" ? 64 : {algorithm} == \"sha384\" ? 96 : 128)");
    let ws = raw(&format!("^{WHITESPACE}|{WHITESPACE}$"));
    format!(
        "{s}.matches({ws}) ? \"surrounding whitespace in the image; remove it\" :\n\
         {s}.matches(\"^[0-9a-f]{{64}}$\") ? \"a bare 64-character hex string is an image ID, not a repository; write e.g. memcached@sha256:<hex>\" :\n\
         {name} == \"\" ? \"no repository name before the tag or digest\" :\n\
         {name}.startsWith(\"/\") || {name}.endsWith(\"/\") || {name}.contains(\"//\") ? \"empty component in the repository name (a leading, trailing or double \\\"/\\\")\" :\n\
         {path}.lowerAscii() != {path} ? \"uppercase letters in the repository name \\\"\" + {path} + \"\\\"; repository names must be lowercase\" :\n\
         !{grammar} ? ({host} && !{first}.matches({domain})\n\
         \x20 ? \"invalid registry host \\\"\" + {first} + \"\\\"; use letters, digits, dots and dashes, an optional :port, or [ipv6]\"\n\
         \x20 : \"invalid repository name component \\\"\" + ({path}.split(\"/\").exists(c, !c.matches({component})) ? {path}.split(\"/\").filter(c, !c.matches({component}))[0] : {path}) + \"\\\"; use lowercase letters and digits, separated by \\\".\\\", \\\"_\\\", \\\"__\\\" or dashes\") :\n\
         {normalized} > {max_name} ? \"repository name is \" + string({normalized}) + \" characters once normalized; at most {max_name}\" :\n\
         {tagged} && {tag} == \"\" ? \"invalid tag \\\"\\\": is empty; write a tag after the \\\":\\\" (e.g. memcached:1.6) or drop it\" :\n\
         {tagged} && {tag}.size() > {max_tag} ? \"invalid tag \\\"\" + {tag} + \"\\\": is \" + string({tag}.size()) + \" characters long; at most {max_tag}\" :\n\
         {tagged} && !{tag}.matches(\"^[A-Za-z0-9_]\") ? \"invalid tag \\\"\" + {tag} + \"\\\": must start with a letter, a digit or \\\"_\\\"\" :\n\
         {tagged} && !{tag}.matches(\"^[A-Za-z0-9_.-]*$\") ? \"invalid tag \\\"\" + {tag} + \"\\\": may contain only letters, digits, \\\"_\\\", \\\".\\\" and \\\"-\\\"\" :\n\
         !{s}.contains(\"@\") ? \"\" :\n\
         !{digest}.contains(\":\") ? \"invalid digest \\\"\" + {digest} + \"\\\": must be <algorithm>:<hex>, e.g. sha256: and 64 hex characters\" :\n\
         !({algorithm} in [\"sha256\", \"sha384\", \"sha512\"]) ? \"invalid digest \\\"\" + {digest} + \"\\\": unsupported algorithm \\\"\" + {algorithm} + \"\\\"; use sha256 (or sha384, sha512)\" :\n\
         {hex}.size() != {want} ? \"invalid digest \\\"\" + {digest} + \"\\\": \" + {algorithm} + \" needs exactly \" + string({want}) + \" hex characters, found \" + string({hex}.size()) :\n\
         !{hex}.matches(\"^[0-9a-f]*$\") ? \"invalid digest \\\"\" + {digest} + \"\\\": the hex part may contain only 0-9 and lowercase a-f\" : \"\"",
        grammar = v("grammar"),
        host = v("host"),
        domain = raw(DOMAIN),
        component = raw(COMPONENT),
        normalized = v("normalized"),
        tagged = v("tagged"),
        max_name = image::MAX_NAME,
        max_tag = image::MAX_TAG,
    )
}

pub(super) fn settings() -> Vec<(String, String)> {
    let mut settings = settings_of(
        "image",
        "$o.?spec.?image.hasValue()".to_owned(),
        "$o.?spec.?image.orValue(\"\")".to_owned(),
    );
    settings.extend(settings_of(
        "exporter",
        "$o.?spec.?monitoring.?exporterImage.hasValue()".to_owned(),
        "$o.?spec.?monitoring.?exporterImage.orValue(\"\")".to_owned(),
    ));
    settings
}

pub(super) fn rule() -> Rule {
    let check = |p: &str, field: &str| {
        format!(
            "(!$.{p}_set ? [] : $.{p}_s == \"\" ? [{}] :\n\
             \x20$.{p}_detail != \"\" ? [{} + $.{p}_s + \"\\\": \" + $.{p}_detail] : [])",
            lit(&format!(
                "{field}: Required value: {}",
                image::ImageError::Empty
            )),
            lit(&format!("{field}: Invalid value: \""))
        )
    };
    Rule {
        name: "images",
        covers: "images: spec.image and spec.monitoring.exporterImage are references the kubelet can pull",
        cel: format!(
            "{}\n+ {}",
            check("image", "spec.image"),
            check("exporter", "spec.monitoring.exporterImage")
        ),
        same_field: None,
    }
}
