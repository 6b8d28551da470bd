//! ClusterNetworkPolicy's meaning in the compiled flows: for any model of NetworkPolicies and
//! ClusterNetworkPolicies, every direction of every connection is decided by the flows (the
//! Admin tier's table, the NetworkPolicy tables, the Baseline tier's table, evaluated the way
//! OVS does) exactly as the reference order of `model::tiers` decides it, whatever shape the
//! flows take; and the tiers' flows never reorder (a tier's rules keep upstream's order in
//! their priorities).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, tables, Config, Direction, FlowTable, IdAllocator};
use npagent::model::cluster_policy::{ClusterPolicy, Tier};
use npagent::model::tiers::{self, Connection, NetworkPolicySay, PodView, Verdict};
use npagent::model::{ContainerPort, EgressRule, IngressRule, Model, Peer, Pod, Protocol};
use ofp::Instruction;
use proptest::prelude::*;
use serde_json::json;
use std::net::IpAddr;

mod policy_eval;
use policy_eval::Packet;

const NS: [&str; 2] = ["x", "y"];
const PODS: [&str; 3] = ["a", "b", "c"];
/// A peer that is no pod.
const OUTSIDE: &str = "192.0.2.7";

/// x (team=a) and y (team=b), pods a, b, c with role=<name>; x/a, x/b, y/a and y/c local.
/// x/a serves the named port `web` on TCP 8080, y/c on UDP 5353.
fn base() -> Model {
    let mut m = Model::default();
    for (i, ns) in NS.iter().enumerate() {
        m = m.with_ns(namespace(ns, &[("team", ["a", "b"][i])], &[]));
        for (j, name) in PODS.iter().enumerate() {
            let mut p = pod(ns, name, &[("role", name)], &[&format!("10.0.{i}.{}", j + 1)]);
            let web = match (*ns, *name) {
                ("x", "a") => Some((8080, Protocol::Tcp)),
                ("y", "c") => Some((5353, Protocol::Udp)),
                _ => None,
            };
            p.ports = web
                .map(|(port, protocol)| ContainerPort { name: Some("web".into()), port, protocol })
                .into_iter()
                .collect();
            m = m.with_pod(p);
        }
    }
    let local = [(1, "x", "a"), (2, "x", "b"), (3, "y", "a"), (4, "y", "c")];
    for (o, ns, name) in local {
        let ip = m.pods[&oref(ns, name)].ips[0].to_string();
        m = m.with_port(port_with_ips(o, ns, name, o as u8, &[&ip]));
    }
    m
}

/// The NetworkPolicies a case may add: x/a isolated for ingress, allowed from role=b on TCP
/// 80; y's pods isolated for egress, allowed to x on every port.
fn network_policy(i: usize) -> npagent::model::Policy {
    match i {
        0 => policy(
            "x",
            "allow-b",
            sel(&[("role", "a")]),
            vec![IngressRule {
                from: vec![Peer::Pods { pod_selector: Some(sel(&[("role", "b")])), namespace_selector: None }],
                ports: vec![tcp(80)],
            }],
        ),
        _ => npagent::model::Policy {
            affects_ingress: false,
            affects_egress: true,
            egress: vec![EgressRule {
                to: vec![Peer::Pods { pod_selector: None, namespace_selector: Some(sel(&[("team", "a")])) }],
                ports: vec![],
            }],
            ..policy("y", "to-x", sel(&[]), vec![])
        },
    }
}

fn peer_json(k: usize) -> serde_json::Value {
    match k {
        0 => json!({"namespaces": {"matchLabels": {"team": "a"}}}),
        1 => json!({"namespaces": {}}),
        2 => json!({"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "b"}}}}),
        3 => {
            json!({"pods": {"namespaceSelector": {"matchLabels": {"team": "b"}}, "podSelector": {"matchLabels": {"role": "c"}}}})
        }
        // A newer CRD's peer: fails closed.
        4 => json!({}),
        _ => json!({"networks": ["10.0.1.0/24", "192.0.2.0/28"]}),
    }
}

fn protocols_json(k: usize) -> Option<serde_json::Value> {
    match k {
        0 => None,
        1 => Some(json!([{"tcp": {"destinationPort": {"number": 80}}}])),
        2 => Some(
            json!([{"tcp": {"destinationPort": {"range": {"start": 80, "end": 81}}}}, {"udp": {"destinationPort": {"number": 53}}}]),
        ),
        _ => Some(json!([{"destinationNamedPort": "web"}])),
    }
}

/// One rule: (action, peer kinds, protocols kind).
type RuleSpec = (usize, Vec<usize>, usize);

fn rule_json(dir: &str, (action, peers, protocols): &RuleSpec, i: usize) -> serde_json::Value {
    let mut peers: Vec<serde_json::Value> = peers.iter().map(|k| peer_json(*k)).collect();
    // Ingress has no networks peer, and a named port goes with no networks peer.
    let named = *protocols == 3;
    peers.retain(|p| p.get("networks").is_none() || (dir == "to" && !named));
    if peers.is_empty() {
        peers.push(peer_json(1));
    }
    let action = ["Accept", "Deny", "Pass"][*action];
    let mut rule = json!({"name": format!("r{i}"), "action": action});
    rule[dir] = serde_json::Value::Array(peers);
    if let Some(p) = protocols_json(*protocols) {
        rule["protocols"] = p;
    }
    rule
}

fn cluster_policy_of(
    i: usize,
    tier: bool,
    priority: u16,
    subject: usize,
    ingress: &[RuleSpec],
    egress: &[RuleSpec],
) -> ClusterPolicy {
    let subject = match subject {
        0 => json!({"namespaces": {}}),
        1 => json!({"namespaces": {"matchLabels": {"team": "a"}}}),
        _ => json!({"pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": {"role": "a"}}}}),
    };
    let ingress: Vec<_> = ingress.iter().enumerate().map(|(n, r)| rule_json("from", r, n)).collect();
    let egress: Vec<_> = egress.iter().enumerate().map(|(n, r)| rule_json("to", r, n)).collect();
    let spec = json!({"tier": if tier { "Admin" } else { "Baseline" }, "priority": priority, "subject": subject,
        "ingress": ingress, "egress": egress});
    cluster_policy(&format!("cnp{i}"), spec)
}

