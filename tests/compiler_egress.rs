//! Kubernetes egress semantics of the compiled flows, checked by evaluating the EgressRule and
//! EgressDefaultRule tables for a new connection the way OVS does (`policy_eval`): who a pod
//! may send to once a policy selects it for Egress, whatever shape the flows take.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

mod policy_eval;

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, Config, Direction, FlowTable, IdAllocator};
use npagent::model::{ContainerPort, EgressRule, LabelSelector, Model, Peer, Policy, PortRef, PortSpec, Protocol};
use policy_eval::{Packet, Verdict};
use Verdict::*;

/// Namespaces x (team=a) and y (team=b); pods a, b, c in each (label pod=<name>); x/a on
/// port 1, x/b on port 2, y/a on port 3. IPs: x: 10.0.0.1-3, y: 10.0.1.1-3, x/b also
/// fd00::2. Named port `http`: TCP 8080 on x/b, TCP 9090 on y/b, UDP 8080 on y/c.
fn base() -> Model {
    let mut m =
        Model::default().with_ns(namespace("x", &[("team", "a")], &[])).with_ns(namespace("y", &[("team", "b")], &[]));
    for (ns, net) in [("x", 0), ("y", 1)] {
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let v4 = format!("10.0.{net}.{}", i + 1);
            let mut ips = vec![v4.as_str()];
            if ns == "x" && *name == "b" {
                ips.push("fd00::2");
            }
            let mut p = pod(ns, name, &[("pod", name)], &ips);
            p.ports = match (ns, *name) {
                ("x", "b") => vec![ContainerPort { name: Some("http".into()), port: 8080, protocol: Protocol::Tcp }],
                ("y", "b") => vec![ContainerPort { name: Some("http".into()), port: 9090, protocol: Protocol::Tcp }],
                ("y", "c") => vec![ContainerPort { name: Some("http".into()), port: 8080, protocol: Protocol::Udp }],
                _ => vec![],
            };
            m = m.with_pod(p);
        }
    }
    m.with_port(port(1, "x", "a", 1)).with_port(port(2, "x", "b", 2)).with_port(port(3, "y", "a", 3))
}

/// An Egress-only policy.
fn egress(ns: &str, name: &str, selector: LabelSelector, rules: Vec<EgressRule>) -> Policy {
    Policy { affects_ingress: false, affects_egress: true, egress: rules, ..policy(ns, name, selector, vec![]) }
}

fn rule(to: Vec<Peer>, ports: Vec<PortSpec>) -> EgressRule {
    EgressRule { to, ports }
}

fn pods(pod_sel: Option<LabelSelector>, ns_sel: Option<LabelSelector>) -> Peer {
    Peer::Pods { pod_selector: pod_sel, namespace_selector: ns_sel }
}

fn named(name: &str) -> PortSpec {
    PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name(name.into())), end_port: None }
}

/// A new connection from local port `ofport` to `dst`.
fn send(ofport: u32, dst: &str, proto: u8, dport: u16) -> Packet {
    Packet { peer: dst.parse().unwrap(), ofport, proto, dport }
}

fn tcp_from(ofport: u32, dst: &str, dport: u16) -> Packet {
    send(ofport, dst, 6, dport)
}

fn flows(m: &Model) -> FlowTable {
    compile(m, Config::default(), IdAllocator::new(60), 0).flows().clone()
}

fn check(name: &str, m: &Model, cases: &[(Packet, Verdict)]) {
    let f = flows(m);
    for (p, want) in cases {
        let got = policy_eval::verdict(&f, Direction::Egress, p);
        assert_eq!(got, *want, "{name}: port {} -> {} {}/{}", p.ofport, p.peer, p.proto, p.dport);
    }
}

const XB: &str = "10.0.0.2";
const XC: &str = "10.0.0.3";
const YA: &str = "10.0.1.1";
const YB: &str = "10.0.1.2";
const YC: &str = "10.0.1.3";
const OUTSIDE: &str = "192.168.5.5";

#[test]
fn isolation_and_defaulting() {
    check(
        "no policy: every pod sends anywhere",
        &base(),
        &[(tcp_from(1, OUTSIDE, 80), Allow), (tcp_from(3, XB, 1), Allow)],
    );
    let deny = base().with_policy(egress("x", "deny", sel(&[("pod", "a")]), vec![]));
    check(
        "egress: [] isolates x/a only",
        &deny,
        &[
            (tcp_from(1, XB, 80), Drop),
            (tcp_from(1, OUTSIDE, 53), Drop),
            (tcp_from(2, XC, 80), Allow),
            (tcp_from(3, XB, 80), Allow),
        ],
    );
    let ingress_only = base().with_policy(policy("x", "in", LabelSelector::everything(), vec![]));
    check("an Ingress policy does not isolate for egress", &ingress_only, &[(tcp_from(1, OUTSIDE, 80), Allow)]);
    let mut both = egress("x", "both", LabelSelector::everything(), vec![]);
    both.affects_ingress = true;
    check(
        "Ingress+Egress isolates both ways",
        &base().with_policy(both),
        &[(tcp_from(1, YA, 80), Drop), (tcp_from(2, YA, 80), Drop), (tcp_from(3, XB, 80), Allow)],
    );
    let all = base().with_policy(egress("x", "all", LabelSelector::everything(), vec![rule(vec![], vec![])]));
    check(
        "one empty rule allows everything",
        &all,
        &[(tcp_from(1, OUTSIDE, 1), Allow), (send(2, "fd00::9", 17, 53), Allow)],
    );
}

