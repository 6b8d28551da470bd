//! The sans-IO OpenFlow 1.5 session with Open vSwitch.
//!
//! Frames from the switch go in ([`Session::handle_frame`]), the clock goes in
//! ([`Session::tick`]), requests go in (`barrier`, `dump_flows`, `install`, ...); bytes to send
//! come out ([`Session::poll_transmit`]) and so do [`Event`]s. No sockets, no runtime, so every
//! behaviour is unit-tested with bytes.
//!
//! What it owns: xid allocation, the table of what each xid in flight belongs to, the output
//! queue, and the dispatch of each message from the switch to the part that handles it:
//! - `handshake`: HELLO, the configuration messages, the handshake timeout and echo;
//! - `requests`: barrier, send, multipart requests and their reassembly, and what every
//!   request shares (its xids, its first error, its completion);
//! - `install`: atomic bundles of flow_mods ([`Session::install`]);
//! - `monitor`: the flow monitor reporting changes made by others.

mod handshake;
mod install;
mod monitor;
mod requests;

use super::bundle::Bundle;
use super::error::{OfpError, SwitchError};
use bytes::{Bytes, BytesMut};
use handshake::{HandshakeStep, Phase};
use ofp::{
    ErrorMsg, FeaturesReply, FlowStats, FlowUpdate, Message, MeterStats, MultipartReplyBody, PacketIn, PacketIn2,
    Payload, Peek,
};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

pub use handshake::{offered_versions, version_name, HELLO_BITMAP};
pub use monitor::FLOW_MONITOR_ID;
pub use requests::{describe_payload, CookieFilter};

/// Identifies a request given to the session; [`Event::Completed`] carries it back.
pub type RequestId = u64;

/// Session settings.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Sent with NXT_SET_CONTROLLER_ID; `controller(id=N)` packet-ins go to this id only.
    pub controller_id: u16,
    /// Send an echo request after this long without hearing from the switch.
    pub echo_interval: Duration,
    /// Declare the switch dead after this many unanswered echo requests.
    pub echo_max_missed: u32,
    /// Give up if the handshake has not finished after this long.
    pub handshake_timeout: Duration,
    /// Ask the switch (in the handshake) to report every flow table change made by anyone
    /// else ([`Event::FlowsChangedElsewhere`]); see [`FLOW_MONITOR_ID`].
    pub flow_monitor: bool,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            controller_id: 0,
            echo_interval: Duration::from_secs(5),
            echo_max_missed: 3,
            handshake_timeout: Duration::from_secs(10),
            flow_monitor: true,
        }
    }
}

/// What a completed request returns.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// Barrier, message + barrier, or bundle commit done.
    Done,
    /// A reassembled flow dump.
    Flows(Vec<FlowStats>),
    /// Reassembled meter stats.
    MeterStats(Vec<MeterStats>),
    /// Another multipart reply, one body per part.
    Multipart(Vec<MultipartReplyBody>),
}

/// Something the owner of the session must know or act on.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake is done: requests may be submitted.
    Ready(FeaturesReply),
    /// The session is over (version mismatch, handshake failure, dead peer): close the
    /// connection. Requests still in flight will never complete.
    Closed(SwitchError),
    /// A request finished.
    Completed { id: RequestId, result: Result<Reply, SwitchError> },
    /// An NXT_PACKET_IN2 arrived.
    PacketIn2(PacketIn2),
    /// A standard OFPT_PACKET_IN arrived (userdata is lost in this format).
    PacketIn(PacketIn),
    /// The switch's echo request was answered (same xid, same payload).
    EchoAnswered { xid: u32 },
    /// An error whose xid belongs to no request in flight.
    UnsolicitedError { xid: u32, error: OfpError },
    /// A message that could not be decoded and belongs to no request in flight;
    /// `packet_in` when its header says it is a packet-in (standard or NXT_PACKET_IN2).
    Malformed { xid: u32, reason: String, packet_in: bool },
    /// The flow tables changed behind the session's back: flows added, removed or modified
    /// by someone else, or the switch paused/resumed its reports (changes may be missing),
    /// or a report could not be decoded (empty list). The owner should dump and repair.
    FlowsChangedElsewhere(Vec<FlowUpdate>),
    /// The switch refused the flow monitor (OVS before 3.0 on OpenFlow 1.5): foreign
    /// changes will not be reported.
    FlowMonitorRefused(OfpError),
    /// Any other message from the switch (port status, flow removed, ...).
    Unhandled(Message),
}

