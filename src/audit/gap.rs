//! Gap records: lines in the audit log itself saying that packet-ins were shed before they
//! could become entries (by the switch's logging meter, npagent's connection, or the audit
//! queue), how many, of which direction and disposition where that is known, and over which
//! interval. With them a reader can tell "nothing happened" from "npagent could not write
//! it down".
//!
//! - JSON: `{"type":"gap","time":..,"node":..,"cause":"meter","direction":null,
//!   "disposition":"Drop","pod":{"namespace":"x","pod":"a"},"shed":120,"from":..,"to":..}`;
//!   packet lines have no `type` field.
//! - Antrea formats: `<timestamp> AuditGap <cause> <direction|<nil>> <disposition|<nil>>
//!   <namespace/pod|<nil>> shed=<N> from=<RFC 3339> to=<RFC 3339>`: 8 fields after the
//!   timestamp, so Antrea's Fluentd regex (14 fields, a numeric length) never reads it as a
//!   packet.
//!
//! A meter's gap names the pod whose meter shed (each local pod has a meter of its own for
//! each kind of copy, see [`crate::compiler::meters`]: its lines, those of the connections it
//! opened) and, in its cause, the kind of meter: `meter` for a pod's Allow or Drop meter (the
//! disposition says which), `security-meter` for its security events (or, naming no pod, the
//! node's: events of packets no pod's port sent), `staged-meter` for its staged verdicts
//! (`WouldDrop` and `WouldAllow` copies, `--audit-staged-rate`; no disposition, it carries
//! both). The queues name no pod; their gaps give the direction and the disposition, staged
//! ones included.

use super::entry::{disposition_str, Direction};
use super::format::Format;
use super::timefmt::{push_go_log_timestamp, push_rfc3339_nanos, rfc3339_nanos};
use crate::compiler::userdata::{Disposition, LogUserdata};
use crate::model::ObjectRef;
use ofp::packet_in2::PacketIn2;
use serde::Serialize;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Who shed the packet-ins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum GapCause {
    /// A pod's Allow or Drop meter (copies over `--audit-allow-rate` or `--audit-drop-rate`).
    Meter,
    /// A pod's (or the node's) security events' meter (over `--audit-drop-rate`).
    SecurityMeter,
    /// A pod's staged verdicts' meter (`WouldDrop` and `WouldAllow` copies over
    /// `--audit-staged-rate`).
    StagedMeter,
    /// npagent's OpenFlow connection (its packet-in channel was full).
    Connection,
    /// The audit logger's queue was full.
    Queue,
}

impl GapCause {
    /// Lower-case name used in both layouts.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            GapCause::Meter => "meter",
            GapCause::SecurityMeter => "security-meter",
            GapCause::StagedMeter => "staged-meter",
            GapCause::Connection => "connection",
            GapCause::Queue => "queue",
        }
    }
}

/// Packet-ins shed over an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Gap {
    pub(crate) cause: GapCause,
    pub direction: Option<Direction>,
    pub disposition: Option<Disposition>,
    /// The pod whose meter shed the copies (a meter's gap; none for the node's meter).
    pub(crate) pod: Option<ObjectRef>,
    pub(crate) shed: u64,
    /// The shedding happened after `from` and no later than `to`.
    pub from: SystemTime,
    pub to: SystemTime,
}

#[derive(Serialize)]
struct JsonGap<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    time: String,
    node: &'a str,
    cause: &'static str,
    direction: Option<&'static str>,
    disposition: Option<&'static str>,
    pod: Option<JsonPod<'a>>,
    shed: u64,
    from: String,
    to: String,
}

#[derive(Serialize)]
struct JsonPod<'a> {
    namespace: &'a str,
    pod: &'a str,
}

impl Gap {
    /// Appends the gap's line in `format`, newline included, written at `now`.
    pub(crate) fn write(&self, format: Format, node: &str, now: SystemTime, out: &mut Vec<u8>) {
        let direction = self.direction.map(Direction::as_str);
        let disposition = self.disposition.map(disposition_str);
        match format {
            Format::Json => {
                let line = JsonGap {
                    kind: "gap",
                    time: rfc3339_nanos(now),
                    node,
                    cause: self.cause.as_str(),
                    direction,
                    disposition,
                    pod: self.pod.as_ref().map(|p| JsonPod { namespace: &p.namespace, pod: &p.name }),
                    shed: self.shed,
                    from: rfc3339_nanos(self.from),
                    to: rfc3339_nanos(self.to),
                };
                let _ = serde_json::to_writer(&mut *out, &line);
            }
            Format::Antrea | Format::AntreaV1 => {
                push_go_log_timestamp(out, now);
                let _ = write!(
                    out,
                    " AuditGap {} {} {} {} shed={} from=",
                    self.cause.as_str(),
                    direction.unwrap_or("<nil>"),
                    disposition.unwrap_or("<nil>"),
                    self.pod.as_ref().map_or_else(|| "<nil>".to_string(), ToString::to_string),
                    self.shed
                );
                push_rfc3339_nanos(out, self.from);
                out.extend_from_slice(b" to=");
                push_rfc3339_nanos(out, self.to);
            }
        }
        out.push(b'\n');
    }
}

