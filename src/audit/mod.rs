//! Audit logging: packet-ins from logging flows become lines of an Antrea-compatible np.log.
//!
//! ```text
//! PacketIn2 --(bounded mpsc)--> decode (packet) --> resolve (entry, RuleResolver)
//!           --> dedup (Allow at once, others aggregated per window) --> format --> writer (rotation)
//! ```
//!
//! [`Pipeline`] is the synchronous core (time is an input); [`AuditLogger`] runs it as a tokio
//! task fed by [`AuditSender::submit`], with a periodic tick that closes dedup windows and
//! flushes the file. Nothing here can stop enforcement: a packet-in that does not decode is
//! counted and logged at debug level, a write error is reported and retried.

pub(crate) mod args;
pub mod chain;
pub(crate) mod changes;
pub mod dedup;
pub mod entry;
pub mod format;
pub(crate) mod gap;
pub mod log_files;
pub mod packet;
pub mod staged_report;
pub mod timefmt;
pub(crate) mod verdicts;
pub mod writer;

pub use args::AuditArgs;
pub use dedup::{Dedup, Moment, Record};
pub use entry::{entry_from_packet_in, AuditEntry, Direction, LineDisposition, PolicyRef, RuleMeta, RuleResolver};
pub use format::{Format, Formatter};
pub use gap::GapInbox;
pub use packet::{PacketError, PacketInfo};
pub use writer::{RotatingWriter, WriteError, WriterConfig};

use crate::compiler::userdata::UserdataError;
use crate::rate_limited::RateLimitedWarning;
use ofp::packet_in2::PacketIn2;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Why a packet-in did not become an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    #[error("packet-in carries no userdata")]
    NoUserdata,
    #[error("packet-in userdata: {0}")]
    Userdata(#[from] UserdataError),
    #[error("packet-in frame: {0}")]
    Packet(#[from] PacketError),
    #[error("no rule known for conjunction id {0}")]
    UnknownRule(u32),
    /// A `WouldAllow` whose staged rule is unknown (its staged policy deleted beyond the grace
    /// period, or the staged view not compiled).
    #[error("no staged rule known for staged conjunction id {0}")]
    UnknownStagedRule(u32),
    #[error("packet-in from table {0}, which holds no logging flows of npagent's")]
    UnknownTable(u8),
    #[error("security event {0} is unknown")]
    UnknownSecurityEvent(u32),
}

/// Counters for the metrics endpoint. All monotonic.
#[derive(Debug, Default)]
pub struct AuditStats {
    /// Packet-ins handed to [`AuditSender::submit`], shed ones included.
    pub packet_ins: AtomicU64,
    /// Packet-ins that became entries.
    pub decoded: AtomicU64,
    /// Packet-ins without valid userdata or with a frame that does not decode.
    pub undecodable: AtomicU64,
    /// Packet-ins whose Allow rule or staged rule is unknown (deleted beyond the grace period).
    pub unresolved: AtomicU64,
    /// Lines handed to the writer.
    pub entries_written: AtomicU64,
    /// Failed attempts to write the file.
    pub write_errors: AtomicU64,
    /// Lines thrown away because the file could not be written for too long.
    pub lines_discarded: AtomicU64,
    /// Packet-ins dropped because the queue was full (or the logger had stopped).
    pub shed_by_queue: AtomicU64,
    /// The same, by direction and disposition (for gap records).
    pub(crate) shed_by_queue_kind: gap::ShedCounters,
    /// Gap records written (with `--audit-chain`).
    pub(crate) gap_records: AtomicU64,
    /// Staged verdicts resolved, by staged policy and disposition.
    pub(crate) staged_verdicts: verdicts::StagedVerdicts,
}

/// A copy of [`AuditStats`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub packet_ins: u64,
    pub decoded: u64,
    pub undecodable: u64,
    pub unresolved: u64,
    pub entries_written: u64,
    pub write_errors: u64,
    pub lines_discarded: u64,
    pub shed_by_queue: u64,
}

