//! Actions: standard OF1.5 ones and the Nicira extensions npagent needs.
//!
//! Every action is type u16, len u16 (>= 8, a multiple of 8; >= 16 for experimenter actions),
//! body. Nicira actions (type 0xffff, vendor 0x00002320) continue with a subtype u16. Nested
//! action lists (ct, clone) are bounded by the outer action's length. Padding must be zero so
//! that a parsed action re-emits to the same bytes; unmodelled actions are kept raw.

use crate::error::{Error, Result};
use crate::oxm::{class, split_header, Oxm};
use crate::prop::{self, prop_len, PropIter};
use crate::wire::{self, check_zero, pad8, tlv, Reader};
use crate::NX_VENDOR_ID;
use bytes::{BufMut, Bytes, BytesMut};

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
    /// NXAST_NOTE. Parsing keeps the zero padding (OVS does too), so a note round-trips when
    /// `10 + len` is a multiple of 8.
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
    /// NXAST_OUTPUT_REG (subtype 15): output to the port held in a field, e.g.
    /// `output:NXM_NX_REG1[]`. `src` is the field's NXM header, `ofs_nbits` = ofs << 6 |
    /// (n_bits - 1). This is what OVS 3.1 sends for it in OF1.5.
    OutputReg { src: u32, ofs_nbits: u16, max_len: u16 },
    /// NXAST_REG_MOVE (subtype 6, 24 bytes): copies `n_bits` bits from bit `src_offset` of the
    /// field whose NXM/OXM header is `src` to bit `dst_offset` of `dst`, printed like
    /// `move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]`. OVS 3.1 accepts it only in OpenFlow 1.0 to
    /// 1.4 and refuses it in OpenFlow 1.5 (OFPBAC_BAD_VENDOR_TYPE); there, send
    /// [`Action::CopyField`] (see [`Action::copy_field`]), which OVS prints the same way. One
    /// with an experimenter (8-byte) header is kept as [`Action::Experimenter`].
    RegMove { n_bits: u16, src_offset: u16, dst_offset: u16, src: u32, dst: u32 },
    /// An experimenter action not modelled: vendor, then everything after the 8-byte header
    /// raw (for NX actions that starts with the subtype). `8 + payload.len()` should be a
    /// multiple of 8 (emit pads otherwise).
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

/// Standard action types.
pub mod ofpat {
    pub const OUTPUT: u16 = 0;
    pub const GROUP: u16 = 22;
    pub const SET_FIELD: u16 = 25;
    pub const COPY_FIELD: u16 = 28;
    pub const METER: u16 = 29;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Nicira action subtypes.
pub mod nxast {
    pub const RESUBMIT: u16 = 1;
    pub const REG_MOVE: u16 = 6;
    pub const NOTE: u16 = 8;
    pub const RESUBMIT_TABLE: u16 = 14;
    pub const OUTPUT_REG: u16 = 15;
    pub const CONTROLLER: u16 = 20;
    pub const CONJUNCTION: u16 = 34;
    pub const CT: u16 = 35;
    pub const CONTROLLER2: u16 = 37;
    pub const CLONE: u16 = 42;
    pub const CT_CLEAR: u16 = 43;
    pub const RESUBMIT_TABLE_CT: u16 = 44;
}

/// NXAST_CONTROLLER2 property types.
pub mod nxac2pt {
    pub const MAX_LEN: u16 = 0;
    pub const CONTROLLER_ID: u16 = 1;
    pub const REASON: u16 = 2;
    pub const USERDATA: u16 = 3;
    pub const PAUSE: u16 = 4;
    pub const METER_ID: u16 = 5;
}

/// Length of the NX action prefix: type, len, vendor, subtype.
const NX_PREFIX: usize = 10;

impl Controller2 {
    /// Bytes of the properties (each padded to 8).
    fn props_len(&self) -> usize {
        let mut n = 0;
        n += usize::from(self.max_len.is_some()) * prop_len(4);
        n += usize::from(self.controller_id.is_some()) * prop_len(4);
        n += usize::from(self.reason.is_some()) * prop_len(1);
        n += self.userdata.as_ref().map_or(0, |u| prop_len(u.len()));
        n += usize::from(self.pause) * prop_len(0);
        n += usize::from(self.meter_id.is_some()) * prop_len(4);
        n
    }

