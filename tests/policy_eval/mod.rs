//! Evaluates a direction's policy tables for a new connection the way OVS does: a
//! conjunction fires when every one of its clauses has a matching flow at the same priority,
//! and then its `conj_id` flow applies; otherwise the table-miss leads to the default drop
//! table, where a flow for the applied-to port drops. Shared by the compiler's semantic tests.
#![allow(dead_code)]

use npagent::compiler::{Direction, FlowTable};
use ofp::{Action, Instruction, Oxm};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Drop,
}

/// A new connection as one direction's tables see it.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// The other end: the source for ingress, the destination for egress.
    pub peer: IpAddr,
    /// The applied-to local pod's port: the connection's destination (`reg4`) for ingress, its
    /// source (`reg2`) for egress.
    pub ofport: u32,
    pub proto: u8,
    pub dport: u16,
}

fn prefix_matches(addr: IpAddr, want: Option<(u128, u128)>) -> bool {
    let value = match addr {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    want.is_some_and(|(v, mask)| value & mask == v & mask)
}

fn v4(m: &ofp::Masked<std::net::Ipv4Addr>, addr: IpAddr) -> bool {
    addr.is_ipv4() && prefix_matches(addr, Some((u32::from(m.value).into(), m.mask.map_or(u32::MAX, u32::from).into())))
}

fn v6(m: &ofp::Masked<std::net::Ipv6Addr>, addr: IpAddr) -> bool {
    addr.is_ipv6() && prefix_matches(addr, Some((m.value.into(), m.mask.map_or(u128::MAX, u128::from))))
}

/// Whether match field `f` of a `dir` policy table matches the first packet of `p`.
pub fn field_matches(f: &Oxm, dir: Direction, p: &Packet) -> bool {
    let eth = if p.peer.is_ipv4() { 0x0800 } else { 0x86dd };
    let reg = |value: &ofp::Masked<u64>| {
        let reg = u64::from(p.ofport) << 32;
        let mask = value.mask.unwrap_or(u64::MAX);
        reg & mask == value.value & mask
    };
    let port = |want: u8, m: &ofp::Masked<u16>| {
        let mask = m.mask.unwrap_or(u16::MAX);
        p.proto == want && p.dport & mask == m.value & mask
    };
    match (f, dir) {
        (Oxm::EthType(t), _) => *t == eth,
        (Oxm::IpProto(x), _) | (Oxm::CtNwProto(x), _) => *x == p.proto,
        // The connection's first packet: +new+trk, not a reply.
        (Oxm::CtState(m), _) => 0x21 & m.mask.unwrap_or(u32::MAX) == m.value & m.mask.unwrap_or(u32::MAX),
        (Oxm::CtNwSrc(m), Direction::Ingress) | (Oxm::CtNwDst(m), Direction::Egress) => v4(m, p.peer),
        (Oxm::CtIpv6Src(m), Direction::Ingress) | (Oxm::CtIpv6Dst(m), Direction::Egress) => v6(m, p.peer),
        (Oxm::CtTpDst(m), _) => [6, 17].contains(&p.proto) && port(p.proto, m),
        (Oxm::SctpDst(m), _) => port(132, m),
        // The reply's clause of an SCTP port never matches a first packet.
        (Oxm::SctpSrc(_), _) => false,
        // A first packet is no later fragment.
        (Oxm::IpFrag(_), _) => false,
        (Oxm::XReg { index: 2, value }, Direction::Ingress) => reg(value),
        (Oxm::XReg { index: 1, value }, Direction::Egress) => reg(value),
        (other, _) => panic!("unexpected field in {dir:?} policy tables: {other:?}"),
    }
}

/// The verdict of `dir`'s policy tables on a new connection.
pub fn verdict(flows: &FlowTable, dir: Direction, p: &Packet) -> Verdict {
    if let Some(&(_, id)) = complete_conjunctions(flows, dir.rule_table(), dir, p).first() {
        let conj_flow = conj_flow(flows, dir.rule_table(), id, dir, p);
        assert!(conj_flow.is_some_and(|(k, _)| k.priority == 190), "conjunction {id} has no conj_id flow");
        return Verdict::Allow;
    }
    let isolated = flows.keys().any(|k| {
        k.table == dir.default_table() && k.priority == 200 && k.match_.fields.iter().all(|f| field_matches(f, dir, p))
    });
    if isolated {
        Verdict::Drop
    } else {
        Verdict::Allow
    }
}

/// The conjunctions of `table` every clause of which has a flow matching `p`, as (priority,
/// id), highest priority first (OVS takes the highest-priority complete one).
pub fn complete_conjunctions(flows: &FlowTable, table: u8, dir: Direction, p: &Packet) -> Vec<(u16, u32)> {
    let mut clauses: BTreeMap<(u16, u32), (u8, BTreeSet<u8>)> = BTreeMap::new();
    for (k, v) in flows.range(..) {
        let is_clause = v.instructions.iter().any(|i| match i {
            Instruction::ApplyActions(acts) => acts.iter().any(|a| matches!(a, Action::Conjunction { .. })),
            _ => false,
        });
        if k.table != table || !is_clause {
            continue;
        }
        if !k.match_.fields.iter().all(|f| field_matches(f, dir, p)) {
            continue;
        }
        for i in &v.instructions {
            if let Instruction::ApplyActions(acts) = i {
                for a in acts {
                    if let Action::Conjunction { id, clause, n_clauses } = a {
                        let e = clauses.entry((k.priority, *id)).or_insert((*n_clauses, BTreeSet::new()));
                        e.1.insert(*clause);
                    }
                }
            }
        }
    }
    let mut out: Vec<(u16, u32)> =
        clauses.into_iter().filter(|(_, (n, seen))| seen.len() == usize::from(*n)).map(|(k, _)| k).collect();
    out.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    out
}

/// The `conj_id` flow of conjunction `id` in `table` that the first packet of `p` takes.
pub fn conj_flow<'f>(
    flows: &'f FlowTable,
    table: u8,
    id: u32,
    dir: Direction,
    p: &Packet,
) -> Option<(&'f npagent::compiler::FlowKey, &'f npagent::compiler::FlowValue)> {
    flows.iter().find(|(k, _)| {
        k.table == table
            && k.match_.fields.contains(&Oxm::ConjId(id))
            && k.match_.fields.iter().all(|f| matches!(f, Oxm::ConjId(_)) || field_matches(f, dir, p))
    })
}