/// What an xid in flight belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Part of the handshake.
    Handshake(HandshakeStep),
    Echo,
    /// A message of request `id` that gets no reply on success; an error fails the request.
    Part(RequestId),
    /// The barrier completing request `id`.
    Finish(RequestId),
    Multipart(RequestId),
    BundleOpen(RequestId),
    /// Barrier after the last BUNDLE_ADD: decides commit or discard.
    BundleSync(RequestId),
    BundleCommit(RequestId),
    /// A discard whose answer nobody waits for.
    BundleDiscard,
}

#[derive(Debug)]
enum RequestKind {
    Plain,
    Multipart(Vec<MultipartReplyBody>),
    Bundle(Bundle),
}

#[derive(Debug)]
struct Request {
    what: String,
    /// Exact xids registered for this request, removed when it completes.
    xids: Vec<u32>,
    /// First error reported for one of its messages.
    error: Option<OfpError>,
    kind: RequestKind,
}

/// Output not yet handed to the transport, in order.
#[derive(Debug)]
enum Out {
    Bytes(BytesMut),
    /// BUNDLE_ADDs of request `id`, encoded lazily so big batches stream out while the switch
    /// is already decoding the first ones.
    BundleAdds(RequestId),
}

/// The sans-IO session. See the module doc.
#[derive(Debug)]
pub struct Session {
    config: SessionConfig,
    phase: Phase,
    started: Instant,
    next_xid: u32,
    next_request: RequestId,
    next_bundle_id: u32,
    pending: HashMap<u32, Pending>,
    requests: HashMap<RequestId, Request>,
    /// Requests that are bundles, for mapping BUNDLE_ADD xid ranges.
    bundles: Vec<RequestId>,
    urgent: BytesMut,
    queue: VecDeque<Out>,
    events: VecDeque<Event>,
    features: Option<FeaturesReply>,
    last_rx: Instant,
    last_echo_sent: Option<Instant>,
    echo_missed: u32,
}

impl Session {
    /// A new session on a fresh connection; its HELLO is queued for sending.
    pub(crate) fn new(config: SessionConfig, now: Instant) -> Self {
        let mut s = Session {
            config,
            phase: Phase::AwaitHello,
            started: now,
            next_xid: 1,
            next_request: 1,
            next_bundle_id: 1,
            pending: HashMap::new(),
            requests: HashMap::new(),
            bundles: Vec::new(),
            urgent: BytesMut::new(),
            queue: VecDeque::new(),
            events: VecDeque::new(),
            features: None,
            last_rx: now,
            last_echo_sent: None,
            echo_missed: 0,
        };
        s.send_hello();
        s
    }

    /// Whether the handshake is done and the session not closed.
    pub(crate) fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// The switch's FEATURES_REPLY, once received.
    pub fn features(&self) -> Option<&FeaturesReply> {
        self.features.as_ref()
    }

    /// Number of requests in flight.
    pub fn requests_in_flight(&self) -> usize {
        self.requests.len()
    }

    /// The next event, if any.
    pub(crate) fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether bytes are waiting to be sent.
    pub(crate) fn has_output(&self) -> bool {
        !self.urgent.is_empty() || !self.queue.is_empty()
    }

