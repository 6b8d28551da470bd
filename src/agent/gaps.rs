//! Counting what was shed on the way to the audit log, in one place: the switch's logging
//! meters (read every 10 s) and the switch connection's packet-in queue (every tick). Each
//! poll becomes gap records for the audit log (see [`crate::audit::gap`]; the audit logger's
//! own queue counts its sheds itself), metrics and rate-limited warnings.
//!
//! The meters' gaps start at their [`Baseline`], which the reconciler takes at its first
//! resync; the polls read the meters themselves, and the pods on their ports from the store.

use super::meters::{self, Baseline, MeterRates, MeterShed};
use super::{AgentConfig, RateLimitedWarning, State};
use crate::admin::metrics::AgentMetrics;
use crate::audit::gap::{Gap, GapCause};
use crate::audit::GapInbox;
use crate::compiler::meters::{owner, MeterKind, MeterOwner};
use crate::compiler::userdata::Disposition;
use crate::model::ObjectRef;
use crate::switch::{ConnState, SwitchHandle};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// Polls the shed counts (the switch's logging meters every 10 s, its connection every tick)
/// and turns them into gap records, metrics and warnings.
pub struct ShedPolls {
    switch: SwitchHandle,
    /// Where the meters' pods are looked up.
    state: Arc<RwLock<State>>,
    audit: GapInbox,
    metrics: Arc<AgentMetrics>,
    /// The meters' rates (for the warning).
    meter_rates: MeterRates,
    last_meter_poll: Option<Instant>,
    meter_baseline: Baseline,
    /// The meters' counts and when they were read; `None` until the baseline is known.
    meter: Option<(MeterShed, SystemTime)>,
    connection: (u64, SystemTime),
    meter_warning: RateLimitedWarning,
    connection_warning: RateLimitedWarning,
}

impl ShedPolls {
    const METER_INTERVAL: Duration = Duration::from_secs(10);
    /// How long the last meter read at shutdown may take: the switch may be gone.
    const LAST_METER_READ: Duration = Duration::from_millis(250);

    /// Polls of `switch`, its meters' gaps from `meter_baseline` on, sending gaps to the audit
    /// logger's inbox `audit`.
    pub fn new(
        cfg: &AgentConfig,
        switch: SwitchHandle,
        meter_baseline: Baseline,
        state: Arc<RwLock<State>>,
        audit: GapInbox,
        metrics: Arc<AgentMetrics>,
    ) -> Self {
        ShedPolls {
            switch,
            state,
            audit,
            metrics,
            meter_rates: cfg.meter_rates(),
            last_meter_poll: None,
            meter_baseline,
            meter: None,
            connection: (0, SystemTime::now()),
            meter_warning: RateLimitedWarning::default(),
            connection_warning: RateLimitedWarning::default(),
        }
    }

    /// One tick: the meters when due (a request to the switch), then the connection's count
    /// and the packet-in metrics.
    pub async fn poll(&mut self) {
        self.start_from_baseline();
        if self.meter_due() {
            let total = self.read_meters().await;
            self.meter_polled(total);
        }
        let dropped = self.switch.packet_in_dropped();
        self.connection_polled(dropped);
        self.metrics.packet_in_dropped_by_connection.store(dropped, Ordering::Relaxed);
        self.metrics.packet_in_malformed.store(self.switch.packet_in_malformed(), Ordering::Relaxed);
        self.connection_warning.total(dropped, |n| {
            tracing::warn!("{n} packet-ins shed so far: npagent's packet-in queue was full (see npagent_audit_shed_by_queue_total)")
        });
    }

    /// At shutdown: the sheds since the last polls still become gap records.
    pub async fn poll_last(&mut self) {
        self.start_from_baseline();
        if let Ok(total) = tokio::time::timeout(Self::LAST_METER_READ, self.read_meters()).await {
            self.meter_polled(total);
        }
        self.connection_polled(self.switch.packet_in_dropped());
    }

    /// Starts the meters' counts at their baseline once it is known: where their gaps start.
    fn start_from_baseline(&mut self) {
        if self.meter.is_none() {
            self.meter = self.meter_baseline.get();
        }
    }

    /// Whether the meters are to be read now.
    fn meter_due(&mut self) -> bool {
        let due = self.meter.is_some() && self.last_meter_poll.is_none_or(|t| t.elapsed() >= Self::METER_INTERVAL);
        if due {
            self.last_meter_poll = Some(Instant::now());
        }
        due
    }

