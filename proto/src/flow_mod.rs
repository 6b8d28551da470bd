//! OFPT_FLOW_MOD (ofp11_flow_mod + ofp_match + instructions).
//!
//! Body layout after the 8-byte `ofp_header`: cookie u64, cookie_mask u64, table_id u8,
//! command u8, idle_timeout u16, hard_timeout u16, priority u16, buffer_id u32, out_port u32,
//! out_group u32, flags u16, importance u16 (40 bytes), then the `ofp_match` (padded to 8) and
//! the instructions up to the end of the message.

use crate::error::Result;
use crate::instruction::{check_instructions, emit_instructions, instructions_len, parse_instructions, Instruction};
use crate::oxm::Match;
use crate::wire::Reader;
use bytes::{BufMut, BytesMut};

/// Size of the fixed part of the body (before the match).
pub const FLOW_MOD_FIXED_LEN: usize = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum FlowModCommand {
    Add,
    Modify,
    ModifyStrict,
    Delete,
    DeleteStrict,
    /// Any other command byte, kept for round-tripping.
    Other(u8),
}

/// One flow_mod. Defaults: buffer_id, out_port and out_group are "none/any" (0xffffffff).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: FlowModCommand,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    /// OFPFF_*: 1 send_flow_rem, 2 check_overlap, 4 reset_counts, 8 no_pkt_counts, 16 no_byt_counts.
    pub flags: u16,
    pub importance: u16,
    pub match_: Match,
    pub instructions: Vec<Instruction>,
}

impl Default for FlowMod {
    fn default() -> Self {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: FlowModCommand::Add,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 0x8000,
            buffer_id: crate::NO_BUFFER,
            out_port: crate::port::ANY,
            out_group: crate::GROUP_ANY,
            flags: 0,
            importance: 0,
            match_: Match::default(),
            instructions: Vec::new(),
        }
    }
}

impl FlowModCommand {
    /// Decodes the command byte.
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => FlowModCommand::Add,
            1 => FlowModCommand::Modify,
            2 => FlowModCommand::ModifyStrict,
            3 => FlowModCommand::Delete,
            4 => FlowModCommand::DeleteStrict,
            other => FlowModCommand::Other(other),
        }
    }

    /// Encodes the command byte.
    pub fn to_u8(self) -> u8 {
        match self {
            FlowModCommand::Add => 0,
            FlowModCommand::Modify => 1,
            FlowModCommand::ModifyStrict => 2,
            FlowModCommand::Delete => 3,
            FlowModCommand::DeleteStrict => 4,
            FlowModCommand::Other(v) => v,
        }
    }
}

impl FlowMod {
    /// Checks that the match and the instructions' OXM TLVs fit their lengths.
    pub(crate) fn check(&self) -> Result<()> {
        self.match_.check()?;
        check_instructions(&self.instructions)
    }

    /// Parses a flow_mod body (the message after its 8-byte header).
    pub fn parse(body: &[u8]) -> Result<FlowMod> {
        let mut r = Reader::new(body, "ofp_flow_mod");
        // Fields in wire order (a struct expression evaluates its fields as written).
        Ok(FlowMod {
            cookie: r.u64()?,
            cookie_mask: r.u64()?,
            table_id: r.u8()?,
            command: FlowModCommand::from_u8(r.u8()?),
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            priority: r.u16()?,
            buffer_id: r.u32()?,
            out_port: r.u32()?,
            out_group: r.u32()?,
            flags: r.u16()?,
            importance: r.u16()?,
            match_: Match::read(&mut r)?,
            instructions: parse_instructions(r.rest())?,
        })
    }

    /// Length of the body (without the 8-byte header).
    pub fn buffer_len(&self) -> usize {
        FLOW_MOD_FIXED_LEN + self.match_.buffer_len() + instructions_len(&self.instructions)
    }

    /// Writes the body (without the 8-byte header).
    pub fn emit(&self, out: &mut BytesMut) {
        out.reserve(self.buffer_len());
        out.put_u64(self.cookie);
        out.put_u64(self.cookie_mask);
        out.put_u8(self.table_id);
        out.put_u8(self.command.to_u8());
        out.put_u16(self.idle_timeout);
        out.put_u16(self.hard_timeout);
        out.put_u16(self.priority);
        out.put_u32(self.buffer_id);
        out.put_u32(self.out_port);
        out.put_u32(self.out_group);
        out.put_u16(self.flags);
        out.put_u16(self.importance);
        self.match_.emit(out);
        emit_instructions(&self.instructions, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::oxm::Oxm;

    #[test]
    fn conj_id_controller2_flow_mod_as_ovs_ofctl_encodes_it() {
        // Body of `ovs-ofctl -O OpenFlow15 parse-flow
        // 'cookie=0x23,table=1,priority=50,conj_id=100,ip,actions=controller(userdata=01.02)'`.
        let body = hex::decode(concat!(
            "0000000000000023",
            "0000000000000000",
            "01",
            "00",
            "0000",
            "0000",
            "0032",
            "ffffffff",
            "ffffffff",
            "ffffffff",
            "0000",
            "0000",
            "0001001200014a040000006480000a020800000000000000",
            "0004002000000000",
            "ffff0018000023200025000000000000",
            "0003000601020000",
        ))
        .unwrap();
        let fm = FlowMod::parse(&body).unwrap();
        assert_eq!(fm.cookie, 0x23);
        assert_eq!(fm.table_id, 1);
        assert_eq!(fm.priority, 50);
        assert_eq!(fm.command, FlowModCommand::Add);
        assert_eq!(fm.match_.fields, vec![Oxm::ConjId(100), Oxm::EthType(0x0800)]);
        assert!(
            matches!(&fm.instructions[0], Instruction::ApplyActions(a) if matches!(&a[0], Action::Controller2(c) if c.userdata.as_deref() == Some(&[1u8, 2][..])))
        );
        let mut out = BytesMut::new();
        fm.emit(&mut out);
        assert_eq!(out.len(), fm.buffer_len());
        assert_eq!(&out[..], &body[..]);
    }

    #[test]
    fn command_bytes_round_trip() {
        for v in 0..=255u8 {
            assert_eq!(FlowModCommand::from_u8(v).to_u8(), v);
        }
    }
}
