//! OFPT_BUNDLE_CONTROL and OFPT_BUNDLE_ADD_MESSAGE.

use crate::error::{Error, Result};
use crate::flow_mod::FlowMod;
use crate::header::MsgKind;
use crate::wire::Reader;
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_BUNDLE_CONTROL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BundleControl {
    pub bundle_id: u32,
    /// 0 open_request .. 7 discard_reply.
    pub ctrl_type: u16,
    /// 1 atomic, 2 ordered.
    pub flags: u16,
    /// Properties, raw.
    pub properties: Bytes,
}

/// Bundle control types.
pub mod bundle_ctrl {
    pub const OPEN_REQUEST: u16 = 0;
    pub const OPEN_REPLY: u16 = 1;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const CLOSE_REPLY: u16 = 3;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const COMMIT_REPLY: u16 = 5;
    pub const DISCARD_REQUEST: u16 = 6;
    pub const DISCARD_REPLY: u16 = 7;
    pub const FLAG_ATOMIC: u16 = 1;
    pub const FLAG_ORDERED: u16 = 2;
}

/// OFPT_BUNDLE_ADD_MESSAGE: the inner message is a complete message (its own header, whose
/// version and xid must equal the outer ones), kept as a parsed [`crate::Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub message: Box<crate::Message>,
    /// Everything after the inner message (padding to 8, then properties), raw.
    pub properties: Bytes,
}

impl BundleControl {
    pub fn parse(body: &[u8]) -> Result<BundleControl> {
        let mut r = Reader::new(body, "ofp_bundle_ctrl_msg");
        Ok(BundleControl {
            bundle_id: r.u32()?,
            ctrl_type: r.u16()?,
            flags: r.u16()?,
            properties: Bytes::copy_from_slice(r.rest()),
        })
    }

    pub fn buffer_len(&self) -> usize {
        8 + self.properties.len()
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.bundle_id);
        out.put_u16(self.ctrl_type);
        out.put_u16(self.flags);
        out.put_slice(&self.properties);
    }
}

/// Whether OVS accepts a message of this type inside a bundle (PACKET_OUT, FLOW_MOD,
/// GROUP_MOD, PORT_MOD).
pub fn is_bundlable(kind: impl Into<MsgKind>) -> bool {
    matches!(kind.into(), MsgKind::PacketOut | MsgKind::FlowMod | MsgKind::GroupMod | MsgKind::PortMod)
}

impl BundleAdd {
    /// Parses the body of a BUNDLE_ADD_MESSAGE whose header carried `version` and `xid`: the
    /// one body whose parse needs its header, because OVS checks the inner message against
    /// it before parsing it. The inner message must have the same version and xid and be
    /// bundlable, in that order (OFPBFC_BAD_VERSION, OFPBFC_MSG_BAD_XID, OFPBFC_MSG_UNSUP).
    pub fn parse(version: u8, xid: u32, body: &[u8]) -> Result<BundleAdd> {
        let mut r = Reader::new(body, "ofp_bundle_add_msg");
        let bundle_id = r.u32()?;
        r.zeros(2)?;
        let flags = r.u16()?;
        let rest = r.rest();
        let inner = crate::header::Header::parse(rest)?;
        let inner_len = usize::from(inner.length);
        let inner_buf = rest.get(..inner_len).ok_or(Error::Truncated {
            what: "bundled message",
            need: inner_len,
            have: rest.len(),
        })?;
        check_inner((inner.version, inner.xid, inner.kind), version, xid)?;
        let message = crate::Message::parse(inner_buf)?;
        Ok(BundleAdd {
            bundle_id,
            flags,
            message: Box::new(message),
            properties: Bytes::copy_from_slice(&rest[inner_len..]),
        })
    }

    /// Body length on the wire.
    pub fn buffer_len(&self) -> usize {
        8 + self.message.buffer_len() + self.properties.len()
    }

    /// Checks what [`crate::Message::emit`] checks: the inner message against the outer
    /// `version` and `xid` as [`BundleAdd::parse`] does, then the inner message itself.
    pub(crate) fn check(&self, version: u8, xid: u32) -> Result<()> {
        let m = &self.message;
        check_inner((m.version, m.xid, m.kind()), version, xid)?;
        m.check()
    }

