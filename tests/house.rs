//! The house rules a newcomer relies on, checked so that they stay true (issue 35): no file
//! under src/ over 500 lines, and no tests file (`tests.rs`, or any file in a `tests/` folder)
//! over 900 (it may hold a large table whole). Function length is clippy's (`clippy.toml`).
//! Read from the source tree, no server started.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 500;
const MAX_TEST_LINES: usize = 900;

/// Every `.rs` file below `dir`, recursively.
fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

/// Whether `path` (relative to src/) holds tests: a `tests.rs`, or a file in a `tests/` folder.
fn is_tests(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "tests.rs")
        || path
            .parent()
            .is_some_and(|p| p.iter().any(|c| c == "tests"))
}

/// The files over their limit, as `path: N lines (limit L)`.
fn oversized(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut over = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = text.lines().count();
        let relative = file.strip_prefix(src).unwrap();
        let limit = if is_tests(relative) {
            MAX_TEST_LINES
        } else {
            MAX_LINES
        };
        if lines > limit {
            over.push(format!(
                "src/{}: {lines} lines (limit {limit})",
                relative.display()
            ));
        }
    }
    over
}

#[test]
fn no_file_under_src_is_over_its_line_limit() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let over = oversized(&src);
    assert!(
        over.is_empty(),
        "split these by job (docs/design.md's layout table says where each job lives):\n{}",
        over.join("\n")
    );
}

#[test]
fn the_limits_tell_tests_files_apart() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, lines: usize| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "x\n".repeat(lines)).unwrap();
    };
    write("small.rs", MAX_LINES);
    write("big.rs", MAX_LINES + 1);
    write("a/tests.rs", MAX_TEST_LINES);
    write("a/tests/b.rs", MAX_TEST_LINES + 1);
    write("b/tests.rs", MAX_LINES + 1);
    write("notes.txt", MAX_TEST_LINES + 1);
    assert_eq!(
        oversized(dir.path()),
        [
            "src/a/tests/b.rs: 901 lines (limit 900)",
            "src/big.rs: 501 lines (limit 500)",
        ]
    );
}
