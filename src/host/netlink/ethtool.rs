//! TX checksum offload turned off on a network device, through ethtool's generic netlink
//! family (`ETHTOOL_MSG_FEATURES_SET`, as `ethtool -K DEV tx off` sends it), never by running
//! `ethtool`.
//!
//! Why: OVS's userspace (netdev) datapath reads a veth's frames with their checksums still
//! left to offload; its conntrack then sees a bad TCP checksum and marks the packet invalid,
//! which the pipeline drops (`ct_state=+inv`). So on that datapath every interface whose
//! frames the datapath reads must compute its own checksums: the pod's end of its veth, and
//! the gateway's device.
//!
//! The request names the features by their kernel names and changes only those (a bit set
//! with a mask): the other features stay as they are. A blocking netlink socket of the
//! calling thread's network namespace is used; the kernel answers at once.

use netlink_packet_core::{
    DecodeError, DefaultNla, Emitable, NetlinkHeader, NetlinkMessage, NetlinkPayload, NlasIterator, Parseable,
    ParseableParametrized, NLA_F_NESTED, NLM_F_ACK, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::{GenlFamily, GenlHeader, GenlMessage};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};

/// The transmit checksum features `ethtool -K DEV tx off` turns off (the kernel's names).
pub const TX_CHECKSUM_FEATURES: &[&str] =
    &["tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6", "tx-checksum-fcoe-crc", "tx-checksum-sctp"];

/// Why the features of a device could not be changed; names the device.
#[derive(Debug, thiserror::Error)]
pub enum EthtoolError {
    #[error("cannot use a generic netlink socket: {0}")]
    Socket(std::io::Error),
    #[error("the kernel has no ethtool netlink family (Linux 5.6 or later with CONFIG_ETHTOOL_NETLINK is needed)")]
    NoFamily,
    #[error("network device {device:?}: cannot turn TX checksum offload off: {error}")]
    Refused { device: String, error: std::io::Error },
    #[error("network device {device:?}: the kernel's answer is malformed: {error}")]
    Malformed { device: String, error: String },
}

const ETHTOOL_GENL_NAME: &str = "ethtool";
const ETHTOOL_GENL_VERSION: u8 = 1;
const ETHTOOL_MSG_FEATURES_SET: u8 = 12;
const ETHTOOL_A_FEATURES_HEADER: u16 = 1;
const ETHTOOL_A_FEATURES_WANTED: u16 = 3;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
/// Header flag: answer with an acknowledgement only, not with the features changed.
const ETHTOOL_FLAG_OMIT_REPLY: u32 = 1 << 1;
const ETHTOOL_A_BITSET_BITS: u16 = 3;
const ETHTOOL_A_BITSET_BITS_BIT: u16 = 1;
const ETHTOOL_A_BITSET_BIT_NAME: u16 = 2;

/// Turns TX checksum offload off on `device` of the calling thread's network namespace.
/// Blocking: call it from a thread that may block (the pod's namespace thread, or
/// `spawn_blocking`).
pub fn tx_checksums_off(device: &str) -> Result<(), EthtoolError> {
    let socket = open()?;
    let family = family_id(&socket)?;
    let mut request = GenlMessage::from_payload(EthtoolRequest::tx_checksums_off(device));
    request.set_resolved_family_id(family);
    match exchange(&socket, request).map_err(|error| EthtoolError::Malformed { device: device.into(), error })? {
        Answer::Ack => Ok(()),
        Answer::Error(error) => Err(EthtoolError::Refused { device: device.into(), error }),
        Answer::Message(_) => Err(EthtoolError::Malformed {
            device: device.into(),
            error: "a reply where an acknowledgement was due".into(),
        }),
    }
}

fn open() -> Result<Socket, EthtoolError> {
    let mut socket = Socket::new(NETLINK_GENERIC).map_err(EthtoolError::Socket)?;
    socket.bind_auto().map_err(EthtoolError::Socket)?;
    socket.connect(&SocketAddr::new(0, 0)).map_err(EthtoolError::Socket)?;
    Ok(socket)
}

/// The id the kernel gave the ethtool family (generic netlink ids are assigned at boot).
fn family_id(socket: &Socket) -> Result<u16, EthtoolError> {
    let lookup = GenlMessage::from_payload(GenlCtrl {
        cmd: GenlCtrlCmd::GetFamily,
        nlas: vec![GenlCtrlAttrs::FamilyName(ETHTOOL_GENL_NAME.into())],
    });
    match exchange(socket, lookup) {
        Ok(Answer::Message(reply)) => reply
            .payload
            .nlas
            .iter()
            .find_map(|a| match a {
                GenlCtrlAttrs::FamilyId(id) => Some(*id),
                _ => None,
            })
            .ok_or(EthtoolError::NoFamily),
        _ => Err(EthtoolError::NoFamily),
    }
}

/// What the kernel answered to one request.
enum Answer<F> {
    Ack,
    Error(std::io::Error),
    Message(GenlMessage<F>),
}

