//! OF1.1+ instructions as OVS accepts them in OF1.5.
//!
//! Each is type u16, len u16 (>= 8, a multiple of 8), body. The meter instruction (type 6) is
//! refused by OVS in OF1.5 (use the meter action); it is kept raw like any other unknown type.

use crate::action::{actions_len, check_actions, emit_actions, parse_actions, Action};
use crate::error::{Error, Result};
use crate::wire::{pad8, parse_list, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata {
        metadata: u64,
        mask: u64,
    },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    /// Any other instruction, kept as type and body (after the 4-byte header).
    Unknown {
        instruction_type: u16,
        payload: Bytes,
    },
}

/// Instruction types.
pub mod ofpit {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
}

impl Instruction {
    /// Parses one instruction from the start of `buf`; returns it and the bytes consumed.
    ///
    /// Under the crate's padding rule, a modelled instruction whose padding is not zero is
    /// kept as [`Instruction::Unknown`], so it re-emits to the same bytes (OVS's own tests
    /// send such padding; [`Instruction::lenient`] reads it as OVS does).
    pub fn parse(buf: &[u8]) -> Result<(Instruction, usize)> {
        match Self::parse_modelled(buf) {
            Err(Error::BadPadding { .. }) => {
                let (t, len) = header(buf)?;
                let payload = Bytes::copy_from_slice(buf.get(4..len).unwrap_or(&[]));
                Ok((Instruction::Unknown { instruction_type: t, payload }, len))
            }
            other => other,
        }
    }

    /// A raw instruction of a modelled type read as OVS reads it: the modelled instruction
    /// its bytes make with their padding zeroed. Anything else is returned unchanged.
    pub fn lenient(&self) -> Instruction {
        let Instruction::Unknown { .. } = self else { return self.clone() };
        let mut b = BytesMut::with_capacity(self.buffer_len());
        self.emit(&mut b);
        loop {
            match Self::parse_modelled(&b) {
                Ok((i, _)) => return i,
                Err(Error::BadPadding { offset, .. }) if offset < b.len() && b[offset] != 0 => b[offset] = 0,
                Err(_) => return self.clone(),
            }
        }
    }

    /// Parses one instruction, failing on non-zero padding.
    fn parse_modelled(buf: &[u8]) -> Result<(Instruction, usize)> {
        let (t, len) = header(buf)?;
        let whole = tlv(buf, len, 8, true, "instruction")?;
        let mut r = Reader::new(whole, "instruction");
        r.take(4)?;
        let exact = |n: usize, what: &'static str| {
            if len == n {
                Ok(())
            } else {
                Err(Error::BadLength { what, len })
            }
        };
        let ins = match t {
            ofpit::GOTO_TABLE => {
                exact(8, "OFPIT_GOTO_TABLE")?;
                let table = r.u8()?;
                r.zeros(3)?;
                Instruction::GotoTable(table)
            }
            ofpit::WRITE_METADATA => {
                exact(24, "OFPIT_WRITE_METADATA")?;
                r.zeros(4)?;
                Instruction::WriteMetadata { metadata: r.u64()?, mask: r.u64()? }
            }
            ofpit::WRITE_ACTIONS | ofpit::APPLY_ACTIONS => {
                r.zeros(4)?;
                let a = parse_actions(r.rest())?;
                if t == ofpit::WRITE_ACTIONS {
                    Instruction::WriteActions(a)
                } else {
                    Instruction::ApplyActions(a)
                }
            }
            ofpit::CLEAR_ACTIONS => {
                exact(8, "OFPIT_CLEAR_ACTIONS")?;
                r.zeros(4)?;
                Instruction::ClearActions
            }
            other => Instruction::Unknown { instruction_type: other, payload: Bytes::copy_from_slice(r.rest()) },
        };
        Ok((ins, len))
    }

    /// Bytes this instruction takes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            Instruction::GotoTable(_) | Instruction::ClearActions => 8,
            Instruction::WriteMetadata { .. } => 24,
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => 8 + actions_len(a),
            Instruction::Unknown { payload, .. } => pad8(4 + payload.len()).max(8),
        }
    }

    /// Writes the instruction (an unknown one padded to 8).
    pub fn emit(&self, out: &mut BytesMut) {
        let len = self.buffer_len();
        let start = out.len();
        let t = match self {
            Instruction::GotoTable(_) => ofpit::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => ofpit::WRITE_METADATA,
            Instruction::WriteActions(_) => ofpit::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => ofpit::APPLY_ACTIONS,
            Instruction::ClearActions => ofpit::CLEAR_ACTIONS,
            Instruction::Unknown { instruction_type, .. } => *instruction_type,
        };
        out.put_u16(t);
        out.put_u16(crate::wire::part_len16(len));
        match self {
            Instruction::GotoTable(table) => out.put_u8(*table),
            Instruction::WriteMetadata { metadata, mask } => {
                out.put_u32(0);
                out.put_u64(*metadata);
                out.put_u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                out.put_u32(0);
                emit_actions(a, out);
            }
            Instruction::ClearActions => {}
            Instruction::Unknown { payload, .. } => out.put_slice(payload),
        }
        let written = out.len() - start;
        out.put_bytes(0, len.saturating_sub(written));
    }
}

