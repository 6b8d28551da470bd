//! `npagent explain --trace` on a live bridge: the testbed's nine pods on a real userspace OVS,
//! `npagent run` enforcing a few policies, and `explain --trace` for allowed and dropped
//! connections in both directions. Its exit status is the verdict, OVS's `ofproto/trace`
//! verdict equals explain's, and a model the bridge does not enforce is caught as a
//! disagreement (exit status 2).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::agent::{npagent_bin, Agent};
use support::{write_atomic, Testbed};

fn policy(dir: &Path, ns: &str, name: &str, spec: &str) {
    let text = format!("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n{spec}");
    write_atomic(&dir.join(format!("policy-{ns}-{name}.yaml")), &text);
}

/// `npagent explain --trace -o json` against the testbed's bridge, the model from `manifests`.
fn explain(tb: &Testbed, manifests: &Path, from: &str, to: &str, port: &str) -> (Option<i32>, Value, String) {
    let sb = &tb.sandbox;
    let out = support::node_env(&mut Command::new(npagent_bin()))
        .args(["explain", "--from", from, "--to", to, "--port", port, "-o", "json", "--trace"])
        .args(["--ofp", &sb.ofp, "--ovsdb", &sb.ovsdb])
        .arg("--ovs-appctl-target")
        .arg(sb.dir.join("vswitchd.ctl"))
        .arg("--manifests")
        .arg(manifests)
        .output()
        .expect("run npagent explain");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{from} -> {to} {port}: not JSON ({e}): {stdout}{stderr}"));
    (out.status.code(), v, stderr)
}

#[test]
fn trace_agrees_with_explain_on_a_live_bridge() {
    let tb = Testbed::start();
    let dir = tb.manifests_dir();
    // Ingress: x/a takes TCP 80 from x/b only. Egress: z/c sends only UDP 80 to namespace y.
    policy(&dir, "x", "a-from-b-80", "  podSelector:\n    matchLabels: {pod: a}\n  ingress:\n  - from:\n    - podSelector:\n        matchLabels: {pod: b}\n    ports:\n    - {protocol: TCP, port: 80}\n");
    policy(&dir, "z", "c-to-y-udp", "  podSelector:\n    matchLabels: {pod: c}\n  policyTypes: [Egress]\n  egress:\n  - to:\n    - namespaceSelector:\n        matchLabels: {ns: y}\n    ports:\n    - {protocol: UDP, port: 80}\n");
    let logs = tempfile::Builder::new().prefix("npa-explain-trace-").tempdir().expect("temp dir");
    let agent = Agent::start(&tb.sandbox, &dir, &logs.path().join("np.log"), &[]);
    // The agent has sent its first flows; they are on the bridge once a probe sees them.
    assert!(!tb.reaches("y/b", "x/a", support::Port::Tcp80), "the policies are enforced");

    // (from, to, port, allowed?, the direction that decides, its verdict)
    let cases = [
        ("x/b", "x/a", "80/TCP", true, "ingress", "allowed"),
        ("y/b", "x/a", "tcp/80", false, "ingress", "dropped"),
        ("x/b", "x/a", "tcp/81", false, "ingress", "dropped"),
        ("z/c", "y/a", "udp/80", true, "egress", "allowed"),
        ("z/c", "y/a", "80/TCP", false, "egress", "dropped"),
        ("z/c", "x/b", "udp/80", false, "egress", "dropped"),
        ("x/a", "z/a", "tcp/80", true, "egress", "not-isolated"),
    ];
    for (from, to, port, allowed, direction, verdict) in cases {
        let (code, v, stderr) = explain(&tb, &dir, from, to, port);
        let what = format!("{from} -> {to} {port}: {v}\n{stderr}");
        assert_eq!(code, Some(if allowed { 0 } else { 1 }), "{what}");
        assert_eq!(v["allowed"], allowed, "{what}");
        assert_eq!(v[direction]["verdict"], verdict, "{what}");
        assert_eq!(v["trace"]["allowed"], allowed, "OVS's verdict: {what}");
        assert_eq!(v["trace"]["agrees"], true, "{what}");
        assert!(v["compiled"].as_str().is_some_and(|c| c.contains("against the bridge")), "{what}");
        // Against the bridge, the conjunction ids are the bridge's.
        if verdict == "allowed" {
            let id = v[direction]["rules"][0]["conjunction_id"].as_u64().expect("conjunction id");
            let flows = tb.sandbox.ofctl(&["dump-flows"]);
            let on_bridge = flows.contains(&format!("conj_id={id},")) || flows.contains(&format!("conj_id={id} "));
            assert!(on_bridge, "conj_id={id} not on the bridge:\n{flows}");
        }
    }

    // A model the bridge does not enforce: explain drops y/b -> x/b, OVS delivers it.
    let other = tempfile::tempdir().expect("temp dir");
    for entry in std::fs::read_dir(&dir).expect("manifests dir") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, other.path().join(path.file_name().expect("name"))).expect("copy manifest");
    }
    policy(other.path(), "x", "deny-all", "  podSelector: {}\n");
    let (code, v, stderr) = explain(&tb, other.path(), "y/b", "x/b", "tcp/80");
    assert_eq!(code, Some(2), "{v}\n{stderr}");
    assert_eq!(
        (v["allowed"].as_bool(), v["trace"]["allowed"].as_bool(), v["trace"]["agrees"].as_bool()),
        (Some(false), Some(true), Some(false)),
        "{v}"
    );
    assert!(stderr.contains("DISAGREES"), "{stderr}");
    assert!(agent.stop().success());
}

