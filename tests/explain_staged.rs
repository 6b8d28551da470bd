//! `npagent explain` with StagedNetworkPolicies: the staged verdict beside the enforced one,
//! from the library and from the binary (human and JSON). A staged default-deny, a staged edit
//! of an enforced policy (WouldDrop and WouldAllow), a staged policy that changes nothing.
//! Offline, from a manifests directory; no OVS needed.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::{self, IdAllocator};
use npagent::explain::staged::{StagedDifference, StagedExplanation};
use npagent::explain::{self, Explanation, Query};
use npagent::explain_command::staged_explanation;
use npagent::model::ObjectRef;
use npagent::snapshot;
use std::process::Command;

/// Namespace x and its pods a, b, c (labelled `app: <name>`) at 10.0.0.1, .2, .3.
fn cluster() -> String {
    let mut docs =
        vec!["apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {kubernetes.io/metadata.name: x}}\n"
            .to_string()];
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        docs.push(format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: x, labels: {{app: {name}}}}}\n\
             spec: {{nodeName: n1, containers: [{{name: c, image: i}}]}}\nstatus: {{phase: Running, podIP: 10.0.0.{}}}\n",
            i + 1
        ));
    }
    docs.join("---\n")
}

/// `x/allow-b` (enforced): a accepts b on TCP 80.
const ALLOW_B: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{from: [{podSelector: {matchLabels: {app: b}}}], ports: [{port: 80}]}]
"#;

/// A staged edit of `x/allow-b`: a would accept c instead of b.
const STAGED_ALLOW_C: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: allow-b, namespace: x}
spec:
  podSelector: {matchLabels: {app: a}}
  ingress: [{from: [{podSelector: {matchLabels: {app: c}}}], ports: [{port: 80}]}]
"#;

const STAGED_DENY_ALL: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: deny-all, namespace: x}
spec: {podSelector: {}, policyTypes: [Ingress]}
"#;

/// Selects no pod: changes nothing.
const STAGED_NOBODY: &str = r#"
apiVersion: policy.npagent.io/v1alpha1
kind: StagedNetworkPolicy
metadata: {name: nobody, namespace: x}
spec: {podSelector: {matchLabels: {app: nobody}}, policyTypes: [Ingress, Egress]}
"#;

fn dir(docs: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let text: Vec<String> = std::iter::once(cluster()).chain(docs.iter().map(|d| d.to_string())).collect();
    std::fs::write(dir.path().join("all.yaml"), text.join("\n---\n")).expect("write");
    dir
}

/// The enforced and the staged explanation of `from` -> `to` on TCP 80, every pod local.
fn ask(docs: &[&str], from: &str, to: &str) -> (Explanation, Option<StagedExplanation>) {
    let dir = dir(docs);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let source = npagent::agent::SourceConfig::Manifests(dir.path().to_path_buf());
    let mut store = rt.block_on(snapshot::load_store(&source, true)).unwrap_or_else(|e| panic!("{e:#}"));
    let pods: Vec<ObjectRef> = store.model().pods.keys().cloned().collect();
    let (ports, _) = explain::ports_with_stand_ins(store.model(), &pods.iter().collect::<Vec<_>>());
    store.set_ports(&ports);
    let cfg = compiler::Config::default();
    let compiler = compiler::compile(store.model(), cfg.clone(), IdAllocator::new(0), 0);
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
    let dir = dir(docs);
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
