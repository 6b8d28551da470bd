//! NXT_PACKET_IN2 (NX subtype 30) and NXT_RESUME (28) property bodies.
//!
//! IMPLEMENTATION OWNER: proto-msgs helper.

use crate::oxm::Oxm;
use bytes::Bytes;

/// NXT_PACKET_IN2 decoded. Property order on the wire is unspecified; `emit` writes them in
/// OVS's order (packet, full_len, buffer_id, table_id, cookie, reason, metadata,
/// continuation, userdata) then the unknown ones, so OVS-produced bytes round-trip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketIn2 {
    /// NXPINT_PACKET: the (possibly truncated) frame.
    pub packet: Bytes,
    pub full_len: Option<u32>,
    pub buffer_id: Option<u32>,
    pub table_id: Option<u8>,
    pub cookie: Option<u64>,
    pub reason: Option<u8>,
    /// NXPINT_METADATA: bare OXM TLVs (registers as XReg in OF1.5).
    pub metadata: Vec<Oxm>,
    pub userdata: Option<Bytes>,
    /// NXPINT_CONTINUATION payload, opaque (after its 4 zero bytes).
    pub continuation: Option<Bytes>,
    /// Unknown properties, each kept whole (header included, padding excluded).
    pub unknown: Vec<Bytes>,
}
