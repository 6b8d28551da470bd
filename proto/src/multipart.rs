//! MULTIPART_REQUEST / MULTIPART_REPLY (types 18/19): flow stats (multipart type 1 with OF1.5
//! OXS stats), meter stats (type 9), flow monitors (type 16, see [`crate::flow_monitor`]),
//! and anything else kept raw.
//!
//! Bodies start at the multipart header's type u16 (right after the 8-byte `ofp_header`):
//! type u16, flags u16, pad 4, then the type's body.

use crate::error::{Error, Result};
use crate::flow_monitor::{self, FlowMonitorRequest, FlowUpdate, OFPMP_FLOW_MONITOR};
use crate::instruction::{check_instructions, emit_instructions, instructions_len, parse_instructions, Instruction};
use crate::oxm::{oxm_header, split_header, Match};
use crate::wire::{check_zero, pad8, parse_list, part_len16, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// Multipart type 1: flows (OVS's OFPST_FLOW, OF1.5's OFPMP_FLOW_DESC).
pub const OFPMP_FLOW: u16 = 1;
/// Multipart type 9: meter stats.
pub const OFPMP_METER_STATS: u16 = 9;
/// OXS class of the OF1.5 flow statistics.
pub const OXS_CLASS: u16 = 0x8002;

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
    /// Multipart type 16: flow monitors to create, modify or delete.
    FlowMonitor(Vec<FlowMonitorRequest>),
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
    /// Multipart type 16: flow monitor updates.
    FlowMonitor(Vec<FlowUpdate>),
    Other {
        mp_type: u16,
        body: Bytes,
    },
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

/// Size of the multipart header after `ofp_header`: type, flags, pad.
const MP_HEADER_LEN: usize = 8;

fn parse_mp_header<'a>(body: &'a [u8], what: &'static str) -> Result<(u16, u16, &'a [u8])> {
    let mut r = Reader::new(body, what);
    let mp_type = r.u16()?;
    let flags = r.u16()?;
    r.zeros(4)?;
    Ok((mp_type, flags, r.rest()))
}

fn emit_mp_header(out: &mut BytesMut, mp_type: u16, flags: u16) {
    out.put_u16(mp_type);
    out.put_u16(flags);
    out.put_u32(0);
}

impl MultipartRequest {
    /// Checks the OXM TLVs of the matches it carries (see `Oxm::check`).
    pub(crate) fn check(&self) -> Result<()> {
        match &self.body {
            MultipartRequestBody::Flow(r) => r.match_.check(),
            MultipartRequestBody::FlowMonitor(monitors) => monitors.iter().try_for_each(|m| m.match_.check()),
            MultipartRequestBody::MeterStats { .. } | MultipartRequestBody::Other { .. } => Ok(()),
        }
    }

    /// Parses a request body (from the multipart type on).
    pub fn parse(body: &[u8]) -> Result<Self> {
        let (mp_type, flags, rest) = parse_mp_header(body, "multipart request")?;
        let body = match mp_type {
            OFPMP_FLOW => MultipartRequestBody::Flow(FlowStatsRequest::parse(rest)?),
            OFPMP_METER_STATS => {
                let mut r = Reader::new(rest, "meter stats request");
                let meter_id = r.u32()?;
                r.zeros(4)?;
                if !r.rest().is_empty() {
                    return Err(Error::BadLength { what: "meter stats request", len: rest.len() });
                }
                MultipartRequestBody::MeterStats { meter_id }
            }
            OFPMP_FLOW_MONITOR => MultipartRequestBody::FlowMonitor(flow_monitor::parse_requests(rest)?),
            other => MultipartRequestBody::Other { mp_type: other, body: Bytes::copy_from_slice(rest) },
        };
        Ok(MultipartRequest { flags, body })
    }

