//! The flows that do not depend on policies: the fixed pipeline, and the flows of each local
//! pod's port (classification, spoof guard, forwarding, output). `docs/pipeline.md` explains
//! the pipeline table by table; this module is its source of truth.

use super::cookie::{self, Kind};
use super::flow::{self, ct, FlowKey, FlowValue, ETH_ARP, ETH_IP, ETH_IPV6};
use super::tables;
use crate::model::LocalPort;
use ofp::{Action, Instruction, Masked, Oxm};
use std::net::{IpAddr, Ipv6Addr};

const ICMPV6: u8 = 58;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
/// The group bit of a MAC address: set in broadcast and multicast addresses.
const MAC_GROUP_BIT: [u8; 6] = [0x01, 0, 0, 0, 0, 0];
/// fe80::/10: link-local addresses, which no policy names but neighbour discovery uses.
const LINK_LOCAL: (Ipv6Addr, Ipv6Addr) =
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), Ipv6Addr::new(0xffc0, 0, 0, 0, 0, 0, 0, 0));

fn apply(actions: Vec<Action>) -> Instruction {
    Instruction::ApplyActions(actions)
}

fn normal() -> Instruction {
    apply(vec![flow::output(ofp::port::NORMAL)])
}

fn into_conntrack() -> Instruction {
    apply(vec![flow::ct_action(false, Some(tables::CONNTRACK_STATE))])
}

fn eth_type(ip: &IpAddr) -> u16 {
    if ip.is_ipv4() {
        ETH_IP
    } else {
        ETH_IPV6
    }
}

/// The fixed flows of the pipeline.
pub fn pipeline_flows() -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let v = |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Pipeline, 0), instructions };
    let k = FlowKey::new;
    let drop = || v(vec![]);
    let mut out = vec![
        // Ports that are not pods' (the node's own): ARP and other non-IP to NORMAL.
        (k(CLASSIFIER, priority::MISS, vec![]), v(vec![normal()])),
        // Anything from a pod's port that its own-address flows did not pass.
        (k(SPOOF_GUARD, priority::MISS, vec![]), drop()),
        (k(CONNTRACK_STATE, priority::NORMAL, vec![flow::ct_state(ct::INV | ct::TRK, 0)]), drop()),
        (k(CONNTRACK_STATE, priority::MISS, vec![]), v(vec![flow::goto(EGRESS_RULE)])),
        (
            k(EGRESS_RULE, priority::SKIP, vec![flow::ct_state(ct::EST | ct::TRK, ct::NEW)]),
            v(vec![flow::goto(L2_FORWARDING_CALC)]),
        ),
        (
            k(EGRESS_RULE, priority::SKIP, vec![flow::ct_state(ct::REL | ct::TRK, ct::NEW)]),
            v(vec![flow::goto(L2_FORWARDING_CALC)]),
        ),
        (k(EGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(EGRESS_DEFAULT_RULE)])),
        (k(EGRESS_DEFAULT_RULE, priority::MISS, vec![]), v(vec![flow::goto(L2_FORWARDING_CALC)])),
        // IP to a group MAC without a local pod IP destination: no pod may get it by flooding.
        (
            k(
                L2_FORWARDING_CALC,
                priority::NON_UNICAST,
                vec![Oxm::EthDst(Masked::masked(MAC_GROUP_BIT, MAC_GROUP_BIT))],
            ),
            drop(),
        ),
        (k(L2_FORWARDING_CALC, priority::MISS, vec![]), v(vec![flow::goto(INGRESS_RULE)])),
        (
            k(INGRESS_RULE, priority::SKIP, vec![flow::ct_state(ct::EST | ct::TRK, ct::NEW)]),
            v(vec![flow::goto(CONNTRACK_COMMIT)]),
        ),
        (
            k(INGRESS_RULE, priority::SKIP, vec![flow::ct_state(ct::REL | ct::TRK, ct::NEW)]),
            v(vec![flow::goto(CONNTRACK_COMMIT)]),
        ),
        (k(INGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(INGRESS_DEFAULT_RULE)])),
        (k(INGRESS_DEFAULT_RULE, priority::MISS, vec![]), v(vec![flow::goto(CONNTRACK_COMMIT)])),
        (k(CONNTRACK_COMMIT, priority::MISS, vec![]), v(vec![flow::goto(OUTPUT)])),
        // IP with no local pod destination (reg1 unset), for the node's own ports.
        (k(OUTPUT, priority::MISS, vec![]), v(vec![normal()])),
    ];
    for nd in [ND_NEIGHBOR_SOLICIT, ND_NEIGHBOR_ADVERT] {
        let m = vec![Oxm::EthType(ETH_IPV6), Oxm::IpProto(ICMPV6), Oxm::Icmpv6Type(nd)];
        out.push((k(CLASSIFIER, priority::ND, m), v(vec![normal()])));
    }
    for eth in [ETH_IP, ETH_IPV6] {
        out.push((k(CLASSIFIER, priority::IP, vec![Oxm::EthType(eth)]), v(vec![into_conntrack()])));
        out.push((
            k(CONNTRACK_COMMIT, priority::NORMAL, vec![Oxm::EthType(eth), flow::ct_state(ct::NEW | ct::TRK, 0)]),
            v(vec![apply(vec![flow::ct_action(true, None)]), flow::goto(OUTPUT)]),
        ));
    }
    out
}

