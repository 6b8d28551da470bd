//! OFPT_FLOW_MOD (ofp11_flow_mod + ofp_match + instructions).
//!
//! IMPLEMENTATION OWNER: proto-flow helper.

use crate::instruction::Instruction;
use crate::oxm::Match;

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
