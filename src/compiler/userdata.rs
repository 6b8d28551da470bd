//! The userdata npagent puts in its logging flows' NXAST_CONTROLLER2 actions, so that every
//! packet-in says by itself what sent it: no register shared with another feature is read back.
//!
//! Layout (8 bytes, big-endian):
//! `[0]` format version (1), `[1]` category (1 = NetworkPolicy), `[2]` disposition
//! (0 allow, 1 drop), `[3]` OpenFlow table id of the logging flow, `[4..8]` rule id: the
//! conjunction id for an Allow rule, the applied-to pod's ofport for a default drop.

/// Userdata format version.
pub const USERDATA_VERSION: u8 = 1;
/// Category: Kubernetes NetworkPolicy.
pub const CATEGORY_NETWORK_POLICY: u8 = 1;
/// Length of the userdata on the wire.
pub const USERDATA_LEN: usize = 8;

/// What a logging flow did with the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disposition {
    Allow,
    Drop,
}

/// Decoded logging userdata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogUserdata {
    pub disposition: Disposition,
    pub table_id: u8,
    /// Conjunction id (Allow) or ofport of the isolated pod (default Drop).
    pub rule_id: u32,
}

/// Why userdata is not ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UserdataError {
    #[error("userdata is {0} bytes, expected {USERDATA_LEN}")]
    BadLength(usize),
    #[error("userdata version {0} is not {USERDATA_VERSION}")]
    BadVersion(u8),
    #[error("userdata category {0} is not NetworkPolicy")]
    BadCategory(u8),
    #[error("userdata disposition {0} is unknown")]
    BadDisposition(u8),
}

impl LogUserdata {
    /// The 8 bytes for NXAC2PT_USERDATA.
    pub fn encode(&self) -> [u8; USERDATA_LEN] {
        let id = self.rule_id.to_be_bytes();
        let disposition = match self.disposition {
            Disposition::Allow => 0,
            Disposition::Drop => 1,
        };
        [USERDATA_VERSION, CATEGORY_NETWORK_POLICY, disposition, self.table_id, id[0], id[1], id[2], id[3]]
    }

    /// Reads userdata back from a packet-in.
    pub fn decode(bytes: &[u8]) -> Result<Self, UserdataError> {
        let b: [u8; USERDATA_LEN] = bytes.try_into().map_err(|_| UserdataError::BadLength(bytes.len()))?;
        if b[0] != USERDATA_VERSION {
            return Err(UserdataError::BadVersion(b[0]));
        }
        if b[1] != CATEGORY_NETWORK_POLICY {
            return Err(UserdataError::BadCategory(b[1]));
        }
        let disposition = match b[2] {
            0 => Disposition::Allow,
            1 => Disposition::Drop,
            other => return Err(UserdataError::BadDisposition(other)),
        };
        Ok(LogUserdata { disposition, table_id: b[3], rule_id: u32::from_be_bytes([b[4], b[5], b[6], b[7]]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_is_identity() {
        let u = LogUserdata { disposition: Disposition::Drop, table_id: 4, rule_id: 0x0102_0304 };
        assert_eq!(u.encode(), [1, 1, 1, 4, 1, 2, 3, 4]);
        assert_eq!(LogUserdata::decode(&u.encode()), Ok(u));
    }

    #[test]
    fn foreign_userdata_is_rejected() {
        assert_eq!(LogUserdata::decode(&[1, 0x01]), Err(UserdataError::BadLength(2)));
        assert_eq!(LogUserdata::decode(&[2, 1, 0, 0, 0, 0, 0, 0]), Err(UserdataError::BadVersion(2)));
        assert_eq!(LogUserdata::decode(&[1, 1, 9, 0, 0, 0, 0, 0]), Err(UserdataError::BadDisposition(9)));
    }
}
