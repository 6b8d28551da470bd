//! Matches, printed in OVS's fixed field order with its shorthands.

use super::*;
use crate::numbers::{eth_type, ip_proto};

/// The match folded into OVS's flow/wildcard view: (value, mask) per field, value & mask.
#[derive(Default)]
pub(super) struct View {
    pkt_mark: (u32, u32),
    conj_id: Option<u32>,
    ct_state: (u32, u32),
    ct_zone: Option<u16>,
    ct_mark: (u32, u32),
    ct_label: (u128, u128),
    /// The conntrack original-direction tuple.
    ct_nw_proto: Option<u8>,
    ct_nw_src: (u32, u32),
    ct_nw_dst: (u32, u32),
    ct_ipv6_src: (u128, u128),
    ct_ipv6_dst: (u128, u128),
    ct_tp_src: (u16, u16),
    ct_tp_dst: (u16, u16),
    dl_type: Option<u16>,
    nw_proto: Option<u8>,
    regs: [(u32, u32); 32],
    metadata: (u64, u64),
    in_port: Option<u32>,
    /// OVS's `vlans[0].tci` as OXM_OF_VLAN_VID sets it: the low 13 bits (VID and CFI) only.
    vlan_tci: (u16, u16),
    dl_src: ([u8; 6], [u8; 6]),
    dl_dst: ([u8; 6], [u8; 6]),
    nw_src: (u32, u32),
    nw_dst: (u32, u32),
    ipv6_src: (u128, u128),
    ipv6_dst: (u128, u128),
    /// `arp_sha`, or `nd_sll` for neighbour discovery (OVS keeps both in one field).
    arp_sha: ([u8; 6], [u8; 6]),
    /// `arp_tha`, or `nd_tll`.
    arp_tha: ([u8; 6], [u8; 6]),
    nd_target: (u128, u128),
    tp_src: (u16, u16),
    tp_dst: (u16, u16),
    tcp_flags: (u16, u16),
    /// `nw_frag`: value and mask, the low two bits only (OVS ignores the others of the mask).
    nw_frag: (u8, u8),
    raw: Vec<String>,
}

pub(super) fn mv<T: Copy + std::ops::BitAnd<Output = T>>(v: &crate::oxm::Masked<T>, ones: T) -> (T, T) {
    let mask = v.mask.unwrap_or(ones);
    (v.value & mask, mask)
}

/// A masked value converted field by field (an address to its integer).
fn masked_map<T: Copy, U>(v: &crate::oxm::Masked<T>, f: fn(T) -> U) -> crate::oxm::Masked<U> {
    crate::oxm::Masked { value: f(v.value), mask: v.mask.map(f) }
}

pub(super) fn mac_and(a: [u8; 6], m: [u8; 6]) -> [u8; 6] {
    let mut r = [0u8; 6];
    for i in 0..6 {
        r[i] = a[i] & m[i];
    }
    r
}

