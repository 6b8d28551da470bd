//! The logging meters on the switch: four for every local pod (its Allow copies, its Drop
//! copies, its security events, its staged verdicts) and the node's security events' meter
//! (their ids, and why a meter per pod and kind: [`crate::compiler::meters`]), kept in step
//! with the pods, and their shed counts read for the gap records and the metrics (from the
//! [`Baseline`] taken when this agent first read them).
//!
//! A meter is added before the flows that name it and deleted after them (deleting a meter
//! deletes the flows that use it).

use crate::compiler::meters::{self, MeterKind};
use crate::switch::{SwitchError, SwitchHandle};
use ofp::{meter, MeterBand, MeterMod};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

/// The logging meters count packets, with a burst, and keep statistics (their shed counts).
const METER_FLAGS: u16 = meter::FLAG_PKTPS | meter::FLAG_BURST | meter::FLAG_STATS;

/// Packets each of npagent's meters dropped, by meter id, as the switch counts them.
pub type MeterShed = BTreeMap<u32, u64>;

/// The rates of the logging meters, packets per second (burst: twice that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterRates {
    /// Allow copies per pod (`--audit-allow-rate`).
    pub allow: u32,
    /// Drop copies per pod, and security events per pod and for the node's ports
    /// (`--audit-drop-rate`).
    pub drop: u32,
    /// Staged verdicts (`WouldDrop`, `WouldAllow`) per pod (`--audit-staged-rate`).
    pub staged: u32,
}

impl MeterRates {
    /// The rate of a meter of `kind`.
    fn of(&self, kind: MeterKind) -> u32 {
        match kind {
            MeterKind::Allow => self.allow,
            MeterKind::Drop | MeterKind::Security => self.drop,
            MeterKind::Staged => self.staged,
        }
    }
}

impl MeterRates {
    /// The rates the meters are set to from the configured ones: at least one each.
    pub fn new(allow: u32, drop: u32, staged: u32) -> MeterRates {
        MeterRates { allow: allow.max(1), drop: drop.max(1), staged: staged.max(1) }
    }
}

/// The meters' shed counts when this agent first read them (at its first resync, before it
/// set any meter), and when: where this run's gap records start, for what the switch counted
/// before (an earlier run's sheds) is not this run's gap. Taken once: a read at a reconnection
/// would hide what was shed since the last poll. Shared between the reconciler, which takes it,
/// and the shed polls, which start from it.
#[derive(Debug, Clone, Default)]
pub struct Baseline(Arc<OnceLock<(MeterShed, SystemTime)>>);

impl Baseline {
    /// Takes `shed`, read just now, unless a baseline was taken before.
    fn take(&self, shed: &MeterShed) {
        self.0.get_or_init(|| (shed.clone(), SystemTime::now()));
    }

    /// The counts and when they were read; `None` until the first resync read them.
    pub fn get(&self) -> Option<(MeterShed, SystemTime)> {
        self.0.get().cloned()
    }
}

/// The meters npagent keeps on the switch.
pub struct LoggingMeters {
    rates: MeterRates,
    /// The meters on the switch as far as this connection knows.
    installed: BTreeSet<u32>,
    baseline: Baseline,
}

impl LoggingMeters {
    /// Meters at `rates` (each at least one packet per second; burst: twice that), whose first
    /// read on the switch becomes `baseline`.
    pub fn new(rates: MeterRates, baseline: Baseline) -> LoggingMeters {
        let MeterRates { allow, drop, staged } = rates;
        LoggingMeters { rates: MeterRates::new(allow, drop, staged), installed: BTreeSet::new(), baseline }
    }

    /// The shed counts of npagent's meters on the switch (see [`read_shed`]); the first read
    /// is the [`Baseline`].
    pub async fn read_on_switch(&self, switch: &SwitchHandle) -> Result<MeterShed, SwitchError> {
        let shed = read_shed(switch).await?;
        self.baseline.take(&shed);
        Ok(shed)
    }

    /// The meters the pods on `ports` need, with their rates.
    fn desired(&self, ports: &BTreeSet<u32>) -> BTreeMap<u32, u32> {
        let rates = &self.rates;
        let mut out = BTreeMap::from([(meters::NODE_SECURITY, rates.of(MeterKind::Security))]);
        for &o in ports {
            out.extend(MeterKind::ALL.map(|kind| (meters::pod(kind, o), rates.of(kind))));
        }
        out
    }

    /// Forgets what the switch holds: the next [`Self::add_missing`] sets every meter again
    /// (a new connection, or someone deleted meters behind npagent's back).
    pub fn forget(&mut self) {
        self.installed.clear();
    }

