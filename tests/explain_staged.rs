//! `npagent explain` with StagedNetworkPolicies: the staged verdict beside the enforced one,
//! from the library and from the binary (human and JSON). A staged default-deny, a staged edit
//! of an enforced policy (WouldDrop and WouldAllow), a staged policy that changes nothing.
//! Offline, from a manifests directory; no OVS needed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod staged_support;

use npagent::compiler;
use npagent::explain::staged::{StagedDifference, StagedExplanation};
use npagent::explain::{self, Explanation, Query};
use npagent::explain_command::staged_explanation;
use staged_support::{load, manifests, ALLOW_B, STAGED_ALLOW_C, STAGED_DENY_ALL};
use std::process::Command;

/// The pods' subnet.
const SUBNET: &str = "10.0.0";

/// Selects no pod: changes nothing.
const STAGED_NOBODY: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: nobody, namespace: x}
spec: {podSelector: {matchLabels: {app: nobody}}, policyTypes: [Ingress, Egress]}
"#;

/// The enforced and the staged explanation of `from` -> `to` on TCP 80, every pod local.
fn ask(docs: &[&str], from: &str, to: &str) -> (Explanation, Option<StagedExplanation>) {
    let dir = manifests(SUBNET, docs);
    let (store, compiler) = load(dir.path());
    let cfg = compiler::Config::default();
    let q = Query { from: from.parse().unwrap(), to: to.parse().unwrap(), port: Some("80/TCP".parse().unwrap()) };
    let enforced = explain::explain(store.model(), &compiler, &q).expect("explained");
    let staged = staged_explanation(store.model(), cfg, &q, &enforced).expect("staged explained");
    (enforced, staged)
}

fn causes(d: &StagedDifference) -> Vec<(String, Vec<String>, Vec<u32>)> {
    let (StagedDifference::WouldDrop(c) | StagedDifference::WouldAllow(c)) = d;
    c.iter()
        .map(|c| (c.direction.to_string(), c.policies.clone(), c.rules.iter().map(|r| r.rule_index).collect()))
        .collect()
}

#[test]
fn without_staged_policies_there_is_no_staged_verdict() {
    let (enforced, staged) = ask(&[ALLOW_B], "x/b", "x/a");
    assert!(enforced.allowed);
    assert_eq!(staged, None);
}

#[test]
fn a_staged_default_deny_would_drop_what_is_allowed_today() {
    let (enforced, staged) = ask(&[STAGED_DENY_ALL], "x/b", "x/a");
    assert!(enforced.allowed, "a staged policy enforces nothing: {enforced:?}");
    let staged = staged.expect("a staged verdict");
    assert!(!staged.allowed);
    assert_eq!(staged.staged_policies, ["x/deny-all"]);
    let d = staged.difference.expect("a difference");
    assert_eq!(d.as_str(), "WouldDrop");
    assert_eq!(causes(&d), [("Ingress".to_string(), vec!["x/deny-all".to_string()], vec![])]);
}

#[test]
fn a_staged_edit_would_drop_one_connection_and_allow_another() {
    let docs = [ALLOW_B, STAGED_ALLOW_C];
    // b -> a: allowed by x/allow-b today; its staged edit drops it.
    let (enforced, staged) = ask(&docs, "x/b", "x/a");
    assert!(enforced.allowed);
    let d = staged.expect("staged").difference.expect("a difference");
    assert_eq!(d.as_str(), "WouldDrop");
    assert_eq!(causes(&d), [("Ingress".to_string(), vec!["x/allow-b".to_string()], vec![])]);
    // c -> a: dropped today; the staged edit's rule 0 allows it.
    let (enforced, staged) = ask(&docs, "x/c", "x/a");
    assert!(!enforced.allowed);
    let staged = staged.expect("staged");
    assert!(staged.allowed);
    let d = staged.difference.expect("a difference");
    assert_eq!(d.as_str(), "WouldAllow");
    assert_eq!(causes(&d), [("Ingress".to_string(), vec!["x/allow-b".to_string()], vec![0])]);
}

#[test]
fn a_staged_policy_that_selects_nobody_changes_nothing() {
    for (from, to) in [("x/b", "x/a"), ("x/c", "x/a"), ("x/a", "x/b")] {
        let (enforced, staged) = ask(&[ALLOW_B, STAGED_NOBODY], from, to);
        let staged = staged.expect("staged");
        assert_eq!(staged.allowed, enforced.allowed, "{from} -> {to}");
        assert_eq!(staged.difference, None, "{from} -> {to}");
        assert_eq!((&staged.egress, &staged.ingress), (&enforced.egress, &enforced.ingress), "{from} -> {to}");
    }
}

fn run_binary(docs: &[&str], from: &str, to: &str, json: bool) -> (Option<i32>, String) {
    let dir = manifests(SUBNET, docs);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_npagent"));
    cmd.arg("explain").arg("--manifests").arg(dir.path()).args(["--from", from, "--to", to, "--port", "80/TCP"]);
    if json {
        cmd.args(["-o", "json"]);
    }
    let out = cmd.output().expect("run npagent explain");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn the_binary_prints_both_verdicts() {
    let docs = [ALLOW_B, STAGED_ALLOW_C];
    // The exit status is the enforced verdict's.
    let (code, out) = run_binary(&docs, "x/b", "x/a", false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.lines().next().unwrap_or_default().ends_with(": ALLOWED"), "{out}");
    assert!(out.contains("staged view (x/allow-b): DROPPED: WouldDrop"), "{out}");
    assert!(out.contains("ingress would drop, because of staged x/allow-b"), "{out}");
    let (code, out) = run_binary(&docs, "x/c", "x/a", false);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("staged view (x/allow-b): ALLOWED: WouldAllow"), "{out}");
    assert!(out.contains("ingress would allow, by staged x/allow-b ingress rule 0"), "{out}");

    let (code, out) = run_binary(&docs, "x/c", "x/a", true);
    assert_eq!(code, Some(1), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert_eq!(v["allowed"], false);
    assert_eq!(v["staged"]["allowed"], true);
    assert_eq!(v["staged"]["difference"]["disposition"], "WouldAllow");
    assert_eq!(v["staged"]["difference"]["causes"][0]["rules"][0]["policy"], "x/allow-b");
    // Without staged policies, no staged field and no staged line.
    let (_, out) = run_binary(&[ALLOW_B], "x/c", "x/a", true);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON");
    assert!(v.get("staged").is_none(), "{v}");
    let (_, out) = run_binary(&[ALLOW_B], "x/c", "x/a", false);
    assert!(!out.contains("staged"), "{out}");
}
