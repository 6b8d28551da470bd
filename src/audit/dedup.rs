//! Deduplication of audit entries, as Antrea's agent does it.
//!
//! Antrea (pkg/agent/controller/networkpolicy/audit_logging.go, unchanged from 1.4 to today):
//! an Allow line is printed at once. Any other line starts a one-second buffer on its first
//! occurrence and is *not* printed then; identical lines (same text, timestamp aside) within
//! the buffer only increase a count. When the buffer's timer fires, the line is printed once:
//! plain if the count is 1, else followed by ` [N packets in D]`, where D is the time from the
//! first packet to the moment of printing (Go's `time.Since`), and the line's timestamp is
//! that moment too. This module does the same, with time as an input so it is testable:
//! [`Dedup::tick`] plays the timer, and a record whose window has ended is also emitted before
//! a new packet with the same key opens the next window.
//!
//! One difference: an Allow line is printed at once as in Antrea, but identical Allow lines
//! within the window after it (the datagrams of a flow nobody answers stay `+new`, so every
//! one is copied) are aggregated like the others and printed, when the window ends, as one
//! line with their count: a flooding flow costs one line a window, not one a packet.
//!
//! Windows and spans run on the monotonic clock ([`Moment::mono`]); the wall clock only stamps
//! the lines. A wall clock stepped back (NTP, an operator) must not hold Drop lines for as
//! long as it stepped.

use super::entry::AuditEntry;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant, SystemTime};

/// Default aggregation window (Antrea's fixed one second).
pub(crate) const DEFAULT_WINDOW: Duration = Duration::from_secs(1);
/// Default bound on pending aggregates; beyond it, new distinct entries are written at once.
pub const DEFAULT_MAX_PENDING: usize = 65_536;

/// A moment as both clocks tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Moment {
    /// For the timestamps printed.
    pub wall: SystemTime,
    /// For windows and spans.
    pub mono: Instant,
}

impl Moment {
    /// The current moment.
    pub fn now() -> Moment {
        Moment { wall: SystemTime::now(), mono: Instant::now() }
    }
}

/// An entry ready to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The entry; its `time` is the first packet's.
    pub entry: AuditEntry,
    /// Packets aggregated into this record (1 for an Allow entry).
    pub count: u64,
    pub first_seen: SystemTime,
    pub last_seen: SystemTime,
    /// When the record is written: the line's timestamp.
    pub written_at: SystemTime,
    /// Time from the first packet to the write (monotonic), as Antrea's ` [N packets in D]`
    /// reports it.
    pub span: Duration,
}

impl Record {
    /// A record of one packet written when it arrived.
    pub fn single(entry: AuditEntry) -> Record {
        let t = entry.time;
        Record { entry, count: 1, first_seen: t, last_seen: t, written_at: t, span: Duration::ZERO }
    }
}

/// An entry compared and hashed on everything but its time.
#[derive(Debug, Clone)]
struct Key(AuditEntry);

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0, &other.0);
        a.table == b.table
            && a.policy == b.policy
            && a.rule_name == b.rule_name
            && a.direction == b.direction
            && a.disposition == b.disposition
            && a.priority == b.priority
            && a.applied_to == b.applied_to
            && a.src_ip == b.src_ip
            && a.dst_ip == b.dst_ip
            && a.src_port == b.src_port
            && a.dst_port == b.dst_port
            && a.protocol == b.protocol
            && a.ip_len == b.ip_len
            && a.log_label == b.log_label
            && a.isolated_by == b.isolated_by
            && a.src_pod == b.src_pod
            && a.dst_pod == b.dst_pod
            && a.via_service == b.via_service
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let e = &self.0;
        // The cheap, most distinguishing fields; equality checks the rest.
        e.src_ip.hash(h);
        e.dst_ip.hash(h);
        e.src_port.hash(h);
        e.dst_port.hash(h);
        e.protocol.hash(h);
        e.ip_len.hash(h);
        e.table.hash(h);
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    /// Packets aggregated; for an Allow window, those after the first (already written).
    count: u64,
    /// The first aggregated packet's time (for an Allow window, the first repeat's).
    first_seen: SystemTime,
    last_seen: SystemTime,
    first_mono: Instant,
    deadline: Instant,
}