    /// Length of the body (without the 8-byte `ofp_header`).
    pub fn buffer_len(&self) -> usize {
        MP_HEADER_LEN
            + match &self.body {
                MultipartRequestBody::Flow(f) => 32 + f.match_.buffer_len(),
                MultipartRequestBody::MeterStats { .. } => 8,
                MultipartRequestBody::FlowMonitor(v) => v.iter().map(FlowMonitorRequest::buffer_len).sum(),
                MultipartRequestBody::Other { body, .. } => body.len(),
            }
    }

    /// Writes the body (without the 8-byte `ofp_header`).
    pub fn emit(&self, out: &mut BytesMut) {
        match &self.body {
            MultipartRequestBody::Flow(f) => {
                emit_mp_header(out, OFPMP_FLOW, self.flags);
                out.put_u8(f.table_id);
                out.put_bytes(0, 3);
                out.put_u32(f.out_port);
                out.put_u32(f.out_group);
                out.put_u32(0);
                out.put_u64(f.cookie);
                out.put_u64(f.cookie_mask);
                f.match_.emit(out);
            }
            MultipartRequestBody::MeterStats { meter_id } => {
                emit_mp_header(out, OFPMP_METER_STATS, self.flags);
                out.put_u32(*meter_id);
                out.put_u32(0);
            }
            MultipartRequestBody::FlowMonitor(v) => {
                emit_mp_header(out, OFPMP_FLOW_MONITOR, self.flags);
                v.iter().for_each(|r| r.emit(out));
            }
            MultipartRequestBody::Other { mp_type, body } => {
                emit_mp_header(out, *mp_type, self.flags);
                out.put_slice(body);
            }
        }
    }
}

impl FlowStatsRequest {
    fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf, "flow stats request");
        let table_id = r.u8()?;
        r.zeros(3)?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        r.zeros(4)?;
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let rest = r.rest();
        let (match_, used) = Match::parse(rest)?;
        if used != rest.len() {
            return Err(Error::BadLength { what: "flow stats request", len: buf.len() });
        }
        Ok(FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, match_ })
    }
}

impl Default for FlowStatsRequest {
    /// All flows of all tables.
    fn default() -> Self {
        FlowStatsRequest {
            table_id: crate::TABLE_ALL,
            out_port: crate::port::ANY,
            out_group: crate::GROUP_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::default(),
        }
    }
}

impl MultipartReply {
    /// Checks the OXM TLVs of the flows it carries (see `Oxm::check`).
    pub(crate) fn check(&self) -> Result<()> {
        let flow = |m: &Match, i: &[Instruction]| m.check().and_then(|()| check_instructions(i));
        match &self.body {
            MultipartReplyBody::Flow(stats) => stats.iter().try_for_each(|s| flow(&s.match_, &s.instructions)),
            MultipartReplyBody::FlowMonitor(updates) => updates.iter().try_for_each(|u| match u {
                FlowUpdate::Full(f) => flow(&f.match_, &f.instructions),
                _ => Ok(()),
            }),
            MultipartReplyBody::MeterStats(_) | MultipartReplyBody::Other { .. } => Ok(()),
        }
    }

    /// Parses a reply body (from the multipart type on).
    pub fn parse(body: &[u8]) -> Result<Self> {
        let (mp_type, flags, rest) = parse_mp_header(body, "multipart reply")?;
        let body = match mp_type {
            OFPMP_FLOW => MultipartReplyBody::Flow(parse_list(rest, FlowStats::parse)?),
            OFPMP_METER_STATS => MultipartReplyBody::MeterStats(parse_list(rest, MeterStats::parse)?),
            OFPMP_FLOW_MONITOR => MultipartReplyBody::FlowMonitor(flow_monitor::parse_updates(rest)?),
            other => MultipartReplyBody::Other { mp_type: other, body: Bytes::copy_from_slice(rest) },
        };
        Ok(MultipartReply { flags, body })
    }

