//! OF1.1+ instructions as OVS accepts them in OF1.5.
//!
//! IMPLEMENTATION OWNER: proto-flow helper.

use crate::action::Action;
use bytes::Bytes;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    /// Any other instruction, kept as type and body (after the 4-byte header).
    Unknown { instruction_type: u16, payload: Bytes },
}
