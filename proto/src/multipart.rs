//! MULTIPART_REQUEST / MULTIPART_REPLY (types 18/19): flow stats (multipart type 1 with OF1.5
//! OXS stats), meter stats (type 9), and anything else kept raw.
//!
//! IMPLEMENTATION OWNER: proto-flow helper.

use crate::instruction::Instruction;
use crate::oxm::Match;
use bytes::Bytes;

/// OFPSF_REQ_MORE / OFPSF_REPLY_MORE.
pub const MULTIPART_MORE: u16 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MultipartRequest {
    pub flags: u16,
    pub body: MultipartRequestBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum MultipartRequestBody {
    /// Multipart type 1 (OVS's OFPST_FLOW; OF1.5's OFPMP_FLOW_DESC).
    Flow(FlowStatsRequest),
    /// Multipart type 9: meter stats for one meter or 0xffffffff (all).
    MeterStats { meter_id: u32 },
    /// Any other multipart type, body raw.
    Other { mp_type: u16, body: Bytes },
}

/// `ofp11_flow_stats_request` + match.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub match_: Match,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MultipartReply {
    /// MULTIPART_MORE on every part but the last.
    pub flags: u16,
    pub body: MultipartReplyBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum MultipartReplyBody {
    Flow(Vec<FlowStats>),
    MeterStats(Vec<MeterStats>),
    Other { mp_type: u16, body: Bytes },
}

/// One OF1.5 flow stats entry (`ofp15_flow_desc` + match + OXS stats + instructions).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlowStats {
    pub table_id: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub importance: u16,
    pub cookie: u64,
    pub match_: Match,
    pub stats: OxsStats,
    pub instructions: Vec<Instruction>,
}

/// OXS statistics (class 0x8002); `None` = absent. Unknown OXS TLVs are kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OxsStats {
    /// (seconds, nanoseconds).
    pub duration: Option<(u32, u32)>,
    /// Seconds in the high 32 bits, as OVS sends it.
    pub idle_time: Option<u64>,
    pub flow_count: Option<u32>,
    pub packet_count: Option<u64>,
    pub byte_count: Option<u64>,
    /// Unknown OXS TLVs, raw, in order after the known ones.
    pub unknown: Vec<Bytes>,
}

/// `ofp13_meter_stats` with its band stats.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// Per band: (packet_band_count, byte_band_count). Packets the band dropped.
    pub bands: Vec<(u64, u64)>,
}
