//! Flows in exactly the text of `ovs-ofctl -O OpenFlow15 dump-flows --no-stats --names`
//! (tables by name, ports by name), for `npagent flows` and for comparing with a live bridge.
//! Covers the fields and actions npagent's pipeline uses.

use super::flow::{FlowTable, ETH_ARP, ETH_IP, ETH_IPV6};
use super::tables;
use ofp::{Action, CtZoneSrc, Instruction, Masked, Oxm};
use std::collections::BTreeMap;
use std::fmt::Write;

/// One line per flow, sorted. `ports` names ofports (the bridge's interface names).
pub fn flows_text(flows: &FlowTable, ports: &BTreeMap<u32, String>) -> Vec<String> {
    let mut lines: Vec<String> = flows
        .iter()
        .map(|(k, v)| {
            let mut s = String::new();
            if v.cookie != 0 {
                let _ = write!(s, " cookie={:#x},", v.cookie);
            }
            let _ = write!(s, " table={},", table(k.table));
            let _ = write!(s, " priority={}", k.priority);
            let m = format_match(&k.match_.fields);
            if !m.is_empty() {
                s.push(',');
                s.push_str(&m);
            }
            s.push_str(" actions=");
            s.push_str(&format_instructions(&v.instructions, ports));
            s
        })
        .collect();
    lines.sort();
    lines
}

fn table(id: u8) -> String {
    tables::table_name(id).map(str::to_string).unwrap_or_else(|| id.to_string())
}

/// A match in OVS's field order: conj_id, ct_state, protocol shorthand, registers, dl_dst,
/// addresses, ports, icmp type.
pub fn format_match(fields: &[Oxm]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let eth = fields.iter().find_map(|f| if let Oxm::EthType(t) = f { Some(*t) } else { None });
    let proto = fields.iter().find_map(|f| if let Oxm::IpProto(p) = f { Some(*p) } else { None });
    for f in fields {
        if let Oxm::ConjId(id) = f {
            parts.push(format!("conj_id={id}"));
        }
    }
    for f in fields {
        if let Oxm::CtState(m) = f {
            parts.push(format!("ct_state={}", ct_flags(m)));
        }
    }
    match (eth, proto) {
        (Some(ETH_IP), None) => parts.push("ip".into()),
        (Some(ETH_IPV6), None) => parts.push("ipv6".into()),
        (Some(ETH_ARP), _) => parts.push("arp".into()),
        (Some(ETH_IP), Some(6)) => parts.push("tcp".into()),
        (Some(ETH_IP), Some(17)) => parts.push("udp".into()),
        (Some(ETH_IP), Some(132)) => parts.push("sctp".into()),
        (Some(ETH_IP), Some(1)) => parts.push("icmp".into()),
        (Some(ETH_IPV6), Some(6)) => parts.push("tcp6".into()),
        (Some(ETH_IPV6), Some(17)) => parts.push("udp6".into()),
        (Some(ETH_IPV6), Some(132)) => parts.push("sctp6".into()),
        (Some(ETH_IPV6), Some(58)) => parts.push("icmp6".into()),
        (Some(t), p) => {
            parts.push(format!("dl_type={t:#06x}"));
            if let Some(p) = p {
                parts.push(format!("nw_proto={p}"));
            }
        }
        (None, _) => {}
    }
    for f in fields {
        if let Oxm::XReg { index, value } = f {
            let mask = value.mask.unwrap_or(u64::MAX);
            for (reg, shift) in [(index * 2, 32u32), (index * 2 + 1, 0)] {
                let m = ((mask >> shift) & 0xffff_ffff) as u32;
                let v = ((value.value >> shift) & 0xffff_ffff) as u32;
                match m {
                    0 => {}
                    u32::MAX => parts.push(format!("reg{reg}={v:#x}")),
                    m => parts.push(format!("reg{reg}={v:#x}/{m:#x}")),
                }
            }
        }
    }
    for f in fields {
        match f {
            Oxm::EthDst(m) => parts.push(format!("dl_dst={}", mac_masked(m))),
            Oxm::Ipv4Src(m) => parts.push(format!("nw_src={}", v4(m))),
            Oxm::Ipv6Src(m) => parts.push(format!("ipv6_src={}", v6(m))),
            _ => {}
        }
    }
    for f in fields {
        match f {
            Oxm::TcpDst(m) | Oxm::UdpDst(m) | Oxm::SctpDst(m) => parts.push(format!("tp_dst={}", u16_masked(m))),
            Oxm::Icmpv6Type(t) | Oxm::Icmpv4Type(t) => parts.push(format!("icmp_type={t}")),
            _ => {}
        }
    }
    parts.join(",")
}

