//! OFPT_ERROR and the names of the error types and codes OVS sends.

use crate::error::{Error, Result};
use crate::wire::Reader;
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_ERROR: standard (type, code) or experimenter (0xffff, exp_code, experimenter).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ErrorMsg {
    Standard { error_type: u16, code: u16, data: Bytes },
    Experimenter { exp_code: u16, experimenter: u32, data: Bytes },
}

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