    /// Appends bytes to send to `out`, whole messages only, until `out` holds at least
    /// `limit` bytes or nothing is left. Echo replies go first.
    pub(crate) fn poll_transmit(&mut self, out: &mut BytesMut, limit: usize) {
        if !self.urgent.is_empty() {
            out.extend_from_slice(&self.urgent);
            self.urgent.clear();
        }
        while out.len() < limit {
            match self.queue.front_mut() {
                None => break,
                Some(Out::Bytes(bytes)) => {
                    if out.is_empty() {
                        std::mem::swap(out, bytes);
                    } else {
                        out.extend_from_slice(bytes);
                    }
                    self.queue.pop_front();
                }
                Some(Out::BundleAdds(id)) => {
                    let id = *id;
                    let done = match self.requests.get_mut(&id).map(|r| &mut r.kind) {
                        Some(RequestKind::Bundle(b)) => b.encode_adds(out, limit),
                        _ => true,
                    };
                    if done {
                        self.queue.pop_front();
                    }
                }
            }
        }
    }

    /// Processes one whole message from the switch (a frame as the framing codec yields it).
    pub(crate) fn handle_frame(&mut self, frame: &[u8], now: Instant) {
        if self.phase == Phase::Closed {
            return;
        }
        self.last_rx = now;
        self.echo_missed = 0;
        self.last_echo_sent = None;
        match Message::parse(frame) {
            Ok(msg) => self.handle_message(msg),
            Err(e) => self.handle_malformed(frame, e.to_string()),
        }
    }

    fn handle_malformed(&mut self, frame: &[u8], reason: String) {
        let peek = Peek::read(frame);
        let xid = peek.map_or(0, |p| p.header.xid);
        match self.pending.get(&xid).copied() {
            Some(Pending::Handshake(step)) => {
                self.close(SwitchError::Protocol(format!("undecodable answer to {}: {reason}", step.name())))
            }
            Some(p) => {
                if let Some(id) = requests::request_of(p) {
                    self.complete(id, Err(SwitchError::Protocol(format!("undecodable reply: {reason}"))));
                } else {
                    self.pending.remove(&xid);
                }
            }
            None => match self.bundle_for_add_xid(xid) {
                Some(id) => self.complete(id, Err(SwitchError::Protocol(format!("undecodable reply: {reason}")))),
                None => {
                    if peek.as_ref().is_some_and(monitor::is_flow_monitor_reply) {
                        // A change we cannot read is still a change.
                        self.events.push_back(Event::FlowsChangedElsewhere(Vec::new()));
                    }
                    self.reply_bad_request(xid, frame);
                    let packet_in = peek.is_some_and(|p| p.is_packet_in());
                    self.events.push_back(Event::Malformed { xid, reason, packet_in });
                }
            },
        }
    }

    /// Answers an undecodable message the switch sent on its own with OFPT_ERROR
    /// (OFPBRC_BAD_LEN, the first 64 bytes as data), as OpenFlow asks of either side; the
    /// connection stays up (only broken framing closes it).
    fn reply_bad_request(&mut self, xid: u32, frame: &[u8]) {
        let data = Bytes::copy_from_slice(frame.get(..64).unwrap_or(frame));
        if let Some(error) = ErrorMsg::from_name("OFPBRC_BAD_LEN", data) {
            self.urgent_msg(Message::new(xid, Payload::Error(error)));
        }
    }

