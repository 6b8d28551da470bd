//! Kubernetes ingress semantics of the compiled flows, checked by evaluating the IngressRule
//! and IngressDefaultRule tables for a new connection the way OVS does (`policy_eval`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, tables, Config, Direction, FlowTable, IdAllocator};
use npagent::model::logging::LOGGING_ANNOTATION;
use npagent::model::{
    ContainerPort, IngressRule, LabelSelector, Model, Peer, PortRef, PortSpec, Protocol, Requirement, SelectorOp,
};
use ofp::{Action, Instruction};
use std::collections::BTreeSet;

mod policy_eval;
use policy_eval::{Packet, Verdict};
use Verdict::*;

fn verdict(flows: &FlowTable, p: &Packet) -> Verdict {
    policy_eval::verdict(flows, Direction::Ingress, p)
}

fn tcp_to(src: &str, ofport: u32, dport: u16) -> Packet {
    Packet { peer: src.parse().unwrap(), ofport, proto: 6, dport }
}

/// Namespaces x (ns=x, team=a) and y (ns=y, team=b); pods a, b, c in each with labels
/// pod=<name>; x/a on port 1, x/b on port 2, y/a on port 3. IPs: x: 10.0.0.1-3, y: 10.0.1.1-3,
/// plus fd00::1 on x/b.
fn base() -> Model {
    let mut m = Model::default().with_ns(namespace("x", &[("ns", "x"), ("team", "a")], &[])).with_ns(namespace(
        "y",
        &[("ns", "y"), ("team", "b")],
        &[],
    ));
    for (ns, net) in [("x", 0), ("y", 1)] {
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let mut ips = vec![format!("10.0.{net}.{}", i + 1)];
            if ns == "x" && *name == "b" {
                ips.push("fd00::1".into());
            }
            let ips: Vec<&str> = ips.iter().map(String::as_str).collect();
            m = m.with_pod(pod(ns, name, &[("pod", name)], &ips));
        }
    }
    m.with_port(port(1, "x", "a", 1)).with_port(port(2, "x", "b", 2)).with_port(port(3, "y", "a", 3))
}

fn flows(m: &Model) -> FlowTable {
    compile(m, Config::default(), IdAllocator::new(60), 0).flows().clone()
}

fn rule(from: Vec<Peer>, ports: Vec<PortSpec>) -> IngressRule {
    IngressRule { from, ports }
}

fn pods_peer(pod_sel: Option<LabelSelector>, ns_sel: Option<LabelSelector>) -> Peer {
    Peer::Pods { pod_selector: pod_sel, namespace_selector: ns_sel }
}

const XA: &str = "10.0.0.1";
const XB: &str = "10.0.0.2";
const XC: &str = "10.0.0.3";
const YA: &str = "10.0.1.1";
const YB: &str = "10.0.1.2";
const YC: &str = "10.0.1.3";