    fn emit_props(&self, out: &mut BytesMut) {
        if let Some(v) = self.max_len {
            prop::put_prop_u16(out, nxac2pt::MAX_LEN, v);
        }
        if let Some(v) = self.controller_id {
            prop::put_prop_u16(out, nxac2pt::CONTROLLER_ID, v);
        }
        if let Some(v) = self.reason {
            prop::put_prop_u8(out, nxac2pt::REASON, v);
        }
        if let Some(u) = &self.userdata {
            prop::put_prop(out, nxac2pt::USERDATA, u);
        }
        if self.pause {
            prop::put_prop(out, nxac2pt::PAUSE, &[]);
        }
        if let Some(v) = self.meter_id {
            prop::put_prop_u32(out, nxac2pt::METER_ID, v);
        }
    }

    /// Decodes the properties when they are in the canonical form `emit_props` writes
    /// (ascending types, each at most once, OVS's payload sizes); `None` otherwise, so the
    /// caller keeps the action raw and it still round-trips.
    fn parse_props(buf: &[u8]) -> Result<Option<Controller2>> {
        const W: &str = "NXAST_CONTROLLER2 property";
        let mut c = Controller2::default();
        let mut last: Option<u16> = None;
        for p in PropIter::new(buf, W) {
            let p = p?;
            if last.is_some_and(|l| p.prop_type <= l) {
                return Ok(None);
            }
            last = Some(p.prop_type);
            let be16 = |p: &prop::RawProp<'_>| match p.payload {
                [a, b, 0, 0] => Some(u16::from_be_bytes([*a, *b])),
                _ => None,
            };
            match p.prop_type {
                nxac2pt::MAX_LEN => c.max_len = be16(&p),
                nxac2pt::CONTROLLER_ID => c.controller_id = be16(&p),
                nxac2pt::REASON if p.payload.len() == 1 => c.reason = Some(p.payload[0]),
                nxac2pt::USERDATA => c.userdata = Some(Bytes::copy_from_slice(p.payload)),
                nxac2pt::PAUSE if p.payload.is_empty() => c.pause = true,
                nxac2pt::METER_ID if p.payload.len() == 4 => c.meter_id = Some(prop::prop_u32(&p, W)?),
                _ => return Ok(None),
            }
            let present = match p.prop_type {
                nxac2pt::MAX_LEN => c.max_len.is_some(),
                nxac2pt::CONTROLLER_ID => c.controller_id.is_some(),
                _ => true,
            };
            if !present {
                return Ok(None);
            }
        }
        Ok((c.props_len() == buf.len()).then_some(c))
    }
}

impl Action {
    /// OFPAT_COPY_FIELD of the whole of a field to another of the same width: what OVS sends in
    /// OpenFlow 1.5 for `move:SRC[]->DST[]`. `src` and `dst` are 4-byte OXM/NXM headers
    /// (hasmask 0, e.g. [`crate::oxm::headers::OXM_OF_ARP_SHA`]), `n_bits` the field's width.
    pub fn copy_field(src: u32, dst: u32, n_bits: u16) -> Action {
        Action::CopyField {
            n_bits,
            src_offset: 0,
            dst_offset: 0,
            src: Bytes::copy_from_slice(&src.to_be_bytes()),
            dst: Bytes::copy_from_slice(&dst.to_be_bytes()),
        }
    }

    /// Parses one action from the start of `buf`; returns it and the bytes consumed.
    pub fn parse(buf: &[u8]) -> Result<(Action, usize)> {
        Self::parse_nested(buf, 0)
    }

    /// Under the crate's padding rule, a modelled action whose padding is not zero is kept as
    /// [`Action::Unknown`], so it re-emits to the same bytes.
    fn parse_nested(buf: &[u8], depth: usize) -> Result<(Action, usize)> {
        match Self::parse_modelled(buf, depth) {
            Err(Error::BadPadding { .. }) => {
                let mut rd = Reader::new(buf, "action");
                let action_type = rd.u16()?;
                let len = usize::from(rd.u16()?);
                let payload = Bytes::copy_from_slice(tlv(buf, len, 8, true, "action")?.get(4..).unwrap_or(&[]));
                Ok((Action::Unknown { action_type, payload }, len))
            }
            other => other,
        }
    }

