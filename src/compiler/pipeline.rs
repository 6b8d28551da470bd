//! The flows that do not depend on policies: the fixed pipeline, the flows of each local
//! pod's port (classification, spoof guard, forwarding, output) and the node's flows (the
//! gateway, uplinks, Services). `docs/pipeline.md` explains the pipeline table by table; this
//! module is its source of truth.

use super::cookie::{self, Kind};
use super::copies::{self, CopyKind};
use super::flow::{self, ct, from, FlowKey, FlowValue};
use super::tables;
use super::userdata::SecurityEvent;
use crate::model::{Cidr, LocalPort, Node, NodePort};
use ofp::numbers::{eth_type, ip_proto};
use ofp::{Action, Instruction, Masked, Oxm};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const ND_ROUTER_ADVERT: u8 = 134;
const ND_NEIGHBOR_SOLICIT: u8 = 135;
const ND_NEIGHBOR_ADVERT: u8 = 136;
const ND_REDIRECT: u8 = 137;
const ARP_REQUEST: u16 = 1;
const ARP_REPLY: u16 = 2;
/// fe80::/10: link-local addresses, which no policy names but neighbour discovery uses.
const LINK_LOCAL: (Ipv6Addr, Ipv6Addr) =
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), Ipv6Addr::new(0xffc0, 0, 0, 0, 0, 0, 0, 0));

fn apply(actions: Vec<Action>) -> Instruction {
    Instruction::ApplyActions(actions)
}

fn into_conntrack() -> Action {
    flow::ct_action(false, Some(tables::CONNTRACK_STATE))
}

/// Sends a packet to port `o`, addressed to `mac` when it is known (a pod's stack, or the
/// node's, takes only frames for its own MAC, whatever MAC the sender used).
fn deliver_to(o: u32, mac: Option<[u8; 6]>) -> Vec<Action> {
    let mut actions = vec![flow::set_reg(1, o)];
    actions.extend(mac.map(flow::set_eth_dst));
    actions
}

/// ARP, neighbour solicitations and advertisements.
fn neighbor_messages() -> [Vec<Oxm>; 3] {
    [vec![Oxm::EthType(eth_type::ARP)], nd(ND_NEIGHBOR_SOLICIT), nd(ND_NEIGHBOR_ADVERT)]
}

/// `vlan_tci=0x0000/0x1fff`: frames without an 802.1Q header only (no VLAN hopping, and no
/// priority tag either).
fn untagged() -> Oxm {
    Oxm::VlanVid(Masked::exact(0))
}

/// `vlan_tci=0x1000/0x1000`: frames with an 802.1Q header (a VLAN or only a priority tag).
fn tagged() -> Oxm {
    Oxm::VlanVid(Masked::masked(VLAN_PRESENT, VLAN_PRESENT))
}

/// OFPVID_PRESENT.
const VLAN_PRESENT: u16 = 0x1000;

/// A copy of the packet to npagent as security event `event`, through the meter of the pod
/// whose port sent it (LogCopy).
fn security_copy(event: SecurityEvent) -> Vec<Action> {
    copies::request(CopyKind::Security(event))
}

/// The ARP reply to a request for `ip`, owned by `mac`, sent back out the port the request
/// came in by: the switch answers, so no pod hears another's ARP.
fn arp_reply(ip: Ipv4Addr, mac: [u8; 6]) -> Vec<Action> {
    use ofp::oxm::headers::*;
    vec![
        Action::copy_field(OXM_OF_ETH_SRC, OXM_OF_ETH_DST, 48),
        Action::SetField(Oxm::EthSrc(Masked::exact(mac))),
        Action::SetField(Oxm::ArpOp(ARP_REPLY)),
        Action::copy_field(OXM_OF_ARP_SHA, OXM_OF_ARP_THA, 48),
        Action::copy_field(OXM_OF_ARP_SPA, OXM_OF_ARP_TPA, 32),
        Action::SetField(Oxm::ArpSha(Masked::exact(mac))),
        Action::SetField(Oxm::ArpSpa(Masked::exact(ip))),
        flow::output(ofp::port::IN_PORT),
    ]
}

