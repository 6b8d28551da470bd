//! A whole OpenFlow message: header fields plus a typed payload.
//!
//! IMPLEMENTATION OWNER: proto-msgs helper. `Message::parse(&[u8])` takes exactly one whole
//! message (length field == buffer length); `buffer_len`; `emit(&mut BytesMut) -> Result<()>`
//! (errors with `TooLong` above 65535 bytes). Version handling: HELLO, ERROR, ECHO parse in any
//! version; other types are modelled with the OF1.3+ numbering when version >= 4 and with their
//! OF1.5 layouts; everything else is `Payload::Unknown` (raw body), so it still round-trips.

use crate::flow_mod::FlowMod;
use crate::msgs::*;
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::packet_in2::PacketIn2;
use bytes::Bytes;

/// One OpenFlow message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Message {
    pub version: u8,
    pub xid: u32,
    pub payload: Payload,
}

/// The typed body of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Payload {
    Hello(Hello),
    Error(ErrorMsg),
    EchoRequest(Bytes),
    EchoReply(Bytes),
    FeaturesRequest,
    FeaturesReply(FeaturesReply),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    BarrierRequest,
    BarrierReply,
    RoleRequest(Role),
    RoleReply(Role),
    MeterMod(MeterMod),
    BundleControl(BundleControl),
    BundleAdd(BundleAdd),
    /// NXT_SET_PACKET_IN_FORMAT: 0 standard, 1 nxt_packet_in, 2 nxt_packet_in2.
    SetPacketInFormat(u32),
    /// NXT_SET_CONTROLLER_ID.
    SetControllerId(u16),
    /// NXT_PACKET_IN2.
    PacketIn2(PacketIn2),
    /// NXT_RESUME (same properties as NXT_PACKET_IN2).
    Resume(PacketIn2),
    /// Another experimenter message: experimenter id, subtype, body raw.
    Experimenter { experimenter: u32, exp_type: u32, body: Bytes },
    /// Any other message type (or version), body raw.
    Unknown { msg_type: u8, body: Bytes },
}