    /// Reads how many logging packets the meters dropped (the switch's counts, `None` if they
    /// could not be read) into the metrics; warns at most once a minute.
    async fn read_meters(&mut self) -> Option<MeterShed> {
        if !matches!(self.switch.state(), ConnState::Connected { .. }) {
            return None;
        }
        let shed = meters::read_shed(&self.switch).await.ok()?;
        let by_kind = shed_by_kind(&shed);
        self.metrics.shed_by_meter.store(by_kind);
        let MeterRates { allow, drop, staged } = self.meter_rates;
        self.meter_warning.total(by_kind.iter().sum(), |n| {
            let which = MeterKind::ALL
                .iter()
                .zip(by_kind)
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| format!("{} {n}", k.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            tracing::warn!(
                "the logging meters ({allow} Allow, {drop} Drop, {drop} security and {staged} staged packets/s per pod) dropped {n} packet-ins so far ({which}): audit entries were shed (see npagent_audit_shed_by_meter_total and the gap records)"
            )
        });
        Some(shed)
    }

    /// The meters' counts were read (`None`: they could not be); the gap of a pod's meter
    /// names the pod on its ofport, and its cause the kind of meter.
    fn meter_polled(&mut self, total: Option<MeterShed>) {
        let Some(total) = total else { return };
        let now = SystemTime::now();
        if let Some((before, since)) = &self.meter {
            for (id, &t) in &total {
                let Some(owner) = owner(*id) else { continue };
                let (cause, disposition) = meter_gap(owner);
                let pod = match owner {
                    MeterOwner::Pod { ofport, .. } => self.pod_on(ofport),
                    MeterOwner::Node => None,
                };
                // A meter new since (a new pod's) starts at zero; a switch restart resets all.
                let b = before.get(id).copied().unwrap_or(0);
                let shed = if t >= b { t - b } else { t };
                self.report(cause, disposition, pod, shed, *since, now);
            }
        }
        self.meter = Some((total, now));
    }

    /// The pod on bridge port `ofport`, if any.
    fn pod_on(&self, ofport: u32) -> Option<ObjectRef> {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        state.store.model().ports.get(&ofport).map(|p| p.pod.clone())
    }

    /// The connection's count of shed packet-ins.
    fn connection_polled(&mut self, total: u64) {
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
        self.audit.send(gap);
    }
}

/// What a meter's gap record says shed: the cause names the kind of meter (a pod's Allow
/// and Drop meters are `meter`, with the disposition, as they always were), and the
/// disposition is the copies' where one meter carries only one (the staged meters carry
/// both staged dispositions).
fn meter_gap(owner: MeterOwner) -> (GapCause, Option<Disposition>) {
    match owner.kind() {
        MeterKind::Allow => (GapCause::Meter, Some(Disposition::Allow)),
        MeterKind::Drop => (GapCause::Meter, Some(Disposition::Drop)),
        MeterKind::Security => (GapCause::SecurityMeter, Some(Disposition::Drop)),
        MeterKind::Staged => (GapCause::StagedMeter, None),
    }
}

/// The switch's shed counts summed by kind of meter, in the order of [`MeterKind::ALL`].
fn shed_by_kind(shed: &MeterShed) -> [u64; MeterKind::ALL.len()] {
    let mut out = [0u64; MeterKind::ALL.len()];
    for (id, n) in shed {
        if let Some(slot) = owner(*id).and_then(|o| out.get_mut(o.kind().index())) {
            *slot = slot.saturating_add(*n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::meters::{pod, NODE_SECURITY};

    #[test]
    fn a_meters_gap_names_its_kind() {
        let of = |kind| MeterOwner::Pod { kind, ofport: 5 };
        assert_eq!(meter_gap(of(MeterKind::Allow)), (GapCause::Meter, Some(Disposition::Allow)));
        assert_eq!(meter_gap(of(MeterKind::Drop)), (GapCause::Meter, Some(Disposition::Drop)));
        assert_eq!(meter_gap(of(MeterKind::Security)), (GapCause::SecurityMeter, Some(Disposition::Drop)));
        assert_eq!(meter_gap(MeterOwner::Node), (GapCause::SecurityMeter, Some(Disposition::Drop)));
        assert_eq!(meter_gap(of(MeterKind::Staged)), (GapCause::StagedMeter, None));
    }

    #[test]
    fn shed_counts_add_up_by_kind_of_meter() {
        let shed = MeterShed::from([
            (pod(MeterKind::Allow, 1), 1),
            (pod(MeterKind::Allow, 2), 2),
            (pod(MeterKind::Drop, 1), 10),
            (pod(MeterKind::Security, 1), 100),
            (NODE_SECURITY, 200),
            (pod(MeterKind::Staged, 1), 1000),
            // Retired (an earlier version's staged meter) or not npagent's: not counted.
            (4, 3),
            (7, 5),
        ]);
        assert_eq!(shed_by_kind(&shed), [3, 10, 300, 1000]);
    }
}