/// (description, model, [(packet, expected)]).
type Case = (&'static str, Model, Vec<(Packet, Verdict)>);

fn cases() -> Vec<Case> {
    vec![
        ("no policy: everything allowed", base(), vec![(tcp_to(XB, 1, 80), Allow), (tcp_to(YA, 3, 1), Allow)]),
        (
            "ingress: [] isolates and allows nothing; other pods untouched",
            base().with_policy(policy("x", "deny", sel(&[("pod", "a")]), vec![])),
            vec![(tcp_to(XB, 1, 80), Drop), (tcp_to(XA, 2, 80), Allow), (tcp_to(XA, 3, 80), Allow)],
        ),
        (
            "empty podSelector isolates every pod of the namespace only",
            base().with_policy(policy("x", "deny", LabelSelector::everything(), vec![])),
            vec![(tcp_to(XC, 1, 80), Drop), (tcp_to(XC, 2, 80), Drop), (tcp_to(XC, 3, 80), Allow)],
        ),
        (
            "Egress-only policy does not isolate for ingress",
            {
                let mut p = policy("x", "eg", LabelSelector::everything(), vec![]);
                p.affects_ingress = false;
                p.affects_egress = true;
                base().with_policy(p)
            },
            vec![(tcp_to(YB, 1, 80), Allow)],
        ),
        (
            "podSelector peer: same namespace only, TCP 80 only",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(vec![pods_peer(Some(sel(&[("pod", "b")])), None)], vec![tcp(80)])],
            )),
            vec![
                (tcp_to(XB, 1, 80), Allow),
                (tcp_to(XB, 1, 81), Drop),
                (Packet { peer: XB.parse().unwrap(), ofport: 1, proto: 17, dport: 80 }, Drop),
                (tcp_to(XC, 1, 80), Drop),
                (tcp_to(YB, 1, 80), Drop),
                (tcp_to("fd00::1", 1, 80), Allow),
            ],
        ),
        (
            "namespaceSelector alone: all pods of the selected namespaces",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(vec![pods_peer(None, Some(sel(&[("team", "b")])))], vec![])],
            )),
            vec![(tcp_to(YA, 1, 80), Allow), (tcp_to(YB, 1, 9), Allow), (tcp_to(XB, 1, 80), Drop)],
        ),
        (
            "namespaceSelector AND podSelector in one peer",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(vec![pods_peer(Some(sel(&[("pod", "b")])), Some(sel(&[("ns", "y")])))], vec![])],
            )),
            vec![(tcp_to(YB, 1, 80), Allow), (tcp_to(YA, 1, 80), Drop), (tcp_to(XB, 1, 80), Drop)],
        ),
        (
            "two peers in one rule are OR",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(
                    vec![pods_peer(Some(sel(&[("pod", "b")])), None), pods_peer(None, Some(sel(&[("ns", "y")])))],
                    vec![],
                )],
            )),
            vec![(tcp_to(YA, 1, 80), Allow), (tcp_to(XB, 1, 80), Allow), (tcp_to(XC, 1, 80), Drop)],
        ),
        (
            "matchExpressions In / NotIn / Exists / DoesNotExist",
            base().with_policy(policy(
                "x",
                "p",
                LabelSelector {
                    match_labels: Default::default(),
                    match_expressions: vec![Requirement {
                        key: "pod".into(),
                        op: SelectorOp::NotIn,
                        values: ["b".to_string()].into_iter().collect(),
                    }],
                },
                vec![rule(
                    vec![pods_peer(
                        Some(LabelSelector {
                            match_labels: Default::default(),
                            match_expressions: vec![
                                Requirement {
                                    key: "pod".into(),
                                    op: SelectorOp::In,
                                    values: ["c".into(), "b".into()].into_iter().collect(),
                                },
                                Requirement { key: "pod".into(), op: SelectorOp::Exists, values: BTreeSet::new() },
                                Requirement {
                                    key: "missing".into(),
                                    op: SelectorOp::DoesNotExist,
                                    values: BTreeSet::new(),
                                },
                            ],
                        }),
                        None,
                    )],
                    vec![],
                )],
            )),
            vec![
                (tcp_to(XC, 1, 80), Allow),
                (tcp_to(XB, 1, 80), Allow),
                (tcp_to(XA, 1, 80), Drop),
                (tcp_to(XA, 2, 80), Allow),
            ],
        ),
        (
            "ipBlock with except (IPv4 and IPv6)",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(
                    vec![
                        ip_block("192.168.0.0/16", &["192.168.3.0/24", "192.168.200.7/32"]),
                        ip_block("fd00:1::/48", &["fd00:1:0:5::/64"]),
                    ],
                    vec![],
                )],
            )),
            vec![
                (tcp_to("192.168.0.1", 1, 80), Allow),
                (tcp_to("192.168.255.255", 1, 80), Allow),
                (tcp_to("192.168.3.9", 1, 80), Drop),
                (tcp_to("192.168.200.7", 1, 80), Drop),
                (tcp_to("192.168.200.8", 1, 80), Allow),
                (tcp_to("192.169.0.1", 1, 80), Drop),
                (tcp_to("fd00:1:0:4::1", 1, 80), Allow),
                (tcp_to("fd00:1:0:5::1", 1, 80), Drop),
                (tcp_to("fd00:2::1", 1, 80), Drop),
            ],
        ),
        (
            "endPort range and protocol",
            base().with_policy(policy(
                "x",
                "p",
                sel(&[("pod", "a")]),
                vec![rule(
                    vec![],
                    vec![
                        PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Number(1000)), end_port: Some(2000) },
                        PortSpec { protocol: Protocol::Udp, port: Some(PortRef::Number(53)), end_port: None },
                        PortSpec { protocol: Protocol::Sctp, port: None, end_port: None },
                    ],
                )],
            )),
            vec![
                (tcp_to(YC, 1, 999), Drop),
                (tcp_to(YC, 1, 1000), Allow),
                (tcp_to(YC, 1, 1537), Allow),
                (tcp_to(YC, 1, 2000), Allow),
                (tcp_to(YC, 1, 2001), Drop),
                (Packet { peer: YC.parse().unwrap(), ofport: 1, proto: 17, dport: 53 }, Allow),
                (Packet { peer: YC.parse().unwrap(), ofport: 1, proto: 17, dport: 1000 }, Drop),
                (Packet { peer: YC.parse().unwrap(), ofport: 1, proto: 132, dport: 7 }, Allow),
            ],
        ),
        (
            "empty from and empty ports: everything to the selected pods",
            base().with_policy(policy("x", "p", sel(&[("pod", "a")]), vec![rule(vec![], vec![])])),
            vec![(tcp_to("8.8.8.8", 1, 1), Allow), (tcp_to("fd00::9", 1, 1), Allow), (tcp_to(YB, 1, 65535), Allow)],
        ),
        (
            "several policies add up; one allow is enough",
            base()
                .with_policy(policy("x", "deny", sel(&[("pod", "a")]), vec![]))
                .with_policy(policy(
                    "x",
                    "p1",
                    sel(&[("pod", "a")]),
                    vec![rule(vec![pods_peer(Some(sel(&[("pod", "b")])), None)], vec![tcp(80)])],
                ))
                .with_policy(policy(
                    "x",
                    "p2",
                    LabelSelector::everything(),
                    vec![rule(vec![pods_peer(Some(sel(&[("pod", "c")])), None)], vec![tcp(81)])],
                )),
            vec![
                (tcp_to(XB, 1, 80), Allow),
                (tcp_to(XC, 1, 81), Allow),
                (tcp_to(XB, 1, 81), Drop),
                (tcp_to(XC, 1, 80), Drop),
                (tcp_to(XC, 2, 81), Allow),
                (tcp_to(XC, 2, 80), Drop),
            ],
        ),
        (
            "pods without IPs are not peers",
            {
                let mut m = base().with_policy(policy(
                    "x",
                    "p",
                    sel(&[("pod", "a")]),
                    vec![rule(vec![pods_peer(Some(sel(&[("pod", "c")])), None)], vec![])],
                ));
                m.pods.get_mut(&oref("x", "c")).unwrap().ips.clear();
                m
            },
            vec![(tcp_to(XC, 1, 80), Drop), (tcp_to(XB, 1, 80), Drop)],
        ),
    ]
}