impl AuditStats {
    /// Reads every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            packet_ins: r(&self.packet_ins),
            decoded: r(&self.decoded),
            undecodable: r(&self.undecodable),
            unresolved: r(&self.unresolved),
            entries_written: r(&self.entries_written),
            write_errors: r(&self.write_errors),
            lines_discarded: r(&self.lines_discarded),
            shed_by_queue: r(&self.shed_by_queue),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Where formatted lines go.
pub trait LineSink {
    /// Takes one line, newline included.
    fn write_line(&mut self, line: &[u8]) -> Result<(), WriteError>;
    /// Pushes buffered lines out.
    fn flush(&mut self) -> Result<(), WriteError>;
    /// Flushes and makes the data durable.
    fn flush_and_sync(&mut self) -> Result<(), WriteError> {
        self.flush()
    }
    /// Lines thrown away so far.
    fn discarded(&self) -> u64 {
        0
    }
}

impl LineSink for RotatingWriter {
    fn write_line(&mut self, line: &[u8]) -> Result<(), WriteError> {
        RotatingWriter::write_line(self, line)
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        RotatingWriter::flush(self)
    }
    fn flush_and_sync(&mut self) -> Result<(), WriteError> {
        let r = RotatingWriter::flush_and_sync(self);
        self.wait_for_maintenance();
        r
    }
    fn discarded(&self) -> u64 {
        RotatingWriter::discarded(self)
    }
}

/// Lines kept in memory (tests, tools).
impl LineSink for Vec<u8> {
    fn write_line(&mut self, line: &[u8]) -> Result<(), WriteError> {
        self.extend_from_slice(line);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        Ok(())
    }
}

/// Lines thrown away (benchmarks).
impl LineSink for std::io::Sink {
    fn write_line(&mut self, _: &[u8]) -> Result<(), WriteError> {
        Ok(())
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        Ok(())
    }
}

/// Everything the audit logger needs besides the resolver.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    pub format: Format,
    /// Node name (JSON lines).
    pub node: String,
    /// Aggregation window for non-Allow entries; zero writes every entry at once.
    pub dedup_window: Duration,
    /// Bound on pending aggregates.
    pub max_pending_aggregates: usize,
    pub writer: WriterConfig,
    /// Capacity of the packet-in queue.
    pub queue_capacity: usize,
    /// How often windows are checked and the file flushed.
    pub tick: Duration,
    /// Keep a hash chain sidecar next to every log file (`--audit-chain`).
    pub chain: bool,
    /// Where policy changes are logged (`--audit-changes-log`), if anywhere.
    pub changes_log: Option<std::path::PathBuf>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            format: Format::Antrea,
            node: String::new(),
            dedup_window: dedup::DEFAULT_WINDOW,
            max_pending_aggregates: dedup::DEFAULT_MAX_PENDING,
            writer: WriterConfig::default(),
            queue_capacity: 16_384,
            tick: Duration::from_millis(100),
            chain: false,
            changes_log: None,
        }
    }
}

struct Output<W> {
    formatter: Formatter,
    /// `Some` when gap records are written (`--audit-chain`).
    gaps: Option<gap::GapTracker>,
    /// Where gaps found outside the logger wait to be written.
    gap_inbox: GapInbox,
    sink: W,
    stats: Arc<AuditStats>,
    line: Vec<u8>,
    failing: bool,
}

impl<W: LineSink> Output<W> {
    /// Writes the gap records due at `now`.
    fn emit_gaps(&mut self, now: std::time::SystemTime) {
        let Some(tracker) = self.gaps.as_mut() else { return };
        for g in tracker.collect(&self.stats.shed_by_queue_kind, &self.gap_inbox, now) {
            self.line.clear();
            g.write(self.formatter.format, &self.formatter.node, now, &mut self.line);
            bump(&self.stats.gap_records);
            let result = self.sink.write_line(&self.line);
            self.note(&result);
        }
    }

    fn emit(&mut self, r: Record) {
        self.line.clear();
        self.formatter.write(&r, &mut self.line);
        bump(&self.stats.entries_written);
        let result = self.sink.write_line(&self.line);
        self.note(&result);
    }

    fn note(&mut self, result: &Result<(), WriteError>) {
        self.stats.lines_discarded.store(self.sink.discarded(), Ordering::Relaxed);
        match result {
            Ok(()) => {
                if self.failing {
                    tracing::info!("audit log writable again");
                }
                self.failing = false;
            }
            Err(e) => {
                bump(&self.stats.write_errors);
                if !self.failing {
                    tracing::warn!(error = %e, "audit log write failed; lines are kept (bounded) and writing is retried");
                }
                self.failing = true;
            }
        }
    }
}