impl View {
    fn build(m: &Match) -> View {
        let mut v = View::default();
        for f in &m.fields {
            match f {
                Oxm::InPort(p) => v.in_port = Some(*p),
                Oxm::Metadata(x) => v.metadata = mv(x, u64::MAX),
                Oxm::EthDst(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.dl_dst = (mac_and(x.value, mask), mask);
                }
                Oxm::EthSrc(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.dl_src = (mac_and(x.value, mask), mask);
                }
                Oxm::EthType(t) => v.dl_type = Some(*t),
                Oxm::VlanVid(x) => {
                    // OVS's match_set_vlan_vid_masked: VID and CFI bits of the mask only.
                    let mask = x.mask.unwrap_or(u16::MAX) & VLAN_VID_CFI;
                    v.vlan_tci = (x.value & mask, mask);
                }
                Oxm::IpProto(p) => v.nw_proto = Some(*p),
                Oxm::Ipv4Src(x) | Oxm::ArpSpa(x) => {
                    let mask = x.mask.map_or(u32::MAX, u32::from);
                    v.nw_src = (u32::from(x.value) & mask, mask);
                }
                Oxm::Ipv4Dst(x) | Oxm::ArpTpa(x) => {
                    let mask = x.mask.map_or(u32::MAX, u32::from);
                    v.nw_dst = (u32::from(x.value) & mask, mask);
                }
                // OVS keeps the ARP opcode in the 8-bit nw_proto.
                Oxm::ArpOp(op) => v.nw_proto = Some(*op as u8),
                Oxm::ArpSha(x) | Oxm::Ipv6NdSll(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.arp_sha = (mac_and(x.value, mask), mask);
                }
                Oxm::ArpTha(x) | Oxm::Ipv6NdTll(x) => {
                    let mask = x.mask.unwrap_or([0xff; 6]);
                    v.arp_tha = (mac_and(x.value, mask), mask);
                }
                Oxm::Ipv6NdTarget(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.nd_target = (u128::from(x.value) & mask, mask);
                }
                Oxm::Ipv6Src(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.ipv6_src = (u128::from(x.value) & mask, mask);
                }
                Oxm::Ipv6Dst(x) => {
                    let mask = x.mask.map_or(u128::MAX, u128::from);
                    v.ipv6_dst = (u128::from(x.value) & mask, mask);
                }
                Oxm::TcpSrc(x) | Oxm::UdpSrc(x) | Oxm::SctpSrc(x) => v.tp_src = mv(x, u16::MAX),
                Oxm::TcpDst(x) | Oxm::UdpDst(x) | Oxm::SctpDst(x) => v.tp_dst = mv(x, u16::MAX),
                Oxm::Icmpv4Type(t) | Oxm::Icmpv6Type(t) => v.tp_src = (u16::from(*t), u16::MAX),
                Oxm::Icmpv4Code(c) | Oxm::Icmpv6Code(c) => v.tp_dst = (u16::from(*c), u16::MAX),
                Oxm::TcpFlags(x) => v.tcp_flags = mv(x, u16::MAX),
                Oxm::IpFrag(x) => {
                    let (val, mask) = mv(x, u8::MAX);
                    v.nw_frag = (val & FRAG_BITS, mask & FRAG_BITS);
                }
                Oxm::CtState(x) => {
                    // OVS keeps ct_state in 8 bits.
                    let (val, mask) = mv(x, u32::MAX);
                    v.ct_state = (val & 0xff, mask & 0xff);
                }
                Oxm::CtZone(z) => v.ct_zone = Some(*z),
                Oxm::CtMark(x) => v.ct_mark = mv(x, u32::MAX),
                Oxm::CtLabel(x) => v.ct_label = mv(x, u128::MAX),
                Oxm::CtNwProto(p) => v.ct_nw_proto = Some(*p),
                Oxm::CtNwSrc(x) => v.ct_nw_src = mv(&masked_map(x, u32::from), u32::MAX),
                Oxm::CtNwDst(x) => v.ct_nw_dst = mv(&masked_map(x, u32::from), u32::MAX),
                Oxm::CtIpv6Src(x) => v.ct_ipv6_src = mv(&masked_map(x, u128::from), u128::MAX),
                Oxm::CtIpv6Dst(x) => v.ct_ipv6_dst = mv(&masked_map(x, u128::from), u128::MAX),
                Oxm::CtTpSrc(x) => v.ct_tp_src = mv(x, u16::MAX),
                Oxm::CtTpDst(x) => v.ct_tp_dst = mv(x, u16::MAX),
                Oxm::ConjId(c) => v.conj_id = Some(*c),
                Oxm::PktMark(x) => v.pkt_mark = mv(x, u32::MAX),
                Oxm::Reg { index, value } => {
                    if let Some(r) = v.regs.get_mut(usize::from(*index)) {
                        *r = mv(value, u32::MAX);
                    }
                }
                Oxm::XReg { index, value } => {
                    let (val, mask) = mv(value, u64::MAX);
                    let i = usize::from(*index) * 2;
                    if let Some(r) = v.regs.get_mut(i) {
                        *r = ((val >> 32) as u32, (mask >> 32) as u32);
                    }
                    if let Some(r) = v.regs.get_mut(i + 1) {
                        *r = (val as u32, mask as u32);
                    }
                }
                // OXM_OF_PACKET_TYPE Ethernet (namespace 0, type 0), not modelled: OVS sends it
                // first in a match none of whose other sent fields implies Ethernet, and prints
                // nothing for this default. Any other packet type prints raw.
                Oxm::Unknown { header: PACKET_TYPE_HEADER, payload } if payload[..] == [0; 4] => {}
                other => {
                    let mut b = bytes::BytesMut::with_capacity(other.buffer_len());
                    other.emit(&mut b);
                    v.raw.push(format!("oxm:{}", hex_plain(&b)));
                }
            }
        }
        v
    }
}