    /// Parses one action, failing on non-zero padding.
    fn parse_modelled(buf: &[u8], depth: usize) -> Result<(Action, usize)> {
        let mut rd = Reader::new(buf, "action");
        let action_type = rd.u16()?;
        let len = usize::from(rd.u16()?);
        let min = if action_type == ofpat::EXPERIMENTER { 16 } else { 8 };
        let whole = tlv(buf, len, min, true, "action")?;
        let action = match action_type {
            ofpat::OUTPUT => {
                let mut r = fixed(whole, 16, "OFPAT_OUTPUT")?;
                let a = Action::Output { port: r.u32()?, max_len: r.u16()? };
                r.zeros(6)?;
                a
            }
            ofpat::GROUP => Action::Group(fixed(whole, 8, "OFPAT_GROUP")?.u32()?),
            ofpat::METER => Action::Meter(fixed(whole, 8, "OFPAT_METER")?.u32()?),
            ofpat::SET_FIELD => {
                let body = &whole[4..];
                let (oxm, used) = Oxm::parse(body)?;
                check_padded(whole, 4 + used, "OFPAT_SET_FIELD")?;
                Action::SetField(oxm)
            }
            ofpat::COPY_FIELD => {
                let mut r = Reader::new(&whole[4..], "OFPAT_COPY_FIELD");
                let (n_bits, src_offset, dst_offset) = (r.u16()?, r.u16()?, r.u16()?);
                r.zeros(2)?;
                let src = copy_field_header(&mut r)?;
                let dst = copy_field_header(&mut r)?;
                check_padded(whole, 4 + r.pos(), "OFPAT_COPY_FIELD")?;
                Action::CopyField { n_bits, src_offset, dst_offset, src, dst }
            }
            ofpat::EXPERIMENTER => parse_experimenter(whole, depth)?,
            other => Action::Unknown { action_type: other, payload: Bytes::copy_from_slice(&whole[4..]) },
        };
        Ok((action, len))
    }

