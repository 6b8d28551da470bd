//! Bodies of the smaller messages.
//!
//! IMPLEMENTATION OWNER: proto-msgs helper.

use crate::flow_mod::FlowMod;
use crate::oxm::Match;
use crate::action::Action;
use bytes::Bytes;

/// OFPT_HELLO: the version bitmap element(s) and any unknown elements kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Hello {
    pub elements: Vec<HelloElement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum HelloElement {
    /// OFPHET_VERSIONBITMAP: bit v of word 0 = version v.
    VersionBitmap(Vec<u32>),
    /// Unknown element type with its payload.
    Unknown { element_type: u16, payload: Bytes },
}

/// OFPT_ERROR: standard (type, code) or experimenter (0xffff, exp_code, experimenter).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ErrorMsg {
    Standard { error_type: u16, code: u16, data: Bytes },
    Experimenter { exp_code: u16, experimenter: u32, data: Bytes },
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FeaturesReply {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
    pub reserved: u32,
}

/// GET_CONFIG_REPLY / SET_CONFIG body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// ROLE_REQUEST / ROLE_REPLY body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Role {
    /// 0 nochange, 1 equal, 2 primary, 3 secondary.
    pub role: u32,
    pub generation_id: u64,
}

/// OFPT_BUNDLE_CONTROL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BundleControl {
    pub bundle_id: u32,
    /// 0 open_request .. 7 discard_reply.
    pub ctrl_type: u16,
    /// 1 atomic, 2 ordered.
    pub flags: u16,
    /// Properties, raw.
    pub properties: Bytes,
}

/// Bundle control types.
pub mod bundle_ctrl {
    pub const OPEN_REQUEST: u16 = 0;
    pub const OPEN_REPLY: u16 = 1;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const CLOSE_REPLY: u16 = 3;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const COMMIT_REPLY: u16 = 5;
    pub const DISCARD_REQUEST: u16 = 6;
    pub const DISCARD_REPLY: u16 = 7;
    pub const FLAG_ATOMIC: u16 = 1;
    pub const FLAG_ORDERED: u16 = 2;
}

/// OFPT_BUNDLE_ADD_MESSAGE: the inner message is a complete message (its own header, whose
/// version and xid must equal the outer ones), kept as a parsed [`crate::Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub message: Box<crate::Message>,
    /// Properties after the inner message (padded to 8), raw.
    pub properties: Bytes,
}

/// OFPT_METER_MOD.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MeterMod {
    /// 0 add, 1 modify, 2 delete.
    pub command: u16,
    /// 1 kbps, 2 pktps, 4 burst, 8 stats.
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MeterBand {
    Drop { rate: u32, burst_size: u32 },
    DscpRemark { rate: u32, burst_size: u32, prec_level: u8 },
    Unknown { band_type: u16, rate: u32, burst_size: u32, payload: Bytes },
}

/// OFPT_GROUP_MOD (OF1.5 layout with command_bucket_id; buckets with actions).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupMod {
    /// 0 add, 1 modify, 2 delete, 3 insert_bucket, 4 remove_bucket.
    pub command: u16,
    /// 0 all, 1 select, 2 indirect, 3 fast failover.
    pub group_type: u8,
    pub group_id: u32,
    pub command_bucket_id: u32,
    pub buckets: Vec<Bucket>,
    /// Group properties, raw.
    pub properties: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bucket {
    pub bucket_id: u32,
    pub actions: Vec<Action>,
    /// Bucket properties (weight, watch_port, watch_group), raw.
    pub properties: Bytes,
}

/// OFPT_PACKET_OUT (OF1.5: the in_port travels in the match).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketOut {
    pub buffer_id: u32,
    pub match_: Match,
    pub actions: Vec<Action>,
    pub data: Bytes,
}

/// OFPT_PACKET_IN (OF1.3+ layout).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    pub data: Bytes,
}

/// Keep FlowMod reachable from here for `BundleAdd` users.
pub type BundledFlowMod = FlowMod;