/// Sends `payload` as a request and reads the kernel's first answer.
fn exchange<F>(socket: &Socket, payload: GenlMessage<F>) -> Result<Answer<F>, String>
where
    F: GenlFamily + Emitable + ParseableParametrized<[u8], GenlHeader> + std::fmt::Debug,
{
    let mut message = NetlinkMessage::new(NetlinkHeader::default(), NetlinkPayload::InnerMessage(payload));
    message.header.flags = NLM_F_REQUEST | NLM_F_ACK;
    message.finalize();
    let mut bytes = vec![0; message.buffer_len()];
    message.serialize(&mut bytes);
    socket.send(&bytes, 0).map_err(|e| format!("send: {e}"))?;
    let (reply, _) = socket.recv_from_full().map_err(|e| format!("receive: {e}"))?;
    let parsed = NetlinkMessage::<GenlMessage<F>>::deserialize(&reply).map_err(|e| e.to_string())?;
    Ok(match parsed.payload {
        NetlinkPayload::Error(e) if e.code.is_none() => Answer::Ack,
        NetlinkPayload::Error(e) => Answer::Error(e.to_io()),
        NetlinkPayload::InnerMessage(m) => Answer::Message(m),
        other => return Err(format!("unexpected netlink message type {}", other.message_type())),
    })
}

/// An ethtool request: a command and its attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EthtoolRequest {
    cmd: u8,
    attrs: Vec<DefaultNla>,
}

impl EthtoolRequest {
    /// FEATURES_SET for `device`: each of [`TX_CHECKSUM_FEATURES`] listed without a value,
    /// which a bit set with a mask reads as "off"; nothing else changes.
    fn tx_checksums_off(device: &str) -> EthtoolRequest {
        let header = nested(
            ETHTOOL_A_FEATURES_HEADER,
            &[string(ETHTOOL_A_HEADER_DEV_NAME, device), u32_attr(ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_OMIT_REPLY)],
        );
        let bits: Vec<DefaultNla> = TX_CHECKSUM_FEATURES
            .iter()
            .map(|name| nested(ETHTOOL_A_BITSET_BITS_BIT, &[string(ETHTOOL_A_BITSET_BIT_NAME, name)]))
            .collect();
        let wanted = nested(ETHTOOL_A_FEATURES_WANTED, &[nested(ETHTOOL_A_BITSET_BITS, &bits)]);
        EthtoolRequest { cmd: ETHTOOL_MSG_FEATURES_SET, attrs: vec![header, wanted] }
    }
}

impl GenlFamily for EthtoolRequest {
    fn family_name() -> &'static str {
        ETHTOOL_GENL_NAME
    }

    fn command(&self) -> u8 {
        self.cmd
    }

    fn version(&self) -> u8 {
        ETHTOOL_GENL_VERSION
    }
}

impl Emitable for EthtoolRequest {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for EthtoolRequest {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        let attrs = NlasIterator::new(buf)
            .map(|nla| nla.and_then(|nla| DefaultNla::parse(&nla)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EthtoolRequest { cmd: header.cmd, attrs })
    }
}

fn nested(kind: u16, children: &[DefaultNla]) -> DefaultNla {
    let mut value = vec![0; children.buffer_len()];
    children.emit(&mut value);
    DefaultNla::new(kind | NLA_F_NESTED, value)
}

fn string(kind: u16, s: &str) -> DefaultNla {
    let mut value = s.as_bytes().to_vec();
    value.push(0);
    DefaultNla::new(kind, value)
}

fn u32_attr(kind: u16, v: u32) -> DefaultNla {
    DefaultNla::new(kind, v.to_ne_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::Nla;

    /// The request as `ethtool -K eth0 tx off` (ethtool 6.1, netlink) sends it, field by
    /// field: a header naming the device, and the wanted bit set listing the features by
    /// name without a value and without NOMASK.
    #[test]
    fn the_request_lists_each_tx_checksum_feature_off_by_name() {
        let r = EthtoolRequest::tx_checksums_off("eth0");
        let mut bytes = vec![0; r.buffer_len()];
        r.emit(&mut bytes);
        let parsed = EthtoolRequest::parse_with_param(&bytes, GenlHeader { cmd: 12, version: 1 }).unwrap();
        assert_eq!(parsed, r, "emit then parse gives the same attributes");
        let header = &r.attrs[0];
        assert_eq!(header.kind(), ETHTOOL_A_FEATURES_HEADER | NLA_F_NESTED);
        let mut hv = vec![0; Nla::value_len(header)];
        Nla::emit_value(header, &mut hv);
        assert!(hv.windows(5).any(|w| w == b"eth0\0"), "{hv:?}");
        let mut wanted = vec![0; Nla::value_len(&r.attrs[1])];
        Nla::emit_value(&r.attrs[1], &mut wanted);
        for name in TX_CHECKSUM_FEATURES {
            let needle = [name.as_bytes(), b"\0"].concat();
            assert!(wanted.windows(needle.len()).any(|w| w == needle), "{name} missing");
        }
        // No ETHTOOL_A_BITSET_BIT_VALUE (3) flag attribute anywhere: every bit is "off".
        let value_flag = [4u8, 0, 3, 0];
        assert!(!wanted.windows(4).any(|w| w == value_flag));
    }
}