/// (from, to, port, allowed?, the direction that decides, its verdict, its chain)
type Case<'a> = (&'a str, &'a str, &'a str, bool, &'a str, &'a str, &'a [&'a str]);

/// The README's worked ClusterNetworkPolicy example (testbed/examples): explain names the tier
/// and the rule that decided, the Pass rules on the way and the decision chain, and OVS agrees.
#[test]
fn trace_agrees_with_explain_across_the_tiers() {
    let tb = Testbed::start();
    let dir = tb.manifests_dir();
    for name in ["cnp-tenant-baseline-x", "cnp-admin-override", "allow-yb-to-xa-tcp80"] {
        let text = std::fs::read_to_string(support::sandbox::repo_path(&format!("testbed/examples/{name}.yaml")))
            .expect("read example");
        write_atomic(&dir.join(format!("{name}.yaml")), &text);
    }
    let logs = tempfile::Builder::new().prefix("npa-explain-trace-").tempdir().expect("temp dir");
    let agent = Agent::start(&tb.sandbox, &dir, &logs.path().join("np.log"), &[]);
    assert!(tb.reaches("z/a", "x/a", support::Port::Tcp80), "the Admin Accept is enforced");
    let pass = "Admin/Pass admin-override:y-to-x-by-network-policy";
    let cases: [Case; 6] = [
        ("z/a", "x/a", "tcp/80", true, "ingress", "decided-by-tier", &["Admin/Accept admin-override:monitoring"]),
        ("y/b", "x/a", "tcp/80", true, "ingress", "allowed", &[pass, "NetworkPolicy x/allow-yb-to-xa-tcp80"]),
        ("y/c", "x/a", "tcp/80", false, "ingress", "dropped", &[pass, "NetworkPolicy default drop"]),
        (
            "x/b",
            "x/c",
            "tcp/80",
            true,
            "ingress",
            "decided-by-tier",
            &["Baseline/Accept tenant-baseline-x:from-own-tenant"],
        ),
        (
            "y/a",
            "x/c",
            "tcp/80",
            false,
            "ingress",
            "decided-by-tier",
            &[pass, "Baseline/Deny tenant-baseline-x:from-other-tenants"],
        ),
        ("x/a", "z/b", "tcp/81", false, "egress", "decided-by-tier", &["Admin/Deny admin-override:no-tcp-81-into-z"]),
    ];
    for (from, to, port, allowed, direction, verdict, chain) in cases {
        let (code, v, stderr) = explain(&tb, &dir, from, to, port);
        let what = format!("{from} -> {to} {port}: {v}\n{stderr}");
        assert_eq!(code, Some(if allowed { 0 } else { 1 }), "{what}");
        assert_eq!(v[direction]["verdict"], verdict, "{what}");
        assert_eq!(v[direction]["chain"], serde_json::json!(chain), "{what}");
        assert_eq!(v["trace"]["allowed"], allowed, "OVS's verdict: {what}");
        assert_eq!(v["trace"]["agrees"], true, "{what}");
        if verdict == "decided-by-tier" {
            let id = v[direction]["rule"]["conjunction_id"].as_u64().expect("conjunction id");
            let flows = tb.sandbox.ofctl(&["dump-flows"]);
            let on_bridge = flows.contains(&format!("conj_id={id},")) || flows.contains(&format!("conj_id={id} "));
            assert!(on_bridge, "conj_id={id} not on the bridge:\n{flows}");
        }
    }
    assert!(agent.stop().success());
}

#[test]
fn cli_errors_exit_2_naming_the_culprit() {
    let manifests = Path::new(env!("CARGO_MANIFEST_DIR")).join("testbed/manifests");
    let m = manifests.to_string_lossy().into_owned();
    let bad_dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(bad_dir.path().join("broken.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: [\n").expect("write");
    let b = bad_dir.path().to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--manifests", &m, "--from", "x/nope", "--to", "x/a"], "unknown pod x/nope"),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "x/a", "--port", "80/icmp"], "80/icmp"),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "x/a", "--port", "70000"], "70000"),
        (vec!["--manifests", &m, "--from", "x", "--to", "x/a"], "\"x\""),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "x/a", "--port", "nope/TCP"], "named \"nope\""),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "10.99.0.1", "--port", "http"], "10.99.0.1 is not a pod"),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "fd00::1"], "no addresses of the same IP family"),
        (vec!["--manifests", "/nonexistent/npagent", "--from", "x/b", "--to", "x/a"], "/nonexistent/npagent"),
        (vec!["--manifests", &b, "--from", "x/b", "--to", "x/a"], "broken.yaml"),
        (vec!["--manifests", &m, "--from", "x/b", "--to", "x/a", "--trace"], "--trace needs the bridge"),
        (
            vec![
                "--manifests",
                &m,
                "--from",
                "x/b",
                "--to",
                "x/a",
                "--ofp",
                "unix:/nonexistent/ofp.sock",
                "--ovsdb",
                "unix:/nonexistent/db.sock",
            ],
            "/nonexistent/db.sock",
        ),
    ];
    for (args, culprit) in cases {
        let out = Command::new(npagent_bin()).arg("explain").args(&args).output().expect("run npagent explain");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(culprit), "{args:?}: stderr does not name {culprit:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
    }
}