/// The conntrack original-direction tuple in OVS's match_format order: addresses (source
/// before destination, each IPv4 then IPv6), then `ct_nw_proto` and, only along with it, the
/// ports: OVS prints no `ct_tp_src`/`ct_tp_dst` when the match has no ct_nw_proto.
fn ct_tuple(s: &mut String, v: &View) {
    ip_netmask(s, "ct_nw_src", v.ct_nw_src);
    ipv6_netmask(s, "ct_ipv6_src", v.ct_ipv6_src);
    ip_netmask(s, "ct_nw_dst", v.ct_nw_dst);
    ipv6_netmask(s, "ct_ipv6_dst", v.ct_ipv6_dst);
    if let Some(p) = v.ct_nw_proto {
        let _ = write!(s, "ct_nw_proto={p},");
        be16_masked(s, "ct_tp_src", v.ct_tp_src);
        be16_masked(s, "ct_tp_dst", v.ct_tp_dst);
    }
}

/// The bits of NXM_NX_IP_FRAG: 0x1 any fragment, 0x2 a later one (nonzero offset).
pub(super) const FRAG_BITS: u8 = 0x03;

/// OVS's word for an ip_frag value under a mask (both within [`FRAG_BITS`]), or `None` for
/// the combinations it has none for (a zero mask; 2/3, a later fragment that is no fragment).
pub(super) fn frag_word(v: u8, m: u8) -> Option<&'static str> {
    Some(match (m, v & m) {
        (0x3, 0x0) | (0x1, 0x0) => "no",
        (0x3, 0x1) => "first",
        (0x3, 0x3) | (0x2, 0x2) => "later",
        (0x1, 0x1) => "yes",
        (0x2, 0x0) => "not_later",
        _ => return None,
    })
}

/// OVS's match_format of nw_frag: nothing for a zero mask, else its word or `<error>`.
fn nw_frag(s: &mut String, (v, m): (u8, u8)) {
    if m != 0 {
        let _ = write!(s, "nw_frag={},", frag_word(v, m).unwrap_or("<error>"));
    }
}

/// OXM_OF_PACKET_TYPE's header (class 0x8000, field 44, 4 bytes, no mask).
const PACKET_TYPE_HEADER: u32 = crate::oxm::oxm_header(class::OPENFLOW_BASIC, 44, false, 4);

/// The VID (0x0fff) and CFI/OFPVID_PRESENT (0x1000) bits of a TCI.
const VLAN_VID_CFI: u16 = 0x1fff;

/// OVS's match_format of the outer VLAN (no PCP): `dl_vlan=N` when it matches a tag with
/// exactly that VID, else `vlan_tci=0xVVVV/0xMMMM` (`vlan_tci=0x0000/0x1fff`: untagged only).
/// The mask never has the PCP bits, so OVS's unmasked `vlan_tci=0xVVVV` form does not arise.
fn vlan_tci(s: &mut String, (v, m): (u16, u16)) {
    if m == 0 {
        return;
    }
    if m & 0x1000 != 0 && v & 0x1000 != 0 && m & 0x0fff == 0x0fff {
        let _ = write!(s, "dl_vlan={},", v & 0x0fff);
    } else {
        let _ = write!(s, "vlan_tci=0x{v:04x}/0x{m:04x},");
    }
}

