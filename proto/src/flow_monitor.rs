//! OpenFlow 1.4+ flow monitoring (multipart type 16, OFPMP_FLOW_MONITOR), as Open vSwitch
//! implements it for OpenFlow 1.4 and 1.5 connections (OVS >= 3.0; before that only the
//! Nicira NXST_FLOW_MONITOR of OpenFlow 1.0-1.2 existed, which OVS refuses on 1.5).
//!
//! A request body is an array of `ofp14_flow_monitor_request` (16 bytes + `ofp_match`); a
//! reply body an array of updates, each starting with `length u16, event u16`:
//! - INITIAL / ADDED / REMOVED / MODIFIED: `ofp_flow_update_full` (24 bytes + `ofp_match` +
//!   instructions, the latter only when [`flags::INSTRUCTIONS`] was asked for);
//! - ABBREV: 8 bytes with the xid of the controller's own flow_mod that caused a change
//!   (OVS sends one per batch of changes made on the monitoring connection itself unless
//!   [`flags::ONLY_OWN`] is set);
//! - PAUSED / RESUMED: 8 bytes, the switch ran out of buffer for updates and caught up.
//!
//! The first reply (xid of the request) carries the INITIAL flows if asked for; later
//! updates come as unsolicited replies with xid 0.

use crate::error::{Error, Result};
use crate::instruction::{emit_instructions, instructions_len, parse_instructions, Instruction};
use crate::oxm::Match;
use crate::wire::{parse_list, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// Multipart type 16.
pub const OFPMP_FLOW_MONITOR: u16 = 16;

/// `flags` of a monitor request (`ofp14_flow_monitor_flags`).
pub mod flags {
    /// Report the flows present when the monitor is created.
    pub const INITIAL: u16 = 1 << 0;
    /// Report flows as they are added.
    pub const ADD: u16 = 1 << 1;
    /// Report flows as they are removed.
    pub const REMOVED: u16 = 1 << 2;
    /// Report flows as they are modified.
    pub const MODIFY: u16 = 1 << 3;
    /// Include the instructions in full updates.
    pub const INSTRUCTIONS: u16 = 1 << 4;
    /// The specification's NO_ABBREV; OVS refuses it on OpenFlow 1.4+ (OFPMOFC_BAD_FLAGS).
    pub const NO_ABBREV: u16 = 1 << 5;
    /// OVS: report this connection's own changes in full too (it prints this bit "own").
    pub const ONLY_OWN: u16 = 1 << 6;
}

/// `command` of a monitor request.
pub mod command {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const DELETE: u8 = 2;
}

/// `event` of an update.
pub mod event {
    pub const INITIAL: u16 = 0;
    pub const ADDED: u16 = 1;
    pub const REMOVED: u16 = 2;
    pub const MODIFIED: u16 = 3;
    pub const ABBREV: u16 = 4;
    pub const PAUSED: u16 = 5;
    pub const RESUMED: u16 = 6;
}

/// One `ofp14_flow_monitor_request`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlowMonitorRequest {
    /// Controller-chosen id, unique among this connection's monitors.
    pub monitor_id: u32,
    /// Only flows that output to this port (`port::ANY`: all).
    pub out_port: u32,
    /// Only flows that output to this group (`GROUP_ANY`: all).
    pub out_group: u32,
    /// [`flags`] bits.
    pub flags: u16,
    /// One table, or `TABLE_ALL`.
    pub table_id: u8,
    /// [`command`].
    pub command: u8,
    /// Only flows this match covers (empty: all).
    pub match_: Match,
}

/// Fixed part of `ofp14_flow_monitor_request`.
const REQUEST_LEN: usize = 16;
/// Fixed part of `ofp_flow_update_full`.
const FULL_LEN: usize = 24;
/// `ofp_flow_update_abbrev` and `ofp_flow_update_paused`.
const SHORT_LEN: usize = 8;

impl FlowMonitorRequest {
    /// Monitors every flow of every table for additions, removals and modifications,
    /// without instructions and with this connection's own changes abbreviated.
    pub fn all_changes(monitor_id: u32) -> Self {
        FlowMonitorRequest {
            monitor_id,
            out_port: crate::port::ANY,
            out_group: crate::GROUP_ANY,
            flags: flags::ADD | flags::REMOVED | flags::MODIFY,
            table_id: crate::TABLE_ALL,
            command: command::ADD,
            match_: Match::default(),
        }
    }