fn header(buf: &[u8]) -> Result<(u16, usize)> {
    let mut rd = Reader::new(buf, "instruction");
    Ok((rd.u16()?, usize::from(rd.u16()?)))
}

/// Parses a list of instructions filling `buf` exactly.
pub fn parse_instructions(buf: &[u8]) -> Result<Vec<Instruction>> {
    parse_list(buf, Instruction::parse)
}

/// Wire length of an instruction list.
pub fn instructions_len(i: &[Instruction]) -> usize {
    i.iter().map(Instruction::buffer_len).sum()
}

/// Checks the actions of a list of instructions with [`crate::action::check_actions`].
pub(crate) fn check_instructions(instructions: &[Instruction]) -> Result<()> {
    instructions.iter().try_for_each(|i| match i {
        Instruction::WriteActions(a) | Instruction::ApplyActions(a) => check_actions(a),
        _ => Ok(()),
    })
}

/// Writes an instruction list.
pub fn emit_instructions(i: &[Instruction], out: &mut BytesMut) {
    for x in i {
        x.emit(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_metadata_and_goto_round_trip() {
        // Vector instruction_write_metadata_goto.
        let h = "00010008010000000002001800000000fedcba9876543210ffffffffffffffff";
        let b = hex::decode(h).unwrap();
        let i = parse_instructions(&b).unwrap();
        assert_eq!(
            i,
            vec![
                Instruction::GotoTable(1),
                Instruction::WriteMetadata { metadata: 0xfedc_ba98_7654_3210, mask: u64::MAX }
            ]
        );
        let mut out = BytesMut::new();
        emit_instructions(&i, &mut out);
        assert_eq!(hex::encode(out), h);
    }

    #[test]
    fn wrong_fixed_lengths_are_errors() {
        assert!(
            parse_instructions(&hex::decode("0001001001000000 0000000000000000".replace(' ', "")).unwrap()).is_err()
        );
        assert!(parse_instructions(&hex::decode("0005000400000000").unwrap()).is_err());
    }

    #[test]
    fn nonzero_padding_is_kept_raw_and_read_leniently() {
        // Vector instruction_goto_table: OVS's test sends pad bytes 00 00 01.
        let b = hex::decode("0001000801000001").unwrap();
        let i = parse_instructions(&b).unwrap();
        assert_eq!(i, vec![Instruction::Unknown { instruction_type: 1, payload: Bytes::from_static(&[1, 0, 0, 1]) }]);
        let mut out = BytesMut::new();
        emit_instructions(&i, &mut out);
        assert_eq!(&out[..], &b[..]);
        assert_eq!(i[0].lenient(), Instruction::GotoTable(1));
    }
}