/// `arp,arp_op=1,arp_tpa=<ip>`.
fn arp_request_for(ip: Ipv4Addr) -> Vec<Oxm> {
    vec![Oxm::EthType(eth_type::ARP), Oxm::ArpOp(ARP_REQUEST), Oxm::ArpTpa(Masked::exact(ip))]
}

fn nd(kind: u8) -> Vec<Oxm> {
    vec![Oxm::EthType(eth_type::IPV6), Oxm::IpProto(ip_proto::ICMPV6), Oxm::Icmpv6Type(kind)]
}

/// The neighbour discovery messages for a holder of IPv6 address `a` (a solicitation for
/// `a`, an advertisement sent to `a`): NeighborForward sends them to its port, and nowhere
/// else.
fn nd_to(a: Ipv6Addr) -> [Vec<Oxm>; 2] {
    let mut solicit = nd(ND_NEIGHBOR_SOLICIT);
    solicit.push(Oxm::Ipv6NdTarget(Masked::exact(a)));
    let mut advert = nd(ND_NEIGHBOR_ADVERT);
    advert.push(Oxm::Ipv6Dst(Masked::exact(a)));
    [solicit, advert]
}

/// The NeighborForward flows of a holder of `ips` on port `o` with MAC `mac`: ARP requests
/// for its IPv4 addresses answered by the switch; ARP replies to it only from the gateway
/// (answers to requests the gateway was sent); IPv6 neighbour discovery for it forwarded to
/// its port.
fn neighbor_flows(
    ips: &[IpAddr],
    o: u32,
    mac: Option<[u8; 6]>,
    priority: u16,
    v: impl Fn(Vec<Instruction>) -> FlowValue,
) -> Vec<(FlowKey, FlowValue)> {
    let k = FlowKey::new;
    let table = tables::NEIGHBOR_FORWARD;
    let mut out = Vec::new();
    for ip in ips {
        match ip {
            IpAddr::V4(a) => {
                if let Some(mac) = mac {
                    // Answered above any forwarding of ARP about the same address.
                    let answer_priority = priority + 10;
                    out.push((k(table, answer_priority, arp_request_for(*a)), v(vec![apply(arp_reply(*a, mac))])));
                }
                let answer =
                    vec![Oxm::EthType(eth_type::ARP), Oxm::ArpTpa(Masked::exact(*a)), flow::from_flags(from::GATEWAY)];
                out.push((k(table, priority, answer), v(vec![apply(vec![flow::output(o)])])));
            }
            IpAddr::V6(a) => {
                for m in nd_to(*a) {
                    out.push((k(table, priority, m), v(vec![apply(vec![flow::output(o)])])));
                }
            }
        }
    }
    out
}

