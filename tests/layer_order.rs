//! The layers keep their order: a module of `src/` names (`crate::…`) only modules of its own
//! layer or of the layers below it. The order is written once, in the layer table of
//! `docs/architecture.md` (lowest first, after the proto crate); this test reads it there, so
//! the docs and the code cannot drift apart, and a file of `src/` that no row names fails too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use std::path::{Path, PathBuf};

/// One row of the table: its layer's name and the top-level entries of `src/` it holds (a
/// folder `model` or a file `cli.rs`), by module name.
struct Layer {
    name: String,
    modules: Vec<String>,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rows of the layer table of docs/architecture.md whose `where` names `src/` entries, in
/// order.
fn layers() -> Vec<Layer> {
    let doc = std::fs::read_to_string(repo().join("docs/architecture.md")).expect("docs/architecture.md");
    let table = doc.split("| layer | where | job |").nth(1).expect("the layer table");
    let mut out = Vec::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (name, place) = (cells[1], cells[2]);
        let modules: Vec<String> = place
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|p| p.strip_prefix("src/"))
            .map(|p| p.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .collect();
        if !modules.is_empty() {
            out.push(Layer { name: name.to_string(), modules });
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/model/convert.rs` → `model`).
fn top_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component").as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules `source` names as `crate::<module>`, with the line, comments skipped.
fn crate_paths(source: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let code = line.split("//").next().unwrap_or_default();
        for (at, _) in code.match_indices("crate::") {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let name: String =
                code[at + "crate::".len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.push((i + 1, name));
            }
        }
    }
    out
}

#[test]
fn no_module_names_a_layer_above_its_own() {
    let layers = layers();
    assert!(layers.len() >= 5, "the layer table of docs/architecture.md was not found or lost rows");
    let rank = |module: &str| layers.iter().position(|l| l.modules.iter().any(|m| m == module));
    let src = repo().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let own = top_module(&src, file);
        let Some(own_rank) = rank(&own) else {
            problems.push(format!("{}: src/{own} is in no row of the layer table", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read source");
        for (line, used) in crate_paths(&text) {
            match rank(&used) {
                Some(r) if r > own_rank => problems.push(format!(
                    "{}:{line}: {} ({own}) names crate::{used}, of the higher layer {}",
                    file.strip_prefix(repo()).unwrap_or(file).display(),
                    layers[own_rank].name,
                    layers[r].name
                )),
                Some(_) => {}
                None => {
                    problems.push(format!("{}:{line}: crate::{used} is in no row of the layer table", file.display()))
                }
            }
        }
    }
    assert!(problems.is_empty(), "layer order broken (docs/architecture.md has the order):\n{}", problems.join("\n"));
}

#[test]
fn the_checker_sees_paths_and_skips_comments() {
    let found = crate_paths(
        "use crate::model::Cidr;\n//! [`crate::agent`]\nlet x = crate::audit::gap::Gap; // crate::admin\nnot_crate::switch",
    );
    assert_eq!(found, vec![(1, "model".to_string()), (3, "audit".to_string())]);
}
