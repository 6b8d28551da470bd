//! Which policies a default drop is for, in the JSON audit log, with real packets: `npagent
//! run` on the testbed (nine pods, a real userspace OVS), traffic from inside the pods, and
//! the `isolated_by` of the np.log lines it leads to.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::agent::Agent;
use support::audit_log::{json_lines, wait_json_line};
use support::{write_atomic, Testbed};

const LOGGING_KEY: &str = "networkpolicy.antrea.io/enable-logging";

/// Namespaces x, y, z (label `ns: <name>`), audit logging on in x only.
fn namespaces(tb: &Testbed) {
    let mut text = String::new();
    for ns in ["x", "y", "z"] {
        text.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: {ns}\n  labels:\n    ns: {ns}\n"
        ));
        if ns == "x" {
            text.push_str(&format!("  annotations:\n    {LOGGING_KEY}: \"true\"\n"));
        }
    }
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), &text);
}

/// Writes one NetworkPolicy of namespace x, its `spec` given as YAML (indented by 2).
fn policy(tb: &Testbed, name: &str, spec: &str) {
    let text = format!("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: x\nspec:\n{spec}");
    write_atomic(&tb.manifests_dir().join(format!("policy-{name}.yaml")), &text);
}

/// Sends `n` UDP datagrams from pod `from` to `ip`:80, one socket (one source port) each
/// call.
fn udp(tb: &Testbed, from: &str, ip: &str, n: u32) {
    let script = "import socket,sys\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\nfor _ in range(int(sys.argv[2])): s.sendto(b'npagent-e2e',(sys.argv[1],80))";
    let pod = tb.pod(from);
    let out = Command::new("ip")
        .args(["netns", "exec", &pod.netns, "/usr/bin/python3", "-c", script, ip, &n.to_string()])
        .output()
        .expect("run python3 in the pod");
    assert!(out.status.success(), "udp from {from}: {}", String::from_utf8_lossy(&out.stderr));
}

fn names(v: &Value) -> Vec<String> {
    v["isolated_by"]
        .as_array()
        .unwrap_or_else(|| panic!("no isolated_by array in {v}"))
        .iter()
        .map(|p| format!("{}/{}", p["namespace"].as_str().unwrap_or("?"), p["name"].as_str().unwrap_or("?")))
        .collect()
}

fn is_drop_to(v: &Value, direction: &str, ip: &str) -> bool {
    v["disposition"] == "Drop" && v["direction"] == direction && v["destination"]["ip"] == ip
}

