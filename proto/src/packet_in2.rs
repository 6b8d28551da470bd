//! NXT_PACKET_IN2 (NX subtype 30) and NXT_RESUME (28) property bodies.
//!
//! The body is a property list (see [`crate::prop`]). Parsing accepts the properties in any
//! order and keeps unknown ones; a known property that appears twice or has the wrong length,
//! and a list without NXPINT_PACKET or NXPINT_METADATA (OVS always sends both) are errors, since
//! none of them could be re-emitted as sent.

use crate::error::{Error, Result};
use crate::oxm::{self, Oxm};
use crate::prop::{self, PropIter, RawProp};
use crate::wire::{pad8, part_len16};
use bytes::{BufMut, Bytes, BytesMut};

/// NXPINT_* property types.
pub mod nxpint {
    pub const PACKET: u16 = 0;
    pub const FULL_LEN: u16 = 1;
    pub const BUFFER_ID: u16 = 2;
    pub const TABLE_ID: u16 = 3;
    pub const COOKIE: u16 = 4;
    pub const REASON: u16 = 5;
    pub const METADATA: u16 = 6;
    pub const USERDATA: u16 = 7;
    pub const CONTINUATION: u16 = 8;
}

/// NXT_PACKET_IN2 decoded. Property order on the wire is unspecified; `emit` writes them in
/// OVS's order (packet, full_len, buffer_id, table_id, cookie, reason, metadata,
/// continuation, userdata) then the unknown ones, so OVS-produced bytes round-trip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketIn2 {
    /// NXPINT_PACKET: the (possibly truncated) frame.
    pub packet: Bytes,
    pub full_len: Option<u32>,
    pub buffer_id: Option<u32>,
    pub table_id: Option<u8>,
    pub cookie: Option<u64>,
    pub reason: Option<u8>,
    /// NXPINT_METADATA: bare OXM TLVs (registers as XReg in OF1.5).
    pub metadata: Vec<Oxm>,
    pub userdata: Option<Bytes>,
    /// NXPINT_CONTINUATION payload, opaque (after its 4 zero bytes).
    pub continuation: Option<Bytes>,
    /// Unknown properties, each kept whole (header included, padding excluded).
    pub unknown: Vec<Bytes>,
}

const WHAT: &str = "NXT_PACKET_IN2 property";

fn exact<'a>(p: &RawProp<'a>, len: usize, what: &'static str) -> Result<&'a [u8]> {
    if p.payload.len() == len {
        Ok(p.payload)
    } else {
        Err(Error::BadLength { what, len: p.whole.len() })
    }
}

fn set_once<T>(slot: &mut Option<T>, value: T, what: &'static str, prop_type: u16) -> Result<()> {
    if slot.is_some() {
        return Err(Error::BadValue { what, value: prop_type.into() });
    }
    *slot = Some(value);
    Ok(())
}

impl PacketIn2 {
    /// Parses the property list (the message body after the 16-byte NX header).
    pub fn parse(body: &[u8]) -> Result<PacketIn2> {
        let mut v = PacketIn2::default();
        let mut packet = None;
        let mut metadata = None;
        let mut wire_len = 0usize;
        for p in PropIter::new(body, WHAT) {
            let p = p?;
            wire_len += pad8(p.whole.len());
            match p.prop_type {
                nxpint::PACKET => set_once(&mut packet, Bytes::copy_from_slice(p.payload), "NXPINT_PACKET", 0)?,
                nxpint::FULL_LEN => {
                    let b = exact(&p, 4, "NXPINT_FULL_LEN")?;
                    set_once(&mut v.full_len, u32::from_be_bytes([b[0], b[1], b[2], b[3]]), WHAT, p.prop_type)?
                }
                nxpint::BUFFER_ID => {
                    let b = exact(&p, 4, "NXPINT_BUFFER_ID")?;
                    set_once(&mut v.buffer_id, u32::from_be_bytes([b[0], b[1], b[2], b[3]]), WHAT, p.prop_type)?
                }
                nxpint::TABLE_ID => {
                    let b = exact(&p, 1, "NXPINT_TABLE_ID")?;
                    set_once(&mut v.table_id, b[0], WHAT, p.prop_type)?
                }
                nxpint::COOKIE => {
                    // OVS's be64 form: 4 zero bytes, then the value.
                    let b = exact(&p, 12, "NXPINT_COOKIE")?;
                    if b[..4] != [0; 4] {
                        return Err(Error::BadValue { what: "NXPINT_COOKIE pad", value: 0 });
                    }
                    let cookie = prop::prop_u64(&p, "NXPINT_COOKIE")?;
                    set_once(&mut v.cookie, cookie, WHAT, p.prop_type)?
                }
                nxpint::REASON => {
                    let b = exact(&p, 1, "NXPINT_REASON")?;
                    set_once(&mut v.reason, b[0], WHAT, p.prop_type)?
                }
                nxpint::METADATA => set_once(&mut metadata, oxm::parse_oxms(p.payload)?, WHAT, p.prop_type)?,
                nxpint::USERDATA => set_once(&mut v.userdata, Bytes::copy_from_slice(p.payload), WHAT, p.prop_type)?,
                nxpint::CONTINUATION => {
                    let b = p
                        .payload
                        .get(4..)
                        .filter(|_| p.payload[..4] == [0; 4])
                        .ok_or(Error::BadValue { what: "NXPINT_CONTINUATION pad", value: p.whole.len() as u64 })?;
                    set_once(&mut v.continuation, Bytes::copy_from_slice(b), WHAT, p.prop_type)?
                }
                _ => v.unknown.push(Bytes::copy_from_slice(p.whole)),
            }
        }
        // PropIter tolerates a missing pad after the last property; we could not re-emit it.
        if wire_len != body.len() {
            return Err(Error::BadLength { what: "NXT_PACKET_IN2 last property padding", len: body.len() });
        }
        v.packet = packet.ok_or(Error::Truncated { what: "NXT_PACKET_IN2 without NXPINT_PACKET", need: 4, have: 0 })?;
        // OVS always sends the metadata property (in_port at least) and `emit` always writes it,
        // so a list without one could not round-trip.
        v.metadata =
            metadata.ok_or(Error::Truncated { what: "NXT_PACKET_IN2 without NXPINT_METADATA", need: 4, have: 0 })?;
        Ok(v)
    }

