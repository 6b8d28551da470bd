//! OXM/NXM match fields and `ofp_match` (type 1 = OXM, padded to 8).
//!
//! One TLV: header u32 = class u16 | field u7 | hasmask u1 | length u8, then the value and, when
//! hasmask is set, a mask of the same size. Experimenter TLVs (class 0xffff) carry a 4-byte
//! experimenter id that the length byte counts. A TLV whose class, field, mask bit and length
//! match a modelled field becomes a typed [`Oxm`]; anything else is kept raw so it round-trips.

use crate::error::{Error, Result};
use crate::wire::{check_zero, pad8, parse_list, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};
use std::net::{Ipv4Addr, Ipv6Addr};

/// A value with an optional mask. `mask: None` is the unmasked wire form; `Some(all-ones)` is
/// kept as sent so re-emitting reproduces the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Masked<T> {
    pub value: T,
    pub mask: Option<T>,
}

impl<T> Masked<T> {
    /// An exact (unmasked) value.
    pub fn exact(value: T) -> Self {
        Masked { value, mask: None }
    }
    /// A value under a mask.
    #[allow(
        clippy::self_named_constructors,
        reason = "`Masked::masked(value, mask)` beside `Masked::exact(value)` says which kind it builds"
    )]
    pub fn masked(value: T, mask: T) -> Self {
        Masked { value, mask: Some(mask) }
    }
}

/// One OXM TLV. Fields npagent uses are typed; any other is kept raw so it round-trips.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Oxm {
    /// OXM_OF_IN_PORT (be32).
    InPort(u32),
    /// OXM_OF_METADATA.
    Metadata(Masked<u64>),
    EthDst(Masked<[u8; 6]>),
    EthSrc(Masked<[u8; 6]>),
    /// Not maskable.
    EthType(u16),
    /// OXM_OF_VLAN_VID (be16, maskable): the VLAN id with OFPVID_PRESENT (0x1000) set when the
    /// frame has an 802.1Q header. Exact 0x0000 matches untagged frames only; OVS prints it as
    /// `vlan_tci=0x0000/0x1fff` and an exact `0x1000 | vid` as `dl_vlan=vid`. OVS refuses a
    /// value with any of the top three bits (0xe000) set.
    VlanVid(Masked<u16>),
    /// Not maskable.
    IpProto(u8),
    Ipv4Src(Masked<Ipv4Addr>),
    Ipv4Dst(Masked<Ipv4Addr>),
    Ipv6Src(Masked<Ipv6Addr>),
    Ipv6Dst(Masked<Ipv6Addr>),
    TcpSrc(Masked<u16>),
    TcpDst(Masked<u16>),
    UdpSrc(Masked<u16>),
    UdpDst(Masked<u16>),
    SctpSrc(Masked<u16>),
    SctpDst(Masked<u16>),
    Icmpv4Type(u8),
    Icmpv4Code(u8),
    /// OXM_OF_ARP_OP (be16), not maskable.
    ArpOp(u16),
    ArpSpa(Masked<Ipv4Addr>),
    ArpTpa(Masked<Ipv4Addr>),
    ArpSha(Masked<[u8; 6]>),
    ArpTha(Masked<[u8; 6]>),
    Icmpv6Type(u8),
    Icmpv6Code(u8),
    /// OXM_OF_IPV6_ND_TARGET (OVS accepts a mask).
    Ipv6NdTarget(Masked<Ipv6Addr>),
    Ipv6NdSll(Masked<[u8; 6]>),
    Ipv6NdTll(Masked<[u8; 6]>),
    TcpFlags(Masked<u16>),
    /// NXM_NX_IP_FRAG (class 0x0001, field 26, u8, maskable): bit 0x1 is set for an IP fragment, bit
    /// 0x2 for a later one (nonzero offset); OVS uses no other bit. Read-only. OVS 3.1 accepts it only
    /// after (in wire order) an eth_type of 0x0800 or 0x86dd (OFPBMC_BAD_PREREQ), refuses a value with
    /// a bit outside 0x03 (OFPBMC_BAD_VALUE), ignores mask bits outside 0x03, and refuses a TCP, UDP or
    /// SCTP port or TCP flags after one that selects later fragments (0x2 set in value and mask; ICMP
    /// type and code are fine). It prints the low two bits of value/mask (no mask: 3) as `nw_frag=`
    /// `no` (0/3, 0/1), `first` (1/3), `later` (3/3, 2/2), `<error>` (2/3), `yes` (1/1), `not_later`
    /// (0/2), nothing for a zero mask, after the IP fields and before the transport ones. It sends a
    /// mask of 0x03 back as no mask, the others as given (low bits only).
    IpFrag(Masked<u8>),
    /// NXM_NX_CT_STATE (bits: 0x01 new, 0x02 est, 0x04 rel, 0x08 rpl, 0x10 inv, 0x20 trk).
    CtState(Masked<u32>),
    /// Not maskable.
    CtZone(u16),
    CtMark(Masked<u32>),
    CtLabel(Masked<u128>),
    /// NXM_NX_CT_NW_PROTO (class 0x0001, field 119, u8), not maskable: the IP protocol of the
    /// conntrack entry's original-direction tuple (of the parent entry for a related
    /// connection). Like every `Ct*` tuple field below, it is read-only, and OVS 3.1 accepts a
    /// match on it only after (in wire order) a ct_state that implies a valid entry: one of
    /// +new, +est, +rel, +rpl, +snat, +dnat, or +trk with -inv (else OFPBMC_BAD_PREREQ). OVS
    /// prints `ct_nw_proto=6`; it prints and sends [`Oxm::CtTpSrc`] and [`Oxm::CtTpDst`] only
    /// along with a ct_nw_proto, and sends none of the three when ct_nw_proto is 0.
    CtNwProto(u8),
    /// NXM_NX_CT_NW_SRC (field 120, be32, maskable): the original direction's IPv4 source,
    /// printed `ct_nw_src=10.0.0.0/24`. OVS also requires eth_type 0x0800 in the match
    /// (OFPBAC_MATCH_INCONSISTENT otherwise).
    CtNwSrc(Masked<Ipv4Addr>),
    /// NXM_NX_CT_NW_DST (field 121): as [`Oxm::CtNwSrc`], the IPv4 destination.
    CtNwDst(Masked<Ipv4Addr>),
    /// NXM_NX_CT_IPV6_SRC (field 122, 16 bytes, maskable): the original direction's IPv6
    /// source, printed `ct_ipv6_src=fd00::/64`. OVS also requires eth_type 0x86dd.
    CtIpv6Src(Masked<Ipv6Addr>),
    /// NXM_NX_CT_IPV6_DST (field 123): as [`Oxm::CtIpv6Src`], the IPv6 destination.
    CtIpv6Dst(Masked<Ipv6Addr>),
    /// NXM_NX_CT_TP_SRC (field 124, be16, maskable): the original direction's transport source
    /// port, printed `ct_tp_src=1234` or `ct_tp_src=0x400/0xfc00`. OVS accepts it without a
    /// [`Oxm::CtNwProto`] but then neither prints it nor sends it back in a flow dump (the
    /// switch still matches on it): match ct_nw_proto (not 0) with it.
    CtTpSrc(Masked<u16>),
    /// NXM_NX_CT_TP_DST (field 125): as [`Oxm::CtTpSrc`], the destination port.
    CtTpDst(Masked<u16>),
    /// NXM_NX_CONJ_ID, not maskable.
    ConjId(u32),
    /// NXM_NX_PKT_MARK.
    PktMark(Masked<u32>),
    /// NXM_NX_REGn (class 0x0001, field n, 32 bits), n in 0..=15.
    Reg {
        index: u8,
        value: Masked<u32>,
    },
    /// OXM_OF_PKT_REGn (class 0x8001, field n, 64 bits): reg(2n) in the high half,
    /// reg(2n+1) in the low half. OVS reports registers this way in OF1.5.
    XReg {
        index: u8,
        value: Masked<u64>,
    },
    /// An experimenter OXM (class 0xffff) not modelled above: header + experimenter id + payload
    /// (value and mask as sent). The experimenter id and payload must fit the header's 8-bit
    /// length (at most 251 payload bytes; parsed ones do).
    Experimenter {
        field: u8,
        has_mask: bool,
        experimenter: u32,
        payload: Bytes,
    },
    /// Any other TLV, kept as its 32-bit header and payload (which must fit the header's 8-bit
    /// length: at most 255 bytes; parsed ones do).
    Unknown {
        header: u32,
        payload: Bytes,
    },
}

