//! Flows as npagent holds them: a key (table, priority, normalised match) and a value
//! (cookie, instructions), and the builders for the matches and actions the pipeline uses.

use super::normalize::normalize_match;
use super::rules::Direction;
use super::tables;
use ofp::numbers::eth_type;
use ofp::{Action, Controller2, Ct, CtZoneSrc, Instruction, Masked, Match, Oxm};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// What identifies a flow in OpenFlow: table, priority and match. The match is always in
/// normalised form ([`normalize_match`]), so keys compare equal to the switch's own.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub table: u8,
    pub priority: u16,
    pub match_: Match,
}

impl FlowKey {
    /// A key with its match normalised.
    pub fn new(table: u8, priority: u16, fields: Vec<Oxm>) -> Self {
        FlowKey { table, priority, match_: normalize_match(&Match { fields }) }
    }
}

/// What a flow does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowValue {
    pub cookie: u64,
    pub instructions: Vec<Instruction>,
}

/// A complete flow set, in a deterministic order.
pub type FlowTable = BTreeMap<FlowKey, FlowValue>;

/// The flows the compiler wants on the bridge.
pub type DesiredFlows = FlowTable;

/// The registers the pipeline carries between tables:
/// - `reg1`: the port the packet leaves by (a pod, the gateway or an uplink), set by
///   L2ForwardingCalc (or by the Service flows); Output sends only there.
/// - `reg2`: the ofport of the local pod that is the source of the packet's connection in its
///   original direction (ConnectionSource, by `ct_nw_src`); the egress tables match it.
/// - `reg3`: where the packet came from, [`from`] flags.
/// - `reg4`: the ofport of the local pod that is the destination of the packet's connection
///   (ConnectionDestination, by `ct_nw_dst`); the ingress tables match it.
pub mod from {
    /// From a pod's port.
    pub(crate) const POD: u32 = 0x1;
    /// From the gateway port.
    pub(crate) const GATEWAY: u32 = 0x2;
    /// From an uplink or tunnel port.
    pub(crate) const UPLINK: u32 = 0x4;
    /// From the gateway with one of the node's own addresses as source: the node's own traffic.
    pub(crate) const NODE: u32 = 0x8;
}

const LOW_HALF: u64 = 0x0000_0000_ffff_ffff;
const HIGH_HALF: u64 = 0xffff_ffff_0000_0000;

/// `reg1=<ofport>`, in the form OVS reports it (low half of xreg0).
pub fn reg1(ofport: u32) -> Oxm {
    Oxm::XReg { index: 0, value: Masked::masked(u64::from(ofport), LOW_HALF) }
}

/// `reg2=<ofport>` (the source pod), in the form OVS reports it (high half of xreg1).
pub(crate) fn reg2(ofport: u32) -> Oxm {
    Oxm::XReg { index: 1, value: Masked::masked(u64::from(ofport) << 32, HIGH_HALF) }
}

/// `reg4=<ofport>` (the connection's destination pod), as OVS reports it (high half of xreg2).
pub(crate) fn reg4(ofport: u32) -> Oxm {
    Oxm::XReg { index: 2, value: Masked::masked(u64::from(ofport) << 32, HIGH_HALF) }
}

/// A local pod's port as a direction's policy tables see it: the pod whose address is the
/// connection's original destination (`reg4`) for ingress, its original source (`reg2`) for
/// egress. The applied-to clause and the default drops.
pub(crate) fn applied_match(direction: Direction, ofport: u32) -> Oxm {
    match direction {
        Direction::Ingress => reg4(ofport),
        Direction::Egress => reg2(ofport),
    }
}

/// `reg7=<value>` (low half of xreg3): the kind of copy LogCopy makes.
pub(crate) fn reg7(value: u32) -> Oxm {
    Oxm::XReg { index: 3, value: Masked::masked(u64::from(value), LOW_HALF) }
}

/// `reg3=<flags>/<flags>`: every flag in `flags` set (low half of xreg1).
pub(crate) fn from_flags(flags: u32) -> Oxm {
    Oxm::XReg { index: 1, value: Masked::masked(u64::from(flags), u64::from(flags)) }
}

/// `set_field:<value>->reg<index>`.
pub(crate) fn set_reg(index: u8, value: u32) -> Action {
    Action::SetField(Oxm::Reg { index, value: Masked::exact(value) })
}

/// `ip,nw_src=<prefix>` or `ipv6,ipv6_src=<prefix>`.
pub(crate) fn src_prefix(cidr: &crate::model::Cidr) -> Vec<Oxm> {
    prefix(cidr, Oxm::Ipv4Src, Oxm::Ipv6Src)
}

/// `ip,nw_dst=<prefix>` or `ipv6,ipv6_dst=<prefix>`.
pub(crate) fn dst_prefix(cidr: &crate::model::Cidr) -> Vec<Oxm> {
    prefix(cidr, Oxm::Ipv4Dst, Oxm::Ipv6Dst)
}

/// `ip,ct_nw_src=<prefix>` or `ipv6,ct_ipv6_src=<prefix>`: the source of the packet's
/// connection in its original direction (replies and related packets included).
pub(crate) fn ct_src_prefix(cidr: &crate::model::Cidr) -> Vec<Oxm> {
    tracked(prefix(cidr, Oxm::CtNwSrc, Oxm::CtIpv6Src))
}

/// `ip,ct_nw_dst=<prefix>` or `ipv6,ct_ipv6_dst=<prefix>`.
pub(crate) fn ct_dst_prefix(cidr: &crate::model::Cidr) -> Vec<Oxm> {
    tracked(prefix(cidr, Oxm::CtNwDst, Oxm::CtIpv6Dst))
}

