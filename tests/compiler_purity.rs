//! The compiler stays pure: no runtime, logging, clock, file system, environment, threads or
//! hash-ordered containers in `src/compiler`, so the same model always compiles to the same
//! flows and the compiler can be tested and benchmarked without any of them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::path::{Path, PathBuf};

/// What the compiler must not name, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("tokio", "no runtime: the agent drives the compiler"),
    ("tracing", "no logging: the compiler returns what it found, the caller reports it"),
    ("Instant", "no clock: time is passed in"),
    ("SystemTime", "no clock: time is passed in"),
    ("std::fs", "no file system"),
    ("std::env", "no environment"),
    ("std::thread", "no threads"),
    ("HashMap", "no hash order: use BTreeMap, so output is deterministic"),
    ("HashSet", "no hash order: use BTreeSet, so output is deterministic"),
];

/// Lines of `source` (comments skipped) that name a forbidden item: (line number, item, why).
fn violations(source: &str) -> Vec<(usize, &'static str, &'static str)> {
    let mut found = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for &(item, why) in FORBIDDEN {
            let named = code.match_indices(item).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = code[at + item.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            });
            if named {
                found.push((i + 1, item, why));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_compiler_names_no_runtime_clock_io_or_hash_map() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/compiler");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    assert!(files.len() > 5, "found only {files:?} under {}", dir.display());
    let mut errors = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("read source");
        for (line, item, why) in violations(&source) {
            errors.push(format!("{}:{line}: `{item}` ({why})", file.display()));
        }
    }
    assert!(errors.is_empty(), "the compiler must stay pure:\n{}", errors.join("\n"));
}

#[test]
fn the_check_finds_what_it_forbids_and_skips_comments_and_longer_names() {
    let source =
        "use std::collections::HashMap;\n// tokio in a comment\nlet t = Instant::now();\nstruct MyHashMapLike;\n";
    let found: Vec<(usize, &str)> = violations(source).into_iter().map(|(l, i, _)| (l, i)).collect();
    assert_eq!(found, vec![(1, "HashMap"), (3, "Instant")]);
}
