//! The sans-IO OpenFlow 1.5 session with Open vSwitch.
//!
//! Frames from the switch go in ([`Session::handle_frame`]), the clock goes in
//! ([`Session::tick`]), requests go in (`barrier`, `dump_flows`, `install`, ...); bytes to send
//! come out ([`Session::poll_transmit`]) and so do [`Event`]s. No sockets, no runtime, so every
//! behaviour is unit-tested with bytes.
//!
//! What it owns: xid allocation, the table of requests in flight (xid -> what it belongs to),
//! echo (answering the switch's, sending its own, declaring the peer dead), the handshake
//! (HELLO with bitmap 0x40, FEATURES, SET_CONFIG miss_send_len=0xffff,
//! NXT_SET_PACKET_IN_FORMAT(2), NXT_SET_CONTROLLER_ID, BARRIER), multipart reassembly and
//! bundles (see [`Session::install`]).

use super::bundle::{Bundle, BUNDLE_FLAGS};
use super::error::{OfpError, SwitchError};
use bytes::{Bytes, BytesMut};
use ofp::flow_monitor::OFPMP_FLOW_MONITOR;
use ofp::header::packet_in_format;
use ofp::{
    bundle_ctrl, BundleControl, ErrorMsg, FeaturesReply, FlowMod, FlowMonitorRequest, FlowStats, FlowStatsRequest,
    FlowUpdate, Hello, HelloElement, Match, Message, MeterStats, MultipartReply, MultipartReplyBody, MultipartRequest,
    MultipartRequestBody, PacketIn, PacketIn2, Payload, Peek, SwitchConfig,
};
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Identifies a request given to the session; [`Event::Completed`] carries it back.
pub type RequestId = u64;

/// Version bitmap npagent offers: OpenFlow 1.5 only.
pub const HELLO_BITMAP: u32 = 1 << ofp::OFP_VERSION;
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Our HELLO is out; waiting for the switch's.
    AwaitHello,
    /// Features/config/format/id sent; waiting for FEATURES_REPLY and the closing BARRIER.
    Configuring,
    Ready,
    Closed,
}

/// The messages of the handshake, in the order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HandshakeStep {
    Hello,
    FeaturesRequest,
    SetConfig,
    SetPacketInFormat,
    SetControllerId,
    /// Creates the flow monitor; a switch that refuses it still gets a working session.
    FlowMonitor,
    Barrier,
}

