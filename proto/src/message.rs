//! A whole OpenFlow message: header fields plus a typed payload.
//!
//! `Message::parse(&[u8])` takes exactly one whole message (length field == buffer length);
//! `buffer_len`; `emit(&mut BytesMut) -> Result<()>` (errors with `TooLong` above 65535 bytes,
//! and for values that would not parse back to themselves).
//!
//! # Version rules
//! Which payload a message gets depends on its version byte and type:
//! - HELLO, ERROR, ECHO_REQUEST/REPLY: any version (needed before and during negotiation).
//! - EXPERIMENTER (4), FEATURES_REQUEST (5), GET_CONFIG_REQUEST/REPLY (7/8), SET_CONFIG (9):
//!   OpenFlow 1.0 to 1.5 (0x01..=0x06), whose numbering and layouts agree for these types.
//! - FEATURES_REPLY (OF1.3+ layout, no ports), BARRIER (20/21), ROLE (24/25), METER_MOD (29):
//!   versions 0x04..=0x06.
//! - BUNDLE_CONTROL (33), BUNDLE_ADD_MESSAGE (34): 0x05..=0x06.
//! - PACKET_IN, PACKET_OUT, FLOW_MOD, GROUP_MOD, MULTIPART_REQUEST/REPLY: their OF1.5 layouts,
//!   so version 0x06 only.
//! - Everything else is [`Payload::Unknown`] with the raw body, so it still round-trips.
//!
//! `emit` refuses a payload the version rules would not produce (e.g. a FLOW_MOD with version
//! 4, or `Unknown` with a modelled type), so `parse(emit(m)) == m` always holds.

use crate::body::*;
use crate::error::{Error, Result};
use crate::flow_mod::FlowMod;
use crate::header::{nx_type, Header, MsgKind};
use crate::multipart::{MultipartReply, MultipartRequest};
use crate::packet_in2::PacketIn2;
use crate::wire::Reader;
use bytes::{BufMut, Bytes, BytesMut};

/// One OpenFlow message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Message {
    pub version: u8,
    pub xid: u32,
    pub payload: Payload,
}

/// The typed body of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum Payload {
    Hello(Hello),
    Error(ErrorMsg),
    EchoRequest(Bytes),
    EchoReply(Bytes),
    FeaturesRequest,
    FeaturesReply(FeaturesReply),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    MultipartRequest(MultipartRequest),
    MultipartReply(MultipartReply),
    BarrierRequest,
    BarrierReply,
    RoleRequest(Role),
    RoleReply(Role),
    MeterMod(MeterMod),
    BundleControl(BundleControl),
    BundleAdd(BundleAdd),
    /// NXT_SET_PACKET_IN_FORMAT: 0 standard, 1 nxt_packet_in, 2 nxt_packet_in2.
    SetPacketInFormat(u32),
    /// NXT_SET_CONTROLLER_ID.
    SetControllerId(u16),
    /// NXT_PACKET_IN2.
    PacketIn2(PacketIn2),
    /// NXT_RESUME (same properties as NXT_PACKET_IN2).
    Resume(PacketIn2),
    /// Another experimenter message: experimenter id, subtype, body raw.
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        body: Bytes,
    },
    /// Any other message type (or version), body raw.
    Unknown {
        msg_type: u8,
        body: Bytes,
    },
}

/// Length of the experimenter header after `ofp_header`: experimenter u32 + subtype u32.
const EXPERIMENTER_HEADER_LEN: usize = 8;

/// Whether a message of type `kind` is parsed into a typed payload at `version` (see the
/// module docs).
pub fn is_modelled(version: u8, kind: impl Into<MsgKind>) -> bool {
    use MsgKind as K;
    match kind.into() {
        K::Hello | K::Error | K::EchoRequest | K::EchoReply => true,
        K::Experimenter | K::FeaturesRequest | K::GetConfigRequest | K::GetConfigReply | K::SetConfig => {
            (1..=6).contains(&version)
        }
        K::FeaturesReply | K::BarrierRequest | K::BarrierReply | K::RoleRequest | K::RoleReply | K::MeterMod => {
            (4..=6).contains(&version)
        }
        K::BundleControl | K::BundleAddMessage => (5..=6).contains(&version),
        K::PacketIn | K::PacketOut | K::FlowMod | K::GroupMod | K::MultipartRequest | K::MultipartReply => version == 6,
        _ => false,
    }
}

