//! `ofp`: the OpenFlow 1.5 (wire version 0x06) and Nicira-extension codec npagent speaks to
//! Open vSwitch.
//!
//! Every wire structure is an owned value type with `parse`, `buffer_len()` and `emit`, in one
//! of three shapes:
//! - **Items of a list** (an OXM field, a `Match`, an action, an instruction, a flow or meter
//!   stats entry, a flow monitor request or update): `parse(&[u8]) -> Result<(T, usize)>`
//!   reads one item from the start of the buffer and returns the bytes it took; lists of them
//!   have `parse_*`/`emit_*` helpers (`parse_actions`, `emit_oxms`, ...).
//! - **Message bodies** (what follows the 8-byte header, or the experimenter header for a
//!   Nicira message: `FlowMod`, `PacketIn2`, `BundleAdd`, ...): `parse(body: &[u8]) -> Result<T>`
//!   takes the whole body; only [`BundleAdd::parse`] also takes the header's version and xid,
//!   because OVS checks the inner message against them before parsing it. The parts only a
//!   body holds (group buckets, meter bands, hello elements) are parsed and emitted by it.
//! - **Whole messages**: [`Message`] (`parse` takes exactly one message, header included) and
//!   the BUNDLE_ADD_MESSAGE written straight from a flow_mod
//!   ([`body::emit_bundled_flow_mod`]). Their `emit` returns a `Result`: it checks the message
//!   first ([`Error::TooLong`] over [`MAX_MESSAGE_LEN`], a payload that would not parse back)
//!   and writes nothing on error.
//!
//! Items and bodies `emit(&mut BytesMut)` what they hold and cannot fail. Their 16-bit length
//! fields cannot overflow within a checked message (a part is no longer than its message);
//! called on their own with more than a message can hold, debug builds assert. The one 8-bit
//! length, an OXM's, is the caller's to respect for the raw `Oxm::Experimenter` and
//! `Oxm::Unknown` (parsed ones do). The [`Header`] is fixed-size: [`Header::LEN`].
//!
//! To tell what a message is without decoding its body (one that does not decode, say), read
//! its [`Header`] with [`Header::peek`], or with its subtype with [`Peek::read`]; callers never
//! index message bytes themselves.
//!
//! # Contract
//! - Parsing never panics, whatever the input: every length field is checked against the
//!   buffer and against the structure's minimum header before it is used, with checked
//!   arithmetic. A malformed input is an [`Error`] naming what is wrong.
//! - `emit` writes exactly `buffer_len()` bytes.
//! - `parse(emit(v)) == v` for every value this crate can emit, and `emit(parse(b)) == b` for
//!   every byte string `parse` accepts: unknown TLVs (OXM fields, actions, instructions,
//!   properties, message types) are kept as raw bytes so they round-trip.
//!
//! # Padding
//! Padding bytes are zero on emit. On parse, the one rule is: padding that a TLV's own length
//! covers (the tail of an action or an instruction) may only be non-zero in a TLV this crate
//! then keeps raw (`Action::Unknown`, `Instruction::Unknown`), so the list still parses and
//! round-trips byte-identically (OVS's own tests send such padding, and OVS ignores it:
//! [`Instruction::lenient`] reads a raw instruction that way); any other non-zero padding
//! (between a message's fixed fields, after a match or a property) is
//! [`Error::BadPadding`].
//!
//! The crate has no runtime, no logging and no I/O; the `codec` feature adds a
//! `tokio_util::codec` framing layer ([`codec::OfpCodec`]) and `serde` adds serde derives.

pub mod action;
pub mod body;
#[cfg(feature = "codec")]
pub mod codec;
pub mod error;
pub mod flow_mod;
pub mod flow_monitor;
pub mod header;
pub mod instruction;
pub mod message;
pub mod multipart;
pub mod numbers;
pub mod oxm;
pub mod packet_in2;
pub mod peek;
pub mod prop;
pub mod text;
mod wire;

pub use action::{Action, Controller2, Ct, CtZoneSrc};
pub use body::*;
pub use error::Error;
pub use flow_mod::{FlowMod, FlowModCommand};
pub use flow_monitor::{FlowMonitorRequest, FlowUpdate, FlowUpdateFull};
pub use header::{Header, MsgKind};
pub use instruction::Instruction;
pub use message::{Message, Payload};
pub use multipart::{
    FlowStats, FlowStatsRequest, MeterStats, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
};
pub use oxm::{Masked, Match, Oxm};
pub use packet_in2::PacketIn2;
pub use peek::Peek;
pub use wire::pad8;

/// The OpenFlow version byte this crate speaks: 0x06 = OpenFlow 1.5.
pub const OFP_VERSION: u8 = 0x06;
/// Nicira's experimenter (vendor) id, used by OVS's extensions.
pub const NX_VENDOR_ID: u32 = 0x0000_2320;
/// Largest OpenFlow message: the header's length field is 16 bits.
pub const MAX_MESSAGE_LEN: usize = 65_535;

/// Well-known port numbers (OF1.1+ 32-bit).
pub mod port {
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// `max_len`/`miss_send_len` meaning "send the whole packet, not buffered" (OFPCML_NO_BUFFER).
pub const MAX_LEN_NO_BUFFER: u16 = 0xffff;
/// Buffer id meaning "not buffered".
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// Group id "any" (flow_mod delete filter).
pub const GROUP_ANY: u32 = 0xffff_ffff;
/// Table id "all" (flow_mod delete, flow stats request).
pub const TABLE_ALL: u8 = 0xff;