impl HandshakeStep {
    /// The message's name, for errors.
    fn name(self) -> &'static str {
        match self {
            HandshakeStep::Hello => "HELLO",
            HandshakeStep::FeaturesRequest => "FEATURES_REQUEST",
            HandshakeStep::SetConfig => "SET_CONFIG",
            HandshakeStep::SetPacketInFormat => "NXT_SET_PACKET_IN_FORMAT",
            HandshakeStep::SetControllerId => "NXT_SET_CONTROLLER_ID",
            HandshakeStep::FlowMonitor => "FLOW_MONITOR",
            HandshakeStep::Barrier => "BARRIER",
        }
    }
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
    pub fn new(config: SessionConfig, now: Instant) -> Self {
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
        let hello = Hello { elements: vec![HelloElement::VersionBitmap(vec![HELLO_BITMAP])] };
        let xid = s.alloc_xids(1);
        s.pending.insert(xid, Pending::Handshake(HandshakeStep::Hello));
        s.push_msg(Message::new(xid, Payload::Hello(hello)));
        s
    }

    /// Whether the handshake is done and the session not closed.
    pub fn is_ready(&self) -> bool {
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
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether bytes are waiting to be sent.
    pub fn has_output(&self) -> bool {
        !self.urgent.is_empty() || !self.queue.is_empty()
    }

    /// Appends bytes to send to `out`, whole messages only, until `out` holds at least
    /// `limit` bytes or nothing is left. Echo replies go first.
    pub fn poll_transmit(&mut self, out: &mut BytesMut, limit: usize) {
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

    /// Feeds the clock: handshake timeout, echo keepalive, dead-peer detection.
    pub fn tick(&mut self, now: Instant) {
        match self.phase {
            Phase::Closed => {}
            Phase::AwaitHello | Phase::Configuring => {
                if now.saturating_duration_since(self.started) >= self.config.handshake_timeout {
                    let step = if self.phase == Phase::AwaitHello { "HELLO" } else { "FEATURES/BARRIER" };
                    self.close(SwitchError::Handshake(format!(
                        "no {step} from the switch within {:?}",
                        self.config.handshake_timeout
                    )));
                }
            }
            Phase::Ready => {
                let interval = self.config.echo_interval;
                let quiet = now.saturating_duration_since(self.last_rx) >= interval;
                let due = self.last_echo_sent.is_none_or(|t| now.saturating_duration_since(t) >= interval);
                if quiet && due {
                    if self.echo_missed >= self.config.echo_max_missed {
                        self.close(SwitchError::Disconnected(Some(format!(
                            "no answer to {} echo requests",
                            self.echo_missed
                        ))));
                        return;
                    }
                    let xid = self.alloc_xids(1);
                    self.pending.insert(xid, Pending::Echo);
                    self.urgent_msg(Message::new(xid, Payload::EchoRequest(Bytes::new())));
                    self.last_echo_sent = Some(now);
                    self.echo_missed += 1;
                }
            }
        }
    }

    /// Processes one whole message from the switch (a frame as the framing codec yields it).
    pub fn handle_frame(&mut self, frame: &[u8], now: Instant) {
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
                if let Some(id) = request_of(p) {
                    self.complete(id, Err(SwitchError::Protocol(format!("undecodable reply: {reason}"))));
                } else {
                    self.pending.remove(&xid);
                }
            }
            None => match self.bundle_for_add_xid(xid) {
                Some(id) => self.complete(id, Err(SwitchError::Protocol(format!("undecodable reply: {reason}")))),
                None => {
                    if peek.is_some_and(|p| p.is_multipart_reply(OFPMP_FLOW_MONITOR)) {
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
        let data = Bytes::copy_from_slice(&frame[..frame.len().min(64)]);
        if let Some(error) = ErrorMsg::from_name("OFPBRC_BAD_LEN", data) {
            self.urgent_msg(Message::new(xid, Payload::Error(error)));
        }
    }

    fn handle_message(&mut self, msg: Message) {
        let xid = msg.xid;
        match msg.payload {
            Payload::Hello(hello) => self.on_hello(msg.version, &hello),
            Payload::EchoRequest(data) => {
                self.urgent_msg(Message::new(xid, Payload::EchoReply(data)));
                self.events.push_back(Event::EchoAnswered { xid });
            }
            Payload::EchoReply(_) => {
                if self.pending.get(&xid) == Some(&Pending::Echo) {
                    self.pending.remove(&xid);
                }
            }
            Payload::Error(err) => self.on_error(xid, &err),
            Payload::FeaturesReply(f)
                if self.pending.get(&xid) == Some(&Pending::Handshake(HandshakeStep::FeaturesRequest)) =>
            {
                self.pending.remove(&xid);
                self.features = Some(f);
            }
            Payload::BarrierReply => self.on_barrier_reply(xid),
            Payload::MultipartReply(reply) => match self.pending.get(&xid).copied() {
                Some(Pending::Multipart(id)) => {
                    let more = reply.flags & ofp::multipart::MULTIPART_MORE != 0;
                    if let Some(Request { kind: RequestKind::Multipart(parts), .. }) = self.requests.get_mut(&id) {
                        parts.push(reply.body);
                    }
                    if !more {
                        let result = self.take_multipart(id);
                        self.complete(id, result);
                    }
                }
                Some(Pending::Handshake(HandshakeStep::FlowMonitor)) => {
                    // The creation's reply holds no flows (no INITIAL flag).
                    if reply.flags & ofp::multipart::MULTIPART_MORE == 0 {
                        self.pending.remove(&xid);
                    }
                }
                _ => self.on_unsolicited_reply(msg.version, xid, reply),
            },
            Payload::BundleControl(ctrl) => self.on_bundle_reply(xid, ctrl),
            Payload::PacketIn2(pi) => self.events.push_back(Event::PacketIn2(pi)),
            Payload::PacketIn(pi) => self.events.push_back(Event::PacketIn(pi)),
            payload => self.events.push_back(Event::Unhandled(Message { version: msg.version, xid, payload })),
        }
    }

    /// A multipart reply for no request: flow monitor updates (xid 0), or something else.
    fn on_unsolicited_reply(&mut self, version: u8, xid: u32, reply: MultipartReply) {
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

    fn on_hello(&mut self, version: u8, hello: &Hello) {
        if self.phase != Phase::AwaitHello {
            return;
        }
        let offered = offered_versions(version, hello);
        if !offered.contains(&ofp::OFP_VERSION) {
            let list: Vec<String> = offered.iter().map(|v| version_name(*v)).collect();
            let list = if list.is_empty() { "nothing".to_string() } else { list.join(", ") };
            self.close(SwitchError::Handshake(format!("switch does not offer OpenFlow 1.5 (offers {list})")));
            return;
        }
        self.pending.retain(|_, p| *p != Pending::Handshake(HandshakeStep::Hello));
        self.phase = Phase::Configuring;
        // A non-zero miss_send_len also enables packet-ins on the `.mgmt` socket.
        let config = SwitchConfig { flags: 0, miss_send_len: ofp::MAX_LEN_NO_BUFFER };
        let mut steps = vec![
            (HandshakeStep::FeaturesRequest, Payload::FeaturesRequest),
            (HandshakeStep::SetConfig, Payload::SetConfig(config)),
            (HandshakeStep::SetPacketInFormat, Payload::SetPacketInFormat(packet_in_format::NXT_PACKET_IN2)),
            (HandshakeStep::SetControllerId, Payload::SetControllerId(self.config.controller_id)),
        ];
        if self.config.flow_monitor {
            let body = MultipartRequestBody::FlowMonitor(vec![FlowMonitorRequest::all_changes(FLOW_MONITOR_ID)]);
            steps.push((HandshakeStep::FlowMonitor, Payload::MultipartRequest(MultipartRequest { flags: 0, body })));
        }
        steps.push((HandshakeStep::Barrier, Payload::BarrierRequest));
        for (step, payload) in steps {
            let xid = self.alloc_xids(1);
            self.pending.insert(xid, Pending::Handshake(step));
            self.push_msg(Message::new(xid, payload));
        }
    }

    fn on_error(&mut self, xid: u32, err: &ErrorMsg) {
        let error = OfpError::from_msg(err);
        match self.pending.get(&xid).copied() {
            Some(Pending::Handshake(HandshakeStep::FlowMonitor)) => {
                // Not worth failing the connection for: enforcement works without it.
                self.pending.remove(&xid);
                self.events.push_back(Event::FlowMonitorRefused(error));
            }
            Some(Pending::Handshake(step)) => {
                self.close(SwitchError::Handshake(format!("switch rejected {}: {error}", step.name())));
            }
            Some(Pending::Echo) => {
                self.pending.remove(&xid);
                self.events.push_back(Event::UnsolicitedError { xid, error });
            }
            Some(Pending::Part(id)) => self.record_error(id, error),
            Some(Pending::Finish(id)) | Some(Pending::Multipart(id)) => {
                self.record_error(id, error);
                let result = Err(self.rejection(id));
                self.complete(id, result);
            }
            Some(Pending::BundleOpen(id)) => {
                self.pending.remove(&xid);
                if let Some(Request { kind: RequestKind::Bundle(b), .. }) = self.requests.get_mut(&id) {
                    b.open_error.get_or_insert(error);
                }
            }
            Some(Pending::BundleSync(id)) => {
                self.record_error(id, error);
                let result = Err(self.rejection(id));
                self.complete(id, result);
            }
            Some(Pending::BundleCommit(id)) => {
                let result = match self.requests.get(&id).map(|r| &r.kind) {
                    Some(RequestKind::Bundle(b)) => b.failure(Some(error.clone())),
                    _ => None,
                };
                let result = result.unwrap_or(SwitchError::Rejected { request: "bundle commit".into(), error });
                self.complete(id, Err(result));
            }
            Some(Pending::BundleDiscard) => {
                self.pending.remove(&xid);
            }
            None => match self.bundle_for_add_xid(xid) {
                Some(id) => {
                    if let Some(Request { kind: RequestKind::Bundle(b), .. }) = self.requests.get_mut(&id) {
                        if let Some(index) = b.index_of(xid) {
                            b.flow_errors.push((index, error));
                        }
                    }
                }
                None => self.events.push_back(Event::UnsolicitedError { xid, error }),
            },
        }
    }

    fn on_barrier_reply(&mut self, xid: u32) {
        match self.pending.get(&xid).copied() {
            Some(Pending::Handshake(HandshakeStep::Barrier)) => {
                self.pending.remove(&xid);
                if self.phase != Phase::Configuring {
                    return;
                }
                match self.features.clone() {
                    Some(f) => {
                        // The configuration messages get no reply on success.
                        self.pending.retain(|_, p| !matches!(p, Pending::Handshake(_)));
                        self.phase = Phase::Ready;
                        self.events.push_back(Event::Ready(f));
                    }
                    None => self.close(SwitchError::Handshake("no FEATURES_REPLY before the barrier reply".into())),
                }
            }
            Some(Pending::Finish(id)) => {
                let result = match self.requests.get(&id).and_then(|r| r.error.as_ref()) {
                    Some(_) => Err(self.rejection(id)),
                    None => Ok(Reply::Done),
                };
                self.complete(id, result);
            }
            Some(Pending::BundleSync(id)) => self.bundle_synced(xid, id),
            _ => {}
        }
    }

    /// Every BUNDLE_ADD has been processed: commit if the switch accepted them all, else
    /// discard (OVS keeps a bundle open after an ADD is refused, so committing would apply
    /// the rest) and report the offending flow.
    fn bundle_synced(&mut self, sync_xid: u32, id: RequestId) {
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

    fn on_bundle_reply(&mut self, xid: u32, ctrl: BundleControl) {
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

    // ---- requests -------------------------------------------------------------------------

    /// A barrier: completes when the switch has processed everything sent before it.
    pub fn barrier(&mut self) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        let id = self.new_request("barrier".into(), RequestKind::Plain);
        let xid = self.alloc_xids(1);
        self.register(id, xid, Pending::Finish(id));
        self.push_msg(Message::new(xid, Payload::BarrierRequest));
        Ok(id)
    }

    /// Sends a message that gets no reply on success (meter_mod, group_mod, packet_out,
    /// flow_mod...) followed by a barrier: completes `Done`, or with the switch's error.
    pub fn send(&mut self, payload: Payload) -> Result<RequestId, SwitchError> {
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

    /// Dumps the flows of one table (or all): completes with [`Reply::Flows`].
    pub fn dump_flows(&mut self, table: Option<u8>) -> Result<RequestId, SwitchError> {
        let body = MultipartRequestBody::Flow(FlowStatsRequest {
            table_id: table.unwrap_or(ofp::TABLE_ALL),
            out_port: ofp::port::ANY,
            out_group: ofp::GROUP_ANY,
            cookie: 0,
            cookie_mask: 0,
            match_: Match::default(),
        });
        let what = match table {
            Some(t) => format!("flow dump of table {t}"),
            None => "flow dump".to_string(),
        };
        self.multipart(what, body)
    }

    /// Meter statistics of one meter (0xffffffff: all): completes with [`Reply::MeterStats`].
    pub fn meter_stats(&mut self, meter_id: u32) -> Result<RequestId, SwitchError> {
        self.multipart(format!("meter stats of meter {meter_id}"), MultipartRequestBody::MeterStats { meter_id })
    }

    /// Any multipart request: completes with the reassembled parts.
    pub fn multipart(&mut self, what: String, body: MultipartRequestBody) -> Result<RequestId, SwitchError> {
        self.check_ready()?;
        let id = self.new_request(what, RequestKind::Multipart(Vec::new()));
        let xid = self.alloc_xids(1);
        self.register(id, xid, Pending::Multipart(id));
        self.push_msg(Message::new(xid, Payload::MultipartRequest(MultipartRequest { flags: 0, body })));
        Ok(id)
    }

    /// Installs `flows` in one atomic bundle: OPEN, one BUNDLE_ADD per flow (unique xid each,
    /// so an error maps back to its flow), a BARRIER, then COMMIT if the switch refused none of
    /// them, else DISCARD. Completes `Done` once committed, or with
    /// [`SwitchError::BundleFailed`] naming the offending flows (every refused ADD; at commit
    /// time OVS names only the first flow_mod that failed); either way the tables hold all or
    /// nothing of the batch.
    pub fn install(&mut self, flows: Vec<FlowMod>) -> Result<RequestId, SwitchError> {
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

    // ---- internals ------------------------------------------------------------------------

    fn check_ready(&self) -> Result<(), SwitchError> {
        match self.phase {
            Phase::Ready => Ok(()),
            Phase::Closed => Err(SwitchError::Disconnected(Some("session closed".into()))),
            _ => Err(SwitchError::Disconnected(Some("handshake not finished".into()))),
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

    fn new_request(&mut self, what: String, kind: RequestKind) -> RequestId {
        let id = self.next_request;
        self.next_request += 1;
        self.requests.insert(id, Request { what, xids: Vec::new(), error: None, kind });
        id
    }

    fn register(&mut self, id: RequestId, xid: u32, pending: Pending) {
        self.pending.insert(xid, pending);
        if let Some(r) = self.requests.get_mut(&id) {
            r.xids.push(xid);
        }
    }

    fn record_error(&mut self, id: RequestId, error: OfpError) {
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
        if parts.iter().all(|p| matches!(p, MultipartReplyBody::Flow(_))) && !parts.is_empty() {
            let mut flows = Vec::new();
            for p in parts {
                if let MultipartReplyBody::Flow(f) = p {
                    flows.extend(f);
                }
            }
            return Ok(Reply::Flows(flows));
        }
        if parts.iter().all(|p| matches!(p, MultipartReplyBody::MeterStats(_))) && !parts.is_empty() {
            let mut stats = Vec::new();
            for p in parts {
                if let MultipartReplyBody::MeterStats(s) = p {
                    stats.extend(s);
                }
            }
            return Ok(Reply::MeterStats(stats));
        }
        Ok(Reply::Multipart(parts))
    }

    fn complete(&mut self, id: RequestId, result: Result<Reply, SwitchError>) {
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

    fn bundle_for_add_xid(&self, xid: u32) -> Option<RequestId> {
        self.bundles.iter().copied().find(|id| {
            matches!(self.requests.get(id).map(|r| &r.kind), Some(RequestKind::Bundle(b)) if b.index_of(xid).is_some())
        })
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

fn request_of(p: Pending) -> Option<RequestId> {
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

/// Versions a HELLO offers: its bitmap if it has one, else every version up to the header's.
pub fn offered_versions(header_version: u8, hello: &Hello) -> Vec<u8> {
    let bitmap = hello.elements.iter().find_map(|e| match e {
        HelloElement::VersionBitmap(words) => Some(words),
        _ => None,
    });
    match bitmap {
        Some(words) => (0u8..=254)
            .filter(|v| {
                let word = usize::from(*v / 32);
                words.get(word).is_some_and(|w| w & (1u32 << (v % 32)) != 0)
            })
            .collect(),
        None => (1..=header_version).collect(),
    }
}

/// "1.0" for 0x01 ... "1.5" for 0x06.
pub fn version_name(v: u8) -> String {
    match v {
        1..=6 => format!("1.{}", v - 1),
        _ => format!("{v:#04x}"),
    }
}

/// A short name of a message for errors.
pub fn describe_payload(payload: &Payload) -> String {
    match payload {
        Payload::MeterMod(m) => format!("meter_mod of meter {}", m.meter_id),
        Payload::GroupMod(g) => format!("group_mod of group {}", g.group_id),
        Payload::FlowMod(f) => format!("flow_mod {}", super::bundle::describe_flow(f)),
        Payload::PacketOut(_) => "packet_out".to_string(),
        Payload::RoleRequest(_) => "role request".to_string(),
        other => other.type_name().unwrap_or("message").to_string(),
    }
}

#[cfg(test)]
mod tests;