/// The buckets of [`ShedCounters`]: (direction, disposition), staged verdicts included, and
/// one for packet-ins whose userdata does not say.
const BUCKETS: [(Option<Direction>, Option<Disposition>); 9] = [
    (Some(Direction::Ingress), Some(Disposition::Allow)),
    (Some(Direction::Ingress), Some(Disposition::Drop)),
    (Some(Direction::Egress), Some(Disposition::Allow)),
    (Some(Direction::Egress), Some(Disposition::Drop)),
    (Some(Direction::Ingress), Some(Disposition::WouldDrop)),
    (Some(Direction::Ingress), Some(Disposition::WouldAllow)),
    (Some(Direction::Egress), Some(Disposition::WouldDrop)),
    (Some(Direction::Egress), Some(Disposition::WouldAllow)),
    (None, None),
];

/// Packet-ins shed by the audit queue, by direction and disposition (read from their
/// userdata, which costs a few bytes' decode).
#[derive(Debug, Default)]
pub(crate) struct ShedCounters([AtomicU64; BUCKETS.len()]);

impl ShedCounters {
    /// Counts one shed packet-in.
    pub fn count(&self, pi: &PacketIn2) {
        let kind = pi.userdata.as_deref().and_then(|u| LogUserdata::decode(u).ok()).and_then(|u| {
            let direction = Direction::of_table(u.table_id)?;
            BUCKETS.iter().position(|&(d, s)| d == Some(direction) && s == Some(u.disposition))
        });
        if let Some(c) = self.0.get(kind.unwrap_or(BUCKETS.len() - 1)) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self) -> [u64; BUCKETS.len()] {
        std::array::from_fn(|i| self.0.get(i).map_or(0, |c| c.load(Ordering::Relaxed)))
    }

    /// The total so far.
    #[cfg(test)]
    fn total(&self) -> u64 {
        self.read().iter().sum()
    }
}

/// Most gaps of the inbox kept until the logger's next tick; beyond, the shed
/// counts are merged into the last one of the same cause (never dropped, never counted as
/// another shedder's: a cause not queued yet still gets a gap of its own, so at most one more
/// per cause is kept).
const MAX_REPORTED: usize = 256;

/// The audit logger's gap inbox: gaps found outside the logger (meter and connection sheds,
/// found by the agent's polls) wait here until the logger's next tick writes them, after the
/// gaps of its own queue. A handle: its clones share one inbox.
#[derive(Debug, Clone, Default)]
pub struct GapInbox(Arc<Mutex<Vec<Gap>>>);

impl GapInbox {
    /// Queues a gap for the log; a zero count is ignored.
    pub(crate) fn send(&self, gap: Gap) {
        if gap.shed == 0 {
            return;
        }
        let mut q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= MAX_REPORTED {
            if let Some(last) = q.iter_mut().rev().find(|g| g.cause == gap.cause) {
                last.shed = last.shed.saturating_add(gap.shed);
                last.from = last.from.min(gap.from);
                last.to = last.to.max(gap.to);
                if (last.direction, last.disposition) != (gap.direction, gap.disposition) {
                    last.direction = None;
                    last.disposition = None;
                }
                if last.pod != gap.pod {
                    last.pod = None;
                }
                return;
            }
        }
        q.push(gap);
    }

    fn take(&self) -> Vec<Gap> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Turns the queue's shed counts into gaps between ticks, and takes the inbox's.
#[derive(Debug)]
pub(crate) struct GapTracker {
    seen: [u64; BUCKETS.len()],
    since: SystemTime,
}

impl GapTracker {
    /// A tracker whose first interval starts at `now`.
    pub(crate) fn new(now: SystemTime) -> GapTracker {
        GapTracker { seen: [0; BUCKETS.len()], since: now }
    }

    /// The gaps to write at `now`: queue sheds since the last call, then those of `inbox`.
    pub(crate) fn collect(&mut self, queue: &ShedCounters, inbox: &GapInbox, now: SystemTime) -> Vec<Gap> {
        let counts = queue.read();
        let mut gaps = Vec::new();
        for (i, (&count, &(direction, disposition))) in counts.iter().zip(BUCKETS.iter()).enumerate() {
            let before = self.seen.get(i).copied().unwrap_or(0);
            if count > before {
                gaps.push(Gap {
                    cause: GapCause::Queue,
                    direction,
                    disposition,
                    pod: None,
                    shed: count - before,
                    from: self.since,
                    to: now,
                });
            }
        }
        self.seen = counts;
        self.since = now;
        gaps.extend(inbox.take());
        gaps
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::tables;
    use bytes::Bytes;
    use std::time::{Duration, UNIX_EPOCH};

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_688_473_862 + s)
    }