pub(super) fn hex_plain(b: &[u8]) -> String {
    b.iter().fold(String::with_capacity(b.len() * 2), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// C's `%#x`: `0` for zero, `0x..` otherwise.
pub(super) fn alt_hex(s: &mut String, v: u128) {
    if v == 0 {
        s.push('0');
    } else {
        let _ = write!(s, "{v:#x}");
    }
}

pub(super) fn u32_masked(s: &mut String, name: &str, (v, m): (u32, u32)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        alt_hex(s, v.into());
        if m != u32::MAX {
            s.push('/');
            alt_hex(s, m.into());
        }
        s.push(',');
    }
}

pub(super) fn be16_masked(s: &mut String, name: &str, (v, m): (u16, u16)) {
    if m != 0 {
        if m == u16::MAX {
            let _ = write!(s, "{name}={v},");
        } else {
            let _ = write!(s, "{name}={v:#x}/{m:#x},");
        }
    }
}

pub(super) fn eth_masked(s: &mut String, name: &str, (v, m): ([u8; 6], [u8; 6])) {
    if m != [0; 6] {
        s.push_str(name);
        s.push('=');
        push_mac(s, v);
        if m != [0xff; 6] {
            s.push('/');
            push_mac(s, m);
        }
        s.push(',');
    }
}

pub(super) fn push_mac(s: &mut String, m: [u8; 6]) {
    let _ = write!(s, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

pub(super) fn push_ipv4_masked(s: &mut String, v: u32, m: u32) {
    let _ = write!(s, "{}", Ipv4Addr::from(v));
    if m != u32::MAX {
        if m.leading_ones() + m.trailing_zeros() == 32 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            let _ = write!(s, "/{}", Ipv4Addr::from(m));
        }
    }
}

pub(super) fn ip_netmask(s: &mut String, name: &str, (v, m): (u32, u32)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        push_ipv4_masked(s, v, m);
        s.push(',');
    }
}

/// An IPv6 address as glibc's inet_ntop writes it (IPv4-compatible and -mapped forms included).
pub(super) fn push_ipv6(s: &mut String, a: u128) {
    let addr = Ipv6Addr::from(a);
    let seg = addr.segments();
    let v4 = Ipv4Addr::from(a as u32);
    if seg[..6] == [0; 6] && a > 0xffff {
        let _ = write!(s, "::{v4}");
    } else if seg[..5] == [0; 5] && seg[5] == 0xffff {
        let _ = write!(s, "::ffff:{v4}");
    } else {
        let _ = write!(s, "{addr}");
    }
}

pub(super) fn push_ipv6_masked(s: &mut String, v: u128, m: u128) {
    push_ipv6(s, v);
    if m != u128::MAX {
        if m.leading_ones() + m.trailing_zeros() == 128 {
            let _ = write!(s, "/{}", m.leading_ones());
        } else {
            s.push('/');
            push_ipv6(s, m);
        }
    }
}

pub(super) fn ipv6_netmask(s: &mut String, name: &str, (v, m): (u128, u128)) {
    if m != 0 {
        s.push_str(name);
        s.push('=');
        push_ipv6_masked(s, v, m);
        s.push(',');
    }
}

pub(super) fn ct_state_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x01 => "new",
        0x02 => "est",
        0x04 => "rel",
        0x08 => "rpl",
        0x10 => "inv",
        0x20 => "trk",
        0x40 => "snat",
        0x80 => "dnat",
        _ => return None,
    })
}

