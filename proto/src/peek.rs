//! What a message is, read from its first bytes without decoding its body: the header and,
//! for the types whose body opens with a subtype, that subtype. For telling what a message
//! whose body does not decode was meant to be (whom to fail, what to count).

use crate::header::{nx_type, Header, MsgKind};

/// A message's header and its subtype, if its type has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peek {
    /// The header as it is: its length field is not checked.
    pub header: Header,
    /// The subtype, when the type has one and the buffer holds it.
    pub subtype: Option<Subtype>,
}

/// The subtype that opens the body of some message types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subtype {
    /// An EXPERIMENTER message's experimenter id and subtype (for OVS's own messages
    /// [`crate::NX_VENDOR_ID`] and an [`nx_type`]).
    Experimenter { experimenter: u32, exp_type: u32 },
    /// A MULTIPART_REQUEST's or MULTIPART_REPLY's multipart type (`OFPMP_*`).
    Multipart(u16),
}

impl Peek {
    /// Reads the header and subtype at the start of `buf`; `None` when it is shorter than a
    /// header. A body too short for its subtype gives `subtype: None`.
    pub fn read(buf: &[u8]) -> Option<Peek> {
        let header = Header::peek(buf)?;
        let body = buf.get(Header::LEN..).unwrap_or_default();
        let subtype = match header.kind {
            MsgKind::Experimenter => match (be_u32(body.get(0..4)), be_u32(body.get(4..8))) {
                (Some(experimenter), Some(exp_type)) => Some(Subtype::Experimenter { experimenter, exp_type }),
                _ => None,
            },
            MsgKind::MultipartRequest | MsgKind::MultipartReply => {
                body.get(0..2).and_then(|b| b.try_into().ok()).map(u16::from_be_bytes).map(Subtype::Multipart)
            }
            _ => None,
        };
        Some(Peek { header, subtype })
    }

    /// Whether the message says it is a packet-in: OFPT_PACKET_IN or NXT_PACKET_IN2.
    pub fn is_packet_in(&self) -> bool {
        match self.header.kind {
            MsgKind::PacketIn => true,
            MsgKind::Experimenter => {
                self.subtype
                    == Some(Subtype::Experimenter { experimenter: crate::NX_VENDOR_ID, exp_type: nx_type::PACKET_IN2 })
            }
            _ => false,
        }
    }

    /// Whether the message says it is a MULTIPART_REPLY of `multipart_type` (`OFPMP_*`).
    pub fn is_multipart_reply(&self, multipart_type: u16) -> bool {
        self.header.kind == MsgKind::MultipartReply && self.subtype == Some(Subtype::Multipart(multipart_type))
    }
}

fn be_u32(bytes: Option<&[u8]>) -> Option<u32> {
    bytes?.try_into().ok().map(u32::from_be_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow_monitor::OFPMP_FLOW_MONITOR;

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![6, kind, 0, 0, 0, 0, 0, 7];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn packet_in2_is_told_by_vendor_and_subtype() {
        let nx = crate::NX_VENDOR_ID.to_be_bytes();
        let packet_in2 = [&nx[..], &nx_type::PACKET_IN2.to_be_bytes()[..], &[0xff; 3]].concat();
        let peek = Peek::read(&message(4, &packet_in2)).unwrap();
        assert!(peek.is_packet_in());
        assert_eq!(peek.header.xid, 7);
        let resume = [&nx[..], &nx_type::RESUME.to_be_bytes()[..]].concat();
        assert!(!Peek::read(&message(4, &resume)).unwrap().is_packet_in());
        let other_vendor = [&[0, 0, 0, 1][..], &nx_type::PACKET_IN2.to_be_bytes()[..]].concat();
        assert!(!Peek::read(&message(4, &other_vendor)).unwrap().is_packet_in());
        assert!(Peek::read(&message(10, &[])).unwrap().is_packet_in(), "a standard packet-in, body or not");
    }

    #[test]
    fn multipart_type_is_read_from_the_body() {
        let reply = message(19, &OFPMP_FLOW_MONITOR.to_be_bytes());
        assert!(Peek::read(&reply).unwrap().is_multipart_reply(OFPMP_FLOW_MONITOR));
        let request = message(18, &OFPMP_FLOW_MONITOR.to_be_bytes());
        assert!(!Peek::read(&request).unwrap().is_multipart_reply(OFPMP_FLOW_MONITOR));
        assert_eq!(Peek::read(&request).unwrap().subtype, Some(Subtype::Multipart(OFPMP_FLOW_MONITOR)));
    }

    #[test]
    fn short_buffers_give_none_or_no_subtype_and_never_panic() {
        let full = message(4, &[0, 0, 0x23, 0x20, 0, 0, 0, 30]);
        for len in 0..full.len() {
            let peek = Peek::read(&full[..len]);
            match len {
                0..=7 => assert_eq!(peek, None, "{len} bytes"),
                _ => assert_eq!(peek.map(|p| p.subtype), Some(None), "{len} bytes"),
            }
        }
        assert_eq!(Peek::read(&message(19, &[0])).map(|p| p.subtype), Some(None));
        for kind in 0..=u8::MAX {
            for len in 0..12 {
                let _ = Peek::read(&message(kind, &[0xff; 12])[..len]);
            }
        }
    }
}