/// The fixed flows of the pipeline; security events are copied to controller
/// `controller_id`.
pub(crate) fn pipeline_flows(controller_id: u16) -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let v = |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Pipeline, 0), instructions };
    let k = FlowKey::new;
    let drop = || v(vec![]);
    let logged_drop = |event| v(vec![apply(security_copy(event))]);
    let link_local = Masked::masked(LINK_LOCAL.0, LINK_LOCAL.1);
    let mut out = vec![
        // A port of no class (LOCAL, no external_ids yet, a stray veth) sends nothing.
        (k(CLASSIFIER, priority::MISS, vec![]), drop()),
        // Anything from a pod's port that its own-address flows did not pass: tagged IP and
        // IP with a source or MAC not the pod's are security events (below); IPv6 from a
        // link-local or the unspecified address (multicast listener reports, say) and the rest
        // are dropped quietly.
        (k(SPOOF_GUARD, priority::QUIET_DROP, vec![Oxm::EthType(eth_type::IPV6), Oxm::Ipv6Src(link_local)]), drop()),
        (
            k(
                SPOOF_GUARD,
                priority::QUIET_DROP,
                vec![Oxm::EthType(eth_type::IPV6), Oxm::Ipv6Src(Masked::exact(Ipv6Addr::UNSPECIFIED))],
            ),
            drop(),
        ),
        (k(SPOOF_GUARD, priority::MISS, vec![]), drop()),
        (
            k(CONNTRACK_STATE, priority::SKIP, vec![flow::ct_state(ct::INV | ct::TRK, 0)]),
            logged_drop(SecurityEvent::InvalidConnection),
        ),
        // An ICMP error from a pod is related to a connection it is one end of (its own flows
        // below), or to nothing: no pod speaks for another pod's connection.
        (
            k(
                CONNTRACK_STATE,
                priority::FOREIGN_ERROR,
                vec![flow::ct_state(ct::REL | ct::TRK, 0), flow::from_flags(from::POD)],
            ),
            logged_drop(SecurityEvent::ForeignIcmpError),
        ),
        (k(CONNTRACK_STATE, priority::MISS, vec![]), v(vec![flow::goto(CONNECTION_SOURCE)])),
        (k(CONNECTION_SOURCE, priority::MISS, vec![]), v(vec![flow::goto(CONNECTION_DESTINATION)])),
        (k(CONNECTION_DESTINATION, priority::MISS, vec![]), v(vec![flow::goto(ADMIN_EGRESS_RULE)])),
        (k(ADMIN_EGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(EGRESS_RULE)])),
        (k(EGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(EGRESS_DEFAULT_RULE)])),
        (k(EGRESS_DEFAULT_RULE, priority::MISS, vec![]), v(vec![flow::goto(BASELINE_EGRESS_RULE)])),
        (k(BASELINE_EGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(L2_FORWARDING_CALC)])),
        // IP for no local pod, not from a pod (nothing to route it to): dropped.
        (k(L2_FORWARDING_CALC, priority::MISS, vec![]), drop()),
        // The node's own connections into its pods are always allowed, and never logged: no
        // tier judges them.
        (
            k(ADMIN_INGRESS_RULE, priority::TIER_SKIP, vec![flow::from_flags(from::NODE)]),
            v(vec![flow::goto(INGRESS_RULE)]),
        ),
        (k(ADMIN_INGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(INGRESS_RULE)])),
        (k(INGRESS_RULE, priority::SKIP, vec![flow::from_flags(from::NODE)]), v(vec![flow::goto(CONNTRACK_COMMIT)])),
        (k(INGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(INGRESS_DEFAULT_RULE)])),
        (k(INGRESS_DEFAULT_RULE, priority::MISS, vec![]), v(vec![flow::goto(BASELINE_INGRESS_RULE)])),
        (k(BASELINE_INGRESS_RULE, priority::MISS, vec![]), v(vec![flow::goto(CONNTRACK_COMMIT)])),
        (k(CONNTRACK_COMMIT, priority::MISS, vec![]), v(vec![flow::goto(OUTPUT)])),
        // Only the port in reg1 receives anything: nothing is flooded.
        (k(OUTPUT, priority::MISS, vec![]), drop()),
        (k(NEIGHBOR_FORWARD, priority::MISS, vec![]), drop()),
    ];
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        out.push((
            k(SPOOF_GUARD, priority::TAGGED_DROP, vec![tagged(), Oxm::EthType(eth)]),
            logged_drop(SecurityEvent::TaggedFrame),
        ));
        out.push((
            k(SPOOF_GUARD, priority::LOGGED_DROP, vec![Oxm::EthType(eth)]),
            logged_drop(SecurityEvent::ForgedSource),
        ));
    }
    // Neighbour discovery its own flows in SpoofGuard did not pass, router advertisements and
    // redirects are not IP to forward: a pod could poison the node's neighbour cache or routes.
    for kind in [ND_ROUTER_ADVERT, ND_NEIGHBOR_SOLICIT, ND_NEIGHBOR_ADVERT, ND_REDIRECT] {
        out.push((k(SPOOF_GUARD, priority::NODE, nd(kind)), drop()));
    }
    // A new connection with no local pod at either end has no zone to count it in (none
    // reaches this table: a pod's own address or a local destination got it here).
    out.push((k(CONNTRACK_COMMIT, priority::UNOWNED, vec![flow::ct_state(ct::NEW | ct::TRK, 0)]), drop()));
    // Back from the owner's zone: a new connection committed there (the mark says so), so
    // into the main zone; a later packet of one the zone holds, delivered; refused by the
    // zone's limit (no mark), dropped.
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        out.push((
            k(CONNTRACK_QUOTA, priority::NORMAL, vec![Oxm::EthType(eth), quota_granted()]),
            v(vec![apply(vec![flow::ct_action(true, None), flow::resubmit(OUTPUT)])]),
        ));
    }
    out.push((
        k(CONNTRACK_QUOTA, priority::NORMAL, vec![Oxm::CtMark(Masked::exact(tables::QUOTA_LATER_MARK))]),
        v(vec![apply(vec![flow::resubmit(OUTPUT)])]),
    ));
    out.push((k(CONNTRACK_QUOTA, priority::MISS, vec![]), drop()));
    out.extend(super::staged::fixed_flows());
    out.extend(copies::fixed_flows(controller_id));
    out
}