    /// Parses one request; returns it and the bytes consumed.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize)> {
        let mut r = Reader::new(buf, "ofp14_flow_monitor_request");
        let monitor_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        let table_id = r.u8()?;
        let command = r.u8()?;
        let (match_, used) = Match::parse(r.rest())?;
        let req = FlowMonitorRequest { monitor_id, out_port, out_group, flags, table_id, command, match_ };
        Ok((req, REQUEST_LEN + used))
    }

    /// Length on the wire.
    pub fn buffer_len(&self) -> usize {
        REQUEST_LEN + self.match_.buffer_len()
    }

    /// Writes the request.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.monitor_id);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_u16(self.flags);
        out.put_u8(self.table_id);
        out.put_u8(self.command);
        self.match_.emit(out);
    }
}

/// An `ofp_flow_update_full`: a flow that was there initially, added, removed or modified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlowUpdateFull {
    /// [`event::INITIAL`], [`event::ADDED`], [`event::REMOVED`] or [`event::MODIFIED`].
    pub event: u16,
    pub table_id: u8,
    /// OFPRR_* for REMOVED, else 0.
    pub reason: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    pub match_: Match,
    /// Present only when the monitor asked for them, and never for REMOVED.
    pub instructions: Vec<Instruction>,
}

/// One entry of a flow monitor reply.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FlowUpdate {
    /// A flow, with what happened to it.
    Full(FlowUpdateFull),
    /// Changes caused by this connection's own request `xid`.
    Abbrev { xid: u32 },
    /// The switch stopped sending updates (out of buffer space): the view is incomplete.
    Paused,
    /// Updates flow again; the missed changes were sent before this.
    Resumed,
    /// An event this crate does not know: its number and the bytes after the 4-byte header.
    Unknown { event: u16, body: Bytes },
}

impl FlowUpdate {
    /// Parses one update; returns it and its length.
    pub fn parse(buf: &[u8]) -> Result<(Self, usize)> {
        let mut r = Reader::new(buf, "ofp_flow_update");
        let len = usize::from(r.u16()?);
        let ev = r.u16()?;
        let whole = tlv(buf, len, 4, true, "ofp_flow_update")?;
        let mut r = Reader::new(whole, "ofp_flow_update");
        r.take(4)?;
        let update = match ev {
            event::INITIAL | event::ADDED | event::REMOVED | event::MODIFIED => {
                let (table_id, reason) = (r.u8()?, r.u8()?);
                let (idle_timeout, hard_timeout, priority) = (r.u16()?, r.u16()?, r.u16()?);
                r.zeros(4)?;
                FlowUpdate::Full(FlowUpdateFull {
                    event: ev,
                    table_id,
                    reason,
                    idle_timeout,
                    hard_timeout,
                    priority,
                    cookie: r.u64()?,
                    match_: Match::read(&mut r)?,
                    instructions: parse_instructions(r.rest())?,
                })
            }
            event::ABBREV | event::PAUSED | event::RESUMED if len != SHORT_LEN => {
                return Err(Error::BadLength { what: "ofp_flow_update", len });
            }
            event::ABBREV => FlowUpdate::Abbrev { xid: r.u32()? },
            event::PAUSED | event::RESUMED => {
                r.zeros(4)?;
                if ev == event::PAUSED {
                    FlowUpdate::Paused
                } else {
                    FlowUpdate::Resumed
                }
            }
            other => FlowUpdate::Unknown { event: other, body: Bytes::copy_from_slice(r.rest()) },
        };
        Ok((update, len))
    }

    /// Length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            FlowUpdate::Full(f) => FULL_LEN + f.match_.buffer_len() + instructions_len(&f.instructions),
            FlowUpdate::Abbrev { .. } | FlowUpdate::Paused | FlowUpdate::Resumed => SHORT_LEN,
            FlowUpdate::Unknown { body, .. } => 4 + body.len(),
        }
    }

    /// Writes the update.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(crate::wire::part_len16(self.buffer_len()));
        match self {
            FlowUpdate::Full(f) => {
                out.put_u16(f.event);
                out.put_u8(f.table_id);
                out.put_u8(f.reason);
                out.put_u16(f.idle_timeout);
                out.put_u16(f.hard_timeout);
                out.put_u16(f.priority);
                out.put_u32(0);
                out.put_u64(f.cookie);
                f.match_.emit(out);
                emit_instructions(&f.instructions, out);
            }
            FlowUpdate::Abbrev { xid } => {
                out.put_u16(event::ABBREV);
                out.put_u32(*xid);
            }
            FlowUpdate::Paused | FlowUpdate::Resumed => {
                out.put_u16(if matches!(self, FlowUpdate::Paused) { event::PAUSED } else { event::RESUMED });
                out.put_u32(0);
            }
            FlowUpdate::Unknown { event, body } => {
                out.put_u16(*event);
                out.put_slice(body);
            }
        }
    }
}

