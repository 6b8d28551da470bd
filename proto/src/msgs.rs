//! Bodies of the smaller messages: parse (body after the 8-byte header), `buffer_len` (body
//! only) and emit (body only). [`crate::Message`] adds the header and dispatches on the type.
//!
//! Padding and reserved bytes must be zero: a non-zero pad is an error, because keeping it
//! would need a field and dropping it would break `emit(parse(b)) == b`.

use crate::action::{self, Action};
use crate::error::{Error, Result};
use crate::oxm::Match;
use crate::wire::{len16, pad8, parse_list, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_HELLO: the version bitmap element(s) and any unknown elements kept raw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Hello {
    pub elements: Vec<HelloElement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum HelloElement {
    /// OFPHET_VERSIONBITMAP: bit v of word 0 = version v.
    VersionBitmap(Vec<u32>),
    /// Unknown element type with its payload.
    Unknown { element_type: u16, payload: Bytes },
    /// Fewer than 4 bytes after the last element (OVS ignores them; kept so they round-trip).
    /// Only valid as the last element.
    Trailing(Bytes),
}

/// OFPT_ERROR: standard (type, code) or experimenter (0xffff, exp_code, experimenter).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ErrorMsg {
    Standard { error_type: u16, code: u16, data: Bytes },
    Experimenter { exp_code: u16, experimenter: u32, data: Bytes },
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FeaturesReply {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
    pub reserved: u32,
}

/// GET_CONFIG_REPLY / SET_CONFIG body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// ROLE_REQUEST / ROLE_REPLY body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Role {
    /// 0 nochange, 1 equal, 2 primary, 3 secondary.
    pub role: u32,
    pub generation_id: u64,
}

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

/// OFPT_METER_MOD.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MeterMod {
    /// 0 add, 1 modify, 2 delete.
    pub command: u16,
    /// 1 kbps, 2 pktps, 4 burst, 8 stats.
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MeterBand {
    Drop { rate: u32, burst_size: u32 },
    DscpRemark { rate: u32, burst_size: u32, prec_level: u8 },
    Unknown { band_type: u16, rate: u32, burst_size: u32, payload: Bytes },
}

/// OFPT_GROUP_MOD (OF1.5 layout with command_bucket_id; buckets with actions).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupMod {
    /// 0 add, 1 modify, 2 delete, 3 insert_bucket, 4 remove_bucket.
    pub command: u16,
    /// 0 all, 1 select, 2 indirect, 3 fast failover.
    pub group_type: u8,
    pub group_id: u32,
    pub command_bucket_id: u32,
    pub buckets: Vec<Bucket>,
    /// Group properties, raw.
    pub properties: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Bucket {
    pub bucket_id: u32,
    pub actions: Vec<Action>,
    /// Bucket properties (weight, watch_port, watch_group), raw.
    pub properties: Bytes,
}

/// OFPT_PACKET_OUT (OF1.5: the in_port travels in the match).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketOut {
    pub buffer_id: u32,
    pub match_: Match,
    pub actions: Vec<Action>,
    pub data: Bytes,
}

/// OFPT_PACKET_IN (OF1.3+ layout).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub match_: Match,
    pub data: Bytes,
}


// ---------------------------------------------------------------------------------------------
// Reading helper
// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// HELLO
// ---------------------------------------------------------------------------------------------

/// OFPHET_VERSIONBITMAP.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;

impl Hello {
    /// A HELLO offering exactly the given versions (e.g. `&[6]` for OpenFlow 1.5 only).
    pub fn with_versions(versions: &[u8]) -> Hello {
        let mut words = Vec::new();
        for &v in versions {
            let word = usize::from(v / 32);
            if words.len() <= word {
                words.resize(word + 1, 0u32);
            }
            words[word] |= 1 << (v % 32);
        }
        Hello { elements: vec![HelloElement::VersionBitmap(words)] }
    }

    /// The first version bitmap element, if any.
    pub fn version_bitmap(&self) -> Option<&[u32]> {
        self.elements.iter().find_map(|e| match e {
            HelloElement::VersionBitmap(w) => Some(w.as_slice()),
            _ => None,
        })
    }

    /// Whether the peer offers `version`: from the bitmap when there is one, otherwise
    /// (OpenFlow 1.0-style HELLO) when `version <= header_version`.
    pub fn offers(&self, header_version: u8, version: u8) -> bool {
        match self.version_bitmap() {
            Some(words) => words
                .get(usize::from(version / 32))
                .is_some_and(|w| w & (1 << (version % 32)) != 0),
            None => version <= header_version,
        }
    }