pub(super) fn tcp_flag_name(bit: u32) -> Option<&'static str> {
    Some(match bit {
        0x001 => "fin",
        0x002 => "syn",
        0x004 => "rst",
        0x008 => "psh",
        0x010 => "ack",
        0x020 => "urg",
        0x040 => "ece",
        0x080 => "cwr",
        0x100 => "ns",
        0x200 => "[200]",
        0x400 => "[400]",
        0x800 => "[800]",
        _ => return None,
    })
}

/// OVS's `format_flags`: names joined by `del`, unknown bits as one hex number, `0` if none.
pub(super) fn flags(s: &mut String, name: fn(u32) -> Option<&'static str>, mut v: u32, del: char) {
    if v == 0 {
        s.push('0');
        return;
    }
    let mut bad = 0;
    let mut first = true;
    while v != 0 {
        let bit = v & v.wrapping_neg();
        match name(bit) {
            Some(n) => {
                if !first {
                    s.push(del);
                }
                s.push_str(n);
                first = false;
            }
            None => bad |= bit,
        }
        v &= !bit;
    }
    if bad != 0 {
        if !first {
            s.push(del);
        }
        let _ = write!(s, "{bad:#x}");
    }
}

/// OVS's `format_flags_masked`.
pub(super) fn flags_masked(s: &mut String, name: fn(u32) -> Option<&'static str>, v: u32, mut m: u32, max: u32) {
    if m == max {
        flags(s, name, v, '|');
        return;
    }
    if m == 0 {
        s.push_str("0/0");
        return;
    }
    while m != 0 {
        let bit = m & m.wrapping_neg();
        s.push(if v & bit != 0 { '+' } else { '-' });
        s.push_str(name(bit).unwrap_or("[Unknown]"));
        m &= !bit;
    }
}

