//! The flow monitor: created in the handshake, it makes the switch report every change of its
//! flow tables made by anyone else ([`Event::FlowsChangedElsewhere`]).

use super::{Event, Session};
use crate::switch::error::OfpError;
use ofp::flow_monitor::OFPMP_FLOW_MONITOR;
use ofp::{
    FlowMonitorRequest, FlowUpdate, Message, MultipartReply, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody, Payload, Peek,
};

/// Id of the one flow monitor the session creates: every table, additions, removals and
/// modifications, no instructions. OVS reports changes made on this connection itself only
/// as ABBREV entries (one per batch, with the xid of our request), and every change made
/// elsewhere (`ovs-ofctl`, another controller, a flow timing out) in full, so telling our
/// own changes from foreign ones needs no bookkeeping of what we sent.
///
/// Chosen over a periodic dump-and-diff for drift detection: a change is known within
/// milliseconds, and nothing is sent or dumped while nobody touches the bridge (a dump of
/// 100,000 flows every second would not be cheap). On OpenFlow 1.5 OVS implements the
/// OpenFlow 1.4+ OFPMP_FLOW_MONITOR since 3.0 (Nicira's NXST_FLOW_MONITOR is only accepted
/// on 1.0-1.2); a switch that refuses it gets the periodic dump instead (see
/// `ConnectionConfig::drift_poll_interval`).
pub const FLOW_MONITOR_ID: u32 = 1;

/// The request that creates the flow monitor, sent in the handshake.
pub(super) fn creation_request() -> Payload {
    let body = MultipartRequestBody::FlowMonitor(vec![FlowMonitorRequest::all_changes(FLOW_MONITOR_ID)]);
    Payload::MultipartRequest(MultipartRequest { flags: 0, body })
}

/// Whether a message says it is an OFPT_MULTIPART_REPLY of type OFPMP_FLOW_MONITOR.
pub(super) fn is_flow_monitor_reply(peek: &Peek) -> bool {
    peek.is_multipart_reply(OFPMP_FLOW_MONITOR)
}

impl Session {
    /// The reply to the monitor's creation, which holds no flows (no INITIAL flag).
    pub(super) fn on_monitor_created(&mut self, xid: u32, reply: &MultipartReply) {
        if reply.flags & ofp::multipart::MULTIPART_MORE == 0 {
            self.pending.remove(&xid);
        }
    }

    /// The switch refused the monitor. Not worth failing the connection for: enforcement works
    /// without it.
    pub(super) fn on_monitor_refused(&mut self, xid: u32, error: OfpError) {
        self.pending.remove(&xid);
        self.events.push_back(Event::FlowMonitorRefused(error));
    }

    /// A multipart reply for no request: flow monitor updates (xid 0), or something else.
    pub(super) fn on_unsolicited_reply(&mut self, version: u8, xid: u32, reply: MultipartReply) {
        match reply.body {
            MultipartReplyBody::FlowMonitor(updates) => {
                // ABBREV entries stand for our own requests; everything else is news.
                let foreign: Vec<FlowUpdate> =
                    updates.into_iter().filter(|u| !matches!(u, FlowUpdate::Abbrev { .. })).collect();
                if !foreign.is_empty() {
                    self.events.push_back(Event::FlowsChangedElsewhere(foreign));
                }
            }
            body => self.events.push_back(Event::Unhandled(Message {
                version,
                xid,
                payload: Payload::MultipartReply(MultipartReply { flags: reply.flags, body }),
            })),
        }
    }
}