/// Parses a request body (after the multipart header): zero or more requests.
pub fn parse_requests(buf: &[u8]) -> Result<Vec<FlowMonitorRequest>> {
    parse_list(buf, FlowMonitorRequest::parse)
}

/// Parses a reply body (after the multipart header): zero or more updates.
pub fn parse_updates(buf: &[u8]) -> Result<Vec<FlowUpdate>> {
    parse_list(buf, FlowUpdate::parse)
}

#[cfg(test)]
mod tests {
    //! Vectors from openvswitch/ovs tests/ofp-print.at (v3.1.0), "FLOW_MONITOR request",
    //! "FLOW_MONITOR reply", "FLOW_MONITOR_PAUSED"/"_RESUMED" (OpenFlow 1.4+ cases, version
    //! byte 0x05 there and 0x06 here: the bodies are the same in 1.5, and `ovs-ofctl
    //! ofp-print` 3.1.0 prints the 0x06 forms identically but for "(OF1.5)").
    use super::*;
    use crate::message::{Message, Payload};
    use crate::multipart::{MultipartReplyBody, MultipartRequestBody};
    use crate::oxm::Oxm;

    fn unhex(s: &str) -> Vec<u8> {
        let clean: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        hex::decode(clean).expect("test hex")
    }

    fn round_trip(bytes: &[u8]) -> Message {
        let msg = Message::parse(bytes).expect("parse");
        let mut out = BytesMut::new();
        msg.emit(&mut out).expect("emit");
        assert_eq!(out.as_ref(), bytes, "re-emitted byte-exact");
        msg
    }

