//! What the pipeline means for single frames, whatever shape its flows take: evaluated the
//! way OVS does (highest-priority matching flow, `goto_table`, `ct(table=...)` with the
//! `ct_mark` a commit sets, `resubmit`, registers),
//! from the Classifier to the port a frame leaves by, for a new connection. A pod's port
//! passes only its own untagged MAC with its own addresses; IP reaches a local pod only for
//! its address and through its policy; everything else a pod sends goes to the gateway;
//! ports of no class send and receive nothing; ARP is answered by the switch.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failure should panic

use npagent::compiler::synthetic::*;
use npagent::compiler::{compile, tables, Config, FlowTable, IdAllocator};
use npagent::model::{cidr::parse_cidr, LocalPort, Model, Node, NodePort};
use ofp::{Action, Instruction, Oxm};
use std::net::IpAddr;

/// Where a frame ends (OVS never outputs to the port a frame came in by, but for IN_PORT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Dropped,
    /// Sent out of a port, with the destination MAC it then has; `judged` when it went
    /// through the ingress policy tables of the pod in `reg1` (not skipped past them).
    Out {
        port: u32,
        dl_dst: [u8; 6],
        judged: bool,
    },
    /// An ARP request the switch answered itself, back out of the port it came in by.
    Answered {
        mac: [u8; 6],
    },
}
use Fate::*;

#[derive(Debug, Clone, Copy)]
struct Frame {
    in_port: u32,
    /// 802.1Q tag (its TCI), if any.
    vlan: Option<u16>,
    dl_src: [u8; 6],
    dl_dst: [u8; 6],
    eth_type: u16,
    /// IP source and destination, or ARP spa and tpa.
    src: IpAddr,
    dst: IpAddr,
    arp_sha: [u8; 6],
    arp_op: u16,
    /// ICMPv6 neighbour discovery: (type, target).
    nd: Option<(u8, IpAddr)>,
}

const BROADCAST: [u8; 6] = [0xff; 6];
const IP4_MULTICAST: [u8; 6] = [0x01, 0x00, 0x5e, 0, 0, 1];
const IP6_MULTICAST: [u8; 6] = [0x33, 0x33, 0, 0, 0, 1];
const UNKNOWN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];
const LOCAL: u32 = 0xffff_fffe;
/// A port OVSDB knows nothing about (no external_ids yet, a stray veth).
const STRAY: u32 = 50;
const GW: u32 = 100;
const UPLINK: u32 = 200;

fn masked_eq<const N: usize>(v: [u8; N], want: [u8; N], mask: Option<[u8; N]>) -> bool {
    let mask = mask.unwrap_or([0xff; N]);
    (0..N).all(|i| v[i] & mask[i] == want[i] & mask[i])
}

#[derive(Debug, Default, Clone, Copy)]
struct Regs {
    reg1: u32,
    reg2: u32,
    reg3: u32,
    reg4: u32,
    /// The `ct_mark` of the packet's connection in the zone of its last `ct` (a commit
    /// succeeds here: no zone is full).
    ct_mark: u32,
}

