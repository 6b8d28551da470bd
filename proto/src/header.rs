//! `ofp_header`: version, type, length, xid.

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
}
