//! One atomic bundle of flow_mods in flight: its xids, its lazy encoding into BUNDLE_ADD
//! messages, and the first error the switch reported for one of its flows.

use super::error::{OfpError, SwitchError};
use bytes::{BufMut, BytesMut};
use ofp::header::msg_type::{BUNDLE_ADD_MESSAGE as OFPT_BUNDLE_ADD_MESSAGE, FLOW_MOD as OFPT_FLOW_MOD};
use ofp::{bundle_ctrl, FlowMod};

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
    /// Errors the switch gave for flows, in arrival order: (index, error). OVS checks each
    /// BUNDLE_ADD on arrival and goes on with the next, so all refused adds are reported;
    /// at commit it stops at the first failing flow_mod.
    pub flow_errors: Vec<(usize, OfpError)>,
    /// An error for the OPEN request itself.
    pub open_error: Option<OfpError>,
}

impl Bundle {
    /// Checks every flow fits into a BUNDLE_ADD (<= 65535 bytes) before anything is sent.
    pub fn validate(flows: &[FlowMod]) -> Result<(), SwitchError> {
        for (index, flow) in flows.iter().enumerate() {
            let len = flow.buffer_len();
            if bundle_add_len(len).is_none() {
                return Err(SwitchError::InvalidRequest(format!(
                    "flow #{index} is {} bytes, too long for a BUNDLE_ADD (max {})",
                    len.saturating_add(ofp::Header::LEN),
                    ofp::MAX_MESSAGE_LEN - BUNDLE_ADD_OVERHEAD
                )));
            }
        }
        Ok(())
    }

    /// Index of the flow whose BUNDLE_ADD has `xid`, if it is one of this bundle's.
    pub fn index_of(&self, xid: u32) -> Option<usize> {
        let offset = usize::try_from(xid.wrapping_sub(self.xid_base)).ok()?;
        (offset < self.flows.len()).then_some(offset)
    }

    /// Encodes further BUNDLE_ADDs into `out` until it holds `limit` bytes or all are
    /// encoded; returns true when all are.
    ///
    /// Written directly (outer header, bundle_id, pad, flags, inner header, flow_mod body)
    /// rather than through `Message`, to avoid a copy of every flow.
    pub fn encode_adds(&mut self, out: &mut BytesMut, limit: usize) -> bool {
        while out.len() < limit {
            let index = self.encoded;
            let Some(flow) = self.flows.get(index) else { break };
            // validate() bounded the count, and xid_base was chosen so the range cannot wrap.
            let xid = self.xid_base.wrapping_add(index as u32);
            let body_len = flow.buffer_len();
            // validate() checked every length; a failure here is impossible, skip defensively.
            if let Some((outer, inner)) = bundle_add_len(body_len) {
                out.reserve(usize::from(outer));
                out.put_u8(ofp::OFP_VERSION);
                out.put_u8(OFPT_BUNDLE_ADD_MESSAGE);
                out.put_u16(outer);
                out.put_u32(xid);
                out.put_u32(self.bundle_id);
                out.put_u16(0);
                out.put_u16(BUNDLE_FLAGS);
                out.put_u8(ofp::OFP_VERSION);
                out.put_u8(OFPT_FLOW_MOD);
                out.put_u16(inner);
                out.put_u32(xid);
                flow.emit(out);
            }
            self.encoded += 1;
        }
        self.encoded >= self.flows.len()
    }

    /// The error to report for this bundle, if the switch objected to anything in it.
    pub fn failure(&self, commit_error: Option<OfpError>) -> Option<SwitchError> {
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

/// (BUNDLE_ADD length, inner FLOW_MOD length) for a flow_mod body of `body_len` bytes, if
/// both fit the 16-bit length field.
fn bundle_add_len(body_len: usize) -> Option<(u16, u16)> {
    let inner = body_len.checked_add(ofp::Header::LEN)?;
    let outer = inner.checked_add(BUNDLE_ADD_OVERHEAD)?;
    Some((u16::try_from(outer).ok()?, u16::try_from(inner).ok()?))
}

/// A flow_mod as `ovs-ofctl ofp-print` prints it, for error messages, e.g.
/// `ADD table:1 priority=200,ip,nw_src=10.0.0.1 actions=conjunction(1,1/3)`.
pub fn describe_flow(fm: &FlowMod) -> String {
    ofp::text::format_flow_mod(fm, &|_| None)
}