fn matches(f: &Oxm, p: &Frame, r: &Regs) -> bool {
    let v4 = |a: IpAddr| match a {
        IpAddr::V4(a) => Some(a.octets()),
        _ => None,
    };
    let v6 = |a: IpAddr| match a {
        IpAddr::V6(a) => Some(a.octets()),
        _ => None,
    };
    let xreg = |v: u64, m: &ofp::Masked<u64>| v & m.mask.unwrap_or(u64::MAX) == m.value & m.mask.unwrap_or(u64::MAX);
    match f {
        Oxm::InPort(o) => *o == p.in_port,
        Oxm::VlanVid(m) => {
            let vid = p.vlan.map_or(0, |tci| 0x1000 | (tci & 0x0fff));
            vid & m.mask.unwrap_or(0x1fff) == m.value & m.mask.unwrap_or(0x1fff)
        }
        Oxm::EthSrc(m) => masked_eq(p.dl_src, m.value, m.mask),
        Oxm::EthDst(m) => masked_eq(p.dl_dst, m.value, m.mask),
        Oxm::EthType(t) => *t == p.eth_type,
        Oxm::ArpOp(op) => *op == p.arp_op,
        Oxm::Ipv4Src(m) | Oxm::ArpSpa(m) => {
            v4(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::Ipv4Dst(m) | Oxm::ArpTpa(m) => {
            v4(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::Ipv6Src(m) => v6(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        Oxm::Ipv6Dst(m) => v6(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        // A new connection's tuple is its first packet's.
        Oxm::CtNwSrc(m) => {
            p.eth_type == 0x0800
                && v4(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::CtNwDst(m) => {
            p.eth_type == 0x0800
                && v4(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }
        Oxm::CtIpv6Src(m) => v6(p.src).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        Oxm::CtIpv6Dst(m) => v6(p.dst).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets()))),
        Oxm::CtNwProto(proto) => *proto == if p.nd.is_some() { 58 } else { 17 },
        Oxm::ArpSha(m) => masked_eq(p.arp_sha, m.value, m.mask),
        Oxm::IpProto(proto) => *proto == if p.nd.is_some() { 58 } else { 17 },
        Oxm::UdpDst(_) | Oxm::TcpDst(_) | Oxm::SctpDst(_) | Oxm::SctpSrc(_) | Oxm::CtTpDst(_) => false,
        // No frame here is a fragment.
        Oxm::IpFrag(_) => false,
        Oxm::Icmpv6Type(t) => p.nd.is_some_and(|(kind, _)| kind == *t),
        Oxm::Ipv6NdTarget(m) => p.nd.is_some_and(|(_, target)| {
            v6(target).is_some_and(|a| masked_eq(a, m.value.octets(), m.mask.map(|x| x.octets())))
        }),
        // A new, valid connection: not a reply, no mark.
        Oxm::CtState(m) => {
            let state = 0x21; // +new+trk
            state & m.mask.unwrap_or(u32::MAX) == m.value & m.mask.unwrap_or(u32::MAX)
        }
        Oxm::CtMark(m) => r.ct_mark & m.mask.unwrap_or(u32::MAX) == m.value & m.mask.unwrap_or(u32::MAX),
        Oxm::XReg { index: 0, value } => xreg(u64::from(r.reg1), value),
        Oxm::XReg { index: 1, value } => xreg((u64::from(r.reg2) << 32) | u64::from(r.reg3), value),
        Oxm::XReg { index: 2, value } => xreg(u64::from(r.reg4) << 32, value),
        // A log copy's kind and rule (reg6, reg7): the walker makes no copies, which change no
        // packet's fate. The staged verdicts (reg8 to reg11): none, as no staged policy
        // touches these pods.
        Oxm::XReg { index: 3..=5, value } => xreg(0, value),
        // Clause flows of the policies (no conjunction completes without every clause).
        Oxm::ConjId(_) => false,
        other => panic!("unexpected field: {other:?}"),
    }
}

fn fate(flows: &FlowTable, frame: &Frame) -> Fate {
    let mut p = *frame;
    let mut table = tables::CLASSIFIER;
    let mut regs = Regs::default();
    let mut judged = false;
    for _ in 0..32 {
        if table == tables::INGRESS_DEFAULT_RULE {
            judged = true;
        }
        let best = flows
            .iter()
            .filter(|(k, _)| k.table == table && k.match_.fields.iter().all(|f| matches(f, &p, &regs)))
            .max_by_key(|(k, _)| k.priority);
        let Some((_, v)) = best else { return Dropped };
        let mut next = None;
        for i in &v.instructions {
            match i {
                Instruction::GotoTable(t) => next = Some(*t),
                Instruction::ApplyActions(acts) => {
                    for a in acts {
                        match a {
                            Action::Output { port: ofp::port::IN_PORT, .. } => {
                                let mac = acts.iter().find_map(|a| match a {
                                    Action::SetField(Oxm::ArpSha(m)) => Some(m.value),
                                    _ => None,
                                });
                                return Answered { mac: mac.expect("an ARP reply names its MAC") };
                            }
                            Action::Output { port, .. } => return Out { port: *port, dl_dst: p.dl_dst, judged },
                            Action::Ct(ct) => {
                                if ct.table.is_some() {
                                    next = ct.table;
                                    // The recirculated packet has the mark the commit set.
                                    regs.ct_mark = ct
                                        .actions
                                        .iter()
                                        .find_map(|a| match a {
                                            Action::SetField(Oxm::CtMark(m)) if ct.flags & 1 == 1 => Some(m.value),
                                            _ => None,
                                        })
                                        .unwrap_or(0);
                                }
                            }
                            Action::ResubmitTable { table, .. } => next = Some(*table),
                            Action::SetField(Oxm::Reg { index: 1, value }) => regs.reg1 = value.value,
                            Action::SetField(Oxm::Reg { index: 2, value }) => regs.reg2 = value.value,
                            Action::SetField(Oxm::Reg { index: 3, value }) => regs.reg3 = value.value,
                            Action::SetField(Oxm::Reg { index: 4, value }) => regs.reg4 = value.value,
                            Action::SetField(Oxm::EthDst(m)) => p.dl_dst = m.value,
                            Action::SetField(_) | Action::CopyField { .. } => {}
                            Action::Controller2(_) => {}
                            other => panic!("unexpected action: {other:?}"),
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
/// address in OVSDB), and port 5 of x/c claiming x/b's address (a stale OVSDB row); the node
/// of `synthetic::node` (gateway 100 at 10.0.0.254, uplink 200, Services 10.96.0.0/12) and
/// node address 192.168.0.10.
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
    let mut n = node();
    n.node_ips.insert(ip("192.168.0.10"));
    m.with_port(port_with_ips(1, "x", "a", 1, &["10.0.0.1", "fd00::1"]))
        .with_port(port_with_ips(2, "x", "b", 2, &["10.0.0.2"]))
        .with_port(no_mac)
        .with_port(port(4, "y", "b", 4))
        .with_port(port_with_ips(5, "x", "c", 5, &["10.0.0.2"]))
        .with_node(n)
}

fn udp(in_port: u32, dl_src: [u8; 6], src: &str, dl_dst: [u8; 6], dst: &str) -> Frame {
    let src = ip(src);
    let eth_type = if src.is_ipv4() { 0x0800 } else { 0x86dd };
    Frame { in_port, vlan: None, dl_src, dl_dst, eth_type, src, dst: ip(dst), arp_sha: dl_src, arp_op: 0, nd: None }
}

/// A neighbour solicitation (135) or advertisement (136) for `target`, from `src` to `dst`.
fn nd_to(in_port: u32, dl_src: [u8; 6], src: &str, kind: u8, target: &str, dst: &str) -> Frame {
    Frame { nd: Some((kind, ip(target))), ..udp(in_port, dl_src, src, IP6_MULTICAST, dst) }
}

fn nd(in_port: u32, dl_src: [u8; 6], src: &str, kind: u8, target: &str) -> Frame {
    nd_to(in_port, dl_src, src, kind, target, "ff02::1")
}

/// An ARP request.
fn arp(in_port: u32, dl_src: [u8; 6], spa: &str, sha: [u8; 6], tpa: &str) -> Frame {
    Frame { eth_type: 0x0806, arp_op: 1, dl_dst: BROADCAST, arp_sha: sha, ..udp(in_port, dl_src, spa, BROADCAST, tpa) }
}

fn arp_reply(in_port: u32, dl_src: [u8; 6], spa: &str, tpa: &str) -> Frame {
    Frame { arp_op: 2, ..arp(in_port, dl_src, spa, dl_src, tpa) }
}

fn out(port: u32, dl_dst: [u8; 6], judged: bool) -> Fate {
    Out { port, dl_dst, judged }
}

#[test]
fn a_pod_port_sends_only_as_its_pod() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let mac = |o: u32| m.ports[&o].mac.unwrap();
    let (a, b) = (mac(1), mac(2));

    // Genuine: own MAC, own addresses (both families), own ARP (answered by the switch).
    assert_eq!(fate(flows, &udp(1, a, "10.0.0.1", b, "10.0.0.2")), out(2, b, true));
    assert_eq!(fate(flows, &udp(1, a, "fd00::1", UNKNOWN, "fd00::9")), out(GW, GATEWAY_MAC, true));
    assert_eq!(fate(flows, &arp(1, a, "10.0.0.1", a, "10.0.0.2")), Answered { mac: b });
    assert_eq!(fate(flows, &arp(1, a, "10.0.0.1", a, "10.0.0.254")), Answered { mac: GATEWAY_MAC });
    // Forged: another pod's address, an address nobody has, another MAC, ARP claims, other
    // ethertypes, 802.1Q tags (also priority tags, VID 0).
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
        Frame { vlan: Some(5), ..udp(1, a, "10.0.0.1", b, "10.0.0.2") },
        Frame { vlan: Some(0), ..udp(1, a, "10.0.0.1", b, "10.0.0.2") },
        Frame { vlan: Some(0x2005), ..arp(1, a, "10.0.0.1", a, "10.0.0.2") },
    ] {
        assert_eq!(fate(flows, &f), Dropped, "{f:?}");
    }
    // Neighbour discovery (x/a has fd00::1): solicitations from its own or link-local
    // address for any target, from :: only for its own (duplicate address detection);
    // advertisements only for its own or a link-local address. Each reaches only the
    // target's holder (the gateway for addresses beyond the node's pods).
    assert_eq!(fate(flows, &nd(1, a, "fd00::1", 135, "fd00::fe")), out(GW, IP6_MULTICAST, false));
    assert_eq!(fate(flows, &nd(1, a, "fe80::1", 135, "fd00::2")), out(GW, IP6_MULTICAST, false));
    // DAD for its own address goes to its own port, which OVS never sends back out of: no
    // one else hears it.
    assert_eq!(fate(flows, &nd(1, a, "::", 135, "fd00::1")), out(1, IP6_MULTICAST, false));
    assert_eq!(fate(flows, &nd_to(1, a, "fd00::1", 136, "fd00::1", "fd00::fe")), out(GW, IP6_MULTICAST, false));
    for f in [
        nd(1, a, "fd00::2", 135, "fd00::9"),
        nd(1, a, "fd00::1", 136, "fd00::2"),
        nd(1, b, "fd00::1", 135, "fd00::2"),
        nd(2, b, "fe80::2", 135, "fd00::1"),
        // DAD for someone else's address: another pod's new address would fail.
        nd(1, a, "::", 135, "fd00::2"),
        nd(1, a, "::", 135, "fd00::fe"),
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
}

#[test]
fn ports_of_no_class_send_and_receive_nothing() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    for port in [LOCAL, STRAY] {
        assert_eq!(fate(flows, &udp(port, UNKNOWN, "10.0.0.254", a, "10.0.0.1")), Dropped);
        assert_eq!(fate(flows, &udp(port, UNKNOWN, "192.168.1.1", a, "10.0.0.1")), Dropped);
        assert_eq!(fate(flows, &arp(port, UNKNOWN, "192.168.1.1", UNKNOWN, "10.0.0.1")), Dropped);
        assert_eq!(fate(flows, &nd(port, UNKNOWN, "fe80::9", 135, "fd00::1")), Dropped);
    }
    // Nothing anyone sends is output to them: every output names a pod or node port.
    for (k, v) in flows {
        for i in &v.instructions {
            if let Instruction::ApplyActions(acts) = i {
                for act in acts {
                    if let Action::Output { port, .. } = act {
                        assert!(
                            [1, 2, 3, 4, 5, GW, UPLINK, ofp::port::IN_PORT, ofp::port::CONTROLLER].contains(port),
                            "{k:?} outputs to {port:#x}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn ip_reaches_a_local_pod_only_for_its_address_and_through_its_policy() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    let b = m.ports[&2].mac.unwrap();
    for dl_dst in [a, b, BROADCAST, IP4_MULTICAST, IP6_MULTICAST, UNKNOWN, GATEWAY_MAC] {
        // From a pod, the gateway and an uplink: x/a's policy judges it, x/a's MAC it gets.
        for from in [
            udp(2, b, "10.0.0.2", dl_dst, "10.0.0.1"),
            udp(GW, GATEWAY_MAC, "10.9.9.9", dl_dst, "10.0.0.1"),
            udp(UPLINK, UNKNOWN, "10.9.9.9", dl_dst, "10.0.0.1"),
        ] {
            assert_eq!(fate(flows, &from), out(1, a, true), "{from:?}");
        }
        assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "fd00::9", dl_dst, "fd00::1")), out(1, a, true));
        // Two ports claim 10.0.0.2: one of them judges and receives it, never none.
        assert_eq!(fate(flows, &udp(1, a, "10.0.0.1", dl_dst, "10.0.0.2")), out(2, b, true));
        // A pod's IP for no local pod goes to the gateway (the node routes it), whatever MAC
        // it was sent to: never to the pod whose MAC it names, never flooded.
        for dst in ["10.7.7.7", "255.255.255.255", "224.0.0.1", "10.0.0.255"] {
            assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", dl_dst, dst)), out(GW, GATEWAY_MAC, true), "{dst}");
            // From the node's side, nothing to route it to.
            assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.9.9.9", dl_dst, dst)), Dropped, "{dst}");
            assert_eq!(fate(flows, &udp(UPLINK, UNKNOWN, "10.9.9.9", dl_dst, dst)), Dropped, "{dst}");
        }
    }
    // Tagged frames from the node's ports are dropped too.
    assert_eq!(fate(flows, &Frame { vlan: Some(7), ..udp(UPLINK, UNKNOWN, "10.9.9.9", a, "10.0.0.1") }), Dropped);
    assert_eq!(fate(flows, &Frame { vlan: Some(7), ..udp(GW, GATEWAY_MAC, "10.9.9.9", a, "10.0.0.1") }), Dropped);
}

#[test]
fn arp_is_answered_by_the_switch_and_never_flooded() {
    let m = model();
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    let b = m.ports[&2].mac.unwrap();
    // The node asks for a pod, a pod for the gateway or another pod: the switch answers.
    assert_eq!(fate(flows, &arp(GW, GATEWAY_MAC, "10.0.0.254", GATEWAY_MAC, "10.0.0.1")), Answered { mac: a });
    assert_eq!(fate(flows, &arp(2, b, "10.0.0.2", b, "10.0.0.1")), Answered { mac: a });
    assert_eq!(fate(flows, &arp(2, b, "10.0.0.2", b, "10.0.0.254")), Answered { mac: GATEWAY_MAC });
    // A pod asks for an address beyond the node's pods: only the gateway hears it.
    assert_eq!(fate(flows, &arp(2, b, "10.0.0.2", b, "10.7.7.7")), out(GW, BROADCAST, false));
    // The gateway's answer reaches the asker alone; a pod's unsolicited reply to another pod
    // reaches only the gateway (no ARP channel between pods).
    assert_eq!(fate(flows, &arp_reply(GW, GATEWAY_MAC, "10.7.7.7", "10.0.0.2")), out(2, BROADCAST, false));
    assert_eq!(fate(flows, &arp_reply(2, b, "10.0.0.2", "10.0.0.1")), out(GW, BROADCAST, false));
    // A pod without a MAC in OVSDB is not answered for (nothing to answer with), nor does it
    // hear the request: only the gateway does.
    assert_eq!(fate(flows, &arp(2, b, "10.0.0.2", b, "10.0.1.1")), out(GW, BROADCAST, false));
}

#[test]
fn the_node_reaches_isolated_pods_and_services_meet_egress_after_dnat() {
    let mut m = model();
    // x/a isolated for ingress with nothing allowed; x/b isolated for egress likewise.
    m = m.with_policy(policy("x", "deny-a", sel(&[]), vec![]));
    let mut deny_b = policy("x", "deny-b-egress", sel(&[]), vec![]);
    (deny_b.affects_ingress, deny_b.affects_egress) = (false, true);
    m = m.with_policy(deny_b);
    for r in ["a", "b", "c"] {
        m.pods.get_mut(&oref("x", r)).unwrap().labels.insert("pod", r);
    }
    m.policies.get_mut(&oref("x", "deny-a")).unwrap().pod_selector = sel(&[("pod", "a")]);
    m.policies.get_mut(&oref("x", "deny-b-egress")).unwrap().pod_selector = sel(&[("pod", "b")]);
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    let b = m.ports[&2].mac.unwrap();

    // The node's own addresses reach x/a past its isolation (kubelet's probes), unjudged;
    // another source through the gateway (a NodePort client, another node's pod) does not.
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.0.0.254", a, "10.0.0.1")), out(1, a, false));
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "192.168.0.10", a, "10.0.0.1")), out(1, a, false));
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.9.9.9", a, "10.0.0.1")), Dropped);
    // A node address from anywhere but the gateway is no proof of anything.
    assert_eq!(fate(flows, &udp(UPLINK, UNKNOWN, "10.0.0.254", a, "10.0.0.1")), Dropped);
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.254", a, "10.0.0.1")), Dropped);

    // x/b (egress-isolated) to a ClusterIP: the first pass goes to the gateway unjudged...
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", GATEWAY_MAC, "10.96.0.10")), out(GW, GATEWAY_MAC, false));
    // ...and after DNAT, back from the gateway with x/b's address, x/b's egress drops it,
    // whichever backend it was sent to.
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.0.0.2", a, "10.0.1.1")), Dropped);
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.0.0.2", a, "10.7.7.7")), Dropped);
    // Without its egress policy, the same second pass reaches the backend.
    let mut open = m.clone();
    open.policies.remove(&oref("x", "deny-b-egress"));
    let c2 = compile(&open, Config::default(), IdAllocator::new(60), 0);
    let y_a_no_mac = Out { port: 3, dl_dst: a, judged: true };
    assert_eq!(fate(c2.flows(), &udp(GW, GATEWAY_MAC, "10.0.0.2", a, "10.0.1.1")), y_a_no_mac);
    // x/b's own traffic to a pod (not through a Service) is judged by its egress too.
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", a, "10.0.1.1")), Dropped);
}

#[test]
fn without_a_gateway_pods_reach_only_local_pods() {
    let mut m = model();
    m.node =
        Node { uplinks: vec![NodePort { ofport: UPLINK, interface: "uplink0".into(), mac: None }], ..Node::default() };
    m.node.service_cidrs = vec![parse_cidr("10.96.0.0/12").unwrap()];
    let c = compile(&m, Config::default(), IdAllocator::new(60), 0);
    let flows = c.flows();
    let a = m.ports[&1].mac.unwrap();
    let b = m.ports[&2].mac.unwrap();
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", a, "10.0.0.1")), out(1, a, true));
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", GATEWAY_MAC, "10.96.0.10")), Dropped);
    assert_eq!(fate(flows, &udp(2, b, "10.0.0.2", UNKNOWN, "10.7.7.7")), Dropped);
    assert_eq!(fate(flows, &udp(GW, GATEWAY_MAC, "10.0.0.254", a, "10.0.0.1")), Dropped);
    assert_eq!(fate(flows, &udp(UPLINK, UNKNOWN, "10.9.9.9", a, "10.0.0.1")), out(1, a, true));
}