/// `ct_mark=1`: the connection is in its owner's quota zone.
fn quota_granted() -> Oxm {
    Oxm::CtMark(Masked::exact(tables::QUOTA_MARK))
}

/// Which packets of a connection a ConntrackCommit flow takes.
#[derive(Clone, Copy)]
enum Packets {
    /// Its first (`ct_state=+new`), which may say where it came from.
    First,
    /// The rest (`ct_state=-new`), matched by what their connection's tuple or mark says.
    Later,
}

/// ConntrackCommit's flow for the `packets` of the connections counted in `zone` (`fields`
/// match them): committed into the zone, then on to ConntrackQuota, which admits a new
/// connection only when the zone had room and delivers a later packet only when the zone
/// holds its connection. Tracking every packet there keeps the zone's entry alive as long as
/// the connection; an entry that went (expired while policy dropped the connection's
/// packets) is re-created only within the zone's limit.
fn zone_flow(
    zone: u16,
    priority: u16,
    packets: Packets,
    fields: Vec<Oxm>,
    v: impl Fn(Vec<Instruction>) -> FlowValue,
) -> (FlowKey, FlowValue) {
    let (set, clear, mark) = match packets {
        Packets::First => (ct::NEW | ct::TRK, ct::INV, tables::QUOTA_MARK),
        Packets::Later => (ct::TRK, ct::NEW | ct::INV, tables::QUOTA_LATER_MARK),
    };
    let matched = flow::with_ct_state(fields, set, clear);
    let commit = flow::ct_quota(zone, mark);
    (FlowKey::new(tables::CONNTRACK_COMMIT, priority, matched), v(vec![apply(vec![commit])]))
}

/// ConntrackCommit's flows for the connections the pod on port `o` with address `host` opens
/// (it is their original source): counted in the pod's own zone. Connections into the pod
/// are counted in the node's zone or the inbound one ([`node_port_flows`], [`gateway_flows`]),
/// so a pod's zone fills only through its own connections.
fn quota_flows(o: u32, host: &Cidr, v: impl Fn(Vec<Instruction>) -> FlowValue) -> Vec<(FlowKey, FlowValue)> {
    use tables::{priority, quota_zone};
    let Some(zone) = quota_zone(o) else { return vec![] };
    vec![
        zone_flow(zone, priority::NORMAL, Packets::First, flow::ct_src_prefix(host), &v),
        zone_flow(zone, priority::NORMAL, Packets::Later, flow::ct_src_prefix(host), &v),
    ]
}