#[test]
fn ingress_semantics_table() {
    for (name, model, probes) in cases() {
        let f = flows(&model);
        for (p, want) in probes {
            assert_eq!(verdict(&f, &p), want, "{name}: {} -> port {} {}/{}", p.peer, p.ofport, p.proto, p.dport);
        }
    }
}

#[test]
fn named_ports_resolve_per_destination_pod() {
    let mut m = base();
    let set_port = |m: &mut Model, name: &str, port: u16| {
        m.pods.get_mut(&oref("x", name)).unwrap().ports =
            vec![ContainerPort { name: Some("http".into()), port, protocol: Protocol::Tcp }];
    };
    set_port(&mut m, "a", 8080);
    set_port(&mut m, "b", 9090);
    let named = PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("http".into())), end_port: None };
    let m = m.with_policy(policy("x", "p", LabelSelector::everything(), vec![rule(vec![], vec![named, tcp(22)])]));
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let f = c.flows();
    assert_eq!(verdict(f, &tcp_to(YA, 1, 8080)), Allow);
    assert_eq!(verdict(f, &tcp_to(YA, 1, 9090)), Drop);
    assert_eq!(verdict(f, &tcp_to(YA, 2, 9090)), Allow);
    assert_eq!(verdict(f, &tcp_to(YA, 2, 8080)), Drop);
    assert_eq!(verdict(f, &tcp_to(YA, 1, 22)), Allow);
    // The rule split into two groups, each its own conjunction id and rule-table entry.
    let rules: Vec<_> = c.rules().rules().values().collect();
    assert_eq!(rules.len(), 2);
    assert_eq!(rules[0].index, 0);
    assert_ne!(rules[0].ports, rules[1].ports);

    // A pod without the named port gets nothing from it but is isolated.
    let named_only = PortSpec { protocol: Protocol::Tcp, port: Some(PortRef::Name("http".into())), end_port: None };
    let mut m2 =
        base().with_policy(policy("x", "p", LabelSelector::everything(), vec![rule(vec![], vec![named_only])]));
    m2.pods.get_mut(&oref("x", "a")).unwrap().ports =
        vec![ContainerPort { name: Some("http".into()), port: 8080, protocol: Protocol::Tcp }];
    let f = flows(&m2);
    assert_eq!(verdict(&f, &tcp_to(YA, 1, 8080)), Allow);
    assert_eq!(verdict(&f, &tcp_to(YA, 2, 8080)), Drop);
    // A UDP named port does not resolve against a TCP container port.
    let udp_named = PortSpec { protocol: Protocol::Udp, port: Some(PortRef::Name("http".into())), end_port: None };
    let mut m3 = base().with_policy(policy("x", "p", sel(&[("pod", "a")]), vec![rule(vec![], vec![udp_named])]));
    m3.pods.get_mut(&oref("x", "a")).unwrap().ports =
        vec![ContainerPort { name: Some("http".into()), port: 8080, protocol: Protocol::Tcp }];
    let f = flows(&m3);
    assert_eq!(verdict(&f, &Packet { peer: YA.parse().unwrap(), ofport: 1, proto: 17, dport: 8080 }), Drop);
}