/// `ct_state=-inv+trk` with `fields`: OVS takes a match on the conntrack tuple only with a
/// ct_state that says the packet has a valid connection.
pub(crate) fn tracked(mut fields: Vec<Oxm>) -> Vec<Oxm> {
    fields.push(ct_state(ct::TRK, ct::INV));
    fields
}

fn prefix(
    cidr: &crate::model::Cidr,
    v4: fn(ofp::Masked<std::net::Ipv4Addr>) -> Oxm,
    v6: fn(ofp::Masked<std::net::Ipv6Addr>) -> Oxm,
) -> Vec<Oxm> {
    match cidr.addr {
        IpAddr::V4(a) => {
            let mask = if cidr.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(cidr.prefix.min(32))) };
            let mut v = vec![Oxm::EthType(eth_type::IPV4)];
            if mask != 0 {
                v.push(v4(Masked::masked(a, mask.into())));
            }
            v
        }
        IpAddr::V6(a) => {
            let mask = if cidr.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(cidr.prefix.min(128))) };
            let mut v = vec![Oxm::EthType(eth_type::IPV6)];
            if mask != 0 {
                v.push(v6(Masked::masked(a, mask.into())));
            }
            v
        }
    }
}

/// `ct_state` bits.
pub(crate) mod ct {
    pub(crate) const NEW: u32 = 0x01;
    #[allow(dead_code, reason = "no flow matches +est alone, but the table names every bit")]
    pub(crate) const EST: u32 = 0x02;
    pub(crate) const REL: u32 = 0x04;
    pub(crate) const RPL: u32 = 0x08;
    pub(crate) const INV: u32 = 0x10;
    pub(crate) const TRK: u32 = 0x20;
}

/// `ct_state=` with the given set and cleared bits.
pub(crate) fn ct_state(set: u32, clear: u32) -> Oxm {
    Oxm::CtState(Masked::masked(set, set | clear))
}

/// `goto_table:<t>`.
pub(crate) fn goto(table: u8) -> Instruction {
    Instruction::GotoTable(table)
}

/// `output:<port>`.
pub(crate) fn output(port: u32) -> Action {
    Action::Output { port, max_len: 0 }
}

/// `ct(table=<t>,zone=65520)` or `ct(commit,zone=65520)`.
pub(crate) fn ct_action(commit: bool, table: Option<u8>) -> Action {
    Action::Ct(Ct { flags: u16::from(commit), zone: CtZoneSrc::Imm(tables::CT_ZONE), table, alg: 0, actions: vec![] })
}

/// `ct(commit,zone=65520,exec(set_field:<mark>->ct_mark))`: commits a connection with the
/// ofport of the node's port it entered by, so that its replies go back out there.
pub(crate) fn ct_commit_marked(mark: u32) -> Action {
    Action::Ct(Ct {
        flags: 1,
        zone: CtZoneSrc::Imm(tables::CT_ZONE),
        table: None,
        alg: 0,
        actions: vec![Action::SetField(Oxm::CtMark(Masked::exact(mark)))],
    })
}

/// `resubmit(,<table>)`: runs table `table`, then goes on with the actions after it.
pub(crate) fn resubmit(table: u8) -> Action {
    Action::ResubmitTable { in_port: IN_PORT_KEEP, table, ct: false }
}

/// The in_port of a resubmit that keeps the packet's own.
const IN_PORT_KEEP: u16 = 0xfff8;

/// `ct(commit,zone=<zone>,exec(set_field:<mark>->ct_mark),table=ConntrackQuota)`: tracks the
/// packet's connection in its owner's quota zone too. The recirculated packet has the mark
/// only when the connection is in that zone, so a commit the zone's limit refused can be told
/// apart (`mark`: [`tables::QUOTA_MARK`] for a new connection, [`tables::QUOTA_LATER_MARK`]
/// for its later packets).
pub(crate) fn ct_quota(zone: u16, mark: u32) -> Action {
    Action::Ct(Ct {
        flags: 1,
        zone: CtZoneSrc::Imm(zone),
        table: Some(tables::CONNTRACK_QUOTA),
        alg: 0,
        actions: vec![Action::SetField(Oxm::CtMark(Masked::exact(mark)))],
    })
}

/// `fields` with its `ct_state` match replaced by one with the given set and cleared bits.
pub(crate) fn with_ct_state(mut fields: Vec<Oxm>, set: u32, clear: u32) -> Vec<Oxm> {
    fields.retain(|f| !matches!(f, Oxm::CtState(_)));
    fields.push(ct_state(set, clear));
    fields
}

/// `set_field:<mac>->eth_dst`.
pub(crate) fn set_eth_dst(mac: [u8; 6]) -> Action {
    Action::SetField(Oxm::EthDst(Masked::exact(mac)))
}

/// Bytes of a packet a logging copy carries: the audit decoder reads only the headers
/// (Ethernet, IPv6 or IPv4 with options, then TCP/UDP/SCTP ports).
pub(crate) const LOG_MAX_LEN: u16 = 128;

/// `controller(max_len=128,id=<id>,userdata=<ud>,meter_id=<m>)` (NXAST_CONTROLLER2): a logging
/// copy saying by its userdata what sent it.
pub(crate) fn controller(userdata: &super::userdata::LogUserdata, meter_id: u32, controller_id: u16) -> Action {
    Action::Controller2(Controller2 {
        max_len: Some(LOG_MAX_LEN),
        controller_id: (controller_id != 0).then_some(controller_id),
        reason: None,
        userdata: Some(bytes::Bytes::copy_from_slice(&userdata.encode())),
        pause: false,
        meter_id: (meter_id != 0).then_some(meter_id),
    })
}
