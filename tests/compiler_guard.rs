//! What the tables before the policy tables mean, whatever shape their flows take: evaluated
//! the way OVS does (highest-priority matching flow, `goto_table`, `ct(table=...)`), from the
//! Classifier to where a packet leaves the pipeline or meets the ingress policy tables.
//! A pod's port passes only its own MAC with its own addresses; IP to a local pod's address
//! meets that pod's policy whatever its destination MAC.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, tables, Config, FlowTable, IdAllocator};
use npagent::model::{LocalPort, Model};
use ofp::{Action, Instruction, Oxm};
use std::net::IpAddr;

/// Where a packet's walk through the pre-policy tables ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Dropped,
    /// Forwarded by OVS's NORMAL (ARP, neighbour discovery, the node's own frames).
    Normal,
    /// Reached IngressRule with this `reg1` (the local pod whose policy judges it).
    Policy(Option<u32>),
}
use Fate::*;

#[derive(Debug, Clone, Copy)]
struct Frame {
    in_port: u32,
    dl_src: [u8; 6],
    dl_dst: [u8; 6],
    eth_type: u16,
    /// IP source and destination, or ARP spa and tpa.
    src: IpAddr,
    dst: IpAddr,
    arp_sha: [u8; 6],
    /// ICMPv6 neighbour discovery: (type, target).
    nd: Option<(u8, IpAddr)>,
}

const BROADCAST: [u8; 6] = [0xff; 6];
const IP4_MULTICAST: [u8; 6] = [0x01, 0x00, 0x5e, 0, 0, 1];
const IP6_MULTICAST: [u8; 6] = [0x33, 0x33, 0, 0, 0, 1];
const UNKNOWN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
const NODE_PORT: u32 = 0xffff_fffe; // LOCAL: not a pod's port

fn masked_eq<const N: usize>(v: [u8; N], want: [u8; N], mask: Option<[u8; N]>) -> bool {
    let mask = mask.unwrap_or([0xff; N]);
    (0..N).all(|i| v[i] & mask[i] == want[i] & mask[i])
}

