//! The one canonical form of a match and of instructions, applied to desired flows and to
//! flows dumped from the switch alike, so that an installed flow equals its desired flow.
//!
//! What OVS does to a match before it reports it (OF1.5 flow stats): registers come back as
//! 64-bit xregs (class 0x8001; reg(2n) high, reg(2n+1) low, masked when only one half is
//! set); values are ANDed with their masks; all-ones masks are dropped, all-zero masks drop
//! the field; fields come in OVS's own order.

use ofp::{Action, Instruction, Masked, Match, Oxm};

/// Canonical form of a match: xregs instead of 32-bit registers, values ANDed with masks,
/// all-ones masks removed, all-zero-mask fields removed, fields in a fixed order that also
/// satisfies OpenFlow prerequisites (eth_type before ip_proto before L4 ports).
pub fn normalize_match(m: &Match) -> Match {
    let mut xregs: [Option<(u64, u64)>; 16] = [None; 16];
    let mut ct_state: Option<(u32, u32)> = None;
    let mut fields = Vec::with_capacity(m.fields.len());
    for f in &m.fields {
        match f {
            // Several ct_state matches are one: their bits together.
            Oxm::CtState(m) => {
                let mask = m.mask.unwrap_or(u32::MAX);
                let (v, om) = ct_state.unwrap_or((0, 0));
                ct_state = Some(((v & !mask) | (m.value & mask), om | mask));
            }
            Oxm::Reg { index, value } => {
                let (v, mask) = (u64::from(value.value), u64::from(value.mask.unwrap_or(u32::MAX)));
                let (v, mask) = if index % 2 == 0 { (v << 32, mask << 32) } else { (v, mask) };
                merge_xreg(&mut xregs, usize::from(index / 2), v, mask);
            }
            Oxm::XReg { index, value } => {
                merge_xreg(&mut xregs, usize::from(*index), value.value, value.mask.unwrap_or(u64::MAX));
            }
            other => {
                if let Some(n) = normalize_field(other) {
                    fields.push(n);
                }
            }
        }
    }
    if let Some((v, mask)) = ct_state {
        if let Some(value) = canon(v, mask, 0u32, u32::MAX, |a, b| a & b) {
            fields.push(Oxm::CtState(value));
        }
    }
    for (i, x) in xregs.iter().enumerate() {
        if let Some((v, mask)) = x {
            if let Some(value) = canon(*v, *mask, 0u64, u64::MAX, |a, b| a & b) {
                fields.push(Oxm::XReg { index: i as u8, value });
            }
        }
    }
    fields.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| a.cmp(b)));
    Match { fields }
}

fn merge_xreg(xregs: &mut [Option<(u64, u64)>; 16], i: usize, v: u64, mask: u64) {
    if let Some(slot) = xregs.get_mut(i) {
        let (ov, om) = slot.unwrap_or((0, 0));
        *slot = Some(((ov & !mask) | (v & mask), om | mask));
    }
}

fn canon<T: Copy + PartialEq>(v: T, mask: T, zero: T, ones: T, and: fn(T, T) -> T) -> Option<Masked<T>> {
    if mask == zero {
        None
    } else if mask == ones {
        Some(Masked { value: v, mask: None })
    } else {
        Some(Masked { value: and(v, mask), mask: Some(mask) })
    }
}

fn masked<T: Copy + PartialEq>(m: &Masked<T>, zero: T, ones: T, and: fn(T, T) -> T) -> Option<Masked<T>> {
    match m.mask {
        None => Some(*m),
        Some(mask) => canon(m.value, mask, zero, ones, and),
    }
}