    fn pi(disposition: Disposition, table_id: u8) -> PacketIn2 {
        let ud = LogUserdata { disposition, table_id, subject: 3 };
        PacketIn2 { userdata: Some(Bytes::copy_from_slice(&ud.encode())), ..Default::default() }
    }

    #[test]
    fn lines_in_both_layouts() {
        let gap = Gap {
            cause: GapCause::Meter,
            direction: None,
            disposition: Some(Disposition::Drop),
            pod: Some(ObjectRef { namespace: "x".into(), name: "a".into() }),
            shed: 120,
            from: t(0),
            to: t(10),
        };
        let mut out = Vec::new();
        gap.write(Format::Antrea, "n1", t(10), &mut out);
        let line = String::from_utf8(out).unwrap();
        assert_eq!(
            line,
            "2023/07/04 12:31:12.000000 AuditGap meter <nil> Drop x/a shed=120 from=2023-07-04T12:31:02.000000000Z to=2023-07-04T12:31:12.000000000Z\n"
        );
        assert_eq!(line.split(' ').count(), 2 + 8, "never 14 fields after the timestamp, like a packet line");
        let mut out = Vec::new();
        gap.write(Format::Json, "n1", t(10), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["type"], "gap");
        assert_eq!(
            (v["cause"].as_str(), v["disposition"].as_str(), v["shed"].as_u64()),
            (Some("meter"), Some("Drop"), Some(120))
        );
        assert!(v["direction"].is_null());
        assert_eq!((v["pod"]["namespace"].as_str(), v["pod"]["pod"].as_str()), (Some("x"), Some("a")));
        assert_eq!(v["from"], "2023-07-04T12:31:02.000000000Z");
    }

    #[test]
    fn queue_sheds_become_gaps_by_kind_once() {
        let q = ShedCounters::default();
        let inbox = GapInbox::default();
        let mut tracker = GapTracker::new(t(0));
        assert!(tracker.collect(&q, &inbox, t(1)).is_empty());
        for _ in 0..3 {
            q.count(&pi(Disposition::Drop, tables::INGRESS_DEFAULT_RULE));
        }
        q.count(&pi(Disposition::Allow, tables::EGRESS_RULE));
        q.count(&PacketIn2::default());
        inbox.send(Gap {
            cause: GapCause::Meter,
            direction: None,
            disposition: None,
            pod: None,
            shed: 7,
            from: t(0),
            to: t(2),
        });
        inbox.send(Gap {
            cause: GapCause::Connection,
            direction: None,
            disposition: None,
            pod: None,
            shed: 0,
            from: t(0),
            to: t(2),
        });
        let gaps = tracker.collect(&q, &inbox, t(2));
        let summary: Vec<_> =
            gaps.iter().map(|g| (g.cause, g.direction, g.disposition, g.shed, g.from, g.to)).collect();
        assert_eq!(
            summary,
            vec![
                (GapCause::Queue, Some(Direction::Ingress), Some(Disposition::Drop), 3, t(1), t(2)),
                (GapCause::Queue, Some(Direction::Egress), Some(Disposition::Allow), 1, t(1), t(2)),
                (GapCause::Queue, None, None, 1, t(1), t(2)),
                (GapCause::Meter, None, None, 7, t(0), t(2)),
            ]
        );
        assert_eq!(q.total(), 5);
        assert!(tracker.collect(&q, &inbox, t(3)).is_empty(), "each shed is written once");
    }

