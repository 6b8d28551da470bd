//! One atomic bundle of flow_mods in flight: its xids, its lazy encoding into BUNDLE_ADD
//! messages, and the first error the switch reported for one of its flows.

use super::error::{OfpError, SwitchError};
use bytes::{Bytes, BytesMut};
use ofp::{bundle_ctrl, BundleAdd, FlowMod, Message, Payload};

/// Bundle flags npagent uses on OPEN, every ADD and COMMIT (OVS requires them equal).
pub const BUNDLE_FLAGS: u16 = bundle_ctrl::FLAG_ATOMIC | bundle_ctrl::FLAG_ORDERED;

/// Bytes a BUNDLE_ADD_MESSAGE adds around its inner message.
const BUNDLE_ADD_OVERHEAD: usize = 16;

/// A bundle being sent or committed.
#[derive(Debug)]
pub(crate) struct Bundle {
    pub bundle_id: u32,
    /// xid of the BUNDLE_ADD carrying flow `i` (and of that flow_mod) is `xid_base + i`.
    pub xid_base: u32,
    pub flows: Vec<FlowMod>,
    /// How many BUNDLE_ADDs have been encoded so far.
    pub encoded: usize,
    /// First error the switch gave for one of the flows: (index, error).
    pub flow_error: Option<(usize, OfpError)>,
    /// An error for the OPEN request itself.
    pub open_error: Option<OfpError>,
}

impl Bundle {
    /// Checks every flow fits into a BUNDLE_ADD (<= 65535 bytes) before anything is sent.
    pub fn validate(flows: &mut [FlowMod]) -> Result<(), SwitchError> {
        for (index, slot) in flows.iter_mut().enumerate() {
            let msg = Message::new(0, Payload::FlowMod(std::mem::take(slot)));
            let len = msg.buffer_len();
            *slot = into_flow(msg);
            if len.checked_add(BUNDLE_ADD_OVERHEAD).is_none_or(|l| l > ofp::MAX_MESSAGE_LEN) {
                return Err(SwitchError::InvalidRequest(format!(
                    "flow #{index} is {len} bytes, too long for a BUNDLE_ADD (max {})",
                    ofp::MAX_MESSAGE_LEN - BUNDLE_ADD_OVERHEAD
                )));
            }
        }
        Ok(())
    }

    /// Number of flows.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Index of the flow whose BUNDLE_ADD has `xid`, if it is one of this bundle's.
    pub fn index_of(&self, xid: u32) -> Option<usize> {
        let offset = usize::try_from(xid.wrapping_sub(self.xid_base)).ok()?;
        (offset < self.flows.len()).then_some(offset)
    }

    /// Encodes further BUNDLE_ADDs into `out` until it holds `limit` bytes or all are
    /// encoded; returns true when all are.
    pub fn encode_adds(&mut self, out: &mut BytesMut, limit: usize) -> bool {
        while self.encoded < self.flows.len() && out.len() < limit {
            let index = self.encoded;
            let Some(slot) = self.flows.get_mut(index) else { break };
            // Wrapping: validate() bounded the count, and xid_base was chosen not to wrap.
            let xid = self.xid_base.wrapping_add(index as u32);
            let inner = Message::new(xid, Payload::FlowMod(std::mem::take(slot)));
            let add = Message::new(
                xid,
                Payload::BundleAdd(BundleAdd {
                    bundle_id: self.bundle_id,
                    flags: BUNDLE_FLAGS,
                    message: Box::new(inner),
                    properties: Bytes::new(),
                }),
            );
            // validate() checked the size; an emit error here would be a codec bug, and the
            // switch would answer the truncated message with an error naming this flow.
            let _ = add.emit(out);
            if let Payload::BundleAdd(add) = add.payload {
                *slot = into_flow(*add.message);
            }
            self.encoded += 1;
        }
        self.encoded >= self.flows.len()
    }

    /// The error to report for this bundle, if the switch objected to anything in it.
    pub fn failure(&self, commit_error: Option<OfpError>) -> Option<SwitchError> {
        if let Some((index, error)) = &self.flow_error {
            let flow = self.flows.get(*index).map(describe_flow).unwrap_or_default();
            return Some(SwitchError::BundleFailed {
                index: *index,
                flow,
                error: error.clone(),
                commit_error,
            });
        }
        let (request, error) = match (&self.open_error, commit_error) {
            (Some(e), _) => ("bundle open", e.clone()),
            (None, Some(e)) => ("bundle commit", e),
            (None, None) => return None,
        };
        Some(SwitchError::Rejected { request: request.to_string(), error })
    }
}

fn into_flow(msg: Message) -> FlowMod {
    match msg.payload {
        Payload::FlowMod(fm) => fm,
        _ => FlowMod::default(),
    }
}

/// A one-line description of a flow_mod for error messages.
pub fn describe_flow(fm: &FlowMod) -> String {
    format!(
        "{:?} table={} priority={} cookie={:#x} match={:?} instructions={:?}",
        fm.command, fm.table_id, fm.priority, fm.cookie, fm.match_.fields, fm.instructions
    )
}
