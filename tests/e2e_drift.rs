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
use support::policy::{allow_ingress, network_policy, pod_selector};
use support::wait_until_every;

/// How soon a flow changed behind npagent's back must be repaired.
const REPAIR_BOUND: Duration = Duration::from_secs(2);

/// x/a isolated, nothing allowed.
fn isolate_xa() -> String {
    network_policy("x", "isolate-a", &pod_selector("a"), "  policyTypes: [Ingress]\n")
}

/// x/a isolated, TCP 80 allowed from x/b.
fn allow_xb() -> String {
    allow_ingress("x", "allow-b", "a", "b", &[("TCP", 80)])
}

type Check = harness::Check<'static>;

/// npagent with an audit log (metrics on) on a testbed, holding the timing lock.
type Node = harness::Enforcing;

impl Node {
    /// A testbed with npagent (metrics on) enforcing `policy` (none when empty), verdicts
    /// `checks` in place; takes the [`harness::timing_lock`] first and holds it until dropped.
    fn start(policy: &str, checks: &[Check]) -> Node {
        let manifests: &[(&str, &str)] = if policy.is_empty() { &[] } else { &[("policy.yaml", policy)] };
        let mut node = Node::launch(true, manifests, |tb| {
            Agent::start(&tb.sandbox, &tb.manifests_dir(), &tb.sandbox.dir.join("np.log"), &[])
        });
        node.enforces("policy enforced", checks, Duration::from_secs(20));
        node
    }

    /// Waits, at most [`REPAIR_BOUND`] from now (just after a change by hand), until
    /// `repaired` holds; panics with `what`, the flows `shown` and the agent's log otherwise.
    fn repaired(&self, what: &str, repaired: impl FnMut() -> bool, shown: impl FnOnce() -> String) {
        let every = Duration::from_millis(10);
        let explain = || format!("{}\nagent log:\n{}", shown(), self.agent.log_tail(20));
        let took = wait_until_every(REPAIR_BOUND, every, what, repaired, explain);
        eprintln!("{what} after {:.3} s", took.as_secs_f64());
    }

    /// Waits until the bridge holds exactly `flows` again after a change by hand (see
    /// [`Node::repaired`]).
    fn flows_repaired(&self, what: &str, flows: &[String]) {
        let sb = &self.tb.sandbox;
        self.repaired(what, || sb.dump_flows() == flows, || sb.dump_flows().join("\n"));
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
    let mut node = Node::start(&isolate_xa(), &ISOLATED);
    let before = node.table_flows("IngressDefaultRule");
    assert!(!before.is_empty(), "no default drop installed:\n{}", node.tb.sandbox.dump_flows().join("\n"));

    node.tb.sandbox.ofctl(&["del-flows", "table=IngressDefaultRule"]);
    node.repaired(
        "IngressDefaultRule restored",
        || node.table_flows("IngressDefaultRule") == before,
        || format!("{:?}", node.table_flows("IngressDefaultRule")),
    );
    node.wait_verdicts("after del-flows", &ISOLATED, REPAIR_BOUND);
    node.confirm("after del-flows", &ISOLATED);
    assert!(node.log_count("behind npagent's back") >= 1, "the repair is not logged:\n{}", node.agent.log_tail(20));
    assert!(node.agent.alive());
}

#[test]
fn flows_added_or_modified_by_hand_are_undone() {
    let mut node = Node::start(&isolate_xa(), &ISOLATED);
    let flows_before = node.tb.sandbox.dump_flows();
    let allow =
        format!("table=IngressDefaultRule,priority=300,ip,actions=goto_table:{}", next_table("IngressDefaultRule"));

    // A flow that would let everything past the default drops.
    node.tb.sandbox.ofctl(&["add-flow", &allow]);
    node.flows_repaired("the hand-added flow removed", &flows_before);
    node.wait_verdicts("after add-flow", &ISOLATED, REPAIR_BOUND);
    node.confirm("after add-flow", &ISOLATED);

    // The drop flows turned into allows in place.
    let modify = format!("table=IngressDefaultRule,actions=goto_table:{}", next_table("IngressDefaultRule"));
    node.tb.sandbox.ofctl(&["mod-flows", &modify]);
    node.flows_repaired("the hand-modified flows restored", &flows_before);
    node.wait_verdicts("after mod-flows", &ISOLATED, REPAIR_BOUND);
    node.confirm("after mod-flows", &ISOLATED);
    assert!(node.agent.alive());
}

#[test]
fn flows_of_a_full_table_are_set_aside_and_retried_with_backoff_while_the_rest_lands() {
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
    node.write_manifest("policy.yaml", &allow_xb());
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
    // Only the refusals themselves: "retrying … the switch refused before" names them too.
    let refusals = node.log_count("the rest of the bundle is applied without them");
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
    let secure = || sb.vsctl(&["get-fail-mode", "br-int"]).trim() == "secure";
    let every = Duration::from_millis(50);
    wait_until_every(Duration::from_secs(10), every, "fail_mode secure", secure, || agent.log_tail(20));
    let line = agent.wait_log("fail_mode standalone", Duration::from_secs(2));
    assert!(line.contains("WARN") && line.contains("secure"), "{line}");
}
