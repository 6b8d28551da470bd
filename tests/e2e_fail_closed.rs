//! Bad input never opens what was closed, on a running npagent (manifests mode) and a real
//! switch: a policy edited into an invalid one keeps its last good version; one that never
//! was valid isolates its pods; a finished pod holding a peer's IP allows nothing and names
//! nobody in the audit log; oversized and alias-bomb files are refused while enforcement goes
//! on. Verdicts from `ofproto/trace`, each phase confirmed with real packets. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::path::Path;
use std::time::{Duration, Instant};

use harness::Check;
use scenario::Proto;
use support::agent::Agent;
use support::audit_log::{json_lines, wait_json_line};
use support::policy::{allow_ingress, ingress_from_pod, network_policy, pod_selector};
use support::{write_atomic, Testbed, NAMESPACES_X_LOGGING};

/// How long a change may take to show in the flows here (generous: no timing is measured).
const CONVERGE: Duration = Duration::from_secs(10);

/// npagent on a testbed's manifests.
type Bed = harness::Enforcing;

impl Bed {
    /// A testbed with npagent on its manifests (and `extra` arguments), pipeline installed.
    fn start(extra: &[&str]) -> Bed {
        let mut bed = Bed::launch(false, &[], |tb| harness::spawn_agent(tb, extra));
        bed.converges("pipeline installed", &[("y/a", "x/a", Proto::Tcp, 80, true)]);
        bed
    }

    /// Waits for the trace verdicts to hold, then confirms them with real packets.
    fn converges(&mut self, what: &str, checks: &[Check]) {
        self.enforces(what, checks, CONVERGE);
    }

    /// The checks still hold after everything written so far was handled, by trace and by
    /// real packets (for a state that must not change). Handled means: a marker written
    /// after it, a policy isolating y/c, took effect (the watcher reads in order); the marker
    /// is removed again afterwards.
    fn holds(&mut self, what: &str, checks: &[Check]) {
        let marker = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: marker, namespace: y}\n\
                      spec: {podSelector: {matchLabels: {pod: c}}}\n";
        self.write_manifest("zz-marker.yaml", marker);
        self.converges(&format!("{what}: marker"), &[("x/b", "y/c", Proto::Tcp, 81, false)]);
        self.remove_manifest("zz-marker.yaml");
        self.converges(&format!("{what}: marker removed"), &[("x/b", "y/c", Proto::Tcp, 81, true)]);
        assert!(self.agent.alive(), "{what}: npagent died:\n{}", self.agent.log_tail(30));
        let wrong = self.wrong_verdicts(checks);
        assert!(wrong.is_empty(), "{what}:\n  {}\nagent log:\n{}", wrong.join("\n  "), self.agent.log_tail(30));
        self.confirm(what, checks);
    }

    /// Waits for a line of the agent's log holding every one of `needles`; returns it.
    fn logged(&mut self, needles: &[&str]) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.agent.log_text().lines().find(|l| needles.iter().all(|n| l.contains(n))) {
                return l.to_owned();
            }
            assert!(self.agent.alive(), "npagent died:\n{}", self.agent.log_tail(30));
            assert!(
                start.elapsed() < CONVERGE,
                "npagent logged no line with {needles:?}:\n{}",
                self.agent.log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// x/a isolated, TCP 80 allowed from x/b's address only.
fn cidr_policy() -> String {
    let from_xb =
        "  ingress:\n  - from:\n    - ipBlock: {cidr: 10.10.1.12/32}\n    ports: [{protocol: TCP, port: 80}]\n";
    network_policy("x", "from-xb-cidr", &pod_selector("a"), from_xb)
}

/// x/a isolated (selected by an expression), TCP 80 allowed from x/b.
fn selector_policy() -> String {
    let selects_a = "{matchExpressions: [{key: pod, operator: In, values: [a]}]}";
    network_policy("x", "from-xb-selector", selects_a, &ingress_from_pod("b", &[("TCP", 80)]))
}

const ONLY_XB: &[Check] = &[
    ("x/b", "x/a", Proto::Tcp, 80, true),
    ("y/a", "x/a", Proto::Tcp, 80, false),
    ("x/c", "x/a", Proto::Tcp, 80, false),
    ("x/b", "x/a", Proto::Tcp, 81, false),
    ("y/a", "y/b", Proto::Tcp, 80, true),
];

#[test]
fn an_edit_that_makes_a_policy_invalid_keeps_its_last_good_version() {
    let mut bed = Bed::start(&[]);

    bed.write_manifest("fc-cidr.yaml", &cidr_policy());
    bed.converges("cidr policy", ONLY_XB);
    bed.write_manifest("fc-cidr.yaml", &cidr_policy().replace("10.10.1.12/32", "10.10.1.12/33"));
    bed.holds("cidr edited to /33", ONLY_XB);
    let line = bed.logged(&["NetworkPolicy x/from-xb-cidr", "10.10.1.12/33", "last good version", "stays in force"]);
    eprintln!("warned: {line}");
    assert!(line.contains("WARN"), "{line}");

    // Fixed to another valid version: that one applies (x/c instead of x/b).
    bed.write_manifest("fc-cidr.yaml", &cidr_policy().replace("10.10.1.12/32", "10.10.1.13/32"));
    bed.converges(
        "cidr fixed",
        &[
            ("x/c", "x/a", Proto::Tcp, 80, true),
            ("x/b", "x/a", Proto::Tcp, 80, false),
            ("y/a", "x/a", Proto::Tcp, 80, false),
        ],
    );
    bed.remove_manifest("fc-cidr.yaml");
    bed.converges("cidr policy deleted", &[("y/a", "x/a", Proto::Tcp, 80, true)]);

    bed.write_manifest("fc-selector.yaml", &selector_policy());
    bed.converges("selector policy", ONLY_XB);
    bed.write_manifest("fc-selector.yaml", &selector_policy().replace("operator: In", "operator: Bogus"));
    bed.holds("selector operator edited to Bogus", ONLY_XB);
    bed.logged(&["NetworkPolicy x/from-xb-selector", "Bogus", "last good version", "stays in force"]);

    // Deleting the invalid object removes its kept version.
    bed.remove_manifest("fc-selector.yaml");
    bed.converges(
        "invalid policy deleted",
        &[("y/a", "x/a", Proto::Tcp, 80, true), ("x/c", "x/a", Proto::Tcp, 80, true)],
    );
}

#[test]
fn a_policy_that_never_was_valid_isolates_its_pods() {
    let mut bed = Bed::start(&[]);

    bed.write_manifest(
        "never-valid.yaml",
        r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: y, name: never-valid}
spec:
  podSelector:
    matchLabels: {pod: b}
  ingress:
  - from:
    - ipBlock: {cidr: 10.10.1.12/33}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: mistyped}
spec:
  podSelector:
    matchLabels: {pod: c}
  ingress: 5
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: z, name: unreadable}
spec:
  podSelector:
    matchExpressions:
    - {key: pod, operator: Bogus, values: [c]}
