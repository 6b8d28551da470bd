//! A small RFC 7047 client of the Open_vSwitch database: the JSON-RPC transport ([`rpc`]), one
//! transaction at a time with its reply read ([`transact`]), the database's value encodings
//! ([`value`]), the `external_ids` keys Antrea's ports carry ([`port_keys`]) and what npagent
//! asks of a bridge row ([`bridge`]). Every failure is an [`Error`] naming what was asked.

pub mod bridge;
pub mod port_keys;
pub mod rpc;
pub mod transact;
pub mod value;

use std::time::Duration;

use crate::endpoint::Endpoint;
use crate::json_stream::StreamError;

/// Why a conversation with OVSDB failed: the connection, the protocol, or a transaction,
/// named by what it was for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("OVSDB connection: {0}")]
    Io(#[from] std::io::Error),
    #[error("OVSDB sent malformed JSON: {0}")]
    Json(serde_json::Error),
    #[error("OVSDB message too large ({0} bytes buffered)")]
    TooLarge(usize),
    #[error("OVSDB protocol: {0}")]
    Protocol(String),
    #[error("OVSDB closed the connection")]
    Closed,
    /// The request for `what` got no answer from `server` in time.
    #[error("{what}: no answer from {server} within {within:?}")]
    NoAnswer { what: String, server: Endpoint, within: Duration },
    /// The request for `what` failed.
    #[error("{what}: {error}")]
    Failed {
        what: String,
        #[source]
        error: Box<Error>,
    },
    /// OVSDB refused operations of the transaction for `what`, saying why.
    #[error("{what}: {}", errors.join("; "))]
    Refused { what: String, errors: Vec<String> },
    /// No bridge of that name is in the database.
    #[error("bridge {0} does not exist")]
    NoBridge(String),
    /// A row (`row` names it) does not read as the schema says.
    #[error("{row}: {error}")]
    Malformed { row: String, error: String },
}

impl Error {
    /// This error as the cause of the request for `what`.
    pub fn during(self, what: impl Into<String>) -> Error {
        Error::Failed { what: what.into(), error: Box::new(self) }
    }
}

impl From<StreamError> for Error {
    fn from(e: StreamError) -> Error {
        match e {
            StreamError::TooLarge(n) => Error::TooLarge(n),
            StreamError::Json(e) => Error::Json(e),
        }
    }
}
