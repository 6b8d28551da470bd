//! The tokio task around the [`Session`]: connects (and reconnects with backoff), frames the
//! byte stream, reads and writes concurrently, and links requests from [`SwitchHandle`]s to
//! their completions.

use super::error::SwitchError;
use super::handle::{Command, ConnState, Counters, Op, SwitchHandle};
use super::session::{Event, Reply, RequestId, Session, SessionConfig};
use crate::endpoint::{Endpoint, Stream};
use crate::rate_limited::RateLimitedWarning;
use bytes::BytesMut;
use futures::StreamExt;
use ofp::codec::OfpCodec;
use ofp::{FlowUpdate, PacketIn2};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;

/// Connection settings.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    pub endpoint: Endpoint,
    pub session: SessionConfig,
    /// Capacity of the packet-in stream; packet-ins beyond it are counted and dropped.
    pub packet_in_capacity: usize,
    /// Capacity of the request channel from the handles.
    pub command_capacity: usize,
    /// First reconnect delay; doubles up to `backoff_max`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// How long barrier, send, dumps and stats may take.
    pub request_timeout: Duration,
    /// How long an `install` may take (large bundles take seconds).
    pub install_timeout: Duration,
    /// When the switch refuses the flow monitor, how often to report possible drift anyway
    /// (so the owner falls back to a periodic dump-and-diff).
    pub drift_poll_interval: Duration,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            endpoint: Endpoint::default_ofp(),
            session: SessionConfig::default(),
            packet_in_capacity: 4096,
            command_capacity: 64,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            install_timeout: Duration::from_secs(300),
            drift_poll_interval: Duration::from_secs(10),
        }
    }
}

/// Writes go out in chunks of about this size; the session encodes more only when the
/// pending write buffer has drained below it, so a huge bundle never sits whole in memory.
const WRITE_HIGH_WATER: usize = 256 * 1024;

/// Starts the connection task on the current tokio runtime. Returns the handle (clone it
/// freely) and the bounded stream of packet-ins. The task ends when every handle is dropped.
pub fn spawn(config: ConnectionConfig) -> (SwitchHandle, mpsc::Receiver<PacketIn2>) {
    let (cmd_tx, cmd_rx) = mpsc::channel(config.command_capacity.max(1));
    let (pi_tx, pi_rx) = mpsc::channel(config.packet_in_capacity.max(1));
    let (state_tx, state_rx) = watch::channel(ConnState::Disconnected { reason: None });
    let (drift_tx, drift_rx) = watch::channel(0u64);
    let counters = Arc::new(Counters::default());
    let handle = SwitchHandle {
        cmd: cmd_tx,
        state: state_rx,
        drift: drift_rx,
        counters: counters.clone(),
        request_timeout: config.request_timeout,
        install_timeout: config.install_timeout,
    };
    let task = Task {
        config,
        cmd_rx,
        state_tx,
        drift_tx,
        pi_tx,
        counters,
        packet_ins_malformed_warning: RateLimitedWarning::default(),
        other_malformed_warning: RateLimitedWarning::default(),
        generation: 0,
        monitor_refused: false,
    };
    tokio::spawn(task.run());
    (handle, pi_rx)
}

struct Task {
    config: ConnectionConfig,
    cmd_rx: mpsc::Receiver<Command>,
    state_tx: watch::Sender<ConnState>,
    /// Counts reports of flow table changes made by someone else (see [`SwitchHandle::subscribe_drift`]).
    drift_tx: watch::Sender<u64>,
    pi_tx: mpsc::Sender<PacketIn2>,
    counters: Arc<Counters>,
    /// Warn of the two malformed counters at most once a minute: a flood must not flood the log.
    packet_ins_malformed_warning: RateLimitedWarning,
    other_malformed_warning: RateLimitedWarning,
    generation: u64,
    /// The switch refused the flow monitor on this connection: poll instead.
    monitor_refused: bool,
}

/// How one connection ended.
enum End {
    /// Every handle is gone: stop the task.
    HandlesGone,
    /// The connection is over; reconnect. `ready` says whether the handshake had finished.
    Lost { reason: SwitchError, ready: bool },
}