"#,
    );
    bed.converges(
        "never-valid policy fails closed",
        &[
            ("x/b", "y/b", Proto::Tcp, 80, false),
            ("y/a", "y/b", Proto::Tcp, 81, false),
            ("y/a", "x/c", Proto::Tcp, 80, false),
            ("x/a", "x/c", Proto::Tcp, 81, false),
            ("y/a", "y/c", Proto::Tcp, 80, true),
            // Isolated in the direction it declares (policyTypes defaulted to Ingress): y/b
            // still sends.
            ("y/b", "y/a", Proto::Tcp, 80, true),
            ("y/c", "y/a", Proto::Tcp, 80, true),
            // A spec that could not be read at all: isolated in both directions.
            ("x/c", "x/a", Proto::Tcp, 80, false),
        ],
    );
    let line = bed.logged(&["NetworkPolicy y/never-valid", "never was valid", "fails closed", "isolated"]);
    assert!(line.contains("WARN"), "{line}");
    bed.logged(&["NetworkPolicy x/mistyped", "invalid type", "fails closed"]);
    let line = bed.logged(&["NetworkPolicy z/unreadable", "cannot be read: ignored"]);
    assert!(line.contains("ERROR"), "{line}");
    bed.holds(
        "an unreadable podSelector isolates nothing",
        &[("x/a", "z/c", Proto::Tcp, 80, true), ("z/a", "z/c", Proto::Tcp, 80, true)],
    );

    bed.remove_manifest("never-valid.yaml");
    bed.converges(
        "deleted",
        &[
            ("x/b", "y/b", Proto::Tcp, 80, true),
            ("y/a", "y/b", Proto::Tcp, 81, true),
            ("y/a", "x/c", Proto::Tcp, 80, true),
        ],
    );
}

/// A pod manifest of x/gone holding y/a's address, in phase `phase`.
fn gone_pod(phase: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: gone\n  namespace: x\n  labels: {{pod: gone}}\n\
         spec:\n  nodeName: elsewhere\n  containers: [{{name: c, image: i}}]\n\
         status:\n  phase: {phase}\n  podIP: 10.10.2.11\n  podIPs: [{{ip: 10.10.2.11}}]\n"
    )
}

/// The audit log's JSON lines whose source is `ip`.
fn lines_from(np_log: &Path, ip: &str) -> Vec<serde_json::Value> {
    json_lines(np_log).into_iter().filter(|v| v["source"]["ip"] == ip).collect()
}