    fn handle_message(&mut self, msg: Message) {
        let xid = msg.xid;
        match msg.payload {
            Payload::Hello(hello) => self.on_hello(msg.version, &hello),
            Payload::EchoRequest(data) => self.on_echo_request(xid, data),
            Payload::EchoReply(_) => self.on_echo_reply(xid),
            Payload::Error(err) => self.on_error(xid, &err),
            Payload::FeaturesReply(f)
                if self.pending.get(&xid) == Some(&Pending::Handshake(HandshakeStep::FeaturesRequest)) =>
            {
                self.pending.remove(&xid);
                self.features = Some(f);
            }
            Payload::BarrierReply => self.on_barrier_reply(xid),
            Payload::MultipartReply(reply) => match self.pending.get(&xid).copied() {
                Some(Pending::Multipart(id)) => self.on_multipart_reply(id, reply),
                Some(Pending::Handshake(HandshakeStep::FlowMonitor)) => self.on_monitor_created(xid, &reply),
                _ => self.on_unsolicited_reply(msg.version, xid, reply),
            },
            Payload::BundleControl(ctrl) => self.on_bundle_reply(xid, ctrl),
            Payload::PacketIn2(pi) => self.events.push_back(Event::PacketIn2(pi)),
            Payload::PacketIn(pi) => self.events.push_back(Event::PacketIn(pi)),
            payload => self.events.push_back(Event::Unhandled(Message { version: msg.version, xid, payload })),
        }
    }

    fn on_error(&mut self, xid: u32, err: &ErrorMsg) {
        let error = OfpError::from_msg(err);
        match self.pending.get(&xid).copied() {
            Some(Pending::Handshake(step)) => self.on_handshake_error(xid, step, error),
            Some(Pending::Echo) => {
                self.pending.remove(&xid);
                self.events.push_back(Event::UnsolicitedError { xid, error });
            }
            Some(Pending::Part(id)) => self.record_error(id, error),
            Some(Pending::Finish(id) | Pending::Multipart(id) | Pending::BundleSync(id)) => self.fail(id, error),
            Some(Pending::BundleOpen(id)) => self.on_open_error(xid, id, error),
            Some(Pending::BundleCommit(id)) => self.on_commit_error(id, error),
            Some(Pending::BundleDiscard) => {
                self.pending.remove(&xid);
            }
            None => match self.bundle_for_add_xid(xid) {
                Some(id) => self.on_add_error(xid, id, error),
                None => self.events.push_back(Event::UnsolicitedError { xid, error }),
            },
        }
    }

    fn on_barrier_reply(&mut self, xid: u32) {
        match self.pending.get(&xid).copied() {
            Some(Pending::Handshake(HandshakeStep::Barrier)) => self.on_handshake_barrier(xid),
            Some(Pending::Finish(id)) => self.finish(id),
            Some(Pending::BundleSync(id)) => self.bundle_synced(xid, id),
            _ => {}
        }
    }

    /// Allocates `n` consecutive xids that neither wrap nor use 0 (the xid of async messages).
    fn alloc_xids(&mut self, n: u32) -> u32 {
        let n = n.max(1);
        if self.next_xid.checked_add(n).is_none() {
            self.next_xid = 1;
        }
        let first = self.next_xid;
        self.next_xid = first.wrapping_add(n);
        if self.next_xid == 0 {
            self.next_xid = 1;
        }
        first
    }

    fn close(&mut self, reason: SwitchError) {
        if self.phase != Phase::Closed {
            self.phase = Phase::Closed;
            self.events.push_back(Event::Closed(reason));
        }
    }

    fn push_msg(&mut self, msg: Message) {
        let buf = self.tail_buffer();
        // Messages built here are small and well-formed; emit cannot fail on them.
        let _ = msg.emit(buf);
    }

    fn push_bytes(&mut self, bytes: &[u8]) {
        self.tail_buffer().extend_from_slice(bytes);
    }

    fn tail_buffer(&mut self) -> &mut BytesMut {
        if !matches!(self.queue.back(), Some(Out::Bytes(_))) {
            self.queue.push_back(Out::Bytes(BytesMut::new()));
        }
        match self.queue.back_mut() {
            Some(Out::Bytes(b)) => b,
            // Just ensured the tail is a byte buffer.
            _ => unreachable!("tail is a byte buffer"),
        }
    }

    fn urgent_msg(&mut self, msg: Message) {
        let _ = msg.emit(&mut self.urgent);
    }
}

#[cfg(test)]
mod tests;