    /// Adds the meters the pods on `ports` need that this connection has not set yet (an
    /// existing one is modified to the configured rate). The requests go out together, not one
    /// round trip after another: a start with many local pods waits for one.
    pub async fn add_missing(&mut self, switch: &SwitchHandle, ports: &BTreeSet<u32>) -> Result<(), SwitchError> {
        let missing: Vec<(u32, u32)> =
            self.desired(ports).into_iter().filter(|(id, _)| !self.installed.contains(id)).collect();
        let sent = futures::future::join_all(missing.iter().map(|&(id, rate)| add_or_modify(switch, id, rate))).await;
        self.settle(missing.iter().map(|(id, _)| *id).zip(sent), |installed, id| {
            installed.insert(id);
        })
    }

    /// Deletes npagent's meters on the switch that no pod on `ports` needs (after their flows
    /// are gone): those of removed pods, and those an earlier run (or version) left.
    pub async fn remove_unused(
        &mut self,
        switch: &SwitchHandle,
        ports: &BTreeSet<u32>,
        on_switch: &MeterShed,
    ) -> Result<(), SwitchError> {
        let desired = self.desired(ports);
        let unused: BTreeSet<u32> = on_switch
            .keys()
            .chain(&self.installed)
            .copied()
            .filter(|id| meters::is_npagents(*id) && !desired.contains_key(id))
            .collect();
        let delete = |id| MeterMod { command: meter::DELETE, flags: 0, meter_id: id, bands: Vec::new() };
        let sent = futures::future::join_all(unused.iter().map(|&id| switch.meter_mod(delete(id)))).await;
        self.settle(unused.iter().copied().zip(sent), |installed, id| {
            installed.remove(&id);
        })
    }

    /// Records the meters whose request succeeded (`done`); the first failure, if any, is the
    /// outcome (the others stay as they were, for the next round to retry).
    fn settle(
        &mut self,
        outcomes: impl Iterator<Item = (u32, Result<(), SwitchError>)>,
        done: impl Fn(&mut BTreeSet<u32>, u32),
    ) -> Result<(), SwitchError> {
        let mut first_error = None;
        for (id, outcome) in outcomes {
            match outcome {
                Ok(()) => done(&mut self.installed, id),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// Adds meter `id` at `rate` (burst twice that), or modifies it to that when it exists.
async fn add_or_modify(switch: &SwitchHandle, id: u32, rate: u32) -> Result<(), SwitchError> {
    let add = MeterMod {
        command: meter::ADD,
        flags: METER_FLAGS,
        meter_id: id,
        bands: vec![MeterBand::Drop { rate, burst_size: rate.saturating_mul(2) }],
    };
    match switch.meter_mod(add.clone()).await {
        Err(SwitchError::Rejected { error, .. }) if error.is("OFPMMFC_METER_EXISTS") => {
            switch.meter_mod(MeterMod { command: meter::MODIFY, ..add }).await
        }
        outcome => outcome,
    }
}

/// How many packets each of npagent's meters on the switch dropped (retired ones included,
/// for [`LoggingMeters::remove_unused`]).
pub async fn read_shed(switch: &SwitchHandle) -> Result<MeterShed, SwitchError> {
    let stats = switch.meter_stats(meter::ALL).await?;
    Ok(stats
        .iter()
        .filter(|s| meters::is_npagents(s.meter_id))
        .map(|s| (s.meter_id, s.bands.iter().map(|(packets, _)| packets).sum()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_pod_has_a_meter_of_each_kind_at_its_rate_and_none_is_zero() {
        let m = LoggingMeters::new(MeterRates { allow: 10, drop: 20, staged: 30 }, Baseline::default());
        let mut want = BTreeMap::from([(meters::NODE_SECURITY, 20)]);
        for o in [5, 7] {
            want.insert(meters::pod(MeterKind::Allow, o), 10);
            want.insert(meters::pod(MeterKind::Drop, o), 20);
            want.insert(meters::pod(MeterKind::Security, o), 20);
            want.insert(meters::pod(MeterKind::Staged, o), 30);
        }
        assert_eq!(m.desired(&BTreeSet::from([5, 7])), want);
        let m = LoggingMeters::new(MeterRates { allow: 0, drop: 0, staged: 0 }, Baseline::default());
        assert_eq!(m.desired(&BTreeSet::new()), BTreeMap::from([(meters::NODE_SECURITY, 1)]));
        assert!(m.desired(&BTreeSet::from([3])).values().all(|r| *r == 1));
    }

    #[test]
    fn the_baseline_is_the_first_read() {
        let baseline = Baseline::default();
        assert_eq!(baseline.get(), None);
        baseline.take(&MeterShed::from([(1, 5)]));
        baseline.clone().take(&MeterShed::from([(1, 9)]));
        assert_eq!(baseline.get().map(|(shed, _)| shed), Some(MeterShed::from([(1, 5)])));
    }
}