    /// Bytes this action takes on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            Action::Output { .. } => 16,
            Action::Group(_) | Action::Meter(_) => 8,
            Action::SetField(o) => pad8(4 + o.buffer_len()),
            Action::CopyField { src, dst, .. } => pad8(12 + src.len() + dst.len()),
            Action::Resubmit { .. }
            | Action::ResubmitTable { .. }
            | Action::Controller { .. }
            | Action::Conjunction { .. }
            | Action::CtClear => 16,
            Action::Note(n) => pad8(NX_PREFIX + n.len()).max(16),
            Action::Controller2(c) => 16 + c.props_len(),
            Action::Ct(ct) => 24 + actions_len(&ct.actions),
            Action::Clone(a) => 16 + actions_len(a),
            Action::OutputReg { .. } | Action::RegMove { .. } => 24,
            Action::Experimenter { payload, .. } => pad8(8 + payload.len()).max(16),
            Action::Unknown { payload, .. } => pad8(4 + payload.len()),
        }
    }

    /// Writes the action (padded to its `buffer_len()`).
    pub fn emit(&self, out: &mut BytesMut) {
        let len = self.buffer_len();
        let start = out.len();
        match self {
            Action::Output { port, max_len } => {
                std_header(out, ofpat::OUTPUT, len);
                out.put_u32(*port);
                out.put_u16(*max_len);
            }
            Action::Group(g) => {
                std_header(out, ofpat::GROUP, len);
                out.put_u32(*g);
            }
            Action::Meter(m) => {
                std_header(out, ofpat::METER, len);
                out.put_u32(*m);
            }
            Action::SetField(o) => {
                std_header(out, ofpat::SET_FIELD, len);
                o.emit(out);
            }
            Action::CopyField { n_bits, src_offset, dst_offset, src, dst } => {
                std_header(out, ofpat::COPY_FIELD, len);
                out.put_u16(*n_bits);
                out.put_u16(*src_offset);
                out.put_u16(*dst_offset);
                out.put_u16(0);
                out.put_slice(src);
                out.put_slice(dst);
            }
            Action::Resubmit { in_port } => {
                nx_header(out, nxast::RESUBMIT, len);
                out.put_u16(*in_port);
            }
            Action::ResubmitTable { in_port, table, ct } => {
                nx_header(out, if *ct { nxast::RESUBMIT_TABLE_CT } else { nxast::RESUBMIT_TABLE }, len);
                out.put_u16(*in_port);
                out.put_u8(*table);
            }
            Action::Note(n) => {
                nx_header(out, nxast::NOTE, len);
                out.put_slice(n);
            }
            Action::Controller { max_len, controller_id, reason } => {
                nx_header(out, nxast::CONTROLLER, len);
                out.put_u16(*max_len);
                out.put_u16(*controller_id);
                out.put_u8(*reason);
            }
            Action::Controller2(c) => {
                nx_header(out, nxast::CONTROLLER2, len);
                out.put_bytes(0, 6);
                c.emit_props(out);
            }
            Action::Conjunction { id, clause, n_clauses } => {
                nx_header(out, nxast::CONJUNCTION, len);
                out.put_u8(*clause);
                out.put_u8(*n_clauses);
                out.put_u32(*id);
            }
            Action::Ct(ct) => {
                nx_header(out, nxast::CT, len);
                out.put_u16(ct.flags);
                match ct.zone {
                    CtZoneSrc::Imm(z) => {
                        out.put_u32(0);
                        out.put_u16(z);
                    }
                    CtZoneSrc::Field { header, ofs_nbits } => {
                        out.put_u32(header);
                        out.put_u16(ofs_nbits);
                    }
                }
                out.put_u8(ct.table.unwrap_or(0xff));
                out.put_bytes(0, 3);
                out.put_u16(ct.alg);
                emit_actions(&ct.actions, out);
            }
            Action::CtClear => nx_header(out, nxast::CT_CLEAR, len),
            Action::Clone(a) => {
                nx_header(out, nxast::CLONE, len);
                out.put_bytes(0, 6);
                emit_actions(a, out);
            }
            Action::OutputReg { src, ofs_nbits, max_len } => {
                nx_header(out, nxast::OUTPUT_REG, len);
                out.put_u16(*ofs_nbits);
                out.put_u32(*src);
                out.put_u16(*max_len);
            }
            Action::RegMove { n_bits, src_offset, dst_offset, src, dst } => {
                nx_header(out, nxast::REG_MOVE, len);
                out.put_u16(*n_bits);
                out.put_u16(*src_offset);
                out.put_u16(*dst_offset);
                out.put_u32(*src);
                out.put_u32(*dst);
            }
            Action::Experimenter { experimenter, payload } => {
                std_header(out, ofpat::EXPERIMENTER, len);
                out.put_u32(*experimenter);
                out.put_slice(payload);
            }
            Action::Unknown { action_type, payload } => {
                std_header(out, *action_type, len);
                out.put_slice(payload);
            }
        }
        let written = out.len() - start;
        out.put_bytes(0, len.saturating_sub(written));
    }
}

fn std_header(out: &mut BytesMut, t: u16, len: usize) {
    out.put_u16(t);
    out.put_u16(crate::wire::part_len16(len));
}

fn nx_header(out: &mut BytesMut, subtype: u16, len: usize) {
    std_header(out, ofpat::EXPERIMENTER, len);
    out.put_u32(NX_VENDOR_ID);
    out.put_u16(subtype);
}

/// A reader over the body of an action that must be exactly `len` bytes long, positioned after
/// the 4-byte header.
fn fixed<'a>(whole: &'a [u8], len: usize, what: &'static str) -> Result<Reader<'a>> {
    if whole.len() != len {
        return Err(Error::BadLength { what, len: whole.len() });
    }
    let mut r = Reader::new(whole, what);
    r.take(4)?;
    Ok(r)
}

/// Checks that `used` bytes padded to 8 is exactly the action and the padding is zero.
fn check_padded(whole: &[u8], used: usize, what: &'static str) -> Result<()> {
    if pad8(used) != whole.len() {
        return Err(Error::BadLength { what, len: whole.len() });
    }
    check_zero(whole.get(used..).unwrap_or(&[]), used, what)
}

fn copy_field_header(r: &mut Reader<'_>) -> Result<Bytes> {
    let head = r.take(4)?;
    let (cls, ..) = split_header(u32::from_be_bytes([head[0], head[1], head[2], head[3]]));
    if cls == class::EXPERIMENTER {
        let exp = r.take(4)?;
        let mut v = Vec::with_capacity(8);
        v.extend_from_slice(head);
        v.extend_from_slice(exp);
        return Ok(Bytes::from(v));
    }
    Ok(Bytes::copy_from_slice(head))
}