/// The flows of one local pod's port: the Classifier marks its packets as a pod's and sends
/// them to SpoofGuard, which passes only the pod's own MAC with its own addresses
/// (`ip-address`, `attached-mac`), untagged; ConntrackState passes its ICMP errors about its
/// own connections; ConnectionSource and ConnectionDestination name it as an end of the
/// connections of its addresses; L2ForwardingCalc sends IP for its addresses to its port
/// (with its MAC) through the policy tables; NeighborForward answers ARP for it and sends it
/// the neighbour discovery about its addresses; Output delivers to it; LogCopy copies what
/// belongs to it through its own meters to controller `controller_id` (see
/// [`copies::port_flows`]). A port without a MAC or an address sends nothing.
///
/// Two ports may claim the same address or MAC (OVSDB between a pod's removal and its
/// successor's creation): their forwarding flows then share a key, which the compiler
/// resolves (see `Compiler::refresh_port_key`).
pub(crate) fn port_flows(p: &LocalPort, controller_id: u16) -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let o = p.ofport;
    let v =
        |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Port, u64::from(o)), instructions };
    let k = FlowKey::new;
    let mut out = vec![
        (
            k(CLASSIFIER, priority::NORMAL, vec![Oxm::InPort(o)]),
            v(vec![apply(vec![flow::set_reg(3, from::POD)]), flow::goto(SPOOF_GUARD)]),
        ),
        (k(OUTPUT, priority::NORMAL, vec![flow::reg1(o)]), v(vec![apply(vec![flow::output(o)])])),
    ];
    out.extend(copies::port_flows(o, controller_id));
    for ip in &p.ips {
        let host = Cidr::host(*ip);
        out.push((
            k(L2_FORWARDING_CALC, priority::NORMAL, flow::dst_prefix(&host)),
            v(vec![apply(deliver_to(o, p.mac)), flow::goto(ADMIN_INGRESS_RULE)]),
        ));
        // Every packet of a connection, either way, is judged by the policies of its
        // original source and destination pods.
        out.push((
            k(CONNECTION_SOURCE, priority::NORMAL, flow::ct_src_prefix(&host)),
            v(vec![apply(vec![flow::set_reg(2, o)]), flow::goto(CONNECTION_DESTINATION)]),
        ));
        out.push((
            k(CONNECTION_DESTINATION, priority::NORMAL, flow::ct_dst_prefix(&host)),
            v(vec![apply(vec![flow::set_reg(4, o)]), flow::goto(ADMIN_EGRESS_RULE)]),
        ));
        // A connection an uplink opens in this pod's name is forged (the node's own routing
        // drops such packets from the gateway).
        let mut forged = flow::ct_src_prefix(&host);
        forged.extend([flow::ct_state(ct::TRK, ct::RPL | ct::INV), flow::from_flags(from::UPLINK)]);
        out.push((k(CONNECTION_SOURCE, priority::SKIP, forged), v(vec![])));
        out.extend(quota_flows(o, &host, v));
        // ICMP errors from the pod about its own connections.
        for about in [flow::ct_src_prefix(&host), flow::ct_dst_prefix(&host)] {
            let mut m = about;
            m.extend([Oxm::InPort(o), flow::ct_state(ct::REL | ct::TRK, 0)]);
            out.push((k(CONNTRACK_STATE, priority::NORMAL, m), v(vec![flow::goto(CONNECTION_SOURCE)])));
        }
    }
    // A new connection its full zone refused (from the pod's port: its own), or that the
    // node's or the inbound zone refused on its way into the pod: logged as `ConntrackLimit`
    // through the pod's security meter whatever its namespace's logging switch says, and
    // dropped.
    for (prio, refused) in [(priority::REFUSED, Oxm::InPort(o)), (priority::REFUSED_INBOUND, flow::reg4(o))] {
        out.push((
            k(CONNTRACK_QUOTA, prio, vec![refused]),
            v(vec![apply(vec![copies::security_event(SecurityEvent::ConntrackLimit, o, controller_id)])]),
        ));
    }
    out.extend(neighbor_flows(&p.ips, o, p.mac, priority::NORMAL, v));
    let Some(mac) = p.mac else { return out };

    let from_pod = |mut fields: Vec<Oxm>| {
        fields.extend([Oxm::InPort(o), untagged(), Oxm::EthSrc(Masked::exact(mac))]);
        fields
    };
    let to_neighbors = || v(vec![flow::goto(NEIGHBOR_FORWARD)]);
    let mut own_v6 = Vec::new();
    for ip in &p.ips {
        let own = flow::src_prefix(&Cidr::host(*ip));
        out.push((k(SPOOF_GUARD, priority::NORMAL, from_pod(own)), v(vec![apply(vec![into_conntrack()])])));
        match ip {
            IpAddr::V4(a) => {
                let a = Masked::exact(*a);
                let arp = vec![Oxm::EthType(eth_type::ARP), Oxm::ArpSpa(a), Oxm::ArpSha(Masked::exact(mac))];
                out.push((k(SPOOF_GUARD, priority::NORMAL, from_pod(arp)), to_neighbors()));
            }
            IpAddr::V6(a) => own_v6.push(*a),
        }
    }
    if !own_v6.is_empty() {
        let link_local = Masked::masked(LINK_LOCAL.0, LINK_LOCAL.1);
        let with = |kind: u8, fields: Vec<Oxm>| {
            let mut m = nd(kind);
            m.extend(fields);
            from_pod(m)
        };
        // Solicitations from the pod's own or its link-local addresses, for any target; from
        // :: (duplicate address detection) only for the pod's own addresses, so that it cannot
        // make another pod's new address fail DAD.
        let mut solicitations = vec![with(ND_NEIGHBOR_SOLICIT, vec![Oxm::Ipv6Src(link_local)])];
        // Advertisements only for the pod's own addresses or a link-local one.
        let mut advertisements = vec![with(ND_NEIGHBOR_ADVERT, vec![Oxm::Ipv6NdTarget(link_local)])];
        for a in &own_v6 {
            let a = Masked::exact(*a);
            solicitations.push(with(ND_NEIGHBOR_SOLICIT, vec![Oxm::Ipv6Src(a)]));
            solicitations.push(with(
                ND_NEIGHBOR_SOLICIT,
                vec![Oxm::Ipv6Src(Masked::exact(Ipv6Addr::UNSPECIFIED)), Oxm::Ipv6NdTarget(a)],
            ));
            advertisements.push(with(ND_NEIGHBOR_ADVERT, vec![Oxm::Ipv6NdTarget(a)]));
        }
        for m in solicitations.into_iter().chain(advertisements) {
            out.push((k(SPOOF_GUARD, priority::SKIP, m), to_neighbors()));
        }
    }
    out
}