impl Task {
    async fn run(mut self) {
        let mut backoff = self.config.backoff_min;
        loop {
            let reason = match self.config.endpoint.connect().await {
                Ok(stream) => match self.run_connection(stream).await {
                    End::HandlesGone => return,
                    End::Lost { reason, ready } => {
                        if ready {
                            backoff = self.config.backoff_min;
                        }
                        reason.to_string()
                    }
                },
                Err(e) => format!("connecting to {}: {e}", self.config.endpoint),
            };
            tracing::warn!(endpoint = %self.config.endpoint, %reason, retry_in = ?backoff, "switch connection down");
            self.state_tx.send_replace(ConnState::Disconnected { reason: Some(reason.clone()) });
            if self.refuse_until(tokio::time::Instant::now() + backoff, &reason).await {
                return;
            }
            backoff = (backoff * 2).min(self.config.backoff_max);
        }
    }

    /// Fails every request that arrives before `deadline`; true if every handle is gone.
    async fn refuse_until(&mut self, deadline: tokio::time::Instant, reason: &str) -> bool {
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return false,
                cmd = self.cmd_rx.recv() => match cmd {
                    None => return true,
                    Some(cmd) => {
                        let _ = cmd.reply.send(Err(SwitchError::Disconnected(Some(reason.to_string()))));
                    }
                },
            }
        }
    }

    async fn run_connection(&mut self, stream: Box<dyn Stream>) -> End {
        let (rd, mut wr) = tokio::io::split(stream);
        let mut frames = FramedRead::new(rd, OfpCodec);
        let mut session = Session::new(self.config.session.clone(), Instant::now());
        let mut waiters: HashMap<RequestId, oneshot::Sender<Result<Reply, SwitchError>>> = HashMap::new();
        let mut wbuf = BytesMut::new();
        let tick_every =
            (self.config.session.echo_interval / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

        let start_generation = self.generation;
        self.monitor_refused = false;
        let mut last_drift_poll = Instant::now();
        let end = loop {
            session.poll_transmit(&mut wbuf, WRITE_HIGH_WATER);
            if let Some(reason) = self.dispatch_events(&mut session, &mut waiters) {
                break lost(reason);
            }
            let accept = session.is_ready() && wbuf.len() < WRITE_HIGH_WATER && !session.has_output();
            tokio::select! {
                frame = frames.next() => match frame {
                    Some(Ok(frame)) => session.handle_frame(frame.bytes(), Instant::now()),
                    Some(Err(e)) => break lost(SwitchError::Protocol(format!("framing: {e}"))),
                    None => break lost(SwitchError::Disconnected(Some("connection closed by the switch".into()))),
                },
                written = wr.write_buf(&mut wbuf), if !wbuf.is_empty() => match written {
                    Ok(0) => break lost(SwitchError::Disconnected(Some("switch stopped reading".into()))),
                    Ok(_) => {}
                    Err(e) => break lost(SwitchError::Disconnected(Some(format!("write: {e}")))),
                },
                cmd = self.cmd_rx.recv(), if accept => match cmd {
                    None => break End::HandlesGone,
                    Some(cmd) => submit(&mut session, &mut waiters, cmd),
                },
                _ = tick.tick() => {
                    session.tick(Instant::now());
                    if self.monitor_refused && last_drift_poll.elapsed() >= self.config.drift_poll_interval {
                        last_drift_poll = Instant::now();
                        self.report_drift();
                    }
                }
            }
        };
        let end = match end {
            End::Lost { reason, .. } => End::Lost { reason, ready: self.generation > start_generation },
            End::HandlesGone => End::HandlesGone,
        };
        let reason = match &end {
            End::Lost { reason, .. } => reason.to_string(),
            End::HandlesGone => "connection task stopping".to_string(),
        };
        for (_, waiter) in waiters.drain() {
            let _ = waiter.send(Err(SwitchError::Disconnected(Some(format!("request in flight lost: {reason}")))));
        }
        let _ = wr.shutdown().await;
        end
    }

    /// Handles the session's events; returns the reason if the session closed.
    fn dispatch_events(
        &mut self,
        session: &mut Session,
        waiters: &mut HashMap<RequestId, oneshot::Sender<Result<Reply, SwitchError>>>,
    ) -> Option<SwitchError> {
        while let Some(event) = session.poll_event() {
            match event {
                Event::Ready(features) => {
                    self.generation += 1;
                    tracing::info!(
                        endpoint = %self.config.endpoint,
                        datapath_id = format_args!("{:016x}", features.datapath_id),
                        generation = self.generation,
                        "switch connected"
                    );
                    self.state_tx.send_replace(ConnState::Connected {
                        generation: self.generation,
                        datapath_id: features.datapath_id,
                    });
                }
                Event::Closed(reason) => return Some(reason),
                Event::Completed { id, result } => {
                    if let Some(waiter) = waiters.remove(&id) {
                        let _ = waiter.send(result);
                    }
                }
                Event::PacketIn2(pi) => {
                    if self.pi_tx.try_send(pi).is_err() {
                        self.counters.packet_ins_dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Event::PacketIn(_) => {
                    tracing::debug!("standard OFPT_PACKET_IN ignored (NXT_PACKET_IN2 expected)");
                }
                Event::EchoAnswered { .. } => {}
                Event::UnsolicitedError { xid, error } => {
                    tracing::warn!(xid, %error, "error from the switch for no request in flight");
                }
                Event::Malformed { xid, reason, packet_in } => {
                    let c = &self.counters;
                    let (seen, warning) = if packet_in {
                        (&c.packet_ins_malformed, &mut self.packet_ins_malformed_warning)
                    } else {
                        (&c.other_malformed, &mut self.other_malformed_warning)
                    };
                    let total = seen.fetch_add(1, Ordering::Relaxed) + 1;
                    warning.total(
                        total,
                        |n| tracing::warn!(xid, %reason, packet_in, "undecodable message from the switch ({n} so far)"),
                    );
                }
                Event::FlowsChangedElsewhere(updates) => {
                    tracing::warn!("flow tables changed behind npagent's back: {}", describe_updates(&updates));
                    self.report_drift();
                }
                Event::FlowMonitorRefused(error) => {
                    tracing::warn!(
                        %error,
                        every = ?self.config.drift_poll_interval,
                        "the switch refused the flow monitor: flows changed by others are found by a periodic dump instead"
                    );
                    self.monitor_refused = true;
                }
                Event::Unhandled(msg) => {
                    tracing::trace!(xid = msg.xid, "unhandled message from the switch");
                }
            }
        }
        None
    }

    fn report_drift(&self) {
        self.drift_tx.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A short summary of flow monitor updates for the log: the first few, then a count.
fn describe_updates(updates: &[FlowUpdate]) -> String {
    use ofp::flow_monitor::event;
    const SHOWN: usize = 4;
    if updates.is_empty() {
        return "an update that could not be decoded".to_string();
    }
    let mut parts: Vec<String> = updates
        .iter()
        .take(SHOWN)
        .map(|u| match u {
            FlowUpdate::Full(f) => {
                let what = match f.event {
                    event::ADDED => "added",
                    event::REMOVED => "removed",
                    event::MODIFIED => "modified",
                    event::INITIAL => "present",
                    _ => "changed",
                };
                format!("{what} table={} priority={} cookie={:#x}", f.table_id, f.priority, f.cookie)
            }
            FlowUpdate::Paused => "reports paused (switch out of buffer)".to_string(),
            FlowUpdate::Resumed => "reports resumed".to_string(),
            FlowUpdate::Abbrev { xid } => format!("own request {xid:#x}"),
            FlowUpdate::Unknown { event, .. } => format!("unknown event {event}"),
        })
        .collect();
    if updates.len() > SHOWN {
        parts.push(format!("and {} more", updates.len() - SHOWN));
    }
    parts.join("; ")
}

fn lost(reason: SwitchError) -> End {
    End::Lost { reason, ready: false }
}

fn submit(
    session: &mut Session,
    waiters: &mut HashMap<RequestId, oneshot::Sender<Result<Reply, SwitchError>>>,
    cmd: Command,
) {
    let submitted = match cmd.op {
        Op::Barrier => session.barrier(),
        Op::Send(payload) => session.send(payload),
        Op::DumpFlows(table, filter) => session.dump_flows(table, filter),
        Op::MeterStats(meter_id) => session.meter_stats(meter_id),
        Op::Install(flows) => session.install(flows),
    };
    match submitted {
        Ok(id) => {
            waiters.insert(id, cmd.reply);
        }
        Err(e) => {
            let _ = cmd.reply.send(Err(e));
        }
    }
}