    /// Length of the body (without the 8-byte `ofp_header`).
    pub fn buffer_len(&self) -> usize {
        MP_HEADER_LEN
            + match &self.body {
                MultipartReplyBody::Flow(v) => v.iter().map(FlowStats::buffer_len).sum(),
                MultipartReplyBody::MeterStats(v) => v.iter().map(MeterStats::buffer_len).sum(),
                MultipartReplyBody::FlowMonitor(v) => v.iter().map(FlowUpdate::buffer_len).sum(),
                MultipartReplyBody::Other { body, .. } => body.len(),
            }
    }

    /// Writes the body (without the 8-byte `ofp_header`).
    pub fn emit(&self, out: &mut BytesMut) {
        match &self.body {
            MultipartReplyBody::Flow(v) => {
                emit_mp_header(out, OFPMP_FLOW, self.flags);
                v.iter().for_each(|f| f.emit(out));
            }
            MultipartReplyBody::MeterStats(v) => {
                emit_mp_header(out, OFPMP_METER_STATS, self.flags);
                v.iter().for_each(|m| m.emit(out));
            }
            MultipartReplyBody::FlowMonitor(v) => {
                emit_mp_header(out, OFPMP_FLOW_MONITOR, self.flags);
                v.iter().for_each(|u| u.emit(out));
            }
            MultipartReplyBody::Other { mp_type, body } => {
                emit_mp_header(out, *mp_type, self.flags);
                out.put_slice(body);
            }
        }
    }
}

/// Fixed part of `ofp15_flow_desc`.
const FLOW_DESC_LEN: usize = 24;

impl FlowStats {
    /// Parses one `ofp15_flow_desc` entry; returns it and its length.
    pub fn parse(buf: &[u8]) -> Result<(FlowStats, usize)> {
        let mut r = Reader::new(buf, "ofp15_flow_desc");
        let len = usize::from(r.u16()?);
        let whole = tlv(buf, len, FLOW_DESC_LEN, true, "ofp15_flow_desc")?;
        let mut r = Reader::new(whole, "ofp15_flow_desc");
        r.take(2)?;
        r.zeros(2)?;
        let table_id = r.u8()?;
        r.zeros(1)?;
        // The rest in wire order (a struct expression evaluates its fields as written).
        let f = FlowStats {
            table_id,
            priority: r.u16()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            flags: r.u16()?,
            importance: r.u16()?,
            cookie: r.u64()?,
            match_: Match::read(&mut r)?,
            stats: OxsStats::read(&mut r)?,
            instructions: parse_instructions(r.rest())?,
        };
        Ok((f, len))
    }

    /// Length of the entry on the wire.
    pub fn buffer_len(&self) -> usize {
        FLOW_DESC_LEN + self.match_.buffer_len() + self.stats.buffer_len() + instructions_len(&self.instructions)
    }

    /// Writes the entry.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(part_len16(self.buffer_len()));
        out.put_u16(0);
        out.put_u8(self.table_id);
        out.put_u8(0);
        out.put_u16(self.priority);
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.flags);
        out.put_u16(self.importance);
        out.put_u64(self.cookie);
        self.match_.emit(out);
        self.stats.emit(out);
        emit_instructions(&self.instructions, out);
    }
}

/// OXS fields.
mod oxs {
    pub const DURATION: u8 = 0;
    pub const IDLE_TIME: u8 = 1;
    pub const FLOW_COUNT: u8 = 3;
    pub const PACKET_COUNT: u8 = 4;
    pub const BYTE_COUNT: u8 = 5;
}