/// An `ofp_match` of type OXM: the ordered list of fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Match {
    pub fields: Vec<Oxm>,
}

/// OXM classes.
pub mod class {
    /// NXM_0: legacy OF1.0-era fields.
    pub const NXM_0: u16 = 0x0000;
    /// NXM_1: Nicira fields (registers, conntrack, conj_id...).
    pub const NXM_1: u16 = 0x0001;
    /// OFPXMC_OPENFLOW_BASIC.
    pub const OPENFLOW_BASIC: u16 = 0x8000;
    /// OFPXMC_PACKET_REGS (OF1.5 64-bit registers).
    pub const PACKET_REGS: u16 = 0x8001;
    /// OFPXMC_EXPERIMENTER.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Headers (hasmask 0) of fields npagent copies with `move`, as `OFPAT_COPY_FIELD` and
/// `NXAST_REG_MOVE` name them: the OpenFlow 1.5 OXM ones (what OVS sends in a copy_field) and
/// the NXM ones (what OVS sends in an NXAST_REG_MOVE, OpenFlow 1.0 to 1.4). OVS prints either
/// by its NXM name where it has one (`NXM_OF_ETH_SRC`, `NXM_NX_ARP_SHA`, `OXM_OF_VLAN_VID`).
pub mod headers {
    use super::{class, oxm_header};

