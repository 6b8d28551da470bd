//! One pod cannot fill the conntrack table for everyone, with real packets: with the
//! datapath's table made small (`dpctl/ct-set-maxconns`), a pod opening hundreds of UDP flows
//! took every entry, so another pod's allowed connection was never committed and its replies
//! met its own ingress default drop. Now each pod's connections are counted in a conntrack
//! zone of its own whose limit npagent sets through ovs-vswitchd's control socket (a twentieth
//! of the datapath's maximum by default): the flood stops at that limit and (the control that
//! must get through) the other pod's connection works. Without the control socket, policy is
//! enforced as ever and npagent says the limits are missing. Needs root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod support;

use std::time::{Duration, Instant};

use support::agent::Agent;
use support::{write_atomic, Port, Testbed};

/// x/b accepts nothing: a reply that conntrack does not know as one is dropped.
const B_DENY_INGRESS: &str = "apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: b-deny, namespace: x}
spec:
  podSelector: {matchLabels: {pod: b}}
";

/// The datapath's table while npagent starts: the default per-pod limit is a twentieth of it
/// (each connection takes two entries, so ten zones at their limit fill it).
const MAXCONNS_AT_START: u32 = 1000;
const POD_LIMIT: u32 = MAXCONNS_AT_START / 20;
/// The table during the attack: room for one pod's limit in its own zone and in npagent's
/// (each connection takes an entry in both), and for the victim's, not for the flood.
const MAXCONNS: u32 = 300;
const FLOOD: u32 = 900;

