//! OXM/NXM match fields and `ofp_match` (type 1 = OXM, padded to 8).
//!
//! IMPLEMENTATION OWNER: proto-flow helper. Add `Oxm::parse`/`buffer_len`/`emit` (one TLV),
//! `Match::parse`/`buffer_len`/`emit` (with the ofp_match header and padding), and helpers to
//! parse bare OXM lists (NXT_PACKET_IN2 metadata has no ofp_match header).

use bytes::Bytes;
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
    Icmpv6Type(u8),
    Icmpv6Code(u8),
    TcpFlags(Masked<u16>),
    /// NXM_NX_CT_STATE (bits: 0x01 new, 0x02 est, 0x04 rel, 0x08 rpl, 0x10 inv, 0x20 trk).
    CtState(Masked<u32>),
    /// Not maskable.
    CtZone(u16),
    CtMark(Masked<u32>),
    CtLabel(Masked<u128>),
    /// NXM_NX_CONJ_ID, not maskable.
    ConjId(u32),
    /// NXM_NX_PKT_MARK.
    PktMark(Masked<u32>),
    /// NXM_NX_REGn (class 0x0001, field n, 32 bits), n in 0..=15.
    Reg { index: u8, value: Masked<u32> },
    /// OXM_OF_PKT_REGn (class 0x8001, field n, 64 bits): reg(2n) in the high half,
    /// reg(2n+1) in the low half. OVS reports registers this way in OF1.5.
    XReg { index: u8, value: Masked<u64> },
    /// An experimenter OXM (class 0xffff) not modelled above: header + experimenter id + payload
    /// (value and mask as sent).
    Experimenter { field: u8, has_mask: bool, experimenter: u32, payload: Bytes },
    /// Any other TLV, kept as its 32-bit header and payload.
    Unknown { header: u32, payload: Bytes },
}

/// An `ofp_match` of type OXM: the ordered list of fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Match {
    pub fields: Vec<Oxm>,
}