    /// OXM_OF_ETH_DST (48 bits).
    pub const OXM_OF_ETH_DST: u32 = oxm_header(class::OPENFLOW_BASIC, 3, false, 6);
    /// OXM_OF_ETH_SRC (48 bits).
    pub const OXM_OF_ETH_SRC: u32 = oxm_header(class::OPENFLOW_BASIC, 4, false, 6);
    /// OXM_OF_VLAN_VID (OVS counts 12 bits).
    pub const OXM_OF_VLAN_VID: u32 = oxm_header(class::OPENFLOW_BASIC, 6, false, 2);
    /// OXM_OF_ARP_OP (16 bits).
    pub const OXM_OF_ARP_OP: u32 = oxm_header(class::OPENFLOW_BASIC, 21, false, 2);
    /// OXM_OF_ARP_SPA (32 bits).
    pub const OXM_OF_ARP_SPA: u32 = oxm_header(class::OPENFLOW_BASIC, 22, false, 4);
    /// OXM_OF_ARP_TPA (32 bits).
    pub const OXM_OF_ARP_TPA: u32 = oxm_header(class::OPENFLOW_BASIC, 23, false, 4);
    /// OXM_OF_ARP_SHA (48 bits).
    pub const OXM_OF_ARP_SHA: u32 = oxm_header(class::OPENFLOW_BASIC, 24, false, 6);
    /// OXM_OF_ARP_THA (48 bits).
    pub const OXM_OF_ARP_THA: u32 = oxm_header(class::OPENFLOW_BASIC, 25, false, 6);
    /// NXM_OF_ETH_DST (48 bits).
    pub const NXM_OF_ETH_DST: u32 = oxm_header(class::NXM_0, 1, false, 6);
    /// NXM_OF_ETH_SRC (48 bits).
    pub const NXM_OF_ETH_SRC: u32 = oxm_header(class::NXM_0, 2, false, 6);
    /// NXM_OF_ARP_OP (16 bits).
    pub const NXM_OF_ARP_OP: u32 = oxm_header(class::NXM_0, 15, false, 2);
    /// NXM_OF_ARP_SPA (32 bits).
    pub const NXM_OF_ARP_SPA: u32 = oxm_header(class::NXM_0, 16, false, 4);
    /// NXM_OF_ARP_TPA (32 bits).
    pub const NXM_OF_ARP_TPA: u32 = oxm_header(class::NXM_0, 17, false, 4);
    /// NXM_NX_ARP_SHA (48 bits).
    pub const NXM_NX_ARP_SHA: u32 = oxm_header(class::NXM_1, 17, false, 6);
    /// NXM_NX_ARP_THA (48 bits).
    pub const NXM_NX_ARP_THA: u32 = oxm_header(class::NXM_1, 18, false, 6);
    /// NXM_NX_IP_FRAG (OVS counts 2 bits; read-only: a `move` source only).
    pub const NXM_NX_IP_FRAG: u32 = oxm_header(class::NXM_1, 26, false, 1);
    /// NXM_NX_CT_NW_PROTO (8 bits, read-only: a `move` source only, like the other `CT` ones).
    pub const NXM_NX_CT_NW_PROTO: u32 = oxm_header(class::NXM_1, 119, false, 1);
    /// NXM_NX_CT_NW_SRC (32 bits).
    pub const NXM_NX_CT_NW_SRC: u32 = oxm_header(class::NXM_1, 120, false, 4);
    /// NXM_NX_CT_NW_DST (32 bits).
    pub const NXM_NX_CT_NW_DST: u32 = oxm_header(class::NXM_1, 121, false, 4);
    /// NXM_NX_CT_IPV6_SRC (128 bits).
    pub const NXM_NX_CT_IPV6_SRC: u32 = oxm_header(class::NXM_1, 122, false, 16);
    /// NXM_NX_CT_IPV6_DST (128 bits).
    pub const NXM_NX_CT_IPV6_DST: u32 = oxm_header(class::NXM_1, 123, false, 16);
    /// NXM_NX_CT_TP_SRC (16 bits).
    pub const NXM_NX_CT_TP_SRC: u32 = oxm_header(class::NXM_1, 124, false, 2);
    /// NXM_NX_CT_TP_DST (16 bits).
    pub const NXM_NX_CT_TP_DST: u32 = oxm_header(class::NXM_1, 125, false, 2);
}

/// Builds an OXM header from its parts; `len` is the payload length (value + mask).
pub const fn oxm_header(class: u16, field: u8, has_mask: bool, len: u8) -> u32 {
    ((class as u32) << 16) | (((field & 0x7f) as u32) << 9) | ((has_mask as u32) << 8) | len as u32
}

/// Splits an OXM header into (class, field, has_mask, length).
pub const fn split_header(h: u32) -> (u16, u8, bool, u8) {
    ((h >> 16) as u16, ((h >> 9) & 0x7f) as u8, (h >> 8) & 1 == 1, h as u8)
}

/// Reads a possibly-masked fixed-size value: `N` bytes exact or `2N` bytes with a mask.
fn masked<const N: usize, T>(has_mask: bool, body: &[u8], conv: fn([u8; N]) -> T) -> Option<Masked<T>> {
    let arr = |s: &[u8]| -> Option<[u8; N]> { s.try_into().ok() };
    match (has_mask, body.len()) {
        (false, l) if l == N => Some(Masked::exact(conv(arr(body)?))),
        (true, l) if l == 2 * N => Some(Masked::masked(conv(arr(&body[..N])?), conv(arr(&body[N..])?))),
        _ => None,
    }
}

fn exact<const N: usize, T>(has_mask: bool, body: &[u8], conv: fn([u8; N]) -> T) -> Option<T> {
    if has_mask {
        return None;
    }
    <[u8; N]>::try_from(body).ok().map(conv)
}

fn ident<const N: usize>(a: [u8; N]) -> [u8; N] {
    a
}
fn be_u8(a: [u8; 1]) -> u8 {
    a[0]
}

/// Decodes a modelled field, or `None` when (class, field, mask bit, length) is not one.
fn decode_typed(class: u16, field: u8, hm: bool, body: &[u8]) -> Option<Oxm> {
    use Oxm::*;
    Some(match (class, field) {
        (class::OPENFLOW_BASIC, 0) => InPort(exact(hm, body, u32::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 2) => Metadata(masked(hm, body, u64::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 3) => EthDst(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 4) => EthSrc(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 5) => EthType(exact(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 6) => VlanVid(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 10) => IpProto(exact(hm, body, be_u8)?),
        (class::OPENFLOW_BASIC, 11) => Ipv4Src(masked(hm, body, Ipv4Addr::from)?),
        (class::OPENFLOW_BASIC, 12) => Ipv4Dst(masked(hm, body, Ipv4Addr::from)?),
        (class::OPENFLOW_BASIC, 13) => TcpSrc(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 14) => TcpDst(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 15) => UdpSrc(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 16) => UdpDst(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 17) => SctpSrc(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 18) => SctpDst(masked(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 19) => Icmpv4Type(exact(hm, body, be_u8)?),
        (class::OPENFLOW_BASIC, 20) => Icmpv4Code(exact(hm, body, be_u8)?),
        (class::OPENFLOW_BASIC, 21) => ArpOp(exact(hm, body, u16::from_be_bytes)?),
        (class::OPENFLOW_BASIC, 22) => ArpSpa(masked(hm, body, Ipv4Addr::from)?),
        (class::OPENFLOW_BASIC, 23) => ArpTpa(masked(hm, body, Ipv4Addr::from)?),
        (class::OPENFLOW_BASIC, 24) => ArpSha(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 25) => ArpTha(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 26) => Ipv6Src(masked(hm, body, Ipv6Addr::from)?),
        (class::OPENFLOW_BASIC, 27) => Ipv6Dst(masked(hm, body, Ipv6Addr::from)?),
        (class::OPENFLOW_BASIC, 29) => Icmpv6Type(exact(hm, body, be_u8)?),
        (class::OPENFLOW_BASIC, 30) => Icmpv6Code(exact(hm, body, be_u8)?),
        (class::OPENFLOW_BASIC, 31) => Ipv6NdTarget(masked(hm, body, Ipv6Addr::from)?),
        (class::OPENFLOW_BASIC, 32) => Ipv6NdSll(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 33) => Ipv6NdTll(masked(hm, body, ident::<6>)?),
        (class::OPENFLOW_BASIC, 42) => TcpFlags(masked(hm, body, u16::from_be_bytes)?),
        (class::NXM_1, 0..=15) => Reg { index: field, value: masked(hm, body, u32::from_be_bytes)? },
        (class::NXM_1, 26) => IpFrag(masked(hm, body, be_u8)?),
        (class::NXM_1, 33) => PktMark(masked(hm, body, u32::from_be_bytes)?),
        (class::NXM_1, 37) => ConjId(exact(hm, body, u32::from_be_bytes)?),
        (class::NXM_1, 105) => CtState(masked(hm, body, u32::from_be_bytes)?),
        (class::NXM_1, 106) => CtZone(exact(hm, body, u16::from_be_bytes)?),
        (class::NXM_1, 107) => CtMark(masked(hm, body, u32::from_be_bytes)?),
        (class::NXM_1, 108) => CtLabel(masked(hm, body, u128::from_be_bytes)?),
        (class::NXM_1, 119) => CtNwProto(exact(hm, body, be_u8)?),
        (class::NXM_1, 120) => CtNwSrc(masked(hm, body, Ipv4Addr::from)?),
        (class::NXM_1, 121) => CtNwDst(masked(hm, body, Ipv4Addr::from)?),
        (class::NXM_1, 122) => CtIpv6Src(masked(hm, body, Ipv6Addr::from)?),
        (class::NXM_1, 123) => CtIpv6Dst(masked(hm, body, Ipv6Addr::from)?),
        (class::NXM_1, 124) => CtTpSrc(masked(hm, body, u16::from_be_bytes)?),
        (class::NXM_1, 125) => CtTpDst(masked(hm, body, u16::from_be_bytes)?),
        (class::PACKET_REGS, 0..=15) => XReg { index: field, value: masked(hm, body, u64::from_be_bytes)? },
        _ => return None,
    })
}

/// The (class, field, value size, has_mask) of a typed field.
fn typed_shape(o: &Oxm) -> Option<(u16, u8, u8, bool)> {
    use class::*;
    use Oxm::*;
    Some(match o {
        InPort(_) => (OPENFLOW_BASIC, 0, 4, false),
        Metadata(v) => (OPENFLOW_BASIC, 2, 8, v.mask.is_some()),
        EthDst(v) => (OPENFLOW_BASIC, 3, 6, v.mask.is_some()),
        EthSrc(v) => (OPENFLOW_BASIC, 4, 6, v.mask.is_some()),
        EthType(_) => (OPENFLOW_BASIC, 5, 2, false),
        VlanVid(v) => (OPENFLOW_BASIC, 6, 2, v.mask.is_some()),
        IpProto(_) => (OPENFLOW_BASIC, 10, 1, false),
        Ipv4Src(v) => (OPENFLOW_BASIC, 11, 4, v.mask.is_some()),
        Ipv4Dst(v) => (OPENFLOW_BASIC, 12, 4, v.mask.is_some()),
        TcpSrc(v) => (OPENFLOW_BASIC, 13, 2, v.mask.is_some()),
        TcpDst(v) => (OPENFLOW_BASIC, 14, 2, v.mask.is_some()),
        UdpSrc(v) => (OPENFLOW_BASIC, 15, 2, v.mask.is_some()),
        UdpDst(v) => (OPENFLOW_BASIC, 16, 2, v.mask.is_some()),
        SctpSrc(v) => (OPENFLOW_BASIC, 17, 2, v.mask.is_some()),
        SctpDst(v) => (OPENFLOW_BASIC, 18, 2, v.mask.is_some()),
        Icmpv4Type(_) => (OPENFLOW_BASIC, 19, 1, false),
        Icmpv4Code(_) => (OPENFLOW_BASIC, 20, 1, false),
        ArpOp(_) => (OPENFLOW_BASIC, 21, 2, false),
        ArpSpa(v) => (OPENFLOW_BASIC, 22, 4, v.mask.is_some()),
        ArpTpa(v) => (OPENFLOW_BASIC, 23, 4, v.mask.is_some()),
        ArpSha(v) => (OPENFLOW_BASIC, 24, 6, v.mask.is_some()),
        ArpTha(v) => (OPENFLOW_BASIC, 25, 6, v.mask.is_some()),
        Ipv6Src(v) => (OPENFLOW_BASIC, 26, 16, v.mask.is_some()),
        Ipv6Dst(v) => (OPENFLOW_BASIC, 27, 16, v.mask.is_some()),
        Icmpv6Type(_) => (OPENFLOW_BASIC, 29, 1, false),
        Icmpv6Code(_) => (OPENFLOW_BASIC, 30, 1, false),
        Ipv6NdTarget(v) => (OPENFLOW_BASIC, 31, 16, v.mask.is_some()),
        Ipv6NdSll(v) => (OPENFLOW_BASIC, 32, 6, v.mask.is_some()),
        Ipv6NdTll(v) => (OPENFLOW_BASIC, 33, 6, v.mask.is_some()),
        TcpFlags(v) => (OPENFLOW_BASIC, 42, 2, v.mask.is_some()),
        Reg { index, value } => (NXM_1, *index, 4, value.mask.is_some()),
        IpFrag(v) => (NXM_1, 26, 1, v.mask.is_some()),
        PktMark(v) => (NXM_1, 33, 4, v.mask.is_some()),
        ConjId(_) => (NXM_1, 37, 4, false),
        CtState(v) => (NXM_1, 105, 4, v.mask.is_some()),
        CtZone(_) => (NXM_1, 106, 2, false),
        CtMark(v) => (NXM_1, 107, 4, v.mask.is_some()),
        CtLabel(v) => (NXM_1, 108, 16, v.mask.is_some()),
        CtNwProto(_) => (NXM_1, 119, 1, false),
        CtNwSrc(v) => (NXM_1, 120, 4, v.mask.is_some()),
        CtNwDst(v) => (NXM_1, 121, 4, v.mask.is_some()),
        CtIpv6Src(v) => (NXM_1, 122, 16, v.mask.is_some()),
        CtIpv6Dst(v) => (NXM_1, 123, 16, v.mask.is_some()),
        CtTpSrc(v) => (NXM_1, 124, 2, v.mask.is_some()),
        CtTpDst(v) => (NXM_1, 125, 2, v.mask.is_some()),
        XReg { index, value } => (PACKET_REGS, *index, 8, value.mask.is_some()),
        Experimenter { .. } | Unknown { .. } => return None,
    })
}

impl Oxm {
    /// Parses one TLV from the start of `buf`; returns it and the bytes consumed.
    pub fn parse(buf: &[u8]) -> Result<(Oxm, usize)> {
        let mut rd = Reader::new(buf, "oxm");
        let header = rd.u32()?;
        let (cls, field, has_mask, len) = split_header(header);
        let body = rd.take(usize::from(len))?;
        let consumed = rd.pos();
        if cls == class::EXPERIMENTER {
            let mut b = Reader::new(body, "experimenter oxm");
            let experimenter = b.u32().map_err(|_| Error::BadLength { what: "experimenter oxm", len: body.len() })?;
            let payload = Bytes::copy_from_slice(b.rest());
            return Ok((Oxm::Experimenter { field, has_mask, experimenter, payload }, consumed));
        }
        let oxm = decode_typed(cls, field, has_mask, body)
            .unwrap_or_else(|| Oxm::Unknown { header, payload: Bytes::copy_from_slice(body) });
        Ok((oxm, consumed))
    }

    /// The TLV's 32-bit header (class, field, hasmask, payload length). The length of a raw
    /// TLV is the low 8 bits of its payload's: [`crate::Message::emit`] refuses a message with
    /// one that does not fit, and debug builds assert it.
    pub fn header(&self) -> u32 {
        if let Oxm::Experimenter { payload, .. } | Oxm::Unknown { payload, .. } = self {
            debug_assert!(self.buffer_len() - 4 <= 0xff, "an OXM payload of {} bytes", payload.len());
        }
        match self {
            Oxm::Experimenter { field, has_mask, payload, .. } => {
                oxm_header(class::EXPERIMENTER, *field, *has_mask, (4 + payload.len()) as u8)
            }
            Oxm::Unknown { header, payload } => (header & !0xff) | (payload.len() as u32 & 0xff),
            typed => match typed_shape(typed) {
                Some((cls, field, size, hm)) => oxm_header(cls, field, hm, if hm { size * 2 } else { size }),
                None => 0,
            },
        }
    }

    /// Checks that the TLV's payload fits the header's 8-bit length: a raw TLV
    /// (`Experimenter`, `Unknown`) built by hand may not, and [`Oxm::emit`] would truncate it.
    pub(crate) fn check(&self) -> Result<()> {
        let len = self.buffer_len() - 4;
        match self {
            Oxm::Experimenter { .. } | Oxm::Unknown { .. } if len > 0xff => {
                Err(Error::TooLong { what: "OXM TLV", len })
            }
            _ => Ok(()),
        }
    }

    /// Bytes this TLV takes on the wire (header included).
    pub fn buffer_len(&self) -> usize {
        match self {
            Oxm::Experimenter { payload, .. } => 8 + payload.len(),
            Oxm::Unknown { payload, .. } => 4 + payload.len(),
            _ => 4 + usize::from(self.header() as u8),
        }
    }

    /// Writes the TLV. The payload of a raw TLV must fit its 8-bit length (see [`Oxm::header`]).
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.header());
        use Oxm::*;
        fn m<T: Copy>(out: &mut BytesMut, v: &Masked<T>, put: fn(&mut BytesMut, T)) {
            put(out, v.value);
            if let Some(mask) = v.mask {
                put(out, mask);
            }
        }
        let mac = |o: &mut BytesMut, v: [u8; 6]| o.put_slice(&v);
        let v4 = |o: &mut BytesMut, v: Ipv4Addr| o.put_slice(&v.octets());
        let v6 = |o: &mut BytesMut, v: Ipv6Addr| o.put_slice(&v.octets());
        let p8 = |o: &mut BytesMut, v: u8| o.put_u8(v);
        let p16 = |o: &mut BytesMut, v: u16| o.put_u16(v);
        let p32 = |o: &mut BytesMut, v: u32| o.put_u32(v);
        let p64 = |o: &mut BytesMut, v: u64| o.put_u64(v);
        let p128 = |o: &mut BytesMut, v: u128| o.put_u128(v);
        match self {
            InPort(v) | ConjId(v) => out.put_u32(*v),
            EthType(v) | CtZone(v) | ArpOp(v) => out.put_u16(*v),
            IpProto(v) | Icmpv4Type(v) | Icmpv4Code(v) | Icmpv6Type(v) | Icmpv6Code(v) | CtNwProto(v) => out.put_u8(*v),
            IpFrag(v) => m(out, v, p8),
            Metadata(v) | XReg { value: v, .. } => m(out, v, p64),
            EthDst(v) | EthSrc(v) | ArpSha(v) | ArpTha(v) | Ipv6NdSll(v) | Ipv6NdTll(v) => m(out, v, mac),
            Ipv4Src(v) | Ipv4Dst(v) | ArpSpa(v) | ArpTpa(v) | CtNwSrc(v) | CtNwDst(v) => m(out, v, v4),
            Ipv6Src(v) | Ipv6Dst(v) | Ipv6NdTarget(v) | CtIpv6Src(v) | CtIpv6Dst(v) => m(out, v, v6),
            VlanVid(v) | TcpSrc(v) | TcpDst(v) | UdpSrc(v) | UdpDst(v) | SctpSrc(v) | SctpDst(v) | TcpFlags(v)
            | CtTpSrc(v) | CtTpDst(v) => m(out, v, p16),
            CtState(v) | CtMark(v) | PktMark(v) | Reg { value: v, .. } => m(out, v, p32),
            CtLabel(v) => m(out, v, p128),
            Experimenter { experimenter, payload, .. } => {
                out.put_u32(*experimenter);
                out.put_slice(payload);
            }
            Unknown { payload, .. } => out.put_slice(payload),
        }
    }
}

/// Checks every TLV of a list with [`Oxm::check`].
pub(crate) fn check_oxms(fields: &[Oxm]) -> Result<()> {
    fields.iter().try_for_each(Oxm::check)
}

/// Parses a bare list of OXM TLVs (no `ofp_match` header), as in NXT_PACKET_IN2 metadata.
pub fn parse_oxms(buf: &[u8]) -> Result<Vec<Oxm>> {
    parse_list(buf, Oxm::parse)
}

/// Wire length of a bare OXM list.
pub fn oxms_len(f: &[Oxm]) -> usize {
    f.iter().map(Oxm::buffer_len).sum()
}

/// Writes a bare OXM list.
pub fn emit_oxms(f: &[Oxm], out: &mut BytesMut) {
    for o in f {
        o.emit(out);
    }
}

/// `ofp_match` type OXM.
pub const OFPMT_OXM: u16 = 1;

impl Match {
    /// Checks the match's TLVs with [`Oxm::check`].
    pub(crate) fn check(&self) -> Result<()> {
        check_oxms(&self.fields)
    }

    /// A match of the given fields.
    pub fn new(fields: Vec<Oxm>) -> Self {
        Match { fields }
    }

    /// Parses an `ofp_match` (type 1); the bytes consumed include the padding to 8, which
    /// must be present and zero.
    pub fn parse(buf: &[u8]) -> Result<(Match, usize)> {
        let mut rd = Reader::new(buf, "ofp_match");
        let mt = rd.u16()?;
        if mt != OFPMT_OXM {
            return Err(Error::BadValue { what: "ofp_match type", value: u64::from(mt) });
        }
        let len = usize::from(rd.u16()?);
        let padded = pad8(len);
        let whole = tlv(buf, padded, 4, false, "ofp_match")?;
        let fields = parse_oxms(whole.get(4..len).unwrap_or(&[]))?;
        check_zero(whole.get(len..).unwrap_or(&[]), len, "ofp_match")?;
        Ok((Match { fields }, padded))
    }

    /// Parses the `ofp_match` at the reader's position and moves past it (padding included).
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Match> {
        let (m, used) = Match::parse(r.peek_rest())?;
        r.take(used)?;
        Ok(m)
    }

    /// Wire length including the padding to 8.
    pub fn buffer_len(&self) -> usize {
        pad8(4 + oxms_len(&self.fields))
    }

    /// Writes the `ofp_match` with its padding.
    pub fn emit(&self, out: &mut BytesMut) {
        let len = 4 + oxms_len(&self.fields);
        out.put_u16(OFPMT_OXM);
        out.put_u16(crate::wire::part_len16(len));
        emit_oxms(&self.fields, out);
        out.put_bytes(0, pad8(len) - len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn basic_tcp_match_parses_typed_and_round_trips() {
        // Vector oxm_basic_tcp_match.
        let b = hex("00010029800000040000000180000a020800800017080a000000ff000000800014010680001c02005000000000000000");
        let (m, used) = Match::parse(&b).unwrap();
        assert_eq!(used, b.len());
        assert_eq!(
            m.fields,
            vec![
                Oxm::InPort(1),
                Oxm::EthType(0x0800),
                Oxm::Ipv4Src(Masked::masked(Ipv4Addr::new(10, 0, 0, 0), Ipv4Addr::new(255, 0, 0, 0))),
                Oxm::IpProto(6),
                Oxm::TcpDst(Masked::exact(80)),
            ]
        );
        let mut out = BytesMut::new();
        m.emit(&mut out);
        assert_eq!(&out[..], &b[..]);
        assert_eq!(m.buffer_len(), b.len());
    }

    #[test]
    fn vlan_vid_as_ovs_sends_it() {
        // The ofp_match of `ovs-ofctl -O OpenFlow15 -mmmmm parse-flow 'vlan_tci=0x0000/0x1fff,
        // actions=NORMAL'` (untagged frames only), of `dl_vlan=5` and of `vlan_tci=0x1000/0x1000`
        // (any tagged frame), OVS 3.1.0.
        for (b, vid) in [
            ("0001000a80000c020000000000000000", Masked::exact(0)),
            ("0001000a80000c021005000000000000", Masked::exact(0x1005)),
            ("0001000c80000d041000100000000000", Masked::masked(0x1000, 0x1000)),
        ] {
            let b = hex(b);
            let (m, used) = Match::parse(&b).unwrap();
            assert_eq!((m.fields.clone(), used), (vec![Oxm::VlanVid(vid)], b.len()));
            let mut out = BytesMut::new();
            m.emit(&mut out);
            assert_eq!(&out[..], &b[..]);
        }
        // A VLAN_VID of another length is kept raw.
        let (o, _) = Oxm::parse(&hex("80000c0100")).unwrap();
        assert!(matches!(o, Oxm::Unknown { header: 0x80000c01, .. }));
    }

    #[test]
    fn ct_tuple_as_ovs_sends_it() {
        // The ofp_match of `ovs-ofctl -O OpenFlow15 -mmmmm parse-flow 'ct_state=-inv+trk,udp,
        // ct_nw_src=10.0.0.0/24,ct_nw_dst=10.0.0.1,ct_nw_proto=17,ct_tp_src=1234,
        // ct_tp_dst=0x50/0xfff0,actions=drop'` and of `ct_state=+rpl+trk,sctp6,
        // ct_ipv6_src=fd00::/64,ct_ipv6_dst=fd00::1,ct_nw_proto=132,ct_tp_dst=5000` (OVS 3.1.0).
        let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        for (b, tuple) in [
            (
                "0001004280000a02080080001401110001d30800000020000000300001f1080a000000ffffff000001f2040a000001\
                 0001ee01110001f80204d20001fb040050fff0000000000000",
                vec![
                    Oxm::CtNwSrc(Masked::masked(v4("10.0.0.0"), v4("255.255.255.0"))),
                    Oxm::CtNwDst(Masked::exact(v4("10.0.0.1"))),
                    Oxm::CtNwProto(17),
                    Oxm::CtTpSrc(Masked::exact(1234)),
                    Oxm::CtTpDst(Masked::masked(0x50, 0xfff0)),
                ],
            ),
            (
                "0001005e80000a0286dd80001401840001d30800000028000000280001f520fd000000000000000000000000000000\
                 ffffffffffffffff00000000000000000001f610fd000000000000000000000000000001\
                 0001ee01840001fa0213880000",
                vec![
                    Oxm::CtIpv6Src(Masked::masked(v6("fd00::"), v6("ffff:ffff:ffff:ffff::"))),
                    Oxm::CtIpv6Dst(Masked::exact(v6("fd00::1"))),
                    Oxm::CtNwProto(132),
                    Oxm::CtTpDst(Masked::exact(5000)),
                ],
            ),
        ] {
            let b = hex(b);
            let (m, used) = Match::parse(&b).unwrap();
            assert_eq!(used, b.len());
            assert_eq!(&m.fields[3..], &tuple[..]);
            let mut out = BytesMut::new();
            m.emit(&mut out);
            assert_eq!(&out[..], &b[..]);
        }
        // A masked ct_nw_proto (not maskable) and fields of another length are kept raw.
        for raw in ["0001ef020606", "0001f0050102030405", "0001f80100", "0001f40f000102030405060708090a0b0c0d0e"] {
            let (o, used) = Oxm::parse(&hex(raw)).unwrap();
            assert!(matches!(o, Oxm::Unknown { .. }), "{raw}: {o:?}");
            assert_eq!(used, raw.len() / 2);
        }
    }

    #[test]
    fn ip_frag_as_ovs_sends_it() {
        // The ofp_match of `ovs-ofctl -O OpenFlow15 -mmmmm parse-flow 'ip,nw_frag=later,
        // actions=drop'`, of `ipv6,nw_frag=yes` and of `ip,nw_frag=not_later` (OVS 3.1.0).
        for (b, eth_type, frag) in [
            ("0001000f80000a0208000001340103", 0x0800, Masked::exact(3)),
            ("0001001080000a0286dd000135020101", 0x86dd, Masked::masked(1, 1)),
            ("0001001080000a020800000135020002", 0x0800, Masked::masked(0, 2)),
        ] {
            let mut b = hex(b);
            b.resize(pad8(b.len()), 0);
            let (m, used) = Match::parse(&b).unwrap();
            assert_eq!((m.fields.clone(), used), (vec![Oxm::EthType(eth_type), Oxm::IpFrag(frag)], b.len()));
            let mut out = BytesMut::new();
            m.emit(&mut out);
            assert_eq!(&out[..], &b[..]);
        }
        assert_eq!(Oxm::IpFrag(Masked::exact(0)).header(), headers::NXM_NX_IP_FRAG);
        // An IP_FRAG of another length is kept raw.
        for raw in ["000134020000", "00013501ff", "0001350400010001"] {
            let (o, used) = Oxm::parse(&hex(raw)).unwrap();
            assert!(matches!(o, Oxm::Unknown { .. }), "{raw}: {o:?}");
            assert_eq!(used, raw.len() / 2);
        }
    }

    #[test]
    fn all_ones_mask_stays_masked() {
        let o = Oxm::TcpDst(Masked::masked(80, 0xffff));
        let mut out = BytesMut::new();
        o.emit(&mut out);
        assert_eq!(&out[..], &hex("80001d040050ffff")[..]);
        assert_eq!(Oxm::parse(&out).unwrap(), (o, 8));
    }

    #[test]
    fn masked_non_maskable_field_is_kept_raw() {
        let b = hex("80000b0408000800");
        let (o, _) = Oxm::parse(&b).unwrap();
        assert_eq!(o, Oxm::Unknown { header: 0x80000b04, payload: Bytes::from_static(&[8, 0, 8, 0]) });
    }

    #[test]
    fn experimenter_length_counts_the_id() {
        let b = hex("ffff16080000232001020304");
        let (o, used) = Oxm::parse(&b).unwrap();
        assert_eq!(used, 12);
        assert_eq!(
            o,
            Oxm::Experimenter {
                field: 11,
                has_mask: false,
                experimenter: 0x2320,
                payload: Bytes::from_static(&[1, 2, 3, 4])
            }
        );
        assert_eq!(o.header(), 0xffff1608);
        assert!(Oxm::parse(&hex("ffff160200002320")).is_err());
    }

    #[test]
    fn bad_match_type_and_padding_are_errors() {
        assert!(Match::parse(&hex("0000000400000000")).is_err());
        assert!(Match::parse(&hex("0001000400000001")).is_err());
        assert!(Match::parse(&hex("00010003")).is_err());
        assert_eq!(Match::parse(&hex("0001000400000000")).unwrap(), (Match::default(), 8));
    }
}