    /// Parses the element list.
    pub fn parse(body: &[u8]) -> Result<Hello> {
        const WHAT: &str = "ofp_hello_elem";
        let mut elements = Vec::new();
        let mut rest = body;
        while !rest.is_empty() {
            if rest.len() < 4 {
                elements.push(HelloElement::Trailing(Bytes::copy_from_slice(rest)));
                break;
            }
            let element_type = u16::from_be_bytes([rest[0], rest[1]]);
            let len = usize::from(u16::from_be_bytes([rest[2], rest[3]]));
            if len < 4 || len > rest.len() {
                return Err(Error::BadLength { what: WHAT, len });
            }
            let padded = pad8(len);
            let mut r = Reader::new(rest, WHAT);
            let whole = r.take(len)?;
            r.zeros(padded - len)?;
            let payload = &whole[4..];
            elements.push(if element_type == HELLO_ELEM_VERSIONBITMAP {
                if payload.len() % 4 != 0 {
                    return Err(Error::BadLength { what: "OFPHET_VERSIONBITMAP", len });
                }
                HelloElement::VersionBitmap(
                    payload.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect(),
                )
            } else {
                HelloElement::Unknown { element_type, payload: Bytes::copy_from_slice(payload) }
            });
            rest = &rest[padded..];
        }
        Ok(Hello { elements })
    }

    /// Body length on the wire.
    pub fn buffer_len(&self) -> usize {
        self.elements
            .iter()
            .map(|e| match e {
                HelloElement::VersionBitmap(w) => pad8(4 + 4 * w.len()),
                HelloElement::Unknown { payload, .. } => pad8(4 + payload.len()),
                HelloElement::Trailing(b) => b.len(),
            })
            .sum()
    }

