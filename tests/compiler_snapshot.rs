//! Snapshot of the compiled flow text for a small model, in `ovs-ofctl dump-flows --names`
//! syntax.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, flows_text, Config, IdAllocator};

#[test]
fn small_model_flow_text() {
    let c = compile(&small_model(), Config::default(), IdAllocator::new(60), 0);
    let text = flows_text(c.flows(), &c.port_names()).join("\n");
    let want = include_str!("compiler_snapshot.txt");
    if std::env::var_os("UPDATE_SNAPSHOT").is_some() {
        std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/compiler_snapshot.txt"), format!("{text}\n"))
            .unwrap();
        return;
    }
    assert_eq!(format!("{text}\n"), want);
}