fn wait_for(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check() {
        assert!(Instant::now() < deadline, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `dpctl/ct-get-limits zone=<zone>`'s line for the zone.
fn zone_limit(tb: &Testbed, zone: u32) -> String {
    let out = tb.sandbox.appctl(&["dpctl/ct-get-limits", &format!("zone={zone}")]);
    out.lines().find(|l| l.starts_with(&format!("zone={zone},"))).unwrap_or_default().to_string()
}

#[test]
fn a_pod_filling_conntrack_leaves_room_for_the_others() {
    let tb = Testbed::start();
    tb.sandbox.appctl(&["dpctl/ct-set-maxconns", &MAXCONNS_AT_START.to_string()]);
    write_atomic(&tb.manifests_dir().join("policy.yaml"), B_DENY_INGRESS);
    let audit_log = tb.sandbox.dir.join("np.log");
    let _agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &[]);
    wait_for("the policy", || !tb.reaches("x/a", "x/b", Port::Udp80));

    tb.sandbox.appctl(&["dpctl/flush-conntrack"]);
    tb.sandbox.appctl(&["dpctl/ct-set-maxconns", &MAXCONNS.to_string()]);
    let victim_peer = tb.pod("y/a").ip;
    let flood_target = tb.pod("y/b").ip;
    let (flows, target) = (FLOOD.to_string(), flood_target.as_str());
    let answered: u32 = tb
        .attack("x/c", &["udp-flood", "--dst", target, "--dport", "80", "--flows", &flows, "--wait", "2"])
        .parse()
        .expect("a count");

    // The victim's connection to a pod that allows it: x/b opens it, y/a answers, and the
    // answers are replies (not new connections into isolated x/b) only if conntrack had room
    // to commit it.
    let args = ["udp-echo", "--dst", &victim_peer, "--dport", "80", "--sport", "40600", "--count", "5"];
    let echoes: u32 = tb.attack("x/b", &args).parse().expect("a count");
    assert_eq!(echoes, 5, "x/b's allowed connection failed beside x/c's flood ({answered} of its flows answered)");

    // The flood stopped at the attacker's own limit, which npagent set.
    assert!(answered > 0, "the attacker's first flows are allowed");
    assert!(answered <= POD_LIMIT, "{answered} of {FLOOD} flows got through, over the pod's limit {POD_LIMIT}");
    let attacker = tb.pod("x/c");
    let expected = format!("zone={},limit={POD_LIMIT},count={POD_LIMIT}", attacker.ofport);
    assert_eq!(zone_limit(&tb, attacker.ofport), expected);

    // The attacker's zone goes with it: limit deleted, entries flushed.
    tb.del_pod("x", "c");
    wait_for("the attacker's zone released", || {
        let line = zone_limit(&tb, attacker.ofport);
        !line.contains(&format!("limit={POD_LIMIT},")) && line.ends_with("count=0")
    });
}

/// The arithmetic the README states: each connection takes two entries, so at the default
/// limit ten zones fill the table and fewer leave room, and npagent warns when the zones at
/// their limit could fill it. With a limit of a tenth (as before),
/// five pods filled it: eight pods flooding at once left the ninth, idle, no entry for its
/// first connection.
#[test]
fn pods_at_their_default_limit_fill_the_table_only_ten_at_a_time() {
    let tb = Testbed::start();
    tb.sandbox.appctl(&["dpctl/ct-set-maxconns", &MAXCONNS_AT_START.to_string()]);
    let audit_log = tb.sandbox.dir.join("np.log");
    let mut agent = Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &[]);
    let pods = tb.pods();
    let (flooders, victim) = pods.split_at(8);
    let victim = &victim[0];
    wait_for("the pods' limits", || zone_limit(&tb, victim.ofport).contains(",limit="));

    // Eight pods open twice their limit of connections each, at once, each to the next pod.
    tb.sandbox.appctl(&["dpctl/flush-conntrack"]);
    let flows = (2 * POD_LIMIT).to_string();
    let answered: Vec<u32> = std::thread::scope(|s| {
        let floods: Vec<_> = flooders
            .iter()
            .enumerate()
            .map(|(i, pod)| {
                let target = pods[(i + 1) % pods.len()].ip.clone();
                let (tb, id, flows) = (&tb, pod.id(), flows.clone());
                s.spawn(move || {
                    tb.attack(&id, &["udp-flood", "--dst", &target, "--dport", "80", "--flows", &flows, "--wait", "2"])
                        .parse::<u32>()
                        .expect("a count")
                })
            })
            .collect();
        floods.into_iter().map(|f| f.join().expect("flood")).collect()
    });
    // The ninth pod, idle until now, still gets its connection: eight zones at their limit
    // hold 8 x POD_LIMIT x 2 entries of the MAXCONNS_AT_START.
    let peer = tb.pod("x/a").ip;
    let args = ["udp-echo", "--dst", &peer, "--dport", "80", "--sport", "40700", "--count", "5"];
    let echoes: u32 = tb.attack(&victim.id(), &args).parse().expect("a count");
    assert_eq!(echoes, 5, "{} could not connect beside eight flooding pods ({answered:?} flows answered)", victim.id());
    for (pod, got) in flooders.iter().zip(&answered) {
        assert!(*got <= POD_LIMIT, "{} got {got} flows through, over its limit {POD_LIMIT}", pod.id());
        let zone = zone_limit(&tb, pod.ofport);
        assert_eq!(
            zone,
            format!("zone={},limit={POD_LIMIT},count={POD_LIMIT}", pod.ofport),
            "{} not at its limit",
            pod.id()
        );
    }

    // Nine pods' zones, the node's and the inbound one: eleven zones at their limit could fill
    // the table, and npagent said so at start; a pod more, and it says so again.
    let warning = agent.wait_log("exceed the datapath's table", Duration::from_secs(5));
    let eleven = format!("11 zones × {POD_LIMIT} connections × 2 entries = 1100 exceed the datapath's table of 1000");
    assert!(warning.contains("WARN") && warning.contains(&eleven), "{warning}");
    tb.add_pod("x", "d", "10.10.1.14");
    agent.wait_log(&format!("12 zones × {POD_LIMIT} connections"), Duration::from_secs(20));
}

#[test]
fn without_the_control_socket_policy_holds_and_the_agent_says_so() {
    let tb = Testbed::start();
    write_atomic(&tb.manifests_dir().join("policy.yaml"), B_DENY_INGRESS);
    let audit_log = tb.sandbox.dir.join("np.log");
    let absent = tb.sandbox.dir.join("absent.ctl");
    let mut agent =
        Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &["--vswitchd-ctl", absent.to_str().unwrap()]);
    agent.wait_log("cannot set the pods' zone limits", Duration::from_secs(10));
    // Policy is enforced as ever: x/b is isolated, x/a's other peers are not.
    wait_for("the policy", || !tb.reaches("x/a", "x/b", Port::Udp80));
    assert!(tb.reaches("x/b", "y/a", Port::Udp80), "an allowed connection");
    let metrics = agent.metrics();
    assert_eq!(metrics.get("npagent_conntrack_pods_unbounded"), 9.0, "{:?}", metrics.0);
    assert!(metrics.count("npagent_conntrack_limit_errors_total") >= 1);
}

