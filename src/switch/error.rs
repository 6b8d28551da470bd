//! Errors of the switch connection layer.

use std::fmt;

/// An OpenFlow error as the switch reported it: (type, code) or an experimenter error, with
/// OVS's name for it when the codec knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfpError {
    /// OVS's name, e.g. `OFPBFC_MSG_FAILED` or `NXBAC_BAD_CONJUNCTION`.
    pub name: Option<&'static str>,
    /// Standard error type, or 0xffff for an experimenter error.
    pub(crate) error_type: u16,
    /// Standard code, or the experimenter's own code.
    pub(crate) code: u16,
    /// Experimenter id of an experimenter error.
    pub(crate) experimenter: Option<u32>,
}

impl OfpError {
    /// Summarises a decoded OFPT_ERROR.
    pub(crate) fn from_msg(msg: &ofp::ErrorMsg) -> Self {
        let name = msg.name();
        match msg {
            ofp::ErrorMsg::Standard { error_type, code, .. } => {
                OfpError { name, error_type: *error_type, code: *code, experimenter: None }
            }
            ofp::ErrorMsg::Experimenter { exp_code, experimenter, .. } => {
                OfpError { name, error_type: 0xffff, code: *exp_code, experimenter: Some(*experimenter) }
            }
        }
    }

    /// Whether this is the given OVS error name.
    pub(crate) fn is(&self, name: &str) -> bool {
        self.name == Some(name)
    }
}

impl fmt::Display for OfpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name.unwrap_or("unknown error");
        match self.experimenter {
            Some(exp) => write!(f, "{name} (experimenter {exp:#x}, code {})", self.code),
            None => write!(f, "{name} (type {}, code {})", self.error_type, self.code),
        }
    }
}

/// What can go wrong talking to the switch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SwitchError {
    /// There is no connection, or it went away while the request was in flight.
    #[error("switch disconnected{}", detail(.0))]
    Disconnected(Option<String>),
    /// The switch did not answer in time.
    #[error("switch did not answer {request} within {after:?}")]
    Timeout { request: String, after: std::time::Duration },
    /// The switch answered a request with an OpenFlow error.
    #[error("switch rejected {request}: {error}")]
    Rejected { request: String, error: OfpError },
    /// A bundle was not applied (nothing of it is in the tables) because of one of its flows.
    #[error("bundle not applied: flow #{index} rejected with {error}{}: {flow}{}",
        commit_error.as_ref().map(|e| format!(" (commit: {e})")).unwrap_or_default(),
        if also.is_empty() { String::new() } else { format!(" (and {} more flows rejected)", also.len()) })]
    BundleFailed {
        /// Index of the offending flow in the batch given to `install`.
        index: usize,
        /// The offending flow_mod, printed.
        flow: String,
        /// The error the switch gave for that flow.
        error: OfpError,
        /// The error of the commit itself (OFPBFC_MSG_FAILED) when the flow failed at commit.
        commit_error: Option<OfpError>,
        /// Further flows the switch refused, as (index, error).
        also: Vec<(usize, OfpError)>,
    },
    /// Version negotiation or the handshake failed.
    #[error("handshake failed: {0}")]
    Handshake(String),
    /// The switch sent something we cannot decode, or out of protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The request cannot be sent as given (e.g. a message over 65535 bytes).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The connection task is gone (the handle outlived it).
    #[error("switch connection task stopped")]
    Stopped,
}

fn detail(reason: &Option<String>) -> String {
    reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
}