    #[test]
    fn ovs_request_vector_with_three_monitors() {
        // OFPST_FLOW_MONITOR request (OF1.5) (xid=0x6):
        //  id=4096 flags=initial,add,delete,modify,actions,own out_port=LOCAL table=0
        //  id=8192 flags=initial,add,delete,modify,actions,own out_port=1 out_group=64 table=1
        //  id=16384 command=delete
        let bytes = unhex(
            "06 12 00 58 00 00 00 06 00 10 00 00 00 00 00 00
             00 00 10 00 ff ff ff fe ff ff ff ff 00 5f 00 00 00 01 00 04 00 00 00 00
             00 00 20 00 00 00 00 01 00 00 00 40 00 5f 01 01 00 01 00 04 00 00 00 00
             00 00 40 00 00 00 00 02 00 00 00 40 00 5f 02 02 00 01 00 04 00 00 00 00",
        );
        let msg = round_trip(&bytes);
        let Payload::MultipartRequest(req) = msg.payload else { panic!("{msg:?}") };
        let MultipartRequestBody::FlowMonitor(v) = req.body else { panic!("{req:?}") };
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].monitor_id, v[0].out_port, v[0].out_group, v[0].table_id),
            (4096, crate::port::LOCAL, crate::GROUP_ANY, 0)
        );
        assert_eq!(
            v[0].flags,
            flags::INITIAL | flags::ADD | flags::REMOVED | flags::MODIFY | flags::INSTRUCTIONS | flags::ONLY_OWN
        );
        assert_eq!(
            (v[1].monitor_id, v[1].out_port, v[1].out_group, v[1].table_id, v[1].command),
            (8192, 1, 64, 1, command::MODIFY)
        );
        assert_eq!((v[2].monitor_id, v[2].command), (16384, command::DELETE));
    }

    #[test]
    fn all_changes_request_is_what_ovs_prints_as_add_delete_modify() {
        // `ovs-ofctl ofp-print` 3.1.0: "OFPST_FLOW_MONITOR request (OF1.5) (xid=0x9):
        //  id=1 flags=add,delete,modify" (out_port, out_group and table "any" are not printed).
        let expected = unhex(
            "06 12 00 28 00 00 00 09 00 10 00 00 00 00 00 00
             00 00 00 01 ff ff ff ff ff ff ff ff 00 0e ff 00 00 01 00 04 00 00 00 00",
        );
        let msg = Message::new(
            9,
            Payload::MultipartRequest(crate::MultipartRequest {
                flags: 0,
                body: MultipartRequestBody::FlowMonitor(vec![FlowMonitorRequest::all_changes(1)]),
            }),
        );
        let mut out = BytesMut::new();
        msg.emit(&mut out).expect("emit");
        assert_eq!(out.as_ref(), expected.as_slice());
        round_trip(&expected);
    }

    #[test]
    fn ovs_reply_vector_removed_and_abbrev() {
        // OFPST_FLOW_MONITOR reply (OF1.5) (xid=0x0):
        //  event=DELETED reason=eviction table=0 cookie=0x123456789abcdef0 in_port=1
        //  event=ABBREV xid=0x186a0
        let bytes = unhex(
            "06 13 00 40 00 00 00 00 00 10 00 00 00 00 00 00
             00 28 00 02 00 05 00 00 00 00 80 00 00 00 00 00
             12 34 56 78 9a bc de f0 00 01 00 0c 80 00 00 04
             00 00 00 01 00 00 00 00
             00 08 00 04 00 01 86 a0",
        );
        let msg = round_trip(&bytes);
        assert_eq!(msg.xid, 0);
        let Payload::MultipartReply(rep) = msg.payload else { panic!("{msg:?}") };
        let MultipartReplyBody::FlowMonitor(v) = rep.body else { panic!("{rep:?}") };
        let [FlowUpdate::Full(f), FlowUpdate::Abbrev { xid: 0x186a0 }] = v.as_slice() else { panic!("{v:?}") };
        assert_eq!(
            (f.event, f.reason, f.table_id, f.priority, f.cookie),
            (event::REMOVED, 5, 0, 0x8000, 0x1234_5678_9abc_def0)
        );
        assert_eq!(f.match_.fields, vec![Oxm::InPort(1)]);
        assert!(f.instructions.is_empty());
    }

    #[test]
    fn ovs_paused_and_resumed_vectors() {
        for (ev, want) in [("05", FlowUpdate::Paused), ("06", FlowUpdate::Resumed)] {
            let bytes = unhex(&format!("06 13 00 18 00 00 00 00 00 10 00 00 00 00 00 00 00 08 00 {ev} 00 00 00 00"));
            let msg = round_trip(&bytes);
            let Payload::MultipartReply(rep) = msg.payload else { panic!() };
            assert_eq!(rep.body, MultipartReplyBody::FlowMonitor(vec![want]));
        }
    }

    #[test]
    fn unknown_events_round_trip_and_bad_lengths_are_errors() {
        let unknown = unhex("00 10 00 63 01 02 03 04 05 06 07 08 09 0a 0b 0c");
        let (u, used) = FlowUpdate::parse(&unknown).expect("unknown event kept");
        assert_eq!(used, 16);
        assert!(matches!(&u, FlowUpdate::Unknown { event: 0x63, body } if body.len() == 12));
        let mut out = BytesMut::new();
        u.emit(&mut out);
        assert_eq!(out.as_ref(), unknown.as_slice());

        for bad in [
            "00 08 00 04 00 01",                                                       // truncated
            "00 00 00 04 00 01 86 a0",                                                 // length 0
            "00 0c 00 04 00 01 86 a0 00 00 00 00",                                     // not a multiple of 8
            "00 10 00 04 00 01 86 a0 00 00 00 00 00 00 00 00",                         // abbrev too long
            "00 08 00 05 00 00 00 01",                                                 // paused with non-zero padding
            "00 18 00 01 00 00 00 00 00 00 80 00 00 00 00 00 00 00 00 00 00 00 00 01", // full without a match
        ] {
            assert!(FlowUpdate::parse(&unhex(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn every_truncation_of_the_reply_is_an_error_not_a_panic() {
        let bytes = unhex(
            "00 28 00 02 00 05 00 00 00 00 80 00 00 00 00 00
             12 34 56 78 9a bc de f0 00 01 00 0c 80 00 00 04
             00 00 00 01 00 00 00 00 00 08 00 04 00 01 86 a0",
        );
        for cut in 1..bytes.len() {
            if cut == 40 {
                continue; // a whole first update
            }
            assert!(parse_updates(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(parse_updates(&bytes).expect("whole").len(), 2);
    }
}
