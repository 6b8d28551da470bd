//! The codec's error type.

/// What is wrong with a byte string (parse) or a value (emit).
///
/// `what` names the structure being decoded (e.g. `"ofp_match"`, `"NXAST_CONTROLLER2"`) so a
/// log line points at the culprit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer ends before the structure does.
    #[error("{what}: truncated: need {need} bytes, have {have}")]
    Truncated { what: &'static str, need: usize, have: usize },
    /// A length field is below the structure's minimum, beyond the buffer, or not aligned.
    #[error("{what}: bad length {len}")]
    BadLength { what: &'static str, len: usize },
    /// Padding holds a byte that is not zero (see the crate's padding rule).
    #[error("{what}: non-zero padding at byte {offset}")]
    BadPadding { what: &'static str, offset: usize },
    /// A field holds a value the structure does not allow.
    #[error("{what}: bad value {value:#x}")]
    BadValue { what: &'static str, value: u64 },
    /// The message header's version is not one this operation accepts.
    #[error("unsupported OpenFlow version {0:#04x}")]
    BadVersion(u8),
    /// A value cannot be emitted (e.g. longer than 65535 bytes).
    #[error("{what}: too long to emit: {len} bytes")]
    TooLong { what: &'static str, len: usize },
}

/// Result alias of the codec.
pub type Result<T, E = Error> = std::result::Result<T, E>;