fn matches(f: &Oxm, p: &Frame, reg1: Option<u32>) -> bool {
    let v4 = |a: IpAddr| match a {
        IpAddr::V4(a) => Some(a.octets()),
        _ => None,
    };
    let v6 = |a: IpAddr| match a {
        IpAddr::V6(a) => Some(a.octets()),
        _ => None,
    };
    match f {
        Oxm::InPort(o) => *o == p.in_port,
        Oxm::EthSrc(m) => masked_eq(p.dl_src, m.value, m.mask),
        Oxm::EthDst(m) => masked_eq(p.dl_dst, m.value, m.mask),
        Oxm::EthType(t) => *t == p.eth_type,
        Oxm::Ipv4Src(m) | Oxm::ArpSpa(m) => {
            v4(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::Ipv4Dst(m) | Oxm::ArpTpa(m) => {
            v4(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::Ipv6Src(m) => v6(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        Oxm::Ipv6Dst(m) => v6(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        Oxm::ArpSha(m) => masked_eq(p.arp_sha, m.value, m.mask),
        Oxm::IpProto(proto) => *proto == if p.nd.is_some() { 58 } else { 17 },
        Oxm::Icmpv6Type(t) => p.nd.is_some_and(|(kind, _)| kind == *t),
        Oxm::Ipv6NdTarget(m) => p.nd.is_some_and(|(_, target)| {
            v6(target).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }),
        // A new, valid connection.
        Oxm::CtState(m) => {
            let state = 0x21; // +new+trk
            state & m.mask.unwrap_or(u32::MAX) == m.value & m.mask.unwrap_or(u32::MAX)
        }
        Oxm::XReg { index: 0, value } => {
            let r = u64::from(reg1.unwrap_or(0));
            r & value.mask.unwrap_or(u64::MAX) == value.value & value.mask.unwrap_or(u64::MAX)
        }
        other => panic!("unexpected field before the policy tables: {other:?}"),
    }
}

fn fate(flows: &FlowTable, p: &Frame) -> Fate {
    let mut table = tables::CLASSIFIER;
    let mut reg1 = None;
    for _ in 0..16 {
        if table == tables::INGRESS_RULE {
            return Policy(reg1);
        }
        let best = flows
            .iter()
            .filter(|(k, _)| k.table == table && k.match_.fields.iter().all(|f| matches(f, p, reg1)))
            .max_by_key(|(k, _)| k.priority);
        let Some((_, v)) = best else { return Dropped };
        let mut next = None;
        for i in &v.instructions {
            match i {
                Instruction::GotoTable(t) => next = Some(*t),
                Instruction::ApplyActions(acts) => {
                    for a in acts {
                        match a {
                            Action::Output { port: ofp::port::NORMAL, .. } => return Normal,
                            Action::Ct(ct) if ct.table.is_some() => next = ct.table,
                            Action::SetField(Oxm::Reg { index: 1, value }) => reg1 = Some(value.value),
                            other => panic!("unexpected action before the policy tables: {other:?}"),
                        }
                    }
                }
                other => panic!("unexpected instruction: {other:?}"),
            }
        }
        match next {
            Some(t) => table = t,
            None => return Dropped,
        }
    }
    panic!("loop in the pipeline");
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// x/a (port 1, IPv4 and IPv6), x/b (port 2), y/a (port 3, no MAC in OVSDB), y/b (port 4, no
/// address in OVSDB), and port 5 of x/c claiming x/b's address (a stale OVSDB row).
fn model() -> Model {
    let mut m = Model::default().with_ns(namespace("x", &[], &[])).with_ns(namespace("y", &[], &[]));
    for (ns, name, pod_ip) in [
        ("x", "a", "10.0.0.1"),
        ("x", "b", "10.0.0.2"),
        ("x", "c", "10.0.0.3"),
        ("y", "a", "10.0.1.1"),
        ("y", "b", "10.0.1.2"),
    ] {
        m = m.with_pod(pod(ns, name, &[], &[pod_ip]));
    }
    let no_mac = LocalPort { mac: None, ..port_with_ips(3, "y", "a", 3, &["10.0.1.1"]) };
    m.with_port(port_with_ips(1, "x", "a", 1, &["10.0.0.1", "fd00::1"]))
        .with_port(port_with_ips(2, "x", "b", 2, &["10.0.0.2"]))
        .with_port(no_mac)
        .with_port(port(4, "y", "b", 4))
        .with_port(port_with_ips(5, "x", "c", 5, &["10.0.0.2"]))
}

fn udp(in_port: u32, dl_src: [u8; 6], src: &str, dl_dst: [u8; 6], dst: &str) -> Frame {
    let src = ip(src);
    let eth_type = if src.is_ipv4() { 0x0800 } else { 0x86dd };
    Frame { in_port, dl_src, dl_dst, eth_type, src, dst: ip(dst), arp_sha: dl_src, nd: None }
}

/// A neighbour solicitation (135) or advertisement (136) for `target`, from `src`.
fn nd(in_port: u32, dl_src: [u8; 6], src: &str, kind: u8, target: &str) -> Frame {
    Frame { nd: Some((kind, ip(target))), ..udp(in_port, dl_src, src, IP6_MULTICAST, "ff02::1") }
}

fn arp(in_port: u32, dl_src: [u8; 6], spa: &str, sha: [u8; 6], tpa: &str) -> Frame {
    Frame { in_port, dl_src, dl_dst: BROADCAST, eth_type: 0x0806, src: ip(spa), dst: ip(tpa), arp_sha: sha, nd: None }
}

#[test]
fn a_pod_port_sends_only_as_its_pod() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let mac = |o: u32| m.ports[&o].mac.unwrap();
    let (a, b) = (mac(1), mac(2));
    let to_b = |f: Frame| Frame { dl_dst: b, ..f };

    // Genuine: own MAC, own addresses (both families), own ARP.
    assert_eq!(fate(flows, &to_b(udp(1, a, "10.0.0.1", b, "10.0.0.2"))), Policy(Some(2)));
    assert_eq!(fate(flows, &udp(1, a, "fd00::1", UNKNOWN, "fd00::9")), Policy(None));
    assert_eq!(fate(flows, &arp(1, a, "10.0.0.1", a, "10.0.0.2")), Normal);
    // Forged: another pod's address, an address nobody has, another MAC, ARP claims.
    for f in [
        udp(1, a, "10.0.0.2", b, "10.0.0.2"),
        udp(1, a, "10.0.0.99", b, "10.0.0.2"),
        udp(1, b, "10.0.0.1", b, "10.0.0.2"),
        udp(1, UNKNOWN, "10.0.0.1", b, "10.0.0.2"),
        udp(1, a, "fd00::2", UNKNOWN, "fd00::9"),
        arp(1, a, "10.0.0.2", a, "10.0.0.3"),
        arp(1, a, "10.0.0.1", b, "10.0.0.3"),
        arp(1, b, "10.0.0.1", a, "10.0.0.3"),
        Frame { eth_type: 0x88cc, ..udp(1, a, "10.0.0.1", b, "10.0.0.2") },
    ] {
        assert_eq!(fate(flows, &f), Dropped, "{f:?}");
    }
    // Neighbour discovery (x/a has fd00::1): solicitations from its own, link-local or the
    // unspecified address; advertisements only for its own or a link-local address.
    for f in [
        nd(1, a, "fd00::1", 135, "fd00::2"),
        nd(1, a, "fe80::1", 135, "fd00::2"),
        nd(1, a, "::", 135, "fd00::1"),
        nd(1, a, "fd00::1", 136, "fd00::1"),
        nd(1, a, "fe80::1", 136, "fe80::1"),
    ] {
        assert_eq!(fate(flows, &f), Normal, "{f:?}");
    }
    for f in [
        nd(1, a, "fd00::2", 135, "fd00::9"),
        nd(1, a, "fd00::1", 136, "fd00::2"),
        nd(1, b, "fd00::1", 135, "fd00::2"),
        nd(2, b, "fe80::2", 135, "fd00::1"),
    ] {
        assert_eq!(fate(flows, &f), Dropped, "{f:?}");
    }
    // A port whose MAC or addresses OVSDB does not give sends nothing.
    assert_eq!(fate(flows, &udp(3, [0x0a, 0x58, 0, 0, 0, 3], "10.0.1.1", b, "10.0.0.2")), Dropped);
    assert_eq!(
        fate(flows, &arp(3, [0x0a, 0x58, 0, 0, 0, 3], "10.0.1.1", [0x0a, 0x58, 0, 0, 0, 3], "10.0.0.2")),
        Dropped
    );
    assert_eq!(fate(flows, &udp(4, mac(4), "10.0.1.2", b, "10.0.0.2")), Dropped);
    // The node's own ports are not checked.
    assert_eq!(fate(flows, &udp(NODE_PORT, UNKNOWN, "192.168.1.1", b, "10.0.0.2")), Policy(Some(2)));
    assert_eq!(fate(flows, &arp(NODE_PORT, UNKNOWN, "192.168.1.1", UNKNOWN, "10.0.0.2")), Normal);
}

#[test]
fn ip_to_a_local_pod_meets_its_policy_whatever_the_mac() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    let b = m.ports[&2].mac.unwrap();
    for dl_dst in [a, b, BROADCAST, IP4_MULTICAST, IP6_MULTICAST, UNKNOWN] {
        for from in [udp(2, b, "10.0.0.2", dl_dst, "10.0.0.1"), udp(NODE_PORT, UNKNOWN, "10.9.9.9", dl_dst, "10.0.0.1")]
        {
            assert_eq!(fate(flows, &from), Policy(Some(1)), "{from:?}");
        }
        assert_eq!(fate(flows, &udp(NODE_PORT, UNKNOWN, "fd00::9", dl_dst, "fd00::1")), Policy(Some(1)));
        // Two ports claim 10.0.0.2: one of them judges and receives it, never none.
        assert_eq!(fate(flows, &udp(1, a, "10.0.0.1", dl_dst, "10.0.0.2")), Policy(Some(2)));
    }
    // Beyond the node's pods: to a pod's MAC, that pod's policy; to a group MAC, nowhere.
    assert_eq!(fate(flows, &udp(NODE_PORT, UNKNOWN, "10.9.9.9", a, "10.7.7.7")), Policy(Some(1)));
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", UNKNOWN, "10.7.7.7")), Policy(None));
    for group in [BROADCAST, IP4_MULTICAST, IP6_MULTICAST] {
        assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", group, "10.7.7.7")), Dropped);
        assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", group, "255.255.255.255")), Dropped);
    }
}
