//! Actions: standard OF1.5 ones and the Nicira extensions npagent needs.
//!
//! IMPLEMENTATION OWNER: proto-flow helper. Add `Action::parse`/`buffer_len`/`emit` and a
//! list parser (`parse_actions(&[u8]) -> Result<Vec<Action>>`).

use crate::oxm::Oxm;
use bytes::Bytes;

/// One action. Unknown ones are kept raw so they round-trip.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Action {
    /// OFPAT_OUTPUT.
    Output { port: u32, max_len: u16 },
    /// OFPAT_GROUP.
    Group(u32),
    /// OFPAT_SET_FIELD; the field may be masked in OF1.5.
    SetField(Oxm),
    /// OFPAT_COPY_FIELD; `src`/`dst` are OXM headers (4 bytes, or 8 with an experimenter id).
    CopyField { n_bits: u16, src_offset: u16, dst_offset: u16, src: Bytes, dst: Bytes },
    /// OFPAT_METER (OF1.5).
    Meter(u32),
    /// NXAST_RESUBMIT (in_port).
    Resubmit { in_port: u16 },
    /// NXAST_RESUBMIT_TABLE (or _CT when `ct` is set): in_port 0xfff8 keeps, table 0xff = same.
    ResubmitTable { in_port: u16, table: u8, ct: bool },
    /// NXAST_NOTE.
    Note(Bytes),
    /// NXAST_CONTROLLER.
    Controller { max_len: u16, controller_id: u16, reason: u8 },
    /// NXAST_CONTROLLER2.
    Controller2(Controller2),
    /// NXAST_CONJUNCTION; `clause` is 0-based on the wire (printed 1-based by OVS).
    Conjunction { id: u32, clause: u8, n_clauses: u8 },
    /// NXAST_CT.
    Ct(Ct),
    /// NXAST_CT_CLEAR.
    CtClear,
    /// NXAST_CLONE with nested actions.
    Clone(Vec<Action>),
    /// An experimenter action not modelled: vendor, subtype (for NX), and the rest raw.
    Experimenter { experimenter: u32, payload: Bytes },
    /// Any other standard action, kept as type and body (after the 4-byte header).
    Unknown { action_type: u16, payload: Bytes },
}

/// NXAST_CONTROLLER2's properties. `None` = the property is absent (OVS omits defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Controller2 {
    pub max_len: Option<u16>,
    pub controller_id: Option<u16>,
    pub reason: Option<u8>,
    pub userdata: Option<Bytes>,
    pub pause: bool,
    pub meter_id: Option<u32>,
}

/// Where NXAST_CT takes its zone from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum CtZoneSrc {
    /// An immediate zone (zone_src = 0).
    Imm(u16),
    /// A field: its NXM/OXM header and ofs_nbits.
    Field { header: u32, ofs_nbits: u16 },
}

/// NXAST_CT.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Ct {
    /// Flags: 1 commit, 2 force.
    pub flags: u16,
    pub zone: CtZoneSrc,
    /// Recirculation table; `None` is 0xff on the wire.
    pub table: Option<u8>,
    pub alg: u16,
    pub actions: Vec<Action>,
}