/// A later packet is delivered only when its owner's zone holds its connection. The zone's
/// entry of a connection can go while npagent's stays: both idle out alike only while every
/// packet passes, and a packet that policy drops (a revoked flow its peer keeps sending)
/// refreshes npagent's entry alone. Flushing the pod's zone here stands in for that entry
/// timing out (a minute of UDP). Before, the connection's next packets re-created the entry
/// and were delivered even when the zone was full and the commit refused: a pod held more
/// connections than its limit, unlogged. Now such a packet is dropped and logged as
/// `SecurityEvent:ConntrackLimit` naming the pod.
#[test]
fn a_connection_whose_zone_entry_went_passes_again_only_within_the_limit() {
    const LIMIT: u32 = 5;
    let tb = Testbed::start();
    let audit_log = tb.sandbox.dir.join("np.log");
    let _agent =
        Agent::start(&tb.sandbox, &tb.manifests_dir(), &audit_log, &["--conntrack-pod-limit", &LIMIT.to_string()]);
    let owner = tb.pod("x/a");
    wait_for("x/a's limit", || zone_limit(&tb, owner.ofport).contains(&format!(",limit={LIMIT},")));
    let peer = tb.pod("y/a").ip;
    let flow = ["udp-echo", "--dst", &peer, "--dport", "80", "--sport", "40800", "--count", "3"];

    // Control: the flow works, and it is in x/a's zone.
    assert_eq!(tb.attack("x/a", &flow), "3", "x/a's flow to y/a");
    assert!(zone_limit(&tb, owner.ofport).ends_with("count=1"), "{}", zone_limit(&tb, owner.ofport));

    // Its zone entry goes; x/a then fills its zone with other flows.
    tb.sandbox.appctl(&["dpctl/flush-conntrack", &format!("zone={}", owner.ofport)]);
    let target = tb.pod("y/b").ip;
    let flows = (2 * LIMIT).to_string();
    let answered: u32 = tb
        .attack("x/a", &["udp-flood", "--dst", &target, "--dport", "80", "--flows", &flows, "--wait", "2"])
        .parse()
        .expect("a count");
    assert_eq!(answered, LIMIT, "x/a's flows up to its limit");
    assert_eq!(zone_limit(&tb, owner.ofport), format!("zone={},limit={LIMIT},count={LIMIT}", owner.ofport));

    // The old flow's packets find no room in the zone: dropped, not delivered past the limit.
    assert_eq!(tb.attack("x/a", &flow), "0", "x/a's flow passed beyond its zone's limit");
    assert_eq!(zone_limit(&tb, owner.ofport), format!("zone={},limit={LIMIT},count={LIMIT}", owner.ofport));
    let refused = format!("Egress Drop <nil> x/a {} 40800 {peer} 80 UDP", owner.ip);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(&audit_log).unwrap_or_default();
        if log.lines().any(|l| l.contains("SecurityEvent:ConntrackLimit") && l.contains(&refused)) {
            break;
        }
        assert!(Instant::now() < deadline, "no ConntrackLimit line for x/a's flow ({refused}):\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