    /// Checks that the value can be emitted and parses back to itself.
    pub(crate) fn check(&self) -> Result<()> {
        let n = self.elements.len();
        for (i, e) in self.elements.iter().enumerate() {
            match e {
                HelloElement::VersionBitmap(w) => {
                    len16("OFPHET_VERSIONBITMAP", 4 + 4 * w.len())?;
                }
                HelloElement::Unknown { element_type, payload } => {
                    if *element_type == HELLO_ELEM_VERSIONBITMAP {
                        return Err(Error::BadValue { what: "ofp_hello_elem type", value: 1 });
                    }
                    len16("ofp_hello_elem", 4 + payload.len())?;
                }
                HelloElement::Trailing(b) => {
                    if b.is_empty() || b.len() >= 4 || i + 1 != n {
                        return Err(Error::BadLength { what: "hello trailing bytes", len: b.len() });
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes the element list (call [`Hello::check`] first).
    pub fn emit(&self, out: &mut BytesMut) {
        for e in &self.elements {
            match e {
                HelloElement::VersionBitmap(words) => {
                    let len = 4 + 4 * words.len();
                    out.put_u16(HELLO_ELEM_VERSIONBITMAP);
                    out.put_u16(len as u16);
                    for w in words {
                        out.put_u32(*w);
                    }
                    out.put_bytes(0, pad8(len) - len);
                }
                HelloElement::Unknown { element_type, payload } => {
                    crate::prop::put_prop(out, *element_type, payload);
                }
                HelloElement::Trailing(b) => out.put_slice(b),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ERROR
// ---------------------------------------------------------------------------------------------

/// `ofp_error_msg.type` value announcing an experimenter error (OF1.2+).
pub const ERROR_TYPE_EXPERIMENTER: u16 = 0xffff;

/// Error names with their OpenFlow 1.5 encoding, as `ovs-ofctl print-error NAME` shows them:
/// (experimenter: 0 for standard errors, type (or exp_code), code, name).
pub static ERROR_NAMES: &[(u32, u16, u16, &str)] = &[
    (0, 0, 0, "OFPHFC_INCOMPATIBLE"),
    (0, 0, 1, "OFPHFC_EPERM"),
    (0, 1, 0, "OFPBRC_BAD_VERSION"),
    (0, 1, 1, "OFPBRC_BAD_TYPE"),
    (0, 1, 2, "OFPBRC_BAD_STAT"),
    (0, 1, 3, "OFPBRC_BAD_VENDOR"),
    (0, 1, 4, "OFPBRC_BAD_SUBTYPE"),
    (0, 1, 5, "OFPBRC_EPERM"),
    (0, 1, 6, "OFPBRC_BAD_LEN"),
    (0, 1, 7, "OFPBRC_BUFFER_EMPTY"),
    (0, 1, 8, "OFPBRC_BUFFER_UNKNOWN"),
    (0, 1, 9, "OFPBRC_BAD_TABLE_ID"),
    (0, 1, 10, "OFPBRC_IS_SECONDARY"),
    (0, 1, 11, "OFPBRC_BAD_PORT"),
    (0, 1, 12, "OFPBRC_BAD_PACKET"),
    (0, 1, 13, "OFPBRC_MULTIPART_BUFFER_OVERFLOW"),
    (0, 2, 0, "OFPBAC_BAD_TYPE"),
    (0, 2, 1, "OFPBAC_BAD_LEN"),
    (0, 2, 2, "OFPBAC_BAD_VENDOR"),
    (0, 2, 3, "OFPBAC_BAD_VENDOR_TYPE"),
    (0, 2, 4, "OFPBAC_BAD_OUT_PORT"),
    (0, 2, 5, "OFPBAC_BAD_ARGUMENT"),
    (0, 2, 6, "OFPBAC_EPERM"),
    (0, 2, 7, "OFPBAC_TOO_MANY"),
    (0, 2, 8, "OFPBAC_BAD_QUEUE"),
    (0, 2, 9, "OFPBAC_BAD_OUT_GROUP"),
    (0, 2, 10, "OFPBAC_MATCH_INCONSISTENT"),
    (0, 2, 11, "OFPBAC_UNSUPPORTED_ORDER"),
    (0, 2, 12, "OFPBAC_BAD_TAG"),
    (0, 2, 13, "OFPBAC_BAD_SET_TYPE"),
    (0, 2, 14, "OFPBAC_BAD_SET_LEN"),
    (0, 2, 15, "OFPBAC_BAD_SET_ARGUMENT"),
    (0, 2, 16, "OFPBAC_BAD_SET_MASK"),
    (0, 2, 17, "OFPBAC_BAD_METER"),
    (0, 3, 0, "OFPBIC_UNKNOWN_INST"),
    (0, 3, 1, "OFPBIC_UNSUP_INST"),
    (0, 3, 2, "OFPBIC_BAD_TABLE_ID"),
    (0, 3, 3, "OFPBIC_UNSUP_METADATA"),
    (0, 3, 4, "OFPBIC_UNSUP_METADATA_MASK"),
    (0, 3, 5, "OFPBIC_BAD_EXPERIMENTER"),
    (0, 3, 6, "OFPBIC_BAD_EXP_TYPE"),
    (0, 3, 7, "OFPBIC_BAD_LEN"),
    (0, 3, 8, "OFPBIC_EPERM"),
    (0, 3, 9, "OFPBIC_DUP_INST"),
    (0, 4, 0, "OFPBMC_BAD_TYPE"),
    (0, 4, 1, "OFPBMC_BAD_LEN"),
    (0, 4, 2, "OFPBMC_BAD_TAG"),
    (0, 4, 3, "OFPBMC_BAD_DL_ADDR_MASK"),
    (0, 4, 4, "OFPBMC_BAD_NW_ADDR_MASK"),
    (0, 4, 5, "OFPBMC_BAD_WILDCARDS"),
    (0, 4, 6, "OFPBMC_BAD_FIELD"),
    (0, 4, 7, "OFPBMC_BAD_VALUE"),
    (0, 4, 8, "OFPBMC_BAD_MASK"),
    (0, 4, 9, "OFPBMC_BAD_PREREQ"),
    (0, 4, 10, "OFPBMC_DUP_FIELD"),
    (0, 4, 11, "OFPBMC_EPERM"),
    (0, 5, 0, "OFPFMFC_UNKNOWN"),
    (0, 5, 1, "OFPFMFC_TABLE_FULL"),
    (0, 5, 2, "OFPFMFC_BAD_TABLE_ID"),
    (0, 5, 3, "OFPFMFC_OVERLAP"),
    (0, 5, 4, "OFPFMFC_EPERM"),
    (0, 5, 5, "OFPFMFC_BAD_TIMEOUT"),
    (0, 5, 6, "OFPFMFC_BAD_COMMAND"),
    (0, 5, 7, "OFPFMFC_BAD_FLAGS"),
    (0, 6, 0, "OFPGMFC_GROUP_EXISTS"),
    (0, 6, 1, "OFPGMFC_INVALID_GROUP"),
    (0, 6, 2, "OFPGMFC_WEIGHT_UNSUPPORTED"),
    (0, 6, 3, "OFPGMFC_OUT_OF_GROUPS"),
    (0, 6, 4, "OFPGMFC_OUT_OF_BUCKETS"),
    (0, 6, 5, "OFPGMFC_CHAINING_UNSUPPORTED"),
    (0, 6, 6, "OFPGMFC_WATCH_UNSUPPORTED"),
    (0, 6, 7, "OFPGMFC_LOOP"),
    (0, 6, 8, "OFPGMFC_UNKNOWN_GROUP"),
    (0, 6, 9, "OFPGMFC_CHAINED_GROUP"),
    (0, 6, 10, "OFPGMFC_BAD_TYPE"),
    (0, 6, 11, "OFPGMFC_BAD_COMMAND"),
    (0, 6, 12, "OFPGMFC_BAD_BUCKET"),
    (0, 6, 13, "OFPGMFC_BAD_WATCH"),
    (0, 6, 14, "OFPGMFC_EPERM"),
    (0, 6, 15, "OFPGMFC_UNKNOWN_BUCKET"),
    (0, 6, 16, "OFPGMFC_BUCKET_EXISTS"),
    (0, 7, 0, "OFPPMFC_BAD_PORT"),
    (0, 7, 1, "OFPPMFC_BAD_HW_ADDR"),
    (0, 7, 2, "OFPPMFC_BAD_CONFIG"),
    (0, 7, 3, "OFPPMFC_BAD_ADVERTISE"),
    (0, 7, 4, "OFPPMFC_EPERM"),
    (0, 8, 0, "OFPTMFC_BAD_TABLE"),
    (0, 8, 1, "OFPTMFC_BAD_CONFIG"),
    (0, 8, 2, "OFPTMFC_EPERM"),
    (0, 10, 0, "OFPSCFC_BAD_FLAGS"),
    (0, 10, 1, "OFPSCFC_BAD_LEN"),
    (0, 10, 2, "OFPSCFC_EPERM"),
    (0, 11, 0, "OFPRRFC_STALE"),
    (0, 11, 1, "OFPRRFC_UNSUP"),
    (0, 11, 2, "OFPRRFC_BAD_ROLE"),
    (0, 12, 0, "OFPMMFC_UNKNOWN"),
    (0, 12, 1, "OFPMMFC_METER_EXISTS"),
    (0, 12, 2, "OFPMMFC_INVALID_METER"),
    (0, 12, 3, "OFPMMFC_UNKNOWN_METER"),
    (0, 12, 4, "OFPMMFC_BAD_COMMAND"),
    (0, 12, 5, "OFPMMFC_BAD_FLAGS"),
    (0, 12, 6, "OFPMMFC_BAD_RATE"),
    (0, 12, 7, "OFPMMFC_BAD_BURST"),
    (0, 12, 8, "OFPMMFC_BAD_BAND"),
    (0, 12, 9, "OFPMMFC_BAD_BAND_VALUE"),
    (0, 12, 10, "OFPMMFC_OUT_OF_METERS"),
    (0, 12, 11, "OFPMMFC_OUT_OF_BANDS"),
    (0, 14, 0, "OFPBPC_BAD_TYPE"),
    (0, 14, 1, "OFPBPC_BAD_LEN"),
    (0, 14, 2, "OFPBPC_BAD_VALUE"),
    (0, 14, 3, "OFPBPC_TOO_MANY"),
    (0, 14, 4, "OFPBPC_DUP_TYPE"),
    (0, 14, 5, "OFPBPC_BAD_EXPERIMENTER"),
    (0, 14, 6, "OFPBPC_BAD_EXP_TYPE"),
    (0, 14, 7, "OFPBPC_BAD_EXP_VALUE"),
    (0, 14, 8, "OFPBPC_EPERM"),
    (0, 17, 0, "OFPBFC_UNKNOWN"),
    (0, 17, 1, "OFPBFC_EPERM"),
    (0, 17, 2, "OFPBFC_BAD_ID"),
    (0, 17, 3, "OFPBFC_BUNDLE_EXIST"),
    (0, 17, 4, "OFPBFC_BUNDLE_CLOSED"),
    (0, 17, 5, "OFPBFC_OUT_OF_BUNDLES"),
    (0, 17, 6, "OFPBFC_BAD_TYPE"),
    (0, 17, 7, "OFPBFC_BAD_FLAGS"),
    (0, 17, 8, "OFPBFC_MSG_BAD_LEN"),
    (0, 17, 9, "OFPBFC_MSG_BAD_XID"),
    (0, 17, 10, "OFPBFC_MSG_UNSUP"),
    (0, 17, 11, "OFPBFC_MSG_CONFLICT"),
    (0, 17, 12, "OFPBFC_MSG_TOO_MANY"),
    (0, 17, 13, "OFPBFC_MSG_FAILED"),
    (0, 17, 14, "OFPBFC_TIMEOUT"),
    (0, 17, 15, "OFPBFC_BUNDLE_IN_PROGRESS"),
    (crate::NX_VENDOR_ID, 2, 0, "NXBRC_NXM_INVALID"),
    (crate::NX_VENDOR_ID, 3, 0, "NXBRC_NXM_BAD_TYPE"),
    (crate::NX_VENDOR_ID, 4, 0, "NXBRC_MUST_BE_ZERO"),
    (crate::NX_VENDOR_ID, 5, 0, "NXBRC_BAD_REASON"),
    (crate::NX_VENDOR_ID, 10, 0, "NXBRC_UNENCODABLE_ERROR"),
    (crate::NX_VENDOR_ID, 11, 0, "NXBAC_MUST_BE_ZERO"),
    (crate::NX_VENDOR_ID, 12, 0, "NXFMFC_HARDWARE"),
    (crate::NX_VENDOR_ID, 13, 0, "NXFMFC_BAD_TABLE_ID"),
    (crate::NX_VENDOR_ID, 15, 0, "NXBAC_BAD_CONJUNCTION"),
    (crate::NX_VENDOR_ID, 22, 0, "OFPBFC_BAD_VERSION"),
    (crate::NX_VENDOR_ID, 34, 0, "NXR_NOT_SUPPORTED"),
    (crate::NX_VENDOR_ID, 35, 0, "NXR_STALE"),
    (crate::NX_VENDOR_ID, 42, 0, "NXBAC_CT_DATAPATH_SUPPORT"),
    (crate::NX_VENDOR_ID, 43, 0, "NXBMC_CT_DATAPATH_SUPPORT"),
];

impl ErrorMsg {
    /// The error OVS calls `name` (see [`ERROR_NAMES`]) with `data` (usually the offending
    /// request, or its first 64 bytes).
    pub fn from_name(name: &str, data: Bytes) -> Option<ErrorMsg> {
        ERROR_NAMES.iter().find(|e| e.3 == name).map(|&(exp, t, c, _)| {
            if exp == 0 {
                ErrorMsg::Standard { error_type: t, code: c, data }
            } else {
                ErrorMsg::Experimenter { exp_code: t, experimenter: exp, data }
            }
        })
    }

    /// OVS's name for this error in OpenFlow 1.5 (e.g. `OFPBFC_MSG_FAILED`,
    /// `NXBAC_BAD_CONJUNCTION`), if known.
    pub fn name(&self) -> Option<&'static str> {
        let (exp, t, c) = match *self {
            ErrorMsg::Standard { error_type, code, .. } => (0, error_type, code),
            ErrorMsg::Experimenter { exp_code, experimenter, .. } => (experimenter, exp_code, 0),
        };
        ERROR_NAMES.iter().find(|e| (e.0, e.1, e.2) == (exp, t, c)).map(|e| e.3)
    }

    /// The data: by convention the (start of the) request that failed.
    pub fn data(&self) -> &Bytes {
        match self {
            ErrorMsg::Standard { data, .. } | ErrorMsg::Experimenter { data, .. } => data,
        }
    }

    /// Parses an error body. Type 0xffff is always the experimenter form.
    pub fn parse(body: &[u8]) -> Result<ErrorMsg> {
        let mut r = Reader::new(body, "ofp_error_msg");
        let error_type = r.u16()?;
        let code = r.u16()?;
        if error_type == ERROR_TYPE_EXPERIMENTER {
            let experimenter = r.u32()?;
            Ok(ErrorMsg::Experimenter { exp_code: code, experimenter, data: Bytes::copy_from_slice(r.rest()) })
        } else {
            Ok(ErrorMsg::Standard { error_type, code, data: Bytes::copy_from_slice(r.rest()) })
        }
    }

    /// Body length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            ErrorMsg::Standard { data, .. } => 4 + data.len(),
            ErrorMsg::Experimenter { data, .. } => 8 + data.len(),
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        match self {
            ErrorMsg::Standard { error_type: ERROR_TYPE_EXPERIMENTER, .. } => {
                Err(Error::BadValue { what: "ofp_error_msg type", value: ERROR_TYPE_EXPERIMENTER.into() })
            }
            _ => Ok(()),
        }
    }

    /// Writes the body.
    pub fn emit(&self, out: &mut BytesMut) {
        match self {
            ErrorMsg::Standard { error_type, code, data } => {
                out.put_u16(*error_type);
                out.put_u16(*code);
                out.put_slice(data);
            }
            ErrorMsg::Experimenter { exp_code, experimenter, data } => {
                out.put_u16(ERROR_TYPE_EXPERIMENTER);
                out.put_u16(*exp_code);
                out.put_u32(*experimenter);
                out.put_slice(data);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// FEATURES_REPLY, SWITCH_CONFIG, ROLE
// ---------------------------------------------------------------------------------------------

impl FeaturesReply {
    /// Body length (OF1.3+: no port list).
    pub const LEN: usize = 24;

    pub fn parse(body: &[u8]) -> Result<FeaturesReply> {
        let mut r = Reader::new(body, "ofp_switch_features");
        let v = FeaturesReply {
            datapath_id: r.u64()?,
            n_buffers: r.u32()?,
            n_tables: r.u8()?,
            auxiliary_id: r.u8()?,
            capabilities: {
                r.zeros(2)?;
                r.u32()?
            },
            reserved: r.u32()?,
        };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u64(self.datapath_id);
        out.put_u32(self.n_buffers);
        out.put_u8(self.n_tables);
        out.put_u8(self.auxiliary_id);
        out.put_u16(0);
        out.put_u32(self.capabilities);
        out.put_u32(self.reserved);
    }
}

impl SwitchConfig {
    /// Body length.
    pub const LEN: usize = 4;
    /// `miss_send_len` value asking for whole packets (OFPCML_NO_BUFFER).
    pub const NO_BUFFER: u16 = 0xffff;

    pub fn parse(body: &[u8]) -> Result<SwitchConfig> {
        let mut r = Reader::new(body, "ofp_switch_config");
        let v = SwitchConfig { flags: r.u16()?, miss_send_len: r.u16()? };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.flags);
        out.put_u16(self.miss_send_len);
    }
}

/// Controller roles (`Role::role`).
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const PRIMARY: u32 = 2;
    pub const SECONDARY: u32 = 3;
}

impl Role {
    /// Body length.
    pub const LEN: usize = 16;

    pub fn parse(body: &[u8]) -> Result<Role> {
        let mut r = Reader::new(body, "ofp_role_request");
        let role = r.u32()?;
        r.zeros(4)?;
        let v = Role { role, generation_id: r.u64()? };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.role);
        out.put_u32(0);
        out.put_u64(self.generation_id);
    }
}

// ---------------------------------------------------------------------------------------------
// BUNDLE_CONTROL / BUNDLE_ADD_MESSAGE
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// METER_MOD
// ---------------------------------------------------------------------------------------------

/// Meter mod commands and flags.
pub mod meter {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
    pub const FLAG_KBPS: u16 = 1;
    pub const FLAG_PKTPS: u16 = 2;
    pub const FLAG_BURST: u16 = 4;
    pub const FLAG_STATS: u16 = 8;
    /// Meter id that rate-limits every packet-in of the bridge (`meter=controller`).
    pub const CONTROLLER: u32 = 0xffff_fffe;
    pub const ALL: u32 = 0xffff_ffff;
    pub const BAND_DROP: u16 = 1;
    pub const BAND_DSCP_REMARK: u16 = 2;
}

impl MeterBand {
    /// Parses one band from the start of `buf`; returns it and its length.
    fn parse(buf: &[u8]) -> Result<(MeterBand, usize)> {
        const WHAT: &str = "ofp_meter_band";
        let mut h = Reader::new(buf, WHAT);
        let band_type = h.u16()?;
        let len = usize::from(h.u16()?);
        let mut b = Reader::new(tlv(buf, len, 12, false, WHAT)?, WHAT);
        b.take(4)?;
        let rate = b.u32()?;
        let burst_size = b.u32()?;
        let band = match band_type {
            meter::BAND_DROP => {
                b.zeros(4)?;
                b.finish()?;
                MeterBand::Drop { rate, burst_size }
            }
            meter::BAND_DSCP_REMARK => {
                let prec_level = b.u8()?;
                b.zeros(3)?;
                b.finish()?;
                MeterBand::DscpRemark { rate, burst_size, prec_level }
            }
            _ => MeterBand::Unknown { band_type, rate, burst_size, payload: Bytes::copy_from_slice(b.rest()) },
        };
        Ok((band, len))
    }

    fn wire_len(&self) -> usize {
        match self {
            MeterBand::Drop { .. } | MeterBand::DscpRemark { .. } => 16,
            MeterBand::Unknown { payload, .. } => 12 + payload.len(),
        }
    }
}

impl MeterMod {
    pub fn parse(body: &[u8]) -> Result<MeterMod> {
        let mut r = Reader::new(body, "ofp_meter_mod");
        let command = r.u16()?;
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        let bands = parse_list(r.rest(), MeterBand::parse)?;
        Ok(MeterMod { command, flags, meter_id, bands })
    }

    pub fn buffer_len(&self) -> usize {
        8 + self.bands.iter().map(MeterBand::wire_len).sum::<usize>()
    }

    pub(crate) fn check(&self) -> Result<()> {
        for b in &self.bands {
            if let MeterBand::Unknown { band_type, payload, .. } = b {
                if matches!(*band_type, meter::BAND_DROP | meter::BAND_DSCP_REMARK) {
                    return Err(Error::BadValue { what: "ofp_meter_band type", value: (*band_type).into() });
                }
                len16("ofp_meter_band", 12 + payload.len())?;
            }
        }
        Ok(())
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.command);
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        for b in &self.bands {
            let len = b.wire_len() as u16;
            match b {
                MeterBand::Drop { rate, burst_size } => {
                    out.put_u16(meter::BAND_DROP);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_u32(0);
                }
                MeterBand::DscpRemark { rate, burst_size, prec_level } => {
                    out.put_u16(meter::BAND_DSCP_REMARK);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_u8(*prec_level);
                    out.put_bytes(0, 3);
                }
                MeterBand::Unknown { band_type, rate, burst_size, payload } => {
                    out.put_u16(*band_type);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_slice(payload);
                }
            }
        }
    }
}


// ---------------------------------------------------------------------------------------------
// GROUP_MOD (OF1.5)
// ---------------------------------------------------------------------------------------------

/// Group mod commands and types.
pub mod group {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
    pub const INSERT_BUCKET: u16 = 3;
    pub const REMOVE_BUCKET: u16 = 5;
    pub const TYPE_ALL: u8 = 0;
    pub const TYPE_SELECT: u8 = 1;
    pub const TYPE_INDIRECT: u8 = 2;
    pub const TYPE_FF: u8 = 3;
    /// `command_bucket_id` for "all buckets" / "no specific bucket".
    pub const BUCKET_ALL: u32 = 0xffff_ffff;
    pub const BUCKET_FIRST: u32 = 0xffff_fffd;
    pub const BUCKET_LAST: u32 = 0xffff_fffe;
}

impl Bucket {
    fn wire_len(&self) -> usize {
        8 + action::actions_len(&self.actions) + self.properties.len()
    }

    /// Parses one bucket from the start of `buf`; returns it and its length.
    fn parse(buf: &[u8]) -> Result<(Bucket, usize)> {
        const WHAT: &str = "ofp15_bucket";
        let len = usize::from(Reader::new(buf, WHAT).u16()?);
        let mut r = Reader::new(tlv(buf, len, 8, false, WHAT)?, WHAT);
        r.take(2)?;
        let actions_len = usize::from(r.u16()?);
        let bucket_id = r.u32()?;
        let actions = action::parse_actions(r.take(actions_len)?)?;
        Ok((Bucket { bucket_id, actions, properties: Bytes::copy_from_slice(r.rest()) }, len))
    }

    /// A bucket with the given actions and a weight property (select groups; OVS's default
    /// weight is 100).
    pub fn with_weight(bucket_id: u32, weight: u16, actions: Vec<Action>) -> Bucket {
        let mut props = BytesMut::new();
        crate::prop::put_prop_u16(&mut props, 0, weight);
        Bucket { bucket_id, actions, properties: props.freeze() }
    }
}

impl GroupMod {
    pub fn parse(body: &[u8]) -> Result<GroupMod> {
        let mut r = Reader::new(body, "ofp15_group_mod");
        let command = r.u16()?;
        let group_type = r.u8()?;
        r.zeros(1)?;
        let group_id = r.u32()?;
        let buckets_len = usize::from(r.u16()?);
        r.zeros(2)?;
        let command_bucket_id = r.u32()?;
        let buckets = parse_list(r.take(buckets_len)?, Bucket::parse)?;
        Ok(GroupMod {
            command,
            group_type,
            group_id,
            command_bucket_id,
            buckets,
            properties: Bytes::copy_from_slice(r.rest()),
        })
    }

    pub fn buffer_len(&self) -> usize {
        16 + self.buckets.iter().map(Bucket::wire_len).sum::<usize>() + self.properties.len()
    }

    pub(crate) fn check(&self) -> Result<()> {
        let mut total = 0usize;
        for b in &self.buckets {
            len16("ofp15_bucket", b.wire_len())?;
            total += b.wire_len();
        }
        len16("ofp15_group_mod buckets", total)?;
        Ok(())
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.command);
        out.put_u8(self.group_type);
        out.put_u8(0);
        out.put_u32(self.group_id);
        out.put_u16(self.buckets.iter().map(Bucket::wire_len).sum::<usize>() as u16);
        out.put_u16(0);
        out.put_u32(self.command_bucket_id);
        for b in &self.buckets {
            out.put_u16(b.wire_len() as u16);
            out.put_u16(action::actions_len(&b.actions) as u16);
            out.put_u32(b.bucket_id);
            action::emit_actions(&b.actions, out);
            out.put_slice(&b.properties);
        }
        out.put_slice(&self.properties);
    }
}

// ---------------------------------------------------------------------------------------------
// PACKET_OUT (OF1.5), PACKET_IN (OF1.3+)
// ---------------------------------------------------------------------------------------------

impl PacketOut {
    /// A packet-out of an unbuffered frame arriving on `in_port` (OXM in_port in the match).
    pub fn new(in_port: u32, actions: Vec<Action>, data: Bytes) -> PacketOut {
        PacketOut {
            buffer_id: crate::NO_BUFFER,
            match_: Match { fields: vec![crate::oxm::Oxm::InPort(in_port)] },
            actions,
            data,
        }
    }

    pub fn parse(body: &[u8]) -> Result<PacketOut> {
        let mut r = Reader::new(body, "ofp15_packet_out");
        let buffer_id = r.u32()?;
        let actions_len = usize::from(r.u16()?);
        r.zeros(2)?;
        let (match_, used) = Match::parse(r.peek_rest())?;
        r.take(used)?;
        let actions = action::parse_actions(r.take(actions_len)?)?;
        Ok(PacketOut { buffer_id, match_, actions, data: Bytes::copy_from_slice(r.rest()) })
    }

    pub fn buffer_len(&self) -> usize {
        8 + self.match_.buffer_len() + action::actions_len(&self.actions) + self.data.len()
    }

    pub(crate) fn check(&self) -> Result<()> {
        len16("ofp15_packet_out actions", action::actions_len(&self.actions)).map(drop)
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u16(action::actions_len(&self.actions) as u16);
        out.put_u16(0);
        self.match_.emit(out);
        action::emit_actions(&self.actions, out);
        out.put_slice(&self.data);
    }
}

impl PacketIn {
    pub fn parse(body: &[u8]) -> Result<PacketIn> {
        let mut r = Reader::new(body, "ofp13_packet_in");
        let buffer_id = r.u32()?;
        let total_len = r.u16()?;
        let reason = r.u8()?;
        let table_id = r.u8()?;
        let cookie = r.u64()?;
        let (match_, used) = Match::parse(r.peek_rest())?;
        r.take(used)?;
        r.zeros(2)?;
        Ok(PacketIn { buffer_id, total_len, reason, table_id, cookie, match_, data: Bytes::copy_from_slice(r.rest()) })
    }

    pub fn buffer_len(&self) -> usize {
        16 + self.match_.buffer_len() + 2 + self.data.len()
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.buffer_id);
        out.put_u16(self.total_len);
        out.put_u8(self.reason);
        out.put_u8(self.table_id);
        out.put_u64(self.cookie);
        self.match_.emit(out);
        out.put_u16(0);
        out.put_slice(&self.data);
    }
}