impl OxsStats {
    /// Parses an `ofp_oxs_stat` (reserved u16, length u16, TLVs, padding to 8); returns it and
    /// the bytes consumed (padding included). Known TLVs are typed while they come in
    /// ascending field order before any unknown one; the others are kept raw, so the bytes
    /// round-trip.
    pub fn parse(buf: &[u8]) -> Result<(OxsStats, usize)> {
        let mut r = Reader::new(buf, "ofp_oxs_stat");
        r.zeros(2)?;
        let len = usize::from(r.u16()?);
        let padded = pad8(len);
        let whole = tlv(buf, padded, 4, false, "ofp_oxs_stat")?;
        let mut s = OxsStats::default();
        let mut tlvs = whole.get(4..len).unwrap_or(&[]);
        let mut last: Option<u8> = None;
        while !tlvs.is_empty() {
            let mut t = Reader::new(tlvs, "oxs tlv");
            let header = t.u32()?;
            let (cls, field, has_mask, n) = split_header(header);
            let payload = t.take(usize::from(n))?;
            let used = t.pos();
            let in_order = s.unknown.is_empty() && last.is_none_or(|l| field > l);
            let typed = cls == OXS_CLASS && !has_mask && in_order && s.set(field, payload);
            if typed {
                last = Some(field);
            } else {
                s.unknown.push(Bytes::copy_from_slice(&tlvs[..used]));
            }
            tlvs = tlvs.get(used..).unwrap_or(&[]);
        }
        check_zero(whole.get(len..).unwrap_or(&[]), len, "ofp_oxs_stat")?;
        Ok((s, padded))
    }

    /// Parses the `ofp_oxs_stat` at the reader's position and moves past it (padding included).
    fn read(r: &mut Reader<'_>) -> Result<OxsStats> {
        let (s, used) = OxsStats::parse(r.peek_rest())?;
        r.take(used)?;
        Ok(s)
    }

    /// Stores a known field; false when `field`/`payload` is not one.
    fn set(&mut self, field: u8, payload: &[u8]) -> bool {
        let u64_of = |p: &[u8]| <[u8; 8]>::try_from(p).ok().map(u64::from_be_bytes);
        match field {
            oxs::DURATION => u64_of(payload).map(|v| self.duration = Some(((v >> 32) as u32, v as u32))).is_some(),
            oxs::IDLE_TIME => u64_of(payload).map(|v| self.idle_time = Some(v)).is_some(),
            oxs::FLOW_COUNT => {
                <[u8; 4]>::try_from(payload).ok().map(|a| self.flow_count = Some(u32::from_be_bytes(a))).is_some()
            }
            oxs::PACKET_COUNT => u64_of(payload).map(|v| self.packet_count = Some(v)).is_some(),
            oxs::BYTE_COUNT => u64_of(payload).map(|v| self.byte_count = Some(v)).is_some(),
            _ => false,
        }
    }

    fn tlvs_len(&self) -> usize {
        let n8 =
            [self.duration.is_some(), self.idle_time.is_some(), self.packet_count.is_some(), self.byte_count.is_some()]
                .iter()
                .filter(|&&b| b)
                .count();
        n8 * 12 + usize::from(self.flow_count.is_some()) * 8 + self.unknown.iter().map(Bytes::len).sum::<usize>()
    }

    /// Length on the wire, padding included.
    pub fn buffer_len(&self) -> usize {
        pad8(4 + self.tlvs_len())
    }

    /// Writes the `ofp_oxs_stat` with its padding.
    pub fn emit(&self, out: &mut BytesMut) {
        let len = 4 + self.tlvs_len();
        out.put_u16(0);
        out.put_u16(part_len16(len));
        let h = |f: u8, n: u8| oxm_header(OXS_CLASS, f, false, n);
        if let Some((sec, nsec)) = self.duration {
            out.put_u32(h(oxs::DURATION, 8));
            out.put_u32(sec);
            out.put_u32(nsec);
        }
        if let Some(v) = self.idle_time {
            out.put_u32(h(oxs::IDLE_TIME, 8));
            out.put_u64(v);
        }
        if let Some(v) = self.flow_count {
            out.put_u32(h(oxs::FLOW_COUNT, 4));
            out.put_u32(v);
        }
        if let Some(v) = self.packet_count {
            out.put_u32(h(oxs::PACKET_COUNT, 8));
            out.put_u64(v);
        }
        if let Some(v) = self.byte_count {
            out.put_u32(h(oxs::BYTE_COUNT, 8));
            out.put_u64(v);
        }
        for u in &self.unknown {
            out.put_slice(u);
        }
        out.put_bytes(0, pad8(len) - len);
    }
}

