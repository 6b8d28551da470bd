//! Replays every input of the `parse_message` fuzz corpus (`proto/fuzz/corpus/parse_message`)
//! through the fuzz target's own check, on stable Rust.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

#[path = "../fuzz/check.rs"]
mod check;

use std::path::Path;

#[test]
fn parse_message_corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse_message");
    let mut n = 0;
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("corpus entry").path();
        let data = std::fs::read(&path).expect("corpus file");
        if std::panic::catch_unwind(|| check::check(&data)).is_err() {
            failures.push(path.display().to_string());
        }
        n += 1;
    }
    assert!(failures.is_empty(), "corpus inputs failing the check: {failures:?}");
    // Seeded with every vector of tests/data/ofp-vectors.jsonl (files `vector-<name>`), the
    // FLOW_MODs OVS encodes for an ARP responder, VLAN matches, conntrack tuple matches and
    // ip_frag matches (`ovs-<name>`, as in tests/flow_vectors.rs, plus one carrying
    // NXAST_REG_MOVE), and what `cargo fuzz run` found (minimised with `cargo fuzz cmin`).
    assert!(n >= 91, "corpus has only {n} inputs");
    eprintln!("{n} corpus inputs replayed");
}