fn rule_spec() -> impl Strategy<Value = RuleSpec> {
    (0..3usize, proptest::collection::vec(0..6usize, 1..3), 0..4usize)
}

type PolicySpec = (bool, u16, usize, Vec<RuleSpec>, Vec<RuleSpec>);

fn policy_spec() -> impl Strategy<Value = PolicySpec> {
    (
        any::<bool>(),
        0..3u16,
        0..3usize,
        proptest::collection::vec(rule_spec(), 0..3),
        proptest::collection::vec(rule_spec(), 0..3),
    )
}

/// Where the flows send the first packet of `p` from `tier`'s table: `None` dropped, else
/// the table it goes on to (its first matching rule's, or the table-miss flow's).
fn tier_next(flows: &FlowTable, tier: Tier, dir: Direction, p: &Packet) -> Option<u8> {
    let table = dir.tier_table(tier);
    let complete = policy_eval::complete_conjunctions(flows, table, dir, p);
    let value = match complete.first() {
        Some(&(priority, id)) => {
            if let Some((other_priority, other)) = complete.get(1) {
                assert!(*other_priority < priority, "conjunctions {id} and {other} both match at priority {priority}");
            }
            let (key, value) = policy_eval::conj_flow(flows, table, id, dir, p).expect("a conj_id flow");
            assert_eq!(key.priority, priority, "conj_id flow at its clauses' priority");
            value
        }
        None => {
            flows.iter().find(|(k, _)| k.table == table && k.match_.fields.is_empty()).expect("a table-miss flow").1
        }
    };
    value.instructions.iter().find_map(|i| match i {
        Instruction::GotoTable(t) => Some(*t),
        _ => None,
    })
}

/// The flows' verdict on the first packet of `p` in `dir`, following the tables as the
/// pipeline chains them: the Admin tier's, the NetworkPolicy tables, the Baseline tier's.
fn flows_verdict(flows: &FlowTable, dir: Direction, p: &Packet) -> Verdict {
    let passed = tables::table_id(match dir {
        Direction::Ingress => "ConntrackCommit",
        Direction::Egress => "L2ForwardingCalc",
    })
    .unwrap();
    match tier_next(flows, Tier::Admin, dir, p) {
        None => return Verdict::Deny,
        Some(t) if t == passed => return Verdict::Allow,
        Some(t) => assert_eq!(t, dir.rule_table(), "the Admin tier goes on to the NetworkPolicy tables"),
    }
    match network_policy_say(flows, dir, p) {
        NetworkPolicySay::Allowed => return Verdict::Allow,
        NetworkPolicySay::Denied => return Verdict::Deny,
        NetworkPolicySay::NotIsolated => {}
    }
    match tier_next(flows, Tier::Baseline, dir, p) {
        None => Verdict::Deny,
        Some(t) => {
            assert_eq!(t, passed, "the Baseline tier decides last");
            Verdict::Allow
        }
    }
}

fn view<'a>(m: &'a Model, pod: &'a Pod) -> PodView<'a> {
    PodView { labels: &pod.labels, namespace_labels: &m.namespaces[&*pod.namespace].labels, ports: &pod.ports }
}

/// What the NetworkPolicies of `m` say, by evaluating their flows (their meaning is
/// `compiler_semantics`'s to check).
fn network_policy_say(flows: &FlowTable, dir: Direction, p: &Packet) -> NetworkPolicySay {
    let isolated = flows.keys().any(|k| {
        k.table == dir.default_table()
            && k.priority == 200
            && k.match_.fields.iter().all(|f| policy_eval::field_matches(f, dir, p))
    });
    match (isolated, policy_eval::verdict(flows, dir, p)) {
        (false, _) => NetworkPolicySay::NotIsolated,
        (true, policy_eval::Verdict::Allow) => NetworkPolicySay::Allowed,
        (true, policy_eval::Verdict::Drop) => NetworkPolicySay::Denied,
    }
}