#[test]
fn peers() {
    let to_b = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(vec![pods(Some(sel(&[("pod", "b")])), None)], vec![tcp(80)])],
    ));
    check(
        "podSelector: same namespace, TCP 80 only, both families",
        &to_b,
        &[
            (tcp_from(1, XB, 80), Allow),
            (tcp_from(1, "fd00::2", 80), Allow),
            (tcp_from(1, XB, 81), Drop),
            (send(1, XB, 17, 80), Drop),
            (tcp_from(1, YB, 80), Drop),
            (tcp_from(1, XC, 80), Drop),
        ],
    );
    let ns = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(vec![pods(None, Some(sel(&[("team", "b")])))], vec![])],
    ));
    check(
        "namespaceSelector: every pod there, every port",
        &ns,
        &[(tcp_from(1, YA, 1), Allow), (send(1, YC, 132, 7), Allow), (tcp_from(1, XB, 80), Drop)],
    );
    let both = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(vec![pods(Some(sel(&[("pod", "c")])), Some(sel(&[("team", "b")])))], vec![])],
    ));
    check(
        "both selectors in one peer: their intersection",
        &both,
        &[(tcp_from(1, YC, 80), Allow), (tcp_from(1, YB, 80), Drop), (tcp_from(1, XC, 80), Drop)],
    );
    let block = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(
            vec![ip_block("192.168.0.0/16", &["192.168.5.0/24"]), ip_block("fd00::/64", &["fd00::2/128"])],
            vec![PortSpec { protocol: Protocol::Udp, port: Some(PortRef::Number(5000)), end_port: Some(5100) }],
        )],
    ));
    check(
        "ipBlocks with except, an endPort range",
        &block,
        &[
            (send(1, "192.168.1.1", 17, 5000), Allow),
            (send(1, "192.168.1.1", 17, 5100), Allow),
            (send(1, "192.168.1.1", 17, 5101), Drop),
            (send(1, OUTSIDE, 17, 5000), Drop),
            (send(1, "fd00::9", 17, 5050), Allow),
            (send(1, "fd00::2", 17, 5050), Drop),
            (tcp_from(1, "192.168.1.1", 5000), Drop),
        ],
    );
    let two = base()
        .with_policy(egress(
            "x",
            "one",
            sel(&[("pod", "a")]),
            vec![rule(vec![pods(Some(sel(&[("pod", "b")])), None)], vec![tcp(80)])],
        ))
        .with_policy(egress("x", "two", sel(&[("pod", "a")]), vec![rule(vec![], vec![tcp(53)])]));
    check(
        "two policies add up",
        &two,
        &[(tcp_from(1, XB, 80), Allow), (tcp_from(1, OUTSIDE, 53), Allow), (tcp_from(1, OUTSIDE, 80), Drop)],
    );
}

#[test]
fn named_ports_resolve_on_the_destination() {
    let to_all_ns = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(vec![pods(None, Some(LabelSelector::everything()))], vec![named("http")])],
    ));
    check(
        "one rule, a different port for each destination",
        &to_all_ns,
        &[
            (tcp_from(1, XB, 8080), Allow),
            (tcp_from(1, "fd00::2", 8080), Allow),
            (tcp_from(1, XB, 9090), Drop),
            (tcp_from(1, YB, 9090), Allow),
            (tcp_from(1, YB, 8080), Drop),
            // y/c's `http` is UDP: a TCP rule does not resolve there.
            (tcp_from(1, YC, 8080), Drop),
            (send(1, YC, 17, 8080), Drop),
            (tcp_from(1, XC, 8080), Drop),
        ],
    );
    let to_anyone =
        base().with_policy(egress("x", "p", sel(&[("pod", "a")]), vec![rule(vec![], vec![named("http"), tcp(53)])]));
    check(
        "empty `to`: every pod that has the name, numeric ports anywhere",
        &to_anyone,
        &[
            (tcp_from(1, XB, 8080), Allow),
            (tcp_from(1, YB, 9090), Allow),
            (tcp_from(1, OUTSIDE, 8080), Drop),
            (tcp_from(1, OUTSIDE, 53), Allow),
            (tcp_from(1, XC, 53), Allow),
        ],
    );
    let block_named = base().with_policy(egress(
        "x",
        "p",
        sel(&[("pod", "a")]),
        vec![rule(vec![ip_block("10.0.0.0/8", &[])], vec![named("http")])],
    ));
    check("an ipBlock has no named ports", &block_named, &[(tcp_from(1, XB, 8080), Drop)]);
}
