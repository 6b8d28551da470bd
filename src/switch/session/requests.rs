//! Requests and their table: the public requests other than `install` (barrier, a message
//! followed by a barrier, multipart requests), the reassembly of multipart replies, and the
//! bookkeeping every request shares (its xids, its first error, its completion).

use super::handshake::Phase;
use super::{Event, Out, Pending, Reply, Request, RequestId, RequestKind, Session};
use crate::switch::error::{OfpError, SwitchError};
use bytes::BytesMut;
use ofp::{
    FlowStatsRequest, Match, Message, MultipartReply, MultipartReplyBody, MultipartRequest, MultipartRequestBody,
    Payload,
};

/// Which flows a dump asks for by cookie: those whose cookie's bits under `mask` are
/// `cookie`'s (the default, a zero mask: every flow).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CookieFilter {
    pub cookie: u64,
    pub mask: u64,
}

impl Session {
    /// A barrier: completes when the switch has processed everything sent before it.
    pub(crate) fn barrier(&mut self) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        let id = self.new_request("barrier".into(), RequestKind::Plain);
        let xid = self.alloc_xids(1);
        self.register(id, xid, Pending::Finish(id));
        self.push_msg(Message::new(xid, Payload::BarrierRequest));
        Ok(id)
    }

    /// Sends a message that gets no reply on success (meter_mod, group_mod, packet_out,
    /// flow_mod...) followed by a barrier: completes `Done`, or with the switch's error.
    pub(crate) fn send(&mut self, payload: Payload) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        let what = describe_payload(&payload);
        let xid = self.alloc_xids(1);
        let mut bytes = BytesMut::new();
        Message::new(xid, payload).emit(&mut bytes).map_err(|e| SwitchError::InvalidRequest(format!("{what}: {e}")))?;
        let id = self.new_request(what, RequestKind::Plain);
        self.register(id, xid, Pending::Part(id));
        self.push_bytes(&bytes);
        let barrier = self.alloc_xids(1);
        self.register(id, barrier, Pending::Finish(id));
        self.push_msg(Message::new(barrier, Payload::BarrierRequest));
        Ok(id)
    }

    /// Dumps the flows of one table (or all) whose cookie matches `filter`: completes with
    /// [`Reply::Flows`].
    pub(crate) fn dump_flows(&mut self, table: Option<u8>, filter: CookieFilter) -> Result<RequestId, SwitchError> {
        let body = MultipartRequestBody::Flow(FlowStatsRequest {
            table_id: table.unwrap_or(ofp::TABLE_ALL),
            out_port: ofp::port::ANY,
            out_group: ofp::GROUP_ANY,
            cookie: filter.cookie,
            cookie_mask: filter.mask,
            match_: Match::default(),
        });
        let what = match table {
            Some(t) => format!("flow dump of table {t}"),
            None => "flow dump".to_string(),
        };
        self.multipart(what, body)
    }

    /// Meter statistics of one meter (0xffffffff: all): completes with [`Reply::MeterStats`].
    pub(crate) fn meter_stats(&mut self, meter_id: u32) -> Result<RequestId, SwitchError> {
        self.multipart(format!("meter stats of meter {meter_id}"), MultipartRequestBody::MeterStats { meter_id })
    }

    /// Any multipart request: completes with the reassembled parts.
    pub(crate) fn multipart(&mut self, what: String, body: MultipartRequestBody) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        let id = self.new_request(what, RequestKind::Multipart(Vec::new()));
        let xid = self.alloc_xids(1);
        self.register(id, xid, Pending::Multipart(id));
        self.push_msg(Message::new(xid, Payload::MultipartRequest(MultipartRequest { flags: 0, body })));
        Ok(id)
    }

    /// One part of the reply to multipart request `id`; the last one completes it.
    pub(super) fn on_multipart_reply(&mut self, id: RequestId, reply: MultipartReply) {
        let more = reply.flags & ofp::multipart::MULTIPART_MORE != 0;
        if let Some(Request { kind: RequestKind::Multipart(parts), .. }) = self.requests.get_mut(&id) {
            parts.push(reply.body);
        }
        if !more {
            let result = self.take_multipart(id);
            self.complete(id, result);
        }
    }

    /// The barrier closing request `id` came back: done, unless the switch refused one of its
    /// messages.
    pub(super) fn finish(&mut self, id: RequestId) {
        let result = match self.requests.get(&id).and_then(|r| r.error.as_ref()) {
            Some(_) => Err(self.rejection(id)),
            None => Ok(Reply::Done),
        };
        self.complete(id, result);
    }

    /// Fails request `id` with the switch's `error` (or the first one it gave for the request).
    pub(super) fn fail(&mut self, id: RequestId, error: OfpError) {
        self.record_error(id, error);
        let result = Err(self.rejection(id));
        self.complete(id, result);
    }

    pub(super) fn check_ready(&self) -> Result<(), SwitchError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Closed => Err(SwitchError::Disconnected(Some("session closed".into()))),
            _ => Err(SwitchError::Disconnected(Some("handshake not finished".into()))),
        }
    }

    pub(super) fn new_request(&mut self, what: String, kind: RequestKind) -> RequestId {
        let id = self.next_request;
        self.next_request += 1;
        self.requests.insert(id, Request { what, xids: Vec::new(), error: None, kind });
        id
    }

    pub(super) fn register(&mut self, id: RequestId, xid: u32, pending: Pending) {
        self.pending.insert(xid, pending);
        if let Some(r) = self.requests.get_mut(&id) {
            r.xids.push(xid);
        }
    }

    pub(super) fn record_error(&mut self, id: RequestId, error: OfpError) {
        if let Some(r) = self.requests.get_mut(&id) {
            r.error.get_or_insert(error);
        }
    }

    fn rejection(&self, id: RequestId) -> SwitchError {
        match self.requests.get(&id) {
            Some(Request { what, error: Some(error), .. }) => {
                SwitchError::Rejected { request: what.clone(), error: error.clone() }
            }
            Some(r) => SwitchError::Protocol(format!("{} failed without an error", r.what)),
            None => SwitchError::Protocol("unknown request".into()),
        }
    }

    fn take_multipart(&mut self, id: RequestId) -> Result<Reply, SwitchError> {
        let Some(Request { kind: RequestKind::Multipart(parts), .. }) = self.requests.get_mut(&id) else {
            return Err(SwitchError::Protocol("multipart reply for a request of another kind".into()));
        };
        let parts = std::mem::take(parts);
        if parts.is_empty() {
            return Ok(Reply::Multipart(parts));
        }
        if parts.iter().all(|p| matches!(p, MultipartReplyBody::Flow(_))) {
            let flows =
                parts.into_iter().flat_map(|p| if let MultipartReplyBody::Flow(f) = p { f } else { Vec::new() });
            return Ok(Reply::Flows(flows.collect()));
        }
        if parts.iter().all(|p| matches!(p, MultipartReplyBody::MeterStats(_))) {
            let stats =
                parts.into_iter().flat_map(|p| if let MultipartReplyBody::MeterStats(s) = p { s } else { Vec::new() });
            return Ok(Reply::MeterStats(stats.collect()));
        }
        Ok(Reply::Multipart(parts))
    }

    pub(super) fn complete(&mut self, id: RequestId, result: Result<Reply, SwitchError>) {
        if let Some(r) = self.requests.remove(&id) {
            for xid in r.xids {
                self.pending.remove(&xid);
            }
            if matches!(r.kind, RequestKind::Bundle(_)) {
                self.bundles.retain(|b| *b != id);
                // Adds not yet encoded are never sent if the bundle already failed.
                self.queue.retain(|o| !matches!(o, Out::BundleAdds(b) if *b == id));
            }
            self.events.push_back(Event::Completed { id, result });
        }
    }
}

/// The request an xid in flight belongs to, if any.
pub(super) fn request_of(p: Pending) -> Option<RequestId> {
    match p {
        Pending::Part(id)
        | Pending::Finish(id)
        | Pending::Multipart(id)
        | Pending::BundleOpen(id)
        | Pending::BundleSync(id)
        | Pending::BundleCommit(id) => Some(id),
        Pending::Handshake(_) | Pending::Echo | Pending::BundleDiscard => None,
    }
}

/// A short name of a message for errors.
pub fn describe_payload(payload: &Payload) -> String {
    match payload {
        Payload::MeterMod(m) => format!("meter_mod of meter {}", m.meter_id),
        Payload::GroupMod(g) => format!("group_mod of group {}", g.group_id),
        Payload::FlowMod(f) => format!("flow_mod {}", crate::switch::bundle::describe_flow(f)),
        Payload::PacketOut(_) => "packet_out".to_string(),
        Payload::RoleRequest(_) => "role request".to_string(),
        other => other.type_name().unwrap_or("message").to_string(),
    }
}
