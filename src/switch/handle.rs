//! [`SwitchHandle`]: the cloneable, async face of the switch connection, and what the handles
//! share with the connection task (its [`ConnState`], its counters, the requests they send it).
//! The task in `connection.rs` builds on this module, never the reverse.

use super::error::SwitchError;
use super::session::{CookieFilter, Reply};
use ofp::{FlowMod, FlowStats, GroupMod, Message, MeterMod, MeterStats, PacketOut, Payload};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The connection's state as its owner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnState {
    /// Not connected (yet, or any more); `reason` says why when known.
    Disconnected { reason: Option<String> },
    /// Handshake done. `generation` grows by one with every successful (re)connection: a new
    /// generation means the switch may have lost state, so the owner resyncs.
    Connected { generation: u64, datapath_id: u64 },
}

/// What the connection task counts and never loses silently.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Packet-ins dropped because the packet-in stream was full (or its receiver gone).
    pub(crate) packet_ins_dropped: AtomicU64,
    /// Packet-ins the strict parser rejected.
    pub(crate) packet_ins_malformed: AtomicU64,
    /// Other messages from the switch that did not decode and answered no request.
    pub(crate) other_malformed: AtomicU64,
}

/// A request for the connection task.
pub(crate) enum Op {
    Barrier,
    Send(Payload),
    DumpFlows(Option<u8>, CookieFilter),
    MeterStats(u32),
    Install(Vec<FlowMod>),
}

pub(crate) struct Command {
    pub(crate) op: Op,
    pub(crate) reply: oneshot::Sender<Result<Reply, SwitchError>>,
}

/// Talks to the switch through the connection task. Cheap to clone; every method may be called
/// concurrently from many tasks. Requests made while the switch is disconnected fail at once
/// with [`SwitchError::Disconnected`]; requests in flight when it goes away fail the same way.
#[derive(Clone)]
pub struct SwitchHandle {
    pub(super) cmd: mpsc::Sender<Command>,
    pub(super) state: watch::Receiver<ConnState>,
    pub(super) drift: watch::Receiver<u64>,
    pub(super) counters: Arc<Counters>,
    pub(super) request_timeout: Duration,
    pub(super) install_timeout: Duration,
}

impl std::fmt::Debug for SwitchHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwitchHandle").field("state", &*self.state.borrow()).finish()
    }
}

impl SwitchHandle {
    /// The current connection state.
    pub fn state(&self) -> ConnState {
        self.state.borrow().clone()
    }

    /// A receiver of connection state changes (to resync after a reconnect).
    pub fn subscribe(&self) -> watch::Receiver<ConnState> {
        self.state.clone()
    }

    /// A receiver whose value grows whenever the switch reports that someone else changed its
    /// flow tables (OpenFlow flow monitor; npagent's own changes are not reported), or, when
    /// the switch has no flow monitor, every `drift_poll_interval`. The owner should then
    /// dump the flows and repair the difference.
    pub fn subscribe_drift(&self) -> watch::Receiver<u64> {
        self.drift.clone()
    }