    #[test]
    fn the_staged_meter_and_the_queues_staged_sheds_are_named() {
        let staged_meter = Gap {
            cause: GapCause::StagedMeter,
            direction: None,
            disposition: None,
            pod: None,
            shed: 40,
            from: t(0),
            to: t(10),
        };
        let mut out = Vec::new();
        staged_meter.write(Format::Antrea, "n1", t(10), &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "2023/07/04 12:31:12.000000 AuditGap staged-meter <nil> <nil> <nil> shed=40 from=2023-07-04T12:31:02.000000000Z to=2023-07-04T12:31:12.000000000Z\n"
        );
        let mut out = Vec::new();
        staged_meter.write(Format::Json, "n1", t(10), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (v["type"].as_str(), v["cause"].as_str(), v["shed"].as_u64()),
            (Some("gap"), Some("staged-meter"), Some(40))
        );
        assert!(v["disposition"].is_null() && v["direction"].is_null() && v["pod"].is_null(), "{v}");

        // The audit queue's sheds of staged copies, by direction and staged disposition.
        let q = ShedCounters::default();
        let inbox = GapInbox::default();
        let mut tracker = GapTracker::new(t(0));
        for _ in 0..2 {
            q.count(&pi(Disposition::WouldDrop, tables::STAGED_EGRESS_DEFAULT_RULE));
        }
        q.count(&pi(Disposition::WouldDrop, tables::STAGED_INGRESS_DEFAULT_RULE));
        q.count(&pi(Disposition::WouldAllow, tables::STAGED_INGRESS_RULE));
        q.count(&pi(Disposition::WouldAllow, tables::STAGED_EGRESS_RULE));
        q.count(&pi(Disposition::Drop, tables::EGRESS_DEFAULT_RULE));
        let gaps = tracker.collect(&q, &inbox, t(1));
        let summary: Vec<_> = gaps.iter().map(|g| (g.cause, g.direction, g.disposition, g.shed)).collect();
        assert_eq!(
            summary,
            vec![
                (GapCause::Queue, Some(Direction::Egress), Some(Disposition::Drop), 1),
                (GapCause::Queue, Some(Direction::Ingress), Some(Disposition::WouldDrop), 1),
                (GapCause::Queue, Some(Direction::Ingress), Some(Disposition::WouldAllow), 1),
                (GapCause::Queue, Some(Direction::Egress), Some(Disposition::WouldDrop), 2),
                (GapCause::Queue, Some(Direction::Egress), Some(Disposition::WouldAllow), 1),
            ]
        );
        let mut out = Vec::new();
        gaps[3].write(Format::Antrea, "n1", t(1), &mut out);
        let line = String::from_utf8(out).unwrap();
        assert!(line.contains(" AuditGap queue Egress WouldDrop <nil> shed=2 "), "{line}");
        assert_eq!(line.split(' ').count(), 2 + 8, "{line}");
    }

    #[test]
    fn a_pods_security_and_staged_meters_are_named_with_the_pod() {
        let gap = |cause, disposition| Gap {
            cause,
            direction: None,
            disposition,
            pod: Some(ObjectRef { namespace: "y".into(), name: "a".into() }),
            shed: 9,
            from: t(0),
            to: t(10),
        };
        for (g, want) in [
            (gap(GapCause::SecurityMeter, Some(Disposition::Drop)), " AuditGap security-meter <nil> Drop y/a shed=9 "),
            (gap(GapCause::StagedMeter, None), " AuditGap staged-meter <nil> <nil> y/a shed=9 "),
        ] {
            let mut out = Vec::new();
            g.write(Format::Antrea, "n1", t(10), &mut out);
            let line = String::from_utf8(out).unwrap();
            assert!(line.contains(want), "{line}");
            assert_eq!(line.split(' ').count(), 2 + 8, "{line}");
        }
    }

    #[test]
    fn a_flood_of_reports_is_merged_by_cause_not_lost() {
        let inbox = GapInbox::default();
        let gap = |cause, disposition, shed| Gap {
            cause,
            direction: None,
            disposition,
            pod: None,
            shed,
            from: t(0),
            to: t(1),
        };
        for _ in 0..MAX_REPORTED {
            inbox.send(gap(GapCause::Meter, Some(Disposition::Drop), 1));
        }
        // Full: the staged meter's sheds are not merged into a pod's meter's gap.
        inbox.send(gap(GapCause::StagedMeter, None, 5));
        inbox.send(gap(GapCause::Meter, Some(Disposition::Allow), 1));
        inbox.send(gap(GapCause::StagedMeter, None, 7));
        let gaps = inbox.take();
        assert_eq!(gaps.len(), MAX_REPORTED + 1);
        let staged = gaps.last().unwrap();
        assert_eq!((staged.cause, staged.disposition, staged.shed), (GapCause::StagedMeter, None, 12));
        let meter = &gaps[MAX_REPORTED - 1];
        assert_eq!((meter.cause, meter.disposition, meter.shed), (GapCause::Meter, None, 2), "mixed dispositions");
        assert_eq!(gaps.iter().map(|g| g.shed).sum::<u64>(), MAX_REPORTED as u64 + 13);
    }

    #[test]
    fn a_flood_of_reports_is_merged_not_lost() {
        let inbox = GapInbox::default();
        for i in 0..(MAX_REPORTED as u64 + 10) {
            inbox.send(Gap {
                cause: GapCause::Meter,
                direction: None,
                disposition: Some(Disposition::Drop),
                pod: None,
                shed: 1,
                from: t(i),
                to: t(i + 1),
            });
        }
        let gaps = inbox.take();
        assert_eq!(gaps.len(), MAX_REPORTED);
        assert_eq!(gaps.iter().map(|g| g.shed).sum::<u64>(), MAX_REPORTED as u64 + 10);
    }
}
