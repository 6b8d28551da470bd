//! Shed counts the agent polls, turned into gap records for the audit log (see
//! [`crate::audit::gap`]).

use super::meters::{shed_owner, MeterShed};
use crate::audit::gap::{Gap, GapCause};
use crate::audit::AuditStats;
use crate::compiler::userdata::Disposition;
use crate::model::ObjectRef;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Turns the shed counts the agent polls (the switch's logging meters every 10 s, its own
/// connection every tick) into gap records for the audit log.
pub struct ShedPolls {
    audit: Arc<AuditStats>,
    last_meter_poll: Option<Instant>,
    /// The meters' counts and when they were read; `None` until the baseline is known.
    meter: Option<(MeterShed, SystemTime)>,
    connection: (u64, SystemTime),
}

impl ShedPolls {
    const METER_INTERVAL: Duration = Duration::from_secs(10);

    /// Polls reporting to the audit logger's `audit` stats.
    pub fn new(audit: Arc<AuditStats>) -> ShedPolls {
        ShedPolls { audit, last_meter_poll: None, meter: None, connection: (0, SystemTime::now()) }
    }

    /// The meter's count when the agent installed it: where its gaps start (only the first
    /// one counts; later reads on reconnection would hide sheds since the last poll).
    pub fn meter_baseline(&mut self, baseline: Option<(MeterShed, SystemTime)>) {
        if self.meter.is_none() {
            self.meter = baseline;
        }
    }

    /// Whether the meter is to be read now.
    pub fn meter_due(&mut self) -> bool {
        let due = self.meter.is_some() && self.last_meter_poll.is_none_or(|t| t.elapsed() >= Self::METER_INTERVAL);
        if due {
            self.last_meter_poll = Some(Instant::now());
        }
        due
    }

    /// The meters' counts were read (`None`: they could not be); `pod_on` names the pod on an
    /// ofport.
    pub fn meter_polled(&mut self, total: Option<MeterShed>, pod_on: impl Fn(u32) -> Option<ObjectRef>) {
        let Some(total) = total else { return };
        let now = SystemTime::now();
        if let Some((before, since)) = &self.meter {
            for (id, &t) in &total {
                let Some((disposition, ofport)) = shed_owner(*id) else { continue };
                // A meter new since (a new pod's) starts at zero; a switch restart resets all.
                let b = before.get(id).copied().unwrap_or(0);
                let shed = if t >= b { t - b } else { t };
                self.report(GapCause::Meter, disposition, ofport.and_then(&pod_on), shed, *since, now);
            }
        }
        self.meter = Some((total, now));
    }

    /// The connection's count of shed packet-ins.
    pub fn connection_polled(&mut self, total: u64) {
        let now = SystemTime::now();
        let (before, since) = self.connection;
        self.report(GapCause::Connection, None, None, total.saturating_sub(before), since, now);
        self.connection = (total, now);
    }

    fn report(
        &self,
        cause: GapCause,
        disposition: Option<Disposition>,
        pod: Option<ObjectRef>,
        shed: u64,
        from: SystemTime,
        to: SystemTime,
    ) {
        let gap = Gap { cause, direction: None, disposition, pod, shed, from, to };
        self.audit.reported_gaps.report(gap);
    }
}