/// The node's flows: its gateway and uplink ports classified, the node's own traffic marked,
/// connections to Service ranges sent to the gateway, other pod traffic routed to it, replies
/// sent back out the node's port the connection entered by, and neighbour discovery for the
/// gateway's addresses. Without a gateway port only uplinks have flows.
pub(crate) fn node_flows(node: &Node) -> Vec<(FlowKey, FlowValue)> {
    let mut out = Vec::new();
    if let Some(gw) = &node.gateway {
        out.extend(node_port_flows(gw, from::GATEWAY));
        out.extend(gateway_flows(node, gw));
    }
    for up in &node.uplinks {
        out.extend(node_port_flows(up, from::UPLINK));
    }
    out
}

/// The flows every node port has: IP into conntrack, ARP and neighbour discovery to
/// NeighborForward (both marked with where they came from), connections that entered by it
/// committed with its ofport as `ct_mark`, their replies sent back out of it.
fn node_port_flows(port: &NodePort, class: u32) -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let o = port.ofport;
    let v =
        |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Node, u64::from(o)), instructions };
    let k = FlowKey::new;
    let mut out = Vec::new();
    let mark = flow::set_reg(3, class);
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        out.push((
            k(CLASSIFIER, priority::SKIP, vec![Oxm::InPort(o), untagged(), Oxm::EthType(eth)]),
            v(vec![apply(vec![mark.clone(), into_conntrack()])]),
        ));
        out.push((
            k(CONNTRACK_QUOTA, priority::SKIP, vec![Oxm::EthType(eth), quota_granted(), flow::from_flags(class)]),
            v(vec![apply(vec![flow::ct_commit_marked(o), flow::resubmit(OUTPUT)])]),
        ));
    }
    for mut m in neighbor_messages() {
        m.extend([Oxm::InPort(o), untagged()]);
        out.push((k(CLASSIFIER, priority::SKIP, m), v(vec![apply(vec![mark.clone()]), flow::goto(NEIGHBOR_FORWARD)])));
    }
    // Connections that entered by it (and no local pod opened): counted in the inbound zone,
    // never in a pod's.
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        out.push(zone_flow(
            INBOUND_ZONE,
            priority::INBOUND,
            Packets::First,
            vec![Oxm::EthType(eth), Oxm::InPort(o)],
            v,
        ));
        let later = vec![Oxm::EthType(eth), Oxm::CtMark(Masked::exact(o))];
        out.push(zone_flow(INBOUND_ZONE, priority::INBOUND, Packets::Later, later, v));
    }
    // Back to the gateway addressed to the node's MAC (a pod replied to its peer's); an uplink
    // carries the frame on as it is.
    let mac = port.mac.filter(|_| class == from::GATEWAY);
    let back = vec![apply(deliver_to(o, mac)), flow::goto(ADMIN_INGRESS_RULE)];
    out.push((
        k(
            L2_FORWARDING_CALC,
            priority::REPLY,
            vec![flow::ct_state(ct::RPL | ct::TRK, 0), Oxm::CtMark(Masked::exact(o))],
        ),
        v(back),
    ));
    out.push((k(OUTPUT, priority::NORMAL, vec![flow::reg1(o)]), v(vec![apply(vec![flow::output(o)])])));
    out
}