    /// Writes the body, the inner message as it is ([`crate::Message::emit`] checks it first).
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.bundle_id);
        out.put_u16(0);
        out.put_u16(self.flags);
        self.message.emit_unchecked(out, self.message.buffer_len());
        out.put_slice(&self.properties);
    }
}

/// Checks a bundled message's `(version, xid, type)` against the BUNDLE_ADD's `version` and
/// `xid`, in OVS's order.
fn check_inner((inner_version, inner_xid, inner_kind): (u8, u32, MsgKind), version: u8, xid: u32) -> Result<()> {
    if inner_version != version {
        return Err(Error::BadVersion(inner_version));
    }
    if inner_xid != xid {
        return Err(Error::BadValue { what: "bundled message xid", value: inner_xid.into() });
    }
    if !is_bundlable(inner_kind) {
        return Err(Error::BadValue { what: "bundled message type", value: u8::from(inner_kind).into() });
    }
    Ok(())
}

/// Bytes a BUNDLE_ADD_MESSAGE adds around its inner message: its header, bundle id, padding
/// and flags.
pub const BUNDLE_ADD_OVERHEAD: usize = crate::header::Header::LEN + 8;

/// Length of the BUNDLE_ADD_MESSAGE [`emit_bundled_flow_mod`] writes for `flow`, or
/// `TooLong` when it does not fit a message or a raw OXM TLV of it does not fit its length.
pub fn bundled_flow_mod_len(flow: &FlowMod) -> Result<usize> {
    flow.check()?;
    let len = BUNDLE_ADD_OVERHEAD + crate::header::Header::LEN + flow.buffer_len();
    crate::wire::len16("BUNDLE_ADD_MESSAGE with a FLOW_MOD", len).map(usize::from)
}

/// Writes a BUNDLE_ADD_MESSAGE carrying `flow` as an OpenFlow 1.5 FLOW_MOD, both with `xid`
/// (as OVS requires), straight from the flow_mod: the same bytes as emitting a
/// [`crate::Message`] holding a [`BundleAdd`], without building one. On error nothing is
/// written.
pub fn emit_bundled_flow_mod(out: &mut BytesMut, xid: u32, bundle_id: u32, flags: u16, flow: &FlowMod) -> Result<()> {
    use crate::header::Header;
    let outer = bundled_flow_mod_len(flow)?;
    // Both fit: the inner message is the outer one less its fixed part.
    let inner = crate::wire::part_len16(outer - BUNDLE_ADD_OVERHEAD);
    out.reserve(outer);
    let header = |kind, length| Header { version: crate::OFP_VERSION, kind, length, xid };
    header(MsgKind::BundleAddMessage, crate::wire::part_len16(outer)).emit(out);
    out.put_u32(bundle_id);
    out.put_u16(0);
    out.put_u16(flags);
    header(MsgKind::FlowMod, inner).emit(out);
    flow.emit(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Payload};

    #[test]
    fn bundled_flow_mod_is_the_message_a_bundle_add_emits() {
        let flow = FlowMod::default();
        let mut direct = BytesMut::new();
        emit_bundled_flow_mod(&mut direct, 7, 3, bundle_ctrl::FLAG_ATOMIC, &flow).unwrap();
        let inner = Message::new(7, Payload::FlowMod(flow.clone()));
        let add = BundleAdd {
            bundle_id: 3,
            flags: bundle_ctrl::FLAG_ATOMIC,
            message: Box::new(inner),
            properties: Bytes::new(),
        };
        let via_message = Message::new(7, Payload::BundleAdd(add)).to_bytes().unwrap();
        assert_eq!(&direct[..], &via_message[..]);
        assert_eq!(bundled_flow_mod_len(&flow), Ok(direct.len()));
    }

    #[test]
    fn a_flow_mod_too_long_for_a_bundle_add_writes_nothing() {
        let note = crate::Action::Note(Bytes::from(vec![0u8; 65_500]));
        let flow = FlowMod { instructions: vec![crate::Instruction::ApplyActions(vec![note])], ..FlowMod::default() };
        let mut out = BytesMut::new();
        let err = emit_bundled_flow_mod(&mut out, 1, 1, 0, &flow).unwrap_err();
        assert!(matches!(err, Error::TooLong { .. }), "{err}");
        assert!(out.is_empty());
    }
}
