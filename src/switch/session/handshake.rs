//! The handshake and the keepalive: HELLO and the version check, the configuration messages
//! (FEATURES_REQUEST, SET_CONFIG miss_send_len=0xffff, NXT_SET_PACKET_IN_FORMAT(2),
//! NXT_SET_CONTROLLER_ID, the flow monitor, BARRIER), the handshake timeout, and echo
//! (answering the switch's, sending its own, declaring the peer dead).

use super::{monitor, Event, Pending, Session};
use crate::switch::error::{OfpError, SwitchError};
use bytes::Bytes;
use ofp::header::packet_in_format;
use ofp::{Hello, HelloElement, Message, Payload, SwitchConfig};
use std::time::Instant;

/// Version bitmap npagent offers: OpenFlow 1.5 only.
pub const HELLO_BITMAP: u32 = 1 << ofp::OFP_VERSION;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Our HELLO is out; waiting for the switch's.
    AwaitHello,
    /// Features/config/format/id sent; waiting for FEATURES_REPLY and the closing BARRIER.
    Configuring,
    Ready,
    Closed,
}

/// The messages of the handshake, in the order they are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HandshakeStep {
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
    pub(super) fn name(self) -> &'static str {
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

impl Session {
    /// Queues our HELLO, the first message on a fresh connection.
    pub(super) fn send_hello(&mut self) {
        let hello = Hello { elements: vec![HelloElement::VersionBitmap(vec![HELLO_BITMAP])] };
        let xid = self.alloc_xids(1);
        self.pending.insert(xid, Pending::Handshake(HandshakeStep::Hello));
        self.push_msg(Message::new(xid, Payload::Hello(hello)));
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

    /// The switch's HELLO: checks it offers OpenFlow 1.5, then sends the configuration.
    pub(super) fn on_hello(&mut self, version: u8, hello: &Hello) {
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
            steps.push((HandshakeStep::FlowMonitor, monitor::creation_request()));
        }
        steps.push((HandshakeStep::Barrier, Payload::BarrierRequest));
        for (step, payload) in steps {
            let xid = self.alloc_xids(1);
            self.pending.insert(xid, Pending::Handshake(step));
            self.push_msg(Message::new(xid, payload));
        }
    }

    /// The switch refused a message of the handshake: the session is over, unless it was the
    /// flow monitor.
    pub(super) fn on_handshake_error(&mut self, xid: u32, step: HandshakeStep, error: OfpError) {
        match step {
            HandshakeStep::FlowMonitor => self.on_monitor_refused(xid, error),
            step => self.close(SwitchError::Handshake(format!("switch rejected {}: {error}", step.name()))),
        }
    }

    /// The barrier closing the handshake came back: the configuration messages (which get no
    /// reply on success) are through, so the session is ready once FEATURES_REPLY is in.
    pub(super) fn on_handshake_barrier(&mut self, xid: u32) {
        self.pending.remove(&xid);
        if self.phase != Phase::Configuring {
            return;
        }
        match self.features.clone() {
            Some(f) => {
                self.pending.retain(|_, p| !matches!(p, Pending::Handshake(_)));
                self.phase = Phase::Ready;
                self.events.push_back(Event::Ready(f));
            }
            None => self.close(SwitchError::Handshake("no FEATURES_REPLY before the barrier reply".into())),
        }
    }

    /// The switch's echo request, answered ahead of anything queued (same xid, same payload).
    pub(super) fn on_echo_request(&mut self, xid: u32, data: Bytes) {
        self.urgent_msg(Message::new(xid, Payload::EchoReply(data)));
        self.events.push_back(Event::EchoAnswered { xid });
    }

    /// The answer to our own echo request.
    pub(super) fn on_echo_reply(&mut self, xid: u32) {
        if self.pending.get(&xid) == Some(&Pending::Echo) {
            self.pending.remove(&xid);
        }
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