/// The gateway's own flows: the node's addresses, Services, routing, its neighbour discovery.
fn gateway_flows(node: &Node, gw: &NodePort) -> Vec<(FlowKey, FlowValue)> {
    use tables::*;
    let o = gw.ofport;
    let v =
        |instructions: Vec<Instruction>| FlowValue { cookie: cookie::cookie(Kind::Node, u64::from(o)), instructions };
    let k = FlowKey::new;
    let mut out = Vec::new();
    let to_gateway = || deliver_to(o, gw.mac);
    for ip in node.own_addresses() {
        let mut m = flow::src_prefix(&Cidr::host(ip));
        m.push(flow::from_flags(from::GATEWAY));
        out.push((
            k(CONNTRACK_STATE, priority::NODE, m),
            v(vec![apply(vec![flow::set_reg(3, from::GATEWAY | from::NODE)]), flow::goto(CONNECTION_SOURCE)]),
        ));
        // Later packets of the node's connections, both ways: entered by the gateway from a
        // node address.
        let mut later = flow::ct_src_prefix(&Cidr::host(ip));
        later.push(Oxm::CtMark(Masked::exact(o)));
        out.push((k(ADMIN_INGRESS_RULE, priority::TIER_SKIP, later.clone()), v(vec![flow::goto(INGRESS_RULE)])));
        out.push((k(INGRESS_RULE, priority::SKIP, later.clone()), v(vec![flow::goto(CONNTRACK_COMMIT)])));
        out.push(zone_flow(NODE_ZONE, priority::BY_NODE, Packets::Later, later, v));
    }
    // The node's own connections are counted in a zone of their own: neither a pod's zone
    // nor a flood through the inbound zone holds kubelet's probes back.
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        out.push(zone_flow(
            NODE_ZONE,
            priority::BY_NODE,
            Packets::First,
            vec![Oxm::EthType(eth), flow::from_flags(from::NODE)],
            v,
        ));
    }
    for cidr in &node.service_cidrs {
        // A pod's connection to a Service goes to the node, which DNATs it and sends it back
        // through the gateway: its egress is judged then, against the real backend.
        let mut m = flow::dst_prefix(cidr);
        m.push(flow::from_flags(from::POD));
        out.push((
            k(CONNTRACK_STATE, priority::SERVICE, m),
            v(vec![apply(to_gateway()), flow::goto(CONNTRACK_COMMIT)]),
        ));
        // The rest of such a connection (the node's un-DNATed replies) needs no verdict either.
        out.push((
            k(CONNTRACK_STATE, priority::ROUTE, flow::ct_dst_prefix(cidr)),
            v(vec![flow::goto(L2_FORWARDING_CALC)]),
        ));
    }
    for eth in [eth_type::IPV4, eth_type::IPV6] {
        // Pod traffic for no local pod: the node routes it.
        out.push((
            k(L2_FORWARDING_CALC, priority::ROUTE, vec![Oxm::EthType(eth), flow::from_flags(from::POD)]),
            v(vec![apply(to_gateway()), flow::goto(ADMIN_INGRESS_RULE)]),
        ));
    }
    out.extend(neighbor_flows(&node.gateway_ips, o, gw.mac, priority::NODE, v));
    // A pod's ARP or solicitation for an address beyond the node's pods: the node answers
    // (proxy ARP) or not; no other pod hears it.
    for mut m in neighbor_messages() {
        m.push(flow::from_flags(from::POD));
        out.push((k(NEIGHBOR_FORWARD, priority::ROUTE, m), v(vec![apply(vec![flow::output(o)])])));
    }
    out
}