/// Every connection's both directions: flows against the reference; returns the mismatches.
fn mismatches(m: &Model) -> Vec<String> {
    let flows = compile(m, Config::default(), IdAllocator::new(60), 0).flows().clone();
    let policies: Vec<ClusterPolicy> = m.cluster_policies.values().cloned().collect();
    let mut out = Vec::new();
    let probes = [
        (Protocol::Tcp, 80u16),
        (Protocol::Tcp, 81),
        (Protocol::Udp, 53),
        (Protocol::Tcp, 8080),
        (Protocol::Udp, 5353),
    ];
    let mut peers: Vec<(IpAddr, Option<&Pod>)> = m.pods.values().map(|p| (p.ips[0], Some(&**p))).collect();
    peers.push((OUTSIDE.parse().unwrap(), None));
    for port in m.ports.values() {
        let subject = &*m.pods[&port.pod];
        for (peer_ip, peer_pod) in &peers {
            if *peer_ip == subject.ips[0] {
                continue;
            }
            for (protocol, dport) in probes {
                for dir in [Direction::Ingress, Direction::Egress] {
                    let tier_dir = match dir {
                        Direction::Ingress => tiers::Direction::Ingress,
                        Direction::Egress => tiers::Direction::Egress,
                    };
                    let conn = Connection {
                        direction: tier_dir,
                        subject: view(m, subject),
                        peer_ip: *peer_ip,
                        peer_pod: peer_pod.map(|p| view(m, p)),
                        protocol,
                        port: dport,
                    };
                    let packet = Packet { peer: *peer_ip, ofport: port.ofport, proto: protocol.number(), dport };
                    let say = network_policy_say(&flows, dir, &packet);
                    let admin = tiers::first_match(&policies, Tier::Admin, &conn);
                    let baseline = tiers::first_match(&policies, Tier::Baseline, &conn);
                    let (want, chain) = tiers::decide(admin, say, baseline);
                    let got = flows_verdict(&flows, dir, &packet);
                    if got != want {
                        out.push(format!(
                            "{dir:?} of {} with {peer_ip} {protocol:?}/{dport}: flows {got:?}, reference {want:?} ({chain:?})",
                            port.pod
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The model's ClusterNetworkPolicies and NetworkPolicies, for a failure message.
fn describe(m: &Model) -> String {
    let cnps = m.cluster_policies.values().map(|p| format!("{p:?}\n"));
    cnps.chain(m.policies.keys().map(|r| format!("NetworkPolicy {r}\n"))).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The flows decide every connection as the reference order does.
    #[test]
    fn the_flows_decide_as_the_tiers_order(
        specs in proptest::collection::vec(policy_spec(), 1..5),
        nps in proptest::collection::vec(0..2usize, 0..3),
    ) {
        let mut m = base();
        for (i, (tier, priority, subject, ingress, egress)) in specs.iter().enumerate() {
            m = m.with_cluster_policy(cluster_policy_of(i, *tier, *priority, *subject, ingress, egress));
        }
        for i in nps {
            m = m.with_policy(network_policy(i));
        }
        let wrong = mismatches(&m);
        prop_assert!(wrong.is_empty(), "{}\n{}", wrong.join("\n"), describe(&m));
    }
}

/// The tiers' rules take descending priorities in upstream's order: by tier, policy priority,
/// name, then rule order; adding a policy in front moves the others down, never across.
#[test]
fn the_tiers_flows_keep_upstreams_order() {
    let rule = |action: &str| json!({"action": action, "from": [{"namespaces": {}}]});
    let m = base()
        .with_cluster_policy(cluster_policy(
            "b-second",
            json!({"tier": "Admin", "priority": 5,
            "subject": {"namespaces": {}}, "ingress": [rule("Deny"), rule("Accept")]}),
        ))
        .with_cluster_policy(cluster_policy(
            "a-first",
            json!({"tier": "Admin", "priority": 5,
            "subject": {"namespaces": {}}, "ingress": [rule("Pass")]}),
        ))
        .with_cluster_policy(cluster_policy(
            "z-top",
            json!({"tier": "Admin", "priority": 1,
            "subject": {"namespaces": {}}, "ingress": [rule("Accept")]}),
        ));
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let mut order: Vec<(u16, String, u32)> = c
        .rules()
        .rules()
        .values()
        .filter(|r| r.cluster.is_some())
        .map(|r| (r.priority, r.policy.name.to_string(), r.index))
        .collect();
    order.sort_by_key(|o| std::cmp::Reverse(o.0));
    let names: Vec<(String, u32)> = order.iter().map(|(_, n, i)| (n.clone(), *i)).collect();
    assert_eq!(
        names,
        [("z-top", 0), ("a-first", 0), ("b-second", 0), ("b-second", 1)].map(|(n, i)| (n.to_string(), i))
    );
    let priorities: Vec<u16> = order.iter().map(|o| o.0).collect();
    assert!(priorities.windows(2).all(|w| w[0] > w[1]), "distinct priorities: {priorities:?}");
}