#[test]
fn a_finished_pod_holding_a_peers_ip_allows_nothing_and_names_nobody() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("namespaces.yaml"), NAMESPACES_X_LOGGING);
    write_atomic(&tb.manifests_dir().join("pod-x-gone.yaml"), &gone_pod("Succeeded"));
    write_atomic(&tb.manifests_dir().join("from-gone.yaml"), &allow_ingress("x", "from-gone", "a", "gone", &[]));
    let logs = tempfile::tempdir().expect("tempdir");
    let np_log = logs.path().join("np.log");
    let agent = Agent::start(
        &tb.sandbox,
        &tb.manifests_dir(),
        &np_log,
        &["--audit-format", "json", "--audit-dedup-window", "100ms"],
    );
    let mut bed = Bed::with(tb, agent);

    // y/a owns 10.10.2.11; the finished x/gone that once had it is no peer.
    bed.converges(
        "finished pod is no peer",
        &[
            ("y/a", "x/a", Proto::Tcp, 80, false),
            ("y/a", "x/a", Proto::Tcp, 81, false),
            ("x/b", "x/a", Proto::Tcp, 80, false),
        ],
    );
    let from_ya = |v: &serde_json::Value| v["source"]["ip"] == "10.10.2.11";
    wait_json_line(&np_log, 0, CONVERGE, "audit line for the drops from 10.10.2.11", from_ya);
    let lines = lines_from(&np_log, "10.10.2.11");
    for l in &lines {
        assert_eq!(l["disposition"], "Drop", "{l}");
        assert_eq!(
            (&l["source"]["namespace"], &l["source"]["pod"]),
            (&"y".into(), &"a".into()),
            "named after its live owner: {l}"
        );
    }
    let text = std::fs::read_to_string(&np_log).unwrap_or_default();
    assert!(!text.contains("\"gone\""), "the finished pod is named in the audit log:\n{text}");

    // Control: while x/gone runs, the same address is its, and allowed.
    bed.write_manifest("pod-x-gone.yaml", &gone_pod("Running"));
    bed.converges(
        "running pod is a peer",
        &[("y/a", "x/a", Proto::Tcp, 80, true), ("x/b", "x/a", Proto::Tcp, 80, false)],
    );
    bed.write_manifest("pod-x-gone.yaml", &gone_pod("Failed"));
    bed.converges(
        "failed pod is no peer again",
        &[("y/a", "x/a", Proto::Tcp, 80, false), ("y/a", "y/b", Proto::Tcp, 80, true)],
    );
}

/// A billion-laughs NetworkPolicy of about 100 KB: a 90 KB string, nine levels of ten aliases.
fn billion_laughs() -> String {
    npagent::source::manifests::parse::billion_laughs(
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: lol, namespace: z}\nspec:\n  \
         podSelector: {}\n  ingress: [{}]\n  x:\n",
        "    ",
    )
}

#[test]
fn oversized_and_alias_bomb_manifests_are_refused_and_enforcement_goes_on() {
    let mut bed = Bed::start(&[]);
    let deny_z = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: deny, namespace: z}\n\
                  spec: {podSelector: {}, policyTypes: [Ingress]}\n";
    bed.write_manifest("deny-z.yaml", deny_z);
    bed.converges("z isolated", &[("x/a", "z/a", Proto::Tcp, 80, false), ("x/a", "y/a", Proto::Tcp, 80, true)]);

    // Each would open z (allow everything into it) if it were read.
    bed.write_manifest("bomb.yaml", &billion_laughs());
    let allow_z = "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata: {name: big, namespace: z}\n\
                   spec: {podSelector: {}, ingress: [{}]}\n";
    let limit = usize::try_from(npagent::source::manifests::MAX_FILE_BYTES).expect("limit fits");
    bed.write_manifest("big.yaml", &format!("{allow_z}#{}\n", "x".repeat(limit - allow_z.len())));
    // A name that would forge an audit line if it got through.
    bed.write_manifest(
        "evil.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  namespace: z\n  \
         name: \"x\\n2026/01/01 00:00:00.000000 IngressRule K8sNetworkPolicy:z/forged\"\nspec: {podSelector: {}, ingress: [{}]}\n",
    );

    bed.holds(
        "z stays isolated",
        &[
            ("x/a", "z/a", Proto::Tcp, 80, false),
            ("y/b", "z/b", Proto::Tcp, 81, false),
            ("x/a", "y/a", Proto::Tcp, 80, true),
        ],
    );
    let line = bed.logged(&["bomb.yaml", "aliases"]);
    eprintln!("bomb: {line}");
    let line = bed.logged(&["big.yaml", "larger than 16 MiB"]);
    eprintln!("big: {line}");
    let line = bed.logged(&["refused: NetworkPolicy with metadata.name", "must be a DNS-1123 subdomain"]);
    eprintln!("evil: {line}");
    assert!(line.contains("\\n2026/01/01"), "the name is shown escaped: {line}");
    assert!(!bed.agent.log_text().lines().any(|l| l.starts_with("2026/01/01")), "a log line was forged");

    // The agent keeps serving: a new valid policy applies.
    bed.write_manifest("deny-y.yaml", &deny_z.replace("namespace: z", "namespace: y"));
    bed.converges(
        "y isolated too",
        &[
            ("x/a", "y/a", Proto::Tcp, 80, false),
            ("x/a", "z/b", Proto::Tcp, 80, false),
            ("z/a", "x/b", Proto::Tcp, 80, true),
        ],
    );
}
