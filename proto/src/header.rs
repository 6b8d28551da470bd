//! `ofp_header`: version, type, length, xid; and the message type numbers.

use crate::error::{Error, Result};
use bytes::{BufMut, BytesMut};

/// The 8-byte header in front of every OpenFlow message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Header {
    pub version: u8,
    pub msg_type: u8,
    /// Length of the whole message, header included (>= 8).
    pub length: u16,
    pub xid: u32,
}

impl Header {
    /// Size of the header on the wire.
    pub const LEN: usize = 8;

    /// Reads the header at the start of `buf` (which may hold more than the header).
    /// Checks that the length field is at least 8; does not compare it with `buf.len()`.
    pub fn parse(buf: &[u8]) -> Result<Header> {
        let h: &[u8; 8] = buf.get(..Self::LEN).and_then(|s| s.try_into().ok()).ok_or(Error::Truncated {
            what: "ofp_header",
            need: Self::LEN,
            have: buf.len(),
        })?;
        let header = Header {
            version: h[0],
            msg_type: h[1],
            length: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        };
        if usize::from(header.length) < Self::LEN {
            return Err(Error::BadLength { what: "ofp_header", len: header.length.into() });
        }
        Ok(header)
    }

    /// Writes the 8 header bytes.
    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u8(self.version);
        out.put_u8(self.msg_type);
        out.put_u16(self.length);
        out.put_u32(self.xid);
    }
}

/// Message type numbers (`ofp_header.type`) with OF1.3+ numbering.
pub mod msg_type {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
    pub const ROLE_STATUS: u8 = 30;
    pub const BUNDLE_CONTROL: u8 = 33;
    pub const BUNDLE_ADD_MESSAGE: u8 = 34;
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
        let h = Header { version: 6, msg_type: 14, length: 0x78, xid: 0xdead_beef };
        let mut out = BytesMut::new();
        h.emit(&mut out);
        assert_eq!(&out[..], &[6, 14, 0, 0x78, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Header::parse(&out).unwrap(), h);
    }

    #[test]
    fn short_buffer_and_small_length_are_errors() {
        assert!(matches!(Header::parse(&[6, 0, 0]), Err(Error::Truncated { need: 8, have: 3, .. })));
        assert!(matches!(Header::parse(&[6, 0, 0, 7, 0, 0, 0, 0]), Err(Error::BadLength { len: 7, .. })));
    }
}