    /// Body length on the wire.
    pub fn buffer_len(&self) -> usize {
        let mut n = prop::prop_len(self.packet.len());
        n += self.full_len.map_or(0, |_| 8);
        n += self.buffer_id.map_or(0, |_| 8);
        n += self.table_id.map_or(0, |_| 8);
        n += self.cookie.map_or(0, |_| 16);
        n += self.reason.map_or(0, |_| 8);
        n += prop::prop_len(oxm::oxms_len(&self.metadata));
        n += self.continuation.as_ref().map_or(0, |c| prop::prop_len(4 + c.len()));
        n += self.userdata.as_ref().map_or(0, |u| prop::prop_len(u.len()));
        n += self.unknown.iter().map(|u| pad8(u.len())).sum::<usize>();
        n
    }

    /// Checks that every property fits its u16 length and that the unknown ones are well
    /// formed (length field = kept length, type not a known one).
    pub(crate) fn check(&self) -> Result<()> {
        let fits = |what, n: usize| crate::wire::len16(what, prop::PROP_HEADER_LEN + n).map(drop);
        fits("NXPINT_PACKET", self.packet.len())?;
        fits("NXPINT_METADATA", oxm::oxms_len(&self.metadata))?;
        oxm::check_oxms(&self.metadata)?;
        if let Some(c) = &self.continuation {
            fits("NXPINT_CONTINUATION", 4 + c.len())?;
        }
        if let Some(u) = &self.userdata {
            fits("NXPINT_USERDATA", u.len())?;
        }
        for u in &self.unknown {
            let ok = u.len() >= 4
                && u16::from_be_bytes([u[0], u[1]]) > nxpint::CONTINUATION
                && usize::from(u16::from_be_bytes([u[2], u[3]])) == u.len();
            if !ok {
                return Err(Error::BadValue { what: "NXT_PACKET_IN2 unknown property", value: u.len() as u64 });
            }
        }
        Ok(())
    }

    /// Writes the properties in OVS's order.
    pub fn emit(&self, out: &mut BytesMut) {
        prop::put_prop(out, nxpint::PACKET, &self.packet);
        if let Some(v) = self.full_len {
            prop::put_prop_u32(out, nxpint::FULL_LEN, v);
        }
        if let Some(v) = self.buffer_id {
            prop::put_prop_u32(out, nxpint::BUFFER_ID, v);
        }
        if let Some(v) = self.table_id {
            prop::put_prop_u8(out, nxpint::TABLE_ID, v);
        }
        if let Some(v) = self.cookie {
            prop::put_prop_u64(out, nxpint::COOKIE, v);
        }
        if let Some(v) = self.reason {
            prop::put_prop_u8(out, nxpint::REASON, v);
        }
        let md_len = oxm::oxms_len(&self.metadata);
        out.put_u16(nxpint::METADATA);
        out.put_u16(part_len16(prop::PROP_HEADER_LEN + md_len));
        oxm::emit_oxms(&self.metadata, out);
        out.put_bytes(0, pad8(prop::PROP_HEADER_LEN + md_len) - prop::PROP_HEADER_LEN - md_len);
        if let Some(c) = &self.continuation {
            let len = prop::PROP_HEADER_LEN + 4 + c.len();
            out.put_u16(nxpint::CONTINUATION);
            out.put_u16(part_len16(len));
            out.put_u32(0);
            out.put_slice(c);
            out.put_bytes(0, pad8(len) - len);
        }
        if let Some(u) = &self.userdata {
            prop::put_prop(out, nxpint::USERDATA, u);
        }
        for u in &self.unknown {
            out.put_slice(u);
            out.put_bytes(0, pad8(u.len()) - u.len());
        }
    }

    /// Register `reg<n>` (32 bits) from the metadata: from an OF1.5 packet register
    /// (`xreg<n/2>`, even registers in the high half) or an NXM `reg<n>`. `None` when the
    /// metadata does not carry it (OVS omits registers that are zero), or when the field's
    /// mask leaves none of its bits.
    pub fn register(&self, n: u8) -> Option<u32> {
        self.metadata.iter().find_map(|f| match f {
            Oxm::XReg { index, value } if *index == n / 2 => {
                let shift = if n % 2 == 0 { 32 } else { 0 };
                let half = |x: u64| (x >> shift) as u32;
                match value.mask {
                    None => Some(half(value.value)),
                    Some(m) if half(m) != 0 => Some(half(value.value) & half(m)),
                    Some(_) => None,
                }
            }
            Oxm::Reg { index, value } if *index == n => match value.mask {
                None => Some(value.value),
                Some(m) if m != 0 => Some(value.value & m),
                Some(_) => None,
            },
            _ => None,
        })
    }

    /// The in_port from the metadata (OXM_OF_IN_PORT), if present.
    pub fn in_port(&self) -> Option<u32> {
        self.metadata.iter().find_map(|f| match f {
            Oxm::InPort(p) => Some(*p),
            _ => None,
        })
    }
}