/// The aggregation state. Every method takes the current time and hands finished records to
/// `out` in the order they are due.
#[derive(Debug)]
pub struct Dedup {
    window: Duration,
    max_pending: usize,
    pending: HashMap<Key, Pending>,
}

impl Dedup {
    /// A deduplicator with the given window and bound on pending aggregates.
    pub fn new(window: Duration, max_pending: usize) -> Dedup {
        Dedup { window, max_pending, pending: HashMap::new() }
    }

    /// Aggregates waiting for their window to end.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes one entry that arrived at `mono` (its `time` is the same moment on the wall clock).
    pub fn offer(&mut self, entry: AuditEntry, mono: Instant, out: &mut impl FnMut(Record)) {
        if self.window.is_zero() {
            out(Record::single(entry));
            return;
        }
        let now = Moment { wall: entry.time, mono };
        let allow = entry.disposition.written_at_once();
        let key = Key(entry);
        if let Some(p) = self.pending.get_mut(&key) {
            if mono < p.deadline {
                if p.count == 0 {
                    (p.first_seen, p.first_mono) = (now.wall, mono);
                }
                p.count += 1;
                p.last_seen = p.last_seen.max(now.wall);
                return;
            }
            // The window ended but no tick has emitted it yet: emit it now, then start anew.
            if let Some((k, p)) = self.pending.remove_entry(&key) {
                emit_finished(k, p, now, out);
            }
        }
        if self.pending.len() >= self.max_pending {
            out(Record::single(key.0));
            return;
        }
        let deadline = mono.checked_add(self.window).unwrap_or(mono);
        let count = if allow {
            // Written at once; the window counts the repeats after it.
            out(Record::single(key.0.clone()));
            0
        } else {
            1
        };
        let first_seen = now.wall;
        self.pending.insert(key, Pending { count, first_seen, last_seen: now.wall, first_mono: mono, deadline });
    }

    /// Emits every aggregate whose window has ended by `now.mono`.
    pub fn tick(&mut self, now: Moment, out: &mut impl FnMut(Record)) {
        if self.pending.is_empty() {
            return;
        }
        let due: Vec<Key> =
            self.pending.iter().filter(|(_, p)| p.deadline <= now.mono).map(|(k, _)| k.clone()).collect();
        self.emit(due, now, out);
    }

    /// Emits every pending aggregate (shutdown).
    pub fn flush(&mut self, now: Moment, out: &mut impl FnMut(Record)) {
        let all: Vec<Key> = self.pending.keys().cloned().collect();
        self.emit(all, now, out);
    }

    fn emit(&mut self, keys: Vec<Key>, now: Moment, out: &mut impl FnMut(Record)) {
        let mut due: Vec<(Key, Pending)> = keys.into_iter().filter_map(|k| self.pending.remove_entry(&k)).collect();
        due.sort_by_key(|(_, p)| p.first_mono);
        for (k, p) in due {
            emit_finished(k, p, now, out);
        }
    }
}

/// Hands on the record of a finished window, unless it is an Allow window without repeats
/// (its one line is written already).
fn emit_finished(key: Key, p: Pending, now: Moment, out: &mut impl FnMut(Record)) {
    if p.count > 0 {
        out(finish(key, p, now));
    }
}

fn finish(key: Key, p: Pending, now: Moment) -> Record {
    let first_seen = p.first_seen;
    let mut entry = key.0;
    entry.time = first_seen;
    Record {
        entry,
        count: p.count,
        first_seen,
        last_seen: p.last_seen,
        written_at: now.wall,
        span: now.mono.saturating_duration_since(p.first_mono),
    }
}