fn parse_experimenter(whole: &[u8], depth: usize) -> Result<Action> {
    let mut r = Reader::new(whole, "experimenter action");
    r.take(4)?;
    let experimenter = r.u32()?;
    let raw = || Action::Experimenter { experimenter, payload: Bytes::copy_from_slice(&whole[8..]) };
    if experimenter != NX_VENDOR_ID {
        return Ok(raw());
    }
    let subtype = r.u16()?;
    let len = whole.len();
    Ok(match subtype {
        nxast::RESUBMIT => {
            let mut r = nx_fixed(whole, 16, "NXAST_RESUBMIT")?;
            let a = Action::Resubmit { in_port: r.u16()? };
            r.zeros(4)?;
            a
        }
        nxast::RESUBMIT_TABLE | nxast::RESUBMIT_TABLE_CT => {
            let mut r = nx_fixed(whole, 16, "NXAST_RESUBMIT_TABLE")?;
            let a =
                Action::ResubmitTable { in_port: r.u16()?, table: r.u8()?, ct: subtype == nxast::RESUBMIT_TABLE_CT };
            r.zeros(3)?;
            a
        }
        nxast::NOTE => Action::Note(Bytes::copy_from_slice(&whole[NX_PREFIX..])),
        nxast::CONTROLLER => {
            let mut r = nx_fixed(whole, 16, "NXAST_CONTROLLER")?;
            let a = Action::Controller { max_len: r.u16()?, controller_id: r.u16()?, reason: r.u8()? };
            r.zeros(1)?;
            a
        }
        nxast::CONTROLLER2 => {
            let mut r = Reader::new(&whole[NX_PREFIX..], "NXAST_CONTROLLER2");
            r.zeros(6)?;
            match Controller2::parse_props(r.rest())? {
                Some(c) => Action::Controller2(c),
                None => raw(),
            }
        }
        nxast::CONJUNCTION => {
            let mut r = nx_fixed(whole, 16, "NXAST_CONJUNCTION")?;
            let (clause, n_clauses) = (r.u8()?, r.u8()?);
            Action::Conjunction { id: r.u32()?, clause, n_clauses }
        }
        nxast::CT => {
            if len < 24 {
                return Err(Error::BadLength { what: "NXAST_CT", len });
            }
            let mut r = Reader::new(&whole[NX_PREFIX..], "NXAST_CT");
            let flags = r.u16()?;
            let zone_src = r.u32()?;
            let zone_v = r.u16()?;
            let table = r.u8()?;
            r.zeros(3)?;
            let alg = r.u16()?;
            let actions = parse_list(r.rest(), depth + 1)?;
            let zone = if zone_src == 0 {
                CtZoneSrc::Imm(zone_v)
            } else {
                CtZoneSrc::Field { header: zone_src, ofs_nbits: zone_v }
            };
            Action::Ct(Ct { flags, zone, table: (table != 0xff).then_some(table), alg, actions })
        }
        nxast::CT_CLEAR => {
            nx_fixed(whole, 16, "NXAST_CT_CLEAR")?.zeros(6)?;
            Action::CtClear
        }
        nxast::CLONE => {
            let mut r = Reader::new(&whole[NX_PREFIX..], "NXAST_CLONE");
            r.zeros(6)?;
            Action::Clone(parse_list(r.rest(), depth + 1)?)
        }
        nxast::OUTPUT_REG => {
            let mut r = nx_fixed(whole, 24, "NXAST_OUTPUT_REG")?;
            let a = Action::OutputReg { ofs_nbits: r.u16()?, src: r.u32()?, max_len: r.u16()? };
            r.zeros(6)?;
            a
        }
        nxast::REG_MOVE => reg_move(whole)?.unwrap_or_else(raw),
        _ => raw(),
    })
}

/// NXAST_REG_MOVE with two 4-byte NXM/OXM headers (24 bytes), or `None` for one OVS reads with
/// an experimenter header (class 0xffff, 8 bytes), which is kept raw.
fn reg_move(whole: &[u8]) -> Result<Option<Action>> {
    if whole.len() != 24 {
        return Ok(None);
    }
    let mut r = nx_fixed(whole, 24, "NXAST_REG_MOVE")?;
    let (n_bits, src_offset, dst_offset) = (r.u16()?, r.u16()?, r.u16()?);
    let (src, dst) = (r.u32()?, r.u32()?);
    if split_header(src).0 == class::EXPERIMENTER || split_header(dst).0 == class::EXPERIMENTER {
        return Ok(None);
    }
    Ok(Some(Action::RegMove { n_bits, src_offset, dst_offset, src, dst }))
}

