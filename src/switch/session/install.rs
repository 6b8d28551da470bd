//! Bundles: [`Session::install`] sends a batch of flow_mods as one atomic bundle (OPEN, one
//! BUNDLE_ADD per flow, a BARRIER, then COMMIT or DISCARD) and maps the switch's errors back
//! to the flows. The bundle itself (its xids, its lazy encoding, its failure) is
//! [`crate::switch::bundle`]'s.

use super::{Event, Out, Pending, Reply, Request, RequestId, RequestKind, Session};
use crate::switch::bundle::{Bundle, BUNDLE_FLAGS};
use crate::switch::error::{OfpError, SwitchError};
use bytes::Bytes;
use ofp::{bundle_ctrl, BundleControl, FlowMod, Message, Payload};

impl Session {
    /// Installs `flows` in one atomic bundle: OPEN, one BUNDLE_ADD per flow (unique xid each,
    /// so an error maps back to its flow), a BARRIER, then COMMIT if the switch refused none of
    /// them, else DISCARD. Completes `Done` once committed, or with
    /// [`SwitchError::BundleFailed`] naming the offending flows (every refused ADD; at commit
    /// time OVS names only the first flow_mod that failed); either way the tables hold all or
    /// nothing of the batch.
    pub(crate) fn install(&mut self, flows: Vec<FlowMod>) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        Bundle::validate(&flows)?;
        let n = u32::try_from(flows.len())
            .ok()
            .filter(|n| *n < u32::MAX / 4)
            .ok_or_else(|| SwitchError::InvalidRequest(format!("{} flows in one bundle", flows.len())))?;
        let what = format!("bundle of {} flows", flows.len());
        if flows.is_empty() {
            let id = self.new_request(what, RequestKind::Plain);
            self.complete(id, Ok(Reply::Done));
            return Ok(id);
        }
        let bundle_id = self.next_bundle_id;
        self.next_bundle_id = self.next_bundle_id.wrapping_add(1).max(1);
        let open_xid = self.alloc_xids(1);
        let xid_base = self.alloc_xids(n);
        let sync_xid = self.alloc_xids(1);
        let bundle = Bundle { bundle_id, xid_base, flows, encoded: 0, flow_errors: Vec::new(), open_error: None };
        let id = self.new_request(what, RequestKind::Bundle(bundle));
        self.bundles.push(id);
        self.register(id, open_xid, Pending::BundleOpen(id));
        self.register(id, sync_xid, Pending::BundleSync(id));
        let open = BundleControl {
            bundle_id,
            ctrl_type: bundle_ctrl::OPEN_REQUEST,
            flags: BUNDLE_FLAGS,
            properties: Bytes::new(),
        };
        self.push_msg(Message::new(open_xid, Payload::BundleControl(open)));
        self.queue.push_back(Out::BundleAdds(id));
        self.push_msg(Message::new(sync_xid, Payload::BarrierRequest));
        Ok(id)
    }

    /// Every BUNDLE_ADD has been processed: commit if the switch accepted them all, else
    /// discard (OVS keeps a bundle open after an ADD is refused, so committing would apply
    /// the rest) and report the offending flow.
    pub(super) fn bundle_synced(&mut self, sync_xid: u32, id: RequestId) {
        self.pending.remove(&sync_xid);
        let (bundle_id, failure) = match self.requests.get(&id).map(|r| &r.kind) {
            Some(RequestKind::Bundle(b)) => (b.bundle_id, b.failure(None)),
            _ => return,
        };
        let ctrl_type = if failure.is_some() { bundle_ctrl::DISCARD_REQUEST } else { bundle_ctrl::COMMIT_REQUEST };
        let xid = self.alloc_xids(1);
        let ctrl = BundleControl { bundle_id, ctrl_type, flags: BUNDLE_FLAGS, properties: Bytes::new() };
        self.push_msg(Message::new(xid, Payload::BundleControl(ctrl)));
        match failure {
            Some(err) => {
                self.pending.insert(xid, Pending::BundleDiscard);
                self.complete(id, Err(err));
            }
            None => self.register(id, xid, Pending::BundleCommit(id)),
        }
    }

    /// A BUNDLE_CONTROL reply: an open, a commit (which completes the request) or a discard.
    pub(super) fn on_bundle_reply(&mut self, xid: u32, ctrl: BundleControl) {
        match (self.pending.get(&xid).copied(), ctrl.ctrl_type) {
            (Some(Pending::BundleOpen(_)), bundle_ctrl::OPEN_REPLY) => {
                self.pending.remove(&xid);
            }
            (Some(Pending::BundleCommit(id)), bundle_ctrl::COMMIT_REPLY) => self.complete(id, Ok(Reply::Done)),
            (Some(Pending::BundleDiscard), bundle_ctrl::DISCARD_REPLY) => {
                self.pending.remove(&xid);
            }
            _ => self.events.push_back(Event::Unhandled(Message::new(xid, Payload::BundleControl(ctrl)))),
        }
    }

    /// The switch refused to open bundle request `id`; reported once the BARRIER is back.
    pub(super) fn on_open_error(&mut self, xid: u32, id: RequestId, error: OfpError) {
        self.pending.remove(&xid);
        if let Some(Request { kind: RequestKind::Bundle(b), .. }) = self.requests.get_mut(&id) {
            b.open_error.get_or_insert(error);
        }
    }

    /// The switch refused a BUNDLE_ADD of bundle request `id`: its flow is named once the
    /// BARRIER is back.
    pub(super) fn on_add_error(&mut self, xid: u32, id: RequestId, error: OfpError) {
        if let Some(Request { kind: RequestKind::Bundle(b), .. }) = self.requests.get_mut(&id) {
            if let Some(index) = b.index_of(xid) {
                b.flow_errors.push((index, error));
            }
        }
    }

    /// The commit of bundle request `id` failed: nothing of it was applied.
    pub(super) fn on_commit_error(&mut self, id: RequestId, error: OfpError) {
        let result = match self.requests.get(&id).map(|r| &r.kind) {
            Some(RequestKind::Bundle(b)) => b.failure(Some(error.clone())),
            _ => None,
        };
        let result = result.unwrap_or(SwitchError::Rejected { request: "bundle commit".into(), error });
        self.complete(id, Err(result));
    }

    /// The bundle request whose BUNDLE_ADDs include `xid`, if any.
    pub(super) fn bundle_for_add_xid(&self, xid: u32) -> Option<RequestId> {
        self.bundles.iter().copied().find(|id| {
            matches!(self.requests.get(id).map(|r| &r.kind), Some(RequestKind::Bundle(b)) if b.index_of(xid).is_some())
        })
    }
}
