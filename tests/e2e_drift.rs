//! The bridge's flows stay npagent's: flows deleted, added or modified by hand are repaired
//! within 2 s (the switch's flow monitor reports them), and flows the switch refuses do not
//! hold back the rest of a bundle: they are reported with their policy and retried with
//! backoff until the switch takes them. Real ovs-vswitchd, real packets. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

#[path = "e2e_scenarios/harness.rs"]
mod harness;
#[path = "e2e_scenarios/scenario.rs"]
mod scenario;

use std::time::{Duration, Instant};

use npagent::compiler::tables;
use scenario::Proto;
use support::agent::Agent;
use support::{write_atomic, Testbed};

/// How soon a flow changed behind npagent's back must be repaired.
const REPAIR_BOUND: Duration = Duration::from_secs(2);

/// x/a isolated, nothing allowed.
const ISOLATE_XA: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: isolate-a}
spec:
  podSelector:
    matchLabels: {pod: a}
  policyTypes: [Ingress]
"#;

/// x/a isolated, TCP 80 allowed from x/b.
const ALLOW_XB: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: allow-b}
spec:
  podSelector:
    matchLabels: {pod: a}
  ingress:
  - from:
    - podSelector:
        matchLabels: {pod: b}
    ports:
    - {protocol: TCP, port: 80}
"#;

type Check = harness::Check<'static>;

struct Node {
    tb: Testbed,
    agent: Agent,
}

impl Node {
    /// A testbed with npagent (metrics on) enforcing `policy`, verdicts `checks` in place.
    fn start(policy: &str, checks: &[Check]) -> Node {
        let tb = Testbed::start();
        if !policy.is_empty() {
            write_atomic(&tb.manifests_dir().join("policy.yaml"), policy);
        }
        let audit = tb.sandbox.dir.join("np.log");
        let agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit, &[]);
        let mut node = Node { tb, agent };
        node.wait_verdicts("policy enforced", checks, Duration::from_secs(20));
        node.confirm("policy enforced", checks);
        node
    }

    /// Waits for the trace verdicts (see [`harness::wait_verdicts`]).
    fn wait_verdicts(&mut self, what: &str, checks: &[Check], limit: Duration) -> Duration {
        harness::wait_verdicts(&self.tb, &mut self.agent, what, checks, limit)
    }

    /// The same checks with real packets.
    fn confirm(&self, what: &str, checks: &[Check]) {
        harness::confirm(&self.tb, what, checks);
    }

    /// The flows of table `name`, as `dump-flows --names` prints them.
    fn table_flows(&self, name: &str) -> Vec<String> {
        let needle = format!("table={name},");
        self.tb.sandbox.dump_flows().into_iter().filter(|f| f.contains(&needle)).collect()
    }

    /// Lines of this run's log that contain `needle`.
    fn log_count(&self, needle: &str) -> usize {
        self.agent.log_text().lines().filter(|l| l.contains(needle)).count()
    }
}

/// The table after `name` in the pipeline.
fn next_table(name: &str) -> &'static str {
    let i = tables::TABLES.iter().position(|(_, n)| *n == name).expect("npagent table");
    tables::TABLES.get(i + 1).map(|(_, n)| *n).expect("a table after it")
}

const ISOLATED: [Check; 3] = [
    ("y/a", "x/a", Proto::Tcp, 80, false),
    ("x/b", "x/a", Proto::Udp, 80, false),
    ("y/a", "y/b", Proto::Tcp, 80, true),
];