    /// Waits until the switch is connected (or already is); returns the generation and
    /// datapath id, or `Timeout`.
    pub async fn wait_connected(&self, timeout: Duration) -> Result<(u64, u64), SwitchError> {
        let mut rx = self.state.clone();
        let wait = async {
            loop {
                if let ConnState::Connected { generation, datapath_id } = *rx.borrow_and_update() {
                    return Ok((generation, datapath_id));
                }
                if rx.changed().await.is_err() {
                    return Err(SwitchError::Stopped);
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .unwrap_or_else(|_| Err(SwitchError::Timeout { request: "connection".into(), after: timeout }))
    }

    /// Packet-ins dropped because the packet-in stream was full (or its receiver gone).
    pub fn packet_in_dropped(&self) -> u64 {
        self.counters.packet_ins_dropped.load(Ordering::Relaxed)
    }

    /// Packet-ins the strict parser rejected (a malformed NXT_PACKET_IN2 or OFPT_PACKET_IN).
    pub(crate) fn packet_in_malformed(&self) -> u64 {
        self.counters.packet_ins_malformed.load(Ordering::Relaxed)
    }

    /// Installs `flows` atomically in one bundle; returns once the switch committed it. On
    /// error nothing of the batch is in the tables; [`SwitchError::BundleFailed`] names the
    /// offending flow by its index in `flows`.
    pub async fn install(&self, flows: Vec<FlowMod>) -> Result<(), SwitchError> {
        let what = format!("bundle of {} flows", flows.len());
        self.call(Op::Install(flows), what, self.install_timeout).await.map(|_| ())
    }

    /// Dumps the flows of one table, or of all tables.
    pub async fn dump_flows(&self, table: Option<u8>) -> Result<Vec<FlowStats>, SwitchError> {
        self.dump_flows_with_cookie(table, CookieFilter::default()).await
    }

    /// The flows of table `table` (every table when `None`) whose cookie matches `filter`:
    /// the switch leaves the others out of its reply.
    pub async fn dump_flows_with_cookie(
        &self,
        table: Option<u8>,
        filter: CookieFilter,
    ) -> Result<Vec<FlowStats>, SwitchError> {
        match self.call(Op::DumpFlows(table, filter), "flow dump".into(), self.request_timeout).await? {
            Reply::Flows(flows) => Ok(flows),
            Reply::Multipart(parts) if parts.is_empty() => Ok(Vec::new()),
            other => Err(unexpected("flow dump", &other)),
        }
    }

    /// Waits until the switch has processed everything sent before.
    pub async fn barrier(&self) -> Result<(), SwitchError> {
        self.call(Op::Barrier, "barrier".into(), self.request_timeout).await.map(|_| ())
    }

    /// Sends one message that gets no reply on success (the xid is chosen here), followed by a
    /// barrier; returns the switch's error for it if there is one.
    pub(crate) async fn send(&self, msg: Message) -> Result<(), SwitchError> {
        let what = super::session::describe_payload(&msg.payload);
        self.call(Op::Send(msg.payload), what, self.request_timeout).await.map(|_| ())
    }

    /// Adds, modifies or deletes a meter.
    pub async fn meter_mod(&self, meter: MeterMod) -> Result<(), SwitchError> {
        self.send(Message::new(0, Payload::MeterMod(meter))).await
    }

    /// Adds, modifies or deletes a group.
    pub async fn group_mod(&self, group: GroupMod) -> Result<(), SwitchError> {
        self.send(Message::new(0, Payload::GroupMod(group))).await
    }

    /// Sends a packet out through the switch's pipeline or a port.
    pub async fn packet_out(&self, packet: PacketOut) -> Result<(), SwitchError> {
        self.send(Message::new(0, Payload::PacketOut(packet))).await
    }

    /// Statistics of one meter (0xffffffff: all meters).
    pub async fn meter_stats(&self, meter_id: u32) -> Result<Vec<MeterStats>, SwitchError> {
        match self.call(Op::MeterStats(meter_id), "meter stats".into(), self.request_timeout).await? {
            Reply::MeterStats(stats) => Ok(stats),
            Reply::Multipart(parts) if parts.is_empty() => Ok(Vec::new()),
            other => Err(unexpected("meter stats", &other)),
        }
    }

    async fn call(&self, op: Op, what: String, timeout: Duration) -> Result<Reply, SwitchError> {
        let (reply, rx) = oneshot::channel();
        let run = async {
            self.cmd.send(Command { op, reply }).await.map_err(|_| SwitchError::Stopped)?;
            rx.await.map_err(|_| SwitchError::Stopped)?
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(result) => result,
            Err(_) => Err(SwitchError::Timeout { request: what, after: timeout }),
        }
    }
}

fn unexpected(what: &str, reply: &Reply) -> SwitchError {
    let kind = match reply {
        Reply::Done => "an empty reply",
        Reply::Flows(_) => "flow stats",
        Reply::MeterStats(_) => "meter stats",
        Reply::Multipart(_) => "another multipart reply",
    };
    SwitchError::Protocol(format!("{what} answered with {kind}"))
}
