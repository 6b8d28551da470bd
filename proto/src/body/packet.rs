//! OFPT_PACKET_OUT (OpenFlow 1.5) and OFPT_PACKET_IN (OpenFlow 1.3+).

use crate::action::{self, Action};
use crate::error::Result;
use crate::oxm::Match;
use crate::wire::{len16, Reader};
use bytes::{BufMut, Bytes, BytesMut};

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

impl PacketOut {
    /// A packet-out of an unbuffered frame arriving on `in_port` (OXM in_port in the match).
    pub fn new(in_port: u32, actions: Vec<Action>, data: Bytes) -> PacketOut {
        PacketOut {
            buffer_id: crate::NO_BUFFER,
            match_: Match { fields: vec![crate::oxm::Oxm::InPort(in_port)] },
            actions,
            data,
        }
    }

    pub fn parse(body: &[u8]) -> Result<PacketOut> {
        let mut r = Reader::new(body, "ofp15_packet_out");
        let buffer_id = r.u32()?;
        let actions_len = usize::from(r.u16()?);
        r.zeros(2)?;
        let match_ = Match::read(&mut r)?;
        let actions = action::parse_actions(r.take(actions_len)?)?;
        Ok(PacketOut { buffer_id, match_, actions, data: Bytes::copy_from_slice(r.rest()) })
    }

    pub fn buffer_len(&self) -> usize {
        8 + self.match_.buffer_len() + action::actions_len(&self.actions) + self.data.len()
    }

    pub(crate) fn check(&self) -> Result<()> {
        len16("ofp15_packet_out actions", action::actions_len(&self.actions))?;
        self.match_.check()?;
        action::check_actions(&self.actions)
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u16(crate::wire::part_len16(action::actions_len(&self.actions)));
        out.put_u16(0);
        self.match_.emit(out);
        action::emit_actions(&self.actions, out);
        out.put_slice(&self.data);
    }
}

impl PacketIn {
    pub fn parse(body: &[u8]) -> Result<PacketIn> {
        let mut r = Reader::new(body, "ofp13_packet_in");
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let match_ = Match::read(&mut r)?;
        r.zeros(2)?;
        Ok(PacketIn { buffer_id, total_len, reason, table_id, cookie, match_, data: Bytes::copy_from_slice(r.rest()) })
    }

    pub fn buffer_len(&self) -> usize {
        16 + self.match_.buffer_len() + 2 + self.data.len()
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u16(self.total_len);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u64(self.cookie);
        self.match_.emit(out);
        out.put_u16(0);
        out.put_slice(&self.data);
    }
}