#[test]
fn default_drops_deleted_by_hand_are_back_within_two_seconds() {
    let _serial = harness::timing_lock();
    let mut node = Node::start(ISOLATE_XA, &ISOLATED);
    let before = node.table_flows("IngressDefaultRule");
    assert!(!before.is_empty(), "no default drop installed:\n{}", node.tb.sandbox.dump_flows().join("\n"));

    node.tb.sandbox.ofctl(&["del-flows", "table=IngressDefaultRule"]);
    let deleted = Instant::now();
    loop {
        if node.table_flows("IngressDefaultRule") == before {
            break;
        }
        assert!(
            deleted.elapsed() <= REPAIR_BOUND,
            "IngressDefaultRule not restored within {REPAIR_BOUND:?}: {:?}\nagent log:\n{}",
            node.table_flows("IngressDefaultRule"),
            node.agent.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("default drops restored after {:.3} s", deleted.elapsed().as_secs_f64());
    node.wait_verdicts("after del-flows", &ISOLATED, REPAIR_BOUND);
    node.confirm("after del-flows", &ISOLATED);
    assert!(node.log_count("behind npagent's back") >= 1, "the repair is not logged:\n{}", node.agent.log_tail(20));
    assert!(node.agent.alive());
}

#[test]
fn flows_added_or_modified_by_hand_are_undone() {
    let _serial = harness::timing_lock();
    let mut node = Node::start(ISOLATE_XA, &ISOLATED);
    let flows_before = node.tb.sandbox.dump_flows();
    let allow =
        format!("table=IngressDefaultRule,priority=300,ip,actions=goto_table:{}", next_table("IngressDefaultRule"));

    // A flow that would let everything past the default drops.
    node.tb.sandbox.ofctl(&["add-flow", &allow]);
    let added = Instant::now();
    while node.tb.sandbox.dump_flows() != flows_before {
        assert!(
            added.elapsed() <= REPAIR_BOUND,
            "the hand-added flow is still there after {REPAIR_BOUND:?}:\n{}\nagent log:\n{}",
            node.tb.sandbox.dump_flows().join("\n"),
            node.agent.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("hand-added flow removed after {:.3} s", added.elapsed().as_secs_f64());
    node.wait_verdicts("after add-flow", &ISOLATED, REPAIR_BOUND);
    node.confirm("after add-flow", &ISOLATED);

    // The drop flows turned into allows in place.
    let modify = format!("table=IngressDefaultRule,actions=goto_table:{}", next_table("IngressDefaultRule"));
    node.tb.sandbox.ofctl(&["mod-flows", &modify]);
    let modified = Instant::now();
    while node.tb.sandbox.dump_flows() != flows_before {
        assert!(
            modified.elapsed() <= REPAIR_BOUND,
            "the modified flows are not restored after {REPAIR_BOUND:?}:\n{}\nagent log:\n{}",
            node.tb.sandbox.dump_flows().join("\n"),
            node.agent.log_tail(20)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("hand-modified flows restored after {:.3} s", modified.elapsed().as_secs_f64());
    node.wait_verdicts("after mod-flows", &ISOLATED, REPAIR_BOUND);
    node.confirm("after mod-flows", &ISOLATED);
    assert!(node.agent.alive());
}

#[test]
fn flows_of_a_full_table_are_set_aside_and_retried_with_backoff_while_the_rest_lands() {
    let _serial = harness::timing_lock();
    let open: [Check; 2] = [("y/a", "x/a", Proto::Tcp, 80, true), ("x/b", "x/a", Proto::Tcp, 80, true)];
    let mut node = Node::start("", &open);

    // IngressRule holds what it holds now and refuses more.
    let rule_table = tables::table_id("IngressRule").expect("IngressRule table");
    let row = node.tb.sandbox.vsctl(&["get", "Bridge", "br-int", &format!("flow_tables:{rule_table}")]);
    let row = row.trim().to_string();
    let n = node.table_flows("IngressRule").len();
    node.tb.sandbox.vsctl(&["set", "Flow_Table", &row, &format!("flow_limit={n}"), "overflow_policy=refuse"]);

    // The policy needs new IngressRule flows (refused) and a default drop (accepted): x/a is
    // isolated at once, and the allow from x/b is missing until the table has room.
    write_atomic(&node.tb.manifests_dir().join("policy.yaml"), ALLOW_XB);
    let fail_closed: [Check; 3] = [
        ("y/a", "x/a", Proto::Tcp, 80, false),
        ("x/b", "x/a", Proto::Tcp, 80, false),
        ("y/a", "y/b", Proto::Tcp, 80, true),
    ];
    node.wait_verdicts("valid part of the bundle applied", &fail_closed, Duration::from_secs(5));
    node.confirm("valid part of the bundle applied", &fail_closed);
    assert_eq!(node.table_flows("IngressRule").len(), n, "the full table got nothing");
    let refusal = node.agent.wait_log("the switch refused", Duration::from_secs(5));
    let log = node.agent.log_text();
    assert!(log.contains("OFPFMFC_TABLE_FULL"), "the error is named:\n{log}");
    assert!(log.contains("x/allow-b"), "the policy is named:\n{log}");
    assert!(log.contains("table=IngressRule"), "the table is named:\n{log}");
    assert!(log.contains("cookie=0x"), "the cookie is named:\n{log}");
    eprintln!("{refusal}");

    // Retried, but with backoff (1 s, 2 s, 4 s, ...), not in a hot loop.
    let watched = Instant::now();
    std::thread::sleep(Duration::from_secs(6));
    let refusals = node.log_count("the switch refused");
    let elapsed = watched.elapsed();
    assert!(
        (2..=5).contains(&refusals),
        "{refusals} refusals in the first {:.1} s: expected a few retries with backoff\n{}",
        elapsed.as_secs_f64(),
        node.agent.log_tail(30)
    );
    let metrics = node.agent.metrics();
    let rejected = metrics.count("npagent_flow_mods_rejected_total");
    assert!(rejected >= refusals as u64, "npagent_flow_mods_rejected_total = {rejected}, {refusals} refusals logged");
    assert!(node.agent.alive());

    // Room again: the set-aside flows land at their next retry (the delay is capped).
    node.tb.sandbox.vsctl(&["clear", "Flow_Table", &row, "flow_limit", "overflow_policy"]);
    let allowed: [Check; 3] = [
        ("y/a", "x/a", Proto::Tcp, 80, false),
        ("x/b", "x/a", Proto::Tcp, 80, true),
        ("x/b", "x/a", Proto::Tcp, 81, false),
    ];
    let took = node.wait_verdicts("after the limit is lifted", &allowed, Duration::from_secs(35));
    eprintln!("set-aside flows landed {:.1} s after the limit was lifted", took.as_secs_f64());
    node.confirm("after the limit is lifted", &allowed);
    assert!(node.table_flows("IngressRule").len() > n);
    node.agent.wait_log("refused before are installed now", Duration::from_secs(2));
}

#[test]
fn a_standalone_bridge_is_made_secure_when_npagent_starts() {
    let sb = support::Sandbox::start();
    sb.vsctl(&["set-fail-mode", "br-int", "standalone"]);
    let manifests = sb.dir.join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifests dir");
    let mut agent = Agent::spawn(&sb, &manifests, &sb.dir.join("npagent.log"), &[]);
    let started = Instant::now();
    while sb.vsctl(&["get-fail-mode", "br-int"]).trim() != "secure" {
        assert!(started.elapsed() < Duration::from_secs(10), "fail_mode still not secure:\n{}", agent.log_tail(20));
        std::thread::sleep(Duration::from_millis(50));
    }
    let line = agent.wait_log("fail_mode standalone", Duration::from_secs(2));
    assert!(line.contains("WARN") && line.contains("secure"), "{line}");
}