fn ct_flags(m: &Masked<u32>) -> String {
    const NAMES: [&str; 8] = ["new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"];
    let mask = m.mask.unwrap_or(u32::MAX);
    let mut s = String::new();
    for (bit, name) in NAMES.iter().enumerate() {
        let b = 1u32 << bit;
        if mask & b != 0 {
            s.push(if m.value & b != 0 { '+' } else { '-' });
            s.push_str(name);
        }
    }
    s
}

fn mac_masked(m: &Masked<[u8; 6]>) -> String {
    let mac = |b: [u8; 6]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":");
    match m.mask {
        None => mac(m.value),
        Some(mask) => format!("{}/{}", mac(m.value), mac(mask)),
    }
}

fn v4(m: &Masked<std::net::Ipv4Addr>) -> String {
    match m.mask {
        None => m.value.to_string(),
        Some(mask) => {
            let bits = u32::from(mask);
            if bits.leading_ones() + bits.trailing_zeros() == 32 {
                format!("{}/{}", m.value, bits.leading_ones())
            } else {
                format!("{}/{}", m.value, mask)
            }
        }
    }
}

fn v6(m: &Masked<std::net::Ipv6Addr>) -> String {
    match m.mask {
        None => m.value.to_string(),
        Some(mask) => {
            let bits = u128::from(mask);
            if bits.leading_ones() + bits.trailing_zeros() == 128 {
                format!("{}/{}", m.value, bits.leading_ones())
            } else {
                format!("{}/{}", m.value, mask)
            }
        }
    }
}

fn u16_masked(m: &Masked<u16>) -> String {
    match m.mask {
        None => m.value.to_string(),
        Some(mask) => format!("{:#x}/{:#x}", m.value, mask),
    }
}

/// Instructions as OVS prints them after `actions=`.
pub fn format_instructions(ins: &[Instruction], ports: &BTreeMap<u32, String>) -> String {
    let mut parts = Vec::new();
    for i in ins {
        match i {
            Instruction::ApplyActions(a) => parts.extend(a.iter().map(|a| format_action(a, ports))),
            Instruction::GotoTable(t) => parts.push(format!("goto_table:{}", table(*t))),
            other => parts.push(format!("{other:?}")),
        }
    }
    if parts.is_empty() { "drop".into() } else { parts.join(",") }
}

/// OVS prints a port name bare when it is a letter followed by letters and digits, else
/// quoted (checked against ovs-ofctl 3.1: `Pq`, `eth0` bare; `p_1`, `1a`, `a-x` quoted).
fn port_name(name: &str) -> String {
    let bare = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) && name.chars().all(|c| c.is_ascii_alphanumeric());
    if bare {
        name.to_string()
    } else {
        let mut s = String::from('"');
        for c in name.chars() {
            if c == '"' || c == '\\' {
                s.push('\\');
            }
            s.push(c);
        }
        s.push('"');
        s
    }
}

fn format_action(a: &Action, ports: &BTreeMap<u32, String>) -> String {
    match a {
        Action::Output { port, .. } if *port == ofp::port::NORMAL => "NORMAL".into(),
        Action::Output { port, .. } => match ports.get(port) {
            Some(name) => format!("output:{}", port_name(name)),
            None => format!("output:{port}"),
        },
        Action::Conjunction { id, clause, n_clauses } => format!("conjunction({id},{}/{n_clauses})", u16::from(*clause) + 1),
        Action::Controller2(c) => {
            let mut kv = Vec::new();
            if let Some(r) = c.reason {
                kv.push(format!("reason={r}"));
            }
            if let Some(m) = c.max_len {
                kv.push(format!("max_len={m}"));
            }
            if let Some(id) = c.controller_id.filter(|id| *id != 0) {
                kv.push(format!("id={id}"));
            }
            if let Some(u) = &c.userdata {
                kv.push(format!("userdata={}", u.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(".")));
            }
            if c.pause {
                kv.push("pause".into());
            }
            if let Some(m) = c.meter_id {
                kv.push(format!("meter_id={m}"));
            }
            format!("controller({})", kv.join(","))
        }
        Action::Ct(ct) => {
            let mut kv = Vec::new();
            if ct.flags & 1 != 0 {
                kv.push("commit".to_string());
            }
            if let Some(t) = ct.table {
                kv.push(format!("table={}", table(t)));
            }
            if let CtZoneSrc::Imm(z) = ct.zone {
                if z != 0 {
                    kv.push(format!("zone={z}"));
                }
            }
            format!("ct({})", kv.join(","))
        }
        Action::SetField(Oxm::Reg { index, value }) => match value.mask {
            None => format!("set_field:{:#x}->reg{index}", value.value),
            Some(m) => format!("set_field:{:#x}/{m:#x}->reg{index}", value.value),
        },
        other => format!("{other:?}"),
    }
}