/// Whether an NX experimenter subtype has a typed payload.
fn is_modelled_nx(exp_type: u32) -> bool {
    matches!(
        exp_type,
        nx_type::SET_PACKET_IN_FORMAT | nx_type::SET_CONTROLLER_ID | nx_type::PACKET_IN2 | nx_type::RESUME
    )
}

fn bytes(b: &[u8]) -> Bytes {
    Bytes::copy_from_slice(b)
}

fn empty(body: &[u8], what: &'static str) -> Result<()> {
    if body.is_empty() {
        Ok(())
    } else {
        Err(Error::BadLength { what, len: body.len() })
    }
}

impl Message {
    /// A message with the OpenFlow 1.5 version byte.
    pub fn new(xid: u32, payload: Payload) -> Message {
        Message { version: crate::OFP_VERSION, xid, payload }
    }

    /// HELLO offering OpenFlow 1.5 only (version bitmap 0x40), as npagent sends it.
    pub fn hello_of15(xid: u32) -> Message {
        Message::new(xid, Payload::Hello(Hello::with_versions(&[crate::OFP_VERSION])))
    }

    /// The ECHO_REPLY answering this message if it is an ECHO_REQUEST (same xid and payload).
    pub fn echo_reply(&self) -> Option<Message> {
        match &self.payload {
            Payload::EchoRequest(data) => {
                Some(Message { version: self.version, xid: self.xid, payload: Payload::EchoReply(data.clone()) })
            }
            _ => None,
        }
    }

    /// A BUNDLE_ADD_MESSAGE carrying `inner`, whose version and xid are set to the outer ones.
    pub fn bundle_add(xid: u32, bundle_id: u32, flags: u16, mut inner: Message) -> Message {
        inner.version = crate::OFP_VERSION;
        inner.xid = xid;
        Message::new(
            xid,
            Payload::BundleAdd(BundleAdd { bundle_id, flags, message: Box::new(inner), properties: Bytes::new() }),
        )
    }

    /// A BUNDLE_CONTROL message.
    pub fn bundle_control(xid: u32, bundle_id: u32, ctrl_type: u16, flags: u16) -> Message {
        Message::new(
            xid,
            Payload::BundleControl(BundleControl { bundle_id, ctrl_type, flags, properties: Bytes::new() }),
        )
    }

    /// The type this message has in its header.
    pub fn kind(&self) -> MsgKind {
        match &self.payload {
            Payload::Hello(_) => MsgKind::Hello,
            Payload::Error(_) => MsgKind::Error,
            Payload::EchoRequest(_) => MsgKind::EchoRequest,
            Payload::EchoReply(_) => MsgKind::EchoReply,
            Payload::FeaturesRequest => MsgKind::FeaturesRequest,
            Payload::FeaturesReply(_) => MsgKind::FeaturesReply,
            Payload::GetConfigRequest => MsgKind::GetConfigRequest,
            Payload::GetConfigReply(_) => MsgKind::GetConfigReply,
            Payload::SetConfig(_) => MsgKind::SetConfig,
            Payload::PacketIn(_) => MsgKind::PacketIn,
            Payload::PacketOut(_) => MsgKind::PacketOut,
            Payload::FlowMod(_) => MsgKind::FlowMod,
            Payload::GroupMod(_) => MsgKind::GroupMod,
            Payload::MultipartRequest(_) => MsgKind::MultipartRequest,
            Payload::MultipartReply(_) => MsgKind::MultipartReply,
            Payload::BarrierRequest => MsgKind::BarrierRequest,
            Payload::BarrierReply => MsgKind::BarrierReply,
            Payload::RoleRequest(_) => MsgKind::RoleRequest,
            Payload::RoleReply(_) => MsgKind::RoleReply,
            Payload::MeterMod(_) => MsgKind::MeterMod,
            Payload::BundleControl(_) => MsgKind::BundleControl,
            Payload::BundleAdd(_) => MsgKind::BundleAddMessage,
            Payload::SetPacketInFormat(_)
            | Payload::SetControllerId(_)
            | Payload::PacketIn2(_)
            | Payload::Resume(_)
            | Payload::Experimenter { .. } => MsgKind::Experimenter,
            Payload::Unknown { msg_type, .. } => MsgKind::from(*msg_type),
        }
    }