pub(super) fn write_match(s: &mut String, m: &Match, priority: Option<u16>, n: &Names<'_>) {
    let start = s.len();
    if let Some(p) = priority.filter(|&p| p != DEFAULT_PRIORITY) {
        let _ = write!(s, "priority={p},");
    }
    let v = View::build(m);
    u32_masked(s, "pkt_mark", v.pkt_mark);
    if let Some(c) = v.conj_id {
        let _ = write!(s, "conj_id={c},");
    }
    let (cs, csm) = v.ct_state;
    if csm != 0 {
        s.push_str("ct_state=");
        if csm == 0xff {
            flags(s, ct_state_name, cs, '|');
        } else {
            flags_masked(s, ct_state_name, cs, csm, 0xff);
        }
        s.push(',');
    }
    if let Some(z) = v.ct_zone {
        let _ = write!(s, "ct_zone={z},");
    }
    u32_masked(s, "ct_mark", v.ct_mark);
    if v.ct_label.1 != 0 {
        s.push_str("ct_label=");
        ds_put_hex(s, v.ct_label.0);
        if v.ct_label.1 != u128::MAX {
            s.push('/');
            ds_put_hex(s, v.ct_label.1);
        }
        s.push(',');
    }
    ct_tuple(s, &v);
    let dl_type = v.dl_type.unwrap_or(0);
    let mut skip_type = false;
    let mut skip_proto = false;
    if let Some(t) = v.dl_type {
        skip_type = true;
        let proto = |ip4: bool| -> Option<&'static str> {
            Some(match (v.nw_proto?, ip4) {
                (ip_proto::ICMP, true) => "icmp",
                (ip_proto::TCP, true) => "tcp",
                (ip_proto::UDP, true) => "udp",
                (ip_proto::SCTP, true) => "sctp",
                (ip_proto::ICMPV6, false) => "icmp6",
                (ip_proto::TCP, false) => "tcp6",
                (ip_proto::UDP, false) => "udp6",
                (ip_proto::SCTP, false) => "sctp6",
                _ => return None,
            })
        };
        let short = match t {
            eth_type::IPV4 | eth_type::IPV6 => {
                let ip4 = t == eth_type::IPV4;
                match proto(ip4) {
                    Some(p) => {
                        skip_proto = true;
                        p
                    }
                    None if ip4 => "ip",
                    None => "ipv6",
                }
            }
            eth_type::ARP => "arp",
            eth_type::RARP => "rarp",
            eth_type::MPLS => "mpls",
            eth_type::MPLS_MULTICAST => "mplsm",
            _ => {
                skip_type = false;
                ""
            }
        };
        if skip_type {
            s.push_str(short);
            s.push(',');
        }
    }
    for (i, r) in v.regs.iter().enumerate() {
        if r.1 != 0 {
            u32_masked(s, &format!("reg{i}"), *r);
        }
    }
    let (md, mdm) = v.metadata;
    if mdm != 0 {
        s.push_str("metadata=");
        alt_hex(s, md.into());
        if mdm != u64::MAX {
            s.push('/');
            alt_hex(s, mdm.into());
        }
        s.push(',');
    }
    if let Some(p) = v.in_port {
        s.push_str("in_port=");
        push_port32(s, p, n);
        s.push(',');
    }
    vlan_tci(s, v.vlan_tci);
    eth_masked(s, "dl_src", v.dl_src);
    eth_masked(s, "dl_dst", v.dl_dst);
    if !skip_type {
        if let Some(t) = v.dl_type {
            let _ = write!(s, "dl_type=0x{t:04x},");
        }
    }
    let arp = dl_type == eth_type::ARP || dl_type == eth_type::RARP;
    if dl_type == eth_type::IPV6 {
        ipv6_netmask(s, "ipv6_src", v.ipv6_src);
        ipv6_netmask(s, "ipv6_dst", v.ipv6_dst);
    } else if arp {
        ip_netmask(s, "arp_spa", v.nw_src);
        ip_netmask(s, "arp_tpa", v.nw_dst);
    } else {
        ip_netmask(s, "nw_src", v.nw_src);
        ip_netmask(s, "nw_dst", v.nw_dst);
    }
    if !skip_proto {
        if let Some(p) = v.nw_proto {
            let _ = write!(s, "{}={p},", if arp { "arp_op" } else { "nw_proto" });
        }
    }
    if arp {
        eth_masked(s, "arp_sha", v.arp_sha);
        eth_masked(s, "arp_tha", v.arp_tha);
    }
    nw_frag(s, v.nw_frag);
    let is_ip = dl_type == eth_type::IPV4 || dl_type == eth_type::IPV6;
    let proto = v.nw_proto.unwrap_or(0);
    if is_ip && (proto == ip_proto::ICMP || proto == ip_proto::ICMPV6) {
        be16_masked(s, "icmp_type", v.tp_src);
        be16_masked(s, "icmp_code", v.tp_dst);
        if proto == ip_proto::ICMPV6 && dl_type == eth_type::IPV6 {
            ipv6_netmask(s, "nd_target", v.nd_target);
            eth_masked(s, "nd_sll", v.arp_sha);
            eth_masked(s, "nd_tll", v.arp_tha);
        }
    } else if is_ip && proto == ip_proto::IGMP {
        be16_masked(s, "igmp_type", v.tp_src);
        be16_masked(s, "igmp_code", v.tp_dst);
    } else {
        be16_masked(s, "tp_src", v.tp_src);
        be16_masked(s, "tp_dst", v.tp_dst);
    }
    if is_ip && proto == ip_proto::TCP && v.tcp_flags.1 & 0x0fff != 0 {
        s.push_str("tcp_flags=");
        flags_masked(s, tcp_flag_name, u32::from(v.tcp_flags.0), u32::from(v.tcp_flags.1 & 0x0fff), 0x0fff);
        s.push(',');
    }
    for r in &v.raw {
        s.push_str(r);
        s.push(',');
    }
    if s.len() > start && s.ends_with(',') {
        s.pop();
    }
}

/// OVS's `ds_put_hex` of a big-endian integer: `0x` + hex without leading zeros, `0` for zero.
pub(super) fn ds_put_hex(s: &mut String, v: u128) {
    alt_hex(s, v);
}
