//! The userdata npagent puts in its logging flows' NXAST_CONTROLLER2 actions, so that every
//! packet-in says by itself what sent it: no register shared with another feature is read back.
//!
//! Layout (8 bytes, big-endian):
//! `[0]` format version (1), `[1]` category (1 = NetworkPolicy), `[2]` disposition
//! (0 allow, 1 drop, 2 would drop, 3 would allow, 4 pass), `[3]` OpenFlow table id of the rule or
//! drop (for a ClusterNetworkPolicy rule's copy, its direction's Admin table: its rule, in
//! `reg6`, says its tier), `[4..8]` the ofport of the pod whose meter the copy passed for an Allow copy, a
//! default drop (its isolated pod) or a staged verdict, the [`SecurityEvent`] for a drop in
//! SpoofGuard, ConntrackState or ConntrackQuota.
//!
//! The Allow and staged copies are made in LogCopy ([`super::copies`]), through the meter of
//! the connection's source pod when it is a local one: the pod the policies judged for is in
//! `reg2` (egress) or `reg4` (ingress), which the packet-in's metadata carries, and so are an
//! Allow's rule (its conjunction id in `reg6`) and a staged verdict's staged rule (`reg9` or
//! `reg11`, see [`super::staged`]).

/// Userdata format version.
pub(crate) const USERDATA_VERSION: u8 = 1;
/// Category: Kubernetes NetworkPolicy.
pub(crate) const CATEGORY_NETWORK_POLICY: u8 = 1;
/// Length of the userdata on the wire.
pub(crate) const USERDATA_LEN: usize = 8;

/// What a logging flow did with the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Disposition {
    Allow,
    Drop,
    /// Enforced allows; the staged view would drop.
    WouldDrop,
    /// Enforced drops; the staged view would allow.
    WouldAllow,
    /// A ClusterNetworkPolicy rule handed the connection to the next tier.
    Pass,
}

impl Disposition {
    const ALL: [Disposition; 5] =
        [Disposition::Allow, Disposition::Drop, Disposition::WouldDrop, Disposition::WouldAllow, Disposition::Pass];

    fn code(self) -> u8 {
        match self {
            Disposition::Allow => 0,
            Disposition::Drop => 1,
            Disposition::WouldDrop => 2,
            Disposition::WouldAllow => 3,
            Disposition::Pass => 4,
        }
    }
}

/// What a security event's drop caught, in the userdata's `[4..8]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityEvent {
    /// IP from a pod's port with a source address or MAC that is not the pod's.
    ForgedSource = 1,
    /// An 802.1Q-tagged frame (VLAN or priority tag) from a pod's port.
    TaggedFrame = 2,
    /// A packet conntrack calls invalid.
    InvalidConnection = 3,
    /// An ICMP error from a pod about a connection it is no end of.
    ForeignIcmpError = 4,
    /// A new connection refused because the conntrack zone that counts it is full (the
    /// pod's own, the node's or the inbound one).
    ConntrackLimit = 5,
}

impl SecurityEvent {
    /// Every event, by code.
    pub(crate) const ALL: [SecurityEvent; 5] = [
        SecurityEvent::ForgedSource,
        SecurityEvent::TaggedFrame,
        SecurityEvent::InvalidConnection,
        SecurityEvent::ForeignIcmpError,
        SecurityEvent::ConntrackLimit,
    ];

    /// The event of userdata code `code`.
    pub(crate) fn from_code(code: u32) -> Option<SecurityEvent> {
        SecurityEvent::ALL.into_iter().find(|e| *e as u32 == code)
    }

    /// The name the log prints.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SecurityEvent::ForgedSource => "ForgedSource",
            SecurityEvent::TaggedFrame => "TaggedFrame",
            SecurityEvent::InvalidConnection => "InvalidConnection",
            SecurityEvent::ForeignIcmpError => "ForeignIcmpError",
            SecurityEvent::ConntrackLimit => "ConntrackLimit",
        }
    }
}

/// Decoded logging userdata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogUserdata {
    pub disposition: Disposition,
    pub table_id: u8,
    /// The ofport of the pod whose meter the copy passed (Allow, default drop and staged
    /// copies), or the [`SecurityEvent`] code.
    pub subject: u32,
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
        let id = self.subject.to_be_bytes();
        [USERDATA_VERSION, CATEGORY_NETWORK_POLICY, self.disposition.code(), self.table_id, id[0], id[1], id[2], id[3]]
    }

    /// Reads userdata back from a packet-in.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Self, UserdataError> {
        let b: [u8; USERDATA_LEN] = bytes.try_into().map_err(|_| UserdataError::BadLength(bytes.len()))?;
        if b[0] != USERDATA_VERSION {
            return Err(UserdataError::BadVersion(b[0]));
        }
        if b[1] != CATEGORY_NETWORK_POLICY {
            return Err(UserdataError::BadCategory(b[1]));
        }
        let disposition =
            Disposition::ALL.into_iter().find(|d| d.code() == b[2]).ok_or(UserdataError::BadDisposition(b[2]))?;
        Ok(LogUserdata { disposition, table_id: b[3], subject: u32::from_be_bytes([b[4], b[5], b[6], b[7]]) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_is_identity() {
        let u = LogUserdata { disposition: Disposition::Drop, table_id: 4, subject: 0x0102_0304 };
        assert_eq!(u.encode(), [1, 1, 1, 4, 1, 2, 3, 4]);
        assert_eq!(LogUserdata::decode(&u.encode()), Ok(u));
        for disposition in Disposition::ALL {
            let u = LogUserdata { disposition, table_id: 16, subject: 0 };
            assert_eq!(LogUserdata::decode(&u.encode()), Ok(u));
        }
    }

    #[test]
    fn foreign_userdata_is_rejected() {
        assert_eq!(LogUserdata::decode(&[1, 0x01]), Err(UserdataError::BadLength(2)));
        assert_eq!(LogUserdata::decode(&[2, 1, 0, 0, 0, 0, 0, 0]), Err(UserdataError::BadVersion(2)));
        assert_eq!(LogUserdata::decode(&[1, 1, 9, 0, 0, 0, 0, 0]), Err(UserdataError::BadDisposition(9)));
        assert_eq!(LogUserdata::decode(&[1, 1, 5, 0, 0, 0, 0, 0]), Err(UserdataError::BadDisposition(5)));
    }
}
