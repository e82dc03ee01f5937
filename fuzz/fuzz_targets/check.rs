//! `memcached-webhook check` on one manifest from standard input: YAML or a JSON stream. The
//! command must never panic and must exit 0, 1 or 2. Every object read must come back the same
//! from the YAML `check -o yaml` writes for it, and an object `check` admits must be admitted
//! again unchanged (the mutating webhook's defaults are complete after one pass).

#![no_main]

use libfuzzer_sys::fuzz_target;
use memcached_webhook::check::{self, Args, Output, input};
use memcached_webhook::yaml;

const FILE: &str = "<fuzz>";

fuzz_target!(|data: &[u8]| {
    let args = Args {
        output: Some(Output::Yaml),
        warnings_as_errors: false,
        report: check::Report::Text,
        allow_empty: false,
        inputs: vec!["-".into()],
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let status = check::run(&args, &mut &data[..], &mut stdout, &mut stderr);
    assert!(status <= check::UNREADABLE, "exit status {status}");

    let objects = match input::read(FILE, data.to_vec()).and_then(|t| input::objects(FILE, &t)) {
        Ok(objects) => objects,
        Err(e) => {
            assert!(!e.message.is_empty(), "unreadable without a reason");
            if let Some((line, column)) = e.at {
                assert!(line >= 1 && column >= 1, "position {line}:{column} of {e}");
            }
            return;
        }
    };
    for mut object in objects {
        let kind = object.value["kind"].as_str().unwrap_or("");
        // A List item that is itself a List would be opened when read back.
        let nested_list = kind.ends_with("List") && object.value.get("items").is_some();
        let mut text = String::new();
        yaml::write(&mut text, &object.value);
        if !nested_list {
            let back = input::objects(FILE, &text)
                .unwrap_or_else(|e| panic!("the written YAML does not read back: {e}\n{text}"));
            assert_eq!(
                back.len(),
                1,
                "one object written, read back as {back:?}\n{text}"
            );
            assert_eq!(back[0].value, object.value, "changed through YAML:\n{text}");
        }

        check::strip_server_fields(&mut object.value);
        if !check::is_memcached(&object.value) {
            continue;
        }
        let first = check::judge(&object.value);
        if !first.allowed {
            assert!(!first.violations.is_empty(), "denied without a reason");
            continue;
        }
        let second = check::judge(&first.object);
        assert!(
            second.allowed,
            "admitted, then denied once defaulted: {second:?}"
        );
        assert_eq!(
            second.object, first.object,
            "defaulting again changed the object"
        );
    }
});