#[test]
fn logging_flags_follow_the_namespace() {
    let policy_x = policy("x", "p", sel(&[("pod", "a")]), vec![rule(vec![], vec![tcp(80)])]);
    let m = base().with_policy(policy_x.clone());
    let has_controller = |f: &FlowTable, table: u8| {
        f.iter().filter(|(k, _)| k.table == table && k.priority != 0).any(|(_, v)| {
            // A copy to npagent: sent here, or by LogCopy through a pod's meter.
            let copies = |a: &Action| {
                matches!(a, Action::Controller2(_))
                    || matches!(a, Action::ResubmitTable { table, .. } if *table == tables::LOG_COPY)
            };
            v.instructions.iter().any(|i| matches!(i, Instruction::ApplyActions(a) if a.iter().any(copies)))
        })
    };
    let f = flows(&m);
    assert!(!has_controller(&f, tables::INGRESS_RULE));
    assert!(!has_controller(&f, tables::INGRESS_DEFAULT_RULE));
    for value in ["true", "1", "T"] {
        let mut on = m.clone();
        on.namespaces.get_mut("x").unwrap().annotations.insert(LOGGING_ANNOTATION.into(), value.into());
        let f = flows(&on);
        assert!(has_controller(&f, tables::INGRESS_RULE), "{value}");
        assert!(has_controller(&f, tables::INGRESS_DEFAULT_RULE), "{value}");
    }
    let mut bad = m.clone();
    bad.namespaces.get_mut("x").unwrap().annotations.insert(LOGGING_ANNOTATION.into(), "yes".into());
    assert!(!has_controller(&flows(&bad), tables::INGRESS_RULE));
    // Logging in y does not touch x's flows.
    let mut y = m.clone();
    y.namespaces.get_mut("y").unwrap().annotations.insert(LOGGING_ANNOTATION.into(), "true".into());
    assert_eq!(flows(&y), f);
}

#[test]
fn a_local_pod_the_model_does_not_know_fails_closed() {
    // A bridge port whose Pod the model lacks (its manifest never was valid): any policy of
    // its namespace might select it, so each isolates it, with nothing allowed.
    let mut m = base().with_policy(policy("ghost", "p", LabelSelector::everything(), vec![rule(vec![], vec![])]));
    m = m.with_port(port(9, "ghost", "nobody", 9)).with_port(port(10, "quiet", "nobody", 10));
    let f = flows(&m);
    assert_eq!(verdict(&f, &tcp_to(XB, 9, 80)), Drop);
    assert_eq!(
        policy_eval::verdict(
            &f,
            Direction::Egress,
            &Packet { peer: XB.parse().unwrap(), ofport: 9, proto: 6, dport: 80 }
        ),
        Allow
    );
    // A namespace without policies isolates nobody.
    assert_eq!(verdict(&f, &tcp_to(XB, 10, 80)), Allow);
    // Once the pod is known, the policy's rules apply to it.
    let f = flows(&m.with_pod(pod("ghost", "nobody", &[], &["10.9.0.9"])));
    assert_eq!(verdict(&f, &tcp_to(XB, 9, 80)), Allow);
}