/// The synchronous core: packet-in in, lines out. Time is always an argument.
pub struct Pipeline<R: ?Sized, W> {
    resolver: Arc<R>,
    dedup: Dedup,
    out: Output<W>,
}

impl<R: RuleResolver + ?Sized, W: LineSink> Pipeline<R, W> {
    /// A pipeline writing to `sink`, counting into `stats`.
    pub fn new(cfg: &AuditConfig, resolver: Arc<R>, sink: W, stats: Arc<AuditStats>) -> Self {
        Pipeline {
            resolver,
            dedup: Dedup::new(cfg.dedup_window, cfg.max_pending_aggregates),
            out: Output {
                formatter: Formatter::new(cfg.format, cfg.node.clone()),
                gaps: cfg.chain.then(|| gap::GapTracker::new(std::time::SystemTime::now())),
                gap_inbox: GapInbox::default(),
                sink,
                stats,
                line: Vec::with_capacity(512),
                failing: false,
            },
        }
    }

    /// The inbox of the gaps found outside the pipeline, written at its ticks (with
    /// `--audit-chain`).
    pub fn gap_inbox(&self) -> GapInbox {
        self.out.gap_inbox.clone()
    }

    /// Handles one packet-in received at `now`. Errors are already counted.
    pub fn handle(&mut self, pi: &PacketIn2, now: Moment) -> Result<(), AuditError> {
        let stats = &self.out.stats;
        match entry_from_packet_in(pi, &*self.resolver, now.wall) {
            Ok(entry) => {
                bump(&stats.decoded);
                stats.staged_verdicts.count(&entry);
                let out = &mut self.out;
                self.dedup.offer(entry, now.mono, &mut |r| out.emit(r));
                Ok(())
            }
            Err(e) => {
                if matches!(e, AuditError::UnknownRule(_) | AuditError::UnknownStagedRule(_)) {
                    bump(&stats.unresolved);
                } else {
                    bump(&stats.undecodable);
                }
                tracing::debug!(error = %e, "packet-in not audited");
                Err(e)
            }
        }
    }

    /// Writes the aggregates whose window ended by `now`, then the gap records due.
    pub fn tick(&mut self, now: Moment) {
        let out = &mut self.out;
        self.dedup.tick(now, &mut |r| out.emit(r));
        self.out.emit_gaps(now.wall);
    }

    /// Pushes buffered lines to the sink's file.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let r = self.out.sink.flush();
        self.out.note(&r);
        r
    }

    /// Writes every pending aggregate, then flushes and syncs (shutdown).
    pub fn shutdown(&mut self, now: Moment) -> Result<(), WriteError> {
        let out = &mut self.out;
        self.dedup.flush(now, &mut |r| out.emit(r));
        self.out.emit_gaps(now.wall);
        let r = self.out.sink.flush_and_sync();
        self.out.note(&r);
        r
    }

    /// Aggregates waiting for their window to end.
    pub fn pending(&self) -> usize {
        self.dedup.pending()
    }

    /// The sink (tests).
    pub fn sink(&self) -> &W {
        &self.out.sink
    }

    /// The sink, mutably (tests).
    pub fn sink_mut(&mut self) -> &mut W {
        &mut self.out.sink
    }
}

/// Hands packet-ins to the audit task without ever waiting: a full queue sheds and counts.
#[derive(Debug, Clone)]
pub struct AuditSender {
    tx: mpsc::Sender<PacketIn2>,
    stats: Arc<AuditStats>,
}

impl AuditSender {
    /// Queues a packet-in; `false` if it was shed (queue full, or the logger is gone).
    pub fn submit(&self, pi: PacketIn2) -> bool {
        bump(&self.stats.packet_ins);
        match self.tx.try_send(pi) {
            Ok(()) => true,
            Err(e) => {
                bump(&self.stats.shed_by_queue);
                self.stats.shed_by_queue_kind.count(&e.into_inner());
                false
            }
        }
    }

    /// Resolves once the audit task is gone (stopped, or died).
    pub(crate) async fn closed(&self) {
        self.tx.closed().await
    }
}

