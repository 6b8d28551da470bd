//! The first packet of a connection, matched against the compiler's flows: which clause
//! flows of a rule table it hits, hence which conjunctions it completes. This reads the flows
//! the compiler installs rather than the policies, so an explanation cannot disagree with
//! them.

use crate::compiler::flow::{FlowKey, FlowTable};
use ofp::{Action, Instruction, Masked, Oxm};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// The fields of a connection's first packet the policy tables can match (its conntrack
/// tuple is its own addresses and ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packet {
    /// The source pod's local port, as ConnectionSource sets it in `reg2` (egress tables).
    pub src_port: Option<u32>,
    /// The destination pod's local port, as ConnectionDestination sets it in `reg4` (ingress
    /// tables).
    pub dst_port: Option<u32>,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number and destination port; `None`: no transport header is assumed, so
    /// only rules that allow every port match.
    pub transport: Option<(u8, u16)>,
}

/// A conjunction the packet completes: its id and the clause flows it matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Completed {
    pub id: u32,
    pub(crate) clauses: Vec<FlowKey>,
}

/// The conjunctions of `table` whose every clause has a flow matching `pkt` (of any
/// priority: a tier's rules each have their own).
pub(crate) fn completed_conjunctions(flows: &FlowTable, table: u8, pkt: &Packet) -> Vec<Completed> {
    // id -> (number of clauses, clause -> matching flows)
    let mut seen: BTreeMap<u32, (u8, BTreeMap<u8, Vec<FlowKey>>)> = BTreeMap::new();
    for (key, value) in flows.iter().filter(|(k, _)| k.table == table) {
        if !key.match_.fields.iter().all(|f| field_matches(f, pkt)) {
            continue;
        }
        for ins in &value.instructions {
            let Instruction::ApplyActions(actions) = ins else { continue };
            for a in actions {
                if let Action::Conjunction { id, clause, n_clauses } = a {
                    let entry = seen.entry(*id).or_insert_with(|| (*n_clauses, BTreeMap::new()));
                    entry.1.entry(*clause).or_default().push(key.clone());
                }
            }
        }
    }
    seen.into_iter()
        .filter(|(_, (n, clauses))| (0..*n).all(|c| clauses.contains_key(&c)))
        .map(|(id, (_, clauses))| Completed {
            id,
            clauses: clauses.into_values().flatten().collect::<BTreeSet<_>>().into_iter().collect(),
        })
        .collect()
}

/// Whether one match field holds for `pkt`. A field the policy tables do not use never
/// matches, so an unexpected flow can only make an explanation stricter, never looser.
fn field_matches(f: &Oxm, pkt: &Packet) -> bool {
    let proto = pkt.transport.map(|(p, _)| p);
    let dport =
        |want: u8, m: &Masked<u16>| pkt.transport.is_some_and(|(p, port)| p == want && masked(m, port, u64::from));
    match f {
        // reg2 is the high half of xreg1, reg4 of xreg2; the clause flows match no other
        // register.
        Oxm::XReg { index: 1, value } => masked(value, u64::from(pkt.src_port.unwrap_or(0)) << 32, |v| v),
        Oxm::XReg { index: 2, value } => masked(value, u64::from(pkt.dst_port.unwrap_or(0)) << 32, |v| v),
        Oxm::CtState(_) => first_packet_state(f),
        Oxm::CtNwProto(p) => proto == Some(*p),
        Oxm::CtNwSrc(m) => matches!(pkt.src, IpAddr::V4(a) if masked(m, a, |a| u64::from(u32::from(a)))),
        Oxm::CtNwDst(m) => matches!(pkt.dst, IpAddr::V4(a) if masked(m, a, |a| u64::from(u32::from(a)))),
        Oxm::CtIpv6Src(m) => matches!(pkt.src, IpAddr::V6(a) if masked128(m, a)),
        Oxm::CtIpv6Dst(m) => matches!(pkt.dst, IpAddr::V6(a) if masked128(m, a)),
        Oxm::CtTpDst(m) => pkt.transport.is_some_and(|(p, port)| [6, 17].contains(&p) && masked(m, port, u64::from)),
        Oxm::EthType(t) => *t == eth_type(&pkt.src),
        Oxm::IpProto(p) => proto == Some(*p),
        Oxm::Ipv4Src(m) => matches!(pkt.src, IpAddr::V4(a) if masked(m, a, |a| u64::from(u32::from(a)))),
        Oxm::Ipv4Dst(m) => matches!(pkt.dst, IpAddr::V4(a) if masked(m, a, |a| u64::from(u32::from(a)))),
        Oxm::Ipv6Src(m) => matches!(pkt.src, IpAddr::V6(a) if masked128(m, a)),
        Oxm::Ipv6Dst(m) => matches!(pkt.dst, IpAddr::V6(a) if masked128(m, a)),
        Oxm::TcpDst(m) => dport(6, m),
        Oxm::UdpDst(m) => dport(17, m),
        Oxm::SctpDst(m) => dport(132, m),
        _ => false,
    }
}

/// Whether a match field on the conntrack state holds for a connection's first packet
/// (`+new+trk`, not a reply); any other field: false.
pub(crate) fn first_packet_state(f: &Oxm) -> bool {
    const NEW_TRACKED: u32 = 0x21;
    match f {
        Oxm::CtState(m) => {
            let mask = m.mask.unwrap_or(u32::MAX);
            NEW_TRACKED & mask == m.value & mask
        }
        _ => false,
    }
}

/// The EtherType of a packet from `ip`.
fn eth_type(ip: &IpAddr) -> u16 {
    if ip.is_ipv4() {
        ofp::numbers::eth_type::IPV4
    } else {
        ofp::numbers::eth_type::IPV6
    }
}

fn masked<T: Copy>(m: &Masked<T>, v: T, bits: impl Fn(T) -> u64) -> bool {
    let mask = m.mask.map_or(u64::MAX, &bits);
    bits(m.value) & mask == bits(v) & mask
}

fn masked128(m: &Masked<std::net::Ipv6Addr>, v: std::net::Ipv6Addr) -> bool {
    let mask = m.mask.map_or(u128::MAX, u128::from);
    u128::from(m.value) & mask == u128::from(v) & mask
}
