//! One atomic bundle of flow_mods in flight: its xids, its lazy encoding into BUNDLE_ADD
//! messages, and the first error the switch reported for one of its flows.

use super::error::{OfpError, SwitchError};
use bytes::BytesMut;
use ofp::{bundle_ctrl, FlowMod};

/// Bundle flags npagent uses on OPEN, every ADD and COMMIT (OVS requires them equal).
pub(crate) const BUNDLE_FLAGS: u16 = bundle_ctrl::FLAG_ATOMIC | bundle_ctrl::FLAG_ORDERED;

/// A bundle being sent or committed.
#[derive(Debug)]
pub(crate) struct Bundle {
    pub(crate) bundle_id: u32,
    /// xid of the BUNDLE_ADD carrying flow `i` (and of that flow_mod) is `xid_base + i`.
    pub(crate) xid_base: u32,
    pub flows: Vec<FlowMod>,
    /// How many BUNDLE_ADDs have been encoded so far.
    pub(crate) encoded: usize,
    /// Errors the switch gave for flows, in arrival order: (index, error). OVS checks each
    /// BUNDLE_ADD on arrival and goes on with the next, so all refused adds are reported;
    /// at commit it stops at the first failing flow_mod.
    pub(crate) flow_errors: Vec<(usize, OfpError)>,
    /// An error for the OPEN request itself.
    pub(crate) open_error: Option<OfpError>,
}

impl Bundle {
    /// Checks every flow can be encoded into a BUNDLE_ADD (<= 65535 bytes, every field within
    /// its length) before anything is sent.
    pub(crate) fn validate(flows: &[FlowMod]) -> Result<(), SwitchError> {
        for (index, flow) in flows.iter().enumerate() {
            if let Err(e) = ofp::body::bundled_flow_mod_len(flow) {
                let len = flow.buffer_len().saturating_add(ofp::Header::LEN);
                let max = ofp::MAX_MESSAGE_LEN - ofp::body::BUNDLE_ADD_OVERHEAD;
                let why = match len > max {
                    true => format!("is {len} bytes, too long for a BUNDLE_ADD (max {max})"),
                    false => format!("cannot be encoded: {e}"),
                };
                return Err(SwitchError::InvalidRequest(format!("flow #{index} {why}")));
            }
        }
        Ok(())
    }

    /// Index of the flow whose BUNDLE_ADD has `xid`, if it is one of this bundle's.
    pub(crate) fn index_of(&self, xid: u32) -> Option<usize> {
        let offset = usize::try_from(xid.wrapping_sub(self.xid_base)).ok()?;
        (offset < self.flows.len()).then_some(offset)
    }

    /// Encodes further BUNDLE_ADDs into `out` until it holds `limit` bytes or all are
    /// encoded; returns true when all are.
    /// Written straight from each flow_mod (no `Message` copy of it).
    pub(crate) fn encode_adds(&mut self, out: &mut BytesMut, limit: usize) -> bool {
        while out.len() < limit {
            let index = self.encoded;
            let Some(flow) = self.flows.get(index) else { break };
            // validate() bounded the count, and xid_base was chosen so the range cannot wrap.
            let xid = self.xid_base.wrapping_add(index as u32);
            // validate() checked every length, so this cannot fail.
            let _ = ofp::body::emit_bundled_flow_mod(out, xid, self.bundle_id, BUNDLE_FLAGS, flow);
            self.encoded += 1;
        }
        self.encoded >= self.flows.len()
    }

    /// The error to report for this bundle, if the switch objected to anything in it.
    pub(crate) fn failure(&self, commit_error: Option<OfpError>) -> Option<SwitchError> {
        if let Some(((index, error), others)) = self.flow_errors.split_first() {
            let flow = self.flows.get(*index).map(describe_flow).unwrap_or_default();
            return Some(SwitchError::BundleFailed {
                index: *index,
                flow,
                error: error.clone(),
                commit_error,
                also: others.to_vec(),
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

/// A flow_mod as `ovs-ofctl ofp-print` prints it, for error messages, e.g.
/// `ADD table:1 priority=200,ip,nw_src=10.0.0.1 actions=conjunction(1,1/3)`.
pub fn describe_flow(fm: &FlowMod) -> String {
    ofp::text::format_flow_mod(fm, &|_| None)
}