/// Fixed part of `ofp13_meter_stats`.
const METER_STATS_LEN: usize = 40;

impl MeterStats {
    /// Parses one `ofp13_meter_stats` entry with its band stats; returns it and its length.
    pub fn parse(buf: &[u8]) -> Result<(MeterStats, usize)> {
        let mut r = Reader::new(buf, "ofp13_meter_stats");
        let meter_id = r.u32()?;
        let len = usize::from(r.u16()?);
        if len < METER_STATS_LEN || (len - METER_STATS_LEN) % 16 != 0 {
            return Err(Error::BadLength { what: "ofp13_meter_stats", len });
        }
        let whole = tlv(buf, len, METER_STATS_LEN, true, "ofp13_meter_stats")?;
        let mut r = Reader::new(whole, "ofp13_meter_stats");
        r.take(6)?;
        r.zeros(6)?;
        let flow_count = r.u32()?;
        let packet_in_count = r.u64()?;
        let byte_in_count = r.u64()?;
        let duration_sec = r.u32()?;
        let duration_nsec = r.u32()?;
        let mut bands = Vec::with_capacity((len - METER_STATS_LEN) / 16);
        for _ in 0..(len - METER_STATS_LEN) / 16 {
            bands.push((r.u64()?, r.u64()?));
        }
        let m = MeterStats { meter_id, flow_count, packet_in_count, byte_in_count, duration_sec, duration_nsec, bands };
        Ok((m, len))
    }

    /// Length of the entry on the wire.
    pub fn buffer_len(&self) -> usize {
        METER_STATS_LEN + 16 * self.bands.len()
    }

    /// Writes the entry.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.meter_id);
        out.put_u16(part_len16(self.buffer_len()));
        out.put_bytes(0, 6);
        out.put_u32(self.flow_count);
        out.put_u64(self.packet_in_count);
        out.put_u64(self.byte_in_count);
        out.put_u32(self.duration_sec);
        out.put_u32(self.duration_nsec);
        for (p, b) in &self.bands {
            out.put_u64(*p);
            out.put_u64(*b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_stats_reply_round_trips() {
        let m = MeterStats {
            meter_id: 1,
            flow_count: 2,
            packet_in_count: 3,
            byte_in_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            bands: vec![(7, 8)],
        };
        let reply = MultipartReply { flags: 0, body: MultipartReplyBody::MeterStats(vec![m]) };
        let mut out = BytesMut::new();
        reply.emit(&mut out);
        assert_eq!(out.len(), reply.buffer_len());
        assert_eq!(out.len(), 8 + 56);
        assert_eq!(&out[12..14], &[0, 56]);
        assert_eq!(MultipartReply::parse(&out).unwrap(), reply);
        // A band-less entry claiming 48 bytes (not 40 + 16n) is refused.
        let mut bad = out.to_vec();
        bad[13] = 48;
        assert!(MultipartReply::parse(&bad[..8 + 48]).is_err());
    }

    #[test]
    fn meter_stats_request_layout() {
        let req = MultipartRequest { flags: 0, body: MultipartRequestBody::MeterStats { meter_id: 0xffff_ffff } };
        let mut out = BytesMut::new();
        req.emit(&mut out);
        assert_eq!(hex::encode(&out), "0009000000000000ffffffff00000000");
        assert_eq!(MultipartRequest::parse(&out).unwrap(), req);
    }

    #[test]
    fn out_of_order_oxs_is_kept_raw() {
        // packet_count before duration: the duration TLV stays raw.
        let h = "0000001c80020808000000000000000280020008000000010000000200000000";
        let b = hex::decode(h).unwrap();
        let (s, used) = OxsStats::parse(&b).unwrap();
        assert_eq!(used, 32);
        assert_eq!(s.packet_count, Some(2));
        assert_eq!(s.duration, None);
        assert_eq!(s.unknown.len(), 1);
        let mut out = BytesMut::new();
        s.emit(&mut out);
        assert_eq!(hex::encode(out), h);
    }
}
