//! `ofp_header`: version, type, length, xid; the message types ([`MsgKind`]) and the Nicira
//! subtype numbers.

use crate::error::{Error, Result};
use crate::wire::numbered_enum;
use bytes::{BufMut, BytesMut};

/// The 8-byte header in front of every OpenFlow message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Header {
    pub version: u8,
    pub kind: MsgKind,
    /// Length of the whole message, header included (>= 8).
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Size of the header on the wire.
    pub const LEN: usize = 8;

    /// Reads the header fields at the start of `buf` as they are, without checking the length
    /// field or decoding anything after them: what a message says it is, even when it is
    /// malformed. `None` when `buf` is shorter than a header.
    pub fn peek(buf: &[u8]) -> Option<Header> {
        let h: &[u8; Self::LEN] = buf.get(..Self::LEN)?.try_into().ok()?;
        Some(Header {
            version: h[0],
            kind: MsgKind::from(h[1]),
            length: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }

    /// Reads the header at the start of `buf` (which may hold more than the header).
    /// Checks that the length field is at least 8; does not compare it with `buf.len()`.
    pub fn parse(buf: &[u8]) -> Result<Header> {
        let header =
            Self::peek(buf).ok_or(Error::Truncated { what: "ofp_header", need: Self::LEN, have: buf.len() })?;
        if usize::from(header.length) < Self::LEN {
            return Err(Error::BadLength { what: "ofp_header", len: header.length.into() });
        }
        Ok(header)
    }

    /// Writes the 8 header bytes.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u8(self.version);
        out.put_u8(self.kind.into());
        out.put_u16(self.length);
        out.put_u32(self.xid);
    }
}

numbered_enum! {
    /// The type of a message (`ofp_header.type`), OpenFlow 1.3+ numbering. Which of them get a
    /// typed payload depends on the version too: see [`crate::message::is_modelled`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
    pub enum MsgKind: u8 {
        /// OFPT_HELLO.
        Hello = 0,
        /// OFPT_ERROR.
        Error = 1,
        /// OFPT_ECHO_REQUEST.
        EchoRequest = 2,
        /// OFPT_ECHO_REPLY.
        EchoReply = 3,
        /// OFPT_EXPERIMENTER: the body opens with the experimenter id and subtype.
        Experimenter = 4,
        /// OFPT_FEATURES_REQUEST.
        FeaturesRequest = 5,
        /// OFPT_FEATURES_REPLY.
        FeaturesReply = 6,
        /// OFPT_GET_CONFIG_REQUEST.
        GetConfigRequest = 7,
        /// OFPT_GET_CONFIG_REPLY.
        GetConfigReply = 8,
        /// OFPT_SET_CONFIG.
        SetConfig = 9,
        /// OFPT_PACKET_IN.
        PacketIn = 10,
        /// OFPT_FLOW_REMOVED.
        FlowRemoved = 11,
        /// OFPT_PORT_STATUS.
        PortStatus = 12,
        /// OFPT_PACKET_OUT.
        PacketOut = 13,
        /// OFPT_FLOW_MOD.
        FlowMod = 14,
        /// OFPT_GROUP_MOD.
        GroupMod = 15,
        /// OFPT_PORT_MOD.
        PortMod = 16,
        /// OFPT_TABLE_MOD.
        TableMod = 17,
        /// OFPT_MULTIPART_REQUEST: the body opens with the multipart type.
        MultipartRequest = 18,
        /// OFPT_MULTIPART_REPLY: the body opens with the multipart type.
        MultipartReply = 19,
        /// OFPT_BARRIER_REQUEST.
        BarrierRequest = 20,
        /// OFPT_BARRIER_REPLY.
        BarrierReply = 21,
        /// OFPT_ROLE_REQUEST.
        RoleRequest = 24,
        /// OFPT_ROLE_REPLY.
        RoleReply = 25,
        /// OFPT_GET_ASYNC_REQUEST.
        GetAsyncRequest = 26,
        /// OFPT_GET_ASYNC_REPLY.
        GetAsyncReply = 27,
        /// OFPT_SET_ASYNC.
        SetAsync = 28,
        /// OFPT_METER_MOD.
        MeterMod = 29,
        /// OFPT_ROLE_STATUS.
        RoleStatus = 30,
        /// OFPT_BUNDLE_CONTROL.
        BundleControl = 33,
        /// OFPT_BUNDLE_ADD_MESSAGE.
        BundleAddMessage = 34,
    }
}

/// Nicira experimenter message subtypes (after `NX_VENDOR_ID`).
pub mod nx_type {
    pub const ROLE_REQUEST: u32 = 10;
    pub const ROLE_REPLY: u32 = 11;
    pub const SET_PACKET_IN_FORMAT: u32 = 16;
    pub const PACKET_IN: u32 = 17;
    pub const SET_ASYNC_CONFIG: u32 = 19;
    pub const SET_CONTROLLER_ID: u32 = 20;
    pub const RESUME: u32 = 28;
    pub const PACKET_IN2: u32 = 30;
}

/// NXT_SET_PACKET_IN_FORMAT values.
pub mod packet_in_format {
    pub const STANDARD: u32 = 0;
    pub const NXT_PACKET_IN: u32 = 1;
    pub const NXT_PACKET_IN2: u32 = 2;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header { version: 6, kind: MsgKind::FlowMod, length: 0x78, xid: 0xdead_beef };
        let mut out = BytesMut::new();
        h.emit(&mut out);
        assert_eq!(&out[..], &[6, 14, 0, 0x78, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Header::parse(&out).unwrap(), h);
        assert_eq!(Header::peek(&out), Some(h));
    }

    #[test]
    fn short_buffer_and_small_length_are_errors() {
        assert!(matches!(Header::parse(&[6, 0, 0]), Err(Error::Truncated { need: 8, have: 3, .. })));
        assert!(matches!(Header::parse(&[6, 0, 0, 7, 0, 0, 0, 0]), Err(Error::BadLength { len: 7, .. })));
    }

    #[test]
    fn peek_of_a_short_buffer_is_none() {
        let bytes = [6u8, 14, 0, 0x78, 0xde, 0xad, 0xbe, 0xef];
        for len in 0..Header::LEN {
            assert_eq!(Header::peek(&bytes[..len]), None, "{len} bytes");
        }
    }

    #[test]
    fn peek_reads_a_header_parse_refuses() {
        let h = Header::peek(&[1, 0xff, 0, 3, 0, 0, 0, 9, 0xaa]).unwrap();
        assert_eq!(h, Header { version: 1, kind: MsgKind::Unknown(0xff), length: 3, xid: 9 });
    }

    #[test]
    fn every_named_kind_maps_to_its_number_and_back() {
        let mut numbers = Vec::new();
        for &kind in MsgKind::KNOWN {
            let number = u8::from(kind);
            assert_eq!(MsgKind::from(number), kind, "{kind:?}");
            numbers.push(number);
        }
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "listed once, in order: {numbers:?}");
        assert_eq!(MsgKind::from(14), MsgKind::FlowMod);
        assert_eq!(MsgKind::from(34), MsgKind::BundleAddMessage);
    }

    #[test]
    fn numbers_without_a_name_are_kept() {
        for number in 0..=u8::MAX {
            let kind = MsgKind::from(number);
            assert_eq!(u8::from(kind), number);
            let named = MsgKind::KNOWN.contains(&kind);
            assert_eq!(named, !matches!(kind, MsgKind::Unknown(_)), "{number}");
        }
        assert_eq!(MsgKind::from(22), MsgKind::Unknown(22));
        assert_eq!(MsgKind::from(0xff), MsgKind::Unknown(0xff));
    }
}