#[test]
fn default_drops_name_the_isolating_policies_of_their_direction() {
    let tb = Testbed::start();
    namespaces(&tb);
    let (xa, xb, ya) = (tb.pod("x/a"), tb.pod("x/b"), tb.pod("y/a"));
    // Two policies isolate x/a for ingress (written in the order that is not the sorted one);
    // zz-deny-ingress isolates x/b for ingress too, egress-b-none isolates x/b for egress.
    policy(&tb, "zz-deny-ingress", "  podSelector: {}\n  policyTypes: [Ingress]\n");
    policy(&tb, "aa-allow-y-81", "  podSelector:\n    matchLabels: {pod: a}\n  ingress:\n  - from:\n    - namespaceSelector:\n        matchLabels: {ns: y}\n    ports:\n    - {protocol: TCP, port: 81}\n");
    policy(&tb, "egress-b-none", "  podSelector:\n    matchLabels: {pod: b}\n  policyTypes: [Egress]\n");
    let logs = tempfile::Builder::new().prefix("npa-e2e-isolation-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &["--audit-format", "json"]);

    // Ingress drop into x/a: both of its isolating policies, sorted.
    udp(&tb, "y/a", &xa.ip, 3);
    let drop =
        wait_json_line(&np_log, 0, Duration::from_secs(5), "ingress drop to x/a", |v| is_drop_to(v, "Ingress", &xa.ip));
    assert_eq!(drop["table"], "IngressDefaultRule");
    assert_eq!(drop["policy"], json!({"kind": "K8sNetworkPolicy", "namespace": null, "name": null}));
    assert_eq!(names(&drop), ["x/aa-allow-y-81", "x/zz-deny-ingress"], "{drop}");

    // Egress drop from x/b: only its egress isolation, not the ingress policy that selects it.
    udp(&tb, "x/b", &ya.ip, 2);
    let drop =
        wait_json_line(&np_log, 0, Duration::from_secs(5), "egress drop from x/b", |v| is_drop_to(v, "Egress", &ya.ip));
    assert_eq!(drop["source"]["ip"], xb.ip.as_str());
    assert_eq!(names(&drop), ["x/egress-b-none"], "{drop}");

    // An allowed connection's line has no isolated_by.
    assert!(tb.reaches("y/a", "x/a", support::Port::Tcp81));
    let allow = wait_json_line(&np_log, 0, Duration::from_secs(5), "allow to x/a:81", |v| v["disposition"] == "Allow");
    assert_eq!(allow["policy"]["name"], "aa-allow-y-81");
    assert!(allow.get("isolated_by").is_none(), "{allow}");

    // Without zz-deny-ingress, x/a's drops name only aa-allow-y-81: resolved at the time of
    // the packet. New sockets until the agent has converged (each is a new 5-tuple).
    std::fs::remove_file(tb.manifests_dir().join("policy-zz-deny-ingress.yaml")).expect("delete policy");
    let seen = json_lines(&np_log).len();
    let start = Instant::now();
    let after = loop {
        udp(&tb, "y/a", &xa.ip, 1);
        std::thread::sleep(Duration::from_millis(300));
        let found = json_lines(&np_log)
            .into_iter()
            .skip(seen)
            .filter(|v| is_drop_to(v, "Ingress", &xa.ip))
            .find(|v| names(v).len() == 1);
        if let Some(v) = found {
            break v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no drop naming one policy after the deletion:\n{:#?}",
            json_lines(&np_log)
        );
    };
    assert_eq!(names(&after), ["x/aa-allow-y-81"], "{after}");
    // And x/b, no longer isolated for ingress, takes UDP from y/a.
    assert!(tb.reaches("y/a", "x/b", support::Port::Udp80));
    assert!(agent.stop().success());
}

#[test]
fn an_annotated_policy_logs_its_own_allows_and_drops_with_its_label() {
    let tb = Testbed::start();
    namespaces(&tb);
    let (ya, yb) = (tb.pod("y/a"), tb.pod("y/b"));
    // Namespace y is not annotated. logged-allow asks for logging itself, with a label;
    // quiet-deny does not.
    let write = |name: &str, annotations: &str, spec: &str| {
        let text = format!("apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: {name}\n  namespace: y\n{annotations}spec:\n{spec}");
        write_atomic(&tb.manifests_dir().join(format!("policy-y-{name}.yaml")), &text);
    };
    write(
        "logged-allow",
        &format!("  annotations:\n    {LOGGING_KEY}: \"true\"\n    networkpolicy.antrea.io/log-label: y-audit\n"),
        "  podSelector:\n    matchLabels: {pod: a}\n  ingress:\n  - from:\n    - namespaceSelector:\n        matchLabels: {ns: x}\n    ports:\n    - {protocol: TCP, port: 80}\n",
    );
    write("quiet-deny", "", "  podSelector:\n    matchLabels: {pod: b}\n  policyTypes: [Ingress]\n");
    let logs = tempfile::Builder::new().prefix("npa-e2e-policy-logging-").tempdir().expect("temp dir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &np_log, &[]);

    assert!(tb.reaches("x/b", "y/a", support::Port::Tcp80), "logged-allow lets x/b in");
    udp(&tb, "x/b", &ya.ip, 2);
    udp(&tb, "x/b", &yb.ip, 2);
    assert!(!tb.reaches("x/b", "y/b", support::Port::Tcp80), "quiet-deny isolates y/b");
    let antrea = |path: &Path| -> Vec<Vec<String>> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').map(str::to_string).collect())
            .collect()
    };
    let start = Instant::now();
    while antrea(&np_log).len() < 2 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1_500)); // any further line would be written by now
    assert!(agent.stop().success());
    let lines = antrea(&np_log);
    let text = std::fs::read_to_string(&np_log).unwrap_or_default();
    // Antrea's fields after the timestamp: table policy rule direction disposition priority
    // appliedTo srcIP srcPort dstIP dstPort protocol length logLabel.
    let allow = lines
        .iter()
        .find(|f| f.get(6).map(String::as_str) == Some("Allow"))
        .unwrap_or_else(|| panic!("no Allow line:\n{text}"));
    assert_eq!(
        &allow[2..9],
        ["IngressRule", "K8sNetworkPolicy:y/logged-allow", "<nil>", "Ingress", "Allow", "190", "y/a"],
        "{text}"
    );
    assert_eq!(
        (allow[11].as_str(), allow[12].as_str(), allow[15].as_str()),
        (ya.ip.as_str(), "80", "y-audit"),
        "the label is Antrea's logLabel field:\n{text}"
    );
    // The pod logged-allow isolates logs its default drops (they are that policy's doing).
    let drop = lines
        .iter()
        .find(|f| f.get(6).map(String::as_str) == Some("Drop"))
        .unwrap_or_else(|| panic!("no Drop line:\n{text}"));
    assert_eq!(
        &drop[2..9],
        ["IngressDefaultRule", "K8sNetworkPolicy", "<nil>", "Ingress", "Drop", "<nil>", "y/a"],
        "{text}"
    );
    assert_eq!((drop[11].as_str(), drop[15].as_str()), (ya.ip.as_str(), "<nil>"), "{text}");
    // y/b, isolated only by a policy that does not ask, logs nothing.
    assert!(!text.contains(&yb.ip), "y/b's drops are not logged:\n{text}");
    assert!(
        lines.iter().all(|f| f.get(11) == Some(&ya.ip)),
        "every line is about y/a (the prober tries other ports too):\n{text}"
    );
}