fn normalize_field(f: &Oxm) -> Option<Oxm> {
    use std::net::{Ipv4Addr, Ipv6Addr};
    fn and4(a: Ipv4Addr, b: Ipv4Addr) -> Ipv4Addr {
        (u32::from(a) & u32::from(b)).into()
    }
    fn and6(a: Ipv6Addr, b: Ipv6Addr) -> Ipv6Addr {
        (u128::from(a) & u128::from(b)).into()
    }
    fn andmac(a: [u8; 6], b: [u8; 6]) -> [u8; 6] {
        let mut o = a;
        for (x, y) in o.iter_mut().zip(b) {
            *x &= y;
        }
        o
    }
    let v4z = Ipv4Addr::UNSPECIFIED;
    let v4o = Ipv4Addr::BROADCAST;
    let v6z = Ipv6Addr::UNSPECIFIED;
    let v6o = Ipv6Addr::from(u128::MAX);
    Some(match f {
        Oxm::Metadata(m) => Oxm::Metadata(masked(m, 0, u64::MAX, |a, b| a & b)?),
        Oxm::EthDst(m) => Oxm::EthDst(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::EthSrc(m) => Oxm::EthSrc(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::Ipv4Src(m) => Oxm::Ipv4Src(masked(m, v4z, v4o, and4)?),
        Oxm::Ipv4Dst(m) => Oxm::Ipv4Dst(masked(m, v4z, v4o, and4)?),
        Oxm::Ipv6Src(m) => Oxm::Ipv6Src(masked(m, v6z, v6o, and6)?),
        Oxm::Ipv6Dst(m) => Oxm::Ipv6Dst(masked(m, v6z, v6o, and6)?),
        Oxm::ArpSpa(m) => Oxm::ArpSpa(masked(m, v4z, v4o, and4)?),
        Oxm::ArpTpa(m) => Oxm::ArpTpa(masked(m, v4z, v4o, and4)?),
        Oxm::ArpSha(m) => Oxm::ArpSha(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::ArpTha(m) => Oxm::ArpTha(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::Ipv6NdTarget(m) => Oxm::Ipv6NdTarget(masked(m, v6z, v6o, and6)?),
        Oxm::Ipv6NdSll(m) => Oxm::Ipv6NdSll(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::Ipv6NdTll(m) => Oxm::Ipv6NdTll(masked(m, [0; 6], [0xff; 6], andmac)?),
        Oxm::TcpSrc(m) => Oxm::TcpSrc(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::TcpDst(m) => Oxm::TcpDst(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::UdpSrc(m) => Oxm::UdpSrc(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::UdpDst(m) => Oxm::UdpDst(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::SctpSrc(m) => Oxm::SctpSrc(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::SctpDst(m) => Oxm::SctpDst(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::TcpFlags(m) => Oxm::TcpFlags(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::CtMark(m) => Oxm::CtMark(masked(m, 0, u32::MAX, |a, b| a & b)?),
        Oxm::CtLabel(m) => Oxm::CtLabel(masked(m, 0, u128::MAX, |a, b| a & b)?),
        Oxm::PktMark(m) => Oxm::PktMark(masked(m, 0, u32::MAX, |a, b| a & b)?),
        Oxm::CtNwSrc(m) => Oxm::CtNwSrc(masked(m, v4z, v4o, and4)?),
        Oxm::CtNwDst(m) => Oxm::CtNwDst(masked(m, v4z, v4o, and4)?),
        Oxm::CtIpv6Src(m) => Oxm::CtIpv6Src(masked(m, v6z, v6o, and6)?),
        Oxm::CtIpv6Dst(m) => Oxm::CtIpv6Dst(masked(m, v6z, v6o, and6)?),
        Oxm::CtTpSrc(m) => Oxm::CtTpSrc(masked(m, 0, u16::MAX, |a, b| a & b)?),
        Oxm::CtTpDst(m) => Oxm::CtTpDst(masked(m, 0, u16::MAX, |a, b| a & b)?),
        // OVS keeps two bits of nw_frag; all of them is an exact match.
        Oxm::IpFrag(m) => {
            Oxm::IpFrag(masked(&Masked { value: m.value & 3, mask: m.mask.map(|x| x & 3) }, 0, 3, |a, b| a & b)?)
        }
        // OVS's vlan_tci holds 13 bits (VID and the present bit): that mask is an exact match.
        Oxm::VlanVid(m) => {
            Oxm::VlanVid(masked(&Masked { value: m.value, mask: m.mask.map(|x| x & 0x1fff) }, 0, 0x1fff, |a, b| a & b)?)
        }
        other => other.clone(),
    })
}

/// Sort rank: prerequisites first (eth_type < ip_proto < L3 < L4), then metadata-like fields.
fn rank(f: &Oxm) -> u8 {
    match f {
        Oxm::InPort(_) => 0,
        Oxm::EthType(_) => 1,
        Oxm::EthDst(_) => 2,
        Oxm::EthSrc(_) => 3,
        Oxm::VlanVid(_) => 3,
        Oxm::IpProto(_) | Oxm::ArpOp(_) => 4,
        Oxm::Ipv4Src(_) | Oxm::ArpSpa(_) => 5,
        Oxm::Ipv4Dst(_) | Oxm::ArpTpa(_) => 6,
        Oxm::ArpSha(_) => 7,
        Oxm::ArpTha(_) => 8,
        Oxm::Ipv6Src(_) => 7,
        Oxm::Ipv6Dst(_) => 8,
        Oxm::TcpSrc(_) | Oxm::UdpSrc(_) | Oxm::SctpSrc(_) => 9,
        Oxm::TcpDst(_) | Oxm::UdpDst(_) | Oxm::SctpDst(_) => 10,
        Oxm::Icmpv4Type(_) | Oxm::Icmpv6Type(_) => 11,
        Oxm::Icmpv4Code(_) | Oxm::Icmpv6Code(_) => 12,
        Oxm::Ipv6NdTarget(_) | Oxm::Ipv6NdSll(_) | Oxm::Ipv6NdTll(_) => 12,
        Oxm::TcpFlags(_) => 13,
        Oxm::CtState(_) => 14,
        Oxm::CtZone(_) => 15,
        Oxm::CtMark(_) => 16,
        Oxm::CtLabel(_) => 17,
        // After ct_state on the wire: OVS checks a tuple field's prerequisite in order.
        Oxm::CtNwSrc(_) | Oxm::CtIpv6Src(_) => 17,
        Oxm::CtNwDst(_) | Oxm::CtIpv6Dst(_) => 17,
        Oxm::CtNwProto(_) => 17,
        Oxm::CtTpSrc(_) => 17,
        Oxm::CtTpDst(_) => 17,
        Oxm::ConjId(_) => 18,
        Oxm::PktMark(_) => 19,
        Oxm::Metadata(_) => 20,
        Oxm::Reg { .. } | Oxm::XReg { .. } => 21,
        _ => 30,
    }
}

/// Canonical form of instructions as OVS reports them: `output` to a port other than the
/// controller carries max_len 0; register loads written as `set_field` on a 32-bit register.
pub fn normalize_instructions(i: &[Instruction]) -> Vec<Instruction> {
    i.iter()
        .map(|ins| match ins.lenient() {
            Instruction::ApplyActions(a) => Instruction::ApplyActions(a.iter().map(normalize_action).collect()),
            Instruction::WriteActions(a) => Instruction::WriteActions(a.iter().map(normalize_action).collect()),
            other => other,
        })
        .collect()
}

fn normalize_action(a: &Action) -> Action {
    match a {
        Action::Output { port, .. } if *port != ofp::port::CONTROLLER => Action::Output { port: *port, max_len: 0 },
        Action::SetField(Oxm::XReg { index, value }) => {
            let mask = value.mask.unwrap_or(u64::MAX);
            if mask == 0x0000_0000_ffff_ffff {
                Action::SetField(Oxm::Reg { index: index * 2 + 1, value: Masked::exact(value.value as u32) })
            } else if mask == 0xffff_ffff_0000_0000 {
                Action::SetField(Oxm::Reg { index: index * 2, value: Masked::exact((value.value >> 32) as u32) })
            } else {
                a.clone()
            }
        }
        Action::SetField(Oxm::Reg { index, value }) if value.mask == Some(u32::MAX) => {
            Action::SetField(Oxm::Reg { index: *index, value: Masked::exact(value.value) })
        }
        Action::Clone(inner) => Action::Clone(inner.iter().map(normalize_action).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofp::numbers::{eth_type, ip_proto};
    use std::net::Ipv4Addr;

    #[test]
    fn registers_become_xregs() {
        let m = Match { fields: vec![Oxm::Reg { index: 1, value: Masked::exact(5) }] };
        let want = Oxm::XReg { index: 0, value: Masked::masked(5, 0xffff_ffff) };
        assert_eq!(normalize_match(&m).fields, vec![want.clone()]);
        // As OVS reports it, unchanged.
        assert_eq!(normalize_match(&Match { fields: vec![want.clone()] }).fields, vec![want]);
        // Both halves: one exact xreg.
        let both = Match {
            fields: vec![
                Oxm::Reg { index: 1, value: Masked::exact(5) },
                Oxm::Reg { index: 0, value: Masked::exact(3) },
            ],
        };
        assert_eq!(normalize_match(&both).fields, vec![Oxm::XReg { index: 0, value: Masked::exact(0x3_0000_0005) }]);
        // reg0 alone is the high half.
        let r0 = Match { fields: vec![Oxm::Reg { index: 0, value: Masked::exact(3) }] };
        assert_eq!(
            normalize_match(&r0).fields,
            vec![Oxm::XReg { index: 0, value: Masked::masked(0x3_0000_0000, 0xffff_ffff_0000_0000) }]
        );
    }

    #[test]
    fn masks_are_canonical_and_order_is_fixed() {
        let m = Match {
            fields: vec![
                Oxm::TcpDst(Masked::masked(0x55, 0xfff0)),
                Oxm::Ipv4Src(Masked::masked(Ipv4Addr::new(10, 0, 0, 7), Ipv4Addr::new(255, 255, 255, 255))),
                Oxm::IpProto(ip_proto::TCP),
                Oxm::EthType(eth_type::IPV4),
                Oxm::CtMark(Masked::masked(7, 0)),
            ],
        };
        assert_eq!(
            normalize_match(&m).fields,
            vec![
                Oxm::EthType(eth_type::IPV4),
                Oxm::IpProto(ip_proto::TCP),
                Oxm::Ipv4Src(Masked::exact(Ipv4Addr::new(10, 0, 0, 7))),
                Oxm::TcpDst(Masked::masked(0x50, 0xfff0)),
            ]
        );
    }

    #[test]
    fn normalization_is_idempotent_and_order_free() {
        let fields = vec![
            Oxm::ConjId(9),
            Oxm::CtState(Masked::masked(0x22, 0x23)),
            Oxm::Reg { index: 3, value: Masked::masked(0xff, 0x0f) },
            Oxm::EthType(eth_type::IPV6),
        ];
        let a = normalize_match(&Match { fields: fields.clone() });
        let mut rev = fields;
        rev.reverse();
        assert_eq!(a, normalize_match(&Match { fields: rev }));
        assert_eq!(a, normalize_match(&a));
    }

    #[test]
    fn instructions() {
        let i = vec![Instruction::ApplyActions(vec![
            Action::Output { port: 3, max_len: 0xffff },
            Action::SetField(Oxm::XReg { index: 0, value: Masked::masked(7, 0xffff_ffff) }),
        ])];
        assert_eq!(
            normalize_instructions(&i),
            vec![Instruction::ApplyActions(vec![
                Action::Output { port: 3, max_len: 0 },
                Action::SetField(Oxm::Reg { index: 1, value: Masked::exact(7) }),
            ])]
        );
    }
}