    /// OVS's name for the message type (see [`Payload::type_name`]).
    pub fn type_name(&self) -> Option<&'static str> {
        self.payload.type_name()
    }

    /// Parses exactly one whole message: `buf.len()` must equal the header's length field.
    pub fn parse(buf: &[u8]) -> Result<Message> {
        let h = Header::parse(buf)?;
        let len = usize::from(h.length);
        if len > buf.len() {
            return Err(Error::Truncated { what: "ofp_header length", need: len, have: buf.len() });
        }
        if len < buf.len() {
            return Err(Error::BadLength { what: "ofp_header length (bytes after the message)", len });
        }
        let body = &buf[Header::LEN..];
        let payload = Self::parse_payload(h.version, h.kind, h.xid, body)?;
        Ok(Message { version: h.version, xid: h.xid, payload })
    }

    fn parse_payload(version: u8, kind: MsgKind, xid: u32, body: &[u8]) -> Result<Payload> {
        if !is_modelled(version, kind) {
            return Ok(Payload::Unknown { msg_type: kind.into(), body: bytes(body) });
        }
        Ok(match kind {
            MsgKind::Hello => Payload::Hello(Hello::parse(body)?),
            MsgKind::Error => Payload::Error(ErrorMsg::parse(body)?),
            MsgKind::EchoRequest => Payload::EchoRequest(bytes(body)),
            MsgKind::EchoReply => Payload::EchoReply(bytes(body)),
            MsgKind::Experimenter => Self::parse_experimenter(body)?,
            MsgKind::FeaturesRequest => {
                empty(body, "OFPT_FEATURES_REQUEST")?;
                Payload::FeaturesRequest
            }
            MsgKind::FeaturesReply => Payload::FeaturesReply(FeaturesReply::parse(body)?),
            MsgKind::GetConfigRequest => {
                empty(body, "OFPT_GET_CONFIG_REQUEST")?;
                Payload::GetConfigRequest
            }
            MsgKind::GetConfigReply => Payload::GetConfigReply(SwitchConfig::parse(body)?),
            MsgKind::SetConfig => Payload::SetConfig(SwitchConfig::parse(body)?),
            MsgKind::PacketIn => Payload::PacketIn(PacketIn::parse(body)?),
            MsgKind::PacketOut => Payload::PacketOut(PacketOut::parse(body)?),
            MsgKind::FlowMod => Payload::FlowMod(FlowMod::parse(body)?),
            MsgKind::GroupMod => Payload::GroupMod(GroupMod::parse(body)?),
            MsgKind::MultipartRequest => Payload::MultipartRequest(MultipartRequest::parse(body)?),
            MsgKind::MultipartReply => Payload::MultipartReply(MultipartReply::parse(body)?),
            MsgKind::BarrierRequest => {
                empty(body, "OFPT_BARRIER_REQUEST")?;
                Payload::BarrierRequest
            }
            MsgKind::BarrierReply => {
                empty(body, "OFPT_BARRIER_REPLY")?;
                Payload::BarrierReply
            }
            MsgKind::RoleRequest => Payload::RoleRequest(Role::parse(body)?),
            MsgKind::RoleReply => Payload::RoleReply(Role::parse(body)?),
            MsgKind::MeterMod => Payload::MeterMod(MeterMod::parse(body)?),
            MsgKind::BundleControl => Payload::BundleControl(BundleControl::parse(body)?),
            MsgKind::BundleAddMessage => Payload::BundleAdd(BundleAdd::parse(version, xid, body)?),
            _ => Payload::Unknown { msg_type: kind.into(), body: bytes(body) },
        })
    }

    fn parse_experimenter(body: &[u8]) -> Result<Payload> {
        let mut r = Reader::new(body, "ofp_experimenter_header");
        let experimenter = r.u32()?;
        let exp_type = r.u32()?;
        let rest = r.rest();
        if experimenter != crate::NX_VENDOR_ID || !is_modelled_nx(exp_type) {
            return Ok(Payload::Experimenter { experimenter, exp_type, body: bytes(rest) });
        }
        Ok(match exp_type {
            nx_type::SET_PACKET_IN_FORMAT => {
                let mut r = Reader::new(rest, "NXT_SET_PACKET_IN_FORMAT");
                let format = r.u32()?;
                r.finish()?;
                Payload::SetPacketInFormat(format)
            }
            nx_type::SET_CONTROLLER_ID => {
                let mut r = Reader::new(rest, "NXT_SET_CONTROLLER_ID");
                r.zeros(6)?;
                let id = r.u16()?;
                r.finish()?;
                Payload::SetControllerId(id)
            }
            nx_type::PACKET_IN2 => Payload::PacketIn2(PacketIn2::parse(rest)?),
            nx_type::RESUME => Payload::Resume(PacketIn2::parse(rest)?),
            _ => Payload::Experimenter { experimenter, exp_type, body: bytes(rest) },
        })
    }

    /// Length of the whole message on the wire, header included.
    pub fn buffer_len(&self) -> usize {
        Header::LEN + self.body_len()
    }

    fn body_len(&self) -> usize {
        const NX: usize = EXPERIMENTER_HEADER_LEN;
        match &self.payload {
            Payload::Hello(h) => h.buffer_len(),
            Payload::Error(e) => e.buffer_len(),
            Payload::EchoRequest(d) | Payload::EchoReply(d) => d.len(),
            Payload::FeaturesRequest | Payload::GetConfigRequest | Payload::BarrierRequest | Payload::BarrierReply => 0,
            Payload::FeaturesReply(f) => f.buffer_len(),
            Payload::GetConfigReply(c) | Payload::SetConfig(c) => c.buffer_len(),
            Payload::PacketIn(p) => p.buffer_len(),
            Payload::PacketOut(p) => p.buffer_len(),
            Payload::FlowMod(f) => f.buffer_len(),
            Payload::GroupMod(g) => g.buffer_len(),
            Payload::MultipartRequest(m) => m.buffer_len(),
            Payload::MultipartReply(m) => m.buffer_len(),
            Payload::RoleRequest(r) | Payload::RoleReply(r) => r.buffer_len(),
            Payload::MeterMod(m) => m.buffer_len(),
            Payload::BundleControl(b) => b.buffer_len(),
            Payload::BundleAdd(b) => b.buffer_len(),
            Payload::SetPacketInFormat(_) => NX + 4,
            Payload::SetControllerId(_) => NX + 8,
            Payload::PacketIn2(p) | Payload::Resume(p) => NX + p.buffer_len(),
            Payload::Experimenter { body, .. } => NX + body.len(),
            Payload::Unknown { body, .. } => body.len(),
        }
    }

    /// Checks that the message can be emitted and would parse back to itself.
    pub(crate) fn check(&self) -> Result<()> {
        let len = self.buffer_len();
        if len > crate::MAX_MESSAGE_LEN {
            return Err(Error::TooLong { what: "OpenFlow message", len });
        }
        let kind = self.kind();
        match &self.payload {
            Payload::Unknown { msg_type, .. } => {
                if is_modelled(self.version, *msg_type) {
                    return Err(Error::BadValue {
                        what: "Payload::Unknown of a modelled type",
                        value: (*msg_type).into(),
                    });
                }
                return Ok(());
            }
            _ if !is_modelled(self.version, kind) => return Err(Error::BadVersion(self.version)),
            _ => {}
        }
        match &self.payload {
            Payload::Hello(h) => h.check(),
            Payload::Error(e) => e.check(),
            Payload::FlowMod(f) => f.check(),
            Payload::MultipartRequest(m) => m.check(),
            Payload::MultipartReply(m) => m.check(),
            Payload::PacketOut(p) => p.check(),
            Payload::GroupMod(g) => g.check(),
            Payload::MeterMod(m) => m.check(),
            Payload::BundleAdd(b) => b.check(self.version, self.xid),
            Payload::PacketIn2(p) | Payload::Resume(p) => p.check(),
            Payload::Experimenter { experimenter, exp_type, .. } => {
                if *experimenter == crate::NX_VENDOR_ID && is_modelled_nx(*exp_type) {
                    Err(Error::BadValue {
                        what: "Payload::Experimenter of a modelled NX subtype",
                        value: (*exp_type).into(),
                    })
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }

    /// Writes the whole message (exactly `buffer_len()` bytes). On error nothing is written.
    pub fn emit(&self, out: &mut BytesMut) -> Result<()> {
        self.check()?;
        let len = self.buffer_len();
        out.reserve(len);
        let start = out.len();
        self.emit_unchecked(out, len);
        debug_assert_eq!(out.len() - start, len, "emit length of {:?}", self.type_name());
        Ok(())
    }

    /// Writes the message, whose `buffer_len()` is `len`, as it is: [`Message::check`] passed
    /// (for this message, or for the one it is bundled in), so `len` fits the header's field.
    pub(crate) fn emit_unchecked(&self, out: &mut BytesMut, len: usize) {
        let length = crate::wire::part_len16(len);
        Header { version: self.version, kind: self.kind(), length, xid: self.xid }.emit(out);
        let nx = |out: &mut BytesMut, exp_type: u32| {
            out.put_u32(crate::NX_VENDOR_ID);
            out.put_u32(exp_type);
        };
        match &self.payload {
            Payload::Hello(h) => h.emit(out),
            Payload::Error(e) => e.emit(out),
            Payload::EchoRequest(d) | Payload::EchoReply(d) => out.put_slice(d),
            Payload::FeaturesRequest | Payload::GetConfigRequest | Payload::BarrierRequest | Payload::BarrierReply => {}
            Payload::FeaturesReply(f) => f.emit(out),
            Payload::GetConfigReply(c) | Payload::SetConfig(c) => c.emit(out),
            Payload::PacketIn(p) => p.emit(out),
            Payload::PacketOut(p) => p.emit(out),
            Payload::FlowMod(f) => f.emit(out),
            Payload::GroupMod(g) => g.emit(out),
            Payload::MultipartRequest(m) => m.emit(out),
            Payload::MultipartReply(m) => m.emit(out),
            Payload::RoleRequest(r) | Payload::RoleReply(r) => r.emit(out),
            Payload::MeterMod(m) => m.emit(out),
            Payload::BundleControl(b) => b.emit(out),
            Payload::BundleAdd(b) => b.emit(out),
            Payload::SetPacketInFormat(f) => {
                nx(out, nx_type::SET_PACKET_IN_FORMAT);
                out.put_u32(*f);
            }
            Payload::SetControllerId(id) => {
                nx(out, nx_type::SET_CONTROLLER_ID);
                out.put_bytes(0, 6);
                out.put_u16(*id);
            }
            Payload::PacketIn2(p) => {
                nx(out, nx_type::PACKET_IN2);
                p.emit(out);
            }
            Payload::Resume(p) => {
                nx(out, nx_type::RESUME);
                p.emit(out);
            }
            Payload::Experimenter { experimenter, exp_type, body } => {
                out.put_u32(*experimenter);
                out.put_u32(*exp_type);
                out.put_slice(body);
            }
            Payload::Unknown { body, .. } => out.put_slice(body),
        }
    }

    /// Emits into a fresh buffer.
    pub fn to_bytes(&self) -> Result<Bytes> {
        let mut out = BytesMut::with_capacity(self.buffer_len());
        self.emit(&mut out)?;
        Ok(out.freeze())
    }
}

impl Payload {
    /// OVS's name for the message type, as `ovs-ofctl ofp-print` starts its line
    /// (e.g. `OFPT_FLOW_MOD`, `NXT_PACKET_IN2`); `None` for unknown types.
    pub fn type_name(&self) -> Option<&'static str> {
        Some(match self {
            Payload::Hello(_) => "OFPT_HELLO",
            Payload::Error(_) => "OFPT_ERROR",
            Payload::EchoRequest(_) => "OFPT_ECHO_REQUEST",
            Payload::EchoReply(_) => "OFPT_ECHO_REPLY",
            Payload::FeaturesRequest => "OFPT_FEATURES_REQUEST",
            Payload::FeaturesReply(_) => "OFPT_FEATURES_REPLY",
            Payload::GetConfigRequest => "OFPT_GET_CONFIG_REQUEST",
            Payload::GetConfigReply(_) => "OFPT_GET_CONFIG_REPLY",
            Payload::SetConfig(_) => "OFPT_SET_CONFIG",
            Payload::PacketIn(_) => "OFPT_PACKET_IN",
            Payload::PacketOut(_) => "OFPT_PACKET_OUT",
            Payload::FlowMod(_) => "OFPT_FLOW_MOD",
            Payload::GroupMod(_) => "OFPT_GROUP_MOD",
            Payload::MultipartRequest(_) => "OFPT_MULTIPART_REQUEST",
            Payload::MultipartReply(_) => "OFPT_MULTIPART_REPLY",
            Payload::BarrierRequest => "OFPT_BARRIER_REQUEST",
            Payload::BarrierReply => "OFPT_BARRIER_REPLY",
            Payload::RoleRequest(_) => "OFPT_ROLE_REQUEST",
            Payload::RoleReply(_) => "OFPT_ROLE_REPLY",
            Payload::MeterMod(_) => "OFPT_METER_MOD",
            Payload::BundleControl(_) => "OFPT_BUNDLE_CONTROL",
            Payload::BundleAdd(_) => "OFPT_BUNDLE_ADD_MESSAGE",
            Payload::SetPacketInFormat(_) => "NXT_SET_PACKET_IN_FORMAT",
            Payload::SetControllerId(_) => "NXT_SET_CONTROLLER_ID",
            Payload::PacketIn2(_) => "NXT_PACKET_IN2",
            Payload::Resume(_) => "NXT_RESUME",
            Payload::Experimenter { .. } | Payload::Unknown { .. } => return None,
        })
    }
}