/// Like [`fixed`] for NX actions: positioned after the 10-byte prefix.
fn nx_fixed<'a>(whole: &'a [u8], len: usize, what: &'static str) -> Result<Reader<'a>> {
    if whole.len() != len {
        return Err(Error::BadLength { what, len: whole.len() });
    }
    let mut r = Reader::new(whole, what);
    r.take(NX_PREFIX)?;
    Ok(r)
}

/// Parses a list of actions filling `buf` exactly.
pub fn parse_actions(buf: &[u8]) -> Result<Vec<Action>> {
    parse_list(buf, 0)
}

/// Deepest nesting of ct/clone action lists accepted: a 64 KiB message could nest thousands
/// of levels, and the bound keeps hostile input from exhausting the stack.
pub const MAX_NESTING: usize = 32;

fn parse_list(buf: &[u8], depth: usize) -> Result<Vec<Action>> {
    if depth > MAX_NESTING {
        return Err(Error::BadValue { what: "nested actions too deep", value: depth as u64 });
    }
    wire::parse_list(buf, |b| Action::parse_nested(b, depth))
}

/// Wire length of an action list.
pub fn actions_len(a: &[Action]) -> usize {
    a.iter().map(Action::buffer_len).sum()
}

/// Checks the OXM TLVs of a list of actions (set_field, also inside clone and ct) with
/// `Oxm::check`.
pub(crate) fn check_actions(actions: &[Action]) -> Result<()> {
    actions.iter().try_for_each(|a| match a {
        Action::SetField(o) => o.check(),
        Action::Clone(nested) => check_actions(nested),
        Action::Ct(ct) => check_actions(&ct.actions),
        _ => Ok(()),
    })
}