/// The audit logger task.
pub struct AuditLogger {
    sender: AuditSender,
    gap_inbox: GapInbox,
    stats: Arc<AuditStats>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), WriteError>>,
}

/// Most packet-ins handled between two looks at the clock and the shutdown signal.
const BATCH: usize = 1024;

impl AuditLogger {
    /// Starts the task writing to the rotating file of `cfg.writer`. Must run inside a tokio
    /// runtime. The file is opened on the first write; an error then is reported and retried.
    pub fn spawn<R>(cfg: AuditConfig, resolver: Arc<R>) -> AuditLogger
    where
        R: RuleResolver + Send + Sync + ?Sized + 'static,
    {
        let sink = if cfg.chain {
            RotatingWriter::chained(cfg.writer.clone())
        } else {
            RotatingWriter::new(cfg.writer.clone())
        };
        Self::spawn_with_sink(cfg, resolver, sink)
    }

    /// Starts the task writing to `sink`.
    pub(crate) fn spawn_with_sink<R, W>(cfg: AuditConfig, resolver: Arc<R>, sink: W) -> AuditLogger
    where
        R: RuleResolver + Send + Sync + ?Sized + 'static,
        W: LineSink + Send + 'static,
    {
        let stats = Arc::new(AuditStats::default());
        let (tx, rx) = mpsc::channel(cfg.queue_capacity.max(1));
        let (stop, stop_rx) = oneshot::channel();
        let pipeline = Pipeline::new(&cfg, resolver, sink, Arc::clone(&stats));
        let gap_inbox = pipeline.gap_inbox();
        let task = tokio::spawn(run(pipeline, rx, stop_rx, cfg.tick, Arc::clone(&stats)));
        let sender = AuditSender { tx, stats: Arc::clone(&stats) };
        AuditLogger { sender, gap_inbox, stats, stop: Some(stop), task }
    }

    /// A handle for the switch connection to submit packet-ins.
    pub fn sender(&self) -> AuditSender {
        self.sender.clone()
    }

    /// Where the agent sends the gaps it finds (meter and connection sheds): the one way a
    /// gap record from outside reaches the log.
    pub fn gap_inbox(&self) -> GapInbox {
        self.gap_inbox.clone()
    }

    /// The counters.
    pub fn stats(&self) -> Arc<AuditStats> {
        Arc::clone(&self.stats)
    }

    /// Handles what is queued, writes every pending aggregate, flushes and syncs the file.
    pub async fn shutdown(mut self) -> Result<(), WriteError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(WriteError::Write { path: Default::default(), source: std::io::Error::other(e.to_string()) }),
        }
    }
}

async fn run<R, W>(
    mut pipeline: Pipeline<R, W>,
    mut rx: mpsc::Receiver<PacketIn2>,
    mut stop: oneshot::Receiver<()>,
    tick: Duration,
    stats: Arc<AuditStats>,
) -> Result<(), WriteError>
where
    R: RuleResolver + ?Sized,
    W: LineSink,
{
    let mut ticker = tokio::time::interval(tick.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut shed_warning = RateLimitedWarning::default();
    loop {
        tokio::select! {
            biased;
            _ = &mut stop => break,
            msg = rx.recv() => {
                let Some(pi) = msg else { break };
                let _ = pipeline.handle(&pi, Moment::now());
                for _ in 1..BATCH {
                    match rx.try_recv() {
                        Ok(pi) => { let _ = pipeline.handle(&pi, Moment::now()); }
                        Err(_) => break,
                    }
                }
                if rx.is_empty() {
                    let _ = pipeline.flush();
                }
            }
            _ = ticker.tick() => {
                pipeline.tick(Moment::now());
                let _ = pipeline.flush();
                shed_warning.total_and_growth(stats.shed_by_queue.load(Ordering::Relaxed), |total, shed| {
                    tracing::warn!(shed, total, "audit queue full: packet-ins shed");
                });
            }
        }
    }
    // What was queued before the stop is audited too.
    rx.close();
    let now = Moment::now();
    while let Ok(pi) = rx.try_recv() {
        let _ = pipeline.handle(&pi, now);
    }
    pipeline.shutdown(Moment::now())
}