/// The flows of one local pod's port: the Classifier sends its packets to SpoofGuard, which
/// passes only the pod's own MAC with its own addresses (`ip-address`, `attached-mac`);
/// L2ForwardingCalc sends the pod's addresses (then its MAC) to its port through the policy
/// tables; Output delivers to it. A port without a MAC or an address sends nothing.
///
/// Two ports may claim the same address or MAC (OVSDB between a pod's removal and its
/// successor's creation): their forwarding flows then share a key, which the compiler
/// resolves (see `Compiler::refresh_port_key`).
pub fn port_flows(p: &LocalPort) -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let o = p.ofport;
    let v =
        |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Port, u64::from(o)), instructions };
    let k = FlowKey::new;
    let to_pod = || {
        vec![apply(vec![Action::SetField(Oxm::Reg { index: 1, value: Masked::exact(o) })]), flow::goto(INGRESS_RULE)]
    };
    let mut out = vec![
        (k(CLASSIFIER, priority::NORMAL, vec![Oxm::InPort(o)]), v(vec![flow::goto(SPOOF_GUARD)])),
        (k(OUTPUT, priority::NORMAL, vec![flow::reg1(o)]), v(vec![apply(vec![flow::output(o)])])),
    ];
    for ip in &p.ips {
        let dst = match ip {
            IpAddr::V4(a) => Oxm::Ipv4Dst(Masked::exact(*a)),
            IpAddr::V6(a) => Oxm::Ipv6Dst(Masked::exact(*a)),
        };
        out.push((k(L2_FORWARDING_CALC, priority::NORMAL, vec![Oxm::EthType(eth_type(ip)), dst]), v(to_pod())));
    }
    let Some(mac) = p.mac else { return out };
    out.push((k(L2_FORWARDING_CALC, priority::BY_MAC, vec![Oxm::EthDst(Masked::exact(mac))]), v(to_pod())));

    let from_pod = |mut fields: Vec<Oxm>| {
        fields.extend([Oxm::InPort(o), Oxm::EthSrc(Masked::exact(mac))]);
        fields
    };
    let mut has_v6 = false;
    for ip in &p.ips {
        match ip {
            IpAddr::V4(a) => {
                let a = Masked::exact(*a);
                out.push((
                    k(SPOOF_GUARD, priority::NORMAL, from_pod(vec![Oxm::EthType(ETH_IP), Oxm::Ipv4Src(a)])),
                    v(vec![into_conntrack()]),
                ));
                let arp = vec![Oxm::EthType(ETH_ARP), Oxm::ArpSpa(a), Oxm::ArpSha(Masked::exact(mac))];
                out.push((k(SPOOF_GUARD, priority::NORMAL, from_pod(arp)), v(vec![normal()])));
            }
            IpAddr::V6(a) => {
                has_v6 = true;
                let src = vec![Oxm::EthType(ETH_IPV6), Oxm::Ipv6Src(Masked::exact(*a))];
                out.push((k(SPOOF_GUARD, priority::NORMAL, from_pod(src)), v(vec![into_conntrack()])));
            }
        }
    }
    if has_v6 {
        let nd =
            |kind: u8, field: Oxm| vec![Oxm::EthType(ETH_IPV6), Oxm::IpProto(ICMPV6), Oxm::Icmpv6Type(kind), field];
        let link_local = Masked::masked(LINK_LOCAL.0, LINK_LOCAL.1);
        // Solicitations from the pod's own addresses, its link-local one, or :: (DAD).
        let mut solicit_from = vec![link_local, Masked::exact(Ipv6Addr::UNSPECIFIED)];
        // Advertisements only for the pod's own addresses or a link-local one.
        let mut advertise = vec![link_local];
        for ip in &p.ips {
            if let IpAddr::V6(a) = ip {
                solicit_from.push(Masked::exact(*a));
                advertise.push(Masked::exact(*a));
            }
        }
        for src in solicit_from {
            out.push((
                k(SPOOF_GUARD, priority::SKIP, from_pod(nd(ND_NEIGHBOR_SOLICIT, Oxm::Ipv6Src(src)))),
                v(vec![normal()]),
            ));
        }
        for target in advertise {
            out.push((
                k(SPOOF_GUARD, priority::SKIP, from_pod(nd(ND_NEIGHBOR_ADVERT, Oxm::Ipv6NdTarget(target)))),
                v(vec![normal()]),
            ));
        }
    }
    out
}