/// Writes an action list.
pub fn emit_actions(a: &[Action], out: &mut BytesMut) {
    for x in a {
        x.emit(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(hex_s: &str) -> Vec<Action> {
        let b = hex::decode(hex_s).unwrap();
        let a = parse_actions(&b).unwrap();
        let mut out = BytesMut::new();
        emit_actions(&a, &mut out);
        assert_eq!(hex::encode(&out), hex_s);
        assert_eq!(actions_len(&a), b.len());
        a
    }

    #[test]
    fn nonzero_padding_keeps_the_action_raw_and_round_trips() {
        // OFPAT_OUTPUT to port 1 with a non-zero byte in its 6 bytes of padding.
        let a = rt("0000001000000001ffff000000000100");
        assert_eq!(
            a,
            vec![Action::Unknown {
                action_type: 0,
                payload: Bytes::from(hex::decode("00000001ffff000000000100").unwrap())
            }]
        );
        assert_eq!(rt("0000001000000001ffff000000000000"), vec![Action::Output { port: 1, max_len: 0xffff }]);
    }

    #[test]
    fn output_reg_as_ovs_sends_it() {
        // `ovs-ofctl -O OpenFlow15 parse-flow 'ip,actions=output:NXM_NX_REG1[]'`.
        let a = rt("ffff001800002320000f001f00010204ffff000000000000");
        assert_eq!(a, vec![Action::OutputReg { src: 0x0001_0204, ofs_nbits: 0x1f, max_len: 0xffff }]);
    }

    #[test]
    fn reg_move_as_ovs_sends_it() {
        // `ovs-ofctl -O OpenFlow14 -mmmmm parse-flow 'arp,actions=move:NXM_OF_ETH_SRC[]->
        // NXM_OF_ETH_DST[],move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],move:NXM_OF_ARP_SPA[0..15]->
        // NXM_OF_ARP_TPA[16..31]'` (OVS 3.1.0): its NXAST_REG_MOVE actions.
        use crate::oxm::headers::*;
        let a = rt(concat!(
            "ffff00180000232000060030000000000000040600000206",
            "ffff00180000232000060030000000000001220600012406",
            "ffff00180000232000060010000000100000200400002204",
        ));
        let mv =
            |n_bits, src_offset, src, dst_offset, dst| Action::RegMove { n_bits, src_offset, dst_offset, src, dst };
        assert_eq!(
            a,
            vec![
                mv(48, 0, NXM_OF_ETH_SRC, 0, NXM_OF_ETH_DST),
                mv(48, 0, NXM_NX_ARP_SHA, 0, NXM_NX_ARP_THA),
                mv(16, 0, NXM_OF_ARP_SPA, 16, NXM_OF_ARP_TPA),
            ]
        );
    }

    #[test]
    fn reg_move_of_other_shapes_is_kept_raw() {
        // An experimenter (8-byte) source header: 32 bytes with 4 of padding.
        let a = rt("ffff0020000023200006002000000000ffff0a08000023200001020400000000");
        assert!(matches!(&a[..], [Action::Experimenter { experimenter: 0x2320, payload }] if payload[..2] == [0, 6]));
        // 24 bytes whose source claims an experimenter class: OVS would read past the end.
        let a = rt("ffff0018000023200006002000000000ffff0a0800010204");
        assert!(matches!(&a[..], [Action::Experimenter { .. }]));
        // Too short for two headers.
        let a = rt("ffff0010000023200006002000000000");
        assert!(matches!(&a[..], [Action::Experimenter { .. }]));
    }

    #[test]
    fn copy_field_builds_what_ovs_sends_in_of15() {
        // From `ovs-ofctl -O OpenFlow15 -mmmmm parse-flow 'arp,actions=move:NXM_NX_ARP_SHA[]->
        // NXM_NX_ARP_THA[]'` (OVS 3.1.0).
        use crate::oxm::headers::*;
        let a = rt("001c00180030000000000000800030068000320600000000");
        assert_eq!(a, vec![Action::copy_field(OXM_OF_ARP_SHA, OXM_OF_ARP_THA, 48)]);
    }

    #[test]
    fn ct_nests_actions_bounded_by_its_length() {
        // ct(commit,zone=65520,exec(set_field:0x1->ct_mark)) followed by ct_clear.
        let ct = Action::Ct(Ct {
            flags: 1,
            zone: CtZoneSrc::Imm(65520),
            table: None,
            alg: 0,
            actions: vec![Action::SetField(Oxm::CtMark(crate::oxm::Masked::exact(1)))],
        });
        let list = vec![ct, Action::CtClear];
        let mut out = BytesMut::new();
        emit_actions(&list, &mut out);
        assert_eq!(out.len(), actions_len(&list));
        assert_eq!(parse_actions(&out).unwrap(), list);
        // Shrinking the ct length so the nested set_field sticks out is an error.
        let mut bad = out.to_vec();
        assert_eq!(bad[3], 40);
        bad[3] = 32;
        assert!(parse_actions(&bad).is_err());
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        // clone(clone(...)) as deep as a 64 KiB message allows.
        let depth = 4000;
        let mut b = Vec::with_capacity(16 * depth);
        for i in 0..depth {
            let len = (16 * (depth - i)) as u16;
            b.extend_from_slice(&[0xff, 0xff]);
            b.extend_from_slice(&len.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0x23, 0x20, 0, 42, 0, 0, 0, 0, 0, 0]);
        }
        assert!(matches!(parse_actions(&b), Err(Error::BadValue { .. })));
        // MAX_NESTING nested clones parse, one more does not.
        assert!(parse_actions(&b[16 * (depth - MAX_NESTING)..]).is_ok());
        assert!(parse_actions(&b[16 * (depth - MAX_NESTING - 1)..]).is_err());
    }

    #[test]
    fn bad_lengths_are_errors() {
        assert!(parse_actions(&hex::decode("00000004").unwrap()).is_err());
        assert!(parse_actions(&hex::decode("0000000cfffffffe04d20000").unwrap()).is_err());
        assert!(parse_actions(&hex::decode("ffff000800002320").unwrap()).is_err());
        assert!(parse_actions(&hex::decode("00000018fffffffe04d2000000000000").unwrap()).is_err());
    }

    #[test]
    fn non_canonical_controller2_is_kept_raw() {
        // reason property before max_len: valid for OVS, not in emit order.
        let h = "ffff002000002320002500000000000000020005020000000000000804d20000";
        let a = rt(h);
        assert!(matches!(a[0], Action::Experimenter { experimenter: 0x2320, .. }));
    }
}
