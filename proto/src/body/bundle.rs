//! OFPT_BUNDLE_CONTROL and OFPT_BUNDLE_ADD_MESSAGE.

use crate::error::{Error, Result};
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
pub fn is_bundlable(msg_type: u8) -> bool {
    use crate::header::msg_type::*;
    matches!(msg_type, PACKET_OUT | FLOW_MOD | GROUP_MOD | PORT_MOD)
}

impl BundleAdd {
    /// Parses the body of a BUNDLE_ADD_MESSAGE whose header carried `version` and `xid`.
    /// The inner message must have the same version and xid and be bundlable (as OVS
    /// requires: OFPBFC_BAD_VERSION, OFPBFC_MSG_BAD_XID, OFPBFC_MSG_UNSUP).
    pub fn parse(version: u8, xid: u32, body: &[u8]) -> Result<BundleAdd> {
        let mut r = Reader::new(body, "ofp_bundle_add_msg");
        let bundle_id = r.u32()?;
        r.zeros(2)?;
        let flags = r.u16()?;
        let rest = r.rest();
        let inner = crate::header::Header::parse(rest)?;
        let inner_len = usize::from(inner.length);
        let inner_buf = rest
            .get(..inner_len)
            .ok_or(Error::Truncated { what: "bundled message", need: inner_len, have: rest.len() })?;
        if inner.version != version {
            return Err(Error::BadVersion(inner.version));
        }
        if inner.xid != xid {
            return Err(Error::BadValue { what: "bundled message xid", value: inner.xid.into() });
        }
        if !is_bundlable(inner.msg_type) {
            return Err(Error::BadValue { what: "bundled message type", value: inner.msg_type.into() });
        }
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

    pub(crate) fn check(&self, version: u8, xid: u32) -> Result<()> {
        if self.message.version != version {
            return Err(Error::BadVersion(self.message.version));
        }
        if self.message.xid != xid {
            return Err(Error::BadValue { what: "bundled message xid", value: self.message.xid.into() });
        }
        let t = self.message.msg_type();
        if !is_bundlable(t) {
            return Err(Error::BadValue { what: "bundled message type", value: t.into() });
        }
        self.message.check()
    }

    /// Writes the body (call `check` first; the inner message cannot fail then).
    pub(crate) fn emit_checked(&self, out: &mut BytesMut) -> Result<()> {
        out.put_u32(self.bundle_id);
        out.put_u16(0);
        out.put_u16(self.flags);
        self.message.emit(out)?;
        out.put_slice(&self.properties);
        Ok(())
    }
}
